"""TEST STUB of `web_agent_site.engine`, NOT the real WebShop: a package for a2rl's tests only."""
