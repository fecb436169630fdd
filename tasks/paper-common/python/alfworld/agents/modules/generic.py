"""alfworld.agents.modules.generic (a2rl drop-in): `load_config()` as training scripts call it.

Reads the YAML file named as the first command-line argument when PyYAML is importable; otherwise,
or without an argument, the defaults the text environment needs.
"""
import sys

DEFAULT_CONFIG = {
    "env": {"type": "AlfredTWEnv", "goal_desc_human_anns_prob": 0.0, "task_types": [1, 2, 3, 4, 5, 6]},
    "dataset": {"num_train_games": -1, "num_eval_games": -1},
    "general": {"random_seed": None, "training_method": "dagger"},
    "rl": {"training": {"max_nb_steps_per_episode": 50}},
}


def load_config(path=None):
    path = path or (sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].endswith((".yaml", ".yml")) else None)
    if path is None:
        return {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    import yaml  # the agent's environment provides it when its scripts use a config file

    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)
