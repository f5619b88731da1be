"""CRM task families ("CRM updates") and the helpers they share: ids out of confirmations,
phone and money spellings, and the seeded company and person vocabulary."""

from __future__ import annotations

import re

TITLES = [
    "Procurement Manager", "Head of Procurement", "Operations Director", "VP Operations", "IT Manager",
    "CTO", "CFO", "Finance Director", "Supply Chain Lead", "Facilities Manager", "Category Manager",
    "Buyer", "Senior Buyer", "Plant Manager", "Head of IT", "Logistics Coordinator", "COO",
    "Product Manager", "Marketing Director", "Engineering Manager", "Controller", "Office Manager",
]
INDUSTRIES = ["Manufacturing", "Retail", "Healthcare", "Logistics", "Software", "Financial Services",
              "Construction", "Hospitality", "Education", "Energy"]
NICKNAMES = {
    "Robert": "Bob", "William": "Bill", "Elizabeth": "Liz", "Katherine": "Kate", "Michael": "Mike",
    "Jennifer": "Jen", "Christopher": "Chris", "Daniel": "Dan", "Jessica": "Jess", "Matthew": "Matt",
    "Anthony": "Tony", "Joseph": "Joe", "Thomas": "Tom", "Patricia": "Pat", "Richard": "Rick",
    "Samantha": "Sam", "Alexander": "Alex", "Nicholas": "Nick", "Benjamin": "Ben", "Jonathan": "Jon",
}
PRODUCTS = ["the analytics suite", "the fleet tracker", "the inventory module", "the self-service portal",
            "the mobile app", "the API tier", "the compliance add-on", "the scheduling tool"]


def created_id(result: str, what: str) -> int:
    """The id in a confirmation like 'Created contact 42 ...' (``what`` = 'contact')."""
    m = re.search(rf"{what} (\d+)", result)
    if not m:
        raise RuntimeError(f"oracle expected a new {what} id in: {result[:300]}")
    return int(m.group(1))


def digits(text) -> str:
    """A phone number's digits, a leading US country code dropped."""
    d = re.sub(r"\D", "", str(text or ""))
    return d[1:] if len(d) == 11 and d.startswith("1") else d


def phone_styles(d: str) -> list[str]:
    """Ten digits written the ways people write them."""
    return [f"+1 {d[:3]}-{d[3:6]}-{d[6:]}", f"({d[:3]}) {d[3:6]}-{d[6:]}", f"{d[:3]}.{d[3:6]}.{d[6:]}",
            f"{d[:3]}-{d[3:6]}-{d[6:]}", f"+1 {d[:3]} {d[3:6]} {d[6:]}"]


def new_phone(rng, used: set[str]) -> str:
    while True:
        d = f"{rng.choice([212, 303, 312, 415, 512, 617, 646, 702, 720, 808, 919])}555{rng.randint(100, 9999):04d}"
        if d not in used:
            used.add(d)
            return d


def money(amount: float) -> str:
    return f"${amount:,.2f}"
