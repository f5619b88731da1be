"""Inventory and procurement: book today's delivery in, then raise this week's purchase orders.

A delivery has arrived against a sent purchase order; the warehouse's packing list shows what
the supplier claims to have shipped and what was actually counted (a carton short, a line not
shipped at all, one over-delivered, an item we never ordered: the short line always, the others
drawn). The agent books the counted
quantities with every discrepancy noted, and only then works out what to reorder by the
written rule: active SKUs whose stock position (on hand + open purchase orders) is at or below
the reorder point, ordered up to a multiple of that point in whole cases, one purchase order
per supplier, sent. Traps: discontinued SKUs, SKUs already covered by an open purchase order,
one only partly covered, one left short by today's delivery, a stock level exactly at the
reorder point, stock just above it, and a draft purchase order on hold that must not be
touched. Which of them a default-level instance carries is drawn per seed (``TRAP_ODDS``; the
short line, the on-hold draft and some open order always); ``Task.data`` names the SKUs of each
(empty when absent), and the reorder traps present get a criterion each (``_trap_criteria``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from longhorizon.apps.store import state as store
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.commerce import Product, make_products, make_suppliers, pick_today
from longhorizon.tasks.common import loads, long_date, names_only, rng_and_faker, write_files
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register

RULES = "purchasing/reorder_rules.md"
TRAP_ODDS = (("at_point", 0.6), ("discontinued", 0.6), ("covered", 0.6), ("partly_covered", 0.5),
             ("just_above_point", 0.6), ("over_delivered", 0.6), ("not_shipped", 0.6), ("not_ordered", 0.5))
"""The default level's traps, each there with this chance (an open order covering some SKU, in
full or in part, always): a SKU exactly at its reorder point, discontinued ones, ones covered by
an open order, one partly covered, ones just above the point; in the delivery, a line
over-delivered, one not shipped, an item not ordered."""
CASES = [1, 2, 4, 6, 10, 12, 24]


@dataclass
class _Ctx:
    today: date
    k: int
    arriving: str
    counted: dict[str, int]
    shipped: dict[str, int]
    discrepancies: list[str]
    unexpected: str | None
    packing_list: str
    on_hold: str
    expected: dict[str, int]
    """SKU -> quantity to order."""
    supplier_of: dict[str, str]
    initial_pos: dict[str, dict[str, Any]]
    initial_products: dict[str, dict[str, Any]]
    covered: list[str]
    discontinued: list[str]
    near_miss: list[str]
    at_point: list[str]
    """SKUs whose stock is exactly at the reorder point (to reorder)."""
    partly: dict[str, int]
    """SKU -> units an open purchase order already brings (not enough: reorder the rest)."""


def _cases_needed(gap: int, case: int) -> int:
    return math.ceil(gap / case) * case


@register
class RestockPurchaseOrders(TaskFamily):
    name = "restock_purchase_orders"
    category = "inventory and procurement"
    apps = ("store", "files")
    description = (
        "Receive today's delivery against its purchase order (counted quantities, discrepancies noted), "
        "then raise and send one purchase order per supplier for every active SKU at or below its reorder "
        "point once open orders are counted, sized by the written rule."
    )

    levels = 3
    """1: the delivery (a short line and one not shipped), then one SKU to reorder (the one it
    left short), with a discontinued SKU and stock just above the point around it; 2: two more SKUs, one at the point exactly, and
    open orders that cover some (every trap there); 3 (default): five to seven more, which traps
    they carry drawn."""
    toolsets = {1: (
        "files__read_file", "store__add_po_line", "store__create_purchase_order", "store__get_product",
        "store__get_purchase_order", "store__receive_purchase_order", "store__search_products",
        "store__send_purchase_order",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        store_name = f"{fake.last_name()} {rng.choice(['Home & Garden', 'Goods', 'Supply Co', 'Outfitters'])}"
        today = pick_today(rng)
        k = rng.choice([2, 3])
        suppliers = make_suppliers(rng, fake, rng.randint(4, 5))
        products = make_products(rng, rng.randint(36, 44), suppliers)
        for p in products:
            p.case_size = rng.choice(CASES)
            p.reorder_point = rng.randint(6, 40)
            p.reorder_qty = p.reorder_point * k
            p.stock = p.reorder_point + rng.randint(1, 60)
        by_sup: dict[str, list[Product]] = {s.id: [p for p in products if p.supplier_id == s.id] for s in suppliers}
        sup_by_id = {s.id: s for s in suppliers}

        # -- roles ------------------------------------------------------------------------------
        arriving_sup = rng.choice(suppliers)
        pool_arr = by_sup[arriving_sup.id][:]
        rng.shuffle(pool_arr)
        short_p, ok_p, over_p, missing_p, unexpected_p = pool_arr[:5]
        arriving_skus = {p.sku for p in (short_p, ok_p, over_p, missing_p)}
        quiet = rng.choice([s for s in suppliers if s.id != arriving_sup.id])  # needs nothing this week
        rest = [p for p in products if p.sku not in arriving_skus and p.sku != unexpected_p.sku]
        rng.shuffle(rest)
        rest.sort(key=lambda p: p.supplier_id == quiet.id)  # its products only get the harmless roles
        # which traps this week carries is drawn (levels 1-2 keep every one they show); the on-hold
        # draft and the line left short by the delivery are always there, and an open order always
        # covers some SKU, in full or in part
        t = {name: rng.random() < odds for name, odds in TRAP_ODDS}
        if not (t["covered"] or t["partly_covered"]):
            t[rng.choice(["covered", "partly_covered"])] = True
        if level < self.levels:
            t = dict.fromkeys(t, True)
            t["partly_covered"] = rng.random() < 0.5
        n_need = rng.randint(5, 7)
        need = rest[:n_need]
        pool = rest[n_need:]

        def take(n: int, where=lambda p: True) -> list[Product]:
            got = [p for p in pool if where(p)][:n]
            for p in got:
                pool.remove(p)
            return got

        boundary = take(1 if t["at_point"] else 0)
        discontinued = take(rng.randint(1, 2) if t["discontinued"] else 0)
        # fully covered SKUs are bought from a supplier the run orders from at every level
        ordering = {arriving_sup.id} | {p.supplier_id for p in need[:2]}
        covered = take(rng.randint(1, 2) if t["covered"] else 0, lambda p: p.supplier_id in ordering)
        partly = take(1 if t["partly_covered"] else 0)
        if not covered and not partly:  # (no SKU of those suppliers left to cover)
            partly = take(1)
        near_miss = take(2 if t["just_above_point"] else 0)  # stock just above the reorder point
        on_hold_lines = [p for p in pool if p.supplier_id != arriving_sup.id][:2]

        for p in need:
            p.stock = rng.randint(0, p.reorder_point - 1)
        for p in boundary:
            p.stock = p.reorder_point
        for p in discontinued:
            p.stock = rng.randint(0, p.reorder_point)
            p.status = "discontinued"
        for p in covered + partly:
            p.stock = rng.randint(0, p.reorder_point - 2)
        for p in near_miss:
            p.stock = p.reorder_point + rng.randint(1, 2)
        on_order: dict[str, int] = {}
        for p in covered:
            on_order[p.sku] = _cases_needed(p.reorder_point * k - p.stock, p.case_size)
        for p in partly:
            on_order[p.sku] = rng.randint(1, p.reorder_point - p.stock)
        bounds = boundary
        if level < self.levels:  # the same draws as the default, then fewer SKUs to reorder
            dropped = need[2:] if level == 2 else need + bounds + covered + partly
            for p in dropped:  # restocked since: well above the point, and nothing on order
                p.stock = p.reorder_point + rng.randint(3, 60)
                on_order.pop(p.sku, None)
            need = need[:2] if level == 2 else []
            if level == 1:
                bounds, covered, partly = [], [], []

        # today's delivery: ordered qty, what the supplier says it shipped, what was counted
        ordered, shipped, counted = {}, {}, {}
        short_p.stock = rng.randint(0, short_p.reorder_point // 2)
        ordered[short_p.sku] = _cases_needed(short_p.reorder_point * k - short_p.stock, short_p.case_size)
        gap = short_p.reorder_point - short_p.stock  # counted must leave it at or below the reorder point
        whole = [n * short_p.case_size for n in range(1, gap // short_p.case_size + 1)]  # whole cases arrived
        counted[short_p.sku] = rng.choice(whole) if whole else rng.randint(1, gap)
        shipped[short_p.sku] = ordered[short_p.sku]
        ok_p.stock = rng.randint(0, ok_p.reorder_point)
        ordered[ok_p.sku] = _cases_needed(ok_p.reorder_point * k - ok_p.stock, ok_p.case_size)
        shipped[ok_p.sku] = counted[ok_p.sku] = ordered[ok_p.sku]
        over_p.stock = rng.randint(0, over_p.reorder_point)
        ordered[over_p.sku] = _cases_needed(over_p.reorder_point * k - over_p.stock, over_p.case_size)
        shipped[over_p.sku] = counted[over_p.sku] = ordered[over_p.sku] + over_p.case_size * t["over_delivered"]
        ordered[missing_p.sku] = _cases_needed(missing_p.reorder_point, missing_p.case_size)
        shipped[missing_p.sku] = counted[missing_p.sku] = ordered[missing_p.sku] * (not t["not_shipped"])
        extra_qty = unexpected_p.case_size * rng.randint(1, 2)
        if t["not_ordered"]:
            shipped[unexpected_p.sku] = counted[unexpected_p.sku] = extra_qty
        arriving_lines = [short_p, ok_p, over_p, missing_p]
        rng.shuffle(arriving_lines)

        # -- what should be ordered -----------------------------------------------------------
        expected: dict[str, int] = {}
        for p in need + bounds:
            expected[p.sku] = _cases_needed(p.reorder_point * k - p.stock, p.case_size)
        for p in partly:
            expected[p.sku] = _cases_needed(p.reorder_point * k - p.stock - on_order[p.sku], p.case_size)
        after = short_p.stock + counted[short_p.sku]
        expected[short_p.sku] = _cases_needed(short_p.reorder_point * k - after, short_p.case_size)
        supplier_of = {p.sku: p.supplier_id for p in products}

        # -- purchase orders -----------------------------------------------------------------
        number = rng.randint(2000, 6000)
        pos: list[dict[str, Any]] = []

        def po_id() -> str:
            nonlocal number
            number += rng.randint(1, 6)
            return f"PO-{number}"

        for _ in range(rng.randint(2, 3)):  # history: received and invoiced long ago
            sup = rng.choice(suppliers)
            items = rng.sample(by_sup[sup.id], min(2, len(by_sup[sup.id])))
            created = today - timedelta(days=rng.randint(30, 70))
            pos.append({"id": po_id(), "supplier_id": sup.id, "status": "received", "created_at": created.isoformat(),
                        "sent_at": created.isoformat(), "received_at": (created + timedelta(days=sup.lead_time_days)).isoformat(),
                        "lines": [{"sku": p.sku, "qty": p.case_size * 4, "unit_cost_cents": p.cost_cents,
                                   "received_qty": p.case_size * 4} for p in items]})
        hist_sup = pos[0]["supplier_id"]
        processed_po = pos[-1]
        arriving_sent = today - timedelta(days=max(2, arriving_sup.lead_time_days))
        arriving = po_id()
        pos.append({"id": arriving, "supplier_id": arriving_sup.id, "status": "sent",
                    "created_at": arriving_sent.isoformat(), "sent_at": arriving_sent.isoformat(),
                    "lines": [{"sku": p.sku, "qty": ordered[p.sku], "unit_cost_cents": p.cost_cents}
                              for p in arriving_lines]})
        open_groups: dict[str, list[Product]] = {}
        for p in covered + partly:
            open_groups.setdefault(p.supplier_id, []).append(p)
        for sid, items in open_groups.items():
            sent = today - timedelta(days=rng.randint(1, 4))
            pos.append({"id": po_id(), "supplier_id": sid, "status": "sent", "created_at": sent.isoformat(),
                        "sent_at": sent.isoformat(),
                        "lines": [{"sku": p.sku, "qty": on_order[p.sku], "unit_cost_cents": p.cost_cents} for p in items]})
        on_hold = po_id()
        hold_sup = on_hold_lines[0].supplier_id if on_hold_lines else hist_sup
        hold_items = [p for p in on_hold_lines if p.supplier_id == hold_sup] or by_sup[hold_sup][:1]
        pos.append({"id": on_hold, "supplier_id": hold_sup, "status": "draft",
                    "created_at": (today - timedelta(days=6)).isoformat(),
                    "note": "ON HOLD: waiting for the supplier's new price list",
                    "lines": [{"sku": p.sku, "qty": p.case_size * 2, "unit_cost_cents": p.cost_cents} for p in hold_items]})
        cancelled_sup = rng.choice(suppliers)
        pos.append({"id": po_id(), "supplier_id": cancelled_sup.id, "status": "cancelled",
                    "created_at": (today - timedelta(days=12)).isoformat(), "note": "cancelled: duplicate",
                    "lines": [{"sku": by_sup[cancelled_sup.id][0].sku, "qty": by_sup[cancelled_sup.id][0].case_size,
                               "unit_cost_cents": by_sup[cancelled_sup.id][0].cost_cents}]})

        # -- workspace files ----------------------------------------------------------------
        checker = fake.first_name()
        packing_list = f"receiving/delivery_{today.isoformat()}_{arriving_sup.name.split()[0].lower()}.txt"
        old_list = f"receiving/processed/delivery_{processed_po['received_at']}.txt"
        width = max(len(p.name) for p in products) + 2

        def table(rows: list[tuple[str, str, Any, Any, str]]) -> str:
            head = f"{'SKU':<10}{'Description':<{width}}{'Shipped':>8}{'Counted':>9}  Remarks"
            return "\n".join([head] + [f"{s:<10}{n:<{width}}{a!s:>8}{b!s:>9}  {r}".rstrip() for s, n, a, b, r in rows])

        rows = []
        for p in arriving_lines + [unexpected_p] * t["not_ordered"]:
            if p is missing_p and t["not_shipped"]:
                continue
            remark = ""
            if p is short_p:
                remark = "carton(s) missing from pallet"
            rows.append((p.sku, p.name, shipped[p.sku], counted[p.sku], remark))
        rng.shuffle(rows)
        if level == 1:  # the same draws, then only the short line and the one not shipped: the others came last week
            for p in (ok_p, over_p):
                p.stock += counted[p.sku]
            keep = {short_p.sku, missing_p.sku}
            rows = [r for r in rows if r[0] in keep]
            arriving_lines = [p for p in arriving_lines if p.sku in keep]
            ordered, shipped, counted = ({s: q for s, q in d.items() if s in keep} for d in (ordered, shipped, counted))
            po = next(po for po in pos if po["id"] == arriving)
            po["lines"] = [ln for ln in po["lines"] if ln["sku"] in keep]
        packing_text = (
            f"PACKING LIST - {arriving_sup.name}\n"
            f"Delivered to: {store_name} warehouse\nDelivery date: {today.isoformat()}\n"
            f"Customer order reference: {arriving}\n\n{table(rows)}\n\n"
            f"Supplier packing note: all ordered lines shipped complete.\n"
            f"Counted on arrival by {checker} (warehouse).\n"
        )
        old_rows = [(ln["sku"], next(p.name for p in products if p.sku == ln["sku"]), ln["qty"], ln["qty"], "")
                    for ln in processed_po["lines"]]
        old_text = (f"PACKING LIST - {sup_by_id[processed_po['supplier_id']].name}\n"
                    f"Delivery date: {processed_po['received_at']}\nCustomer order reference: {processed_po['id']}\n\n"
                    f"{table(old_rows)}\n\nBOOKED IN - {processed_po['received_at']}\n")
        rules_text = f"""# Purchasing: reorder rules

1. Book in any delivery that has arrived before working out what to order: receiving changes
   both the stock on hand and what is still on order.
2. When receiving, book the quantities the warehouse counted, never what the supplier says it
   shipped. Suppliers do not back-order: whatever is short is not coming. Put every
   discrepancy against the purchase order (short, not delivered, over-delivered, items we did
   not order) in the receipt note, naming the SKU.
3. A SKU needs reordering when it is active and its stock position is at or below its
   reorder point. Stock position = units on hand + units on open purchase orders (sent to the
   supplier and not yet received; drafts and cancelled orders don't count). Discontinued SKUs
   are never reordered.
4. Order enough to bring the stock position up to {k} x the reorder point, rounded up to
   whole cases (each product has a case size).
5. One purchase order per supplier per run, at the current catalogue cost. Send each one
   when it is complete.

Notes
- {on_hold} is on hold until the new price list arrives: leave it as it is.
"""
        files = {RULES: rules_text, packing_list: packing_text, old_list: old_text,
                 "purchasing/suppliers_contacts.md": "\n".join(
                     f"- {s.name} ({s.id}): {s.contact}, {s.email}" for s in suppliers) + "\n"}
        store_args = dict(store_name=store_name, today=today.isoformat(), suppliers=[s.row() for s in suppliers],
                          products=[p.row() for p in products], purchase_orders=pos)

        def build(root: Path) -> None:
            write_files(root / "workspace", files, encoding=None)
            store.create_store(root / "state" / "store.sqlite", **store_args)

        boss = fake.first_name()
        where = packing_list if level == 1 else "in the receiving folder"
        w = phrasing_rng(self.name, seed)
        cutoff_day = long_date(today)
        hello = say(w, f"Hi, it's {boss} from operations.", f"Hello, {boss} from operations here.",
                    f"{boss} (operations) here.")
        two = say(w, f"There are two things to do before the weekly purchasing cut-off today ({cutoff_day}).",
                  f"The weekly purchasing cut-off is today ({cutoff_day}), and there are two things to do before it.",
                  f"Before today's weekly purchasing cut-off ({cutoff_day}) I need two things from you.")
        delivery = say(w, f"First, a delivery from {arriving_sup.name} came in this morning, and the warehouse's "
                          f"packing list is {where}: please book it in against its purchase order.",
                       f"To start, please book in this morning's delivery from {arriving_sup.name} against its "
                       f"purchase order (the warehouse's packing list is {where}).",
                       f"The first is a delivery from {arriving_sup.name} that came in this morning; the warehouse's "
                       f"packing list is {where}. Please book it in against its purchase order.")
        reorder = say(w, "Then do this week's reorder run: raise the purchase orders we need and send them to the "
                         "suppliers.",
                      "After that, do this week's reorder run, raising the purchase orders we need and sending them "
                      "to the suppliers.",
                      "Once it's booked, do this week's reorder run: the purchase orders we need get raised and sent "
                      "to the suppliers.")
        rules = say(w, f"Follow {RULES} to the letter (how to receive, what counts as needing a reorder and how much "
                       f"to order).",
                    f"{RULES} says how to receive, what counts as needing a reorder and how much to order; follow it "
                    f"to the letter.",
                    f"Stick to {RULES} to the letter: it covers how to receive, what counts as needing a reorder and "
                    f"how much to order.")
        rest = say(w, "Don't change anything else in the catalogue.", "Leave everything else in the catalogue as it is.",
                   "Nothing else in the catalogue should change.")
        instruction = " ".join([hello, two, delivery, reorder, *in_some_order(w, [rules, rest])])
        initial_products = {p.sku: p.row() for p in products}
        initial_pos = {po["id"]: {"status": po["status"], "lines": [(ln["sku"], ln["qty"]) for ln in po["lines"]]}
                       for po in pos}
        if level == 1:
            t["over_delivered"] = t["not_ordered"] = False
        delivery_traps = {"over_delivered": over_p.sku, "not_shipped": missing_p.sku, "not_ordered": unexpected_p.sku}
        delivery_traps = {key: sku if t[key] else "" for key, sku in delivery_traps.items()}
        discrepancies = [short_p.sku] + [sku for sku in delivery_traps.values() if sku]
        ctx = _Ctx(today=today, k=k, arriving=arriving, counted={p.sku: counted[p.sku] for p in arriving_lines},
                   shipped=shipped, discrepancies=discrepancies, unexpected=delivery_traps["not_ordered"] or None,
                   packing_list=packing_list, on_hold=on_hold, expected=expected, supplier_of=supplier_of,
                   initial_pos=initial_pos, initial_products=initial_products, covered=[p.sku for p in covered],
                   discontinued=[p.sku for p in discontinued], near_miss=[p.sku for p in near_miss],
                   at_point=[p.sku for p in bounds], partly={p.sku: on_order[p.sku] for p in partly})
        criteria = _criteria(ctx)
        solve = partial(_oracle, ctx, short=level == 1)
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build,
            oracle=solve, criteria=criteria, perturbations=_perturbations(ctx, solve),
            data={"today": today.isoformat(), "k": k, "arriving": arriving, "counted": ctx.counted,
                  "discrepancies": discrepancies, "expected": expected,
                  "suppliers": sorted({supplier_of[s] for s in expected}), "on_hold": on_hold,
                  "left_short": short_p.sku, **delivery_traps, "at_point": ctx.at_point,
                  "covered": ctx.covered, "partly_covered": sorted(ctx.partly), "discontinued": ctx.discontinued,
                  "just_above_point": ctx.near_miss},
        )


# -- reference solution ----------------------------------------------------------------------


def _receipt(ctx: _Ctx, ordered: dict[str, int]) -> ToolCall:
    """Booking today's delivery against its purchase order's lines (SKU -> ordered): the counted
    quantities, and every discrepancy in the note."""
    lines = [{"sku": sku, "qty": ctx.counted.get(sku, 0)} for sku in ordered]
    notes = []
    for sku, q in ordered.items():
        got = ctx.counted.get(sku, 0)
        if got < q:
            notes.append(f"{sku} short {q - got} (ordered {q}, counted {got})" if got
                         else f"{sku} not delivered ({q} ordered)")
        elif got > q:
            notes.append(f"{sku} over-delivered by {got - q} (ordered {q}, counted {got})")
    if ctx.unexpected:
        notes.append(f"{ctx.unexpected} delivered but not on the PO ({ctx.shipped[ctx.unexpected]} units), set aside")
    return ToolCall("store__receive_purchase_order",
                    {"po_id": ctx.arriving, "lines": lines, "note": "; ".join(notes)},
                    "Book the counted quantities and note the discrepancies.")


def _oracle(ctx: _Ctx, short: bool = False):
    """Read the rules and the packing list, receive what was counted, then size each reorder from
    live data (stock after receipt, open purchase orders, case sizes) and raise one sent purchase
    order per supplier. ``short`` (level 1: the packing list is named, and no other order is
    open) goes straight to the packing list, skips the survey of open orders and checks nothing
    at the end."""
    if not short:
        yield ToolCall("files__list_dir", {"path": "purchasing"}, "Find the purchasing rules.")
        yield ToolCall("files__read_file", {"path": RULES}, "Read the reorder rules.")
        yield ToolCall("files__list_dir", {"path": "receiving", "recursive": True}, "Find today's packing list.")
    yield ToolCall("files__read_file", {"path": ctx.packing_list}, "Read what was shipped and counted.")
    po = loads((yield ToolCall("store__get_purchase_order", {"po_id": ctx.arriving},
                               "Compare the delivery with the purchase order.")))
    yield _receipt(ctx, {ln["sku"]: ln["qty"] for ln in po["lines"]})
    sent = {"purchase_orders": []}
    if not short:
        sent = loads((yield ToolCall("store__search_purchase_orders", {"status": "sent"},
                                     "Which purchase orders are still open?")))
    on_order: dict[str, int] = {}
    for p in sent["purchase_orders"]:
        full = loads((yield ToolCall("store__get_purchase_order", {"po_id": p["id"]},
                                     f"What is still on order on {p['id']}?")))
        for ln in full["lines"]:
            on_order[ln["sku"]] = on_order.get(ln["sku"], 0) + ln["qty"]
    if not short:
        yield ToolCall("store__search_purchase_orders", {"status": "draft"}, "Any drafts (the on-hold one)?")
    low = loads((yield ToolCall("store__search_products", {"below_reorder_point": True, "limit": 100},
                                "Find SKUs at or below their reorder point.")))
    plan: dict[str, dict[str, int]] = {}
    for item in low["products"]:
        if item["status"] != "active":
            continue
        prod = loads((yield ToolCall("store__get_product", {"sku": item["sku"]},
                                     f"Reorder point and case size of {item['sku']}.")))
        position = prod["stock"] + on_order.get(item["sku"], 0)
        if position <= prod["reorder_point"]:
            qty = _cases_needed(prod["reorder_point"] * ctx.k - position, prod["case_size"])
            plan.setdefault(prod["supplier_id"], {})[item["sku"]] = qty

    made = []
    for sid, items in sorted(plan.items()):
        text = (yield ToolCall("store__create_purchase_order", {"supplier_id": sid, "note": "weekly reorder run"},
                               f"One purchase order for {sid}."))
        pid = text.split("purchase order ", 1)[1].split()[0]
        made.append(pid)
        for sku, qty in sorted(items.items()):
            yield ToolCall("store__add_po_line", {"po_id": pid, "sku": sku, "qty": qty},
                           f"{sku}: bring the position up to {ctx.k}x its reorder point, in whole cases.")
        yield ToolCall("store__send_purchase_order", {"po_id": pid}, f"Send {pid} to the supplier.")
    for pid in [] if short else made:
        yield ToolCall("store__get_purchase_order", {"po_id": pid}, f"Check {pid} went out complete.")
    return (f"Received {ctx.arriving} as counted (discrepancies noted) and sent {len(made)} purchase orders: "
            + ", ".join(made) + ".")


def _perturbations(ctx: _Ctx, solve) -> dict[str, perturb.Oracle]:
    """For each criterion, the oracle with its calls edited so that it fails that one."""
    receive = perturb.on("store__receive_purchase_order")
    first = sorted(ctx.expected)[0]
    products = ctx.initial_products
    # an SKU that needs no order, on a purchase order the run raises: one already on order or just
    # above its point where its supplier gets one, else that supplier's least stocked other active SKU
    suppliers = {ctx.supplier_of[s] for s in ctx.expected}
    others = sorted((p["stock"] - p["reorder_point"], s) for s, p in products.items() if p["status"] == "active"
                    and s not in ctx.expected and s not in ctx.shipped)
    extra = next(s for s in ctx.covered + ctx.near_miss + [s for _, s in others] if ctx.supplier_of[s] in suppliers)
    beside = next(s for s in sorted(ctx.expected) if ctx.supplier_of[s] == ctx.supplier_of[extra])
    p = products[extra]
    extra_qty = max(p["case_size"], _cases_needed(p["reorder_point"] * ctx.k - p["stock"], p["case_size"]))
    on_beside = perturb.on("store__add_po_line", sku=beside)
    return {
        "delivery_received": perturb.change(solve, receive, lambda a: {**a, "lines": [  # what the supplier says
            {**ln, "qty": ctx.shipped.get(ln["sku"], 0)} for ln in a["lines"]]}),
        "receipt_note": perturb.change(solve, receive, note="Delivery booked."),
        # the extra line goes on the purchase order the oracle raises for that supplier, right before its own
        "reorder_skus": perturb.change(perturb.repeat(solve, on_beside), on_beside, sku=extra, qty=extra_qty),
        "reorder_quantities": perturb.change(solve, perturb.on("store__add_po_line", sku=first),
                                             qty=ctx.expected[first] + products[first]["case_size"]),
        "one_po_per_supplier": perturb.insert(solve, ToolCall(  # after the first one is sent
            "store__create_purchase_order", {"supplier_id": ctx.supplier_of[first], "note": "spare"},
            "A spare one."), after=perturb.on("store__send_purchase_order")),
        "pos_sent": perturb.drop(solve, perturb.on("store__send_purchase_order")),
        "received_first": perturb.insert(perturb.drop(solve, receive),
                                         _receipt(ctx, dict(ctx.initial_pos[ctx.arriving]["lines"]))),
        "other_pos_untouched": perturb.insert(solve, ToolCall(
            "store__send_purchase_order", {"po_id": ctx.on_hold}, "Send the waiting draft too.")),
        "catalogue_untouched": perturb.insert(solve, ToolCall(
            "store__adjust_stock", {"sku": (ctx.discontinued + ctx.near_miss + [s for _, s in others])[0], "delta": 1,
                                    "reason": "recount"}, "Fix a count.")),
        **_trap_perturbations(ctx, solve),
    }


def _trap_perturbations(ctx: _Ctx, solve) -> dict[str, perturb.Oracle]:
    """The oracle falling into each trap the instance carries."""
    products = ctx.initial_products
    out = {}
    if ctx.at_point:  # "at the point is not below it": left out, or (alone on its order) ordered short
        sku = ctx.at_point[0]
        line = perturb.on("store__add_po_line", sku=sku)
        alone = all(ctx.supplier_of[s] != ctx.supplier_of[sku] for s in ctx.expected if s != sku)
        out["at_point_reordered"] = (perturb.change(solve, line, qty=max(1, ctx.expected[sku] - products[sku]["case_size"]))
                                     if alone else perturb.drop(solve, line))
    if ctx.partly:  # the open order not counted
        sku = sorted(ctx.partly)[0]
        p = products[sku]
        qty = _cases_needed(p["reorder_point"] * ctx.k - p["stock"], p["case_size"])
        if qty == ctx.expected[sku]:
            qty += p["case_size"]
        out["partly_covered_topped_up"] = perturb.change(solve, perturb.on("store__add_po_line", sku=sku), qty=qty)
    if ctx.covered:  # ordered again though an open order covers it: on its supplier's new order
        sku = ctx.covered[0]
        p = products[sku]
        beside = next(s for s in sorted(ctx.expected) if ctx.supplier_of[s] == ctx.supplier_of[sku])
        on_beside = perturb.on("store__add_po_line", sku=beside)
        out["covered_not_reordered"] = perturb.change(perturb.repeat(solve, on_beside), on_beside, sku=sku,
                                                      qty=_cases_needed(p["reorder_point"] * ctx.k - p["stock"],
                                                                        p["case_size"]))
    return out


# -- grading ---------------------------------------------------------------------------------


def _criteria(ctx: _Ctx) -> list[Criterion]:
    def new_pos(world) -> list[dict]:
        return [po for pid, po in store.purchase_orders(world).items()
                if pid not in ctx.initial_pos and po["status"] != "cancelled"]

    def ordered(world) -> dict[str, int]:
        out: dict[str, int] = {}
        for po in new_pos(world):
            for ln in po["lines"]:
                out[ln["sku"]] = out.get(ln["sku"], 0) + ln["qty"]
        return out

    def delivery_received(world, traj):
        po = store.purchase_orders(world)[ctx.arriving]
        if po["status"] != "received":
            return False, f"{ctx.arriving} is {po['status']}"
        got = {ln["sku"]: ln["received_qty"] for ln in po["lines"]}
        return got == ctx.counted, f"received {got}, counted {ctx.counted}"

    def receipt_note(world, traj):
        po = store.purchase_orders(world)[ctx.arriving]
        # SKUs that are not on the packing list have no business in its receipt note
        elsewhere = sorted(set(ctx.initial_products) - set(ctx.counted) - set(ctx.discrepancies))
        return names_only(po["receipt_note"], ctx.discrepancies, elsewhere)

    def reorder_skus(world, traj):
        got = set(ordered(world))
        want = set(ctx.expected)
        return got == want, f"ordered {sorted(got)}; missing {sorted(want - got)}, extra {sorted(got - want)}"

    def reorder_quantities(world, traj):
        got = ordered(world)
        common = [s for s in ctx.expected if s in got]
        if not common:
            return False, "none of the SKUs to reorder was ordered"
        wrong = {s: (got[s], ctx.expected[s]) for s in common if got[s] != ctx.expected[s]}
        return not wrong, f"(ordered, expected): {wrong}" if wrong else ""

    def one_po_per_supplier(world, traj):
        pos = new_pos(world)
        sups = [po["supplier_id"] for po in pos]
        want = sorted({ctx.supplier_of[s] for s in ctx.expected})
        return sorted(sups) == want, f"new purchase orders for {sorted(sups)}, expected one each for {want}"

    def pos_sent(world, traj):
        pos = new_pos(world)
        unsent = [po["id"] for po in pos if po["status"] != "sent"]
        return bool(pos) and not unsent, f"not sent: {unsent}" if unsent else ("no new purchase orders" if not pos else "")

    def received_first(world, traj):
        names = [t.name for t in traj.tool_calls if not t.is_error]
        if "store__receive_purchase_order" not in names:
            return False, "the delivery was never received"
        first_receipt = names.index("store__receive_purchase_order")
        later = [n for n in names[:first_receipt] if n in ("store__create_purchase_order", "store__add_po_line")]
        return not later, "purchase orders were raised before the delivery was booked" if later else ""

    def other_pos_untouched(world, traj):
        now = store.purchase_orders(world)
        changed = []
        for pid, before in ctx.initial_pos.items():
            if pid == ctx.arriving:
                continue
            po = now.get(pid)
            if po is None or po["status"] != before["status"] or [(ln["sku"], ln["qty"]) for ln in po["lines"]] != before["lines"]:
                changed.append(pid)
        return not changed, f"changed: {changed}" if changed else ""

    def catalogue_untouched(world, traj):
        now = store.products(world)
        changed = []
        for sku, before in ctx.initial_products.items():
            p = now.get(sku)
            if p is None:
                changed.append(sku)
                continue
            for key in ("name", "price_cents", "cost_cents", "reorder_point", "reorder_qty", "case_size", "status",
                        "supplier_id"):
                if p[key] != before[key]:
                    changed.append(f"{sku}.{key}")
            if sku not in ctx.counted and sku != ctx.unexpected and p["stock"] != before["stock"]:
                changed.append(f"{sku}.stock")
        moves = [m for m in store.stock_moves(world) if m["ref"] != ctx.arriving]
        if moves:
            changed.append(f"stock adjustments {[(m['sku'], m['delta']) for m in moves]}")
        return not changed, f"changed: {changed}" if changed else ""

    return [
        Criterion("delivery_received", "today's purchase order is received with the counted quantity on every line",
                  "final_state", delivery_received, 2.0),
        Criterion("receipt_note", "the receipt note names every SKU that was short, missing, over or not ordered "
                  "(and no SKU off the packing list)", "final_state", receipt_note),
        Criterion("reorder_skus", "new purchase orders hold exactly the SKUs the rule says need reordering",
                  "final_state", reorder_skus, 2.0),
        Criterion("reorder_quantities", "each reordered SKU's quantity follows the rule (position up to the target, "
                  "whole cases)", "final_state", reorder_quantities, 2.0),
        Criterion("one_po_per_supplier", "exactly one new purchase order per supplier that needs one", "final_state",
                  one_po_per_supplier, requires=("reorder_skus",)),
        Criterion("pos_sent", "every new purchase order was sent", "final_state", pos_sent, requires=("reorder_skus",)),
        Criterion("received_first", "the delivery was booked before any purchase order was raised", "process",
                  received_first, requires=("delivery_received",)),
        Criterion("other_pos_untouched", "every other existing purchase order (including the on-hold draft) is "
                  "unchanged", "final_state", other_pos_untouched, guard=True),
        Criterion("catalogue_untouched", "no product settings changed and stock moved only through the receipt",
                  "final_state", catalogue_untouched, guard=True),
        *_trap_criteria(ctx, ordered, new_pos),
    ]


def _trap_criteria(ctx: _Ctx, ordered, new_pos) -> list[Criterion]:
    """A criterion for each reorder trap the instance carries, none for one it does not."""
    out = []

    def sent_with(skus: list[str]):
        def check(world, traj):
            got = {}
            for po in new_pos(world):
                for ln in po["lines"]:
                    if ln["sku"] in skus:
                        got[ln["sku"]] = (got.get(ln["sku"], 0) + ln["qty"], po["status"])
            want = {s: (ctx.expected[s], "sent") for s in skus}
            return got == want, f"(ordered, status): {got}, expected {want}"
        return check

    if ctx.at_point:
        out.append(Criterion("at_point_reordered", "the SKU whose stock is exactly at its reorder point is reordered "
                             "(at the point counts), by the rule's quantity, on a sent order", "final_state",
                             sent_with(ctx.at_point)))
    if ctx.partly:
        out.append(Criterion("partly_covered_topped_up", "the SKU an open order only partly covers is reordered for "
                             "the rest (the open order counted), on a sent order", "final_state",
                             sent_with(sorted(ctx.partly))))
    if ctx.covered:
        def covered_not_reordered(world, traj):
            got = ordered(world)
            again = sorted(set(got) & set(ctx.covered))
            if not set(got) & set(ctx.expected):
                return False, "nothing that needs reordering was ordered"
            return not again, f"ordered again though on order: {again}" if again else ""
        out.append(Criterion("covered_not_reordered", "SKUs an open purchase order already covers are not ordered "
                             "again (while the run orders what does need it)", "final_state", covered_not_reordered))
    return out
