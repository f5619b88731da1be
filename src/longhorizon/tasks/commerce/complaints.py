"""Order operations: work a support inbox of customer complaints against the store's policy.

The support lead's inbox holds 7-9 open complaints (cancel requests, damaged items, missing
parcels) among chatter, a pre-sales question, a thank-you and a complaint already answered.
Each complaint needs its order looked up (some customers give no order number, so the agent
goes through the customer's record), then the current policy applied: cancel and refund
unshipped orders, refuse to cancel shipped ones, refund damaged items inside the window and
under the approval limit, escalate bigger ones to the manager, decline late claims, never
refund twice, reship lost parcels with the same carrier, and answer each customer once,
quoting the order number and what was done. An archived policy with other limits sits
next to the current one. Which trap kinds an inbox holds (a late claim, an item refunded
before, a shipped order to cancel, a parcel still in transit, an unpaid order to cancel) is
drawn per seed; ``Task.data`` lists each kind's orders (empty when absent) and each kind
present gets its criterion (``TRAPS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    CARRIERS,
    Customer,
    Product,
    make_customers,
    make_products,
    make_suppliers,
    mentions_amount,
    mentions_id,
    mentions_tracking,
    pick_today,
    plain,
    tracking_for,
    usd,
)
from longhorizon.tasks.common import People, loads, long_date, rng_and_faker, slug, write_files
from longhorizon.tasks.kit import mail as mail_kit, perturb

POLICY = "policies/customer_service_policy.md"
CASE_TYPES = ("cancel_paid", "cancel_pending", "cancel_shipped", "damaged_ok", "damaged_late", "over_limit",
              "already_refunded", "lost", "in_transit")
ALWAYS = ["cancel_paid", "damaged_ok", "lost", "over_limit"]
OPTIONAL = ["cancel_pending", "cancel_shipped", "damaged_late", "already_refunded", "in_transit", "damaged_ok",
            "cancel_paid"]
DAMAGE_WORDS = ["arrived cracked", "arrived broken", "was smashed in the box", "stopped working on day one",
                "arrived with a big dent", "came damaged"]
METHODS = ["card", "card", "paypal", "apple_pay"]
TRAPS = {
    # kind: (Task.data key listing its orders, the criterion it gets where present)
    "damaged_late": ("late_claims", "late_claim_declined"),
    "already_refunded": ("refunded_before", "no_double_refund"),
    "cancel_shipped": ("shipped_cancels", "shipped_not_cancelled"),
    "in_transit": ("in_transit", "in_transit_not_reshipped"),
    "cancel_pending": ("unpaid_cancels", ""),
}
"""The trap kinds a default-level inbox draws among (``OPTIONAL``: three to five of them, with
more ordinary cases): where ``Task.data`` lists their orders (empty when absent) and the criterion
each gets only when present (an unpaid cancellation is graded by ``cancellations``; the store
refuses a refund on it)."""
NEEDS = {"cancellations": ("cancel_paid", "cancel_pending"), "cancel_refunds": ("cancel_paid",),
         "damage_refunds": ("damaged_ok",), "replacement_shipments": ("lost",), "escalation": ("over_limit",),
         **{cid: (kind,) for kind, (_, cid) in TRAPS.items() if cid}}
"""Criteria that judge one kind of complaint: an instance without that kind leaves them out."""


@dataclass
class Case:
    kind: str
    customer: Customer
    lines: list[tuple[Product, int]]
    shipping: int
    placed: datetime
    target: int = 0
    """Index of the line the complaint is about (damage cases)."""
    carrier: str = ""
    tracking: str = ""
    shipped: date | None = None
    delivered: date | None = None
    omit_id: bool = False
    order_id: str = ""
    shipment_id: str = ""
    msg_id: int = 0
    prior_refund: int = 0
    prior_refund_day: date | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def item(self) -> Product:
        return self.lines[self.target][0]

    @property
    def total(self) -> int:
        return sum(p.price_cents * q for p, q in self.lines) + self.shipping

    @property
    def line_total(self) -> int:
        p, q = self.lines[self.target]
        return p.price_cents * q


def _status(kind: str) -> str:
    return {
        "cancel_paid": "paid", "cancel_pending": "pending", "cancel_shipped": "shipped", "lost": "shipped",
        "in_transit": "shipped",
    }.get(kind, "delivered")


@register
class CustomerComplaintResolution(TaskFamily):
    name = "customer_complaint_resolution"
    category = "order operations"
    apps = ("mail", "store", "files")
    description = (
        "Work the support inbox's open complaints against the current customer-service policy: look up "
        "each order, cancel and refund, refund damaged items within limits, escalate big refunds, reship "
        "lost parcels, decline what the policy excludes, and reply to every customer once."
    )

    levels = 3
    """1: one damage claim (quoting its order) inside the window and the limit, next to a complaint
    already answered and a thank-you, under a policy of damage claims and replies only; 2: four complaints (a cancellation, a damage claim, a lost parcel, a claim
    over the limit); 3 (default): seven to nine among chatter, a pre-sales question and newsletters."""
    toolsets = {1: (
        "files__read_file", "mail__list_messages", "mail__read_message", "mail__reply", "store__get_order",
        "store__issue_refund",
    )}
    """Level 1's finder is the inbox: the task names the policy, and the claim quotes its order."""

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        store_name = f"{fake.last_name()} {rng.choice(['Home & Garden', 'Goods', 'Supply Co', 'Living', 'Outfitters'])}"
        domain = f"{slug(store_name)[:20]}.example"
        me, manager, colleague, old_manager = (people.make(domain) for _ in range(4))
        support = f"support@{domain}"
        today = pick_today(rng)
        now = datetime.combine(today, time(8, 30))
        window = rng.choice([14, 21, 30, 45])
        limit = rng.choice([15000, 20000, 25000])
        old_window = rng.choice([w for w in (7, 10, 60, 90) if w != window])
        old_limit = rng.choice([x for x in (10000, 30000, 50000) if x != limit])

        suppliers = make_suppliers(rng, fake, 3)
        products = make_products(rng, 34, suppliers)
        for p in products:
            p.stock = rng.randint(8, 60)
            p.reorder_point = rng.randint(3, 10)

        def priced(pred, lo: int, hi: int, exclude: set[str]) -> Product:
            pool = [p for p in products if pred(p.price_cents) and p.sku not in exclude]
            if pool:
                return rng.choice(pool)
            p = rng.choice([p for p in products if p.sku not in exclude])
            p.price_cents = rng.randint(lo, hi) // 100 * 100 - 1
            return p

        kinds = ALWAYS + rng.sample(OPTIONAL, rng.randint(3, 5))
        rng.shuffle(kinds)
        customers = make_customers(rng, fake, len(kinds) + 24)
        complainants, others = customers[:len(kinds)], customers[len(kinds):]

        cases: list[Case] = []
        used_targets: set[str] = set()
        for kind, cust in zip(kinds, complainants):
            n_lines = rng.randint(1, 3)
            if kind in ("damaged_ok", "already_refunded"):
                target = priced(lambda c: 1500 <= c <= int(limit * 0.85), 1500, int(limit * 0.85), used_targets)
            elif kind == "over_limit":
                target = priced(lambda c: c >= int(limit * 1.15), int(limit * 1.2), limit * 2, used_targets)
            elif kind == "damaged_late":
                target = priced(lambda c: c <= limit, 1500, limit, used_targets)
            else:
                target = rng.choice(products)
            used_targets.add(target.sku)
            rest = rng.sample([p for p in products if p.sku != target.sku and p.name.split()[0] != target.name.split()[0]],
                              n_lines - 1)
            lines = [(target, 1)] + [(p, rng.choice([1, 1, 2])) for p in rest]
            rng.shuffle(lines)
            idx = next(i for i, (p, _) in enumerate(lines) if p.sku == target.sku)
            shipping = rng.choice([0, 499, 599, 799, 999])
            c = Case(kind, cust, lines, shipping, now, target=idx, carrier=rng.choice(CARRIERS))
            c.tracking = tracking_for(rng, c.carrier)
            if kind in ("cancel_paid", "cancel_pending"):
                c.placed = datetime.combine(today - timedelta(days=rng.randint(1, 3)), time(rng.randint(8, 21), rng.randrange(60)))
            elif kind == "cancel_shipped":
                c.placed = datetime.combine(today - timedelta(days=rng.randint(4, 6)), time(rng.randint(8, 21), rng.randrange(60)))
                c.shipped = today - timedelta(days=rng.randint(1, 3))
            elif kind == "in_transit":
                c.shipped = today - timedelta(days=rng.randint(2, 4))
                c.placed = datetime.combine(c.shipped - timedelta(days=rng.randint(1, 2)), time(rng.randint(8, 21), rng.randrange(60)))
            elif kind == "lost":
                c.shipped = today - timedelta(days=rng.randint(10, 16))
                c.placed = datetime.combine(c.shipped - timedelta(days=rng.randint(1, 2)), time(rng.randint(8, 21), rng.randrange(60)))
            else:
                age = rng.randint(window + 6, window + 40) if kind == "damaged_late" else rng.randint(1, window - 3)
                c.delivered = today - timedelta(days=age)
                c.shipped = c.delivered - timedelta(days=rng.randint(2, 4))
                c.placed = datetime.combine(c.shipped - timedelta(days=rng.randint(1, 2)), time(rng.randint(8, 21), rng.randrange(60)))
            if kind == "already_refunded":
                c.prior_refund = c.line_total
                c.prior_refund_day = min(today - timedelta(days=1), c.delivered + timedelta(days=rng.randint(1, 3)))
            c.omit_id = rng.random() < 0.4
            cases.append(c)
        if level == 2:  # the same draws as the default, then the first complaint of each kind always there
            cases = [next(c for c in cases if c.kind == k) for k in ALWAYS]
        elif level == 1:  # ... then the first damage claim inside the window and the limit
            cases = [next(c for c in cases if c.kind == "damaged_ok")]
            cases[0].omit_id = False

        # -- orders: the complaints' own, complainants' older orders, and background ------------
        specs: list[dict[str, Any]] = []

        def add_order(cust: Customer, lines, shipping, placed: datetime, status: str, *, carrier="", tracking="",
                      shipped=None, delivered=None, ship_status=None, refunds=(), case: Case | None = None):
            specs.append({"cust": cust, "lines": lines, "shipping": shipping, "placed": placed, "status": status,
                          "carrier": carrier, "tracking": tracking, "shipped": shipped, "delivered": delivered,
                          "ship_status": ship_status, "refunds": list(refunds), "case": case})

        for c in cases:
            ship_status = {"lost": "lost", "in_transit": "in_transit", "cancel_shipped": "in_transit"}.get(
                c.kind, "delivered" if c.delivered else None)
            refunds = []
            if c.kind == "already_refunded":
                refunds = [{"amount_cents": c.prior_refund, "reason": f"damaged {c.item.name} (phone request)",
                            "line_no": c.target + 1, "created_at": c.prior_refund_day.isoformat()}]
            add_order(c.customer, c.lines, c.shipping, c.placed, _status(c.kind), carrier=c.carrier,
                      tracking=c.tracking if c.shipped else "", shipped=c.shipped, delivered=c.delivered,
                      ship_status=ship_status if c.shipped else None, refunds=refunds, case=c)
            if c.omit_id or rng.random() < 0.4:
                # an older order of theirs, without the item the complaint is about
                old = rng.sample([p for p in products if p.name != c.item.name and p.sku != c.item.sku], rng.randint(1, 2))
                delivered = today - timedelta(days=rng.randint(window + 10, 120))
                add_order(c.customer, [(p, 1) for p in old], rng.choice([0, 599]),
                          datetime.combine(delivered - timedelta(days=4), time(rng.randint(8, 21), rng.randrange(60))),
                          "delivered", carrier=rng.choice(CARRIERS), tracking="x", shipped=delivered - timedelta(days=3),
                          delivered=delivered, ship_status="delivered")

        # the complaint already answered last week
        handled = others[0]
        handled_item = rng.choice(products)
        handled_delivered = today - timedelta(days=rng.randint(8, 12))
        add_order(handled, [(handled_item, 1)], 599,
                  datetime.combine(handled_delivered - timedelta(days=5), time(10, 12)), "delivered",
                  carrier=rng.choice(CARRIERS), tracking="x", shipped=handled_delivered - timedelta(days=3),
                  delivered=handled_delivered, ship_status="delivered",
                  refunds=[{"amount_cents": handled_item.price_cents, "reason": "damaged on arrival",
                            "line_no": 1, "created_at": (handled_delivered + timedelta(days=1)).isoformat()}])
        handled_spec = specs[-1]
        for cust in others[1:]:
            for _ in range(rng.choice([1, 1, 2])):
                status = rng.choice(["delivered"] * 5 + ["shipped", "paid", "pending", "cancelled", "returned"])
                lines = [(p, rng.choice([1, 1, 2])) for p in rng.sample(products, rng.randint(1, 3))]
                carrier = rng.choice(CARRIERS)
                if status in ("paid", "pending"):
                    placed = datetime.combine(today - timedelta(days=rng.randint(0, 3)), time(rng.randint(8, 21), rng.randrange(60)))
                    if placed > now:
                        placed = now - timedelta(hours=rng.randint(1, 10))
                    add_order(cust, lines, rng.choice([0, 599]), placed, status)
                elif status == "cancelled":
                    placed = datetime.combine(today - timedelta(days=rng.randint(5, 60)), time(rng.randint(8, 21), rng.randrange(60)))
                    add_order(cust, lines, rng.choice([0, 599]), placed, status)
                elif status == "shipped":
                    shipped = today - timedelta(days=rng.randint(1, 4))
                    add_order(cust, lines, rng.choice([0, 599]),
                              datetime.combine(shipped - timedelta(days=1), time(rng.randint(8, 21), rng.randrange(60))),
                              status, carrier=carrier, tracking="x", shipped=shipped, ship_status="in_transit")
                else:
                    delivered = today - timedelta(days=rng.randint(1, 90))
                    shipped = delivered - timedelta(days=rng.randint(2, 4))
                    refunds = []
                    if status == "returned" or rng.random() < 0.12:
                        refunds = [{"amount_cents": lines[0][0].price_cents * lines[0][1], "reason": rng.choice(
                            ["returned unused", "damaged on arrival", "wrong colour sent"]), "line_no": 1,
                            "created_at": min(today, delivered + timedelta(days=rng.randint(2, 9))).isoformat()}]
                    add_order(cust, lines, rng.choice([0, 599, 799]),
                              datetime.combine(shipped - timedelta(days=1), time(rng.randint(8, 21), rng.randrange(60))),
                              status, carrier=carrier, tracking="x", shipped=shipped, delivered=delivered,
                              ship_status="delivered")

        specs.sort(key=lambda s: (s["placed"], s["cust"].id))
        number = rng.randint(30000, 70000)
        n_pay = n_ref = n_ship = 0
        order_rows = []
        for s in specs:
            number += rng.randint(1, 40)
            oid = f"SO-{number}"
            s["id"] = oid
            lines = [{"sku": p.sku, "name": p.name, "qty": q, "unit_price_cents": p.price_cents} for p, q in s["lines"]]
            total = sum(p.price_cents * q for p, q in s["lines"]) + s["shipping"]
            row: dict[str, Any] = {"id": oid, "customer_id": s["cust"].id, "status": s["status"],
                                   "placed_at": s["placed"].strftime("%Y-%m-%dT%H:%M"), "shipping_cents": s["shipping"],
                                   "lines": lines, "payments": [], "refunds": [], "shipments": []}
            paid_status = s["status"] != "pending" and not (s["status"] == "cancelled" and rng.random() < 0.5)
            if paid_status:
                n_pay += 1
                row["payments"].append({"id": f"PAY-{n_pay:05d}", "amount_cents": total, "method": rng.choice(METHODS),
                                        "paid_at": (s["placed"] + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")})
            if s["status"] == "cancelled" and paid_status:
                s["refunds"] = [{"amount_cents": total, "reason": "cancelled at customer request",
                                 "created_at": (s["placed"] + timedelta(days=1)).date().isoformat()}]
            for r in s["refunds"]:
                n_ref += 1
                row["refunds"].append({"id": f"RF-{n_ref:05d}", **r})
            if s["shipped"]:
                n_ship += 1
                sid = f"SHP-{n_ship:05d}"
                tracking = s["tracking"] if s["tracking"] != "x" else tracking_for(rng, s["carrier"])
                row["shipments"].append({"id": sid, "carrier": s["carrier"], "tracking": tracking,
                                         "status": s["ship_status"], "shipped_at": s["shipped"].isoformat(),
                                         "delivered_at": s["delivered"].isoformat() if s["delivered"] else None})
                if s["case"]:
                    s["case"].shipment_id = sid
                    s["case"].tracking = tracking
            if s["case"]:
                s["case"].order_id = oid
            order_rows.append(row)
        seeded_refunds = {r["id"] for row in order_rows for r in row["refunds"]}
        seeded_shipments = {sh["id"] for row in order_rows for sh in row["shipments"]}
        initial_status = {row["id"]: row["status"] for row in order_rows}
        for c in cases:
            c.extra["paid"] = c.total if _status(c.kind) != "pending" else 0
        handled_order = handled_spec["id"]

        # -- mailbox ------------------------------------------------------------------------------
        msgs: list[dict[str, Any]] = []

        def stamp(d: date, lo: int = 7, hi: int = 21) -> str:
            dt = datetime.combine(d, time(rng.randint(lo, hi), rng.randrange(60)))
            return min(dt, now - timedelta(minutes=rng.randint(5, 90))).isoformat()

        for c in cases:
            ref = "my recent order" if c.omit_id else f"order {c.order_id}"
            item = c.item.name
            sign = f"\n\nThanks,\n{c.customer.name}"
            if c.kind in ("cancel_paid", "cancel_pending", "cancel_shipped"):
                subject = rng.choice([f"Cancel {c.order_id}" if not c.omit_id else "Please cancel my order",
                                      "Cancellation request", "Change of plans - cancel order"])
                why = rng.choice(["I ordered the wrong one", "I found it cheaper locally", "I no longer need it",
                                  "I ordered it twice by mistake"])
                body = (f"Hello,\n\nCould you please cancel {ref} (the one with the {item})? {why}. "
                        f"Please confirm once it's done.{sign}")
                date_ = stamp(max(c.placed.date(), today - timedelta(days=1)), 7, 20) if c.kind != "cancel_shipped" \
                    else stamp(today - timedelta(days=rng.randint(0, 1)))
                if c.kind != "cancel_shipped" and date_ < c.placed.isoformat():
                    date_ = (c.placed + timedelta(hours=1)).isoformat()
            elif c.kind in ("damaged_ok", "damaged_late", "over_limit", "already_refunded"):
                subject = rng.choice([f"Damaged {item}", "Item arrived damaged", f"Problem with {ref}",
                                      "Broken on arrival"])
                again = " I called about this already but wanted it in writing." if c.kind == "already_refunded" else ""
                body = (f"Hi,\n\nThe {item} from {ref} {rng.choice(DAMAGE_WORDS)}.{again} "
                        f"I'd like a refund for it please.{sign}")
                date_ = stamp(today - timedelta(days=rng.randint(0, 1)))
            else:
                subject = rng.choice(["Where is my package?", f"{c.order_id} not arrived" if not c.omit_id else
                                      "Order not arrived", "Still waiting for my delivery"])
                body = (f"Hello,\n\nI'm still waiting for {ref} with the {item}. The tracking hasn't moved in a while. "
                        f"Can you tell me what's going on?{sign}")
                date_ = stamp(today - timedelta(days=rng.randint(0, 1)))
            c.extra["subject"] = subject
            msgs.append({"folder": "Inbox", "sender": c.customer.email, "sender_name": c.customer.name,
                         "to": [support], "subject": subject, "body": body, "date": date_, "case": c})

        # answered last week: their mail, and our reply in Sent
        h_date = datetime.combine(handled_delivered + timedelta(days=1), time(9, 14))
        msgs.append({"folder": "Inbox", "sender": handled.email, "sender_name": handled.name, "to": [support],
                     "subject": f"Broken {handled_item.name}", "is_read": True, "date": h_date.isoformat(),
                     "body": f"Hi,\n\nThe {handled_item.name} in order {handled_order} arrived broken. "
                             f"Can I get a refund?\n\n{handled.name}", "handled": True})
        msgs.append({"folder": "Sent", "sender": support, "sender_name": me.name, "to": [handled.email],
                     "subject": f"Re: Broken {handled_item.name}", "is_read": True,
                     "date": (h_date + timedelta(hours=3)).isoformat(), "reply_to_handled": True,
                     "body": f"Hi {handled.first},\n\nSorry about that! We've refunded {usd(handled_item.price_cents)} "
                             f"for order {handled_order}.\n\n{me.name}"})
        thanks = others[1]
        msgs.append({"folder": "Inbox", "sender": thanks.email, "sender_name": thanks.name, "to": [support],
                     "subject": "Thank you!", "date": stamp(today - timedelta(days=1)),
                     "body": "Just wanted to say the replacement arrived and it's perfect. Great service!\n\n"
                             + thanks.name})
        asker_mail = ""
        if level > 1:  # level 1: the complaint, the one already answered and a thank-you
            asker = fake.name()
            asker_mail = f"{slug(asker.split()[0])}{rng.randint(10, 99)}@{rng.choice(['coolmail', 'webmail'])}.example"
            q_item = rng.choice(products)
            msgs.append({"folder": "Inbox", "sender": asker_mail, "sender_name": asker, "to": [support],
                         "subject": f"Question about the {q_item.name}", "date": stamp(today - timedelta(days=1)),
                         "body": f"Hi there, before I order: does the {q_item.name} come with a warranty, and do you "
                                 f"ship to Canada?\n\n{asker}"})
            msgs.append({"folder": "Inbox", "sender": colleague.email, "sender_name": colleague.name, "to": [support],
                         "subject": rng.choice(["Warehouse stocktake Friday", "Rota for next week", "Lunch order"]),
                         "date": stamp(today - timedelta(days=1)),
                         "body": f"Hi {me.first}, heads up: the warehouse is closed Friday afternoon for the "
                                 f"stocktake, so nothing ships after 12:00.\n\n{colleague.first}"})
            msgs.append({"folder": "Inbox", "sender": manager.email, "sender_name": manager.name, "to": [support],
                         "subject": "Support backlog", "date": stamp(today - timedelta(days=1)),
                         "body": f"Hi {me.first}, can we get the complaint backlog cleared today? Send anything over "
                                 f"your limit my way as usual.\n\n{manager.first}"})
            for subj, text in rng.sample([
                ("Your weekly marketplace digest", "Top trends in home goods this week."),
                ("Carrier surcharge update", "Fuel surcharges change on the 1st of next month."),
                ("Webinar: delighting customers", "Join our free webinar on support automation."),
                ("Invoice available", "Your monthly platform invoice is ready in the dashboard."),
            ], 2):
                news = f"news@{rng.choice(['shoplane', 'parcelhub', 'helpdeskly'])}.example"
                msgs.append({"folder": "Inbox", "sender": news,
                             "sender_name": "Newsletter", "to": [support], "subject": subj, "body": text,
                             "date": stamp(today - timedelta(days=rng.randint(1, 3)))})
        msgs.sort(key=lambda m: m["date"])
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
        handled_mid = next(m["id"] for m in msgs if m.get("handled"))
        for m in msgs:
            if m.get("reply_to_handled"):
                m["in_reply_to"] = handled_mid
            if m.get("case"):
                m["case"].msg_id = m["id"]
        mail_rows = [{k: v for k, v in m.items() if k not in ("case", "handled", "reply_to_handled")} for m in msgs]
        cases.sort(key=lambda c: c.msg_id)
        complaint_ids = {c.msg_id for c in cases}
        customer_addrs = {c.customer.email for c in cases}
        lost_ids = {c.shipment_id for c in cases if c.kind == "lost"}

        # -- policy files ------------------------------------------------------------------------
        policy = _policy_text(store_name, window, limit, manager, today.year, current=True, damage_only=level == 1)
        old_policy = _policy_text(store_name, old_window, old_limit, old_manager, today.year - 1, current=False)
        files = {POLICY: policy, f"policies/archive/customer_service_policy_{today.year - 1}.md": old_policy,
                 "policies/shipping_rates.md": "# Shipping rates\n\nStandard $5.99, free over $75. Express $9.99.\n"}

        store_args = dict(
            store_name=store_name, today=today.isoformat(), carriers=CARRIERS,
            suppliers=[s.row() for s in suppliers], products=[p.row() for p in products],
            customers=[c.row() for c in customers], orders=order_rows,
        )

        def build(root: Path) -> None:
            write_files(root / "workspace", files, encoding=None)
            store.create_store(root / "state" / "store.sqlite", **store_args)
            mail.create_mailbox(root / "state" / "mail.sqlite", support, f"{store_name} Support", messages=mail_rows,
                                now=now.isoformat())

        w = phrasing_rng(self.name, seed)
        hello = say(w, f"Hi, {me.first} here from customer support at {store_name}.",
                    f"Hello, it's {me.first} from {store_name}'s customer support.",
                    f"{me.first} from customer support at {store_name} here.")
        ask = say(w, "I'm buried today: could you work through the customer complaints waiting in the support inbox?",
                  "Could you work through the customer complaints sitting in the support inbox? I'm buried today.",
                  "Today I'm snowed under, so please work through the customer complaints waiting in the support "
                  "inbox.")
        follow = say(w, "Please follow our current customer service policy in the policies folder (the archive "
                        "folder has an old version, ignore that one).",
                     "Our current customer service policy is in the policies folder; follow that one, not the old "
                     "version in the archive folder.",
                     "Go by the current customer service policy in the policies folder and ignore the old version "
                     "that sits in the archive folder.")
        each = say(w, "For each complaint, look the order up in the store system, do whatever the policy says "
                      "(cancel, refund, reship, escalate or decline) and answer the customer in their thread.",
                   "Each complaint means looking its order up in the store system, doing what the policy says "
                   "(cancel, refund, reship, escalate or decline), and answering the customer in their thread.",
                   "Per complaint: find the order in the store system, take the action the policy calls for "
                   "(cancel, refund, reship, escalate or decline), then reply to the customer in their thread.")
        limits = in_some_order(w, [
            say(w, "Complaints I've already answered are done.",
                "Any complaint I've already answered is done.",
                "The complaints I already answered need nothing more."),
            say(w, "Please leave anything that isn't a complaint about an order for me.",
                "Whatever isn't a complaint about an order, leave for me.",
                "Mail that isn't an order complaint is mine to deal with, so leave it."),
            say(w, "Don't change any other orders.", "No other orders should change.",
                "Please leave all other orders as they are."),
        ])
        today_is = say(w, f"Today is {long_date(today)}.", f"It's {long_date(today)} today.",
                       f"(Today's date: {long_date(today)}.)")
        if level == 1:
            follow = f"Please follow our current customer service policy, {POLICY}."
        instruction = " ".join([hello, ask, follow, each, *limits, today_is])
        case_orders = {c.order_id for c in cases}

        data = {
            "today": today.isoformat(), "window": window, "limit": limit, "manager": manager.email,
            **{key: [c.order_id for c in cases if c.kind == kind] for kind, (key, _) in TRAPS.items()},
            "no_order_number": [c.order_id for c in cases if c.omit_id],
            "cases": [{"kind": c.kind, "order": c.order_id, "msg": c.msg_id, "customer": c.customer.email,
                       "omit_id": c.omit_id, "item": c.item.sku, "line_no": c.target + 1,
                       "amount": c.line_total, "paid": c.extra["paid"]} for c in cases],
        }
        ctx = _Ctx(cases=cases, today=today, limit=limit, window=window, manager=manager.email, me=me.name,
                   colleague=colleague.email, seeded_refunds=seeded_refunds, seeded_shipments=seeded_shipments,
                   initial_status=initial_status, complaint_ids=complaint_ids, customer_addrs=customer_addrs,
                   lost_ids=lost_ids, n_inbox=sum(1 for m in msgs if m["folder"] == "Inbox"),
                   asker_msg=next((m["id"] for m in msgs if m["sender"] == asker_mail), 0), n_seeded=len(msgs),
                   short=level == 1, bystander=next((r["id"] for r in order_rows if r["status"] == "delivered"
                                                    and r["payments"] and r["id"] not in case_orders), ""))
        criteria = _criteria(ctx)
        kinds_here = {c.kind for c in cases}  # level 1 has one kind: the criteria about the others go
        criteria = [c for c in criteria if c.id not in NEEDS or kinds_here & set(NEEDS[c.id])]
        solve = partial(_oracle, ctx)
        perturbations = _perturbations(ctx, solve)
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: perturbations[c.id] for c in criteria}, data=data,
        )


def _policy_text(store_name: str, window: int, limit: int, manager, year: int, current: bool,
                 damage_only: bool = False) -> str:
    """The policy; ``damage_only`` (level 1's current one) keeps the damage and reply sections."""
    head = (f"# {store_name}: customer service policy ({year})\n\n"
            + ("This is the policy in force. It replaces every earlier version.\n\n" if current else
               "**SUPERSEDED.** Kept for reference only; see the current policy.\n\n"))
    text = head + f"""## Cancellations

- An order that has not shipped yet (status pending or paid) may be cancelled at the customer's
  request. Cancel it in the store system and refund everything the customer paid (a pending order
  was never charged, so there is nothing to refund). Cancellation refunds need no approval.
- Once an order has shipped it can no longer be cancelled. Tell the customer, give them the
  carrier and tracking number, and point them to our returns process once it arrives.

## Damaged or defective items

- Reported within {window} days of delivery: refund the price of the damaged item (its order
  line) to the original payment method. The customer keeps or recycles it. Shipping is not refunded.
- Reported more than {window} days after delivery: politely decline. No refund.
- Never refund the same item twice. If it has already been refunded, tell the customer when
  and how much.
- Support may not issue a refund above {usd(limit)}. For those, don't refund: forward the
  customer's email to {manager.name} ({manager.email}), operations manager, and tell the
  customer their case has been escalated and they will hear back within two business days.

## Missing parcels

- Check the shipment in the store system. If the carrier has declared it lost, send a
  replacement straight away (a replacement shipment for the lost one, same carrier) and give
  the customer the new tracking number.
- If it is still in transit, reply with the carrier and tracking number and ask them to allow
  a few more days. Do not reship.

## Replies

- Answer every complaint once, in its thread, and always quote the order number.
- Whenever you issue a refund, state the amount.
"""
    if damage_only:
        parts = text.split("\n## ")
        text = "\n## ".join([parts[0]] + [p for p in parts[1:] if p.startswith(("Damaged", "Replies"))])
    return text


@dataclass
class _Ctx:
    cases: list[Case]
    today: date
    limit: int
    window: int
    manager: str
    me: str
    colleague: str
    seeded_refunds: set[str]
    seeded_shipments: set[str]
    initial_status: dict[str, str]
    complaint_ids: set[int]
    customer_addrs: set[str]
    lost_ids: set[str]
    n_inbox: int
    asker_msg: int
    n_seeded: int
    short: bool = False
    """Level 1: the policy is named and the inbox is three mails; the oracle reads the policy, the
    inbox and the complaint, and checks nothing at the end."""
    bystander: str = ""
    """A delivered, paid order nobody complained about."""


def _first(cases: list[Case], *kinds: str) -> Case | None:
    return next((c for c in cases if c.kind in kinds), None)


# -- reference solution ----------------------------------------------------------------------


def _oracle(ctx: _Ctx):
    """Read the policy and the inbox, then handle each complaint: find the order, check it,
    act per policy, reply; finally check the refunds and sent mail."""
    cases = ctx.cases
    today = ctx.today.isoformat()
    if not ctx.short:
        yield ToolCall("files__list_dir", {"path": "policies", "recursive": True}, "Find the current policy.")
    yield ToolCall("files__read_file", {"path": POLICY}, "Read the customer service policy in force.")
    if not ctx.short:
        yield ToolCall("store__get_store_info", {}, "Check the store's date and carriers.")
    offset, inbox = 0, []
    while offset is not None:
        page = loads((yield ToolCall("mail__list_messages", {"folder": "Inbox", "limit": 25, "offset": offset},
                                     "List the support inbox.")))
        inbox += page["messages"]
        offset = page["next_offset"]
    for m in sorted(inbox, key=lambda m: m["id"]):
        if ctx.short and m["id"] not in ctx.complaint_ids:  # level 1: the subjects tell the rest apart
            continue
        yield ToolCall("mail__read_message", {"message_id": m["id"]}, f"Read message {m['id']}: is it an open complaint?")

    for c in cases:
        if c.omit_id:
            hits = loads((yield ToolCall("store__search_customers", {"query": c.customer.email},
                                         f"No order number in message {c.msg_id}: find the customer.")))
            cust = loads((yield ToolCall("store__get_customer", {"customer_id": hits[0]["id"]},
                                         "See their orders to find the one with that item.")))
            assert any(o["id"] == c.order_id for o in cust["orders"])
        yield ToolCall("store__get_order", {"order_id": c.order_id},
                       f"Open {c.order_id}: status, lines, payments, refunds and shipments.")
        body = f"Hi {c.customer.first},\n\nThank you for getting in touch about order {c.order_id}. "
        if c.kind in ("cancel_paid", "cancel_pending"):
            yield ToolCall("store__cancel_order", {"order_id": c.order_id, "reason": "customer request"},
                           f"{c.order_id} has not shipped: cancel it as asked.")
            if c.kind == "cancel_paid":
                yield ToolCall("store__issue_refund", {"order_id": c.order_id, "amount": plain(c.total),
                                                       "reason": "order cancelled at customer request"},
                               "Refund everything that was paid.")
                body += f"It has been cancelled and the full {usd(c.total)} refunded to your original payment method."
            else:
                body += "It has been cancelled; you were not charged for it."
        elif c.kind == "cancel_shipped":
            body += (f"Unfortunately it has already shipped, so it can no longer be cancelled. It is on its way with "
                     f"{c.carrier}, tracking number {c.tracking}. Once it arrives you can return it through our "
                     f"returns process.")
        elif c.kind == "damaged_ok":
            yield ToolCall("store__issue_refund", {"order_id": c.order_id, "amount": plain(c.line_total),
                                                   "line_no": c.target + 1, "reason": f"damaged {c.item.name}"},
                           f"Delivered within {ctx.window} days and under {usd(ctx.limit)}: refund the item.")
            body += f"I'm sorry the {c.item.name} arrived damaged. We have refunded {usd(c.line_total)} for it."
        elif c.kind == "damaged_late":
            body += (f"I'm sorry to hear about the {c.item.name}. It was delivered on {c.delivered.isoformat()}, which "
                     f"is outside our {ctx.window}-day window for damage claims, so we can't offer a refund.")
        elif c.kind == "already_refunded":
            body += (f"The {c.item.name} was already refunded: {usd(c.prior_refund)} went back to your payment method "
                     f"on {c.prior_refund_day.isoformat()}.")
        elif c.kind == "over_limit":
            yield ToolCall("mail__forward", {"message_id": c.msg_id, "to": [ctx.manager],
                                             "body": f"Damage claim on {c.order_id} for {usd(c.line_total)}, above "
                                                     f"my {usd(ctx.limit)} limit. Could you approve?"},
                           "Above the refund limit: escalate to the operations manager.")
            body += ("I'm sorry about the damaged item. I have escalated your case to our operations manager; you will "
                     "hear back within two business days.")
        elif c.kind == "lost":
            ship = loads((yield ToolCall("store__get_shipment", {"shipment_id": c.shipment_id},
                                         "What does the carrier say about the parcel?")))
            assert ship["status"] == "lost"
            made = (yield ToolCall("store__create_shipment", {"order_id": c.order_id, "carrier": ship["carrier"],
                                                              "replaces": c.shipment_id},
                                   "Declared lost: send a replacement with the same carrier."))
            new_tracking = made.rsplit("tracking number ", 1)[1].rstrip(".")
            body += (f"The carrier has declared your parcel lost, so we have sent a replacement with {c.carrier}. "
                     f"The new tracking number is {new_tracking}.")
        elif c.kind == "in_transit":
            ship = loads((yield ToolCall("store__get_shipment", {"shipment_id": c.shipment_id},
                                         "Where is the parcel?")))
            body += (f"Your parcel is still in transit with {ship['carrier']}, tracking number {ship['tracking']}. "
                     f"Please allow a few more days for it to arrive.")
        body += f"\n\nBest regards,\n{ctx.me}"
        yield ToolCall("mail__reply", {"message_id": c.msg_id, "body": body},
                       f"Answer the customer about {c.order_id}.")
    if not ctx.short:
        yield ToolCall("store__search_refunds", {"since": today}, "Check today's refunds.")
        yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 25}, "Check every reply went out.")
    return f"Handled {len(cases)} complaints per the current policy; every customer has an answer."


def _perturbations(ctx: _Ctx, solve) -> dict[str, perturb.Oracle]:
    """For each criterion, the oracle with its calls edited so that it fails that one (those about
    a kind of complaint the instance lacks have none: the criteria go too)."""
    cases = ctx.cases
    damaged = _first(cases, "damaged_ok")
    refund_damaged = perturb.on("store__issue_refund", order_id=damaged.order_id)
    answer_damaged = perturb.on("mail__reply", message_id=damaged.msg_id)

    def at_the_end(call: ToolCall) -> perturb.Oracle:
        """``call`` once every complaint is handled, before the final checks (level 1 has none)."""
        return perturb.insert(solve, call, before=None if ctx.short else perturb.on("store__search_refunds"))

    edits = {
        "checked_orders": perturb.drop(solve, perturb.on("store__get_order", order_id=(_first(
            cases, "damaged_late", "in_transit", "cancel_shipped", "over_limit") or cases[0]).order_id)),
        "damage_refunds": perturb.change(  # a dollar short, and the answer says so
            perturb.change(solve, refund_damaged, amount=plain(damaged.line_total - 100)), answer_damaged,
            lambda a: {**a, "body": a["body"].replace(usd(damaged.line_total), usd(damaged.line_total - 100))}),
        "orders_untouched": perturb.insert(solve, ToolCall(
            "store__adjust_stock", {"sku": damaged.item.sku, "delta": -1, "reason": "damaged"},
            "Write off the damaged unit."), after=refund_damaged),
        "reply_details": perturb.change(solve, answer_damaged, body=(
            f"Hi {damaged.customer.first},\n\nSorry about the damaged item; we have refunded it."
            f"\n\nBest regards,\n{ctx.me}")),
        "replies": perturb.repeat(solve, perturb.on("mail__reply", message_id=cases[0].msg_id)),
        "no_stray_mail": at_the_end(ToolCall("mail__send_message", {
            "to": [ctx.colleague], "subject": "Complaints done", "body": "All complaints handled."},
            "Let the team know.")),
    }
    over = _first(cases, "over_limit")
    if over:
        edits["escalation"] = perturb.drop(solve, perturb.on("mail__forward", message_id=over.msg_id))
        edits["no_unwarranted_refunds"] = perturb.insert(solve, ToolCall(
            "store__issue_refund", {"order_id": over.order_id, "amount": plain(over.line_total),
                                    "line_no": over.target + 1, "reason": "damaged item"}, "Refund the item."),
            before=perturb.on("mail__forward", message_id=over.msg_id))
    else:
        edits["no_unwarranted_refunds"] = at_the_end(ToolCall(
            "store__issue_refund", {"order_id": ctx.bystander, "amount": "1.00", "reason": "goodwill"},
            "A goodwill refund."))
    cancel = _first(cases, "cancel_paid")
    if cancel:
        edits["cancellations"] = perturb.drop(solve, perturb.on("store__cancel_order", order_id=cancel.order_id))
        edits["cancel_refunds"] = perturb.drop(solve, perturb.on("store__issue_refund", order_id=cancel.order_id))
    lost = _first(cases, "lost")
    if lost:  # the replacement goes with another carrier (the oracle reads its tracking number, so it stays)
        edits["replacement_shipments"] = perturb.change(
            solve, perturb.on("store__create_shipment", order_id=lost.order_id),
            carrier=next(x for x in CARRIERS if x != lost.carrier))

    def refunded_before_answer(c: Case, amount: int, line_no: int | None, why: str) -> perturb.Oracle:
        """The oracle refunding ``c``'s order before it answers (the answer unchanged)."""
        args = {"order_id": c.order_id, "amount": plain(amount), "reason": why}
        if line_no is not None:
            args["line_no"] = line_no
        return perturb.insert(solve, ToolCall("store__issue_refund", args, "Refund it to keep them happy."),
                              before=perturb.on("mail__reply", message_id=c.msg_id))

    late = _first(cases, "damaged_late")
    if late:  # refunded as if inside the window
        edits["late_claim_declined"] = refunded_before_answer(late, late.line_total, late.target + 1,
                                                              f"damaged {late.item.name}")
    twice = _first(cases, "already_refunded")
    if twice:  # refunded again where the store lets it (the rest of the order), else answered without the earlier refund
        room = twice.total - twice.prior_refund
        edits["no_double_refund"] = (
            refunded_before_answer(twice, min(twice.prior_refund, room), None, f"damaged {twice.item.name}") if room
            else perturb.change(solve, perturb.on("mail__reply", message_id=twice.msg_id), lambda a: {
                **a, "body": a["body"].replace(f"{usd(twice.prior_refund)} went back", "the money went back")}))
    shipped = _first(cases, "cancel_shipped")
    if shipped:  # refunded in full though it cannot be cancelled
        edits["shipped_not_cancelled"] = refunded_before_answer(shipped, shipped.total, None, "customer cancelled")
    transit = _first(cases, "in_transit")
    if transit:  # refunded as if the parcel were gone
        edits["in_transit_not_reshipped"] = refunded_before_answer(transit, transit.total, None, "parcel not arrived")
    return edits


# -- grading ---------------------------------------------------------------------------------


def _criteria(ctx: _Ctx) -> list[Criterion]:
    cases = ctx.cases

    def new_refunds(world) -> list[dict]:
        return [r for r in store.refunds(world) if r["id"] not in ctx.seeded_refunds]

    def refunded(world, order_id: str) -> int:
        return sum(r["amount_cents"] for r in new_refunds(world) if r["order_id"] == order_id)

    def sent(world) -> list[dict]:
        return mail.sent_messages(world)

    def answers(world, c: Case) -> list[dict]:
        return [m for m in sent(world) if m["in_reply_to"] == c.msg_id
                or (c.customer.email in m["to"] + m["cc"] and m["in_reply_to"] not in ctx.complaint_ids)]

    def cancellations(world, traj):
        st = store.order_statuses(world)
        now_cancelled = {o for o, s in st.items() if s == "cancelled" and ctx.initial_status[o] != "cancelled"}
        want = {c.order_id for c in cases if c.kind in ("cancel_paid", "cancel_pending")}
        return now_cancelled == want, f"cancelled {sorted(now_cancelled)}, expected {sorted(want)}"

    def cancel_refunds(world, traj):
        bad = []
        allowed = {c.order_id for c in cases if c.kind in ("cancel_paid", "cancel_pending", "damaged_ok")}
        for c in cases:
            if c.kind == "cancel_paid" and refunded(world, c.order_id) != c.total:
                bad.append(f"{c.order_id}: refunded {refunded(world, c.order_id)} of {c.total}")
        full = {o["id"] for o in store.orders(world).values()
                if o["paid_cents"] and refunded(world, o["id"]) == o["paid_cents"] and o["id"] not in allowed}
        if full:
            bad.append(f"full refunds on orders nobody asked to cancel: {sorted(full)}")
        return not bad, "; ".join(bad)

    def damage_refunds(world, traj):
        bad = []
        for c in cases:
            if c.kind == "damaged_ok" and refunded(world, c.order_id) != c.line_total:
                bad.append(f"{c.order_id}: refunded {refunded(world, c.order_id)}, expected {c.line_total}")
        return not bad, "; ".join(bad)

    def no_unwarranted(world, traj):
        allowed = {c.order_id for c in cases if c.kind in ("cancel_paid", "damaged_ok")}
        extra = sorted({r["order_id"] for r in new_refunds(world)} - allowed)
        return not extra, f"refunds on {extra}" if extra else ""

    def replacements(world, traj):
        new = [s for s in store.shipments(world) if s["id"] not in ctx.seeded_shipments]
        for c in cases:
            if c.kind != "lost":
                continue
            mine = [s for s in new if s["order_id"] == c.order_id]
            if len(mine) != 1 or mine[0]["replaces"] != c.shipment_id or mine[0]["carrier"] != c.carrier:
                return False, f"{c.order_id}: new shipments {[(s['id'], s['replaces'], s['carrier']) for s in mine]}"
        others = [s["order_id"] for s in new if s["order_id"] not in {c.order_id for c in cases if c.kind == "lost"}]
        return not others, f"unexpected shipments on {others}" if others else ""

    def escalation(world, traj):
        to_manager = [m for m in sent(world) if ctx.manager in m["to"] + m["cc"]]
        for c in cases:
            about = [m for m in to_manager if m["forwarded_from"] == c.msg_id
                     or mentions_id(f"{m['subject']} {m['body']}", c.order_id)]
            if c.kind == "over_limit" and not about:
                return False, f"{c.order_id} was not escalated to {ctx.manager}"
            if c.kind != "over_limit" and about:
                return False, f"{c.order_id} was escalated but is within support's authority"
        return True

    def replies(world, traj):
        for c in cases:
            got = answers(world, c)
            if len(got) != 1:
                return False, f"message {c.msg_id} ({c.order_id}): {len(got)} answers"
        stray = [m["id"] for m in sent(world) if m["in_reply_to"] and m["in_reply_to"] not in ctx.complaint_ids
                 and m["date"] >= ctx.today.isoformat()]
        return not stray, f"replies to non-complaints: {stray}" if stray else ""

    def reply_details(world, traj):
        new_ships = {s["order_id"]: s for s in store.shipments(world)
                     if s["id"] not in ctx.seeded_shipments and s["replaces"] in ctx.lost_ids}
        for c in cases:
            got = answers(world, c)
            if not got:
                return False, f"no answer to {c.order_id}"
            for m in got:
                text = f"{m['subject']}\n{m['body']}"
                if not mentions_id(text, c.order_id):
                    return False, f"answer about {c.order_id} does not quote it"
                others = [o.order_id for o in cases if o.customer.email != c.customer.email
                          and o.order_id != c.order_id and mentions_id(text, o.order_id)]
                if others:
                    return False, f"answer about {c.order_id} also quotes other customers' orders {others}"
                need: list[tuple[str, bool]] = []
                if c.kind == "cancel_paid":
                    need.append(("refund amount", mentions_amount(text, c.total)))
                elif c.kind in ("damaged_ok",):
                    need.append(("refund amount", mentions_amount(text, c.line_total)))
                elif c.kind == "already_refunded":
                    need.append(("earlier refund amount", mentions_amount(text, c.prior_refund)))
                elif c.kind in ("cancel_shipped", "in_transit"):
                    need.append(("tracking number", mentions_tracking(text, c.tracking)))
                elif c.kind == "lost":
                    s = new_ships.get(c.order_id)
                    need.append(("new tracking number", bool(s) and mentions_tracking(text, s["tracking"])))
                missing = [what for what, ok in need if not ok]
                if missing:
                    return False, f"answer about {c.order_id} lacks the {', '.join(missing)}"
        return True

    def checked_orders(world, traj):
        calls = traj.tool_calls
        for c in cases:
            first_answer = next((i for i, t in enumerate(calls) if not t.is_error and t.name in (
                "mail__reply", "mail__send_message") and isinstance(t.arguments, dict) and (
                str(t.arguments.get("message_id")) == str(c.msg_id)
                or c.customer.email in [parse_address(a) for a in t.arguments.get("to", []) or []])), None)
            if first_answer is None:
                return False, f"no answer to message {c.msg_id}"
            looked = any(t.name == "store__get_order" and not t.is_error and isinstance(t.arguments, dict)
                         and str(t.arguments.get("order_id", "")).strip().upper() == c.order_id
                         for t in calls[:first_answer])
            if not looked:
                return False, f"{c.order_id} was not opened before answering"
        return True

    def orders_untouched(world, traj):
        cancel = {c.order_id for c in cases if c.kind in ("cancel_paid", "cancel_pending")}
        st = store.order_statuses(world)
        changed = [o for o, s in st.items() if o not in cancel and s != ctx.initial_status.get(o)]
        if changed:
            return False, f"status changed on {changed}"
        moves = [m for m in store.stock_moves(world) if m["reason"] != "shipment"]
        return not moves, f"stock adjustments: {[(m['sku'], m['delta']) for m in moves]}" if moves else ""

    def handled(kind: str, want: str, said):
        """Each ``kind`` complaint: its order keeps its status, gets no new refund nor shipment, and its
        one answer says ``want`` (``said(text, case)``) and quotes no other customer's order."""
        def check(world, traj):
            st = store.order_statuses(world)
            new_ships = {s["order_id"] for s in store.shipments(world) if s["id"] not in ctx.seeded_shipments}
            for c in cases:
                if c.kind != kind:
                    continue
                if refunded(world, c.order_id):
                    return False, f"{c.order_id} was refunded {refunded(world, c.order_id)}"
                if st[c.order_id] != ctx.initial_status[c.order_id] or c.order_id in new_ships:
                    return False, f"{c.order_id} is now {st[c.order_id]} (shipments: {c.order_id in new_ships})"
                got = answers(world, c)
                text = f"{got[0]['subject']}\n{got[0]['body']}" if len(got) == 1 else ""
                if not text or not said(text, c):
                    return False, f"{c.order_id}: {len(got)} answers, none saying {want}"
                others = [o.order_id for o in cases if o.customer.email != c.customer.email
                          and o.order_id != c.order_id and mentions_id(text, o.order_id)]
                if others:  # an answer about everything is not an answer to this customer
                    return False, f"the answer about {c.order_id} also quotes other customers' orders {others}"
            return True
        return check

    trap_criteria = {
        "late_claim_declined": Criterion(
            "late_claim_declined", "a damage claim made after the window is declined: no refund, and the answer "
            "quotes the order", "final_state", handled("damaged_late", "the order", lambda t, c: mentions_id(t, c.order_id))),
        "no_double_refund": Criterion(
            "no_double_refund", "an item refunded before is not refunded again, and the answer states the earlier "
            "refund's amount", "final_state",
            handled("already_refunded", "the earlier refund", lambda t, c: mentions_amount(t, c.prior_refund))),
        "shipped_not_cancelled": Criterion(
            "shipped_not_cancelled", "a shipped order is neither cancelled nor refunded, and the answer gives its "
            "tracking number", "final_state",
            handled("cancel_shipped", "the tracking number", lambda t, c: mentions_tracking(t, c.tracking))),
        "in_transit_not_reshipped": Criterion(
            "in_transit_not_reshipped", "a parcel still in transit is neither reshipped nor refunded, and the answer "
            "gives its tracking number", "final_state",
            handled("in_transit", "the tracking number", lambda t, c: mentions_tracking(t, c.tracking))),
    }

    return [
        Criterion("cancellations", "exactly the unshipped orders customers asked to cancel are cancelled",
                  "final_state", cancellations, 2.0),
        Criterion("cancel_refunds", "each cancelled paid order is refunded in full (and no other order is)",
                  "final_state", cancel_refunds),
        Criterion("damage_refunds", "each eligible damage claim is refunded the item's line price, to the cent",
                  "final_state", damage_refunds, 2.0),
        Criterion("no_unwarranted_refunds", "no refund on any other order (late, over-limit, already refunded, "
                  "shipped, unrelated)", "final_state", no_unwarranted, guard=True),
        Criterion("replacement_shipments", "each lost parcel has one replacement with the same carrier; nothing "
                  "else was shipped", "final_state", replacements),
        Criterion("escalation", "exactly the over-limit claims were forwarded to the operations manager",
                  "final_state", escalation),
        Criterion("replies", "every open complaint got exactly one answer; nothing else was replied to",
                  "final_state", replies, 2.0, requires=("reply_details",)),
        Criterion("reply_details", "each answer quotes the order number and the refund amount or tracking number "
                  "that applies (and no other customer's order)", "final_state", reply_details, 2.0),
        Criterion("checked_orders", "each complaint's order was opened before the customer was answered", "process",
                  checked_orders, requires=("reply_details",)),
        mail_kit.sends_only(ctx.customer_addrs | {ctx.manager}, seeded=ctx.n_seeded,
                            description="mail went only to the complaining customers and the operations manager"),
        Criterion("orders_untouched", "no other order changed status and no stock was adjusted", "final_state",
                  orders_untouched, guard=True),
        *trap_criteria.values(),
    ]
