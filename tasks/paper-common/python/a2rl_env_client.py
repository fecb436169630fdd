"""a2rl's client for the run's environment API (`POST $GRADING_SERVER_URL/env/reset`, `/env/step`).

Shared by the drop-in `alfworld` and `web_agent_site` packages beside it: the agent's training code
imports those as it would the real packages, and every episode it plays goes through the harness,
which records it (RolloutBatchRecorded). Standard library only.
"""
import json
import os
import urllib.error
import urllib.request

TIMEOUT_S = 600


class EnvApiError(RuntimeError):
    """The environment API refused a request or could not be reached; the message is the server's."""


def _base_url():
    url = os.environ.get("GRADING_SERVER_URL", "").rstrip("/")
    if not url:
        raise EnvApiError("GRADING_SERVER_URL is not set: this package talks to the a2rl run's environment API")
    return url


def _post(route, body):
    headers = {"content-type": "application/json"}
    token = os.environ.get("A2RL_RUN_TOKEN")
    if token:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(_base_url() + route, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as err:
        detail = err.read().decode("utf-8", "replace")
        try:
            detail = json.loads(detail).get("error") or detail
        except (ValueError, AttributeError):
            pass
        raise EnvApiError(f"POST {route} answered {err.code}: {detail}") from None
    except urllib.error.URLError as err:
        raise EnvApiError(f"POST {route} failed: {err.reason}") from None


class Session:
    """One episode: `reset()` starts it on the server, `step(action)` plays it until done."""

    def __init__(self, seed=None):
        self.seed = seed
        self.id = None
        self.done = False
        self.last = None
        self.first_info = {}

    def reset(self):
        body = {} if self.seed is None else {"seed": int(self.seed)}
        first = _post("/env/reset", body)
        self.id, self.done = first["session_id"], False
        self.first_info = first.get("info") or {}
        self.last = {"observation": first["observation"], "reward": 0.0, "done": False,
                     "admissible_actions": first.get("admissible_actions", []), "info": self.first_info}
        return self.last

    def step(self, action):
        if self.id is None:
            raise EnvApiError("step before reset")
        if self.done:
            return self.last
        result = _post("/env/step", {"session_id": self.id, "action": str(action)})
        self.done = bool(result.get("done"))
        self.last = {"observation": result["observation"], "reward": float(result.get("reward") or 0.0), "done": self.done,
                     "admissible_actions": result.get("admissible_actions", []), "info": result.get("info") or {}}
        return self.last
