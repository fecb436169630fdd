"""TEST STUB of `textworld.gym.envs.TextworldBatchGymEnv`, NOT the real TextWorld.

Written for a2rl's tests. As in TextWorld 1.6: each environment of the batch is the generic engine,
wrapped in Limit(max_episode_steps), then in each of `wrappers` (classes or instances), then in
Filter; reset() loads the next game(s) of the pool (shuffled with seed 1234, cycled) and starts them.
Environments are always run synchronously here (`asynchronous` is accepted and ignored).

Test knob: A2RL_STUB_TEXTWORLD_LOG=<file> appends {"event": "make"|"close", "env_id": ...} JSON lines.
"""
import json
import os
import random

from textworld.core import EnvInfos
from textworld.envs.batch import SyncBatchEnv
from textworld.envs.wrappers import Filter, GenericEnvironment, Limit


def log(event, **fields):
    path = os.environ.get("A2RL_STUB_TEXTWORLD_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, **fields}) + "\n")


def _make_env(request_infos, max_episode_steps, wrappers):
    env = GenericEnvironment(request_infos)
    if max_episode_steps:
        env = Limit(env, max_episode_steps=max_episode_steps)
    for wrapper in wrappers:
        env = wrapper(env)
    return Filter(env)


class TextworldBatchGymEnv:
    def __init__(self, gamefiles, request_infos=None, batch_size=1, asynchronous=True, auto_reset=False,
                 max_episode_steps=None, action_space=None, observation_space=None, wrappers=None, env_id=None):
        self.gamefiles = list(gamefiles)
        self.batch_size = batch_size
        self.request_infos = request_infos or EnvInfos()
        self.env_id = env_id
        wrappers = list(wrappers or [])
        self.batch_env = SyncBatchEnv([lambda: _make_env(self.request_infos, max_episode_steps, wrappers)] * batch_size, auto_reset)
        self.seed(1234)
        log("make", env_id=env_id, gamefiles=self.gamefiles)

    def seed(self, seed=None):
        order = list(self.gamefiles)
        random.Random(seed).shuffle(order)
        self._order = order
        self._next = 0
        return [seed]

    def _next_gamefile(self):
        gamefile = self._order[self._next % len(self._order)]
        self._next += 1
        return gamefile

    def reset(self):
        self.batch_env.load([self._next_gamefile() for _ in range(self.batch_size)])
        self.last_commands = [None] * self.batch_size
        self.obs, infos = self.batch_env.reset()
        return self.obs, infos

    def step(self, commands):
        if isinstance(commands, str):
            raise TypeError("a batched TextWorld environment steps a list of commands, one per game")
        self.last_commands = commands
        self.obs, scores, dones, infos = self.batch_env.step(commands)
        return self.obs, scores, dones, infos

    def close(self):
        if self.batch_env is not None:
            self.batch_env.close()
            log("close", env_id=self.env_id)
        self.batch_env = None
