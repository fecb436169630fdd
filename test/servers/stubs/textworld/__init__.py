"""TEST STUB of TextWorld's API shape, NOT the real `textworld` package.

Written for a2rl's tests (test/servers/stubs/README.md): it imitates the parts of TextWorld 1.6 that
tasks/alfworld/env_backend.py uses (`EnvInfos`, `textworld.core.Wrapper`, `textworld.gym.register_games`
with batch_size and wrappers, `textworld.gym.make`) and plays tiny games described in a stub-only
format. Only importable when a test puts test/servers/stubs on PYTHONPATH.
"""
from textworld.core import EnvInfos, Environment, GameState, Wrapper

__version__ = "0+a2rl.test.stub"


def start(path, request_infos=None, wrappers=()):
    """Loads a game: the generic environment, then each wrapper (a class or an instance) around it."""
    from textworld.envs.wrappers import GenericEnvironment

    env = GenericEnvironment(request_infos)
    for wrapper in wrappers:
        env = wrapper(env)
    env.load(path)
    return env


__all__ = ["EnvInfos", "Environment", "GameState", "Wrapper", "start"]
