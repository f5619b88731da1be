"""The `calendar` app: an MCP server over a company calendar seen by its owner.

The owner organises the events they create and is the only one who can change or cancel
them. Creating or moving an event never refuses a clash: like a real calendar it books it
and says who is double-booked or outside working hours, so the agent can decide.
"""

from __future__ import annotations

import json
from contextlib import closing
from datetime import datetime, timedelta
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.calendar.state import (
    TIME_FMT,
    WORK_DAYS,
    busy_events,
    fmt,
    load_event,
    merge,
    parse_email,
    parse_time,
    person,
    query_events,
    within_working_hours,
)
from longhorizon.apps.common import ADD, READ, SET, AppServer, cap, server_builder, sqlite_connector

INSTRUCTIONS = (
    "The company calendar, as seen by its owner (the user). Times are local, written "
    "YYYY-MM-DDTHH:MM (e.g. 2026-03-02T09:00). Working hours are Monday to Friday. "
    "Use free_busy to find open slots and list_people to find addresses."
)
MAX_RANGE_DAYS = 62


def _dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


def _time(value: str, name: str) -> str:
    try:
        return fmt(parse_time(value))
    except (ValueError, TypeError) as exc:
        raise ToolError(
            f"{name}={value!r} is not a valid time ({exc}); use local YYYY-MM-DDTHH:MM, e.g. 2026-03-02T09:30"
        ) from None


def _bound(value: str, name: str, is_end: bool) -> str:
    """A range bound: a time, or a bare date (whole day: start of it, or end of it for ``end``)."""
    v = str(value).strip()
    if len(v) == 10:
        try:
            d = datetime.fromisoformat(v)
        except ValueError:
            raise ToolError(f"{name}={value!r} is not a date; use YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
        return fmt(d + timedelta(days=1) if is_end else d)
    return _time(v, name)


def _range(start: str, end: str) -> tuple[str, str]:
    s, e = _bound(start, "start", False), _bound(end, "end", True)
    if e <= s:
        raise ToolError(f"end ({e}) must be after start ({s})")
    if datetime.strptime(e, TIME_FMT) - datetime.strptime(s, TIME_FMT) > timedelta(days=MAX_RANGE_DAYS):
        raise ToolError(f"the range may span at most {MAX_RANGE_DAYS} days; ask for a shorter one")
    return s, e


def _emails(values: list[str], field: str) -> list[str]:
    out = []
    for v in values:
        e = parse_email(v)
        if e is None:
            raise ToolError(f"{field}: {v!r} is not a valid email address (name@domain.tld); see list_people")
        if e not in out:
            out.append(e)
    return out


def _hours(p: dict) -> dict:
    return {"start": p["work_start"], "end": p["work_end"], "days": WORK_DAYS}


def make_app(world):
    db_path = world.db_path("calendar")
    srv = AppServer("calendar", instructions=INSTRUCTIONS)

    connect = sqlite_connector(db_path, "calendar", "calendar")

    def owner(conn) -> str:
        return conn.execute("SELECT value FROM meta WHERE key = 'owner'").fetchone()[0]

    def get(conn, event_id: int) -> dict:
        ev = load_event(conn, event_id)
        if ev is None:
            raise ToolError(f"no event with id {event_id}; use list_events to find ids")
        return ev

    def editable(conn, event_id: int) -> dict:
        ev = get(conn, event_id)
        me = owner(conn)
        if ev["organizer"] != me:
            raise ToolError(
                f"event {event_id} is organised by {ev['organizer']}; only its organiser can change or cancel it"
            )
        if ev["status"] == "cancelled":
            raise ToolError(f"event {event_id} is cancelled; create a new event instead")
        return ev

    def notes(conn, ev: dict) -> str:
        """Who is double-booked or outside working hours for ``ev`` (an advisory, not a refusal)."""
        lines = []
        me = owner(conn)
        for email in [me, *(a["email"] for a in ev["attendees"])]:
            clashes = [b for b in busy_events(conn, email, ev["start"], ev["end"]) if b["id"] != ev["id"]]
            for b in clashes:
                lines.append(
                    f"conflict: {email} is busy {b['start']}–{b['end'][-5:]} ({b['title']!r}, event {b['id']})"
                )
            p = person(conn, email)
            if p is None:
                lines.append(f"note: {email} is not in the company directory (invited as an external guest)")
            elif not within_working_hours(p, ev["start"], ev["end"]):
                lines.append(
                    f"note: outside {email}'s working hours ({p['work_start']}-{p['work_end']}, {WORK_DAYS})"
                )
        return ("\n" + "\n".join(lines)) if lines else ""

    def set_attendees(conn, event_id: int, emails: list[str], keep: dict[str, str]) -> None:
        conn.execute("DELETE FROM attendees WHERE event_id = ?", (event_id,))
        conn.executemany(
            "INSERT INTO attendees VALUES (?, ?, ?, ?)",
            [(event_id, e, keep.get(e, "needs_action"), i) for i, e in enumerate(emails)],
        )

    def when(ev: dict) -> str:
        return f"{ev['start']}–{ev['end'][-5:]}" if ev["start"][:10] == ev["end"][:10] else f"{ev['start']}–{ev['end']}"

    @srv.tool(READ)
    def list_events(start: str, end: str, attendee: str | None = None) -> str:
        """List active events overlapping a time range, ordered by start.

        Args:
            start: range start, YYYY-MM-DD or YYYY-MM-DDTHH:MM.
            end: range end; a bare date includes that whole day.
            attendee: whose events (organised or invited) to list; default is the owner's own calendar.

        Returns JSON [{id, title, start, end, location, organizer,
        attendees: [{email, response}]}]."""
        s, e = _range(start, end)
        with closing(connect()) as conn:
            who = _emails([attendee], "attendee")[0] if attendee else owner(conn)
            evs = query_events(conn, s, e, involving=who)
        return _dumps([{k: v for k, v in ev.items() if k not in ("description", "status")} for ev in evs])

    @srv.tool(READ)
    def get_event(event_id: int) -> str:
        """Full details of one event, including its description and status (active/cancelled).

        Returns JSON {id, title, start, end, location, description, organizer,
        status, attendees: [{email, response}]}."""
        with closing(connect()) as conn:
            return _dumps(get(conn, event_id))

    @srv.tool(ADD)
    def create_event(title: str, start: str, end: str, attendees: list[str] = [], location: str = "",
                     description: str = "") -> str:
        """Create an event organised by the owner and invite attendees.

        Args:
            title: event title (not empty).
            start: local start time, YYYY-MM-DDTHH:MM.
            end: local end time, YYYY-MM-DDTHH:MM, after start.
            attendees: email addresses to invite (the owner attends as organiser automatically).
            location: optional room or link.
            description: optional agenda/notes.

        Returns the new event id, plus any conflicts or working-hours problems for the owner
        and attendees (the event is created anyway; update or cancel it if that is not wanted)."""
        if not title.strip():
            raise ToolError("title must not be empty")
        s, e = _time(start, "start"), _time(end, "end")
        if e <= s:
            raise ToolError(f"end ({e}) must be after start ({s})")
        with closing(connect()) as conn, conn:
            me = owner(conn)
            guests = [a for a in _emails(attendees, "attendees") if a != me]
            cur = conn.execute(
                'INSERT INTO events (title, start, "end", location, description, organizer, status)'
                " VALUES (?, ?, ?, ?, ?, ?, 'active')",
                (title.strip(), s, e, location.strip(), description, me),
            )
            eid = cur.lastrowid
            set_attendees(conn, eid, guests, {})
            ev = get(conn, eid)
            extra = notes(conn, ev)
        who = f" with {', '.join(guests)}" if guests else ""
        return f"Created event {eid} {ev['title']!r} {when(ev)}{who}.{extra}"

    @srv.tool(SET)
    def update_event(event_id: int, title: str | None = None, start: str | None = None, end: str | None = None,
                     attendees: list[str] | None = None, location: str | None = None,
                     description: str | None = None) -> str:
        """Change an event the owner organises. Only the fields you pass change; ``attendees``
        replaces the whole guest list (people kept keep their responses).

        Returns what changed, plus any conflicts or working-hours problems."""
        with closing(connect()) as conn, conn:
            ev = editable(conn, event_id)
            new = dict(ev)
            if title is not None:
                if not title.strip():
                    raise ToolError("title must not be empty")
                new["title"] = title.strip()
            if start is not None:
                new["start"] = _time(start, "start")
            if end is not None:
                new["end"] = _time(end, "end")
            if new["end"] <= new["start"]:
                raise ToolError(f"end ({new['end']}) must be after start ({new['start']})")
            if location is not None:
                new["location"] = location.strip()
            if description is not None:
                new["description"] = description
            changed = [k for k in ("title", "start", "end", "location", "description") if new[k] != ev[k]]
            conn.execute(
                'UPDATE events SET title = ?, start = ?, "end" = ?, location = ?, description = ? WHERE id = ?',
                (new["title"], new["start"], new["end"], new["location"], new["description"], event_id),
            )
            if attendees is not None:
                me = owner(conn)
                guests = [a for a in _emails(attendees, "attendees") if a != me]
                if guests != [a["email"] for a in ev["attendees"]]:
                    changed.append("attendees")
                set_attendees(conn, event_id, guests, {a["email"]: a["response"] for a in ev["attendees"]})
            ev = get(conn, event_id)
            extra = notes(conn, ev)
        what = ", ".join(changed) if changed else "nothing (values were already the same)"
        return f"Updated event {event_id} {ev['title']!r} {when(ev)}: changed {what}.{extra}"

    @srv.tool(SET)
    def cancel_event(event_id: int) -> str:
        """Cancel an event the owner organises (attendees' time is freed). Cannot be undone."""
        with closing(connect()) as conn, conn:
            ev = editable(conn, event_id)
            conn.execute("UPDATE events SET status = 'cancelled' WHERE id = ?", (event_id,))
        return f"Cancelled event {event_id} {ev['title']!r} {when(ev)}."

    @srv.tool(READ)
    def free_busy(emails: list[str], start: str, end: str) -> str:
        """When people are busy in a range, and their working hours, to find a common free slot.

        Args:
            emails: addresses to look up (see list_people).
            start: range start, YYYY-MM-DD or YYYY-MM-DDTHH:MM.
            end: range end; a bare date includes that whole day.

        Returns JSON {start, end, people: [{email, name, timezone,
        working_hours: {start, end, days}, busy: [{start, end}]}]}.
        Busy intervals are merged; cancelled events and declined invitations are not busy."""
        s, e = _range(start, end)
        wanted = _emails(emails, "emails")
        if not wanted:
            raise ToolError("emails must list at least one address")
        with closing(connect()) as conn:
            out = []
            for email in wanted:
                p = person(conn, email)
                if p is None:
                    raise ToolError(
                        f"{email} is not in the company directory; use list_people to find the right address"
                    )
                spans = merge((max(b["start"], s), min(b["end"], e)) for b in busy_events(conn, email, s, e))
                out.append({
                    "email": email, "name": p["name"], "timezone": p["timezone"],
                    "working_hours": _hours(p), "busy": [{"start": a, "end": b} for a, b in spans],
                })
        return _dumps({"start": s, "end": e, "people": out})

    @srv.tool(READ)
    def list_people(query: str | None = None) -> str:
        """Find people in the company directory by name or email (case-insensitive substring);
        no query lists everyone.

        Returns JSON [{email, name, timezone, working_hours: {start, end, days}}]."""
        with closing(connect()) as conn:
            rows = [dict(r) for r in conn.execute("SELECT * FROM people ORDER BY name, email")]
        q = (query or "").strip().lower()
        hits = [p for p in rows if q in p["name"].lower() or q in p["email"]]
        return _dumps([
            {"email": p["email"], "name": p["name"], "timezone": p["timezone"], "working_hours": _hours(p)}
            for p in hits
        ])

    return srv


build_server = server_builder(make_app)
