"""Shell scripting: a reusable retention script for dated report folders.

A platform ticket describes ``scripts/rotate_reports.sh FOLDER TODAY``: read the folder's
``retention.conf``, gzip reports past the archive age into ``archive/YYYY-MM/``, delete reports
(and archived copies) past the delete age, log every action, change nothing on a second run.
The agent writes it, tries it on a copy, runs it on each team folder and checks the result.

The grader then runs the agent's script itself, in the bubblewrap sandbox, on two hidden
folders with other settings, another date and the same kinds of edge cases (a report exactly at
each age limit, a commented-out old setting, ``never``, an impossible date, a dated ``.md``
note, a ``drafts/`` sub-folder, a month folder that empties, a log that does not exist yet), and
once more to see that a second run changes nothing. A script tailored to the visible folders,
or rotation done by hand, does not pass.
"""

from __future__ import annotations

import gzip
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import rng_and_faker, write_files, written_paths
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.scripting import ScratchRuns, Tree, run_sandboxed_sync, snapshot

SCRIPT = "scripts/rotate_reports.sh"
CONF = "retention.conf"
LOG = "rotation.log"
REPORT_RE = re.compile(r"^(?P<name>.+)-(?P<date>\d{4}-\d{2}-\d{2})\.(?:csv|txt|log)$")
LOG_NAME_RE = re.compile(r"([\w.+-]+-\d{4}-\d{2}-\d{2}\.(?:csv|txt|log))(?:\.gz)?")

TEAMS: dict[str, list[tuple[str, str]]] = {
    "finance": [("ledger", "csv"), ("ap-aging", "csv"), ("cash-position", "txt")],
    "sales": [("daily-sales", "csv"), ("pipeline", "csv"), ("bookings", "txt")],
    "support": [("tickets", "csv"), ("sla-breaches", "log"), ("csat", "csv")],
    "marketing": [("web-traffic", "csv"), ("campaign-spend", "csv"), ("seo-audit", "txt")],
    "logistics": [("shipments", "csv"), ("stock-levels", "csv"), ("carrier-errors", "log")],
    "people": [("headcount", "csv"), ("absence", "csv"), ("payroll-run", "log")],
}
HIDDEN_TEAMS: dict[str, list[tuple[str, str]]] = {
    "legal": [("contracts-due", "csv"), ("matters", "txt"), ("filings", "log")],
    "research": [("experiments", "csv"), ("lab-usage", "log"), ("grants", "txt")],
    "facilities": [("badge-access", "log"), ("energy", "csv"), ("work-orders", "csv")],
    "procurement": [("purchase-orders", "csv"), ("vendor-scores", "txt"), ("po-errors", "log")],
}
ARCHIVE_AFTER = [7, 10, 14, 21, 30]
DELETE_AFTER = [60, 90, 120, 180]
BAD_DATES = ["02-30", "02-31", "04-31", "06-31", "13-01", "00-12"]


def report_date(name: str) -> date | None:
    """The date in a report file name, or None when the name is not a report's."""
    m = REPORT_RE.match(name)
    if not m:
        return None
    try:
        return date.fromisoformat(m.group("date"))
    except ValueError:
        return None


# -- the rules, in Python: what the script must do to one folder -------------------------------


@dataclass
class Plan:
    archived: dict[str, str] = field(default_factory=dict)
    """top-level report -> its archive path (``archive/YYYY-MM/<name>.gz``)."""
    deleted: list[str] = field(default_factory=list)
    emptied: set[str] = field(default_factory=set)
    """Month folders that lose their last file."""
    actions: list[tuple[str, str]] = field(default_factory=list)
    """(``archived`` | ``deleted``, report file name) for the log."""


def plan(files: dict[str, bytes], archive_after: int, delete_after: int | None, today: date) -> Plan:
    p = Plan()
    for rel in sorted(files):
        if "/" in rel:
            continue
        d = report_date(rel)
        if d is None:
            continue
        age = (today - d).days
        if delete_after is not None and age > delete_after:
            p.deleted.append(rel)
            p.actions.append(("deleted", rel))
        elif age > archive_after:
            p.archived[rel] = f"archive/{d:%Y-%m}/{rel}.gz"
            p.actions.append(("archived", rel))
    months_before: set[str] = set()
    for rel in sorted(files):
        parts = rel.split("/")
        if len(parts) != 3 or parts[0] != "archive" or not parts[2].endswith(".gz"):
            continue
        months_before.add(f"archive/{parts[1]}")
        name = parts[2][:-3]
        d = report_date(name)
        if d is not None and delete_after is not None and (today - d).days > delete_after:
            p.deleted.append(rel)
            p.actions.append(("deleted", name))
    remaining = {f"archive/{rel.split('/')[1]}" for rel in files
                 if rel.startswith("archive/") and rel.count("/") == 2 and rel not in p.deleted}
    remaining |= {dest.rsplit("/", 1)[0] for dest in p.archived.values()}
    p.emptied = months_before - remaining
    return p


def expected_dirs(files: dict[str, bytes], p: Plan) -> set[str]:
    """Folders that must exist afterwards (``archive`` itself may or may not)."""
    out: set[str] = set()
    for rel in list(files) + list(p.archived.values()):
        if rel in p.deleted or rel in p.archived:
            continue
        parts = rel.split("/")[:-1]
        out |= {"/".join(parts[: i + 1]) for i in range(len(parts))}
    return out


def parse_log_lines(text: str, today: date) -> tuple[Counter, list[str]]:
    """(actions found, lines that name an action but are malformed). Lines that name no action
    (a header, a summary) are ignored here; the idempotency check catches repeated ones."""
    found: Counter = Counter()
    bad: list[str] = []
    for line in text.splitlines():
        low = line.strip().lower()
        if not low:
            continue
        act = "archived" if re.search(r"\barchiv", low) else (
            "deleted" if re.search(r"\b(?:delet|remov|purg|expir)", low) else None)
        m = LOG_NAME_RE.search(line)
        if act is None or m is None:
            continue
        if today.isoformat() not in line.replace(m.group(0), " "):
            bad.append(line.strip())
            continue
        found[(act, m.group(1))] += 1
    return found, bad


def _gunzips_to(data: bytes, expected: bytes) -> bool:
    """Whether gzip ``data`` decompresses to exactly ``expected``, decompressing no more than
    that and a byte: a 2 MB gzip bomb would otherwise inflate to gigabytes in the grader."""
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
        return f.read(len(expected) + 1) == expected and f.read(1) == b""


def judge(tree: Tree, files: dict[str, bytes], p: Plan, today: date, part: str) -> tuple[bool, str]:
    """One aspect of a rotated folder: archived | deleted | logged | kept | exact."""
    if "." in tree.odd:
        return False, "the folder is missing"
    if part == "archived":
        want = {rel for rel in files if rel.startswith("archive/") and rel.endswith(".gz")} - set(p.deleted)
        want |= set(p.archived.values())
        got = {rel for rel in tree.files if rel.startswith("archive/") and rel.endswith(".gz")}
        if got != want:
            return False, f"archive holds {sorted(got - want)} extra, misses {sorted(want - got)}"
        originals = [src for src in p.archived if src in tree.files or src in tree.odd]
        if originals:
            return False, f"archived reports still in the folder: {originals}"
        wrong = []
        for src, dest in p.archived.items():
            try:
                ok = _gunzips_to(tree.files[dest], files[src])
            except (OSError, EOFError, gzip.BadGzipFile):
                ok = False
            if not ok:
                wrong.append(dest)
        wrong += [rel for rel in want - set(p.archived.values()) if tree.files.get(rel) != files[rel]]
        return not wrong, f"not a gzip of the original: {wrong}" if wrong else ""
    if part == "deleted":
        left = [rel for rel in p.deleted if rel in tree.files or rel in tree.odd]
        kept_dirs = sorted(d for d in p.emptied if d in tree.dirs)
        if left:
            return False, f"expired files still there: {left}"
        return not kept_dirs, f"emptied month folders not removed: {kept_dirs}" if kept_dirs else ""
    if part == "logged":
        old = files.get(LOG, b"")
        now = tree.files.get(LOG)
        if now is None:
            return False, f"{LOG} is missing"
        if not now.startswith(old):
            return False, f"the earlier lines of {LOG} were not kept"
        found, bad = parse_log_lines(now[len(old):].decode("utf-8", "replace"), today)
        want = Counter(p.actions)
        if bad:
            return False, f"log lines without today's date: {bad[:3]}"
        if found != want:
            missing = sorted((want - found).elements())
            extra = sorted((found - want).elements())
            return False, f"log misses {missing[:5]}, has extra {extra[:5]}"
        return True, ""
    if part == "kept":
        keep = [rel for rel in files if rel not in p.deleted and rel not in p.archived and rel != LOG]
        wrong = [rel for rel in keep if tree.files.get(rel) != files[rel]]
        return not wrong, f"changed or missing: {wrong}" if wrong else ""
    if part == "exact":
        want = ({rel for rel in files if rel not in p.deleted and rel not in p.archived}
                | set(p.archived.values()) | ({LOG} if p.actions or LOG in files else set()))
        extra = sorted(set(tree.files) - want) + sorted(tree.odd)
        dirs = expected_dirs(files, p)
        extra_dirs = sorted(d for d in tree.dirs - dirs if d != "archive")
        if extra or extra_dirs:
            return False, f"unexpected entries: {(extra + extra_dirs)[:8]}"
        return True, ""
    raise ValueError(part)


# -- world generation ----------------------------------------------------------------------------


def _content(rng, fake, name: str, ext: str, d: date) -> bytes:
    if ext == "csv":
        head = {"ledger": "account,description,debit,credit", "pipeline": "deal,owner,stage,value"}.get(
            name, "id,owner,metric,value")
        rows = [f"{rng.randint(1000, 9999)},{fake.last_name()},{fake.word()},{rng.randint(1, 99999) / 100:.2f}"
                for _ in range(rng.randint(3, 8))]
        return (f"# {name} for {d.isoformat()}\n{head}\n" + "\n".join(rows) + "\n").encode()
    if ext == "log":
        return "".join(
            f"{d.isoformat()}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00 "
            f"{rng.choice(['INFO', 'WARN', 'ERROR'])} {fake.sentence(nb_words=6)}\n"
            for _ in range(rng.randint(3, 7))).encode()
    return (f"{name.replace('-', ' ').title()} - {d:%d %B %Y}\n\n"
            + "\n".join(f"- {fake.sentence(nb_words=9)}" for _ in range(rng.randint(2, 5))) + "\n").encode()


def conf_text(rng, team: str, archive_after: int, delete_after: int | None, owner: str) -> str:
    sep = rng.choice([" = ", "=", " =", "= ", "  =  "])
    value = "never" if delete_after is None else str(delete_after)
    items = [f"archive_after_days{sep}{archive_after}", f"delete_after_days{sep}{value}"]
    rng.shuffle(items)
    lines = [f"# retention for the {team} report folder", f"# owner: {owner}", ""]
    if rng.random() < 0.6:  # an old, commented-out value: a grep that ignores comments reads it
        lines += [f"# delete_after_days = {rng.choice([30, 45, 400])}   (old policy, superseded)"]
    lines += [items[0], "", items[1]] if rng.random() < 0.5 else items
    return "\n".join(lines) + "\n"


def make_folder(rng, fake, team: str, reports: list[tuple[str, str]], today: date, archive_after: int,
                delete_after: int | None, with_log: bool) -> dict[str, bytes]:
    """One team's reports folder (paths relative to it) with every edge case the rules name."""
    n, m = archive_after, delete_after
    top = m if m is not None else n + 160
    ages_keep = {n, *rng.sample(range(0, n), min(n, rng.randint(2, 4)))}
    ages_arch = {n + 1, *rng.sample(range(n + 2, top), rng.randint(4, 7))}
    if m is not None:
        ages_arch.add(m)
    ages_del: set[int] = set()
    if m is not None:
        ages_del = {m + 1, *rng.sample(range(m + 2, m + 140), rng.randint(2, 4))}
    future = {-rng.randint(1, 20)}
    files: dict[str, bytes] = {}
    used: set[tuple[str, date]] = set()

    def add_report(age: int, prefix: str = "") -> tuple[str, date]:
        for _ in range(50):
            name, ext = rng.choice(reports)
            d = today - timedelta(days=age)
            if (name, d) not in used:
                used.add((name, d))
                rel = f"{prefix}{name}-{d.isoformat()}.{ext}"
                files[rel + (".gz" if prefix else "")] = (
                    gzip.compress(_content(rng, fake, name, ext, d), mtime=0) if prefix
                    else _content(rng, fake, name, ext, d))
                return name, d
            age += 1
        raise RuntimeError("no free report date")

    for age in sorted(ages_keep | ages_arch | ages_del | future):
        add_report(age)
    # earlier runs' archive: survivors, and (with a delete age) expired copies, one month emptied
    old_ages = rng.sample(range(n + 1, top + 1), rng.randint(2, 3))
    if m is not None:
        old_ages.append(rng.randint(max(n + 1, m - 8), m))
        expired_month = today - timedelta(days=m + 45)
        first = expired_month.replace(day=1)
        days = sorted(rng.sample(range(0, 27), 2))
        old_ages += [(today - (first + timedelta(days=k))).days for k in days]
        old_ages.append(rng.randint(m + 1, m + 10))
    archived_before: list[tuple[str, date]] = []
    for age in old_ages:
        d = today - timedelta(days=age)
        # the archive folder is named after the report's own month
        name, d = add_report(age, prefix=f"archive/{d:%Y-%m}/")
        archived_before.append((name, d))
    # a report in the old archive's path must sit in its own month's folder (add_report may nudge)
    for rel in [r for r in files if r.startswith("archive/")]:
        fname = rel.split("/")[2][:-3]
        d = report_date(fname)
        want = f"archive/{d:%Y-%m}/{fname}.gz"
        if want != rel:
            files[want] = files.pop(rel)
    # things that are not reports
    name, ext = rng.choice(reports)
    old = today - timedelta(days=(m or n + 100) + rng.randint(5, 60))
    bad = f"{old.year}-{rng.choice(BAD_DATES)}"
    files[f"{name}-{bad}.{ext}"] = f"# {name}: export with a broken date stamp\n".encode()
    files[f"notes-{(today - timedelta(days=n + rng.randint(3, 30))).isoformat()}.md"] = (
        f"# {team} reporting notes\n\n{fake.paragraph(nb_sentences=3)}\n").encode()
    bak = today - timedelta(days=n + rng.randint(2, 40))
    files[f"{name}-{bak.isoformat()}.{ext}.bak"] = _content(rng, fake, name, ext, bak)
    draft = today - timedelta(days=(m or n + 100) + rng.randint(5, 90))
    files[f"drafts/{rng.choice(reports)[0]}-{draft.isoformat()}.csv"] = b"draft,not,final\n"
    files[f"{rng.choice(reports)[0]}-latest.csv"] = b"id,value\n1,0\n"
    files["README.md"] = (f"# {team.title()} reports\n\nDaily and weekly exports land here. "
                          f"Retention settings: {CONF}. Questions: {fake.first_name()}.\n").encode()
    files[CONF] = conf_text(rng, team, n, m, fake.name()).encode()
    if with_log and archived_before:
        lines = []
        for name, d in sorted(archived_before, key=lambda t: t[1]):
            ran = d + timedelta(days=n + rng.randint(1, 4))
            ext = dict(reports)[name]
            lines.append(f"{ran.isoformat()} archived {name}-{d.isoformat()}.{ext}")
        files[LOG] = ("\n".join(lines) + "\n").encode()
    return dict(sorted(files.items()))


def _fewer_teams(level: int, teams: list[str], never_team: str, folders: dict[str, dict[str, bytes]],
                 settings: dict[str, tuple[int, int | None]]) -> tuple[list[str], dict[str, dict[str, bytes]]]:
    """Level 1: a team with a delete age and a log (a log made from its archive when no such team
    has one); level 2: that team and the one whose reports are never deleted."""
    aging = [t for t in teams if t != never_team]
    first = next((t for t in aging if LOG in folders[t]), aging[0])
    folders = dict(folders)
    if LOG not in folders[first]:  # the log's old lines must be there to be kept
        n = settings[first][0]
        names = [LOG_NAME_RE.search(rel)[1] for rel in folders[first] if rel.startswith("archive/")]
        lines = sorted(f"{date.fromisoformat(REPORT_RE.match(x)['date']) + timedelta(days=n + 2)} archived {x}"
                       for x in names)
        if lines:
            folders[first] = dict(sorted({**folders[first], LOG: ("\n".join(lines) + "\n").encode()}.items()))
    kept = sorted({first, never_team} if level == 2 else {first})
    return kept, {t: folders[t] for t in kept}


def _thin(files: dict[str, bytes], today: date, n: int, m: int) -> dict[str, bytes]:
    """Level 1's folder: the reports at the edges (ages N, N+1, M, M+1 and a future date), one
    more to keep, to archive and to delete, one surviving and one expired archive copy, and every
    file that is not a report (broken date, notes, backup, draft, latest, README, settings, log)."""
    def age(rel: str) -> int:
        return (today - report_date(rel.rsplit("/", 1)[-1].removesuffix(".gz"))).days

    top = sorted((age(r), r) for r in files if "/" not in r and report_date(r))
    copies = sorted((age(r), r) for r in files if r.startswith("archive/"))
    keep = {r for r in files if not r.startswith("archive/") and not ("/" not in r and report_date(r))}
    keep |= {r for a, r in top if a in (n, n + 1, m, m + 1) or a < 0}
    for pick in ([r for a, r in top if 0 <= a < n][:1], [r for a, r in top if n + 1 < a < m][:1],
                 [r for a, r in top if a > m + 1][-1:], [r for a, r in copies if a <= m][:1],
                 [r for a, r in copies if a > m][-1:]):
        keep |= set(pick)
    return {r: b for r, b in files.items() if r in keep}


# -- the reference script and its flawed variants ------------------------------------------------


def script_text(*, archive_op: str = ">", purge: bool = True, truncate_log: bool = False,
                fixed_today: str | None = None, summary_line: bool = False, any_ext: bool = False) -> str:
    """The expert's script: a bash entry point cron can call, the logic in standard-library
    Python (one process per folder, real date parsing). Keyword arguments plant the flaws the
    perturbations need."""
    ext = r"[a-z]+" if any_ext else r"(?:csv|txt|log)"
    today_expr = f'date.fromisoformat("{fixed_today}")' if fixed_today else "date.fromisoformat(today_text)"
    truncate = ('open(os.path.join(folder, "rotation.log"), "w").close()\n' if truncate_log else "")
    purge_block = '''
# archived copies expire too; a month folder left empty goes
archive = os.path.join(folder, "archive")
if os.path.isdir(archive) and not os.path.islink(archive):
    for month in sorted(os.listdir(archive)):
        month_dir = os.path.join(archive, month)
        if os.path.islink(month_dir) or not os.path.isdir(month_dir):
            continue
        emptied = False
        for gz in sorted(os.listdir(month_dir)):
            a = age(gz[:-3]) if gz.endswith(".gz") else None
            if a is not None and expired(a):
                os.remove(os.path.join(month_dir, gz))
                log_lines.append(f"{today} deleted {gz[:-3]}")
                emptied = True
        if emptied and not os.listdir(month_dir):
            os.rmdir(month_dir)
''' if purge else ""
    summary = 'log_lines.append(f"{today} rotation run finished")\n' if summary_line else ""
    return f'''#!/usr/bin/env bash
# rotate_reports.sh - archive and expire the dated reports of one folder.
# Usage: bash scripts/rotate_reports.sh <reports folder> <today YYYY-MM-DD>
# Settings come from <folder>/retention.conf: archive_after_days = N, delete_after_days = M|never.
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 <reports folder> <today YYYY-MM-DD>" >&2
    exit 2
fi
exec python3 - "$1" "$2" <<'PY'
import gzip
import os
import re
import shutil
import sys
from datetime import date

folder, today_text = sys.argv[1].rstrip("/") or "/", sys.argv[2]
try:
    today = {today_expr}
except ValueError:
    sys.exit(f"today must be YYYY-MM-DD, got {{today_text!r}}")

settings = {{}}
with open(os.path.join(folder, "retention.conf"), encoding="utf-8") as fh:
    for line in fh:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        settings[key.strip()] = value.strip()
try:
    archive_after = int(settings["archive_after_days"])
    raw = settings["delete_after_days"].lower()
    delete_after = None if raw == "never" else int(raw)
except (KeyError, ValueError) as exc:
    sys.exit(f"bad retention.conf in {{folder}}: {{exc}}")

REPORT = re.compile(r"^.+-(\\d{{4}}-\\d{{2}}-\\d{{2}})\\.{ext}$")


def age(name):
    """Days since the date in a report's name; None when the name is not a report's."""
    m = REPORT.match(name)
    if not m:
        return None
    try:
        return (today - date.fromisoformat(m.group(1))).days
    except ValueError:  # e.g. 2026-02-30
        return None


def expired(a):
    return delete_after is not None and a > delete_after


{truncate}log_lines = []
for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name)
    if os.path.islink(path) or not os.path.isfile(path):
        continue
    a = age(name)
    if a is None:
        continue
    if expired(a):
        os.remove(path)
        log_lines.append(f"{{today}} deleted {{name}}")
    elif a {archive_op} archive_after:
        month_dir = os.path.join(folder, "archive", REPORT.match(name).group(1)[:7])
        os.makedirs(month_dir, exist_ok=True)
        with open(path, "rb") as src, gzip.open(os.path.join(month_dir, name + ".gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)
        log_lines.append(f"{{today}} archived {{name}}")
{purge_block}
{summary}if log_lines:
    with open(os.path.join(folder, "rotation.log"), "a", encoding="utf-8") as fh:
        fh.write("".join(line + "\\n" for line in log_lines))
for line in log_lines:
    print(line)
PY
'''


# -- the family ----------------------------------------------------------------------------------

_RUNS = ScratchRuns()


@register
class ReportRotationScript(TaskFamily):
    name = "report_rotation_script"
    category = "shell scripting"
    apps = ("shell", "files")
    description = ("Write scripts/rotate_reports.sh from a platform ticket (archive, expire and log dated "
                   "reports per a folder's retention.conf), run it on every team folder; the grader reruns "
                   "the script in the sandbox on hidden folders.")

    levels = 3
    """How many team folders the script is run on: 1 (one with both ages and a log), 2 (plus
    the team whose reports are never deleted), 3 (default: all three or four). The grader's
    hidden folders are the same at every level."""
    toolsets = {1: ("files__read_file", "files__write_file", "shell__run")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        task_id = self.task_id(seed, level)
        today = date(2026, 1, 5) + timedelta(days=rng.randrange(300))
        teams = sorted(rng.sample(sorted(TEAMS), rng.randint(3, 4)))
        never_team = rng.choice(teams)
        settings: dict[str, tuple[int, int | None]] = {}
        folders: dict[str, dict[str, bytes]] = {}
        for t in teams:
            n = rng.choice(ARCHIVE_AFTER)
            m = None if t == never_team else rng.choice([x for x in DELETE_AFTER if x > n + 40])
            settings[t] = (n, m)
            folders[t] = make_folder(rng, fake, t, TEAMS[t], today, n, m,
                                     with_log=t == teams[0] or rng.random() < 0.6)
        # the same job on two folders nobody has seen, another day, other settings
        hidden_today = today + timedelta(days=rng.randint(9, 45))
        h_teams = rng.sample(sorted(HIDDEN_TEAMS), 2)
        hidden: dict[str, tuple[int, int | None, dict[str, bytes]]] = {}
        for i, t in enumerate(h_teams):
            n = rng.choice([x for x in ARCHIVE_AFTER if x not in {s[0] for s in settings.values()}] or ARCHIVE_AFTER)
            m = None if i == 1 else rng.choice([x for x in DELETE_AFTER if x > n + 40])
            hidden[t] = (n, m, make_folder(rng, fake, t, HIDDEN_TEAMS[t], hidden_today, n, m, with_log=i == 0))
        plans = {t: plan(folders[t], *settings[t], today) for t in teams}
        h_plans = {t: plan(f, n, m, hidden_today) for t, (n, m, f) in hidden.items()}

        ticket_no = rng.randint(1200, 4800)
        ticket = f"ops/tickets/OPS-{ticket_no}.md"
        reporter, requester = fake.name(), fake.first_name()
        ticket_text = _ticket(ticket_no, reporter, fake)
        if level < self.levels:  # the same draws as the default, then fewer teams
            teams, folders = _fewer_teams(level, teams, never_team, folders, settings)
            if level == 1:  # a small folder with every edge case
                folders = {t: _thin(folders[t], today, *settings[t]) for t in teams}
            plans = {t: plan(folders[t], *settings[t], today) for t in teams}
        folder_of = {t: f"shared/{t}/reports" for t in teams}
        other_files = {
            ticket: ticket_text.encode(),
            "ops/tickets/OPS-{}.md".format(ticket_no - rng.randint(3, 90)): (
                f"# OPS: printer queue on floor 3 keeps jamming\n\nReporter: {fake.name()}\n\n"
                f"{fake.paragraph(nb_sentences=4)}\n\nStatus: closed\n").encode(),
            "scripts/README.md": (
                "# scripts/\n\nShared helper scripts. Cron runs them from the workspace root, so use paths "
                "relative to it or take them as arguments.\n").encode(),
        }

        def build(root: Path) -> None:
            ws = root / "workspace"
            for rel, data in other_files.items():
                (ws / rel).parent.mkdir(parents=True, exist_ok=True)
                (ws / rel).write_bytes(data)
            for t in teams:
                base = ws / folder_of[t]
                for rel, data in folders[t].items():
                    (base / rel).parent.mkdir(parents=True, exist_ok=True)
                    (base / rel).write_bytes(data)

        team_list = ", ".join(teams[:-1]) + f" and {teams[-1]}" if len(teams) > 1 else teams[0]
        w = phrasing_rng(self.name, seed)
        pick = say(w, f"Hi, could you pick up OPS-{ticket_no} for me? The ticket is in {ticket}.",
                   f"Hello, can you take OPS-{ticket_no} off my hands? You'll find the ticket in {ticket}.",
                   f"Hi there, I'd like you to handle OPS-{ticket_no}; the ticket is at {ticket}.")
        ask = say(w, f"Please write the script it asks for as {SCRIPT}, then run it once on each team's reports "
                     f"folder (shared/<team>/reports for {team_list}) with {today.isoformat()} as today's date, so "
                     f"the folders start from a clean state before cron takes over.",
                  f"It asks for a script: please write it as {SCRIPT}, and then, so that the folders start clean "
                  f"before cron takes over, run it once on each team's reports folder (shared/<team>/reports for "
                  f"{team_list}) using {today.isoformat()} as today's date.",
                  f"Write the script the ticket describes as {SCRIPT}. Then run it one time on every team's reports "
                  f"folder, shared/<team>/reports for {team_list}, with today's date set to {today.isoformat()}: "
                  f"the folders should start from a clean state before cron takes over.")
        reuse = say(w, "The platform team will reuse the script on other folders, so it has to do exactly what the "
                       "ticket says, not just what these folders happen to need.",
                    "Because the platform team will reuse it on other folders, the script must do exactly what the "
                    "ticket says rather than just what these folders happen to need.",
                    "It has to do exactly what the ticket says, not just what these particular folders need: the "
                    "platform team will reuse the script on other folders.")
        trial = say(w, "If you want to try it out first, do that on a copy under /tmp, not in the workspace.",
                    "Any trial run should happen on a copy under /tmp, not in the workspace.",
                    "Should you want to test it first, use a copy under /tmp rather than the workspace.")
        instruction = " ".join([pick, ask, reuse, trial,
                                say(w, f"Thanks! {requester}", f"Thank you, {requester}", f"Cheers, {requester}")])

        # -- oracle ------------------------------------------------------------------------------
        brief = level == 1  # one folder: no survey beyond its settings, no trial runs on copies

        def solve(*, script: str | None = None, manual_last: bool = False, scratch: bool = False):
            body = script or script_text()
            yield ToolCall("files__read_file", {"path": ticket}, "Read the ticket to get the exact rules.")
            if not brief:  # (level 1 sees its one folder after the run)
                yield ToolCall("files__list_dir", {"path": "shared", "recursive": True},
                               "See every team folder, its reports and what is already archived.")
                yield ToolCall("files__list_dir", {"path": "scripts"}, "Check what is already in scripts/.")
            for t in teams:
                yield ToolCall("files__read_file", {"path": f"{folder_of[t]}/{CONF}"},
                               f"Read the {t} retention settings (comments and spacing vary).")
                if brief:
                    continue
                yield ToolCall("shell__run", {"command": (
                    f"cd {folder_of[t]} && ls -la && ls -laR archive 2>/dev/null | head -n 40; "
                    f"echo '--- log:'; tail -n 5 {LOG} 2>/dev/null || echo '(no log yet)'")},
                    f"Look at the {t} folder's files, its archive and the end of its log.")
            sample = next(r for r in folders[teams[0]] if report_date(r) and "/" not in r)
            if not brief:
                yield ToolCall("shell__run", {"command": f"head -n 5 {folder_of[teams[0]]}/{sample}; file "
                                                         f"{folder_of[teams[0]]}/{sample}"},
                               "Check that a report is plain text.")
                yield ToolCall("shell__run", {"command": (
                    "date -u -d 2026-02-30 +%F; echo \"rc=$?\"; date -u -d 2026-03-01 +%s; "
                    "[[ sales-q1-2026-01-05.csv =~ ^.+-([0-9]{4}-[0-9]{2}-[0-9]{2})\\.(csv|txt|log)$ ]] "
                    "&& echo \"date=${BASH_REMATCH[1]}\"")},
                    "Confirm GNU date rejects impossible dates and the name pattern picks the date out.")
            yield ToolCall("files__write_file", {"path": SCRIPT, "content": body}, f"Write {SCRIPT}.")
            if not brief:
                yield ToolCall("shell__run", {"command": f"bash -n {SCRIPT} && chmod +x {SCRIPT} && echo syntax ok"},
                               "Syntax-check the script and make it executable.")
                yield ToolCall("shell__run", {"command": f"bash {SCRIPT}; echo \"rc=$?\""},
                               "Check that a call without arguments fails with the usage line and changes nothing.")
            for t in dict.fromkeys([teams[0], never_team] if not brief else [teams[0]] if scratch else []):
                test_root = "rotation_test" if scratch else "/tmp"
                yield ToolCall("shell__run", {"command": (
                    f"rm -rf {test_root}/t {test_root}/t2 && mkdir -p {test_root} && cp -r {folder_of[t]} {test_root}/t && "
                    f"bash {SCRIPT} {test_root}/t {today.isoformat()}; echo \"rc=$?\"; "
                    f"(cd {test_root}/t && find . -type f | sort); tail -n 12 {test_root}/t/{LOG}; "
                    f"cp -r {test_root}/t {test_root}/t2 && bash {SCRIPT} {test_root}/t2 {today.isoformat()} && "
                    f"diff -r {test_root}/t {test_root}/t2 && echo 'second run: no changes'")},
                    f"Dry run on a copy of the {t} folder, then a second run to confirm it changes nothing.")
            for i, t in enumerate(teams):
                if manual_last and i == len(teams) - 1:
                    yield ToolCall("shell__run", {"command": _manual(folder_of[t], folders[t], plans[t], today)},
                                   f"Rotate {t} by hand.")
                else:
                    yield ToolCall("shell__run", {"command": f"bash {SCRIPT} {folder_of[t]} {today.isoformat()}"},
                                   f"Run the script on the {t} folder.")
                yield ToolCall("shell__run", {"command": (
                    f"cd {folder_of[t]} && find . | sort && echo '--- new log lines:' && "
                    f"grep -c '^{today.isoformat()} ' {LOG}; tail -n 8 {LOG}")},
                    f"Check the {t} folder and its log after the run.")
                if plans[t].archived and not brief:
                    dest = sorted(plans[t].archived.values())[0]
                    yield ToolCall("shell__run", {"command": f"zcat {folder_of[t]}/{dest} | head -n 3"},
                                   "Spot-check that an archived report decompresses to the original.")
            if not brief:
                yield ToolCall("shell__run", {"command": "find . -type f -not -path './shared/*' | sort"},
                               "Make sure nothing else was left in the workspace.")
            if brief:
                return f"Wrote {SCRIPT} and ran it on {team_list} for {today.isoformat()}; every action is logged."
            n_arch = sum(len(p.archived) for p in plans.values())
            n_del = sum(len(p.deleted) for p in plans.values())
            return (f"Wrote {SCRIPT} and ran it on {team_list} for {today.isoformat()}: {n_arch} reports "
                    f"archived, {n_del} expired files deleted, each action logged in the folder's {LOG}. A "
                    f"second run on a copy changed nothing.")

        def variant(**kw):
            return lambda: solve(**kw)

        # -- grading -----------------------------------------------------------------------------
        def team_tree(w, t) -> Tree:
            return snapshot(w.file(folder_of[t]))

        def each_team(part: str):
            def check(w, tr):
                bad = []
                for t in teams:
                    tree = team_tree(w, t)
                    ok, note = judge(tree, folders[t], plans[t], today, part)
                    if ok and part == "deleted":  # deleting everything is no rotation
                        ok, note = judge(tree, folders[t], plans[t], today, "kept")
                    if not ok:
                        bad.append(f"{t}: {note}")
                return not bad, "; ".join(bad)
            return check

        def hidden_runs(w):
            """(tree before, after one run, after a second run) per hidden folder, or a reason."""
            def work(ws):
                for t, (_, _, files) in hidden.items():
                    write_files(ws / "shared" / t / "reports", files)
                cmd = "; ".join(f"bash {SCRIPT} shared/{t}/reports {hidden_today.isoformat()} "
                                f">/dev/null 2>&1" for t in hidden)
                out = {}
                for t in hidden:
                    out[t] = [snapshot(ws / "shared" / t / "reports")]
                for _ in range(2):
                    if run_sandboxed_sync(cmd, ws, timeout_s=60) is None:
                        return None, "the script timed out (or the sandbox is unavailable)"
                    for t in hidden:
                        out[t].append(snapshot(ws / "shared" / t / "reports"))
                return out, ""
            return _RUNS.run_scripts(w, task_id, SCRIPT, work)

        def generalises(w, tr):
            runs, why = hidden_runs(w)
            if runs is None:
                return False, why
            bad = []
            for t, (_, _, files) in hidden.items():
                for part in ("archived", "deleted", "logged", "kept", "exact"):
                    ok, note = judge(runs[t][1], files, h_plans[t], hidden_today, part)
                    if not ok:
                        bad.append(f"hidden folder {t} ({part}): {note}")
            return not bad, "; ".join(bad[:4])

        def idempotent(w, tr):
            runs, why = hidden_runs(w)
            if runs is None:
                return False, why
            bad = []
            for t in hidden:
                before, first, second = runs[t]
                if first.files == before.files:
                    bad.append(f"{t}: the first run changed nothing")
                elif not judge(first, hidden[t][2], h_plans[t], hidden_today, "kept")[0]:
                    bad.append(f"{t}: the first run changed or removed what it should keep")  # e.g. rm -rf
                elif (first.files, first.dirs, sorted(first.odd)) != (second.files, second.dirs, sorted(second.odd)):
                    changed = sorted(k for k in set(first.files) | set(second.files)
                                     if first.files.get(k) != second.files.get(k))
                    bad.append(f"{t}: a second run changed {changed[:4] or 'folders'}")
            return not bad, "; ".join(bad)

        def by_script(w, tr):
            runs = [c.arguments.get("command", "") for c in tr.calls("shell__run", ok_only=True)
                    if isinstance(c.arguments, dict)]
            missing = [t for t in teams if not any(_runs_script_on(c, folder_of[t]) for c in runs)]
            by_hand = []
            for c in tr.tool_calls:
                if c.app != "files":
                    continue
                for p in written_paths(c):
                    if any(p == folder_of[t] or p.startswith(folder_of[t] + "/") or folder_of[t].startswith(p + "/")
                           or p == "." for t in teams):
                        by_hand.append(f"{c.tool} {p}")
            if missing:
                return False, f"the script was never run on: {missing}"
            return not by_hand, f"changed by hand: {by_hand[:4]}" if by_hand else ""

        def clean(w, tr):
            t_all = snapshot(w.workspace)
            allowed = set(other_files)
            for t in teams:
                p = plans[t]
                kept = {rel for rel in folders[t] if rel not in p.deleted and rel not in p.archived}
                allowed |= {f"{folder_of[t]}/{rel}" for rel in kept | set(p.archived.values()) | {LOG}}
            extra = sorted(r for r in list(t_all.files) + t_all.odd
                           if r not in allowed and not r.startswith("scripts/"))
            return not extra, f"left behind: {extra[:6]}" if extra else ""

        criteria = [
            Criterion("teams_archived", "in every team folder exactly the reports older than the archive age "
                      "(and not expired) were gzipped into archive/YYYY-MM/ and removed; earlier archives kept",
                      "final_state", each_team("archived"), 2.0),
            Criterion("teams_expired_deleted", "every report and archived copy older than the delete age is gone, "
                      "month folders left empty were removed, and nothing that is kept is gone", "final_state",
                      each_team("deleted")),
            Criterion("teams_logged", f"each folder's {LOG} keeps its old lines and gained one "
                      "'<today> archived|deleted <file>' line per action", "final_state", each_team("logged")),
            Criterion("others_untouched", "recent reports, future-dated reports, non-reports, drafts/ and the "
                      "settings are unchanged", "final_state", each_team("kept"), guard=True),
            Criterion("script_generalises", f"{SCRIPT}, run by the grader in the sandbox on two hidden folders "
                      "(other settings, another date), leaves them exactly as the ticket says", "final_state",
                      generalises, 3.0),
            Criterion("script_idempotent", "a second run of the script on the same day changes nothing (and the "
                      "first one kept what it should)", "final_state", idempotent),
            Criterion("rotated_by_script", f"every team folder was rotated by running {SCRIPT} in the shell, "
                      "none by hand with file tools", "process", by_script, requires=("teams_archived",)),
            Criterion("workspace_clean", "no test copies or other stray files were left in the workspace",
                      "final_state", clean, guard=True),
        ]
        perturbations = {
            "teams_archived": variant(script=script_text(archive_op=">=")),
            "teams_expired_deleted": variant(script=script_text(purge=False)),
            "teams_logged": variant(script=script_text(truncate_log=True)),
            "others_untouched": variant(script=script_text(any_ext=True)),
            "script_generalises": variant(script=script_text(fixed_today=today.isoformat())),
            "script_idempotent": variant(script=script_text(summary_line=True)),
            "rotated_by_script": variant(manual_last=True),
            "workspace_clean": variant(scratch=True),
        }
        return Task(
            id=task_id, family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=variant(),
            criteria=criteria, perturbations=perturbations,
            data={"today": today.isoformat(), "teams": teams, "settings": settings,
                  "hidden_today": hidden_today.isoformat(),
                  "hidden_settings": {t: (n, m) for t, (n, m, _) in hidden.items()},
                  "archived": {t: sorted(p.archived) for t, p in plans.items()},
                  "deleted": {t: p.deleted for t, p in plans.items()}},
        )


def _runs_script_on(command: str, folder: str) -> bool:
    """Whether a shell command runs the script with ``folder`` as its argument, directly or in a
    loop over the team folders (``shared/*/reports``, ``shared/$t/reports``); a run on a copy
    elsewhere (``/tmp/...``) does not count."""
    if "rotate_reports.sh" not in command:
        return False
    direct = (r"rotate_reports\.sh[\"']?\s+[\"']?(?:\./|/workspace/)?" + re.escape(folder) + r"/?[\"']?(?:\s|;|&|$)")
    loop = r"shared/(?:\*|\"?\$\{?\w+\}?\"?)/reports"
    return bool(re.search(direct, command) or re.search(loop, command))


def _manual(folder: str, files: dict[str, bytes], p: Plan, today: date) -> str:
    """Shell commands that do one folder's rotation by hand (what the script should have done)."""
    cmds = [f"cd {folder}"]
    for src, dest in p.archived.items():
        cmds.append(f"mkdir -p {dest.rsplit('/', 1)[0]} && gzip -c {src} > {dest} && rm {src}")
    for rel in p.deleted:
        cmds.append(f"rm -f {rel}")
    for d in sorted(p.emptied):
        cmds.append(f"rmdir {d}")
    for act, name in p.actions:
        cmds.append(f"echo '{today.isoformat()} {act} {name}' >> {LOG}")
    return " && ".join(cmds)


def _ticket(no: int, reporter: str, fake) -> str:
    return f"""# OPS-{no}: rotate the team report folders

Reporter: {reporter} (platform team)
Status: open

Every team drops dated exports into shared/<team>/reports/ and nobody cleans up. We want one
reusable script, {SCRIPT}, that cron runs every night from the workspace root as

    bash {SCRIPT} <reports folder> <today as YYYY-MM-DD>

It works on the one folder it is given:

1. Settings come from the folder's {CONF}: `archive_after_days = N` and
   `delete_after_days = M`, where M may be `never`. Lines starting with # are comments;
   spaces around = are optional; blank lines may appear.
2. A report is a file directly in the folder (not in a sub-folder) named
   `<name>-YYYY-MM-DD.csv`, `.txt` or `.log`, where YYYY-MM-DD is a real calendar date. Its
   age is today minus that date, in days. Only the name counts: file modification times are
   meaningless since the migration. Anything else is left alone.
3. A report older than M days (age > M) is deleted.
4. Otherwise a report older than N days (age > N) is compressed with gzip to
   `archive/YYYY-MM/<file name>.gz`, where YYYY-MM is the month of the report's own date
   (not today's), and the original is removed.
5. Copies already in `archive/YYYY-MM/` whose report is older than M days are deleted as
   well, and a month folder left empty is removed.
6. Every action is appended to the folder's {LOG} as one line, `<today> archived <file name>`
   or `<today> deleted <file name>` (the report's file name, without .gz). Keep the lines
   already there; create the file if it does not exist yet.
7. Running it again on the same day must change nothing at all.

Cron's environment has bash, GNU coreutils, gzip and python3 (standard library only).

Comments:
- {fake.first_name()}: finance wants their archive kept forever, hence `never`.
"""
