"""TEST STUB of WebShop's `web_agent_site` package API shape, NOT the real WebShop (princeton-nlp/WebShop).

Written for a2rl's tests (test/servers/stubs/README.md): only what tasks/webshop/env_backend.py uses
exists here, chiefly web_agent_site.envs.web_agent_text_env.WebAgentTextEnv in "text" mode.
"""
