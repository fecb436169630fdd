"""Expert demonstrations for the SFT warm-up: every training game's walkthrough (game.tw-pddl) played
through the run's environment API, so the observations are the environment's own, with `think:` replies
in the style of the few-shot examples. Writes <out>/expert.jsonl: per game its prompt text and turns
(reply, observation). No training here: the demonstrations are data for sft.py."""
import argparse
import json
import os
import sys
import time

from a2rl_env_client import Session

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from alfworld_format import THINK_OBSERVATION, initial_prompt, read_game, read_prompts, train_games  # noqa: E402

STEP_VERBS = ("clean ", "heat ", "cool ", "use ", "put ")


def next_use(walkthrough, i):
    """The first action after walkthrough[i] that is not an `open`."""
    return next((a for a in walkthrough[i + 1:] if not a.startswith("open ")), "")


def with_thinks(walkthrough, goal):
    """The walkthrough with the few-shot examples' thinks: the plan first, then before carrying the
    object somewhere what will be done there, and after the first of two objects the search for the second."""
    obj, recep = goal["object"], goal["receptacle"]
    examine = any(a.startswith("use ") for a in walkthrough)
    plan = "find and take {0}, then find and use a desklamp" if examine else "find and take {0}, then put it in/on {1}"
    replies = [f"think: To solve the task, I need to {plan.format(obj, recep)}. First I need to find {obj}."]
    held = None
    for i, action in enumerate(walkthrough):
        if action.startswith("go to ") and held:
            there, then = action[6:], next_use(walkthrough, i)
            if then.startswith(STEP_VERBS):
                verb = then.split(" ", 1)[0]
                todo = {"use": f"use {there}", "put": f"put it in/on {there}"}.get(verb, f"{verb} it with {there}")
                replies.append(f"think: Now I take {held}. Next, I need to {todo}.")
        replies.append(action)
        if action.startswith("take "):
            held = action[5:].split(" from ", 1)[0]
        if action.startswith("put ") and i + 1 < len(walkthrough):
            target = action.split(" in/on ", 1)[1]
            replies.append(f"think: Now I put the first {obj} in {target}. Next, I need to find the second {obj}.")
            held = None
    return replies


def play(seed, rel, game, prompts):
    session = Session(seed=seed)
    first = session.reset()
    if first["info"].get("game") not in (None, rel):
        raise RuntimeError(f"/env/reset seed {seed} started {first['info'].get('game')}, expected {rel}")
    turns = []
    for reply in with_thinks(game["walkthrough"], game["a2rl_micro"]["goal"]):
        observation = THINK_OBSERVATION if reply.startswith("think:") else session.step(reply)["observation"]
        turns.append([reply, observation])
    prompt = initial_prompt(prompts, first["info"].get("task_type") or rel.split("/")[0], first["observation"])
    return {"game": rel, "prompt": prompt, "turns": turns, "won": bool(session.last["info"].get("won"))}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args()
    deadline = time.monotonic() + args.seconds
    prompts = read_prompts(args.data)
    os.makedirs(args.out, exist_ok=True)
    kept = 0
    with open(os.path.join(args.out, "expert.jsonl"), "w", encoding="utf-8") as f:
        for seed, rel in enumerate(train_games(args.data)):
            if time.monotonic() >= deadline:
                break
            game = read_game(args.data, rel)
            if "walkthrough" not in game or "a2rl_micro" not in game:
                continue  # a real ALFWorld game: its expert needs TextWorld's handcoded policy, not done here
            episode = play(seed, rel, game, prompts)
            if episode["won"]:
                f.write(json.dumps(episode) + "\n")
                kept += 1
    print(f"collected {kept} expert demonstrations in {args.out}/expert.jsonl", flush=True)
    if not kept:
        sys.exit(1)


if __name__ == "__main__":
    main()
