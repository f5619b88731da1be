"""Expense reports: audit a batch of submitted claims against the wiki's expense policy.

Finance's mail points at the month's claims workbook (rows from several employees, the first
few already decided last month) and the receipts folder. The current policy on the wiki (a
superseded 2025 page has other numbers) gives a receipt threshold, a per-person daily meal cap
(two meals on one day can break it together), nightly hotel caps by city tier, no alcohol, and
an ordered list of reason codes, duplicates first. Every open claim gets Approved or Rejected
with the code, which takes reading each receipt: the rate per night, the drinks, the total
(one receipt may not match its claim). Then one mail per employee with rejections lists their
rejected claims; two employees have nearly the same name.

Which traps a batch carries is drawn per seed (``TRAPS``): two meals on one day over the cap
together or under it, a repeat of last month's claim, alcohol or an alcohol-free drink, an
overclaimed receipt, small claims without receipts. A code no open claim earns has no criterion.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from openpyxl import Workbook, load_workbook

from longhorizon.apps.mail import state as mail
from longhorizon.apps.sheets.state import sheet_values
from longhorizon.apps.wiki import state as wiki
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    MONTHS,
    Files,
    People,
    blank,
    close,
    company,
    long_date,
    mails_sent,
    norm_path,
    norm_text,
    read_table,
    rng_and_faker,
    squash,
    to_number,
    write_files,
)
from longhorizon.tasks.expenses import money
from longhorizon.tasks.kit import files as files_kit, perturb

DUP, NOREC, MISMATCH, ALC, OVER = "DUPLICATE", "NO_RECEIPT", "RECEIPT_MISMATCH", "ALCOHOL", "OVER_LIMIT"
HEADER = ["Claim ID", "Employee", "Email", "Date", "Category", "Merchant", "Description", "Amount", "Receipt",
          "Decision", "Reason"]
DEC_COL, REASON_COL = 9, 10
NEAR_NAMES = [("Jon", "John"), ("Kristen", "Kirsten"), ("Catherine", "Katherine"), ("Steven", "Stephen"),
              ("Alan", "Allan"), ("Sara", "Sarah"), ("Eric", "Erik"), ("Mark", "Marc"), ("Brian", "Bryan"),
              ("Philip", "Phillip"), ("Megan", "Meghan"), ("Lindsay", "Lindsey"), ("Carl", "Karl")]
TIER_A = ["New York", "San Francisco", "Boston", "London", "Washington DC"]
OTHER_CITIES = ["Denver", "Austin", "Columbus", "Raleigh", "Phoenix", "Pittsburgh"]
HOTELS = ["Harborview Hotel", "Linden Suites", "Meridian Grand", "Parkside Inn", "Copper Lodge", "The Alder"]
RESTAURANTS = ["Olive & Vine Bistro", "North End Tavern", "The Green Fork", "Harvest Table", "Cava Grill",
               "Sakura House", "Blue Door Diner", "Maple & Ash"]
FOOD = [("Grain bowl", 14.5), ("Chicken sandwich", 13.0), ("Caesar salad", 12.0), ("Burger", 16.0),
        ("Salmon", 29.0), ("Ribeye", 46.0), ("Pasta primavera", 22.0), ("Tacos (3)", 15.0), ("Soup of the day", 8.0),
        ("Sparkling water", 4.0), ("Iced tea", 3.5), ("Fries", 5.5), ("Tiramisu", 9.0), ("Espresso", 3.5)]
ALCOHOL = [("House Cabernet (glass)", 14.0), ("IPA draft", 8.0), ("Old Fashioned", 15.0),
           ("Pinot Grigio (glass)", 13.0), ("Prosecco (glass)", 12.0)]
MOCKTAILS = [("Virgin Mojito", 7.0), ("Shirley Temple", 5.5), ("Alcohol-free spritz", 8.0),
             ("Virgin Mary", 7.5)]
"""Drinks that read like a bar order but hold no alcohol: the meal is approved."""
TRAPS = ("same_day_over", "last_month_repeat", "alcohol", "mismatch", "small_no_receipt")
"""The traps drawn per seed at levels 2-3 (level 1 keeps its fixed batch): two meals on one day
over the cap together (else under it together), a repeat of last month's claim, a receipt with
alcohol (else one with an alcohol-free drink), an overclaimed receipt, small claims without a
receipt (else the taxi carries one). The look-alike names, the superseded policy, the missing
receipt, the repeated hotel and the hotel caps are in every instance."""
TAXIS = ["Yellow Cab Co.", "Uber", "Lyft", "Metro Taxi"]
SUPPLIES = [("Staples", [("Printer paper (5 reams)", 32.99), ("Whiteboard markers", 11.49), ("Desk organizer", 18.0),
                         ("Sticky notes (12 pack)", 9.99)]),
            ("Office Depot", [("USB-C hub", 39.99), ("Laptop stand", 32.5), ("HDMI cable 2m", 11.99),
                              ("Wireless mouse", 24.99)])]
SOFTWARE = [("Adobe", "Creative Cloud - All Apps (monthly)", 59.99), ("Zoom", "Zoom Pro (annual)", 149.9),
            ("Miro", "Miro Business (monthly)", 30.0), ("Notion", "Notion Plus (annual)", 120.0)]


@dataclass
class Claim:
    emp: object
    day: date
    category: str
    merchant: str
    description: str
    amount: float
    receipt: str | None
    text: str | None
    code: str | None  # the expected reason code; None = Approved
    kind: str  # which criterion judges it: dup, receipts, alcohol, limits, ok
    order: int = 0
    cid: str = ""
    decided: str | None = None  # last month's decision, for rows already decided


@register
class ExpenseClaimAudit(TaskFamily):
    name = "expense_claim_audit"
    category = "expense reports"
    apps = ("sheets", "files", "wiki", "mail")
    description = (
        "Audit a month's batch of expense claims against the current wiki policy: read every receipt, "
        "approve or reject each open claim with the policy's reason code (duplicates, missing or mismatched "
        "receipts, alcohol, daily meal and hotel caps), then mail each employee their rejected claims."
    )

    levels = 3
    """1: one employee's claims (a repeat of last month's, a missing receipt, alcohol, one fine);
    2: two employees with look-alike names (adds the caps and a mismatched receipt); 3 (default):
    four employees and a few more claims. Every level keeps last month's decided rows (one of them
    the look-alike's) and the superseded policy; levels 2-3 draw their traps, level 1 keeps all."""
    toolsets = {1: (
        "files__read_file", "mail__send_message", "sheets__read_range", "sheets__write_cells", "wiki__get_page",
    )}
    """Level 1 gives the request (the sheet, the receipts folder, the policy's page) in the task: no
    mail to find or read, no page to search; the sheet names each receipt file."""

    def generate(self, seed: int, level: int | None = None) -> Task:  # noqa: C901 - one readable generator
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        _, domain = company(fake)
        year, month = 2026, rng.randint(2, 11)
        first = date(year, month, 1)
        month_end = date(year, month + 1, 1) - timedelta(days=1)
        ym = first.strftime("%Y-%m")
        month_name = f"{MONTHS[month - 1].capitalize()} {year}"
        threshold = rng.choice([20, 25, 30])
        meal_cap = rng.choice([60, 65, 75])
        cap_a = rng.choice([240, 260, 280])
        cap_b = rng.choice([160, 175, 190])
        folder = "finance/claims"
        book_path = f"{folder}/claims_{ym}.xlsx"
        rdir = f"{folder}/receipts"

        me, controller = people.make(domain), people.make(domain)
        pair = rng.choice([p for p in NEAR_NAMES if not set(p) & people.used_first])
        people.used_first.add(pair[1])  # kept for the look-alike
        emp_a = people.make(domain, first=pair[0])
        emp_b = people.make(domain, first=pair[1], last=emp_a.last)
        emps = [emp_a, emp_b, people.make(domain), people.make(domain)]
        rng.shuffle(emps)
        used_names: set[str] = set()

        def fname() -> str:
            while True:
                n = rng.choice([f"IMG_{rng.randint(1000, 9999)}.txt", f"scan_{rng.randint(1, 999):04d}.txt",
                                f"receipt_{rng.randint(100, 999)}.txt"])
                if n not in used_names:
                    used_names.add(n)
                    return n

        def day_in(lo: int = 1, hi: int | None = None) -> date:
            hi = hi if hi is not None else month_end.day - 3
            return date(year, month, rng.randint(lo, hi))

        def when(d: date) -> str:
            return f"{d.isoformat()} {rng.randint(7, 21):02d}:{rng.randrange(60):02d}"

        # -- receipt builders: (text, total) -------------------------------------------------------------
        def meal_receipt(emp, d: date, lo: float, hi: float, alcohol: bool = False,
                         mocktail: bool = False) -> tuple[str, float, str]:
            place = rng.choice(RESTAURANTS)
            for _ in range(400):
                items = rng.sample(FOOD, rng.randint(1, 4))
                if alcohol:
                    items.append(rng.choice(ALCOHOL))
                if mocktail:
                    items.insert(rng.randint(0, len(items)), rng.choice(MOCKTAILS))
                sub = round(sum(p for _, p in items), 2)
                tax = round(sub * 0.08875, 2)
                tip = round(sub * rng.choice([0.15, 0.18, 0.2]), 2)
                total = round(sub + tax + tip, 2)
                if lo <= total <= hi:
                    break
            else:  # pragma: no cover - the ranges are wide enough
                raise RuntimeError("no meal fits")
            lines = "\n".join(f"{n:<26}{money(p):>8}" for n, p in items)
            text = (f"{place}\n{fake.street_address()}\n{when(d)}\nServer: {fake.first_name()}   Guests: 1\n\n"
                    f"{lines}\n\nSubtotal{money(sub):>26}\nTax{money(tax):>31}\nTip{money(tip):>31}\n"
                    f"TOTAL{money(total):>29}\nCard: VISA ****{rng.randint(1000, 9999)}\n")
            return text, total, place

        def hotel_receipt(emp, d: date, city: str, rate: float, nights: int) -> tuple[str, float, str]:
            hotel = rng.choice(HOTELS)
            room = round(rate * nights, 2)
            tax = round(room * 0.1475, 2)
            total = round(room + tax, 2)
            arrive = d - timedelta(days=nights)
            text = (f"{hotel} {city}\nGUEST FOLIO\n\nGuest: {emp.name}\nArrival: {arrive.isoformat()}\n"
                    f"Departure: {d.isoformat()}\nNights: {nights}\nRoom rate: {money(rate)} per night\n\n"
                    f"Room charges   {money(room)}\nOccupancy tax  {money(tax)}\nTotal          {money(total)}\n"
                    f"Balance: 0.00\n")
            return text, total, f"{hotel} {city}"

        def taxi_receipt(emp, d: date, amount: float, company_: str) -> str:
            return (f"{company_}\nTrip receipt - {emp.first}\n{when(d)}\nFare {money(round(amount * 0.85, 2))}\n"
                    f"Tip {money(round(amount - round(amount * 0.85, 2), 2))}\nTotal ${money(amount)}\n")

        def supplies_receipt(d: date) -> tuple[str, float, str]:
            store, stock = rng.choice(SUPPLIES)
            items = rng.sample(stock, 2)
            sub = round(sum(p for _, p in items), 2)
            tax = round(sub * 0.07, 2)
            total = round(sub + tax, 2)
            body = "\n".join(f"  1 x {n}  ${money(p)}" for n, p in items)
            return (f"{store} #{rng.randint(100, 999)}\n{when(d)}\n\n{body}\n\nSubtotal ${money(sub)}\n"
                    f"Sales tax ${money(tax)}\nTOTAL ${money(total)}\n"), total, store

        # -- the claims, by bundle ----------------------------------------------------------------------------
        claims: list[Claim] = []

        def add(c: Claim) -> Claim:
            c.order = len(claims)
            claims.append(c)
            return c

        def meal(emp, d, lo, hi, code, kind, alcohol=False, mocktail=False) -> Claim:
            text, total, place = meal_receipt(emp, d, lo, hi, alcohol, mocktail)
            what = rng.choice(["Client dinner", "Dinner while travelling", "Lunch on site visit", "Team lunch"])
            return add(Claim(emp, d, "Meals", place, what, total, fname(), text, code, kind))

        def hotel(emp, d, city, rate, code, kind) -> Claim:
            nights = rng.randint(1, 3)
            text, total, merchant = hotel_receipt(emp, d, city, rate, nights)
            return add(Claim(emp, d, "Lodging", merchant, f"Hotel, {nights} night{'s' * (nights > 1)}, {city}",
                             total, fname(), text, code, kind))

        def taxi(emp, d, amount, with_receipt, code, kind) -> Claim:
            co = rng.choice(TAXIS)
            text = taxi_receipt(emp, d, amount, co) if with_receipt else None
            return add(Claim(emp, d, "Ground transport", co, rng.choice(["Airport to hotel", "Hotel to client office",
                                                                        "Office to station"]),
                             amount, fname() if with_receipt else None, text, code, kind))

        def supplies(emp, d, code, kind, overclaim: float = 0.0) -> Claim:
            text, total, store = supplies_receipt(d)
            return add(Claim(emp, d, "Office supplies", store, "Supplies for the team room",
                             round(total + overclaim, 2), fname(), text, code, kind))

        def software(emp, d) -> Claim:
            vendor, plan, price = rng.choice(SOFTWARE)
            text = (f"{vendor} - Invoice\nInvoice date: {d.isoformat()}\nBill to: {emp.name}\n{plan}\n"
                    f"Amount due: USD {money(price)}\nPaid by card\n")
            return add(Claim(emp, d, "Software", vendor, plan, price, fname(), text, None, "ok"))

        def dup_of(c: Claim, kind: str = "dup") -> Claim:
            return add(Claim(c.emp, c.day, c.category, c.merchant, c.description, c.amount, c.receipt, c.text,
                             DUP, kind))

        def bundle_pair(emp):
            d = day_in(3, 20)
            lunch_lo = round(meal_cap * 0.35, 2)
            lunch = meal(emp, d, lunch_lo, round(meal_cap * 0.5, 2), None, "ok")
            if "same_day_over" in traps:  # each meal under the cap, the two together over it
                trap_claims["same_day_over"].append(
                    meal(emp, d, round(meal_cap - lunch.amount + 3, 2), meal_cap - 1.5, OVER, "limits"))
            else:  # two meals on one day that stay under the cap together: both approved
                meal(emp, d, 15, round(meal_cap - lunch.amount - 2, 2), None, "ok")
            if "small_no_receipt" in traps:
                trap_claims["small_no_receipt"].append(
                    taxi(emp, day_in(), round(rng.uniform(threshold - 9, threshold - 0.6), 2), False, None, "ok"))
            else:
                taxi(emp, day_in(), round(rng.uniform(threshold + 3, threshold + 25), 2), True, None, "ok")
            city = rng.choice(TIER_A + OTHER_CITIES)
            cap = cap_a if city in TIER_A else cap_b
            h = hotel(emp, day_in(5, 24), city, float(cap - rng.randint(5, 40)), None, "ok")
            dup_of(h)

        prev_batch: list[Claim] = []

        def bundle_alcohol(emp):
            if "alcohol" in traps:
                trap_claims["alcohol"].append(meal(emp, day_in(), 30, meal_cap + (15 if rng.random() < 0.5 else -3),
                                                   ALC, "alcohol", alcohol=True))
            else:  # a drink that reads like one from the bar, but holds no alcohol
                trap_claims["alcohol_free_drink"].append(meal(emp, day_in(), 30, meal_cap - 3, None, "ok",
                                                              mocktail=True))
            supplies(emp, day_in(), None, "ok")
            taxi(emp, day_in(), round(rng.uniform(threshold + 5, threshold + 40), 2), False, NOREC, "receipts")
            if "last_month_repeat" in traps:
                trap_claims["last_month_repeat"].append(dup_of(prev_batch[0]))

        def bundle_limits(emp):
            software(emp, day_in())
            city = rng.choice(OTHER_CITIES)
            hotel(emp, day_in(5, 24), city, float(rng.randint(cap_b + 5, cap_a - 5)), OVER, "limits")
            if "mismatch" in traps:
                trap_claims["mismatch"].append(
                    supplies(emp, day_in(), MISMATCH, "receipts", overclaim=float(rng.randint(8, 30))))
            else:
                supplies(emp, day_in(), None, "ok")
            d1, d2 = rng.sample(range(1, month_end.day - 2), 2)  # two days: the daily cap stays per meal
            meal(emp, date(year, month, d1), meal_cap + 4, meal_cap + 30, OVER, "limits")
            meal(emp, date(year, month, d2), 18, meal_cap - 5, None, "ok")

        def bundle_clean(emp):
            d = day_in()
            meal(emp, d, 18, meal_cap - 2, None, "ok")
            taxi(emp, day_in(), round(rng.uniform(threshold + 5, threshold + 35), 2), True, None, "ok")
            supplies(emp, day_in(), None, "ok")
            hotel(emp, day_in(5, 24), rng.choice(TIER_A), float(rng.randint(cap_b + 5, cap_a - 5)), None, "ok")

        # which traps this batch carries: at least two of the drawn ones (level 1: all of its own)
        drawn = {t for t in TRAPS if rng.random() < 0.6}  # at every level, so that the draws after it agree
        while len(drawn) < 2:  # at least 2 of them
            drawn.add(rng.choice(TRAPS))
        traps = set(TRAPS) if level == 1 else drawn  # level 1 keeps all of its own
        trap_claims: dict[str, list[Claim]] = {t: [] for t in (*TRAPS, "alcohol_free_drink")}

        # last month's batch: already decided (one of them will be claimed again)
        prev_end = first - timedelta(days=1)
        roles = list(emps)
        if level < self.levels:  # no draw: the look-alikes play the alcohol and the limits bundles
            rest = [e for e in emps if e not in (emp_a, emp_b)]
            roles = [rest[0], *[e for e in emps if e in (emp_a, emp_b)], rest[1]]
        alc_emp = roles[1]
        t_amt = round(rng.uniform(threshold + 6, threshold + 30), 2)
        t_day = prev_end - timedelta(days=rng.randint(2, 12))
        t_co = rng.choice(TAXIS)
        prev_batch.append(Claim(alc_emp, t_day, "Ground transport", t_co, "Hotel to airport", t_amt, fname(),
                                taxi_receipt(alc_emp, t_day, t_amt, t_co), None, "prev", decided="Approved"))
        pt, ptot, pplace = meal_receipt(roles[2], prev_end - timedelta(days=5), 30, 55, alcohol=True)
        prev_batch.append(Claim(roles[2], prev_end - timedelta(days=5), "Meals", pplace, "Client dinner", ptot,
                                fname(), pt, ALC, "prev", decided="Rejected"))
        st, stot, sstore = supplies_receipt(prev_end - timedelta(days=8))  # by the all-approved employee
        prev_batch.append(Claim(roles[3], prev_end - timedelta(days=8), "Office supplies", sstore,
                                "Supplies for the team room", stot, fname(), st, None, "prev", decided="Approved"))

        if level == self.levels:
            bundle_pair(roles[0])
        bundle_alcohol(roles[1])
        if level >= 2:
            bundle_limits(roles[2])
        if level == self.levels:
            bundle_clean(roles[3])
        for _ in range(rng.randint(0, 3) if level == self.levels else 0):  # a few more ordinary claims
            emp, extra = rng.choice(emps), rng.randrange(3 if "small_no_receipt" in traps else 2)
            if extra == 0:
                software(emp, day_in())
            elif extra == 1:
                supplies(emp, day_in(), None, "ok")
            else:
                trap_claims["small_no_receipt"].append(
                    taxi(emp, day_in(), round(rng.uniform(6, threshold - 0.6), 2), False, None, "ok"))

        # claim ids: last month's first, then this batch by date (a duplicate always after its original)
        prev_batch.sort(key=lambda c: c.day)
        base = rng.randint(3100, 3800)
        for k, c in enumerate(prev_batch):
            c.cid = f"C-{base + k}"
        claims.sort(key=lambda c: (c.day, c.code == DUP, c.order))
        for k, c in enumerate(claims):
            c.cid = f"C-{base + len(prev_batch) + k}"
        open_claims = list(claims)
        all_rows = prev_batch + open_claims

        def make_books() -> dict:
            wb = Workbook()
            ws = wb.active
            ws.title = "Claims"
            ws.append(HEADER)
            for c in all_rows:
                ws.append([c.cid, c.emp.name, c.emp.email, c.day, c.category, c.merchant, c.description, c.amount,
                           c.receipt or "", c.decided or "", (c.code or "") if c.decided else ""])
            return {book_path: wb}

        books = Files(make_books)
        receipt_files = {f"{rdir}/{c.receipt}": c.text for c in all_rows if c.receipt}
        for _ in range(2):  # receipts nobody claimed (yet)
            t, _, _ = meal_receipt(rng.choice(emps), day_in(), 15, 40)
            receipt_files[f"{rdir}/{fname()}"] = t
        receipt_files = dict(sorted(receipt_files.items()))
        to_read = sorted({f"{rdir}/{c.receipt}" for c in open_claims if c.receipt})

        # -- the wiki -----------------------------------------------------------------------------------------
        policy = f"""# Expense policy

Effective January 1, {year}. Replaces the 2025 policy ([[expense-policy-2025]]).

## Receipts
A receipt is required for every claim of ${threshold:.2f} or more. Claims under ${threshold:.2f} need none.

## Meals
Meals are capped at ${meal_cap} per person per day, tax and tip included. When one person's meal claims for the
same day add up to more than the cap, the claim that takes the day over the cap is over the limit (claims are
taken in claim ID order; a claim rejected for another reason does not count towards the day).
Alcohol is never reimbursed: a claim whose receipt includes any alcoholic drink is rejected in full.

## Lodging
The nightly room rate (before taxes) may be at most ${cap_a} in {', '.join(TIER_A[:-1])} and {TIER_A[-1]}, and
${cap_b} everywhere else.

## Auditing claims
Every claim is Approved or Rejected. A rejected claim gets the first reason code that applies:
1. {DUP} - same employee, date, merchant and amount as an earlier claim (a lower claim ID), whatever
   that claim's decision was.
2. {NOREC} - a receipt is required and none is attached.
3. {MISMATCH} - the receipt's total differs from the amount claimed.
4. {ALC} - the receipt includes alcohol.
5. {OVER} - above a cap in this policy.
Claims no code applies to are Approved, with the reason left empty.
"""
        old_policy = f"""# Expense policy (2025)

**Superseded** by [[expense-policy]] from January 1, {year}.

Receipts are needed above $75. Meals: up to $50 per meal. Hotels: $220 a night in major cities, $150
elsewhere. Reason codes: DUP, NO-RCPT, LIMIT.
"""
        pages = [
            {"slug": "expense-policy", "title": "Expense policy", "body": policy, "author": controller.name,
             "updated": f"{year}-01-02T10:00:00", "tags": ["finance", "policy"]},
            {"slug": "expense-policy-2025", "title": "Expense policy (2025)", "body": old_policy,
             "author": controller.name, "updated": f"{year - 1}-01-03T10:00:00", "tags": ["finance", "archive"]},
            {"slug": "finance-team", "title": "Finance team", "author": controller.name,
             "updated": f"{year}-02-11T09:00:00", "tags": ["finance"],
             "body": f"# Finance team\n\n- {controller.name}, controller ({controller.email})\n- {me.name}, "
                     f"accounts payable ({me.email})\n\nClaims are audited monthly; see [[expense-policy]]."},
            {"slug": "travel-booking", "title": "Booking travel", "author": controller.name,
             "updated": f"{year}-03-01T09:00:00", "tags": ["travel"],
             "body": "# Booking travel\n\nBook flights and hotels through the travel portal at least 14 days "
                     "ahead. Hotel caps are in [[expense-policy]]."},
        ]

        # -- the mailbox ----------------------------------------------------------------------------------------
        today = month_end + timedelta(days=rng.randint(1, 4))
        while today.weekday() >= 5:
            today += timedelta(days=1)
        request = (
            f"Hi {me.first},\n\nThe {month_name} claims batch is in {book_path} (receipts in {rdir}/). Could you "
            f"audit every open claim against the expense policy on the wiki? Set Decision to Approved or Rejected "
            f"and, for rejected claims, Reason to the policy's reason code (leave Reason empty for approved ones). "
            f"The first rows were decided in last month's run: leave them alone, and please don't change any other "
            f"column.\n\nThen email each employee who has rejected claims (one mail per person) listing their "
            f"rejected claim IDs with the reason codes. No need to write to people whose claims were all "
            f"approved.\n\nThanks,\n{controller.first}"
        )
        noisy = emps[0]
        inbox = [
            {"folder": "Inbox", "sender": controller.email, "sender_name": controller.name, "to": [me.email],
             "subject": f"{MONTHS[(month - 2) % 12].capitalize()} claims batch",
             "body": "Last month's batch is done, thanks! I've marked the decisions in the sheet.",
             "date": f"{first.isoformat()}T09:10:00", "is_read": True},
            {"folder": "Inbox", "sender": noisy.email, "sender_name": noisy.name, "to": [me.email],
             "subject": "My expenses", "body": f"Hi {me.first}, did my claims go in this month? Thanks, {noisy.first}",
             "date": f"{(today - timedelta(days=1)).isoformat()}T14:02:00"},
            {"folder": "Inbox", "sender": controller.email, "sender_name": controller.name, "to": [me.email],
             "subject": f"{month_name} expense claims batch", "body": request,
             "date": f"{today.isoformat()}T08:35:00"},
        ]
        request_id = 3

        def build(root: Path) -> None:
            books.build(root)
            write_files(root / "workspace", receipt_files)
            wiki.create_wiki(root / "state" / "wiki.sqlite", pages, user=me.name, now=f"{today.isoformat()}T09:00:00")
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox,
                                now=f"{today.isoformat()}T09:00:00")

        w = phrasing_rng(self.name, seed)
        ask = say(w, f"Hi, could you audit the {month_name} expense claims batch?",
                  f"Hello, can you take care of auditing the {month_name} expense claims batch?",
                  f"Hi there, the {month_name} expense claims batch needs auditing; could you do it?",
                  f"Could you please audit the {month_name} batch of expense claims?")
        details = say(w, f"{controller.first}'s mail this morning has the details.",
                      f"The details are in {controller.first}'s mail from this morning.",
                      f"{controller.first} sent the details by mail this morning.")
        today_is = say(w, f"Today is {long_date(today)}.", f"For reference, today is {long_date(today)}.",
                       f"(Today's date: {long_date(today)}.)")
        instruction = " ".join([ask, *in_some_order(w, [details, today_is])])
        if level == 1:  # the controller's request in the task
            instruction = " ".join([ask, today_is, (
                f"The batch is in {book_path} (sheet Claims; receipts in {rdir}/). Audit every open claim against "
                f"the expense policy on the wiki (page expense-policy): set Decision to Approved or Rejected and, "
                f"for rejected claims, Reason to the policy's reason code (leave Reason empty for approved ones). "
                f"The first rows were decided in last month's run: leave them alone, and don't change any other "
                f"column. Then email each employee who has rejected claims (one mail per person) listing their "
                f"rejected claim IDs with the reason codes; no need to write to people whose claims were all "
                f"approved.")])

        rejected = [c for c in open_claims if c.code]
        by_emp: dict[str, list[Claim]] = {}
        for c in rejected:
            by_emp.setdefault(c.emp.email, []).append(c)
        row_of = {c.cid: k + 2 for k, c in enumerate(all_rows)}
        kinds = {crit: next(c for c in open_claims if c.kind == k)
                 for crit, k in (("duplicates", "dup"), ("receipts", "receipts"), ("alcohol", "alcohol"),
                                 ("limits", "limits")) if any(c.kind == k for c in open_claims)}
        prev_rejected = next(c for c in prev_batch if c.decided == "Rejected")
        trap_ok = next((c for c in open_claims if c.kind == "ok" and c.category == "Lodging" and c.emp is roles[3]),
                       None) or next(c for c in open_claims if c.kind == "ok")
        all_ok_emp = next(e for e in emps if e.email not in by_emp)

        # -- the reference solution -------------------------------------------------------------------------------
        survey = level > 1  # one employee's batch: straight to the request, the policy, the sheet

        def decisions(codes: dict[str, str | None] | None = None) -> dict[str, str | None]:
            """The sheet's cells: each open claim approved or rejected with its code (``codes``
            overrides a claim's code, for a perturbation)."""
            cells: dict[str, str | None] = {}
            for c in open_claims:
                code = (codes or {}).get(c.cid, c.code)
                r = row_of[c.cid]
                cells[f"J{r}"] = "Rejected" if code else "Approved"
                if code:
                    cells[f"K{r}"] = code
            return cells

        def rejection_body(emp, cs: list[Claim]) -> str:
            lines = "\n".join(f"- {c.cid} ({c.day.isoformat()}, {c.merchant}, ${money(c.amount)}): {c.code}" for c in cs)
            return (f"Hi {emp.first},\n\nThese {month_name} claims were rejected under the expense policy:\n{lines}"
                    f"\n\nThe policy is on the wiki (expense-policy). Reply if you have questions.\n\nThanks,\n{me.first}")

        def solve():
            if survey:
                yield ToolCall("mail__search_messages", {"query": "claims batch", "folder": "Inbox"},
                               "Find finance's request.")
            if level > 1:
                yield ToolCall("mail__read_message", {"message_id": request_id}, "Read what they want.")
            if survey:
                yield ToolCall("wiki__search_pages", {"query": "expense policy"}, "Find the current policy.")
            yield ToolCall("wiki__get_page", {"slug": "expense-policy"}, "Read the current policy.")
            if survey:
                yield ToolCall("sheets__list_sheets", {"path": book_path}, "Size up the batch.")
            yield ToolCall("sheets__read_range", {"path": book_path, "sheet": "Claims"}, "Read every claim.")
            if survey:
                yield ToolCall("files__list_dir", {"path": rdir}, "See the receipts.")
            for rel in to_read:
                yield ToolCall("files__read_file", {"path": rel}, f"Read {rel.rsplit('/', 1)[-1]}.")
            yield ToolCall("sheets__write_cells", {"path": book_path, "sheet": "Claims", "cells": decisions()},
                           "Record every decision and reason code.")
            if survey:
                yield ToolCall("sheets__read_range", {"path": book_path, "sheet": "Claims",
                                                      "range": f"A1:K{len(all_rows) + 1}"}, "Check the sheet.")
            for email, cs in by_emp.items():
                emp = cs[0].emp
                yield ToolCall("mail__send_message", {
                    "to": [email], "subject": f"{month_name} expense claims: rejected items",
                    "body": rejection_body(emp, cs)}, f"Tell {emp.first} what was rejected.")
            return f"Audited {len(open_claims)} claims: {len(rejected)} rejected, {len(by_emp)} employees mailed."

        record = perturb.on("sheets__write_cells", path=book_path)
        kept_approved = {**decisions(), f"J{row_of[prev_rejected.cid]}": "Approved", f"K{row_of[prev_rejected.cid]}": None}
        first_email, first_cs = next(iter(by_emp.items()))
        perturbations = {
            **{crit: perturb.change(solve, record, cells=decisions({c.cid: None})) for crit, c in kinds.items()},
            "receipts_read": perturb.drop(solve, perturb.on("files__read_file", path=to_read[-1])),
            "approvals": perturb.change(solve, record, cells=decisions({trap_ok.cid: OVER})),
            "decided_rows_kept": perturb.change(solve, record, cells=kept_approved),
            "sources_untouched": perturb.insert(solve, ToolCall(
                "files__write_file", {"path": to_read[0], "content": "audited\n"}, "Mark a receipt as audited."),
                before=perturb.on("mail__send_message")),
            "rejection_mails": perturb.change(solve, perturb.on("mail__send_message", to=[first_email]),
                                              body=rejection_body(first_cs[0].emp, first_cs[:-1])),
            "mail_only_claimants": perturb.insert(solve, ToolCall("mail__send_message", {
                "to": [all_ok_emp.email], "subject": f"{month_name} expense claims",
                "body": "All your claims were approved."}, "Let them know too.")),
        }

        # -- grading ----------------------------------------------------------------------------------------------
        orig_grid = None

        def original():
            nonlocal orig_grid
            if orig_grid is None:
                wb = load_workbook(io.BytesIO(books.bytes[book_path]))
                orig_grid = sheet_values(wb, "Claims")
            return orig_grid

        def rows(world):
            t = read_table(world.file(book_path), "Claims")
            if t is None:
                return None
            head, body = t
            heads = [norm_text(h) for h in head]
            if "decision" not in heads or "reason" not in heads or "claim id" not in heads:
                return None
            i_id, i_dec, i_rea = heads.index("claim id"), heads.index("decision"), heads.index("reason")
            out = {}
            for r in body:
                r = list(r) + [None] * (len(heads) - len(r))
                if not blank(r[i_id]):
                    out[str(r[i_id]).strip()] = (r[i_dec], r[i_rea])
            return out

        def decision_ok(v, code) -> bool:
            d = norm_text(v)
            return d.startswith("reject") if code else d.startswith("approv")

        def reason_ok(v, code) -> bool:
            if code is None:
                return blank(v) or norm_text(v) in ("-", "n/a", "na", "none")
            return squash(str(v or "")).startswith(squash(code))

        def judged(kind: str):
            def check(world, traj):
                got = rows(world)
                if got is None:
                    return False, f"{book_path}: no Claims sheet with Claim ID, Decision and Reason columns"
                bad = []
                codes = {squash(c.code) for c in open_claims if c.kind == kind and c.code}
                for c in open_claims:
                    dec, rea = got.get(c.cid, (None, None))
                    if c.kind != kind:  # and no other claim gets this outcome: one verdict for all earns nothing
                        if (kind == "ok" and decision_ok(dec, None)) or any(
                                squash(str(rea or "")).startswith(k) for k in codes):
                            bad.append(f"{c.cid}: {dec!r}/{rea!r} although it is not one of these")
                        continue
                    if not decision_ok(dec, c.code) or not reason_ok(rea, c.code):
                        want = f"Rejected/{c.code}" if c.code else "Approved"
                        bad.append(f"{c.cid}: {dec!r}/{rea!r}, expected {want}")
                return not bad, "; ".join(bad)
            return check

        def decided_kept(world, traj):
            t = read_table(world.file(book_path), "Claims")
            if t is None:
                return False, "the Claims sheet is gone"
            grid = [list(t[0])] + [list(r) for r in t[1]]
            want = original()
            if len(grid) != len(want):
                return False, f"{len(grid)} rows, expected {len(want)}"
            for k, (g, w) in enumerate(zip(grid, want)):
                g = g + [None] * (len(HEADER) - len(g))
                w = w + [None] * (len(HEADER) - len(w))
                cols = range(len(HEADER)) if k == 0 or k <= len(prev_batch) else range(DEC_COL)
                for j in cols:
                    a, b = g[j], w[j]
                    if blank(a) and blank(b):
                        continue
                    if isinstance(b, float) and close(to_number(a), b):
                        continue
                    if a != b:
                        return False, f"row {k + 1}, column {HEADER[j]}: {a!r} (was {b!r})"
            return True

        def names_claim(text: str, cid: str) -> bool:
            return re.search(r"(?<![A-Za-z0-9])C[-\s]?" + cid.split("-")[1] + r"(?!\d)", text, re.I) is not None

        def mails_for(world, email) -> list[dict]:
            return [m for m in mail.sent_messages(world) if email in m["to"] + m["cc"]]

        def rejection_mails(world, traj):
            for email, cs in by_emp.items():
                ms = mails_for(world, email)
                if len(ms) != 1:
                    return False, f"{len(ms)} mails to {email}"
                text = f"{ms[0]['subject']}\n{ms[0]['body']}"
                missing = [c.cid for c in cs if not names_claim(text, c.cid) or squash(c.code) not in squash(text)]
                if missing:
                    return False, f"mail to {email} misses {missing} or their codes"
                others = [c.cid for c in all_rows if c.emp.email != email and names_claim(text, c.cid)]
                if others:
                    return False, f"mail to {email} names other people's claims {others}"
                approved = [c.cid for c in open_claims if c.emp.email == email and not c.code
                            and names_claim(text, c.cid)]
                if approved:
                    return False, f"mail to {email} lists approved claims {approved} as well"
            return True

        def mail_only_claimants(world, traj):
            sends = mails_sent(traj)
            if len(sends) > len(by_emp) + 1:  # one per employee, and perhaps a note back to finance
                return False, f"{len(sends)} mails sent, {len(by_emp)} needed"
            for m in mail.sent_messages(world):
                extra = set(m["to"] + m["cc"]) - set(by_emp) - {controller.email}
                if extra:
                    return False, f"mail {m['id']} went to {sorted(extra)}"
            return True

        def receipts_read(world, traj):
            seen = {norm_path(c.arguments.get("path")) for c in traj.calls("files__read_file", ok_only=True)
                    if isinstance(c.arguments, dict)}
            missing = [r for r in to_read if r not in seen]
            return not missing, f"receipts never read: {missing}"

        receipts_untouched = files_kit.untouched(receipt_files).check

        def sources_untouched(world, traj):  # the kit's guard over the receipts, and the wiki left alone
            wiki_writes = [c.name for c in traj.tool_calls if not c.is_error and c.app == "wiki"
                           and c.tool in ("create_page", "update_page", "rename_page", "add_tag", "remove_tag")]
            return (False, f"wrote to the wiki: {wiki_writes}") if wiki_writes else receipts_untouched(world, traj)

        criteria = [
            Criterion("duplicates", "claims repeating an earlier one (also from last month) are Rejected as DUPLICATE, "
                      "and no other claim is",
                      "final_state", judged("dup"), 1.0),
            Criterion("receipts", "a required receipt missing, or not matching the amount, gives NO_RECEIPT / "
                      "RECEIPT_MISMATCH, and no other claim gets those codes", "final_state", judged("receipts"), 1.0),
            Criterion("alcohol", "the claim whose receipt has alcohol is Rejected as ALCOHOL, no other", "final_state",
                      judged("alcohol"), 1.0),
            Criterion("limits", "over the daily meal cap"
                      + (" (also two meals on one day together)" if trap_claims["same_day_over"] else "")
                      + " or the city's hotel rate gives OVER_LIMIT, and nothing else does", "final_state",
                      judged("limits"), 2.0),
            Criterion("approvals", "every claim no rule catches is Approved with an empty reason ("
                      + ", ".join([*(["small claims without receipts"] if trap_claims["small_no_receipt"] else []),
                                   *(["a meal with an alcohol-free drink"] if trap_claims["alcohol_free_drink"]
                                     else []), "hotels under their tier's cap"])
                      + "), and no other claim is", "final_state", judged("ok"), 2.0),
            Criterion("decided_rows_kept", "last month's decided rows and every other column are unchanged",
                      "final_state", decided_kept, 1.0, guard=True),
            Criterion("rejection_mails", "one mail to each employee with rejections, listing each rejected claim "
                      "with its code, and neither their approved claims nor anyone else's", "final_state",
                      rejection_mails, 2.0),
            Criterion("mail_only_claimants", "no mail to employees whose claims were all approved, nor to anyone "
                      "else (finance may be copied)", "process", mail_only_claimants, 1.0, guard=True),
            Criterion("receipts_read", "every receipt attached to an open claim was read", "process",
                      receipts_read, 1.0, requires=tuple(k for k in ("receipts", "alcohol", "limits") if k in kinds)),
            Criterion("sources_untouched", "receipts and wiki pages unchanged and not written", "process",
                      sources_untouched, 1.0, guard=True),
        ]
        # a code no open claim earns has no criterion (level 1 has no caps to break; a batch may have no alcohol)
        criteria = [c for c in criteria if c.id not in ("duplicates", "receipts", "alcohol", "limits") or c.id in kinds]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"book": book_path, "decisions": {c.cid: c.code or "Approved" for c in open_claims},
                  "mailed": sorted(by_emp), **{t: [c.cid for c in cs] for t, cs in trap_claims.items()}},
        )
