"""TEST STUB of `alfworld.agents.environment`, NOT the real ALFWorld: a package for a2rl's tests only.

The real package imports its TextWorld, THOR and hybrid environments here; the stub imports nothing.
"""
