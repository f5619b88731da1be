"""Chat app state: a team's chat workspace seen by one user (``state/chat.sqlite``).

Users have handles (``priya.s``); channels have names (``ops``, shown as ``#ops``) and
members; direct messages with a user live in a conversation named ``@handle``. Messages
have integer ids; a reply in a thread points at the thread's first message (``thread_id``).
``@handle`` in a text is a mention. ``create_chat`` is deterministic (fixed insertion order,
no clock reads); the workspace has its own clock (``meta.now``) and each post the agent
makes is stamped from it, a minute apart.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

DATE_FMT = "%Y-%m-%dT%H:%M:%S"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE users (handle TEXT PRIMARY KEY, name TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
                    email TEXT NOT NULL DEFAULT '', position INTEGER NOT NULL);
CREATE TABLE channels (name TEXT PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('channel', 'dm')),
                       topic TEXT NOT NULL DEFAULT '', position INTEGER NOT NULL);
CREATE TABLE members (channel TEXT NOT NULL REFERENCES channels(name), handle TEXT NOT NULL REFERENCES users(handle),
                      PRIMARY KEY (channel, handle));
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    channel TEXT NOT NULL REFERENCES channels(name),
    user TEXT NOT NULL REFERENCES users(handle),
    text TEXT NOT NULL,
    ts TEXT NOT NULL,
    thread_id INTEGER REFERENCES messages(id),
    mentions TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX messages_channel ON messages(channel, thread_id, id);
CREATE TABLE reactions (message_id INTEGER NOT NULL REFERENCES messages(id), user TEXT NOT NULL,
                        emoji TEXT NOT NULL, PRIMARY KEY (message_id, user, emoji));
"""

HANDLE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,31}$")
CHANNEL = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")
MENTION = re.compile(r"(?<![\w@.])@([a-z0-9][a-z0-9._-]*[a-z0-9]|[a-z0-9])", re.IGNORECASE)


def normalize_stamp(value: str) -> str:
    return datetime.fromisoformat(str(value).strip()).replace(tzinfo=None).strftime(DATE_FMT)


def advance(clock: str, minutes: int = 1) -> str:
    return (datetime.strptime(clock, DATE_FMT) + timedelta(minutes=minutes)).strftime(DATE_FMT)


def mentions(text: str, handles: Iterable[str]) -> list[str]:
    """Known handles mentioned as ``@handle`` in ``text``, in order, once each."""
    known = set(handles)
    out = []
    for m in MENTION.finditer(text or ""):
        h = m.group(1).lower()
        if h in known and h not in out:
            out.append(h)
    return out


def create_chat(
    db_path: Path | str,
    me: str,
    users: Iterable[Mapping[str, Any]],
    channels: Iterable[Mapping[str, Any]],
    messages: Iterable[Mapping[str, Any]] = (),
    *,
    now: str,
) -> Path:
    """Write a new chat workspace. Same arguments -> byte-identical file.

    ``users``: ``{handle, name}`` and optionally ``title, email``; ``me`` is one of the handles.
    ``channels``: ``{name, members}`` and optionally ``topic``; members default to everyone.
    ``messages``: ``{channel, user, text, ts}`` and optionally ``id``, ``thread_id`` (the id of
    the thread's first message) and ``reactions`` (``{emoji: [handles]}``). A channel named
    ``@handle`` is the direct-message conversation between ``me`` and that user; it is
    created on first use. Ids default to 1, 2, ... in order.
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    user_rows = []
    for i, u in enumerate(users):
        if not HANDLE.match(u["handle"]):
            raise ValueError(f"bad handle {u['handle']!r}")
        user_rows.append((u["handle"], u["name"], u.get("title", ""), u.get("email", ""), i))
    handles = [r[0] for r in user_rows]
    if me not in handles:
        raise ValueError(f"me={me!r} is not one of the users")
    chan_rows, member_rows = [], []
    for c in channels:
        name = c["name"].lstrip("#")
        if not CHANNEL.match(name):
            raise ValueError(f"bad channel name {c['name']!r}")
        members = list(dict.fromkeys(c.get("members", handles)))
        if me not in members:
            members.append(me)
        chan_rows.append((name, "channel", c.get("topic", ""), len(chan_rows)))
        member_rows.extend((name, h) for h in members)
    names = {r[0] for r in chan_rows}
    msg_rows, react_rows, ids = [], [], set()
    for i, m in enumerate(messages, start=1):
        mid = int(m.get("id", i))
        ch = m["channel"]
        ch = ch if ch.startswith("@") else ch.lstrip("#")
        if ch.startswith("@"):
            other = ch[1:]
            if other not in handles or other == me:
                raise ValueError(f"message {mid}: direct messages need another user, not {ch!r}")
            if ch not in names:
                names.add(ch)
                chan_rows.append((ch, "dm", "", len(chan_rows)))
                member_rows.extend([(ch, me), (ch, other)])
        elif ch not in names:
            raise ValueError(f"message {mid}: unknown channel {ch!r}")
        if m["user"] not in handles:
            raise ValueError(f"message {mid}: unknown user {m['user']!r}")
        thread = m.get("thread_id")
        if thread is not None and thread not in ids:
            raise ValueError(f"message {mid}: thread {thread} must be an earlier message")
        ids.add(mid)
        msg_rows.append((mid, ch, m["user"], m["text"], normalize_stamp(m["ts"]), thread,
                         json.dumps(mentions(m["text"], handles))))
        for emoji, who in m.get("reactions", {}).items():
            react_rows.extend((mid, h, emoji) for h in who)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        clock = normalize_stamp(now)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [("me", me), ("now", clock)])
        conn.executemany("INSERT INTO users VALUES (?,?,?,?,?)", user_rows)
        conn.executemany("INSERT INTO channels VALUES (?,?,?,?)", chan_rows)
        conn.executemany("INSERT INTO members VALUES (?, ?)", member_rows)
        conn.executemany("INSERT INTO messages VALUES (?,?,?,?,?,?,?)", msg_rows)
        conn.executemany("INSERT INTO reactions VALUES (?,?,?)", react_rows)
        conn.commit()
    return db_path


# -- readers for graders and tools ---------------------------------------------------------

def row_to_dict(row) -> dict[str, Any]:
    return {"id": row["id"], "channel": row["channel"], "user": row["user"], "text": row["text"],
            "ts": row["ts"], "thread_id": row["thread_id"], "mentions": json.loads(row["mentions"])}


def me(world) -> str:
    with closing(world.db("chat")) as conn:
        return conn.execute("SELECT value FROM meta WHERE key = 'me'").fetchone()[0]


def messages(world, channel: str | None = None) -> list[dict[str, Any]]:
    """Every message (or those in ``channel``: a name, or ``@handle`` for DMs), in id order."""
    with closing(world.db("chat")) as conn:
        if channel is None:
            rows = conn.execute("SELECT * FROM messages ORDER BY id").fetchall()
        else:
            rows = conn.execute("SELECT * FROM messages WHERE channel = ? ORDER BY id",
                                (channel if channel.startswith("@") else channel.lstrip("#"),)).fetchall()
    return [row_to_dict(r) for r in rows]


def posts_by_me(world, after_id: int = 0) -> list[dict[str, Any]]:
    """Messages the workspace user wrote (with id > ``after_id``), in id order."""
    who = me(world)
    return [m for m in messages(world) if m["user"] == who and m["id"] > after_id]


def reactions(world, message_id: int) -> dict[str, list[str]]:
    with closing(world.db("chat")) as conn:
        rows = conn.execute("SELECT emoji, user FROM reactions WHERE message_id = ? ORDER BY rowid",
                            (message_id,)).fetchall()
    out: dict[str, list[str]] = {}
    for emoji, who in rows:
        out.setdefault(emoji, []).append(who)
    return out
