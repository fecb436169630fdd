"""TEST STUB of TextWorld's PDDL engine (`textworld.envs.pddl.PddlEnv`), NOT the real TextWorld.

Written for a2rl's tests. The real engine plans over the PDDL domain/problem/grammar stored in an
ALFWorld `game.tw-pddl`; this stub instead plays a tiny pick-and-place household described under the
stub-only key "a2rl_stub_scene" of that JSON file:

    {"receptacles": ["Cabinet|1", "CounterTop|1", ...],   # ids "<Type>|<n>", listed in this order
     "openable": ["Cabinet|1"],                           # closed at the start
     "contents": {"CounterTop|1": ["Mug|1"]},
     "task": "put some mug on coffeemachine.",
     "goal": {"object": "Mug", "receptacle": "CoffeeMachine"}}

Entities are named by their ids until a wrapper renames them (ALFWorld's AlfredDemangler). Texts and
commands follow ALFWorld's grammar (alfred.twl2): the "-= Welcome to TextWorld, ALFRED! =-" intro,
"go to", "open", "close", "take X from Y", "move X to Y", "examine", "inventory", "look", "help";
admissible commands are sorted; anything else answers "Nothing happens."; score is 1 once won, and
done = won (a stub game is never lost).
"""
import json
from functools import partial

from textworld.core import Environment, GameState

BANNER = "-= Welcome to TextWorld, ALFRED! =-"
HELP = ("\nAvailable commands:\n  look:                             look around your current location\n"
        "  inventory:                        check your current inventory\n"
        "  go to (receptacle):               move to a receptacle\n"
        "  open (receptacle):                open a receptacle\n"
        "  close (receptacle):               close a receptacle\n"
        "  take (object) from (receptacle):  take an object from a receptacle\n"
        "  move (object) to (receptacle):    place an object in or on a receptacle\n"
        "  examine (something):              examine a receptacle or an object\n")


class EntityInfo:
    def __init__(self, entity_id, entity_type):
        self.id = entity_id
        self.type = entity_type
        self.name = entity_id


class PddlEnv(Environment):
    def load(self, path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        scene = data.get("a2rl_stub_scene")
        if not isinstance(scene, dict):
            raise ValueError(f"textworld stub: {path} has no a2rl_stub_scene (the stub cannot play real PDDL games)")
        self._game_file = path
        self._scene = scene
        objects = [o for contents in scene.get("contents", {}).values() for o in contents]
        self._entity_infos = {i: EntityInfo(i, i.split("|")[0]) for i in list(scene["receptacles"]) + objects}

    # -- texts ---------------------------------------------------------------------------------
    def _name(self, entity_id):
        info = self._entity_infos[entity_id]
        return info.name or info.id

    def _listing(self, ids):
        names = [f"a {self._name(i)}" for i in ids]
        if not names:
            return "nothing"
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + ", and " + names[-1]

    def _describe(self, r):
        if r in self._scene.get("openable", []):
            if r not in self._opened:
                return f"The {self._name(r)} is closed."
            return f"The {self._name(r)} is open. In it, you see {self._listing(self._contents[r])}."
        return f"On the {self._name(r)}, you see {self._listing(self._contents[r])}."

    def _look(self):
        if self._location is None:
            return f"You are in the middle of a room. Looking quickly around you, you see {self._listing(self._scene['receptacles'])}."
        return f"You are facing the {self._name(self._location)}. Next to it, you see nothing."

    # -- actions -------------------------------------------------------------------------------
    def _go(self, r):
        self._location = r
        return f"You arrive at {self._name(r)}. {self._describe(r)}"

    def _open(self, r):
        self._opened.add(r)
        return f"You open the {self._name(r)}. {self._describe(r)}"

    def _close(self, r):
        self._opened.discard(r)
        return f"You close the {self._name(r)}."

    def _take(self, o, r):
        self._contents[r].remove(o)
        self._holding = o
        return f"You pick up the {self._name(o)} from the {self._name(r)}."

    def _move(self, o, r):
        self._contents[r].append(o)
        self._holding = None
        return f"You move the {self._name(o)} to the {self._name(r)}."

    def _inventory(self):
        return f"You are carrying: a {self._name(self._holding)}." if self._holding else "You are not carrying anything."

    def _actions(self):
        """Every admissible command in the current state, with what it does."""
        n = self._name
        actions = {"look": self._look, "inventory": self._inventory, "help": lambda: HELP}
        for r in self._scene["receptacles"]:
            if r != self._location:
                actions[f"go to {n(r)}"] = partial(self._go, r)
        here = self._location
        if here is not None:
            actions[f"examine {n(here)}"] = partial(self._describe, here)
            openable = here in self._scene.get("openable", [])
            if openable and here in self._opened:
                actions[f"close {n(here)}"] = partial(self._close, here)
            elif openable:
                actions[f"open {n(here)}"] = partial(self._open, here)
            if not openable or here in self._opened:
                if self._holding is None:
                    for o in self._contents[here]:
                        actions[f"take {n(o)} from {n(here)}"] = partial(self._take, o, here)
                else:
                    actions[f"move {n(self._holding)} to {n(here)}"] = partial(self._move, self._holding, here)
        if self._holding is not None:
            held = self._holding
            actions[f"examine {n(held)}"] = lambda: f"There's nothing special about {n(held)}."
        return actions

    def _won(self):
        goal = self._scene["goal"]
        kind = lambda i: i.split("|")[0].lower()  # noqa: E731
        return any(kind(o) == goal["object"].lower()
                   for r, contents in self._contents.items() if kind(r) == goal["receptacle"].lower() for o in contents)

    def _gather(self):
        self.state["won"] = self._won()
        self.state["lost"] = False
        self.state["admissible_commands"] = sorted(self._actions())
        self.state["moves"] = self._moves

    # -- Environment ---------------------------------------------------------------------------
    def reset(self):
        scene = self._scene
        self._location = None
        self._holding = None
        self._opened = set()
        self._contents = {r: list(scene.get("contents", {}).get(r, [])) for r in scene["receptacles"]}
        self._moves = 0
        self.state = GameState()
        self.state["feedback"] = f"{BANNER}\n\n{self._look()}\n\nYour task is to: {scene['task']}"
        self._gather()
        return self.state

    def step(self, command):
        command = command.strip()
        actions = self._actions()
        self.state = GameState()
        self.state["last_command"] = command
        if command in actions:
            self.state["feedback"] = actions[command]()
            self._moves += 1
        else:
            self.state["feedback"] = "Nothing happens."
        self._gather()
        self.state["score"] = 1 if self.state["won"] else 0
        self.state["done"] = self.state["won"] or self.state["lost"]
        return self.state, self.state["score"], self.state["done"]
