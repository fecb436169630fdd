"""web_agent_site.envs (a2rl drop-in)."""
from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv

A2RL_DROP_IN = True

try:  # WebShop registers its environment with gym; so does the drop-in where gym is installed.
    from gym.envs.registration import register

    register(id="WebAgentTextEnv-v0", entry_point="web_agent_site.envs:WebAgentTextEnv")
except Exception:  # noqa: BLE001 - no gym, or already registered
    pass
