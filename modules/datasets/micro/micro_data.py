"""The micro datasets of `a2rl data micro`: synthetic rows in the exact formats the paper packs read.

- gsm8k: grade-school word problems from templates, GSM8K's answer format (worked steps with
  calculator annotations `<<a*b=c>>`, then `#### <n>`).
- humaneval: simple Python function problems from templates (HumanEval's fields; `test` is a real
  `def check(candidate): assert ...`, checked against `canonical_solution` when generated).
- alfworld: household games for the micro engine in tasks/alfworld/env_backend.py, in ALFWorld's directory layout, and
  the ReAct few-shot file (two solved examples per task type) the pack's prompt is built from.

Everything is drawn from `random.Random` seeded with strings (sha512-seeded: the same on every
machine and Python 3 version), so one seed gives the same rows byte for byte.
"""
import json
import os
import random
import sys

NAMES = ["Ava", "Ben", "Carla", "Dev", "Emma", "Farid", "Grace", "Hugo", "Iris", "Jon", "Kemi", "Liam",
         "Maya", "Nico", "Olga", "Pedro", "Quinn", "Rosa", "Sam", "Tara"]
ITEMS = ["apple", "pencil", "marble", "sticker", "book", "cookie", "card", "shell", "stamp", "toy car",
         "balloon", "orange", "cupcake", "button", "crayon"]


def rng(seed, *parts):
    return random.Random(":".join(str(p) for p in (seed,) + parts))


def plural(item):
    return item + "s"


# --- GSM8K ---------------------------------------------------------------------------------------
# Each template returns (question, steps, answer); a step is (text before, expression, value, text after).

def t_add(r):
    n, it, a, b = r.choice(NAMES), r.choice(ITEMS), r.randint(2, 40), r.randint(2, 30)
    q = f"{n} has {a} {plural(it)}. {n} gets {b} more {plural(it)}. How many {plural(it)} does {n} have now?"
    return q, [(f"{n} has", f"{a}+{b}", a + b, f"{plural(it)} now.")], a + b


def t_sub(r):
    n, m, it = *r.sample(NAMES, 2), r.choice(ITEMS)
    a = r.randint(10, 60)
    b = r.randint(1, a - 1)
    q = f"{n} had {a} {plural(it)} and gave {b} of them to {m}. How many {plural(it)} does {n} have left?"
    return q, [(f"{n} has", f"{a}-{b}", a - b, f"{plural(it)} left.")], a - b


def t_mul(r):
    n, it, a, b = r.choice(NAMES), r.choice(ITEMS), r.randint(2, 9), r.randint(2, 12)
    q = f"{n} buys {a} bags of {plural(it)}. Each bag has {b} {plural(it)}. How many {plural(it)} does {n} buy?"
    return q, [(f"{n} buys", f"{a}*{b}", a * b, f"{plural(it)}.")], a * b


def t_div(r):
    n, it, each, k = r.choice(NAMES), r.choice(ITEMS), r.randint(2, 12), r.randint(2, 8)
    total = each * k
    q = f"{n} shares {total} {plural(it)} equally among {k} friends. How many {plural(it)} does each friend get?"
    return q, [("Each friend gets", f"{total}/{k}", each, f"{plural(it)}.")], each


def t_wage(r):
    n, rate, b, c = r.choice(NAMES), r.randint(5, 20), r.randint(2, 8), r.randint(2, 8)
    q = f"{n} earns ${rate} an hour. {n} works {b} hours on Monday and {c} hours on Tuesday. How much money does {n} earn?"
    hours = b + c
    return q, [(f"{n} works", f"{b}+{c}", hours, "hours."), (f"{n} earns", f"{hours}*{rate}", hours * rate, "dollars.")], hours * rate


def t_times(r):
    n, m, it, a, k = *r.sample(NAMES, 2), r.choice(ITEMS), r.randint(2, 15), r.randint(2, 5)
    q = f"{n} has {a} {plural(it)}. {m} has {k} times as many {plural(it)} as {n}. How many {plural(it)} do they have together?"
    b = a * k
    return q, [(f"{m} has", f"{a}*{k}", b, f"{plural(it)}."), ("Together they have", f"{a}+{b}", a + b, f"{plural(it)}.")], a + b


def t_boxes(r):
    n, it, per, boxes, extra = r.choice(NAMES), r.choice(ITEMS), r.randint(3, 12), r.randint(2, 9), r.randint(1, 9)
    q = f"A box holds {per} {plural(it)}. {n} fills {boxes} boxes and has {extra} {plural(it)} left over. How many {plural(it)} does {n} have?"
    filled = per * boxes
    return q, [("The boxes hold", f"{per}*{boxes}", filled, f"{plural(it)}."), (f"{n} has", f"{filled}+{extra}", filled + extra, f"{plural(it)}.")], filled + extra


def t_pages(r):
    n, a, d, c = r.choice(NAMES), r.randint(5, 25), r.randint(2, 7), r.randint(3, 30)
    q = f"{n} reads {a} pages a day for {d} days, then reads {c} more pages. How many pages does {n} read in all?"
    days = a * d
    return q, [(f"{n} reads", f"{a}*{d}", days, "pages in the first days."), (f"{n} reads", f"{days}+{c}", days + c, "pages in all.")], days + c


def t_change(r):
    n, it, a, p = r.choice(NAMES), r.choice(ITEMS), r.randint(2, 6), r.randint(2, 9)
    cost = a * p
    paid = cost + r.randint(1, 20)
    q = f"{n} buys {a} {plural(it)} for ${p} each and pays with ${paid}. How much change does {n} get?"
    return q, [(f"The {plural(it)} cost", f"{a}*{p}", cost, "dollars."), (f"{n} gets", f"{paid}-{cost}", paid - cost, "dollars in change.")], paid - cost


def t_three(r):
    n, it, a, b, c = r.choice(NAMES), r.choice(ITEMS), r.randint(5, 30), r.randint(2, 20), r.randint(2, 4)
    q = (f"{n} collects {a} {plural(it)} in the morning and {b} {plural(it)} in the afternoon. "
         f"Then {n} collects {c} times as many as in the whole day so far. How many {plural(it)} does {n} collect in total?")
    day = a + b
    more = day * c
    return q, [(f"{n} collects", f"{a}+{b}", day, f"{plural(it)} during the day."),
               (f"Then {n} collects", f"{day}*{c}", more, f"more {plural(it)}."),
               (f"In total {n} collects", f"{day}+{more}", day + more, f"{plural(it)}.")], day + more


def t_back(r):
    n, m, it = *r.sample(NAMES, 2), r.choice(ITEMS)
    a = r.randint(10, 60)
    b = r.randint(1, a - 1)
    q = f"{n} has {a} {plural(it)}. {n} lends {b} {plural(it)} to {m}, and {m} gives all {b} back the next day. How many {plural(it)} does {n} have now?"
    left = a - b
    return q, [(f"After lending, {n} has", f"{a}-{b}", left, f"{plural(it)}."), (f"Then {n} has", f"{left}+{b}", a, f"{plural(it)}.")], a


GSM8K_TEMPLATES = [t_back, t_add, t_sub, t_mul, t_div, t_wage, t_times, t_boxes, t_pages, t_change, t_three]


def gsm8k_row(r):
    question, steps, answer = r.choice(GSM8K_TEMPLATES)(r)
    lines = [f"{pre} {expr} = <<{expr}={value}>>{value} {post}" for pre, expr, value, post in steps]
    return {"question": question, "answer": "\n".join(lines) + f"\n#### {answer}"}


def gsm8k_rows(seed, split, count):
    r = rng(seed, "gsm8k", split)
    seen, rows = set(), []
    while len(rows) < count:
        row = gsm8k_row(r)
        if row["question"] not in seen:
            seen.add(row["question"])
            rows.append(row)
    return rows


# --- HumanEval -----------------------------------------------------------------------------------
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]


def he_add(r):
    k = r.randint(1, 20)
    name = f"add_{NUMBER_WORDS[k]}"
    doc = f"Return x plus {k}."
    cases = [(x,) for x in r.sample(range(-20, 50), 4)]
    return name, "x: int", "int", doc, f"return x + {k}", cases, lambda x: x + k


def he_mul(r):
    k = r.randint(2, 20)
    name = f"times_{NUMBER_WORDS[k]}"
    doc = f"Return x multiplied by {k}."
    return name, "x: int", "int", doc, f"return x * {k}", [(x,) for x in r.sample(range(-10, 30), 4)], lambda x: x * k


def he_sub(r):
    k = r.randint(1, 20)
    name = f"minus_{NUMBER_WORDS[k]}"
    doc = f"Return x minus {k}."
    return name, "x: int", "int", doc, f"return x - {k}", [(x,) for x in r.sample(range(-20, 50), 4)], lambda x: x - k


def he_list_add(r):
    k = r.randint(1, 20)
    name = f"add_{NUMBER_WORDS[k]}_to_each"
    doc = f"Return a new list with {k} added to every element of xs."
    cases = [([r.randint(-9, 20) for _ in range(r.randint(0, 5))],) for _ in range(4)]
    return name, "xs: list", "list", doc, f"return [x + {k} for x in xs]", cases, lambda xs: [x + k for x in xs]


def he_count(r):
    k = r.randint(0, 9)
    name = f"count_{NUMBER_WORDS[k]}s"
    doc = f"Return how many times {k} occurs in xs."
    cases = [([r.randint(0, 9) for _ in range(r.randint(0, 8))],) for _ in range(4)]
    return name, "xs: list", "int", doc, f"return xs.count({k})", cases, lambda xs: xs.count(k)


def he_greater(r):
    k = r.randint(0, 20)
    name = f"greater_than_{NUMBER_WORDS[k]}"
    doc = f"Return the elements of xs that are greater than {k}, in order."
    cases = [([r.randint(-5, 20) for _ in range(r.randint(0, 7))],) for _ in range(4)]
    return name, "xs: list", "list", doc, f"return [x for x in xs if x > {k}]", cases, lambda xs: [x for x in xs if x > k]


def he_repeat(r):
    k = r.randint(2, 8)
    name = f"repeat_{NUMBER_WORDS[k]}_times"
    doc = f"Return the string s repeated {k} times."
    cases = [("".join(r.choice("abcxyz") for _ in range(r.randint(0, 4))),) for _ in range(4)]
    return name, "s: str", "str", doc, f"return s * {k}", cases, lambda s: s * k


def he_longer(r):
    k = r.randint(1, 12)
    name = f"longer_than_{NUMBER_WORDS[k]}"
    doc = f"Return True if the string s has more than {k} characters, else False."
    cases = [("".join(r.choice("abcxyz") for _ in range(r.randint(0, 12))),) for _ in range(4)]
    return name, "s: str", "bool", doc, f"return len(s) > {k}", cases, lambda s: len(s) > k


def he_suffix(r):
    word = r.choice(["ing", "ed", "ly", "er", "s", "ful", "ness", "able", "less", "ish", "ment", "est"])
    name = f"add_suffix_{word}"
    doc = f"Return the string s followed by \"{word}\"."
    cases = [(r.choice(["walk", "jump", "kind", "fast", "dark", "read", "play", "help"]),) for _ in range(4)]
    return name, "s: str", "str", doc, f"return s + \"{word}\"", cases, lambda s: s + word


def he_mod(r):
    k = r.randint(2, 20)
    name = f"divisible_by_{NUMBER_WORDS[k]}"
    doc = f"Return True if x is divisible by {k}, else False."
    return name, "x: int", "bool", doc, f"return x % {k} == 0", [(x,) for x in r.sample(range(0, 100), 4)], lambda x: x % k == 0


def he_first(r):
    k = r.randint(1, 9)
    name = f"first_{NUMBER_WORDS[k]}_chars"
    doc = f"Return the first {k} characters of the string s (all of s when it is shorter)."
    cases = [("".join(r.choice("abcdefxyz") for _ in range(r.randint(0, 12))),) for _ in range(4)]
    return name, "s: str", "str", doc, f"return s[:{k}]", cases, lambda s: s[:k]


def he_last(r):
    k = r.randint(1, 9)
    name = f"last_{NUMBER_WORDS[k]}_chars"
    doc = f"Return the last {k} characters of the string s (all of s when it is shorter)."
    cases = [("".join(r.choice("abcdefxyz") for _ in range(r.randint(1, 12))),) for _ in range(4)]
    return name, "s: str", "str", doc, f"return s[-{k}:]", cases, lambda s: s[-k:]


HUMANEVAL_TEMPLATES = [he_first, he_last, he_add, he_mul, he_sub, he_list_add, he_count, he_greater, he_repeat, he_longer, he_suffix, he_mod]


def humaneval_problem(r, task_id):
    name, params, returns, doc, body, cases, fn = r.choice(HUMANEVAL_TEMPLATES)(r)
    ex_args = cases[0]
    example = f"    >>> {name}({', '.join(repr(a) for a in ex_args)})\n    {fn(*ex_args)!r}\n"
    prompt = f"\n\ndef {name}({params}) -> {returns}:\n    \"\"\" {doc}\n{example}    \"\"\"\n"
    asserts = "".join(f"    assert candidate({', '.join(repr(a) for a in args)}) == {fn(*args)!r}\n" for args in cases)
    test = f"\n\nMETADATA = {{\n    'author': 'a2rl-micro',\n    'dataset': 'test'\n}}\n\n\ndef check(candidate):\n{asserts}\n"
    return {"task_id": task_id, "prompt": prompt, "canonical_solution": f"    {body}\n", "test": test, "entry_point": name}


def humaneval_problems(seed, count, prefix="HumanEval", stream="rows", exclude=frozenset(), unique=True):
    """`count` problems; `unique`: each function name once; names in `exclude` never."""
    r = rng(seed, "humaneval", stream)
    seen, rows = set(), []
    for _ in range(100 * count):
        if len(rows) == count:
            break
        p = humaneval_problem(r, f"{prefix}/{len(rows)}")
        if p["entry_point"] not in exclude and not (unique and p["entry_point"] in seen):
            seen.add(p["entry_point"])
            rows.append(p)
    if len(rows) < count:
        raise RuntimeError(f"micro generator: only {len(rows)} distinct HumanEval problems")
    return rows


def check_humaneval(problem):
    """Runs canonical_solution against test, as the pack's program does (raises on a broken generator)."""
    program = problem["prompt"] + problem["canonical_solution"] + "\n" + problem["test"] + "\n" + f"check({problem['entry_point']})"
    exec(compile(program, problem["task_id"], "exec"), {})  # noqa: S102 - our own generated code


# --- ALFWorld ------------------------------------------------------------------------------------
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tasks", "alfworld"))
from env_backend import MicroGame, kind  # noqa: E402 - the pack's backend holds the micro engine

OBJECTS = {"apple": "Apple", "mug": "Mug", "egg": "Egg", "potato": "Potato", "cup": "Cup", "book": "Book",
           "pen": "Pen", "plate": "Plate", "tomato": "Tomato", "bowl": "Bowl"}
PLACES = {"countertop": "CounterTop", "cabinet": "Cabinet", "diningtable": "DiningTable", "shelf": "Shelf",
          "drawer": "Drawer", "sidetable": "SideTable", "garbagecan": "GarbageCan", "desk": "Desk"}
OPENABLE = {"cabinet", "drawer", "fridge", "microwave"}
# (ALFWorld directory prefix, pack key, tool receptacle, task sentence)
TASK_KINDS = [
    ("pick_and_place_simple", "put", None, "put some {o} in {r}."),
    ("pick_clean_then_place_in_recep", "clean", "sinkbasin", "put a clean {o} in {r}."),
    ("pick_heat_then_place_in_recep", "heat", "microwave", "put a hot {o} in {r}."),
    ("pick_cool_then_place_in_recep", "cool", "fridge", "put a cool {o} in {r}."),
    ("look_at_obj_in_light", "examine", "desklamp", "look at {o} under the desklamp."),
    ("pick_two_obj_and_place", "puttwo", None, "put two {o} in {r}."),
]
VERB = {"sinkbasin": "clean", "microwave": "heat", "fridge": "cool"}


def alfworld_scene(r, kind_index):
    prefix, _key, tool, sentence = TASK_KINDS[kind_index]
    # Micro rooms: three or four places and the task's tool, one receptacle of each type ("shelf 1"),
    # so a tiny model can name what it saw in the room's listing.
    places = r.sample(sorted(PLACES), r.randint(3, 4))
    rec_types = places + ([tool] if tool else [])
    receptacles = sorted(f"{t} 1" for t in rec_types)
    locs = r.sample(range(1, 40), len(receptacles))
    obj = r.choice(sorted(OBJECTS))
    target = r.choice([x for x in receptacles if kind(x) in PLACES])
    need = 2 if prefix == "pick_two_obj_and_place" else 1
    surfaces = [x for x in receptacles if kind(x) in PLACES and x != target]
    contents = {x: [] for x in receptacles}
    for i in range(need):
        contents[r.choice(surfaces)].append(f"{obj} {i + 1}")
    fillers = [o for o in sorted(OBJECTS) if o != obj]
    for x in receptacles:
        if kind(x) in PLACES and r.random() < 0.4:
            contents[x].append(f"{r.choice(fillers)} 1")
    contents = {x: sorted(set(v)) for x, v in contents.items() if v}
    scene = {
        "task_type": prefix,
        "task": sentence.format(o=obj, r=kind(target)),
        "receptacles": [{"name": x, "openable": kind(x) in OPENABLE, "loc": loc} for x, loc in zip(receptacles, locs)],
        "contents": contents,
        "goal": {"object": obj, "receptacle": kind(target), "count": need},
    }
    return scene, (obj, target, tool)


def expert_plan(game, obj, target, tool, prefix):
    """A searching expert: visits receptacles in the listed order until it finds the object(s), then finishes.
    Returns [(action, observation)] with `think:` steps (observation "OK.") as in ReAct's examples."""
    steps = []
    game.reset()
    need = 2 if prefix == "pick_two_obj_and_place" else 1

    def do(action):
        obs = game.step(action)
        steps.append((action, obs))
        return obs

    def think(text):
        steps.append((f"think: {text}", "OK."))

    goal_text = {"put": f"find and take {obj}, then put it in/on {kind(target)}",
                 "examine": f"find and take {obj}, then find and use a desklamp"}
    think(f"To solve the task, I need to {goal_text.get('examine' if tool == 'desklamp' else 'put')}. First I need to find {obj}.")
    for found in range(need):
        for rec in game.receptacles:
            if kind(rec) in PLACES and rec != target:
                if game.at != rec:
                    do(f"go to {rec}")
                if rec in game.openable and rec not in game.opened:
                    do(f"open {rec}")
                here = [o for o in game.contents[rec] if kind(o) == obj]
                if here:
                    do(f"take {here[0]} from {rec}")
                    break
        if tool and tool != "desklamp":
            t = next(x for x in game.receptacles if kind(x) == tool)
            think(f"Now I take {game.holding}. Next, I need to {VERB[tool]} it with {t}.")
            do(f"go to {t}")
            do(f"{VERB[tool]} {game.holding} with {t}")
        if tool == "desklamp":
            lamp = next(x for x in game.receptacles if kind(x) == "desklamp")
            think(f"Now I take {game.holding}. Next, I need to use {lamp}.")
            do(f"go to {lamp}")
            do(f"use {lamp}")
            break
        think(f"Now I take {game.holding}. Next, I need to put it in/on {target}.")
        do(f"go to {target}")
        if target in game.openable and target not in game.opened:
            do(f"open {target}")
        do(f"put {game.holding} in/on {target}")
        if found + 1 < need:
            think(f"Now I put the first {obj} in {target}. Next, I need to find the second {obj}.")
    if not game.won:
        raise RuntimeError(f"micro generator: the expert does not solve {game.scene}")
    return steps


def alfworld_game(r, kind_index, split, index):
    prefix = TASK_KINDS[kind_index][0]
    scene, (obj, target, tool) = alfworld_scene(r, kind_index)
    game = MicroGame(scene)
    steps = expert_plan(game, obj, target, tool, prefix)
    mrecep = "None"
    parent = "DeskLamp" if tool == "desklamp" else PLACES[kind(target)]
    task_dir = f"{prefix}-{OBJECTS[obj]}-{mrecep}-{parent}-{100 + index}"
    trial = f"trial_M{split[:1].upper()}{index:05d}"
    walkthrough = [a for a, _ in steps if not a.startswith("think:")]
    game_json = {"a2rl_micro": scene, "solvable": True, "walkthrough": walkthrough}
    traj = {
        "task_type": prefix,
        "pddl_params": {"object_target": OBJECTS[obj], "parent_target": "" if tool == "desklamp" else parent,
                        "toggle_target": "DeskLamp" if tool == "desklamp" else "", "mrecep_target": "", "object_sliced": False},
        "turk_annotations": {"anns": [{"task_desc": scene["task"], "high_descs": walkthrough}]},
        "a2rl_micro": True,
    }
    return f"{task_dir}/{trial}", game_json, traj, steps


def react_text(game_json, steps):
    """An example as ReAct writes them: the first observation, then `> action` and its processed observation."""
    obs = MicroGame(game_json["a2rl_micro"]).reset().split("\n\n", 1)[1].replace("\n\n", "\n")
    lines = [obs]
    for action, observation in steps:
        if observation.startswith("You arrive at loc "):
            observation = observation[observation.index(". ") + 2:]
        lines.append(f"> {action}\n{observation}")
    return "\n".join(lines) + "\n"


def alfworld_games(seed, split, per_kind):
    """[(relative trial dir, game.tw-pddl object, traj_data object, expert steps)], `per_kind` games of each task type."""
    r = rng(seed, "alfworld", split)
    games = []
    for i in range(per_kind * len(TASK_KINDS)):
        games.append(alfworld_game(r, i % len(TASK_KINDS), split, i))
    return games


def alfworld_prompts(seed):
    """alfworld_3prompts.json: react_<key>_0 / _1 for each task type, solved micro games (not in any split)."""
    r = rng(seed, "alfworld", "prompts")
    prompts = {}
    for k, (_prefix, key, _tool, _s) in enumerate(TASK_KINDS):
        for n in range(2):
            _rel, game_json, _traj, steps = alfworld_game(r, k, "prompts", 2 * k + n)
            prompts[f"react_{key}_{n}"] = react_text(game_json, steps)
    return prompts


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_json(path, value, indent=None):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(value, indent=indent, ensure_ascii=False, sort_keys=True) + "\n")
