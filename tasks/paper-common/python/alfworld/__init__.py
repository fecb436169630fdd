"""a2rl's drop-in for ALFWorld (alfworld 0.3.x, text environment), NOT the real package.

Same import paths and API as the parts of `alfworld` training code uses
(`alfworld.agents.environment.get_environment`, `AlfredTWEnv(config, train_eval).init_env(batch_size)`,
`alfworld.agents.modules.generic.load_config`); every game is played through the a2rl run's
environment API, so every episode is recorded. See docs/paper-tasks.md.
"""
A2RL_DROP_IN = True
