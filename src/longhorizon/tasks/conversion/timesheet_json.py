"""Data conversion: a month of timesheet workbooks, in three templates, exported as one JSON file
that follows the payroll system's schema, plus a file of rejected entries.

The templates differ the way real ones do: one has decimal hours and date cells under a small
header block, one has a sheet per week with DD/MM/YYYY text dates and h:mm times (and the
employee id on an Info sheet), one has "7h20"-style hours under a title that carries the id.
Weeks spill into the neighbouring months; someone logged the same project twice on a day (the
rows add up); project codes are typed every which way; some codes are unknown or belong to
closed projects (rejected, with a reason); hours round to the nearest quarter; overtime is
counted per day, not per entry.
"""

from __future__ import annotations

import calendar
import json
import re
from collections import defaultdict
from datetime import date, datetime, timedelta
from pathlib import Path

from openpyxl import Workbook

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    Files,
    norm_path,
    output_text,
    parse_json,
    rng_and_faker,
    same_bytes,
    shell_may_write,
    slug,
    workspace_files,
    write_files,
)

PAYROLL = "payroll"
README = f"{PAYROLL}/export-notes.md"
SCHEMA = f"{PAYROLL}/schema.json"
PROJECTS = f"{PAYROLL}/projects.csv"
EMPLOYEES = f"{PAYROLL}/employees.csv"
REJECTED = f"{PAYROLL}/rejected.json"
CODE_RE = re.compile(r"^[A-Z]{3}-\d{3}$")
PREFIXES = ["ACM", "BRX", "CLD", "DLT", "ENG", "FIN", "GRN", "HLX", "MKT", "OPS", "RND", "SLS"]
CENTRES = ["CC-100 Engineering", "CC-200 Sales", "CC-300 Operations", "CC-400 Finance", "CC-500 Marketing"]
PAGE = 25


def quarter(h: float) -> float:
    return round(h * 4) / 4


def norm_code(raw: str) -> str:
    s = re.sub(r"[\s_]+", "", str(raw)).upper()
    m = re.match(r"^([A-Z]{3})-?(\d{3})$", s)
    return f"{m.group(1)}-{m.group(2)}" if m else s


def _raw_code(rng, code: str) -> str:
    letters, digits = code.split("-")
    return rng.choice([code, code.lower(), f"{letters} {digits}", f"{letters}{digits}", f" {code} ",
                       f"{letters.title()}-{digits}"])


def _hm(h: float) -> str:
    m = round(h * 60)
    return f"{m // 60}:{m % 60:02d}"


def _hh(h: float) -> str:
    m = round(h * 60)
    return f"{m // 60}h" if m % 60 == 0 else f"{m // 60}h{m % 60:02d}"


def _schema(period: str, indent: int | None = 2) -> str:
    day = {"type": "object", "additionalProperties": False, "required": ["date", "project", "hours"],
           "properties": {"date": {"type": "string", "format": "date", "description": f"YYYY-MM-DD, within {period}"},
                          "project": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
                          "hours": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.25}}}
    emp = {"type": "object", "additionalProperties": False,
           "required": ["employee_id", "name", "cost_centre", "total_hours", "overtime_hours", "days"],
           "properties": {"employee_id": {"type": "string", "pattern": "^E[0-9]{4}$"},
                          "name": {"type": "string"}, "cost_centre": {"type": "string"},
                          "total_hours": {"type": "number", "multipleOf": 0.25},
                          "overtime_hours": {"type": "number", "minimum": 0, "multipleOf": 0.25},
                          "days": {"type": "array", "items": day}}}
    doc = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Payroll hours export",
           "type": "object", "additionalProperties": False, "required": ["period", "employees"],
           "properties": {"period": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"},
                          "employees": {"type": "array", "items": emp}}}
    return json.dumps(doc, indent=indent) + "\n"


def schema_problems(doc, period: str) -> list[str]:
    """What the export breaks of the schema (the parts that can be checked without a library)."""
    out = []
    if not isinstance(doc, dict) or set(doc) != {"period", "employees"}:
        return ["the top level must be an object with exactly period and employees"]
    if doc["period"] != period:
        out.append(f"period is {doc['period']!r}")
    if not isinstance(doc["employees"], list):
        return out + ["employees must be an array"]

    def num(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for e in doc["employees"]:
        keys = {"employee_id", "name", "cost_centre", "total_hours", "overtime_hours", "days"}
        if not isinstance(e, dict) or set(e) != keys:
            out.append(f"employee entry with keys {sorted(e) if isinstance(e, dict) else type(e).__name__}")
            continue
        if not (isinstance(e["employee_id"], str) and re.fullmatch(r"E\d{4}", e["employee_id"])):
            out.append(f"employee_id {e['employee_id']!r}")
        if not isinstance(e["name"], str) or not isinstance(e["cost_centre"], str):
            out.append(f"{e['employee_id']}: name and cost_centre must be text")
        for k in ("total_hours", "overtime_hours"):
            if not num(e[k]) or abs(e[k] * 4 - round(e[k] * 4)) > 1e-9 or e[k] < 0:
                out.append(f"{e['employee_id']}: {k} {e[k]!r}")
        if not isinstance(e["days"], list):
            out.append(f"{e['employee_id']}: days must be an array")
            continue
        for d in e["days"]:
            if not isinstance(d, dict) or set(d) != {"date", "project", "hours"}:
                out.append(f"{e['employee_id']}: day entry {d!r}")
                continue
            try:
                ok_date = date.fromisoformat(d["date"]).isoformat() == d["date"]
            except (TypeError, ValueError):
                ok_date = False
            if not ok_date:
                out.append(f"{e['employee_id']}: date {d['date']!r}")
            if not (isinstance(d["project"], str) and CODE_RE.match(d["project"])):
                out.append(f"{e['employee_id']}: project {d['project']!r}")
            if not num(d["hours"]) or d["hours"] <= 0 or abs(d["hours"] * 4 - round(d["hours"] * 4)) > 1e-9:
                out.append(f"{e['employee_id']}: hours {d['hours']!r}")
    return out


@register
class TimesheetJsonExport(TaskFamily):
    name = "timesheet_json_export"
    category = "data conversion"
    apps = ("sheets", "files", "shell")
    description = ("Convert a month of timesheet workbooks in three templates into the payroll JSON export "
                   "defined by a schema (quarter hours, merged entries, per-day overtime) plus rejected entries.")

    levels = 3
    """1: one timesheet (the third template's, named in the request), read in one go after the
    reference files in one, its days cut to those of the traps (a project twice on a day, a day
    over 8 hours on two projects, the reject), a day of each neighbouring month and two more, and
    the schema written on one line; 2: three, one per template; 3 (default): six to eight."""
    toolsets = {1: (
        "files__write_file", "shell__run", "sheets__list_sheets", "sheets__read_range",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        year, month = rng.choice([2025, 2026]), rng.randint(1, 12)
        period = f"{year}-{month:02d}"
        first = date(year, month, 1)
        last = date(year, month, calendar.monthrange(year, month)[1])
        export = f"{PAYROLL}/export-{period}.json"
        folder = f"timesheets/{period}"

        # projects: active ones, closed ones
        codes = set()
        while len(codes) < 9:
            codes.add(f"{rng.choice(PREFIXES)}-{rng.randint(100, 999)}")
        codes = sorted(codes)
        closed = set(rng.sample(codes, 2))
        active = [c for c in codes if c not in closed]
        unknown = []
        while len(unknown) < 2:
            c = f"{rng.choice(PREFIXES)}-{rng.randint(100, 999)}"
            if c not in codes and c not in unknown:
                unknown.append(c)

        # people
        n = rng.randint(6, 8)
        staff = []
        ids = set()
        for i in range(n + 1):
            while True:
                eid = f"E{rng.randint(1000, 9999)}"
                if eid not in ids:
                    ids.add(eid)
                    break
            staff.append({"id": eid, "name": fake.name(), "centre": rng.choice(CENTRES),
                          "template": ["A", "B", "C"][i % 3] if i < 3 else rng.choice("ABC")})
        on_leave = staff.pop()  # in the register, no timesheet this month
        # the days each person worked: whole weeks from the Monday before the 1st to the Sunday after the last
        start = first - timedelta(days=first.weekday())
        end = last + timedelta(days=6 - last.weekday())
        rows: dict[str, list[dict]] = {}
        for p in staff:
            entries = []
            d = start
            while d <= end:
                if d.weekday() < 5 and rng.random() > 0.08:
                    if rng.random() < 0.25:  # split day across two projects
                        a, b = rng.sample(active, 2)
                        h1 = rng.choice([3.5, 4, 4.5, 5, 5.5])
                        h2 = rng.choice([3, 3.5, 4, 4.5])
                        entries += [{"date": d, "code": a, "hours": h1}, {"date": d, "code": b, "hours": h2}]
                    else:
                        h = rng.choice([7.5, 8, 8, 7, 6, 8.5, 9, 7.5]) + rng.choice([0, 0, 0, 1 / 6, -1 / 6, 1 / 3])
                        entries.append({"date": d, "code": rng.choice(active), "hours": round(h, 4)})
                d += timedelta(days=1)
            in_month = [e for e in entries if first <= e["date"] <= last]
            # the same project twice on one day: morning and afternoon
            e = rng.choice([x for x in in_month if x["hours"] >= 6])
            morning = rng.choice([2.5, 3, 3.5])
            entries.append({"date": e["date"], "code": e["code"], "hours": round(e["hours"] - morning, 4)})
            e["hours"] = morning
            rows[p["id"]] = entries
        # rejects: unknown and closed project codes (once per employee at most, on in-month days)
        rejects = []

        def add_reject(p: dict) -> None:
            cands = [x for x in rows[p["id"]] if first <= x["date"] <= last]
            day_codes = defaultdict(set)
            for x in rows[p["id"]]:
                day_codes[x["date"]].add(x["code"])
            e = rng.choice([x for x in cands if len(day_codes[x["date"]]) == 1 and x["hours"] >= 2])
            bad = rng.choice(unknown + sorted(closed))
            rows[p["id"]].append({"date": e["date"], "code": bad, "hours": rng.choice([1, 1.5, 2])})
            rejects.append((p["id"], e["date"].isoformat(), bad, "closed_project" if bad in closed else "unknown_project"))

        for p in rng.sample(staff, 3):
            add_reject(p)
        if level < self.levels:  # the same draws as the default, then fewer timesheets, each with a reject
            staff = staff[:3] if level == 2 else staff[2:3]  # the third template's is always staff[2]
            _split_over_eight(rng, staff[-1], rows, first, last, active)
            rejects = [r for r in rejects if r[0] in {p["id"] for p in staff}]
            for p in staff:
                if not any(r[0] == p["id"] for r in rejects):
                    add_reject(p)
        if level == 1:
            _fewer_days(staff[0], rows, first, last, active, rejects)
        for entries in rows.values():
            entries.sort(key=lambda x: (x["date"], rng.random()))

        # -- the truth ---------------------------------------------------------------------------
        def convert(merge: bool = True) -> dict:
            """The export; ``merge=False`` keeps a project logged twice on a day as two entries."""
            out = []
            for p in sorted(staff, key=lambda s: s["id"]):
                merged: dict[tuple[str, str], float] = defaultdict(float)
                separate = []
                for x in rows[p["id"]]:
                    if not (first <= x["date"] <= last):
                        continue
                    if x["code"] not in active:
                        continue
                    h = quarter(x["hours"])
                    merged[(x["date"].isoformat(), x["code"])] += h
                    separate.append({"date": x["date"].isoformat(), "project": x["code"], "hours": h})
                days = [{"date": d, "project": c, "hours": h} for (d, c), h in merged.items()] if merge else separate
                days.sort(key=lambda x: (x["date"], x["project"]))
                per_day = defaultdict(float)
                for x in days:
                    per_day[x["date"]] += x["hours"]
                overtime = sum(max(0.0, h - 8) for h in per_day.values())
                out.append({"employee_id": p["id"], "name": p["name"], "cost_centre": p["centre"],
                            "total_hours": sum(x["hours"] for x in days), "overtime_hours": overtime, "days": days})
            return {"period": period, "employees": out}

        def edited(edit) -> dict:
            """The true export with each employee's record passed through ``edit`` (None leaves it out)."""
            return {"period": period, "employees": [e for e in (edit(e) for e in convert()["employees"]) if e]}

        truth = convert()
        template = {p["id"]: p["template"] for p in staff}
        wrong_docs = {  # the export as a converter makes it with one mistake
            "employees_set": edited(lambda e: None if template[e["employee_id"]] == "C" else e),
            "day_entries": convert(merge=False),  # a project logged twice on a day, not added up
            "totals": edited(lambda e: {**e, "overtime_hours": sum(max(0.0, d["hours"] - 8) for d in e["days"])}),
            "ordering": edited(lambda e: {**e, "days": e["days"][::-1]}),
            "json_valid": edited(lambda e: {**e, "days": [{**d, "hours": f"{d['hours']:.2f}"} for d in e["days"]]}),
        }
        assert wrong_docs["totals"] != truth and wrong_docs["day_entries"] != truth

        # -- workbooks ---------------------------------------------------------------------------
        def book(p: dict) -> Workbook:
            wb = Workbook()
            ws = wb.active
            entries = rows[p["id"]]
            if p["template"] == "A":
                ws.title = "Timesheet"
                ws.append(["Employee", p["name"]])
                ws.append(["Employee ID", p["id"]])
                ws.append([])
                ws.append(["Date", "Project", "Hours", "Comment"])
                for x in entries:
                    ws.append([datetime.combine(x["date"], datetime.min.time()), _raw_code(rng, x["code"]),
                               round(x["hours"], 2), rng.choice([None, None, "", fake.bs()])])
                    ws.cell(row=ws.max_row, column=1).number_format = "yyyy-mm-dd"
            elif p["template"] == "B":
                ws.title = "Info"
                ws.append(["Employee ID", p["id"]])
                ws.append(["Name", p["name"]])
                ws.append(["Dates are DD/MM/YYYY; time as h:mm"])
                weeks = defaultdict(list)
                for x in entries:
                    weeks[x["date"].isocalendar()[1]].append(x)
                for wk in sorted(weeks, key=lambda k: min(x["date"] for x in weeks[k])):
                    s = wb.create_sheet(f"Wk {wk:02d}")
                    s.append(["Day", "Date", "Project code", "Time"])
                    for x in weeks[wk]:
                        s.append([x["date"].strftime("%a"), x["date"].strftime("%d/%m/%Y"), _raw_code(rng, x["code"]),
                                  _hm(x["hours"])])
            else:
                ws.title = "Hours"
                ws.append([f"Timesheet - {p['name']} ({p['id']})"])
                ws.append([f"Period starting {entries[0]['date'].isoformat()}"])
                ws.append(["Date", "Proj", "Hrs"])
                for x in entries:
                    ws.append([x["date"].isoformat(), _raw_code(rng, x["code"]), _hh(x["hours"])])
            return wb

        file_of = {p["id"]: f"{folder}/{slug(p['name'].split()[0])}_{slug(p['name'].split()[-1])}.xlsx" for p in staff}
        prev_period = f"{year - 1}-12" if month == 1 else f"{year}-{month - 1:02d}"

        def make_files() -> dict[str, Workbook]:
            out = {file_of[p["id"]]: book(p) for p in staff}
            wb = Workbook()
            wb.active.title = "Timesheet"
            wb.active.append(["Employee", staff[0]["name"]])
            wb.active.append(["Employee ID", staff[0]["id"]])
            out[f"timesheets/{prev_period}/{slug(staff[0]['name'].split()[0])}.xlsx"] = wb
            return out

        files = Files(make_files)
        projects_csv = "code,name,status\n" + "".join(
            f"{c},{fake.catch_phrase().replace(',', '')},{'closed' if c in closed else 'active'}\n" for c in codes)
        employees_csv = "employee_id,name,cost_centre\n" + "".join(
            f"{p['id']},{p['name']},{p['centre']}\n" for p in sorted(staff + [on_leave], key=lambda s: s["id"]))
        notes = _notes(period, export)
        texts = {README: notes, SCHEMA: _schema(period, 2 if level > 1 else None), PROJECTS: projects_csv, EMPLOYEES: employees_csv}

        def build(root: Path) -> None:
            files.build(root)
            write_files(root / "workspace", texts)

        requester = fake.first_name()
        w = phrasing_rng(self.name, seed)
        need = say(w, f"Hi! Payroll needs the hours for {first:%B %Y}.",
                   f"Hello, Payroll is asking for the {first:%B %Y} hours.",
                   f"Hi there, the hours for {first:%B %Y} are due to Payroll.")
        sources = say(w, f"The timesheets are in {folder}/ (people use three different templates, sorry) and the "
                         f"export has to follow {SCHEMA}; {README} has the rules they gave us.",
                      f"{README} has the rules Payroll gave us, and the export has to follow {SCHEMA}. The "
                      f"timesheets themselves are in {folder}/; sorry, people use three different templates.",
                      f"You'll find the timesheets in {folder}/ (in three different templates, I'm afraid). The "
                      f"export has to follow {SCHEMA}, and the rules they gave us are in {README}.")
        ask = say(w, f"Could you produce {export} and the rejected-entries file, and check the export against the "
                     f"schema once it's written?",
                  f"Can you produce {export} plus the rejected-entries file? Once the export is written, please "
                  f"check it against the schema.",
                  f"Please produce {export} and the rejected-entries file, then verify the export against the "
                  f"schema once it's written.")
        if level == 1:
            sources += f" This month there is only one: {file_of[staff[0]['id']]}."
        keep = say(w, "Please leave the timesheets and the payroll reference files as they are.",
                   "The timesheets and the payroll reference files must stay as they are.",
                   "Don't change the timesheets or the payroll reference files.")
        instruction = " ".join([need, sources, ask, keep,
                                say(w, f"Thanks, {requester}", f"Thank you! {requester}", f"Cheers, {requester}")])

        # -- oracle ------------------------------------------------------------------------------
        rej = [{"employee_id": e, "date": d, "project": c, "reason": r} for e, d, c, r in sorted(rejects)]
        indent = None if level == 1 else 2  # level 1: one line, the episode stays short

        def solve():
            if level == 1:  # one timesheet, named: the reference files in one call, the sheet whole
                yield ToolCall("shell__run", {"command": f"cat {README} {SCHEMA} {PROJECTS} {EMPLOYEES}"},
                               "Read payroll's rules, the schema, the project codes and the employee register.")
            else:
                yield ToolCall("files__list_dir", {"path": "timesheets", "recursive": True},
                               "See whose timesheets there are.")
                yield ToolCall("files__read_file", {"path": README}, "Read payroll's rules.")
                yield ToolCall("files__read_file", {"path": SCHEMA}, "Read the schema the export must follow.")
                yield ToolCall("files__read_file", {"path": PROJECTS}, "Which project codes exist, and which are closed.")
                yield ToolCall("files__read_file", {"path": EMPLOYEES}, "Names and cost centres by employee id.")
            for p in sorted(staff, key=lambda s: file_of[s["id"]]):
                path = file_of[p["id"]]
                sheets = parse_json((yield ToolCall("sheets__list_sheets", {"path": path},
                                                    f"Open {p['name']}'s timesheet.")))
                for sh in sheets:
                    if sh["rows"] == 0:
                        continue
                    last_col = chr(ord("A") + sh["columns"] - 1)
                    page = sh["rows"] if level == 1 else PAGE
                    for r0 in range(1, sh["rows"] + 1, page):
                        r1 = min(r0 + page - 1, sh["rows"])
                        yield ToolCall("sheets__read_range", {"path": path, "sheet": sh["name"],
                                                              "range": f"A{r0}:{last_col}{r1}"},
                                       f"Read {sh['name']} rows {r0}-{r1}.")
            doc = convert()
            yield ToolCall("files__write_file", {"path": export, "content": json.dumps(doc, indent=indent) + "\n"},
                           "Write the export.")
            yield ToolCall("files__write_file", {"path": REJECTED, "content": json.dumps(rej, indent=2) + "\n"},
                           "Write the rejected entries.")
            yield ToolCall("shell__run", {"command": _check_command(export, REJECTED)},
                           "Validate the export against the schema's rules and check the totals add up.")
            total = sum(e["total_hours"] for e in doc["employees"])
            return (f"Wrote {export} ({len(doc['employees'])} employees, {total:g} hours in {period}) and {REJECTED} "
                    f"({len(rej)} entries on unknown or closed projects).")

        # -- perturbations: the oracle with one small mistake in its calls -----------------------
        write_export = perturb.on("files__write_file", path=export)
        kept = [x for x in rej if x["reason"] != "closed_project"]
        p0 = staff[0]
        sheet0 = {"A": "Timesheet", "B": "Info", "C": "Hours"}[p0["template"]]  # its first sheet
        flawed = {cid: perturb.change(solve, write_export, content=json.dumps(doc, indent=indent) + "\n")
                  for cid, doc in wrong_docs.items()}
        flawed |= {
            # the closed projects' entries left out (or, where there are none, the first)
            "rejected_file": perturb.change(solve, perturb.on("files__write_file", path=REJECTED), content=json.dumps(
                kept if len(kept) < len(rej) else rej[1:], indent=2) + "\n"),
            "sources_untouched": perturb.insert(solve, ToolCall(
                "sheets__write_cells", {"path": file_of[p0["id"]], "sheet": sheet0,
                                        "cells": {"H1": "exported"}}, "Mark the timesheet as exported."),
                before=write_export),
            "no_stray_files": perturb.insert(solve, ToolCall(
                "files__write_file", {"path": f"{PAYROLL}/draft.json", "content": "{}"}, "Scratch."),
                before=write_export),
            "verified": perturb.drop(solve, perturb.on("shell__run", command=_check_command(export, REJECTED))),
        }

        # -- grading -----------------------------------------------------------------------------
        def load(w, rel):
            p = w.file(rel)
            if p.is_symlink() or not p.is_file():
                raise ValueError(f"{rel} is missing")
            return json.loads(output_text(p, encoding="utf-8-sig"))

        def by_id(w) -> dict:
            doc = load(w, export)
            emps = doc.get("employees") if isinstance(doc, dict) else None
            if not isinstance(emps, list):
                raise ValueError("no employees array")
            return {str(e.get("employee_id")): e for e in emps if isinstance(e, dict)}

        want = {e["employee_id"]: e for e in truth["employees"]}

        def valid(w, t):
            probs = schema_problems(load(w, export), period)
            return not probs, "; ".join(probs[:4])

        def employees(w, t):
            got = by_id(w)
            if set(got) != set(want):
                return False, f"employees {sorted(got)}, expected {sorted(want)}"
            bad = [i for i, e in want.items() if " ".join(str(got[i].get("name", "")).split()) != e["name"]
                   or str(got[i].get("cost_centre", "")).strip() != e["cost_centre"]]
            return not bad, f"wrong name or cost centre: {bad}" if bad else ""

        def day_set(e) -> set:
            out = set()
            for d in e.get("days") or []:
                if isinstance(d, dict):
                    try:
                        h = round(float(d.get("hours")) * 4) / 4
                    except (TypeError, ValueError):
                        h = None
                    out.add((str(d.get("date")), norm_code(d.get("project", "")), h))
            return out

        def entries_ok(w, t):
            got = by_id(w)
            bad = [i for i, e in want.items() if i not in got or day_set(got[i]) != day_set(e)
                   or len(got[i].get("days") or []) != len(e["days"])]
            return not bad, f"day entries wrong for {bad}" if bad else ""

        def totals_ok(w, t):
            got = by_id(w)
            bad = []
            for i, e in want.items():
                g = got.get(i, {})
                for k in ("total_hours", "overtime_hours"):
                    v = g.get(k)
                    if not isinstance(v, (int, float)) or abs(v - e[k]) > 0.001:
                        bad.append(f"{i} {k}={v} (expected {e[k]})")
            return not bad, "; ".join(bad[:4])

        def ordering_ok(w, t):
            doc = load(w, export)
            emps = [e for e in doc.get("employees", []) if isinstance(e, dict)]
            ids = [str(e.get("employee_id")) for e in emps]
            if ids != sorted(ids) or not emps:
                return False, "employees are not sorted by employee_id"
            for e in emps:
                keys = [(str(d.get("date")), str(d.get("project"))) for d in e.get("days") or [] if isinstance(d, dict)]
                if keys != sorted(keys):
                    return False, f"{e.get('employee_id')}: days not sorted by date then project"
            return True, ""

        def rejected_ok(w, t):
            doc = load(w, REJECTED)
            if not isinstance(doc, list):
                return False, "rejected.json must be an array"
            got = sorted((str(x.get("employee_id")), str(x.get("date")), norm_code(x.get("project", "")),
                          str(x.get("reason", "")).strip().lower()) for x in doc if isinstance(x, dict))
            return got == sorted(rejects), f"rejected {got[:4]}, expected {sorted(rejects)[:4]}"

        def sources_ok(w, t):
            changed = files.changed(w)
            changed += [rel for rel, text in texts.items() if not same_bytes(w.file(rel), text.encode())]
            return not changed, f"changed: {changed}" if changed else ""

        def no_stray(w, t):
            extra = sorted(workspace_files(w) - set(files.bytes) - set(texts) - {export, REJECTED})
            return not extra, f"unexpected files: {extra}" if extra else ""

        def verified(w, t):
            # written with the file tools or by a shell command that names it (the instruction leaves the
            # tool open); checked by reading it or by a shell command that names it without writing it
            name = export.rsplit("/", 1)[1]
            calls = [c for c in t.tool_calls if not c.is_error and isinstance(c.arguments, dict)]

            def writes(c) -> bool:
                if c.name == "files__write_file":
                    return norm_path(c.arguments.get("path")) == export
                return c.name == "shell__run" and shell_may_write(str(c.arguments.get("command", "")), name)

            def reads(c) -> bool:
                if c.name == "files__read_file":
                    return norm_path(c.arguments.get("path")) == export
                return c.name == "shell__run" and name in str(c.arguments.get("command", ""))

            last = max((i for i, c in enumerate(calls) if writes(c)), default=None)
            if last is None:
                return False, "the export was never written (by the file tools or a shell command naming it)"
            later = [c for c in calls[last + 1:] if reads(c)]
            return bool(later), "" if later else "the export was not checked after it was written"

        criteria = [
            Criterion("json_valid", f"{export} is JSON that follows {SCHEMA}", "final_state", valid,
                      requires=("day_entries",)),
            Criterion("employees_set", "one record per employee with a timesheet, with the register's name and "
                      "cost centre", "final_state", employees),
            Criterion("day_entries", "each employee's days: in the month only, one entry per date and project "
                      "(hours added up), rounded to quarter hours, rejected codes left out", "final_state",
                      entries_ok, 2.0),
            Criterion("totals", "total_hours and overtime_hours (hours above 8 per day) per employee", "final_state",
                      totals_ok, 2.0),
            Criterion("ordering", "employees sorted by id, days by date then project", "final_state", ordering_ok,
                      requires=("day_entries",)),
            Criterion("rejected_file", f"{REJECTED} lists the entries on unknown or closed projects with the reason",
                      "final_state", rejected_ok, 2.0),
            Criterion("sources_untouched", "timesheets and payroll reference files are unchanged", "final_state",
                      sources_ok, guard=True),
            Criterion("no_stray_files", "no files besides the export and the rejected file", "final_state", no_stray,
                      guard=True),
            Criterion("verified", "the export was checked (read or validated) after it was last written", "process",
                      verified, requires=("day_entries",)),
        ]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id] for c in criteria},
            data={"period": period, "export": export, "rejects": rejects,
                  "templates": template},
        )


def _fewer_days(p: dict, rows: dict[str, list[dict]], first: date, last: date, active: list[str],
                rejects: list[tuple]) -> None:
    """Level 1: ``p``'s timesheet cut to the days that hold a trap (a project logged twice, the
    first day over 8 hours on two projects, a rejected entry), the first and last day outside the
    month and two ordinary days of it. No draws."""
    entries = rows[p["id"]]
    twice = defaultdict(int)
    day = defaultdict(list)
    for x in entries:
        twice[(x["date"], x["code"])] += 1
        if x["code"] in active:
            day[x["date"]].append(x)
    traps = {d for (d, _), k in twice.items() if k > 1} | {date.fromisoformat(r[1]) for r in rejects if r[0] == p["id"]}
    traps |= set(sorted(d for d, xs in day.items() if first <= d <= last and len({x["code"] for x in xs}) > 1
                        and sum(quarter(x["hours"]) for x in xs) > 8)[:1])
    outside = sorted({x["date"] for x in entries if not first <= x["date"] <= last})
    plain = sorted({x["date"] for x in entries if first <= x["date"] <= last} - traps)
    keep = traps | set(outside[:1]) | set(outside[-1:]) | set(plain[:2])
    rows[p["id"]] = [x for x in entries if x["date"] in keep]


def _split_over_eight(rng, p: dict, rows: dict[str, list[dict]], first: date, last: date,
                      active: list[str]) -> None:
    """Give ``p`` a day in the month on two projects adding up to more than 8 hours (so that
    overtime per day differs from overtime per entry; most timesheets have one already)."""
    days = defaultdict(list)
    for x in rows[p["id"]]:
        if first <= x["date"] <= last and x["code"] in active:
            days[x["date"]].append(x)
    split = [xs for xs in days.values() if len({x["code"] for x in xs}) > 1]
    if any(sum(x["hours"] for x in xs) > 8.25 for xs in split):
        return
    if split:
        a, b = rng.choice(split)[:2]
        a["hours"], b["hours"] = 5, 4.5
    else:  # no day on two projects: make one
        x = rng.choice([xs[0] for xs in days.values() if len(xs) == 1])
        x["hours"] = 5
        rows[p["id"]].append({"date": x["date"], "code": rng.choice([c for c in active if c != x["code"]]),
                              "hours": 4.5})


def _check_command(export: str, rejected: str) -> str:
    return f"""python3 - <<'PY'
import json, re
doc = json.load(open('{export}'))
rej = json.load(open('{rejected}'))
assert set(doc) == {{'period', 'employees'}}, doc.keys()
for e in doc['employees']:
    assert re.fullmatch(r'E[0-9]{{4}}', e['employee_id'])
    days = e['days']
    assert all(re.fullmatch(r'[A-Z]{{3}}-[0-9]{{3}}', d['project']) and (d['hours'] * 4).is_integer() for d in days)
    assert abs(sum(d['hours'] for d in days) - e['total_hours']) < 1e-9
    assert [(d['date'], d['project']) for d in days] == sorted((d['date'], d['project']) for d in days)
    print(e['employee_id'], e['name'], len(days), 'entries', e['total_hours'], 'h', e['overtime_hours'], 'overtime')
print(len(rej), 'rejected:', sorted(r['reason'] for r in rej))
PY"""


def _notes(period: str, export: str) -> str:
    return f"""# Payroll hours export: rules

Produce {export} following schema.json, and {REJECTED}.

- **Period**: only days in {period}. Timesheets run in whole weeks, so they include days of the
  neighbouring months: leave those out (they are not rejects either).
- **Employees**: one record per employee who handed in a timesheet, identified by the employee id
  in the workbook; name and cost centre come from employees.csv. Sorted by employee_id.
- **Project codes**: three letters, a dash, three digits (ABC-123). People type them in lower
  case, with a space or without the dash: normalise them. An entry whose code is not in
  projects.csv is rejected with reason `unknown_project`; one whose project is closed, with
  reason `closed_project`.
- **Hours**: in decimal hours, rounded to the nearest quarter hour (7:20 -> 7.25). Templates
  write them as 7.5, 7:30 or 7h30.
- **Days**: one entry per date and project; if a project was logged twice on a day, add the
  hours up. Sorted by date, then project.
- **Totals**: total_hours is the sum of the employee's entries; overtime_hours is, per day, the
  hours above 8 (all projects of the day together), summed over the month.
- **Rejected entries**: a JSON array of objects with employee_id, date (YYYY-MM-DD), project
  (normalised) and reason, for every rejected entry in the period.
"""
