"""ALFWorld backend for tasks/paper-common/env_server.py (the text-only TextWorld version of ALFWorld).

Splits: `train` = the solvable games under $ALFWORLD_DATA/json_2.1.1/train, `eval` =
json_2.1.1/valid_unseen (134 games), each sorted by path; the same selection rule as the task
pack's copy of the training games (tasks/alfworld/index.ts): a trial directory holding
traj_data.json and game.tw-pddl, not a "movable" or "Sliced" task, and marked solvable.

Targets alfworld 0.3.x / textworld 1.6 (`pip install alfworld && alfworld-download`). a2rl's CI
has neither: this file is tested there against stub packages of the same API shape
(test/servers/stubs, tasks/alfworld/env-backend.spec.ts), never against the real ones.
Options: --option data=<dir> (default $ALFWORLD_DATA), --option max_steps=50.

Micro games: when the data directory holds a2rl_micro.json (written by `a2rl data micro alfworld`)
every game is an a2rl micro game, played by micro_engine.py beside this file (standard library
only; neither alfworld nor textworld is imported). The splits, their order and the answers are the same.
"""
import importlib.util
import json
import os

SPLIT_DIRS = {"train": "train", "eval": "valid_unseen"}
MICRO_MARKER = "a2rl_micro.json"


def micro_session_class():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "micro_engine.py")
    spec = importlib.util.spec_from_file_location("a2rl_alfworld_micro_engine", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MicroSession


def collect_games(root):
    games = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if "traj_data.json" not in filenames or "game.tw-pddl" not in filenames:
            continue
        if "movable" in dirpath or "Sliced" in dirpath:
            continue
        with open(os.path.join(dirpath, "game.tw-pddl"), encoding="utf-8") as f:
            if not json.load(f).get("solvable", False):
                continue
        games.append(os.path.relpath(os.path.join(dirpath, "game.tw-pddl"), root))
    return sorted(games)


def first(value):
    """TextWorld's gym environments answer in batches of one."""
    return value[0] if isinstance(value, (list, tuple)) else value


class AlfworldSession:
    def __init__(self, gamefile, relpath, max_steps):
        import textworld
        import textworld.gym
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        env_id = textworld.gym.register_games([gamefile], infos, batch_size=1, asynchronous=False,
                                              max_episode_steps=max_steps, wrappers=[AlfredDemangler(), AlfredInfos])
        self.env = textworld.gym.make(env_id)
        self.relpath = relpath

    def reset(self):
        obs, infos = self.env.reset()
        # As the paper's harness: drop the first paragraph (the welcome banner), keep the rest line by line.
        obs = "\n".join(first(obs).split("\n\n")[1:])
        task_dir = self.relpath.split("/")[0]
        return {"observation": obs, "admissible_actions": list(first(infos["admissible_commands"])),
                "info": {"game": self.relpath, "task_type": task_dir}}

    def step(self, action):
        obs, _scores, dones, infos = self.env.step([action])
        won = bool(first(infos["won"]))
        done = bool(first(dones))
        # Unstripped, as the paper's harness sees it (it only cuts "You arrive at loc N. ", in the task pack).
        return {"observation": first(obs), "reward": 1.0 if won else 0.0, "done": done or won,
                "admissible_actions": [] if done or won else list(first(infos["admissible_commands"])), "info": {"won": won}}

    def close(self):
        self.env.close()


class AlfworldBackend:
    name = "alfworld"

    def __init__(self, options):
        data = options.get("data") or os.environ.get("ALFWORLD_DATA")
        if not data:
            raise SystemExit("ALFWORLD_DATA is not set: run alfworld-download and export ALFWORLD_DATA")
        self.session_class = micro_session_class() if os.path.isfile(os.path.join(data, MICRO_MARKER)) else AlfworldSession
        if self.session_class is AlfworldSession:
            # Fail at start-up, not at the first episode: import what every session imports.
            from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos  # noqa: F401
            import textworld.gym  # noqa: F401
        self.roots = {split: os.path.join(data, "json_2.1.1", d) for split, d in SPLIT_DIRS.items()}
        for split, root in self.roots.items():
            if not os.path.isdir(root):
                raise SystemExit(f"{root} is missing ({split} split): is ALFWORLD_DATA={data} the directory alfworld-download filled?")
        self.games = {split: collect_games(root) for split, root in self.roots.items()}
        self.max_steps = int(options.get("max_steps", 50))

    def split_size(self, split):
        return len(self.games[split])

    def new_session(self, split, index):
        rel = self.games[split][index]
        return self.session_class(os.path.join(self.roots[split], rel), rel, self.max_steps)


def create_backend(options):
    return AlfworldBackend(options)
