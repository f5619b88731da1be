"""Calendar app state: a company calendar seen by one owner, in SQLite (``state/calendar.sqlite``).

Times are local wall-clock times without a zone, ``YYYY-MM-DDTHH:MM``; working hours are
``HH:MM`` in the same local time, Monday to Friday. A person is busy during an active event
they organise or attend without having declined it. ``create_calendar`` is deterministic.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

TIME_FMT = "%Y-%m-%dT%H:%M"
RESPONSES = ("accepted", "tentative", "declined", "needs_action")
WORK_DAYS = "Mon-Fri"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE people (
    email TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    timezone TEXT NOT NULL DEFAULT '',
    work_start TEXT NOT NULL DEFAULT '09:00',
    work_end TEXT NOT NULL DEFAULT '17:00'
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    start TEXT NOT NULL,
    "end" TEXT NOT NULL,
    location TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    organizer TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'cancelled'))
);
CREATE TABLE attendees (
    event_id INTEGER NOT NULL REFERENCES events(id),
    email TEXT NOT NULL,
    response TEXT NOT NULL DEFAULT 'needs_action',
    position INTEGER NOT NULL,
    PRIMARY KEY (event_id, email)
);
CREATE INDEX events_start ON events(start);
"""

_EMAIL = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
_HHMM = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


def parse_email(text: str) -> str | None:
    """Lower-cased address, or None when it is not one (``Name <a@b.c>`` is accepted)."""
    if not isinstance(text, str):
        return None
    t = text.strip()
    if t.endswith(">") and "<" in t:
        t = t[t.rindex("<") + 1:-1].strip()
    t = t.lower()
    return t if _EMAIL.match(t) else None


def parse_time(value: str) -> datetime:
    """``YYYY-MM-DDTHH:MM`` (seconds allowed if zero, a space instead of T allowed) -> datetime.

    ValueError for anything else, including dates without a time and zone offsets."""
    v = str(value).strip()
    dt = datetime.fromisoformat(v)
    if len(v) <= 10:
        raise ValueError("a time of day is required")
    if dt.tzinfo is not None:
        raise ValueError("times are local: leave out the zone offset")
    if dt.second or dt.microsecond:
        raise ValueError("times have minute precision")
    return dt


def fmt(dt: datetime) -> str:
    return dt.strftime(TIME_FMT)


def overlaps(a_start: str, a_end: str, b_start: str, b_end: str) -> bool:
    """Half-open intervals on normalised strings (which sort like the times they are)."""
    return a_start < b_end and b_start < a_end


def create_calendar(
    db_path: Path | str,
    owner: str,
    people: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]] = (),
    *,
    today: str | None = None,
) -> Path:
    """Write a new calendar. Same arguments -> byte-identical file.

    ``people``: dicts with ``email, name`` and optionally ``timezone, work_start, work_end``.
    ``events``: dicts with ``title, start, end`` and optionally ``attendees`` (emails, or
    ``{"email", "response"}`` dicts), ``organizer`` (default ``owner``), ``location``,
    ``description``, ``status``, ``id``. Ids default to 1, 2, ... in order.
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    owner_email = parse_email(owner)
    if owner_email is None:
        raise ValueError(f"bad owner address {owner!r}")
    people_rows = []
    for p in people:
        email = parse_email(p["email"])
        if email is None:
            raise ValueError(f"bad email {p['email']!r}")
        ws, we = p.get("work_start", "09:00"), p.get("work_end", "17:00")
        if not (_HHMM.match(ws) and _HHMM.match(we) and ws < we):
            raise ValueError(f"{email}: bad working hours {ws}-{we}")
        people_rows.append((email, p["name"], p.get("timezone", ""), ws, we))
    if owner_email not in [r[0] for r in people_rows]:
        raise ValueError("the owner must be listed in people")
    event_rows, attendee_rows = [], []
    for i, e in enumerate(events, start=1):
        eid = int(e.get("id", i))
        start, end = fmt(parse_time(e["start"])), fmt(parse_time(e["end"]))
        if end <= start:
            raise ValueError(f"event {eid}: end must be after start")
        organizer = parse_email(e.get("organizer", owner_email))
        status = e.get("status", "active")
        event_rows.append((eid, e["title"], start, end, e.get("location", ""), e.get("description", ""),
                           organizer, status))
        for pos, a in enumerate(e.get("attendees", [])):
            if isinstance(a, str):
                email, response = a, "needs_action"
            else:
                email, response = a["email"], a.get("response", "needs_action")
            if response not in RESPONSES:
                raise ValueError(f"event {eid}: bad response {response!r}")
            attendee_rows.append((eid, parse_email(email), response, pos))
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        meta = [("owner", owner_email)]
        if today:
            meta.append(("today", date.fromisoformat(today).isoformat()))
        conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
        conn.executemany("INSERT INTO people VALUES (?,?,?,?,?)", people_rows)
        conn.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?)", event_rows)
        conn.executemany("INSERT INTO attendees VALUES (?,?,?,?)", attendee_rows)
        conn.commit()
    return db_path


# -- readers shared by tools and graders --------------------------------------------------

def _event_dict(row: sqlite3.Row, atts: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "id": row["id"], "title": row["title"], "start": row["start"], "end": row["end"],
        "location": row["location"], "description": row["description"],
        "organizer": row["organizer"], "status": row["status"],
        "attendees": [{"email": e, "response": r} for e, r in atts],
    }


def load_event(conn: sqlite3.Connection, event_id: int) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM events WHERE id = ?", (event_id,)).fetchone()
    if row is None:
        return None
    atts = conn.execute(
        "SELECT email, response FROM attendees WHERE event_id = ? ORDER BY position, email", (event_id,)
    ).fetchall()
    return _event_dict(row, [(a[0], a[1]) for a in atts])


def query_events(conn: sqlite3.Connection, start: str | None = None, end: str | None = None,
                 involving: str | None = None, include_cancelled: bool = False) -> list[dict[str, Any]]:
    """Events overlapping [start, end) (all when None), optionally only those ``involving`` a person
    (organizer or attendee, whatever their response), ordered by start then id."""
    sql, args = ["SELECT * FROM events WHERE 1 = 1"], []
    if not include_cancelled:
        sql.append("AND status = 'active'")
    if start is not None:
        sql.append('AND "end" > ?')
        args.append(start)
    if end is not None:
        sql.append("AND start < ?")
        args.append(end)
    if involving is not None:
        sql.append("AND (organizer = ? OR id IN (SELECT event_id FROM attendees WHERE email = ?))")
        args += [involving, involving]
    sql.append("ORDER BY start, id")
    rows = conn.execute(" ".join(sql), args).fetchall()
    atts: dict[int, list[tuple[str, str]]] = {r["id"]: [] for r in rows}
    if rows:
        marks = ",".join("?" * len(atts))
        for eid, email, response in conn.execute(
            f"SELECT event_id, email, response FROM attendees WHERE event_id IN ({marks})"
            " ORDER BY event_id, position, email", list(atts)
        ):
            atts[eid].append((email, response))
    return [_event_dict(r, atts[r["id"]]) for r in rows]


def is_busy_in(ev: dict[str, Any], email: str) -> bool:
    """Does ``ev`` block ``email``'s time? Active, and organised or attended (not declined)."""
    if ev["status"] != "active":
        return False
    if ev["organizer"] == email:
        return True
    return any(a["email"] == email and a["response"] != "declined" for a in ev["attendees"])


def busy_events(conn: sqlite3.Connection, email: str, start: str, end: str) -> list[dict[str, Any]]:
    return [e for e in query_events(conn, start, end, involving=email) if is_busy_in(e, email)]


def person(conn: sqlite3.Connection, email: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM people WHERE email = ?", (email,)).fetchone()
    return dict(row) if row else None


def within_working_hours(p: Mapping[str, Any], start: str, end: str) -> bool:
    """Both ends on the same weekday (Mon-Fri) inside the person's working hours."""
    s, e = datetime.strptime(start, TIME_FMT), datetime.strptime(end, TIME_FMT)
    if s.date() != e.date() or s.weekday() >= 5:
        return False
    return p["work_start"] <= s.strftime("%H:%M") and e.strftime("%H:%M") <= p["work_end"]


def owner(world) -> str:
    with closing(world.db("calendar")) as conn:
        return conn.execute("SELECT value FROM meta WHERE key = 'owner'").fetchone()[0]


def events(world, include_cancelled: bool = False) -> list[dict[str, Any]]:
    """Every event (active only unless asked), ordered by start then id."""
    with closing(world.db("calendar")) as conn:
        return query_events(conn, include_cancelled=include_cancelled)


def event(world, event_id: int) -> dict[str, Any] | None:
    with closing(world.db("calendar")) as conn:
        return load_event(conn, event_id)


def people(world) -> list[dict[str, Any]]:
    with closing(world.db("calendar")) as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM people ORDER BY email")]


def busy(world, email: str, start: str, end: str) -> list[dict[str, Any]]:
    """The events that make ``email`` busy within [start, end) (``YYYY-MM-DDTHH:MM``)."""
    with closing(world.db("calendar")) as conn:
        return busy_events(conn, email.lower(), start, end)


def merge(intervals: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    out: list[list[str]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def day_bounds(d: date) -> tuple[str, str]:
    return fmt(datetime.combine(d, time())), fmt(datetime.combine(d + timedelta(days=1), time()))
