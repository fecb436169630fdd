"""How alfworld is played and graded (the task's description): one growing text-completion prompt, the
preamble and the two few-shot examples of the game's task type, the task, then ` <action>\n<observation>\n>`
after every reply; a reply (generation stops at the first newline) stripped is the action; a `think:`
reply is answered "OK." without acting; "You arrive at loc N. " is cut from observations.

Text is kept as token segments (prompt, reply, observation) so that the tokens a rollout samples are the
tokens its update scores."""
import json
import os

PREAMBLE = "Interact with a household to solve a task. Here are two examples.\n"
TASK_HEADER = "\nHere is the task.\n"
THINK = "think:"
THINK_OBSERVATION = "OK."
ARRIVE = "You arrive at loc "
MAX_STEPS = 50
# ALFWorld's task-type directory prefixes -> the key of their few-shot examples.
TASK_TYPES = [("pick_and_place", "put"), ("pick_clean_then_place", "clean"), ("pick_heat_then_place", "heat"),
              ("pick_cool_then_place", "cool"), ("look_at_obj", "examine"), ("pick_two_obj", "puttwo")]


def read_prompts(data_dir):
    with open(os.path.join(data_dir, "alfworld_3prompts.json"), encoding="utf-8") as f:
        return json.load(f)


def eval_max_steps(data_dir):
    """Replies per game in the evaluation: data/micro_settings.json's maxSteps with micro assets, else MAX_STEPS."""
    path = os.path.join(data_dir, "micro_settings.json")
    if not os.path.isfile(path):
        return MAX_STEPS
    with open(path, encoding="utf-8") as f:
        return int(json.load(f)["maxSteps"])


def train_games(data_dir):
    """The training games in the order /env/reset {seed: n} indexes them (game n mod count)."""
    with open(os.path.join(data_dir, "train_games.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def read_game(data_dir, rel):
    with open(os.path.join(data_dir, "train", rel), encoding="utf-8") as f:
        return json.load(f)


def task_key(task_type):
    return next(key for prefix, key in TASK_TYPES if task_type.startswith(prefix))


def initial_prompt(prompts, task_type, observation):
    key = task_key(task_type)
    return f"{PREAMBLE}{prompts[f'react_{key}_1']}{prompts[f'react_{key}_0']}{TASK_HEADER}{observation}\n>"


def processed(observation):
    return observation[observation.index(". ") + 2:] if observation.startswith(ARRIVE) else observation


def after_reply(observation):
    """What follows a reply's newline in the prompt: the processed observation and the next `>`."""
    return f"{processed(observation)}\n>"


def is_think(action):
    return action.startswith(THINK)
