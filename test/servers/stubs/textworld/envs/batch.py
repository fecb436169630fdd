"""TEST STUB of `textworld.envs.batch.SyncBatchEnv`, NOT the real TextWorld.

Written for a2rl's tests. As in TextWorld: several environments stepped together; reset() returns
(observations tuple, infos as a dict of lists), step(commands) returns (observations, scores, dones,
infos) as tuples/dict of lists, and an environment whose game ended keeps answering its last state.
Not stubbed: auto_reset, and the multiprocessing AsyncBatchEnv of the real package.
"""


def _dict_of_lists(dicts):
    keys = sorted({key for d in dicts for key in d})
    return {key: [d.get(key) for d in dicts] for key in keys}


class SyncBatchEnv:
    def __init__(self, env_fns, auto_reset=False):
        if auto_reset:
            raise NotImplementedError("textworld stub: auto_reset is not stubbed")
        self.envs = [make() for make in env_fns]
        self.batch_size = len(self.envs)
        self.last = [None] * self.batch_size

    def load(self, gamefiles):
        assert len(gamefiles) == len(self.envs)
        for env, gamefile in zip(self.envs, gamefiles):
            env.load(gamefile)

    def reset(self):
        self.last = [None] * self.batch_size
        obs, infos = zip(*[env.reset() for env in self.envs])
        return obs, _dict_of_lists(infos)

    def step(self, commands):
        results = []
        for i, (env, command) in enumerate(zip(self.envs, commands)):
            if self.last[i] is not None and self.last[i][2]:
                results.append(self.last[i])
            else:
                results.append(env.step(command))
        self.last = results
        obs, scores, dones, infos = zip(*results)
        return obs, scores, dones, _dict_of_lists(infos)

    def close(self):
        for env in self.envs:
            env.close()
