"""TEST STUB of `alfworld.agents.environment.alfred_tw_env`, NOT the real ALFWorld.

Written for a2rl's tests. The two TextWorld wrappers ALFWorld's text environment is built with, in
the shape of alfworld 0.3.x:
- AlfredDemangler(shuffle=False): after a game is loaded, renames its entities from their ALFRED ids
  to readable names (the stub: id "CounterTop|1" -> "countertop 1"; the real Demangler numbers
  entities of a type from ids like "CounterTop|-00.33|+00.98|-01.45");
- AlfredInfos: adds "extra.gamefile" (the loaded game's path) to the state at reset.
Both are textworld.core.Wrapper subclasses, usable as a class or an instance in `wrappers=[...]`.
"""
import textworld
import textworld.core

TASK_TYPES = {1: "pick_and_place_simple",
              2: "look_at_obj_in_light",
              3: "pick_clean_then_place_in_recep",
              4: "pick_heat_then_place_in_recep",
              5: "pick_cool_then_place_in_recep",
              6: "pick_two_obj_and_place"}


def demangle(entity_id):
    kind, _, number = entity_id.partition("|")
    return f"{kind.lower()} {number}" if number else kind.lower()


class AlfredDemangler(textworld.core.Wrapper):
    def __init__(self, *args, shuffle=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.shuffle = shuffle

    def load(self, *args, **kwargs):
        super().load(*args, **kwargs)
        for info in self._entity_infos.values():
            info.name = demangle(info.id)


class AlfredInfos(textworld.core.Wrapper):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._gamefile = None

    def load(self, *args, **kwargs):
        super().load(*args, **kwargs)
        self._gamefile = args[0]

    def reset(self, *args, **kwargs):
        state = super().reset(*args, **kwargs)
        state["extra.gamefile"] = self._gamefile
        return state
