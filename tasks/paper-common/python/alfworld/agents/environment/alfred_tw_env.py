"""alfworld.agents.environment.alfred_tw_env (a2rl drop-in).

`AlfredTWEnv(config, train_eval="train").init_env(batch_size)` returns a batch environment shaped
like TextWorld's gym environment: `reset()` -> (observations, infos), `step(actions)` ->
(observations, scores, dones, infos), each a list with one entry per game of the batch, `infos` a
dict of lists ("admissible_commands", "won", "extra.gamefile", "extra.expert_plan" when the server
gives one). Games are the run's training games (the harness's copy of `data/train/`), played
through `$GRADING_SERVER_URL/env/*`. The evaluation splits are the harness's: not reachable here.
"""
import os

from a2rl_env_client import EnvApiError, Session

BANNER = "-= Welcome to TextWorld, ALFRED! =-"
EVAL_SPLITS = ("eval_in_distribution", "eval_out_of_distribution")


class AlfredTWEnv:
    def __init__(self, config=None, train_eval="train"):
        if train_eval in EVAL_SPLITS:
            raise EnvApiError(f"train_eval={train_eval!r}: the evaluation games are held out by the a2rl harness; "
                              "train on train_eval='train' and submit checkpoints to be graded")
        if train_eval != "train":
            raise ValueError(f"unknown train_eval {train_eval!r}")
        self.config = config or {}
        self.train_eval = train_eval

    def init_env(self, batch_size=1):
        return BatchEnv(int(batch_size), _first_seed(self.config))


class _Unserved:
    def __init__(self, *args, **kwargs):
        raise EnvApiError(f"{type(self).__name__} (the THOR simulator) is not served by the a2rl harness: use AlfredTWEnv")


class AlfredThorEnv(_Unserved):
    pass


class AlfredHybrid(_Unserved):
    pass


def _first_seed(config):
    general = config.get("general") if isinstance(config, dict) else None
    seed = general.get("random_seed") if isinstance(general, dict) else None
    return None if seed is None else int(seed)


class BatchEnv:
    """`batch_size` games at a time; a finished game keeps answering its last state until the next reset."""

    def __init__(self, batch_size, seed=None):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = batch_size
        self.next_seed = seed
        self.sessions = []

    def seed(self, seed=None):
        self.next_seed = None if seed is None else int(seed)
        return [seed]

    def _new_session(self):
        seed = self.next_seed
        if seed is not None:
            self.next_seed = seed + 1
        return Session(seed)

    def reset(self):
        self.sessions = [self._new_session() for _ in range(self.batch_size)]
        states = [s.reset() for s in self.sessions]
        return [f"{BANNER}\n\n{s['observation']}" for s in states], _infos(states)

    def step(self, actions):
        if len(actions) != len(self.sessions):
            raise ValueError(f"{len(actions)} actions for a batch of {len(self.sessions)} games")
        # The game's reset facts (its file, task type) hold for every step, as in TextWorld's infos.
        states = [{**st, "info": {**s.first_info, **st["info"]}} for s, st in ((s, s.step(a)) for s, a in zip(self.sessions, actions))]
        return [s["observation"] for s in states], [s["reward"] for s in states], [s["done"] for s in states], _infos(states)

    def close(self):
        self.sessions = []


def _gamefile(info):
    game = info.get("game")
    if not isinstance(game, str):
        return None
    data = os.environ.get("DATA_PATH")
    return game if os.path.isabs(game) or not data else os.path.join(data, "train", game)


def _infos(states):
    infos = {
        "admissible_commands": [list(s["admissible_actions"]) for s in states],
        "won": [bool(s["info"].get("won", False)) for s in states],
        "extra.gamefile": [_gamefile(s["info"]) for s in states],
    }
    if any("expert_plan" in s["info"] for s in states):
        infos["extra.expert_plan"] = [s["info"].get("expert_plan", []) for s in states]
    for key in sorted({k for s in states for k in s["info"]} - {"won", "game", "expert_plan"}):
        infos.setdefault(key, [s["info"].get(key) for s in states])
    return infos
