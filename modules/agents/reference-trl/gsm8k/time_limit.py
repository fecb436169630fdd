"""A trainer callback that ends training after a wall-clock allowance (the run's budget, not a step count)."""
import time

from transformers import TrainerCallback


class TimeLimit(TrainerCallback):
    def __init__(self, seconds):
        self.deadline = time.monotonic() + seconds

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() >= self.deadline:
            control.should_training_stop = True
        return control
