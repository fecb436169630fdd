"""alfworld.agents.environment (a2rl drop-in): the text environment, served by the a2rl run."""
from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv, AlfredThorEnv, AlfredHybrid

A2RL_DROP_IN = True


def get_environment(env_type):
    """The environment class for `config['env']['type']`, as in alfworld: only the text one is served."""
    if env_type == "AlfredTWEnv":
        return AlfredTWEnv
    if env_type in ("AlfredThorEnv", "AlfredHybrid"):
        return {"AlfredThorEnv": AlfredThorEnv, "AlfredHybrid": AlfredHybrid}[env_type]
    raise NotImplementedError(f"Environment {env_type} is not implemented.")
