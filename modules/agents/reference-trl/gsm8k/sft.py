"""SFT warm-up with TRL, in the evaluation's context: the base model learns to answer in the graded
format (worked steps, then "The answer is <n>"), loss on the answer only. Saves a full safetensors
checkpoint.

Every graded question comes after the same four worked rounds (eval_context.json). Training without
them teaches the model a context it is never graded in (measured: the micro model fell from 9 to 1
correct of 100); training with them in every example costs ten times the compute per step. So the
rounds, encoded without gradients as a KV cache, are lent to every example of the batch exactly where
the grader puts them: the evaluation's context at the cost of the question (measured: 9 → 25 of 100
in a 6m run's SFT share)."""
import argparse
import copy
import os
import sys

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsm8k_format import eval_context, prompt, read_rows, worked_answer  # noqa: E402
from time_limit import TimeLimit, prepare_device  # noqa: E402


class InContextSFTTrainer(SFTTrainer):
    """SFTTrainer whose examples continue a fixed context (token ids). The context is encoded without
    gradients every `refresh` steps (the weights move little in between) and lent to each batch."""

    def __init__(self, *args, context_ids, refresh=4, **kwargs):
        super().__init__(*args, **kwargs)
        self.context_ids = context_ids
        self.refresh = refresh
        self.encoded = None
        self.steps = 0

    def context_cache(self, model, batch_size):
        if self.steps % self.refresh == 0:
            with torch.no_grad():
                self.encoded = model(input_ids=self.context_ids.to(model.device), use_cache=True).past_key_values
        self.steps += 1
        cache = copy.deepcopy(self.encoded)
        cache.batch_repeat_interleave(batch_size)
        return cache

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        ids, labels = inputs["input_ids"], inputs["labels"]
        mask = inputs.get("attention_mask")
        if mask is None:
            mask = (labels != -100) | (ids != self.processing_class.pad_token_id)
        cache = self.context_cache(model, ids.shape[0])
        context_mask = torch.ones(ids.shape[0], self.context_ids.shape[1], dtype=torch.long, device=ids.device)
        outputs = model(input_ids=ids, attention_mask=torch.cat([context_mask, mask.long()], dim=1),
                        past_key_values=cache, labels=labels, use_cache=True)
        return (outputs.loss, outputs) if return_outputs else outputs.loss


def context_ids(tokenizer):
    """The rounds as the model's chat template renders them before the question's own turn."""
    text = tokenizer.apply_chat_template(eval_context(), tokenize=False)
    return torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    prepare_device(args.out + ".work")
    rows = read_rows(args.data)
    dataset = Dataset.from_list([
        {"prompt": prompt(r["question"]), "completion": [{"role": "assistant", "content": worked_answer(r["answer"])}]}
        for r in rows
    ])
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model)
    config = SFTConfig(
        output_dir=os.path.join(args.out + ".work"),
        max_steps=100000,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=10,
        logging_steps=10,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        seed=0,
        max_length=192,
        completion_only_loss=True,
        dataloader_num_workers=0,
        gradient_checkpointing=False,  # it turns the context's KV cache off; a tiny model needs no memory saving
    )
    trainer = InContextSFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                                  callbacks=[TimeLimit(args.seconds)], context_ids=context_ids(tokenizer))
    trainer.train()
    trainer.model.save_pretrained(args.out)  # safetensors only: no pickled training state in the checkpoint
    tokenizer.save_pretrained(args.out)
    print(f"saved {args.out} after {trainer.state.global_step} steps", flush=True)


if __name__ == "__main__":
    main()
