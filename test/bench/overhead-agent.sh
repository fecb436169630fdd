#!/usr/bin/env bash
# The overhead bench's agent (test/bench/overhead.bench.ts): what a real post-training agent does,
# in timed phases — builds and pip-installs local wheels, trains a small torch model on CPU with a
# data loader, makes shell tool calls (git, grep, python -c), writes many files and a large
# checkpoint, then submits it (or, run bare, copies it: the reference a submission must at least pay).
# Each phase's start and end go to output/overhead-phases.jsonl.
#
# usage: overhead-agent.sh PYTHON WHEELS CALLS FILES CHECKPOINT_MB submit|copy
set -euo pipefail
PY=$1 WHEELS=$2 CALLS=$3 FILES=$4 CKPT_MB=$5 FINISH=$6
mkdir -p output code
MARKS=output/overhead-phases.jsonl
: > "$MARKS"
now() { date +%s.%N; }
phase() {
  local name=$1 t0
  shift
  t0=$(now)
  "$@"
  printf '{"phase":"%s","start":%s,"end":%s}\n' "$name" "$t0" "$(now)" >> "$MARKS"
}

build_wheels() {
  "$PY" - "$WHEELS" output/wheels <<'PY'
import base64, hashlib, os, sys, zipfile
count, out = int(sys.argv[1]), sys.argv[2]
os.makedirs(out, exist_ok=True)
for i in range(count):
    name, version = f"a2rlbench_pkg{i}", "1.0"
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": b"VERSION = '1.0'\n"}
    for m in range(40):
        files[f"{name}/mod{m}.py"] = "".join(f"def f{k}(x):\n    return x * {k} + {m}\n\n" for k in range(50)).encode()
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: a2rl-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    digest = lambda b: base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
    record = [f"{p},sha256={digest(b)},{len(b)}" for p, b in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(os.path.join(out, f"{name}-{version}-py3-none-any.whl"), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
PY
}

pip_install() {
  local names=()
  for ((i = 0; i < WHEELS; i++)); do names+=("a2rlbench_pkg$i"); done
  "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links output/wheels --target code/site "${names[@]}"
}

train() {
  "$PY" - <<'PY'
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
torch.set_num_threads(1)
x = torch.randn(20000, 64)
y = (x.sum(1) > 0).long()
loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, num_workers=2)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(3):
    for xb, yb in loader:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()
torch.save(model.state_dict(), "output/small.pt")
PY
}

shell_calls() {
  git init -q code
  for ((i = 0; i < CALLS; i++)); do
    case $((i % 3)) in
      0) git -C code status --short > /dev/null ;;
      1) grep -rl "def f7" code/site/a2rlbench_pkg0 > /dev/null ;;
      2) "$PY" -c "print($i)" > /dev/null ;;
    esac
  done
}

write_files() {
  "$PY" - "$FILES" <<'PY'
import os, sys
block = (b"x" * 63 + b"\n") * 64
for i in range(int(sys.argv[1])):
    d = f"code/gen/d{i // 100:03d}"
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i:05d}.txt", "wb") as f:
        f.write(b"%d\n" % i + block)
PY
}

write_checkpoint() {
  "$PY" - "$CKPT_MB" <<'PY'
import os, sys
os.makedirs("output/ckpt", exist_ok=True)
chunk = os.urandom(1 << 20)
with open("output/ckpt/model.safetensors", "wb") as f:
    for i in range(int(sys.argv[1])):
        f.write(chunk[i % 997:] + chunk[: i % 997])
    f.flush()
    os.fsync(f.fileno())
PY
}

finish() {
  if [ "$FINISH" = submit ]; then
    curl -s -o output/submit-answer.json -X POST "$GRADING_SERVER_URL/submit" -H 'content-type: application/json' -d '{"model_path": "output/ckpt"}'
  else
    cp -r output/ckpt output/ckpt-copy
  fi
}

phase wheels build_wheels
phase pip pip_install
phase train train
phase shell shell_calls
phase files write_files
phase checkpoint write_checkpoint
phase submit finish
