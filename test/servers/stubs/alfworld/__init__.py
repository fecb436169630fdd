"""TEST STUB of the `alfworld` package's API shape, NOT the real ALFWorld (alfworld 0.3.x).

Written for a2rl's tests (test/servers/stubs/README.md): only what tasks/alfworld/env_backend.py
imports exists here (alfworld.agents.environment.alfred_tw_env.AlfredDemangler / AlfredInfos).
"""
