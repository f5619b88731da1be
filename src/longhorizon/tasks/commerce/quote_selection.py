"""Inventory and procurement: evaluate a round of supplier quotes and place the orders.

Last week the buyer sent a request for quotation (RFQ) for a handful of low-stock products,
each with a quantity and a needed-by date. The suppliers' answers sit in the inbox, pasted
into the mail body as a table or as a list. The head of purchasing's rules (a mail) say
which quotes count (this RFQ, still valid, the latest revision, the exact item, a lead time
that makes the needed-by date, a minimum order no larger than our quantity, a supplier still
active in the store) and how to pick (lowest unit price, then a preferred supplier, then the
shorter lead time). The agent moves each product to its awarded supplier at the quoted cost,
raises and sends one purchase order per awarded supplier at the quoted prices, and answers
each winner's quote with the purchase order number. Traps: a cheaper quote that has
expired, one from a supplier whose account is closed, one too slow, one with too large a
minimum, a substitute offered for the item asked for, a quote revised upwards (or down)
after it was sent, a price tie between a preferred supplier and its near-namesake, a
no-bid, an old round's quote, low-stock products that were not part of the round and a
draft purchase order on hold. Which of the quote traps (``TRAPS``) a default-level round carries
is drawn per seed, at least two of them and always one from a supplier that wins nothing; each
present gets a criterion over the items it lands on, and ``Task.data`` names those items (an
empty list where the trap is absent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from itertools import combinations
from datetime import date, datetime, time, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from longhorizon.apps.mail import state as mail
from longhorizon.apps.mail.state import parse_address
from longhorizon.apps.store import state as store
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.commerce import (
    VARIANTS,
    Product,
    Supplier,
    amounts_in,
    make_products,
    make_suppliers,
    money,
    pick_today,
    plain,
    usd,
)
from longhorizon.tasks.common import (
    MONTHS,
    People,
    loads,
    long_date,
    mentions_code,
    rng_and_faker,
    slug,
    squash,
)
from longhorizon.tasks.kit import mail as mail_kit, perturb

ROLES = ("expired", "inactive", "slow", "moq", "substitute", "revised", "tie", "pricier")
SUFFIXES = ["Supply", "Wholesale", "Trading", "Distribution", "Goods"]
TRAPS = {
    # role: (Task.data key naming the items it lands on, criterion id, what that criterion checks)
    "expired": ("expired_quote", "expired_quote_passed_over", "a cheaper quote that has expired"),
    "inactive": ("closed_account", "closed_account_passed_over", "a cheaper quote from a closed account"),
    "slow": ("too_slow", "too_slow_passed_over", "a cheaper quote whose lead time misses the needed-by date"),
    "moq": ("minimum_too_large", "minimum_passed_over", "a cheaper quote whose minimum order is above our quantity"),
    "substitute": ("substitute_offered", "substitute_passed_over", "a cheaper substitute for the item asked for"),
    "revised": ("revised_quote", "latest_revision_used", "a quote revised after it was sent (only the latest counts)"),
    "tie": ("price_tie", "tie_to_preferred", "a price tie between a preferred supplier and its near-namesake"),
}
"""The traps a round may carry (``draw`` picks them per seed) and the criterion each gets where it
lands: the items it lands on go to the winner the rules give, at the winning price."""
TRAP_ROLES = tuple(TRAPS)


@dataclass
class Line:
    """One supplier's quote line for one RFQ item (prices in cents)."""

    sku: str
    price: int
    moq: int
    lead: int
    role: str
    substitute: str = ""
    revised_price: int | None = None
    """The price in the supplier's revised quote, when it differs from the first one."""


@dataclass
class Item:
    product: Product
    qty: int
    needed_by: date
    winner: str = ""
    price: int = 0
    lines: dict[str, Line] = field(default_factory=dict)
    """supplier id -> that supplier's line for this item."""


@dataclass
class QuoteMail:
    supplier: Supplier
    number: str
    sent: datetime
    valid_until: date
    lines: list[tuple[Item, Line, int]]
    """(item, line, price quoted in this mail)."""
    style: str
    revision_of: "QuoteMail | None" = None
    msg_id: int = 0


def _day_text(d: date, rng) -> str:
    return d.isoformat() if rng.random() < 0.5 else f"{MONTHS[d.month - 1].capitalize()} {d.day}, {d.year}"


def _lead_text(days: int, rng) -> str:
    if days % 7 == 0 and rng.random() < 0.6:
        weeks = days // 7
        return f"{weeks} week" + ("s" if weeks > 1 else "")
    return f"{days} days"


@register
class SupplierQuoteSelection(TaskFamily):
    name = "supplier_quote_selection"
    category = "inventory and procurement"
    apps = ("store", "mail")
    description = (
        "Evaluate the suppliers' answers to an RFQ against the purchasing rules (validity, revisions, exact item, "
        "lead time, minimum order, active supplier, lowest price with a preferred-supplier tie break), move each "
        "product to its awarded supplier at the quoted cost, send one purchase order per winner and answer each "
        "winning quote with its purchase order."
    )

    levels = 3
    """1: one RFQ item, quoted by its winner and one rival that fails a rule (expired, too slow,
    too large a minimum, or a substitute), next to the rules and an old round's quote (no no-bid,
    no everyday mail); 2: three items with all their quotes, drawn with every trap; 3 (default): six
    or seven items, which traps they carry drawn."""
    toolsets = {1: (
        "mail__list_messages", "mail__read_message", "mail__reply", "store__add_po_line",
        "store__create_purchase_order", "store__send_purchase_order", "store__set_product_sourcing",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        sc = draw(seed, level)
        criteria = _criteria(sc)
        short = level == 1
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction(sc), apps=self.apps, build=partial(build, sc),
            oracle=partial(_oracle, sc, short=short), criteria=criteria,
            perturbations=_perturbations(sc, short, criteria), data=sc.data,
        )


LEVELS = SupplierQuoteSelection.levels
SINGLE_MAIL_TRAPS = ("moq", "slow", "substitute", "expired")
"""Rivals that fail a rule visible in their own quote and the RFQ (no revision, no store lookup,
no preferred-supplier list): level 1's one trap."""


def _fewer_items(items: list[Item], level: int, reviser: str, rng) -> list[Item]:
    """Level 2: the three items whose quotes show the most kinds of trap; level 1: one item whose
    winner sent a single quote, with its winner's line and one rival that fails a rule (not the
    supplier who revised its quote: two quotes to read)."""
    if level == 2:
        best = max(combinations(items, 3), key=lambda c: len({ln.role for it in c for ln in it.lines.values()}))
        return [it for it in items if it in best]
    def rivals(it: Item) -> list[str]:
        return sorted(sid for sid, ln in it.lines.items() if ln.role in SINGLE_MAIL_TRAPS and sid != reviser)

    fit = [it for it in items if it.winner != reviser and rivals(it)]
    if not fit:  # pragma: no cover - four of the traps always land on some item
        raise RuntimeError("no item for level 1")
    item = rng.choice(fit)
    rival = rng.choice(rivals(item))
    item.lines = {sid: ln for sid, ln in item.lines.items() if sid in (item.winner, rival)}
    return [item]


def draw(seed: int, level: int = LEVELS) -> Scenario:
    """The scenario of instance ``seed`` at ``level``: every random draw of the family happens
    here, in the order the family has always made them (the golden hashes hold it); a lower
    level keeps fewer items, chosen after the default's draws."""
    rng, fake = rng_and_faker(seed, SupplierQuoteSelection.name)
    people = People(fake)
    store_name = f"{fake.last_name()} {rng.choice(['Home & Garden', 'Goods', 'Supply Co', 'Outfitters', 'Living'])}"
    domain = f"{slug(store_name)[:20]}.example"
    me, head, colleague = (people.make(domain) for _ in range(3))
    today = pick_today(rng)
    now = datetime.combine(today, time(8, 45))
    year = today.year
    rfq = f"RFQ-{year}-{rng.randint(20, 80):03d}"
    old_rfq = f"RFQ-{year}-{int(rfq.rsplit('-', 1)[1]) - rng.randint(2, 6):03d}"

    # -- suppliers: five or six active, a near-namesake of a preferred one, a closed account ---
    base = make_suppliers(rng, fake, rng.randint(5, 6) + 1)
    closed = base[-1]
    active = base[:-1]
    preferred = rng.sample(active, 2)
    twin_of = preferred[0]
    stem = twin_of.name.rsplit(" ", 1)[0]
    twin_suffix = rng.choice([s for s in SUFFIXES if not twin_of.name.endswith(s)])
    twin_name = f"{stem} {twin_suffix}"
    twin_domain = f"{slug(twin_name)[:28]}.example"
    if any(s.email.endswith("@" + twin_domain) for s in base):
        twin_domain = f"{slug(stem)[:12]}{slug(twin_suffix)}-trade.example"
    last_num = max(int(s.id.split("-")[1]) for s in base)
    twin = Supplier(f"SUP-{last_num + rng.randint(1, 3)}", twin_name,
                    f"{rng.choice(['quotes', 'sales', 'orders'])}@{twin_domain}", fake.name(),
                    rng.choice([5, 7, 10]), "Net 30")
    suppliers = active + [twin]
    everyone = suppliers + [closed]
    sup_by_id = {s.id: s for s in everyone}

    products = make_products(rng, rng.randint(30, 36), suppliers)
    for p in products:
        p.case_size = rng.choice([1, 2, 4, 6, 12])
        p.reorder_point = rng.randint(8, 30)
        p.reorder_qty = p.reorder_point * 3
        p.stock = p.reorder_point + rng.randint(1, 50)

    # -- the RFQ: five to seven products low on stock, distinct base names ----------------------
    n_items = rng.randint(6, 7)
    pool = products[:]
    rng.shuffle(pool)
    chosen: list[Product] = []
    bases: set[str] = set()
    for p in pool:
        b = p.name.rsplit(" ", 1)[0]
        if b in bases:
            continue
        bases.add(b)
        chosen.append(p)
        if len(chosen) == n_items:
            break
    items: list[Item] = []
    for p in chosen:
        p.stock = rng.randint(0, p.reorder_point - 1)
        qty = rng.choice([24, 36, 48, 60, 72, 96, 120, 144])
        needed = today + timedelta(days=rng.randint(9, 21))
        items.append(Item(p, qty, needed))
    rfq_sent = today - timedelta(days=rng.randint(6, 9))
    others_low = [p for p in products if p not in chosen][:rng.randint(2, 3)]
    for p in others_low:  # low on stock too, but not part of this round
        p.stock = rng.randint(0, p.reorder_point)

    # -- roles: which traps this round carries is drawn (at least two, one of them a quote from a
    # supplier that wins nothing: expired, or the near-namesake's tie; every one below the default
    # level), the revision up (a rival's cheaper first quote) and down (a win) apart --------------
    traps = {r for r in TRAP_ROLES if rng.random() < 0.6}
    if not traps & {"expired", "tie"}:
        traps.add(rng.choice(["expired", "tie"]))
    if len(traps) < 2:
        traps.add(rng.choice(sorted(set(TRAP_ROLES) - traps)))
    if level < LEVELS:
        traps = set(TRAP_ROLES)
    expired_sup = rng.choice([s for s in active if s not in preferred])
    reviser = rng.choice([s for s in active if s not in preferred and s is not expired_sup])
    # active suppliers with a live quote (the expired one's quote is out of date, where drawn)
    bidders = [s for s in suppliers if s is not expired_sup or "expired" not in traps]
    role_plan: list[list[str]] = [[] for _ in items]
    must = [r for r in ROLES if r in traps or r == "pricier"]
    rng.shuffle(must)
    for k, role in enumerate(must):
        role_plan[k % len(items)].append(role)
    for plan in role_plan:
        extra = [r for r in ("pricier", "slow", "moq", "substitute", "expired", "inactive")
                 if r not in plan and (r in traps or r == "pricier")]
        plan.extend(rng.sample(extra, min(len(extra), rng.randint(0, 1))))
        if "pricier" not in plan and rng.random() < 0.6:
            plan.append("pricier")

    order = {"tie": 0, "revised": 1, "expired": 2, "inactive": 3}
    for plan in role_plan:
        plan.sort(key=lambda r: order.get(r, 9))
    # winners: spread over the regular bidders; a tie is won by a preferred supplier, and the
    # reviser may win one item thanks to its revision
    regular = [s for s in bidders if s is not twin and s is not reviser]
    rng.shuffle(regular)
    cycle = iter(regular * 3)
    reviser_wins = rng.random() < 0.5
    win_of: list[Supplier] = []
    for plan in role_plan:
        if "tie" in plan:
            win_of.append(preferred[0])
        elif reviser_wins and "revised" not in plan:
            win_of.append(reviser)
            reviser_wins = False
        else:
            win_of.append(next(cycle))

    for item, plan, win in zip(items, role_plan, win_of):
        p = item.product
        used: set[str] = {win.id}
        price = max(150, int(p.cost_cents * rng.uniform(0.85, 1.1)))
        D = (item.needed_by - today).days
        win_lead = rng.choice([d for d in (3, 5, 7, 10, 14) if d <= D])
        win_moq = rng.choice([m for m in (6, 12, 24, 36) if m <= item.qty])
        item.winner, item.price = win.id, price
        win_line = Line(p.sku, price, win_moq, win_lead, "winner")
        if win is reviser:
            win_line.price = price + max(7, round(price * rng.uniform(0.04, 0.1)))
            win_line.revised_price = price
        item.lines[win.id] = win_line
        prices = {price}

        def cheaper() -> int:
            while True:
                v = price - max(5, round(price * rng.uniform(0.02, 0.15)))
                if v not in prices and v > 50:
                    prices.add(v)
                    return v

        def dearer() -> int:
            while True:
                v = price + max(5, round(price * rng.uniform(0.02, 0.2)))
                if v not in prices:
                    prices.add(v)
                    return v

        def ok_lead() -> int:
            return rng.choice([d for d in (3, 5, 7, 10, 14) if d <= D])

        def ok_moq() -> int:
            return rng.choice([m for m in (6, 12, 24, 36) if m <= item.qty])

        def free(cands: list[Supplier]) -> Supplier | None:
            left = [s for s in cands if s.id not in used]
            if not left:
                return None
            s = rng.choice(left)
            used.add(s.id)
            return s

        for role in plan:
            if role == "expired":
                s = expired_sup if expired_sup.id not in used else None
                if s:
                    used.add(s.id)
                    item.lines[s.id] = Line(p.sku, cheaper(), ok_moq(), ok_lead(), role)
            elif role == "inactive":
                if closed.id not in used:
                    used.add(closed.id)
                    item.lines[closed.id] = Line(p.sku, cheaper(), ok_moq(), ok_lead(), role)
            elif role == "revised":
                if reviser.id not in used:
                    used.add(reviser.id)
                    ln = Line(p.sku, cheaper(), ok_moq(), ok_lead(), role)
                    ln.revised_price = dearer()
                    item.lines[reviser.id] = ln
            elif role == "tie":
                if twin.id not in used:
                    used.add(twin.id)
                    item.lines[twin.id] = Line(p.sku, price, ok_moq(), ok_lead(), role)
            else:
                s = free(bidders)
                if s is None:
                    continue
                if role == "slow":
                    lead = rng.choice([d for d in (14, 21, 28, 30, 35) if d > D])
                    item.lines[s.id] = Line(p.sku, cheaper(), ok_moq(), lead, role)
                elif role == "moq":
                    moq = rng.choice([item.qty + 12, item.qty * 2, (item.qty // 50 + 1) * 100 + 50])
                    item.lines[s.id] = Line(p.sku, cheaper(), moq, ok_lead(), role)
                elif role == "substitute":
                    base_name = p.name.rsplit(" ", 1)[0]
                    other = rng.choice([v for v in VARIANTS if not p.name.endswith(v)])
                    item.lines[s.id] = Line(p.sku, cheaper(), ok_moq(), ok_lead(), role,
                                            substitute=f"{base_name} {other}")
                elif role == "pricier":
                    item.lines[s.id] = Line(p.sku, dearer(), ok_moq(), ok_lead(), role)

    roles_seen = {ln.role for it in items for ln in it.lines.values()}
    assert roles_seen >= set(must), f"roles not placed: {set(must) - roles_seen}"
    # every item's winner must be what the written rules give (guards against a generator slip)
    active_ids = {s.id for s in suppliers}
    pref_ids = {s.id for s in preferred}
    for item in items:
        best = _award(item, active_ids, pref_ids, today, expired={expired_sup.id} if "expired" in traps else set())
        assert best == (item.winner, item.price), (item.product.sku, best, item.winner, item.price)
    if level < LEVELS:  # the same draws as the default, then fewer items
        items = _fewer_items(items, level, reviser.id, rng)

    # -- current sourcing: some items already come from their winner, the rest move ---------------
    for item in items:
        if rng.random() < 0.35:
            item.product.supplier_id = item.winner
        elif item.product.supplier_id == item.winner:
            item.product.supplier_id = rng.choice([s.id for s in suppliers if s.id != item.winner])

    # -- quote mails -----------------------------------------------------------------------------
    quotes: list[QuoteMail] = []
    numbers: set[str] = set()

    def qnumber(s: Supplier) -> str:
        while True:
            n = f"{''.join(w[0] for w in s.name.split()[:2]).upper()}-Q{rng.randint(1000, 9999)}"
            if n not in numbers:
                numbers.add(n)
                return n

    def at(d: date, lo: int = 8, hi: int = 17) -> datetime:
        return min(datetime.combine(d, time(rng.randint(lo, hi), rng.randrange(60))),
                   now - timedelta(minutes=rng.randint(10, 90)))

    for s in everyone:
        mine = [(it, it.lines[s.id]) for it in items if s.id in it.lines]
        if not mine:
            continue
        if s is expired_sup and "expired" in traps:
            sent = datetime.combine(rfq_sent + timedelta(days=1), time(rng.randint(8, 16), rng.randrange(60)))
            valid = today - timedelta(days=rng.randint(1, 3))
        else:
            sent = at(rfq_sent + timedelta(days=rng.randint(1, 4)))
            valid = today + timedelta(days=rng.randint(5, 30))
        first = QuoteMail(s, qnumber(s), sent, valid, [(it, ln, ln.price) for it, ln in mine],
                          rng.choice(["table", "list"]))
        quotes.append(first)
        if s is reviser and any(ln.revised_price is not None for _, ln in mine):
            rsent = at(today - timedelta(days=rng.randint(0, 1)))
            if rsent <= sent:
                rsent = sent + timedelta(hours=3)
            quotes.append(QuoteMail(s, f"{first.number}-R1", rsent, valid + timedelta(days=7),
                                    [(it, ln, ln.revised_price or ln.price) for it, ln in mine],
                                    rng.choice(["table", "list"]), revision_of=first))
    winners = sorted({it.winner for it in items})
    quoting = {q.supplier.id for q in quotes}
    silent = [s for s in suppliers if s.id not in quoting]
    no_bid = rng.choice(silent) if silent else None

    msgs: list[dict[str, Any]] = []
    rfq_lines = "\n".join(f"  {it.product.sku:<10} {it.product.name:<34} qty {it.qty:>4}   needed by "
                          f"{it.needed_by.isoformat()}" for it in items)
    invited = [s.email for s in everyone]
    msgs.append({"folder": "Sent", "sender": me.email, "sender_name": me.name, "to": invited, "is_read": True,
                 "subject": f"{rfq}: request for quotation", "date": datetime.combine(rfq_sent, time(10, 5)).isoformat(),
                 "body": f"Hello,\n\n{store_name} invites you to quote for the items below ({rfq}). Please give, "
                         f"for each item you can supply: unit price, minimum order quantity and lead time "
                         f"(calendar days from our order to delivery at our warehouse), and how long your "
                         f"quote is valid.\n\n{rfq_lines}\n\nQuantities are firm. Please quote our SKU; "
                         f"if you cannot supply the exact item, say so.\n\nKind regards,\n{me.name}\n"
                         f"Purchasing, {store_name}"})

    for q in quotes:
        msgs.append(_quote_message(q, rfq, me, store_name, rng))

    rules_day = rfq_sent - timedelta(days=rng.randint(1, 3))
    pref_names = "\n".join(f"   - {s.name}" for s in preferred)
    rules = f"""Hi {me.first},

For the quote rounds from now on, please evaluate the answers like this:

1. Only quotes that answer the RFQ in question count, and only while they are valid (the
   "valid until" day is today or later). If a supplier sent a revised quote, only its
   latest one counts.
2. Exact items only: a substitute or "equivalent" product is not acceptable.
3. The supplier must deliver in time: today plus its lead time (calendar days) must be on
   or before the item's needed-by date in the RFQ.
4. We order exactly the RFQ quantity, so a quote whose minimum order quantity is above it
   does not qualify.
5. Only suppliers whose account is active in the store. We closed a few accounts this year.
6. Among the quotes that qualify, the lowest unit price wins. On a tie, one of our
   preferred suppliers wins:
{pref_names}
   If still tied, the shorter lead time wins.

Once you have the awards: in the store, switch each product to its awarded supplier with the
awarded unit price as its cost, raise one purchase order per awarded supplier with all of its
items at the quoted unit prices, and send it. Then answer each winning quote (reply in its
thread) with the purchase order number and the items and quantities on it. Don't write to
the suppliers who lost; I send the regret letters myself at the end of the month.

Thanks,
{head.first}"""
    msgs.append({"folder": "Inbox", "sender": head.email, "sender_name": head.name, "to": [me.email],
                 "subject": "How we evaluate quotes", "body": rules, "is_read": True,
                 "date": datetime.combine(rules_day, time(16, 20)).isoformat()})

    # the no-bid, an old round's quote, and everyday mail
    if no_bid is not None:
        msgs.append({"folder": "Inbox", "sender": no_bid.email, "sender_name": no_bid.contact, "to": [me.email],
                     "subject": f"Re: {rfq}: request for quotation",
                     "date": at(rfq_sent + timedelta(days=2)).isoformat(),
                     "body": f"Hello {me.first},\n\nThank you for thinking of us. Unfortunately we cannot quote "
                             f"for {rfq} this time; our production slots are full until next quarter.\n\n"
                             f"Best regards,\n{no_bid.contact}\n{no_bid.name}"})
    old_sup = rng.choice([s for s in suppliers if s is not expired_sup])
    old_items = rng.sample([p for p in products if p not in chosen], 2)
    old_sent = rfq_sent - timedelta(days=rng.randint(30, 45))
    old_lines = "\n".join(f"  {p.sku:<10} {p.name:<30} {money(int(p.cost_cents * 0.9)):>10}   MOQ 12   5 days"
                          for p in old_items)
    msgs.append({"folder": "Inbox", "sender": old_sup.email, "sender_name": old_sup.contact, "to": [me.email],
                 "subject": f"Quote for {old_rfq}", "is_read": True,
                 "date": datetime.combine(old_sent, time(11, 2)).isoformat(),
                 "body": f"Hello,\n\nOur quote for {old_rfq}, valid until "
                         f"{(old_sent + timedelta(days=14)).isoformat()}:\n\n{old_lines}\n\nRegards,\n"
                         f"{old_sup.contact}"})
    news_sup = rng.choice(suppliers)
    msgs.append({"folder": "Inbox", "sender": f"news@{news_sup.email.split('@')[1]}",
                 "sender_name": f"{news_sup.name} News", "to": [me.email],
                 "subject": rng.choice(["New season catalogue out now", "Our spring price list",
                                        "Trade show invitation"]),
                 "date": at(today - timedelta(days=rng.randint(1, 4))).isoformat(),
                 "body": "Discover our new range! Catalogue prices are indicative only; ask your account "
                         "manager for a quotation."})
    msgs.append({"folder": "Inbox", "sender": colleague.email, "sender_name": colleague.name, "to": [me.email],
                 "subject": rng.choice(["Dock 3 closed Thursday", "Stocktake next week", "Forklift training"]),
                 "date": at(today - timedelta(days=1)).isoformat(),
                 "body": f"Hi {me.first}, heads up: dock 3 is closed on Thursday for repairs; deliveries go to "
                         f"dock 1.\n\n{colleague.first}"})
    if level == 1:  # the RFQ, the rules, the two quotes and the old round's quote: no no-bid or everyday mail
        msgs = [m for m in msgs if "quote" in m or m["folder"] == "Sent"
                or m["subject"] in ("How we evaluate quotes", f"Quote for {old_rfq}")]
    msgs.sort(key=lambda m: m["date"])
    for i, m in enumerate(msgs, start=1):
        m["id"] = i
        if "quote" in m:
            m["quote"].msg_id = i
    mail_rows = [{k: v for k, v in m.items() if k != "quote"} for m in msgs]
    n_seeded = len(msgs)

    # -- purchase orders already in the store -------------------------------------------------
    pos: list[dict[str, Any]] = []
    po_no = rng.randint(2100, 6000)
    for k in range(rng.randint(3, 4)):
        sup = rng.choice(suppliers)
        mine = [p for p in products if p.supplier_id == sup.id and p not in chosen]
        if not mine:
            continue
        po_no += rng.randint(3, 20)
        created = today - timedelta(days=rng.randint(20, 60))
        lines = [{"sku": p.sku, "qty": p.case_size * rng.randint(2, 6), "unit_cost_cents": p.cost_cents}
                 for p in rng.sample(mine, min(len(mine), rng.randint(1, 3)))]
        for ln in lines:
            ln["received_qty"] = ln["qty"]
        pos.append({"id": f"PO-{po_no}", "supplier_id": sup.id, "status": "received",
                    "created_at": created.isoformat(), "sent_at": created.isoformat(),
                    "received_at": (created + timedelta(days=sup.lead_time_days)).isoformat(), "lines": lines})
    for status in ("sent", "draft"):
        sup = rng.choice([s for s in suppliers if any(p.supplier_id == s.id and p not in chosen for p in products)])
        mine = [p for p in products if p.supplier_id == sup.id and p not in chosen]
        po_no += rng.randint(3, 20)
        created = today - timedelta(days=rng.randint(1, 5))
        po = {"id": f"PO-{po_no}", "supplier_id": sup.id, "status": status, "created_at": created.isoformat(),
              "lines": [{"sku": p.sku, "qty": p.case_size * rng.randint(2, 6), "unit_cost_cents": p.cost_cents}
                        for p in rng.sample(mine, min(len(mine), 2))]}
        if status == "sent":
            po["sent_at"] = created.isoformat()
        else:
            po["note"] = "on hold until the new price list arrives"
        pos.append(po)
    initial_pos = {po["id"]: (po["status"], [(ln["sku"], ln["qty"], ln["unit_cost_cents"]) for ln in po["lines"]])
                   for po in pos}

    sup_rows = [s.row() for s in suppliers] + [{**closed.row(), "active": False}]
    store_args = dict(store_name=store_name, today=today.isoformat(), suppliers=sup_rows,
                      products=[p.row() for p in products], purchase_orders=pos)
    return Scenario(
        items=items, quotes=quotes, rfq=rfq, me=me.name, n_seeded=n_seeded, initial_pos=initial_pos,
        initial_products={p.sku: p.row() for p in products}, sup_by_id=sup_by_id, winners=winners,
        on_hold=pos[-1]["id"], head=head.email, store_name=store_name, owner=(me.email, me.name),
        first_names=(me.first, head.first), today=today, now=now, store_args=store_args, mail_rows=mail_rows,
        seed=seed,
        data={"today": today.isoformat(), "rfq": rfq,
              "awards": {it.product.sku: {"supplier": it.winner, "price": it.price, "qty": it.qty,
                                          "roles": sorted(ln.role for ln in it.lines.values())} for it in items},
              "preferred": sorted(pref_ids), "closed": closed.id,
              "expired": expired_sup.id if _trap_items(items, "expired") else "",
              "reviser": reviser.id if any(q.revision_of for q in quotes) else "",
              **{key: [it.product.sku for it in _trap_items(items, role)] for role, (key, _, _) in TRAPS.items()}},
    )


def _trap_items(items: list[Item], role: str) -> list[Item]:
    """The items a trap lands on: a rival's line in that role, or (a revision) any line whose
    price the supplier's revised quote changed, the winner's included."""
    if role == "revised":
        return [it for it in items if any(ln.revised_price is not None for ln in it.lines.values())]
    return [it for it in items if any(ln.role == role for ln in it.lines.values())]


def build(sc: Scenario, root: Path) -> None:
    store.create_store(root / "state" / "store.sqlite", **sc.store_args)
    mail.create_mailbox(root / "state" / "mail.sqlite", *sc.owner, folders=["Inbox", "Sent", "Archive"],
                        messages=sc.mail_rows, now=sc.now.isoformat())


def instruction(sc: Scenario) -> str:
    """The head of purchasing's request, its wording drawn apart from the Scenario's draws."""
    w = phrasing_rng(SupplierQuoteSelection.name, sc.seed)
    me_first, head_first = sc.first_names
    day = long_date(sc.today)
    hello = say(w, f"Hi {me_first}, {head_first} here.", f"Hello {me_first}, it's {head_first}.",
                f"{me_first}, hi! {head_first} here.")
    close = say(w, f"The answers to {sc.rfq} are all in, so could you close that round today ({day})?",
                f"Every answer to {sc.rfq} has come in: please close that round today ({day}).",
                f"Could you close the {sc.rfq} round today ({day})? All the answers are in.")
    rules = say(w, "Evaluate the quotes in your inbox the way I described in my mail on how we evaluate quotes,",
                "Go through the quotes in your inbox using the rules from my mail on how we evaluate quotes,",
                "Judge the quotes waiting in your inbox by what I wrote in my mail on how we evaluate quotes,")
    work = say(w, "update the products in the store, place and send the purchase orders, and let the winning "
                  "suppliers know.",
               "then update the products in the store, place and send the purchase orders, and tell the winning "
               "suppliers.",
               "and after that: update the store's products, place the purchase orders and send them, and let "
               "each winning supplier know.")
    scope = in_some_order(w, [
        say(w, f"Only the items in {sc.rfq}, please.", f"Please stick to the items in {sc.rfq}.",
            f"Just the items in {sc.rfq}, please."),
        say(w, "Nothing else in the store should change.", "Leave everything else in the store as it is.",
            "The rest of the store should stay exactly as it is."),
    ])
    closer = say(w, "Thanks!", "Thank you.", f"Thanks, {head_first}", "")
    return " ".join(x for x in [hello, close, rules, work, *scope, closer] if x)


def _award(item: Item, active: set[str], preferred: set[str], today: date, expired: set[str]) -> tuple[str, int]:
    """The rules, applied to one item's quote lines: (supplier id, unit price in cents)."""
    ok = []
    for sid, ln in item.lines.items():
        price = ln.revised_price if ln.revised_price is not None else ln.price
        if sid in expired or sid not in active or ln.substitute:
            continue
        if today + timedelta(days=ln.lead) > item.needed_by or ln.moq > item.qty:
            continue
        ok.append((price, sid not in preferred, ln.lead, sid))
    ok.sort()
    if len(ok) > 1 and ok[0][:3] == ok[1][:3]:
        raise AssertionError(f"unresolved tie for {item.product.sku}: {ok[:2]}")
    return ok[0][3], ok[0][0]


def _quote_message(q: QuoteMail, rfq: str, me, store_name: str, rng) -> dict[str, Any]:
    s = q.supplier
    if q.style == "table":
        width = max(len(it.product.name) for it, _, _ in q.lines) + 2
        rows = [f"{'Your SKU':<10} {'Item':<{width}} {'Unit price':>10} {'MOQ':>6}  Lead time"]
        for it, ln, price in q.lines:
            name = it.product.name if not ln.substitute else f"{ln.substitute} (instead of {it.product.name})"
            rows.append(f"{it.product.sku:<10} {name:<{max(width, len(name))}} {money(price):>10} {ln.moq:>6}  "
                        f"{_lead_text(ln.lead, rng)}")
        body_lines = "\n".join(rows)
    else:
        rows = []
        for it, ln, price in q.lines:
            if ln.substitute:
                rows.append(f"- {it.product.name} ({it.product.sku}): we no longer carry this one, but we can offer "
                            f"the {ln.substitute} instead at ${money(price)} per unit, minimum order {ln.moq} units, "
                            f"delivery {_lead_text(ln.lead, rng)} after your order.")
            else:
                rows.append(f"- {it.product.name} ({it.product.sku}): ${money(price)} per unit, minimum order "
                            f"{ln.moq} units, delivery {_lead_text(ln.lead, rng)} after your order.")
        body_lines = "\n".join(rows)
    if q.revision_of is not None:
        subject = f"Revised quote {q.number} for {rfq}"
        lead = (f"Please note a correction to our quote {q.revision_of.number} of "
                f"{q.revision_of.sent.date().isoformat()}: this revised quote replaces it in full.")
    else:
        subject = rng.choice([f"Quote {q.number} for {rfq}", f"Re: {rfq}: request for quotation",
                              f"{s.name}: quotation {q.number}"])
        lead = f"Thank you for your request {rfq}. Our quotation {q.number} is below."
    body = (f"Hello {me.first},\n\n{lead}\n\n{body_lines}\n\nThis quote is valid until "
            f"{_day_text(q.valid_until, rng)}. Prices are in USD, delivered to {store_name}.\n\n"
            f"Kind regards,\n{s.contact}\n{s.name}")
    return {"folder": "Inbox", "sender": s.email, "sender_name": s.contact, "to": [me.email], "subject": subject,
            "body": body, "date": q.sent.isoformat(), "quote": q}


@dataclass(frozen=True)
class Scenario:
    """One instance, as drawn from its seed (``draw``); the World, the instruction, the oracle and
    the criteria are pure functions of it."""

    items: list[Item]
    quotes: list[QuoteMail]
    rfq: str
    me: str
    n_seeded: int
    initial_pos: dict[str, tuple[str, list[tuple[str, int, int]]]]
    initial_products: dict[str, dict[str, Any]]
    sup_by_id: dict[str, Supplier]
    winners: list[str]
    on_hold: str
    head: str
    store_name: str
    owner: tuple[str, str]
    """The mailbox owner's (address, name)."""
    first_names: tuple[str, str]
    """The first names of the owner and of the head of purchasing, who asks."""
    today: date
    now: datetime
    store_args: dict[str, Any]
    mail_rows: list[dict[str, Any]]
    data: dict[str, Any]
    seed: int
    """The instance's seed: the instruction's wording comes from it (``phrasing_rng``), apart from
    every draw above."""

    def latest_quote(self, sid: str) -> QuoteMail:
        return max((q for q in self.quotes if q.supplier.id == sid), key=lambda q: q.sent)


# -- reference solution ----------------------------------------------------------------------


def _oracle(ctx: Scenario, short: bool = False):
    """Read the rules, the RFQ and every answer to it, check the suppliers in the store, then award
    each item, switch its sourcing, raise and send one purchase order per winner, answer each
    winning quote, and check the result. ``short`` (level 1: one item, two quotes, no closed
    account among them) reads the inbox and the two quotes, acts, and checks nothing."""
    inbox = loads((yield ToolCall("mail__list_messages", {"folder": "Inbox", "limit": 50},
                                  "See what came in for the RFQ.")))
    if not short:
        by_subject = {m["id"]: m for m in inbox["messages"]}
        rules_id = next(i for i, m in by_subject.items() if m["subject"] == "How we evaluate quotes")
        yield ToolCall("mail__read_message", {"message_id": rules_id}, "Re-read the evaluation rules.")
        sent = loads((yield ToolCall("mail__search_messages", {"query": ctx.rfq, "folder": "Sent"},
                                     "Find the RFQ we sent: quantities and needed-by dates.")))
        yield ToolCall("mail__read_message", {"message_id": sent["messages"][0]["id"]}, "Read the RFQ.")
    for q in sorted(ctx.quotes, key=lambda q: q.msg_id):
        yield ToolCall("mail__read_message", {"message_id": q.msg_id}, f"Read {q.supplier.name}'s answer ({q.number}).")
    if not short:
        suppliers = loads((yield ToolCall("store__search_suppliers", {},
                                          "Which supplier accounts are still active?")))
        active = {s["id"] for s in suppliers if s["active"]}
        assert set(ctx.winners) <= active

    items = ctx.items
    if not short:
        for it in items:
            yield ToolCall("store__get_product", {"sku": it.product.sku},
                           f"Current supplier and cost of {it.product.sku}.")
    for it in items:
        yield ToolCall("store__set_product_sourcing",
                       {"sku": it.product.sku, "supplier_id": it.winner, "cost": plain(it.price)},
                       f"Award {it.product.sku} to {it.winner} at {usd(it.price)}: switch its sourcing.")

    plan: dict[str, list[Item]] = {}
    for it in items:
        plan.setdefault(it.winner, []).append(it)
    made: dict[str, str] = {}
    for sid, its in sorted(plan.items()):
        text = (yield ToolCall("store__create_purchase_order", {"supplier_id": sid, "note": f"{ctx.rfq} award"},
                               f"One purchase order for {sid}."))
        pid = made[sid] = text.split("purchase order ", 1)[1].split()[0]
        for it in its:
            yield ToolCall("store__add_po_line", {"po_id": pid, "sku": it.product.sku, "qty": it.qty,
                                                  "unit_cost": plain(it.price)},
                           f"{it.qty} x {it.product.sku} at the quoted {usd(it.price)}.")
        yield ToolCall("store__send_purchase_order", {"po_id": pid}, f"Send {pid} to the supplier.")
        yield _reply(ctx, sid, pid, its)
    if not short:
        yield ToolCall("store__search_purchase_orders", {"status": "sent", "limit": 20},
                       "Check the new purchase orders all went out.")
        yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 10}, "Check the replies went out.")
    return (f"Closed {ctx.rfq}: awarded {len(items)} items to {len(made)} suppliers, sent "
            + ", ".join(made[s] for s in sorted(made)) + " and answered each winning quote.")


def _item_line(it: Item) -> str:
    return f"- {it.product.sku} {it.product.name}: {it.qty} units at {usd(it.price)}"


def _reply(ctx: Scenario, sid: str, pid: str, its: list[Item]) -> ToolCall:
    q = ctx.latest_quote(sid)
    lines = [f"Thank you for your quote {q.number}. We have placed purchase order {pid} with you for:",
             *map(_item_line, its)]
    body = f"Hello {q.supplier.contact.split()[0]},\n\n" + "\n".join(lines) + f"\n\nKind regards,\n{ctx.me}"
    return ToolCall("mail__reply", {"message_id": q.msg_id, "body": body},
                    f"Tell {q.supplier.name} about {pid} in the thread of its quote.")


def _perturbations(sc: Scenario, short: bool, criteria: list[Criterion]) -> dict[str, perturb.Oracle]:
    """For each criterion, the oracle with its calls edited so that it fails that one; the first
    winner (by id) takes the edits about one purchase order and its reply."""
    solve, items = partial(_oracle, sc, short=short), sc.items
    sid = min(it.winner for it in items)
    its = [it for it in items if it.winner == sid]
    line = perturb.on("store__add_po_line", sku=its[0].product.sku)
    reply = perturb.on("mail__reply", message_id=sc.latest_quote(sid).msg_id)
    send = perturb.on("store__send_purchase_order")
    sourcing = next((it for it in items if it.winner == it.product.supplier_id), None)

    def misjudged() -> perturb.Oracle:
        """The oracle on an award that went to a rival (the preferred supplier's near-namesake on a
        tie, else an active rival): the sourcing, purchase orders and replies all follow it."""
        it, rival = next(((it, s) for it in items for s, ln in it.lines.items() if ln.role == "tie"), (None, None))
        if it is None:
            it, rival = next((it, s) for it in items for s in it.lines if s not in (it.winner, sc.data["closed"]))
        wrong = [replace(x, winner=rival) if x is it else x for x in items]
        return partial(_oracle, replace(sc, items=wrong), short=short)

    def at_the_end(call: ToolCall) -> perturb.Oracle:
        """``call`` once every winner is answered, before the final checks (level 1 has none)."""
        return perturb.insert(solve, call, before=None if short else perturb.on("store__search_purchase_orders"))

    flawed = {
        "awarded_suppliers": misjudged,
        "order_quantities": lambda: perturb.change(solve, line, qty=its[0].qty + 12),
        "unit_prices": lambda: perturb.change(solve, line, unit_cost=plain(its[0].product.cost_cents)),
        "one_po_per_supplier": lambda: perturb.insert(solve, ToolCall(
            "store__create_purchase_order", {"supplier_id": sid, "note": "spare"}, "A spare draft."), before=send),
        "pos_sent": lambda: perturb.drop(solve, send, skip=len(sc.winners) - 1),
        "catalogue_sourcing": lambda: (  # the cost left out where the supplier stays, else a dollar over
            perturb.change(solve, perturb.on("store__set_product_sourcing", sku=sourcing.product.sku), cost=None)
            if sourcing else perturb.change(solve, perturb.on("store__set_product_sourcing", sku=items[-1].product.sku),
                                            cost=plain(items[-1].price + 100))),
        "supplier_replies": lambda: perturb.change(solve, reply, lambda a: {**a, "body": re.sub(
            r"We have placed purchase order \S+ with you for:", "Our purchase order for these follows separately:",
            a["body"])}),
        "reply_details": lambda: perturb.change(
            solve, reply, lambda a: {**a, "body": a["body"].replace("\n" + _item_line(its[0]), "", 1)}),
        "quotes_read": lambda: perturb.drop(solve, perturb.on("mail__read_message", message_id=sc.quotes[0].msg_id)),
        "replied_after_send": lambda: perturb.replace(  # the reply goes out just before its order
            perturb.drop(solve, reply), send, lambda call: [_reply(sc, sid, call.arguments["po_id"], its), call]),
        "no_stray_mail": lambda: at_the_end(ToolCall("mail__reply", {
            "message_id": next(q for q in sc.quotes if q.supplier.id not in sc.winners).msg_id,
            "body": "Thank you; we went with another supplier."}, "Let a losing supplier know.")),
        "other_pos_untouched": lambda: at_the_end(ToolCall(
            "store__send_purchase_order", {"po_id": sc.on_hold}, "Send the waiting draft too.")),
        "catalogue_untouched": lambda: at_the_end(ToolCall("store__update_product", {
            "sku": next(s for s in sc.initial_products if s not in {it.product.sku for it in items}),
            "reorder_point": 1}, "Tidy a reorder point.")),
        **{cid: partial(_fell_for, sc, short, role) for role, (_, cid, _) in TRAPS.items()},
    }
    return {c.id: flawed[c.id]() for c in criteria}


def _fell_for(sc: Scenario, short: bool, role: str) -> perturb.Oracle:
    """The oracle falling into trap ``role`` on the first item it lands on: the item awarded to the
    rival in that role at its (first) quoted price; a revision that made the winner cheaper read at
    the first quote's price; a closed account (which the store refuses) an order a dollar over."""
    it = _trap_items(sc.items, role)[0]
    solve = partial(_oracle, sc, short=short)
    rival = next((sid for sid, ln in it.lines.items() if ln.role == role), None)
    if rival is None or role == "inactive":
        win = it.lines[it.winner]
        price = win.price if role == "revised" and win.price != it.price else it.price + 100
        return perturb.change(solve, perturb.on("store__add_po_line", sku=it.product.sku), unit_cost=plain(price))
    wrong = [replace(x, winner=rival, price=x.lines[rival].price) if x is it else x for x in sc.items]
    return partial(_oracle, replace(sc, items=wrong), short=short)


# -- grading ---------------------------------------------------------------------------------


def _criteria(ctx: Scenario) -> list[Criterion]:
    items = ctx.items
    by_sku = {it.product.sku: it for it in items}
    winner_addr = {sid: ctx.sup_by_id[sid].email for sid in ctx.winners}
    quote_ids = {q.msg_id for q in ctx.quotes}

    def new_pos(world) -> list[dict]:
        return [po for pid, po in store.purchase_orders(world).items()
                if pid not in ctx.initial_pos and po["status"] != "cancelled"]

    def new_lines(world) -> dict[str, list[tuple[dict, dict]]]:
        out: dict[str, list[tuple[dict, dict]]] = {}
        for po in new_pos(world):
            for ln in po["lines"]:
                out.setdefault(ln["sku"], []).append((po, ln))
        return out

    def mails_to(world, sid: str) -> list[dict]:
        return [m for m in mail.sent_messages(world) if m["id"] > ctx.n_seeded and winner_addr[sid] in m["to"] + m["cc"]]

    def awarded_suppliers(world, traj):
        got = new_lines(world)
        extra = sorted(set(got) - set(by_sku))
        if extra:
            return False, f"not in the RFQ: {extra}"
        bad = []
        for sku, it in by_sku.items():
            lines = got.get(sku, [])
            if len(lines) != 1 or lines[0][0]["supplier_id"] != it.winner:
                bad.append(f"{sku}: {[(po['id'], po['supplier_id']) for po, _ in lines]}, expected {it.winner}")
        return not bad, "; ".join(bad)

    def order_quantities(world, traj):
        got = new_lines(world)
        found = [s for s in by_sku if s in got]
        if not found:
            return False, "no RFQ item was ordered"
        bad = [f"{s}: {[ln['qty'] for _, ln in got[s]]} (want {by_sku[s].qty})" for s in by_sku
               if s not in got or sum(ln["qty"] for _, ln in got[s]) != by_sku[s].qty]
        return not bad, "; ".join(bad)

    def unit_prices(world, traj):
        got = new_lines(world)
        if not any(s in got for s in by_sku):
            return False, "no RFQ item was ordered"
        bad = [f"{s}: {[ln['unit_cost_cents'] for _, ln in got.get(s, [])]} (want {by_sku[s].price})" for s in by_sku
               if not got.get(s) or any(ln["unit_cost_cents"] != by_sku[s].price for _, ln in got[s])]
        return not bad, "; ".join(bad)

    def one_po_per_supplier(world, traj):
        sups = sorted(po["supplier_id"] for po in new_pos(world))
        return sups == ctx.winners, f"new purchase orders for {sups}, expected one each for {ctx.winners}"

    def pos_sent(world, traj):
        pos = new_pos(world)
        unsent = [po["id"] for po in pos if po["status"] != "sent"]
        have = {po["supplier_id"] for po in pos if po["status"] == "sent"
                and any(ln["sku"] in by_sku for ln in po["lines"])}
        missing = [s for s in ctx.winners if s not in have]
        return not unsent and not missing, f"unsent: {unsent}; no sent order for {missing}"

    def catalogue_sourcing(world, traj):
        now = store.products(world)
        bad = [f"{s}: {now[s]['supplier_id']} at {now[s]['cost_cents']}" for s, it in by_sku.items()
               if now[s]["supplier_id"] != it.winner or now[s]["cost_cents"] != it.price]
        return not bad, "; ".join(bad)

    def supplier_replies(world, traj):
        pos: dict[str, list[str]] = {}
        for po in new_pos(world):
            pos.setdefault(po["supplier_id"], []).append(po["id"])
        bad = []
        for sid in ctx.winners:
            got = mails_to(world, sid)
            if len(got) != 1:
                bad.append(f"{sid}: {len(got)} mails")
            elif not any(mentions_code(f"{got[0]['subject']} {got[0]['body']}", pid) for pid in pos.get(sid, [])):
                bad.append(f"{sid}: mail does not quote its purchase order {pos.get(sid)}")
            elif foreign := [pid for other, ids in pos.items() if other != sid for pid in ids
                             if mentions_code(f"{got[0]['subject']} {got[0]['body']}", pid)]:
                bad.append(f"{sid}: mail also quotes other suppliers' purchase orders {foreign}")
        return not bad, "; ".join(bad)

    def reply_details(world, traj):
        bad = []
        for sid in ctx.winners:
            got = mails_to(world, sid)
            if not got:
                bad.append(f"no mail to {sid}")
                continue
            text = "\n".join(f"{m['subject']}\n{m['body']}" for m in got)
            for it in items:
                named = mentions_code(text, it.product.sku) or squash(it.product.name) in squash(text)
                if it.winner != sid:
                    if named:  # a winner's mail is about what it won, not the whole RFQ
                        bad.append(f"{sid}: names {it.product.sku}, which it did not win")
                elif not named or it.qty * 100 not in amounts_in(text):
                    bad.append(f"{sid}: {it.product.sku} x {it.qty} not stated")
        return not bad, "; ".join(bad)

    def quotes_read(world, traj):
        calls = traj.tool_calls
        first_po = next((k for k, t in enumerate(calls) if t.name == "store__create_purchase_order"
                         and not t.is_error), None)
        if first_po is None:
            return False, "no purchase order was raised"
        read = {t.arguments.get("message_id") for t in calls[:first_po]
                if t.name == "mail__read_message" and not t.is_error and isinstance(t.arguments, dict)}
        read = {int(x) for x in read if str(x).isdigit()}
        missing = sorted(quote_ids - read)
        return not missing, f"quotes not opened before ordering: messages {missing}" if missing else ""

    def replied_after_send(world, traj):
        calls = traj.tool_calls
        pos = {po["id"]: po["supplier_id"] for po in new_pos(world)}
        sent_at: dict[str, int] = {}
        for k, t in enumerate(calls):
            if t.name == "store__send_purchase_order" and not t.is_error and isinstance(t.arguments, dict):
                sid = pos.get(str(t.arguments.get("po_id", "")).strip().upper())
                if sid:
                    sent_at.setdefault(sid, k)
        by_msg = {q.msg_id: q.supplier.id for q in ctx.quotes}
        answered: dict[str, int] = {}
        for k, t in enumerate(calls):
            if t.is_error or not isinstance(t.arguments, dict):
                continue
            targets = set()
            if t.name == "mail__reply" and str(t.arguments.get("message_id", "")).isdigit():
                targets.add(by_msg.get(int(t.arguments["message_id"])))
            if t.name in ("mail__send_message", "mail__forward"):
                rcpts = {parse_address(a) for a in [*(t.arguments.get("to") or []), *(t.arguments.get("cc") or [])]}
                targets |= {sid for sid, addr in winner_addr.items() if addr in rcpts}
            for sid in targets & set(ctx.winners):
                answered.setdefault(sid, k)
        bad = [sid for sid in ctx.winners if sid not in answered or sid not in sent_at or answered[sid] < sent_at[sid]]
        return not bad, f"answered before its purchase order was sent (or never): {bad}" if bad else ""

    def other_pos_untouched(world, traj):
        now = store.purchase_orders(world)
        changed = [pid for pid, (status, lines) in ctx.initial_pos.items()
                   if pid not in now or now[pid]["status"] != status
                   or [(ln["sku"], ln["qty"], ln["unit_cost_cents"]) for ln in now[pid]["lines"]] != lines]
        return not changed, f"changed: {changed}" if changed else ""

    def catalogue_untouched(world, traj):
        now = store.products(world)
        changed = []
        for sku, before in ctx.initial_products.items():
            p = now.get(sku)
            if p is None:
                changed.append(sku)
                continue
            for key, value in before.items():
                if sku in by_sku and key in ("supplier_id", "cost_cents"):
                    continue
                if p[key] != value:
                    changed.append(f"{sku}.{key}")
        if store.stock_moves(world):
            changed.append("stock moved")
        return not changed, f"changed: {changed}" if changed else ""

    return [
        Criterion("awarded_suppliers", "each RFQ item is ordered once, from the supplier the rules award it to, and "
                  "nothing else is ordered", "final_state", awarded_suppliers, 2.0),
        Criterion("order_quantities", "each RFQ item is ordered in exactly the RFQ quantity", "final_state",
                  order_quantities, requires=("awarded_suppliers",)),
        Criterion("unit_prices", "each purchase order line carries the awarded quoted unit price", "final_state",
                  unit_prices),
        Criterion("one_po_per_supplier", "exactly one new purchase order per awarded supplier", "final_state",
                  one_po_per_supplier),
        Criterion("pos_sent", "every new purchase order was sent", "final_state", pos_sent),
        Criterion("catalogue_sourcing", "each RFQ product is now bought from its awarded supplier at the awarded "
                  "price", "final_state", catalogue_sourcing, 2.0),
        Criterion("supplier_replies", "each awarded supplier got exactly one mail, quoting its purchase order "
                  "number (and no other supplier's)", "final_state", supplier_replies),
        Criterion("reply_details", "each winner's mail names its items and quantities, and no item it did not win",
                  "final_state", reply_details),
        Criterion("quotes_read", "every quote for the RFQ (revisions, expired and closed-account ones included) was "
                  "opened before the first purchase order", "process", quotes_read, requires=("awarded_suppliers",)),
        Criterion("replied_after_send", "each winner was answered only after its purchase order was sent",
                  "process", replied_after_send, requires=("supplier_replies",)),
        mail_kit.sends_only(set(winner_addr.values()) | {ctx.head}, seeded=ctx.n_seeded,
                            description="mail went only to the awarded suppliers (and the head of purchasing)"),
        Criterion("other_pos_untouched", "every existing purchase order (including the draft on hold) is unchanged",
                  "final_state", other_pos_untouched, guard=True),
        Criterion("catalogue_untouched", "no other product setting changed and no stock moved", "final_state",
                  catalogue_untouched, guard=True),
        *_trap_criteria(ctx, new_lines),
    ]


def _trap_criteria(ctx: Scenario, new_lines) -> list[Criterion]:
    """One criterion per trap the round carries (none for a trap it does not): each item the
    trap lands on is ordered once, from the supplier the rules award it to, at the awarded price."""
    out = []
    for role, (_, cid, what) in TRAPS.items():
        its = _trap_items(ctx.items, role)
        if not its:
            continue

        def check(world, traj, its=its):
            got = new_lines(world)
            bad = [f"{it.product.sku}: {[(po['supplier_id'], ln['unit_cost_cents']) for po, ln in got.get(it.product.sku, [])]}"
                   f", expected {it.winner} at {it.price}" for it in its
                   if [(po["supplier_id"], ln["unit_cost_cents"]) for po, ln in got.get(it.product.sku, [])]
                   != [(it.winner, it.price)]]
            return not bad, "; ".join(bad)
        out.append(Criterion(cid, f"where {what}, the item is ordered once from the supplier the rules award it "
                             "to, at the awarded price", "final_state", check))
    return out
