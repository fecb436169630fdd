"""TEST STUB of `textworld.gym` (register_games, register_game, make), NOT the real TextWorld.

Written for a2rl's tests. As in TextWorld 1.6: register_games(gamefiles, request_infos, batch_size=...,
asynchronous=..., max_episode_steps=..., wrappers=[...]) registers a new environment id ("tw-v0",
then "tw-v1", ...) and returns it; make(env_id) builds that environment. With batch_size given (even
1) the environment speaks the batched API: reset() -> (observations, infos), step([commands]) ->
(observations, scores, dones, infos). The unbatched TextworldGymEnv (batch_size=None) is not stubbed.
"""
from textworld.gym.envs import TextworldBatchGymEnv

_registry = {}


def register_games(gamefiles, request_infos=None, batch_size=None, auto_reset=False, max_episode_steps=50,
                   asynchronous=True, action_space=None, observation_space=None, name="", **kwargs):
    if isinstance(gamefiles, str):
        raise TypeError("register_games expects a list of game files")
    if batch_size is None:
        raise NotImplementedError("textworld stub: only the batched API (batch_size=<n>) is stubbed")
    base = f"tw-{name}" if name else "tw"
    version = 0
    while f"{base}-v{version}" in _registry:
        version += 1
    env_id = f"{base}-v{version}"
    _registry[env_id] = dict(gamefiles=list(gamefiles), request_infos=request_infos, batch_size=batch_size,
                             asynchronous=asynchronous, auto_reset=auto_reset, max_episode_steps=max_episode_steps,
                             action_space=action_space, observation_space=observation_space, **kwargs)
    return env_id


def register_game(gamefile, request_infos=None, **kwargs):
    return register_games([gamefile], request_infos, **kwargs)


def make(env_id):
    if env_id not in _registry:
        raise KeyError(f"no environment registered under {env_id}")
    return TextworldBatchGymEnv(env_id=env_id, **_registry[env_id])


__all__ = ["make", "register_game", "register_games"]
