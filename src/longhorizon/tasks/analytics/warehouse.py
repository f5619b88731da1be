"""A seeded e-commerce warehouse for the SQL analytics families, and the reference queries
their graders run against the World's database.

``make_warehouse`` returns rows for ``longhorizon.apps.sql.state.ANALYTICS_SCHEMA``: real
customers and QA test accounts (whose orders are big enough to change answers if they are
not excluded), completed / cancelled / pending orders, refunds (a few on cancelled orders),
campaigns, web sessions and a stale revenue snapshot. ``memory_db`` loads rows into an
in-memory SQLite so generators can compute ground truth with the very SQL graders use.
"""

from __future__ import annotations

import random
from bisect import bisect_right
import sqlite3
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from faker import Faker

from longhorizon.apps.sql.state import ANALYTICS_SCHEMA

REGIONS = [
    ("Northeast", "US"), ("Southeast", "US"), ("Midwest", "US"), ("Southwest", "US"), ("West Coast", "US"),
    ("Mountain", "US"), ("Canada", "CA"), ("Texas", "US"),
]
CATALOG = {
    "Lighting": (["Arc Desk Lamp", "Arc Desk Lamp Mini", "Halo Floor Lamp", "Beam LED Strip", "Orbit Pendant"],
                 (18, 160)),
    "Furniture": (["Ergo Task Chair", "Oak Standing Desk", "Pivot Bookshelf", "Nimbus Lounge Chair"], (120, 640)),
    "Storage": (["Stack Crate", "Loft Cabinet", "Cube Organizer", "Drawer Unit"], (15, 220)),
    "Electronics": (["Pulse Earbuds", "Volt Charger", "Echo Speaker", "Nova Webcam", "Nova Webcam Pro"], (19, 260)),
    "Kitchen": (["Brew Kettle", "Chef Knife Set", "Crisp Air Fryer", "Pour Over Kit"], (22, 180)),
    "Stationery": (["Grid Notebook", "Fine Liner Set", "Desk Planner", "Ink Pen Trio"], (4, 35)),
}
SEGMENTS = ["consumer"] * 6 + ["smb"] * 3 + ["enterprise"]
CHANNELS = ["web"] * 5 + ["mobile"] * 3 + ["phone"] * 2
SOURCES = ["organic", "paid_search", "social", "email", "direct", "referral"]
REASONS = ["damaged", "late delivery", "wrong item", "changed mind", "defective"]
CAMPAIGN_NAMES = ["Spring Refresh", "Back to Work", "Summer Sale", "Home Office Week", "Holiday Gifts",
                  "New Year Reset", "Flash Friday", "Loyalty Boost", "Student Deals", "Clearance Event"]


@dataclass
class Warehouse:
    start: date
    end: date
    rows: dict[str, list[tuple]] = field(default_factory=dict)
    region_names: list[str] = field(default_factory=list)
    product_names: list[str] = field(default_factory=list)
    _totals: dict[int, float] = field(default_factory=dict)

    def _next_id(self, table: str) -> int:
        """Ids are appended in increasing order, so the next one follows the last row's."""
        rows = self.rows[table]
        return (rows[-1][0] if rows else 0) + 1

    def add_order(self, customer_id: int, day: date, lines: list[tuple[int, int, float]], *,
                  status: str = "completed", channel: str = "web", campaign_id: int | None = None) -> int:
        """Append an order with ``lines`` of (product_id, quantity, unit_price); returns its id."""
        oid = self._next_id("orders")
        self.rows["orders"].append((oid, customer_id, day.isoformat(), status, channel, campaign_id))
        for n, (pid, qty, price) in enumerate(lines, start=1):
            self.rows["order_items"].append((oid, n, pid, qty, price))
        self._totals[oid] = round(sum(q * p for _, q, p in lines), 2)
        return oid

    def add_refund(self, order_id: int, day: date, amount: float, reason: str = "damaged") -> None:
        self.rows["refunds"].append((self._next_id("refunds"), order_id, day.isoformat(), round(amount, 2), reason))

    def customers_in(self, region_id: int, *, test: bool = False, signed_by: date | None = None) -> list[int]:
        return [c[0] for c in self.rows["customers"] if c[3] == region_id and c[6] == int(test)
                and (signed_by is None or c[5] <= signed_by.isoformat())]

    def order_total(self, order_id: int) -> float:
        return self._totals[order_id]


def _day_between(rng: random.Random, a: date, b: date) -> date:
    return a + timedelta(days=rng.randrange((b - a).days + 1))


def make_warehouse(rng: random.Random, fake: Faker, start: date, end: date, *, customers: int = 260,
                   orders_per_month: int = 95, company_domain: str = "shop.example") -> Warehouse:
    """Rows for every analytics table, orders placed from ``start`` to ``end`` (inclusive)."""
    wh = Warehouse(start, end)
    regions = sorted(rng.sample(REGIONS, rng.randint(5, 6)))
    wh.rows["regions"] = [(i, name, country) for i, (name, country) in enumerate(regions, start=1)]
    wh.region_names = [r[1] for r in wh.rows["regions"]]

    products, pid = [], 1
    for category in sorted(CATALOG):
        names, (lo, hi) = CATALOG[category]
        for name in names:
            if rng.random() < 0.85 or name.endswith(("Mini", "Pro")):
                price = round(rng.uniform(lo, hi), 0) - 0.01
                products.append((pid, f"{category[:3].upper()}-{100 + pid:03d}", name, category, price,
                                 int(rng.random() > 0.08)))
                pid += 1
    wh.rows["products"] = products
    wh.product_names = [p[2] for p in products]
    price_of = {p[0]: p[4] for p in products}
    weights = [rng.uniform(0.3, 3.0) for _ in products]

    camps = []
    cstart = start
    for cid, name in enumerate(rng.sample(CAMPAIGN_NAMES, 7), start=1):
        s = _day_between(rng, cstart, end - timedelta(days=20))
        e = min(end, s + timedelta(days=rng.randint(10, 45)))
        camps.append((cid, f"{name} {s.year}", rng.choice(["email", "paid_search", "social"]), s.isoformat(),
                      e.isoformat(), float(rng.randrange(20, 120) * 250)))
    camps.sort(key=lambda c: c[3])
    camps = [(i, *c[1:]) for i, c in enumerate(camps, start=1)]
    wh.rows["campaigns"] = camps

    # customers: real ones signed up over the 18 months before the window's end, plus QA accounts
    signup_from = start - timedelta(days=200)
    custs, seen_emails = [], set()
    for cid in range(1, customers + 1):
        name = fake.name()
        first, last = name.split()[0].lower(), name.split()[-1].lower()
        email = f"{first}.{last}{rng.randrange(100) if rng.random() < 0.3 else ''}@{fake.free_email_domain()}"
        while email in seen_emails:
            email = f"{first}.{last}{rng.randrange(1000)}@{fake.free_email_domain()}"
        seen_emails.add(email)
        signup = _day_between(rng, signup_from, end - timedelta(days=5))
        custs.append([cid, name, email, rng.randint(1, len(regions)), rng.choice(SEGMENTS), signup.isoformat(), 0])
    n_test = rng.randint(8, 12)
    test_names = ["QA Test Account", "Load Test User", "Staging Buyer", "Test Customer", "QA Automation"]
    for k in range(n_test):
        cid = customers + k + 1
        signup = _day_between(rng, start, end - timedelta(days=10))
        label = test_names[k % len(test_names)]
        custs.append([cid, f"{label} {k + 1:02d}", f"qa+{k + 1:02d}@{company_domain}", rng.randint(1, len(regions)),
                      "consumer", signup.isoformat(), 1])
    custs.sort(key=lambda c: (c[5], c[0]))  # ids follow signup order, as a real sequence would
    remap = {c[0]: i for i, c in enumerate(custs, start=1)}
    wh.rows["customers"] = [(remap[c[0]], *c[1:]) for c in custs]
    real = [c for c in wh.rows["customers"] if not c[6]]
    tests = [c for c in wh.rows["customers"] if c[6]]

    def lines_for(n_lines: int, big: bool = False) -> list[tuple[int, int, float]]:
        chosen = []
        for _ in range(n_lines):
            p = rng.choices(products, weights)[0]
            if p[0] in [c[0] for c in chosen]:
                continue
            qty = rng.randint(4, 12) if big else rng.choices([1, 2, 3, 4, 5], [50, 25, 12, 8, 5])[0]
            disc = rng.choice([1, 1, 1, 0.9, 0.85])
            chosen.append((p[0], qty, round(price_of[p[0]] * disc, 2)))
        return chosen

    def status() -> str:
        return rng.choices(["completed", "cancelled", "pending"], [86, 9, 5])[0]

    def campaign_on(day: date) -> int | None:
        live = [c[0] for c in camps if c[3] <= day.isoformat() <= c[4]]
        return rng.choice(live) if live and rng.random() < 0.45 else None

    by_signup = sorted(real, key=lambda c: c[5])
    signups = [c[5] for c in by_signup]
    planned: list[tuple[date, int, bool]] = []
    for c in real:  # many new customers order within their first weeks
        signup = date.fromisoformat(c[5])
        if rng.random() < 0.65:
            d = signup + timedelta(days=rng.choice([0, 1, 2, 5, 9, 14, 21, 28, 30, 31, 33, 45]))
            if start <= d <= end:
                planned.append((d, c[0], False))
    months = (end.year - start.year) * 12 + end.month - start.month + 1
    for _ in range(months * orders_per_month):
        d = _day_between(rng, start, end)
        n_eligible = bisect_right(signups, d.isoformat())
        planned.append((d, by_signup[rng.randrange(n_eligible)][0], False))
    for c in tests:
        signup = date.fromisoformat(c[5])
        for _ in range(rng.randint(2, 5)):
            planned.append((_day_between(rng, max(signup, start), end), c[0], True))
    planned.sort(key=lambda x: (x[0], x[1]))
    wh.rows["orders"], wh.rows["order_items"], wh.rows["refunds"] = [], [], []
    for d, cid, is_test in planned:
        lines = lines_for(rng.choices([1, 2, 3, 4], [45, 30, 17, 8])[0], big=is_test)
        if not lines:
            continue
        st = "completed" if is_test and rng.random() < 0.8 else status()
        wh.add_order(cid, d, lines, status=st, channel=rng.choice(CHANNELS), campaign_id=campaign_on(d))

    for o in list(wh.rows["orders"]):
        oid, _, day, st = o[0], o[1], date.fromisoformat(o[2]), o[3]
        total = wh.order_total(oid)
        if st == "completed" and rng.random() < 0.085:
            wh.add_refund(oid, day + timedelta(days=rng.randint(3, 40)), total * rng.choice([1, 1, 0.5, 0.3]),
                          rng.choice(REASONS))
            if rng.random() < 0.15:
                wh.add_refund(oid, day + timedelta(days=rng.randint(41, 60)), total * 0.1, rng.choice(REASONS))
        elif st == "cancelled" and rng.random() < 0.3:
            wh.add_refund(oid, day + timedelta(days=rng.randint(1, 5)), total, "order cancelled")
    wh.rows["refunds"].sort(key=lambda r: (r[2], r[0]))
    wh.rows["refunds"] = [(i, *r[1:]) for i, r in enumerate(wh.rows["refunds"], start=1)]

    sessions = []
    order_days = {o[0]: (o[1], o[2]) for o in wh.rows["orders"]}
    sid = 1
    for oid, (cid, day) in order_days.items():
        if rng.random() < 0.5:
            sessions.append([day, cid, rng.choice(SOURCES), rng.randint(2, 14), oid])
    n_anon = len(sessions) * 3
    for _ in range(n_anon):
        d = _day_between(rng, start, end).isoformat()
        cid = rng.choice(real)[0] if rng.random() < 0.3 else None
        sessions.append([d, cid, rng.choice(SOURCES), rng.randint(1, 9), None])
    sessions.sort(key=lambda s: (s[0], s[4] or 0, s[1] or 0, s[2]))
    rows = []
    for s in sessions:
        day = date.fromisoformat(s[0])
        live = [c[0] for c in camps if c[3] <= s[0] <= c[4] and c[2] == s[2]]
        ts = f"{day.isoformat()} {rng.randint(6, 23):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
        rows.append((sid, s[1], ts, s[2], live[0] if live else None, s[3], s[4]))
        sid += 1
    wh.rows["web_sessions"] = rows

    snap = []
    month = date(start.year, start.month, 1)
    for _ in range(min(4, months)):
        for r in wh.region_names:
            snap.append((month.strftime("%Y-%m"), r, float(rng.randrange(8000, 40000)) + 0.5,
                         f"{(month + timedelta(days=35)).replace(day=2).isoformat()} 03:00:00"))
        month = (month + timedelta(days=32)).replace(day=1)
    wh.rows["revenue_snapshot"] = snap
    return wh


def ordered_rows(wh: Warehouse) -> dict[str, list[tuple]]:
    """The warehouse's rows in insertion order (parents before children), sorted by key."""
    order = ["regions", "products", "campaigns", "customers", "orders", "order_items", "refunds", "web_sessions",
             "revenue_snapshot"]
    return {t: sorted(wh.rows.get(t, []), key=lambda r: r[:2]) for t in order}


def memory_db(rows: dict[str, list[tuple]]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript(ANALYTICS_SCHEMA)
    for table, data in rows.items():
        if data:
            conn.executemany(f'INSERT INTO "{table}" VALUES ({",".join("?" * len(data[0]))})', data)
    return conn


def run(conn: sqlite3.Connection, sql: str, params: Any = ()) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sql, params).fetchall()]
