"""The `chat` app: an MCP server over a team chat workspace (``state/chat.sqlite``).

The agent acts as the workspace's user (``meta.me``). Channels are read newest page first
(each page in time order); threads are read whole. Every tool opens its own connection.
"""

from __future__ import annotations

import difflib
import json
import re
from contextlib import closing
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.chat.state import advance, mentions, row_to_dict
from longhorizon.apps.common import ADD, READ, AppServer, cap, read_meta, server_builder, sqlite_connector

MAX_LIMIT = 100
MAX_TEXT = 8_000
EMOJI = re.compile(r"^:?[a-z0-9_+-]{1,40}:?$")

INSTRUCTIONS = (
    "The team's chat workspace. Channels are named like #ops (the # is optional); a direct "
    "conversation with a user is named @handle. Messages have integer ids; a thread is "
    "identified by the id of its first message. Mention people with @handle. Timestamps are "
    "ISO 8601 (2026-03-02T09:15:00)."
)


def _dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


def make_app(world):
    db_path = world.db_path("chat")
    srv = AppServer("chat", instructions=INSTRUCTIONS)

    connect = sqlite_connector(db_path, "chat workspace", "chat")

    meta = read_meta

    def handles(conn) -> list[str]:
        return [r[0] for r in conn.execute("SELECT handle FROM users ORDER BY position")]

    def names(conn) -> dict[str, str]:
        return dict(conn.execute("SELECT handle, name FROM users").fetchall())

    def resolve_user(conn, who: str) -> str:
        """A handle (with or without @), or a unique display name / first name."""
        wanted = (who or "").strip().lstrip("@").lower()
        rows = conn.execute("SELECT handle, name FROM users ORDER BY position").fetchall()
        for h, _ in rows:
            if h == wanted:
                return h
        by_name = [h for h, n in rows if n.lower() == wanted] or \
                  [h for h, n in rows if n.lower().split()[0] == wanted]
        if len(by_name) == 1:
            return by_name[0]
        near = difflib.get_close_matches(wanted, [h for h, _ in rows], n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join('@' + h for h in near)}?" if near else ""
        raise ToolError(f"no user {who!r}.{hint} Use list_users to see handles.")

    def resolve_channel(conn, channel: str) -> str:
        raw = (channel or "").strip()
        if raw.startswith("@"):
            handle = resolve_user(conn, raw)
            name = f"@{handle}"
            if not conn.execute("SELECT 1 FROM channels WHERE name = ?", (name,)).fetchone():
                raise ToolError(f"you have no direct messages with @{handle} yet")
            return name
        wanted = raw.lstrip("#").lower()
        if conn.execute("SELECT 1 FROM channels WHERE name = ? AND kind = 'channel'", (wanted,)).fetchone():
            return wanted
        chans = [r[0] for r in conn.execute("SELECT name FROM channels WHERE kind = 'channel' ORDER BY position")]
        raise ToolError(f"no channel {channel!r}; channels are: {', '.join('#' + c for c in chans)}")

    def reactions_of(conn, ids: list[int]) -> dict[int, dict[str, list[str]]]:
        out: dict[int, dict[str, list[str]]] = {}
        if not ids:
            return out
        marks = ",".join("?" * len(ids))
        for r in conn.execute(f"SELECT message_id, emoji, user FROM reactions WHERE message_id IN ({marks}) "
                              "ORDER BY rowid", ids):
            out.setdefault(r[0], {}).setdefault(r[1], []).append(r[2])
        return out

    def show(conn, rows, with_replies: bool = False) -> list[dict]:
        who = names(conn)
        ids = [r["id"] for r in rows]
        reacts = reactions_of(conn, ids)
        counts: dict[int, int] = {}
        if with_replies and ids:
            marks = ",".join("?" * len(ids))
            counts = dict(conn.execute(f"SELECT thread_id, COUNT(*) FROM messages WHERE thread_id IN ({marks}) "
                                       "GROUP BY thread_id", ids).fetchall())
        out = []
        for r in rows:
            m = row_to_dict(r)
            item = {"id": m["id"], "user": m["user"], "name": who.get(m["user"], m["user"]), "ts": m["ts"],
                    "text": m["text"]}
            if m["thread_id"] is not None:
                item["thread_id"] = m["thread_id"]
            if with_replies:
                item["reply_count"] = counts.get(m["id"], 0)
            if m["mentions"]:
                item["mentions"] = m["mentions"]
            if m["id"] in reacts:
                item["reactions"] = reacts[m["id"]]
            out.append(item)
        return out

    def store(conn, channel: str, text: str, thread_id: int | None = None) -> int:
        m = meta(conn)
        clock = m["now"]
        new_id = conn.execute(
            "INSERT INTO messages (channel, user, text, ts, thread_id, mentions) VALUES (?,?,?,?,?,?)",
            (channel, m["me"], text, clock, thread_id, json.dumps(mentions(text, handles(conn)))),
        ).lastrowid
        conn.execute("UPDATE meta SET value = ? WHERE key = 'now'", (advance(clock),))
        return new_id

    def check_text(text: str) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ToolError("text must not be empty")
        if len(text) > MAX_TEXT:
            raise ToolError(f"text is longer than {MAX_TEXT} characters; split it into several messages")
        return text.strip()

    @srv.tool(READ)
    def list_channels() -> str:
        """List channels and your direct-message conversations.

        Returns JSON [{name ("#ops", or "@handle" for direct messages), kind ("channel"
        or "dm"), topic, members, messages, last_activity}]."""
        with closing(connect()) as conn:
            rows = conn.execute(
                "SELECT c.name, c.kind, c.topic, (SELECT COUNT(*) FROM members m WHERE m.channel = c.name) AS mem, "
                "COUNT(x.id) AS n, MAX(x.ts) AS last FROM channels c LEFT JOIN messages x ON x.channel = c.name "
                "GROUP BY c.name ORDER BY c.kind, c.position").fetchall()
        return _dumps([{"name": r["name"] if r["kind"] == "dm" else f"#{r['name']}", "kind": r["kind"],
                        "topic": r["topic"], "members": r["mem"], "messages": r["n"], "last_activity": r["last"]}
                       for r in rows])

    @srv.tool(READ)
    def read_channel(channel: str, limit: int = 30, before: int | None = None) -> str:
        """Read a channel's (or a direct conversation's) messages: the newest ``limit`` top-level
        messages, in time order. Thread replies are not shown inline: a message with
        reply_count > 0 starts a thread; read it with read_thread.

        Args:
            channel: "#ops" / "ops", or "@handle" for direct messages with that user.
            limit: how many messages (1-100).
            before: only messages with an id lower than this, to page back in time (use next_before).

        Returns JSON {channel, topic, messages: [{id, user, name, ts, text,
        reply_count, mentions?, reactions?}], next_before} (next_before is null when
        there is nothing older)."""
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"limit must be 1-{MAX_LIMIT}")
        with closing(connect()) as conn:
            name = resolve_channel(conn, channel)
            topic = conn.execute("SELECT topic FROM channels WHERE name = ?", (name,)).fetchone()[0]
            where, args = "channel = ? AND thread_id IS NULL", [name]
            if before is not None:
                where += " AND id < ?"
                args.append(before)
            rows = conn.execute(f"SELECT * FROM messages WHERE {where} ORDER BY id DESC LIMIT ?",
                                [*args, limit + 1]).fetchall()
            more = len(rows) > limit
            rows = list(reversed(rows[:limit]))
            msgs = show(conn, rows, with_replies=True)
        nxt = rows[0]["id"] if more and rows else None
        return _dumps({"channel": name if name.startswith("@") else f"#{name}", "topic": topic,
                       "messages": msgs, "next_before": nxt})

    @srv.tool(READ)
    def read_thread(thread_id: int) -> str:
        """Read a whole thread: its first message and every reply, in time order.

        Args:
            thread_id: the id of the thread's first message (an id of a reply also works).

        Returns JSON {channel, thread_id, messages: [{id, user, name, ts, text, ...}]}."""
        with closing(connect()) as conn:
            row = conn.execute("SELECT * FROM messages WHERE id = ?", (thread_id,)).fetchone()
            if row is None:
                raise ToolError(f"no message with id {thread_id}; ids come from read_channel or search_messages")
            root = row["thread_id"] or row["id"]
            rows = conn.execute("SELECT * FROM messages WHERE id = ? OR thread_id = ? ORDER BY id",
                                (root, root)).fetchall()
            msgs = show(conn, rows)
            ch = rows[0]["channel"]
        return _dumps({"channel": ch if ch.startswith("@") else f"#{ch}", "thread_id": root, "messages": msgs})

    @srv.tool(READ)
    def search_messages(query: str, channel: str | None = None, user: str | None = None, limit: int = 25) -> str:
        """Search messages (thread replies included), newest first. Every word of ``query`` must
        appear (case-insensitive); a quoted "phrase" must appear as written.

        Args:
            query: words to look for; may be "" when channel or user is given.
            channel: only this channel ("#ops") or direct conversation ("@handle").
            user: only messages written by this user (handle or name).
            limit: at most this many results (1-100).

        Returns JSON {total, messages: [{id, channel, user, name, ts, text,
        thread_id?}]} (thread_id is set on replies: read the thread with read_thread)."""
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"limit must be 1-{MAX_LIMIT}")
        phrases = [p.lower() for p in re.findall(r'"([^"]+)"', query or "")]
        words = [w.lower() for w in re.sub(r'"[^"]*"', " ", query or "").split()] + phrases
        if not words and not (channel or user):
            raise ToolError("give a query or at least one filter (channel, user)")
        with closing(connect()) as conn:
            where, args = ["1 = 1"], []
            if channel:
                where.append("channel = ?")
                args.append(resolve_channel(conn, channel))
            if user:
                where.append("user = ?")
                args.append(resolve_user(conn, user))
            rows = conn.execute(f"SELECT * FROM messages WHERE {' AND '.join(where)} ORDER BY id DESC",
                                args).fetchall()
            hits = [r for r in rows if all(w in " ".join(r["text"].split()).lower() for w in words)]
            msgs = show(conn, hits[:limit])
        for m, r in zip(msgs, hits):
            m["channel"] = r["channel"] if r["channel"].startswith("@") else f"#{r['channel']}"
        return _dumps({"total": len(hits), "messages": msgs})

    @srv.tool(ADD)
    def post_message(channel: str, text: str, thread_id: int | None = None) -> str:
        """Post a message in a channel, or reply in a thread there.

        Args:
            channel: "#ops" / "ops" (for a person, use send_direct_message).
            text: the message; mention people with @handle.
            thread_id: reply in this thread (the id of its first message; a reply's id also works).

        Returns a confirmation with the new message id."""
        body = check_text(text)
        with closing(connect()) as conn, conn:
            if (channel or "").strip().startswith("@"):
                raise ToolError("to write to a person use send_direct_message(user, text)")
            name = resolve_channel(conn, channel)
            root = None
            if thread_id is not None:
                row = conn.execute("SELECT id, channel, thread_id FROM messages WHERE id = ?", (thread_id,)).fetchone()
                if row is None or row["channel"] != name:
                    raise ToolError(f"message {thread_id} is not in #{name}; take thread ids from read_channel")
                root = row["thread_id"] or row["id"]
            me = meta(conn)["me"]
            conn.execute("INSERT OR IGNORE INTO members VALUES (?, ?)", (name, me))
            new_id = store(conn, name, body, root)
        where = f"thread {root} in #{name}" if root else f"#{name}"
        return f"Posted message {new_id} in {where}."

    @srv.tool(ADD)
    def send_direct_message(user: str, text: str) -> str:
        """Send a direct (private) message to one person.

        Args:
            user: their handle ("priya.s" or "@priya.s") or full name.
            text: the message.

        Returns a confirmation with the new message id."""
        body = check_text(text)
        with closing(connect()) as conn, conn:
            handle = resolve_user(conn, user)
            me = meta(conn)["me"]
            if handle == me:
                raise ToolError("that is you; pick someone else")
            name = f"@{handle}"
            if not conn.execute("SELECT 1 FROM channels WHERE name = ?", (name,)).fetchone():
                pos = conn.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM channels").fetchone()[0]
                conn.execute("INSERT INTO channels VALUES (?, 'dm', '', ?)", (name, pos))
                conn.executemany("INSERT INTO members VALUES (?, ?)", [(name, me), (name, handle)])
            new_id = store(conn, name, body)
        return f"Sent direct message {new_id} to @{handle}."

    @srv.tool(ADD)
    def add_reaction(message_id: int, emoji: str) -> str:
        """React to a message with an emoji name, e.g. "thumbsup" or ":white_check_mark:"."""
        e = (emoji or "").strip().lower()
        if not EMOJI.match(e):
            raise ToolError("emoji must be a name like 'thumbsup' or ':eyes:'")
        e = e.strip(":")
        with closing(connect()) as conn, conn:
            if conn.execute("SELECT 1 FROM messages WHERE id = ?", (message_id,)).fetchone() is None:
                raise ToolError(f"no message with id {message_id}")
            conn.execute("INSERT OR IGNORE INTO reactions VALUES (?, ?, ?)", (message_id, meta(conn)["me"], e))
        return f"Reacted :{e}: to message {message_id}."

    @srv.tool(READ)
    def list_users() -> str:
        """List the people in the workspace.

        Returns JSON [{handle, name, title, email, me}] (me is true for you)."""
        with closing(connect()) as conn:
            me = meta(conn)["me"]
            rows = conn.execute("SELECT * FROM users ORDER BY position").fetchall()
        return _dumps([{"handle": r["handle"], "name": r["name"], "title": r["title"], "email": r["email"],
                        "me": r["handle"] == me} for r in rows])

    return srv


build_server = server_builder(make_app)
