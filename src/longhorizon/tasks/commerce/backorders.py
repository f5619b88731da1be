"""Order operations: a delivery has come in; allocate it to the backorders and tell the customers.

Paid orders wait for stock that a purchase order was bringing in. This morning the delivery
arrived; the warehouse's receiving note has what was counted (one line came short of what
the supplier's dispatch advice claims). The agent books the delivery in, then works the
backorder list (exported last night) by the written policy: priority accounts first, then
oldest order first; an order ships only when every line can be filled, unless the customer
accepts partial shipments, in which case the lines that can be filled go now and the rest
stays on backorder with a note on the order; an order that cannot ship takes no stock.
Priority accounts go by express carrier. Every customer on the list gets one update: the
tracking number, what is still to come, or that the order is still waiting. Traps: the
dispatch advice's quantities, a priority customer's namesake, an order cancelled since the
export, an item on backorder that this delivery does not bring, paid orders that are not on
backorder (the afternoon pick run's), an older receiving note already booked, and a
customer who already wrote in asking (answer in that thread).

The default level draws its trap mix per seed (``TRAP_ODDS``, at least one always; levels 1-2
keep every kind): the priority customer's namesake on the list, an order cancelled since the
export, an item on backorder that this delivery does not bring, and the customer who wrote in.
``Task.data`` names each (empty when absent); the customer who wrote in gets the criterion
``asker_answered_in_thread`` only where there is one. The counted receipt short of the dispatch
advice is in every instance.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from longhorizon.apps.mail import state as mail
from longhorizon.apps.store import state as store
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.commerce import (
    Customer,
    Product,
    make_customers,
    make_products,
    make_suppliers,
    mentions_id,
    mentions_tracking,
    pick_today,
    tracking_for,
)
from longhorizon.tasks.common import (
    People,
    loads,
    long_date,
    mentions_code,
    norm_path,
    rng_and_faker,
    slug,
    squash,
    write_files,
)
from longhorizon.tasks.kit import mail as mail_kit
from longhorizon.tasks.kit import perturb, process

POLICY = "ops/backorder_policy.md"
PRIORITY = "ops/priority_accounts.md"
EXPRESS, STANDARD = "FedEx", "UPS"
PARTIAL_NOTE = "Customer accepts partial shipments"
TRAP_ODDS = (("namesake", 0.6), ("cancelled", 0.6), ("missing", 0.6), ("asker", 0.6))
"""The default level's traps, each there with this chance (at least one always)."""


@dataclass
class Backorder:
    customer: Customer
    lines: list[tuple[Product, int]]
    placed: datetime
    partial_ok: bool
    priority: bool
    cancelled: bool = False
    id: str = ""
    outcome: str = ""
    """full, partial, held (or cancelled)."""
    ship_lines: list[int] = field(default_factory=list)
    """1-based line numbers shipped now."""
    awaited: list[Product] = field(default_factory=list)
    msg_id: int = 0
    shipping: int = 0

    @property
    def carrier(self) -> str:
        return EXPRESS if self.priority else STANDARD


def _allocate(backorders: list[Backorder], stock: dict[str, int]) -> None:
    """The written policy: priority accounts first, then oldest first; ship complete orders,
    the fillable lines of orders that accept partial shipments, and hold the rest (no stock)."""
    left = dict(stock)
    for b in sorted(backorders, key=lambda b: (not b.priority, b.placed, b.id)):
        if b.cancelled:
            b.outcome = "cancelled"
            continue
        fill = [k for k, (p, q) in enumerate(b.lines, start=1) if left[p.sku] >= q]
        if len(fill) == len(b.lines):
            b.outcome, b.ship_lines, b.awaited = "full", fill, []
        elif fill and b.partial_ok:
            b.outcome, b.ship_lines = "partial", fill
            b.awaited = [p for k, (p, _) in enumerate(b.lines, start=1) if k not in fill]
        else:
            b.outcome, b.ship_lines = "held", []
            b.awaited = [p for k, (p, q) in enumerate(b.lines, start=1) if k not in fill]
        for k in b.ship_lines:
            p, q = b.lines[k - 1]
            left[p.sku] -= q


@register
class BackorderFulfilment(TaskFamily):
    name = "backorder_fulfilment"
    category = "order operations"
    apps = ("store", "mail", "files")
    description = (
        "Book today's delivery in as counted, allocate the stock to the backordered orders by the policy (priority "
        "accounts first, then oldest; complete orders, partial shipments only where accepted), ship with the right "
        "carrier, note what stays on backorder, and send every customer on the list one update."
    )

    levels = 3
    """1: one order on the list, which the delivery fills (the receiving note and the list are
    named); 2: four or five orders, one cancelled, with a full, a partial and a held outcome;
    3 (default): eight or nine among a namesake, a priority account jumping the queue and a
    customer who wrote in."""
    toolsets = {1: (
        "files__read_file", "mail__send_message", "store__create_shipment", "store__receive_purchase_order",
    )}
    """Level 1 names its files and gives the rules in the task; the list gives the customer's
    address: no search, no policy to read, no order to open."""

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        store_name = f"{fake.last_name()} {rng.choice(['Home & Garden', 'Goods', 'Living', 'Outfitters'])}"
        domain = f"{slug(store_name)[:20]}.example"
        me, lead, colleague = (people.make(domain) for _ in range(3))
        today = pick_today(rng)
        now = datetime.combine(today, time(9, 10))
        suppliers = make_suppliers(rng, fake, 3)
        products = make_products(rng, 30, suppliers)
        for p in products:
            p.stock = rng.randint(25, 90)
            p.reorder_point = rng.randint(5, 15)
        sup = suppliers[0]
        mine = [p for p in products if p.supplier_id == sup.id]
        rng.shuffle(mine)
        delivered = mine[:rng.randint(3, 4)]
        missing = next(p for p in products if p.supplier_id != sup.id)  # on backorder, not in this delivery
        in_stock = [p for p in products if p not in delivered and p is not missing]
        for p in delivered + [missing]:
            p.stock = 0

        customers = make_customers(rng, fake, 16)
        namesake_of = customers[0]
        first, last = namesake_of.name.split(" ", 1)
        twin = Customer(f"C-{int(namesake_of.id.split('-')[1]) + 3 + rng.randint(500, 900)}", namesake_of.name,
                        f"{slug(first)}{slug(last)}{rng.randint(100, 999)}@{rng.choice(['webmail', 'homenet'])}.example",
                        fake.city())
        customers.append(twin)
        priority_accounts = [customers[0]] + rng.sample(customers[1:12], 2)
        prio_ids = {c.id for c in priority_accounts}
        traps = {k for k, odds in TRAP_ODDS if rng.random() < odds}
        if not traps:
            traps.add(rng.choice([k for k, _ in TRAP_ODDS]))
        if level < 3:  # levels 1-2 keep every kind they show
            traps = {k for k, _ in TRAP_ODDS}

        # -- backorders: redraw until the policy gives every kind of outcome --------------------------
        def draw(few: bool):
            """Backorders, the delivery's ordered and counted quantities, its short line and the
            stock after it: 8-9 orders (the default), or 4-5 (``few``: level 2) with one of each
            outcome."""
            for _attempt in range(400):
                buyers = rng.sample(customers[:12], rng.randint(4, 5) if few else rng.randint(8, 9))
                if "namesake" in traps and twin not in buyers and rng.random() < 0.8:
                    buyers[-1] = twin
                backorders: list[Backorder] = []
                for cust in buyers:
                    n = rng.choice([1, 1, 2, 2, 3])
                    items = [rng.choice(delivered)]
                    extra = [p for p in delivered if p is not items[0]]
                    if n >= 2 and rng.random() < 0.5:
                        items.append(rng.choice(extra))
                    while len(items) < n:
                        items.append(rng.choice([p for p in in_stock if p not in items]))
                    lines = [(p, rng.randint(1, 4) if p in delivered else rng.randint(1, 2)) for p in items]
                    placed = datetime.combine(today - timedelta(days=rng.randint(3, 24)),
                                              time(rng.randint(7, 21), rng.randrange(60)))
                    backorders.append(Backorder(cust, lines, placed, rng.random() < 0.35, cust.id in prio_ids))
                # one order also waits for an item this delivery does not bring
                if "missing" in traps:
                    b = rng.choice(backorders)
                    if all(p is not missing for p, _ in b.lines):
                        b.lines.append((missing, 1))
                multi = [b for b in backorders if len(b.lines) > 1]
                if not multi:  # a partial shipment needs an order of two lines or more: draw again
                    continue
                rng.choice(multi).partial_ok = True
                if "cancelled" in traps:
                    rng.choice(backorders).cancelled = True
                demand = {p.sku: sum(q for b in backorders if not b.cancelled for p2, q in b.lines if p2 is p)
                          for p in delivered}
                ordered = {p.sku: max(3, demand[p.sku] - rng.randint(0, 3)) for p in delivered}
                counted = dict(ordered)
                short = rng.choice(delivered)
                counted[short.sku] = ordered[short.sku] - rng.randint(1, min(4, ordered[short.sku] - 1))
                stock_after = {p.sku: p.stock + counted.get(p.sku, 0) for p in products}
                backorders.sort(key=lambda b: b.placed)
                for k, b in enumerate(backorders):
                    b.id = f"#{k}"
                _allocate(backorders, stock_after)
                outcomes = [b.outcome for b in backorders]
                mixed = "full" in outcomes and "partial" in outcomes and any(len(b.ship_lines) >= 2 for b in backorders)
                if few and mixed and "held" in outcomes:
                    return backorders, ordered, counted, short, stock_after
                prio_jump = any(b.priority and b.outcome in ("full", "partial") and any(
                    not o.priority and o.placed < b.placed and o.outcome == "held" for o in backorders)
                    for b in backorders)
                if not few and mixed and outcomes.count("full") >= 2 and outcomes.count("held") >= 1 and prio_jump \
                        and ("namesake" not in traps or any(b.customer is twin and not b.cancelled for b in backorders)) \
                        and any(b.outcome == "held" and any(p is not missing for p in b.awaited) for b in backorders):
                    return backorders, ordered, counted, short, stock_after
            raise AssertionError("no backorder mix found")  # pragma: no cover - found within a few tries

        backorders, ordered, counted, short, stock_after = draw(few=False)
        if level == 2:  # the same draws as the default, then a shorter list
            backorders, ordered, counted, short, stock_after = draw(few=True)
        elif level == 1:  # the same draws, then one order (two lines or more) the delivery fills
            b = rng.choice([b for b in backorders if not b.cancelled])
            b.lines = [(p, q) for p, q in b.lines if p is not missing]
            if len(b.lines) < 2:
                b.lines.append((rng.choice([p for p in in_stock if all(p is not x for x, _ in b.lines)]), 1))
            b.cancelled, b.id = False, "#0"
            backorders = [b]
            counted = {p.sku: max(2, sum(q for p2, q in b.lines if p2 is p) + rng.randint(0, 2)) for p in delivered}
            ordered = dict(counted)
            short = rng.choice(delivered)
            ordered[short.sku] += rng.randint(1, 3)
            stock_after = {p.sku: p.stock + counted.get(p.sku, 0) for p in products}
            _allocate(backorders, stock_after)
            assert b.outcome == "full" and len(b.ship_lines) >= 2

        for b in backorders:
            b.shipping = rng.choice([0, 499, 799])
            # what the store's stock would have needed: keep the order itself consistent
        # other paid orders today (the afternoon pick run), some with the delivered items
        specs: list[tuple[Customer, list[tuple[Product, int]], datetime, str, Backorder | None]] = []
        for b in backorders:
            specs.append((b.customer, b.lines, b.placed, "cancelled" if b.cancelled else "paid", b))
        for cust in rng.sample(customers[12:], 3):
            items = rng.sample(in_stock, rng.randint(1, 2)) + ([rng.choice(delivered)] if rng.random() < 0.6 else [])
            specs.append((cust, [(p, 1) for p in items],
                          now - timedelta(hours=rng.randint(1, 12), minutes=rng.randrange(60)), "paid", None))
        for cust in rng.sample(customers, 6):
            items = rng.sample(in_stock, rng.randint(1, 2))
            specs.append((cust, [(p, rng.randint(1, 2)) for p in items],
                          datetime.combine(today - timedelta(days=rng.randint(10, 50)), time(12, 0)), "delivered", None))
        specs.sort(key=lambda s: s[2])

        number = rng.randint(30000, 70000)
        order_rows = []
        n_pay = n_ship = 0
        for cust, lines, placed, status, b in specs:
            number += rng.randint(1, 25)
            oid = f"SO-{number}"
            shipping = b.shipping if b else rng.choice([0, 599])
            total = sum(p.price_cents * q for p, q in lines) + shipping
            row: dict[str, Any] = {"id": oid, "customer_id": cust.id, "status": status,
                                   "placed_at": placed.strftime("%Y-%m-%dT%H:%M"), "shipping_cents": shipping,
                                   "lines": [{"sku": p.sku, "qty": q, "unit_price_cents": p.price_cents}
                                             for p, q in lines],
                                   "note": PARTIAL_NOTE if b and b.partial_ok else "",
                                   "payments": [{"id": f"PAY-{n_pay + 1:05d}", "amount_cents": total, "method": "card",
                                                 "paid_at": (placed + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M")}],
                                   "events": []}
            n_pay += 1
            if b:
                b.id = oid
                waiting = [p.sku for p, _ in lines if p in delivered or p is missing]
                row["events"].append({"at": (placed + timedelta(hours=3)).date().isoformat(),
                                      "event": f"backordered: waiting for {', '.join(waiting)}"})
                if b.cancelled:
                    row["events"].append({"at": (today - timedelta(days=1)).isoformat(),
                                          "event": "cancelled: customer no longer needs it"})
                    row["refunds"] = [{"amount_cents": total, "reason": "order cancelled at customer request",
                                       "created_at": (today - timedelta(days=1)).isoformat()}]
            if status == "delivered":
                n_ship += 1
                carrier = rng.choice([EXPRESS, STANDARD, "USPS"])
                shipped = placed.date() + timedelta(days=1)
                row["shipments"] = [{"id": f"SHP-{n_ship:05d}", "carrier": carrier,
                                     "tracking": tracking_for(rng, carrier), "status": "delivered",
                                     "shipped_at": shipped.isoformat(),
                                     "delivered_at": (shipped + timedelta(days=3)).isoformat()}]
            order_rows.append(row)
        seeded_shipments = {s["id"] for r in order_rows for s in r.get("shipments", [])}
        initial_status = {r["id"]: r["status"] for r in order_rows}
        n_events = sum(len(r["events"]) for r in order_rows)

        # -- purchase orders: today's delivery, an older one already booked --------------------------
        po_no = rng.randint(3000, 7000)
        old_po = f"PO-{po_no}"
        po_id = f"PO-{po_no + rng.randint(5, 30)}"
        old_items = rng.sample([p for p in mine if p not in delivered] or in_stock[:2], 1)
        sent_day = today - timedelta(days=sup.lead_time_days + rng.randint(0, 3))
        old_day = today - timedelta(days=rng.randint(20, 30))
        pos = [
            {"id": old_po, "supplier_id": old_items[0].supplier_id, "status": "received",
             "created_at": old_day.isoformat(), "sent_at": old_day.isoformat(),
             "received_at": (old_day + timedelta(days=6)).isoformat(),
             "lines": [{"sku": p.sku, "qty": 24, "unit_cost_cents": p.cost_cents, "received_qty": 24}
                       for p in old_items]},
            {"id": po_id, "supplier_id": sup.id, "status": "sent", "created_at": sent_day.isoformat(),
             "sent_at": sent_day.isoformat(), "note": "backorder restock",
             "lines": [{"sku": p.sku, "qty": ordered[p.sku], "unit_cost_cents": p.cost_cents} for p in delivered]},
        ]

        # -- files ---------------------------------------------------------------------------------
        rec_path = f"warehouse/receiving/{today.isoformat()}_{po_id}.txt"
        rec_lines = "\n".join(f"  {p.sku:<10} {p.name:<30} counted {counted[p.sku]:>4}" for p in delivered)
        receiving = (f"RECEIVING NOTE\nDate: {today.isoformat()}\nSupplier: {sup.name}\nPurchase order: {po_id}\n\n"
                     f"{rec_lines}\n\nChecked by: {colleague.name}\nRemarks: {short.sku} short against the dispatch "
                     f"advice; cartons otherwise intact.\n")
        old_rec = (f"RECEIVING NOTE\nDate: {(old_day + timedelta(days=6)).isoformat()}\nSupplier: "
                   f"{[s for s in suppliers if s.id == old_items[0].supplier_id][0].name}\nPurchase order: {old_po}\n\n"
                   + "\n".join(f"  {p.sku:<10} {p.name:<30} counted   24" for p in old_items)
                   + "\n\nChecked by: " + colleague.name + "\nBooked in the same day.\n")
        export_day = today - timedelta(days=1)
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["order", "customer_id", "customer", "placed", "waiting_for"] if level > 1 else
                   ["order", "customer_id", "customer", "email", "placed", "waiting_for"])
        for b in sorted(backorders, key=lambda b: b.id):
            waiting = [p.sku for p, _ in b.lines if p in delivered or p is missing]
            w.writerow([b.id, b.customer.id, b.customer.name, *([b.customer.email] if level == 1 else []),
                        b.placed.strftime("%Y-%m-%d %H:%M"), " ".join(waiting)])
        bo_path = f"warehouse/backorders_{export_day.isoformat()}.csv"
        prio_text = ("# Priority accounts\n\nThese trade and loyalty accounts are served first whenever stock is "
                     "short. Match on the customer id: some names are shared by other customers.\n\n"
                     + "\n".join(f"- {c.id}  {c.name} ({c.city})" for c in priority_accounts) + "\n")
        policy = f"""# Backorders: allocating a delivery

When a delivery for backordered items arrives:

1. Book it in first, against its purchase order, with the quantities the warehouse counted
   (the receiving note), not what the supplier says it sent.
2. Then go through the backorder list (the warehouse exports it every night) and check each
   order in the store: an order cancelled since the export is skipped.
3. Allocate the stock on hand: priority accounts first (see {PRIORITY}), then everyone
   else; within each group the oldest order (by order time) first.
4. An order ships only if every line can be filled from stock. An order whose note says
   "{PARTIAL_NOTE}" may instead ship the lines that can be filled in full now; the rest
   stays on backorder: add a note to the order naming the SKUs still owed. An order that
   cannot ship takes no stock: move on to the next one.
5. Carrier: priority accounts go {EXPRESS}, everyone else {STANDARD}.
6. Tell every customer on the list (except cancelled orders) where they stand, one email
   each (answer in their thread if they have written in): the tracking number of what
   shipped, and which items are still on backorder.
7. Paid orders that are not on the backorder list belong to the afternoon pick run: leave
   them alone.
"""
        files = {POLICY: policy, PRIORITY: prio_text, rec_path: receiving, bo_path: out.getvalue(),
                 f"warehouse/receiving/{(old_day + timedelta(days=6)).isoformat()}_{old_po}.txt": old_rec}

        # -- mailbox ---------------------------------------------------------------------------------
        support = f"orders@{domain}"
        msgs: list[dict[str, Any]] = []
        adv_lines = "\n".join(f"  {p.sku:<10} {p.name:<30} shipped {ordered[p.sku]:>4}" for p in delivered)
        msgs.append({"folder": "Inbox", "sender": sup.email, "sender_name": f"{sup.name} Dispatch", "to": [support],
                     "subject": f"Dispatch advice for {po_id}",
                     "date": datetime.combine(today - timedelta(days=2), time(15, 12)).isoformat(),
                     "body": f"Hello,\n\nYour order {po_id} left our warehouse today:\n\n{adv_lines}\n\n"
                             f"Expected delivery in two days.\n\n{sup.contact}\n{sup.name}"})
        asker = None
        if level > 1 and "asker" in traps:  # level 1: nobody has written in
            asker = rng.choice([b for b in backorders if not b.cancelled])
            msgs.append({"folder": "Inbox", "sender": asker.customer.email, "sender_name": asker.customer.name,
                         "to": [support], "subject": "Any news on my order?",
                         "date": datetime.combine(today - timedelta(days=1), time(19, 40)).isoformat(),
                         "body": f"Hi,\n\nI ordered on {asker.placed.date().isoformat()} and was told some items were "
                                 f"on backorder. Any idea when it will ship?\n\nThanks,\n{asker.customer.name}",
                         "asker": True})
        msgs.append({"folder": "Inbox", "sender": lead.email, "sender_name": lead.name, "to": [support],
                     "subject": "Delivery today", "date": datetime.combine(today, time(7, 55)).isoformat(),
                     "body": f"Morning! The {sup.name} delivery is on the dock; the receiving note is in "
                             f"warehouse/receiving. Backorders first today please.\n\n{lead.first}"})
        msgs.append({"folder": "Inbox", "sender": colleague.email, "sender_name": colleague.name, "to": [support],
                     "subject": "Pick run at 14:00", "date": datetime.combine(today, time(8, 20)).isoformat(),
                     "body": f"The normal pick run for today's new orders starts at 14:00.\n\n{colleague.first}"})
        msgs.sort(key=lambda m: m["date"])
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
            if m.pop("asker", False):
                asker.msg_id = i
        n_seeded = len(msgs)

        store_args = dict(store_name=store_name, today=today.isoformat(), carriers=[STANDARD, EXPRESS, "USPS", "DHL"],
                          suppliers=[s.row() for s in suppliers], products=[p.row() for p in products],
                          customers=[c.row() for c in customers], orders=order_rows, purchase_orders=pos)

        def build(root: Path) -> None:
            write_files(root / "workspace", files, encoding=None)
            store.create_store(root / "state" / "store.sqlite", **store_args)
            mail.create_mailbox(root / "state" / "mail.sqlite", support, f"{store_name} Orders", messages=msgs,
                                now=now.isoformat())

        w = phrasing_rng(self.name, seed)
        on_day = long_date(today)
        hello = say(w, f"Hi {me.first}, {lead.first} here.", f"{me.first}, it's {lead.first}.",
                    f"Morning {me.first}, this is {lead.first}.")
        arrived = say(w, f"The {sup.name} delivery for the backorders arrived this morning ({on_day}).",
                      f"This morning ({on_day}) the {sup.name} delivery we were waiting on for the backorders came in.",
                      f"The backorders' delivery from {sup.name} turned up this morning, {on_day}.")
        ask = say(w, "Could you book it in and get the backorders out the door today?",
                  "Please book it in and ship the backorders today.",
                  "Can you receive it and get today's backorders out the door?",
                  "I need you to book the delivery in and send the backorders out today.")
        sources = say(w, f"The rules are in {POLICY}; last night's backorder list is in the warehouse folder.",
                      f"You'll find last night's backorder list in the warehouse folder, and the rules in {POLICY}.",
                      f"Work by {POLICY}; the backorder list (exported last night) sits in the warehouse folder.")
        limits = in_some_order(w, [
            say(w, "Every customer on the list should hear from us today.",
                "Everyone on the list should get word from us today.",
                "Each customer on the list needs to hear from us today."),
            say(w, "The rest of today's orders go out with the afternoon pick run, so leave those alone.",
                "Leave the rest of today's orders alone: the afternoon pick run takes care of them.",
                "Don't touch the other orders from today; they go out with the afternoon pick run."),
        ])
        instruction = " ".join([hello, arrived, ask, sources, *limits])
        if level == 1:  # the policy's rules that apply, in the task
            instruction = " ".join([hello, arrived, ask, (
                f"Book it in with the quantities counted on today's receiving note, {rec_path} (not what the "
                f"supplier says it sent). Then ship each order on last night's list, {bo_path}, whose lines can "
                f"all be filled: {EXPRESS} for priority accounts ({PRIORITY}; match on the customer id), "
                f"{STANDARD} for everyone else. Email each customer the tracking number. Leave today's other "
                f"orders alone: the afternoon pick run takes care of them.")])
        live_addrs = {b.customer.email for b in backorders if not b.cancelled}
        stray = next((b.customer.email for b in backorders if b.cancelled), None) or next(
            c.email for c in customers if c.email not in live_addrs)
        ctx = _Ctx(backorders=backorders, po_id=po_id, counted={p.sku: counted[p.sku] for p in delivered},
                   rec_path=rec_path, bo_path=bo_path, seeded_shipments=seeded_shipments,
                   initial_status=initial_status, n_seeded=n_seeded, n_events=n_events, me=me.name,
                   delivered=[p.sku for p in delivered], stock_after=stock_after, short=level == 1,
                   ordered={p.sku: ordered[p.sku] for p in delivered}, stray=stray)
        criteria = _criteria(ctx)
        if level == 1:  # one order, shipped whole: nothing stays owed; the rules are in the task, no order to open
            criteria = [c for c in criteria if c.id not in ("partial_notes", "orders_checked")]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=partial(_oracle, ctx),
            criteria=criteria, perturbations=_perturbations(ctx, partial(_oracle, ctx), criteria),
            data={"today": today.isoformat(), "po": po_id, "counted": ctx.counted,
                  "namesake_order": next((b.id for b in backorders if b.customer is twin), ""),
                  "cancelled_order": next((b.id for b in backorders if b.cancelled), ""),
                  "missing_item": missing.sku if any(p is missing for b in backorders if not b.cancelled
                                                     for p in b.awaited) else "",
                  "asker_order": asker.id if asker else "",
                  "backorders": [{"order": b.id, "customer": b.customer.id, "priority": b.priority,
                                  "partial_ok": b.partial_ok, "outcome": b.outcome, "ship_lines": b.ship_lines,
                                  "awaited": [p.sku for p in b.awaited]} for b in backorders]},
        )


@dataclass
class _Ctx:
    backorders: list[Backorder]
    po_id: str
    counted: dict[str, int]
    rec_path: str
    bo_path: str
    seeded_shipments: set[str]
    initial_status: dict[str, str]
    n_seeded: int
    n_events: int
    me: str
    delivered: list[str]
    stock_after: dict[str, int]
    short: bool
    """Level 1: the note and the list are named, nobody wrote in; the oracle skips the survey."""
    ordered: dict[str, int]
    stray: str
    """An address that should get no mail (the cancelled order's customer where there is one)."""

    def live(self) -> list[Backorder]:
        return [b for b in self.backorders if not b.cancelled]


# -- reference solution ----------------------------------------------------------------------


def _oracle(ctx: _Ctx):
    """Read the policy, the priority list, the receiving note and the backorder list; book the
    delivery; open every listed order; ship by the allocation; note partials; write to every
    customer; check. ``ctx.short`` (level 1) skips the survey (the folder, the inbox, the
    purchase order) and the checks at the end."""
    if not ctx.short:
        yield ToolCall("files__list_dir", {"path": ".", "recursive": True}, "Find the policy, notes and the list.")
        yield ToolCall("files__read_file", {"path": POLICY}, "Read the backorder policy.")
    yield ToolCall("files__read_file", {"path": PRIORITY}, "Who are the priority accounts (by id)?")
    yield ToolCall("files__read_file", {"path": ctx.rec_path}, "What the warehouse counted.")
    yield ToolCall("files__read_file", {"path": ctx.bo_path}, "Last night's backorder list.")
    ordered = dict(ctx.ordered)
    if not ctx.short:
        inbox = loads((yield ToolCall("mail__list_messages", {"folder": "Inbox"}, "Anything about the delivery "
                                                                                    "or the backorders?")))
        asker = next((b for b in ctx.live() if b.msg_id), None)
        if asker:
            yield ToolCall("mail__read_message", {"message_id": asker.msg_id}, "A customer asking about a backorder.")
            assert any(m["id"] == asker.msg_id for m in inbox["messages"])
        po = loads((yield ToolCall("store__get_purchase_order", {"po_id": ctx.po_id}, "The purchase order to book.")))
        ordered = {ln["sku"]: ln["qty"] for ln in po["lines"]}
    shorts = [f"{sku} short {q - ctx.counted[sku]}" for sku, q in ordered.items() if ctx.counted[sku] < q]
    receipt = {"po_id": ctx.po_id, "lines": [{"sku": s, "qty": q} for s, q in ctx.counted.items()]}
    if not ctx.short:
        receipt["note"] = "counted per receiving note; " + "; ".join(shorts)
    yield ToolCall("store__receive_purchase_order", receipt, "Book the delivery in as counted.")
    for b in ([] if ctx.short else ctx.backorders):  # level 1: the list says all it needs
        o = loads((yield ToolCall("store__get_order", {"order_id": b.id},
                                  f"{b.id}: still waiting? lines, note, placed at.")))
        assert o["status"] == ("cancelled" if b.cancelled else "paid")
    tracking: dict[str, str] = {}
    for b in sorted(ctx.live(), key=lambda b: (not b.priority, b.placed)):
        if b.outcome == "held":
            continue
        args: dict[str, Any] = {"order_id": b.id, "carrier": b.carrier}
        if b.outcome == "partial":
            args["line_nos"] = b.ship_lines
        text = (yield ToolCall("store__create_shipment", args,
                               f"{b.id}: ship {'everything' if b.outcome == 'full' else 'the lines we can fill'} "
                               f"by {b.carrier}."))
        tracking[b.id] = text.rsplit("tracking number ", 1)[1].rstrip(".")
        if b.outcome == "partial":
            yield ToolCall("store__add_order_note", {
                "order_id": b.id, "note": "still on backorder: " + ", ".join(p.sku for p in b.awaited)},
                "Record what is still owed.")
    for b in sorted(ctx.live(), key=lambda b: b.id):
        if b.outcome == "full":
            news = (f"Good news: your order {b.id} is complete and has shipped today with {b.carrier}, tracking "
                    f"number {tracking[b.id]}.")
        elif b.outcome == "partial":
            news = (f"Part of your order {b.id} has shipped today with {b.carrier}, tracking number "
                    f"{tracking[b.id]}. Still on backorder: "
                    + ", ".join(f"{p.name} ({p.sku})" for p in b.awaited) + ". We'll send them as soon as they "
                    "arrive.")
        else:
            news = (f"Your order {b.id} is still on backorder: we are waiting for "
                    + ", ".join(f"{p.name} ({p.sku})" for p in b.awaited)
                    + ". It will ship complete as soon as everything is in stock.")
        body = _notice(ctx, b, news)
        if b.msg_id:
            yield ToolCall("mail__reply", {"message_id": b.msg_id, "body": body}, f"Answer {b.customer.name} in "
                                                                                   "their thread.")
        else:
            yield ToolCall("mail__send_message", {"to": [b.customer.email], "subject": f"Your order {b.id}",
                                                  "body": body}, f"Update {b.customer.name} on {b.id}.")
    if not ctx.short:
        yield ToolCall("store__search_shipments", {"limit": 20}, "Check today's shipments.")
        yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 20}, "Check every customer was written to.")
    n_ship = sum(1 for b in ctx.live() if b.outcome != "held")
    if ctx.short:
        return f"Booked {ctx.po_id} as counted, shipped {ctx.backorders[0].id} and mailed the customer."
    return (f"Booked {ctx.po_id} as counted, shipped {n_ship} backorders (priority first), kept "
            f"{sum(1 for b in ctx.live() if b.outcome == 'held')} waiting and updated every customer on the list.")


def _notice(ctx: _Ctx, b: Backorder, news: str) -> str:
    return "\n".join([f"Hi {b.customer.name.split()[0]},", "", news, "", f"Best regards,\n{ctx.me}"])


def _perturbations(ctx: _Ctx, solve, criteria: list[Criterion]) -> dict[str, perturb.Oracle]:
    """For each criterion, the oracle with its calls edited so that it fails that one."""
    order = sorted(ctx.live(), key=lambda b: (not b.priority, b.placed))
    first_full = next(b for b in order if b.outcome == "full")
    first_partial = next((b for b in order if b.outcome == "partial"), first_full)
    multi = next(b for b in order if len(b.ship_lines) >= 2)
    other = next(o for o, s in ctx.initial_status.items() if s == "paid" and all(o != b.id for b in ctx.backorders))
    asker = next((b for b in ctx.live() if b.msg_id), None)

    def ship(b: Backorder):
        return perturb.on("store__create_shipment", order_id=b.id)

    def mail_to(b: Backorder):
        return (perturb.on("mail__reply", message_id=b.msg_id) if b.msg_id
                else perturb.on("mail__send_message", subject=f"Your order {b.id}"))

    def at_the_end(call: ToolCall):
        """``call`` once every customer is written to, before the final checks (level 1 has none)."""
        return perturb.insert(solve, call, before=None if ctx.short else perturb.on("store__search_shipments"))

    flawed = {
        "delivery_received": lambda: perturb.change(  # what the purchase order says, not what was counted
            solve, perturb.on("store__receive_purchase_order"),
            lines=[{"sku": s, "qty": q} for s, q in ctx.ordered.items()]),
        "shipped_orders": lambda: perturb.drop(  # its mail then says the tracking number is to follow
            solve, ship(first_full), answer="tracking number (to follow)"),
        "shipped_lines": lambda: perturb.change(solve, ship(multi), line_nos=multi.ship_lines[:-1]),
        "carriers": lambda: perturb.change(solve, ship(first_full),
                                           carrier=STANDARD if first_full.carrier == EXPRESS else EXPRESS),
        "partial_notes": lambda: perturb.drop(solve, perturb.on("store__add_order_note", order_id=first_partial.id)),
        "customer_notices": lambda: perturb.drop(solve, mail_to(order[-1])),
        "notice_details": lambda: perturb.change(solve, mail_to(first_partial), body=_notice(
            ctx, first_partial, f"Part of your order {first_partial.id} has shipped today; the rest will follow.")),
        "rules_read": lambda: perturb.drop(solve, perturb.on("files__read_file", path=PRIORITY)),
        "orders_checked": lambda: perturb.change(  # another order opened in place of the first one shipped
            solve, perturb.on("store__get_order", order_id=next(
                b for b in ctx.backorders if b.outcome in ("full", "partial")).id), order_id=other),
        "no_stray_mail": lambda: at_the_end(ToolCall("mail__send_message", {
            "to": [ctx.stray], "subject": "Your cancelled order", "body": "Your order was cancelled as requested."},
            "Confirm.")),
        "others_untouched": lambda: at_the_end(ToolCall(
            "store__cancel_order", {"order_id": other, "reason": "duplicate order"}, "Tidy up.")),
        "asker_answered_in_thread": lambda: perturb.replace(  # a fresh mail, not an answer in their thread
            solve, perturb.on("mail__reply"), lambda c: ToolCall("mail__send_message", {
                "to": [asker.customer.email], "subject": f"Your order {asker.id}", "body": c.arguments["body"]},
                c.note)),
    }
    return {c.id: flawed[c.id]() for c in criteria}


# -- grading ---------------------------------------------------------------------------------


def _criteria(ctx: _Ctx) -> list[Criterion]:
    live = ctx.live()
    listed = {b.id: b for b in ctx.backorders}
    addrs = {b.customer.email for b in live}
    all_skus = {p.sku for b in ctx.backorders for p, _ in b.lines}

    def new_shipments(world) -> list[dict]:
        return [s for s in store.shipments(world) if s["id"] not in ctx.seeded_shipments]

    def shipped_lines_of(world) -> dict[str, set[tuple[str, int]]]:
        by_ship = {s["id"]: s["order_id"] for s in new_shipments(world)}
        out: dict[str, set[tuple[str, int]]] = {}
        for m in store.stock_moves(world):
            if m["reason"] == "shipment" and m["ref"] in by_ship:
                out.setdefault(by_ship[m["ref"]], set()).add((m["sku"], -m["delta"]))
        return out

    def sent(world) -> list[dict]:
        return [m for m in mail.sent_messages(world) if m["id"] > ctx.n_seeded]

    def to_customer(world, b: Backorder) -> list[dict]:
        return [m for m in sent(world) if b.customer.email in m["to"] + m["cc"]]

    def delivery_received(world, traj):
        po = store.purchase_orders(world)[ctx.po_id]
        if po["status"] != "received":
            return False, f"{ctx.po_id} is {po['status']}"
        got = {ln["sku"]: ln["received_qty"] for ln in po["lines"]}
        return got == ctx.counted, f"received {got}, counted {ctx.counted}"

    def shipped_orders(world, traj):
        got = {s["order_id"] for s in new_shipments(world)}
        want = {b.id for b in live if b.outcome in ("full", "partial")}
        return got == want, f"shipped {sorted(got)}, expected {sorted(want)}"

    def shipped_lines(world, traj):
        got = shipped_lines_of(world)
        bad = []
        for b in live:
            want = {(b.lines[k - 1][0].sku, b.lines[k - 1][1]) for k in b.ship_lines}
            if got.get(b.id, set()) != want:
                bad.append(f"{b.id}: shipped {sorted(got.get(b.id, set()))}, expected {sorted(want)}")
        if not any(got.get(b.id) for b in live):
            bad.append("nothing shipped")
        return not bad, "; ".join(bad)

    def carriers(world, traj):
        ships = [s for s in new_shipments(world) if s["order_id"] in listed]
        if not ships:
            return False, "no backorder shipped"
        bad = [f"{s['order_id']} by {s['carrier']}" for s in ships if s["carrier"] != listed[s["order_id"]].carrier]
        return not bad, f"wrong carrier: {bad}" if bad else ""

    def partial_notes(world, traj):
        orders = store.orders(world)
        bad = []
        for b in live:
            if b.outcome != "partial":
                continue
            notes = " ".join(e["event"] for e in orders[b.id]["events"] if e["event"].startswith("note:"))
            stray = [sku for sku in all_skus - {p.sku for p, _ in b.lines} if mentions_code(notes, sku)]
            if not all(mentions_code(notes, p.sku) for p in b.awaited) or stray:
                bad.append(b.id)
        return not bad, f"no note naming (only) the SKUs still owed on {bad}" if bad else ""

    def customer_notices(world, traj):
        bad = []
        for b in live:
            got = to_customer(world, b)
            if len(got) != 1 or not mentions_id(f"{got[0]['subject']}\n{got[0]['body']}", b.id):
                bad.append(f"{b.id}: {len(got)} mails")
        return not bad, "; ".join(bad)

    def notice_details(world, traj):
        ships = {}
        for s in new_shipments(world):
            ships.setdefault(s["order_id"], []).append(s["tracking"])
        bad = []
        for b in live:
            got = to_customer(world, b)
            text = "\n".join(f"{m['subject']}\n{m['body']}" for m in got)
            if not got:
                bad.append(f"{b.id}: no mail")
                continue
            if b.outcome in ("full", "partial") and not any(mentions_tracking(text, t) for t in ships.get(b.id, [])):
                bad.append(f"{b.id}: no tracking number")
            for p in b.awaited:
                if not (mentions_code(text, p.sku) or squash(p.name) in squash(text)):
                    bad.append(f"{b.id}: does not name {p.sku} as still to come")
            # about this order alone: no other customer's order, parcel or item
            others = [o.id for o in ctx.backorders if o.id != b.id and mentions_id(text, o.id)]
            others += [t for oid, ts in ships.items() if oid != b.id for t in ts if mentions_tracking(text, t)]
            others += [sku for sku in all_skus - {p.sku for p, _ in b.lines} if mentions_code(text, sku)]
            if others:
                bad.append(f"{b.id}: also names {others}")
        return not bad, "; ".join(bad)

    asker = next((b for b in live if b.msg_id), None)

    def asker_answered_in_thread(world, traj):
        got = to_customer(world, asker)
        if not got:
            return False, f"{asker.customer.name} ({asker.id}) got no answer"
        tracking = [s["tracking"] for s in new_shipments(world) if s["order_id"] == asker.id]

        def answers(m) -> bool:  # in their thread, about their order alone, with its news
            text = f"{m['subject']}\n{m['body']}"
            news = (any(mentions_tracking(text, t) for t in tracking) if asker.outcome in ("full", "partial")
                    else all(mentions_code(text, p.sku) or squash(p.name) in squash(text) for p in asker.awaited))
            return (m["in_reply_to"] == asker.msg_id and mentions_id(text, asker.id) and news
                    and not any(mentions_id(text, o.id) for o in ctx.backorders if o is not asker))

        off = [m["id"] for m in got if not answers(m)]
        return not off, f"mail {off} to {asker.customer.email} is not an answer in their thread giving the news " \
            f"of {asker.id} alone" if off else ""

    def rules_read(world, traj):
        calls = traj.tool_calls
        k = next((i for i, t in enumerate(calls) if t.name == "store__create_shipment" and not t.is_error), None)
        if k is None:
            return False, "nothing shipped"
        read = {norm_path(t.arguments.get("path")) for t in calls[:k]
                if t.name == "files__read_file" and not t.is_error and isinstance(t.arguments, dict)}
        missing = [f for f in ((PRIORITY,) if ctx.short else (POLICY, PRIORITY)) if f not in read]
        return not missing, f"not read before shipping: {missing}" if missing else ""

    def others_untouched(world, traj):
        st = store.order_statuses(world)
        ship_ok = {b.id for b in live if b.outcome in ("full", "partial")}
        changed = [o for o, s in st.items() if s != ctx.initial_status.get(o) and o not in ship_ok]
        stray = [s["order_id"] for s in new_shipments(world) if s["order_id"] not in listed]
        moves = [m for m in store.stock_moves(world) if m["reason"] not in ("shipment", "purchase order receipt")]
        bad = changed + stray + [f"stock {m['sku']} {m['delta']:+d}" for m in moves]
        return not bad, f"changed: {bad}" if bad else ""

    return [
        Criterion("delivery_received", "the purchase order is received with the counted quantities", "final_state",
                  delivery_received),
        Criterion("shipped_orders", "exactly the backorders the policy can ship now were shipped", "final_state",
                  shipped_orders, 2.0),
        Criterion("shipped_lines", "each shipped backorder shipped exactly the lines the allocation fills",
                  "final_state", shipped_lines, 2.0),
        Criterion("carriers", "priority accounts shipped express, everyone else standard", "final_state", carriers,
                  requires=("shipped_orders",)),
        Criterion("partial_notes", "each partly shipped order has a note naming the SKUs still owed", "final_state",
                  partial_notes),
        Criterion("customer_notices", "every customer on the list (cancelled orders aside) got exactly one mail "
                  "quoting the order", "final_state", customer_notices, 2.0, requires=("notice_details",)),
        Criterion("notice_details", "each mail gives the new tracking number and names what is still on backorder "
                  "(and no other order, parcel or item)", "final_state", notice_details),
        *([Criterion("asker_answered_in_thread", "the customer who wrote in asking about their order was answered in "
                     "their own thread with that order's news (and no other order)", "final_state", asker_answered_in_thread)] if asker else []),
        Criterion("rules_read", "the policy and the priority list were read before anything shipped", "process",
                  rules_read, requires=("shipped_orders",)),
        process.looked_up_before("store__create_shipment", "store__get_order", "order_id", id="orders_checked",
                                 description="each order was opened before it was shipped",
                                 requires=("shipped_orders",), what="nothing shipped"),
        mail_kit.sends_only(addrs, seeded=ctx.n_seeded,
                            description="mail went only to customers with live backorders"),
        Criterion("others_untouched", "no other order changed or shipped, and stock moved only by the receipt and "
                  "the shipments", "final_state", others_untouched, guard=True),
    ]
