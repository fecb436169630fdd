#!/usr/bin/env python3
"""a2rl environment server: one interactive environment (ALFWorld, WebShop) over HTTP.

The harness starts it as

    python3 env_server.py --backend tasks/<task>/env_backend.py --port <port> [--option key=value ...]

and speaks the a2rl environment protocol, version 1 (JSON bodies; docs/paper-tasks.md):

    GET  /health                          -> {"protocol": 1, "env": str, "splits": {"train": int, "eval": int}}
    POST /reset {"split", "index"}        -> {"session_id", "observation", "admissible_actions", "info"}
    POST /step  {"session_id", "action"}  -> {"observation", "reward", "done", "admissible_actions", "info"}
    POST /close {"session_id"}            -> {"closed": true}

Errors answer {"error": "..."} with 400 (bad request), 401 (token), 404 (unknown session or route),
409 (finished episode), 429 (too many sessions) or 500 (the backend failed). When A2RL_ENV_TOKEN is
set, every route but /health requires "Authorization: Bearer <token>".

A backend is a Python file defining create_backend(options) that returns an object with
`name`, `split_size(split) -> int` and `new_session(split, index) -> session`, where a session has
`reset() -> dict`, `step(action) -> dict` and `close()`. Connections get a thread each (clients
keep connections alive), but requests reach the backend one at a time: environments are not thread-safe.

Standard library only, so it runs in whatever Python environment holds the environment package.
"""
import argparse
import hmac
import importlib.util
import json
import os
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROTOCOL = 1
SPLITS = ("train", "eval")
MAX_BODY = 1 << 20
MAX_SESSIONS = 1024


class RequestError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def load_backend(path, options):
    spec = importlib.util.spec_from_file_location("a2rl_env_backend", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load backend {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.create_backend(options)


def turn(result, with_step):
    """Checks a backend's answer has the protocol's fields and types (a backend bug is a 500)."""
    out = {
        "observation": result["observation"],
        "admissible_actions": list(result.get("admissible_actions") or []),
        "info": dict(result.get("info") or {}),
    }
    if not isinstance(out["observation"], str) or not all(isinstance(a, str) for a in out["admissible_actions"]):
        raise TypeError("observation and admissible_actions must be strings")
    if with_step:
        out["reward"] = float(result["reward"])
        out["done"] = bool(result["done"])
    return out


class Server:
    def __init__(self, backend, token):
        self.backend = backend
        self.token = token
        self.sessions = {}
        self.finished = set()
        self.next_id = 0
        self.lock = threading.Lock()

    def handle(self, method, route, headers, body):
        with self.lock:
            return self.route(method, route, headers, body)

    def route(self, method, route, headers, body):
        if method == "GET" and route == "/health":
            return {"protocol": PROTOCOL, "env": self.backend.name, "splits": {s: int(self.backend.split_size(s)) for s in SPLITS}}
        if self.token is not None:
            presented = headers.get("Authorization", "")
            if not hmac.compare_digest(presented.encode(), f"Bearer {self.token}".encode()):
                raise RequestError(401, "missing or wrong bearer token")
        if method != "POST" or route not in ("/reset", "/step", "/close"):
            raise RequestError(404, f"no route {method} {route}")
        if not isinstance(body, dict):
            raise RequestError(400, "the body must be a JSON object")
        return getattr(self, route[1:])(body)

    def reset(self, body):
        split, index = body.get("split"), body.get("index")
        if split not in SPLITS:
            raise RequestError(400, f"split must be one of {', '.join(SPLITS)}")
        size = int(self.backend.split_size(split))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < size:
            raise RequestError(400, f"index must be an integer in [0, {size}) for split {split}")
        if len(self.sessions) >= MAX_SESSIONS:
            raise RequestError(429, f"{MAX_SESSIONS} sessions are open; close some first")
        session = self.backend.new_session(split, index)
        try:
            first = turn(session.reset(), with_step=False)
        except Exception:
            session.close()
            raise
        self.next_id += 1
        session_id = f"e{self.next_id}"
        self.sessions[session_id] = session
        return {"session_id": session_id, **first}

    def session(self, body):
        session_id = body.get("session_id")
        if not isinstance(session_id, str):
            raise RequestError(400, "session_id must be a string")
        if session_id in self.finished:
            raise RequestError(409, f"session {session_id} has finished its episode")
        if session_id not in self.sessions:
            raise RequestError(404, f"unknown session {session_id}")
        return session_id, self.sessions[session_id]

    def step(self, body):
        session_id, session = self.session(body)
        action = body.get("action")
        if not isinstance(action, str):
            raise RequestError(400, "action must be a string")
        result = turn(session.step(action), with_step=True)
        if result["done"]:
            self.end(session_id)
        return result

    def close(self, body):
        session_id = body.get("session_id")
        if isinstance(session_id, str) and session_id in self.sessions:
            self.end(session_id)
        return {"closed": True}

    def end(self, session_id):
        session = self.sessions.pop(session_id)
        self.finished.add(session_id)
        try:
            session.close()
        except Exception:  # noqa: BLE001 - a session that fails to close is gone either way
            traceback.print_exc()


def make_handler(server):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body are separate writes: without this, delayed ACKs stall every request ~40 ms.
        disable_nagle_algorithm = True

        def do_GET(self):
            self.dispatch("GET")

        def do_POST(self):
            self.dispatch("POST")

        def dispatch(self, method):
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    raise RequestError(413, f"body larger than {MAX_BODY} bytes")
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    raise RequestError(400, "the body is not JSON") from None
                status, answer = 200, server.handle(method, self.path.split("?")[0], self.headers, body)
            except RequestError as err:
                status, answer = err.status, {"error": str(err)}
            except Exception as err:  # noqa: BLE001 - the backend failed: report it, keep serving
                traceback.print_exc()
                status, answer = 500, {"error": f"{type(err).__name__}: {err}"}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    return Handler


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", required=True, help="Python file defining create_backend(options)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="passed to create_backend")
    args = parser.parse_args(argv)
    options = dict(o.split("=", 1) for o in args.option if "=" in o)
    backend = load_backend(args.backend, options)
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(Server(backend, os.environ.get("A2RL_ENV_TOKEN") or None)))
    httpd.daemon_threads = True
    print(f"a2rl env server: {backend.name} on {args.host}:{args.port}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
