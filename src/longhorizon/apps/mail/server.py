"""The `mail` app: an MCP server over one owner's mailbox (``state/mail.sqlite``).

Every tool opens its own short connection, so calls stay independent and the file is
always consistent on disk. Anything the agent gets wrong comes back as a ToolError that
says how to fix it.

Attachment bytes live in the World's state, outside the workspace and its size cap, so the
mailbox has a budget of its own: each attachment is at most ``MAX_ATTACHMENT_BYTES`` and all
of the mailbox's attachments together (seeded, sent, forwarded copies) at most
``MAX_MAILBOX_ATTACHMENT_BYTES``, checked before anything is read or copied.
"""

from __future__ import annotations

import json
import os
from contextlib import closing
from datetime import datetime
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import (
    ADD, OPEN, READ, SET, AppServer, Missing, Workspace, WrongKind, cap, read_meta, server_builder,
    sqlite_connector,
)
from longhorizon.apps.mail.state import (
    DATE_FMT,
    advance,
    attachments_dir,
    parse_address,
    row_to_dict,
)

MAX_LIMIT = 100
MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024
MAX_MAILBOX_ATTACHMENT_BYTES = 64 * 1024 * 1024
"""All attachments in one mailbox together (see the module docstring)."""

INSTRUCTIONS = (
    "The user's email mailbox. Messages have integer ids; find them with list_messages or "
    "search_messages, open one with read_message. Dates are ISO 8601 (2026-03-02T09:15:00). "
    "Attachments to send are paths in the shared workspace; save received ones with save_attachment."
)


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


def _display(address: str, name: str = "") -> str:
    return f"{name} <{address}>" if name else address


def _summary(m: dict) -> dict:
    return {
        "id": m["id"],
        "from": _display(m["sender"], m["sender_name"]),
        "to": m["to"],
        "subject": m["subject"],
        "date": m["date"],
        "unread": not m["is_read"],
        "has_attachments": bool(m["attachments"]),
    }


def _date_bound(value: str, name: str, end_of_day: bool) -> str:
    try:
        dt = datetime.fromisoformat(value.strip())
    except (ValueError, AttributeError):
        raise ToolError(f"{name}={value!r} is not a date: use YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
    if dt.tzinfo is not None:
        dt = dt.replace(tzinfo=None)
    if end_of_day and len(value.strip()) == 10:
        dt = dt.replace(hour=23, minute=59, second=59)
    return dt.strftime(DATE_FMT)


def _addresses(values: list[str], field: str) -> list[str]:
    out = []
    for v in values:
        addr = parse_address(v)
        if addr is None:
            raise ToolError(
                f"{field}: {v!r} is not a valid email address; use name@domain.tld "
                "(or 'Name <name@domain.tld>')"
            )
        if addr not in out:
            out.append(addr)
    return out


def make_app(world):
    db_path = world.db_path("mail")
    att_root = attachments_dir(db_path)
    ws = Workspace(world.workspace)
    srv = AppServer("mail", instructions=INSTRUCTIONS)

    connect = sqlite_connector(db_path, "mailbox", "mail")

    meta = read_meta

    def folder_names(conn) -> list[str]:
        return [r[0] for r in conn.execute("SELECT name FROM folders ORDER BY position")]

    def resolve_folder(conn, name: str) -> str:
        """Exact name, else a unique case-insensitive match; otherwise a helpful error."""
        names = folder_names(conn)
        wanted = (name or "").strip()
        if wanted in names:
            return wanted
        folded = [n for n in names if n.lower() == wanted.lower()]
        if len(folded) == 1:
            return folded[0]
        raise ToolError(
            f"no folder named {name!r}. Existing folders: {', '.join(names)}. "
            "Create it first with create_folder."
        )

    def get(conn, message_id: int) -> dict:
        row = conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            raise ToolError(
                f"no message with id {message_id}; use list_messages or search_messages to find ids"
            )
        return row_to_dict(row)

    def attachment_bytes(conn) -> int:
        """What the mailbox's attachments hold in all."""
        return conn.execute("SELECT COALESCE(SUM(json_extract(a.value, '$.size')), 0) "
                            "FROM messages, json_each(messages.attachments) AS a").fetchone()[0]

    def check_room(conn, adding: int) -> None:
        """Refuse a message whose attachments would take the mailbox past its budget."""
        held = attachment_bytes(conn)
        if adding and held + adding > MAX_MAILBOX_ATTACHMENT_BYTES:
            raise ToolError(
                f"this message's attachments ({_mib(adding)}) would take the mailbox past the "
                f"{_mib(MAX_MAILBOX_ATTACHMENT_BYTES)} all its attachments may hold ({_mib(held)} already); "
                "send fewer or smaller files, or say where they are in the shared workspace instead")

    def stage_attachments(paths: list[str]) -> list[tuple[str, bytes]]:
        staged: list[tuple[str, bytes]] = []
        total = 0
        for p in paths:
            src = ws.path(p)
            try:  # only a regular file, opened without following links
                with src.open_read() as f:
                    size = os.fstat(f.fileno()).st_size
                    if size > MAX_ATTACHMENT_BYTES:
                        raise ToolError(f"attachment {p!r} is larger than {MAX_ATTACHMENT_BYTES // (1024 * 1024)} MB")
                    if total + size > MAX_MAILBOX_ATTACHMENT_BYTES:
                        raise ToolError(f"these attachments add up to more than {_mib(MAX_MAILBOX_ATTACHMENT_BYTES)}, "
                                        "all a mailbox's attachments may hold; send fewer or smaller files")
                    data = f.read(MAX_ATTACHMENT_BYTES + 1)
                    if len(data) > MAX_ATTACHMENT_BYTES:  # it grew since the fstat
                        raise ToolError(f"attachment {p!r} is larger than {MAX_ATTACHMENT_BYTES // (1024 * 1024)} MB")
                    total += len(data)
            except Missing:
                raise ToolError(f"attachment {p!r} is not a file in the workspace; check the path with the files tools") from None
            except WrongKind as exc:
                if exc.kind == "link":
                    raise
                raise ToolError(f"attachment {p!r} is not a file in the workspace ({exc})") from None
            if any(name == src.name for name, _ in staged):
                raise ToolError(f"two attachments are named {src.name!r}; rename one before sending")
            staged.append((src.name, data))
        return staged

    def store_sent(conn, *, to: list[str], cc: list[str], subject: str, body: str,
                   in_reply_to: int | None = None, forwarded_from: int | None = None,
                   files: list[tuple[str, bytes]] = ()) -> int:
        check_room(conn, sum(len(b) for _, b in files))
        m = meta(conn)
        clock = m["now"]
        cur = conn.execute(
            "INSERT INTO messages (folder, sender, sender_name, recipients, cc, subject, body, date,"
            " in_reply_to, forwarded_from, is_read, attachments) VALUES (?,?,?,?,?,?,?,?,?,?,1,?)",
            ("Sent", m["owner_address"], m["owner_name"], json.dumps(to), json.dumps(cc), subject, body,
             clock, in_reply_to, forwarded_from,
             json.dumps([{"name": n, "size": len(b)} for n, b in files])),
        )
        new_id = cur.lastrowid
        for name, data in files:
            dest = att_root / str(new_id) / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'now'", (advance(clock),))
        return new_id

    def sent_note(new_id: int, to: list[str], cc: list[str], subject: str, files) -> str:
        parts = [f"Sent message {new_id} to {', '.join(to)}"]
        if cc:
            parts.append(f"cc {', '.join(cc)}")
        text = ", ".join(parts) + f" (subject: {subject!r})"
        if files:
            text += f" with attachments: {', '.join(n for n, _ in files)}"
        return text + "."

    @srv.tool(READ)
    def list_folders() -> str:
        """List the mailbox folders with their message and unread counts.

        Returns JSON [{name, messages, unread}]."""
        with closing(connect()) as conn:
            out = []
            for name in folder_names(conn):
                total, unread = conn.execute(
                    "SELECT COUNT(*), COALESCE(SUM(is_read = 0), 0) FROM messages WHERE folder = ?", (name,)
                ).fetchone()
                out.append({"name": name, "messages": total, "unread": unread})
        return _dumps(out)

    @srv.tool(READ)
    def list_messages(folder: str = "Inbox", unread_only: bool = False, limit: int = 25, offset: int = 0) -> str:
        """List messages in a folder, newest first, as summaries (no bodies).

        Args:
            folder: folder name, e.g. "Inbox", "Sent", "Invoices/Processed".
            unread_only: only messages not yet read.
            limit: how many to return (1-100).
            offset: how many to skip, for paging (use next_offset from the previous page).

        Returns JSON {folder, total, offset, messages: [{id, from, to, subject,
        date, unread, has_attachments}], next_offset} (next_offset is null on the last page)."""
        if not 1 <= limit <= MAX_LIMIT or offset < 0:
            raise ToolError(f"limit must be 1-{MAX_LIMIT} and offset >= 0")
        with closing(connect()) as conn:
            name = resolve_folder(conn, folder)
            where, args = "folder = ?", [name]
            if unread_only:
                where += " AND is_read = 0"
            total = conn.execute(f"SELECT COUNT(*) FROM messages WHERE {where}", args).fetchone()[0]
            rows = conn.execute(
                f"SELECT * FROM messages WHERE {where} ORDER BY date DESC, id DESC LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
        msgs = [_summary(row_to_dict(r)) for r in rows]
        nxt = offset + len(msgs) if offset + len(msgs) < total else None
        return _dumps({"folder": name, "total": total, "offset": offset, "messages": msgs, "next_offset": nxt})

    @srv.tool(READ)
    def search_messages(query: str, folder: str | None = None, sender: str | None = None,
                        since: str | None = None, until: str | None = None, limit: int = 25) -> str:
        """Search messages, newest first. Every word of ``query`` must appear (case-insensitive)
        in the subject, body, sender or an attachment name.

        Args:
            query: words to look for; may be "" when other filters are given.
            folder: only this folder (default: all folders).
            sender: text contained in the sender's address or name, e.g. "acme.com" or "Priya".
            since: only messages on/after this date (YYYY-MM-DD or YYYY-MM-DDTHH:MM).
            until: only messages on/before this date (a bare date includes that whole day).
            limit: at most this many results (1-100).

        Returns JSON {total, messages: [summary...]} with the same summary fields as list_messages."""
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"limit must be 1-{MAX_LIMIT}")
        words = query.lower().split()
        if not words and not any([folder, sender, since, until]):
            raise ToolError("give a query or at least one filter (folder, sender, since, until)")
        where, args = ["1 = 1"], []
        with closing(connect()) as conn:
            if folder:
                where.append("folder = ?")
                args.append(resolve_folder(conn, folder))
            if since:
                where.append("date >= ?")
                args.append(_date_bound(since, "since", end_of_day=False))
            if until:
                where.append("date <= ?")
                args.append(_date_bound(until, "until", end_of_day=True))
            rows = conn.execute(
                f"SELECT * FROM messages WHERE {' AND '.join(where)} ORDER BY date DESC, id DESC", args
            ).fetchall()
        hits = []
        for r in rows:
            m = row_to_dict(r)
            if sender and sender.strip().lower() not in f"{m['sender']} {m['sender_name']}".lower():
                continue
            hay = " ".join([m["subject"], m["body"], m["sender"], m["sender_name"],
                            *(a["name"] for a in m["attachments"])]).lower()
            if all(w in hay for w in words):
                hits.append(_summary(m))
        return _dumps({"total": len(hits), "messages": hits[:limit]})

    @srv.tool(OPEN)  # a read that marks the message read: nothing lost, the same call again changes nothing
    def read_message(message_id: int) -> str:
        """Open a message: full headers, body and attachment names. Marks it as read.

        Returns JSON {id, folder, from, to, cc, subject, date, in_reply_to,
        body, attachments: [{name, size}]}."""
        with closing(connect()) as conn:
            m = get(conn, message_id)
            if not m["is_read"]:
                with conn:
                    conn.execute("UPDATE messages SET is_read = 1 WHERE id = ?", (message_id,))
        return _dumps({
            "id": m["id"], "folder": m["folder"], "from": _display(m["sender"], m["sender_name"]),
            "to": m["to"], "cc": m["cc"], "subject": m["subject"], "date": m["date"],
            "in_reply_to": m["in_reply_to"], "body": m["body"], "attachments": m["attachments"],
        })

    @srv.tool(ADD)
    def send_message(to: list[str], subject: str, body: str, cc: list[str] = [],
                     attachments: list[str] = []) -> str:
        """Send a new email from the mailbox owner. A copy is stored in the Sent folder.

        Args:
            to: recipient addresses, e.g. ["ana@example.com"] (at least one).
            subject: subject line (not empty).
            body: plain-text body (not empty).
            cc: carbon-copy addresses.
            attachments: workspace file paths to attach, e.g. ["reports/q1.xlsx"]; copied when sent.

        Returns a confirmation with the new message id."""
        to_addrs = _addresses(to, "to")
        cc_addrs = [a for a in _addresses(cc, "cc") if a not in to_addrs]
        if not to_addrs:
            raise ToolError("to must list at least one recipient address")
        if not subject.strip():
            raise ToolError("subject must not be empty")
        if not body.strip():
            raise ToolError("body must not be empty")
        files = stage_attachments(attachments)
        with closing(connect()) as conn, conn:
            new_id = store_sent(conn, to=to_addrs, cc=cc_addrs, subject=subject.strip(), body=body, files=files)
        return sent_note(new_id, to_addrs, cc_addrs, subject.strip(), files)

    @srv.tool(ADD)
    def reply(message_id: int, body: str, reply_all: bool = False, attachments: list[str] = []) -> str:
        """Reply to a message. Goes to its sender (for a message you sent: to its recipients);
        reply_all=true also includes the other recipients and cc. Subject becomes "Re: <subject>".

        Args:
            message_id: id of the message to answer.
            body: plain-text reply (not empty).
            reply_all: include everyone on the original message.
            attachments: workspace file paths to attach.

        Returns a confirmation with the new message id."""
        if not body.strip():
            raise ToolError("body must not be empty")
        files = stage_attachments(attachments)
        with closing(connect()) as conn, conn:
            orig = get(conn, message_id)
            me = meta(conn)["owner_address"]
            if orig["sender"] == me:
                to = list(orig["to"])
                cc = list(orig["cc"]) if reply_all else []
            else:
                to = [orig["sender"]]
                cc = []
                if reply_all:
                    to += [a for a in orig["to"] if a not in to and a != me]
                    cc = list(orig["cc"])
            to = [a for a in dict.fromkeys(to) if a != me] or [me]
            cc = [a for a in dict.fromkeys(cc) if a != me and a not in to]
            subject = orig["subject"]
            if not subject.lower().startswith("re:"):
                subject = f"Re: {subject}"
            new_id = store_sent(conn, to=to, cc=cc, subject=subject, body=body, in_reply_to=orig["id"], files=files)
        return sent_note(new_id, to, cc, subject, files)

    @srv.tool(ADD)
    def forward(message_id: int, to: list[str], body: str = "") -> str:
        """Forward a message, with its attachments, to other people. Subject becomes "Fwd: <subject>".

        Args:
            message_id: id of the message to forward.
            to: recipient addresses (at least one).
            body: optional note placed above the forwarded original.

        Returns a confirmation with the new message id."""
        to_addrs = _addresses(to, "to")
        if not to_addrs:
            raise ToolError("to must list at least one recipient address")
        with closing(connect()) as conn, conn:
            orig = get(conn, message_id)
            check_room(conn, sum(a["size"] for a in orig["attachments"]))  # before reading them
            files = [(a["name"], (att_root / str(orig["id"]) / a["name"]).read_bytes()) for a in orig["attachments"]]
            subject = orig["subject"]
            if not subject.lower().startswith(("fwd:", "fw:")):
                subject = f"Fwd: {subject}"
            quoted = (
                "---------- Forwarded message ----------\n"
                f"From: {_display(orig['sender'], orig['sender_name'])}\nDate: {orig['date']}\n"
                f"Subject: {orig['subject']}\nTo: {', '.join(orig['to'])}\n\n{orig['body']}"
            )
            full = f"{body.rstrip()}\n\n{quoted}" if body.strip() else quoted
            new_id = store_sent(conn, to=to_addrs, cc=[], subject=subject, body=full,
                                forwarded_from=orig["id"], files=files)
        return sent_note(new_id, to_addrs, [], subject, files)

    @srv.tool(SET)
    def move_message(message_id: int, folder: str) -> str:
        """Move a message to another folder. The folder must already exist (see list_folders;
        make new ones with create_folder). Returns a confirmation."""
        with closing(connect()) as conn, conn:
            m = get(conn, message_id)
            name = resolve_folder(conn, folder)
            if m["folder"] == name:
                return f"Message {message_id} is already in {name}."
            conn.execute("UPDATE messages SET folder = ? WHERE id = ?", (name, message_id))
        return f"Moved message {message_id} from {m['folder']} to {name}."

    @srv.tool(ADD)
    def create_folder(name: str) -> str:
        """Create a folder. Use '/' for nesting in the name, e.g. "Invoices/Processed"."""
        clean = "/".join(part.strip() for part in name.strip().split("/"))
        if not clean or any(not part for part in clean.split("/")):
            raise ToolError("folder name must not be empty or contain empty parts (like 'a//b' or a trailing '/')")
        if len(clean) > 100:
            raise ToolError("folder name must be at most 100 characters")
        with closing(connect()) as conn, conn:
            names = folder_names(conn)
            same = [n for n in names if n.lower() == clean.lower()]
            if same:
                raise ToolError(f"folder {same[0]!r} already exists")
            conn.execute("INSERT INTO folders VALUES (?, ?)", (clean, len(names)))
        return f"Created folder {clean!r}."

    @srv.tool(SET)  # replaces a file already at dest_path
    def save_attachment(message_id: int, filename: str, dest_path: str) -> str:
        """Save one attachment of a message into the workspace.

        Args:
            message_id: the message that has the attachment.
            filename: the attachment's name as shown by read_message.
            dest_path: workspace path to write; if it is an existing folder (or ends with '/'),
                the file is saved inside it under its own name. Missing folders are created.

        Returns the workspace path written."""
        with closing(connect()) as conn:
            m = get(conn, message_id)
        names = [a["name"] for a in m["attachments"]]
        match = [n for n in names if n == filename] or [n for n in names if n.lower() == filename.strip().lower()]
        if len(match) != 1:
            listing = ", ".join(names) if names else "none"
            raise ToolError(f"message {message_id} has no attachment named {filename!r} (attachments: {listing})")
        target = ws.path(dest_path)
        if target.is_root or target.kind() == "folder" or dest_path.rstrip().endswith("/"):
            target = target / match[0]
        kind = target.kind()
        if kind == "folder":
            raise ToolError(f"{dest_path!r} is a folder that already contains a folder named {match[0]!r}")
        data = (att_root / str(message_id) / match[0]).read_bytes()  # the app's own state
        target.write_bytes(data)  # never through a link: a link in the way is refused
        note = " (replaced the existing file)" if kind else ""
        return f"Saved {match[0]} from message {message_id} to {target.rel}{note}."

    return srv


build_server = server_builder(make_app)
