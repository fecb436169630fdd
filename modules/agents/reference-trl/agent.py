"""Reference agent that really post-trains: it writes its training code into code/, launches each step
as its own Python process (so the harness records the scripts, the processes and their kinds), saves
safetensors checkpoints under output/ and submits them through the grading API.

The plan per task lives in <task>/plan.json next to this file: an ordered list of steps, each a script
of that folder with the checkpoint it starts from and the share of the remaining time it may train.
Plain standard library: the training scripts are what need torch and TRL.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

AGENT_DIR = os.path.dirname(os.path.abspath(__file__))


def log(message):
    print(f"[agent] {message}", flush=True)


def run_env():
    names = ["WORKSPACE", "MODEL_PATH", "DATA_PATH", "OUTPUT_DIR", "GRADING_SERVER_URL", "TASK"]
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        log(f"missing environment {', '.join(missing)}")
        sys.exit(2)
    env = {n: os.environ[n] for n in names}
    # A resumed run: no session to continue, so the plan starts again (the workspace is as it was).
    if os.environ.get("A2RL_RESUMED") == "1":
        log(f"resumed: {os.environ.get('A2RL_RESUME_NOTE', '')}")
    env["CODE_DIR"] = os.path.join(env["WORKSPACE"], "code")
    os.makedirs(env["CODE_DIR"], exist_ok=True)
    os.makedirs(env["OUTPUT_DIR"], exist_ok=True)
    return env


def api(env, method, route, body=None, timeout=3600):
    url = env["GRADING_SERVER_URL"].rstrip("/") + route
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        text = err.read().decode(errors="replace")
        try:
            return {"error": json.loads(text).get("error", text), "status": err.code}
        except json.JSONDecodeError:
            return {"error": f"HTTP {err.code}: {text[:200]}", "status": err.code}


def remaining_seconds(env):
    answer = api(env, "GET", "/time", timeout=30)
    return float(answer.get("remaining_s", answer.get("remaining", 0)) or 0)


def install(env, task_dir, name):
    """Writes a script of the plan into code/: the agent's own code, recorded as it is written. A name
    not in the task's folder comes from shared/ (helpers every task uses, such as time_limit.py)."""
    target = os.path.join(env["CODE_DIR"], name)
    source = os.path.join(task_dir, name)
    shutil.copyfile(source if os.path.isfile(source) else os.path.join(AGENT_DIR, "shared", name), target)
    log(f"wrote code/{name}")
    return target


def train(script, args):
    log(f"launching python3 code/{os.path.basename(script)} {' '.join(args)}")
    started = time.monotonic()
    result = subprocess.run([sys.executable, script, *args], stdin=subprocess.DEVNULL)
    log(f"{os.path.basename(script)} exited with {result.returncode} after {time.monotonic() - started:.0f}s")
    return result.returncode == 0


def submit(env, checkpoint):
    model_path = os.path.relpath(checkpoint, env["WORKSPACE"])
    answer = api(env, "POST", "/submit", {"model_path": model_path})
    if answer.get("error") is not None:
        log(f"submitted {model_path}: rejected ({answer['error']})")
        return None
    log(f"submitted {model_path}: score {answer.get('score')} (baseline {answer.get('baseline_score')}, best {answer.get('best_score')})")
    return answer.get("score")


def main():
    env = run_env()
    task_dir = os.path.join(AGENT_DIR, env["TASK"])
    plan_file = os.path.join(task_dir, "plan.json")
    if not os.path.isfile(plan_file):
        log(f"no strategy for task {env['TASK']}")
        sys.exit(2)
    with open(plan_file) as f:
        plan = json.load(f)
    for helper in plan.get("shared", []):
        install(env, task_dir, helper)
    scores = []
    checkpoints = {"base": env["MODEL_PATH"]}
    for i, step in enumerate(plan["steps"]):
        left = remaining_seconds(env)
        # What the later steps and their gradings need is kept back; this step trains in its share.
        seconds = max(0.0, left * step["share"] - plan.get("reserveSeconds", 0))
        if seconds < plan.get("minTrainSeconds", 10):
            log(f"step {step['name']}: {left:.0f}s left, not enough to train; stopping")
            break
        script = install(env, task_dir, step["script"])
        out = os.path.join(env["OUTPUT_DIR"], step["name"])
        args = ["--model", checkpoints[step["from"]], "--data", env["DATA_PATH"], "--out", out, "--seconds", f"{seconds:.0f}"]
        if not train(script, args):
            scores.append(None)
            continue
        checkpoints[step["name"]] = out
        if step.get("submit", True):  # a step with "submit": false prepares data for later steps
            scores.append(submit(env, out))
    log(f"done: scores {' -> '.join('n/a' if s is None else str(s) for s in scores)}")
    if not any(s is not None for s in scores):
        sys.exit(1)


if __name__ == "__main__":
    main()
