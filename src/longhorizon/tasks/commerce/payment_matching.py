"""Invoicing and reconciliation: match a bank statement's customer payments to open trade orders.

A wholesaler's trade customers pay their pro-forma invoices (the order number) by bank
transfer. The latest statement export (CSV) covers a few weeks, the first part of which was
already worked in the last run (the receivables workbook's Log sheet says up to which day).
For every new credit the agent finds the order it pays, records the payment in the store
with the statement date and marks fully paid orders paid; short payments are recorded,
logged in the workbook and chased by mail; what cannot be matched with certainty goes to
the Unmatched sheet; the run is logged. Traps: references spelled every which way, a
reference with two digits swapped, a transfer with no reference, one transfer paying two
orders (a remittance advice in the inbox says which), a short payment, the balance of an
earlier short payment, a customer paying an order twice, an unknown payer, debits, lines
from the last run, bank-truncated payer names and customers with several open orders.

The default level draws its trap mix per seed (``TRAPS``: each kind there with ``TRAP_ODDS``,
an already-paid order or an unknown payer always, so something always goes to the Unmatched
sheet); levels 1-2 keep the kinds they show. ``Task.data`` names each kind's credits (empty
when absent); the short payments' criteria are there only where a payment is short.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from openpyxl import Workbook

from longhorizon.apps.mail import state as mail
from longhorizon.apps.sheets.state import workbook_bytes
from longhorizon.apps.store import state as store
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.commerce import (
    Product,
    make_products,
    make_suppliers,
    mentions_amount,
    mentions_id,
    pick_today,
    plain,
    usd,
)
from longhorizon.tasks.common import (
    People,
    loads,
    long_date,
    output_text,
    parse_json,
    read_table,
    rng_and_faker,
    slug,
    to_number,
    write_files,
)
from longhorizon.tasks.kit import mail as mail_kit
from longhorizon.tasks.kit import perturb, process

PROCEDURE = "finance/receivables_procedure.md"
WORKBOOK = "finance/receivables.xlsx"
LOG, SHORT, UNMATCHED = "Log", "Short payments", "Unmatched"
LOG_HEAD = ["Run date", "Processed through", "By"]
SHORT_HEAD = ["Date", "Customer", "Order", "Order total", "Received", "Outstanding"]
UNMATCHED_HEAD = ["Date", "Counterparty", "Reference", "Amount", "Note"]
NEW_KINDS = ["ref", "ref", "mangled", "typo", "noref", "combined", "short", "balance", "duplicate", "unknown"]
TRAPS = {
    # credit kind: the Task.data key naming its new credits (reference, or payer for an unknown one)
    "typo": "swapped_digit_refs", "noref": "no_reference", "combined": "combined_payment",
    "short": "short_payment", "balance": "balance_payment", "duplicate": "paid_twice", "unknown": "unknown_payer",
}
TRAP_ODDS = 0.6
"""The default level's chance of each trap kind (one of ``duplicate`` and ``unknown`` always);
plain, mangled and swapped references to match are always there."""
LEVEL_KINDS = {1: ("mangled",), 2: ("mangled", "typo", "short", "duplicate")}
"""The new credits a lower level keeps on the statement (one of each kind); the others' orders
simply stay open."""


@dataclass
class Account:
    id: str
    name: str
    email: str
    city: str
    bank_name: str

    def row(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "email": self.email, "city": self.city}


@dataclass
class Order:
    account: Account
    lines: list[tuple[Product, int]]
    shipping: int
    placed: datetime
    status: str = "pending"
    payments: list[tuple[int, date]] = field(default_factory=list)
    id: str = ""

    @property
    def total(self) -> int:
        return sum(p.price_cents * q for p, q in self.lines) + self.shipping

    @property
    def paid(self) -> int:
        return sum(a for a, _ in self.payments)


@dataclass
class Credit:
    kind: str
    day: date
    account: Account | None
    counterparty: str
    amount: int
    orders: list[tuple[Order, int]] = field(default_factory=list)
    """(order, amount of this credit that pays it)."""
    reference: str = ""
    note: str = ""

    @property
    def new(self) -> bool:
        return self.kind != "old"


def _company(fake, rng) -> str:
    name = fake.company().replace(",", "")
    return f"{name} {rng.choice(['Gifts', 'Home Store', 'Interiors', 'Outfitters', 'Kitchenware', 'Living', 'Garden Centre'])}"


def _as_date(v: Any) -> date | None:
    if isinstance(v, datetime):
        return v.date()
    if isinstance(v, date):
        return v
    text = str(v or "").strip()
    if not text:
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        pass
    for fmt in ("%m/%d/%Y", "%d/%m/%Y", "%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%Y/%m/%d"):
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    return None


@register
class CustomerPaymentMatching(TaskFamily):
    name = "customer_payment_matching"
    category = "invoicing and reconciliation"
    apps = ("files", "store", "sheets", "mail")
    description = (
        "Match the new credits on a bank statement export to open trade orders (mangled, missing or wrong "
        "references, combined and short payments), record them in the store and mark paid orders paid, log short "
        "and unmatched payments and the run in the receivables workbook, and chase the short payers by mail."
    )

    levels = 3
    """1: one new credit, with a mangled reference, next to the last run's latest credit, a debit
    and the statement's last line;
    2: four (mangled, a swapped-digit reference, a short payment, an order paid twice); 3
    (default): five to twelve, with the trap kinds drawn per seed."""
    toolsets = {1: (
        "files__list_dir", "files__read_file", "sheets__read_range", "sheets__write_rows", "store__get_order",
        "store__record_payment", "store__update_order_status",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        store_name = f"{fake.last_name()} {rng.choice(['Wholesale', 'Trade Supply', 'Homewares', 'Distribution'])}"
        domain = f"{slug(store_name)[:20]}.example"
        me, lead, colleague = (people.make(domain) for _ in range(3))
        today = pick_today(rng)
        if today.day < 5:
            today += timedelta(days=7)
        now = datetime.combine(today, time(9, 5))
        cutoff = today - timedelta(days=rng.randint(5, 8))
        start = cutoff - timedelta(days=rng.randint(8, 12))
        last_day = today - timedelta(days=1)

        suppliers = make_suppliers(rng, fake, 3)
        products = make_products(rng, 24, suppliers)
        for p in products:
            p.stock = rng.randint(30, 200)

        accounts: list[Account] = []
        banks: set[str] = set()
        number = rng.randint(2000, 5000)
        while len(accounts) < 16:
            name = _company(fake, rng)
            bank = name.upper()
            if rng.random() < 0.5:
                bank = bank[:rng.randint(16, 20)].rstrip()
            elif rng.random() < 0.5:
                bank = f"{bank} {rng.choice(['LLC', 'INC', 'CO'])}"
            key = bank[:16]
            if any(b[:16] == key for b in banks) or any(a.name == name for a in accounts):
                continue
            banks.add(bank)
            number += rng.randint(3, 9)
            d = slug(name)[:22]
            accounts.append(Account(f"C-{number}", name, f"{rng.choice(['accounts', 'ap', 'finance'])}@{d}.example",
                                    fake.city(), bank))
        rng.shuffle(accounts)
        pool = iter(accounts)

        orders: list[Order] = []

        def order(acct: Account, placed: date, status: str = "pending") -> Order:
            lines = [(p, rng.choice([4, 6, 8, 10, 12, 24])) for p in rng.sample(products, rng.randint(1, 3))]
            o = Order(acct, lines, rng.choice([0, 0, 1500, 2500, 3900]),
                      datetime.combine(placed, time(rng.randint(8, 17), rng.randrange(60))), status)
            orders.append(o)
            return o

        def when(lo: date, hi: date) -> date:
            return lo + timedelta(days=rng.randint(0, max(0, (hi - lo).days)))

        credits: list[Credit] = []
        traps = [k for k in TRAPS if rng.random() < TRAP_ODDS]
        if not {"duplicate", "unknown"} & set(traps):  # always something to set aside as unmatched
            traps.append(rng.choice(["duplicate", "unknown"]))
        if level < self.levels:  # levels 1-2 draw from the full default mix
            traps = list(TRAPS)
        kinds = [k for k in NEW_KINDS if k not in TRAPS or k in traps]
        kinds += rng.sample(["ref", "mangled"] + [k for k in ("short", "noref") if k in traps], rng.randint(0, 2))
        rng.shuffle(kinds)
        for kind in kinds:
            day = when(cutoff + timedelta(days=1), last_day)
            if kind == "unknown":
                who = fake.name().upper()
                credits.append(Credit(kind, day, None, f"{who.split()[0][0]} {who.split()[-1]}",
                                      rng.randint(40, 900) * 100 + rng.choice([0, 50, 99]),
                                      reference=rng.choice(["DEPOSIT", "", "PAYMENT"]),
                                      note="payer not a customer"))
                continue
            acct = next(pool)
            placed = day - timedelta(days=rng.randint(4, 20))
            if kind == "combined":
                o1, o2 = order(acct, placed), order(acct, placed + timedelta(days=rng.randint(0, 3)))
                credits.append(Credit(kind, day, acct, acct.bank_name, o1.total + o2.total,
                                      [(o1, o1.total), (o2, o2.total)]))
            elif kind == "short":
                o = order(acct, placed)
                short_by = rng.choice([1500, 2000, 2500, o.shipping or 3000])
                if short_by >= o.total // 2:
                    short_by = 1500
                credits.append(Credit(kind, day, acct, acct.bank_name, o.total - short_by, [(o, o.total - short_by)]))
            elif kind == "balance":
                o = order(acct, cutoff - timedelta(days=rng.randint(10, 20)))
                short_by = rng.choice([1500, 2500, 4000])
                first_day = when(start, cutoff)
                o.payments.append((o.total - short_by, first_day))
                credits.append(Credit("old", first_day, acct, acct.bank_name, o.total - short_by,
                                      [(o, o.total - short_by)]))
                credits.append(Credit(kind, day, acct, acct.bank_name, short_by, [(o, short_by)]))
            elif kind == "duplicate":
                o = order(acct, cutoff - timedelta(days=rng.randint(6, 15)), status="paid")
                first_day = when(start, cutoff)
                o.payments.append((o.total, first_day))
                credits.append(Credit("old", first_day, acct, acct.bank_name, o.total, [(o, o.total)]))
                credits.append(Credit(kind, day, acct, acct.bank_name, o.total, [(o, 0)],
                                      note=f"order already paid on {first_day.isoformat()}"))
            else:
                o = order(acct, placed)
                credits.append(Credit(kind, day, acct, acct.bank_name, o.total, [(o, o.total)]))
            if kind in ("typo", "noref", "combined") or rng.random() < 0.4:
                # another open order of the same customer, so the reference (or the amount) matters
                order(acct, placed - timedelta(days=rng.randint(1, 6)))

        # payments from the last run, already in the store
        for _ in range(rng.randint(2, 3)):
            acct = next(pool)
            day = when(start, cutoff)
            o = order(acct, day - timedelta(days=rng.randint(3, 12)), status=rng.choice(["paid", "shipped"]))
            o.payments.append((o.total, day))
            credits.append(Credit("old", day, acct, acct.bank_name, o.total, [(o, o.total)]))
        # open orders nobody paid yet, and history
        rest = list(pool)
        for acct in rest:
            order(acct, today - timedelta(days=rng.randint(1, 15)))
        for acct in accounts:
            for _ in range(rng.randint(0, 2)):
                day = start - timedelta(days=rng.randint(5, 60))
                o = order(acct, day - timedelta(days=rng.randint(2, 6)), status="delivered")
                o.payments.append((o.total, day))

        # amounts must identify orders for reference-less matching: no two open orders of one
        # customer with the same outstanding amount
        fixed = {id(o) for c in credits if c.kind in ("short", "balance", "duplicate", "old") for o, _ in c.orders}
        for acct in accounts:
            dues = [o.total - o.paid for o in orders if o.account is acct and o.status == "pending"]
            if len(dues) != len(set(dues)):
                o = next(o for o in orders if o.account is acct and o.status == "pending" and id(o) not in fixed)
                o.shipping += 1234
            dues = [o.total - o.paid for o in orders if o.account is acct and o.status == "pending"]
            assert len(dues) == len(set(dues)), acct.name
        for c in credits:
            if c.kind == "combined":
                c.amount = sum(o.total for o, _ in c.orders)
                c.orders = [(o, o.total) for o, _ in c.orders]
            elif c.kind in ("ref", "mangled", "typo", "noref"):
                o = c.orders[0][0]
                c.amount = o.total
                c.orders = [(o, o.total)]

        orders.sort(key=lambda o: (o.placed, o.account.id))
        num = rng.randint(40000, 70000)
        for o in orders:
            num += rng.randint(1, 30)
            o.id = f"SO-{num}"
        open_of = {a.id: {o.id for o in orders if o.account is a and o.status == "pending"} for a in accounts}

        for c in credits:
            if c.kind in ("unknown",):
                continue
            oid = c.orders[0][0].id
            digits = oid.split("-")[1]
            if c.kind in ("ref", "old", "short", "duplicate"):
                c.reference = rng.choice([oid, oid, f"INV {oid}", f"Invoice {oid}"])
            elif c.kind == "balance":
                c.reference = rng.choice([f"{oid} balance", f"BAL {digits}", f"{oid} REMAINDER"])
            elif c.kind == "mangled":
                c.reference = rng.choice([f"SO{digits}", f"so {digits}", f"ORDER {digits}", f"PROFORMA{digits}",
                                          f"INV-{digits}"])
            elif c.kind == "noref":
                c.reference = rng.choice(["", "PAYMENT", "THANK YOU", acct_ref(c.account)])
            elif c.kind == "typo":
                spots = list(range(1, len(digits) - 1))
                rng.shuffle(spots)
                for i in spots:
                    swapped = digits[:i] + digits[i + 1] + digits[i] + digits[i + 2:]
                    if swapped != digits and f"SO-{swapped}" not in open_of[c.account.id]:
                        c.reference = f"SO-{swapped}"
                        break
                else:
                    c.reference = f"SO-{int(digits) + 11}"
            elif c.kind == "combined":
                a, b = (o.id for o, _ in c.orders)
                c.reference = rng.choice([f"{a} {b}", f"{a}/{b.split('-')[1][-2:]}", f"INV {a} + {b}"])
        credits.sort(key=lambda c: (c.day, c.counterparty))
        credits_drawn = credits
        if level < self.levels:  # the same draws as the default, then fewer new credits
            kept = [next(c for c in credits if c.kind == k) for k in LEVEL_KINDS[level]]
            credits = [c for c in credits if not c.new or any(c is k for k in kept)]
        new = [c for c in credits if c.new]

        # debits on the statement: suppliers, fees, rent
        debits = []
        for _ in range(rng.randint(3, 5)):
            kind = rng.choice(["supplier", "supplier", "fees", "rent"])
            if kind == "supplier":
                s = rng.choice(suppliers)
                debits.append((when(start, last_day), s.name.upper()[:22], f"PO PAYMENT {rng.randint(2000, 6000)}",
                               -rng.randint(800, 9000) * 100 - rng.randint(0, 99)))
            elif kind == "fees":
                debits.append((when(start, last_day), "BANK CHARGES", "ACCOUNT FEE", -rng.choice([1250, 1500, 2250])))
            else:
                debits.append((when(start, last_day), f"{fake.last_name().upper()} PROPERTIES", "WAREHOUSE RENT",
                               -rng.randint(30, 60) * 10000))
        rows = [(c.day, c.counterparty, c.reference, c.amount) for c in credits] + debits
        rows.sort(key=lambda r: (r[0], -r[3]))
        if level == 1:  # the new credit, the last run's latest credit, one debit and the statement's last line
            olds = [r for r in rows if r[3] > 0 and not any(c.new and c.day == r[0] and c.reference == r[2]
                                                            for c in new)]
            keep = {id(r) for c in new for r in rows if r[3] > 0 and (r[0], r[2]) == (c.day, c.reference)}
            keep |= {id(olds[-1])} if olds else set()
            keep |= {id(next(r for r in rows if r[3] < 0)), id(max(rows, key=lambda r: r[0]))}
            rows = [r for r in rows if id(r) in keep]
        balance = rng.randint(15000, 60000) * 100
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["Date", "Counterparty", "Reference", "Amount", "Balance"])
        for day, who, ref, amt in rows:
            balance += amt
            w.writerow([day.isoformat(), who, ref, plain(amt) if amt >= 0 else "-" + plain(-amt), plain(balance)])
        statement_path = f"finance/bank/statement_{start.isoformat()}_to_{last_day.isoformat()}.csv"
        statement_text = out.getvalue()
        stmt_through = max(r[0] for r in rows)
        old_stmt = f"finance/bank/statement_{(start - timedelta(days=30)).isoformat()}_to_{(start - timedelta(days=1)).isoformat()}.csv"
        old_text = "Date,Counterparty,Reference,Amount,Balance\n" + "".join(
            f"{(start - timedelta(days=30 - k * 3)).isoformat()},{rng.choice(accounts).bank_name},"
            f"SO-{rng.randint(30000, 39999)},{plain(rng.randint(300, 3000) * 100)},{plain(rng.randint(15000, 60000) * 100)}\n"
            for k in range(6))

        # -- receivables workbook ---------------------------------------------------------------
        wb = Workbook()
        ws = wb.active
        ws.title = LOG
        ws.append(LOG_HEAD)
        prev_by = people.make(domain)
        for k in (2, 1, 0):
            through = cutoff - timedelta(days=14 * k)
            ws.append([(through + timedelta(days=1)).isoformat(), through.isoformat(), prev_by.name if k else me.name])
        ws2 = wb.create_sheet(SHORT)
        ws2.append(SHORT_HEAD)
        for _ in range(rng.randint(1, 2)):
            a = rng.choice(accounts)
            tot = rng.randint(400, 3000) * 100
            ws2.append([(start - timedelta(days=rng.randint(10, 40))).isoformat(), a.name,
                        f"SO-{rng.randint(30000, 39999)}", tot / 100, (tot - 2500) / 100, 25.0])
        bal = next((c for c in credits_drawn if c.kind == "balance"), None)
        if bal is not None:  # the earlier short payment whose balance comes in now
            bo = bal.orders[0][0]
            first = bo.payments[0]
            ws2.append([first[1].isoformat(), bo.account.name, bo.id, bo.total / 100, first[0] / 100,
                        (bo.total - first[0]) / 100])
        ws3 = wb.create_sheet(UNMATCHED)
        ws3.append(UNMATCHED_HEAD)
        ws3.append([(start - timedelta(days=rng.randint(5, 20))).isoformat(), "CASH DEPOSIT", "", 120.0,
                    "no payer details; passed to finance"])
        book = workbook_bytes(wb)
        initial_rows = {
            name: [[c.value for c in row] for row in wb[name].iter_rows()] for name in (LOG, SHORT, UNMATCHED)
        }

        procedure = f"""# Matching customer payments (trade accounts)

Trade customers pay their pro-forma invoices by bank transfer. The invoice number is the
order number in the store (SO-xxxxx); an order stays pending until it is paid in full.

1. Work from the newest bank statement export in finance/bank/. Lines dated up to and
   including the "Processed through" day of the last run (the Log sheet of
   {WORKBOOK}) were handled then: skip them.
2. Only credits (positive amounts) are customer payments; leave the debits alone.
3. Matching. Customers mangle references, and the bank cuts long payer names short.
   - An order number in any spelling (SO48213, so 48213, INV-48213, "order 48213") counts
     when that order belongs to the payer and is still open.
   - If the reference does not lead to an open order of the payer (or there is none),
     match on payer and amount: if exactly one open order of that customer has that
     outstanding amount, it is that one.
   - One transfer can pay several orders (check the inbox for remittance advices): record
     one payment per order.
4. Record each payment on its order in the store, with the statement date as the payment
   date and the statement reference. Once an order is paid in full, mark it paid.
5. Short payments: record what arrived, leave the order pending, add a row to the
   "{SHORT}" sheet and email the customer's accounts address (the customer's email in
   the store) asking for the outstanding balance, quoting the order number and the amount
   still due. Columns: {", ".join(SHORT_HEAD)}. Received is everything
   received on the order so far, Outstanding what is still due.
6. Anything you cannot match with certainty (unknown payer, an order that is already paid,
   an amount that fits nothing) goes on the "{UNMATCHED}" sheet for the finance team; do
   not record it in the store. Columns: {", ".join(UNMATCHED_HEAD)}.
7. Finish by adding a row to the Log sheet: Run date (today), Processed through (the last
   date on the statement), By (your name).

Rows already on the sheets are history: add new rows below them, never edit them. When a
customer pays the balance of an earlier short payment, just record it (and mark the order
paid); it needs no new row.

Do not email anyone else about payments; finance handles refunds and queries.
"""
        if level == 1:  # one credit to match: no remittance advices, short payments or balances to explain
            procedure = re.sub(r"\n   - One transfer can pay several orders.*?one payment per order\.", "", procedure,
                               flags=re.S)
            procedure = re.sub(r"\n5\. Short payments:.*?(?=\n6\. )", "", procedure, flags=re.S)
            procedure = procedure.replace("\n6. ", "\n5. ").replace("\n7. ", "\n6. ")
            procedure = re.sub(r" When a\ncustomer pays the balance.*?no new row\.", "", procedure, flags=re.S)
            procedure = procedure.replace("Do not email anyone else about", "Do not email anyone about")
        files = {PROCEDURE: procedure, statement_path: statement_text, old_stmt: old_text}

        # -- mailbox ---------------------------------------------------------------------------
        comb = next((c for c in credits_drawn if c.kind == "combined"), None)
        msgs: list[dict[str, Any]] = []
        if comb is not None:
            ca, cb = comb.orders
            advice = {"folder": "Inbox", "sender": comb.account.email, "sender_name": f"{comb.account.name} Accounts",
                      "to": [me.email], "subject": "Remittance advice",
                      "date": datetime.combine(comb.day, time(rng.randint(9, 16), rng.randrange(60))).isoformat(),
                      "body": f"Hello,\n\nPlease note our payment of {usd(comb.amount)} made today by bank transfer, "
                              f"covering:\n\n  {ca[0].id}   {usd(ca[1])}\n  {cb[0].id}   {usd(cb[1])}\n\n"
                              f"Kind regards,\nAccounts payable\n{comb.account.name}"}
            if comb in credits:  # a remittance advice only for a transfer on the statement
                msgs.append(advice)
        msgs.append({"folder": "Inbox", "sender": lead.email, "sender_name": lead.name, "to": [me.email],
                     "subject": "Payment matching this week",
                     "date": datetime.combine(today - timedelta(days=1), time(17, 40)).isoformat(),
                     "body": f"Hi {me.first},\n\nThe new statement export is in finance/bank. Can you run the "
                             f"payment matching tomorrow morning as usual? Procedure is in {PROCEDURE}.\n\n"
                             f"Thanks,\n{lead.first}"})
        other = rng.choice([a for a in accounts if comb is None or a is not comb.account])
        msgs.append({"folder": "Inbox", "sender": other.email, "sender_name": f"{other.name} Accounts",
                     "to": [me.email], "subject": "Updated W-9",
                     "date": datetime.combine(today - timedelta(days=rng.randint(2, 6)), time(11, 15)).isoformat(),
                     "body": "Hello,\n\nFor your records, our updated W-9 form is available on request.\n\nRegards"})
        msgs.append({"folder": "Inbox", "sender": colleague.email, "sender_name": colleague.name, "to": [me.email],
                     "subject": "Fire drill Thursday",
                     "date": datetime.combine(today - timedelta(days=2), time(8, 55)).isoformat(),
                     "body": f"Hi all, fire drill on Thursday at 10:30.\n\n{colleague.first}"})
        msgs.sort(key=lambda m: m["date"])
        n_seeded = len(msgs)

        # -- store -----------------------------------------------------------------------------
        order_rows = []
        n_pay = 0
        for o in orders:
            row = {"id": o.id, "customer_id": o.account.id, "status": o.status,
                   "placed_at": o.placed.strftime("%Y-%m-%dT%H:%M"), "shipping_cents": o.shipping,
                   "lines": [{"sku": p.sku, "qty": q, "unit_price_cents": p.price_cents} for p, q in o.lines],
                   "payments": []}
            for amt, day in o.payments:
                n_pay += 1
                row["payments"].append({"id": f"PAY-{n_pay:05d}", "amount_cents": amt, "method": "bank transfer",
                                        "paid_at": f"{day.isoformat()}T00:00"})
            if o.status in ("shipped", "delivered"):
                ship_day = max(d for _, d in o.payments) + timedelta(days=1)
                row["shipments"] = [{"carrier": "UPS", "tracking": f"1Z{rng.randrange(16**12):012X}",
                                     "status": "delivered" if o.status == "delivered" else "in_transit",
                                     "shipped_at": ship_day.isoformat(),
                                     "delivered_at": (ship_day + timedelta(days=3)).isoformat()
                                     if o.status == "delivered" else None}]
            order_rows.append(row)
        seeded_payments = {p["id"] for r in order_rows for p in r["payments"]}
        initial_status = {o.id: o.status for o in orders}
        store_args = dict(store_name=store_name, today=today.isoformat(), suppliers=[s.row() for s in suppliers],
                          products=[p.row() for p in products], customers=[a.row() for a in accounts],
                          orders=order_rows)

        def build(root: Path) -> None:
            write_files(root / "workspace", files, encoding=None)
            (root / "workspace" / WORKBOOK).write_bytes(book)
            store.create_store(root / "state" / "store.sqlite", **store_args)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=msgs, now=now.isoformat())

        w = phrasing_rng(self.name, seed)
        on_day = long_date(today)
        hello = say(w, f"Morning {me.first}! {lead.first} here.", f"Hi {me.first}, it's {lead.first}.",
                    f"{me.first}, good morning; {lead.first} here.")
        ask = say(w, f"The new bank statement export is in finance/bank; could you do the customer payment matching "
                     f"today ({on_day})?",
                  f"Could you do today's customer payment matching ({on_day})? The new bank statement export is in "
                  f"finance/bank.",
                  f"A new bank statement export has landed in finance/bank, so please do the customer payment "
                  f"matching today, {on_day}.")
        work = say(w, f"Record what came in against the orders in the store and mark the paid ones, and do the "
                      f"receivables workbook and the follow-ups the way {PROCEDURE} says.",
                   f"In the store, record each payment that came in against its orders and mark the paid ones; the "
                   f"receivables workbook and the follow-ups are done as {PROCEDURE} describes.",
                   f"{PROCEDURE} says how to do the receivables workbook and the follow-ups; in the store, record "
                   f"what came in against the orders and mark the ones that are paid.")
        unsure = say(w, "Anything you're not sure about goes on the Unmatched sheet, not into the store.",
                     "If you're not sure about something, put it on the Unmatched sheet rather than into the store.",
                     "Don't put anything you're unsure of into the store: it goes on the Unmatched sheet.")
        instruction = " ".join([hello, ask, work, unsure])
        ctx = _Ctx(credits=new, short=level == 1, today=today, last_day=stmt_through, statement=statement_path,
                   statement_text=statement_text, seeded_payments=seeded_payments, initial_status=initial_status,
                   initial_rows=initial_rows, me=me.name, n_seeded=n_seeded, cutoff=cutoff,
                   open_other=[o.id for o in orders if o.status == "pending"
                               and all(o is not x for c in new for x, _ in c.orders)])
        criteria = _criteria(ctx)
        if not ctx.shorts():  # nothing to log or chase (level 1)
            criteria = [c for c in criteria if c.id not in ("short_log", "short_mails")]
        if not ctx.unmatched():
            criteria = [c for c in criteria if c.id != "unmatched_log"]
        flawed = _flawed(ctx)
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=partial(_oracle, ctx),
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"today": today.isoformat(), "cutoff": cutoff.isoformat(), "statement": statement_path,
                  **{key: [c.counterparty if kind == "unknown" else c.reference for c in new if c.kind == kind]
                     for kind, key in TRAPS.items()},
                  "credits": [{"kind": c.kind, "day": c.day.isoformat(), "amount": c.amount, "ref": c.reference,
                               "orders": [(o.id, a) for o, a in c.orders]} for c in new]},
        )


def _trim(row: list[Any]) -> list[Any]:
    """A row without trailing empty cells ('' counts as empty)."""
    out = [None if v == "" else v for v in row]
    while out and out[-1] is None:
        out.pop()
    return out


def acct_ref(acct: Account | None) -> str:
    return f"ACCT {acct.id.split('-')[1]}" if acct else ""


@dataclass
class _Ctx:
    credits: list[Credit]
    today: date
    last_day: date
    statement: str
    statement_text: str
    seeded_payments: set[str]
    initial_status: dict[str, str]
    initial_rows: dict[str, list[list[Any]]]
    me: str
    n_seeded: int
    cutoff: date
    open_other: list[str]
    short: bool = False
    """Level 1: one credit, no remittance advice, nothing short or unmatched: the oracle skips
    the survey of the inbox, the other sheets and the open orders, and checks nothing."""

    def applied(self) -> dict[str, list[tuple[int, date]]]:
        """order id -> [(amount, statement day)] that should be recorded."""
        out: dict[str, list[tuple[int, date]]] = {}
        for c in self.credits:
            if c.kind in ("duplicate", "unknown"):
                continue
            for o, a in c.orders:
                out.setdefault(o.id, []).append((a, c.day))
        return out

    def settled(self) -> list[Order]:
        """Orders the run pays in full."""
        out = []
        for c in self.credits:
            if c.kind in ("duplicate", "unknown", "short"):
                continue
            out.extend(o for o, _ in c.orders)
        return out

    def shorts(self) -> list[Credit]:
        return [c for c in self.credits if c.kind == "short"]

    def unmatched(self) -> list[Credit]:
        return [c for c in self.credits if c.kind in ("duplicate", "unknown")]


# -- reference solution ----------------------------------------------------------------------


def _record(c: Credit, o: Order, amount: int) -> ToolCall:
    """The store call that records ``amount`` of credit ``c`` on order ``o``."""
    return ToolCall("store__record_payment", {"order_id": o.id, "amount": plain(amount), "paid_at": c.day.isoformat(),
                                              "method": "bank transfer", "reference": c.reference or c.counterparty},
                    f"{usd(amount)} from {c.counterparty} pays {o.id}.")


def _oracle(ctx: _Ctx):
    """Read the procedure, the statement and the workbook, then work each new credit: find its
    order(s), open them, record and mark paid; log shorts and unmatched, chase shorts, log the
    run, and check."""
    yield ToolCall("files__list_dir", {"path": "finance", "recursive": True}, "Find the newest statement export.")
    yield ToolCall("files__read_file", {"path": PROCEDURE}, "Read the matching procedure.")
    yield ToolCall("files__read_file", {"path": ctx.statement}, "Read the statement.")
    if not ctx.short:
        sheets = parse_json((yield ToolCall("sheets__list_sheets", {"path": WORKBOOK},
                                            "What does the workbook hold?")))
        assert {s["name"] for s in sheets} >= {LOG, SHORT, UNMATCHED}
    log = parse_json((yield ToolCall("sheets__read_range", {"path": WORKBOOK, "sheet": LOG},
                                     "Up to which day was the last run?")))
    assert str(log["rows"][-1]["values"][1]) == ctx.cutoff.isoformat()
    if not ctx.short:
        short = parse_json((yield ToolCall("sheets__read_range", {"path": WORKBOOK, "sheet": SHORT},
                                           "Earlier short payments (a balance may be coming in).")))
        unm = parse_json((yield ToolCall("sheets__read_range", {"path": WORKBOOK, "sheet": UNMATCHED},
                                         "The unmatched sheet's layout.")))
        inbox = loads((yield ToolCall("mail__list_messages", {"folder": "Inbox"}, "Any remittance advices?")))
        advice = next((m for m in inbox["messages"] if m["subject"] == "Remittance advice"), None)
        if advice is not None:
            yield ToolCall("mail__read_message", {"message_id": advice["id"]},
                           "Which orders the combined transfer pays.")
        pending = loads((yield ToolCall("store__search_orders", {"status": "pending", "limit": 100},
                                        "Every open order, with customer and total.")))
        assert pending["next_offset"] is None

    short_rows, unmatched_rows, mails = [], [], []
    for c in ctx.credits:
        if c.kind == "unknown":
            yield ToolCall("store__search_customers", {"query": c.counterparty.split()[-1]},
                           f"Is {c.counterparty} one of our customers?")
            unmatched_rows.append([c.day.isoformat(), c.counterparty, c.reference or None, c.amount / 100, c.note])
            continue
        if c.kind in ("typo", "noref"):
            yield ToolCall("store__get_customer", {"customer_id": c.account.id},
                           f"'{c.reference}' is no open order of {c.account.name}: match on amount.")
        if c.kind == "duplicate":
            o = c.orders[0][0]
            got = loads((yield ToolCall("store__get_order", {"order_id": o.id}, f"Is {o.id} still open?")))
            assert got["status"] == "paid"
            unmatched_rows.append([c.day.isoformat(), c.counterparty, c.reference, c.amount / 100, c.note])
            continue
        for o, amount in c.orders:
            got = loads((yield ToolCall("store__get_order", {"order_id": o.id},
                                        f"Open {o.id}: customer, total and what is paid.")))
            assert got["customer"]["id"] == c.account.id
            yield _record(c, o, amount)
            if c.kind != "short":
                yield ToolCall("store__update_order_status", {"order_id": o.id, "status": "paid",
                                                              "note": f"paid by bank transfer {c.day.isoformat()}"},
                               f"{o.id} is paid in full.")
            if c.kind == "short":
                paid = o.paid + amount
                owed = o.total - paid
                short_rows.append([c.day.isoformat(), c.account.name, o.id, o.total / 100, paid / 100, owed / 100])
                mails.append((c, o, owed))

    if short_rows:
        yield ToolCall("sheets__write_rows", {"path": WORKBOOK, "sheet": SHORT,
                                              "start_cell": f"A{short['rows'][-1]['row'] + 1}", "rows": short_rows},
                       "Log the short payments.")
    if unmatched_rows:
        yield ToolCall("sheets__write_rows", {"path": WORKBOOK, "sheet": UNMATCHED,
                                              "start_cell": f"A{unm['rows'][-1]['row'] + 1}", "rows": unmatched_rows},
                       "Log what could not be matched.")
    for c, o, owed in mails:
        body = (f"Hello,\n\nThank you for your payment of {usd(c.orders[0][1])} received on {c.day.isoformat()} for "
                f"order {o.id}. The order total is {usd(o.total)}, so {usd(owed)} is still outstanding. Could you "
                f"please transfer the balance, quoting {o.id}?\n\nKind regards,\n{ctx.me}")
        yield ToolCall("mail__send_message", {"to": [c.account.email], "subject": f"Outstanding balance on {o.id}",
                                              "body": body}, f"Chase the {usd(owed)} still due on {o.id}.")
    yield ToolCall("sheets__write_rows", {"path": WORKBOOK, "sheet": LOG,
                                          "start_cell": f"A{log['rows'][-1]['row'] + 1}",
                                          "rows": [[ctx.today.isoformat(), ctx.last_day.isoformat(), ctx.me]]},
                   "Log this run.")
    if not ctx.short:
        yield ToolCall("store__search_payments", {"since": (ctx.cutoff + timedelta(days=1)).isoformat(),
                                                  "limit": 50}, "Check the payments recorded for the new statement lines.")
        yield ToolCall("store__search_orders", {"status": "pending", "limit": 100}, "Check what is still open.")
    n = sum(len(c.orders) for c in ctx.credits if c.kind not in ("duplicate", "unknown"))
    return (f"Matched {n} payments from the statement, logged {len(short_rows)} short and {len(unmatched_rows)} "
            f"unmatched credits, chased the short payers and logged the run through {ctx.last_day.isoformat()}.")


def _flawed(ctx: _Ctx) -> dict[str, Any]:
    """criterion id -> a builder of the oracle with one mistake that breaks it (built only for
    the criteria a level has: level 1 has nothing short or unmatched)."""
    oracle = partial(_oracle, ctx)
    paying = [c for c in ctx.credits if c.kind not in ("duplicate", "unknown")]
    mangled = next(c for c in ctx.credits if c.kind == "mangled")
    skipped = {o.id for o, _ in next((c for c in paying if c.kind == "typo"), paying[0]).orders}
    unmark = next((c for c in paying if c.kind == "ref"), next(c for c in paying if c.kind != "short")).orders[0][0].id
    undated = {o.id for o, _ in next((c for c in paying if c.kind == "combined"), paying[0]).orders}
    thanked = next((c for c in paying if c.kind == "ref"), next(c for c in paying if c.kind != "short")).account.email
    log_run = perturb.on("sheets__write_rows", sheet=LOG)
    on_unmatched = perturb.on("sheets__write_rows", sheet=UNMATCHED)

    def on_orders(ids: set[str], *names: str) -> perturb.Match:
        return lambda call: call.name in names and call.arguments.get("order_id") in ids

    def owed_off(args: dict) -> dict:  # the first short row's outstanding a dollar out
        first = args["rows"][0]
        return {**args, "rows": [[*first[:-1], first[-1] + 1]] + args["rows"][1:]}

    def short_mail() -> perturb.Oracle:
        oid = ctx.shorts()[0].orders[0][0].id
        body = f"Hello,\n\nYour payment for order {oid} was short. Please pay the rest.\n\n{ctx.me}"
        return perturb.change(oracle, perturb.on("mail__send_message", subject=f"Outstanding balance on {oid}"),
                              body=body)

    record = _record(mangled, *mangled.orders[0])
    checked = record.arguments["order_id"]
    return {
        # one transfer left unworked: neither recorded nor marked (its order is still opened)
        "payments_recorded": lambda: perturb.drop(oracle, on_orders(skipped, "store__record_payment",
                                                                    "store__update_order_status"), count=None),
        "payment_dates": lambda: perturb.change(oracle, on_orders(undated, "store__record_payment"), paid_at=None,
                                                count=None),
        "orders_marked_paid": lambda: perturb.drop(oracle, perturb.on("store__update_order_status", order_id=unmark)),
        "short_log": lambda: perturb.change(oracle, perturb.on("sheets__write_rows", sheet=SHORT), owed_off),
        # one credit that fits nothing left off the sheet (the only one: no write at all)
        "unmatched_log": lambda: perturb.drop(oracle, on_unmatched) if len(ctx.unmatched()) == 1 else
        perturb.change(oracle, on_unmatched, lambda args: {**args, "rows": args["rows"][1:]}),
        "run_logged": lambda: perturb.drop(oracle, log_run),
        "short_mails": short_mail,
        # the mangled reference's payment recorded before its order was opened
        "orders_checked": lambda: perturb.insert(
            perturb.drop(oracle, perturb.on("store__record_payment", order_id=checked)),
            record, before=perturb.on("store__get_order", order_id=checked)),
        "no_wrong_payments": lambda: perturb.insert(oracle, ToolCall(
            "store__get_order", {"order_id": ctx.open_other[0]}, "An open order."), ToolCall(
            "store__record_payment", {"order_id": ctx.open_other[0], "amount": "10.00",
                                      "paid_at": ctx.last_day.isoformat()}, "A small payment."), before=log_run),
        "no_stray_mail": lambda: perturb.insert(oracle, ToolCall(
            "mail__send_message", {"to": [thanked], "subject": "Payment received",
                                   "body": "Thank you for your payment."}, "Thank a customer."), before=log_run),
        "history_untouched": lambda: perturb.insert(oracle, ToolCall(
            "sheets__write_cells", {"path": WORKBOOK, "sheet": SHORT, "cells": {"F2": 0}},
            "Mark the old short payment settled."), before=log_run),
    }


# -- grading ---------------------------------------------------------------------------------


def _criteria(ctx: _Ctx) -> list[Criterion]:
    applied = ctx.applied()
    settled = {o.id for o in ctx.settled()}
    shorts = ctx.shorts()
    unmatched = ctx.unmatched()
    short_addrs = {c.account.email for c in shorts}

    def new_payments(world) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for oid, o in store.orders(world).items():
            for p in o["payments"]:
                if p["id"] not in ctx.seeded_payments:
                    out.setdefault(oid, []).append(p)
        return out

    def new_rows(world, sheet: str) -> list[list[Any]] | None:
        t = read_table(world.file(WORKBOOK), sheet)
        if t is None:
            return None
        rows = [list(t[0])] + [list(r) for r in t[1]]
        return [r for r in rows[len(ctx.initial_rows[sheet]):] if _trim(r)]

    def has_number(row: list[Any], cents: int) -> bool:
        return any(to_number(v) is not None and abs(to_number(v) * 100 - cents) < 0.5 for v in row
                   if not isinstance(v, (date, datetime)))

    def has_date(row: list[Any], d: date) -> bool:
        return any(_as_date(v) == d for v in row)

    def payments_recorded(world, traj):
        got = new_payments(world)
        bad = [f"{oid}: recorded {sum(p['amount_cents'] for p in got.get(oid, []))}, expected {sum(a for a, _ in want)}"
               for oid, want in applied.items()
               if sum(p["amount_cents"] for p in got.get(oid, [])) != sum(a for a, _ in want)]
        return not bad, "; ".join(bad)

    def payment_dates(world, traj):
        got = new_payments(world)
        if not any(oid in got for oid in applied):
            return False, "no payment recorded"
        bad = [oid for oid, want in applied.items()
               if {p["paid_at"][:10] for p in got.get(oid, [])} - {d.isoformat() for _, d in want}]
        return not bad, f"wrong payment dates on {bad}" if bad else ""

    def orders_marked_paid(world, traj):
        st = store.order_statuses(world)
        changed = {o for o, s in st.items() if s != ctx.initial_status.get(o)}
        wrong = [o for o in changed if st[o] != "paid"]
        return changed == settled and not wrong, f"status changed on {sorted(changed)}, expected {sorted(settled)} -> paid"

    def no_wrong_payments(world, traj):
        extra = sorted(set(new_payments(world)) - set(applied))
        return not extra, f"payments recorded on {extra}" if extra else ""

    def short_log(world, traj):
        rows = new_rows(world, SHORT)
        if rows is None:
            return False, f"no {SHORT!r} sheet"
        if len(rows) != len(shorts):
            return False, f"{len(rows)} new rows, expected {len(shorts)}"
        for c in shorts:
            o, amount = c.orders[0]
            mine = [r for r in rows if any(mentions_id(str(v), o.id) for v in r if isinstance(v, str))]
            paid = o.paid + amount
            if len(mine) != 1 or not has_number(mine[0], o.total - paid) or not has_number(mine[0], paid) \
                    or not has_number(mine[0], o.total):
                return False, f"no correct row for {o.id} (total {o.total}, received {paid}, outstanding {o.total - paid})"
        return True

    def unmatched_log(world, traj):
        rows = new_rows(world, UNMATCHED)
        if rows is None:
            return False, f"no {UNMATCHED!r} sheet"
        if len(rows) != len(unmatched):
            return False, f"{len(rows)} new rows, expected {len(unmatched)}"
        for c in unmatched:
            if not any(has_number(r, c.amount) and has_date(r, c.day) for r in rows):
                return False, f"no row for the {c.amount / 100:.2f} credit of {c.day.isoformat()}"
        return True

    def run_logged(world, traj):
        rows = new_rows(world, LOG)
        if rows is None:
            return False, "no Log sheet"
        ok = [r for r in rows if has_date(r[:1], ctx.today) and has_date(r[1:2], ctx.last_day)]
        return len(rows) == 1 and len(ok) == 1, f"new log rows: {rows}"

    def short_mails(world, traj):
        sent = [m for m in mail.sent_messages(world) if m["id"] > ctx.n_seeded]
        for c in shorts:
            o, amount = c.orders[0]
            mine = [m for m in sent if c.account.email in m["to"] + m["cc"]]
            if len(mine) != 1:
                return False, f"{len(mine)} mails to {c.account.email}"
            text = f"{mine[0]['subject']}\n{mine[0]['body']}"
            if not mentions_id(text, o.id) or not mentions_amount(text, o.total - o.paid - amount):
                return False, f"the mail to {c.account.email} lacks {o.id} or the amount due"
            foreign = sorted({x.id for cr in ctx.credits for x, _ in cr.orders
                              if x.account is not c.account and mentions_id(text, x.id)})
            if foreign:
                return False, f"the mail to {c.account.email} also quotes other customers' orders {foreign}"
        return True

    def history_untouched(world, traj):
        for sheet, want in ctx.initial_rows.items():
            t = read_table(world.file(WORKBOOK), sheet)
            if t is None:
                return False, f"{sheet} is gone"
            rows = [_trim(list(t[0]))] + [_trim(list(r)) for r in t[1]]
            if len(rows) < len(want) or rows[:len(want)] != [_trim(w) for w in want]:
                return False, f"earlier rows of {sheet} changed"
        p = world.file(ctx.statement)
        if not p.is_file() or output_text(p) != ctx.statement_text:
            return False, "the statement export changed"
        return True

    return [
        Criterion("payments_recorded", "every new credit that pays an open order is recorded on it, to the cent "
                  "(split across orders where one transfer pays several)", "final_state", payments_recorded, 2.0),
        Criterion("payment_dates", "each recorded payment carries its statement date", "final_state", payment_dates,
                  requires=("payments_recorded",)),
        Criterion("orders_marked_paid", "exactly the orders now paid in full were marked paid (short-paid ones stay "
                  "pending)", "final_state", orders_marked_paid, 2.0),
        Criterion("short_log", "each short payment has one new row with order total, received and outstanding",
                  "final_state", short_log),
        Criterion("unmatched_log", "each unmatched credit (already-paid order, unknown payer) has one new row with "
                  "its date and amount", "final_state", unmatched_log),
        Criterion("run_logged", "one new Log row with today's date and the statement's last date", "final_state",
                  run_logged, requires=("payments_recorded",)),
        Criterion("short_mails", "each short payer got one mail quoting the order and the amount still due "
                  "(and no other customer's order)", "final_state", short_mails),
        process.looked_up_before("store__record_payment", "store__get_order", "order_id", id="orders_checked",
                                 description="every order was opened before a payment was recorded on it",
                                 requires=("payments_recorded",), what="no payment recorded"),
        Criterion("no_wrong_payments", "no payment recorded on any other order (old lines, duplicates, guesses)",
                  "final_state", no_wrong_payments, guard=True),
        mail_kit.sends_only(short_addrs, seeded=ctx.n_seeded, replies=False,
                            description="mail went only to the short payers"),
        Criterion("history_untouched", "earlier workbook rows and the statement export are unchanged", "final_state",
                  history_untouched, guard=True),
    ]
