"""Invoicing and reconciliation: three-way match a month's supplier invoices and log them.

Supplier invoices sit in the purchasing clerk's inbox, some as attached text documents, some
pasted into the mail body, next to a supplier statement, a remittance advice and other mail;
last month's invoices were filed under Invoices/Processed. Each invoice is checked against
its purchase order in the store (price per SKU) and what was actually received on it
(quantity), and against invoices already recorded (duplicate numbers). Matching invoices are
recorded in accounts payable; every invoice gets a row in a new month sheet of the
reconciliation workbook, laid out like last month's; AP gets one summary mail. Traps, each drawn
per seed at the default level (one of the two mismatches always; ``TRAP_ODDS``): a PO that was
short-delivered and billed for what arrived (that one matches), one billed for what was ordered
(it does not), a PO not received yet, a small price creep, a resent invoice, and PO numbers
written several ways. Each trap present gets its own criterion (``TRAPS``) and names its
invoices in ``Task.data``; an absent one has neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from openpyxl import Workbook

from longhorizon.apps.mail import state as mail
from longhorizon.apps.mail.state import parse_address
from longhorizon.apps.sheets.state import workbook_bytes
from longhorizon.apps.store import state as store
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.commerce import (
    Product,
    Supplier,
    make_products,
    make_suppliers,
    mentions_id,
    money,
    pick_today,
    plain,
)
from longhorizon.tasks.common import (
    MONTHS,
    People,
    loads,
    mentions_code,
    names_only,
    norm,
    parse_json,
    read_table,
    rng_and_faker,
    slug,
    squash,
    to_number,
    write_files,
)
from longhorizon.tasks.kit import mail as mail_kit
from longhorizon.tasks.kit import perturb, process

WORKBOOK = "finance/ap_reconciliation.xlsx"
RULES = "finance/ap_matching_rules.md"
HEADER = ["Invoice No", "Supplier", "PO", "Invoice Total", "Status", "Issue"]
TRAP_ODDS = (("match_short", 0.6), ("quantity", 0.6), ("price", 0.6), ("duplicate", 0.6), ("unreceived", 0.35))
"""The default level's traps, each in the batch with this chance (one of price and quantity always)."""
TRAPS = {
    # kind: (Task.data key, criterion id, what the criterion checks)
    "match_short": ("short_delivered", "short_delivery_matched",
                    "the short-delivered order billed for what arrived is recorded and logged as Matched"),
    "quantity": ("billed_as_ordered", "billed_as_ordered_held",
                 "the invoice billing what was ordered, not what arrived, is held and logged as a quantity mismatch"),
    "price": ("price_creep", "price_creep_held",
              "the invoice with a unit price above the PO's is held and logged as a price mismatch"),
    "duplicate": ("resent", "resent_held",
                  "the resent invoice is held and logged as a duplicate, not recorded a second time"),
    "unreceived": ("not_received", "unreceived_held",
                   "the invoice for an order not received yet is held and logged as a quantity mismatch"),
}
"""Each trap an instance may carry: where ``Task.data`` names its invoices (empty when absent) and the
criterion it gets only when present."""
STATUS = {"match": "Matched", "match_short": "Matched", "price": "Price mismatch", "quantity": "Quantity mismatch",
          "unreceived": "Quantity mismatch", "duplicate": "Duplicate"}


@dataclass
class Invoice:
    kind: str
    supplier: Supplier
    number: str
    po: str
    po_ref: str
    day: date
    lines: list[tuple[Product, int, int]]
    """(product, qty, unit price in cents) as billed."""
    issue_sku: str = ""
    attach: bool = True
    msg_id: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(q * c for _, q, c in self.lines)

    @property
    def status(self) -> str:
        return STATUS[self.kind]

    @property
    def matches(self) -> bool:
        return self.kind in ("match", "match_short")


def _document(inv: Invoice, store_name: str) -> str:
    width = max(len(p.name) for p, _, _ in inv.lines) + 2
    rows = [f"{'SKU':<10}{'Description':<{width}}{'Qty':>5}{'Unit price':>12}{'Amount':>12}"]
    for p, q, c in inv.lines:
        rows.append(f"{p.sku:<10}{p.name:<{width}}{q:>5}{money(c):>12}{money(q * c):>12}")
    pad = 10 + width + 5 + 12
    return (
        f"{inv.supplier.name.upper()}\n"
        f"INVOICE\n\nInvoice number: {inv.number}\nInvoice date: {inv.day.isoformat()}\n"
        f"Bill to: {store_name}\nYour purchase order: {inv.po_ref}\n\n" + "\n".join(rows) + "\n\n"
        f"{'Total due:':>{pad}}{money(inv.total):>12}\n\n"
        f"Payment terms: {inv.supplier.payment_terms}. Please quote the invoice number with your payment.\n"
    )


@register
class SupplierInvoiceReconciliation(TaskFamily):
    name = "supplier_invoice_reconciliation"
    category = "invoicing and reconciliation"
    apps = ("mail", "store", "sheets", "files")
    description = (
        "Three-way match the month's supplier invoices (mail attachments and bodies) against purchase orders "
        "and receipts, record the matching ones, log every invoice with its status in a new month sheet of the "
        "reconciliation workbook, and mail AP a summary."
    )

    levels = 3
    """1: two invoices of two lines, one that matches and one that does not, pasted in their mails (the rules
    in the request, the month's sheet already headed, no other mail); 2: five, one of each kind
    (matched, short-delivered and billed for it, price creep, billed for what was ordered, resent);
    3 (default): six to eight among a statement, a remittance advice and other mail, which traps they carry
    drawn."""
    toolsets = {1: (
        "mail__list_messages", "mail__read_message", "mail__send_message", "sheets__read_range", "sheets__write_rows",
        "store__get_purchase_order", "store__record_supplier_invoice",
    )}
    """Level 1 names the sheet and its mails are the whole inbox: the inbox listing is the finder."""

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        store_name = f"{fake.last_name()} {rng.choice(['Home & Garden', 'Goods', 'Supply Co', 'Outfitters'])}"
        domain = f"{slug(store_name)[:20]}.example"
        me, ap_lead, colleague = (people.make(domain) for _ in range(3))
        ap = f"ap@{domain}"
        today = pick_today(rng)
        if today.day < 8:
            today += timedelta(days=7)
        now = datetime.combine(today, time(8, 40))
        month = f"{MONTHS[today.month - 1].capitalize()} {today.year}"
        prev = date(today.year, today.month, 1) - timedelta(days=1)
        prev_month = f"{MONTHS[prev.month - 1].capitalize()} {prev.year}"

        suppliers = make_suppliers(rng, fake, rng.randint(4, 5))
        products = make_products(rng, rng.randint(28, 34), suppliers)
        by_sup = {s.id: [p for p in products if p.supplier_id == s.id] for s in suppliers}
        for p in products:
            p.stock = rng.randint(5, 80)
            p.reorder_point = rng.randint(4, 20)
            p.case_size = rng.choice([1, 4, 6, 12])
        prefixes = {s.id: "".join(w[0] for w in s.name.split()[:2]).upper() + rng.choice(["", "-INV"]) for s in suppliers}
        used_numbers: set[str] = set()

        def number_for(sup: Supplier) -> str:
            while True:
                n = f"{prefixes[sup.id]}-{rng.randint(10000, 99999)}"
                if n not in used_numbers:
                    used_numbers.add(n)
                    return n

        po_number = rng.randint(1500, 7000)
        pos: list[dict[str, Any]] = []

        def make_po(sup: Supplier, created: date, status: str, short: int = 0) -> dict[str, Any]:
            """A purchase order of 2-4 lines; ``short`` lines are received below the ordered quantity."""
            nonlocal po_number
            po_number += rng.randint(1, 9)
            items = rng.sample(by_sup[sup.id], min(len(by_sup[sup.id]), rng.randint(2, 4)))
            lines = []
            for k, p in enumerate(items):
                qty = p.case_size * rng.randint(2, 8)
                line = {"sku": p.sku, "qty": qty, "unit_cost_cents": p.cost_cents}
                if status == "received":
                    line["received_qty"] = qty - p.case_size * rng.randint(1, qty // p.case_size - 1) if k < short else qty
                lines.append(line)
            po = {"id": f"PO-{po_number}", "supplier_id": sup.id, "status": status, "created_at": created.isoformat(),
                  "sent_at": created.isoformat(), "lines": lines}
            if status == "received":
                po["received_at"] = (created + timedelta(days=sup.lead_time_days)).isoformat()
            pos.append(po)
            return po

        def billed(po: dict, *, qty: str = "received") -> list[tuple[Product, int, int]]:
            prod = {p.sku: p for p in products}
            out = []
            for ln in po["lines"]:
                q = ln["qty"] if qty == "ordered" else ln["received_qty"]
                if q:
                    out.append((prod[ln["sku"]], q, ln["unit_cost_cents"]))
            return out

        # -- last month: received purchase orders, their invoices recorded and logged --------------
        processed: list[Invoice] = []
        for _ in range(rng.randint(3, 5)):
            sup = rng.choice(suppliers)
            po = make_po(sup, prev - timedelta(days=rng.randint(20, 35)), "received")
            day = date.fromisoformat(po["received_at"]) + timedelta(days=rng.randint(0, 3))
            processed.append(Invoice("match", sup, number_for(sup), po["id"], po["id"], day, billed(po)))
        held_last = Invoice("price", processed[-1].supplier, number_for(processed[-1].supplier), processed[-1].po,
                            processed[-1].po, processed[-1].day, processed[-1].lines)

        # -- this month's batch: which traps it carries is drawn ------------------------------
        traps = [k for k, p in TRAP_ODDS if rng.random() < p]
        if not {"price", "quantity"} & set(traps):  # always one invoice that does not match its PO
            traps.append(rng.choice(["price", "quantity"]))
        varied_refs = rng.random() < 0.6
        if level < 3:  # levels 1-2 keep every kind they show (level 1 then keeps two invoices)
            traps, varied_refs = ["match_short", "price", "quantity", "duplicate"], True
        kinds = ["match", "match"] + traps
        size = rng.randint(6, 8)
        while len(kinds) < size:  # the rest: more matches, or a second of a mismatch already drawn
            kinds.append(rng.choice(["match", "match"] + [k for k in traps if k in ("price", "quantity")]))
        rng.shuffle(kinds)
        batch: list[Invoice] = []
        for kind in kinds:
            if kind == "duplicate":
                src = rng.choice(processed)
                inv = Invoice(kind, src.supplier, src.number, src.po, src.po, src.day, src.lines)
            else:
                sup = rng.choice(suppliers)
                created = today - timedelta(days=rng.randint(14, 30))
                if kind == "unreceived":
                    po = make_po(sup, today - timedelta(days=rng.randint(2, 5)), "sent")
                    lines = billed(po, qty="ordered")
                    issue = lines[0][0].sku
                elif kind in ("match_short", "quantity"):
                    po = make_po(sup, created, "received", short=1)
                    lines = billed(po, qty="received" if kind == "match_short" else "ordered")
                    issue = po["lines"][0]["sku"] if kind == "quantity" else ""
                else:
                    po = make_po(sup, created, "received")
                    lines = billed(po)
                    issue = ""
                    if kind == "price":
                        i = rng.randrange(len(lines))
                        p, q, c = lines[i]
                        lines[i] = (p, q, c + max(5, round(c * rng.uniform(0.03, 0.15))))
                        issue = p.sku
                day = min(today - timedelta(days=1), date.fromisoformat(po.get("received_at") or po["sent_at"])
                          + timedelta(days=rng.randint(0, 3)))
                inv = Invoice(kind, sup, number_for(sup), po["id"], po["id"], day, lines, issue_sku=issue)
            digits = inv.po.split("-")[1]
            inv.po_ref = rng.choice([inv.po, inv.po, f"PO {digits}", f"P.O. #{digits}", digits])
            if not varied_refs:  # every invoice quotes the PO as we write it
                inv.po_ref = inv.po
            inv.attach = rng.random() < 0.6
            batch.append(inv)
        if level == 2:  # the same draws as the default, then the first invoice of each kind
            batch = [next(inv for inv in batch if inv.kind == k) for k in sorted({inv.kind for inv in batch})
                     if k in ("match", "match_short", "price", "quantity", "duplicate")]
        elif level == 1:  # ... then one that matches and one that does not, pasted in the mail
            batch = [rng.choice([inv for inv in batch if inv.kind == "match"]),
                     rng.choice([inv for inv in batch if inv.kind in ("price", "quantity")])]
            rng.shuffle(batch)
            for inv in batch:
                inv.attach = False
            for inv in batch:  # (no draw) two lines each, the one that is off among them
                po = next(po for po in pos if po["id"] == inv.po)
                keep = [ln["sku"] for ln in po["lines"] if ln["sku"] == inv.issue_sku]
                keep += [ln["sku"] for ln in po["lines"] if ln["sku"] not in keep][:2 - len(keep)]
                po["lines"] = [ln for ln in po["lines"] if ln["sku"] in keep]
                inv.lines = [ln for ln in inv.lines if ln[0].sku in keep]

        # other purchase orders: open ones and a draft, nothing to do with the batch
        for _ in range(rng.randint(2, 3)):
            make_po(rng.choice(suppliers), today - timedelta(days=rng.randint(1, 6)), rng.choice(["sent", "draft"]))
        pos.sort(key=lambda po: po["id"])

        recorded = [{"id": f"SI-{i:05d}", "supplier_id": inv.supplier.id, "invoice_number": inv.number,
                     "po_id": inv.po, "invoice_date": inv.day.isoformat(),
                     "recorded_at": (inv.day + timedelta(days=2)).isoformat(),
                     "lines": [{"sku": p.sku, "qty": q, "unit_cost_cents": c} for p, q, c in inv.lines]}
                    for i, inv in enumerate(sorted(processed, key=lambda x: x.day), start=1)]
        seeded_invoices = {r["id"] for r in recorded}

        # -- mailbox ---------------------------------------------------------------------------
        msgs: list[dict[str, Any]] = []

        def stamp(d: date) -> str:
            dt = datetime.combine(d, time(rng.randint(7, 18), rng.randrange(60)))
            return min(dt, now - timedelta(minutes=rng.randint(5, 60))).isoformat()

        def invoice_mail(inv: Invoice, folder: str, when: str, resend: bool = False) -> dict[str, Any]:
            doc = _document(inv, store_name)
            subject = rng.choice([f"Invoice {inv.number}", f"{inv.supplier.name} invoice {inv.number}",
                                  f"Invoice {inv.number} (your order {inv.po_ref})"])
            if resend and rng.random() < 0.5:
                subject = f"Reminder: invoice {inv.number}"
                lead = (f"We have not received payment for invoice {inv.number} yet, so here it is again. Could "
                        f"you check?")
            else:
                lead = f"Please find our invoice {inv.number} for your order {inv.po_ref}."
            if inv.attach:
                body = (f"Hello,\n\n{lead} The invoice is attached.\n\nTotal due: {money(inv.total)}\n\n"
                        f"Kind regards,\n{inv.supplier.contact}\n{inv.supplier.name}")
                atts = [{"name": f"{inv.number}.txt", "content": doc}]
            else:
                body = f"Hello,\n\n{lead} Details below.\n\n{doc}\nKind regards,\n{inv.supplier.contact}\n{inv.supplier.name}"
                atts = []
            return {"folder": folder, "sender": inv.supplier.email, "sender_name": f"{inv.supplier.name} Accounts",
                    "to": [me.email], "subject": subject, "body": body, "date": when, "attachments": atts,
                    "is_read": folder != "Inbox", "invoice": inv}

        for inv in processed:
            inv.attach = True
            msgs.append(invoice_mail(inv, "Invoices/Processed", stamp(inv.day)))
        for inv in batch:
            when = stamp(max(inv.day, today - timedelta(days=rng.randint(1, 6))))
            msgs.append(invoice_mail(inv, "Inbox", when, resend=inv.kind == "duplicate"))
        if level > 1:  # the statement, the remittance advice, the quote (level 1: the invoices and the request)
            stmt_sup = rng.choice(suppliers)
            stmt_lines = "\n".join(f"  {inv.number}  {inv.day.isoformat()}  {money(inv.total):>12}  paid"
                                   for inv in processed if inv.supplier is stmt_sup) or "  (no open items)"
            msgs.append({"folder": "Inbox", "sender": stmt_sup.email, "sender_name": f"{stmt_sup.name} Accounts",
                         "to": [me.email], "subject": f"Statement of account - {prev_month}",
                         "date": stamp(today - timedelta(days=rng.randint(2, 6))),
                         "body": f"Hello,\n\nYour statement of account for {prev_month}. This is not an invoice; "
                                 f"please do not pay from this statement.\n\n{stmt_lines}\n\n{stmt_sup.contact}"})
            rem = rng.choice(processed)
            msgs.append({"folder": "Inbox", "sender": f"payments@{rng.choice(['paybridge', 'bankline'])}.example",
                         "sender_name": "Payment Services", "to": [me.email],
                         "subject": f"Remittance advice: payment to {rem.supplier.name}",
                         "date": stamp(today - timedelta(days=rng.randint(1, 5))),
                         "body": f"A payment of {money(rem.total)} was sent to {rem.supplier.name} for invoice "
                                 f"{rem.number}.\n\nThis is an automated message."})
            q_sup = rng.choice(suppliers)
            msgs.append({"folder": "Inbox", "sender": q_sup.email, "sender_name": q_sup.contact, "to": [me.email],
                         "subject": "Quote for next quarter", "date": stamp(today - timedelta(days=rng.randint(1, 8))),
                         "body": f"Hi {me.first},\n\nAs promised, our prices for next quarter are attached to our "
                                 f"portal; no invoice will follow until you order.\n\n{q_sup.contact}"})
        msgs.append({"folder": "Inbox", "sender": ap_lead.email, "sender_name": ap_lead.name, "to": [me.email],
                     "subject": f"{month} invoice reconciliation",
                     "date": stamp(today - timedelta(days=1)),
                     "body": f"Hi {me.first},\n\nCould you run the {month} three-way match when you get a chance? "
                             f"Send the summary to {ap} as usual, we'll take it from there with the suppliers.\n\n"
                             f"{ap_lead.first}"})
        if level > 1:
            msgs.append({"folder": "Inbox", "sender": colleague.email, "sender_name": colleague.name, "to": [me.email],
                         "subject": "Pallet jack repaired", "date": stamp(today - timedelta(days=2)),
                         "body": "The pallet jack in bay 2 is fixed, you can use it again.\n\n" + colleague.first})
        msgs.sort(key=lambda m: m["date"])
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
            if m.get("invoice") and m["folder"] == "Inbox":
                m["invoice"].msg_id = i
        mail_rows = [{k: v for k, v in m.items() if k != "invoice"} for m in msgs]
        batch.sort(key=lambda inv: inv.msg_id)

        # -- workbook: last month's log --------------------------------------------------------
        wb = Workbook()
        ws = wb.active
        ws.title = prev_month
        ws.append(HEADER)
        for inv in sorted(processed, key=lambda x: x.day):
            ws.append([inv.number, inv.supplier.name, inv.po, inv.total / 100, "Matched", None])
        ws.append([held_last.number, held_last.supplier.name, held_last.po, round(held_last.total * 1.08) / 100,
                   "Price mismatch", f"{held_last.lines[0][0].sku} billed above PO price"])
        if level == 1:  # the month's sheet is there, headed
            wb.create_sheet(month).append(HEADER)
        book = workbook_bytes(wb)
        prev_rows = [[c.value for c in row] for row in ws.iter_rows()]

        rules_text = f"""# Accounts payable: three-way match

An invoice is recorded in the store's accounts payable (that is what gets it paid) only when
all of these hold:

1. It quotes one of our purchase orders placed with that supplier.
2. Every line's unit price equals the purchase order's price for that SKU, to the cent.
3. Every line's quantity equals what we actually received on that purchase order (the
   received quantities on the PO, not the ordered ones), and it bills nothing we have not
   received.
4. Its invoice number has not been recorded before for that supplier. A resent invoice is a
   duplicate: never record it twice.

Record a matching invoice against its purchase order, with the supplier's own invoice number,
date and lines. Anything else is held: do not record it.

## Reconciliation log

{WORKBOOK} has one sheet per month, named like "{prev_month}", with one row per invoice
received that month and these columns: {", ".join(HEADER)}.

- Invoice Total: the total printed on the invoice.
- Status: Matched, Price mismatch, Quantity mismatch or Duplicate.
- Issue: empty for matched invoices; otherwise what is wrong, naming the SKU (or that the
  order has not been received yet, or the earlier record for a duplicate).

When the month is done, send {ap} one summary: what was recorded, what is held and why.
"""
        files = {RULES: rules_text}

        store_args = dict(store_name=store_name, today=today.isoformat(), suppliers=[s.row() for s in suppliers],
                          products=[p.row() for p in products], purchase_orders=pos, supplier_invoices=recorded)

        def build(root: Path) -> None:
            write_files(root / "workspace", files, encoding=None)
            (root / "workspace" / WORKBOOK).write_bytes(book)
            store.create_store(root / "state" / "store.sqlite", **store_args)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name,
                                folders=["Inbox", "Sent", "Archive", "Invoices/Processed"], messages=mail_rows,
                                now=now.isoformat())

        instruction = _instruction(phrasing_rng(self.name, seed), me=me.first, lead=ap_lead.first, month=month, ap=ap,
                                   short=level == 1)
        ctx = _Ctx(batch=batch, month=month, prev_month=prev_month, prev_rows=prev_rows, ap=ap, me=me.name,
                   seeded_invoices=seeded_invoices, n_seeded=len(msgs), short=level == 1)
        criteria = _criteria(ctx)
        solve = partial(_oracle, ctx)
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=_perturbations(ctx, solve),
            data={"month": month, "ap": ap, **{key: [inv.number for inv in batch if inv.kind == kind]
                                                 for kind, (key, _, _) in TRAPS.items()},
                  "po_written_otherwise": [inv.number for inv in batch if inv.po_ref != inv.po], "invoices": [
                {"number": inv.number, "supplier": inv.supplier.id, "po": inv.po, "total": inv.total,
                 "status": inv.status, "issue_sku": inv.issue_sku, "msg": inv.msg_id, "attached": inv.attach}
                for inv in batch]},
        )


def _instruction(w, *, me: str, lead: str, month: str, ap: str, short: bool = False) -> str:
    """The AP lead's request, its wording drawn from ``w`` (the family's phrasing rng); ``short``
    (level 1) states the matching rule and names the headed sheet."""
    hello = say(w, f"Hi {me}, it's {lead} from accounts payable.",
                f"Hello {me}, {lead} from accounts payable here.",
                f"Hi {me}, {lead} here (accounts payable).")
    if short:
        return " ".join([hello, (
            f"The two supplier invoices for {month} are in your inbox. Three-way match each against its purchase "
            f"order in the store: record it in the store only if every unit price equals the PO's price and every "
            f"quantity equals what we received on that PO; otherwise hold it. Log both in the \"{month}\" sheet of "
            f"{WORKBOOK} under its header (Status: Matched, Price mismatch or Quantity mismatch; Issue: the SKU that "
            f"is off), then send {ap} a summary of what was recorded and what is held. Please don't contact the "
            f"suppliers yourself.")])
    run = say(w, f"Time for the {month} invoice run:",
              f"We're doing the {month} invoice run, so",
              f"The {month} invoice run is due;")
    match = say(w, f"please go through the supplier invoices waiting in your inbox (the ones filed under "
                   f"Invoices/Processed were done last month) and three-way match each against its purchase order "
                   f"and what we actually received, following {RULES}.",
                f"could you take each supplier invoice sitting in your inbox and three-way match it against its "
                f"purchase order and what was actually received, the way {RULES} lays out? The ones filed under "
                f"Invoices/Processed were last month's and are done.",
                f"please three-way match every supplier invoice waiting in your inbox against its purchase order and "
                f"against what we actually received, per {RULES}. Anything under Invoices/Processed was handled "
                f"last month.")
    steps = in_some_order(w, [
        say(w, "Record the ones that match in the store.",
            "Invoices that match get recorded in the store.",
            "Whatever matches should be recorded in the store."),
        say(w, f"Log every invoice in a new \"{month}\" sheet of {WORKBOOK}, laid out like last month's.",
            f"Every invoice, matched or not, goes in a new sheet of {WORKBOOK} called \"{month}\", with the same "
            f"layout as last month's.",
            f"Add a new \"{month}\" sheet to {WORKBOOK} laid out like last month's and log every invoice there."),
    ])
    summary = say(w, f"Then send the summary to {ap}.",
                  f"When that's done, send the summary to {ap}.",
                  f"Finally, mail the summary to {ap}.")
    suppliers = say(w, "Please don't contact the suppliers yourself, we'll chase them.",
                    "Don't get in touch with the suppliers yourself: we'll do the chasing.",
                    "We'll chase the suppliers ourselves, so please don't contact them.")
    closer = say(w, "Thanks!", "Thank you.", f"Cheers, {lead}", "")
    return " ".join(x for x in [hello, run, match, *steps, summary, suppliers, closer] if x)


@dataclass
class _Ctx:
    batch: list[Invoice]
    month: str
    prev_month: str
    prev_rows: list[list[Any]]
    ap: str
    me: str
    seeded_invoices: set[str]
    n_seeded: int
    short: bool = False
    """Level 1: the rules are in the request and the sheet is headed; the oracle reads neither,
    nor the supplier list (the PO names the supplier), nor checks for earlier records."""


# -- reference solution ----------------------------------------------------------------------


def _parse_document(text: str) -> dict[str, Any]:
    """Invoice fields and lines from an invoice document (as the supplier wrote it)."""
    out: dict[str, Any] = {"lines": []}
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Invoice number:"):
            out["number"] = s.split(":", 1)[1].strip()
        elif s.startswith("Invoice date:"):
            out["date"] = s.split(":", 1)[1].strip()
        elif s.startswith("Your purchase order:"):
            out["po_ref"] = s.split(":", 1)[1].strip()
        elif s.startswith("Total due:"):
            out["total"] = s.split(":", 1)[1].strip()
        else:
            parts = s.split()
            if len(parts) >= 4 and "-" in parts[0] and parts[0].split("-")[0].isalpha() and parts[0].isupper() \
                    and parts[-3].isdigit():
                out["lines"].append({"sku": parts[0], "qty": int(parts[-3]), "unit_cost": parts[-2].replace(",", "")})
    return out


def _oracle(ctx: _Ctx):
    """Read the rules and last month's log, open every inbox message, match each invoice against
    its PO, receipts and recorded invoices, record the matches, write the month sheet, mail AP.
    ``ctx.short`` (level 1) skips what the request already says
    (the rules, the sheet's layout), the supplier list and the search for earlier records."""
    batch = ctx.batch
    sup_by_email: dict[str, Any] = {}
    if not ctx.short:
        yield ToolCall("files__read_file", {"path": RULES}, "Read the matching rules.")
        sheets = parse_json((yield ToolCall("sheets__list_sheets", {"path": WORKBOOK}, "Which months are logged?")))
        layout = parse_json((yield ToolCall("sheets__read_range", {"path": WORKBOOK, "sheet": ctx.prev_month},
                                            "Copy last month's layout.")))
        header = layout["rows"][0]["values"]
        assert header == list(HEADER) and ctx.month not in [s["name"] for s in sheets]
        suppliers = loads((yield ToolCall("store__search_suppliers", {}, "Supplier ids and names.")))
        sup_by_email = {s["email"]: s for s in suppliers}
    page = loads((yield ToolCall("mail__list_messages", {"folder": "Inbox", "limit": 50}, "What is in the inbox?")))
    by_id = {inv.msg_id: inv for inv in batch}
    docs: dict[int, dict[str, Any]] = {}
    for m in sorted(page["messages"], key=lambda m: m["id"]):
        if ctx.short and m["id"] not in by_id:  # level 1: the request's own mail says nothing new
            continue
        msg = loads((yield ToolCall("mail__read_message", {"message_id": m["id"]}, f"Open message {m['id']}.")))
        if m["id"] not in by_id:
            continue
        if msg["attachments"]:
            name = msg["attachments"][0]["name"]
            yield ToolCall("mail__save_attachment", {"message_id": m["id"], "filename": name,
                                                     "dest_path": f"finance/invoices/{name}"}, "Save the invoice.")
            text = (yield ToolCall("files__read_file", {"path": f"finance/invoices/{name}"}, "Read the invoice."))
        else:
            text = msg["body"]
        docs[m["id"]] = _parse_document(text)
        if sup_by_email:
            docs[m["id"]]["supplier"] = sup_by_email[parse_address(msg["from"])]["id"]

    rows, held = [], []
    for inv in batch:
        doc = docs[inv.msg_id]
        assert doc["number"] == inv.number and doc.get("supplier", inv.supplier.id) == inv.supplier.id, doc
        po_id = "PO-" + "".join(ch for ch in doc["po_ref"] if ch.isdigit())
        earlier = []
        if not ctx.short:
            earlier = loads((yield ToolCall("store__search_supplier_invoices",
                                            {"supplier_id": doc["supplier"], "invoice_number": doc["number"]},
                                            f"Has {doc['number']} been recorded before?")))
        po = loads((yield ToolCall("store__get_purchase_order", {"po_id": po_id},
                                   f"Compare {doc['number']} with {po_id} and what was received.")))
        doc.setdefault("supplier", po["supplier_id"])
        status, issue = "Matched", ""
        if earlier:
            status, issue = "Duplicate", f"already recorded as {earlier[0]['id']} on {earlier[0]['recorded_at']}"
        else:
            price = {ln["sku"]: ln["unit_cost"] for ln in po["lines"]}
            got = {ln["sku"]: ln["received_qty"] or 0 for ln in po["lines"]}
            for ln in doc["lines"]:
                if ln["sku"] not in price:
                    status, issue = "Quantity mismatch", f"{ln['sku']} is not on {po_id}"
                elif ln["unit_cost"] != price[ln["sku"]]:
                    status, issue = "Price mismatch", f"{ln['sku']} billed at {ln['unit_cost']}, PO price {price[ln['sku']]}"
                elif po["status"] != "received":
                    status, issue = "Quantity mismatch", f"{po_id} not received yet ({ln['sku']} billed {ln['qty']})"
                elif ln["qty"] != got[ln["sku"]]:
                    status, issue = "Quantity mismatch", f"{ln['sku']} billed {ln['qty']}, received {got[ln['sku']]}"
                if status != "Matched":
                    break
        assert status == inv.status, (inv.number, status, inv.status)
        rows.append([doc["number"], inv.supplier.name, po_id, float(doc["total"].replace(",", "")), status,
                     issue or None])
        if inv.matches:
            yield ToolCall("store__record_supplier_invoice", {
                "supplier_id": doc["supplier"], "invoice_number": doc["number"], "invoice_date": doc["date"],
                "po_id": po_id, "total": doc["total"].replace(",", ""),
                "lines": [{"sku": ln["sku"], "qty": ln["qty"], "unit_cost": ln["unit_cost"]} for ln in doc["lines"]],
            }, f"{doc['number']} matches {po_id}: record it for payment.")
        else:
            held.append((inv, status, issue))

    if ctx.short:  # the sheet is there, headed
        yield ToolCall("sheets__write_rows", {"path": WORKBOOK, "sheet": ctx.month, "start_cell": "A2", "rows": rows},
                       "Log both invoices under the header.")
    else:
        yield ToolCall("sheets__add_sheet", {"path": WORKBOOK, "name": ctx.month}, f"Add the {ctx.month} sheet.")
        yield ToolCall("sheets__write_rows", {"path": WORKBOOK, "sheet": ctx.month, "start_cell": "A1",
                                              "rows": [list(HEADER)] + rows}, "Log every invoice.")
    if not ctx.short:
        yield ToolCall("sheets__read_range", {"path": WORKBOOK, "sheet": ctx.month}, "Check the log.")
    ok = [inv for inv in batch if inv.matches]
    body = [f"Hi,\n\n{ctx.month} three-way match is done; the log is in the \"{ctx.month}\" sheet of {WORKBOOK}.",
            "", "Recorded for payment:"]
    body += [f"- {inv.number} ({inv.supplier.name}, {inv.po}): {money(inv.total)}" for inv in ok]
    body += ["", "Held:"]
    body += [f"- {inv.number} ({inv.supplier.name}, {inv.po}): {status}, {issue}" for inv, status, issue in held]
    body += ["", f"Best,\n{ctx.me}"]
    yield ToolCall("mail__send_message", {"to": [ctx.ap], "subject": f"{ctx.month} invoice reconciliation",
                                          "body": "\n".join(body), "attachments": [WORKBOOK]}, "Send AP the summary.")
    if not ctx.short:
        yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 10}, "Check the summary went out.")
    return (f"Recorded {len(ok)} matching invoices, held {len(held)}; logged all {len(batch)} in the {ctx.month} "
            f"sheet and mailed {ctx.ap}.")


def _record(inv: Invoice) -> ToolCall:
    """Recording ``inv`` for payment, as the oracle does from the document, for the perturbations."""
    return ToolCall("store__record_supplier_invoice", {
        "supplier_id": inv.supplier.id, "invoice_number": inv.number, "invoice_date": inv.day.isoformat(),
        "po_id": inv.po, "total": plain(inv.total),
        "lines": [{"sku": p.sku, "qty": q, "unit_cost": plain(c)} for p, q, c in inv.lines],
    }, f"Record {inv.number} for payment.")


def _perturbations(ctx: _Ctx, solve) -> dict[str, perturb.Oracle]:
    """For each criterion, the oracle with its calls edited so that it fails that one."""
    batch = ctx.batch
    matched = next(inv for inv in batch if inv.matches)
    mismatched = next(inv for inv in batch if inv.kind in ("price", "quantity"))
    held = next(inv for inv in batch if not inv.matches)
    log = perturb.on("sheets__write_rows", sheet=ctx.month)
    summary = perturb.on("mail__send_message", to=[ctx.ap])
    record_matched = perturb.on("store__record_supplier_invoice", invoice_number=matched.number)

    def logged(inv: Invoice, fix) -> perturb.Oracle:
        """The month sheet written with ``inv``'s row (No, Supplier, PO, Total, Status, Issue) through ``fix``."""
        return perturb.change(solve, log, lambda a: {**a, "rows": [fix(list(r)) if r[0] == inv.number else r
                                                                   for r in a["rows"]]})

    def cell(k: int, value):
        return lambda r: r[:k] + [value(r[k])] + r[k + 1:]

    def without_first_held(a: dict) -> dict:
        lines = a["body"].split("\n")
        k = lines.index("Held:") + 1
        return {**a, "body": "\n".join(lines[:k] + lines[k + 1:])}

    return {
        "matches_recorded": perturb.drop(solve, record_matched),
        "held_not_recorded": perturb.insert(solve, _record(mismatched),
                                            after=perturb.on("store__get_purchase_order", po_id=mismatched.po)),
        "log_rows": perturb.change(solve, log, lambda a: {**a, "rows": a["rows"][:-1]}),
        "log_status": logged(batch[0], cell(4, lambda s: "Matched" if s != "Matched" else "Price mismatch")),
        "log_totals": logged(batch[-1], cell(3, lambda t: t + 10)),
        "log_refs": logged(batch[0], cell(2, lambda ref: "")),
        "log_issues": logged(next(inv for inv in batch if inv.issue_sku), cell(5, lambda i: "check with supplier")),
        "ap_summary": perturb.change(solve, summary, without_first_held),
        # recorded before its PO was opened (the oracle reads the PO, so the lookup stays, after)
        "po_checked": perturb.insert(perturb.drop(solve, record_matched), _record(matched),
                                     before=perturb.on("store__get_purchase_order", po_id=matched.po)),
        "previous_log_untouched": perturb.insert(solve, ToolCall(
            "sheets__write_cells", {"path": WORKBOOK, "sheet": ctx.prev_month, "cells": {"G1": "Reviewed"}},
            "Mark last month as reviewed."), after=log),
        "no_stray_mail": perturb.insert(solve, ToolCall(
            "mail__reply", {"message_id": held.msg_id, "body": "We are holding this invoice."},
            "Tell the supplier."), after=summary),
        **{TRAPS[inv.kind][1]: _fell_for(ctx, solve, inv, logged, cell) for inv in reversed(batch)
           if inv.kind in TRAPS},
    }


def _fell_for(ctx: _Ctx, solve, inv: Invoice, logged, cell) -> perturb.Oracle:
    """The oracle falling into ``inv``'s trap: a short delivery held as a quantity mismatch (not
    recorded); anything else logged as Matched."""
    if inv.matches:
        held = perturb.drop(solve, perturb.on("store__record_supplier_invoice", invoice_number=inv.number))
        return perturb.change(held, perturb.on("sheets__write_rows", sheet=ctx.month),
                              lambda a: {**a, "rows": [cell(4, lambda s: "Quantity mismatch")(list(r))
                                                       if r[0] == inv.number else r for r in a["rows"]]})
    return logged(inv, cell(4, lambda s: "Matched"))


# -- grading ---------------------------------------------------------------------------------


def _status_kind(value: Any) -> str:
    t = norm(str(value or ""))
    if "duplicate" in t:
        return "Duplicate"
    if "price" in t:
        return "Price mismatch"
    if "quantit" in t or "qty" in t:
        return "Quantity mismatch"
    if t in ("matched", "match", "ok", "approved") or (t.startswith("match") and "mismatch" not in t):
        return "Matched"
    return t


def _criteria(ctx: _Ctx) -> list[Criterion]:
    batch = ctx.batch
    by_number = {squash(inv.number): inv for inv in batch}

    def new_invoices(world) -> list[dict]:
        return [i for i in store.supplier_invoices(world) if i["id"] not in ctx.seeded_invoices]

    def log(world):
        t = read_table(world.file(WORKBOOK), ctx.month)
        if t is None:
            return None, f"no {ctx.month!r} sheet in {WORKBOOK}"
        rows = {}
        for r in t[1]:
            r = list(r) + [None] * (6 - len(r))
            if r[0] is not None and str(r[0]).strip():
                rows.setdefault(squash(str(r[0])), r)
        return rows, ""

    def matches_recorded(world, traj):
        got = new_invoices(world)
        for inv in batch:
            if not inv.matches:
                continue
            mine = [i for i in got if i["supplier_id"] == inv.supplier.id
                    and store.norm_code(i["invoice_number"]) == store.norm_code(inv.number)]
            if len(mine) != 1:
                return False, f"{inv.number}: recorded {len(mine)} times"
            i = mine[0]
            if i["po_id"] != inv.po or i["total_cents"] != inv.total or i["invoice_date"] != inv.day.isoformat():
                return False, f"{inv.number}: recorded with PO {i['po_id']}, total {i['total_cents']}, date {i['invoice_date']}"
        return True

    def held_not_recorded(world, traj):
        ok = {(inv.supplier.id, store.norm_code(inv.number)) for inv in batch if inv.matches}
        extra = [i["invoice_number"] for i in new_invoices(world)
                 if (i["supplier_id"], store.norm_code(i["invoice_number"])) not in ok]
        return not extra, f"recorded without a match: {extra}" if extra else ""

    def log_rows(world, traj):
        rows, why = log(world)
        if rows is None:
            return False, why
        t = read_table(world.file(WORKBOOK), ctx.month)
        head = [norm(str(v or "")) for v in list(t[0])[:6]]
        if head != [h.lower() for h in HEADER]:
            return False, f"header {t[0]}"
        return set(rows) == set(by_number), f"logged {sorted(rows)}, expected {sorted(by_number)}"

    def column_check(check):
        def run(world, traj):
            rows, why = log(world)
            if rows is None:
                return False, why
            bad = []
            for key, inv in by_number.items():
                r = rows.get(key)
                if r is None or not check(inv, r):
                    bad.append(inv.number)
            return not bad, f"wrong for {bad}" if bad else ""
        return run

    def status_ok(inv, r):
        return _status_kind(r[4]) == inv.status

    def total_ok(inv, r):
        v = to_number(r[3])
        return v is not None and abs(v - inv.total / 100) < 0.005

    def ref_ok(inv, r):
        return r[2] is not None and mentions_id(str(r[2]), inv.po)

    def issue_ok(inv, r):
        text = str(r[5] or "")
        if inv.kind in ("match", "match_short"):
            return True
        if inv.kind == "duplicate":
            return bool(text.strip())
        if inv.kind == "unreceived":
            return "receiv" in text.lower() or mentions_code(text, inv.issue_sku)
        return mentions_code(text, inv.issue_sku)

    def ap_summary(world, traj):
        to_ap = [m for m in mail.sent_messages(world) if ctx.ap in m["to"] + m["cc"]]
        if len(to_ap) != 1:
            return False, f"{len(to_ap)} mails to {ctx.ap}"
        text = f"{to_ap[0]['subject']}\n{to_ap[0]['body']}"
        # last month's invoices (already processed) are not part of this summary
        earlier = [str(r[0]) for r in ctx.prev_rows[1:] if r and r[0] and squash(str(r[0])) not in by_number]
        return names_only(text, [inv.number for inv in batch], earlier)

    def previous_log_untouched(world, traj):
        path = world.file(WORKBOOK)
        t = read_table(path, ctx.prev_month)
        if t is None:
            return False, f"{ctx.prev_month} sheet is gone"
        rows = [list(t[0])] + [list(r) for r in t[1]]
        want = [list(r) for r in ctx.prev_rows]
        return rows == want, "last month's sheet changed" if rows != want else ""

    return [
        Criterion("matches_recorded", "every matching invoice is recorded once, with its PO, date and total",
                  "final_state", matches_recorded, 2.0),
        Criterion("held_not_recorded", "no mismatched or duplicate invoice (nor anything else) was recorded",
                  "final_state", held_not_recorded, guard=True),
        Criterion("log_rows", f"a {ctx.month!r} sheet with last month's header lists exactly this month's invoices",
                  "final_state", log_rows, requires=("log_status",)),
        Criterion("log_status", "each logged invoice has the right status", "final_state",
                  column_check(status_ok), 2.0),
        Criterion("log_totals", "each logged invoice total is the printed total", "final_state",
                  column_check(total_ok)),
        Criterion("log_refs", "each logged invoice names its purchase order", "final_state", column_check(ref_ok)),
        Criterion("log_issues", "each held invoice's issue names the offending SKU (or the missing receipt / earlier "
                  "record)", "final_state", column_check(issue_ok), requires=("log_status",)),
        Criterion("ap_summary", "exactly one summary mail to AP naming every invoice (and none of last month's)",
                  "final_state", ap_summary),
        process.looked_up_before("store__record_supplier_invoice", "store__get_purchase_order", "po_id",
                                 id="po_checked", requires=("matches_recorded",), what="nothing was recorded",
                                 description="each recorded invoice's purchase order was opened before recording it"),
        Criterion("previous_log_untouched", "last month's sheet is unchanged", "final_state", previous_log_untouched,
                  guard=True),
        mail_kit.sends_only({ctx.ap}, seeded=ctx.n_seeded, replies=False,
                            description="no mail to anyone but AP (no replies to suppliers)"),
        *_trap_criteria(ctx, new_invoices, log),
    ]


def _trap_criteria(ctx: _Ctx, new_invoices, log) -> list[Criterion]:
    """One criterion per trap the batch carries (none for a trap it does not): its invoices have
    the right status in the log and are recorded once if they match, not at all if they do not."""
    out = []
    for kind, (_, cid, description) in TRAPS.items():
        invs = [inv for inv in ctx.batch if inv.kind == kind]
        if not invs:
            continue

        def check(world, traj, invs=invs):
            rows, why = log(world)
            if rows is None:
                return False, why
            got = new_invoices(world)
            for inv in invs:
                r = rows.get(squash(inv.number))
                if r is None or _status_kind(r[4]) != inv.status:
                    return False, f"{inv.number} logged as {r[4] if r else 'nothing'}, not {inv.status}"
                n = sum(i["supplier_id"] == inv.supplier.id and store.norm_code(i["invoice_number"])
                        == store.norm_code(inv.number) for i in got)
                if n != int(inv.matches):
                    return False, f"{inv.number} recorded {n} times"
            return True
        out.append(Criterion(cid, description, "final_state", check))
    return out
