"""TEST STUB of `textworld.core` (EnvInfos, GameState, Environment, Wrapper), NOT the real TextWorld.

Written for a2rl's tests. Shapes as in TextWorld 1.6: EnvInfos rejects unknown requests with
ValueError; a GameState is a dict with attribute access; a Wrapper can be given as a class (called
with the environment) or as an instance (calling it wraps the environment and returns the instance),
and forwards unknown attributes to the environment it wraps.
"""


class EnvInfos:
    """Which information an environment reports besides the observation text."""

    __slots__ = ("description", "inventory", "location", "facts", "last_action", "last_command", "game",
                 "won", "lost", "score", "moves", "max_score", "objective", "entities", "verbs",
                 "command_templates", "admissible_commands", "intermediate_reward", "policy_commands", "extras")

    def __init__(self, **kwargs):
        unknown = sorted(set(kwargs) - set(self.__slots__))
        if unknown:
            raise ValueError(f"Unknown information requested: {unknown}. Available information are: {sorted(self.__slots__)}")
        for slot in self.__slots__:
            if slot == "extras":
                self.extras = list(kwargs.get("extras", []))
            else:
                setattr(self, slot, bool(kwargs.get(slot, False)))

    @property
    def basics(self):
        """The requested information but the extras."""
        return [slot for slot in self.__slots__ if slot != "extras" and getattr(self, slot)]


class GameState(dict):
    def __getattr__(self, name):
        return self.get(name)

    def __setattr__(self, name, value):
        self[name] = value


class Environment:
    """An interactive game: load(path), reset() -> GameState, step(command) -> (GameState, score, done)."""

    def __init__(self, request_infos=None):
        self.state = GameState()
        self.request_infos = request_infos or EnvInfos()

    def load(self, path):
        raise NotImplementedError()

    def reset(self):
        raise NotImplementedError()

    def step(self, command):
        raise NotImplementedError()

    def seed(self, seed=None):
        return []

    def close(self):
        pass


class Wrapper:
    """Adds behaviour around another environment; everything it does not override goes to that one."""

    def __init__(self, env=None):
        self._wrap(env)

    def __call__(self, env):
        self._wrap(env)
        return self

    def _wrap(self, env):
        self._wrapped_env = env

    def __getattr__(self, name):
        if name == "_wrapped_env":
            raise AttributeError(name)
        return getattr(self._wrapped_env, name)

    @property
    def unwrapped(self):
        inner = self._wrapped_env
        return inner.unwrapped if hasattr(inner, "unwrapped") else inner

    def load(self, path):
        return self._wrapped_env.load(path)

    def reset(self):
        return self._wrapped_env.reset()

    def step(self, command):
        return self._wrapped_env.step(command)

    def seed(self, seed=None):
        return self._wrapped_env.seed(seed)

    def close(self):
        if self._wrapped_env is not None:
            self._wrapped_env.close()
