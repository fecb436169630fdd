"""a2rl backend for tasks/paper-common/env_server.py: WebShop (github.com/princeton-nlp/WebShop), text mode.

Started by the harness as

    python3 tasks/paper-common/env_server.py --backend tasks/webshop/env_backend.py --port <port> [--option key=value ...]

with the WebShop checkout (after its setup.sh: product files, search index) on PYTHONPATH.

Targets WebShop's main branch (2022-2023), whose text environment is
`web_agent_site.envs.web_agent_text_env.WebAgentTextEnv(observation_mode, file_path, server=None, **kwargs)`
with kwargs `num_products` and `human_goals`, `reset(session=<int>)` playing goal <int> of the
simulated server's goal list (shuffled with a fixed seed), `step(action) -> (observation, reward,
done, info)`, `get_available_actions() -> {"has_search_bar", "clickables"}`, and the simulated server
(product store + search engine) at `env.server` with its goals in `env.server.goals`.
a2rl's CI has no WebShop: this file is tested there against a stub package of the same API shape
(test/servers/stubs, tasks/webshop/env-backend.spec.ts), never against the real one.

The environment is built as the paper's harness builds it (tasks/webshop/protocol.json, settings.environment):
`WebAgentTextEnv(observation_mode="text", num_products=1000)` without human goals, i.e. WebShop's synthetic
goals of the 1,000-product set (items_shuffle_1000.json + items_ins_v2_1000.json, search index indexes_1k),
which WebShop itself orders with `random.seed(233); random.shuffle(goals)`; `reset(session=i)` plays goal i.

Splits:
    eval   goals 0..99 (the private sessions, the harness's instruction_idxs 0..99)
    train  goals from 1500 on (never an eval goal)

Options (--option key=value):
    num_products     products to load (default 1000, the paper's; WebShop also has indexes for 100 and 100000;
                     "all" passes none: WebShop's full set)
    human_goals      0 (default, the paper's): WebShop's synthetic goals; 1: the human-written instructions
    price_seed       seed of Python's global random generator, set before the environment is built
                     (default 0). WebShop draws multi-price products' prices and each goal's price limit from
                     that generator; the paper's harness never seeds it. "none" leaves it unseeded.
    invalid_actions  pass (default, the paper's): every action goes to WebShop, which ignores one the page does
                     not offer; refuse: such an action is answered "Invalid action!" with the page unchanged
    train_start      first train goal (default 1500)
    train_size       train goals (default: every goal from train_start on)

Every reset and step answer carries info.available (WebShop's get_available_actions() of the page) and the
reset info.instruction (get_instruction_text()), which the evaluation prompt shows. Standard library + WebShop only.
"""
import random
import re
import sys

EVAL_SESSIONS = 100
DEFAULT_TRAIN_START = 1500
INVALID = "Invalid action!"
ACTION = re.compile(r"^(search|click)\[(.*)\]$", re.DOTALL)


def query(text):
    """A search query as WebShop can take it: its action parser splits at the last "[", so no brackets."""
    return " ".join(re.sub(r"[\[\]]", " ", text).split())


def load_text_env_class():
    try:
        from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv
    except ImportError as err:
        raise ImportError(
            f"cannot import web_agent_site ({err}): clone https://github.com/princeton-nlp/WebShop, run its setup.sh "
            "and put the checkout on PYTHONPATH (or point A2RL_ENV_WEBSHOP_COMMAND at a Python that has it)"
        ) from err
    return WebAgentTextEnv


class WebshopBackend:
    name = "webshop"

    def __init__(self, options):
        self.env_class = load_text_env_class()
        self.env_kwargs = {"observation_mode": "text"}
        products = options.get("num_products", "1000")
        if products != "all":
            self.env_kwargs["num_products"] = int(products)
        # The paper's harness passes no human_goals: WebShop then uses its synthetic goals.
        if options.get("human_goals", "0") == "1":
            self.env_kwargs["human_goals"] = True
        seed = options.get("price_seed", "0")
        self.price_seed = None if seed == "none" else int(seed)
        self.invalid_actions = options.get("invalid_actions", "pass")
        if self.invalid_actions not in ("pass", "refuse"):
            raise SystemExit(f"invalid_actions must be pass or refuse, not {self.invalid_actions!r}")
        # The first environment builds the product store and search engine (slow); later ones share it.
        first = self.build_env()
        self.server = getattr(first, "server", None)
        self.share_server = self.server is not None
        self.idle = [first]
        self.opened = 0
        goals = len(self.server.goals) if self.server is not None else 0
        train_start = int(options.get("train_start", DEFAULT_TRAIN_START))
        self.offsets = {"eval": 0, "train": train_start}
        self.sizes = {
            "eval": min(EVAL_SESSIONS, goals, train_start),
            "train": int(options["train_size"]) if "train_size" in options else max(0, goals - train_start),
        }
        # Only an explicit train_size can overshoot; by default fewer goals than train_start give an empty train split.
        if "train_size" in options and self.offsets["train"] + self.sizes["train"] > goals:
            raise SystemExit(f"train_start + train_size exceeds the {goals} WebShop goals loaded")
        print(f"webshop backend: {goals} goals, eval {self.sizes['eval']}, train {self.sizes['train']} (from {train_start})", flush=True)
        if self.sizes["eval"] < EVAL_SESSIONS or self.sizes["train"] == 0:
            print("webshop backend: WARNING fewer goals than the paper setting (1,000 products, synthetic goals) gives", file=sys.stderr, flush=True)

    def build_env(self, **extra):
        """A new environment; a new store (no shared server) draws its prices from a re-seeded generator too."""
        if self.price_seed is not None and "server" not in extra:
            random.seed(self.price_seed)
        return self.env_class(**extra, **self.env_kwargs)

    def split_size(self, split):
        return self.sizes[split]

    def take_env(self):
        if self.idle:
            return self.idle.pop()
        if self.share_server:
            try:
                return self.build_env(server=self.server)
            except TypeError:
                # A WebShop version without the `server` argument: one store per session (slow, memory-hungry).
                self.share_server = False
        return self.build_env()

    def new_session(self, split, index):
        self.opened += 1
        return WebshopSession(self, self.take_env(), split, index, self.offsets[split] + index, f"a2rl{self.opened}-")

    def release(self, env, session_id):
        user_sessions = getattr(getattr(env, "server", None), "user_sessions", None)
        if isinstance(user_sessions, dict):
            user_sessions.pop(session_id, None)
        self.idle.append(env)


class WebshopSession:
    def __init__(self, backend, env, split, index, goal, prefix):
        self.backend, self.env = backend, env
        self.info = {"session": index, "split": split, "goal_index": goal}
        self.goal = goal
        # A unique WebShop session id per episode: the simulated server keys its per-session state by id,
        # and the same goal may be played by several episodes at once. The int still picks the goal.
        self.prefix = prefix
        self.available = {"has_search_bar": False, "clickables": []}
        self.closed = False

    def instruction(self):
        try:
            return self.env.get_instruction_text()
        except Exception:  # noqa: BLE001 - the evaluation reads it off the first page instead
            return None

    def refresh(self):
        available = self.env.get_available_actions()
        self.available = {"has_search_bar": bool(available.get("has_search_bar")), "clickables": list(available.get("clickables") or [])}
        actions = ["search[<query>]"] if self.available["has_search_bar"] else []
        # WebShop refuses click[search] (the search button): only the search action uses it.
        return actions + [f"click[{c}]" for c in self.available["clickables"] if c != "search"]

    def reset(self):
        self.env.session_prefix = self.prefix
        observation, _ = self.env.reset(session=self.goal)
        actions = self.refresh()
        return {"observation": observation, "admissible_actions": actions,
                "info": {**self.info, "instruction": self.instruction(), "available": dict(self.available)}}

    def valid(self, action):
        match = ACTION.match(action.strip())
        if match is None:
            return False
        kind, arg = match.group(1), match.group(2).strip().lower()
        if kind == "search":
            return self.available["has_search_bar"] and query(arg) != ""
        return arg != "search" and arg in self.available["clickables"]

    def step(self, action):
        if self.backend.invalid_actions == "refuse":
            if not self.valid(action):
                actions = self.refresh()
                return {"observation": INVALID, "reward": 0.0, "done": False, "admissible_actions": actions,
                        "info": {**self.info, "invalid": True, "available": dict(self.available)}}
            kind, arg = ACTION.match(action.strip()).groups()
            action = f"{kind}[{query(arg) if kind == 'search' else arg.strip()}]"
        # pass: the action exactly as the model wrote it, as the paper's harness sends it.
        observation, reward, done, _ = self.env.step(action)
        actions = [] if done else self.refresh()
        info = dict(self.info) if done else {**self.info, "available": dict(self.available)}
        return {"observation": observation, "reward": float(reward or 0.0), "done": bool(done), "admissible_actions": actions, "info": info}

    def close(self):
        if not self.closed:
            self.closed = True
            self.backend.release(self.env, getattr(self.env, "session", None))


def create_backend(options):
    return WebshopBackend(options)
