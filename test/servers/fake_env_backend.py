"""A scripted stand-in for the ALFWorld and WebShop backends of tasks/paper-common/env_server.py.

Deterministic games in each environment's text format, small enough to script a "model" for:

    --option kind=alfworld|webshop   which environment to imitate (default alfworld)
    --option train=N --option eval=M split sizes (default 12 and 6)
    --option crash_after=K           every step after the K-th served step raises (a backend failure)
    --option startup_delay=S         sleep S seconds before serving (never ready within a short timeout)
    --option ignore_sigterm=1        survive SIGTERM (the harness must SIGKILL)

ALFWorld-like game i (task type TYPES[i % 6]): the goal object lies on countertop 1; won by
"go to countertop 1", "take <obj> 1 from countertop 1", "go to <rec> 1", "put <obj> 1 in/on <rec> 1".
WebShop-like session i: the goal product is FAKE<i>; bought with "search[...]", "click[fake<i>]",
"click[buy now]" (reward 1.0); buying another product gives reward 0.25, "click[buy now]" on the
results page is invalid.
"""
import signal
import time

TYPES = ["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
         "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place"]
OBJECTS = ["mug", "apple", "book", "pen", "plate", "egg", "cup"]
RECEPTACLES = ["cabinet", "fridge", "shelf", "drawer", "sinkbasin"]


def alfworld_game(split, index):
    offset = 0 if split == "train" else 1000
    obj = OBJECTS[(index + offset) % len(OBJECTS)]
    rec = RECEPTACLES[(index + offset) % len(RECEPTACLES)]
    return {
        "task_type": TYPES[index % len(TYPES)],
        "obj": obj,
        "rec": rec,
        "goal": f"put some {obj} in {rec}",
        "solution": ["go to countertop 1", f"take {obj} 1 from countertop 1", f"go to {rec} 1", f"put {obj} 1 in/on {rec} 1"],
        "replies": [f"You arrive at countertop 1. On the countertop 1, you see a {obj} 1.",
                    f"You pick up the {obj} 1 from the countertop 1.",
                    f"You arrive at {rec} 1. The {rec} 1 is open; you carry the {obj} 1.",
                    f"You put the {obj} 1 in/on the {rec} 1."],
    }


class AlfworldSession:
    MAX_STEPS = 50

    def __init__(self, split, index):
        self.split, self.index = split, index
        self.game = alfworld_game(split, index)
        self.progress = 0
        self.steps = 0

    def actions(self):
        g = self.game
        return ["look", "inventory", "go to countertop 1", f"go to {g['rec']} 1", f"take {g['obj']} 1 from countertop 1",
                f"put {g['obj']} 1 in/on {g['rec']} 1"]

    def reset(self):
        g = self.game
        observation = (f"You are in the middle of a room. Looking quickly around you, you see a countertop 1, a {g['rec']} 1.\n\n"
                       f"Your task is to: {g['goal']}.")
        info = {"task_type": g["task_type"], "game": f"{self.split}/{g['task_type']}-{self.index}/trial_0/game.tw-pddl",
                "expert_plan": g["solution"][:1]}
        return {"observation": observation, "admissible_actions": self.actions(), "info": info}

    def step(self, action):
        self.steps += 1
        g = self.game
        if self.progress < len(g["solution"]) and action == g["solution"][self.progress]:
            observation = g["replies"][self.progress]
            self.progress += 1
        else:
            observation = "Nothing happens."
        won = self.progress == len(g["solution"])
        done = won or self.steps >= self.MAX_STEPS
        plan = g["solution"][self.progress:self.progress + 1]
        return {"observation": observation, "reward": 1.0 if won else 0.0, "done": done,
                "admissible_actions": [] if done else self.actions(), "info": {"won": won, "expert_plan": plan}}

    def close(self):
        pass


class WebshopSession:
    def __init__(self, split, index):
        self.split, self.index = split, index
        self.target = f"fake{index}"
        self.page = "search"
        self.product = None

    def reset(self):
        return {"observation": f"WebShop [SEP] Instruction: [SEP] i need the product FAKE{self.index}, price lower than 50.00 dollars [SEP] Search",
                "admissible_actions": ["search[<query>]"], "info": {"session": self.index}}

    def page_answer(self, observation, clickables, reward=0.0, done=False):
        actions = [] if done else (["search[<query>]"] if self.page == "search" else []) + [f"click[{c}]" for c in clickables]
        return {"observation": observation, "reward": reward, "done": done, "admissible_actions": actions, "info": {"session": self.index}}

    def step(self, action):
        if action.startswith("search[") and action.endswith("]") and self.page == "search":
            self.page = "results"
            products = sorted({self.target, f"fake{self.index + 1}", f"fake{self.index + 2}"})
            listing = " [SEP] ".join(f"{p} [SEP] Product {p.upper()} [SEP] $10.00" for p in products)
            return self.page_answer(f"[Back to Search] [SEP] Page 1 (Total results: 3) [SEP] {listing}", ["back to search"] + products)
        if action.startswith("click[") and action.endswith("]"):
            what = action[len("click["):-1]
            if what == "back to search":
                self.page = "search"
                return self.page_answer("WebShop [SEP] Search", [])
            if self.page == "results" and what.startswith("fake"):
                self.page, self.product = "item", what
                return self.page_answer(f"[Back to Search] [SEP] [< Prev] [SEP] Product {what.upper()} [SEP] Price: $10.00 [SEP] Buy Now",
                                        ["back to search", "< prev", "buy now"])
            if self.page == "item" and what == "buy now":
                reward = 1.0 if self.product == self.target else 0.25
                return self.page_answer(f"Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] {reward}", [], reward, True)
        return self.page_answer("Invalid action!", [])

    def close(self):
        pass


class FakeBackend:
    def __init__(self, options):
        self.kind = options.get("kind", "alfworld")
        self.name = f"fake-{self.kind}"
        self.sizes = {"train": int(options.get("train", 12)), "eval": int(options.get("eval", 6))}
        self.crash_after = int(options["crash_after"]) if "crash_after" in options else None
        self.served = 0

    def split_size(self, split):
        return self.sizes[split]

    def new_session(self, split, index):
        session = (AlfworldSession if self.kind == "alfworld" else WebshopSession)(split, index)
        backend = self
        step = session.step

        def counted(action):
            backend.served += 1
            if backend.crash_after is not None and backend.served > backend.crash_after:
                raise RuntimeError("fake backend crashed")
            return step(action)

        session.step = counted
        return session


def create_backend(options):
    if options.get("ignore_sigterm") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "startup_delay" in options:
        time.sleep(float(options["startup_delay"]))
    return FakeBackend(options)
