"""The CPU inference engine: a checkpoint served by transformers/PyTorch behind the OpenAI routes the
task protocols use (GET /v1/models, POST /v1/completions, POST /v1/chat/completions).

a2rl starts it instead of vLLM where no GPU is held (see modules/serving/serving.config.ts); it takes
vLLM's arguments for what a2rl passes (`<model> --port --served-model-name --enable-lora --lora-modules
name=dir`) and ignores the GPU-only ones, so the serving contract is one for both engines.

Decoding is greedy at temperature 0 and one request is generated at a time (a lock), never batched: a
batch's padding changes the arithmetic, and a regrade must give the same completions. Weights are
loaded from safetensors only and never with remote code: a checkpoint is agent-written data.
"""
import argparse
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

ENGINE = "a2rl-transformers"
MAX_BODY = 8 * 1024 * 1024


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--enable-lora", action="store_true")
    parser.add_argument("--lora-modules", nargs="*", default=[])
    parser.add_argument("--device", default=os.environ.get("A2RL_SERVE_DEVICE", "auto"))
    parser.add_argument("--threads", type=int, default=int(os.environ.get("A2RL_SERVE_THREADS", "0")))
    args, ignored = parser.parse_known_args(argv)
    if ignored:
        print(f"{ENGINE}: ignoring vLLM-only arguments {' '.join(ignored)}", file=sys.stderr, flush=True)
    return args


def pick_device(wanted):
    if wanted != "auto":
        return wanted
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(path, device):
    """Safetensors only (a pickle checkpoint is code), no remote code, local files only."""
    model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=False, use_safetensors=True, local_files_only=True)
    return model.to(device).eval()


def load_tokenizer(path):
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False, local_files_only=True)
    return tokenizer


class Engine:
    """The served models by name (the checkpoint, or the base model and its LoRA adapters)."""

    def __init__(self, args):
        self.device = pick_device(args.device)
        if args.threads > 0:
            torch.set_num_threads(args.threads)
        torch.manual_seed(args.seed)
        self.lock = threading.Lock()
        base_name = args.served_model_name or args.model
        self.tokenizer = load_tokenizer(args.model)
        base = load_model(args.model, self.device)
        self.models = {base_name: (base, None)}
        for spec in args.lora_modules:
            name, _, adapter_dir = spec.partition("=")
            if not name or not adapter_dir:
                raise SystemExit(f"{ENGINE}: --lora-modules expects name=dir, got {spec!r}")
            from peft import PeftModel  # only adapters need peft

            adapted = PeftModel.from_pretrained(load_model(args.model, self.device), adapter_dir, is_trainable=False)
            self.models[name] = (adapted.eval(), base_name)
        self.max_positions = getattr(base.config, "max_position_embeddings", None)
        self.versions = {"engine": ENGINE, "transformers": transformers.__version__, "torch": torch.__version__, "device": self.device}

    def model_list(self):
        return [
            {"id": name, "object": "model", "owned_by": "a2rl", "parent": parent, **self.versions}
            for name, (_, parent) in self.models.items()
        ]

    def complete(self, name, prompt_ids, max_tokens, stop, temperature, seed):
        model, _ = self.models[name]
        if self.max_positions and len(prompt_ids) >= self.max_positions:
            raise ValueError(f"the prompt has {len(prompt_ids)} tokens; this model's context is {self.max_positions}")
        if self.max_positions:
            max_tokens = min(max_tokens, self.max_positions - len(prompt_ids))
        with self.lock, torch.inference_mode():
            torch.manual_seed(seed)
            return self._generate(model, prompt_ids, max_tokens, stop, temperature)

    def _generate(self, model, prompt_ids, max_tokens, stop, temperature):
        ids = torch.tensor([prompt_ids], device=self.device)
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} if temperature > 0 else {"do_sample": False}
        output = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_tokens,
            stop_strings=stop or None,
            tokenizer=self.tokenizer,
            pad_token_id=self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id,
            **sampling,
        )
        new = output[0, len(prompt_ids):].tolist()
        eos = set(_as_list(self.tokenizer.eos_token_id)) | set(_as_list(getattr(model.generation_config, "eos_token_id", None)))
        ended = bool(new) and new[-1] in eos
        produced = len(new)
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        cut = _stop_at(text, stop)
        if cut is not None:
            text = text[:cut]
        finish = "stop" if ended or cut is not None else "length"
        return text, produced, finish


def _as_list(value):
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _stop_at(text, stop):
    cuts = [text.find(s) for s in stop if s and s in text]
    return min(cuts) if cuts else None


class BadRequest(Exception):
    pass


def sampling(body):
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens", 256))
    temperature = body.get("temperature", 0) or 0
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest("max_tokens must be a positive integer")
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise BadRequest("temperature must be a number >= 0")
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest("stop must be a string or a list of strings")
    if body.get("n", 1) != 1:
        raise BadRequest("only n=1 is served")
    return max_tokens, stop, float(temperature), int(body.get("seed", 0) or 0)


def make_handler(engine):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                return self.reply(200, {"object": "list", "data": engine.model_list()})
            if self.path.rstrip("/") in ("/health", "/version"):
                return self.reply(200, engine.versions)
            return self.reply(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            try:
                body = self.read_json()
                route = self.path.rstrip("/")
                if route == "/v1/completions":
                    return self.reply(200, self.completion(body))
                if route == "/v1/chat/completions":
                    return self.reply(200, self.chat(body))
                return self.reply(404, {"error": {"message": f"no route {self.path}"}})
            except BadRequest as err:
                return self.reply(400, {"error": {"message": str(err), "type": "BadRequestError"}})
            except ValueError as err:
                return self.reply(400, {"error": {"message": str(err), "type": "BadRequestError"}})

        def read_json(self):
            length = int(self.headers.get("content-length") or 0)
            if length <= 0 or length > MAX_BODY:
                raise BadRequest("a JSON body of at most 8 MiB is required")
            try:
                body = json.loads(self.rfile.read(length))
            except json.JSONDecodeError as err:
                raise BadRequest(f"the body is not JSON: {err}")
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            return body

        def model_name(self, body):
            name = body.get("model")
            if name not in engine.models:
                raise BadRequest(f"the model {name!r} is not served here (served: {', '.join(engine.models)})")
            return name

        def completion(self, body):
            name = self.model_name(body)
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                raise BadRequest("prompt must be one string")
            ids = engine.tokenizer(prompt, add_special_tokens=True)["input_ids"]
            text, produced, finish = engine.complete(name, ids, *sampling(body))
            choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
            return self.envelope("text_completion", name, choice, len(ids), produced)

        def chat(self, body):
            name = self.model_name(body)
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise BadRequest("messages must be a non-empty list")
            if engine.tokenizer.chat_template is None:
                raise BadRequest("the checkpoint's tokenizer has no chat template")
            ids = engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
            text, produced, finish = engine.complete(name, list(ids), *sampling(body))
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            return self.envelope("chat.completion", name, choice, len(ids), produced)

        def envelope(self, kind, name, choice, prompt_tokens, completion_tokens):
            return {
                "id": f"cmpl-{uuid.uuid4().hex}",
                "object": kind,
                "created": int(time.time()),
                "model": name,
                "choices": [choice],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
                "system_fingerprint": f"{ENGINE}-{transformers.__version__}-torch-{torch.__version__}-{engine.device}",
            }

        def reply(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main(argv):
    args = parse_args(argv)
    engine = Engine(args)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(engine))
    server.daemon_threads = True
    print(f"{ENGINE}: serving {', '.join(engine.models)} on {args.host}:{args.port} ({engine.versions})", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
