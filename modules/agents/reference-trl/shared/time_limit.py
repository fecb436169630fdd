"""A trainer callback that ends training after a wall-clock allowance (the run's budget, not a step count),
and the device training runs on: its CPU threads chosen, what torch sees inside the sandbox noted."""
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


def prepare_device(work_dir):
    """Chooses torch's CPU threads, then writes and prints what torch sees: the held GPUs (renumbered
    from 0) or the CPU. On two cores or fewer, shared with the harness and its grader, one thread:
    torch's OpenMP workers spin while another process holds a core (measured on two cores beside one
    busy process: 294 SFT steps a minute with one thread, 153 with two). OMP_NUM_THREADS decides when set."""
    os.makedirs(work_dir, exist_ok=True)
    count = torch.cuda.device_count()
    if not count and not os.environ.get("OMP_NUM_THREADS") and len(os.sched_getaffinity(0)) <= 2:
        torch.set_num_threads(1)
    seen = {"device": "cuda" if count else "cpu", "count": count, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "threads": torch.get_num_threads()}
    with open(os.path.join(work_dir, "device.json"), "w") as f:
        json.dump(seen, f)
    print(f"torch sees {count} device(s): {seen['device']} ({seen['threads']} CPU thread(s))", flush=True)
