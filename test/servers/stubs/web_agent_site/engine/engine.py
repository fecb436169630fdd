"""TEST STUB of `web_agent_site.engine.engine`, NOT the real WebShop.

Written for a2rl's tests. Kept from the real module's shape: the button texts (END_BUTTON "Buy Now",
NEXT_PAGE "Next >", PREV_PAGE "< Prev", BACK_TO_SEARCH "Back to Search", the item sub-pages),
parse_action (a greedy "name[arg]" match, so the last "[" starts the argument), 50 search results
shown 10 per page, options lower-cased at load, and init_search_engine accepting only the product
counts WebShop ships indexes for (None = all, 100, 1000, 100000).

Invented by the stub: the catalogue (1200 products "<Adjective> <Material> <Noun>", one per
combination, ASINs "B0STUB0000".."B0STUB1199", prices, three colours each) and the search engine
(products ranked by how many query words their title holds; WebShop uses a Lucene index).
"""
import re

END_BUTTON = "Buy Now"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BACK_TO_SEARCH = "Back to Search"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")

SEARCH_RETURN_N = 50
PRODUCT_WINDOW = 10

ADJECTIVES = ["cozy", "rustic", "sleek", "vintage", "compact", "sturdy", "bright", "classic", "modern", "gentle"]
MATERIALS = ["bamboo", "cotton", "steel", "walnut", "ceramic", "linen", "glass", "leather", "wool", "marble"]
NOUNS = ["lamp", "mug", "chair", "blanket", "shelf", "vase", "basket", "clock", "pillow", "tray", "stool", "rug"]
COLORS = ["black", "white", "navy", "teal", "olive", "coral", "ivory", "amber"]
CATALOGUE_SIZE = len(ADJECTIVES) * len(MATERIALS) * len(NOUNS)


def parse_action(action):
    """("search", "red mug") for "search[red mug]"; (action, None) when there are no brackets."""
    match = re.match(r"(.+)\[(.+)\]", action)
    return (action, None) if match is None else match.groups()


def make_product(i):
    adjective = ADJECTIVES[i % len(ADJECTIVES)]
    material = MATERIALS[(i // len(ADJECTIVES)) % len(MATERIALS)]
    noun = NOUNS[i // (len(ADJECTIVES) * len(MATERIALS))]
    price = 5 + (i * 37) % 90 + 0.99
    return {
        "asin": f"B0STUB{i:04d}",
        "name": f"{adjective} {material} {noun}".title(),
        "Title": f"{adjective} {material} {noun}".title(),
        "Description": f"A {adjective} {noun} made of {material}.",
        "BulletPoints": [f"{material} {noun}", adjective],
        "Reviews": [],
        "Rating": "N.A.",
        "pricing": [price],
        "Price": f"${price}",
        "options": {"color": [COLORS[(i + k) % len(COLORS)] for k in range(3)]},
        "Attributes": [adjective, material],
        "category": "home",
        "query": noun,
        "product_category": f"Home & Kitchen \u203a {noun.title()}",
    }


def load_products(filepath=None, num_products=None, human_goals=True):
    """(all_products, product_item_dict, product_prices, attribute_to_asins) like WebShop's loader."""
    count = CATALOGUE_SIZE if num_products is None else min(int(num_products), CATALOGUE_SIZE)
    products = [make_product(i) for i in range(count)]
    attribute_to_asins = {}
    for p in products:
        for a in p["Attributes"]:
            attribute_to_asins.setdefault(a, set()).add(p["asin"])
    return products, {p["asin"]: p for p in products}, {p["asin"]: p["pricing"][0] for p in products}, attribute_to_asins


class StubSearchEngine:
    def __init__(self, products):
        self.products = products

    def search(self, keywords, k=SEARCH_RETURN_N):
        words = {w.lower() for w in keywords}
        scored = [(-len(words & set(p["Title"].lower().split())), i) for i, p in enumerate(self.products)]
        return [self.products[i] for score, i in sorted(scored) if score < 0][:k]


def init_search_engine(num_products=None, products=None):
    if num_products not in (None, 100, 1000, 100000):
        raise NotImplementedError(f"num_products being {num_products} is not supported yet.")
    return StubSearchEngine(products or [])


def get_top_n_product_from_keywords(keywords, search_engine):
    return search_engine.search(keywords, k=SEARCH_RETURN_N)


def get_product_per_page(top_n_products, page):
    return top_n_products[(page - 1) * PRODUCT_WINDOW:page * PRODUCT_WINDOW]
