#!/usr/bin/env python3
"""Re-derives tasks/deepsearchqa/hf-shuffle-seed42.json, the row order of the paper's DeepSearchQA split.

The paper's harness (RD-Agent rdagent/scenarios/rl/autorl_bench/benchmarks/deepsearchqa/data.py) loads
HF `google/deepsearchqa` split "eval" (the 900 rows of DSQA-full.csv, in file order) and calls
`Dataset.shuffle(seed=42)`. Hugging Face `datasets` (src/datasets/arrow_dataset.py, Dataset.shuffle)
builds that order as `np.random.default_rng(seed).permutation(len(dataset))`, so row i of the shuffled
dataset is row permutation[i] of the file. Training = shuffled rows 0..99, held-out = 100..299.

    python3 tasks/deepsearchqa/derive-permutation.py            # prints the JSON
    python3 tasks/deepsearchqa/derive-permutation.py --check    # compares with the shipped file

Needs only numpy (any version with numpy.random.default_rng, i.e. >= 1.17).
"""
import json
import os
import sys

import numpy as np

SEED = 42
ROWS = 900
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf-shuffle-seed42.json")


def derive():
    return {
        "note": "row order of HF datasets Dataset.shuffle(seed=42) on google/deepsearchqa split eval (900 rows): "
                "numpy.random.default_rng(42).permutation(900); re-derive with tasks/deepsearchqa/derive-permutation.py",
        "seed": SEED,
        "rows": ROWS,
        "permutation": [int(i) for i in np.random.default_rng(SEED).permutation(ROWS)],
    }


def main(argv):
    derived = derive()
    if "--check" in argv:
        with open(SHIPPED, encoding="utf-8") as f:
            shipped = json.load(f)
        same = shipped["permutation"] == derived["permutation"]
        print(f"{SHIPPED}: {'matches' if same else 'DIFFERS FROM'} numpy {np.__version__}'s default_rng({SEED}).permutation({ROWS})")
        return 0 if same else 1
    sys.stdout.write(json.dumps(derived) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
