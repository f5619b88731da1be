"""Mail app state: one owner's mailbox in a SQLite file (``state/mail.sqlite``).

Attachment bytes live beside it under ``state/mail_attachments/<message id>/<name>``; the
database keeps their names and sizes. ``create_mailbox`` is deterministic (fixed insertion
order, no clock reads) so a Task's World hashes the same every time it is built. The mailbox
has its own clock (``meta.now``): messages the agent sends are stamped from it, a minute
apart, so episodes are reproducible too.
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

DEFAULT_FOLDERS = ("Inbox", "Sent", "Archive")
REQUIRED_FOLDERS = ("Inbox", "Sent")
DATE_FMT = "%Y-%m-%dT%H:%M:%S"
DEFAULT_NOW = "2026-01-05T09:00:00"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE folders (name TEXT PRIMARY KEY, position INTEGER NOT NULL);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    folder TEXT NOT NULL REFERENCES folders(name),
    sender TEXT NOT NULL,
    sender_name TEXT NOT NULL DEFAULT '',
    recipients TEXT NOT NULL DEFAULT '[]',
    cc TEXT NOT NULL DEFAULT '[]',
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    date TEXT NOT NULL,
    in_reply_to INTEGER,
    forwarded_from INTEGER,
    is_read INTEGER NOT NULL DEFAULT 0,
    attachments TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX messages_folder ON messages(folder);
"""

_ADDRESS = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
_ANGLE = re.compile(r"^\s*(?P<name>.*?)\s*<(?P<addr>[^<>]+)>\s*$")


def parse_address(text: str) -> str | None:
    """``"a@b.com"`` or ``"Name <a@b.com>"`` -> ``"a@b.com"`` (lower case); None if malformed."""
    if not isinstance(text, str):
        return None
    m = _ANGLE.match(text)
    addr = (m.group("addr") if m else text).strip().lower()
    return addr if _ADDRESS.match(addr) else None


def normalize_date(value: str) -> str:
    """ISO 8601 date or datetime -> ``YYYY-MM-DDTHH:MM:SS``; ValueError when unreadable."""
    dt = datetime.fromisoformat(str(value).strip())
    if dt.tzinfo is not None:
        dt = dt.replace(tzinfo=None)
    return dt.strftime(DATE_FMT)


def attachments_dir(db_path: Path) -> Path:
    return Path(db_path).parent / "mail_attachments"


def valid_attachment_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\x00" not in name


def create_mailbox(
    db_path: Path | str,
    owner_address: str,
    owner_name: str,
    folders: Iterable[str] = DEFAULT_FOLDERS,
    messages: Iterable[Mapping[str, Any]] = (),
    *,
    now: str | None = None,
) -> Path:
    """Write a new mailbox. Same arguments -> byte-identical file.

    ``messages`` are dicts with ``folder, sender, subject, body, date`` and optionally
    ``sender_name, to, cc, in_reply_to, is_read, id`` and ``attachments``
    (a list of ``{"name": str, "content": bytes | str}``). Ids default to 1, 2, ... in order.
    ``now`` is the mailbox clock (defaults to the newest message's date).
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    owner = parse_address(owner_address)
    if owner is None:
        raise ValueError(f"bad owner address {owner_address!r}")
    folder_names = list(dict.fromkeys([*folders]))
    for req in REQUIRED_FOLDERS:
        if req not in folder_names:
            folder_names.insert(REQUIRED_FOLDERS.index(req), req)
    rows = []
    att_root = attachments_dir(db_path)
    for i, m in enumerate(messages, start=1):
        mid = int(m.get("id", i))
        if m["folder"] not in folder_names:
            raise ValueError(f"message {mid}: unknown folder {m['folder']!r}")
        sender = parse_address(m["sender"])
        if sender is None:
            raise ValueError(f"message {mid}: bad sender {m['sender']!r}")
        to = [parse_address(a) for a in m.get("to", [owner])]
        cc = [parse_address(a) for a in m.get("cc", [])]
        if None in to or None in cc:
            raise ValueError(f"message {mid}: bad recipient in {m.get('to')} / {m.get('cc')}")
        atts = []
        for a in m.get("attachments", []):
            if not valid_attachment_name(a["name"]):
                raise ValueError(f"message {mid}: bad attachment name {a['name']!r}")
            data = a["content"].encode() if isinstance(a["content"], str) else bytes(a["content"])
            path = att_root / str(mid) / a["name"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            atts.append({"name": a["name"], "size": len(data)})
        rows.append((
            mid, m["folder"], sender, m.get("sender_name", ""), json.dumps(to), json.dumps(cc),
            m["subject"], m["body"], normalize_date(m["date"]), m.get("in_reply_to"),
            m.get("forwarded_from"), int(bool(m.get("is_read", False))), json.dumps(atts),
        ))
    clock = normalize_date(now) if now else max((r[8] for r in rows), default=DEFAULT_NOW)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("owner_address", owner), ("owner_name", owner_name), ("now", clock),
        ])
        conn.executemany("INSERT INTO folders VALUES (?, ?)", [(f, i) for i, f in enumerate(folder_names)])
        conn.executemany("INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.commit()
    return db_path


# -- readers for graders and tools ---------------------------------------------------------

def row_to_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "folder": row["folder"],
        "sender": row["sender"],
        "sender_name": row["sender_name"],
        "to": json.loads(row["recipients"]),
        "cc": json.loads(row["cc"]),
        "subject": row["subject"],
        "body": row["body"],
        "date": row["date"],
        "in_reply_to": row["in_reply_to"],
        "forwarded_from": row["forwarded_from"],
        "is_read": bool(row["is_read"]),
        "attachments": json.loads(row["attachments"]),
    }


def owner(world) -> dict[str, str]:
    with closing(world.db("mail")) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    return {"address": meta["owner_address"], "name": meta["owner_name"]}


def folders(world) -> list[str]:
    with closing(world.db("mail")) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM folders ORDER BY position")]


def messages(world, folder: str | None = None) -> list[dict[str, Any]]:
    """Every message (or those in ``folder``, exact name), in id order."""
    with closing(world.db("mail")) as conn:
        if folder is None:
            rows = conn.execute("SELECT * FROM messages ORDER BY id").fetchall()
        else:
            rows = conn.execute("SELECT * FROM messages WHERE folder = ? ORDER BY id", (folder,)).fetchall()
    return [row_to_dict(r) for r in rows]


def sent_messages(world) -> list[dict[str, Any]]:
    """Messages the owner sent (wherever they were filed), in id order."""
    me = owner(world)["address"]
    return [m for m in messages(world) if m["sender"] == me]


def message(world, message_id: int) -> dict[str, Any] | None:
    with closing(world.db("mail")) as conn:
        row = conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
    return row_to_dict(row) if row else None


def attachment_path(world, message_id: int, name: str) -> Path:
    return attachments_dir(world.db_path("mail")) / str(message_id) / name


def advance(clock: str, minutes: int = 1) -> str:
    return (datetime.strptime(clock, DATE_FMT) + timedelta(minutes=minutes)).strftime(DATE_FMT)
