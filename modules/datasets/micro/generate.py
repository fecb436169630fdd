"""`a2rl data micro <task>`: writes a task's micro assets into an empty directory.

    python generate.py <gsm8k|humaneval|alfworld> --seed N --out DIR --protocol tasks/<task>/protocol.json [--baseline]

DIR receives the files the pack reads after `a2rl data fetch` (same names and formats) and
`base-model/` (a tiny Hugging Face checkpoint briefly trained on the task). The last line on stdout
is one JSON object: {task, seed, rows, model, seconds, baseline?}. `--baseline` also loads the saved
checkpoint with AutoModelForCausalLM / AutoTokenizer and scores it greedily on the private split in
the pack's prompt format (a measurement for people; the TypeScript side never asks for it).
Row counts come from the protocol file's `micro` entries.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import micro_data as data  # noqa: E402
import micro_model as mm  # noqa: E402

# Model sizes and pretraining lengths: seconds on one core; tuned so the baseline is low but not zero.
SIZES = {
    "gsm8k": {"vocab": 1536, "hidden": 96, "layers": 2, "heads": 4, "positions": 2048, "steps": 600, "batch": 16, "lr": 4e-3, "pretrain": 1200},
    "humaneval": {"vocab": 768, "hidden": 64, "layers": 2, "heads": 4, "positions": 1024, "steps": 450, "batch": 8, "lr": 3e-3, "pretrain": 600},
    "alfworld": {"vocab": 1024, "hidden": 96, "layers": 2, "heads": 4, "positions": 4096, "steps": 2000, "batch": 8, "lr": 3e-3, "pretrain": 2400},
}


def fill(template, **values):
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)


# --- gsm8k ---------------------------------------------------------------------------------------
def gsm8k_messages(protocol, question):
    tpl = protocol["prompt"]["userTemplate"]
    msgs = []
    for shot in protocol["prompt"]["fewShot"]:
        msgs += [{"role": "user", "content": fill(tpl, question=shot["question"])}, {"role": "assistant", "content": shot["answer"]}]
    return msgs + [{"role": "user", "content": fill(tpl, question=question)}]


def gsm8k_reply(answer):
    """A GSM8K answer in the few-shot turns' style: steps without calculator annotations, 'The answer is N'."""
    body, final = answer.split("\n#### ")
    return re.sub(r"<<[^>]*>>", "", body) + f"\nThe answer is {final}\n"


def make_gsm8k(out, seed, protocol, log):
    counts = protocol["split"]["micro"]["expectedRows"]
    train = data.gsm8k_rows(seed, "train", counts["train.jsonl"])
    test = data.gsm8k_rows(seed, "test", counts["test.jsonl"])
    data.write_jsonl(os.path.join(out, "train.jsonl"), train)
    data.write_jsonl(os.path.join(out, "test.jsonl"), test)
    size = SIZES["gsm8k"]
    held = {r["question"] for r in test}
    pre = [r for r in data.gsm8k_rows(seed, "pretrain", size["pretrain"]) if r["question"] not in held]
    shots = mm.render_chat(gsm8k_messages(protocol, "x")[:-1], False)
    examples = [[(shots, None), (mm.render_chat(gsm8k_messages(protocol, r["question"])[-1:], True), False), (gsm8k_reply(r["answer"]) + mm.EOS, True)]
                for r in pre]
    # The few-shot rounds repeated: the tokenizer learns their words, so the 4-shot prompt stays short.
    texts = [r["question"] + "\n" + r["answer"] for r in train] + [shots] * 50
    model = mm.make_model(os.path.join(out, "base-model"), seed, texts, examples, size, size["positions"], size["steps"], size["batch"],
                          size["lr"], protocol["request"]["maxTokens"], log)
    return {"train.jsonl": len(train), "test.jsonl": len(test)}, model


def gsm8k_baseline(out, protocol):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = os.path.join(out, "base-model")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    correct = 0
    rows = [json.loads(x) for x in open(os.path.join(out, "test.jsonl"), encoding="utf-8")]
    samples = []
    for r in rows:
        prompt = tok.apply_chat_template(gsm8k_messages(protocol, r["question"]), tokenize=False, add_generation_prompt=True)
        reply = mm.greedy(model, tok, prompt, protocol["request"]["maxTokens"])
        numbers = re.findall(r"-?\d+\.\d+|-?\d+", reply.split(protocol["postprocess"]["predictionCutAt"])[0])
        gold = r["answer"].split("#### ")[1].replace(",", "")
        ok = bool(numbers) and abs(float(numbers[-1]) - int(gold)) < 1e-6
        correct += ok
        if len(samples) < 3:
            samples.append({"reply": reply[:300], "gold": gold, "correct": ok})
    return {"metric": "accuracy", "score": round(100 * correct / len(rows), 2), "correct": correct, "total": len(rows), "samples": samples}


# --- humaneval -----------------------------------------------------------------------------------
def humaneval_reply(problem):
    signature = problem["prompt"].strip().split("\n")[0]
    return f"```python\n{signature}\n{problem['canonical_solution']}```"


def humaneval_messages(protocol, problem):
    return [{"role": "user", "content": fill(protocol["prompt"]["userTemplate"], prompt=problem["prompt"])}]


def make_humaneval(out, seed, protocol, log):
    count = protocol["split"]["expectedRows"]["HumanEval.jsonl"]
    rows = data.humaneval_problems(seed, count)
    for p in rows:
        data.check_humaneval(p)
    data.write_jsonl(os.path.join(out, "HumanEval.jsonl"), rows)
    size = SIZES["humaneval"]
    private = protocol["split"]["private"]
    held = {p["entry_point"] for p in rows[private["start"]:private["end"]]}
    # Pretraining never sees a held-out problem's function: only the visible ones' and other names.
    pre = data.humaneval_problems(seed, size["pretrain"], "Pretrain", "pretrain", exclude=held, unique=False)
    examples = [[(mm.render_chat(humaneval_messages(protocol, p), True), False), (humaneval_reply(p) + mm.EOS, True)] for p in pre]
    texts = [p["prompt"] + p["canonical_solution"] + p["test"] for p in rows] + [e[0][0] + e[1][0] for e in examples]
    model = mm.make_model(os.path.join(out, "base-model"), seed, texts, examples, size, size["positions"], size["steps"], size["batch"],
                          size["lr"], 512, log)
    if model:
        model["pretrainProblems"] = len(pre)
    return {"HumanEval.jsonl": len(rows)}, model


def humaneval_baseline(out, protocol):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = os.path.join(out, "base-model")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    rows = [json.loads(x) for x in open(os.path.join(out, "HumanEval.jsonl"), encoding="utf-8")]
    private = protocol["split"]["private"]
    held = rows[private["start"]:private["end"]]
    passed, samples = 0, []
    for p in held:
        prompt = tok.apply_chat_template(humaneval_messages(protocol, p), tokenize=False, add_generation_prompt=True)
        reply = mm.greedy(model, tok, prompt, 256)
        block = re.search(r"```\w*\n([\s\S]*?)```", reply)
        completion = (block.group(1) if block else reply).lstrip()
        program = p["prompt"] + completion + "\n" + p["test"] + "\n" + f"check({p['entry_point']})"
        try:
            ok = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=10).returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        passed += ok
        if len(samples) < 3:
            samples.append({"task": p["task_id"], "reply": reply[:200], "passed": ok})
    return {"metric": "pass@1", "score": round(100 * passed / len(held), 2), "passed": passed, "total": len(held), "samples": samples}


# --- alfworld ------------------------------------------------------------------------------------
MARKER = "a2rl_micro.json"
SPLITS = {"train": "train", "eval": "valid_unseen"}


def react_shots(protocol, prompts, key):
    """The prompt's fixed part for a task type: the preamble and its two examples."""
    p = protocol["prompt"]
    return p["preamble"] + "".join(prompts[fill(name, type=key)] for name in p["examples"])


def react_task(protocol, first_obs):
    p = protocol["prompt"]
    return f"{p['taskHeader']}{first_obs}{p['firstObservationSuffix']}"


def react_start(protocol, prompts, key, first_obs):
    return react_shots(protocol, prompts, key) + react_task(protocol, first_obs)


def key_of(task_type):
    return next(k for prefix, k, _t, _s in data.TASK_KINDS if task_type.startswith(prefix))


def first_observation(game_json):
    return "\n".join(data.MicroGame(game_json["a2rl_micro"]).reset().split("\n\n")[1:])


def processed(protocol, observation):
    prefix = protocol["postprocess"]["arrivePrefix"]
    return observation[observation.index(". ") + 2:] if observation.startswith(prefix) else observation


def make_alfworld(out, seed, protocol, log):
    micro = protocol["settings"]["micro"]
    prompts = data.alfworld_prompts(seed)
    data.write_json(os.path.join(out, "alfworld_3prompts.json"), prompts, indent=1)
    counts = {}
    for split, folder in SPLITS.items():
        games = data.alfworld_games(seed, split, micro[f"{split}GamesPerType"])
        counts[folder] = len(games)
        for rel, game_json, traj, _steps in games:
            trial = os.path.join(out, "json_2.1.1", folder, rel)
            os.makedirs(trial, exist_ok=True)
            data.write_json(os.path.join(trial, "game.tw-pddl"), game_json)
            data.write_json(os.path.join(trial, "traj_data.json"), traj)
    data.write_json(os.path.join(out, MARKER), {"engine": "tasks/alfworld/env_backend.py (MicroSession)", "seed": seed,
                                                 "splits": {folder: counts[folder] for folder in SPLITS.values()}})
    size = SIZES["alfworld"]
    hist = protocol["prompt"]["historyTemplate"]
    examples = []
    for _rel, game_json, _traj, steps in data.alfworld_games(seed, "pretrain", size["pretrain"] // len(data.TASK_KINDS)):
        key = key_of(game_json["a2rl_micro"]["task_type"])
        segs = [(react_shots(protocol, prompts, key), None), (react_task(protocol, first_observation(game_json)), False)]
        for action, observation in steps:
            segs.append((" " + action + "\n", True))
            segs.append((observation_line(protocol, hist, observation), False))
        examples.append(segs)
    texts = list(prompts.values()) + ["".join(t for t, _ in e) for e in examples]
    model = mm.make_model(os.path.join(out, "base-model"), seed, texts, examples, size, size["positions"], size["steps"], size["batch"],
                          size["lr"], protocol["request"]["maxTokens"], log)
    return {"alfworld_3prompts.json": len(prompts), **{f"json_2.1.1/{k}": v for k, v in counts.items()}}, model


def observation_line(protocol, hist, observation):
    """What follows an action in the prompt: the processed observation and the next `>` (historyTemplate after its action line)."""
    after_action = hist.split("{action}", 1)[1]
    return fill(after_action.split("\n", 1)[1], observation=processed(protocol, observation))


def alfworld_baseline(out, protocol):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = os.path.join(out, "base-model")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    prompts = json.load(open(os.path.join(out, "alfworld_3prompts.json"), encoding="utf-8"))
    root = os.path.join(out, "json_2.1.1", "valid_unseen")
    games = sorted(os.path.relpath(os.path.join(d, "game.tw-pddl"), root) for d, _s, f in os.walk(root) if "game.tw-pddl" in f)
    won, replies = 0, 0
    p = protocol["postprocess"]
    for rel in games:
        game = data.MicroGame.from_file(os.path.join(root, rel))
        obs = "\n".join(game.reset().split("\n\n")[1:])
        text = react_start(protocol, prompts, key_of(rel.split("/")[0]), obs)
        for _ in range(protocol["settings"]["maxSteps"]):
            reply = mm.greedy(model, tok, text, protocol["request"]["maxTokens"], stop="\n")
            replies += 1
            action = reply.strip()
            observation = p["thinkObservation"] if action.startswith(p["thinkPrefix"]) else processed(protocol, game.step(action))
            text += fill(protocol["prompt"]["historyTemplate"], action=action, observation=observation)
            if game.won:
                break
        won += game.won
    return {"metric": "success rate", "score": round(100 * won / len(games), 2), "won": won, "total": len(games), "replies": replies}


MAKERS = {"gsm8k": (make_gsm8k, gsm8k_baseline), "humaneval": (make_humaneval, humaneval_baseline), "alfworld": (make_alfworld, alfworld_baseline)}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("task", choices=sorted(MAKERS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True)
    parser.add_argument("--protocol", required=True)
    parser.add_argument("--baseline", action="store_true")
    parser.add_argument("--no-model", action="store_true", help="the dataset files only (tests of the formats; no torch needed)")
    args = parser.parse_args(argv)
    protocol = mm.read_json(args.protocol)
    os.makedirs(args.out, exist_ok=True)
    started = time.monotonic()
    make, baseline = MAKERS[args.task]
    cpu = time.process_time()
    if args.no_model:
        mm.make_model = lambda *a, **k: None
    rows, model = make(args.out, args.seed, protocol, lambda line: print(line, file=sys.stderr, flush=True))
    summary = {"task": args.task, "seed": args.seed, "rows": rows, "model": model, "seconds": round(time.monotonic() - started, 1),
               "cpuSeconds": round(time.process_time() - cpu, 1)}
    if args.baseline:
        started = time.monotonic()
        summary["baseline"] = baseline(args.out, protocol)
        summary["baseline"]["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
