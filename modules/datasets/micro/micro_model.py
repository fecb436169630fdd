"""The tiny base model of `a2rl data micro`: a real Hugging Face Llama checkpoint made offline.

A byte-level BPE tokenizer (digits split one by one) is trained with `tokenizers` on the task's
texts; a LlamaForCausalLM of a few hundred thousand parameters is initialised from the seed and
briefly trained on (prompt, target) pairs written in the pack's own evaluation format, with the loss
on the target only. Kept short so the baseline is above zero and far below the ceiling.

Deterministic: one torch thread, deterministic algorithms, seeded initialisation and batch order, and
a fixed number of steps (never a time budget), so the same seed writes the same bytes on the same
machine. Nothing is downloaded: `AutoModelForCausalLM.from_pretrained(dir)` and
`AutoTokenizer.from_pretrained(dir)` load the result offline, without remote code.
"""
import json
import os
import random

SPECIAL = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
EOS = "<|end|>"
PAD = "<|endoftext|>"
# role tag, newline, content, end token: every turn; then the assistant tag when a reply is wanted.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"
)


def render_chat(messages, add_generation_prompt):
    """CHAT_TEMPLATE in Python (the tokenizer renders the same string through Jinja)."""
    text = "".join(f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in messages)
    return text + ("<|assistant|>\n" if add_generation_prompt else "")


def train_tokenizer(texts, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(pattern="\\d", behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def fast_tokenizer(tok, max_length):
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD, bos_token=None, unk_token=None,
                                   model_max_length=max_length, clean_up_tokenization_spaces=False)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(seed, vocab_size, max_positions, eos_id, pad_id, size):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, hidden_size=size["hidden"], intermediate_size=size["hidden"] * 4,
                         num_hidden_layers=size["layers"], num_attention_heads=size["heads"], num_key_value_heads=size["heads"],
                         max_position_embeddings=max_positions, rope_theta=10000.0, tie_word_embeddings=True,
                         bos_token_id=None, eos_token_id=eos_id, pad_token_id=pad_id, torch_dtype="float32")
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def encode_examples(fast, examples, max_length):
    """Each example is [(text, role)] with role True (trained: the loss is on it), False (context) or
    None (a shared prefix, e.g. the few-shot rounds). Returns two lists of (ids, labels, first
    position): `short` leaves the None segments out but starts its positions after them (RoPE sees
    the offsets of the full prompt at a fraction of the cost), `full` keeps everything. An example
    longer than `max_length` tokens is dropped."""
    short, full = [], []
    for segments in examples:
        ids, labels, offset = [], [], 0
        for text, role in segments:
            piece = fast(text, add_special_tokens=False)["input_ids"]
            if role is None and not ids:
                offset += len(piece)
                full_prefix = piece
                continue
            ids += piece
            labels += piece if role else [-100] * len(piece)
        if offset + len(ids) <= max_length:
            short.append((ids, labels, offset))
            if offset:
                full.append((full_prefix + ids, [-100] * offset + labels, 0))
    return short, full


def pretrain(model, short, full, seed, steps, batch_size, lr, pad_id, log=None, full_every=4):
    """AdamW with warm-up and linear decay; every `full_every`-th step trains one whole-prompt example."""
    import torch

    g = random.Random(f"{seed}:pretrain-order")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.98))
    model.train()
    order = []
    for step in range(steps):
        if full and step % full_every == full_every - 1:
            batch = [full[g.randrange(len(full))]]
        else:
            if len(order) < batch_size:
                fresh = list(range(len(short)))
                g.shuffle(fresh)
                order += fresh
            batch = [short[i] for i in order[:batch_size]]
            order = order[batch_size:]
        width = max(len(ids) for ids, _, _ in batch)
        ids = torch.tensor([x + [pad_id] * (width - len(x)) for x, _, _ in batch])
        labels = torch.tensor([y + [-100] * (width - len(y)) for _, y, _ in batch])
        mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x, _, _ in batch])
        positions = torch.tensor([list(range(o, o + width)) for _, _, o in batch])
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / 20) * max(0.1, 1 - step / steps)
        loss = model(input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if log and (step % 50 == 0 or step == steps - 1):
            log(f"step {step} loss {loss.item():.3f}")
    model.eval()


def save(model, fast, out_dir, max_new_tokens):
    import torch
    from transformers import GenerationConfig

    os.makedirs(out_dir, exist_ok=True)
    with torch.no_grad():
        for p in model.parameters():
            p.data = p.data.contiguous()
    model.generation_config = GenerationConfig(do_sample=False, eos_token_id=model.config.eos_token_id,
                                               pad_token_id=model.config.pad_token_id, max_new_tokens=max_new_tokens)
    model.save_pretrained(out_dir, safe_serialization=True)
    fast.save_pretrained(out_dir)
    portable_tokenizer_config(out_dir)


def portable_tokenizer_config(out_dir):
    """The chat template inside tokenizer_config.json and the generic fast class, so older transformers
    releases and vLLM read the tokenizer too (transformers 5 writes chat_template.jinja and its own class name)."""
    path = os.path.join(out_dir, "tokenizer_config.json")
    config = read_json(path)
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["chat_template"] = CHAT_TEMPLATE
    config.pop("backend", None)
    jinja = os.path.join(out_dir, "chat_template.jinja")
    if os.path.exists(jinja):
        os.remove(jinja)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")


def make_model(out_dir, seed, texts, examples, size, max_positions, steps, batch_size, lr, max_new_tokens, log=None):
    """Tokenizer + model + pretraining, saved as a Hugging Face directory. Returns facts for the summary."""
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tok = train_tokenizer(texts, size["vocab"])
    fast = fast_tokenizer(tok, max_positions)
    eos_id, pad_id = tok.token_to_id(EOS), tok.token_to_id(PAD)
    model = build_model(seed, tok.get_vocab_size(), max_positions, eos_id, pad_id, size)
    short, full = encode_examples(fast, examples, max_positions)
    if not short:
        raise RuntimeError("micro generator: no training example fits the model's positions")
    pretrain(model, short, full, seed, steps, batch_size, lr, pad_id, log)
    save(model, fast, out_dir, max_new_tokens)
    return {"parameters": sum(p.numel() for p in model.parameters()), "vocab": tok.get_vocab_size(),
            "examples": len(short), "longestExample": max(o + len(x) for x, _, o in short), "steps": steps}


def greedy(model, fast, prompt, max_new_tokens, stop=None):
    """One greedy completion of `prompt` (text), cut at the first `stop` string."""
    import torch

    ids = torch.tensor([fast(prompt, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
                             eos_token_id=model.config.eos_token_id, pad_token_id=model.config.pad_token_id)
    text = fast.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    if stop and stop in text:
        text = text[: text.index(stop)]
    return text


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)
