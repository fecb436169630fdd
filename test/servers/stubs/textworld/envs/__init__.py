"""TEST STUB of `textworld.envs`, NOT the real TextWorld: the game engine and wrappers a2rl's tests need."""
from textworld.envs.pddl import PddlEnv
from textworld.envs.wrappers import Filter, GenericEnvironment, Limit

__all__ = ["Filter", "GenericEnvironment", "Limit", "PddlEnv"]
