"""TEST STUB of `textworld.envs.wrappers` (GenericEnvironment, Limit, Filter), NOT the real TextWorld.

Written for a2rl's tests. As in TextWorld 1.6:
- GenericEnvironment picks the engine from the game file's extension when a game is loaded (the
  stub knows only `.tw-pddl`, ALFWorld's format);
- Limit ends the episode (done) once `max_episode_steps` steps were played;
- Filter turns game states into `(observation, infos)` / `(observation, score, done, infos)` with
  only the requested information in `infos`, extras under "extra.<name>".
"""
from textworld.core import EnvInfos, Wrapper


class GenericEnvironment(Wrapper):
    def __init__(self, request_infos=None):
        super().__init__(None)
        self.request_infos = request_infos or EnvInfos()

    def load(self, path):
        if not str(path).endswith(".tw-pddl"):
            raise ValueError(f"textworld stub: only .tw-pddl games can be played, not {path}")
        from textworld.envs.pddl import PddlEnv

        if self._wrapped_env is not None:
            self._wrapped_env.close()
        self._wrap(PddlEnv(self.request_infos))
        self._wrapped_env.load(path)


class Limit(Wrapper):
    def __init__(self, env, max_episode_steps):
        super().__init__(env)
        self.max_episode_steps = max_episode_steps
        self.nb_steps = 0

    def reset(self):
        state = super().reset()
        self.nb_steps = 0
        return state

    def step(self, command):
        state, score, done = super().step(command)
        self.nb_steps += 1
        return state, score, done or self.nb_steps >= self.max_episode_steps


class Filter(Wrapper):
    def _infos(self, state):
        infos = {name: state.get(name) for name in self.request_infos.basics}
        for extra in self.request_infos.extras:
            infos[f"extra.{extra}"] = state.get(f"extra.{extra}")
        return infos

    def reset(self):
        state = super().reset()
        return state.feedback, self._infos(state)

    def step(self, command):
        state, score, done = super().step(command)
        return state.feedback, score, done, self._infos(state)
