"""SQL analytics: answer a manager's quarterly-review questions from the warehouse.

The manager's mail (next to last quarter's request, a stale copy) asks four questions, each
needing its own query over the read-only analytics database: 30-day revenue of signup
cohorts, the best-selling product per region (ties listed), month-over-month revenue
growth (the first month's growth needs the month before it), and refund rates by region or
channel. Test accounts must be left out everywhere, only completed orders count, and a stale
``revenue_snapshot`` table invites a shortcut. The answers go into a workbook with the exact
sheets and headers asked for, mailed back with a two-line summary. Graders recompute every
answer from the World's database with reference SQL.

The default level draws its trap mix per seed (``TRAPS``, each there with ``TRAP_ODDS``, at
least one always; levels 1-2 keep every kind): last quarter's request (asking to include the
test accounts) still in the inbox, the lead's note that revenue_snapshot is frozen, and a test
account's bulk order that would top a region's best sellers. ``Task.data`` names each (empty
when absent). The QA account's cohort order, the tie for first place and the month before the
first are in every instance.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from pathlib import Path

from openpyxl import Workbook

from longhorizon.apps.mail import state as mail
from longhorizon.apps.sheets.state import workbook_bytes
from longhorizon.apps.sql import state as sqlstate
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.analytics import (
    add_months,
    mentions_month,
    mentions_number,
    month_end,
    month_key,
    month_label,
    pct_close,
)
from longhorizon.tasks.analytics.warehouse import make_warehouse, memory_db, ordered_rows, run
from longhorizon.tasks.common import (
    MONTHS,
    People,
    at_most_one_mail,
    close,
    company,
    names_word,
    norm_path,
    norm_text,
    parse_json,
    read_table,
    rng_and_faker,
    same_bytes,
    to_number,
    writes_to,
)


TRAPS = ("stale_request", "snapshot_note", "test_bulk")
TRAP_ODDS = 0.6


# -- reference SQL (oracle, generator and graders all run exactly these) ----------------------

def cohort_sql(first: date, last: date) -> str:
    return f"""SELECT strftime('%Y-%m', c.signup_date) AS cohort,
       COUNT(DISTINCT c.customer_id) AS customers,
       ROUND(COALESCE(SUM(CASE WHEN o.status = 'completed'
                                AND julianday(o.order_date) - julianday(c.signup_date) <= 30
                           THEN i.quantity * i.unit_price END), 0), 2) AS revenue_30d
FROM customers c
LEFT JOIN orders o ON o.customer_id = c.customer_id
LEFT JOIN order_items i ON i.order_id = o.order_id
WHERE c.is_test = 0 AND c.signup_date BETWEEN '{first}' AND '{last}'
GROUP BY cohort ORDER BY cohort"""


def top_products_sql(first: date, last: date, *, ties: bool = True) -> str:
    rank = "RANK() OVER (PARTITION BY region ORDER BY units DESC)" if ties else \
        "ROW_NUMBER() OVER (PARTITION BY region ORDER BY units DESC, product)"
    return f"""WITH units AS (
  SELECT r.name AS region, p.name AS product, SUM(i.quantity) AS units
  FROM orders o
  JOIN customers c ON c.customer_id = o.customer_id
  JOIN regions r ON r.region_id = c.region_id
  JOIN order_items i ON i.order_id = o.order_id
  JOIN products p ON p.product_id = i.product_id
  WHERE o.status = 'completed' AND c.is_test = 0 AND o.order_date BETWEEN '{first}' AND '{last}'
  GROUP BY r.name, p.name),
ranked AS (SELECT region, product, units,
                  {rank} AS rk FROM units)
SELECT region, product, units FROM ranked WHERE rk = 1 ORDER BY region, product"""


def runner_up_sql(first: date, last: date) -> str:
    return f"""WITH units AS (
  SELECT r.name AS region, p.name AS product, SUM(i.quantity) AS units
  FROM orders o
  JOIN customers c ON c.customer_id = o.customer_id
  JOIN regions r ON r.region_id = c.region_id
  JOIN order_items i ON i.order_id = o.order_id
  JOIN products p ON p.product_id = i.product_id
  WHERE o.status = 'completed' AND c.is_test = 0 AND o.order_date BETWEEN '{first}' AND '{last}'
  GROUP BY r.name, p.name)
SELECT region, product, units,
       DENSE_RANK() OVER (PARTITION BY region ORDER BY units DESC) AS place
FROM units ORDER BY region, units DESC, product"""


def monthly_sql(first: date, last: date) -> str:
    return f"""WITH m AS (
  SELECT strftime('%Y-%m', o.order_date) AS month, SUM(i.quantity * i.unit_price) AS revenue
  FROM orders o
  JOIN customers c ON c.customer_id = o.customer_id
  JOIN order_items i ON i.order_id = o.order_id
  WHERE o.status = 'completed' AND c.is_test = 0 AND o.order_date BETWEEN '{first}' AND '{last}'
  GROUP BY month)
SELECT month, ROUND(revenue, 2) AS revenue,
       ROUND(100.0 * (revenue - LAG(revenue) OVER (ORDER BY month)) / LAG(revenue) OVER (ORDER BY month), 1)
         AS growth_pct
FROM m ORDER BY month"""


def refunds_sql(first: date, last: date, dim: str, *, statuses: str = "('completed')") -> str:
    group = "r.name" if dim == "region" else "o.channel"
    return f"""SELECT {group} AS {dim},
       COUNT(*) AS orders,
       SUM(EXISTS (SELECT 1 FROM refunds f WHERE f.order_id = o.order_id)) AS refunded,
       ROUND(100.0 * SUM(EXISTS (SELECT 1 FROM refunds f WHERE f.order_id = o.order_id)) / COUNT(*), 1)
         AS refund_rate_pct,
       100.0 * SUM(EXISTS (SELECT 1 FROM refunds f WHERE f.order_id = o.order_id)) / COUNT(*) AS exact_rate
FROM orders o
JOIN customers c ON c.customer_id = o.customer_id
JOIN regions r ON r.region_id = c.region_id
WHERE o.status IN {statuses} AND c.is_test = 0 AND o.order_date BETWEEN '{first}' AND '{last}'
GROUP BY {group} ORDER BY exact_rate DESC, {dim}"""


@register
class QuarterlyKpiReview(TaskFamily):
    name = "quarterly_kpi_review"
    category = "SQL analytics"
    apps = ("mail", "sql", "sheets", "files")
    description = (
        "Answer a manager's quarterly-review questions (cohort revenue, top products per region with "
        "ties, month-over-month growth, refund rates) with SQL over the warehouse, excluding test "
        "accounts; write a workbook with the exact sheets and headers requested and mail a summary."
    )

    levels = 3
    """1: one question (refund rates, the QA accounts and non-completed orders left out) next to
    last quarter's stale request, the sheet not read back; 2: also month-over-month growth (its first month needs the
    month before), with the note about the frozen snapshot table; 3 (default): also the signup
    cohorts and the top products per region (ties listed). The warehouse is the same at every level."""
    level_apps = {1: ("mail", "sql", "sheets")}
    """Level 1 reads last quarter's report by name only (no files tools)."""
    toolsets = {1: (
        "mail__list_messages", "mail__read_message", "mail__send_message", "sheets__create_workbook",
        "sheets__write_rows", "sql__query",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        asked = {1: ("refunds",), 2: ("growth", "refunds")}.get(level, ("cohorts", "top", "growth", "refunds"))
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        our_company, domain = company(fake)
        me, manager, lead, other = (people.make(domain) for _ in range(4))

        year = rng.choice([2024, 2025])
        quarter = rng.choice([2, 3, 4])
        q_start = date(year, 3 * quarter - 2, 1)
        q_end = month_end(add_months(q_start, 2))
        today = q_end + timedelta(days=rng.randint(3, 9))
        while today.weekday() >= 5:
            today += timedelta(days=1)
        data_start = add_months(q_start, -9)
        cohort_first = add_months(q_start, -3)
        cohort_last = q_start - timedelta(days=1)
        mom_first = add_months(q_start, -3)  # six months, ending with the quarter
        prev_month = add_months(mom_first, -1)
        dim = rng.choice(["region", "channel"])
        traps = {k for k in TRAPS if rng.random() < TRAP_ODDS}
        if not traps:
            traps.add(rng.choice(TRAPS))
        if level < self.levels:  # levels 1-2 keep every kind they show
            traps = set(TRAPS)

        wh = make_warehouse(rng, fake, data_start, today - timedelta(days=1),
                            company_domain=domain)
        region_ids = {r[1]: r[0] for r in wh.rows["regions"]}
        product_ids = {p[2]: p[0] for p in wh.rows["products"]}
        price_of = {p[0]: p[4] for p in wh.rows["products"]}

        def in_q() -> date:
            return q_start + timedelta(days=rng.randrange((q_end - q_start).days + 1))

        def customer(region_id: int | None, by: date) -> int:
            pool = wh.customers_in(region_id, signed_by=by) if region_id else []
            if not pool:
                pool = [c[0] for c in wh.rows["customers"] if not c[6] and c[5] <= by.isoformat()]
            return rng.choice(sorted(pool))

        # a QA account in the first cohort month with a big early order: counted only by mistake
        tid = max(c[0] for c in wh.rows["customers"]) + 1
        t_signup = cohort_first + timedelta(days=rng.randint(0, 20))
        wh.rows["customers"].append((tid, "QA Regression Bot", f"qa+regression@{domain}",
                                     rng.choice(list(region_ids.values())), "consumer", t_signup.isoformat(), 1))
        pid0 = wh.rows["products"][0][0]
        wh.add_order(tid, t_signup + timedelta(days=2), [(pid0, 9, price_of[pid0])])

        # engineer the questions' edge cases (a tie for first place, a clear highest refund rate,
        # a clear fastest-growing month), recomputing with the reference SQL after each change
        for _ in range(8):
            conn = memory_db(ordered_rows(wh))
            places = run(conn, runner_up_sql(q_start, q_end))
            by_region: dict[str, list[tuple]] = {}
            for reg, prod, units, place in places:
                by_region.setdefault(reg, []).append((prod, units, place))
            tied = [reg for reg, rs in by_region.items() if sum(1 for r in rs if r[2] == 1) > 1]
            if not tied:
                reg = rng.choice(sorted(r for r, rs in by_region.items() if any(x[2] == 2 for x in rs)))
                top, second = by_region[reg][0], next(r for r in by_region[reg] if r[2] == 2)
                pid = product_ids[second[0]]
                wh.add_order(customer(region_ids[reg], q_start), in_q(), [(pid, top[1] - second[1], price_of[pid])])
                continue
            refunds = run(conn, refunds_sql(q_start, q_end, dim))
            if len(refunds) > 1 and refunds[0][4] - refunds[1][4] < 0.3:
                region_of = {c[0]: c[3] for c in wh.rows["customers"]}
                test_ids = {c[0] for c in wh.rows["customers"] if c[6]}
                region_name = {r[0]: r[1] for r in wh.rows["regions"]}
                refunded = {f[1] for f in wh.rows["refunds"]}
                oid, day = next(
                    (o[0], date.fromisoformat(o[2])) for o in wh.rows["orders"]
                    if o[3] == "completed" and q_start.isoformat() <= o[2] <= q_end.isoformat()
                    and o[0] not in refunded and o[1] not in test_ids
                    and (o[4] if dim == "channel" else region_name[region_of[o[1]]]) == refunds[0][0])
                wh.add_refund(oid, day + timedelta(days=6), wh.order_total(oid) * 0.5, "defective")
                continue
            monthly = run(conn, monthly_sql(prev_month, q_end))[1:]
            growths = sorted((g for _, _, g in monthly), reverse=True)
            if growths[0] - growths[1] < 0.3:
                d = date.fromisoformat(max(monthly, key=lambda r: r[2])[0] + "-15")
                pid = max(price_of, key=price_of.get)
                wh.add_order(customer(None, d), d, [(pid, 3, price_of[pid])])
                continue
            break
        else:  # pragma: no cover - the loop settles within a few rounds
            raise RuntimeError(f"{self.name}: could not settle the data for seed {seed}")
        conn.close()
        # a test account buys a region's runner-up in bulk: excluded, but it would top the list
        test_customers = sorted((c[3], c[0]) for c in wh.rows["customers"] if c[6])
        t_region, t_cust = test_customers[0]
        t_name = next(r[1] for r in wh.rows["regions"] if r[0] == t_region)
        bulk_region = ""
        if t_name in by_region and "test_bulk" in traps:
            bulk_region = t_name
            runner = next((r for r in by_region[t_name] if r[2] == 2), by_region[t_name][-1])
            pid = product_ids[runner[0]]
            wh.add_order(t_cust, in_q(), [(pid, by_region[t_name][0][1] + 4, price_of[pid])])

        rows = ordered_rows(wh)
        conn = memory_db(rows)
        truth = {
            "cohorts": run(conn, cohort_sql(cohort_first, cohort_last)),
            "top": run(conn, top_products_sql(q_start, q_end)),
            "monthly": run(conn, monthly_sql(prev_month, q_end))[1:],
            "refunds": [r[:4] for r in run(conn, refunds_sql(q_start, q_end, dim))],
        }
        conn.close()
        best_month = max(truth["monthly"], key=lambda r: r[2])
        top_refund = truth["refunds"][0]

        # ---- the request -------------------------------------------------------------------
        q_label = f"Q{quarter} {year}"
        report = f"reports/kpi_review_{year}_Q{quarter}.xlsx"
        prev_q = (year, quarter - 1)
        old_report = f"reports/kpi_review_{prev_q[0]}_Q{prev_q[1]}.xlsx"
        rev_label = rng.choice(["Revenue", "Revenue (USD)", "Net Sales"])
        sheets = {
            "cohorts": (rng.choice(["Cohorts", "Signup Cohorts"]), ["Cohort", "Customers", f"30-Day {rev_label}"]),
            "top": (rng.choice(["Top Products", "Best Sellers"]), ["Region", "Product", "Units"]),
            "growth": (rng.choice(["MoM", "Monthly Growth"]), ["Month", rev_label, "Growth %"]),
            "refunds": (rng.choice(["Refunds", "Refund Rates"]),
                        [dim.capitalize(), "Orders", "Refunded", "Refund Rate %"]),
        }

        def spec(key: str) -> str:
            name, header = sheets[key]
            return f"sheet \"{name}\" with header row {' | '.join(header)}"

        months_text = f"{month_label(mom_first.strftime('%Y-%m'))} to {month_label(q_end.strftime('%Y-%m'))}"
        cohort_text = (f"{MONTHS[cohort_first.month - 1].capitalize()} to "
                       f"{MONTHS[cohort_last.month - 1].capitalize()} {cohort_last.year}")
        questions = {
            "cohorts": f"{spec('cohorts')}: for each signup month from {cohort_text}, the number of customers who "
                       f"signed up that month and the revenue those customers brought in within 30 days of signing "
                       f"up (orders placed no more than 30 days after their signup date). One row per month, oldest "
                       f"first, month written as YYYY-MM.",
            "top": f"{spec('top')}: the best-selling product by units in each region during {q_label}. If two or "
                   f"more products tie for first place in a region, list every one of them, one row each. Sort by "
                   f"region, then product.",
            "growth": f"{spec('growth')}: revenue for each month from {months_text} and its growth versus the "
                      f"previous month, as a percentage with one decimal (e.g. 4.2 or -3.5). Oldest first, YYYY-MM.",
            "refunds": f"{spec('refunds')}: for the completed orders placed in {q_label}, per {dim}: how many there "
                       f"were, how many got at least one refund (whenever it was issued), and that share as a "
                       f"percentage with one decimal. Highest rate first.",
        }
        numbered = "\n".join(f"{i}. {questions[k]}" for i, k in enumerate(asked, 1))
        if level == 1:
            rules = (f"Ground rules: only completed orders count (cancelled and pending ones don't), and leave the "
                     f"QA test accounts out - they keep polluting our numbers.\n\n"
                     f"Then mail me the workbook with a one-line summary: which {dim} has the highest refund rate "
                     f"(with the rate).")
        else:
            rules = (f"Ground rules for all {'four' if len(asked) == 4 else 'both'}: revenue is quantity x unit "
                     f"price over the order lines of completed orders (cancelled and pending ones don't count, and "
                     f"don't net off refunds), and leave the QA test accounts out of everything - they keep "
                     f"polluting our numbers.\n\n"
                     f"Then mail me the workbook with a two-line summary: which month grew fastest (and by how "
                     f"much), and which {dim} has the highest refund rate (with the rate).")
        request = (
            f"Hi {me.first},\n\n"
            f"For the {q_label} business review on Thursday I need "
            f"{'the refund rates' if level == 1 else 'a few numbers'} straight from the warehouse (the sql tool). "
            f"Could you build {report} with {'one sheet' if level == 1 else 'one sheet per question'}, using exactly "
            f"{'this sheet name and header row' if level == 1 else 'these sheet names and header rows'}:\n\n"
            f"{numbered}\n\n{rules}\n\nThanks!\n{manager.first}"
        )
        old_request = (
            f"Hi {me.first},\n\nSame drill as always for the Q{prev_q[1]} {prev_q[0]} review: cohorts, top "
            f"products, monthly growth and refunds into {old_report}. Please include the test accounts this "
            f"time, QA wants to see their volume.\n\nThanks,\n{manager.first}"
        )
        at = lambda d, h, m: datetime.combine(d, time(h, m)).isoformat()  # noqa: E731
        stale = {"folder": "Inbox", "sender": manager.email, "sender_name": manager.name, "to": [me.email],
                 "subject": f"Numbers for the Q{prev_q[1]} review", "body": old_request,
                 "date": at(q_start + timedelta(days=4), 9, 12), "is_read": True}
        inbox = [
            {"folder": "Inbox", "sender": lead.email, "sender_name": lead.name, "to": [me.email],
             "subject": "Heads up: revenue_snapshot is frozen",
             "body": (f"FYI the old BI export job was retired in {MONTHS[(data_start.month + 3) % 12].capitalize()}, "
                      "so revenue_snapshot stopped updating. Compute revenue from orders/order_items.\n\n"
                      f"{lead.first}"),
             "date": at(q_start + timedelta(days=20), 15, 40), "is_read": True},
            {"folder": "Inbox", "sender": other.email, "sender_name": other.name, "to": [me.email],
             "subject": "Dashboard access", "body": "Could you give me access to the sales dashboard? Thanks!",
             "date": at(today - timedelta(days=2), 11, 5)},
            {"folder": "Inbox", "sender": manager.email, "sender_name": manager.name, "to": [me.email],
             "subject": f"Numbers for the {q_label} review", "body": request,
             "date": at(today, 8, 20)},
        ]
        note = inbox[0]
        if level == 1:  # no revenue is asked: the snapshot note and the other mail are left out
            inbox = [inbox[-1]]
        elif "snapshot_note" not in traps:
            inbox = inbox[1:]
        if "stale_request" in traps:
            inbox.insert(0, stale)
        request_id = len(inbox)
        note_id = next((k for k, m in enumerate(inbox, 1) if m is note), None)

        def old_workbook() -> bytes:
            """Last quarter's pack: same layout, last quarter's (stale) numbers, test accounts included."""
            pq_start = add_months(q_start, -3)
            fake_rows = {
                "cohorts": [[add_months(pq_start, k - 3).strftime("%Y-%m"), rng.randint(12, 30),
                             round(rng.uniform(2000, 9000), 2)] for k in range(3)],
                "top": [[r, rng.choice(wh.product_names), rng.randint(8, 30)] for r in wh.region_names],
                "growth": [[add_months(pq_start, k - 3).strftime("%Y-%m"), round(rng.uniform(20000, 60000), 2),
                            round(rng.uniform(-12, 15), 1)] for k in range(6)],
                "refunds": [[g, rng.randint(40, 200), rng.randint(2, 15), round(rng.uniform(2, 12), 1)]
                            for g in (wh.region_names if dim == "region" else ["web", "mobile", "phone"])],
            }
            wb = Workbook()
            wb.remove(wb.active)
            for key in asked:
                name, header = sheets[key]
                ws = wb.create_sheet(name)
                ws.append(header)
                for r in fake_rows[key]:
                    ws.append(r)
            return workbook_bytes(wb)

        old_bytes = old_workbook()

        def build(root: Path) -> None:
            sqlstate.create_analytics_db(root / "state" / "sql.sqlite", rows)
            p = root / "workspace" / old_report
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(old_bytes)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox,
                                now=at(today, 9, 0))

        w = phrasing_rng(self.name, seed)
        sent = say(w, f"{manager.first} sent me a list of questions for the {q_label} business review this morning.",
                   f"This morning {manager.first} sent me a list of questions for the {q_label} business review.",
                   f"I got a list of questions from {manager.first} this morning for the {q_label} business review.")
        ask = say(w, "Could you pull the numbers from the analytics database, build the workbook they asked for and "
                     "mail it back?",
                  "Can you pull the numbers from the analytics database, build the workbook they asked for, and mail "
                  "it back to them?",
                  "Please pull the numbers from the analytics database, build the workbook they asked for and mail "
                  "it back.",
                  "Would you build the workbook they asked for, with the numbers pulled from the analytics database, "
                  "and mail it back?")
        if level == 1:
            sent = sent.replace("a list of questions", "a question")
        where = say(w, "Everything is in the mail.", "It's all in the mail.", "The details are all in the mail.")
        keep = say(w, "Please leave last quarter's report as it is.", "Leave last quarter's report as it is, please.",
                   "Last quarter's report should stay as it is.")
        instruction = " ".join([say(w, "", "Hi!", "Hello!", "Hey!"), sent, ask, *in_some_order(w, [where, keep])])
        instruction = instruction.strip()

        # ---- oracle ------------------------------------------------------------------------
        def mail_body(summary: str) -> str:
            return (f"Hi {manager.first},\n\nAttached is {report}.{summary}\n\nTest accounts are excluded "
                    f"throughout.\n\nBest,\n{me.first}")

        def solve():
            top_level = level == self.levels
            yield ToolCall("mail__list_messages", {"folder": "Inbox", "limit": 25}, "Find the manager's request.")
            yield ToolCall("mail__read_message", {"message_id": request_id}, "Read this quarter's request.")
            if note_id:
                yield ToolCall("mail__read_message", {"message_id": note_id}, "Read the note about the snapshot table.")
            if top_level:  # four questions over six tables: survey the layout and the schema first
                yield ToolCall("files__list_dir", {"path": "reports"}, "See last quarter's report for the layout.")
                yield ToolCall("sheets__list_sheets", {"path": old_report}, "Check last quarter's sheet layout.")
                yield ToolCall("sql__list_tables", {}, "See what the warehouse holds.")
                for t in ("customers", "orders", "order_items", "products", "regions", "refunds"):
                    yield ToolCall("sql__describe_table", {"name": t}, f"Learn the {t} columns.")
                yield ToolCall("sql__query",
                               {"sql": "SELECT is_test, COUNT(*) AS n FROM customers GROUP BY is_test"},
                               "How many test accounts are there?")
                yield ToolCall("sql__query", {"sql": "SELECT status, COUNT(*) AS n FROM orders GROUP BY status"},
                               "Which order statuses exist?")
            tables: dict[str, list] = {}
            if "cohorts" in asked:
                res = parse_json((yield ToolCall("sql__query", {"sql": cohort_sql(cohort_first, cohort_last)},
                    "Q1: cohort sizes and 30-day revenue.")))
                tables["cohorts"] = [list(r) for r in res["rows"]]
            if "top" in asked:
                res = parse_json((yield ToolCall("sql__query",
                                                 {"sql": runner_up_sql(q_start, q_end), "limit": 1000},
                                                 "Q2: look at the ranking per region to see any ties.")))
                firsts: dict[str, int] = {}
                for reg, _, _, place in res["rows"]:
                    firsts[reg] = firsts.get(reg, 0) + (place == 1)
                for reg in sorted(r for r, n in firsts.items() if n > 1):
                    yield ToolCall("sql__query", {"sql": (
                        "SELECT p.name, SUM(i.quantity) AS units FROM orders o "
                        "JOIN customers c ON c.customer_id = o.customer_id "
                        "JOIN regions r ON r.region_id = c.region_id "
                        "JOIN order_items i ON i.order_id = o.order_id "
                        "JOIN products p ON p.product_id = i.product_id "
                        f"WHERE r.name = '{reg}' AND o.status = 'completed' AND c.is_test = 0 "
                        f"AND o.order_date BETWEEN '{q_start}' AND '{q_end}' "
                        "GROUP BY p.name ORDER BY units DESC LIMIT 5")},
                        f"Double-check the tie in {reg}.")
                res = parse_json((yield ToolCall("sql__query", {"sql": top_products_sql(q_start, q_end)},
                                                 "Q2: the top product(s) per region.")))
                tables["top"] = [list(r) for r in res["rows"]]
            if "growth" in asked:
                res = parse_json((yield ToolCall("sql__query", {"sql": monthly_sql(prev_month, q_end)},
                                                 "Q3: monthly revenue with growth vs the month before.")))
                tables["growth"] = [list(r) for r in res["rows"][1:]]
            res = parse_json((yield ToolCall("sql__query", {"sql": refunds_sql(q_start, q_end, dim)},
                                             f"Q4: refund rate per {dim}.")))
            tables["refunds"] = refunds_rows = [list(r[:4]) for r in res["rows"]]
            if level > 1:
                yield ToolCall("sql__query", {"sql": (
                    "SELECT COUNT(*) AS refunds_on_cancelled FROM refunds f "
                    "JOIN orders o ON o.order_id = f.order_id "
                    "WHERE o.status <> 'completed'")}, "Check refunds on non-completed orders are left out.")
            names = [sheets[k][0] for k in asked]
            yield ToolCall("sheets__create_workbook", {"path": report, "sheets": names}, f"Create {report}.")
            for key in asked:
                name, header = sheets[key]
                yield ToolCall("sheets__write_rows", {"path": report, "sheet": name, "start_cell": "A1",
                                                      "rows": [header] + tables[key]}, f"Write the {name} sheet.")
            for key in asked if level > 1 else ():  # level 1: one sheet, written as its query returned it
                yield ToolCall("sheets__read_range", {"path": report, "sheet": sheets[key][0]},
                               f"Verify the {sheets[key][0]} sheet.")
            topr = refunds_rows[0]
            summary = ""
            if "growth" in asked:
                best = max(tables["growth"], key=lambda r: r[2] if r[2] is not None else -1e9)
                summary += f"\n- Fastest growth: {month_label(best[0])} ({best[0]}), up {best[2]}% on the month before."
            summary += f"\n- Highest refund rate: {topr[0]} at {topr[3]}% of completed orders."
            yield ToolCall("mail__send_message", {
                "to": [manager.email], "subject": f"{q_label} review numbers", "body": mail_body(summary),
                "attachments": [report]}, "Send the workbook and summary.")
            if level > 1:
                yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 5}, "Check the mail went out.")
            return f"Built {report} and mailed it to {manager.name} with the summary."

        def query(sql: str):
            return perturb.on("sql__query", sql=sql)

        def sheet(key: str):
            return perturb.on("sheets__write_rows", path=report, sheet=sheets[key][0])

        def growth_gap(args: dict) -> dict:
            """The first month's growth left empty."""
            rows = [list(r) for r in args["rows"]]
            rows[1][2] = None
            return {**args, "rows": rows}

        def mom_header(args: dict) -> dict:
            return {**args, "rows": [[*args["rows"][0][:2], "MoM", *args["rows"][0][3:]], *args["rows"][1:]]}

        to_manager = perturb.on("mail__send_message", to=[manager.email])
        flawed = {  # built only for the criteria a level has
            "cohorts": lambda: perturb.change(solve, query(cohort_sql(cohort_first, cohort_last)), sql=cohort_sql(
                cohort_first, cohort_last).replace("c.is_test = 0 AND ", "")),  # test accounts counted
            "top_products": lambda: perturb.change(solve, query(top_products_sql(q_start, q_end)),
                                                   sql=top_products_sql(q_start, q_end, ties=False)),
            "growth": lambda: perturb.change(solve, sheet("growth"), edit=growth_gap),
            "refunds": lambda: perturb.change(solve, query(refunds_sql(q_start, q_end, dim)), sql=refunds_sql(
                q_start, q_end, dim, statuses="('completed', 'cancelled', 'pending')")),
            "sheets_layout": lambda: perturb.change(solve, sheet("growth" if "growth" in asked else "refunds"),
                                                    edit=mom_header),
            "old_report_untouched": lambda: perturb.insert(solve, ToolCall("sheets__write_cells", {
                "path": old_report, "sheet": sheets["top" if level == self.levels else "refunds"][0],
                "cells": {"E1": "superseded"}}, "Mark the old report."), before=to_manager),
            "mail_summary": lambda: perturb.change(solve, to_manager, body=mail_body("")),
            "mail_report": lambda: perturb.change(solve, to_manager, attachments=[]),
            "one_mail": lambda: perturb.insert(solve, ToolCall("mail__send_message", {
                "to": [lead.email], "subject": "FYI", "body": "The review numbers are done."}, "Tell the lead."),
                after=to_manager),
        }

        # ---- grading -----------------------------------------------------------------------
        def recompute(world) -> dict:
            return {
                "cohorts": sqlstate.query(world, cohort_sql(cohort_first, cohort_last)),
                "top": sqlstate.query(world, top_products_sql(q_start, q_end)),
                "monthly": sqlstate.query(world, monthly_sql(prev_month, q_end))[1:],
                "refunds": sqlstate.query(world, refunds_sql(q_start, q_end, dim)),
            }

        def body_rows(path: Path, key: str):
            t = read_table(path, sheets[key][0])
            if t is None:
                return None, f"{sheets[key][0]!r} sheet missing"
            head, rows = t
            rows = [list(r) + [None] * (4 - len(r)) for r in rows if any(v not in (None, "") for v in r)]
            return (head, rows), ""

        def check_layout(path: Path):
            bad = []
            for key in asked:
                name, header = sheets[key]
                t, why = body_rows(path, key)
                if t is None:
                    bad.append(why)
                    continue
                got = [norm_text(v) for v in t[0][:len(header)]]
                if got != [norm_text(h) for h in header]:
                    bad.append(f"{name}: header {t[0][:len(header)]}")
            return not bad, "; ".join(bad)

        def check_cohorts(path: Path, want):
            t, why = body_rows(path, "cohorts")
            if t is None:
                return False, why
            got = [(month_key(r[0]), to_number(r[1]), to_number(r[2])) for r in t[1]]
            if [g[0] for g in got] != [w[0] for w in want]:
                return False, f"cohorts {[g[0] for g in got]}, expected {[w[0] for w in want]}"
            bad = [w[0] for g, w in zip(got, want) if g[1] != w[1] or not close(g[2], w[2])]
            return not bad, f"wrong figures for {bad}" if bad else ""

        def check_top(path: Path, want):
            t, why = body_rows(path, "top")
            if t is None:
                return False, why
            got = [(norm_text(r[0]), norm_text(r[1]), to_number(r[2])) for r in t[1]]
            exp = [(norm_text(a), norm_text(b), float(c)) for a, b, c in want]
            if sorted(got, key=str) != sorted(exp, key=str):
                return False, f"rows {got}, expected {exp}"
            return got == exp, "" if got == exp else "rows are not sorted by region, then product"

        def check_growth(path: Path, want):
            t, why = body_rows(path, "growth")
            if t is None:
                return False, why
            got = [(month_key(r[0]), to_number(r[1]), r[2]) for r in t[1]]
            if [g[0] for g in got] != [w[0] for w in want]:
                return False, f"months {[g[0] for g in got]}, expected {[w[0] for w in want]}"
            bad = [w[0] for g, w in zip(got, want) if not close(g[1], w[1]) or not pct_close(g[2], w[2])]
            return not bad, f"wrong figures for {bad}" if bad else ""

        def check_refunds(path: Path, want):
            t, why = body_rows(path, "refunds")
            if t is None:
                return False, why
            exact = {norm_text(w[0]): w for w in want}
            got = [(norm_text(r[0]), to_number(r[1]), to_number(r[2]), r[3]) for r in t[1]]
            if sorted(g[0] for g in got) != sorted(exact):
                return False, f"groups {[g[0] for g in got]}, expected {sorted(exact)}"
            bad = [g[0] for g in got if g[1] != exact[g[0]][1] or g[2] != exact[g[0]][2]
                   or not pct_close(g[3], exact[g[0]][4])]
            if bad:
                return False, f"wrong figures for {bad}"
            rates = [exact[g[0]][4] for g in got]
            ordered = all(a >= b - 0.05 for a, b in zip(rates, rates[1:]))
            return ordered, "" if ordered else "not sorted by refund rate, highest first"

        def report_file(world) -> Path:
            return world.file(report)

        def the_mail(world):
            sent = [m for m in mail.sent_messages(world) if manager.email in m["to"] + m["cc"]]
            return sent[-1] if sent else None

        def mailed_report(world, traj):
            m = the_mail(world)
            if m is None:
                return False, f"nothing sent to {manager.email}"
            books = [a["name"] for a in m["attachments"] if a["name"].lower().endswith(".xlsx")]
            if not books:
                return False, "no workbook attached"
            p = mail.attachment_path(world, m["id"], books[0])
            truth_now = recompute(world)
            checks = [check_top(p, truth_now["top"])] if "top" in asked else []
            for ok, why in (*checks, check_refunds(p, truth_now["refunds"])):
                if not ok:
                    return False, f"attached workbook: {why}"
            return True

        def mail_summary(world, traj):
            m = the_mail(world)
            if m is None:
                return False, "no mail to the manager"
            truth_now = recompute(world)
            best = max(truth_now["monthly"], key=lambda r: r[2])
            top_r = truth_now["refunds"][0]
            body = m["body"]
            problems = []
            if "growth" in asked and not (mentions_month(body, best[0]) and mentions_number(body, best[2], 0.1)):
                problems.append(f"fastest-growing month {best[0]} ({best[2]}%) not named")
            if not (norm_text(top_r[0]) in norm_text(body) and mentions_number(body, top_r[4], 0.1)):
                problems.append(f"highest refund rate {top_r[0]} ({top_r[3]}%) not named")
            # a summary picks one month and one group: pasting every month or every group is no answer
            groups = [r[0] for r in truth_now["refunds"]]
            if len(groups) > 2 and all(names_word(body, g) for g in groups):
                problems.append(f"names every {dim}")
            if "growth" in asked and all(mentions_month(body, r[0]) for r in truth_now["monthly"]):
                problems.append("names every month")
            return not problems, "; ".join(problems)

        def old_untouched(world, traj):
            hits = writes_to(traj, [norm_path(old_report)])
            if hits:
                return False, f"touched: {hits}"
            p = world.file(old_report)
            return same_bytes(p, old_bytes), "last quarter's report changed or missing"

        def on_report(fn, key):
            def check(world, traj):
                return fn(report_file(world), recompute(world)[key])
            return check

        ids = {"cohorts": "cohorts", "top": "top_products", "growth": "growth", "refunds": "refunds"}
        unasked = {ids[k] for k in ids if k not in asked}
        criteria = [
            Criterion("sheets_layout", f"{report} has the "
                      f"{'four sheets' if level == self.levels else 'requested sheets'} "
                      f"with exactly the requested headers",
                      "final_state", lambda w, t: check_layout(report_file(w)),
                      requires=tuple(ids[k] for k in asked)),
            Criterion("cohorts", "cohort sizes and 30-day revenue are right (test accounts excluded)",
                      "final_state", on_report(check_cohorts, "cohorts"), 2.0),
            Criterion("top_products", "top product(s) per region by units, ties listed, sorted",
                      "final_state", on_report(check_top, "top"), 2.0),
            Criterion("growth", "monthly revenue and month-over-month growth are right, first month included",
                      "final_state", on_report(check_growth, "monthly"), 2.0),
            Criterion("refunds", f"refund counts and rates per {dim} are right, highest first",
                      "final_state", on_report(check_refunds, "refunds"), 2.0),
            Criterion("mail_report", "the manager got a mail with the correct workbook attached",
                      "final_state", mailed_report, 1.0),
            Criterion("mail_summary", "the mail names the fastest-growing month and the highest refund rate "
                      "(not every month or group)" if "growth" in asked else
                      "the mail names the highest refund rate (not every group)",
                      "final_state", mail_summary, 1.0),
            Criterion("one_mail", "no more than one mail was sent", "process", at_most_one_mail, 1.0, guard=True),
            Criterion("old_report_untouched", "last quarter's report was not modified", "process",
                      old_untouched, 1.0, guard=True),
        ]
        criteria = [c for c in criteria if c.id not in unasked]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps_at(level), build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"report": report, "quarter": q_label, "dim": dim, "sheets": sheets,
                  "truth": {k: [list(r) for r in v] for k, v in truth.items()},
                  "best_month": best_month[0], "top_refund": top_refund[0],
                  "stale_request": stale["subject"] if "stale_request" in traps else "",
                  "snapshot_note": note["subject"] if note_id else "", "test_bulk_region": bulk_region},
        )
