"""Document task families ("document drafting", "document review") and the grading helpers
they share with the slide-deck families: tolerant readers for dates, numbers and text, and
(from ``tasks.common``, re-exported here) which tool calls wrote where and the seeded source
files."""

from __future__ import annotations

import calendar
import datetime as dt
import re

from longhorizon.apps.docs.state import norm
from longhorizon.tasks.common import READ_ONLY_TOOLS, Sources, workspace_files, writes_to, written_paths


def last_write_index(trajectory, target: str) -> int:
    """Position (in ``trajectory.tool_calls``) of the last successful call that wrote ``target``; -1 if none."""
    last = -1
    for i, call in enumerate(trajectory.tool_calls):
        if target in written_paths(call):
            last = i
    return last


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
