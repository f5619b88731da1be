"""Helpers shared by the calendar families.

Slot finding runs both in generators (to prove a World solvable) and in oracles (on what
free_busy told them), so both reach the same answer. ``blocks`` and ``snapshot`` read the
event dicts generators seed, in the shapes ``create_calendar`` accepts.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import Any

from longhorizon.apps.calendar.state import TIME_FMT, events, overlaps


def at(d: date, hhmm: str) -> datetime:
    h, m = map(int, hhmm.split(":"))
    return datetime(d.year, d.month, d.day, h, m)


def iso(dt: datetime) -> str:
    return dt.strftime(TIME_FMT)


def first_free(windows: Iterable[tuple[datetime, datetime]], busy: Iterable[tuple[str, str]],
               minutes: int, step: int = 30) -> tuple[str, str] | None:
    """Earliest ``minutes``-long slot starting on a ``step`` boundary inside one of ``windows``
    (tried in order) that overlaps none of ``busy`` (``YYYY-MM-DDTHH:MM`` pairs)."""
    busy = list(busy)
    length = timedelta(minutes=minutes)
    for lo, hi in windows:
        t = lo
        while t + length <= hi:
            s, e = iso(t), iso(t + length)
            if not any(overlaps(s, e, b0, b1) for b0, b1 in busy):
                return s, e
            t += timedelta(minutes=step)
    return None


def intersect_hours(*hours: tuple[str, str]) -> tuple[str, str]:
    """Common part of several ``(HH:MM, HH:MM)`` working-hour ranges."""
    return max(h[0] for h in hours), min(h[1] for h in hours)


def blocks(ev: dict[str, Any], email: str, owner: str) -> bool:
    """Does seeded event ``ev`` make ``email`` busy? Same rule as the app: active, organised or
    attended without declining."""
    if ev.get("status", "active") != "active":
        return False
    if ev.get("organizer", owner) == email:
        return True
    for a in ev.get("attendees", []):
        who, resp = (a, "needs_action") if isinstance(a, str) else (a["email"], a["response"])
        if who == email and resp != "declined":
            return True
    return False


def snapshot(ev: dict[str, Any], owner: str) -> dict[str, Any]:
    """Comparable form of an event, from a seed dict or from ``state.event``: to prove it unchanged."""
    atts = [(a, "needs_action") if isinstance(a, str) else (a["email"], a["response"])
            for a in ev.get("attendees", [])]
    return {"title": ev["title"], "start": ev["start"], "end": ev["end"], "location": ev.get("location", ""),
            "description": ev.get("description", ""), "organizer": ev.get("organizer", owner),
            "status": ev.get("status", "active"), "attendees": atts}


def unchanged_events(world, seeded: dict[int, dict[str, Any]], owner: str,
                     ids: Iterable[int] | None = None) -> bool | tuple[bool, str]:
    """Criterion result: True, or (False, why) for the first of ``ids`` (default: every seeded
    event) that is gone or no longer matches its seeded ``snapshot``."""
    current = {e["id"]: e for e in events(world, include_cancelled=True)}
    for eid in (seeded if ids is None else ids):
        now = current.get(eid)
        if now is None or snapshot(now, owner) != seeded[eid]:
            return False, f"event {eid} ({seeded[eid]['title']!r}) was changed"
    return True
