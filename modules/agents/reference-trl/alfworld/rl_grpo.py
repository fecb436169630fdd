"""Online RL through the run's recorded environment API: GRPO-style group-relative policy gradient.
Per update, a few training games are each played several times (/env/reset with the game's seed,
/env/step per action) by the current model sampling replies at temperature 1 in the evaluation's
prompt; reward = 1 when the environment reports the game won. Each episode's advantage is its reward
minus its group's mean, over the group's std (groups all won or all lost teach nothing and are skipped);
the loss is -advantage x the mean log-probability of the episode's sampled reply tokens. No critic, no
KL term. Starts from the SFT checkpoint; saves safetensors."""
import argparse
import os
import random
import sys
import time

import torch
from a2rl_env_client import Session
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from alfworld_format import THINK_OBSERVATION, after_reply, eval_max_steps, initial_prompt, is_think, read_prompts, train_games  # noqa: E402
from time_limit import prepare_device  # noqa: E402

GROUP = 4  # episodes per game (the group)
GAMES_PER_UPDATE = 2
MAX_REPLIES = 20  # per training episode at most (the evaluation allows 50, or micro_settings.json's maxSteps)
MAX_REPLY_TOKENS = 40


class Episode:
    """The episode's token sequence (what the update scores), the reply-token mask, and a KV cache of the
    tokens already fed to the model, so each reply costs its own tokens, not the whole prompt again."""

    def __init__(self, ids):
        self.ids, self.mask, self.won, self.replies = list(ids), [0] * len(ids), False, 0
        self.cache, self.fed = DynamicCache(), 0

    def add(self, ids, trained):
        self.ids += ids
        self.mask += [1 if trained else 0] * len(ids)


@torch.no_grad()
def sample_reply(model, episode, stop_ids):
    """Sampled at temperature 1 until a newline (the evaluation's stop) or MAX_REPLY_TOKENS."""
    def next_logits(ids):
        out = model(input_ids=torch.tensor([ids]), past_key_values=episode.cache, use_cache=True)
        episode.fed += len(ids)
        return out.logits[0, -1].float()

    logits = next_logits(episode.ids[episode.fed:])
    reply = []
    while True:
        token = int(torch.multinomial(torch.softmax(logits, dim=-1), 1))
        reply.append(token)
        if token in stop_ids or len(reply) >= MAX_REPLY_TOKENS:
            return reply  # its last token is fed with what follows it
        logits = next_logits([token])


def rollout(model, tokenizer, prompts, seed, newline_id, max_replies=MAX_REPLIES):
    """One episode of training game `seed` played through /env/reset and /env/step."""
    session = Session(seed=seed)
    first = session.reset()
    text = initial_prompt(prompts, first["info"].get("task_type", ""), first["observation"])
    episode = Episode(tokenizer(text, add_special_tokens=False)["input_ids"])
    stop_ids = [newline_id, tokenizer.eos_token_id]
    while episode.replies < max_replies:
        reply_ids = sample_reply(model, episode, stop_ids)
        episode.replies += 1
        episode.add(reply_ids, trained=True)
        if not reply_ids or reply_ids[-1] != newline_id:
            episode.add([newline_id], trained=False)
        action = tokenizer.decode(reply_ids, skip_special_tokens=True).split("\n")[0].strip()
        if is_think(action):
            observation = THINK_OBSERVATION
        else:
            result = session.step(action)
            observation = result["observation"]
            if result["info"].get("won"):
                episode.won = True
            if result["done"]:
                break
        episode.add(tokenizer(after_reply(observation), add_special_tokens=False)["input_ids"], trained=False)
    return episode


def advantages(group):
    rewards = torch.tensor([1.0 if e.won else 0.0 for e in group])
    std = rewards.std()
    return None if std.item() == 0 else ((rewards - rewards.mean()) / (std + 1e-4)).tolist()


def policy_gradient_loss(model, episodes, advs):
    """-A x mean log-prob of the sampled reply tokens, averaged over the episodes."""
    losses = []
    for episode, adv in zip(episodes, advs):
        ids = torch.tensor([episode.ids])
        mask = torch.tensor(episode.mask[1:], dtype=torch.float32)
        logits = model(input_ids=ids).logits[0, :-1]
        logp = torch.log_softmax(logits.float(), dim=-1).gather(1, ids[0, 1:, None])[:, 0]
        losses.append(-adv * (logp * mask).sum() / mask.sum().clamp(min=1))
    return torch.stack(losses).mean()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--lr", type=float, default=2e-4)
    args = parser.parse_args()
    deadline = time.monotonic() + args.seconds
    torch.manual_seed(0)
    rng = random.Random(0)
    prepare_device(args.out + ".work")
    prompts = read_prompts(args.data)
    games = len(train_games(args.data))
    max_replies = min(MAX_REPLIES, eval_max_steps(args.data))
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model)
    newline_id = tokenizer("\n", add_special_tokens=False)["input_ids"][-1]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    updates, played, won = 0, 0, 0
    # An update needs rollouts and a backward pass: stop early enough to save before the allowance ends.
    update_seconds = 0.0
    while time.monotonic() + update_seconds < deadline:
        started = time.monotonic()
        model.eval()
        batch, advs = [], []
        for seed in rng.sample(range(games), GAMES_PER_UPDATE):
            if time.monotonic() >= deadline:
                break
            group = [rollout(model, tokenizer, prompts, seed, newline_id, max_replies) for _ in range(GROUP)]
            played += len(group)
            won += sum(e.won for e in group)
            adv = advantages(group)
            if adv is not None:
                batch += group
                advs += adv
        if batch:
            model.train()
            loss = policy_gradient_loss(model, batch, advs)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            updates += 1
        update_seconds = time.monotonic() - started
        print(f"rollouts {played} (won {won}), updates {updates}, {update_seconds:.1f}s per round", flush=True)
    model.save_pretrained(args.out)  # safetensors only: no pickled training state in the checkpoint
    tokenizer.save_pretrained(args.out)
    print(f"saved {args.out} after {updates} policy-gradient updates on {played} rollouts ({won} won)", flush=True)


if __name__ == "__main__":
    main()
