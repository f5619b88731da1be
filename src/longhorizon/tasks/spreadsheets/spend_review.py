"""Spreadsheet analysis: roll departments' expense workbooks up into a budget-vs-spend summary.

The World is a small finance folder: a budgets workbook (this fiscal year's sheet next to last
year's), one expense workbook per department for this year, and last year's workbooks as
distractors. Some department files end with a hand-made "Total" row that sums voided lines too.
The agent must find each department's file, add up Posted transactions only, and write a new
summary workbook with budget, spend, remaining and an over-budget flag per department.

The budgets workbook also has a Revisions sheet: budget changes approved during the year (last
year's always, as distractors). The default level draws its trap mix per seed (``TRAP_ODDS``):
a department whose budget was revised this year (its new figure counts, and its over-budget flag
flips), and hand-made Total rows, are each there or not; voided lines always are. A trap that is
there has its own criterion (``revised_budget``, ``total_rows_skipped``) and names its
departments in ``Task.data`` (``revised``, ``total_rows``); an absent one has neither. The
instruction is the same either way.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from functools import partial

from openpyxl import Workbook

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.kit import files as files_kit, perturb
from longhorizon.tasks.common import (
    Files,
    blank,
    close,
    norm_text,
    parse_json,
    read_table,
    rng_and_faker,
    to_number,
)
from longhorizon.tasks.spreadsheets import to_flag

DEPARTMENTS = [
    "Customer Support", "Engineering", "Facilities", "Finance", "Human Resources", "IT", "Legal",
    "Marketing", "Operations", "Procurement", "Product", "Research", "Sales", "Security",
]
CATEGORIES = ["Software", "Travel", "Office Supplies", "Training", "Consulting", "Meals", "Equipment"]
SPENT_LABELS = ["Spent", "Actual Spend", "Total Spend"]
REMAINING_LABELS = ["Remaining", "Variance", "Budget Left"]
FLAG_LABELS = ["Over Budget", "Overspent"]
SHEET_NAMES = ["Summary", "By Department", "Spend vs Budget"]
VOID_WORDS = ["Void", "Voided", "Cancelled"]
REVISIONS = "Revisions"
REVISION_HEADER = ["Department", "Fiscal Year", "Previous Budget", "Revised Budget", "Approved"]
TRAP_ODDS = {"revised": 0.55, "total_rows": 0.65}
"""The default level's optional traps, each there with this chance (at least one always; levels
1-2 keep the Total rows, and the revision where its department is among theirs)."""
CHUNK = 20
"""Rows the oracle reads per read_range call, as someone paging through a sheet would."""


def _slug(name: str) -> str:
    return name.lower().replace(" ", "_")


def _cents(x: float) -> Decimal:
    return Decimal(str(x)).quantize(Decimal("0.01"))


@register
class DepartmentSpendReview(TaskFamily):
    name = "department_spend_review"
    category = "spreadsheet analysis"
    apps = ("sheets", "files")
    description = (
        "Roll per-department expense workbooks up into a budget-vs-actual summary workbook: "
        "find each department's file from the budget sheet, sum Posted transactions only, "
        "compute remaining budget and over-budget flags, leave the sources untouched."
    )

    levels = 3
    """1: one department (one with a hand-made Total row when there is one) with five of its
    transactions, one voided, and its budget scaled to match; 2: three; 3 (default): seven to
    nine. Every level keeps last year's sheet and workbooks."""
    toolsets = {1: ("sheets__create_workbook", "sheets__read_range", "sheets__write_rows")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)

        year = rng.choice([2023, 2024, 2025])
        fy, last_fy = f"FY{year}", f"FY{year - 1}"
        depts = sorted(rng.sample(DEPARTMENTS, rng.randint(7, 9)))
        void_word = rng.choice(VOID_WORDS)
        spent_label, remaining_label = rng.choice(SPENT_LABELS), rng.choice(REMAINING_LABELS)
        flag_label, sheet_name = rng.choice(FLAG_LABELS), rng.choice(SHEET_NAMES)
        by_spend = rng.random() < 0.4
        header = ["Department", "Budget", spent_label, remaining_label, flag_label]
        report = f"finance/spend_review_{year}.xlsx"
        budgets_path = "finance/budgets.xlsx"

        # this year's transactions per department (every department has at least one voided line)
        tx: dict[str, list[list]] = {}
        spent: dict[str, float] = {}
        voided: dict[str, float] = {}
        for d in depts:
            n = rng.randint(14, 44)
            rows = []
            void_at = set(rng.sample(range(n), max(1, round(n * rng.uniform(0.05, 0.15)))))
            for i in range(n):
                day = dt.datetime(year, 1, 1) + dt.timedelta(days=rng.randrange(365))
                amount = float(_cents(rng.uniform(15, 3500) if rng.random() < 0.9 else rng.uniform(3500, 12000)))
                status = void_word if i in void_at else "Posted"
                rows.append([day, fake.company(), rng.choice(CATEGORIES), amount, status])
            rows.sort(key=lambda r: r[0])
            tx[d] = rows
            spent[d] = float(sum(_cents(r[3]) for r in rows if r[4] == "Posted"))
            voided[d] = float(sum(_cents(r[3]) for r in rows if r[4] != "Posted"))
        total_row = {d: rng.random() < 0.5 for d in depts}

        # budgets: about a third of departments overspend, never by a hair
        over = set(rng.sample(depts, max(1, round(len(depts) * rng.uniform(0.2, 0.45)))))
        budget: dict[str, float] = {}
        for d in depts:
            factor = rng.uniform(0.7, 0.93) if d in over else rng.uniform(1.08, 1.5)
            b = math.floor(spent[d] * factor / 500) * 500 if d in over else math.ceil(spent[d] * factor / 500) * 500
            budget[d] = float(max(b, 500))
        over = {d for d in depts if spent[d] > budget[d]}
        last_depts = sorted(set(rng.sample(depts, len(depts) - 1)) | {rng.choice([x for x in DEPARTMENTS if x not in depts])})
        last_budget = {d: float(round(budget.get(d, 20000) * rng.uniform(0.75, 0.95) / 500) * 500 or 500) for d in last_depts}
        owners = {d: fake.name() for d in sorted(set(depts) | set(last_depts))}
        dept_file = {d: f"finance/expenses/{year}/{_slug(d)}.xlsx" for d in depts}
        last_file = {d: f"finance/expenses/{year - 1}/{_slug(d)}.xlsx" for d in last_depts}
        budget_order = depts[:]
        rng.shuffle(budget_order)
        last_order = last_depts[:]
        rng.shuffle(last_order)
        newest_first = rng.random() < 0.5
        last_tx = {
            d: sorted(
                ([dt.datetime(year - 1, 1, 1) + dt.timedelta(days=rng.randrange(365)), fake.company(),
                  rng.choice(CATEGORIES), float(_cents(rng.uniform(15, 3000))), "Posted"]
                 for _ in range(rng.randint(8, 16))),
                key=lambda r: r[0],
            )
            for d in last_depts
        }
        traps = {k for k, p in TRAP_ODDS.items() if rng.random() < p} or {rng.choice(sorted(TRAP_ODDS))}
        rev_pick, rev_factor = rng.random(), rng.uniform(0.08, 0.2)
        last_revised = sorted(rng.sample(last_depts, rng.randint(1, 2)))
        last_revisions = [[x, last_fy, last_budget[x], float(last_budget[x] + rng.choice([-1, 1, 2]) * 500 or 500),
                           dt.datetime(year - 1, rng.randint(3, 11), rng.randint(1, 28))] for x in last_revised]
        if level < self.levels:
            traps.add("total_rows")
        if "total_rows" not in traps:
            total_row = {d: False for d in depts}
        elif not any(total_row.values()):
            total_row[rng.choice(depts)] = True
        if level < self.levels:  # the same draws as the default, then fewer departments
            depts = sorted(sorted(depts, key=lambda d: (not total_row[d], d))[:{1: 1, 2: 3}[level]])
            budget_order = [d for d in budget_order if d in depts]
            last_depts = [d for d in last_depts if d in depts or d not in dept_file]
            last_order = [d for d in last_order if d in last_depts]
            over &= set(depts)
        if level == 1:  # five of its transactions (one voided), the budget over or under as before
            d = depts[0]
            keep = [r for r in tx[d] if r[4] != "Posted"][:1] + [r for r in tx[d] if r[4] == "Posted"][:4]
            tx[d] = [r for r in tx[d] if any(r is k for k in keep)]
            ratio, spent[d] = budget[d] / spent[d], float(sum(_cents(r[3]) for r in tx[d] if r[4] == "Posted"))
            voided[d] = float(sum(_cents(r[3]) for r in tx[d] if r[4] != "Posted"))
            rounded = math.floor if d in over else math.ceil
            budget[d] = float(max(rounded(spent[d] * ratio / 500) * 500, 500))
            over = {x for x in depts if spent[x] > budget[x]}
        revised: dict[str, dict] = {}
        if "revised" in traps:  # one department's budget moved across its spend: the flag flips
            d = depts[int(rev_pick * len(depts))]
            if d in over:
                new = math.ceil(spent[d] * (1 + rev_factor) / 500) * 500
            else:
                new = max(math.floor(spent[d] * (1 - rev_factor) / 500) * 500, 500)
            if (new < spent[d]) != (d in over):  # a budget too small to go under 500: no revision
                revised[d] = {"from": budget[d], "to": float(new),
                              "approved": dt.datetime(year, rng.randint(4, 10), rng.randint(1, 28))}
        sheet_budget = dict(budget)
        for d, r in revised.items():
            budget[d] = r["to"]
        over = {x for x in depts if spent[x] > budget[x]}
        revision_rows = sorted([r for r in last_revisions if r[0] in last_depts] + [[d, fy, r["from"], r["to"], r["approved"]] for d, r in revised.items()],
                               key=lambda r: r[4])

        def make_files() -> dict[str, Workbook]:
            files: dict[str, Workbook] = {}
            wb = Workbook()
            sheets = [(fy, budget_order, budget, dept_file), (last_fy, last_order, last_budget, last_file)]
            if not newest_first:
                sheets.reverse()
            wb.remove(wb.active)
            for title, order, amounts, paths in sheets:
                ws = wb.create_sheet(title)
                ws.append(["Department", "Owner", "Annual Budget", "Expense File"])
                for d in order:
                    ws.append([d, owners[d], (sheet_budget if title == fy else amounts)[d], paths[d]])
            ws = wb.create_sheet(REVISIONS)
            ws.append(REVISION_HEADER)
            for r in revision_rows:
                ws.append(r)
                ws.cell(row=ws.max_row, column=5).number_format = "yyyy-mm-dd"
            files[budgets_path] = wb
            for d in depts:
                files[dept_file[d]] = _expense_book(tx[d], total_row[d])
            for d in last_depts:
                files[last_file[d]] = _expense_book(last_tx[d], False)
            return files

        files = Files(make_files)
        order = sorted(depts, key=lambda d: -spent[d]) if by_spend else depts
        truth = {
            d: {"budget": budget[d], "spent": spent[d], "remaining": round(budget[d] - spent[d], 2), "over": d in over}
            for d in depts
        }
        data = {
            "year": year, "report": report, "sheet": sheet_name, "header": header, "order": order,
            "truth": truth, "voided": voided, "budgets_path": budgets_path, "fy": fy,
            "last_budget": last_budget, "dept_file": dept_file, "by_spend": by_spend,
            "revised": {d: {"from": r["from"], "to": r["to"]} for d, r in revised.items()},
            "total_rows": sorted(d for d in depts if total_row[d]),
        }

        sender = fake.first_name()
        w = phrasing_rng(self.name, seed)
        cols = ", ".join(header)
        hello = say(w, f"Hi, it's {sender} from Finance.", f"Hello, {sender} in Finance here.",
                    f"{sender} from Finance here.")
        need = say(w, f"Before Thursday's budget review I need a {fy} spend roll-up.",
                   f"I need a {fy} spend roll-up for Thursday's budget review.",
                   f"For the budget review on Thursday I need a roll-up of {fy} spend.")
        where = say(w, f"Each department's budget, and which expense workbook belongs to it, is on the {fy} sheet of "
                       f"{budgets_path} (ignore the {last_fy} sheet, that's last year).",
                    f"The {fy} sheet of {budgets_path} lists each department's budget and the expense workbook that "
                    f"belongs to it; ignore the {last_fy} sheet, which is last year's.",
                    f"You'll find every department's budget and which expense workbook is its own on the {fy} sheet "
                    f"of {budgets_path}. The {last_fy} sheet is last year: ignore it.")
        revisions = say(w, f"Budget changes approved during the year are logged on the {REVISIONS} sheet of the same "
                           f"workbook: where a department's {fy} budget was revised, use the revised figure.",
                        f"The {REVISIONS} sheet of that workbook logs the budget changes approved during the year; if "
                        f"a department's {fy} budget was revised there, the revised figure is its budget.",
                        f"Where a department's {fy} budget was changed during the year, the change is on the "
                        f"{REVISIONS} sheet of the same workbook, and the revised figure is the one to use.")
        folder = say(w, f"The department workbooks are under finance/expenses/{year}/.",
                     f"The department workbooks live in finance/expenses/{year}/.",
                     f"The workbooks of the departments are in the folder finance/expenses/{year}/.")
        create = say(w, f"Please create {report} with a sheet named \"{sheet_name}\".",
                     f"Could you create {report} with a sheet named \"{sheet_name}\"?",
                     f"The roll-up goes in a new file, {report}, on a sheet named \"{sheet_name}\".")
        order_text = (say(w, "sorted by spend, biggest spender first",
                          "ordered by spend with the biggest spender first",
                          "sorted by spend from the biggest spender down")
                      if by_spend else
                      say(w, "in alphabetical order by department", "sorted alphabetically by department",
                          "with departments in alphabetical order"))
        rows = say(w, f"Row 1 should be the header {cols}; below it one row per department, {order_text}.",
                   f"Put the header {cols} in row 1 and, under it, one row per department, {order_text}.",
                   f"Its first row is the header ({cols}), followed by one row per department, {order_text}.")
        spent = say(w, f"{spent_label} is the total of the department's Posted transactions for the year: lines "
                       f"marked {void_word} don't count, and watch out for the hand-made Total rows some people put "
                       "at the bottom of their sheets.",
                    f"For {spent_label}, add up the department's Posted transactions for the year. Lines marked "
                    f"{void_word} don't count, and be careful with the hand-made Total rows some people put at the "
                    "bottom of their sheets.",
                    f"Some people put hand-made Total rows at the bottom of their sheets, so watch out for those: "
                    f"{spent_label} is the total of the department's Posted transactions for the year, and lines "
                    f"marked {void_word} don't count.")
        rest = in_some_order(w, [
            say(w, f"{remaining_label} is Budget minus {spent_label} (negative when they overspent).",
                f"{remaining_label} is Budget minus {spent_label}, which is negative when they overspent.",
                f"For {remaining_label}, take Budget minus {spent_label} (a negative number when they overspent)."),
            say(w, f"{flag_label} should say Yes or No.", f"Fill {flag_label} with Yes or No.",
                f"{flag_label} is Yes or No."),
            say(w, "Rounding to the cent is fine.", "It's fine to round to the cent.",
                "Amounts rounded to the cent are fine."),
        ])
        leave = in_some_order(w, [
            say(w, "Please don't change the budget file or any of the department workbooks.",
                "Leave the budget file and all the department workbooks unchanged.",
                "Don't modify the budget file or any department workbook."),
            say(w, "Don't leave other new files lying around.", "Please don't leave any other new files lying around.",
                "No other new files should be left lying around."),
        ])
        instruction = (
            f"{hello} {need} {where} {revisions} {folder}\n\n"
            + " ".join([create, rows, spent, *rest]) + "\n\n"
            + " ".join([*leave, say(w, "Thanks!", "Thank you!", "Many thanks!")])
        )

        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=files.build,
            oracle=partial(_oracle, data, whole=level == 1), criteria=_criteria(data, files), data=data,
        )
        if len(depts) == 1:  # one department has no order to get wrong
            task.criteria = [c for c in task.criteria if c.id != "order"]
        flawed = _perturbations(data, whole=level == 1)
        task.perturbations = {c.id: flawed[c.id] for c in task.criteria}
        return task


def _perturbations(d: dict, whole: bool) -> dict:
    """One flawed oracle per criterion, each an edit of the oracle's calls: the summary it
    writes with one mistake, or a stray write after its read-back."""
    solve = partial(_oracle, d, whole=whole)
    summary = perturb.on("sheets__write_rows", path=d["report"], sheet=d["sheet"])

    def written(tweak=lambda rows: rows, **kw):
        """The oracle's summary rebuilt from its (name, budget, spent) rows passed through ``tweak``."""
        return perturb.change(solve, summary, edit=lambda a: {
            **a, "rows": _summary(d["header"], tweak([list(r[:3]) for r in a["rows"][1:]]), **kw)})

    def voided_counted(rows):
        return [[n, b, float(_cents(a) + _cents(d["voided"][n]))] for n, b, a in rows]

    def wrong_budget(rows):
        """The first department's budget from last year (or off by 500 where it did not change)."""
        name, budget, amount = rows[0]
        old = d["last_budget"].get(name, budget + 1000)
        return [[name, old + 500 if old == d["truth"][name]["budget"] else old, amount], *rows[1:]]

    def stray(*calls: ToolCall):
        return perturb.insert(solve, *calls)

    def revision_missed(rows):
        return [[n, d["revised"][n]["from"] if n in d["revised"] else b, a] for n, b, a in rows]

    def total_counted(rows):  # the Total row (every line, voided too) added to the Posted ones
        return [[n, b, float(2 * _cents(a) + _cents(d["voided"][n])) if n in d["total_rows"] else a]
                for n, b, a in rows]

    some_file, budgets = d["dept_file"][d["order"][0]], d["budgets_path"]
    return {
        "spent": written(voided_counted),  # voided lines counted too
        "order": written(lambda rows: rows[::-1]),
        "departments": written(lambda rows: rows[:-1]),
        "budgets": written(wrong_budget),
        "revised_budget": written(revision_missed),
        "total_rows_skipped": written(total_counted),
        "remaining": written(flipped=True),
        "over_budget": written(wrong_flag=True),
        "report_sheet": written(amount_header="Amount"),
        "sources_unchanged": stray(ToolCall("sheets__write_cells", {
            "path": some_file, "sheet": "Expenses", "cells": {"G1": "reviewed"}}, "Mark the file as reviewed.")),
        "no_source_writes": stray(
            ToolCall("sheets__write_cells", {"path": budgets, "sheet": d["fy"], "cells": {"A1": "Dept"}},
                     "Tweak the header."),
            ToolCall("sheets__write_cells", {"path": budgets, "sheet": d["fy"], "cells": {"A1": "Department"}},
                     "Put the header back.")),
        "only_report_created": stray(ToolCall(
            "sheets__create_workbook", {"path": f"finance/spend_review_{d['year']}_draft.xlsx"},
            "Keep a scratch copy.")),
    }


def _expense_book(rows: list[list], total_row: bool) -> Workbook:
    wb = Workbook()
    ws = wb.active
    ws.title = "Expenses"
    ws.append(["Date", "Vendor", "Category", "Amount", "Status"])
    for r in rows:
        ws.append(r)
        ws.cell(row=ws.max_row, column=1).number_format = "yyyy-mm-dd"
    if total_row:
        last = ws.max_row
        ws.append([])
        ws.append([None, "Total", None, f"=SUM(D2:D{last})", None])
    return wb


# -- grading ---------------------------------------------------------------------------------


def _criteria(d: dict, files: Files) -> list[Criterion]:
    truth, report, sheet, header = d["truth"], d["report"], d["sheet"], d["header"]

    def table(world):
        t = read_table(world.file(report), sheet)
        if t is None:
            return None, f"{report} or its sheet {sheet!r} is missing"
        head, rows = t
        body = [r for r in rows if not all(blank(v) for v in r)]
        body = [r for r in body if not norm_text(r[0]).startswith("total")]  # a grand-total row is harmless
        return (head, body), ""

    def by_dept(world):
        t, why = table(world)
        if t is None:
            return None, why
        out = {}
        for r in t[1]:
            r = list(r) + [None] * (5 - len(r))
            out.setdefault(norm_text(r[0]), r)
        return out, ""

    def report_sheet(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        head = [norm_text(v) for v in t[0][:5]]
        want = [norm_text(h) for h in header]
        return head == want, f"header {t[0][:5]!r}, expected {header!r}"

    def departments(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        names = [norm_text(r[0]) for r in t[1]]
        want = sorted(norm_text(x) for x in truth)
        return sorted(names) == want, f"departments listed: {names}"

    def order(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        names = [norm_text(r[0]) for r in t[1]]
        want = [norm_text(x) for x in d["order"]]
        return names == want, f"order {names}, expected {want}"

    def column(key: str, col: int, parse):
        def check(world, traj):
            rows, why = by_dept(world)
            if rows is None:
                return False, why
            bad = []
            for dept, t in truth.items():
                r = rows.get(norm_text(dept))
                got = parse(r[col]) if r else None
                ok = (got is t[key]) if parse is to_flag else close(got, t[key])
                if not ok:
                    bad.append(f"{dept}: {r[col] if r else 'missing'!r} (expected {t[key]!r})")
            return not bad, "; ".join(bad)
        return check

    def revised_budget(world, traj):
        rows, why = by_dept(world)
        if rows is None:
            return False, why
        bad = [f"{dept}: {rows.get(norm_text(dept), [None, 'missing'])[1]!r} (revised to {r['to']!r})"
               for dept, r in d["revised"].items()
               if not close(to_number(rows.get(norm_text(dept), [None, None])[1]), r["to"])]
        return not bad, "; ".join(bad)

    def total_rows_skipped(world, traj):
        rows, why = by_dept(world)
        if rows is None:
            return False, why
        bad = [f"{dept}: {rows.get(norm_text(dept), [None, None, 'missing'])[2]!r} (expected {truth[dept]['spent']!r})"
               for dept in d["total_rows"]
               if not close(to_number(rows.get(norm_text(dept), [None, None, None])[2]), truth[dept]["spent"])]
        return not bad, "; ".join(bad)

    optional = []
    if d["revised"]:
        optional.append(Criterion(
            "revised_budget", f"the budget revised this year ({', '.join(d['revised'])}) is the revised figure",
            "final_state", revised_budget))
    if d["total_rows"]:
        optional.append(Criterion(
            "total_rows_skipped", "departments whose sheet ends with a hand-made Total row are not counted twice",
            "final_state", total_rows_skipped))
    return [
        Criterion("report_sheet", f"{report} exists with sheet {sheet!r} whose header is {', '.join(header)}",
                  "final_state", report_sheet, requires=("spent",)),
        Criterion("departments", "the summary has exactly one row per department in the budget sheet",
                  "final_state", departments, requires=("spent",)),
        Criterion("order", "rows are in the order asked", "final_state", order, requires=("spent",)),
        Criterion("budgets", "each Budget is this fiscal year's budget", "final_state", column("budget", 1, to_number)),
        Criterion("spent", f"each {header[2]} is the sum of Posted transactions (to the cent)", "final_state",
                  column("spent", 2, to_number), weight=2.0),
        Criterion("remaining", f"each {header[3]} is Budget minus {header[2]}", "final_state",
                  column("remaining", 3, to_number)),
        Criterion("over_budget", f"{header[4]} is Yes exactly for departments that spent more than budget",
                  "final_state", column("over", 4, to_flag)),
        *optional,
        files_kit.unchanged(files, description="the budget file and every expense workbook are byte-identical"),
        files_kit.not_written(files, description="no tool call wrote to the budget file or any expense workbook"),
        files_kit.only_created(files, allowed=[report], id="only_report_created"),
    ]


# -- reference solution ----------------------------------------------------------------------


def _summary(header, rows: list[list], *, flipped: bool = False, wrong_flag: bool = False,
             amount_header: str | None = None) -> list[list]:
    """The summary sheet's rows: the header, then per department (name, budget, spent) the
    derived columns as formulas. The keywords make a perturbation's mistakes: remaining as
    spent - budget, a hard-coded wrong flag in the first row, another name for the spent column."""
    table = []
    for i, (name, budget, amount) in enumerate(rows, start=2):
        flag = f'=IF(C{i}>B{i},"Yes","No")'
        if wrong_flag and i == 2:
            flag = "No" if amount > budget else "Yes"
        table.append([name, budget, amount, f"=C{i}-B{i}" if flipped else f"=B{i}-C{i}", flag])
    head = list(header)
    if amount_header:
        head[2] = amount_header
    return [head] + table


def _oracle(d: dict, whole: bool = False):
    """Read the budget sheet, page through each department's workbook, write the summary with
    formulas for the derived columns, and read it back. ``whole`` (one department) skips the
    survey and reads each workbook in one call."""
    report, sheet, header, fy = d["report"], d["sheet"], d["header"], d["fy"]
    budgets_path = d["budgets_path"]

    if not whole:
        yield ToolCall("files__list_dir", {"path": "finance", "recursive": True},
                       "First, get the lay of the finance folder.")
        yield ToolCall("sheets__list_sheets", {"path": budgets_path}, f"Check which sheets {budgets_path} has.")
    budget_rows = parse_json((yield ToolCall(
        "sheets__read_range", {"path": budgets_path, "sheet": fy},
        f"Read the {fy} budgets and each department's expense file.")))["rows"]
    revisions = parse_json((yield ToolCall(
        "sheets__read_range", {"path": budgets_path, "sheet": REVISIONS},
        f"Check the {REVISIONS} sheet for budgets changed during the year.")))["rows"]
    revised = {}
    for r in revisions[1:]:  # in date order: a later revision of the same budget wins
        name, year, _, new = (r["values"] + [None] * 4)[:4]
        if name and str(year).strip() == fy:
            revised[name] = float(new)
    depts = []
    for r in budget_rows[1:]:
        name, _, amount, path = (r["values"] + [None] * 4)[:4]
        if name:
            depts.append((name, revised.get(name, float(amount)), path))

    spent: dict[str, Decimal] = {}
    for name, _, path in depts:
        sheet_info = {"name": "Expenses", "rows": 0}
        if not whole:
            info = parse_json((yield ToolCall("sheets__list_sheets", {"path": path},
                                              f"Size up {name}'s expense workbook.")))
            sheet_info = info[0]
        total = Decimal(0)
        spans = [None] if whole else [(start, min(start + CHUNK - 1, sheet_info["rows"]))
                                      for start in range(1, sheet_info["rows"] + 1, CHUNK)]
        for span in spans:
            where = {} if span is None else {"range": f"A{span[0]}:E{span[1]}"}
            rows = parse_json((yield ToolCall(
                "sheets__read_range", {"path": path, "sheet": sheet_info["name"], **where},
                f"Read {name}'s transactions" + ("." if span is None else f", rows {span[0]}-{span[1]}."))))["rows"]
            for r in rows:
                _, vendor, _, amount, status = r["values"]
                if isinstance(amount, (int, float)) and status == "Posted":
                    total += _cents(amount)
        spent[name] = total

    rows = [[name, budget, float(spent[name])] for name, budget, _ in depts]
    if d["by_spend"]:
        rows.sort(key=lambda r: -r[2])
    else:
        rows.sort(key=lambda r: r[0].lower())

    yield ToolCall("sheets__create_workbook", {"path": report, "sheets": [sheet]}, f"Create {report}.")
    yield ToolCall("sheets__write_rows", {"path": report, "sheet": sheet, "start_cell": "A1",
                                          "rows": _summary(header, rows)},
                   "Write the header and one row per department.")
    check = parse_json((yield ToolCall("sheets__read_range", {"path": report, "sheet": sheet},
                                       "Read the summary back to verify it.")))
    written = {r["values"][0]: r["values"] for r in check["rows"][1:]}
    mismatched = [n for n, _, amount in rows if n not in written or abs(float(written[n][2]) - amount) > 0.005]

    over = [r[0] for r in rows if r[2] > r[1]]
    return (
        f"Created {report} (sheet \"{sheet}\") with {len(rows)} departments. "
        f"Over budget: {', '.join(over) or 'none'}."
        + (f" Mismatches on read-back: {', '.join(mismatched)}." if mismatched else " Read-back matches.")
    )
