"""Survey aggregation: a quarter's training feedback, exported by three survey tools, rolled up per course.

Each delivered session's feedback arrives as a file from whichever tool its trainer used: a
forms CSV rating 1-5, a JSON export rating 1-10, a semicolon CSV rating 1-7 with day-first
timestamps. The attendance workbook lists the quarter's sessions (one cancelled, of a course
that never ran, whose file holds only the trainer's test answers) and one sheet per session
with who attended. Forwarded links, no-shows and trainers testing their own forms answered
too; some people submitted twice (the latest counts); one session was re-exported and its
trainer's mail says which file to use. The L&D lead's mail has the rules: attendees only,
ratings converted to a common 1-5 scale, NPS from the recommend question. The agent writes a
per-course summary sheet, checks it, and mails it with the best and worst course named.

The default level draws its traps per seed (``TRAP_ODDS``; levels 1-2 keep them all): the
re-exported session (graded by ``latest_export_used`` where it is), the cancelled session with
its test file, answers from no-shows, from trainers testing their own forms and from forwarded
links (at least one of those three kinds), and second submissions are each there or not.
``Task.data`` names the sessions each touches, empty where it is absent.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date, datetime, timedelta
from pathlib import Path

from openpyxl import Workbook

from longhorizon.apps.mail import state as mail
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.kit import files as files_kit, perturb
from longhorizon.tasks.common import (
    Files,
    People,
    at_most_one_mail,
    blank,
    norm,
    norm_path,
    norm_text,
    parse_json,
    read_table,
    rng_and_faker,
    slug,
    to_number,
    write_files,
)
from longhorizon.tasks.surveys import clamp

COURSES = [
    ("EXA", "Excel for Analysts"), ("PWI", "Presenting with Impact"), ("DPE", "Data Privacy Essentials"),
    ("NEG", "Negotiation Skills"), ("PYF", "Python Foundations"), ("MRT", "Managing Remote Teams"),
    ("CCV", "Customer Conversations"), ("PMB", "Project Management Basics"), ("WFW", "Writing for the Web"),
    ("FTM", "First-Time Managers"), ("SQL", "SQL for Everyone"), ("FBA", "Feedback that Lands"),
]
TOOLS = {"forms": 5, "surveybot": 10, "quickpoll": 7}
"""Each export tool and the top of its rating scale (all start at 1)."""
COMMENTS = [
    "Very practical, I can use this on Monday.", "Too much content for one afternoon.",
    "Great trainer, clear examples.", "The room was too cold.", "Would like a follow-up session.",
    "Exercises were the best part.", "Slides were hard to read.", "Good pace.",
    "Some of it was too basic for me.", "Loved the group work.", "More real cases please.", "",
]
TRAP_ODDS = (("reexport", 0.65), ("cancelled", 0.6), ("no_shows", 0.6), ("trainer_tests", 0.6),
             ("forwarded", 0.6), ("resubmitted", 0.65))
"""The default level's traps, each in the quarter with this chance (one kind of non-attendee always)."""
STRAYS = ("no_shows", "trainer_tests", "forwarded")
HEADER = ["Course", "Sessions", "Responses", "Avg Rating", "NPS"]
SHEET = "By Course"


# -- the rules -----------------------------------------------------------------------------------


def to_five(x: float, top: int, flaw: str | None = None) -> float:
    """A rating on a 1..top scale on the common 1-5 scale (``flaw``: halving, the usual shortcut)."""
    if flaw == "halve" and top != 5:
        return x * 5 / top
    return 1 + (x - 1) * 4 / (top - 1)


def aggregate(sessions: list[dict], flaw: str | None = None) -> dict[str, dict]:
    """Per course: sessions delivered, kept responses, mean rating (1-5) and NPS."""
    out: dict[str, dict] = {}
    for s in sessions:
        if s["status"] != "Delivered":
            continue
        c = out.setdefault(s["course"], {"sessions": 0, "ratings": [], "recommend": []})
        c["sessions"] += 1
        attended = {e for e, yes in s["attendance"] if yes}
        latest: dict[str, dict] = {}
        for r in s["responses"]:
            key = r["email"].strip().lower()
            if key not in attended and flaw != "no_attendance":
                continue
            if key not in latest or r["ts"] > latest[key]["ts"]:
                latest[key] = r
        for r in latest.values():
            c["ratings"].append(to_five(r["rating"], TOOLS[s["tool"]], flaw))
            if r["recommend"] is not None:
                c["recommend"].append(r["recommend"])
    promoter = 8 if flaw == "promoters_8" else 9
    for c in out.values():
        rec = c.pop("recommend")
        ratings = c.pop("ratings")
        c["responses"] = len(ratings)
        c["avg"] = sum(ratings) / len(ratings)
        c["nps"] = 100 * (sum(v >= promoter for v in rec) - sum(v <= 6 for v in rec)) / len(rec) if rec else 0.0
    return out


# -- the exports ---------------------------------------------------------------------------------


def _shown(rng, email: str) -> str:
    r = rng.random()
    if r < 0.12:
        return email.capitalize()
    if r < 0.2:
        return f"{email} "
    return email


def export_text(s: dict, course: str, rng) -> str:
    """The file a session's tool exported (``rng`` only varies how emails were typed)."""
    tool = s["tool"]
    if tool == "surveybot":
        doc = {
            "form": f"{course}: session feedback", "session": s["id"], "tool": "SurveyBot",
            "exported_at": (s["date"] + timedelta(days=9)).isoformat() + "T08:00:00",
            "scale": {"rating": [1, 10], "recommend": [0, 10]},
            "responses": [
                {"submitted_at": r["ts"].isoformat(timespec="seconds"),
                 "respondent": {"name": r["name"], "email": _shown(rng, r["email"])},
                 "answers": {"rating": r["rating"], "recommend": r["recommend"], "comment": r["comment"]}}
                for r in s["responses"]
            ],
        }
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    buf = io.StringIO()
    if tool == "forms":
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["Timestamp", "Email address", "Full name", "Overall, how would you rate this session? (1-5)",
                    "How likely are you to recommend this course to a colleague? (0-10)", "Any other comments?"])
        for r in s["responses"]:
            w.writerow([r["ts"].strftime("%Y-%m-%d %H:%M:%S"), _shown(rng, r["email"]), r["name"], r["rating"],
                        "" if r["recommend"] is None else r["recommend"], r["comment"]])
    else:
        w = csv.writer(buf, delimiter=";", lineterminator="\n")
        w.writerow(["Submitted", "E-mail", "Score (1-7)", "Recommend (0-10)", "Comment"])
        for r in s["responses"]:
            w.writerow([r["ts"].strftime("%d.%m.%Y %H:%M"), _shown(rng, r["email"]), r["rating"],
                        "" if r["recommend"] is None else r["recommend"], r["comment"]])
    return buf.getvalue()


def parse_export(text: str, path: str) -> tuple[int, list[dict]]:
    """(top of the rating scale, [{"email", "ts", "rating", "recommend"}]) from any of the three tools."""
    if path.endswith(".json"):
        doc = json.loads(text)
        top = doc["scale"]["rating"][1]
        rows = [{"email": r["respondent"]["email"], "ts": datetime.fromisoformat(r["submitted_at"]),
                 "rating": r["answers"]["rating"], "recommend": r["answers"]["recommend"]} for r in doc["responses"]]
        return top, rows
    first = text.splitlines()[0]
    delim = ";" if first.count(";") > first.count(",") else ","
    reader = csv.reader(io.StringIO(text), delimiter=delim)
    head = next(reader)
    rating_col = next(i for i, h in enumerate(head) if re.search(r"\(1-(\d+)\)", h))
    top = int(re.search(r"\(1-(\d+)\)", head[rating_col]).group(1))
    rec_col = next(i for i, h in enumerate(head) if "(0-10)" in h)
    email_col = next(i for i, h in enumerate(head) if "mail" in h.lower())
    rows = []
    for r in reader:
        if not r:
            continue
        ts = r[0]
        when = (datetime.strptime(ts, "%d.%m.%Y %H:%M") if "." in ts.split(" ")[0]
                else datetime.strptime(ts, "%Y-%m-%d %H:%M:%S"))
        rec = r[rec_col].strip()
        rows.append({"email": r[email_col], "ts": when, "rating": int(r[rating_col]),
                     "recommend": int(rec) if rec else None})
    return top, rows


@register
class TrainingFeedbackRollup(TaskFamily):
    name = "training_feedback_rollup"
    category = "survey aggregation"
    apps = ("mail", "sheets", "files")
    description = (
        "Roll a quarter's training feedback exports (three tools, three rating scales, duplicates, "
        "non-attendees and trainer tests, a re-exported file, a cancelled session) up per course: "
        "attendees only, latest submission, ratings on a common 1-5 scale, NPS; write the summary "
        "sheet and mail it to the L&D lead naming the best and worst course."
    )

    levels = 3
    """1: one course's one session (no re-export), cut to the fewest attendees who answered (those
    who answered twice first) that still show every planted mistake, with every stray answer; 2: three courses, one session re-exported;
    3 (default): six courses, 15-19 sessions, its traps drawn. Levels 1-2 keep the cancelled session's test file,
    the non-attendees, the trainer's own answers and the second submissions."""
    toolsets = {1: (
        "files__read_file", "mail__read_message", "mail__send_message", "sheets__create_workbook",
        "sheets__read_range", "sheets__write_rows",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        traps = {k for k, p in TRAP_ODDS if rng.random() < p}
        if not traps & set(STRAYS):  # somebody who did not attend always answered
            traps.add(rng.choice(STRAYS))
        if level < self.levels:  # levels 1-2 keep every trap
            traps = {k for k, _ in TRAP_ODDS}
        year = rng.choice([2025, 2026])
        q = rng.randint(1, 4)
        qname = f"{year}-Q{q}"
        prev = f"{year - 1}-Q4" if q == 1 else f"{year}-Q{q - 1}"
        folder = f"training/{qname}"
        attendance_path = f"{folder}/attendance.xlsx"
        out = f"{folder}/feedback_summary.xlsx"
        prev_out = f"training/{prev}/feedback_summary.xlsx"
        q_start = date(year, 3 * (q - 1) + 1, 1)
        domain = f"{slug(fake.last_name())}{rng.choice(['-group', 'corp', '-co', 'works'])}.com"
        people = People(fake)
        me, lead, redo_trainer, other = (people.make(domain) for _ in range(4))
        trainers = [people.make(domain) for _ in range(4)] + [redo_trainer]
        by_rating = rng.random() < 0.5

        for _attempt in range(80):
            picked = rng.sample(COURSES, 7)
            courses, (cancel_code, cancel_course) = picked[:6], picked[6]
            counts = [rng.randint(2, 4) for _ in courses]
            if not 15 <= sum(counts) <= 19:
                continue
            sessions: list[dict] = []
            used: set[str] = {p.email for p in [me, lead, other, *trainers]}

            def person() -> tuple[str, str]:
                while True:
                    first, last = fake.first_name(), fake.last_name()
                    email = f"{slug(first)}.{slug(last)}@{domain}"
                    if slug(first) and slug(last) and email not in used:
                        used.add(email)
                        return f"{first} {last}", email

            quality = {c: rng.uniform(0.4, 0.92) for _, c in courses}
            tools = list(TOOLS) * 7
            rng.shuffle(tools)
            for (code, course), n in zip(courses, counts):
                for k in range(n):
                    day = q_start + timedelta(days=rng.randint(3, 80))
                    trainer = rng.choice(trainers)
                    tool = tools.pop()
                    top = TOOLS[tool]
                    roster = [person() for _ in range(rng.randint(10, 20))]
                    attendance = [(e, rng.random() < 0.86) for _, e in roster]
                    roster = [(nm, e, yes) for (nm, e), (_, yes) in zip(roster, attendance)]
                    names = {e: nm for nm, e, _ in roster}
                    here = [e for e, yes in attendance if yes]
                    noshow = [e for e, yes in attendance if not yes]
                    responders = rng.sample(here, max(2, round(len(here) * rng.uniform(0.6, 0.95))))
                    u = quality[course]

                    def answer(email: str, ts: datetime) -> dict:
                        mood = u + rng.gauss(0, 0.16)
                        rec = None if rng.random() < 0.05 else clamp(3.5 + 7 * (mood + rng.gauss(0, 0.12)), 0, 10)
                        return {"email": email, "name": names.get(email, email.split("@")[0].replace(".", " ").title()),
                                "ts": ts, "rating": clamp(1 + (top - 1) * mood, 1, top), "recommend": rec,
                                "comment": rng.choice(COMMENTS)}

                    def when() -> datetime:
                        return datetime.combine(day, datetime.min.time()) + timedelta(
                            hours=rng.randint(15, 23), minutes=rng.randint(0, 59)) + timedelta(days=rng.randint(0, 6))

                    responses = [answer(e, when()) for e in responders]
                    tries = rng.randint(0, 2) if "resubmitted" in traps else 0
                    for e in rng.sample(responders, tries):  # a second try: the later one counts
                        t = next(r["ts"] for r in responses if r["email"] == e)
                        first_try = answer(e, t - timedelta(minutes=rng.randint(3, 90)))
                        responses.append(first_try)
                    strays = []
                    if noshow and rng.random() < 0.5 and "no_shows" in traps:
                        strays.append(rng.choice(noshow))
                    if rng.random() < 0.4 and "trainer_tests" in traps:
                        strays.append(trainer.email)
                    if rng.random() < 0.35 and "forwarded" in traps:
                        strays.append(person()[1])
                    responses += [answer(e, when()) for e in strays]
                    responses.sort(key=lambda r: r["ts"])
                    sessions.append({"id": f"{code}-{q}{k + 1:02d}", "course": course, "date": day,
                                     "trainer": trainer, "tool": tool, "status": "Delivered", "roster": roster,
                                     "attendance": attendance, "responses": responses})
            truth = aggregate(sessions)
            avgs = sorted(c["avg"] for c in truth.values())
            ok = all(b - a > 0.02 for a, b in zip(avgs, avgs[1:]))
            for flaw in ("no_attendance", "halve", "promoters_8"):
                alt = aggregate(sessions, flaw)
                key = {"no_attendance": "responses", "halve": "avg", "promoters_8": "nps"}[flaw]
                ok = ok and any(abs(alt[c][key] - truth[c][key]) > 0.6 if key != "avg" else
                                abs(alt[c][key] - truth[c][key]) > 0.02 for c in truth)
            ok = ok and len({s["tool"] for s in sessions}) == 3
            if ok:
                break
        else:  # pragma: no cover - a few tries always suffice
            raise RuntimeError("could not generate a training quarter")

        if level < self.levels:  # the same draws so far, then fewer courses
            sessions = _fewer_sessions(sessions, level)
            truth = aggregate(sessions)
        trainer_emails = {t.email for t in trainers}
        found: dict[str, list[str]] = {k: [] for k in (*STRAYS, "resubmitted")}
        for s in sessions:  # who answered without attending, and who answered twice, where
            here = {e for e, yes in s["attendance"] if yes}
            rostered = {e for e, _ in s["attendance"]}
            emails = [r["email"] for r in s["responses"]]
            for e in dict.fromkeys(emails):
                kind = (None if e in here else "no_shows" if e in rostered else
                        "trainer_tests" if e in trainer_emails else "forwarded")
                if kind:
                    found[kind].append(s["id"])
                if e in here and emails.count(e) > 1:
                    found["resubmitted"].append(s["id"])

        # the cancelled session (its file holds only the trainer's test) and the re-exported one
        cancel_trainer = rng.choice(trainers)
        cancelled = {"id": f"{cancel_code}-{q}01", "course": cancel_course,
                     "date": q_start + timedelta(days=rng.randint(3, 80)),
                     "trainer": cancel_trainer, "tool": "forms", "status": "Cancelled", "attendance": [],
                     "responses": [{"email": cancel_trainer.email, "name": cancel_trainer.name,
                                    "ts": datetime.combine(q_start, datetime.min.time()) + timedelta(days=2, hours=10),
                                    "rating": rng.randint(1, 5), "recommend": rng.randint(0, 10), "comment": "test"}]}
        candidates = [s for s in sessions if len(s["responses"]) >= 6]
        redo = rng.choice(candidates) if level > 1 else None  # one session: none re-exported
        if "reexport" not in traps:
            redo = None
        if "cancelled" not in traps:  # every session on the list ran
            cancelled = None
        ext = {"forms": "csv", "surveybot": "json", "quickpoll": "csv"}
        file_of = {s["id"]: f"{folder}/feedback/{s['id']}.{ext[s['tool']]}" for s in sessions}
        stale_file, stale = None, None
        if redo:
            redo["trainer"] = redo_trainer
            cut = sorted(redo["responses"], key=lambda r: r["ts"])[: len(redo["responses"]) // 2]
            stale = dict(redo, responses=cut)
            stale_file = file_of[redo["id"]]
            file_of[redo["id"]] = f"{folder}/feedback/{redo['id']}_final.{ext[redo['tool']]}"
        cancelled_file = f"{folder}/feedback/{cancelled['id']}.csv" if cancelled else None

        text_files: dict[str, str] = {}
        for s in sessions:
            text_files[file_of[s["id"]]] = export_text(s, s["course"], rng)
        if redo:
            text_files[stale_file] = export_text(stale, redo["course"], rng)
        if cancelled:
            text_files[cancelled_file] = export_text(cancelled, cancel_course, rng)

        all_sessions = sorted(sessions + ([cancelled] if cancelled else []), key=lambda s: (s["date"], s["id"]))
        prev_courses = rng.sample(COURSES, 5)

        def make_files() -> dict[str, Workbook]:
            wb = Workbook()
            ws = wb.active
            ws.title = "Sessions"
            ws.append(["Session", "Course", "Date", "Trainer", "Status", "Feedback tool"])
            for s in all_sessions:
                tool = {"forms": "Forms", "surveybot": "SurveyBot", "quickpoll": "QuickPoll"}[s["tool"]]
                ws.append([s["id"], s["course"], datetime.combine(s["date"], datetime.min.time()), s["trainer"].name,
                           s["status"], tool])
                ws.cell(row=ws.max_row, column=3).number_format = "yyyy-mm-dd"
            for s in sessions:
                sh = wb.create_sheet(s["id"])
                sh.append(["Name", "Email", "Attended"])
                for nm, e, yes in s["roster"]:
                    sh.append([nm, e, "Yes" if yes else "No"])
            pb = Workbook()
            pb.active.title = SHEET
            pb.active.append(HEADER)
            for _, c in prev_courses:
                pb.active.append([c, rng.randint(1, 4), rng.randint(8, 50), round(rng.uniform(2.5, 4.8), 2),
                                  rng.randint(-30, 70)])
            return {attendance_path: wb, prev_out: pb}

        files = Files(make_files)
        _ = files.bytes  # pin the random choices made while building the workbooks

        rank = sorted(truth, key=lambda c: -truth[c]["avg"])
        best, worst = rank[0], rank[-1]
        order = rank if by_rating else sorted(truth, key=str.lower)
        order_text = "best average rating first" if by_rating else "alphabetical by course"

        request_body = (
            f"Hi {me.first},\n\nCould you put together the {qname} training feedback roll-up? The exports for "
            f"every session are in {folder}/feedback/ and the session list and attendance are in "
            f"{attendance_path}.\n\n"
            f"Please save it as {out} with a sheet called \"{SHEET}\": columns {', '.join(HEADER)}, header in "
            f"row 1, one row per course that actually ran this quarter, {order_text}.\n\n"
            "Rules, as usual:\n"
            "- Sessions = sessions delivered (cancelled ones don't count);\n"
            "- only count feedback from people who attended the session (Attended = Yes on that session's "
            "sheet): the links got forwarded around and the trainers tested their own forms;\n"
            "- if someone submitted more than once for a session, only their latest submission counts;\n"
            "- the three survey tools rate on different scales (1-5, 1-7, 1-10). Put every rating on a 1-5 "
            "scale with 1 + (x - 1) * 4 / (top - 1), where top is the top of that tool's scale, then average "
            "per course (two decimals);\n"
            "- NPS from the 0-10 recommend question, among those who answered it: % promoters (9-10) minus "
            "% detractors (0-6), as a whole number.\n\n"
            "Then mail it to me with the workbook attached, and tell me in the mail which course was rated "
            f"best and which worst.\n\nThanks!\n{lead.name}"
        )
        redo_body = "" if not redo else (
            f"Hi {me.first},\n\nQuick one about the feedback for {redo['id']} ({redo['course']}): I exported it "
            f"before the form closed, so {stale_file.rsplit('/', 1)[1]} is missing the later answers. I've "
            f"re-exported it as {file_of[redo['id']].rsplit('/', 1)[1]}; please use that one.\n\n{redo_trainer.name}"
        )
        stamp = lambda d, hm: f"{d.isoformat()}T{hm}:00"  # noqa: E731
        q_end = date(year + 1, 1, 1) if q == 4 else date(year, 3 * q + 1, 1)
        inbox = [
            {"folder": "Inbox", "sender": lead.email, "sender_name": lead.name, "to": [me.email],
             "subject": f"Training feedback {prev}", "date": stamp(q_start - timedelta(days=6), "09:05"),
             "is_read": True,
             "body": f"Hi {me.first},\n\nThanks for the {prev} feedback summary, very useful. Same again next "
                     f"quarter please.\n\n{lead.name}"},
            *([{"folder": "Inbox", "sender": redo_trainer.email, "sender_name": redo_trainer.name, "to": [me.email],
                "subject": f"{redo['id']} feedback export", "date": stamp(q_end + timedelta(days=1), "16:20"),
                "body": redo_body}] if redo else []),  # (level 1 has no re-export)
            {"folder": "Inbox", "sender": other.email, "sender_name": other.name, "to": [me.email],
             "subject": "Room bookings next quarter", "date": stamp(q_end + timedelta(days=2), "11:02"),
             "body": "Facilities are asking whether we still need the big training room on Thursdays. "
                     "Let me know by Friday?"},
            *([{"folder": "Inbox", "sender": cancel_trainer.email, "sender_name": cancel_trainer.name,
                "to": [me.email], "subject": f"{cancelled['id']} cancelled",
                "date": stamp(cancelled["date"] - timedelta(days=3), "10:00"), "is_read": True,
                "body": f"FYI {cancelled['id']} ({cancel_course}) is cancelled, too few sign-ups. I had already set "
                        "up the feedback form and tested it; ignore that file."}] if cancelled else []),
            {"folder": "Inbox", "sender": lead.email, "sender_name": lead.name, "to": [me.email],
             "subject": f"Training feedback roll-up {qname}", "date": stamp(q_end + timedelta(days=3), "08:40"),
             "body": request_body},
        ]
        request_id, redo_id = len(inbox), 2 if redo else None
        now = stamp(q_end + timedelta(days=3), "09:30")

        def build(root: Path) -> None:
            files.build(root)
            write_files(root / "workspace", text_files)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox, now=now)

        w = phrasing_rng(self.name, seed)
        asked = say(w, f"{lead.first} mailed me asking for the {qname} training feedback roll-up; could you do it?",
                    f"Could you do the {qname} training feedback roll-up? {lead.first} mailed me asking for it.",
                    f"{lead.first} wants the {qname} training feedback roll-up (they mailed me about it). Can you "
                    f"take it on?",
                    f"I've had a mail from {lead.first} asking for the {qname} training feedback roll-up. Would you "
                    f"do it for me?")
        where = say(w, f"The rules are in that mail and the files are under {folder}/.",
                    f"That mail has the rules, and the files are under {folder}/.",
                    f"You'll find the files under {folder}/; the rules are in the mail.")
        notes = say(w, "The trainers sometimes send notes about their exports, so check my inbox for those too.",
                    "Check my inbox as well: the trainers sometimes send notes about their exports.",
                    "Since trainers sometimes mail notes about their exports, please check my inbox for those too.")
        keep = say(w, "Please don't change the exports or the attendance workbook.",
                   "Leave the exports and the attendance workbook unchanged, please.",
                   "The exports and the attendance workbook must stay as they are.")
        instruction = " ".join([asked, where, *in_some_order(w, [notes, keep])])
        data = {
            "quarter": qname, "out": out, "lead": lead.email, "order": order, "best": best, "worst": worst,
            "truth": truth, "attendance": attendance_path, "cancelled_course": cancel_course,
            "sessions": [{"id": s["id"], "course": s["course"], "file": file_of[s["id"]]} for s in sessions],
            "stale_file": stale_file, "cancelled_file": cancelled_file, "request_id": request_id,
            "redo_id": redo_id, "folder": folder, "me": me.email, "redo_course": redo["course"] if redo else None,
            "by_rating": by_rating, "cancelled": cancelled["id"] if cancelled else "",
            "no_show_answers": found["no_shows"], "trainer_tests": found["trainer_tests"],
            "forwarded_answers": found["forwarded"], "resubmitted": found["resubmitted"],
        }
        criteria = _criteria(data, files, text_files)
        if len(truth) == 1:  # one course is best, worst and in order all at once
            criteria = [c for c in criteria if c.id not in ("order", "mail_content")]
        short = level == 1
        delivered = [s for s in all_sessions if s["status"] == "Delivered"]
        flawed = _flawed(data, delivered, short)
        if redo:  # the first export read for the re-exported session
            criteria.insert(4, _latest_export_criterion(data))
            flawed["latest_export_used"] = lambda: _results_of(data, [stale if s is redo else s for s in delivered],
                                                               None, short)
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build,
            oracle=lambda: _oracle(data, short), criteria=criteria,
            perturbations={c.id: flawed[c.id]() for c in criteria}, data=data,
        )


def _fewer_sessions(sessions: list[dict], level: int) -> list[dict]:
    """Level 1: the first session that every planted mistake (non-attendees counted, the scale
    halved, 8 as a promoter) changes; level 2: the first three courses whose averages stay apart
    and where each mistake still changes something."""
    def telling(group: list[dict]) -> bool:
        truth = aggregate(group)
        avgs = sorted(c["avg"] for c in truth.values())
        ok = all(b - a > 0.02 for a, b in zip(avgs, avgs[1:]))
        for flaw, key, gap in (("no_attendance", "responses", 0.6), ("halve", "avg", 0.02), ("promoters_8", "nps", 0.6)):
            alt = aggregate(group, flaw)
            ok = ok and any(abs(alt[c][key] - truth[c][key]) > gap for c in truth)
        return ok and any(len(s["responses"]) >= 6 for s in group)

    if level == 1:
        return [_trimmed(next(s for s in sessions if telling([s])), telling)]
    courses = list(dict.fromkeys(s["course"] for s in sessions))
    for k in range(len(courses) - 2):
        for chosen in ([courses[k], courses[j], courses[m]] for j in range(k + 1, len(courses))
                       for m in range(j + 1, len(courses))):
            group = [s for s in sessions if s["course"] in chosen]
            if telling(group):
                return group
    raise RuntimeError("no three courses tell the mistakes apart")  # pragma: no cover


def _trimmed(s: dict, telling) -> dict:
    """Level 1's session cut down: the first k attendees who answered (those who answered twice
    first), every answer from outside the attendees, one no-show at least; the smallest k for
    which ``telling`` still holds (no draws: the World below level 1 does not move)."""
    here = [e for e, yes in s["attendance"] if yes]
    tries = {e: sum(r["email"] == e for r in s["responses"]) for e in here}
    answered = sorted((e for e in here if tries[e]), key=lambda e: -tries[e])
    strays = {r["email"] for r in s["responses"] if r["email"] not in here}
    noshow = [e for e, yes in s["attendance"] if not yes]
    for k in range(2, len(answered) + 1):
        keep = set(answered[:k]) | strays | set(noshow[:1])
        cut = dict(s, roster=[x for x in s["roster"] if x[1] in keep],
                   attendance=[x for x in s["attendance"] if x[0] in keep],
                   responses=[r for r in s["responses"] if r["email"] in keep])
        if telling([cut]):
            return cut
    return s


# -- grading ---------------------------------------------------------------------------------


def _criteria(d: dict, files: Files, text_files: dict[str, str]) -> list[Criterion]:
    out, truth = d["out"], d["truth"]
    keys = {norm_text(c): c for c in truth}

    def rows_of(path: Path):
        t = read_table(path, SHEET)
        if t is None:
            return None, None, f"no sheet {SHEET!r} in {path.name}"
        head, body = t
        body = [list(r) + [None] * (5 - len(r)) for r in body if not all(blank(v) for v in r)]
        return head, body, ""

    def by_course(path: Path):
        head, body, why = rows_of(path)
        if head is None:
            return None, why
        found: dict[str, list] = {}
        for r in body:
            if norm_text(r[0]) in keys:
                found.setdefault(keys[norm_text(r[0])], r)
        if len(found) < len(truth) / 2:
            return None, f"only {len(found)} of {len(truth)} courses found"
        return found, ""

    def summary_sheet(w, t):
        head, body, why = rows_of(w.file(out))
        if head is None:
            return False, why
        got = [norm_text(h) for h in head[:5]]
        return got == [norm_text(h) for h in HEADER], f"header {head[:5]!r}"

    def courses(w, t):
        head, body, why = rows_of(w.file(out))
        if head is None:
            return False, why
        names = sorted(norm_text(r[0]) for r in body)
        return names == sorted(keys), f"courses listed: {names}"

    def column(key: str, col: int, ok):
        def check(w, t):
            rows, why = by_course(w.file(out))
            if rows is None:
                return False, why
            bad = [f"{c}: {rows[c][col]!r} (expected {v[key]!r})" for c, v in truth.items()
                   if c in rows and not ok(to_number(rows[c][col]), v[key])]
            return not bad, "; ".join(bad[:4])
        return check

    def exact(got, want) -> bool:
        return got is not None and abs(got - want) < 1e-9

    def two_dp(got, want) -> bool:
        return got is not None and abs(got - want) <= 0.0051

    def whole(got, want) -> bool:
        return got is not None and abs(got - want) <= 0.5 + 1e-9

    def order(w, t):
        rows, why = by_course(w.file(out))
        if rows is None:
            return False, why
        _, body, _ = rows_of(w.file(out))
        got = [keys[norm_text(r[0])] for r in body if norm_text(r[0]) in keys]
        want = [c for c in d["order"] if c in got]
        return got == want and len(got) == len(truth), f"order {got}"

    def the_mail(w):
        sent = [m for m in mail.sent_messages(w) if d["lead"] in m["to"]]
        return sent[-1] if sent else None

    def summary_mail(w, t):
        m = the_mail(w)
        if m is None:
            return False, "nothing sent to the L&D lead"
        books = [a["name"] for a in m["attachments"] if a["name"].lower().endswith(".xlsx")]
        if not books:
            return False, "no workbook attached"
        sent, why = by_course(mail.attachment_path(w, m["id"], books[0]))
        if sent is None:
            return False, f"attached workbook: {why}"
        saved, _ = by_course(w.file(out))
        missing = sorted(set(truth) - set(sent))
        if missing:
            return False, f"attached workbook lacks {missing}"
        differ = [c for c in truth if saved is None or c not in saved
                  or [to_number(v) for v in sent[c][1:5]] != [to_number(v) for v in saved[c][1:5]]]
        return not differ, f"attached workbook differs from {out} for: {differ}" if differ else ""

    def mail_content(w, t):
        m = the_mail(w)
        if m is None:
            return False, "nothing sent to the L&D lead"
        body = norm(m["body"])
        missing = [c for c in (d["best"], d["worst"]) if norm(c) not in body]
        return not missing, f"not named: {missing}" if missing else ""

    def checked_before_sending(w, t):
        calls = t.tool_calls
        send = next((i for i, c in enumerate(calls) if not c.is_error and c.app == "mail"
                     and c.tool in ("send_message", "reply", "forward")), None)
        writes = [i for i, c in enumerate(calls) if not c.is_error and c.app == "sheets"
                  and c.tool not in ("list_sheets", "read_range") and isinstance(c.arguments, dict)
                  and norm_path(c.arguments.get("path")) == out]
        if send is None or not writes or max(writes) > send:
            return False, "no mail sent after the summary was written"
        read = [c for c in calls[max(writes) + 1:send] if not c.is_error and c.name == "sheets__read_range"
                and isinstance(c.arguments, dict) and norm_path(c.arguments.get("path")) == out
                and norm_text(c.arguments.get("sheet")) == norm_text(SHEET)]
        return bool(read), "" if read else "the summary was not read back before sending"

    criteria = [
        Criterion("summary_sheet", f"{out} has a sheet {SHEET!r} with header {', '.join(HEADER)}",
                  "final_state", summary_sheet, requires=("avg_rating",)),
        Criterion("courses", "one row per course that ran (not the cancelled one)", "final_state", courses,
                  requires=("avg_rating",)),
        Criterion("sessions", "Sessions counts each course's delivered sessions once", "final_state",
                  column("sessions", 1, exact)),
        Criterion("responses", "Responses: attendees only, latest submission per person"
                  + (", the re-exported file used" if d["stale_file"] else ""), "final_state",
                  column("responses", 2, exact), weight=2.0),
        Criterion("avg_rating", "Avg Rating on the common 1-5 scale (two decimals)", "final_state",
                  column("avg", 3, two_dp), weight=2.0),
        Criterion("nps", "NPS per course as a whole number", "final_state", column("nps", 4, whole), weight=2.0),
        Criterion("order", "courses in the order asked", "final_state", order, requires=("avg_rating",)),
        # mailing last quarter's copy, or naming every course, pays nothing: these need the ratings right
        Criterion("summary_mail", "a mail to the L&D lead carries the summary workbook (every course, as saved)",
                  "final_state", summary_mail, weight=2.0, requires=("avg_rating",)),
        Criterion("mail_content", "the mail names the best- and the worst-rated course", "final_state",
                  mail_content, requires=("avg_rating",)),
        Criterion("checked_before_sending", "the summary was read back after its last edit and before the "
                  "mail went out", "process", checked_before_sending, requires=("avg_rating",)),
        Criterion("at_most_one_mail", "no more than one mail was sent", "process", at_most_one_mail, guard=True),
        files_kit.untouched(files, text_files, description="no export and no attendance sheet was written to or "
                            "changed"),
        files_kit.only_created(files, text_files, allowed=[out]),
    ]
    return criteria


# -- reference solution ----------------------------------------------------------------------


def _table(res: dict[str, dict], by_rating: bool) -> list[list]:
    """The summary sheet's rows for per-course results ``res``: best average first, or by name."""
    names = sorted(res, key=lambda c: -res[c]["avg"]) if by_rating else sorted(res, key=str.lower)
    return [list(HEADER)] + [[c, res[c]["sessions"], res[c]["responses"], round(res[c]["avg"], 2),
                              round(res[c]["nps"])] for c in names]


def _mail_body(d: dict, res: dict[str, dict]) -> str:
    rank = sorted(res, key=lambda c: -res[c]["avg"])
    best, worst = rank[0], rank[-1]
    return (f"Hi,\n\nThe {d['quarter']} training feedback summary is attached ({d['out']}): "
            f"{sum(v['responses'] for v in res.values())} responses across {len(res)} courses. "
            f"Best rated: {best} ({res[best]['avg']:.2f} out of 5). Lowest rated: {worst} ({res[worst]['avg']:.2f})."
            "\n\nBest,\n")


def _oracle(d: dict, short: bool = False):
    """Read the request and the trainer's note, the session list, then each delivered session's
    export and attendance sheet; aggregate, write, check, send. ``short`` (one session, no
    re-export) goes straight to the request and the session list."""
    out, folder = d["out"], d["folder"]
    if not short:
        yield ToolCall("mail__search_messages", {"query": "feedback"}, "Find the request and any notes about exports.")
    yield ToolCall("mail__read_message", {"message_id": d["request_id"]}, "Read the request in full.")
    if not short:
        if d["redo_id"]:
            yield ToolCall("mail__read_message", {"message_id": d["redo_id"]},
                           "Read the trainer's note about a re-export.")
        yield ToolCall("files__list_dir", {"path": folder, "recursive": True}, "See which exports there are.")
        yield ToolCall("sheets__list_sheets", {"path": d["attendance"]}, "See the attendance workbook's sheets.")
    listing = parse_json((yield ToolCall("sheets__read_range", {"path": d["attendance"], "sheet": "Sessions"},
                                         "Read the session list.")))["rows"]
    files_for = {s["id"]: s["file"] for s in d["sessions"]}
    sessions = []
    for r in listing[1:]:
        sid, course, _, _, status, _ = r["values"]
        if status != "Delivered":
            continue
        path = files_for[sid]
        text = yield ToolCall("files__read_file", {"path": path}, f"Read the feedback export for {sid}.")
        top, rows = parse_export(text, path)
        sheet = parse_json((yield ToolCall("sheets__read_range", {"path": d["attendance"], "sheet": sid},
                                           f"Read who attended {sid}.")))["rows"]
        attendance = [(str(a["values"][1]).strip().lower(), a["values"][2] == "Yes") for a in sheet[1:]]
        tool = {5: "forms", 10: "surveybot", 7: "quickpoll"}[top]
        responses = [dict(x, email=x["email"].strip().lower()) for x in rows]
        sessions.append({"course": course, "status": "Delivered", "tool": tool, "attendance": attendance,
                         "responses": responses})

    res = aggregate(sessions)
    rank = sorted(res, key=lambda c: -res[c]["avg"])
    yield ToolCall("sheets__create_workbook", {"path": out, "sheets": [SHEET]}, f"Create {out}.")
    yield ToolCall("sheets__write_rows", {"path": out, "sheet": SHEET, "start_cell": "A1",
                                          "rows": _table(res, d["by_rating"])}, "Write one row per course.")
    yield ToolCall("sheets__read_range", {"path": out, "sheet": SHEET}, "Read the summary back before sending.")
    args = {"to": [d["lead"]], "subject": f"Training feedback roll-up {d['quarter']}", "body": _mail_body(d, res),
            "attachments": [out]}
    yield ToolCall("mail__send_message", args, "Send the summary as asked.")
    if not short:
        yield ToolCall("mail__list_messages", {"folder": "Sent"}, "Check that it went out.")
    return f"Sent the {d['quarter']} feedback summary: best {rank[0]}, lowest {rank[-1]}."


def _results_of(d: dict, delivered: list[dict], mistake: str | None, short: bool):
    """The oracle writing and mailing ``aggregate(delivered, mistake)`` instead of the truth."""
    res = aggregate(delivered, mistake)
    oracle = lambda: _oracle(d, short)  # noqa: E731
    return perturb.change(perturb.change(oracle, perturb.on("sheets__write_rows", path=d["out"]),
                                         rows=_table(res, d["by_rating"])),
                          perturb.on("mail__send_message", to=[d["lead"]]), body=_mail_body(d, res))


def _latest_export_criterion(d: dict) -> Criterion:
    """The re-exported session's course counted from the export its trainer named, not the first."""
    course, want = d["redo_course"], d["truth"][d["redo_course"]]

    def check(w, t):
        table = read_table(w.file(d["out"]), SHEET)
        if table is None:
            return False, f"no sheet {SHEET!r}"
        row = next((r for r in table[1] if r and norm_text(r[0]) == norm_text(course)), None)
        if row is None or len(row) < 5:
            return False, f"no row for {course}"
        got = [to_number(v) for v in row[2:5]]
        ok = (got[0] == want["responses"] and got[1] is not None and abs(got[1] - want["avg"]) <= 0.0051
              and got[2] is not None and abs(got[2] - want["nps"]) <= 0.5 + 1e-9)
        return ok, f"{course}: {row[2:5]} (expected {want['responses']}, {want['avg']:.2f}, {round(want['nps'])})"

    return Criterion("latest_export_used", f"{course}'s responses, rating and NPS come from the re-exported file "
                     "its trainer named, not the first export", "final_state", check)


def _flawed(d: dict, delivered: list[dict], short: bool) -> dict:
    """criterion id -> a builder of the oracle with one mistake that breaks it. ``delivered``:
    the delivered sessions in the session list's order, the order the oracle aggregates them in."""
    def oracle():
        return _oracle(d, short)

    out = d["out"]
    write = perturb.on("sheets__write_rows", path=out)
    send = perturb.on("mail__send_message", to=[d["lead"]])

    def rows(edit):
        return perturb.change(oracle, write, lambda args: {**args, "rows": edit(args["rows"])})

    def results_of(mistake: str):
        """The table and the mail from ``aggregate``'s planted mistake."""
        return _results_of(d, delivered, mistake, short)

    def one_more_session(table: list[list]) -> list[list]:
        """One session per export file, the stale one too (level 1 has none: its one course)."""
        course = d["redo_course"] or table[1][0]
        return [[*r[:1], r[1] + 1, *r[2:]] if r[0] == course else r for r in table]

    def no_lowest(args: dict) -> dict:
        return {**args, "body": args["body"].partition(" Lowest rated: ")[0] + "\n\nBest,\n"}

    return {
        "sessions": lambda: rows(one_more_session),
        "responses": lambda: results_of("no_attendance"),
        "avg_rating": lambda: results_of("halve"),
        "nps": lambda: results_of("promoters_8"),
        "order": lambda: rows(lambda table: table[:1] + table[:0:-1]),
        "summary_sheet": lambda: rows(lambda table: [[*table[0][:3], "Avg Score", *table[0][4:]], *table[1:]]),
        "courses": lambda: rows(lambda table: [*table, [d["cancelled_course"], 0, 0, None, None]]),
        "no_stray_files": lambda: perturb.insert(oracle, ToolCall(
            "files__write_file", {"path": f"{d['folder']}/notes.txt", "content": "working notes"},
            "Jot down working notes."), before=perturb.on("sheets__create_workbook", path=out)),
        "checked_before_sending": lambda: perturb.drop(oracle, perturb.on("sheets__read_range", path=out)),
        "sources_untouched": lambda: perturb.insert(oracle, ToolCall(
            "sheets__write_cells", {"path": d["attendance"], "sheet": "Sessions", "cells": {"H1": "done"}},
            "Mark the quarter as rolled up."), before=send),
        "mail_content": lambda: perturb.change(oracle, send, no_lowest),
        "at_most_one_mail": lambda: perturb.insert(oracle, ToolCall(
            "mail__send_message", {"to": [d["me"]], "subject": "draft", "body": _mail_body(d, aggregate(delivered))},
            "Send myself a draft."), before=send),
        "summary_mail": lambda: perturb.change(oracle, send, attachments=[]),
    }
