"""SFT warm-up with TRL: the base model learns to answer in the evaluation's format (worked steps, then
"The answer is <n>"), loss on the answer only. Saves a full safetensors checkpoint."""
import argparse
import os
import sys

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsm8k_format import prompt, read_rows, worked_answer  # noqa: E402
from time_limit import TimeLimit, record_device  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    record_device(args.out + ".work")
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
        lr_scheduler_type="constant",
        logging_steps=10,
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        seed=0,
        max_length=192,
        completion_only_loss=True,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer, callbacks=[TimeLimit(args.seconds)])
    trainer.train()
    trainer.model.save_pretrained(args.out)  # safetensors only: no pickled training state in the checkpoint
    tokenizer.save_pretrained(args.out)
    print(f"saved {args.out} after {trainer.state.global_step} steps", flush=True)


if __name__ == "__main__":
    main()
