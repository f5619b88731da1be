"""SQL analytics: marketing's questions from a call notes file, answered as CSV exports.

The questions sit in the user's notes from a call with the marketing lead (next to notes from
an earlier call, now stale): campaign return on ad spend for finished campaigns, website
conversion by traffic source (anonymous visitors count; test accounts don't), and some of
new-vs-returning customers per month (needs each customer's first order ever) and average
order value per segment. Each answer is a CSV with the exact file name and columns from the
notes, written through the files app; a summary mail with the CSVs attached goes back to
the marketing lead. Graders recompute every answer from the World's database.
"""

from __future__ import annotations

import csv
import io
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.mail import state as mail
from longhorizon.apps.sql import state as sqlstate
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.analytics import add_months, mentions_number, month_end, month_key, month_label, pct_close
from longhorizon.tasks.analytics.warehouse import make_warehouse, memory_db, ordered_rows, run
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    People,
    at_most_one_mail,
    close,
    company,
    names_word,
    norm_path,
    norm_text,
    output_text,
    parse_json,
    rng_and_faker,
    to_number,
    write_files,
    writes_to,
)

NOT_TEST = "o.customer_id IN (SELECT customer_id FROM customers WHERE is_test = 0)"


def roas_sql(cutoff: date, *, finished_only: bool = True) -> str:
    where = f"WHERE cp.end_date <= '{cutoff}'" if finished_only else ""
    return f"""SELECT cp.name AS campaign, cp.channel, COUNT(DISTINCT o.order_id) AS orders,
       ROUND(COALESCE(SUM(i.quantity * i.unit_price), 0), 2) AS revenue, cp.budget,
       ROUND(COALESCE(SUM(i.quantity * i.unit_price), 0) / cp.budget, 2) AS roas,
       COALESCE(SUM(i.quantity * i.unit_price), 0) / cp.budget AS exact_roas
FROM campaigns cp
LEFT JOIN orders o ON o.campaign_id = cp.campaign_id AND o.status = 'completed' AND {NOT_TEST}
LEFT JOIN order_items i ON i.order_id = o.order_id
{where}
GROUP BY cp.campaign_id ORDER BY exact_roas DESC, campaign"""


def conversion_sql(first: date, last: date, *, keep_anonymous: bool = True) -> str:
    who = "(c.is_test IS NULL OR c.is_test = 0)" if keep_anonymous else "c.is_test = 0"
    return f"""SELECT s.source, COUNT(*) AS sessions,
       SUM(o.order_id IS NOT NULL) AS orders,
       ROUND(100.0 * SUM(o.order_id IS NOT NULL) / COUNT(*), 1) AS conversion_pct,
       100.0 * SUM(o.order_id IS NOT NULL) / COUNT(*) AS exact_pct
FROM web_sessions s
LEFT JOIN customers c ON c.customer_id = s.customer_id
LEFT JOIN orders o ON o.order_id = s.order_id AND o.status = 'completed'
WHERE {who} AND s.started_at >= '{first} 00:00:00' AND s.started_at <= '{last} 23:59:59'
GROUP BY s.source ORDER BY s.source"""


def new_returning_sql(first: date, last: date, *, split: bool = True) -> str:
    returning = "SUM(strftime('%Y-%m', f.first_day) < m.month)" if split else "COUNT(*)"
    return f"""WITH firsts AS (
  SELECT o.customer_id, MIN(o.order_date) AS first_day
  FROM orders o WHERE o.status = 'completed' AND {NOT_TEST} GROUP BY o.customer_id),
monthly AS (
  SELECT DISTINCT strftime('%Y-%m', o.order_date) AS month, o.customer_id
  FROM orders o
  WHERE o.status = 'completed' AND {NOT_TEST} AND o.order_date BETWEEN '{first}' AND '{last}')
SELECT m.month, SUM(strftime('%Y-%m', f.first_day) = m.month) AS new_customers,
       {returning} AS returning_customers
FROM monthly m JOIN firsts f ON f.customer_id = m.customer_id
GROUP BY m.month ORDER BY m.month"""


def aov_sql(first: date, last: date, *, statuses: str = "('completed')") -> str:
    return f"""SELECT c.segment, COUNT(DISTINCT o.order_id) AS orders,
       ROUND(SUM(i.quantity * i.unit_price) / COUNT(DISTINCT o.order_id), 2) AS avg_order_value
FROM orders o
JOIN customers c ON c.customer_id = o.customer_id
JOIN order_items i ON i.order_id = o.order_id
WHERE o.status IN {statuses} AND c.is_test = 0 AND o.order_date BETWEEN '{first}' AND '{last}'
GROUP BY c.segment ORDER BY avg_order_value DESC"""


def read_csv(path: Path) -> tuple[list[str], list[list[str]]] | None:
    if not path.is_file():
        return None
    text = output_text(path, encoding="utf-8-sig", errors="replace")
    rows = [[c.strip() for c in r] for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    return (rows[0], rows[1:]) if rows else ([], [])


def csv_text(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
    return out.getvalue()


@register
class MarketingCsvExports(TaskFamily):
    name = "marketing_csv_exports"
    category = "SQL analytics"
    apps = ("mail", "sql", "files")
    description = (
        "Answer marketing's questions from call notes with SQL (campaign ROAS for finished campaigns, "
        "conversion by traffic source incl. anonymous visitors, new vs returning customers, AOV by "
        "segment), write each as a CSV with the exact columns asked, and mail them back with a summary."
    )

    levels = 3
    """1: one question (campaign ROAS, still-running campaigns left out; the request names the notes
    file and the notes name the columns, so no folder is listed and no table described or surveyed
    first); 2: ROAS and conversion by
    source (anonymous visitors in, test accounts out); 3 (default): those and one or two more. Every
    level keeps the stale notes from an earlier call."""
    toolsets = {1: (
        "files__read_file", "files__write_file", "mail__send_message", "sql__query",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        _, domain = company(fake)
        me, lead, other = people.make(domain), people.make(domain), people.make(domain)

        year = rng.choice([2024, 2025])
        quarter = rng.choice([2, 3, 4])
        q_start = date(year, 3 * quarter - 2, 1)
        q_end = month_end(add_months(q_start, 2))
        today = q_end + timedelta(days=rng.randint(4, 12))
        while today.weekday() >= 5:
            today += timedelta(days=1)
        data_start = add_months(q_start, -9)
        wh = make_warehouse(rng, fake, data_start, today - timedelta(days=1), company_domain=domain,
                            orders_per_month=80)
        # at least two campaigns still running at the cutoff (they must be left out)
        cutoff = q_end
        camps = wh.rows["campaigns"]
        running = [c for c in camps if c[4] > cutoff.isoformat()]
        for k in range(max(0, 2 - len(running))):
            c = list(camps[-(k + 1)])
            c[3] = (cutoff - timedelta(days=rng.randint(5, 15))).isoformat()
            c[4] = (cutoff + timedelta(days=rng.randint(3, 20))).isoformat()
            camps[-(k + 1)] = tuple(c)
        running_names = sorted(c[1] for c in camps if c[4] > cutoff.isoformat())
        conv_month = add_months(q_start, rng.randint(0, 2))
        conv_last = month_end(conv_month)
        questions = ["roas", "conversion"] + sorted(rng.sample(["new_returning", "aov"], rng.randint(1, 2)))
        if level < self.levels:  # the same draws, then fewer questions
            questions = questions[:level]
        rows = ordered_rows(wh)
        conn = memory_db(rows)
        truth = {
            "roas": run(conn, roas_sql(cutoff)),
            "conversion": run(conn, conversion_sql(conv_month, conv_last)),
            "new_returning": run(conn, new_returning_sql(q_start, q_end)),
            "aov": run(conn, aov_sql(q_start, q_end)),
        }
        conn.close()
        stamp = today.strftime("%Y%m%d")
        files = {
            "roas": (f"exports/campaign_roas_{stamp}.csv",
                     ["campaign", "channel", "orders", "revenue", "budget", "roas"]),
            "conversion": (f"exports/conversion_by_source_{conv_month:%Y_%m}.csv",
                           ["source", "sessions", "orders", "conversion_pct"]),
            "new_returning": (f"exports/new_vs_returning_Q{quarter}_{year}.csv",
                              ["month", "new_customers", "returning_customers"]),
            "aov": (f"exports/aov_by_segment_Q{quarter}_{year}.csv", ["segment", "orders", "avg_order_value"]),
        }
        q_label = f"Q{quarter} {year}"
        asks = {
            "roas": (f"Return on ad spend for every campaign that had finished by "
                     f"{cutoff:%B} {cutoff.day}, {cutoff.year} "
                     f"(end date on or before; still-running ones stay out). Revenue = completed orders credited "
                     f"to the campaign (orders.campaign_id), quantity x unit price, test accounts excluded; "
                     f"roas = revenue / budget, 2 decimals. Highest roas first."),
            "conversion": (f"Website conversion by traffic source for {month_label(conv_month.strftime('%Y-%m'))}: "
                           f"sessions started that month, how many led to a completed order, and the conversion "
                           f"rate in % with one decimal. Anonymous visitors count as sessions; sessions of test "
                           f"accounts don't. Alphabetical by source."),
            "new_returning": (f"New vs returning customers for each month of {q_label}: a customer is new in the "
                              f"month of their first ever completed order, returning in any later month they buy. "
                              f"Month as YYYY-MM, oldest first, test accounts excluded."),
            "aov": (f"Average order value per customer segment in {q_label}: completed orders only, test accounts "
                    f"excluded, value = sum of quantity x unit price / number of orders, 2 decimals. Highest first."),
        }
        call_day = today - timedelta(days=1)
        notes_path = f"notes/{call_day:%Y-%m-%d}_call_{lead.first.lower()}.md"
        old_notes = f"notes/{today - timedelta(days=40):%Y-%m-%d}_call_{lead.first.lower()}.md"
        wanted_source = " and the best-converting traffic source (and its rate)" if "conversion" in questions else ""
        bullet = "\n".join(
            f"{n}. {asks[q]}\n   -> `{files[q][0]}` with columns: {', '.join(files[q][1])}"
            for n, q in enumerate(questions, start=1))
        notes = (
            f"# Call with {lead.name} (marketing) - {call_day:%b} {call_day.day}\n\n"
            f"{lead.first} needs numbers for the {q_label} marketing review. Pull them from the warehouse (sql app).\n"
            f"One CSV per question in exports/, exact file names and column order as below, header row first, "
            f"plain numbers (no currency signs or % in the cells).\n\n{bullet}\n\n"
            f"Then mail {lead.first} the CSV{'s' * (len(questions) > 1)} with a short summary: best campaign by roas "
            f"(and its roas){wanted_source}.\n\n"
            + (f"Other: {other.first} asked about the dashboard refresh - not urgent.\n" if level > 1 else "")
        )
        old_notes_text = (
            f"# Call with {lead.name} - {today - timedelta(days=40):%b} {(today - timedelta(days=40)).day}\n\n"
            f"- conversion by source for last month incl. test accounts (QA wants their traffic)\n"
            f"- export to exports/conversion_old.csv\n- done, sent.\n"
        )
        at = lambda d, h, m: datetime.combine(d, time(h, m)).isoformat()  # noqa: E731
        inbox = [
            {"folder": "Inbox", "sender": lead.email, "sender_name": lead.name, "to": [me.email],
             "subject": "Thanks for the call", "date": at(today - timedelta(days=1), 16, 5),
             "body": (f"Thanks {me.first}! As discussed, send me the numbers when you have them - "
                      f"CSVs are perfect, I'll paste them into the deck.\n\n{lead.first}")},
            {"folder": "Inbox", "sender": other.email, "sender_name": other.name, "to": [me.email],
             "subject": "Dashboard refresh", "date": at(today, 8, 40),
             "body": "Any news on the dashboard refresh? No rush."},
        ]

        def build(root: Path) -> None:
            sqlstate.create_analytics_db(root / "state" / "sql.sqlite", rows)
            write_files(root / "workspace", {notes_path: notes, old_notes: old_notes_text})
            (root / "workspace" / "exports").mkdir(parents=True, exist_ok=True)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox,
                                now=at(today, 9, 0))

        w = phrasing_rng(self.name, seed)
        promise = say(w, f"I promised {lead.first} some numbers on yesterday's call",
                      f"On yesterday's call I told {lead.first} I'd send over some numbers",
                      f"{lead.first} and I had a call yesterday, and I promised some numbers")
        notes_at = say(w, "my notes from it are in the notes folder", "the notes folder has my notes from it",
                       "my notes from the call are in the notes folder")
        if level == 1:  # the one file named: no folder to look through
            notes_at = notes_at.replace("the notes folder has my notes from it", "my notes from it are in the notes "
                                        "folder").replace("the notes folder", notes_path)
        ask = say(w, "Could you pull them from the warehouse, save the exports and send them over?",
                  "Can you pull them from the warehouse, save the exports and send them over?",
                  "Please pull them from the warehouse, save the exports and send them over.",
                  "Would you get them out of the warehouse, save the exports and send them over?")
        instruction = " ".join([
            say(w, "", "Hi!", "Hello!", "Morning!"),
            say(w, f"{promise} - {notes_at}.", f"{promise}; {notes_at}.",
                f"{promise}. {notes_at[0].upper()}{notes_at[1:]}."),
            ask,
        ]).strip()

        # ---- oracle ------------------------------------------------------------------------
        sqls = {
            "roas": roas_sql(cutoff),
            "conversion": conversion_sql(conv_month, conv_last),
            "new_returning": new_returning_sql(q_start, q_end),
            "aov": aov_sql(q_start, q_end),
        }

        def solve():
            yield ToolCall("files__list_dir", {"path": "notes"}, "Find the notes from yesterday's call.")
            yield ToolCall("files__read_file", {"path": notes_path}, "Read the questions.")
            yield ToolCall("mail__search_messages", {"query": "", "sender": lead.email},
                           f"Find {lead.first}'s address and any extra context.")
            yield ToolCall("mail__read_message", {"message_id": 1}, f"Read {lead.first}'s follow-up.")
            yield ToolCall("sql__list_tables", {}, "See the warehouse tables.")
            for t in ("campaigns", "web_sessions", "orders", "order_items", "customers"):
                yield ToolCall("sql__describe_table", {"name": t}, f"Learn the {t} columns.")
            yield ToolCall("sql__query", {"sql": "SELECT campaign_id, name, start_date, end_date, budget "
                                                 "FROM campaigns ORDER BY start_date"},
                           "Which campaigns have finished?")
            yield ToolCall("sql__query", {"sql": "SELECT source, COUNT(*) AS n, SUM(customer_id IS NULL) AS "
                                                 "anonymous FROM web_sessions GROUP BY source"},
                           "Traffic sources, and how many sessions are anonymous.")
            checks_sql = {
                "roas": ("SELECT cp.name, cp.end_date, COUNT(o.order_id) AS credited FROM campaigns cp LEFT JOIN "
                         "orders o ON o.campaign_id = cp.campaign_id GROUP BY cp.campaign_id ORDER BY cp.end_date",
                         "Sanity check: orders credited per campaign, with end dates."),
                "conversion": (f"SELECT COUNT(*) AS sessions, SUM(order_id IS NOT NULL) AS with_order FROM "
                               f"web_sessions WHERE started_at BETWEEN '{conv_month} 00:00:00' AND "
                               f"'{conv_last} 23:59:59'", "Sanity check: the month's session total."),
                "new_returning": (f"SELECT COUNT(DISTINCT o.customer_id) AS buyers FROM orders o WHERE "
                                  f"o.status = 'completed' AND {NOT_TEST} AND o.order_date BETWEEN '{q_start}' "
                                  f"AND '{q_end}'", "Sanity check: distinct buyers in the quarter."),
                "aov": (f"SELECT status, COUNT(*) AS n FROM orders WHERE order_date BETWEEN '{q_start}' AND "
                        f"'{q_end}' GROUP BY status", "Sanity check: orders by status in the quarter."),
            }
            results = {}
            for q in questions:
                res = parse_json((yield ToolCall("sql__query", {"sql": sqls[q]}, f"Answer: {q}.")))
                width = len(files[q][1])
                results[q] = [r[:width] for r in res["rows"]]
                yield ToolCall("sql__query", {"sql": checks_sql[q][0]}, checks_sql[q][1])
            yield ToolCall("sql__query", {"sql": (
                "SELECT COUNT(*) AS test_sessions FROM web_sessions s JOIN customers c "
                "ON c.customer_id = s.customer_id WHERE c.is_test = 1")},
                           "Check how many sessions belong to test accounts.")
            for q in questions:
                path, header = files[q]
                yield ToolCall("files__write_file", {"path": path, "content": csv_text(header, results[q])},
                               f"Write {path}.")
            yield ToolCall("files__list_dir", {"path": "exports"}, "Check the exports are all there.")
            for q in questions:
                yield ToolCall("files__read_file", {"path": files[q][0]}, f"Check {files[q][0]}.")
            yield from send(results)
            return f"Wrote {len(questions)} CSVs to exports/ and mailed them to {lead.name}."

        def short_solve():
            """One question: the notes, then the answer (its query leaves the running campaigns out)."""
            yield ToolCall("files__read_file", {"path": notes_path}, "Read the question.")
            res = parse_json((yield ToolCall("sql__query", {"sql": sqls["roas"]}, "Answer: roas.")))
            path, header = files["roas"]
            results = {"roas": [r[:len(files["roas"][1])] for r in res["rows"]]}
            yield ToolCall("files__write_file", {"path": path, "content": csv_text(header, results["roas"])},
                           f"Write {path}.")
            yield from send(results)
            return f"Wrote {path} and mailed it to {lead.name}."

        hello = f"Hi {lead.first},\n\nHere are the numbers from our call (CSVs attached)."
        bye = f"\n\nBest,\n{me.first}"
        attach = [files[q][0] for q in questions]

        def send(results: dict):
            top_c = results["roas"][0]
            body = hello + f"\n- Best campaign by ROAS: {top_c[0]} at {top_c[5]}."
            if "conversion" in results:
                top_s = max(results["conversion"], key=lambda r: r[3])
                body += f"\n- Best-converting source: {top_s[0]} at {top_s[3]}%."
            yield ToolCall("mail__send_message", {"to": [lead.email], "subject": f"{q_label} marketing numbers",
                                                  "body": body + bye, "attachments": attach}, "Send the exports.")

        # ---- perturbations: the oracle with one small mistake in its calls ------------------
        oracle = short_solve if level == 1 else solve
        wrong_sql = {
            "roas": roas_sql(cutoff, finished_only=False),  # still-running campaigns in
            "conversion": conversion_sql(conv_month, conv_last, keep_anonymous=False),  # anonymous visitors out
            "new_returning": new_returning_sql(q_start, q_end, split=False),  # every buyer "returning"
            "aov": aov_sql(q_start, q_end, statuses="('completed', 'cancelled')"),
        }
        header_flaw = "conversion" if "conversion" in questions else questions[0]
        wrong_header = {"conversion": ["source", "sessions", "orders", "conversion"],
                        "roas": ["campaign", "channel", "orders", "revenue", "budget", "return"]}[header_flaw]
        right_line, wrong_line = (",".join(files[header_flaw][1]) + "\n", ",".join(wrong_header) + "\n")
        the_send = perturb.on("mail__send_message", to=[lead.email])
        flawed = {q: perturb.change(oracle, perturb.on("sql__query", sql=sqls[q]), sql=wrong_sql[q])
                  for q in questions}
        flawed |= {
            "csv_headers": perturb.change(oracle, perturb.on("files__write_file", path=files[header_flaw][0]),
                                          lambda a: {**a, "content": a["content"].replace(right_line, wrong_line, 1)}),
            "mail_summary": perturb.change(oracle, the_send, body=hello + bye),  # no figures
            "mail_attachments": perturb.change(oracle, the_send, attachments=attach[:1] if len(attach) > 1 else []),
            "one_mail": perturb.insert(oracle, ToolCall("mail__send_message", {
                "to": [other.email], "subject": "Dashboard", "body": "Will look at it next week."},
                "Answer the other mail."), after=the_send),
            "notes_untouched": perturb.insert(oracle, ToolCall(
                "files__write_file", {"path": notes_path, "content": notes + "\nDONE - sent.\n"},
                "Tick off the notes."), before=the_send),
        }

        # ---- grading -----------------------------------------------------------------------
        def recompute(world, q: str):
            if q == "roas":
                return sqlstate.query(world, roas_sql(cutoff))
            if q == "conversion":
                return sqlstate.query(world, conversion_sql(conv_month, conv_last))
            if q == "new_returning":
                return sqlstate.query(world, new_returning_sql(q_start, q_end))
            return sqlstate.query(world, aov_sql(q_start, q_end))

        def body_of(world, q: str):
            t = read_csv(world.file(files[q][0]))
            if t is None:
                return None, f"{files[q][0]} missing"
            return [r + [""] * (len(files[q][1]) - len(r)) for r in t[1]], ""

        def check_headers(world, traj):
            bad = []
            for q in questions:
                t = read_csv(world.file(files[q][0]))
                if t is None or [norm_text(h) for h in t[0]] != files[q][1]:
                    bad.append(f"{files[q][0]}: {t[0] if t else 'missing'}")
            return not bad, "; ".join(bad)

        def check_roas(world, traj):
            got, why = body_of(world, "roas")
            if got is None:
                return False, why
            want = {norm_text(r[0]): r for r in recompute(world, "roas")}
            names = [norm_text(r[0]) for r in got]
            if sorted(names) != sorted(want):
                return False, f"campaigns {names}, expected {sorted(want)}"
            bad = [n for n, r in zip(names, got)
                   if to_number(r[2]) != want[n][2] or not close(to_number(r[3]), want[n][3])
                   or not close(to_number(r[4]), want[n][4]) or not close(to_number(r[5]), want[n][6], 0.006)]
            if bad:
                return False, f"wrong figures for {bad}"
            exact = [want[n][6] for n in names]
            return all(a >= b - 0.005 for a, b in zip(exact, exact[1:])), "not sorted by roas, highest first"

        def check_conversion(world, traj):
            got, why = body_of(world, "conversion")
            if got is None:
                return False, why
            want = recompute(world, "conversion")
            if [norm_text(r[0]) for r in got] != [norm_text(r[0]) for r in want]:
                return False, f"sources {[r[0] for r in got]}, expected {[r[0] for r in want]} (alphabetical)"
            bad = [w[0] for g, w in zip(got, want) if to_number(g[1]) != w[1] or to_number(g[2]) != w[2]
                   or not pct_close(g[3], w[4])]
            return not bad, f"wrong figures for {bad}" if bad else ""

        def check_new_returning(world, traj):
            got, why = body_of(world, "new_returning")
            if got is None:
                return False, why
            want = recompute(world, "new_returning")
            if [month_key(r[0]) for r in got] != [w[0] for w in want]:
                return False, f"months {[r[0] for r in got]}, expected {[w[0] for w in want]}"
            bad = [w[0] for g, w in zip(got, want) if to_number(g[1]) != w[1] or to_number(g[2]) != w[2]]
            return not bad, f"wrong figures for {bad}" if bad else ""

        def check_aov(world, traj):
            got, why = body_of(world, "aov")
            if got is None:
                return False, why
            want = {norm_text(r[0]): r for r in recompute(world, "aov")}
            names = [norm_text(r[0]) for r in got]
            if sorted(names) != sorted(want):
                return False, f"segments {names}, expected {sorted(want)}"
            bad = [n for n, r in zip(names, got)
                   if to_number(r[1]) != want[n][1] or not close(to_number(r[2]), want[n][2])]
            if bad:
                return False, f"wrong figures for {bad}"
            vals = [want[n][2] for n in names]
            return all(a >= b - 0.01 for a, b in zip(vals, vals[1:])), "not sorted by value, highest first"

        def the_mail(world):
            sent = [m for m in mail.sent_messages(world) if lead.email in m["to"] + m["cc"]]
            return sent[-1] if sent else None

        def mail_summary(world, traj):
            m = the_mail(world)
            if m is None:
                return False, f"nothing sent to {lead.email}"
            roas = recompute(world, "roas")
            best_r = [r for r in roas if r[6] >= roas[0][6] - 0.005]  # near-ties: either may be named
            body = m["body"]
            text = norm_text(body).replace("_", " ")
            problems = []
            if not any(norm_text(r[0]) in text and mentions_number(body, r[6], 0.006) for r in best_r):
                problems.append(f"best campaign {roas[0][0]} ({roas[0][5]}) not named with its roas")
            conv = recompute(world, "conversion") if "conversion" in questions else []
            top = max((r[4] for r in conv), default=None)
            best_c = [r for r in conv if r[4] >= top - 0.05]
            if conv and not any(r[0].replace("_", " ") in text and mentions_number(body, r[4], 0.1) for r in best_c):
                problems.append(f"best source {best_c[0][0]} ({best_c[0][3]}%) not named with its rate")
            running = [n for n in running_names if names_word(body, n)]
            if running:  # those were to stay out: a mail that names every campaign it saw fails
                problems.append(f"names still-running campaigns {running}")
            return not problems, "; ".join(problems)

        def mail_attachments(world, traj):
            m = the_mail(world)
            if m is None:
                return False, "no mail to the lead"
            names = {a["name"] for a in m["attachments"]}
            missing = [Path(files[q][0]).name for q in questions if Path(files[q][0]).name not in names]
            return not missing, f"not attached: {missing}" if missing else ""

        def notes_untouched(world, traj):
            hits = writes_to(traj, [norm_path(notes_path), norm_path(old_notes)])
            same = (world.file(notes_path).is_file() and output_text(world.file(notes_path)) == notes)
            return not hits and same, f"notes touched: {hits}" if hits else ("" if same else "notes changed")

        checks = {"roas": check_roas, "conversion": check_conversion, "new_returning": check_new_returning,
                  "aov": check_aov}
        descriptions = {
            "roas": "campaign_roas: finished campaigns only, right orders/revenue/roas, highest first",
            "conversion": "conversion_by_source: sessions incl. anonymous, test accounts out, right rates",
            "new_returning": "new_vs_returning: first-ever-order logic per month",
            "aov": "aov_by_segment: completed orders only, right averages, highest first",
        }
        content = tuple(questions)
        criteria = [Criterion("csv_headers", "every CSV exists with exactly the requested columns", "final_state",
                              check_headers, requires=content)]
        criteria += [Criterion(q, descriptions[q], "final_state", checks[q], 2.0) for q in questions]
        criteria += [
            Criterion("mail_summary", "the mail names the best campaign by roas and the best-converting source "
                      "(and no still-running campaign)", "final_state", mail_summary),
            Criterion("mail_attachments", "every CSV is attached to the mail", "final_state", mail_attachments,
                      requires=content),
            Criterion("one_mail", "no more than one mail was sent", "process", at_most_one_mail, guard=True),
            Criterion("notes_untouched", "the call notes were not modified", "process", notes_untouched, guard=True),
        ]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=oracle,
            criteria=criteria, perturbations={c.id: flawed[c.id] for c in criteria},
            data={"questions": questions, "files": files, "cutoff": cutoff.isoformat(),
                  "truth": {q: [list(r) for r in truth[q]] for q in questions}},
        )
