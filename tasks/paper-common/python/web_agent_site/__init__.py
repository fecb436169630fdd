"""a2rl's drop-in for WebShop's `web_agent_site` (text environment), NOT the real package.

`web_agent_site.envs.WebAgentTextEnv` with WebShop's API (`reset(session=...)`, `step(action)`,
`get_available_actions()`), playing the run's training goals through the a2rl run's environment
API, so every episode is recorded. See docs/paper-tasks.md.
"""
A2RL_DROP_IN = True
