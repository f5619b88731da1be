"""Expense reports: build a month's expense report from receipts and the card statement.

The workspace holds the card statement (a workbook), a folder of receipt scans as text files
with uninformative names (two from last month, perhaps one a duplicate), the current expense
policy and last year's superseded copy. Finance's mail gives the report format. Every card line
(except the card payment) becomes a report row: matched to its receipt by date and amount,
categorised per the policy (two Amazon orders differ only in what the receipts say was
bought), and given a status: Not reimbursable (personal, alcohol), Missing receipt (charges of
$25 or more without one), Over limit (hotel rate or meal over the cap) or OK. A summary
sheet totals what is reimbursable now; the workbook goes to finance, the manager copied.

Which traps a statement carries is drawn per seed (``TRAPS``): wine at the client dinner or an
alcohol-free drink, a personal online order or a second office one, a refund, a duplicate receipt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path

from openpyxl import Workbook

from longhorizon.apps.mail import state as mail
from longhorizon.apps.mail.state import parse_address
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.analytics import mentions_number
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    MONTHS,
    Files,
    People,
    blank,
    close,
    company,
    mails_sent,
    norm_text,
    read_table,
    rng_and_faker,
    to_number,
    write_files,
)
from longhorizon.tasks.expenses import money
from longhorizon.tasks.kit import files as files_kit, perturb

CATEGORIES = ["Airfare", "Lodging", "Ground Transport", "Meals", "Office Supplies", "Software", "Personal"]
OK, OVER, MISSING, NOT_REIMB = "OK", "Over limit", "Missing receipt", "Not reimbursable"
REPORT_HEADER = ["Date", "Merchant", "Amount", "Category", "Receipt", "Status"]
SUMMARY_HEADER = ["Category", "Reimbursable"]
RECEIPT_LIMIT = 25.0
NO_RECEIPT = {"", "none", "-", "n/a", "na", "missing", "no receipt", "no", "not required"}

AIRLINES = [("SKYLINE AIR", "Skyline Air"), ("BLUE HARBOR AWYS", "Blue Harbor Airways"),
            ("NORTHSTAR AIRL", "Northstar Airlines"), ("SUMMIT JET", "Summit Jet")]
TRIP_CITIES = [("Denver", "DEN"), ("Chicago", "CHI"), ("Seattle", "SEA"), ("Austin", "AUS"), ("Boston", "BOS"),
               ("Atlanta", "ATL")]
HOTELS = ["Harborview Hotel", "Linden Suites", "Meridian Grand", "Parkside Inn", "Copper Lodge"]
RIDES = [("UBER *TRIP", "Uber"), ("LYFT *RIDE", "Lyft")]
COFFEE = [("SQ *BLUE BOTTLE COFFEE", "Blue Bottle Coffee"), ("SQ *RITUAL ROASTERS", "Ritual Roasters"),
          ("STARBUCKS STORE 0482", "Starbucks")]
CASUAL = [("SHAKE SHACK 0421", "Shake Shack"), ("SWEETGREEN 118", "Sweetgreen"),
          ("TST* THE GREEN FORK", "The Green Fork"), ("CAVA 2231", "Cava")]
UPSCALE = [("OLIVE & VINE BISTRO", "Olive & Vine Bistro"), ("TST* NORTH END TAVERN", "North End Tavern"),
           ("MAPLE & ASH", "Maple & Ash"), ("TST* HARVEST TABLE", "Harvest Table")]
FOOD = [("Grain bowl", 14.5), ("Chicken sandwich", 13.0), ("Caesar salad", 12.0), ("Burger", 16.0),
        ("Salmon", 29.0), ("Ribeye", 46.0), ("Pasta primavera", 22.0), ("Tacos (3)", 15.0), ("Soup of the day", 8.0),
        ("Sparkling water", 4.0), ("Iced tea", 3.5), ("Fries", 5.5)]
ALCOHOL = [("House Cabernet (glass)", 14.0), ("IPA draft", 8.0), ("Old Fashioned", 15.0),
           ("Pinot Grigio (glass)", 13.0)]
MOCKTAILS = [("Virgin Mojito", 7.0), ("Shirley Temple", 5.5), ("Alcohol-free spritz", 8.0), ("Virgin Mary", 7.5)]
"""Drinks that read like a bar order but hold no alcohol: the dinner is judged by the meal limit."""
TRAPS = ("alcohol", "personal_order", "refund", "duplicate_receipt")
"""The traps drawn per seed at levels 2-3 (level 1 keeps all of its own): wine at the client
dinner (else an alcohol-free drink), a personal online order beside the office one (else two
office orders), an office-store refund, a second copy of one receipt. The missing ride receipt,
the card payment, last month's receipts and the superseded policy are in every instance; the
hotel is over its cap or not, and a dinner over the meal limit comes when the hotel is not."""
OFFICE_ITEMS = [("USB-C hub, 7-in-1", 39.99), ("Wireless keyboard", 54.99), ("Laptop stand", 32.5),
                ("HDMI cable 2m", 11.99), ("Noise-cancelling headset", 89.0), ("Webcam 1080p", 49.99)]
PERSONAL_ITEMS = [("Dog chew toys (4-pack)", 18.99), ("Yoga mat", 29.95), ("Kids' rain boots", 34.0),
                  ("Scented candle set", 24.5), ("Board game: Catan", 44.0)]
SOFTWARE = [("ADOBE *CREATIVE CLD", "Adobe", "Creative Cloud - All Apps (monthly)", 59.99),
            ("FIGMA MONTHLY", "Figma", "Figma Professional - 1 editor", 15.0),
            ("ZOOM.US 888-799-9666", "Zoom", "Zoom Pro (monthly)", 16.99),
            ("GITHUB INC", "GitHub", "GitHub Team - 1 seat", 4.0)]
PERSONAL_SUBS = [("NETFLIX.COM", 15.49), ("SPOTIFY USA", 11.99), ("PLANET FITNESS", 29.99), ("HULU 877-8244858", 17.99)]


@dataclass
class Line:
    trans: date
    desc: str
    amount: float
    category: str
    status: str
    receipt: str | None = None
    text: str | None = None
    note: str = ""


def _date_text(rng: random.Random, d: date, with_time: bool = False) -> str:
    t = f" {rng.randint(7, 21):02d}:{rng.randrange(60):02d}" if with_time else ""
    style = rng.randrange(4)
    if style == 0:
        return d.isoformat() + t
    if style == 1:
        return d.strftime("%m/%d/%Y") + t
    if style == 2:
        return f"{MONTHS[d.month - 1][:3].capitalize()} {d.day}, {d.year}" + t
    return f"{d.day} {MONTHS[d.month - 1].capitalize()} {d.year}" + t


def _status_for(category: str, amount: float, has_receipt: bool, over: bool, alcohol: bool) -> str:
    """The policy's status, in its order of precedence."""
    if category == "Personal" or alcohol:
        return NOT_REIMB
    if amount >= RECEIPT_LIMIT and not has_receipt:
        return MISSING
    if over:
        return OVER
    return OK


def _policy_text(meal_limit: int, hotel_cap: int, effective: str, last4: str) -> str:
    return f"""# Employee expense policy

Effective {effective}. Replaces all earlier versions.

## Categories
Use exactly one of these for every card line:
- Airfare: airline tickets, seat and bag fees.
- Lodging: hotels and other accommodation while travelling.
- Ground Transport: taxis, rideshare (Uber, Lyft), trains, parking and tolls.
- Meals: food and drink while travelling or with clients (coffee included).
- Office Supplies: stationery and small equipment for work (under $500), and any refunds of them.
- Software: subscriptions and licences used for work.
- Personal: anything not for work: streaming and music services, gyms, groceries, household or
  personal shopping. Online orders are categorised by what was bought (check the receipt).

## Limits
- Lodging: the nightly room rate (before taxes) may not exceed ${hotel_cap}.
- Meals: at most ${meal_limit} per receipt, including tax and tip.
- Alcohol is never reimbursable: a receipt that includes any alcoholic drink is not reimbursable at all.

## Receipts
A receipt is required for every charge of ${RECEIPT_LIMIT:.2f} or more. Charges under ${RECEIPT_LIMIT:.2f} and
credits/refunds need none. The corporate card is the Visa ending {last4}.

## Status of each line
Give every report line one status, taking the first that applies:
1. {NOT_REIMB} - Personal category, or alcohol on the receipt.
2. {MISSING} - a charge of ${RECEIPT_LIMIT:.2f} or more with no receipt.
3. {OVER} - above a limit above.
4. {OK} - everything else.
Only lines with status {OK} are reimbursed with the monthly report; the rest go to review.
"""


@register
class MonthlyExpenseReport(TaskFamily):
    name = "monthly_expense_report"
    category = "expense reports"
    apps = ("mail", "files", "sheets")
    description = (
        "Build a month's expense report: match receipt files to card-statement lines, categorise "
        "per the expense policy, flag personal/alcohol, missing-receipt and over-limit lines, total "
        "what is reimbursable, and mail the workbook to finance with the manager copied."
    )

    levels = 3
    """1: four card lines (the dinner with wine, a ride with no receipt, a small office purchase, a
    streaming service): one receipt to read; 2: those, the flight, the hotel and the two online
    orders (one office, one perhaps personal); 3 (default): the month's whole statement. Every level
    keeps the card payment, the ride without a receipt, last month's receipts and the superseded
    policy; levels 2-3 draw the other traps (``TRAPS``), level 1 keeps them all."""
    toolsets = {1: (
        "files__list_dir", "files__read_file", "mail__send_message", "sheets__create_workbook", "sheets__read_range",
        "sheets__write_rows",
    )}
    """Level 1 gives finance's format (and the statement's sheet) in the task: no mail to find or read."""

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        our_company, domain = company(fake)
        me, manager, controller = people.make(domain), people.make(domain), people.make(domain)
        finance_box = f"expenses@{domain}"
        year, month = 2026, rng.randint(2, 11)
        first = date(year, month, 1)
        last = date(year, month + 1, 1) - timedelta(days=1)
        ym = first.strftime("%Y-%m")
        month_name = f"{MONTHS[month - 1].capitalize()} {year}"
        meal_limit = rng.choice([60, 75, 80])
        hotel_cap = rng.choice([180, 200, 220, 240])
        last4 = f"{rng.randint(1000, 9999)}"
        report = f"expenses/{ym}_expense_report.xlsx"
        statement = f"card/statement_{ym}.xlsx"
        policy_path = "policies/expense_policy.md"
        old_policy_path = "policies/archive/expense_policy_2025.md"

        drawn = {t for t in TRAPS if rng.random() < 0.6}  # at every level, so that the draws after it agree
        while len(drawn) < 2:  # at least 2 of them
            drawn.add(rng.choice(TRAPS))
        traps = set(TRAPS) if level == 1 else drawn  # level 1 keeps all of its own

        lines: list[Line] = []
        used: set[tuple[str, float]] = set()
        names: set[str] = set()

        def fname() -> str:
            while True:
                n = rng.choice([f"IMG_{rng.randint(1000, 9999)}.txt", f"scan_{rng.randint(1, 999):04d}.txt",
                                f"receipt_{rng.randint(100, 999)}.txt", f"doc{rng.randint(10000, 99999)}.txt"])
                if n not in names:
                    names.add(n)
                    return n

        def add(d: date, desc: str, amount: float, category: str, *, text: str | None = None, over=False,
                alcohol=False, note: str = "") -> Line:
            amount = round(amount, 2)
            while (d.isoformat(), amount) in used:
                amount = round(amount + 0.37, 2)
            used.add((d.isoformat(), amount))
            receipt = fname() if text is not None else None
            status = _status_for(category, amount, receipt is not None or amount < 0, over, alcohol)
            line = Line(d, desc, amount, category, status, receipt, text, note)
            lines.append(line)
            return line

        def day(lo: int, hi: int) -> date:
            return first + timedelta(days=rng.randint(lo, hi))

        # the trip --------------------------------------------------------------------------
        trip_city, trip_code = rng.choice(TRIP_CITIES)
        nights = rng.randint(2, 3)
        d0 = day(7, last.day - nights - 3)
        d_end = d0 + timedelta(days=nights)
        air_desc, air_name = rng.choice(AIRLINES)
        fare = round(rng.uniform(220, 520), 2)
        taxes = round(fare * 0.075 + 11.2, 2)
        air_amount = round(fare + taxes, 2)
        air_day = max(first, d0 - timedelta(days=rng.randint(6, 12)))
        pnr = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6))
        add(air_day, f"{air_desc} {rng.randint(1000000, 9999999)}", air_amount, "Airfare", text=(
            f"{air_name.upper()} - E-TICKET RECEIPT\nBooking reference: {pnr}\nIssued: {_date_text(rng, air_day)}\n"
            f"Passenger: {me.name.upper()}\n\nItinerary\n  {d0.isoformat()}  HOME -> {trip_code}\n"
            f"  {d_end.isoformat()}  {trip_code} -> HOME\n\nBase fare      {money(fare)}\n"
            f"Taxes and fees  {money(taxes)}\nTOTAL USD      {money(air_amount)}\n"
            f"Form of payment: VISA XXXX{last4}\n"))

        hotel = rng.choice(HOTELS)
        hotel_over = rng.random() < 0.5
        rate = float(hotel_cap + rng.randint(9, 45) if hotel_over else hotel_cap - rng.randint(5, 50))
        room = rate * nights
        htax = round(room * 0.145, 2)
        h_amount = round(room + htax, 2)
        add(d_end, f"{hotel.upper()} {trip_code}", h_amount, "Lodging", over=hotel_over, text=(
            f"{hotel} {trip_city}\nGUEST FOLIO\n\nGuest: {me.name}\nArrival: {_date_text(rng, d0)}\n"
            f"Departure: {_date_text(rng, d_end)}\nNights: {nights}\nRoom rate: {money(rate)} per night\n\n"
            f"Room charges   {money(room)}\nOccupancy tax  {money(htax)}\nTotal          {money(h_amount)}\n"
            f"Paid: VISA ending {last4}\nBalance: 0.00\n"))

        ride_desc, ride_name = rng.choice(RIDES)
        rides = [(d0, "Airport to hotel"), (d0 + timedelta(days=1), "Hotel to client office"),
                 (d_end, "Hotel to airport")]
        missing_ride = rng.randrange(len(rides))
        for k, (rd, route) in enumerate(rides):
            amt = round(rng.uniform(26, 58), 2) if k in (0, 2, missing_ride) else round(rng.uniform(9, 22), 2)
            tip = round(amt * 0.15, 2)
            txt = None if k == missing_ride else (
                f"{ride_name}\nThanks for riding, {me.first}\n{_date_text(rng, rd, True)}\n{route}, {trip_city}\n\n"
                f"Trip fare   {money(amt - tip)}\nTip         {money(tip)}\nTotal       ${money(amt)}\n"
                f"Charged to Visa ••••{last4}\n")
            add(rd, ride_desc, amt, "Ground Transport", text=txt)
        park = round(rng.choice([12, 15, 18, 24]) * (nights + 1) + 0.0, 2)
        add(d_end, "AIRPORT PARKING T2", park, "Ground Transport", text=(
            f"AIRPORT PARKING - TERMINAL 2\nEntry: {_date_text(rng, d0, True)}\nExit: {_date_text(rng, d_end, True)}\n"
            f"Days: {nights + 1}\nAMOUNT PAID: {money(park)}\nVISA {last4}\n"))

        def meal_receipt(name: str, d: date, items: list[tuple[str, float]], tip_rate: float) -> tuple[str, float]:
            sub = round(sum(p for _, p in items), 2)
            tax = round(sub * 0.0875, 2)
            tip = round((sub + tax) * tip_rate, 2)
            total = round(sub + tax + tip, 2)
            body = "\n".join(f"{n:<26}{money(p):>8}" for n, p in items)
            return (f"{name}\n{fake.street_address()}, {trip_city}\n{_date_text(rng, d, True)}\n"
                    f"Server: {fake.first_name()}   Table {rng.randint(1, 40)}\n\n{body}\n\n"
                    f"Subtotal{money(sub):>26}\nTax{money(tax):>31}\nTip{money(tip):>31}\n"
                    f"TOTAL{money(total):>29}\nVISA ****{last4}\n"), total

        rests = [rng.choice(CASUAL)] + rng.sample(UPSCALE, 2)
        c_desc, c_name = rng.choice(COFFEE)
        c_items = [("Cappuccino", 4.75), ("Almond croissant", 4.5)]
        c_text, c_total = meal_receipt(c_name, d0 + timedelta(days=1), c_items, 0.0)
        add(d0 + timedelta(days=1), c_desc, c_total, "Meals", text=c_text if rng.random() < 0.5 else None)
        lunch = rng.sample(FOOD[:4], 1) + [rng.choice(FOOD[9:])]
        l_text, l_total = meal_receipt(rests[0][1], d0 + timedelta(days=1), lunch, 0.18)
        if l_total < RECEIPT_LIMIT:
            lunch.append(("Soup of the day", 8.0))
            l_text, l_total = meal_receipt(rests[0][1], d0 + timedelta(days=1), lunch, 0.18)
        add(d0 + timedelta(days=1), rests[0][0], l_total, "Meals", text=l_text)
        wine = [rng.choice(FOOD[4:8]), rng.choice(ALCOHOL if "alcohol" in traps else MOCKTAILS)]
        w_text, w_total = meal_receipt(rests[1][1], d0, wine, 0.2)
        add(d0, rests[1][0], w_total, "Meals", text=w_text, alcohol="alcohol" in traps,
            over=w_total > meal_limit, note="client dinner")
        if not hotel_over or rng.random() < 0.5:  # a dinner over the meal limit, no alcohol
            big = [("Ribeye", 46.0), ("Salmon", 29.0), ("Fries", 5.5), ("Sparkling water", 4.0)]
            while True:
                b_text, b_total = meal_receipt(rests[2][1], d0 + timedelta(days=2 if nights > 2 else 1), big, 0.2)
                if b_total > meal_limit + 2:
                    break
                big.append(("Caesar salad", 12.0))
            add(d0 + timedelta(days=2 if nights > 2 else 1), rests[2][0], b_total, "Meals", text=b_text, over=True)

        # office, software, personal -----------------------------------------------------------
        amz = "AMZN MKTP US*" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6))

        def order(items: list[tuple[str, float]], d: date) -> tuple[str, float]:
            sub = round(sum(p for _, p in items), 2)
            tax = round(sub * 0.07, 2)
            total = round(sub + tax, 2)
            listed = "\n".join(f"  1 x {n}  ${money(p)}" for n, p in items)
            return (f"Amazon.com order confirmation\nOrder #{rng.randint(100, 999)}-{rng.randint(1000000, 9999999)}\n"
                    f"Order placed: {_date_text(rng, d)}\nShip to: {me.name}\n\nItems:\n{listed}\n\n"
                    f"Item(s) subtotal: ${money(sub)}\nEstimated tax: ${money(tax)}\nOrder total: ${money(total)}\n"
                    f"Payment: Visa ending in {last4}\n"), total

        od = day(1, last.day - 2)
        o_text, o_total = order(rng.sample(OFFICE_ITEMS[:3], 1) + rng.sample(OFFICE_ITEMS[3:], 1), od)
        add(od, amz, o_total, "Office Supplies", text=o_text)
        pd = day(1, last.day - 2)
        personal = "personal_order" in traps  # else a second order for the office
        p_text, p_total = order(rng.sample(PERSONAL_ITEMS if personal else OFFICE_ITEMS, 2), pd)
        add(pd, "AMZN MKTP US*" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6)),
            p_total, "Personal" if personal else "Office Supplies", text=p_text,
            note="personal order" if personal else "")
        store = rng.choice(["STAPLES 00123", "OFFICE DEPOT 567"])
        add(day(0, last.day - 1), store, round(rng.uniform(6, 23), 2), "Office Supplies")
        if "refund" in traps:
            add(day(2, last.day - 1), store, -round(rng.uniform(19, 60), 2), "Office Supplies", note="refund")
        for desc, name, plan, price in rng.sample(SOFTWARE, 2):
            sd = day(0, 27)
            txt = None
            if price >= RECEIPT_LIMIT:
                txt = (f"{name} - Invoice\nInvoice date: {_date_text(rng, sd)}\nBill to: {me.name}, {our_company}\n"
                       f"{plan}\nAmount due: USD {money(price)}\nPaid with Visa ****{last4}\n")
            add(sd, desc, price, "Software", text=txt)
        for desc, price in rng.sample(PERSONAL_SUBS, 2):
            add(day(0, 27), desc, price, "Personal")

        if level < self.levels:  # the same draws, then a shorter statement
            kept = [next(ln for ln in lines if ln.note == "client dinner"),
                    next(ln for ln in lines if ln.category == "Ground Transport" and ln.text is None),
                    next(ln for ln in lines if ln.desc == store and ln.amount > 0),
                    next(ln for ln in lines if ln.category == "Personal" and ln.text is None)]
            if level == 2:
                kept += [ln for ln in lines if ln.category in ("Airfare", "Lodging") or ln.desc.startswith("AMZN")]
            lines[:] = [ln for ln in lines if ln in kept]

        # statement rows, receipts and distractors ----------------------------------------------
        lines.sort(key=lambda ln: (ln.trans, ln.amount))
        payment_day = day(20, last.day - 1)
        prev_total = round(rng.uniform(900, 2600), 2)

        stmt_rows = []
        for ln in lines:
            post = ln.trans + timedelta(days=rng.choice([0, 1, 1, 2]))
            stmt_rows.append([ln.trans.isoformat(), min(post, last).isoformat(), ln.desc, ln.amount,
                              f"{rng.randint(10**11, 10**12 - 1)}"])
        stmt_rows.append([payment_day.isoformat(), payment_day.isoformat(), "PAYMENT - THANK YOU", -prev_total,
                          f"{rng.randint(10**11, 10**12 - 1)}"])
        stmt_rows.sort(key=lambda r: (r[1], r[0], r[2]))

        def statement_book() -> Workbook:
            wb = Workbook()
            ws = wb.active
            ws.title = "Transactions"
            ws.append(["Trans Date", "Post Date", "Description", "Amount", "Reference"])
            for r in stmt_rows:
                ws.append(r)
            ws2 = wb.create_sheet("Account")
            ws2.append(["Card", f"Visa ending {last4}"])
            ws2.append(["Cardholder", me.name])
            ws2.append(["Statement period", f"{first.isoformat()} to {last.isoformat()}"])
            ws2.append(["Previous balance", prev_total])
            return wb

        receipt_files: dict[str, str] = {ln.receipt: ln.text for ln in lines if ln.receipt}
        dup_of = rng.choice([ln for ln in lines if ln.receipt and ln.category in ("Meals", "Ground Transport")])
        dup_name = dup_of.receipt.replace(".txt", " (1).txt")
        if "duplicate_receipt" in traps:
            receipt_files[dup_name] = dup_of.text
        else:
            dup_of, dup_name = None, ""
        prev_month_last = first - timedelta(days=1)
        for _ in range(2):  # last month's receipts that were already claimed
            sd = prev_month_last - timedelta(days=rng.randint(0, 20))
            r_desc, r_name = rng.choice(CASUAL + UPSCALE)
            txt, _ = meal_receipt(r_name, sd, rng.sample(FOOD[:9], 1) + rng.sample(FOOD[9:], 1), 0.18)
            receipt_files[fname()] = txt
        receipt_files = dict(sorted(receipt_files.items()))
        old_policy = _policy_text(meal_limit - 15, hotel_cap - 20, "January 1, 2025", last4).replace(
            "Replaces all earlier versions.", "Superseded.")
        policy = _policy_text(meal_limit, hotel_cap, f"January 1, {year}", last4)

        def make_files() -> dict:
            return {statement: statement_book()}

        books = Files(make_files)
        texts = {f"receipts/{n}": t for n, t in receipt_files.items()}
        texts[policy_path] = policy
        texts[old_policy_path] = old_policy

        # the request -----------------------------------------------------------------------------
        at = lambda d, h, m: datetime.combine(d, time(h, m)).isoformat()  # noqa: E731
        today = last + timedelta(days=rng.randint(2, 5))
        while today.weekday() >= 5:
            today += timedelta(days=1)
        request = (
            f"Hi {me.first},\n\nA reminder that {month_name} expense reports are due this week. Please send yours to "
            f"{finance_box} as a workbook saved at {report} with two sheets:\n\n"
            f"- \"Report\": header row {' | '.join(REPORT_HEADER)}, then one row per line on your {month_name} card "
            f"statement ({statement}), oldest first; Date is the transaction date. Leave out the card payment "
            f"itself but keep refunds (as negative amounts). Receipt is the file name of the matching receipt from receipts/, or "
            f"None when there isn't one. Category and Status exactly as defined in the expense policy.\n"
            f"- \"Summary\": header row {' | '.join(SUMMARY_HEADER)}, one row per category with the total of its "
            f"OK lines (categories with no OK lines can be left out), then a Total row.\n\n"
            f"Please put the total reimbursable amount in the body of the mail, and copy your manager if "
            f"anything is flagged, so they can review it.\n\nThanks,\n{controller.name}\nFinance"
        )
        prev_month_name = f"{MONTHS[(month - 2) % 12].capitalize()} {year}"
        inbox = [
            {"folder": "Inbox", "sender": controller.email, "sender_name": controller.name, "to": [me.email],
             "subject": f"{prev_month_name} expense reports due",
             "body": f"Hi all, {prev_month_name} reports are due Friday. Same format as always.\n\n{controller.first}",
             "date": at(first + timedelta(days=1), 9, 0), "is_read": True},
            {"folder": "Inbox", "sender": manager.email, "sender_name": manager.name, "to": [me.email],
             "subject": f"{trip_city} trip",
             "body": (f"Thanks for covering the {trip_city} client visit. Remember the new policy limits apply "
                      f"this year - the 2025 version in the archive is out of date.\n\n{manager.first}"),
             "date": at(d_end + timedelta(days=1), 17, 10), "is_read": True},
            {"folder": "Inbox", "sender": controller.email, "sender_name": controller.name, "to": [me.email],
             "subject": f"{month_name} expense reports due", "body": request, "date": at(today, 8, 30)},
        ]

        def build(root: Path) -> None:
            books.build(root)
            write_files(root / "workspace", texts)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox,
                                now=at(today, 9, 0))

        w = phrasing_rng(self.name, seed)
        chased = say(w, f"Finance chased me for my {month_name} expense report.",
                     f"Finance has been chasing me for my {month_name} expense report.",
                     f"Finance has been after me for my {month_name} expense report.")
        ask = say(w, "Could you put it together from my card statement and the receipts in the workspace and send it "
                     "off as they asked?",
                  "Can you build it from my card statement and the receipts in the workspace, then send it off the "
                  "way they asked?",
                  "Please put it together from the card statement and receipts in my workspace and send it off as "
                  "they asked.")
        fmt = say(w, "Their mail has the format.", "The format is in their mail.",
                  "They gave the format in their mail.")
        keep = say(w, "Please don't edit the statement, the receipts or the policy files.",
                   "The statement, the receipts and the policy files must stay unedited.",
                   "Leave the statement, the receipts and the policy files as they are.")
        instruction = " ".join([chased, ask, *in_some_order(w, [fmt, keep])])
        if level == 1:  # finance's request in the task
            instruction = " ".join([chased, (
                f"Please send it to {finance_box} as a workbook saved at {report} with two sheets. \"Report\": header "
                f"row {' | '.join(REPORT_HEADER)}, then one row per line on my card statement ({statement}, sheet "
                f"Transactions), oldest first; Date is the transaction date. Leave out the card payment itself but "
                f"keep refunds (as negative amounts). Receipt is the file name of the matching receipt from "
                f"receipts/, or None when there isn't one. Category and Status exactly as defined in the current "
                f"expense policy. \"Summary\": header row {' | '.join(SUMMARY_HEADER)}, one row per category with "
                f"the total of its OK lines, then a Total row. Put the total reimbursable amount in the mail's body, "
                f"and copy my manager, {manager.name} ({manager.email}), if anything is flagged."), keep])

        reimbursable: dict[str, float] = {}
        for ln in lines:
            if ln.status == OK:
                reimbursable[ln.category] = round(reimbursable.get(ln.category, 0.0) + ln.amount, 2)
        total = round(sum(reimbursable.values()), 2)
        flagged = any(ln.status != OK for ln in lines)
        dups = {ln.receipt: {ln.receipt} | ({dup_name} if ln is dup_of else set()) for ln in lines if ln.receipt}

        # ---- oracle ------------------------------------------------------------------------
        survey = level > 1  # four lines: straight to the request, the policy, the statement, the one receipt
        to_read = list(receipt_files) if survey else sorted(ln.receipt for ln in lines if ln.receipt)
        miscategorised = next((ln for ln in lines if ln.category == "Ground Transport" and ln.desc.startswith("AIRPORT")),
                        None) or next(ln for ln in lines if ln.category == "Ground Transport")
        unmatched = next((ln for ln in lines if ln.receipt and ln.category == "Airfare"), None) or next(
            ln for ln in lines if ln.receipt)
        left_out = "Office Supplies" if "Office Supplies" in reimbursable else sorted(reimbursable)[0]

        def report_table(tweak=lambda ln, row: row, extra=(), head=tuple(REPORT_HEADER)) -> list[list]:
            """The Report sheet: the header and one row per card line (``tweak``, ``extra`` and
            ``head`` change it for a perturbation)."""
            rows = [tweak(ln, [ln.trans.isoformat(), ln.desc, ln.amount, ln.category, ln.receipt or "None", ln.status])
                    for ln in lines]
            return [list(head), *rows, *extra]

        def summary_table(skip: str | None = None) -> list[list]:
            summary = [[c, v] for c, v in sorted(reimbursable.items()) if c != skip]
            return [list(SUMMARY_HEADER), *summary, ["Total", total if skip is None else round(sum(v for _, v in summary), 2)]]

        n_flag = sum(1 for ln in lines if ln.status != OK)
        flagged_line = next((ln for ln in lines if ln.note == "client dinner" and ln.status != OK), None) or next(
            ln for ln in lines if ln.status == MISSING)

        def mail_body(amount: float) -> str:
            return (f"Hi,\n\nAttached is my {month_name} expense report. Total reimbursable: ${money(amount)}. "
                    f"{n_flag} line(s) are flagged for review.\n\nThanks,\n{me.first}")

        def solve():
            if survey:
                yield ToolCall("mail__search_messages", {"query": "expense", "folder": "Inbox"},
                               "Find finance's request.")
            if level > 1:
                yield ToolCall("mail__read_message", {"message_id": 3}, "Read this month's request.")
            if survey:
                yield ToolCall("mail__read_message", {"message_id": 2}, "Read the note about the policy.")
                yield ToolCall("files__list_dir", {"path": ".", "recursive": True},
                               "See what is in the workspace.")
            yield ToolCall("files__read_file", {"path": policy_path}, "Read the current expense policy.")
            if level == self.levels:  # a long statement: its size and card first
                yield ToolCall("sheets__list_sheets", {"path": statement}, "Size up the statement.")
                yield ToolCall("sheets__read_range", {"path": statement, "sheet": "Account"}, "Card details.")
            yield ToolCall("sheets__read_range", {"path": statement, "sheet": "Transactions"},
                           "Read every card line.")
            for name in to_read:
                yield ToolCall("files__read_file", {"path": f"receipts/{name}"}, f"Read receipt {name}.")
            yield ToolCall("sheets__create_workbook", {"path": report, "sheets": ["Report", "Summary"]},
                           f"Create {report}.")
            yield ToolCall("sheets__write_rows", {"path": report, "sheet": "Report", "start_cell": "A1",
                                                  "rows": report_table()}, "Write the report lines.")
            yield ToolCall("sheets__write_rows", {"path": report, "sheet": "Summary", "start_cell": "A1",
                                                  "rows": summary_table()}, "Write the summary.")
            if survey:
                yield ToolCall("sheets__read_range", {"path": report, "sheet": "Report"}, "Check the report.")
                yield ToolCall("sheets__read_range", {"path": report, "sheet": "Summary"}, "Check the summary.")
            yield ToolCall("mail__send_message", {
                "to": [finance_box], "cc": [manager.email] if flagged else [],
                "subject": f"{month_name} expense report - {me.name}", "body": mail_body(total),
                "attachments": [report]}, "Send the report to finance.")
            return f"Sent the {month_name} report: {len(lines)} lines, ${money(total)} reimbursable."

        lines_sheet = perturb.on("sheets__write_rows", path=report, sheet="Report")
        to_finance = perturb.on("mail__send_message", to=[finance_box])

        def rows_with(**kw):
            return perturb.change(solve, lines_sheet, rows=report_table(**kw))

        payment = [payment_day.isoformat(), "PAYMENT - THANK YOU", -prev_total, "Personal", "None", NOT_REIMB]
        perturbations = {
            "categories": rows_with(tweak=lambda ln, r: [*r[:3], "Meals", *r[4:]] if ln is miscategorised else r),
            "statuses": rows_with(tweak=lambda ln, r: [*r[:5], OK] if ln is flagged_line else r),
            "receipts_matched": rows_with(tweak=lambda ln, r: [*r[:4], "None", r[5]] if ln is unmatched else r),
            "report_rows": rows_with(extra=[payment]),
            "report_layout": rows_with(head=(*REPORT_HEADER[:4], "Receipt File", *REPORT_HEADER[5:])),
            "summary": perturb.change(solve, perturb.on("sheets__write_rows", path=report, sheet="Summary"),
                                      rows=summary_table(skip=left_out)),
            "sources_untouched": perturb.insert(solve, ToolCall(
                "files__write_file", {"path": f"receipts/{next(iter(receipt_files))}", "content": "matched\n"},
                "Mark a receipt as used."), before=to_finance),
            "mail_finance": perturb.change(solve, to_finance, body=mail_body(total + 100)),
            "manager_copied": perturb.change(solve, to_finance, cc=[]),
            "one_mail": perturb.insert(solve, ToolCall("mail__send_message", {
                "to": [manager.email], "subject": "Expenses", "body": "Sent my expenses."}, "Let my manager know.")),
        }

        # ---- grading -----------------------------------------------------------------------
        expected = {(ln.trans.isoformat(), ln.amount): ln for ln in lines}

        def table(path: Path, sheet: str):
            t = read_table(path, sheet)
            if t is None:
                return None
            head, rows = t
            return head, [list(r) + [None] * (6 - len(r)) for r in rows if not all(blank(v) for v in r)]

        def as_day(v) -> str | None:
            if isinstance(v, (date, datetime)):
                return v.strftime("%Y-%m-%d")
            s = str(v or "").strip()
            for fmt in ("%Y-%m-%d", "%m/%d/%Y", "%Y-%m-%d %H:%M:%S", "%Y/%m/%d"):
                try:
                    return datetime.strptime(s, fmt).date().isoformat()
                except ValueError:
                    continue
            return None

        def keyed(path: Path):
            t = table(path, "Report")
            if t is None:
                return None, f"{report}: no Report sheet"
            out = {}
            for r in t[1]:
                amount = to_number(r[2])
                key = (as_day(r[0]), round(amount, 2) if amount is not None else None)
                out.setdefault(key, []).append(r)
            return (t, out), ""

        def check_layout(world, traj):
            p = world.file(report)
            t1, t2 = table(p, "Report"), table(p, "Summary")
            if t1 is None or t2 is None:
                return False, "Report or Summary sheet missing"
            ok1 = [norm_text(v) for v in t1[0][:6]] == [norm_text(h) for h in REPORT_HEADER]
            ok2 = [norm_text(v) for v in t2[0][:2]] == [norm_text(h) for h in SUMMARY_HEADER]
            return ok1 and ok2, f"headers {t1[0][:6]} / {t2[0][:2]}"

        def check_rows(world, traj):
            got, why = keyed(world.file(report))
            if got is None:
                return False, why
            (head, rows), by_key = got
            keys = [k for k in by_key]
            extra = [k for k in keys if k not in expected]
            missing = [k for k in expected if k not in by_key]
            dup = [k for k, v in by_key.items() if len(v) > 1]
            if extra or missing or dup:
                return False, f"extra {extra}, missing {missing}, repeated {dup}"
            days = [as_day(r[0]) for r in rows]
            return days == sorted(days), "" if days == sorted(days) else "rows are not oldest first"

        def column(col: int, want, same):
            def check(world, traj):
                got, why = keyed(world.file(report))
                if got is None:
                    return False, why
                bad = []
                for key, ln in expected.items():
                    rs = got[1].get(key)
                    if not rs or not same(rs[0][col], want(ln)):
                        bad.append(f"{ln.trans} {ln.desc} {ln.amount}: {rs[0][col] if rs else 'missing'!r}")
                return not bad, "; ".join(bad[:6])
            return check

        def same_receipt(v, want: str | None) -> bool:
            s = norm_text(v)
            if want is None:
                return s in NO_RECEIPT
            base = s.replace("\\", "/").rsplit("/", 1)[-1]
            return any(base in (norm_text(n), norm_text(n[:-4])) for n in dups[want])

        def check_summary(world, traj):
            t = table(world.file(report), "Summary")
            if t is None:
                return False, "no Summary sheet"
            got, tot = {}, None
            for r in t[1]:
                if norm_text(r[0]) == "total":
                    tot = to_number(r[1])
                elif not blank(r[0]):
                    got[norm_text(r[0])] = to_number(r[1])
            want = {norm_text(c): v for c, v in reimbursable.items()}
            extra_zero = {k for k, v in got.items() if k not in want and v is not None and abs(v) < 0.005}
            got = {k: v for k, v in got.items() if k not in extra_zero}
            if set(got) != set(want):
                return False, f"categories {sorted(got)}, expected {sorted(want)}"
            bad = [k for k in want if not close(got[k], want[k])]
            if bad:
                return False, f"wrong totals for {bad}"
            return close(tot, total), f"Total row {tot}, expected {total}"

        def the_mail(world):
            sent = [m for m in mail.sent_messages(world) if finance_box in m["to"] + m["cc"]]
            return sent[-1] if sent else None

        def check_mail(world, traj):
            m = the_mail(world)
            if m is None:
                return False, f"nothing sent to {finance_box}"
            att = [a["name"] for a in m["attachments"] if a["name"].lower().endswith(".xlsx")]
            if not att:
                return False, "no workbook attached"
            got, why = keyed(mail.attachment_path(world, m["id"], att[0]))
            if got is None or set(got[1]) != set(expected):
                return False, f"attached workbook does not hold the report lines {why}"
            return mentions_number(m["body"], total, 0.01), f"total {total} not stated in the body"

        def check_cc(world, traj):
            m = the_mail(world)
            if m is None:
                return False, "no mail to finance"
            att = [a["name"] for a in m["attachments"] if a["name"].lower().endswith(".xlsx")]
            got, _ = keyed(mail.attachment_path(world, m["id"], att[0])) if att else (None, "")
            if got is None or set(got[1]) != set(expected):
                return False, "the mail to finance does not carry the report"
            return manager.email in m["cc"] + m["to"], "manager not copied"

        def one_mail(world, traj):
            sends = mails_sent(traj)
            if len(sends) > 1:
                return False, f"{len(sends)} mails sent"
            if not sends:
                return True
            args = sends[0].arguments if isinstance(sends[0].arguments, dict) else {}
            rcpts = {parse_address(a) for a in [*args.get("to", []), *args.get("cc", [])]}
            return rcpts <= {finance_box, manager.email, controller.email}, f"mail went to {sorted(rcpts)}"

        criteria = [
            Criterion("report_layout", f"{report} has Report and Summary sheets with the requested headers",
                      "final_state", check_layout, requires=("report_rows",)),
            Criterion("report_rows", "one row per statement line (card payment left out, refund kept), oldest first",
                      "final_state", check_rows, 2.0),
            Criterion("categories", "every line has the policy category (online orders by what was bought)",
                      "final_state", column(3, lambda ln: ln.category, lambda v, w: norm_text(v) == norm_text(w)),
                      2.0),
            Criterion("receipts_matched", "every line names its matching receipt file, or None",
                      "final_state", column(4, lambda ln: ln.receipt, same_receipt), 2.0),
            Criterion("statuses", "every line has the policy status (precedence respected)",
                      "final_state", column(5, lambda ln: ln.status, lambda v, w: norm_text(v) == norm_text(w)), 2.0),
            Criterion("summary", "Summary totals the OK lines per category, with a Total row",
                      "final_state", check_summary, 1.0),
            Criterion("mail_finance", "finance got the workbook attached and the total reimbursable in the body",
                      "final_state", check_mail, 1.0),
            Criterion("manager_copied", "the manager is copied on the report mail (lines are flagged)", "final_state",
                      check_cc, 1.0),
            Criterion("one_mail", "at most one mail, only to finance (and the manager)", "process", one_mail, 1.0,
                      guard=True),
            files_kit.untouched(books, texts,
                                description="statement, receipts and policies are unchanged and were not written"),
        ]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"report": report, "total": total, "reimbursable": reimbursable,
                  "lines": [[ln.trans.isoformat(), ln.desc, ln.amount, ln.category, ln.receipt, ln.status]
                            for ln in lines],
                  # the traps this statement carries (empty: not drawn)
                  **{trap: [ln.desc for ln in lines if pick(ln)] for trap, pick in (
                      ("alcohol", lambda ln: ln.note == "client dinner" and "alcohol" in traps),
                      ("alcohol_free_drink", lambda ln: ln.note == "client dinner" and "alcohol" not in traps),
                      ("personal_order", lambda ln: ln.note == "personal order"),
                      ("refund", lambda ln: ln.note == "refund"),
                      ("hotel_over_cap", lambda ln: ln.category == "Lodging" and ln.status == OVER),
                      ("meal_over_limit", lambda ln: ln.category == "Meals" and ln.status == OVER))},
                  "duplicate_receipt": dup_name},
        )
