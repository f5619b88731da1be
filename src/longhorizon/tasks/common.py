"""Helpers task families share: seeded generators, people and dates, tolerant text checks,
tool results, workspace files (read within a grading budget) and the writes that touch them,
and sheets read as values.

Graders are tolerant where a person would be (case, spacing, dashes, date and time
spellings, number formats) and strict on content (the right invoice number, the right day
and hour, the right amount).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import random
import re
import stat
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from faker import Faker

from longhorizon.apps.kinds import is_read, tool_effects
from longhorizon.apps.mail.state import parse_address
from longhorizon.apps.sheets.state import find_sheet, read_workbook, sheet_values, workbook_bytes


def rng_and_faker(seed: int, family: str) -> tuple[random.Random, Faker]:
    """Per-instance generators: deterministic in (family, seed), independent of global state."""
    rng = random.Random(f"{family}:{seed}")
    fake = Faker("en_US")
    fake.seed_instance(rng.randrange(2**31))
    return rng, fake


def norm_path(path) -> str:
    """An agent-supplied workspace path in one canonical spelling ('./a//b.xlsx' -> 'a/b.xlsx'),
    so graders compare what the agent touched, not how it spelled it."""
    p = posixpath.normpath(str(path or "").strip().replace("\\", "/").lstrip("/") or ".")
    return "." if p in ("", ".") else p


MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
FIRST_MONDAY_2026 = date(2026, 1, 5)


# -- people, companies ---------------------------------------------------------------------

@dataclass(frozen=True)
class Person:
    first: str
    last: str
    email: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


def faker_for(seed: int) -> Faker:
    fake = Faker("en_US")
    fake.seed_instance(seed)
    return fake


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def kebab(text: str) -> str:
    """Lower case words joined by dashes: 'Q3 Vendor Review!' -> 'q3-vendor-review'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def company(fake: Faker) -> tuple[str, str]:
    """(company name, its mail domain) e.g. ("Turner Inc", "turnerinc.example")."""
    name = fake.company()
    return name, f"{slug(name)[:24]}.example"


class People:
    """Makes people with unique names and addresses (no two share a first name unless asked)."""

    def __init__(self, fake: Faker):
        self.fake = fake
        self.used_names: set[str] = set()
        self.used_first: set[str] = set()
        self.used_emails: set[str] = set()

    def make(self, domain: str, first: str | None = None, last: str | None = None) -> Person:
        for _ in range(200):
            f = first or self.fake.first_name()
            l_ = last or self.fake.last_name()
            if not slug(f) or not slug(l_):
                continue
            if first is None and f in self.used_first:
                continue
            email = f"{slug(f)}.{slug(l_)}@{domain}"
            if f"{f} {l_}" in self.used_names or email in self.used_emails:
                if first is not None and last is not None:
                    raise ValueError(f"{f} {l_} already exists")
                continue
            self.used_names.add(f"{f} {l_}")
            self.used_first.add(f)
            self.used_emails.add(email)
            return Person(f, l_, email)
        raise RuntimeError("could not make a unique person")


# -- dates -----------------------------------------------------------------------------

def monday_of(rng: random.Random, weeks: int = 44) -> date:
    """A Monday in 2026, chosen by ``rng``."""
    return FIRST_MONDAY_2026 + timedelta(weeks=rng.randrange(weeks))


def weekday(d: date) -> str:
    return WEEKDAYS[d.weekday()].capitalize()


def long_date(d: date) -> str:
    """"Friday, March 13, 2026"."""
    return f"{weekday(d)}, {MONTHS[d.month - 1].capitalize()} {d.day}, {d.year}"


def day_month(d: date) -> str:
    """"Friday 13 March"."""
    return f"{weekday(d)} {d.day} {MONTHS[d.month - 1].capitalize()}"


def day_month_year(d: date) -> str:
    """"13 March 2026"."""
    return f"{d.day} {d:%B %Y}"


def hhmm(dt: datetime) -> str:
    return dt.strftime("%H:%M")


# -- tolerant text checks -----------------------------------------------------------------

def norm(text: str) -> str:
    """Lower case, one space between words, plain dashes and quotes."""
    text = (text or "").lower()
    text = re.sub(r"[\u2010-\u2015\u2212]", "-", text)
    text = text.replace("\u2018", "'").replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"\s+", " ", text).strip()


def squash(text: str) -> str:
    """Only letters and digits, lower case: 'INV-2041' ~ 'inv 2041' ~ 'inv2041'."""
    return re.sub(r"[^a-z0-9]", "", (text or "").lower())


def mentions_code(text: str, code: str) -> bool:
    """``code`` (an invoice number, say) appears, ignoring case and punctuation inside it."""
    return squash(code) in squash(text)


def mentions_date(text: str, d: date) -> bool:
    """The day is named as ISO, 'March 13', '13 March', 'Mar. 13th', '13/03' or '3/13'."""
    t = norm(text)
    if d.isoformat() in t:
        return True
    month = MONTHS[d.month - 1]
    mon = rf"(?:{month}|{month[:3]}\.?)"
    day = rf"0?{d.day}(?:st|nd|rd|th)?"
    patterns = [
        rf"\b{mon},?\s+{day}\b",
        rf"\b{day}\s+(?:of\s+)?{mon}\b",
        rf"(?<![\d/.]){'0?' + str(d.day)}[/.]0?{d.month}(?![\d])",
        rf"(?<![\d/.])0?{d.month}/0?{d.day}(?![\d])",
    ]
    return any(re.search(p, t) for p in patterns)


def mentions_weekday(text: str, d: date) -> bool:
    return WEEKDAYS[d.weekday()] in norm(text)


def mentions_time(text: str, dt: datetime) -> bool:
    """The clock time as '14:00', '14.00', '2pm', '2:00 pm', '2 p.m.', '2:30pm'."""
    t = norm(text)
    h, m = dt.hour, dt.minute
    if re.search(rf"(?<![\d:.])0?{h}[:.h]{m:02d}(?![\d])", t):
        return True
    h12 = h % 12 or 12
    ap = "a" if h < 12 else "p"
    minutes = r"(?:[:.]00)?" if m == 0 else rf"[:.]{m:02d}"
    if re.search(rf"(?<![\d:.]){h12}{minutes}\s*{ap}\.?\s?m\b\.?", t):
        return True
    return h == 12 and m == 0 and "noon" in t


def mentions_day(text: str, d: date) -> bool:
    """Either the date or its weekday is named."""
    return mentions_date(text, d) or mentions_weekday(text, d)


# -- tool results ---------------------------------------------------------------------------

def loads(result: str) -> Any:
    """Parse a tool's JSON result (oracles read what they are given)."""
    return json.loads(result)


def parse_json(text: str) -> Any:
    """Tool result JSON for oracles; a readable error when a tool answered with an error instead."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise RuntimeError(f"oracle expected JSON from a tool, got: {text[:300]}") from None


def parse_id(result: str) -> int:
    """The id in a confirmation like 'Sent message 42 ...' / 'Created event 7 ...'."""
    m = re.search(r"(?:message|event) (\d+)", result)
    if not m:
        raise ValueError(f"no id in {result!r}")
    return int(m.group(1))


# -- mail the agent sent ---------------------------------------------------------------------

MAIL_SENDS = ("mail__send_message", "mail__reply", "mail__forward")
"""The mail tools that send a message."""


def mails_sent(traj) -> list:
    """The successful calls that sent a mail (a new message, a reply or a forward), in order."""
    return [c for c in traj.tool_calls if not c.is_error and c.name in MAIL_SENDS]


def recipients(call) -> set[str]:
    """The addresses a mail-sending call names in ``to`` and ``cc``, read as the mail app reads
    them (``Name <a@b.com>`` accepted, case ignored): a grader that reads the trajectory agrees
    with one that reads the sent mail."""
    args = call.arguments if isinstance(call.arguments, dict) else {}
    named = [a for k in ("to", "cc") for a in (args.get(k) if isinstance(args.get(k), list) else [args.get(k)])]
    return {a for a in map(parse_address, named) if a}


def at_most_one_mail(world, traj) -> tuple[bool, str]:
    """Criterion check: no more than one mail was sent."""
    sends = mails_sent(traj)
    return len(sends) <= 1, f"{len(sends)} mails sent"


# -- workspace files and the calls that write them -------------------------------------

WORKSPACE_APPS = ("files", "sheets", "docs", "slides")
"""The apps whose tools take workspace paths."""


def __getattr__(name: str):
    """``READ_ONLY_TOOLS``, the workspace apps' reading tools, from their annotations
    (``apps.kinds``), made on first use: listing every app's tools costs a second."""
    if name == "READ_ONLY_TOOLS":
        return frozenset(n for n in tool_effects() if n.split("__")[0] in WORKSPACE_APPS and is_read(n))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
WRITE_ARGS = {
    "files__copy": ("dst",),
    "files__move": ("src", "dst"),
}
"""Which arguments of a mutating tool name what it changes (default: ``path``)."""


def written_paths(call) -> list[str]:
    """Workspace paths a successful tool call may have changed (empty for reads and errors)."""
    if call.is_error or is_read(call.name, call.arguments) or not isinstance(call.arguments, dict):
        return []
    if call.app not in WORKSPACE_APPS:
        return []
    keys = WRITE_ARGS.get(call.name, ("path",))
    return [norm_path(call.arguments[k]) for k in keys if k in call.arguments]


def touches(written: str, target: str) -> bool:
    """Whether changing ``written`` (a file or a whole folder) can change ``target``."""
    return written == "." or written == target or target.startswith(written + "/")


def writes_to(trajectory, targets: Iterable[str]) -> list[str]:
    """Targets that some successful mutating call touched, with the tool that did it."""
    targets = list(targets)
    hits = []
    for call in trajectory.tool_calls:
        for w in written_paths(call):
            hits.extend(f"{t} (by {call.name})" for t in targets if touches(w, t))
    return hits


def shell_may_write(cmd: str, name: str) -> bool:
    """Whether a shell command that names the file ``name`` may (re)write it: a redirect, tee,
    mv/cp/sed -i/touch/truncate, or Python opening it for writing. A command that only names the
    file (cat, a validator) reads it."""
    if name not in cmd:
        return False
    n = re.escape(name)
    return any(re.search(p, cmd) for p in (
        rf">>?\s*[\"']?[^\s;&|]*{n}", rf"\btee\b[^;&|]*{n}", rf"\b(?:mv|cp|sed\s+-i|touch|truncate)\b[^;&|]*{n}",
        rf"open\([^)]*{n}[^)]*['\"][wa]", r"write_text|\.write\("))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- reading what the agent wrote, within a budget --------------------------------------------

GRADE_READ_BYTES = 32 * 2**20
"""The most a grader reads of one workspace file. By apparent size (``st_size``): the agent's
shell can make a sparse file of gigabytes that costs no disk, and reading it would cost the
grader that much memory and time. Every oracle output is far smaller (the largest is a few
hundred KB: see benchmarks/hostile_data.py)."""


class OutputTooLarge(OSError):
    """A workspace file is larger than a grader reads; the criterion reading it fails with this
    as its note (``Task.grade`` records a raised error as the criterion's failure)."""


def output_bytes(path: Path, limit: int = GRADE_READ_BYTES) -> bytes:
    """A workspace file's bytes for a grader: a regular file only (a link or FIFO the agent left
    is an OSError, never followed or opened for real), and only within ``limit`` bytes
    (``OutputTooLarge`` otherwise, without reading it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{Path(path).name} is a folder")
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{Path(path).name} is not a regular file")
        if st.st_size > limit:
            raise OutputTooLarge(f"{Path(path).name} is {st.st_size:,} bytes, over the {limit:,} a grader reads")
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew since the fstat
        raise OutputTooLarge(f"{Path(path).name} is over the {limit:,} bytes a grader reads")
    return data


def output_text(path: Path, encoding: str = "utf-8", errors: str = "strict",
                limit: int = GRADE_READ_BYTES) -> str:
    """``Path.read_text`` within the budget of ``output_bytes``: the same decoding and the same
    newline translation ("\\r\\n" and a lone "\\r" read as "\\n")."""
    text = output_bytes(path, limit).decode(encoding, errors)
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def same_bytes(path: Path, expected: bytes) -> bool:
    """Whether ``path`` is a regular file holding exactly ``expected`` (for "left unchanged"
    checks): sizes are compared first, so a file is read only when it could match."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(expected):
            return False
        return output_bytes(path, limit=len(expected)) == expected
    except OSError:
        return False


def workspace_files(world) -> set[str]:
    """Every file under the workspace, as relative posix paths."""
    root = world.workspace
    out = set()
    for dirpath, _, names in os.walk(root):
        for name in names:
            out.add((Path(dirpath) / name).relative_to(root).as_posix())
    return out


def write_files(folder: Path, files: Mapping[str, str | bytes], encoding: str | None = "utf-8") -> None:
    """Write ``files`` (relative path -> bytes, or text in ``encoding``) under ``folder``, making
    the folders on the way, in the mapping's order."""
    for rel, data in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data, encoding=encoding)


class Sources:
    """Seed files of a World (workspace path -> bytes), made once on first use and shared by
    ``build`` and the graders that check nothing changed (``tasks.kit.files``' guards take it)."""

    def __init__(self, make: Callable[[], dict[str, bytes]]):
        self._make = make
        self._bytes: dict[str, bytes] | None = None

    @property
    def bytes(self) -> dict[str, bytes]:
        if self._bytes is None:
            self._bytes = dict(sorted(self._make().items()))
        return self._bytes

    def build(self, root: Path) -> None:
        write_files(root / "workspace", self.bytes)

    def changed(self, world, only: Iterable[str] | None = None) -> list[str]:
        """Seed files whose bytes differ from what was built, or that are gone."""
        return [rel for rel in (only if only is not None else self.bytes)
                if not same_bytes(world.file(rel), self.bytes[rel])]


class Files(Sources):
    """The workbooks a task writes (path -> openpyxl Workbook), as seed files."""

    def __init__(self, make: Callable[[], dict[str, Any]]):
        super().__init__(lambda: {rel: workbook_bytes(wb) for rel, wb in make().items()})


# -- sheets read as computed values ---------------------------------------------------------

def read_table(path: Path, sheet: str) -> tuple[list[Any], list[list[Any]]] | None:
    """(header, data rows) of a sheet as computed values; rows after the last non-empty one
    are dropped; None when the file or sheet is missing."""
    if not path.is_file():
        return None
    st = path.stat()
    key = (str(path.resolve()), st.st_ino, st.st_mtime_ns, st.st_size, sheet)
    with _TABLES_LOCK:
        if key in _TABLES:
            return _TABLES[key]
    table = _read_table(path, sheet)
    with _TABLES_LOCK:
        while len(_TABLES) >= 32:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = table
    return table


_TABLES: dict[tuple, Any] = {}
"""Graders of one episode read the same output file several times: load it once."""
_TABLES_LOCK = threading.Lock()


def _read_table(path: Path, sheet: str) -> tuple[list[Any], list[list[Any]]] | None:
    wb = read_workbook(path)
    ws = find_sheet(wb, sheet)
    if ws is None:
        return None
    grid = sheet_values(wb, ws.title)
    return (grid[0], grid[1:]) if grid else ([], [])


def blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def norm_text(v: Any) -> str:
    """Case- and whitespace-insensitive form of a cell, for labels and names."""
    return " ".join(str(v).split()).lower() if v is not None else ""


def to_number(v: Any) -> float | None:
    """A cell as a number, accepting '1,234.50', '$1,234.50' and '(12.00)'; None if it is not one."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v).strip().replace(",", "").replace("$", "").replace(" ", "")
    neg = s.startswith("(") and s.endswith(")")
    s = s.strip("()")
    try:
        x = float(s)
    except ValueError:
        return None
    return -x if neg else x


def close(a: float | None, b: float, tol: float = 0.01) -> bool:
    return a is not None and abs(a - b) <= tol + 1e-9


# -- "names X and nothing else" ---------------------------------------------------------------

def names_only(text: str, wanted: Iterable[str], unwanted: Iterable[str],
               match: Callable[[str, str], bool] | None = None) -> tuple[bool, str]:
    """Criterion result: ``text`` names every one of ``wanted`` and none of ``unwanted`` (by
    ``match(text, item)``, default ``mentions_code``), so a message that pastes every id or
    name it saw cannot pass a "mentions X" check."""
    match = match or mentions_code
    missing = [w for w in wanted if not match(text, w)]
    extra = [u for u in unwanted if match(text, u)]
    return not missing and not extra, "; ".join(
        ([f"does not name {missing}"] if missing else []) + ([f"also names {extra}"] if extra else []))


def names_word(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words, ignoring case, spacing, dashes and underscores."""
    t = re.sub(r"[\s_]+", " ", norm(text))
    p = re.sub(r"[\s_]+", " ", norm(phrase))
    return bool(p) and re.search(rf"(?<![a-z0-9]){re.escape(p)}(?![a-z0-9])", t) is not None


# -- "names X as dropped" ---------------------------------------------------------------------

# words that, just before a mention, say it was not done ("not 12 Oak St", "instead of the planned ...")
_REJECT_BEFORE = (r"not|never|no longer|instead of|rather than|dropped|abandoned|rejected|ignored|skipped|scrapped|"
                  r"discarded|did ?n[o']t use|did ?n[o']t apply")
# and just after it ("... was not applied", "... lease fell through", "... (dropped)")
_REJECT_AFTER = (r"(?:was|were|is|are|has been|had been|got|remains?)\s+(?:not|never)|wasn't|weren't|isn't|never|"
                 r"not (?:applied|used|done|taken)|no longer|abandoned|dropped|rejected|ignored|skipped|scrapped|"
                 r"discarded|superseded|cancell?ed|called off|fell through|is off|was off")
_REDIRECT = re.compile(r"\b(?:with|to|by|for|into|as|from)\b")  # "replaced ... with X": the cue is not about X


def affirms(text: str, pattern: str, others: Iterable[str] = ()) -> bool:
    """Whether ``text`` names a match of ``pattern`` as done, not only as dropped: a mention
    counts as rejected when its sentence says so right before it ("new address 3 Elm Rd, not
    12 Oak St", "instead of 12 Oak St") or right after it ("12 Oak St was not applied", "the
    12 Oak St lease fell through", "12 Oak St (dropped)"). A cue only covers the mention it
    touches (three words at most between them, no other match of ``others`` in between), so
    "moved to 12 Oak St, not 3 Elm Rd" still affirms 12 Oak St. ``text`` is matched as given
    (normalise it first); ``pattern`` and ``others`` are regexes."""
    for m in re.finditer(pattern, text):
        start = max([0] + [b.end() for b in re.finditer(r"[;\n!?,]|\.(?:\s|$)", text[:m.start()])])
        before = text[start:m.start()]
        for o in others:
            before = before[max([0] + [x.end() for x in re.finditer(o, before)]):]
        tail = text[m.end():]
        if text[:m.start()].rstrip().endswith(","):  # an aside: "the first address, X, was dropped"
            tail = re.sub(r"^\s*,", "", tail)
        stop = re.search(r"[;\n!?)]|,(?!\s*(?:which|that)\b)|\.(?:\s|$)", tail)
        after = tail[:stop.start() if stop else len(tail)]
        for o in others:
            hit = re.search(o, after)
            after = after[:hit.start()] if hit else after
        cue_before = re.search(rf"\b(?:{_REJECT_BEFORE})\b((?:\W+[\w'-]+){{0,3}})\W*$", before)
        if cue_before and not _REDIRECT.search(cue_before.group(1)):
            continue
        if re.match(rf"\W*(?:[\w'-]+\W+){{0,3}}?(?:{_REJECT_AFTER})\b", after):
            continue
        return True
    return False
