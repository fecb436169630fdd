"""TEST STUB of `alfworld.agents`, NOT the real ALFWorld: a package for a2rl's tests only."""
