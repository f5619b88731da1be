"""SQL analytics task families and the tolerant parsing their graders share (months,
percentages, numbers quoted in mail bodies)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from longhorizon.tasks.common import to_number

MONTH_NAMES = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
               "october", "november", "december"]


def add_months(d: dt.date, n: int) -> dt.date:
    """The first day of the month ``n`` months after ``d``'s month."""
    y, m = divmod(d.year * 12 + d.month - 1 + n, 12)
    return dt.date(y, m + 1, 1)


def month_end(d: dt.date) -> dt.date:
    return add_months(d, 1) - dt.timedelta(days=1)


def month_label(key: str) -> str:
    """'2025-03' -> 'March 2025'."""
    y, m = key.split("-")
    return f"{MONTH_NAMES[int(m) - 1].capitalize()} {y}"


def month_key(v: Any) -> str | None:
    """A cell naming a month -> 'YYYY-MM': '2025-03', '2025-03-01', 'Mar 2025', 'March 2025',
    '03/2025', or a date; None when it is not one."""
    if isinstance(v, (dt.date, dt.datetime)):
        return f"{v.year:04d}-{v.month:02d}"
    s = " ".join(str(v or "").lower().replace(",", " ").split())
    m = re.fullmatch(r"(\d{4})[-/.](\d{1,2})(?:[-/.]\d{1,2})?", s)
    if m:
        return f"{int(m.group(1)):04d}-{int(m.group(2)):02d}" if 1 <= int(m.group(2)) <= 12 else None
    m = re.fullmatch(r"(\d{1,2})[-/.](\d{4})", s)
    if m:
        return f"{int(m.group(2)):04d}-{int(m.group(1)):02d}" if 1 <= int(m.group(1)) <= 12 else None
    m = re.fullmatch(r"([a-z]+)\.?\s+(\d{4})", s) or re.fullmatch(r"(\d{4})\s+([a-z]+)", s)
    if m:
        name, year = (m.group(1), m.group(2)) if not m.group(1).isdigit() else (m.group(2), m.group(1))
        for i, full in enumerate(MONTH_NAMES, start=1):
            if len(name) >= 3 and full.startswith(name):
                return f"{int(year):04d}-{i:02d}"
    return None


def to_pct(v: Any) -> float | None:
    """A percentage cell: 12.5, '12.5%', ' 12.5 % ' -> 12.5 (a fraction 0.125 stays 0.125:
    ``pct_close`` decides which reading matches)."""
    if isinstance(v, str):
        v = v.strip().rstrip("%").strip()
    return to_number(v)


def pct_close(v: Any, truth: float, tol: float = 0.1) -> bool:
    """A percentage written as percent (12.5, '12.5%') or as a fraction (0.125) within ``tol`` points."""
    x = to_pct(v)
    if x is None:
        return False
    return abs(x - truth) <= tol + 1e-9 or abs(x * 100 - truth) <= tol + 1e-9


def numbers_in(text: str) -> list[float]:
    """Every number in free text, with thousands separators, currency signs and % dropped."""
    out = []
    for m in re.finditer(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?", text or ""):
        try:
            out.append(float(m.group().replace(",", "")))
        except ValueError:
            continue
    return out


def mentions_number(text: str, value: float, tol: float) -> bool:
    return any(abs(n - value) <= tol + 1e-9 or abs(abs(n) - abs(value)) <= tol + 1e-9 and n >= 0 > value
               for n in numbers_in(text))


def mentions_month(text: str, key: str) -> bool:
    """'2025-03' is named as '2025-03', 'March 2025', 'Mar 2025' or just 'March'."""
    t = (text or "").lower()
    year, month = key.split("-")
    name = MONTH_NAMES[int(month) - 1]
    if key in t or f"{int(month)}/{year}" in t or f"{month}/{year}" in t:
        return True
    if re.search(rf"\b(?:{name}|{name[:3]}\.?)\s*'?(?:{year}|{year[2:]})\b", t):
        return True
    return name != "may" and bool(re.search(rf"\b{name}\b", t))  # "may" alone is too common a word
