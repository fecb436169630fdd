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
every game is an a2rl micro game, played by the micro engine at the end of this file (standard
library only; neither alfworld nor textworld is imported). The splits, their order and the answers
are the same. (One file: the confined server sees only the files its command names.)
"""
import json
import os

SPLIT_DIRS = {"train": "train", "eval": "valid_unseen"}
MICRO_MARKER = "a2rl_micro.json"


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
        self.session_class = MicroSession if os.path.isfile(os.path.join(data, MICRO_MARKER)) else AlfworldSession
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


# --- a2rl micro games ----------------------------------------------------------------------------
# Small ALFWorld-style games without TextWorld or ALFWorld (`a2rl data micro alfworld`).
#
# `a2rl data micro alfworld` writes games in ALFWorld's layout (json_2.1.1/<split>/<task dir>/<trial>/
# traj_data.json + game.tw-pddl) whose game.tw-pddl holds an "a2rl_micro" scene instead of a PDDL
# domain, problem and grammar. AlfworldBackend plays them with MicroSession when the data directory
# holds a2rl_micro.json; real ALFWorld games still go through TextWorld. The text follows ALFWorld's: the
# room description, "Your task is to: ...", "You arrive at loc N. On the countertop 1, you see a
# mug 1, and a apple 2.", "You pick up the mug 1 from the countertop 1.", "Nothing happens." and the
# same action grammar (go to, open, close, take X from Y, put X in/on Y, clean/heat/cool X with Y,
# use, examine, look, inventory). Standard library only; deterministic.
#
# Scene (JSON): {"task_type", "task", "receptacles": [{"name", "openable", "loc"}], "contents":
# {receptacle: [object, ...]}, "goal": {"object", "receptacle", "count"}}. Names are ALFWorld's
# demangled ones ("countertop 1", "apple 2"); the goal names object and receptacle types ("apple",
# "countertop").

WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
NOTHING = "Nothing happens."
TRANSFORMS = {"clean": ("sinkbasin", "clean"), "heat": ("microwave", "hot"), "cool": ("fridge", "cool")}
# Task types (ALFWorld's directory prefixes) -> the state the goal object must be in.
NEEDS = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "hot",
         "pick_cool_then_place_in_recep": "cool"}


def kind(name):
    """'countertop 1' -> 'countertop'."""
    return name.rsplit(" ", 1)[0]


def listing(items):
    """ALFWorld's enumeration: 'a mug 1', 'a mug 1, and a apple 2', 'a mug 1, a cup 2, and a apple 2'."""
    if not items:
        return "nothing"
    named = [f"a {x}" for x in items]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + ", and " + named[-1]


class MicroGame:
    def __init__(self, scene):
        self.scene = scene
        self.receptacles = [r["name"] for r in scene["receptacles"]]
        self.openable = {r["name"] for r in scene["receptacles"] if r.get("openable")}
        self.loc = {r["name"]: r["loc"] for r in scene["receptacles"]}
        self.reset()

    @classmethod
    def from_file(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f)["a2rl_micro"])

    def reset(self):
        self.contents = {r: list(self.scene["contents"].get(r, [])) for r in self.receptacles}
        self.opened = set()
        self.at = None
        self.holding = None
        self.states = {}
        self.lamp_on = set()
        self.won = False
        text = (f"You are in the middle of a room. Looking quickly around you, you see {listing(self.receptacles)}."
                f"\n\nYour task is to: {self.scene['task']}")
        return f"{WELCOME}\n\n{text}"

    # What a receptacle shows: closed, open with contents, or its surface.
    def describe(self, r):
        if kind(r) == "desklamp":
            return f"The {r} is {'on' if r in self.lamp_on else 'off'}."
        if r in self.openable:
            if r not in self.opened:
                return f"The {r} is closed."
            return f"The {r} is open. In it, you see {listing(self.contents[r])}."
        return f"On the {r}, you see {listing(self.contents[r])}."

    def admissible(self):
        acts = [f"go to {r}" for r in self.receptacles if r != self.at]
        r = self.at
        if r is not None:
            visible = (r not in self.openable or r in self.opened) and kind(r) != "desklamp"
            if r in self.openable:
                acts.append(f"close {r}" if r in self.opened else f"open {r}")
            if visible and self.holding is None:
                acts += [f"take {o} from {r}" for o in self.contents[r]]
            if visible and self.holding is not None:
                acts.append(f"put {self.holding} in/on {r}")
            if self.holding is not None:
                acts += [f"{verb} {self.holding} with {r}" for verb, (where, _) in TRANSFORMS.items() if kind(r) == where]
            if kind(r) == "desklamp":
                acts.append(f"use {r}")
            acts.append(f"examine {r}")
        acts += ["inventory", "look"]
        return sorted(acts)

    def step(self, action):
        """The observation after `action` (ALFWorld's wording); sets `won` when the task is done.
        ALFWorld 0.3's `move X to Y` is taken as ReAct's `put X in/on Y`."""
        a = " ".join(action.strip().split())
        if a.startswith("move ") and " to " in a:
            a = "put " + a[5:].replace(" to ", " in/on ", 1)
        obs = self.act(a)
        self.won = self.won or self.goal_met()
        return obs

    def act(self, a):
        if a.startswith("go to "):
            r = a[6:]
            if r not in self.loc or r == self.at:
                return NOTHING
            self.at = r
            return f"You arrive at loc {self.loc[r]}. {self.describe(r)}"
        if a == "look":
            return (f"You are facing the {self.at}. Next to it, you see nothing." if self.at
                    else f"You are in the middle of a room. Looking quickly around you, you see {listing(self.receptacles)}.")
        if a == "inventory":
            return f"You are carrying: a {self.holding}." if self.holding else "You are not carrying anything."
        r = self.at
        if r is None:
            return NOTHING
        if a == f"examine {r}":
            return self.describe(r)
        if a == f"open {r}" and r in self.openable and r not in self.opened:
            self.opened.add(r)
            return f"You open the {r}. The {r} is open. In it, you see {listing(self.contents[r])}."
        if a == f"close {r}" and r in self.opened:
            self.opened.discard(r)
            return f"You close the {r}."
        if a == f"use {r}" and kind(r) == "desklamp":
            self.lamp_on.add(r)
            return f"You turn on the {r}."
        visible = (r not in self.openable or r in self.opened) and kind(r) != "desklamp"
        if a.startswith("take ") and a.endswith(f" from {r}") and visible and self.holding is None:
            o = a[5:-len(f" from {r}")]
            if o in self.contents[r]:
                self.contents[r].remove(o)
                self.holding = o
                return f"You pick up the {o} from the {r}."
        if self.holding is not None:
            o = self.holding
            if a == f"put {o} in/on {r}" and visible:
                self.contents[r].append(o)
                self.holding = None
                return f"You put the {o} in/on the {r}."
            for verb, (where, state) in TRANSFORMS.items():
                if a == f"{verb} {o} with {r}" and kind(r) == where:
                    self.states[o] = state
                    return f"You {verb} the {o} using the {r}."
        return NOTHING

    def goal_met(self):
        goal = self.scene["goal"]
        task_type = self.scene["task_type"]
        if task_type.startswith("look_at_obj"):
            # Examine under the lamp: hold the object where a desklamp has been turned on.
            return (self.holding is not None and kind(self.holding) == goal["object"]
                    and self.at in self.lamp_on)
        need = NEEDS.get(task_type)
        placed = [o for r, objs in self.contents.items() if kind(r) == goal["receptacle"] for o in objs
                  if kind(o) == goal["object"] and (need is None or self.states.get(o) == need)]
        return len(placed) >= goal.get("count", 1)


class MicroSession:
    """An env_server session over one micro game (the same answers as env_backend.AlfworldSession)."""

    def __init__(self, gamefile, relpath, max_steps):
        self.game = MicroGame.from_file(gamefile)
        self.relpath = relpath
        self.max_steps = max_steps
        self.steps = 0

    def reset(self):
        self.steps = 0
        obs = self.game.reset()
        obs = "\n".join(obs.split("\n\n")[1:])
        return {"observation": obs, "admissible_actions": self.game.admissible(),
                "info": {"game": self.relpath, "task_type": self.relpath.split("/")[0]}}

    def step(self, action):
        self.steps += 1
        obs = self.game.step(action)
        won = self.game.won
        done = won or self.steps >= self.max_steps
        return {"observation": obs, "reward": 1.0 if won else 0.0, "done": done,
                "admissible_actions": [] if done else self.game.admissible(), "info": {"won": won}}

    def close(self):
        pass
