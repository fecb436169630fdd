"""web_agent_site.envs.web_agent_text_env (a2rl drop-in): WebAgentTextEnv in "text" observation mode.

As WebShop's: `reset(session=None)` -> (observation, None), an int session picking a training goal;
`step(action)` -> (observation, reward, done, None) for "search[...]" / "click[...]";
`get_available_actions()` -> {"has_search_bar", "clickables"}. The goals are the harness's training
goals (the evaluation goals are held out); the product store runs in the harness.
"""
import re

from a2rl_env_client import Session

INSTRUCTION = re.compile(r"Instruction:\s*\[SEP\]\s*(.*?)\s*\[SEP\]", re.DOTALL)


class WebAgentTextEnv:
    def __init__(self, observation_mode="text", file_path=None, server=None, **kwargs):
        if observation_mode not in ("text", "text_rich"):
            raise ValueError(f"observation_mode {observation_mode!r} is not served by the a2rl harness: use 'text'")
        self.observation_mode = observation_mode
        self.kwargs = kwargs
        self.session = kwargs.get("session")
        self.current = None
        self.state = None
        self.observation = None
        self.instruction_text = None

    def reset(self, session=None, instruction_text=None):
        chosen = session if session is not None else self.session
        self.current = Session(None if chosen is None else int(chosen))
        self.state = self.current.reset()
        self.observation = self.state["observation"]
        match = INSTRUCTION.search(self.observation)
        self.instruction_text = instruction_text or (match.group(1) if match else None)
        return self.observation, None

    def step(self, action):
        if self.current is None:
            raise RuntimeError("step before reset")
        self.state = self.current.step(action)
        self.observation = self.state["observation"]
        return self.observation, self.state["reward"], self.state["done"], None

    def get_available_actions(self):
        actions = self.state["admissible_actions"] if self.state else []
        has_search_bar = any(a.startswith("search[") for a in actions)
        clickables = [a[len("click["):-1] for a in actions if a.startswith("click[") and a.endswith("]")]
        return {"has_search_bar": has_search_bar, "clickables": (["search"] if has_search_bar else []) + clickables}

    def get_instruction_text(self):
        return self.instruction_text

    def close(self):
        self.current = None
