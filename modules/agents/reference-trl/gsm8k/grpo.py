"""GRPO with TRL: groups of sampled answers per question, asked in the evaluation's 4-shot
conversation and rewarded 1 when the last number is the reference answer (the evaluation's rule),
starting from the SFT checkpoint. Saves safetensors."""
import argparse
import os
import sys

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsm8k_format import eval_context, gold, is_correct, prompt, read_rows  # noqa: E402
from time_limit import TimeLimit, prepare_device  # noqa: E402


def correct_answer(completions, reference, **_):
    replies = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if is_correct(reply, ref) else 0.0 for reply, ref in zip(replies, reference)]


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
    context = eval_context()
    dataset = Dataset.from_list([{"prompt": context + prompt(r["question"]), "reference": gold(r["answer"])} for r in rows])
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model)
    config = GRPOConfig(
        output_dir=os.path.join(args.out + ".work"),
        max_steps=100000,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=96,
        learning_rate=5e-5,
        lr_scheduler_type="constant",
        beta=0.0,
        temperature=1.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        seed=0,
        dataloader_num_workers=0,
        gradient_checkpointing=False,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=correct_answer, args=config, train_dataset=dataset, processing_class=tokenizer, callbacks=[TimeLimit(args.seconds)])
    trainer.train()
    trainer.model.save_pretrained(args.out)  # safetensors only: no pickled training state in the checkpoint
    tokenizer.save_pretrained(args.out)
    print(f"saved {args.out} after {trainer.state.global_step} steps", flush=True)


if __name__ == "__main__":
    main()
