"""TEST STUB of `web_agent_site.engine.goal` (get_goals, get_reward), NOT the real WebShop.

Written for a2rl's tests. Goals have the real dicts' keys (asin, instruction_text, attributes,
goal_options, price_upper, weight, query, category, product_category). Invented by the stub:
- human goals: two per product, "i am looking for a <title words> in <colour>, and price lower than
  <p> dollars"; synthetic goals (human_goals false): three per product, "Find me ..." wording;
- the reward: the share of matched goal attributes, goal options and price (each counts one), halved
  when the product is of another type (WebShop's reward has the same ingredients, weighted otherwise).
"""


def get_goals(all_products, product_prices, human_goals=True):
    goals = []
    for p in all_products:
        adjective, material = p["Attributes"]
        noun = p["query"]
        price_upper = round(product_prices[p["asin"]] + 10.0, 2)
        colors = p["options"]["color"][:2] if human_goals else p["options"]["color"]
        for color in colors:
            if human_goals:
                text = f"i am looking for a {adjective} {material} {noun} in {color}, and price lower than {price_upper:.2f} dollars"
            else:
                text = f"Find me {noun} made of {material}, {adjective}, with color: {color}, and price lower than {price_upper:.2f} dollars"
            goals.append({
                "asin": p["asin"],
                "instruction_text": text,
                "attributes": [adjective, material],
                "goal_options": [color],
                "price_upper": price_upper,
                "weight": 1,
                "query": noun,
                "category": p["category"],
                "product_category": p["product_category"],
            })
    return goals


def get_reward(purchased_product, goal, price, options, verbose=False):
    chosen = set(options.values())
    matched = (sum(a in purchased_product["Attributes"] for a in goal["attributes"])
               + sum(o in chosen for o in goal["goal_options"])
               + (1 if price <= goal["price_upper"] else 0))
    total = len(goal["attributes"]) + len(goal["goal_options"]) + 1
    reward = matched / total * (1.0 if purchased_product["query"] == goal["query"] else 0.5)
    info = {"matched": matched, "total": total, "same_type": purchased_product["query"] == goal["query"]}
    return (reward, info) if verbose else reward
