"""Commerce task families ("order operations", "inventory and procurement", "invoicing and
reconciliation") over the `store` back office, and the helpers they share: a seeded catalogue,
suppliers and customers, money formatting, and tolerant checks for amounts and codes in text."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from faker import Faker

from longhorizon.tasks.common import slug, squash

CATALOG: dict[str, tuple[str, list[tuple[str, int, int]]]] = {
    # category: (SKU prefix, [(base name, min price $, max price $)])
    "Kitchen": ("KIT", [
        ("Chef Knife", 35, 140), ("Cutting Board", 18, 65), ("Dutch Oven", 90, 380), ("Saucepan", 30, 120),
        ("Espresso Cup Set", 16, 48), ("Spice Rack", 20, 70), ("Salad Spinner", 15, 40),
        ("Cast Iron Skillet", 28, 110), ("Stand Mixer", 220, 520), ("Mixing Bowl Set", 22, 75),
    ]),
    "Outdoor": ("OUT", [
        ("Camping Lantern", 18, 70), ("Trail Bottle", 12, 40), ("Hammock", 35, 160), ("Folding Chair", 25, 95),
        ("Dry Bag", 14, 55), ("Headlamp", 15, 65), ("Trekking Poles", 40, 180), ("Two-Person Tent", 160, 480),
    ]),
    "Home": ("HOM", [
        ("Linen Throw", 40, 140), ("Table Lamp", 35, 190), ("Wall Clock", 20, 90), ("Ceramic Vase", 18, 85),
        ("Bath Towel Set", 30, 110), ("Desk Organizer", 15, 45), ("Scented Candle", 12, 38), ("Wool Rug", 180, 560),
    ]),
    "Electronics": ("ELC", [
        ("Bluetooth Speaker", 35, 260), ("USB-C Hub", 25, 90), ("Wireless Charger", 20, 70),
        ("Noise-Cancelling Headphones", 120, 420), ("Smart Plug", 12, 35), ("Webcam", 40, 160),
    ]),
    "Garden": ("GAR", [
        ("Pruning Shears", 15, 60), ("Watering Can", 14, 48), ("Raised Bed Kit", 70, 260), ("Garden Gloves", 8, 28),
        ("Hose Reel", 45, 180), ("Bird Feeder", 16, 60),
    ]),
}
VARIANTS = ["Slate", "Sage", "Navy", "Walnut", "Copper", "Ivory", "Charcoal", "Olive", "Large", "Small",
            "Pro", "Mini", "Classic", "Travel"]
CARRIERS = ["UPS", "FedEx", "USPS", "DHL"]


@dataclass
class Product:
    sku: str
    name: str
    category: str
    price_cents: int
    cost_cents: int
    stock: int = 0
    reorder_point: int = 0
    reorder_qty: int = 0
    case_size: int = 1
    supplier_id: str = ""
    status: str = "active"

    def row(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Supplier:
    id: str
    name: str
    email: str
    contact: str
    lead_time_days: int = 7
    payment_terms: str = "Net 30"

    def row(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "email": self.email, "lead_time_days": self.lead_time_days,
                "payment_terms": self.payment_terms}


@dataclass
class Customer:
    id: str
    name: str
    email: str
    city: str

    @property
    def first(self) -> str:
        return self.name.split()[0]

    def row(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "email": self.email, "city": self.city}


def pick_today(rng: random.Random) -> date:
    """A weekday in 2026 (Mar-Nov, so every date arithmetic stays inside the year)."""
    d = date(2026, 3, 2) + timedelta(days=rng.randrange(240))
    while d.weekday() >= 5:
        d += timedelta(days=1)
    return d


def make_suppliers(rng: random.Random, fake: Faker, n: int) -> list[Supplier]:
    out, names, domains = [], set(), set()
    number = rng.randint(101, 160)
    while len(out) < n:
        name = fake.company().replace(",", "")
        name = f"{name} {rng.choice(['Supply', 'Wholesale', 'Trading', 'Distribution', 'Goods'])}"
        domain = f"{slug(name)[:20]}.example"
        if name in names or not slug(name) or domain in domains:
            continue
        names.add(name)
        domains.add(domain)
        contact = fake.name()
        number += rng.randint(1, 3)
        out.append(Supplier(f"SUP-{number}", name,
                            f"{rng.choice(['orders', 'sales', 'accounts', 'billing'])}@{domain}", contact,
                            rng.choice([3, 5, 7, 10, 14]), rng.choice(["Net 30", "Net 15", "Net 45"])))
    ids = [s.id for s in out]
    assert len(set(ids)) == len(ids)
    return out


def make_products(rng: random.Random, n: int, suppliers: list[Supplier],
                  categories: list[str] | None = None) -> list[Product]:
    """``n`` distinct products; near-duplicate names (same item, other variant) happen on purpose."""
    cats = categories or list(CATALOG)
    out: list[Product] = []
    names, skus = set(), set()
    while len(out) < n:
        cat = rng.choice(cats)
        prefix, items = CATALOG[cat]
        base, lo, hi = rng.choice(items)
        name = f"{base} {rng.choice(VARIANTS)}"
        if name in names:
            continue
        sku = f"{prefix}-{rng.randint(1000, 9999)}"
        if sku in skus:
            continue
        names.add(name)
        skus.add(sku)
        price = max(rng.randint(lo, hi) * 100 - rng.choice([0, 1, 5, 10, 51]), 500)
        cost = int(price * rng.uniform(0.35, 0.6))
        sup = suppliers[len(out) % len(suppliers)] if suppliers else None
        out.append(Product(sku, name, cat, price, cost, supplier_id=sup.id if sup else ""))
    rng.shuffle(out)
    return out


def make_customers(rng: random.Random, fake: Faker, n: int, *, taken: set[str] | None = None) -> list[Customer]:
    taken = set(taken or ())
    out, names = [], set()
    base = rng.randint(1000, 4000)
    while len(out) < n:
        first, last = fake.first_name(), fake.last_name()
        name = f"{first} {last}"
        if name in names or not slug(first) or not slug(last):
            continue
        email = rng.choice([
            f"{slug(first)}.{slug(last)}@{rng.choice(['mailbox', 'inbox', 'postbox', 'webmail'])}.example",
            f"{slug(first)[0]}{slug(last)}{rng.randint(1, 99)}@{rng.choice(['fastmail', 'homenet', 'coolmail'])}.example",
        ])
        if email in taken:
            continue
        taken.add(email)
        names.add(name)
        out.append(Customer(f"C-{base + len(out) * 7 + rng.randint(0, 6)}", name, email, fake.city()))
    return out


def tracking_for(rng: random.Random, carrier: str) -> str:
    if carrier == "UPS":
        return "1Z" + "".join(rng.choice("0123456789ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(16))
    if carrier == "USPS":
        return "9400" + "".join(rng.choice("0123456789") for _ in range(18))
    if carrier == "DHL":
        return "".join(rng.choice("0123456789") for _ in range(10))
    return "".join(rng.choice("0123456789") for _ in range(12))


# -- money and text ---------------------------------------------------------------------------


def usd(cents: int) -> str:
    """``123450`` -> ``"$1,234.50"``."""
    return f"${cents // 100:,}.{cents % 100:02d}"


def money(cents: int) -> str:
    """``123450`` -> ``"1,234.50"``."""
    return f"{cents // 100:,}.{cents % 100:02d}"


def plain(cents: int) -> str:
    """``123450`` -> ``"1234.50"`` (what the store tools take)."""
    return f"{cents // 100}.{cents % 100:02d}"


_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])-?\d+(?:\.\d+)?")


def amounts_in(text: str) -> set[int]:
    """Every number written in ``text`` as cents ('$1,234.50', '1234.5', '12 USD' -> 123450, 123450, 1200)."""
    out = set()
    for m in _NUMBER.findall(text or ""):
        try:
            out.add(round(float(m.replace(",", "")) * 100))
        except ValueError:
            continue
    return out


def mentions_amount(text: str, cents: int) -> bool:
    return cents in amounts_in(text)


def mentions_id(text: str, code: str) -> bool:
    """An id like SO-48213 quoted as 'SO-48213', 'so 48213', 'SO48213' or just '#48213'."""
    if squash(code) in squash(text):
        return True
    digits = re.sub(r"\D", "", code)
    return bool(digits) and re.search(rf"(?<!\d){digits}(?!\d)", text or "") is not None


def mentions_tracking(text: str, tracking: str) -> bool:
    return squash(tracking) in squash(text)
