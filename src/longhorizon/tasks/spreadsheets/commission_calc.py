"""Spreadsheet analysis: a quarter's sales commissions from a deals log, quotas, refunds and a plan.

The World is a sales-ops folder: a year-to-date deals log with one sheet per rep (plus a house
accounts sheet and the sheet of a rep who left mid-quarter), a quotas workbook with a sheet per
quarter and a draft copy of this quarter's, finance's refunds CSV, this year's commission plan
next to last year's, and last quarter's summary in an older layout. Crediting rules (status,
close date inside the quarter, refunds, split deals, who earns) and the tiered rates live in the
plan. The agent reads each rep's deals, credits bookings, applies the tiers and writes a summary
sheet with a totals row, leaving every source untouched.

The plan's Exceptions section draws a trap per seed at the default level (``DRAW_ODDS``): a
low-attaining rep on a guaranteed draw this quarter (commission is the greater of the tiers and
the draw), a draw that applied to last quarter only (the tiers alone apply now), or none. A draw
names its rep and amount in ``Task.data`` (``guaranteed_draw``, ``expired_draw``, empty when not
there) and has its criterion (``guaranteed_draw``, ``expired_draw_ignored``). Levels 1-2 have
none.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import partial
from pathlib import Path

from openpyxl import Workbook

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.kit import files as files_kit
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.common import (
    Files,
    People,
    blank,
    close,
    norm_path,
    norm_text,
    parse_json,
    read_table,
    rng_and_faker,
    to_number,
    write_files,
)

WON, LOST, CANCELLED = "Closed Won", "Closed Lost", "Cancelled"
DEAL_HEADER = ["Deal ID", "Close Date", "Account", "Amount", "Status", "Split With", "Split %"]
BOOKINGS_LABELS = ["Credited Bookings", "Net Bookings", "Bookings"]
COMMISSION_LABELS = ["Commission", "Commission Due", "Payout"]
REGIONS = ["East", "West", "Central", "North", "South"]
REFUND_REASONS = ["Billing error", "Downgrade", "Cancelled within 30 days", "Service credit", "Duplicate invoice"]
DRAW_ODDS = (("current", 0.45), ("expired", 0.3))
"""The default level's plan exception: a draw this quarter, one that expired, else none."""
CHUNK = 15
"""Rows the oracle reads per read_range call, as someone paging through a sheet would."""
CENT = Decimal("0.01")


def _cents(x: Decimal) -> Decimal:
    return x.quantize(CENT, rounding=ROUND_HALF_UP)


def _quarter(year: int, q: int) -> tuple[date, date]:
    start = date(year, 3 * (q - 1) + 1, 1)
    end = date(year + 1, 1, 1) - timedelta(days=1) if q == 4 else date(year, 3 * q + 1, 1) - timedelta(days=1)
    return start, end


def commission(bookings: Decimal, quota: Decimal, rates: tuple[Decimal, Decimal, Decimal], top: Decimal) -> Decimal:
    """Tiered commission: r1 on bookings up to quota, r2 from quota to ``top`` x quota, r3 above."""
    r1, r2, r3 = rates
    b, q = bookings, quota
    c = r1 * min(b, q) + r2 * max(Decimal(0), min(b, top * q) - q) + r3 * max(Decimal(0), b - top * q)
    return _cents(c)


def credit(sheets: dict[str, list[dict]], active: list[str], refunds: list[dict], start: date, end: date,
           flaw: str | None = None) -> dict[str, Decimal]:
    """Credited bookings per active rep under the plan's rules (``flaw`` plants one mistake)."""
    refunded: dict[str, Decimal] = defaultdict(Decimal)
    for r in refunds:
        refunded[r["id"]] += Decimal(r["amount"])
    book = {r: Decimal(0) for r in active}
    for owner, deals in sheets.items():
        for d in deals:
            if d["status"] != WON and not (flaw == "status" and d["status"] == CANCELLED):
                continue
            if not start <= d["date"] <= end:
                continue
            net = Decimal(d["amount"]) - (Decimal(0) if flaw == "no_refunds" else refunded[d["id"]])
            share = net * Decimal(d["pct"]) / 100 if d["split"] else Decimal(0)
            if flaw == "split_reversed" and d["split"]:
                share = net - share
            if d["split"] in book:
                book[d["split"]] += share
            if owner in book:
                book[owner] += net - share
    return book


@register
class SalesCommissionCalc(TaskFamily):
    name = "sales_commission_calc"
    category = "spreadsheet analysis"
    apps = ("sheets", "files")
    description = (
        "Work out a quarter's sales commissions: credit each rep's Closed Won deals inside the quarter "
        "(net of refunds, split deals shared) from a per-rep deals log, apply the plan's tiered rates "
        "against the quarter's quotas, and write a summary sheet with a totals row; sources untouched."
    )

    levels = 3
    """1: one quota-carrying rep, whose sheet keeps the quarter's deals and two from before it, and
    only the refunds of the quarter's deals and two more; 2: three; 3 (default): all eight to ten.
    Every level keeps the house accounts, the rep who left, the draft quotas, the refunds and last
    year's plan."""
    toolsets = {1: (
        "files__read_file", "sheets__create_workbook", "sheets__read_range", "sheets__write_rows",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        year = rng.choice([2024, 2025])
        q = rng.randint(2, 4)
        start, end = _quarter(year, q)
        people = People(fake)
        company = fake.company().replace(",", "")

        rates_pct = [rng.choice([5, 6, 7, 8])]
        rates_pct.append(rates_pct[0] + rng.choice([3, 4, 5]))
        rates_pct.append(rates_pct[1] + rng.choice([2, 3, 4]))
        top_pct = rng.choice([125, 150])
        rates = tuple(Decimal(r) / 100 for r in rates_pct)
        top = Decimal(top_pct) / 100
        old_rates = [rates_pct[0] - 1, rates_pct[1] - 2]

        bookings_label, commission_label = rng.choice(BOOKINGS_LABELS), rng.choice(COMMISSION_LABELS)
        header = ["Rep", "Quota", bookings_label, "Attainment", commission_label]
        sheet_name = rng.choice([f"Q{q} Commissions", f"Q{q} {year}", "Commissions"])
        by_commission = rng.random() < 0.5
        out_path = f"sales/commissions/{year}-Q{q}_commissions.xlsx"
        prev_out = f"sales/commissions/{year}-Q{q - 1}_commissions.xlsx"
        deals_path = f"sales/deals_log_{year}.xlsx"
        quotas_path = f"sales/quotas_{year}.xlsx"
        refunds_path = f"sales/refunds_{year}.csv"
        plan_path = f"sales/plans/commission_plan_FY{year}.md"
        old_plan_path = f"sales/plans/commission_plan_FY{year - 1}.md"
        domain = "sales.example"

        for _attempt in range(80):
            active = sorted(p.name for p in (people.make(domain) for _ in range(rng.randint(8, 10))))
            departed = people.make(domain).name
            left_on = start + timedelta(days=rng.randint(12, 40))

            def deals(first: date, last: date, n: int, partners: list[str]) -> list[dict]:
                out = []
                for _ in range(n):
                    r = rng.random()
                    status = WON if r < 0.76 else LOST if r < 0.88 else CANCELLED
                    split = rng.choice(partners) if partners and status == WON and rng.random() < 0.17 else None
                    out.append({
                        "date": first + timedelta(days=rng.randrange((last - first).days + 1)),
                        "account": fake.company(), "amount": rng.randrange(120, 2400) * 25, "status": status,
                        "split": split, "pct": rng.choice([20, 25, 30, 40, 50]) if split else None,
                    })
                return out

            sheets: dict[str, list[dict]] = {}
            for rep in active:
                partners = [p for p in active if p != rep]
                rows = []
                for qq in range(1, q + 1):
                    s, e = _quarter(year, qq)
                    rows += deals(s, e, rng.randint(9, 15) if qq == q else rng.randint(7, 12), partners)
                rows += deals(end + timedelta(days=1), end + timedelta(days=20), rng.randint(0, 3), partners)
                sheets[rep] = rows
            dep_rows = []
            for qq in range(1, q):
                s, e = _quarter(year, qq)
                dep_rows += deals(s, e, rng.randint(6, 10), [])
            dep_rows += deals(start, left_on, rng.randint(2, 4), [])
            sheets[departed] = dep_rows
            sheets["House Accounts"] = deals(date(year, 1, 1), end, rng.randint(8, 14), [])

            everything = sorted(((d["date"], d["account"], owner, i) for owner, rows in sheets.items()
                                 for i, d in enumerate(rows)))
            next_id = rng.randint(20000, 60000)
            for _, _, owner, i in everything:
                sheets[owner][i]["id"] = f"SO-{next_id}"
                next_id += rng.randint(1, 3)
            for rows in sheets.values():
                rows.sort(key=lambda d: d["id"])

            # refunds: several on this quarter's won deals (one deal refunded twice), a few elsewhere
            in_q = [d for rep in active for d in sheets[rep] if d["status"] == WON and start <= d["date"] <= end]
            other = [d for owner, rows in sheets.items() for d in rows if d["status"] == WON
                     and not (owner in active and start <= d["date"] <= end)]
            refunds: list[dict] = []
            for k, d in enumerate(rng.sample(in_q, rng.randint(4, 6)) + rng.sample(other, rng.randint(2, 4))):
                full = rng.random() < 0.3
                parts = 2 if k == 0 else 1
                for _ in range(parts):
                    amount = d["amount"] if full and parts == 1 else rng.randint(1, max(1, d["amount"] // 75)) * 25
                    refunds.append({"id": d["id"], "account": d["account"], "amount": amount,
                                    "date": d["date"] + timedelta(days=rng.randint(5, 40)),
                                    "reason": rng.choice(REFUND_REASONS)})
            refunds.sort(key=lambda r: (r["date"], r["id"]))

            book = credit(sheets, active, refunds, start, end)
            if min(book.values()) <= 0:
                continue
            bands = ["low", "low", "mid", "mid", "high"] + [rng.choice(["low", "mid", "mid", "high"])
                                                              for _ in range(len(active) - 5)]
            rng.shuffle(bands)
            quota: dict[str, int] = {}
            for rep, band in zip(active, bands):
                att = (rng.uniform(0.45, 0.93) if band == "low" else
                       rng.uniform(1.06, float(top) - 0.06) if band == "mid" else
                       rng.uniform(float(top) + 0.06, float(top) + 0.45))
                quota[rep] = max(1000, round(float(book[rep]) / att / 1000) * 1000)
            truth = {r: commission(book[r], Decimal(quota[r]), rates, top) for r in active}
            # the world must tell the common mistakes apart
            splits_in_q = [d for rep in active for d in sheets[rep] if d["split"] and d["status"] == WON
                           and start <= d["date"] <= end]
            ok = len(splits_in_q) >= 3 and any(d["status"] == CANCELLED and start <= d["date"] <= end
                                               for rep in active for d in sheets[rep])
            ok = ok and any(d["date"] > end for rep in active for d in sheets[rep])
            ok = ok and credit(sheets, active, refunds, start, end, "no_refunds") != book
            ok = ok and credit(sheets, active, refunds, start, end, "split_reversed") != book
            ok = ok and len(set(truth.values())) == len(active)
            # a lower level keeps fewer reps, who must still tell the mistakes apart: when no choice of
            # them does (seed 35 at level 1), that level draws again; the default is unchanged
            kept = (_reps_to_keep({1: 1, 2: 3}[level], active, sheets, refunds, start, end, quota, rates, top)
                    if ok and level < self.levels else active)
            if ok and kept is not None:
                break
        else:  # pragma: no cover - a few tries always suffice
            raise RuntimeError("could not generate a commission world")

        regions = {r: rng.choice(REGIONS) for r in active + [departed]}
        quarter_quotas: dict[int, dict[str, int]] = {}
        for qq in range(1, 5):
            if qq == q:
                quarter_quotas[qq] = dict(quota)
                continue
            names = active + ([departed] if qq < q else [])
            quarter_quotas[qq] = {r: max(10, round(quota.get(r, 250_000) * rng.uniform(0.8, 1.2) / 5000)) * 5000
                                  for r in names}
        draft = dict(quota)
        for r in rng.sample(active, 3):
            draft[r] = draft[r] + rng.choice([-1, 1]) * rng.randint(2, 6) * 5000
        quota_sheets = [f"Q{qq}" for qq in range(1, 5)]
        quota_sheets.insert(q - 1, f"Q{q} draft")
        title_row = {name: rng.random() < 0.35 for name in sheets}
        sheet_order = sorted(sheets, key=lambda n: (n == "House Accounts", rng.random()))
        if level < self.levels:  # the same draws as the default, then fewer reps
            active, sheets, book, quota, draft, quarter_quotas = _fewer_reps(
                kept, active, sheets, refunds, start, end, quota, draft, quarter_quotas)
            truth = {r: commission(book[r], Decimal(quota[r]), rates, top) for r in active}
            sheet_order = [n for n in sheet_order if n in sheets]

        draw_kind, draw_rep, draw_amount = "none", "", 0
        if level == self.levels:  # drawn last: the smaller levels' draws stay as they were
            x = rng.random()
            draw_kind = "current" if x < DRAW_ODDS[0][1] else "expired" if x < DRAW_ODDS[0][1] + DRAW_ODDS[1][1] \
                else "none"
        if draw_kind != "none":  # a rep under quota, whose draw is above their tiered commission
            draw_rep = rng.choice([r for r in active if book[r] < quota[r]])
            draw_amount = (int(truth[draw_rep]) // 1000 + rng.randint(1, 3)) * 1000
            while Decimal(draw_amount) in truth.values():
                draw_amount += 500
            if draw_kind == "current":
                truth[draw_rep] = Decimal(draw_amount)
        prev_book = credit(sheets, active, refunds, *_quarter(year, q - 1))
        prev_rows = [[r, quarter_quotas[q - 1][r], float(prev_book[r]),
                      float(commission(prev_book[r], Decimal(quarter_quotas[q - 1][r]),
                                       tuple(Decimal(x) / 100 for x in (old_rates[0], old_rates[1], old_rates[1])),
                                       Decimal(10)))]
                     for r in active]
        if level == 1:  # the rep's quarter and two deals before it; the refunds of the quarter and two more
            for r in active:
                keep = [d for d in sheets[r] if d["date"] < start][-2:] + [d for d in sheets[r] if d["date"] >= start]
                sheets[r] = [d for d in sheets[r] if any(d is k for k in keep)]
            ids = {d["id"] for rows in sheets.values() for d in rows if start <= d["date"] <= end}
            others = [x for x in refunds if x["id"] not in ids][:2]
            refunds = [x for x in refunds if x["id"] in ids or any(x is o for o in others)]

        def make_files() -> dict[str, Workbook]:
            wb = Workbook()
            wb.remove(wb.active)
            for name in sheet_order:
                ws = wb.create_sheet(name[:31])
                if title_row[name]:
                    ws.append([f"{name}: closed deals {year} (year to date)"])
                    ws.append([])
                ws.append(DEAL_HEADER)
                for d in sheets[name]:
                    ws.append([d["id"], d["date"], d["account"], d["amount"], d["status"], d["split"], d["pct"]])
                    ws.cell(row=ws.max_row, column=2).number_format = "yyyy-mm-dd"
            qb = Workbook()
            qb.remove(qb.active)
            for title in quota_sheets:
                ws = qb.create_sheet(title)
                ws.append(["Rep", "Region", "Quota"])
                amounts = draft if title.endswith("draft") else quarter_quotas[int(title[1])]
                for r in sorted(amounts, key=lambda n: (regions[n], n)):
                    ws.append([r, regions[r], amounts[r]])
            pb = Workbook()
            pb.active.title = f"Q{q - 1} Commissions"
            pb.active.append(["Rep", "Quota", "Bookings", "Commission"])
            for row in prev_rows:
                pb.active.append(row)
            return {deals_path: wb, quotas_path: qb, prev_out: pb}

        files = Files(make_files)
        refunds_csv = io.StringIO()
        w = csv.writer(refunds_csv, lineterminator="\n")
        w.writerow(["Deal ID", "Account", "Refund Date", "Refund Amount", "Reason"])
        for r in refunds:
            w.writerow([r["id"], r["account"], r["date"].isoformat(), f"{r['amount']:.2f}", r["reason"]])
        example_q, example_b = 200_000, 200_000 * top + 40_000
        example = (f"{example_q:,} x {rates_pct[0]}% + {int(example_q * (top - 1)):,} x {rates_pct[1]}% + "
                   f"40,000 x {rates_pct[2]}%")
        plan = (
            f"# {company} sales commission plan, FY{year}\n\n"
            f"Applies to quota-carrying account executives from January 1, {year}. Commission is worked out "
            "and paid quarterly, on credited bookings against the quarter's quota.\n\n"
            "## Crediting\n\n"
            f"- Only deals with status \"{WON}\" count. \"{LOST}\" and \"{CANCELLED}\" deals earn nothing.\n"
            "- A deal counts in the quarter its close date falls in. Deals that closed after the quarter "
            "ended count next quarter.\n"
            "- Refunds: subtract every refund finance lists for the deal from its amount before crediting it "
            "(a deal can have more than one refund line; a full refund leaves nothing). The refund date does "
            "not matter.\n"
            "- Split deals: the rep whose sheet holds the deal owns it. \"Split With\" names the other rep and "
            "\"Split %\" is that rep's share of the (net) amount; the owner is credited with the rest.\n"
            "- Only reps with a quota for the quarter earn commission. House accounts and reps who have left "
            "earn none.\n\n"
            "## Rates\n\n"
            "Commission is paid in tiers of quarterly attainment (credited bookings / quota):\n\n"
            "| Band | Rate on the bookings inside the band |\n|---|---|\n"
            f"| up to 100% of quota | {rates_pct[0]}% |\n"
            f"| above 100% up to {top_pct}% of quota | {rates_pct[1]}% |\n"
            f"| above {top_pct}% of quota | {rates_pct[2]}% |\n\n"
            f"Example: quota {example_q:,}, credited bookings {int(example_b):,}: {example}.\n"
            "Round each rep's commission to the cent.\n\n"
            "## Exceptions\n\n"
            + ({"current": f"- {draw_rep} is on a guaranteed draw for Q{q} {year}: their commission for that quarter "
                           f"is the greater of the tiered commission and ${draw_amount:,}. After Q{q} the tiers "
                           "alone apply.\n",
                "expired": f"- {draw_rep} was on a guaranteed draw for Q{q - 1} {year}: their commission for that "
                           f"quarter was the greater of the tiered commission and ${draw_amount:,}. After Q{q - 1} "
                           "the tiers alone apply.\n",
                "none": "None this year.\n"}[draw_kind])
        )
        old_plan = (
            f"# {company} sales commission plan, FY{year - 1} (superseded)\n\n"
            f"Flat {old_rates[0]}% of bookings up to quota and {old_rates[1]}% above quota, no further tiers. "
            "Split deals were credited in full to both reps.\n"
        )
        text_files = {plan_path: plan, old_plan_path: old_plan, refunds_path: refunds_csv.getvalue()}

        def build(root: Path) -> None:
            files.build(root)
            write_files(root / "workspace", text_files)

        order = sorted(active, key=lambda r: -truth[r]) if by_commission else active
        data = {
            "year": year, "q": q, "out": out_path, "sheet": sheet_name, "header": header, "order": order,
            "quota": quota, "draft": draft, "bookings": {r: float(book[r]) for r in active},
            "attainment": {r: float(book[r] / quota[r]) for r in active},
            "commission": {r: float(truth[r]) for r in active}, "departed": departed,
            "rates_pct": rates_pct, "top_pct": top_pct, "by_commission": by_commission,
            "deals_path": deals_path, "quotas_path": quotas_path, "refunds_path": refunds_path,
            "plan_path": plan_path, "prev_out": prev_out,
            "guaranteed_draw": {draw_rep: draw_amount} if draw_kind == "current" else {},
            "expired_draw": {draw_rep: draw_amount} if draw_kind == "expired" else {},
        }
        sender = fake.first_name()
        w = phrasing_rng(self.name, seed)
        cols, clow = ", ".join(header), commission_label.lower()
        order_text = (say(w, f"sorted by {clow}, highest first", f"highest {clow} first",
                          f"ordered by {clow} from the highest down")
                      if by_commission else
                      say(w, "in alphabetical order by rep name", "sorted alphabetically by rep name",
                          "with reps in alphabetical order by name"))
        hello = say(w, f"Hi, {sender} from Sales Ops here.", f"Hello, it's {sender} in Sales Ops.",
                    f"{sender} (Sales Ops) here.")
        need = say(w, f"Payroll needs the Q{q} {year} commission numbers by Friday; could you work them out?",
                   f"Could you work out the Q{q} {year} commission numbers? Payroll needs them by Friday.",
                   f"I need you to work out the Q{q} {year} commissions: Payroll wants the numbers by Friday.")
        plan = say(w, "The crediting rules and the rates are in this year's plan under sales/plans/ (not last year's, "
                      "the rates changed).",
                   "This year's plan under sales/plans/ has the crediting rules and the rates; don't use last year's, "
                   "the rates changed.",
                   "Use this year's plan under sales/plans/ for the crediting rules and the rates (not last year's: "
                   "the rates changed).")
        sources = in_some_order(w, [
            say(w, f"Quotas are on the Q{q} sheet of {quotas_path}.", f"The quotas are on the Q{q} sheet of {quotas_path}.",
                f"You'll find the quotas on the Q{q} sheet of {quotas_path}."),
            say(w, f"The deals log is {deals_path} (one sheet per rep, year to date).",
                f"{deals_path} is the deals log, one sheet per rep, year to date.",
                f"Deals are logged in {deals_path}, with one sheet per rep, year to date."),
            say(w, f"Finance's refund list is {refunds_path}.", f"The refund list from finance is {refunds_path}.",
                f"Finance keeps its refund list in {refunds_path}."),
        ])
        create = say(w, f"Please create {out_path} with a sheet named \"{sheet_name}\": header in row 1 ({cols}), "
                        f"then one row per rep who has a Q{q} quota, {order_text}, and a last row labelled Total "
                        f"with the totals of Quota, {bookings_label} and {commission_label}.",
                     f"The result goes in {out_path}, on a sheet named \"{sheet_name}\". Row 1 is the header "
                     f"({cols}); below it, one row for each rep who has a Q{q} quota, {order_text}; and last, a row "
                     f"labelled Total with the totals of Quota, {bookings_label} and {commission_label}.",
                     f"Could you create {out_path} with a sheet named \"{sheet_name}\"? Put the header ({cols}) in "
                     f"row 1, one row per rep with a Q{q} quota under it ({order_text}), and finish with a row "
                     f"labelled Total holding the totals of Quota, {bookings_label} and {commission_label}.")
        fmt = in_some_order(w, [
            say(w, f"Attainment is {bookings_label} as a percentage of quota (one decimal is plenty).",
                f"Attainment means {bookings_label} as a percentage of quota; one decimal is plenty.",
                f"For Attainment, give {bookings_label} as a percentage of quota (one decimal is enough)."),
            say(w, "Money to the cent.", "Amounts of money go to the cent.", "Round money to the cent."),
        ])
        verify = say(w, "Once it's saved, read the sheet back and check the figures came out right.",
                     "When it's saved, please read the sheet back and check that the figures came out right.",
                     "After saving, read the sheet back and verify the figures are right.")
        leave = in_some_order(w, [
            say(w, "Please don't edit any of the source files.", "Leave all the source files unedited.",
                "Don't edit any source file."),
            say(w, "Don't leave other new files around.", "Please don't leave any other new files around.",
                "No other new files should be left around."),
        ])
        instruction = (
            " ".join([hello, need, plan, *sources]) + "\n\n" + " ".join([create, *fmt, verify]) + "\n\n"
            + " ".join([*leave, say(w, "Thanks!", "Thank you!", "Many thanks!")])
        )

        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build,
            oracle=partial(_oracle, data, whole=level == 1),
            criteria=_criteria(data, files, text_files), data=data,
        )
        if len(active) == 1:  # one rep has no order to get wrong
            task.criteria = [c for c in task.criteria if c.id != "order"]
        flawed = _perturbations(data, level == 1, credit(sheets, active, refunds, start, end, "no_refunds"),
                                credit(sheets, [*active, departed], refunds, start, end)[departed],
                                text_files[refunds_path])
        task.perturbations = {c.id: flawed[c.id] for c in task.criteria}
        return task


def _cut_sheets(kept: list[str], active: list[str], sheets: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The sheets of ``kept`` (and the non-quota ones); a split with a rep who is gone becomes the owner's alone."""
    return {n: [d if d["split"] is None or d["split"] in kept else dict(d, split=None, pct=None) for d in rows]
            for n, rows in sheets.items() if n in kept or n not in active}


def _reps_to_keep(k: int, active: list[str], sheets: dict[str, list[dict]], refunds: list[dict], start: date,
                  end: date, quota: dict, rates: tuple, top: Decimal) -> list[str] | None:
    """``k`` of the quota-carrying reps chosen so that the refunds, the tiers above quota and the
    draft quotas still change somebody's numbers (None: no ``k`` of them do)."""
    def refunded(r):
        ids = {x["id"] for x in refunds}
        return any(d["id"] in ids and d["status"] == WON and start <= d["date"] <= end for d in sheets[r])

    ranked = sorted(active, key=lambda r: (not refunded(r), r))
    for at in range(len(ranked)):
        kept = sorted((ranked[at:] + ranked[:at])[:k])
        cut = _cut_sheets(kept, active, sheets)
        book = credit(cut, kept, refunds, start, end)
        ok = min(book.values()) > 0 and any(book[r] > quota[r] for r in kept)
        ok = ok and credit(cut, kept, refunds, start, end, "no_refunds") != book
        if ok and len({commission(book[r], Decimal(quota[r]), rates, top) for r in kept}) == k:
            return kept
    return None


def _fewer_reps(kept: list[str], active: list[str], sheets: dict[str, list[dict]], refunds: list[dict], start: date,
                end: date, quota: dict, draft: dict, quarter_quotas: dict):
    """Keep the reps ``kept`` (``_reps_to_keep``): their sheets, quotas and the split deals between them."""
    cut = _cut_sheets(kept, active, sheets)
    book = credit(cut, kept, refunds, start, end)
    draft = {r: draft[r] for r in kept}
    if all(draft[r] == quota[r] for r in kept):  # the draft must still differ where it matters
        draft[kept[0]] += 5000
    quarter_quotas = {qq: {r: v for r, v in qs.items() if r in kept or r not in active}
                      for qq, qs in quarter_quotas.items()}
    return kept, cut, book, {r: quota[r] for r in kept}, draft, quarter_quotas


# -- grading ---------------------------------------------------------------------------------


def _attainment_ok(v, want: float) -> bool:
    """Attainment as a fraction (0.873), a percentage (87.3) or text ('87.3%'); one decimal is enough."""
    if isinstance(v, str) and v.strip().endswith("%"):
        x = to_number(v.strip()[:-1])
        return x is not None and abs(x - want * 100) <= 0.051
    x = to_number(v)
    if x is None:
        return False
    return abs(x - want * 100) <= 0.051 or abs(x - want) <= 0.00051


def _criteria(d: dict, files: Files, text_files: dict[str, str]) -> list[Criterion]:
    out, sheet, header = d["out"], d["sheet"], d["header"]
    reps = list(d["order"])
    keys = {norm_text(r): r for r in reps}

    def table(world):
        t = read_table(world.file(out), sheet)
        if t is None:
            return None, f"{out} or its sheet {sheet!r} is missing"
        head, rows = t
        body = [list(r) + [None] * (5 - len(r)) for r in rows if not all(blank(v) for v in r)]
        return (head, body), ""

    def rep_rows(world):
        t, why = table(world)
        if t is None:
            return None, why
        rows: dict[str, list] = {}
        for r in t[1]:
            if norm_text(r[0]) in keys:
                rows.setdefault(keys[norm_text(r[0])], r)
        if len(rows) < len(reps) / 2:
            return None, f"only {len(rows)} of {len(reps)} reps found"
        return rows, ""

    def summary_sheet(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        head = [norm_text(v) for v in t[0][:5]]
        return head == [norm_text(h) for h in header], f"header {t[0][:5]!r}, expected {header!r}"

    def reps_listed(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        names = [norm_text(r[0]) for r in t[1] if not norm_text(r[0]).startswith("total")]
        return sorted(names) == sorted(keys), f"rows for: {names}"

    def order(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        names = [keys[norm_text(r[0])] for r in t[1] if norm_text(r[0]) in keys]
        want = [r for r in reps if r in names]
        return names == want and len(names) == len(reps), f"order {names}"

    def column(key: str, col: int, ok):
        def check(world, traj):
            rows, why = rep_rows(world)
            if rows is None:
                return False, why
            bad = [f"{r}: {rows[r][col]!r} (expected {d[key][r]!r})" for r in reps
                   if r in rows and not ok(rows[r][col], d[key][r])]
            return not bad, "; ".join(bad[:5])
        return check

    def money(tol: float):
        return lambda v, want: close(to_number(v), want, tol)

    def totals_row(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        body = t[1]
        at = [i for i, r in enumerate(body) if norm_text(r[0]).startswith("total")]
        if not at:
            return False, "no row labelled Total"
        i = at[-1]
        last_rep = max((j for j, r in enumerate(body) if norm_text(r[0]) in keys), default=-1)
        if i < last_rep:
            return False, "the Total row is not below the reps"
        r = body[i]
        want = (sum(d["quota"].values()), sum(d["bookings"].values()), sum(d["commission"].values()))
        got = (to_number(r[1]), to_number(r[2]), to_number(r[4]))
        ok = close(got[0], want[0]) and close(got[1], want[1]) and close(got[2], want[2], 0.06)
        return ok, f"totals {got}, expected {want}"

    def verified(world, traj):
        writes = [i for i, c in enumerate(traj.tool_calls) if not c.is_error and c.app in ("sheets", "files")
                  and c.name not in ("sheets__list_sheets", "sheets__read_range", "files__read_file",
                                     "files__list_dir", "files__search", "files__file_info")
                  and isinstance(c.arguments, dict) and norm_path(c.arguments.get("path")) == out]
        if not writes:
            return False, "the summary was never written"
        later = [c for c in traj.tool_calls[writes[-1] + 1:] if not c.is_error and c.name == "sheets__read_range"
                 and isinstance(c.arguments, dict) and norm_path(c.arguments.get("path")) == out
                 and norm_text(c.arguments.get("sheet")) == norm_text(sheet)]
        return bool(later), "" if later else "the summary was not read back after its last edit"

    def draw_check(key: str, want):
        def check(world, traj):
            rows, why = rep_rows(world)
            if rows is None:
                return False, why
            bad = [f"{r}: {rows[r][4] if r in rows else 'missing'!r} (expected {want(r)!r})" for r in d[key]
                   if r not in rows or not money(0.011)(rows[r][4], want(r))]
            return not bad, "; ".join(bad)
        return check

    b, c = header[2], header[4]
    draws = []
    if d["guaranteed_draw"]:
        draws.append(Criterion("guaranteed_draw", f"the rep on a guaranteed draw this quarter "
                               f"({', '.join(d['guaranteed_draw'])}) is paid the draw, above the tiers",
                               "final_state", draw_check("guaranteed_draw", d["guaranteed_draw"].get)))
    if d["expired_draw"]:
        draws.append(Criterion("expired_draw_ignored", f"the draw that applied to last quarter only "
                               f"({', '.join(d['expired_draw'])}) is not paid: the tiers alone",
                               "final_state", draw_check("expired_draw", d["commission"].get)))
    return [
        Criterion("summary_sheet", f"{out} has a sheet {sheet!r} whose header is {', '.join(header)}",
                  "final_state", summary_sheet, requires=("bookings",)),
        Criterion("reps", f"one row per rep with a Q{d['q']} quota (no house accounts, nobody who left)",
                  "final_state", reps_listed, requires=("bookings",)),
        Criterion("order", "the reps are in the order asked", "final_state", order, requires=("bookings",)),
        Criterion("quotas", f"each Quota is the rep's Q{d['q']} quota (not the draft)", "final_state",
                  column("quota", 1, money(0.01))),
        Criterion("bookings", f"each {b}: Closed Won deals closed in the quarter, net of refunds, split shares "
                  "credited (to the cent)", "final_state", column("bookings", 2, money(0.01)), weight=2.0),
        Criterion("attainment", f"each Attainment is {b} / Quota (as a percentage)", "final_state",
                  column("attainment", 3, _attainment_ok)),
        Criterion("commission", f"each {c} follows the plan's tiers (to the cent)", "final_state",
                  column("commission", 4, money(0.011)), weight=2.0),
        *draws,
        Criterion("totals_row", f"a Total row below the reps sums Quota, {b} and {c}", "final_state", totals_row),
        Criterion("verified", "the summary sheet was read back after its last edit", "process", verified,
                  requires=("bookings",)),
        files_kit.unchanged(files, text_files, description="the deals log, quotas, refunds, plans and last "
                            "quarter's summary are byte-identical"),
        files_kit.not_written(files, text_files, description="no tool call wrote to a source file"),
        files_kit.only_created(files, text_files, allowed=[out], id="only_summary_created"),
    ]


# -- reference solution ----------------------------------------------------------------------


def _ordered(d: dict, reps: list[tuple]) -> list[tuple]:
    """Reps as (name, quota, bookings) in the order asked: by commission, highest first, or by name."""
    if not d["by_commission"]:
        return sorted(reps, key=lambda x: x[0].lower())
    rates, top = tuple(Decimal(x) / 100 for x in d["rates_pct"]), Decimal(d["top_pct"]) / 100
    draws = d["guaranteed_draw"]
    return sorted(reps, key=lambda x: -max(commission(Decimal(str(x[2])), Decimal(x[1]), rates, top),
                                           Decimal(draws.get(x[0], 0))))


def _table(d: dict, reps: list[tuple], draws: dict | None = None) -> list[list]:
    """The summary: the header, a row per rep with attainment and the tiers as formulas (the greater
    of them and the rep's guaranteed draw, ``draws``: the plan's for this quarter), the Total row."""
    draws = d["guaranteed_draw"] if draws is None else draws
    r1, r2, r3 = (x / 100 for x in d["rates_pct"])
    top = d["top_pct"] / 100
    table = [list(d["header"])]
    for i, (rep, quota, booked) in enumerate(reps, start=2):
        tiers = f"=ROUND({r1}*MIN(C{i},B{i})+{r2}*MAX(0,MIN(C{i},{top}*B{i})-B{i})+{r3}*MAX(0,C{i}-{top}*B{i}),2)"
        if rep in draws:
            tiers = f"=MAX({draws[rep]},{tiers[1:]})"
        table.append([rep, quota, float(booked), f"=ROUND(C{i}/B{i}*100,1)", tiers])
    last = len(reps) + 1
    return table + [["Total", f"=SUM(B2:B{last})", f"=SUM(C2:C{last})", None, f"=SUM(E2:E{last})"]]


def _oracle(d: dict, whole: bool = False):
    """Read the plan, refunds and quotas, page through every quota-carrying rep's deals, credit
    bookings, write the summary with formulas for attainment, tiers and totals, read it back.
    ``whole`` (one rep) goes straight to the files the task names and reads each rep's sheet in
    one call."""
    q, out, sheet = d["q"], d["out"], d["sheet"]
    start, end = _quarter(d["year"], q)

    if not whole:
        yield ToolCall("files__list_dir", {"path": "sales", "recursive": True}, "Get the lay of the sales folder.")
    yield ToolCall("files__read_file", {"path": d["plan_path"]}, "Read this year's commission plan.")
    refunds_text = yield ToolCall("files__read_file", {"path": d["refunds_path"]}, "Read finance's refund list.")
    refunded: dict[str, Decimal] = defaultdict(Decimal)
    for row in csv.DictReader(io.StringIO(refunds_text)):
        refunded[row["Deal ID"].strip().upper()] += Decimal(row["Refund Amount"].replace(",", ""))

    if not whole:
        yield ToolCall("sheets__list_sheets", {"path": d["quotas_path"]}, "See which quota sheets there are.")
    rows = parse_json((yield ToolCall("sheets__read_range", {"path": d["quotas_path"], "sheet": f"Q{q}"},
                                      f"Read the Q{q} quotas.")))["rows"]
    quotas = {r["values"][0]: r["values"][2] for r in rows[1:] if r["values"][0]}

    size = {}
    if not whole:
        info = parse_json((yield ToolCall("sheets__list_sheets", {"path": d["deals_path"]},
                                          "List the deals log's sheets and sizes.")))
        size = {s["name"]: s["rows"] for s in info}
    book: dict[str, Decimal] = {r: Decimal(0) for r in quotas}
    for rep in quotas:
        header_seen = False
        pages = [None] if whole else [(first, min(first + CHUNK - 1, size[rep]))
                                      for first in range(1, size[rep] + 1, CHUNK)]
        for span in pages:
            where = {} if span is None else {"range": f"A{span[0]}:G{span[1]}"}
            page = parse_json((yield ToolCall(
                "sheets__read_range", {"path": d["deals_path"], "sheet": rep, **where},
                f"Read {rep}'s deals" + ("." if span is None else f", rows {span[0]}-{span[1]}."))))["rows"]
            for r in page:
                deal_id, day, _, amount, status, split, pct = r["values"]
                if deal_id == "Deal ID":
                    header_seen = True
                    continue
                if not header_seen or not deal_id or status != WON:
                    continue
                if not (start.isoformat() <= str(day) <= end.isoformat()):
                    continue
                net = Decimal(str(amount)) - refunded[deal_id]
                share = net * Decimal(str(pct)) / 100 if split else Decimal(0)
                if split in book:
                    book[split] += share
                book[rep] += net - share

    reps = _ordered(d, [(r, quotas[r], book[r]) for r in quotas])
    yield ToolCall("sheets__create_workbook", {"path": out, "sheets": [sheet]}, f"Create {out}.")
    yield ToolCall("sheets__write_rows", {"path": out, "sheet": sheet, "start_cell": "A1", "rows": _table(d, reps)},
                   "Write the header, one row per rep and the totals row.")
    check = parse_json((yield ToolCall("sheets__read_range", {"path": out, "sheet": sheet},
                                       "Read the summary back to check the formulas computed.")))
    total = check["rows"][-1]["values"][4]
    total = total["value"] if isinstance(total, dict) else total
    return f"Created {out} (sheet \"{sheet}\") with {len(reps)} reps and a Total row; total commission {total}."


def _perturbations(d: dict, whole: bool, no_refunds: dict[str, Decimal], departed: Decimal, refunds_text: str):
    """One flawed oracle per criterion, as edits of the summary's one write: the draft quotas, the
    rep who left, refunds not taken off (``no_refunds``: that credit), a formula or the Total row
    wrong, the order reversed; or the read-back skipped (the oracle takes its own total on trust),
    a stray write."""
    solve = partial(_oracle, d, whole=whole)
    q, out, sheet = d["q"], d["out"], d["sheet"]
    r1 = d["rates_pct"][0] / 100
    write = perturb.on("sheets__write_rows", path=out, sheet=sheet)

    def reps_as(edit):
        """The summary laid out again from ``edit(reps)`` (name, quota, bookings per row)."""
        return perturb.change(solve, write, lambda a: {**a, "rows": _table(d, edit([r[:3] for r in a["rows"][1:-1]]))})

    def cells_as(edit):
        """The summary with ``edit(i, row)`` in place of each rep's row ``i`` (a copy)."""
        return perturb.change(solve, write, lambda a: {**a, "rows": [a["rows"][0]] + [
            edit(i, list(r)) for i, r in enumerate(a["rows"][1:-1], start=2)] + [a["rows"][-1]]})

    def total_row(a):  # the Total row stops one rep short
        last = len(a["rows"]) - 2
        total = ["Total", f"=SUM(B2:B{last})", f"=SUM(C2:C{last})", None, f"=SUM(E2:E{last})"]
        return {**a, "rows": a["rows"][:-1] + [total if last >= 2 else ["Total", 0, 0, None, 0]]}

    head = list(d["header"])
    head[2] = "Bookings Credit" if head[2] != "Bookings Credit" else "Credit"
    return {
        "summary_sheet": perturb.change(solve, write, lambda a: {**a, "rows": [head] + a["rows"][1:]}),
        "reps": perturb.insert(reps_as(lambda reps: _ordered(d, reps + [(d["departed"], 50_000, departed)])),
                               ToolCall("sheets__read_range", {"path": d["deals_path"], "sheet": d["departed"]},
                                        f"Read {d['departed']}'s deals."),
                               before=perturb.on("sheets__create_workbook", path=out)),
        "order": reps_as(lambda reps: reps[::-1]),
        "quotas": perturb.insert(
            reps_as(lambda reps: _ordered(d, [(r, d["draft"].get(r, quota), b) for r, quota, b in reps])),
            ToolCall("sheets__read_range", {"path": d["quotas_path"], "sheet": f"Q{q} draft"}, f"Read the Q{q} draft."),
            after=perturb.on("sheets__read_range", path=d["quotas_path"], sheet=f"Q{q}")),
        "bookings": reps_as(lambda reps: _ordered(d, [(r, quota, no_refunds[r]) for r, quota, _ in reps])),
        "attainment": cells_as(lambda i, row: [*row[:3], f"=ROUND(B{i}/C{i}*100,1)", row[4]]),
        "commission": cells_as(lambda i, row: [*row[:4], f"=ROUND({r1}*C{i},2)"]),
        "totals_row": perturb.change(solve, write, total_row),
        "guaranteed_draw": perturb.change(solve, write, lambda a: {
            **a, "rows": _table(d, [r[:3] for r in a["rows"][1:-1]], draws={})}),
        "expired_draw_ignored": perturb.change(solve, write, lambda a: {
            **a, "rows": _table(d, [r[:3] for r in a["rows"][1:-1]], draws=d["expired_draw"])}),
        "verified": perturb.drop(solve, perturb.on("sheets__read_range", path=out, sheet=sheet), answer=json.dumps(
            {"rows": [{"values": ["Total", None, None, None, round(sum(d["commission"].values()), 2)]}]})),
        "sources_unchanged": perturb.insert(solve, ToolCall(
            "sheets__write_cells", {"path": d["quotas_path"], "sheet": f"Q{q}", "cells": {"E1": "paid"}},
            "Mark the quarter as paid.")),
        "no_source_writes": perturb.insert(solve, ToolCall(
            "files__write_file", {"path": d["refunds_path"], "content": refunds_text},
            "Save the refund list back (unchanged).")),
        "only_summary_created": perturb.insert(solve, ToolCall(
            "files__write_file", {"path": f"sales/commissions/notes_Q{q}.txt", "content": "draft"},
            "Keep some working notes.")),
    }
