"""Spreadsheet cleanup: turn a messy CRM contacts export into a clean, de-duplicated sheet.

The export has what real ones have: stray spaces, shouting-case near-duplicates of the same
person, phone numbers in every format (some stored as numbers), dates as text in four styles
or as real date cells, and blank rows. The colleague states the rules; each rule is one
criterion, plus "nobody lost", "export left as it was" and "nothing else touched".

The default level draws its trap mix per seed (``TRAP_ODDS``): blank rows in the export, and
last month's export next to this one (not to be touched), are each there or not; the
near-duplicates are always there. An absent trap has no criterion and an empty ``Task.data`` key
(``blank_rows`` 0, ``old_export`` ""); the rules the colleague lists stay the same either way.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from functools import partial

from openpyxl import Workbook

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.kit import files as files_kit
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.common import (
    Files,
    blank,
    norm_path,
    norm_text,
    parse_json,
    read_table,
    rng_and_faker,
    written_paths,
)

HEADER = ["Name", "Email", "Phone", "Company", "Signup Date"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
PHONE_STYLES = {
    "paren": ("(415) 555-0132", lambda d: f"({d[:3]}) {d[3:6]}-{d[6:]}"),
    "dash": ("415-555-0132", lambda d: f"{d[:3]}-{d[3:6]}-{d[6:]}"),
    "dot": ("415.555.0132", lambda d: f"{d[:3]}.{d[3:6]}.{d[6:]}"),
}
TRAP_ODDS = {"blank_rows": 0.6, "old_export": 0.6}
"""The default level's traps beside the near-duplicates, each there with this chance (levels 1-2
keep both)."""
CHUNK = 20
"""Rows the oracle reads or writes per call, as someone paging through a sheet would."""


# -- normalisation rules (shared by the oracle, which applies them to what it reads) ----------


def clean_spaces(v) -> str:
    return " ".join(str(v).split()) if v is not None else ""


def clean_email(v) -> str:
    return "".join(str(v).split()).lower() if v is not None else ""


def phone_digits(v) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    digits = re.sub(r"\D", "", str(v))
    return digits[1:] if len(digits) == 11 and digits.startswith("1") else digits


def parse_date(v) -> dt.date:
    """Every date style the export uses; slashed dates are US month/day/year."""
    if isinstance(v, dt.datetime):
        return v.date()
    if isinstance(v, dt.date):
        return v
    s = clean_spaces(v)
    if m := re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", s):
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    if m := re.fullmatch(r"(\d{1,2})/(\d{1,2})/(\d{4})", s):
        return dt.date(int(m[3]), int(m[1]), int(m[2]))
    if m := re.fullmatch(r"(\d{1,2}) ([A-Za-z]{3}) (\d{4})", s):
        return dt.date(int(m[3]), [x[:3] for x in MONTHS].index(m[2].title()) + 1, int(m[1]))
    if m := re.fullmatch(r"([A-Za-z]+) (\d{1,2}), (\d{4})", s):
        return dt.date(int(m[3]), MONTHS.index(m[1].title()) + 1, int(m[2]))
    raise ValueError(f"unknown date {v!r}")


def _raw_phone(rng: random.Random, d: str):
    style = rng.randrange(8)
    return [
        f"({d[:3]}) {d[3:6]}-{d[6:]}", f"{d[:3]}-{d[3:6]}-{d[6:]}", f"{d[:3]}.{d[3:6]}.{d[6:]}", d,
        int(d), f"+1 {d[:3]} {d[3:6]} {d[6:]}", f"+1-{d[:3]}-{d[3:6]}-{d[6:]}", f"{d[:3]} {d[3:6]} {d[6:]}",
    ][style]


def _raw_date(rng: random.Random, d: dt.date):
    style = rng.randrange(5)
    return [
        d.isoformat(), f"{d.month:02d}/{d.day:02d}/{d.year}", f"{d.day} {MONTHS[d.month - 1][:3]} {d.year}",
        f"{MONTHS[d.month - 1]} {d.day}, {d.year}", dt.datetime(d.year, d.month, d.day),
    ][style]


def _messy_spaces(rng: random.Random, s: str) -> str:
    style = rng.randrange(4)
    if style == 0:
        return f" {s}"
    if style == 1:
        return f"{s}  "
    parts = s.split(" ", 1)
    return f"{parts[0]}   {parts[1]}" if len(parts) == 2 else f"{s} "


@register
class ContactListCleanup(TaskFamily):
    name = "contact_list_cleanup"
    category = "spreadsheet cleanup"
    apps = ("sheets",)
    description = (
        "Normalise a messy CRM contacts export into a new clean sheet following the colleague's rules: "
        "merge near-duplicate rows by email, trim text, lower-case emails, one phone format, ISO dates, "
        "drop blank rows, keep the order asked; leave the export itself untouched."
    )

    levels = 3
    """1: three people (one near-duplicate, one blank row; the oracle reads the sheet whole, without
    sizing it first, and reads back just the rows it wrote); 2: eighteen (at least three); 3 (default):
    35 to 55 people with five to nine near-duplicates."""
    toolsets = {1: ("sheets__add_sheet", "sheets__read_range", "sheets__write_rows")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)

        year = rng.choice([2023, 2024, 2025])
        month = rng.randint(2, 12)
        export = f"crm/contacts_export_{year}-{month:02d}.xlsx"
        old_export = f"crm/contacts_export_{year}-{month - 1:02d}.xlsx"
        sheet, clean_sheet = "Export", rng.choice(["Clean", "Cleaned", "Contacts"])
        phone_style = rng.choice(sorted(PHONE_STYLES))
        example, fmt = PHONE_STYLES[phone_style]
        by_date = rng.random() < 0.5

        # the real people
        n = rng.randint(35, 55)
        people, emails, days = [], set(), set()
        domains = [fake.domain_name() for _ in range(6)]
        while len(people) < n:
            first, last = fake.first_name(), fake.last_name()
            email = f"{first}.{last}@{rng.choice(domains)}".lower().replace("'", "")
            day = dt.date(year - 1, 1, 1) + dt.timedelta(days=rng.randrange(365 + 200))
            if email in emails or day in days:
                continue
            emails.add(email)
            days.add(day)
            area = f"{rng.randint(2, 9)}{rng.randint(0, 9)}{rng.randint(0, 9)}"
            digits = f"{area}{rng.randint(200, 999)}{rng.randint(0, 9999):04d}"
            people.append({
                "name": f"{first} {last}", "email": email, "phone": digits,
                "company": fake.company(), "date": day,
            })

        def raw_row(p: dict, duplicate: bool) -> list:
            name, email, company = p["name"], p["email"], p["company"]
            if duplicate:  # a near-duplicate always differs in case or spacing of name and email
                name = rng.choice([name.upper(), name.lower(), _messy_spaces(rng, name)])
                email = rng.choice([email.upper(), f" {email.title()}", f"{email} ", email.capitalize()])
            else:
                if rng.random() < 0.3:
                    name = _messy_spaces(rng, name)
                if rng.random() < 0.25:
                    email = rng.choice([email.title(), f" {email}", f"{email}  "])
            if rng.random() < 0.2:
                company = _messy_spaces(rng, company)
            return [name, email, _raw_phone(rng, p["phone"]), company, _raw_date(rng, p["date"])]

        rows = [raw_row(p, False) for p in people]
        dups = rng.sample(range(n), rng.randint(5, 9))
        for i in dups:  # each near-duplicate lands somewhere after its original
            pos = rows.index(next(r for r in rows if clean_email(r[1]) == people[i]["email"]))
            rows.insert(rng.randint(pos + 1, len(rows)), raw_row(people[i], True))
        blanks = rng.randint(1, 3)
        for _ in range(blanks):
            rows.insert(rng.randint(3, len(rows) - 1), [None] * 5)

        order = [p["email"] for p in people]  # export order = first appearance = generation order
        if by_date:
            order = [p["email"] for p in sorted(people, key=lambda p: p["date"])]
        truth = {
            p["email"]: {
                "name": p["name"], "email": p["email"], "phone": fmt(p["phone"]),
                "company": clean_spaces(p["company"]), "date": p["date"].isoformat(),
            }
            for p in people
        }

        old_people = rng.sample(people, n // 2)
        traps = {k for k, p in TRAP_ODDS.items() if rng.random() < p}
        if level < self.levels:  # the smaller levels keep every trap
            traps = set(TRAP_ODDS)
        if "blank_rows" not in traps:
            rows = [r for r in rows if not all(blank(v) for v in r)]
            blanks = 0
        if "old_export" not in traps:
            old_export, old_people = "", []
        if level < self.levels:  # the same draws as the default, then fewer people
            kept = _fewer_people(*{1: (3, 1), 2: (18, 3)}[level], people, dups)
            rows = _rows_of(rows, kept, max_blanks=level)
            people = [p for p in people if p["email"] in kept]
            old_people = [p for p in old_people if p["email"] in kept]
            order, truth = [e for e in order if e in kept], {e: t for e, t in truth.items() if e in kept}
            blanks = sum(all(blank(v) for v in r) for r in rows)
            dups = range(len(rows) - blanks - len(people))

        def make_files() -> dict[str, Workbook]:
            wb = Workbook()
            ws = wb.active
            ws.title = sheet
            ws.append(HEADER)
            for r in rows:
                ws.append(r)
                if isinstance(r[4], dt.datetime):
                    ws.cell(row=ws.max_row, column=5).number_format = "yyyy-mm-dd"
            old = Workbook()
            ows = old.active
            ows.title = sheet
            ows.append(HEADER)
            for p in old_people:
                ows.append([p["name"], p["email"], p["phone"], p["company"], p["date"].strftime("%m/%d/%Y")])
            return {export: wb, old_export: old} if old_export else {export: wb}

        files = Files(make_files)
        original = [HEADER] + [list(r) for r in rows]  # kept out of data: dates are not JSON
        data = {
            "export": export, "old_export": old_export, "sheet": sheet, "clean_sheet": clean_sheet,
            "phone_style": phone_style, "by_date": by_date, "order": order, "truth": truth,
            "duplicates": len(dups), "blank_rows": blanks,
        }

        sender = fake.first_name()
        w = phrasing_rng(self.name, seed)
        cols = ", ".join(HEADER)
        hello = say(w, f"Hey, {sender} here from Sales Ops.", f"Hi, it's {sender} in Sales Ops.",
                    f"Hello, this is {sender} (Sales Ops).")
        mess = say(w, f"The CRM export in {export} (sheet \"{sheet}\") is a mess and I need a clean list before we "
                      "import it into the new system.",
                   f"Before we import our contacts into the new system I need a clean list, and the CRM export in "
                   f"{export} (sheet \"{sheet}\") is a mess.",
                   f"We're importing contacts into the new system soon, but the CRM export ({export}, sheet "
                   f"\"{sheet}\") is messy and I need a clean list first.")
        ask = say(w, f"Could you add a sheet called \"{clean_sheet}\" to the same workbook with the same five columns "
                     f"({cols}, header in row 1) and these rules:",
                  f"Please add a sheet named \"{clean_sheet}\" to that workbook, with the same five columns ({cols}) "
                  "and the header in row 1, following these rules:",
                  f"Can you put a new sheet, \"{clean_sheet}\", in the same workbook? Same five columns ({cols}), "
                  "header in row 1, and these rules:")
        order_rule = (say(w, "People sorted by signup date, oldest first.",
                          "Sort the people by signup date, oldest first.",
                          "Order: by signup date, oldest at the top.")
                      if by_date else
                      say(w, "People in the order they first appear in the export.",
                          "Keep people in the order they first appear in the export.",
                          "Order: the order in which each person first appears in the export."))
        rules = in_some_order(w, [
            say(w, "One row per person. Rows with the same email address (ignoring upper/lower case and stray "
                   "spaces) are the same person; keep just one of them.",
                "Each person gets exactly one row: rows whose email addresses match (ignoring upper/lower case and "
                "stray spaces) are the same person, so keep only one of them.",
                "No duplicates: two rows with the same email address, once you ignore upper/lower case and stray "
                "spaces, are one person, and only one of them stays."),
            say(w, "Names and company names: remove leading/trailing spaces and double spaces.",
                "Strip leading/trailing spaces and double spaces from names and company names.",
                "Tidy names and company names: no leading/trailing spaces, no double spaces."),
            say(w, "Emails: all lower case, no spaces.", "Write emails in lower case without any spaces.",
                "Every email lower case, with no spaces in it."),
            say(w, f"Phones: all US numbers, written like {example} (drop any +1 country code).",
                f"The phone numbers are all US ones; write them like {example} and drop any +1 country code.",
                f"Format every phone (they're all US numbers) as {example}, without a +1 country code."),
            say(w, "Signup dates as YYYY-MM-DD. The slashed dates in the export are US style (month/day/year).",
                "Write signup dates as YYYY-MM-DD; the slashed dates in the export are US style (month/day/year).",
                "The slashed dates in the export are US style (month/day/year): write every signup date as "
                "YYYY-MM-DD."),
            say(w, "No blank rows.", "Leave out blank rows.", "Don't keep any blank rows."),
            order_rule,
        ])
        leave = in_some_order(w, [
            say(w, f"leave the {sheet} sheet exactly as it is (I want to compare)",
                f"keep the {sheet} sheet exactly as it is, since I want to compare",
                f"don't change the {sheet} sheet at all (I want to compare)"),
            *([say(w, f"don't touch the older export {old_export}", f"leave the older export {old_export} alone",
                   f"don't modify the older export {old_export}")] if old_export else []),
            say(w, "don't create any other files", "don't make any other files", "create no other files"),
        ])
        bye = say(w, "Thanks!", "Thank you!", "Thanks a lot!")
        instruction = (
            f"{hello} {mess} {ask}\n" + "".join(f"- {r}\n" for r in rules) + "\n"
            + say(w, "Please ", "Also, please ", "And please ") + ", ".join(leave[:-1])
            + ("," if len(leave) > 2 else "") + f" and {leave[-1]}. {bye}"
        )

        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=files.build,
            oracle=partial(_oracle, data, small=level == 1), criteria=_criteria(data, files, original), data=data,
            perturbations=_perturbations(data, original, small=level == 1),
        )
        return task


def _fewer_people(k: int, k_dup: int, people: list[dict], dups: list[int]) -> set[str]:
    """The emails of ``k`` people, the first ``k_dup`` near-duplicated ones among them."""
    with_dup = dups[:k_dup]
    rest = [i for i in range(len(people)) if i not in with_dup][:k - k_dup]
    return {people[i]["email"] for i in [*with_dup, *rest]}


def _rows_of(rows: list[list], kept: set[str], max_blanks: int) -> list[list]:
    """The export's rows of the ``kept`` people, in order, with up to ``max_blanks`` of its blank
    rows where they fall between them."""
    out: list[list] = []
    for r in rows:
        if all(blank(v) for v in r):
            room = sum(all(blank(v) for v in x) for x in out) < max_blanks
            if out and not all(blank(v) for v in out[-1]) and room:
                out.append(r)
        elif clean_email(r[1]) in kept:
            out.append(r)
    while out and all(blank(v) for v in out[-1]):
        out.pop()
    return out


# -- grading ---------------------------------------------------------------------------------


def _criteria(d: dict, files: Files, original: list[list]) -> list[Criterion]:
    truth, export, clean = d["truth"], d["export"], d["clean_sheet"]

    def table(world):
        t = read_table(world.file(export), clean)
        if t is None:
            return None, f"{export} or its sheet {clean!r} is missing"
        return t, ""

    def body(world):
        """Data rows up to the last non-blank one (blank rows inside are kept, to be judged)."""
        t, why = table(world)
        if t is None:
            return None, why
        return [list(r) + [None] * (5 - len(r)) for r in t[1]], ""

    def by_email(world):
        rows, why = body(world)
        if rows is None:
            return None, why
        out: dict[str, list] = {}
        for r in rows:
            if not blank(r[1]):
                out.setdefault(clean_email(r[1]), r)
        return out, ""

    def clean_sheet(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        head = [norm_text(v) for v in t[0][:5]]
        return head == [norm_text(h) for h in HEADER], f"header {t[0][:5]!r}"

    def all_contacts(world, traj):
        rows, why = by_email(world)
        if rows is None:
            return False, why
        missing = sorted(set(truth) - set(rows))
        emails = [clean_email(r[1]) for r in body(world)[0] if not blank(r[1])]
        twice = sorted({e for e in emails if emails.count(e) > 1})  # pasting the export is no clean list
        return not missing and not twice, f"missing: {missing}; listed more than once: {twice}"

    def no_duplicates(world, traj):
        rows, why = body(world)
        if rows is None:
            return False, why
        seen: dict[str, int] = {}
        for r in rows:
            if not blank(r[1]):
                key = clean_email(r[1])
                seen[key] = seen.get(key, 0) + 1
        twice = sorted(k for k, v in seen.items() if v > 1)
        if not seen:  # an empty sheet has no duplicates, but has not earned anything either
            return False, "the clean sheet lists no emails"
        return not twice, f"appear more than once: {twice}"

    def no_blank_rows(world, traj):
        rows, why = body(world)
        if rows is None:
            return False, why
        empty = [i + 2 for i, r in enumerate(rows) if all(blank(v) for v in r[:5])]
        return bool(rows) and not empty, f"blank rows: {empty}"

    def field(check_one, what: str):
        def check(world, traj):
            rows, why = by_email(world)
            if rows is None:
                return False, why
            bad = [f"{e}: {rows[e]!r}" for e, t in truth.items() if e in rows and not check_one(rows[e], t)]
            absent = [e for e in truth if e not in rows]
            if absent:
                bad.append(f"{len(absent)} people missing")
            return not bad, f"{what} wrong: " + "; ".join(bad[:5])
        return check

    def names_ok(r, t) -> bool:
        return all(
            isinstance(v, str) and v == " ".join(v.split()) and v.lower() == want.lower()
            for v, want in ((r[0], t["name"]), (r[3], t["company"]))
        )

    def email_ok(r, t) -> bool:
        return r[1] == t["email"]

    def phone_ok(r, t) -> bool:
        return isinstance(r[2], str) and r[2].strip() == t["phone"]

    def date_ok(r, t) -> bool:
        v = r[4]
        if isinstance(v, (dt.datetime, dt.date)):
            return parse_date(v).isoformat() == t["date"]
        return isinstance(v, str) and v.strip() == t["date"]

    def order(world, traj):
        rows, why = body(world)
        if rows is None:
            return False, why
        got = [clean_email(r[1]) for r in rows if not blank(r[1])]
        want = [e for e in d["order"]]
        seen = [e for i, e in enumerate(got) if e in truth and e not in got[:i]]
        return seen == [e for e in want if e in seen] and len(seen) > 1, "people out of the order asked"

    def export_unchanged(world, traj):
        t = read_table(world.file(export), d["sheet"])
        if t is None:
            return False, f"sheet {d['sheet']!r} is gone"
        grid = [t[0]] + t[1]
        want = [[_as_read(v) for v in r] for r in original]
        got = [[_as_read(v) for v in (list(r) + [None] * 5)[:5]] for r in grid]
        extra = any(not blank(v) for r in grid for v in r[5:])
        return got == want and not extra, "the export sheet was changed"

    def export_not_written(world, traj):
        """No successful call wrote to the export's own sheet (even the same values back) or renamed it."""
        hits = [c.name for c in traj.tool_calls if written_paths(c) == [norm_path(export)]
                and d["sheet"] in (c.arguments.get("sheet"), c.arguments.get("old"))]
        return not hits, f"wrote to the {d['sheet']} sheet: {hits}"

    return [
        Criterion("clean_sheet", f"{export} has a sheet {clean!r} with header {', '.join(HEADER)}",
                  "final_state", clean_sheet, requires=("all_contacts",)),
        Criterion("all_contacts", "every real person in the export is in the clean sheet, once", "final_state",
                  all_contacts, weight=2.0),
        # list properties a one-row sheet also has: they pay once the list is complete
        Criterion("no_duplicates", "each email appears only once", "final_state", no_duplicates,
                  requires=("all_contacts",)),
        *([Criterion("no_blank_rows", "the clean sheet has no blank rows (the export has some)", "final_state",
                     no_blank_rows, requires=("all_contacts",))] if d["blank_rows"] else []),
        Criterion("names_trimmed", "names and companies have no stray or double spaces", "final_state",
                  field(names_ok, "name/company")),
        Criterion("emails_normalised", "emails are lower case without spaces", "final_state",
                  field(email_ok, "email")),
        Criterion("phones_formatted", f"phones are written like {PHONE_STYLES[d['phone_style']][0]}",
                  "final_state", field(phone_ok, "phone")),
        Criterion("dates_iso", "signup dates are YYYY-MM-DD (slashed dates read as month/day)", "final_state",
                  field(date_ok, "date")),
        Criterion("order", "people are in the order asked", "final_state", order, requires=("all_contacts",)),
        Criterion("export_unchanged", f"the {d['sheet']} sheet is exactly as it was", "final_state",
                  export_unchanged, guard=True),
        Criterion("export_not_written", f"no tool call wrote to the {d['sheet']} sheet", "process",
                  export_not_written, guard=True),
        *([files_kit.not_written([d["old_export"]], id="old_export_untouched",
                                 description=f"no tool call wrote to {d['old_export']}")] if d["old_export"] else []),
        files_kit.only_created(files, id="no_extra_files", description="no new files were created"),
    ]


def _as_read(v):
    """Cell values compared as a workbook round trip gives them back (ints and dates as stored)."""
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        return dt.datetime(v.year, v.month, v.day)
    return v


# -- reference solution ----------------------------------------------------------------------


def _clean_row(r: list, fmt) -> list:
    """One export row under the rules: spaces tidied, email in lower case, the phone style, an ISO date."""
    return [clean_spaces(r[0]), clean_email(r[1]), fmt(phone_digits(r[2])), clean_spaces(r[3]),
            parse_date(r[4]).isoformat()]


def _oracle(d: dict, small: bool = False):
    """Read the export in pages, apply each rule to what was read, write the clean sheet, read it
    back. ``small`` (level 1): the export is a handful of rows, read whole without sizing it first,
    and only the rows written are read back."""
    export, sheet, clean = d["export"], d["sheet"], d["clean_sheet"]
    fmt = PHONE_STYLES[d["phone_style"]][1]

    raw: list[list] = []
    if small:
        page = parse_json((yield ToolCall("sheets__read_range", {"path": export, "sheet": sheet},
                                          "Read the whole export.")))
        raw.extend(r["values"] for r in page["rows"])
        n_rows = 0
    else:
        info = parse_json((yield ToolCall("sheets__list_sheets", {"path": export}, "See how big the export is.")))
        n_rows = next(s for s in info if s["name"] == sheet)["rows"]
    for start in range(1, n_rows + 1, CHUNK):
        end = min(start + CHUNK - 1, n_rows)
        page = parse_json((yield ToolCall(
            "sheets__read_range", {"path": export, "sheet": sheet, "range": f"A{start}:E{end}"},
            f"Read export rows {start}-{end}.")))
        raw.extend(r["values"] for r in page["rows"])

    people: dict[str, list] = {}
    blank_rows = dup_rows = 0
    for r in raw[1:]:
        if all(blank(v) for v in r):
            blank_rows += 1
        elif clean_email(r[1]) in people:
            dup_rows += 1
        else:
            people[clean_email(r[1])] = _clean_row(r, fmt)
    rows = list(people.values())
    if d["by_date"]:
        rows.sort(key=lambda r: r[4])

    yield ToolCall("sheets__add_sheet", {"path": export, "name": clean}, f"Add the {clean} sheet.")
    table = [HEADER] + rows
    for start in range(0, len(table), CHUNK):
        yield ToolCall("sheets__write_rows", {"path": export, "sheet": clean, "start_cell": f"A{start + 1}",
                                              "rows": table[start:start + CHUNK]},
                       f"Write clean rows {start + 1}-{min(start + CHUNK, len(table))}.")
    written = 0
    for start in range(1, len(table) + 1, CHUNK):
        end = min(start + CHUNK - 1, len(table)) if small else start + CHUNK - 1
        page = parse_json((yield ToolCall(
            "sheets__read_range", {"path": export, "sheet": clean, "range": f"A{start}:E{end}"},
            "Read the clean sheet back to check it.")))
        written += sum(1 for r in page["rows"] if r["row"] > 1 and any(v is not None for v in r["values"]))

    return (
        f"Added sheet \"{clean}\" to {export}: {len(rows)} people (removed {dup_rows} duplicate rows and "
        f"{blank_rows} blank rows); read back {written} rows."
    )


def _perturbations(d: dict, original: list[list], small: bool = False) -> dict:
    """One flawed oracle per criterion, as edits of the clean sheet's writes: a rule not applied to
    the first person, the last one left out, a near-duplicate kept, a blank row; or a stray write."""
    solve = partial(_oracle, d, small=small)
    export, clean = d["export"], d["clean_sheet"]
    emails = [clean_email(r[1]) for r in original]
    dup = next(i for i, e in enumerate(emails) if e and e in emails[:i])  # the export's first near-duplicate
    writes = partial(perturb.on, "sheets__write_rows", path=export, sheet=clean)
    first, last = writes(start_cell="A1"), writes(start_cell=f"A{len(d['truth']) // CHUNK * CHUNK + 1}")

    def edit(match, how):
        """``match``'s rows as ``how(rows)`` leaves them (a copy: the oracle keeps its own)."""
        return perturb.change(solve, match, lambda a: {**a, "rows": how([list(r) for r in a["rows"]])})

    def first_person(col, wrong):
        return edit(first, lambda rows: [rows[0], [*rows[1][:col], wrong(rows[1][col]), *rows[1][col + 1:]],
                                         *rows[2:]])

    def left_out(call):  # the last person forgotten (with the write, when they were all of it)
        rows = call.arguments["rows"][:-1]
        return [ToolCall(call.name, {**call.arguments, "rows": rows}, call.note)] if rows else []

    renamed = perturb.change(solve, perturb.on("sheets__add_sheet", where=lambda a: a["name"] == clean),
                             name=clean + " 2")  # on()'s own first parameter is called name
    for tool in ("sheets__write_rows", "sheets__read_range"):
        renamed = perturb.change(renamed, perturb.on(tool, path=export, sheet=clean), count=None, sheet=clean + " 2")
    out = {
        "clean_sheet": renamed,
        "all_contacts": perturb.replace(solve, last, left_out),
        "no_duplicates": edit(last, lambda rows: rows + [_clean_row(original[dup], PHONE_STYLES[d["phone_style"]][1])]),
        "no_blank_rows": edit(last, lambda rows: rows[:-1] + [[None] * 5] + rows[-1:]),
        "names_trimmed": first_person(0, lambda v: v.replace(" ", "  ", 1)),
        "emails_normalised": first_person(1, str.title),
        "phones_formatted": first_person(2, phone_digits),
        "dates_iso": first_person(4, lambda v: "{1}/{2}/{0}".format(*v.split("-"))),
        "order": edit(first, lambda rows: [rows[0], rows[2], rows[1], *rows[3:]]),
        "export_unchanged": perturb.insert(solve, ToolCall(
            "sheets__clear_range", {"path": export, "sheet": d["sheet"], "range": f"A{dup + 1}:E{dup + 1}"},
            "Remove the duplicate from the export too.")),
        "export_not_written": perturb.insert(solve, ToolCall(
            "sheets__write_rows", {"path": export, "sheet": d["sheet"], "start_cell": "A1", "rows": [HEADER]},
            "Write the export's header again.")),
        "old_export_untouched": perturb.insert(solve, ToolCall(
            "sheets__add_sheet", {"path": d["old_export"], "name": "Notes"}, "Leave a note in the old export.")),
        "no_extra_files": perturb.insert(solve, ToolCall(
            "sheets__create_workbook", {"path": "crm/contacts_backup.xlsx", "sheets": [d["sheet"]]},
            "Make a backup workbook.")),
    }
    if not d["blank_rows"]:
        del out["no_blank_rows"]
    if not d["old_export"]:
        del out["old_export_untouched"]
    return out
