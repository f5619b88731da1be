"""Survey aggregation: a quarter's team pulse surveys rolled up into one results workbook and a mail.

Each team exported its form differently: full question texts, coded headers or short labels in
another order; timestamps as date cells or as text in two styles; one team's answers carry
their labels ("4 - Agree"); some workbooks open on an instructions sheet. People submitted
twice (their latest submission counts, and it is not always the last row), typed answers off
the scale, and wrote comments whose themes are counted by a keyword list, as whole words
("payroll" is not "pay"). One team re-exported its survey; its lead's mail says which file to
use. The requester's mail has the rules and the recipients; last quarter's workbook the layout.

The default level draws its traps per seed (``TRAP_ODDS``; levels 1-2 keep them all): the
re-exported team (graded by ``latest_export_used`` where it is), the team whose answers carry
their labels, the keyword look-alikes in the comments (without them, capitalised keywords still
have to count) and the off-scale answers are each there or not; repeat submissions always.
``Task.data`` names what each touches, empty where it is absent.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from openpyxl import Workbook

from longhorizon.apps.mail import state as mail
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import phrasing_rng, say
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

QUESTIONS = [
    ("Q1", "I have the tools and equipment I need to do my job well.", "Tools"),
    ("Q2", "My workload is manageable.", "Workload"),
    ("Q3", "I get useful feedback from my manager.", "Feedback"),
    ("Q4", "I understand how my work contributes to my team's goals.", "Goals"),
    ("Q5", "I can see a path to grow my career here.", "Growth"),
]
NPS_TEXT = "How likely are you to recommend working here to a friend? (0-10)"
LABELS = {1: "Strongly disagree", 2: "Disagree", 3: "Neutral", 4: "Agree", 5: "Strongly agree"}
TEAMS = ["Engineering", "Sales", "Support", "Marketing", "Finance", "Operations", "Product", "Design",
         "Legal", "Data"]
THEMES: dict[str, list[str]] = {
    "Workload": ["overtime", "workload", "deadlines", "understaffed", "burnout"],
    "Tooling": ["laptop", "vpn", "software", "tools"],
    "Communication": ["meetings", "communication", "transparency", "updates"],
    "Career growth": ["promotion", "training", "mentoring", "career"],
    "Pay": ["salary", "bonus", "pay", "compensation"],
    "Remote work": ["hybrid", "commute", "remote", "office"],
}
PHRASES: dict[str, list[str]] = {
    "Workload": ["Too much overtime lately.", "The workload has been heavy since the reorg.",
                 "Deadlines keep slipping because we are understaffed.", "Honestly I'm close to burnout."],
    "Tooling": ["My laptop is five years old and very slow.", "The VPN drops every afternoon.",
                "We need better software for planning.", "The new tools have helped a lot."],
    "Communication": ["Too many meetings, not enough focus time.", "Communication between teams could be better.",
                      "I'd like more transparency about priorities.", "Weekly updates from leadership would help."],
    "Career growth": ["There is no clear path to promotion.", "More training budget please.",
                      "I would love a mentoring programme.", "Career conversations happen rarely."],
    "Pay": ["Salary is below market.", "The bonus scheme is confusing.", "Pay reviews take too long.",
            "Compensation is fair for my role."],
    "Remote work": ["Please keep hybrid working.", "The commute is long on office days.",
                    "Remote days help me focus."],
}
NEUTRAL = ["Great team, thanks!", "All good from my side.", "Lunch options have improved.",
           "Happy with my manager.", "Overall a good quarter."]
TRAPS = ["The payroll portal works fine.", "The officers of the social club did a great job.",
         "I enjoy the toolbox talks on Fridays.", "The careers page still shows old jobs.",
         "Thanks for the payslip explainer."]
"""Comments with a keyword inside a longer word: whole-word matching must not count them."""
INVALID_SCORES = ["n/a", None, 0, 6, 7, "N/A", "-", 3.5, "skip", ""]
INVALID_NPS = ["n/a", None, 11, 12, -1, "", "-"]
RESULTS_HEADERS = {
    "Scores": ["Team", "Question", "Responses", "Average"],
    "NPS": ["Team", "Responses", "Promoters", "Passives", "Detractors", "NPS"],
    "Themes": ["Theme", "Mentions"],
}
TRAP_ODDS = (("reexport", 0.65), ("labelled", 0.6), ("lookalikes", 0.6), ("off_scale", 0.6))
"""The default level's traps, each in the survey with this chance (repeat submissions always)."""
ALL = "All teams"
PAGE = 15
"""Rows per read: the comment column makes rows wide."""


# -- answers and the rules ---------------------------------------------------------------------


def score_of(v: Any) -> int | None:
    """A valid 1-5 answer (a whole number, or 'N - Label' as one form exports it), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if 1 <= v <= 5 else None
    if isinstance(v, str):
        m = re.match(r"^\s*([1-5])\s*-\s*[A-Za-z ]+$", v)
        return int(m.group(1)) if m else None
    return None


def nps_of(v: Any) -> int | None:
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10:
        return v
    return None


_THEME_RE = {t: re.compile(r"\b(?:" + "|".join(map(re.escape, kws)) + r")\b") for t, kws in THEMES.items()}


@functools.lru_cache(maxsize=4096)
def themes_of(text: str | None, substring: bool = False, case: bool = False) -> frozenset[str]:
    """Themes a comment counts for: any keyword as a whole word, any case (``substring``: the
    mistake of matching inside longer words; ``case``: that of matching lower case only)."""
    if not text:
        return frozenset()
    low = text if case else text.lower()
    if substring:
        return frozenset(t for t, kws in THEMES.items() if any(k in low for k in kws))
    return frozenset(t for t, rx in _THEME_RE.items() if rx.search(low))


def aggregate(teams: dict[str, list[dict]], flaw: str | None = None) -> dict:
    """Scores, NPS and theme counts from each team's submissions. ``flaw`` plants one mistake."""
    kept: dict[str, list[dict]] = {}
    for team, subs in teams.items():
        if flaw == "no_dedup":
            kept[team] = list(subs)
            continue
        best: dict[str, dict] = {}
        for s in subs:
            key = s["email"].strip().lower()
            if key not in best or (s["ts"] < best[key]["ts"] if flaw == "first" else s["ts"] > best[key]["ts"]):
                best[key] = s
        kept[team] = list(best.values())
    scores: dict[tuple[str, str], tuple[int, float]] = {}
    for qid, _, _ in QUESTIONS:
        pooled: list[int] = []
        means = []
        for team, subs in kept.items():
            vals = [v for v in (score_of(s["answers"][qid]) for s in subs) if v is not None]
            scores[(team, qid)] = (len(vals), sum(vals) / len(vals))
            pooled += vals
            means.append(sum(vals) / len(vals))
        scores[(ALL, qid)] = (len(pooled), sum(means) / len(means) if flaw == "mean_of_means"
                              else sum(pooled) / len(pooled))
    nps: dict[str, tuple[int, int, int, int, float]] = {}
    promoter = 8 if flaw == "promoters_8" else 9
    pooled_nps: list[int] = []
    for team in [*kept, ALL]:
        vals = pooled_nps if team == ALL else [v for v in (nps_of(s["nps"]) for s in kept[team]) if v is not None]
        if team != ALL:
            pooled_nps += vals
        p = sum(v >= promoter for v in vals)
        d = sum(v <= 6 for v in vals)
        nps[team] = (len(vals), p, len(vals) - p - d, d, 100 * (p - d) / len(vals))
    mentions = Counter()
    for subs in kept.values():
        for s in subs:
            mentions.update(themes_of(s["comment"], substring=flaw == "substring", case=flaw == "case"))
    order = list(THEMES)
    themes = sorted(((t, mentions[t]) for t in order), key=lambda tc: (-tc[1], order.index(tc[0])))
    return {"scores": scores, "nps": nps, "themes": themes}


# -- world ---------------------------------------------------------------------------------------


def _comment(rng, lookalikes: bool = True) -> str | None:
    r = rng.random()
    if r < 0.22:
        return None
    asides = NEUTRAL + TRAPS if lookalikes else NEUTRAL
    if r < 0.34:
        return rng.choice(asides)
    themes = rng.sample(sorted(PHRASES), rng.choice([1, 1, 1, 2]))
    parts = [rng.choice(PHRASES[t]) for t in themes]
    if rng.random() < 0.2:
        parts.append(rng.choice(asides))
    return " ".join(parts)


def _submission(rng, email: str, ts: datetime, labelled: bool, invalid_rate: float, lookalikes: bool = True) -> dict:
    mood = rng.uniform(-1, 1)
    answers = {}
    for qid, _, _ in QUESTIONS:
        if rng.random() < invalid_rate:
            answers[qid] = rng.choice(INVALID_SCORES)
        else:
            v = clamp(3 + 1.6 * mood + rng.gauss(0, 0.8), 1, 5)
            answers[qid] = f"{v} - {LABELS[v]}" if labelled else v
    nps = rng.choice(INVALID_NPS) if rng.random() < invalid_rate * 0.8 else clamp(6.5 + 3.6 * mood + rng.gauss(0, 1.2), 0, 10)
    return {"email": email, "ts": ts, "answers": answers, "nps": nps, "comment": _comment(rng, lookalikes)}


def _team_book(style: dict, subs: list[dict], first_sheet: str | None) -> Workbook:
    qs = list(QUESTIONS)
    if style["header"] == "full":
        head = ["Timestamp", "Email Address"] + [q[1] for q in qs] + [NPS_TEXT, "Anything else you'd like to tell us?"]
        cols = ["ts", "email"] + [q[0] for q in qs] + ["nps", "comment"]
    elif style["header"] == "coded":
        head = ["Submitted at", "Respondent email"] + [f"{q[0]} - {q[2]}" for q in qs] + ["eNPS (0-10)", "Comments"]
        cols = ["ts", "email"] + [q[0] for q in qs] + ["nps", "comment"]
    else:
        order = style["order"]
        head = ["Email", "Time"] + [dict((q[0], q[2]) for q in qs)[c] for c in order] + ["Recommend (0-10)", "Comment"]
        cols = ["email", "ts"] + list(order) + ["nps", "comment"]
    wb = Workbook()
    ws = wb.active
    if first_sheet:
        ws.title = first_sheet
        ws.append(["This workbook holds the form's responses on the next sheet."])
        ws.append(["Scale: 1 = strongly disagree ... 5 = strongly agree; recommend: 0-10."])
        ws = wb.create_sheet(style["sheet"])
    else:
        ws.title = style["sheet"]
    ws.append(head)
    for s in subs:
        row = []
        for c in cols:
            if c == "ts":
                ts = s["ts"]
                row.append(ts if style["ts"] == "cell" else
                           ts.strftime("%Y-%m-%d %H:%M") if style["ts"] == "iso" else
                           f"{ts.day} {ts:%b %Y %H:%M}")
            elif c == "email":
                row.append(s["shown_email"])
            elif c == "nps":
                row.append(s["nps"])
            elif c == "comment":
                row.append(s["comment"])
            else:
                row.append(s["answers"][c])
        ws.append(row)
        if style["ts"] == "cell":
            ws.cell(row=ws.max_row, column=cols.index("ts") + 1).number_format = "yyyy-mm-dd hh:mm"
    return wb


def _results_book(res: dict, teams: list[str]) -> Workbook:
    wb = Workbook()
    wb.remove(wb.active)
    for title, rows in _result_rows(res, teams).items():
        ws = wb.create_sheet(title)
        for r in rows:
            ws.append(r)
    return wb


def _result_rows(res: dict, teams: list[str]) -> dict[str, list[list]]:
    scores = [RESULTS_HEADERS["Scores"]]
    for team in [*teams, ALL]:
        for qid, _, _ in QUESTIONS:
            n, mean = res["scores"][(team, qid)]
            scores.append([team, qid, n, round(mean, 2)])
    nps = [RESULTS_HEADERS["NPS"]]
    for team in [*teams, ALL]:
        n, p, pa, d, v = res["nps"][team]
        nps.append([team, n, p, pa, d, round(v)])
    themes = [RESULTS_HEADERS["Themes"]] + [[t, c] for t, c in res["themes"]]
    return {"Scores": scores, "NPS": nps, "Themes": themes}


def _numbers(text: str) -> list[float]:
    t = text.replace("\u2212", "-")
    return [float(x) for x in re.findall(r"(?<![\w.])[-+]?\d+(?:\.\d+)?", t)]


@register
class PulseSurveyResults(TaskFamily):
    name = "pulse_survey_results"
    category = "survey aggregation"
    apps = ("mail", "sheets", "files")
    description = ("Aggregate a quarter's team pulse-survey workbooks (varied headers, duplicate and invalid "
                   "answers, a re-exported file) into Scores/NPS/Themes sheets and mail the summary.")

    levels = 3
    """1: one team's export (10-14 people, some twice, labelled answers), no re-export; 2: three
    teams, one of them re-exported; 3 (default): five or six teams. Every level keeps the duplicate
    submissions, the off-scale answers and the keyword look-alikes in the comments."""
    toolsets = {1: (
        "files__read_file", "mail__read_message", "mail__send_message", "sheets__create_workbook",
        "sheets__read_range", "sheets__write_rows",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        traps = {k for k, p in TRAP_ODDS if rng.random() < p}
        if level < self.levels:  # levels 1-2 keep every trap they have room for
            traps = {k for k, _ in TRAP_ODDS}
        invalid_rate = 0.06 if "off_scale" in traps else 0.0
        lookalikes = "lookalikes" in traps
        year = rng.choice([2025, 2026])
        quarter = rng.randint(1, 4)
        qname = f"{year}-Q{quarter}"
        prev = f"{year - 1}-Q4" if quarter == 1 else f"{year}-Q{quarter - 1}"
        folder, prev_folder = f"surveys/{qname}", f"surveys/{prev}"
        results = f"{folder}/results.xlsx"
        q_end = date(year, 3 * quarter, 1) + timedelta(days=rng.randint(2, 12))
        teams = sorted(rng.sample(TEAMS, rng.randint(5, 6)))
        redo_team = rng.choice(teams)
        domain = f"{slug(fake.last_name())}{rng.choice(['-group', 'labs', '-corp', 'works'])}.com"
        people = People(fake)
        me, requester, hrbp, redo_lead, other = (people.make(domain) for _ in range(5))

        styles = {}
        header_kinds = ["full", "coded", "short"]
        rng.shuffle(header_kinds)
        labelled_team = rng.choice(teams)
        for i, team in enumerate(teams):
            order = [q[0] for q in QUESTIONS]
            rng.shuffle(order)
            styles[team] = {
                "header": header_kinds[i % 3], "order": order,
                "ts": rng.choice(["cell", "iso", "text"]),
                "sheet": rng.choice(["Form Responses 1", "Responses", "Sheet1"]),
                "intro": rng.random() < 0.3,
                "sort": rng.choice(["time", "email"]),
            }

        if level < self.levels:  # the same draws so far, then fewer teams (the labelled one first)
            rest = [t for t in teams if t not in (labelled_team, redo_team)]
            if level == 1:
                teams = [labelled_team if labelled_team != redo_team else rest[0]]
            else:
                teams = sorted(list(dict.fromkeys([redo_team, labelled_team, *rest]))[:3])
        redo = redo_team in teams and "reexport" in traps
        if "labelled" not in traps:  # every form exports plain numbers
            labelled_team = None

        theme_flaw = "substring" if lookalikes else "case"  # the look-alikes, or capitalised keywords, must matter
        for _attempt in range(60 if level > 1 else 400):
            subs: dict[str, list[dict]] = {}
            used_emails: set[str] = set()
            for team in teams:
                labelled = team == labelled_team
                rows = []
                start = datetime.combine(q_end, datetime.min.time()) + timedelta(hours=8)
                people_n = rng.randint(18, 30)
                if level == 1:  # one team: a short export, read in one go
                    people_n = rng.randint(10, 14)
                for _ in range(people_n):
                    while True:
                        first, last = fake.first_name(), fake.last_name()
                        email = f"{slug(first)}.{slug(last)}@{domain}"
                        if email not in used_emails:
                            used_emails.add(email)
                            break
                    ts = start + timedelta(minutes=rng.randint(0, 60 * 24 * 9))
                    s = _submission(rng, email, ts, labelled, invalid_rate, lookalikes)
                    s["shown_email"] = email
                    rows.append(s)
                for s in rng.sample(rows, rng.randint(3, 5)):  # second (and third) submissions
                    for k in range(rng.choice([1, 1, 2])):
                        earlier = s["ts"] - timedelta(minutes=rng.randint(45, 60 * 60))
                        dup = _submission(rng, s["email"], earlier, labelled, invalid_rate, lookalikes)
                        shown = s["email"]
                        if rng.random() < 0.5:
                            shown = shown.title() if rng.random() < 0.5 else shown + " "
                        dup["shown_email"] = shown
                        rows.append(dup)
                if styles[team]["sort"] == "time":
                    rows.sort(key=lambda s: s["ts"])
                else:
                    rows.sort(key=lambda s: (s["email"], rng.random()))
                subs[team] = rows
            truth = aggregate(subs)
            counts = [c for _, c in truth["themes"]]
            ok = len(set(counts[:4])) == 4 and counts[3] > 0
            ok = ok and aggregate(subs, theme_flaw)["themes"] != truth["themes"]
            first = aggregate(subs, "first")["scores"]
            ok = ok and any(abs(first[k][1] - truth["scores"][k][1]) > 0.02 for k in truth["scores"] if k[0] != ALL)
            nodup = aggregate(subs, "no_dedup")
            ok = ok and nodup["scores"] != truth["scores"]
            ok = ok and aggregate(subs, "promoters_8")["nps"][ALL][1] != truth["nps"][ALL][1]
            mom = aggregate(subs, "mean_of_means")["scores"]
            ok = ok and (len(teams) == 1 or any(  # one team: its pooled rows are its own
                abs(mom[(ALL, q)][1] - truth["scores"][(ALL, q)][1]) > 0.006 for q, _, _ in QUESTIONS))
            if ok:
                break
        else:  # pragma: no cover - the generator always finds one in a few tries
            raise RuntimeError("could not generate a survey with distinct top themes")

        # the re-exported team: the first export was cut short and has older answers
        stale = [dict(s, answers=dict(s["answers"])) for s in subs[redo_team][: len(subs[redo_team]) // 2]] \
            if redo else []
        for s in stale:
            s["nps"] = rng.randint(0, 10)
            for qid in s["answers"]:
                s["answers"][qid] = rng.randint(1, 5) if redo_team != labelled_team else (
                    lambda v: f"{v} - {LABELS[v]}")(rng.randint(1, 5))
        team_file = {t: f"{folder}/pulse_{slug(t)}.xlsx" for t in teams}
        stale_file = team_file.get(redo_team) if redo else None
        if redo:
            team_file[redo_team] = f"{folder}/pulse_{slug(redo_team)}_v2.xlsx"
        prev_teams = sorted(rng.sample(TEAMS, 4))
        prev_res = {
            "scores": {(t, q): (rng.randint(12, 30), rng.uniform(2.4, 4.6)) for t in [*prev_teams, ALL]
                       for q, _, _ in QUESTIONS},
            "nps": {t: (lambda n, p, d: (n, p, n - p - d, d, 100 * (p - d) / n))(22, rng.randint(4, 12), rng.randint(2, 9))
                    for t in [*prev_teams, ALL]},
            "themes": sorted(((t, rng.randint(0, 14)) for t in THEMES), key=lambda tc: -tc[1]),
        }

        def make_files() -> dict[str, Workbook]:
            out = {team_file[t]: _team_book(styles[t], subs[t], "Instructions" if styles[t]["intro"] else None)
                   for t in teams}
            if redo:
                out[stale_file] = _team_book(styles[redo_team], stale, None)
            out[f"{prev_folder}/results.xlsx"] = _results_book(prev_res, prev_teams)
            return out

        files = Files(make_files)
        questions_md = (
            f"# Pulse survey {qname}: questions\n\n"
            "Answers to Q1-Q5 are on a 1-5 scale (1 = strongly disagree, 5 = strongly agree). Each team's form "
            "exported its columns its own way: by the full question text, by code, or by the short label "
            "below. One form exports answers with their label, like \"4 - Agree\"; the number is the answer.\n\n"
            "| Code | Short label | Question |\n|---|---|---|\n"
            + "".join(f"| {q} | {short} | {text} |\n" for q, text, short in QUESTIONS)
            + f"| NPS | Recommend / eNPS | {NPS_TEXT} |\n\n"
            "NPS: promoters answer 9-10, passives 7-8, detractors 0-6; NPS = % promoters - % detractors, "
            "among valid answers (whole numbers 0-10), as a whole number from -100 to 100.\n"
        )
        themes_txt = (
            "# Comment themes for the pulse survey.\n"
            "# A comment counts for a theme when it contains one of the theme's keywords as a whole word\n"
            "# (case does not matter). One comment can count for several themes.\n"
            + "".join(f"{t}: {', '.join(kws)}\n" for t, kws in THEMES.items())
        )
        text_files = {
            f"{folder}/questions.md": questions_md,
            "surveys/themes.txt": themes_txt,
            f"{prev_folder}/notes.md": f"# {prev} pulse\n\nResults sent on {fake.date_between(date(year - 1, 1, 1), date(year - 1, 12, 28))}. "
                                       "Layout agreed with the leadership team: Scores, NPS, Themes.\n",
        }
        team_list = ", ".join(teams)
        request_body = (
            f"Hi {me.first},\n\nThe {qname} pulse survey has closed. Could you pull the results together? "
            f"Each team's responses are in {folder}/ ({team_list}). Please use the same layout as last quarter's "
            f"{prev_folder}/results.xlsx (sheets Scores, NPS and Themes, with an \"{ALL}\" row under the teams) "
            f"and save it as {results}.\n\n"
            "The usual rules:\n"
            "- if someone submitted more than once, only their latest submission counts;\n"
            "- answers that are blank, off the scale or not a number don't count for that question, but the "
            "person's other answers still do;\n"
            "- averages to two decimals; NPS as defined in the questions file;\n"
            f"- themes by the keyword list in surveys/themes.txt, counted over everyone's comments, most "
            f"mentioned first.\n\n"
            f"Then send it to me with the workbook attached, cc {hrbp.name} ({hrbp.email}), and put the overall "
            f"NPS and the top three themes in the mail itself.\n\nThanks!\n{requester.name}"
        )
        redo_body = "" if not redo else (
            f"Hi {me.first},\n\nHeads-up for the pulse results: our first export ({stale_file.rsplit('/', 1)[1]}) "
            f"was cut off halfway and has some test answers in it. Please use "
            f"{team_file[redo_team].rsplit('/', 1)[1]} for {redo_team} instead, it has everything.\n\n{redo_lead.name}"
        )
        stamp = lambda d, hm: f"{d.isoformat()}T{hm}:00"  # noqa: E731
        inbox = [
            {"folder": "Inbox", "sender": requester.email, "sender_name": requester.name, "to": [me.email],
             "subject": f"Pulse survey {prev} results", "date": stamp(q_end - timedelta(days=95), "09:12"),
             "is_read": True,
             "body": f"Hi {me.first},\n\nCould you do the {prev} pulse results, same as always? Files are in "
                     f"{prev_folder}/. Send to me only this time.\n\n{requester.name}"},
            {"folder": "Inbox", "sender": other.email, "sender_name": other.name, "to": [me.email],
             "subject": "Team lunch on Friday", "date": stamp(q_end + timedelta(days=7), "11:40"),
             "body": "We're booking the Italian place for Friday at 12:30. Reply if you're in!"},
            {"folder": "Inbox", "sender": redo_lead.email, "sender_name": redo_lead.name, "to": [me.email],
             "subject": f"{redo_team} pulse export", "date": stamp(q_end + timedelta(days=9), "16:05"),
             "body": redo_body},
            {"folder": "Inbox", "sender": f"noreply@{slug(fake.company())}.com", "sender_name": "Survey Tool",
             "to": [me.email], "subject": f"Your survey '{qname} pulse' has closed",
             "date": stamp(q_end + timedelta(days=10), "00:00"),
             "body": f"Your survey '{qname} pulse' closed with {sum(len(v) for v in subs.values()) + 7} submissions. "
                     "Download the responses from the dashboard."},
            {"folder": "Inbox", "sender": requester.email, "sender_name": requester.name, "to": [me.email],
             "subject": f"Pulse survey {qname} results", "date": stamp(q_end + timedelta(days=10), "08:30"),
             "body": request_body},
        ]
        if not redo:  # (level 1) no team re-exported: no note about it
            inbox = [m for m in inbox if m["body"] != redo_body]
        request_id, redo_id = len(inbox), 3
        now = stamp(q_end + timedelta(days=10), "09:00")

        def build(root: Path) -> None:
            files.build(root)
            write_files(root / "workspace", text_files)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox, now=now)

        w = phrasing_rng(self.name, seed)
        r = requester.first
        asked = say(w, f"{r} mailed me this morning asking for the {qname} pulse survey results.",
                    f"This morning {r} sent me a mail asking for the {qname} pulse survey results.",
                    f"I had a mail from {r} this morning: they want the {qname} pulse survey results.",
                    f"{r} is after the {qname} pulse survey results (their mail came in this morning).")
        ask = say(w, "Could you take care of it?", "Can you handle that for me?", "Would you take that on?")
        where = say(w, "The details are in that mail, the response files are under surveys/, and check my inbox "
                       "for anything else about the exports.",
                    "That mail has the details and the response files are under surveys/; also check my inbox for "
                    "anything else about the exports.",
                    "You'll find the details in the mail and the response files under surveys/. Please check my inbox "
                    "too, for anything else about the exports.",
                    "The response files live under surveys/ and the details are in that mail. Do check my inbox for "
                    "anything else about the exports as well.")
        keep = say(w, "Please don't change the response files.", "Leave the response files as they are, please.",
                   "The response files themselves must stay unchanged.")
        instruction = " ".join([asked, ask, where, keep])

        top3 = [t for t, _ in truth["themes"][:3]]
        overall_nps = truth["nps"][ALL][4]

        # -- oracle ------------------------------------------------------------------------------
        def solve():
            if level == 1:
                yield from short_solve()
                return (f"Sent the {qname} results to {requester.name} (cc {hrbp.name}): overall NPS "
                        f"{round(truth['nps'][ALL][4])}.")
            yield ToolCall("mail__search_messages", {"query": "pulse"}, "Find the request and anything about the exports.")
            yield ToolCall("mail__read_message", {"message_id": request_id}, "Read this quarter's request in full.")
            if redo:
                yield ToolCall("mail__read_message", {"message_id": redo_id},
                               f"Read the note about the {redo_team} export.")
            yield ToolCall("files__list_dir", {"path": "surveys", "recursive": True}, "See which files there are.")
            yield ToolCall("files__read_file", {"path": f"{folder}/questions.md"}, "Read the question codes and scales.")
            yield ToolCall("files__read_file", {"path": "surveys/themes.txt"}, "Read the theme keyword list.")
            prev_book = f"{prev_folder}/results.xlsx"
            yield ToolCall("sheets__list_sheets", {"path": prev_book}, "Look at last quarter's layout.")
            for sheet, width in (("Scores", "D"), ("NPS", "F"), ("Themes", "B")):
                yield ToolCall("sheets__read_range", {"path": prev_book, "sheet": sheet, "range": f"A1:{width}4"},
                               f"Check the columns of last quarter's {sheet} sheet.")
            if redo:
                yield ToolCall("sheets__list_sheets", {"path": stale_file},
                               f"Confirm the first {redo_team} export is the short one the lead mentioned.")
            for t in teams:
                info = parse_json((yield ToolCall("sheets__list_sheets", {"path": team_file[t]},
                                                  f"Open {t}'s responses.")))
                sheet = next(s for s in info if s["rows"] > 3)
                last_col = chr(ord("A") + sheet["columns"] - 1)
                for start in range(1, sheet["rows"] + 1, PAGE):
                    end = min(start + PAGE - 1, sheet["rows"])
                    yield ToolCall("sheets__read_range", {"path": team_file[t], "sheet": sheet["name"],
                                                          "range": f"A{start}:{last_col}{end}"},
                                   f"Read {t} responses, rows {start}-{end}.")
            yield from write_and_send()
            yield ToolCall("mail__list_messages", {"folder": "Sent"}, "Check that it went out.")
            return (f"Sent the {qname} results to {requester.name} (cc {hrbp.name}): overall NPS "
                    f"{round(truth['nps'][ALL][4])}, top themes {', '.join(top3)}.")

        def short_solve():
            """One team's export: the request, the keyword list and the one file, read whole."""
            t = teams[0]
            yield ToolCall("mail__read_message", {"message_id": request_id}, "Read this quarter's request.")
            yield ToolCall("files__read_file", {"path": "surveys/themes.txt"}, "Read the theme keyword list.")
            yield ToolCall("sheets__read_range", {"path": team_file[t], "sheet": styles[t]["sheet"]},
                           f"Read {t}'s responses.")
            yield from write_and_send()

        def mail_body(res: dict, themes: bool = True) -> str:
            n_all = res["nps"][ALL]
            body = (f"Hi {requester.first},\n\nAttached are the {qname} pulse results ({results}). "
                    f"{n_all[0]} people answered the recommend question; the overall NPS is {round(n_all[4])}.")
            if themes:
                body += " The top three themes in the comments were " + ", ".join(
                    f"{t} ({c})" for t, c in res["themes"][:3]) + "."
            return body + f"\n\nBest,\n{me.first}"

        subject = f"Pulse survey {qname} results"

        def write_and_send():
            rows = _result_rows(truth, teams)
            yield ToolCall("sheets__create_workbook", {"path": results, "sheets": ["Scores", "NPS", "Themes"]},
                           "Create the results workbook with last quarter's sheets.")
            for sheet in ("Scores", "NPS", "Themes"):
                yield ToolCall("sheets__write_rows", {"path": results, "sheet": sheet, "start_cell": "A1",
                                                      "rows": rows[sheet]}, f"Write the {sheet} sheet.")
            if level > 1:
                for sheet in ("Scores", "NPS", "Themes"):
                    yield ToolCall("sheets__read_range", {"path": results, "sheet": sheet}, f"Check the {sheet} sheet.")
            args = {"to": [requester.email], "cc": [hrbp.email], "subject": subject,
                    "body": mail_body(truth), "attachments": [results]}
            yield ToolCall("mail__send_message", args, "Send the results as asked.")

        # -- perturbations: the oracle with one mistake each -------------------------------------
        send = perturb.on("mail__send_message", subject=subject)

        def on_results(tool: str) -> perturb.Match:
            return lambda call: call.name == tool and call.arguments.get("path") == results

        def results_of(res: dict):
            """The oracle writing and mailing ``res``, numbers one rule of the request got wrong."""
            rows = _result_rows(res, teams)
            written = perturb.change(solve, on_results("sheets__write_rows"),
                                     lambda args: {**args, "rows": rows[args["sheet"]]}, count=None)
            return perturb.change(written, send, body=mail_body(res))

        def scores_without_last_team(args: dict) -> dict:
            return {**args, "rows": [r for r in args["rows"] if r[0] != teams[-1]]}

        flawed = {
            "scores_sheet": lambda: perturb.change(
                solve, perturb.on("sheets__write_rows", path=results, sheet="Scores"), scores_without_last_team),
            "response_counts": lambda: results_of(aggregate(subs, "no_dedup")),
            "averages": lambda: results_of(aggregate(subs, "first")),
            "all_teams_rows": lambda: results_of(aggregate(subs, "mean_of_means")),
            "nps": lambda: results_of(aggregate(subs, "promoters_8")),
            "themes": lambda: results_of(aggregate(subs, theme_flaw)),
            "latest_export_used": lambda: results_of(aggregate({**subs, redo_team: stale})),
            "summary_mail": lambda: perturb.change(solve, send, attachments=[]),
            "mail_content": lambda: perturb.change(solve, send, body=mail_body(truth, themes=False)),
            "checked_before_sending": lambda: perturb.drop(solve, on_results("sheets__read_range"), count=None),
            "at_most_one_mail": lambda: perturb.insert(solve, ToolCall(
                "mail__send_message", {"to": [me.email], "subject": "draft", "body": mail_body(truth)},
                "Send myself a draft first."), before=send),
            "sources_untouched": lambda: perturb.insert(solve, ToolCall(
                "sheets__write_cells", {"path": team_file[teams[0]], "sheet": styles[teams[0]]["sheet"],
                                        "cells": {"Z1": "processed"}}, "Mark as processed."), before=send),
            "no_stray_files": lambda: perturb.insert(solve, ToolCall(
                "sheets__create_workbook", {"path": f"{folder}/scratch.xlsx"}, "Scratch space."),
                before=perturb.on("sheets__create_workbook", path=results)),
        }

        # -- grading -----------------------------------------------------------------------------
        def sheet_rows(path: Path, sheet: str, ncols: int):
            t = read_table(path, sheet)
            if t is None:
                return None, None
            head, body = t
            body = [list(r) + [None] * (ncols - len(r)) for r in body if not all(blank(v) for v in r)]
            return [norm_text(h) for h in head[:ncols]], body

        def team_key(v) -> str | None:
            n = norm_text(v)
            for t in [*teams, ALL]:
                if n in (norm_text(t), slug(t), "all", "all teams", "overall", "total"):
                    return ALL if n in ("all", "all teams", "overall", "total") else t
            return None

        def question_key(v) -> str | None:
            n = norm(str(v or "")).rstrip(".")
            for q, text, short in QUESTIONS:
                if n in (q.lower(), short.lower(), norm(text).rstrip("."), f"{q.lower()} - {short.lower()}"):
                    return q
            return None

        def scores_table(path: Path):
            head, body = sheet_rows(path, "Scores", 4)
            if head is None:
                return None, "no Scores sheet"
            out = {}
            for r in body:
                k = (team_key(r[0]), question_key(r[1]))
                if None in k or k in out:
                    return None, f"unexpected or repeated row {r[:2]}"
                out[k] = r
            return out, ""

        def scores_sheet(w, t):
            out, why = scores_table(w.file(results))
            if out is None:
                return False, why
            head = sheet_rows(w.file(results), "Scores", 4)[0]
            if head[:2] != ["team", "question"] or not re.search(r"respon|count|^n$", head[2] or "") \
                    or not re.search(r"average|mean|avg|score", head[3] or ""):
                return False, f"header {head}"
            want = set(truth["scores"])
            return set(out) == want, f"missing {sorted(want - set(out))[:4]}"

        def score_check(which: str, all_rows: bool):
            def check(w, t):
                out, why = scores_table(w.file(results))
                if out is None:
                    return False, why
                bad = []
                for k, (n, mean) in truth["scores"].items():
                    if (k[0] == ALL) != all_rows:
                        continue
                    r = out.get(k)
                    got_n, got_m = (to_number(r[2]), to_number(r[3])) if r else (None, None)
                    ok_n = got_n == n
                    ok_m = got_m is not None and abs(got_m - mean) <= 0.0051 + 1e-9
                    if (which == "counts" and not ok_n) or (which == "means" and not ok_m) or \
                            (which == "both" and not (ok_n and ok_m)):
                        bad.append(f"{k}: {r[2:4] if r else 'missing'} (expected {n}, {mean:.2f})")
                return not bad, "; ".join(bad[:4])
            return check

        def nps_ok(path: Path, teams_to_check) -> tuple[bool, str]:
            head, body = sheet_rows(path, "NPS", 6)
            if head is None:
                return False, "no NPS sheet"
            rows = {team_key(r[0]): r for r in body}
            bad = []
            for team in teams_to_check:
                n, p, pa, d, v = truth["nps"][team]
                r = rows.get(team)
                nums = [to_number(x) for x in r[1:6]] if r else []
                if not r or nums[:4] != [n, p, pa, d] or nums[4] is None or abs(nums[4] - v) > 0.5 + 1e-9:
                    bad.append(f"{team}: {r[1:6] if r else 'missing'} (expected {[n, p, pa, d, round(v)]})")
            return not bad, "; ".join(bad[:4])

        def latest_export_used(w, t):
            out, why = scores_table(w.file(results))
            if out is None:
                return False, why
            bad = [q for q, _, _ in QUESTIONS if (r := out.get((redo_team, q))) is None
                   or to_number(r[2]) != truth["scores"][(redo_team, q)][0]
                   or (m := to_number(r[3])) is None or abs(m - truth["scores"][(redo_team, q)][1]) > 0.0051 + 1e-9]
            if bad:
                return False, f"{redo_team} {bad}: not from {team_file[redo_team]}"
            return nps_ok(w.file(results), [redo_team])

        def nps_check(w, t):
            return nps_ok(w.file(results), [*teams, ALL])

        def themes_check(w, t):
            head, body = sheet_rows(w.file(results), "Themes", 2)
            if head is None:
                return False, "no Themes sheet"
            got = [(norm_text(r[0]), to_number(r[1])) for r in body]
            want = {norm_text(th): c for th, c in truth["themes"]}
            if sorted(n for n, _ in got) != sorted(want):
                return False, f"themes listed: {[n for n, _ in got]}"
            wrong = [f"{n}: {c} (expected {want[n]})" for n, c in got if c != want[n]]
            if wrong:
                return False, "; ".join(wrong)
            counts = [c for _, c in got]
            return counts == sorted(counts, reverse=True), "not sorted by mentions, highest first"

        def the_mail(w):
            sent = [m for m in mail.sent_messages(w) if requester.email in m["to"]]
            return sent[-1] if sent else None

        def summary_mail(w, t):
            m = the_mail(w)
            if m is None:
                return False, "nothing sent to the requester"
            if hrbp.email not in m["cc"] + m["to"]:
                return False, f"{hrbp.email} not copied"
            books = [a["name"] for a in m["attachments"] if a["name"].lower().endswith(".xlsx")]
            if not books:
                return False, "no workbook attached"
            ok, why = nps_ok(mail.attachment_path(w, m["id"], books[0]), [ALL])
            return ok, f"attached workbook: {why}" if not ok else ""

        def mail_content(w, t):
            m = the_mail(w)
            if m is None:
                return False, "nothing sent to the requester"
            body = norm(m["body"])
            nums = _numbers(body)
            nps_named = any(abs(x - overall_nps) <= 0.5 + 1e-9 for x in nums) or (
                overall_nps < 0 and re.search(r"minus|negative", body)
                and any(abs(x + overall_nps) <= 0.5 + 1e-9 for x in nums))
            missing = [th for th in top3 if norm(th) not in body]
            if not nps_named:
                return False, f"overall NPS {overall_nps:.1f} not stated"
            return not missing, f"top themes not named: {missing}" if missing else ""

        def checked_before_sending(w, t):
            calls = t.tool_calls
            send = next((i for i, c in enumerate(calls) if not c.is_error and c.app == "mail"
                         and c.tool in ("send_message", "reply", "forward")), None)
            writes = [i for i, c in enumerate(calls) if not c.is_error and c.app == "sheets"
                      and c.tool in ("write_rows", "write_cells", "clear_range") and isinstance(c.arguments, dict)
                      and norm_path(c.arguments.get("path")) == results]
            if send is None or not writes or max(writes) > send:
                return False, "no mail sent after the results were written"
            read = {str(c.arguments.get("sheet")) for c in calls[max(writes) + 1:send]
                    if not c.is_error and c.name == "sheets__read_range" and isinstance(c.arguments, dict)
                    and norm_path(c.arguments.get("path")) == results}
            return bool(read), "" if read else "the results workbook was not read back before sending"

        criteria = [
            Criterion("scores_sheet", f"{results} has a Scores sheet (Team, Question, Responses, Average) with one "
                      f"row per team and question, plus {ALL}", "final_state", scores_sheet,
                      requires=("averages",)),
            Criterion("response_counts", "each team's per-question response counts (latest submission only, "
                      "invalid answers left out)", "final_state", score_check("counts", False), 2.0),
            Criterion("averages", "each team's per-question averages (to two decimals)", "final_state",
                      score_check("means", False), 2.0),
            Criterion("all_teams_rows", f"the {ALL} rows pool every valid answer (not an average of averages)",
                      "final_state", score_check("both", True)),
            Criterion("nps", "the NPS sheet: responses, promoters, passives, detractors and NPS per team and overall",
                      "final_state", nps_check, 2.0),
            Criterion("themes", "the Themes sheet counts comments per theme by whole-word keywords, most "
                      "mentioned first", "final_state", themes_check),
            Criterion("summary_mail", "a mail to the requester, cc the HR partner, carries the results workbook",
                      "final_state", summary_mail, 2.0),
            Criterion("mail_content", "the mail states the overall NPS and names the top three themes",
                      "final_state", mail_content, requires=("nps", "themes")),  # not a list of every theme
            Criterion("checked_before_sending", "the results workbook was read back after its last edit and "
                      "before the mail went out", "process", checked_before_sending, requires=("averages",)),
            Criterion("at_most_one_mail", "no more than one mail was sent", "process", at_most_one_mail, guard=True),
            files_kit.untouched(files, text_files, description="no response file or reference file was written to"),
            files_kit.only_created(files, text_files, allowed=[results]),
        ]
        if redo:
            criteria.insert(3, Criterion(
                "latest_export_used", f"the re-exported team's scores and NPS come from the export its lead "
                "named, not the first one", "final_state", latest_export_used))
        if level == 1:  # one team pools nothing, and its short oracle writes and sends without a read-back
            criteria = [c for c in criteria if c.id not in ("all_teams_rows", "checked_before_sending")]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"quarter": qname, "teams": teams, "results": results, "redo_team": redo_team if redo else None,
                  "overall_nps": overall_nps, "top_themes": top3,
                  "team_files": team_file, "stale_file": stale_file, "labelled_team": labelled_team,
                  "lookalike_comments": sorted({s["comment"] for v in subs.values() for s in v
                                                if s["comment"] and any(x in s["comment"] for x in TRAPS)}),
                  "off_scale": sum(score_of(s["answers"][q]) is None for v in subs.values() for s in v
                                   for q, _, _ in QUESTIONS) + sum(nps_of(s["nps"]) is None for v in subs.values()
                                                                   for s in v)},
        )
