"""A trainer callback that ends training after a wall-clock allowance (the run's budget, not a step count),
and a note of the device training runs on (what torch sees inside the sandbox)."""
import json
import os
import time

import torch

from transformers import TrainerCallback


class TimeLimit(TrainerCallback):
    def __init__(self, seconds):
        self.deadline = time.monotonic() + seconds

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() >= self.deadline:
            control.should_training_stop = True
        return control


def record_device(work_dir):
    """Writes and prints what torch sees: the held GPUs (renumbered from 0) or the CPU."""
    os.makedirs(work_dir, exist_ok=True)
    count = torch.cuda.device_count()
    seen = {"device": "cuda" if count else "cpu", "count": count, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}
    with open(os.path.join(work_dir, "device.json"), "w") as f:
        json.dump(seen, f)
    print(f"torch sees {count} device(s): {seen['device']}", flush=True)
