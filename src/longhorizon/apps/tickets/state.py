"""Tickets app state: an issue tracker in SQLite (``state/tickets.sqlite``).

Projects are either ``support`` queues (keys like SUP-123) or ``project`` boards (PRJ-45);
each kind has its own workflow of statuses and allowed transitions (``WORKFLOWS``). Tickets
carry priority P1-P4, an assignee and/or a team, labels, an estimate in story points, a
sprint, a parent epic, and for support tickets the customer and product component. Comments,
links between tickets and a history of field changes are kept beside them.

``create_tracker`` is deterministic. The tracker has its own clock (``meta.now``): every
write is stamped from it and moves it on a minute.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

NOW_FMT = "%Y-%m-%dT%H:%M:%S"

WORKFLOWS: dict[str, dict[str, tuple[str, ...]]] = {
    "support": {
        "New": ("Triaged", "In Progress", "Waiting on Customer", "Closed"),
        "Triaged": ("In Progress", "Waiting on Customer", "Resolved", "Closed"),
        "In Progress": ("Triaged", "Waiting on Customer", "Resolved", "Closed"),
        "Waiting on Customer": ("In Progress", "Resolved", "Closed"),
        "Resolved": ("Closed", "In Progress"),
        "Closed": ("Triaged",),
    },
    "project": {
        "To Do": ("In Progress", "Won't Do"),
        "In Progress": ("To Do", "In Review", "Done"),
        "In Review": ("In Progress", "Done"),
        "Done": ("In Progress",),
        "Won't Do": ("To Do",),
    },
}
"""status -> statuses it may move to, per project kind. The first status is where tickets start."""
DONE_STATUSES = {"support": ("Resolved", "Closed"), "project": ("Done", "Won't Do")}
"""Statuses that count as finished (a resolution is kept for them)."""
RESOLUTIONS = ("Fixed", "Answered", "Duplicate", "Won't Fix", "Cannot Reproduce", "Done", "Won't Do")
PRIORITIES = {"P1": "Critical", "P2": "High", "P3": "Medium", "P4": "Low"}
TYPES = ("bug", "task", "story", "epic", "question", "incident")
LINK_KINDS = {"duplicates": "is duplicated by", "blocks": "is blocked by", "relates to": "relates to"}
"""Stored direction (source KIND target) -> how the target sees it."""
SPRINT_STATES = ("closed", "active", "planned")

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE projects (
    key TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('support', 'project')),
    next_number INTEGER NOT NULL
);
CREATE TABLE teams (name TEXT PRIMARY KEY, description TEXT NOT NULL DEFAULT '');
CREATE TABLE users (
    username TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    team TEXT REFERENCES teams(name)
);
CREATE TABLE sprints (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects(key),
    name TEXT NOT NULL,
    start TEXT NOT NULL,
    "end" TEXT NOT NULL,
    state TEXT NOT NULL,
    goal TEXT NOT NULL DEFAULT ''
);
CREATE TABLE tickets (
    key TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects(key),
    number INTEGER NOT NULL,
    type TEXT NOT NULL,
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    resolution TEXT,
    priority TEXT NOT NULL,
    assignee TEXT,
    team TEXT,
    reporter TEXT NOT NULL,
    customer TEXT NOT NULL DEFAULT '',
    component TEXT NOT NULL DEFAULT '',
    labels TEXT NOT NULL DEFAULT '[]',
    due_date TEXT,
    estimate INTEGER,
    sprint_id INTEGER,
    parent TEXT,
    created TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE TABLE comments (
    id INTEGER PRIMARY KEY,
    ticket TEXT NOT NULL REFERENCES tickets(key),
    author TEXT NOT NULL,
    body TEXT NOT NULL,
    internal INTEGER NOT NULL DEFAULT 0,
    created TEXT NOT NULL
);
CREATE TABLE links (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL REFERENCES tickets(key),
    target TEXT NOT NULL REFERENCES tickets(key),
    kind TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE history (
    id INTEGER PRIMARY KEY,
    ticket TEXT NOT NULL,
    field TEXT NOT NULL,
    old TEXT,
    new TEXT,
    author TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX tickets_project ON tickets(project, number);
CREATE INDEX comments_ticket ON comments(ticket);
"""


def advance(clock: str, minutes: int = 1) -> str:
    return (datetime.strptime(clock, NOW_FMT) + timedelta(minutes=minutes)).strftime(NOW_FMT)


def canonical(value: Any, choices: Iterable[str]) -> str | None:
    """``value`` matched to one of ``choices`` ignoring case, spaces, dashes and apostrophes."""
    key = re.sub(r"[^a-z0-9]", "", str(value or "").lower())
    for c in choices:
        if re.sub(r"[^a-z0-9]", "", c.lower()) == key:
            return c
    return None


def canonical_priority(value: Any) -> str | None:
    """'P2', 'p2', '2', 'High' -> 'P2'; None when it is not a priority."""
    v = str(value or "").strip()
    if re.fullmatch(r"[pP]?[1-4]", v):
        return f"P{v[-1]}"
    by_name = canonical(v, PRIORITIES.values())
    return next((p for p, n in PRIORITIES.items() if n == by_name), None) if by_name else None


def parse_key(value: Any) -> str | None:
    """'sup-12' -> 'SUP-12'; None when it is not shaped like a ticket key."""
    v = str(value or "").strip().upper()
    return v if re.fullmatch(r"[A-Z][A-Z0-9]*-\d+", v) else None


def clean_labels(values: Iterable[Any]) -> list[str]:
    """Labels stripped and de-duplicated case-insensitively, in order; ValueError for a bad one."""
    out: list[str] = []
    for v in values:
        label = str(v).strip()
        if not label or re.search(r"\s", label) or len(label) > 40:
            raise ValueError(label)
        if label.lower() not in [x.lower() for x in out]:
            out.append(label)
    return out


def create_tracker(
    db_path: Path | str,
    *,
    me: str,
    projects: Iterable[Mapping[str, Any]],
    teams: Iterable[Mapping[str, Any]] = (),
    users: Iterable[Mapping[str, Any]] = (),
    sprints: Iterable[Mapping[str, Any]] = (),
    tickets: Iterable[Mapping[str, Any]] = (),
    comments: Iterable[Mapping[str, Any]] = (),
    links: Iterable[Mapping[str, Any]] = (),
    now: str,
    history: Iterable[Mapping[str, Any]] = (),
) -> Path:
    """Write a new tracker. Same arguments -> byte-identical file.

    ``me``: username of the person using the tracker (must be in ``users``).
    ``projects``: ``key, name, kind`` (support/project). ``teams``: ``name`` and optional ``description``.
    ``users``: ``username, name, email`` and optional ``team``.
    ``sprints``: ``project, name, start, end, state`` and optional ``goal, id`` (ids 1, 2, ...).
    ``tickets``: ``project, title`` and optionally ``number`` (default: next in the project), ``type``
    (task), ``description, status`` (the workflow's first), ``resolution, priority`` (P3), ``assignee,
    team, reporter`` (me), ``customer, component, labels, due_date, estimate, sprint`` (a sprint name),
    ``parent, created`` (default ``now``), ``updated`` (default ``created``).
    ``comments``: ``ticket, body`` and optional ``author, internal, created``.
    ``links``: ``source, target, kind`` (a key of ``LINK_KINDS``).
    ``history``: past field changes, ``ticket, field, at`` and optional ``old, new, author`` (me),
    e.g. ``{"ticket": "SUP-7", "field": "status", "old": "In Progress", "new": "Resolved", "at": ...}``;
    stored in the given order (ids 1, 2, ...), as the tools record their own changes.
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    clock = datetime.fromisoformat(now).strftime(NOW_FMT)
    proj_rows = {p["key"]: [p["key"], p["name"], p["kind"], 1] for p in projects}
    for p in proj_rows.values():
        if p[2] not in WORKFLOWS or not re.fullmatch(r"[A-Z][A-Z0-9]*", p[0]):
            raise ValueError(f"project {p[0]!r}: bad key or kind")
    team_rows = [(t["name"], t.get("description", "")) for t in teams]
    team_names = {t[0] for t in team_rows}
    user_rows = [(u["username"], u["name"], u["email"].lower(), u.get("team")) for u in users]
    usernames = {u[0] for u in user_rows}
    if me not in usernames:
        raise ValueError("me must be one of the users")
    for u in user_rows:
        if u[3] is not None and u[3] not in team_names:
            raise ValueError(f"user {u[0]}: unknown team {u[3]!r}")
    sprint_rows, sprint_ids = [], {}
    for i, s in enumerate(sprints, start=1):
        sid = int(s.get("id", i))
        if s["state"] not in SPRINT_STATES or s["project"] not in proj_rows:
            raise ValueError(f"sprint {s['name']!r}: bad state or project")
        sprint_rows.append((sid, s["project"], s["name"], date.fromisoformat(s["start"]).isoformat(),
                            date.fromisoformat(s["end"]).isoformat(), s["state"], s.get("goal", "")))
        sprint_ids[(s["project"], s["name"])] = sid
    ticket_rows = []
    for t in tickets:
        proj = proj_rows[t["project"]]
        number = int(t.get("number", proj[3]))
        proj[3] = max(proj[3], number + 1)
        flow = WORKFLOWS[proj[2]]
        status = t.get("status", next(iter(flow)))
        priority = canonical_priority(t.get("priority", "P3"))
        kind = t.get("type", "task")
        if status not in flow or priority is None or kind not in TYPES:
            raise ValueError(f"ticket {proj[0]}-{number}: bad status, priority or type")
        for who in (t.get("assignee"), t.get("reporter", me)):
            if who is not None and who not in usernames:
                raise ValueError(f"ticket {proj[0]}-{number}: unknown user {who!r}")
        if t.get("team") is not None and t["team"] not in team_names:
            raise ValueError(f"ticket {proj[0]}-{number}: unknown team {t['team']!r}")
        sprint = sprint_ids[(proj[0], t["sprint"])] if t.get("sprint") else None
        created = datetime.fromisoformat(t.get("created", clock)).strftime(NOW_FMT)
        updated = datetime.fromisoformat(t["updated"]).strftime(NOW_FMT) if t.get("updated") else created
        ticket_rows.append((
            f"{proj[0]}-{number}", proj[0], number, kind, t["title"], t.get("description", ""), status,
            t.get("resolution"), priority, t.get("assignee"), t.get("team"), t.get("reporter", me),
            t.get("customer", ""), t.get("component", ""), json.dumps(clean_labels(t.get("labels", []))),
            t.get("due_date"), t.get("estimate"), sprint, t.get("parent"), created, updated,
        ))
    keys = {r[0] for r in ticket_rows}
    comment_rows = []
    for i, c in enumerate(comments, start=1):
        if c["ticket"] not in keys:
            raise ValueError(f"comment {i}: unknown ticket {c['ticket']!r}")
        created = datetime.fromisoformat(c.get("created", clock)).strftime(NOW_FMT)
        comment_rows.append((i, c["ticket"], c.get("author", me), c["body"], int(bool(c.get("internal", False))),
                             created))
    link_rows = []
    for i, ln in enumerate(links, start=1):
        if ln["kind"] not in LINK_KINDS or ln["source"] not in keys or ln["target"] not in keys:
            raise ValueError(f"link {i}: bad kind or ticket")
        link_rows.append((i, ln["source"], ln["target"], ln["kind"], clock))
    history_rows = []
    for i, h in enumerate(history, start=1):
        if h["ticket"] not in keys:
            raise ValueError(f"history {i}: unknown ticket {h['ticket']!r}")
        if h.get("author", me) not in usernames:
            raise ValueError(f"history {i}: unknown user {h.get('author')!r}")
        show = lambda v: None if v is None else (json.dumps(v) if isinstance(v, list) else str(v))  # noqa: E731
        history_rows.append((i, h["ticket"], h["field"], show(h.get("old")), show(h.get("new")), h.get("author", me),
                             datetime.fromisoformat(h["at"]).strftime(NOW_FMT)))
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [("me", me), ("now", clock)])
        conn.executemany("INSERT INTO projects VALUES (?,?,?,?)", [tuple(p) for p in proj_rows.values()])
        conn.executemany("INSERT INTO teams VALUES (?,?)", team_rows)
        conn.executemany("INSERT INTO users VALUES (?,?,?,?)", user_rows)
        conn.executemany("INSERT INTO sprints VALUES (?,?,?,?,?,?,?)", sprint_rows)
        conn.executemany("INSERT INTO tickets VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", ticket_rows)
        conn.executemany("INSERT INTO comments VALUES (?,?,?,?,?,?)", comment_rows)
        conn.executemany("INSERT INTO links VALUES (?,?,?,?,?)", link_rows)
        conn.executemany("INSERT INTO history VALUES (?,?,?,?,?,?,?)", history_rows)
        conn.commit()
    return db_path


# -- readers shared by tools and graders ----------------------------------------------------

def ticket_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    d = dict(row)
    d["labels"] = json.loads(d["labels"])
    return d


def tickets(world, project: str | None = None) -> list[dict[str, Any]]:
    with closing(world.db("tickets")) as conn:
        if project:
            rows = conn.execute("SELECT * FROM tickets WHERE project = ? ORDER BY project, number", (project,))
        else:
            rows = conn.execute("SELECT * FROM tickets ORDER BY project, number")
        return [ticket_dict(r) for r in rows.fetchall()]


def ticket(world, key: str) -> dict[str, Any] | None:
    with closing(world.db("tickets")) as conn:
        row = conn.execute("SELECT * FROM tickets WHERE key = ?", (key,)).fetchone()
    return ticket_dict(row) if row else None


def comments(world, key: str | None = None) -> list[dict[str, Any]]:
    with closing(world.db("tickets")) as conn:
        if key is None:
            rows = conn.execute("SELECT * FROM comments ORDER BY id")
        else:
            rows = conn.execute("SELECT * FROM comments WHERE ticket = ? ORDER BY id", (key,))
        return [dict(r) for r in rows.fetchall()]


def links(world) -> list[dict[str, Any]]:
    with closing(world.db("tickets")) as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM links ORDER BY id").fetchall()]


def sprints(world) -> list[dict[str, Any]]:
    with closing(world.db("tickets")) as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM sprints ORDER BY id").fetchall()]


def sprint_id(world, project: str, name: str) -> int | None:
    return next((s["id"] for s in sprints(world) if s["project"] == project and s["name"] == name), None)


def history(world, key: str | None = None) -> list[dict[str, Any]]:
    with closing(world.db("tickets")) as conn:
        if key is None:
            rows = conn.execute("SELECT * FROM history ORDER BY id")
        else:
            rows = conn.execute("SELECT * FROM history WHERE ticket = ? ORDER BY id", (key,))
        return [dict(r) for r in rows.fetchall()]


def has_link(world, source: str, target: str, kind: str) -> bool:
    """Whether ``source KIND target`` holds (stored either way round for 'relates to')."""
    for ln in links(world):
        if ln["kind"] != kind:
            continue
        if (ln["source"], ln["target"]) == (source, target):
            return True
        if kind == "relates to" and (ln["source"], ln["target"]) == (target, source):
            return True
    return False
