"""TEST STUB of `web_agent_site.envs.web_agent_text_env` (WebAgentTextEnv, SimServer, SimBrowser), NOT the real WebShop.

Written for a2rl's tests. Shapes as in WebShop's main branch:
- WebAgentTextEnv(observation_mode="html", file_path=..., server=None, **kwargs) with kwargs
  num_products, human_goals, filter_goals, limit_goals, session, session_prefix...; it builds a
  SimServer (products, goals, search engine) unless one is passed as `server`, and resets once.
- reset(session=None) -> (observation, None): an int session plays goal <int> of server.goals (the goal
  list shuffled with seed 233), the session id is str(session) behind `session_prefix`; the simulated
  server keeps per-session state in server.user_sessions[session id].
- step(action) -> (observation, reward, done, None): the argument of "name[arg]" is lower-cased;
  search[...] searches (from any page), click[x] acts only when x is a clickable of the current page
  and not "search"; anything else changes nothing (reward 0, not done).
- get_available_actions() -> {"has_search_bar": bool, "clickables": [...]}: button and product-link
  texts lower-cased (buttons first), then the option values of an item page.
- "text" observations: the page's visible texts joined by " [SEP] " (search page
  "WebShop [SEP] Instruction: [SEP] <goal> [SEP] Search"; results, item, sub and done pages).
Stub-only: pages are built directly instead of rendered HTML; only observation modes "text" and "url";
limit_goals keeps the first goals (WebShop samples them by weight); the catalogue, goals and rewards
of ../engine.

Test knobs: A2RL_STUB_WEBSHOP_LOG=<file> appends JSON lines ({"event": "server"|"env"|"reset", ...});
A2RL_STUB_WEBSHOP_NO_SERVER_ARG=1 makes WebAgentTextEnv a version without the `server` argument
(explicit keyword arguments, no **kwargs), so passing server= raises TypeError.
"""
import itertools
import json
import os
import random
import string
from collections import defaultdict

from web_agent_site.engine.engine import (BACK_TO_SEARCH, END_BUTTON, NEXT_PAGE, PREV_PAGE, SUB_PAGES, get_product_per_page,
                                          get_top_n_product_from_keywords, init_search_engine, load_products, parse_action)
from web_agent_site.engine.goal import get_goals, get_reward

DEFAULT_FILE_PATH = "data/items_shuffle.json"
_server_ids = itertools.count(1)


def log(event, **fields):
    path = os.environ.get("A2RL_STUB_WEBSHOP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, **fields}) + "\n")


class Clickable:
    """A button, a product link or a buying option (a radio input named after its option)."""

    def __init__(self, kind, name=None):
        self.kind = kind
        self.name = name


class Page:
    def __init__(self, texts, instruction, buttons=(), links=(), options=(), search_bar=False):
        self.texts = list(texts)
        self.instruction = instruction
        self.buttons = list(buttons)
        self.links = list(links)
        self.options = list(options)  # (option name, value)
        self.search_bar = search_bar


class SimServer:
    def __init__(self, base_url, file_path, filter_goals=None, limit_goals=-1, num_products=None, human_goals=0, show_attrs=False):
        self.base_url = base_url
        self.all_products, self.product_item_dict, self.product_prices, _ = load_products(file_path, num_products, human_goals)
        self.search_engine = init_search_engine(num_products, self.all_products)
        self.goals = get_goals(self.all_products, self.product_prices, human_goals)
        self.show_attrs = show_attrs
        random.Random(233).shuffle(self.goals)
        if filter_goals is not None:
            self.goals = [g for i, g in enumerate(self.goals) if filter_goals(i, g)]
        if limit_goals != -1 and limit_goals < len(self.goals):
            self.goals = self.goals[:limit_goals]
        self.user_sessions = dict()
        self.stub_id = next(_server_ids)
        log("server", server=self.stub_id, goals=len(self.goals), num_products=num_products, human_goals=bool(human_goals))

    def _header(self, session):
        keywords = " ".join(session["keywords"] or [])
        return [f"Instruction: {session['goal']['instruction_text']}", f"Current Query: {keywords}"]

    def index(self, session_id, instruction_text):
        page = Page(["WebShop", "Instruction:", instruction_text, "Search"], instruction_text,
                    buttons=["Search"], search_bar=True)
        return page, f"{self.base_url}/{session_id}"

    def search_results(self, session_id, keywords, page=1, **_):
        session = self.user_sessions[session_id]
        session.update(page=page, keywords=keywords, asin=None, options={})
        session["actions"]["search"] += 1
        top = get_top_n_product_from_keywords(keywords, self.search_engine)
        shown = get_product_per_page(top, page)
        buttons = [BACK_TO_SEARCH] + ([PREV_PAGE] if page > 1 else []) + ([NEXT_PAGE] if page * 10 < len(top) else [])
        texts = self._header(session) + ["Results", f"Page {page} ({(page - 1) * 10 + 1}-{page * 10}) of {len(top)} total results"] + buttons
        for p in shown:
            texts += [p["asin"], p["Title"], p["Price"]]
        result = Page(texts, session["goal"]["instruction_text"], buttons=buttons, links=[p["asin"] for p in shown])
        return result, f"{self.base_url}/search_results/{session_id}/{'+'.join(keywords)}/{page}"

    def item_page(self, session_id, clickable_name, text_to_clickable, **_):
        session = self.user_sessions[session_id]
        clickable = text_to_clickable[clickable_name]
        if clickable.kind == "product-link":
            session["asin"] = clickable_name.upper()
            session["asins"].add(session["asin"])
        elif clickable.kind == "option":
            session["options"][clickable.name] = clickable_name
        product = self.product_item_dict[session["asin"]]
        texts = self._header(session) + [BACK_TO_SEARCH, PREV_PAGE]
        options = []
        for option_name, values in product["options"].items():
            texts += [option_name] + values
            options += [(option_name, v) for v in values]
        subs = [s for s in SUB_PAGES if s != "Attributes" or self.show_attrs]
        texts += [product["Title"], f"Price: {product['Price']}", f"Rating: {product['Rating']}"] + subs + [END_BUTTON]
        page = Page(texts, session["goal"]["instruction_text"], buttons=[BACK_TO_SEARCH, PREV_PAGE] + subs + [END_BUTTON], options=options)
        url = f"{self.base_url}/item_page/{session_id}/{session['asin']}/{'+'.join(session['keywords'] or [])}/{session['page']}/{json.dumps(session['options'])}"
        return page, url

    def item_sub_page(self, session_id, clickable_name, **_):
        session = self.user_sessions[session_id]
        name = next(s for s in SUB_PAGES if s.lower() == clickable_name.lower())
        product = self.product_item_dict[session["asin"]]
        content = {"Description": [product["Description"]], "Features": product["BulletPoints"],
                   "Reviews": [], "Attributes": product["Attributes"]}[name]
        texts = self._header(session) + [BACK_TO_SEARCH, PREV_PAGE, name] + content
        page = Page(texts, session["goal"]["instruction_text"], buttons=[BACK_TO_SEARCH, PREV_PAGE])
        return page, f"{self.base_url}/item_sub_page/{session_id}/{session['asin']}/{'+'.join(session['keywords'] or [])}/{session['page']}/{name}/{session['options']}"

    def done(self, session_id, **_):
        session = self.user_sessions[session_id]
        product = self.product_item_dict[session["asin"]]
        reward = get_reward(product, session["goal"], price=self.product_prices[session["asin"]], options=session["options"])
        session.update(done=True, reward=reward)
        texts = ["Thank you for shopping with us!", "Your code:", "None", "(Paste it in your MTurk interface.)",
                 "Purchased", "asin", session["asin"], "options", json.dumps(session["options"]),
                 "Your score (min 0.0, max 1.0)", str(reward)]
        return Page(texts, session["goal"]["instruction_text"]), f"{self.base_url}/done/{session_id}/{session['asin']}/{session['options']}", reward

    def receive(self, session_id, current_url, session_int=None, **kwargs):
        status = dict(reward=0.0, done=False)
        if session_id not in self.user_sessions:
            index = session_int if isinstance(session_int, int) else random.randrange(len(self.goals))
            self.user_sessions[session_id] = {"goal": self.goals[index], "done": False}
        session = self.user_sessions[session_id]
        if not kwargs:
            page, url = self.index(session_id, session["goal"]["instruction_text"])
            session.update(keywords=None, page=None, asin=None, asins=set(), options=dict(), actions=defaultdict(int))
            return page, url, status
        if "keywords" in kwargs:
            page, url = self.search_results(session_id, **kwargs)
            return page, url, status
        name = kwargs["clickable_name"].lower()
        where = self.get_page_name(current_url)
        if name == END_BUTTON.lower():
            page, url, reward = self.done(session_id, **kwargs)
            return page, url, dict(reward=reward, done=True)
        if name == BACK_TO_SEARCH.lower():
            return self.receive(session_id, current_url)
        if name in (NEXT_PAGE.lower(), PREV_PAGE.lower()) and where == "search_results":
            step = 1 if name == NEXT_PAGE.lower() else -1
            return self.receive(session_id, current_url, keywords=session["keywords"], page=session["page"] + step)
        if name == PREV_PAGE.lower() and where == "item_sub_page":
            page, url = self.item_page(session_id, **kwargs)
        elif name == PREV_PAGE.lower() and where == "item_page":
            page, url = self.search_results(session_id, keywords=session["keywords"], page=session["page"])
        elif name in [s.lower() for s in SUB_PAGES]:
            page, url = self.item_sub_page(session_id, **kwargs)
        else:
            page, url = self.item_page(session_id, **kwargs)
        return page, url, status

    @staticmethod
    def get_page_name(url):
        if url is None:
            return None
        return next((name for name in ("search_results", "item_page", "item_sub_page", "done") if f"/{name}/" in url), "")


class SimBrowser:
    def __init__(self, server):
        self.server = server
        self.current_url = None
        self.page_source = None
        self.session_id = None

    def get(self, url, session_id=None, session_int=None):
        self.session_id = url.split("/")[-1] if session_id is None else session_id
        self.page_source, _, _ = self.server.receive(self.session_id, self.current_url, session_int=session_int)
        self.current_url = url

    def click(self, clickable_name, text_to_clickable):
        self.page_source, self.current_url, status = self.server.receive(
            self.session_id, current_url=self.current_url, clickable_name=clickable_name, text_to_clickable=text_to_clickable)
        return status

    def search(self, keywords):
        if isinstance(keywords, str):
            keywords = keywords.split(" ")
        self.page_source, self.current_url, status = self.server.receive(self.session_id, current_url=self.current_url, keywords=keywords)
        return status


class WebAgentTextEnv:
    """Gym-style text environment of WebShop (the stub does not subclass gym.Env)."""

    def __init__(self, observation_mode="html", file_path=DEFAULT_FILE_PATH, server=None, **kwargs):
        self._setup(observation_mode, file_path, server, kwargs)

    def _setup(self, observation_mode, file_path, server, kwargs):
        self.observation_mode = observation_mode
        self.kwargs = kwargs
        self.file_path = file_path
        self.base_url = "http://127.0.0.1:3000"
        given = server is not None
        self.server = server if given else SimServer(self.base_url, file_path, kwargs.get("filter_goals"), kwargs.get("limit_goals", -1),
                                                     kwargs.get("num_products"), kwargs.get("human_goals"), kwargs.get("show_attrs", False))
        self.browser = SimBrowser(self.server)
        self.session = kwargs.get("session")
        self.session_prefix = kwargs.get("session_prefix")
        self.text_to_clickable = None
        self.prev_obs = []
        self.prev_actions = []
        self.num_prev_obs = kwargs.get("num_prev_obs", 0)
        self.num_prev_actions = kwargs.get("num_prev_actions", 0)
        log("env", server=self.server.stub_id, server_given=given)
        self.reset()

    @property
    def state(self):
        return dict(url=self.browser.current_url, html=self.browser.page_source, instruction_text=self.instruction_text)

    @property
    def observation(self):
        if self.observation_mode == "text":
            return " [SEP] ".join(t.strip() for t in self.browser.page_source.texts if t.strip())
        if self.observation_mode == "url":
            return self.browser.current_url
        raise NotImplementedError(f"webshop stub: observation mode {self.observation_mode} is not stubbed (only text, url)")

    def get_available_actions(self):
        page = self.browser.page_source
        self.text_to_clickable = {b.lower(): Clickable("button") for b in page.buttons}
        self.text_to_clickable.update({link.lower(): Clickable("product-link") for link in page.links})
        for option_name, value in page.options:
            self.text_to_clickable[value] = Clickable("option", option_name)
        return dict(has_search_bar=page.search_bar, clickables=list(self.text_to_clickable))

    def get_instruction_text(self):
        return self.browser.page_source.instruction

    def step(self, action):
        info = None
        self.get_available_actions()
        action_name, action_arg = parse_action(action)
        if action_arg is not None:
            action_arg = action_arg.lower()
        if action_name == "search" and action_arg is not None and action_arg != "":
            status = self.browser.search(action_arg)
        elif action_name == "click" and action_arg in self.text_to_clickable and action_arg != "search":
            status = self.browser.click(action_arg, self.text_to_clickable)
        else:
            status = dict(reward=0, done=False)
        ob = self.observation
        texts = [ob]
        self.prev_actions.append(action)
        for i in range(1, 1 + max(self.num_prev_obs, self.num_prev_actions)):
            if len(self.prev_actions) >= i and self.num_prev_actions >= i:
                texts.append(self.prev_actions[-i])
            if len(self.prev_obs) >= i and self.num_prev_obs >= i:
                texts.append(self.prev_obs[-i])
        self.prev_obs.append(ob)
        return " [SEP] ".join(texts[::-1]), status["reward"], status["done"], info

    def reset(self, session=None, instruction_text=None):
        session_int = None
        if session is not None:
            self.session = str(session)
            if isinstance(session, int):
                session_int = session
        else:
            self.session = "".join(random.choices(string.ascii_lowercase, k=10))
        if self.session_prefix is not None:
            self.session = self.session_prefix + self.session
        self.browser.get(f"{self.base_url}/{self.session}", session_id=self.session, session_int=session_int)
        self.text_to_clickable = None
        self.instruction_text = self.get_instruction_text() if instruction_text is None else instruction_text
        obs = self.observation
        self.prev_obs = [obs]
        self.prev_actions = []
        log("reset", server=self.server.stub_id, session=self.session, user_sessions=len(self.server.user_sessions))
        return obs, None

    def render(self, mode="human"):
        pass

    def close(self):
        pass


class _WebAgentTextEnvWithoutServerArgument(WebAgentTextEnv):
    """An older WebShop's signature: no `server`, no **kwargs (so server= is a TypeError)."""

    def __init__(self, observation_mode="html", file_path=DEFAULT_FILE_PATH, num_products=None, human_goals=None,
                 filter_goals=None, limit_goals=-1, session=None, session_prefix=None):
        kwargs = dict(num_products=num_products, human_goals=human_goals, filter_goals=filter_goals, limit_goals=limit_goals,
                      session=session, session_prefix=session_prefix)
        self._setup(observation_mode, file_path, None, kwargs)


if os.environ.get("A2RL_STUB_WEBSHOP_NO_SERVER_ARG") == "1":
    WebAgentTextEnv = _WebAgentTextEnvWithoutServerArgument  # noqa: F811
