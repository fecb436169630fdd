"""TEST STUB of `web_agent_site.envs`, NOT the real WebShop: a package for a2rl's tests only.

The real package registers its gym environments here (and imports the selenium-based site env); the
stub imports nothing.
"""
