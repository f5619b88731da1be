"""Document task families ("document drafting", "document review") and the grading helpers
they share with the slide-deck families: which tool calls wrote where, the seeded source
files and whether they changed, and tolerant readers for dates, numbers and text."""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from longhorizon.apps.docs.state import norm
from longhorizon.tasks.common import norm_path, sha256, workspace_files, write_files

READ_ONLY_TOOLS = {
    "files__list_dir", "files__read_file", "files__search", "files__file_info",
    "sheets__list_sheets", "sheets__read_range",
    "docs__list_documents", "docs__read_document", "docs__find_text",
    "slides__list_slides", "slides__read_slide",
}
WRITE_ARGS = {"files__copy": ("dst",), "files__move": ("src", "dst")}
"""Which arguments of a mutating tool name what it changes (default: ``path``)."""


def written_paths(call) -> list[str]:
    """Workspace paths a successful tool call may have changed (empty for reads and errors)."""
    if call.is_error or call.name in READ_ONLY_TOOLS or not isinstance(call.arguments, dict):
        return []
    if call.app not in ("files", "sheets", "docs", "slides"):
        return []
    keys = WRITE_ARGS.get(call.name, ("path",))
    return [norm_path(call.arguments[k]) for k in keys if k in call.arguments]


def writes_to(trajectory, targets: Iterable[str]) -> list[str]:
    """Targets some successful mutating call touched (a file, or a folder above it)."""
    targets = list(targets)
    hits = []
    for call in trajectory.tool_calls:
        for w in written_paths(call):
            hits.extend(f"{t} (by {call.name})" for t in targets
                        if w == "." or w == t or t.startswith(w + "/"))
    return hits


def last_write_index(trajectory, target: str) -> int:
    """Position (in ``trajectory.tool_calls``) of the last successful call that wrote ``target``; -1 if none."""
    last = -1
    for i, call in enumerate(trajectory.tool_calls):
        if target in written_paths(call):
            last = i
    return last


class Sources:
    """Seed files of a World (workspace path -> bytes), made once on first use and shared by
    ``build`` and the graders that check nothing changed."""

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
        out = []
        for rel in (only if only is not None else self.bytes):
            p = world.file(rel)
            if not p.is_file() or sha256(p.read_bytes()) != sha256(self.bytes[rel]):
                out.append(rel)
        return out

    def unchanged(self, world, traj) -> tuple[bool, str]:
        """Criterion check: every seed file is byte-identical."""
        changed = self.changed(world)
        return not changed, f"changed or missing: {changed}"

    def not_written(self, world, traj) -> tuple[bool, str]:
        """Criterion check: no successful tool call wrote to a seed file."""
        hits = writes_to(traj, self.bytes)
        return not hits, f"wrote to sources: {hits}"

    def only_created(self, made: str) -> Callable:
        """A criterion check: the workspace holds no new file besides ``made``."""
        def check(world, traj):
            extra = sorted(workspace_files(world) - set(self.bytes) - {made})
            return not extra, f"unexpected files: {extra}"
        return check


# -- tolerant readers ------------------------------------------------------------------------------

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_MONTHS["sept"] = 9
_MON = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DATE_PATTERNS = [
    re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b"),
    re.compile(r"\b(?P<y>\d{4})/(?P<m>\d{1,2})/(?P<d>\d{1,2})\b"),
    re.compile(r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MON + r",?(?:\s+(?P<y>\d{4}))?\b", re.I),
    re.compile(r"\b" + _MON + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(?P<y>\d{4}))?", re.I),
]


def find_dates(text: str, default_year: int | None = None) -> list[dt.date]:
    """Calendar dates written in ``text``, in order: 2026-04-18, 2026/04/18, 18 April 2026,
    18 Apr, April 18, 2026, Apr 18 ... (a missing year is ``default_year``; without one such
    dates are skipped). Numeric day/month orders other than year-first are ambiguous and ignored."""
    return [d for _, _, d in _date_spans(text, default_year)]


def strip_dates(text: str) -> str:
    """``text`` with every date ``find_dates`` sees (with or without a year) blanked out."""
    out = text or ""
    for start, stop, _ in reversed(_date_spans(out, 2000)):
        out = out[:start] + " " + out[stop:]
    return out


def _date_spans(text: str, default_year: int | None) -> list[tuple[int, int, dt.date]]:
    found: list[tuple[int, int, dt.date]] = []
    for pat in _DATE_PATTERNS:
        for m in pat.finditer(text or ""):
            g = m.groupdict()
            month = int(g["m"]) if g.get("m") else _MONTHS.get(g["mon"].lower().rstrip("."))
            year = int(g["y"]) if g.get("y") else default_year
            if month is None or year is None:
                continue
            try:
                found.append((m.start(), m.end(), dt.date(year, month, int(g["d"]))))
            except ValueError:
                continue
    found.sort()
    out, end = [], -1
    for start, stop, d in found:
        if start >= end:
            out.append((start, stop, d))
            end = stop
    return out


_NUMBER = re.compile(r"(?<![\w.])[-(]?\$?\s?\d[\d,]*(?:\.\d+)?\s?(?:%|[kKmM]\b|bn\b)?\)?")


def find_numbers(text: str) -> list[float]:
    """Numbers written in ``text``: 1,234.5 / $1,234 / 12% / $1.2M / 850k / (12) -> floats
    (k, M and bn scale the value; % is dropped)."""
    out = []
    for m in _NUMBER.finditer(text or ""):
        s = m.group().strip()
        neg = s.startswith("(") and s.endswith(")") or s.startswith("-")
        s = s.strip("()-").replace("$", "").replace(",", "").strip()
        scale = 1.0
        for suffix, mult in (("bn", 1e9), ("k", 1e3), ("K", 1e3), ("m", 1e6), ("M", 1e6), ("%", 1.0)):
            if s.endswith(suffix):
                s, scale = s[: -len(suffix)].strip(), mult
                break
        try:
            x = float(s) * scale
        except ValueError:
            continue
        out.append(-x if neg else x)
    return out


def person(fake) -> str:
    """A plain "First Last" name (Faker's ``name()`` sometimes adds titles like "MD")."""
    return f"{fake.first_name()} {fake.last_name()}"


def mentions(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` ignoring case, whitespace, dashes and end punctuation."""
    return norm(phrase).rstrip(".?!") in norm(text)


def words_in(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` as whole words (case-insensitive)."""
    return re.search(r"(?<!\w)" + re.escape(norm(phrase)) + r"(?!\w)", norm(text)) is not None


__all__ = [
    "READ_ONLY_TOOLS", "Sources", "find_dates", "find_numbers", "last_write_index", "mentions",
    "norm", "parse_json", "person", "strip_dates", "words_in", "workspace_files", "writes_to", "written_paths",
]
