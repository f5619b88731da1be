"""Document drafting: a project status report from a lagging tracker, sync notes and a template.

The World is a small PMO folder: a milestone tracker workbook shared with a sister project
(a near-duplicate name), weekly sync notes for both projects, a report template with bracketed
guidance, last week's report and an archived copy of the tracker. The tracker lags behind:
a change recorded in a sync *after* a row's "Last updated" date wins, an older one does not.
The report needs one bullet per milestone, the risks still open after the last sync as a
table, a summary with counts and the delayed milestones, and the latest sync's actions.

Traps beside the sister project and the lagging tracker, each drawn per seed (``TRAP_ODDS``, at
least one; they need two syncs or more, so level 1 has none of them): a sync change the tracker
has since overtaken (``stale_notes``), a risk closed at a later sync (``closed_risks``), and a
status change that a later sync reverses after the tracker recorded it (``reversed``).
``Task.data`` names each (empty when absent).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import replace
from functools import partial

from openpyxl import Workbook

from longhorizon.apps.docs.state import build_document, document_bytes, norm, read_blocks, sections
from longhorizon.apps.sheets.state import workbook_bytes
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import parse_json, rng_and_faker
from longhorizon.tasks.documents import Sources, find_dates, mentions, person, words_in
from longhorizon.tasks.kit import files as files_kit
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register

PROJECTS = ["Atlas", "Beacon", "Cobalt", "Drake", "Ember", "Falcon", "Granite", "Harbor", "Juniper", "Keystone"]
SISTER_SUFFIXES = ["Mobile", "Analytics", "EU", "Payments"]
MILESTONES = [
    "Requirements sign-off", "Vendor selection", "Data migration", "User acceptance testing", "Go-live",
    "Training rollout", "Security review", "Pilot launch", "API integration", "Reporting dashboard",
    "Hypercare exit", "Infrastructure build", "Design freeze", "Load testing", "Cutover rehearsal",
    "Legacy decommission", "Change impact assessment", "Supplier onboarding",
]
STATUSES = ["Complete", "On track", "At risk", "Delayed", "Not started"]
STATUS_RE = re.compile(r"(?<!\w)(complete|completed|on track|at risk|delayed|not started)(?!\w)")


def statuses_in(text: str) -> set[str]:
    """Status words in a bullet, normalised: "Completed" -> "complete", "At-risk" -> "at risk"."""
    found = STATUS_RE.findall(norm(text).replace("-", " "))
    return {s.replace("completed", "complete") for s in found}


def due_date(text: str, year: int) -> dt.date | None:
    """The due date a bullet states: the first date after the word "due", else its first date."""
    low = text.lower()
    at = low.find("due")
    dates = find_dates(text[at:], year) if at >= 0 else []
    dates = dates or find_dates(text, year)
    return dates[0] if dates else None
RISKS = [
    ("Vendor data extracts arrive late", "Weekly escalation call with the vendor"),
    ("Key developer on extended leave", "Cross-train a second developer"),
    ("Test environment is unstable", "Book dedicated environment slots"),
    ("Licence budget approval still pending", "Escalate to the steering committee"),
    ("Scope creep from new reporting requests", "Route every request through change control"),
    ("Single sign-on integration untested", "Run an early single sign-on spike"),
    ("Trainers unavailable in the rollout month", "Record the training sessions in advance"),
    ("Poor data quality in legacy records", "Run the cleansing scripts before migration"),
]
ACTIONS = [
    "circulate the revised cutover plan", "confirm the UAT testers with the business",
    "book the steering committee slot", "chase the vendor for the full data extract",
    "update the RAID log", "schedule the penetration test", "draft the training communications",
    "confirm the hardware delivery dates", "share the test summary with the sponsors",
    "agree the hypercare rota", "walk finance through the licence costs", "review the archiving rules",
]
CHATTER = [
    "Reminder: the office is closed on the public holiday next month.",
    "The sponsor thanked the team for last week's demo.",
    "New joiner on the data team starts next Monday.",
    "Room booking for the steering committee moved to the third floor.",
]
HEADINGS = {
    "summary": ["Summary", "Executive summary"],
    "milestones": ["Milestones", "Milestone status"],
    "risks": ["Risks", "Open risks", "Risks and issues"],
    "next": ["Next steps", "Actions"],
}
PLACEHOLDER_RE = re.compile(r"\[[^\]]{2,}\]")
TRAP_ODDS = (("stale", 0.6), ("closed_risk", 0.6), ("reversal", 0.5))
"""Each trap in the instance with this chance (one drawn when none is)."""
TRACKER_HEADER = ["Project", "Milestone", "Owner", "Due date", "Status", "Last updated"]
DASH = "\u2014"


def _slug(name: str) -> str:
    return name.lower().replace(" ", "_")


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", norm(text))


def similar(candidate: str, expected: str, share: float = 0.75) -> bool:
    """Whether ``candidate`` carries most words of ``expected`` (tolerates light rephrasing)."""
    want = _words(expected)
    have = set(_words(candidate))
    return bool(want) and sum(w in have for w in want) / len(want) >= share


def bullet_items(blocks: list[dict]) -> list[str]:
    """Bullet paragraphs of a section: list-styled ones, or Normal ones starting with a bullet mark."""
    out = []
    for b in blocks:
        if b["type"] != "paragraph" or not b["text"].strip():
            continue
        text = b["text"].strip()
        if "list" in norm(b["style"]):
            out.append(text)
        elif text[:1] in "-\u2022*":
            out.append(text[1:].strip())
    return out


def _tracker(rows: list[list]) -> Workbook:
    wb = Workbook()
    ws = wb.active
    ws.title = "Tracker"
    ws.append(TRACKER_HEADER)
    for r in rows:
        ws.append(r)
        for col in (4, 6):
            ws.cell(row=ws.max_row, column=col).number_format = "yyyy-mm-dd"
    ws.column_dimensions["B"].width = 28
    ws.column_dimensions["C"].width = 22
    return wb


def _dt(d: dt.date) -> dt.datetime:
    return dt.datetime(d.year, d.month, d.day)


@register
class ProjectStatusReport(TaskFamily):
    name = "project_status_report"
    category = "document drafting"
    apps = ("docs", "sheets", "files")
    description = (
        "Draft a project status report from a template: milestones from a lagging tracker corrected by "
        "newer sync notes, open risks as a table, a summary with counts, and the latest actions."
    )

    levels = 3
    """1: one milestone (its newest status and date in the one sync after the tracker row), a
    template with a summary and the milestones; 2: three milestones, two syncs, risks and next
    steps too; 3 (default): eight to eleven milestones over three to five syncs. Every level keeps
    the sister project's rows and a tracker row the sync overrides (level 1: two of them, and sync
    notes without the risk log it does not ask about)."""
    toolsets = {1: (
        "docs__read_document", "docs__set_paragraph", "files__copy", "files__read_file", "sheets__read_range",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        small = level < self.levels  # the same draws as the default, then fewer milestones and syncs
        rng, fake = rng_and_faker(seed, self.name)
        project = rng.choice(PROJECTS)
        sister = f"{project} {rng.choice(SISTER_SUFFIXES)}"
        pm, me = person(fake), fake.first_name()
        report_day = dt.date(2026, 1, 9) + dt.timedelta(weeks=rng.randint(0, 44))  # a Friday
        latest = report_day - dt.timedelta(days=rng.randint(1, 3))
        n_meet = rng.randint(3, 5)
        if small:
            n_meet = level
        meetings = [latest - dt.timedelta(weeks=i) for i in range(n_meet)][::-1]
        traps = {k for k, odds in TRAP_ODDS if rng.random() < odds}
        traps = traps or {rng.choice([k for k, _ in TRAP_ODDS])}
        reversed_m = ""

        # -- milestones: truth, what the tracker shows, and what the notes say -------------------
        n = rng.randint(8, 11)
        if small:
            n = {1: 1, 2: 3}[level]
        names = rng.sample(MILESTONES, n + 4)
        ours, theirs = names[:n], names[n:]
        statuses = [rng.choice(STATUSES) for _ in ours]
        statuses[0] = "Delayed"
        if n > 1:
            statuses[1] = "Complete"
        else:  # one milestone: delayed, or complete, or on track
            statuses[0] = rng.choice(["Delayed", "Complete", "On track"])
        modes = (["note", "note"] + [rng.choice(["tracker", "tracker", "note"]) for _ in ours[2:]])[:n]
        order = list(range(n))
        rng.shuffle(order)
        statuses = [statuses[i] for i in order]
        modes = [modes[i] for i in order]
        status_note = order.index(0)  # the first two "note" milestones (one milestone: both changes)
        date_note = order.index(1) if n > 1 else status_note
        truth: dict[str, dict] = {}
        tracker_rows: list[tuple[dt.date, list]] = []
        notes_lines: dict[dt.date, list[str]] = {d: [] for d in meetings}
        for k, m in enumerate(ours):
            status = statuses[k]
            if status == "Complete":
                due = report_day - dt.timedelta(days=rng.randint(5, 70))
            else:
                due = report_day + dt.timedelta(days=rng.randint(3, 100))
            owner = person(fake)
            truth[m] = {"status": status, "due": due, "owner": owner, "mode": modes[k]}
            shown_status, shown_due = status, due
            if modes[k] == "note":
                when = rng.choice(meetings)
                updated = when - dt.timedelta(days=rng.randint(1, 9))
                change_status = k == status_note or (k != date_note and rng.random() < 0.6)
                change_date = k == date_note or not change_status or rng.random() < 0.4
                if change_status:
                    shown_status = rng.choice([s for s in STATUSES if s != status and s != "Complete"])
                if change_date:
                    shown_due = due - dt.timedelta(days=7 * rng.randint(1, 4) * rng.choice([1, -1]))
                if change_status and change_date:
                    line = f"- {m}: moved to {due.isoformat()}; now {status}."
                elif change_status:
                    line = f"- {m}: status is now {status}."
                else:
                    line = f"- {m}: due date moved to {due.isoformat()}."
                notes_lines[when].append(line)
                truth[m].update(tracker_status=shown_status, tracker_due=shown_due)
            elif "reversal" in traps and not reversed_m and status != "Complete" and n_meet > 1:
                # the tracker recorded a sync's change; a later sync reverses it
                i = rng.randrange(n_meet - 1)
                j = rng.randrange(i + 1, n_meet)
                updated = meetings[i] + dt.timedelta(days=rng.randint(1, 5))
                shown_status = rng.choice([s for s in STATUSES if s not in (status, "Complete")])
                notes_lines[meetings[i]].append(f"- {m}: status is now {shown_status}.")
                notes_lines[meetings[j]].append(f"- {m}: back to {status}; the change to {shown_status} on "
                                                f"{meetings[i].isoformat()} no longer applies.")
                truth[m].update(mode="note", tracker_status=shown_status, reversed=shown_status)
                reversed_m = m
            else:
                updated = report_day - dt.timedelta(days=rng.randint(1, 6 + 7 * (n_meet - 1)))
                older = [d for d in meetings if d < updated]
                if "stale" in traps and older and (rng.random() < 0.5 or not any(
                        "stale_note" in t for t in truth.values())):  # a change the tracker has since overtaken
                    when = rng.choice(older)
                    stale = rng.choice([s for s in STATUSES if s != status])
                    notes_lines[when].append(f"- {m}: status is now {stale}.")
                    truth[m]["stale_note"] = stale
            tracker_rows.append((shown_due, [project, m, owner, _dt(shown_due), shown_status, _dt(updated)]))
        for m in theirs:
            d = report_day + dt.timedelta(days=rng.randint(-40, 80))
            tracker_rows.append((d, [sister, m, person(fake), _dt(d), rng.choice(STATUSES),
                                     _dt(report_day - dt.timedelta(days=rng.randint(2, 20)))]))
        tracker_rows.sort(key=lambda r: (r[0], r[1][1]))
        done = sum(1 for t in truth.values() if t["status"] == "Complete")
        delayed = [m for m in ours if truth[m]["status"] == "Delayed"]
        at_risk = [m for m in ours if truth[m]["status"] == "At risk"]

        # -- risks and actions ----------------------------------------------------------------------
        picked = rng.sample(RISKS, rng.randint(5, 6))
        ours_risks, sister_risk = picked[:-1], picked[-1]
        n_closed = rng.randint(1, 2) if "closed_risk" in traps else 0
        if n_meet == 1:  # one sync: no risk raised earlier to close
            n_closed = 0
        risks = []
        for i, (desc, mitigation) in enumerate(ours_risks):
            raised = rng.randrange(n_meet - 1) if i < n_closed else rng.randrange(n_meet)
            closed = rng.randrange(raised + 1, n_meet) if i < n_closed else None
            risks.append({"risk": desc, "mitigation": mitigation, "owner": person(fake),
                          "raised": raised, "closed": closed})
        if not n_closed and n_meet > 1 and all(r["raised"] < n_meet - 1 for r in risks):
            risks[-1]["raised"] = n_meet - 1  # this week's table differs from last week's all the same
        open_risks = [r for r in risks if r["closed"] is None]
        action_texts = rng.sample(ACTIONS, 2 * n_meet + 2)
        actions: list[list[str]] = []
        for i in range(n_meet):
            count = rng.randint(3, 4) if i == n_meet - 1 else 2
            actions.append([f"{fake.first_name()} to {action_texts.pop()}" for _ in range(count)])
        latest_actions = actions[-1]

        # -- files ---------------------------------------------------------------------------------
        heads = {k: rng.choice(v) for k, v in HEADINGS.items()}
        middle = ["milestones", "risks"]
        rng.shuffle(middle)
        head_order = ["summary", *middle, "next"]
        if level == 1:
            head_order = ["summary", "milestones"]
        head_texts = [heads[k] for k in head_order]
        guidance = {
            "summary": "[One paragraph: how many milestones are complete out of the total, and which are delayed.]",
            "milestones": f"[One bullet (List Bullet) per milestone: <Milestone> {DASH} <Status> {DASH} due <YYYY-MM-DD>]",
            "risks": "[Table of the open risks with the columns Risk | Owner | Mitigation]",
            "next": "[One bullet per action item agreed at the latest sync]",
        }
        template_blocks: list = [("Title", "[Project name] Status Report"), "Reporting date: [YYYY-MM-DD]"]
        for k in head_order:
            template_blocks += [("Heading 1", heads[k]), guidance[k]]
        base = "pmo"
        tracker_path = f"{base}/milestones.xlsx"
        archive_path = f"{base}/archive/milestones_{(report_day - dt.timedelta(weeks=8)).isoformat()}.xlsx"
        template_path = f"{base}/templates/status_report_template.docx"
        report = f"{base}/reports/{project}_status_{report_day.isoformat()}.docx"
        last_week = report_day - dt.timedelta(weeks=1)
        last_report = f"{base}/reports/{project}_status_{last_week.isoformat()}.docx"

        def note_text(i: int, day: dt.date, proj: str, lines: list[str], risk_lines: list[str], acts: list[str]) -> str:
            people = ", ".join(fake.first_name() for _ in range(rng.randint(3, 6)))
            progress = list(lines) + ([rng.choice(CHATTER)] if rng.random() < 0.6 else [])
            if rng.random() < 0.5:
                progress = [p if p.startswith("- ") else f"- {p}" for p in progress]
            body = [f"# {proj} weekly sync {DASH} {day.isoformat()}", "", f"Attendees: {people}", "",
                    "## Progress"]
            body += [p if p.startswith("- ") else f"- {p}" for p in progress] or ["- No milestone changes."]
            if level > 1:  # level 1 asks for no risks: its notes keep no risk log
                body += ["", "## Risks"] + (risk_lines or ["- No changes to the risk log."])
            body += ["", "## Actions"] + [f"- {a}" for a in acts]
            return "\n".join(body) + "\n"

        note_files: dict[str, str] = {}
        for i, day in enumerate(meetings):
            rl = []
            for r in risks:
                if r["raised"] == i:
                    rl.append(f"- New risk: {r['risk']} (owner: {r['owner']}; mitigation: {r['mitigation']})")
                if r["closed"] == i:
                    rl.append(f"- Closed: {r['risk']} {DASH} no longer a concern.")
            note_files[f"{base}/meetings/{day.isoformat()}_{_slug(project)}_sync.md"] = note_text(
                i, day, project, notes_lines[day], rl, actions[i])
        sister_owner = person(fake)
        sister_days = [meetings[-1] + dt.timedelta(days=1)]
        if n_meet > 1:
            sister_days.append(meetings[-2] + dt.timedelta(days=1))
        for j, day in enumerate(sister_days):
            lines = [f"- {theirs[j]}: status is now {rng.choice(['Delayed', 'At risk'])}."]
            rl = [f"- New risk: {sister_risk[0]} (owner: {sister_owner}; mitigation: {sister_risk[1]})"] if j == 0 else []
            note_files[f"{base}/meetings/{day.isoformat()}_{_slug(sister)}_sync.md"] = note_text(
                0, day, sister, lines, rl, [f"{fake.first_name()} to {rng.choice(ACTIONS)}"])

        stale_rows = [[r[1][0], r[1][1], r[1][2], r[1][3] - dt.timedelta(days=14), rng.choice(STATUSES),
                       r[1][5] - dt.timedelta(days=40)] for r in tracker_rows]
        last_blocks: list = [("Title", f"{project} Status Report"), f"Reporting date: {last_week.isoformat()}"]
        for k in head_order:
            last_blocks.append(("Heading 1", heads[k]))
            if k == "summary":
                last_blocks.append(f"{max(done - 1, 0)} of {n} milestones are complete.")
            elif k == "milestones":
                last_blocks += [("List Bullet", f"{m} {DASH} {truth[m].get('tracker_status', truth[m]['status'])} {DASH} "
                                                f"due {truth[m].get('tracker_due', truth[m]['due']).isoformat()}")
                                for m in ours[: n - 2]]
            elif k == "risks":
                last_blocks.append({"table": [["Risk", "Owner", "Mitigation"]]
                                    + [[r["risk"], r["owner"], r["mitigation"]] for r in risks if r["raised"] < n_meet - 1]})
            else:
                last_blocks += [("List Bullet", a) for a in actions[-2]]

        def make() -> dict[str, bytes]:
            files = {
                tracker_path: workbook_bytes(_tracker([r for _, r in tracker_rows if level > 1 or r[0] == project
                                                       or r[1] in theirs[:2]])),
                archive_path: workbook_bytes(_tracker(stale_rows)),
                template_path: document_bytes(build_document(template_blocks, title="Status report template")),
                last_report: document_bytes(build_document(last_blocks, title=f"{project} Status Report")),
            }
            files.update({p: t.encode() for p, t in note_files.items()})
            return files

        sources = Sources(make)
        data = {
            "project": project, "sister": sister, "report": report, "report_day": report_day.isoformat(),
            "truth": {m: {**t, "due": t["due"].isoformat(),
                          **({"tracker_due": t["tracker_due"].isoformat()} if "tracker_due" in t else {})}
                      for m, t in truth.items()},
            "milestones": ours, "sister_milestones": theirs, "done": done, "delayed": delayed, "at_risk": at_risk,
            "risks": risks, "open_risks": open_risks, "latest_actions": latest_actions,
            "previous_actions": actions[-2] if n_meet > 1 else [], "headings": head_texts, "head_order": head_order,
            "template": template_path, "tracker": tracker_path, "notes": sorted(p for p in note_files if _slug(sister) not in p),
            "last_report": last_report,
            "stale_notes": [m for m in ours if "stale_note" in truth[m]],
            "closed_risks": [r["risk"] for r in risks if r["closed"] is not None], "reversed": reversed_m,
            "sister_risk": {"risk": sister_risk[0], "owner": sister_owner, "mitigation": sister_risk[1]},
        }
        w = phrasing_rng(self.name, seed)
        report_on = report_day.strftime('%A %-d %B')
        ask = say(w, f"Hi {me}, could you draft the {project} status report for {report_on}?",
                  f"Hi {me}, the {project} status report for {report_on} needs drafting: could you take it?",
                  f"{me}, would you draft {report_on}'s {project} status report for me?",
                  f"Hello {me}, can you put together the draft {project} status report for {report_on}?")
        start = say(w, f"Please start from the template in {base}/templates/ and save it as {report}.",
                    f"Start from the template in {base}/templates/, and save the result as {report}.",
                    f"Save it as {report}, starting from the template you'll find in {base}/templates/.")
        tracker = say(w, f"The milestones are in the PMO tracker ({tracker_path}); it also tracks {sister}, so only "
                         f"take our rows: one bullet per milestone with its status and due date.",
                      f"For the milestones, use the PMO tracker ({tracker_path}). It tracks {sister} as well, so take "
                      f"only our rows, and write one bullet per milestone giving its status and due date.",
                      f"Our milestones come from the PMO tracker, {tracker_path} (only our rows: {sister} is in there "
                      f"too). Each milestone gets one bullet with its status and due date.")
        lag = say(w, f"Heads-up: the tracker lags behind the weekly syncs (notes in {base}/meetings/).",
                  f"Be aware that the tracker lags behind the weekly syncs, whose notes are in {base}/meetings/.",
                  f"One catch: the weekly syncs (notes in {base}/meetings/) are often ahead of the tracker.")
        rule = say(w, "If a sync recorded a change after the row's Last updated date, go with the sync; if the "
                      "tracker was updated after the sync, the tracker is right.",
                   "Where a sync recorded a change after the row's Last updated date, the sync wins; where the "
                   "tracker was updated after the sync, trust the tracker.",
                   "So compare dates: a change recorded in a sync after the row's Last updated date beats the "
                   "tracker, but a tracker row updated after the sync is right as it stands.")
        risks_ask = say(w, "Risks: a table (Risk, Owner, Mitigation) with the risks that are still open after the "
                           "latest sync. ",
                        "Risks: the risks still open after the latest sync, as a table (Risk, Owner, Mitigation). ",
                        "For Risks, a table with columns Risk, Owner, Mitigation, listing the risks that are still "
                        "open after the latest sync. ") if "risks" in head_order else ""
        summary = say(w, "Summary: how many milestones are complete out of the total, and name the delayed ones. ",
                      "Summary: the number of milestones complete out of the total, plus the names of the delayed "
                      "ones. ",
                      "In the Summary, say how many milestones are complete out of the total and name the delayed "
                      "ones. ")
        next_ask = say(w, f"Next steps: the action items from the latest {project} sync. ",
                       f"Next steps: list the action items from the most recent {project} sync. ",
                       f"Under Next steps, the action items from the latest {project} sync. "
                       ) if "next" in head_order else ""
        tidy = say(w, "Remove the bracketed guidance once filled in.",
                   "Once everything is filled in, remove the bracketed guidance.",
                   "The bracketed guidance should be gone once it's filled in.")
        keep = say(w, "Please don't change the tracker, the notes, the template or last week's report.",
                   "The tracker, the notes, the template and last week's report must stay unchanged.",
                   "Leave the tracker, the notes, the template and last week's report as they are, please.")
        instruction = (
            f"{ask} {start}\n\n{tracker} {lag} {rule}\n\n{risks_ask}{summary}{next_ask}{tidy}\n\n{keep} "
            f"{say(w, 'Thanks!', 'Thank you!', 'Many thanks,', 'Cheers,')}\n{pm}"
        )
        brief = level == 1  # straight to the named files: no survey, no read-back
        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=sources.build,
            oracle=partial(_oracle, data, brief=brief), criteria=_criteria(data, sources), data=data,
        )
        asked = {"risks_table": "risks", "risk_details": "risks", "next_steps": "next"}
        task.criteria = [c for c in task.criteria if asked.get(c.id, "summary") in head_order]
        if small:  # last week's summary can hold this week's count (0 or 1 of few): it pays only with the bullets
            task.criteria = [replace(c, requires=("milestone_bullets",)) if c.id.startswith("summary_") else c
                             for c in task.criteria]
        flawed = _perturbations(data, brief)
        task.perturbations = {c.id: flawed[c.id] for c in task.criteria}
        return task


# -- grading -----------------------------------------------------------------------------------------


def _criteria(d: dict, sources: Sources) -> list[Criterion]:
    report, project, sister = d["report"], d["project"], d["sister"]
    truth, ours = d["truth"], d["milestones"]
    day = dt.date.fromisoformat(d["report_day"])
    heads = dict(zip(d["head_order"], d["headings"]))

    def doc(world):
        return read_blocks(world.file(report))

    def section(world, key: str) -> list[dict] | None:
        for head, body in sections(doc(world)):
            if head["style"] == "Heading 1" and norm(head["text"]) == norm(heads[key]):
                return body
        return None

    def section_text(body: list[dict]) -> str:
        parts = []
        for b in body:
            parts.append(b["text"] if b["type"] == "paragraph" else " ".join(" ".join(r) for r in b["rows"]))
        return "\n".join(parts)

    def title_and_date(world, traj):
        blocks = doc(world)
        before = []
        for b in blocks:
            if b["type"] == "paragraph" and b["style"] == "Heading 1":
                break
            if b["type"] == "paragraph" and b["text"].strip():
                before.append(b["text"])
        if not before:
            return False, "nothing before the first heading"
        title = before[0]
        ok_title = words_in(title, project) and "status report" in norm(title) and not mentions(title, sister)
        dates = [x for t in before[1:] + [title] for x in find_dates(t, day.year)]
        ok_date = day in dates and not PLACEHOLDER_RE.search(" ".join(before))
        return ok_title and ok_date, f"title {title!r}, dates {dates}"

    def headings_in_order(world, traj):
        got = [norm(b["text"]) for b in doc(world) if b["type"] == "paragraph" and b["style"] == "Heading 1"]
        want = [norm(h) for h in d["headings"]]
        if got != want:
            return False, f"Heading 1s: {got}, expected {want}"
        empty = []
        for head, body in sections(doc(world)):
            if head["style"] != "Heading 1":
                continue
            filled = [b for b in body if b["type"] == "table" or (b["text"].strip() and not PLACEHOLDER_RE.search(b["text"]))]
            if not filled:
                empty.append(head["text"])
        return not empty, f"sections with nothing but guidance: {empty}"

    def milestone_map(world) -> tuple[dict[str, list[str]], list[str]]:
        body = section(world, "milestones")
        items = bullet_items(body or [])
        named: dict[str, list[str]] = {m: [] for m in ours}
        stray = []
        for it in items:
            hits = [m for m in ours if mentions(it, m)]
            if len(hits) != 1 or any(mentions(it, m) for m in d["sister_milestones"]):
                stray.append(it)
            for m in hits:
                named[m].append(it)
        return named, stray

    def milestone_bullets(world, traj):
        if section(world, "milestones") is None:
            return False, "no milestones section"
        named, stray = milestone_map(world)
        bad = [m for m, its in named.items() if len(its) != 1]
        return not bad and not stray, f"milestones without exactly one bullet: {bad}; other bullets: {stray}"

    def milestone_status(world, traj):
        named, _ = milestone_map(world)
        bad = []
        for m, its in named.items():
            found = statuses_in(its[0]) if its else set()
            if found != {norm(truth[m]["status"])}:
                bad.append(f"{m}: {sorted(found)} (expected {truth[m]['status']})")
        return not bad, "; ".join(bad)

    def milestone_dates(world, traj):
        named, _ = milestone_map(world)
        bad = []
        for m, its in named.items():
            due = due_date(its[0].replace(m, " "), day.year) if its else None
            if due is None or due.isoformat() != truth[m]["due"]:
                bad.append(f"{m}: {due} (expected {truth[m]['due']})")
        return not bad, "; ".join(bad)

    def risk_table(world) -> tuple[list[str] | None, list[list[str]]]:
        body = section(world, "risks")
        tables = [b for b in body or [] if b["type"] == "table"]
        if not tables or not tables[0]["rows"]:
            return None, []
        rows = tables[0]["rows"]
        return [norm(c) for c in rows[0]], [r for r in rows[1:] if any(c.strip() for c in r)]

    def risks_table(world, traj):
        head, rows = risk_table(world)
        if head is None:
            return False, "no table in the risks section"
        if head[:3] != ["risk", "owner", "mitigation"]:
            return False, f"header {head}"
        want = [r["risk"] for r in d["open_risks"]]
        matched = [next((w for w in want if similar(r[0], w)), None) for r in rows]
        ok = len(rows) == len(want) and sorted(filter(None, matched)) == sorted(want)
        return ok, f"rows {[r[0] for r in rows]}, expected {want}"

    def risk_details(world, traj):
        _, rows = risk_table(world)
        bad = []
        for r in d["open_risks"]:
            row = next((x for x in rows if similar(x[0], r["risk"])), None)
            if row is None or len(row) < 3 or not mentions(row[1], r["owner"]) or not similar(row[2], r["mitigation"]):
                bad.append(r["risk"])
        return not bad, f"wrong or missing owner/mitigation: {bad}"

    def summary_counts(world, traj):
        body = section(world, "summary")
        text = norm(section_text(body or []))
        pairs = {(int(a), int(b)) for a, b in re.findall(r"(\d+)\s*(?:of|out of|/)\s*(?:the\s+)?(\d+)", text)}
        # one count per status at most: a sweep of "0 of 9, 1 of 9, ... 9 of 9" is no answer
        swept = len({p for p in pairs if p[1] == len(ours)}) > len(STATUSES)
        return (d["done"], len(ours)) in pairs and not swept, \
            f"count pairs {sorted(pairs)}, expected {d['done']} of {len(ours)}"

    def summary_delays(world, traj):
        body = section(world, "summary")
        text = section_text(body or [])
        named = [m for m in ours if mentions(text, m)]
        missing = [m for m in d["delayed"] if m not in named]
        allowed = set(d["delayed"]) | set(d["at_risk"])
        extra = [m for m in named if m not in allowed]
        return not missing and not extra, f"missing delayed: {missing}; named but not delayed/at risk: {extra}"

    def next_steps(world, traj):
        items = bullet_items(section(world, "next") or [])
        want = d["latest_actions"]
        matched = [next((w for w in want if similar(it, w)), None) for it in items]
        ok = len(items) == len(want) and sorted(filter(None, matched)) == sorted(want)
        return ok, f"bullets {items}, expected {want}"

    def no_placeholders(world, traj):
        left = []
        for b in doc(world):
            texts = [b["text"]] if b["type"] == "paragraph" else [c for r in b["rows"] for c in r]
            left += [t for t in texts if PLACEHOLDER_RE.search(t)]
        return not left, f"guidance left: {left}"

    return [
        Criterion("title_and_date", f"{report} opens with a '{project} Status Report' title and the reporting date",
                  "final_state", title_and_date,
                  requires=("milestone_bullets",)),
        Criterion("headings_in_order", "the template's Heading 1 sections are kept, in order, each filled in",
                  "final_state", headings_in_order,
                  requires=("milestone_bullets",)),
        Criterion("milestone_bullets", f"exactly one bullet per {project} milestone, none for {sister}",
                  "final_state", milestone_bullets, 2.0),
        Criterion("milestone_status", "each milestone's status is the newest one (sync vs tracker)", "final_state",
                  milestone_status, 2.0),
        Criterion("milestone_dates", "each milestone's due date is the newest one", "final_state", milestone_dates, 2.0),
        Criterion("risks_table", "the risks section has a Risk/Owner/Mitigation table of exactly the open risks",
                  "final_state", risks_table, 2.0),
        Criterion("risk_details", "each open risk has its owner and mitigation", "final_state", risk_details,
                  requires=("risks_table",)),
        Criterion("summary_counts", "the summary says how many milestones are complete out of the total",
                  "final_state", summary_counts),
        Criterion("summary_delays", "the summary names the delayed milestones (and no on-track ones)",
                  "final_state", summary_delays),
        Criterion("next_steps", "next steps are the latest sync's action items, one bullet each", "final_state",
                  next_steps),
        Criterion("no_placeholders", "no bracketed template guidance is left", "final_state", no_placeholders,
                  guard=True),
        files_kit.unchanged(sources, description="tracker, notes, template and last week's report are byte-identical"),
        files_kit.not_written(sources, description="no tool call wrote to a source file"),
        files_kit.only_created(sources, allowed=[report], id="only_report_created"),
    ]


# -- reference solution ------------------------------------------------------------------------------


PARAGRAPH_TOOLS = ("docs__set_paragraph", "docs__insert_paragraph")


def _bullet(d: dict, m: str, status: str | None = None, due: str | None = None) -> str:
    t = d["truth"][m]
    return f"{m} {DASH} {status or t['status']} {DASH} due {due or t['due']}"


def _risk_rows(risks: list[dict]) -> list[list[str]]:
    return [["Risk", "Owner", "Mitigation"]] + [[r["risk"], r["owner"], r["mitigation"]] for r in risks]


def _summary(d: dict, done: int, delays: bool = True) -> str:
    """The count complete, then (with ``delays``) the delayed and at-risk milestones."""
    text = f"{done} of {len(d['milestones'])} milestones are complete."
    if not delays:
        return text
    text += f" Delayed: {', '.join(d['delayed'])}." if d["delayed"] else " None is delayed."
    return text + (f" At risk: {', '.join(d['at_risk'])}." if d["at_risk"] else "")


def _fill_list(report: str, index: int, items: list[str]) -> list[ToolCall]:
    """A bulleted list in place of the guidance paragraph at ``index``."""
    return [ToolCall("docs__set_paragraph", {"path": report, "index": index, "text": items[0], "style": "List Bullet"},
                     "Replace the guidance with the first bullet.")] + [
        ToolCall("docs__insert_paragraph", {"path": report, "index": index + k, "text": text, "style": "List Bullet"},
                 "Add the next bullet.") for k, text in enumerate(items[1:], start=1)]


def _oracle(d: dict, brief: bool = False):
    """Survey the folder, read the tracker, the project's sync notes and the template, copy the
    template and fill it bottom-up (so block indexes above stay put), then read it back.
    ``brief`` (one milestone) goes straight to the files the task names and skips the survey,
    last week's report and the read-back."""
    report, project, truth = d["report"], d["project"], d["truth"]
    ours = sorted(d["milestones"], key=lambda m: (truth[m]["due"], m))
    template = d["template"]

    if not brief:
        yield ToolCall("files__list_dir", {"path": "pmo", "recursive": True}, "Survey the PMO folder first.")
        yield ToolCall("sheets__list_sheets", {"path": d["tracker"]}, "Check the tracker's size.")
    yield ToolCall("sheets__read_range", {"path": d["tracker"], "sheet": "Tracker"},
                   f"Read the tracker; only {project} rows count.")
    for note in d["notes"]:
        yield ToolCall("files__read_file", {"path": note}, f"Read the sync notes {note.rsplit('/', 1)[-1]}.")
    if not brief:
        yield ToolCall("docs__read_document", {"path": d["last_report"]}, "See how last week's report was written.")
    tpl = parse_json((yield ToolCall("docs__read_document", {"path": template}, "Read the template's structure.")))
    blocks = tpl["blocks"]
    heading_at = {b["text"]: b["index"] for b in blocks if b.get("style") == "Heading 1"}
    heads = dict(zip(d["head_order"], d["headings"]))

    yield ToolCall("files__copy", {"src": template, "dst": report}, "Start the report from a copy of the template.")
    # bottom-up: each section's guidance paragraph sits right after its heading
    for key in reversed(d["head_order"]):
        guide = heading_at[heads[key]] + 1
        if key in ("next", "milestones"):
            items = d["latest_actions"] if key == "next" else [_bullet(d, m) for m in ours]
            for call in _fill_list(report, guide, items):
                yield call
        elif key == "risks":
            yield ToolCall("docs__delete_paragraph", {"path": report, "index": guide}, "Drop the table guidance.")
            yield ToolCall("docs__add_table", {"path": report, "rows": _risk_rows(d["open_risks"]),
                                               "after_index": guide - 1}, "Add the open-risks table under the heading.")
        else:
            yield ToolCall("docs__set_paragraph", {"path": report, "index": guide, "text": _summary(d, d["done"])},
                           "Write the summary.")
    yield ToolCall("docs__set_paragraph", {"path": report, "index": 1, "text": f"Reporting date: {d['report_day']}"},
                   "Fill in the reporting date.")
    yield ToolCall("docs__set_paragraph", {"path": report, "index": 0, "text": f"{project} Status Report"},
                   "Fill in the title.")
    if brief:
        return (f"Drafted {report}: {len(ours)} milestone ({d['done']} complete; "
                f"delayed: {', '.join(d['delayed']) or 'none'}).")
    final = parse_json((yield ToolCall("docs__read_document", {"path": report}, "Read the report back to check it.")))
    return (f"Drafted {report}: {len(ours)} milestones ({d['done']} complete; delayed: {', '.join(d['delayed'])}), "
            f"{len(d['open_risks'])} open risks, {len(d['latest_actions'])} next steps; "
            f"{final['total_blocks']} blocks in all.")


def _perturbations(d: dict, brief: bool) -> dict:
    """One flawed oracle per criterion, as edits of the report's paragraphs and table: the tracker
    believed over a newer sync, a sister milestone, last week's actions, a closed risk, a wrong
    count, guidance left in, last week's date, a renamed heading; or a stray write."""
    solve = partial(_oracle, d, brief=brief)
    report, truth = d["report"], d["truth"]
    ours = sorted(d["milestones"], key=lambda m: (truth[m]["due"], m))
    bullets, summary = [_bullet(d, m) for m in ours], _summary(d, d["done"])

    def writing(texts) -> perturb.Match:
        """A paragraph of the report written (set or inserted) with one of ``texts``."""
        return lambda c: c.name in PARAGRAPH_TOOLS and c.arguments.get("text") in texts

    def reworded(wrong: dict[str, str]):
        return perturb.change(solve, writing(wrong), lambda a: {**a, "text": wrong[a["text"]]}, count=None)

    last_list = d["latest_actions"] if "next" in d["head_order"] else bullets
    swapped = _risk_rows(d["open_risks"])
    if len(swapped) > 2:  # the first two owners swapped
        swapped[1][1], swapped[2][1] = swapped[2][1], swapped[1][1]
    table = perturb.on("docs__add_table", path=report)
    day = dt.date.fromisoformat(d["report_day"])
    return {
        "title_and_date": perturb.change(solve, perturb.on("docs__set_paragraph", text=f"Reporting date: {day}"),
                                         text=f"Reporting date: {day - dt.timedelta(weeks=1)}"),
        "headings_in_order": perturb.replace(solve, writing({summary}), lambda c: [c, ToolCall(
            "docs__set_paragraph", {"path": report, "index": c.arguments["index"] - 1, "text": "Overview"},
            "Rename a heading.")]),
        "milestone_bullets": perturb.replace(solve, writing({bullets[-1]}), lambda c: [c, ToolCall(
            "docs__insert_paragraph", {"path": report, "index": c.arguments["index"] + 1, "style": "List Bullet",
                                       "text": f"{d['sister_milestones'][0]} {DASH} On track {DASH} due {day}"},
            "Add the next bullet.")]),
        "milestone_status": reworded({_bullet(d, m): _bullet(d, m, status=truth[m]["tracker_status"])
                                      for m in ours if truth[m]["mode"] == "note"}),
        "milestone_dates": reworded({_bullet(d, m): _bullet(d, m, due=truth[m]["tracker_due"])
                                     for m in ours if "tracker_due" in truth[m]}),
        "risks_table": perturb.change(solve, table, rows=_risk_rows(  # a closed risk, else the sister project's
            d["open_risks"] + ([r for r in d["risks"] if r["closed"] is not None] or [d["sister_risk"]])[:1])),
        "risk_details": perturb.change(solve, table, rows=swapped),
        "summary_counts": reworded({summary: _summary(d, d["done"] + 1)}),
        "summary_delays": reworded({summary: _summary(d, d["done"], delays=False)
                                    + ("" if d["delayed"] else f" Delayed: {ours[0]}.")}),  # an on-track one
        "next_steps": perturb.replace(solve, writing(set(d["latest_actions"])), count=None, calls=lambda c: (
            _fill_list(report, c.arguments["index"], d["previous_actions"]) if c.name == "docs__set_paragraph"
            else [])),  # last week's actions in place of this week's
        "no_placeholders": perturb.replace(solve, writing(set(last_list)), count=None, calls=lambda c: ToolCall(
            "docs__insert_paragraph", {**c.arguments, "index": c.arguments["index"] + 1}, "Add a bullet.")),
        "sources_unchanged": perturb.insert(solve, ToolCall(
            "sheets__write_cells", {"path": d["tracker"], "sheet": "Tracker", "cells": {"H1": "reported"}},
            "Mark the tracker as reported.")),
        "no_source_writes": perturb.insert(solve, ToolCall(
            "docs__set_paragraph", {"path": d["template"], "index": 0, "text": "[Project name] Status Report"},
            "Touch the template (same text)."), after=perturb.on("files__copy", dst=report)),
        "only_report_created": perturb.insert(solve, ToolCall(
            "docs__create_document", {"path": "pmo/reports/draft.docx", "title": "Draft"}, "Keep a draft.")),
    }
