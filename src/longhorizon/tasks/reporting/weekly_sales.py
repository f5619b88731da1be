"""Reporting by mail: a manager's request in the inbox -> a summary workbook -> a reply mail.

Crosses three apps: the details live in the manager's mail (which week, which orders count,
whom to copy), the data in an orders workbook (next to last week's export, a distractor),
the layout in last week's report; the result is a new workbook mailed as an attachment.

At levels 2-3 the traps are drawn per seed (``TRAP_ODDS``, at least one): last week's request
asked to copy someone else (this week's says finance), and a follow-up mail from the manager
says one Completed order in the export was cancelled since (it stays out; graded by
``late_cancellation`` only where it is there) and/or asks to copy one more person this week
(``added_cc_copied``, likewise). Without the cancellation the manager may still
send a harmless follow-up. ``Task.data`` names each drawn trap, empty where it is absent.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import date, timedelta
from pathlib import Path

from openpyxl import Workbook

from longhorizon.apps.mail import state as mail
from longhorizon.apps.sheets.state import find_sheet, read_workbook, sheet_values, workbook_bytes
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    close,
    mails_sent,
    norm_path,
    norm_text,
    rng_and_faker,
    to_number,
    write_files,
    writes_to,
)

REGIONS = ["North", "South", "East", "West", "Central", "Northeast", "Pacific"]
STATUSES = ["Completed"] * 7 + ["Cancelled", "Refunded", "Pending"]
HEADER = ["Region", "Orders", "Revenue"]
PAGE = 20
TRAP_ODDS = (("stale_cc", 0.6), ("cancelled_since", 0.5), ("cc_added", 0.4))
"""Each trap there with this chance at levels 2-3 (one always); level 1 reads no mail."""


def _orders(rng, fake, regions: list[str], n: int, week: int) -> list[list]:
    rows = []
    for i in range(n):
        rows.append([
            f"SO-{week:02d}{i + 1:03d}",
            f"2026-W{week:02d}-{rng.randint(1, 5)}",
            rng.choice(regions),
            fake.name(),
            fake.company(),
            round(rng.uniform(80, 4800), 2),
            rng.choice(STATUSES),
        ])
    return rows


def _figures(rows: list[list], regions: list[str]) -> dict[str, tuple[int, float]]:
    count, revenue = defaultdict(int), defaultdict(float)
    for r in rows:
        if r[6] == "Completed":
            count[r[2]] += 1
            revenue[r[2]] += r[5]
    return {g: (count[g], round(revenue[g], 2)) for g in regions}


def _workbook(sheet: str, header: list, rows: list[list]) -> Workbook:
    wb = Workbook()
    ws = wb.active
    ws.title = sheet
    ws.append(header)
    for r in rows:
        ws.append(r)
    return wb


def _report_rows(fig: dict[str, tuple[int, float]]) -> list[list]:
    rows = [[g, c, v] for g, (c, v) in fig.items()]
    rows.append(["Total", sum(c for c, _ in fig.values()), round(sum(v for _, v in fig.values()), 2)])
    return rows


def _money_mentions(text: str) -> set[float]:
    """Every number in ``text``, with thousands separators and currency signs dropped."""
    return {float(m.replace(",", "")) for m in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}


@register
class WeeklySalesReport(TaskFamily):
    name = "weekly_sales_report"
    category = "reporting by mail"
    apps = ("mail", "sheets", "files")
    description = "Follow a manager's mailed request: summarise the week's orders per region and mail the workbook."

    levels = 3
    """1: one region, five orders (one of them not Completed), and the request told in the task
    itself, so no mail to look up; 2: two regions, at most two pages; 3 (default): four or five
    regions, 55-85 orders."""
    toolsets = {1: ("mail__send_message", "sheets__create_workbook", "sheets__read_range", "sheets__write_rows")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        short = level == 1  # one page of orders: read it, write the report, send it
        rng, fake = rng_and_faker(seed, self.name)
        domain = f"{fake.last_name().lower()}-{rng.choice(['trading', 'supply', 'retail'])}.com"
        person = lambda: (lambda f, l: (f"{f} {l}", f"{f.lower()}.{l.lower()}@{domain}"))(  # noqa: E731
            fake.first_name(), fake.last_name())
        me, manager, finance, other, added = person(), person(), person(), person(), person()
        week = rng.randint(6, 48)
        monday = date.fromisocalendar(2026, week + 1, 1)  # the report is due the Monday after the week
        day = lambda offset, hm: f"{(monday + timedelta(days=offset)).isoformat()}T{hm}:00"  # noqa: E731
        regions = sorted(rng.sample(REGIONS, rng.randint(4, 5)))
        rows = _orders(rng, fake, regions, rng.randint(55, 85), week)
        last_rows = _orders(rng, fake, regions, rng.randint(50, 80), week - 1)
        if level < self.levels:  # the same draws, then fewer regions (the default stays byte for byte)
            regions = regions[:level]
            rows = [r for r in rows if r[2] in regions][:level * PAGE]
            last_rows = [r for r in last_rows if r[2] in regions]
            if short:  # five orders, one of them left out (not Completed)
                out = next((r for r in rows if r[6] != "Completed"), None)
                rows = rows[:5] if out is None or out in rows[:5] else rows[:4] + [out]
        traps = {kind for kind, p in TRAP_ODDS if rng.random() < p} if not short else set()
        if not short and not traps:
            traps.add(rng.choice([kind for kind, _ in TRAP_ODDS]))
        completed = [r for r in rows if r[6] == "Completed"]
        cancelled = rng.choice(completed) if "cancelled_since" in traps and completed else None
        counted = [r if r is not cancelled else [*r[:6], "Cancelled"] for r in rows]  # what the report counts
        as_exported = _figures(rows, regions)
        fig, last_fig = _figures(counted, regions), _figures(last_rows, regions)
        total = round(sum(v for _, v in fig.values()), 2)
        orders_path = f"sales/orders_2026-W{week:02d}.xlsx"
        last_orders = f"sales/orders_2026-W{week - 1:02d}.xlsx"
        last_report = f"reports/weekly_sales_W{week - 1:02d}.xlsx"
        report = f"reports/weekly_sales_W{week:02d}.xlsx"
        order_header = ["Order ID", "Week day", "Region", "Sales rep", "Customer", "Amount", "Status"]
        files = {
            orders_path: workbook_bytes(_workbook("Orders", order_header, rows)),
            last_orders: workbook_bytes(_workbook("Orders", order_header, last_rows)),
            last_report: workbook_bytes(_workbook("Summary", HEADER, _report_rows(last_fig))),
        }
        request_body = (
            f"Hi {me[0].split()[0]},\n\nCould you put together the weekly sales summary for W{week:02d} from "
            f"the orders export in sales/? Same layout as last week's report (one row per region with the "
            f"number of orders and the revenue, then a Total row), saved as {report}. Only count Completed "
            f"orders: cancelled, refunded and pending ones stay out.\n\nSend it to me with the workbook "
            f"attached, cc {finance[0]} ({finance[1]}), and put the total revenue in the mail itself.\n\n"
            f"Thanks!\n{manager[0]}"
        )
        last_cc = f", cc {other[0]} this time" if "stale_cc" in traps else ""
        inbox = [
            {"folder": "Inbox", "sender": manager[1], "sender_name": manager[0], "to": [me[1]],
             "subject": f"Weekly sales W{week - 1:02d}", "date": day(-7, "08:05"), "is_read": True,
             "body": f"Hi,\n\nThe usual summary for W{week - 1:02d} please{last_cc}.\n\n{manager[0]}"},
            {"folder": "Inbox", "sender": other[1], "sender_name": other[0], "to": [me[1]],
             "subject": "Can you check the Q1 forecast?", "date": day(-3, "15:40"),
             "body": "When you have a minute, could you look over the Q1 forecast tab? No rush."},
            {"folder": "Inbox", "sender": f"news@{fake.domain_name()}", "sender_name": "Retail Weekly",
             "to": [me[1]], "subject": "Five metrics every sales team should track", "date": day(-1, "06:00"),
             "body": "Revenue per region, conversion and more. Read the full story on our site."},
            {"folder": "Inbox", "sender": manager[1], "sender_name": manager[0], "to": [me[1]],
             "subject": f"Weekly sales W{week:02d}", "date": day(0, "08:10"), "body": request_body},
        ]
        request_id = len(inbox)  # ids are 1.. in insertion order
        added_cc = added if "cc_added" in traps else None
        said = []
        if cancelled is not None:
            said.append(f"{cancelled[4]} cancelled order {cancelled[0]} after the export ran, so it still says "
                        f"Completed there. Please leave it out of the summary.")
        if added_cc is not None:
            said.append(f"Please also copy {added_cc[0]} ({added_cc[1]}) this week; they're covering the regional "
                        f"numbers while I'm travelling.")
        if not said and not short and rng.random() < 0.5:
            said.append("No rush, any time before lunch is fine.")
        followup = (f"Hi {me[0].split()[0]},\n\nOne more thing: {' '.join(said)} Everything else as in my first "
                    f"mail.\n\n{manager[0]}") if said else None
        if followup:
            inbox.append({"folder": "Inbox", "sender": manager[1], "sender_name": manager[0], "to": [me[1]],
                          "subject": f"Re: Weekly sales W{week:02d}", "date": day(0, "08:40"), "body": followup})
        followup_id = len(inbox) if followup else None

        def build(root: Path) -> None:
            write_files(root / "workspace", files)
            mail.create_mailbox(root / "state" / "mail.sqlite", me[1], me[0], messages=inbox,
                                now=day(0, "09:00"))

        w = phrasing_rng(self.name, seed)
        boss = manager[0].split()[0]
        sent = say(w, f"{boss} sent me a mail this morning about this week's sales numbers.",
                   f"This morning {boss} mailed me about this week's sales numbers.",
                   f"There's a mail from {boss} this morning about this week's sales numbers.")
        ask = say(w, "Could you handle it for me?", "Can you take care of it for me?", "Would you handle it for me?",
                  "Please deal with it for me.")
        where = say(w, "Everything you need should be in my mail and in the sales folder.",
                    "My mail and the sales folder should have everything you need.",
                    "You should find all you need in my mail and in the sales folder.")
        keep = say(w, "Please don't touch the exports themselves.", "Leave the exports themselves untouched, please.",
                   "Don't touch the exports themselves.")
        instruction = " ".join([say(w, "", "Hi!", "Hello!", "Hey!"), sent, ask, *in_some_order(w, [where, keep])])
        instruction = instruction.strip()
        if short:  # the request itself, told briefly: no mail to find
            sent = say(w, f"{boss} asked me this morning for the W{week:02d} sales summary.",
                       f"This morning {boss} asked for the weekly sales summary for W{week:02d}.")
            what = say(w, f"Build it from the orders export in sales/ in last week's layout (one row per region with "
                          f"the number of orders and the revenue, then a Total row), counting Completed orders only, "
                          f"and save it as {report}.",
                       f"Please save it as {report}: last week's layout (a row per region with the number of orders "
                       f"and the revenue, then a Total row), from the orders export in sales/, Completed orders "
                       f"only.")
            mail_it = say(w, f"Then mail it to {boss} ({manager[1]}) as an attachment, cc {finance[0]} ({finance[1]}), "
                             f"with the total revenue in the mail.",
                          f"Send it to {boss} ({manager[1]}) with the workbook attached and the total revenue in the "
                          f"text, cc {finance[0]} ({finance[1]}).")
            instruction = " ".join([sent, what, mail_it, keep])

        def solve(*, header=HEADER, wrong_region=False, total_row=True, attach=True, cc=True,
                  mention_total=True, extra_mail=False, edit_source=False, fig=fig, add_cc=True):
            if not short:  # level 1's task tells the request
                yield ToolCall("mail__search_messages", {"query": "weekly sales", "sender": manager[1]},
                               "Find the manager's request.")
                yield ToolCall("mail__read_message", {"message_id": request_id}, "Read this week's request in full.")
                if followup_id:
                    yield ToolCall("mail__read_message", {"message_id": followup_id},
                                   "Read the manager's follow-up: does it change anything?")
                yield ToolCall("files__list_dir", {"path": "sales"}, "See which exports exist.")
                yield ToolCall("files__list_dir", {"path": "reports"}, "Find last week's report for the layout.")
            yield ToolCall("sheets__read_range", {"path": last_report, "sheet": "Summary"},
                           "Copy last week's layout.")
            if not short:
                yield ToolCall("sheets__list_sheets", {"path": orders_path}, "Check the size of this week's export.")
            for start in range(2, len(rows) + 2, PAGE):
                end = min(start + PAGE - 1, len(rows) + 1)
                yield ToolCall("sheets__read_range", {"path": orders_path, "sheet": "Orders", "range": f"A{start}:G{end}"},
                               f"Read orders rows {start}-{end}.")
            out = _report_rows(fig)
            if wrong_region:  # counts a cancelled order too (or, with none in a short export, one too many)
                bad = next((r for r in rows if r[6] != "Completed"), None)
                i = regions.index(bad[2]) if bad else 0
                out[i] = [out[i][0], out[i][1] + 1, round(out[i][2] + (bad[5] if bad else 0), 2)]
            if not total_row:
                out = out[:-1]
            yield ToolCall("sheets__create_workbook", {"path": report, "sheets": ["Summary"]}, "Create the report.")
            yield ToolCall("sheets__write_rows", {"path": report, "sheet": "Summary", "start_cell": "A1",
                                                   "rows": [list(header)] + out}, "Write the summary.")
            if not short:
                yield ToolCall("sheets__read_range", {"path": report, "sheet": "Summary"}, "Verify the report.")
            if edit_source:
                yield ToolCall("sheets__write_cells", {"path": orders_path, "sheet": "Orders", "cells": {"H1": "Checked"}})
            body = f"Hi {manager[0].split()[0]},\n\nAttached is the W{week:02d} sales summary"
            told = round(sum(v for _, v in fig.values()), 2)
            body += f": total revenue from completed orders is {told:,.2f}." if mention_total else "."
            body += "\n\nBest,\n" + me[0]
            args = {"to": [manager[1]], "subject": f"Weekly sales W{week:02d}", "body": body,
                    "cc": ([finance[1]] if cc else []) + ([added_cc[1]] if added_cc and add_cc else []),
                    "attachments": [report] if attach else []}
            yield ToolCall("mail__send_message", args, "Send the report as asked.")
            if extra_mail:
                yield ToolCall("mail__send_message", {"to": [other[1]], "subject": "FYI",
                                                      "body": "Sales numbers are out."})
            if not short:
                yield ToolCall("mail__list_messages", {"folder": "Sent"}, "Check the mail went out.")
            return (f"Sent the W{week:02d} summary to {manager[0]} (cc {finance[0]}); total revenue "
                    f"{round(sum(v for _, v in fig.values()), 2):,.2f}.")

        def oracle():
            return solve()

        def figures_ok(path: Path) -> tuple[bool, str]:
            wb = read_workbook(path)
            ws = find_sheet(wb, "Summary") or wb.worksheets[0]
            table = sheet_values(wb, ws.title)
            by_region = {norm_text(r[0]): r for r in table[1:] if r and r[0] is not None}
            wrong = []
            for g, (c, v) in fig.items():
                r = by_region.get(norm_text(g))
                if r is None or len(r) < 3 or to_number(r[1]) != c or not close(to_number(r[2]), v):
                    wrong.append(g)
            return not wrong, f"wrong or missing regions: {wrong}" if wrong else ""

        def report_path(w):
            return w.file(report)

        def layout(w, t):
            wb = read_workbook(report_path(w))
            ws = find_sheet(wb, "Summary")
            if ws is None:
                return False, "no Summary sheet"
            rows = sheet_values(wb, ws.title)
            if not rows:
                return False, "the Summary sheet is empty"
            head = [norm_text(v) for v in rows[0][:3]]
            return head == [h.lower() for h in HEADER], f"header {head}"

        def figures(w, t):
            return figures_ok(report_path(w))

        def total_line(w, t):
            wb = read_workbook(report_path(w))
            ws = find_sheet(wb, "Summary") or wb.worksheets[0]
            rows_ = [r for r in sheet_values(wb, ws.title)[1:] if r and norm_text(r[0]) == "total"]
            ok = bool(rows_) and to_number(rows_[0][1]) == sum(c for c, _ in fig.values()) \
                and close(to_number(rows_[0][2]), total)
            return ok, "" if ok else "Total row missing or wrong"

        def the_mail(w):
            sent = [m for m in mail.sent_messages(w) if manager[1] in m["to"]]
            return sent[-1] if sent else None

        def mailed_with_report(w, t):
            m = the_mail(w)
            if m is None:
                return False, "nothing sent to the manager"
            books = [a["name"] for a in m["attachments"] if a["name"].lower().endswith(".xlsx")]
            if not books:
                return False, "no workbook attached"
            return figures_ok(mail.attachment_path(w, m["id"], books[0]))

        def copied_finance(w, t):
            m = the_mail(w)
            return bool(m) and finance[1] in m["cc"] + m["to"]

        def copied_added(w, t):
            m = the_mail(w)
            if not m or added_cc[1] not in m["cc"] + m["to"]:
                return False, "the person the follow-up added is not copied"
            unasked = set(m["cc"] + m["to"]) - {manager[1], finance[1], added_cc[1], me[1]}
            return not unasked, f"also copied {sorted(unasked)}, whom nobody asked for" if unasked else ""

        def total_in_body(w, t):
            m = the_mail(w)
            if m is None:
                return False
            nums = _money_mentions(m["body"])
            return any(abs(n - total) < 0.01 or abs(n - round(total)) < 0.5 and n == round(n) for n in nums)

        def cancellation_left_out(w, t):
            if not report_path(w).exists():
                return False, "no report"
            wb = read_workbook(report_path(w))
            ws = find_sheet(wb, "Summary") or wb.worksheets[0]
            g = cancelled[2]
            r = next((r for r in sheet_values(wb, ws.title)[1:] if r and norm_text(r[0]) == norm_text(g)), None)
            c, v = fig[g]
            ok = r is not None and len(r) >= 3 and to_number(r[1]) == c and close(to_number(r[2]), v)
            return ok, "" if ok else f"{g}: order {cancelled[0]}, cancelled since the export, is still counted"

        def one_mail(w, t):
            sends = mails_sent(t)
            return len(sends) == 1, f"{len(sends)} mails sent"

        def sources_untouched(w, t):
            hits = writes_to(t, [norm_path(orders_path), norm_path(last_orders), norm_path(last_report)])
            return not hits, f"touched: {hits}" if hits else ""

        criteria = [
            Criterion("report_layout", f"{report} has a Summary sheet headed Region, Orders, Revenue",
                      "final_state", layout, requires=("region_figures",)),
            Criterion("region_figures", "each region's completed-order count and revenue are right",
                      "final_state", figures, 2.0),
            Criterion("total_row", "a Total row sums orders and revenue", "final_state", total_line),
            Criterion("mailed_with_report", "a mail to the manager carries the correct workbook",
                      "final_state", mailed_with_report, 2.0),
            *([Criterion("late_cancellation", f"the order the manager's follow-up says was cancelled after the "
                         f"export is left out of its region's figures", "final_state", cancellation_left_out)]
              if cancelled is not None else []),
            Criterion("finance_copied", "finance is copied on that mail", "final_state", copied_finance,
                      requires=("mailed_with_report",)),
            *([Criterion("added_cc_copied", "the person the manager's follow-up asks to copy this week is on "
                         "that mail too (and no one unasked)", "final_state", copied_added, requires=("mailed_with_report",))]
              if added_cc else []),
            Criterion("total_in_mail", "the mail states the total revenue", "final_state", total_in_body,
                      requires=("mailed_with_report",)),
            Criterion("one_mail_only", "exactly one mail was sent", "process", one_mail,
                      requires=("mailed_with_report",)),
            Criterion("exports_untouched", "no write touched the exports or last week's report", "process",
                      sources_untouched, guard=True),
        ]
        perturbations = {
            "report_layout": lambda: solve(header=["Region", "Count", "Revenue"]),
            "region_figures": lambda: solve(wrong_region=True),
            "total_row": lambda: solve(total_row=False),
            "mailed_with_report": lambda: solve(attach=False),
            "finance_copied": lambda: solve(cc=False),
            "late_cancellation": lambda: solve(fig=as_exported),
            "added_cc_copied": lambda: solve(add_cc=False),
            "total_in_mail": lambda: solve(mention_total=False),
            "one_mail_only": lambda: solve(extra_mail=True),
            "exports_untouched": lambda: solve(edit_source=True),
        }
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=oracle,
            criteria=criteria, perturbations={c.id: perturbations[c.id] for c in criteria},
            data={"week": week, "figures": fig, "total": total, "report": report,
                  "stale_cc": other[1] if "stale_cc" in traps else "",
                  "cancelled_since": cancelled[0] if cancelled is not None else "",
                  "cc_added": added_cc[1] if added_cc else ""},
        )
