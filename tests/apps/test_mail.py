"""The mail app through a real in-process MCP session over a real SQLite mailbox."""

import json

import mcp
import pytest

from longhorizon.apps.mail import state
from longhorizon.apps.mail.server import build_server
from longhorizon.core.world import World

OWNER = "dana@northwind.example"


def seed(root):
    state.create_mailbox(
        root / "state" / "mail.sqlite", OWNER, "Dana Whitfield",
        folders=["Inbox", "Sent", "Archive"],
        messages=[
            {"folder": "Inbox", "sender": "billing@acme.example", "sender_name": "Acme Billing",
             "to": [OWNER], "cc": ["ar@acme.example"], "subject": "Invoice INV-100",
             "body": "Please pay INV-100 by 2026-03-01.", "date": "2026-03-01T08:00:00",
             "attachments": [{"name": "INV-100.pdf", "content": b"%PDF-fake"}]},
            {"folder": "Inbox", "sender": "news@letters.example", "subject": "Weekly digest",
             "body": "Nothing about money.", "date": "2026-03-02T07:00:00"},
            {"folder": "Archive", "sender": "sam@northwind.example", "sender_name": "Sam Ortiz",
             "subject": "Lunch?", "body": "Pizza on Friday?", "date": "2026-02-20T12:00:00", "is_read": True},
            {"folder": "Sent", "sender": OWNER, "sender_name": "Dana Whitfield", "to": ["sam@northwind.example"],
             "subject": "Budget", "body": "Draft attached soon.", "date": "2026-02-21T09:00:00", "is_read": True},
        ],
        now="2026-03-02T10:00:00",
    )


@pytest.fixture
def mworld(tmp_path):
    return World.build(tmp_path / "w", seed)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


def test_create_mailbox_is_byte_identical(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("mail").read_bytes() == b.db_path("mail").read_bytes()
    assert a.hash() == b.hash()


def test_seeded_attachment_bytes_are_stored(mworld):
    assert state.attachment_path(mworld, 1, "INV-100.pdf").read_bytes() == b"%PDF-fake"
    assert state.message(mworld, 1)["attachments"] == [{"name": "INV-100.pdf", "size": 9}]


async def test_list_folders_counts(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        folders = json.loads(await call(client, "list_folders"))
        assert folders[0] == {"name": "Inbox", "messages": 2, "unread": 2}
        assert [f["name"] for f in folders] == ["Inbox", "Sent", "Archive"]


async def test_list_messages_newest_first_and_pages(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        page = json.loads(await call(client, "list_messages", limit=1))
        assert page["total"] == 2 and page["next_offset"] == 1
        assert page["messages"][0]["subject"] == "Weekly digest"
        page2 = json.loads(await call(client, "list_messages", limit=1, offset=1))
        assert page2["messages"][0]["id"] == 1 and page2["messages"][0]["has_attachments"]
        assert page2["next_offset"] is None


async def test_list_messages_unread_only_after_read(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        await call(client, "read_message", message_id=2)
        page = json.loads(await call(client, "list_messages", unread_only=True))
        assert [m["id"] for m in page["messages"]] == [1]


async def test_list_messages_unknown_folder_suggests_create(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        assert "create_folder" in await error(client, "list_messages", folder="Nope")


async def test_search_by_words_sender_and_dates(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        hits = json.loads(await call(client, "search_messages", query="inv-100 pay"))
        assert [m["id"] for m in hits["messages"]] == [1]
        hits = json.loads(await call(client, "search_messages", query="", sender="Sam"))
        assert [m["id"] for m in hits["messages"]] == [3]
        hits = json.loads(await call(client, "search_messages", query="", since="2026-03-01", until="2026-03-01"))
        assert [m["id"] for m in hits["messages"]] == [1]
        hits = json.loads(await call(client, "search_messages", query="digest", folder="Archive"))
        assert hits["total"] == 0


async def test_search_rejects_bad_dates_and_empty_request(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        assert "YYYY-MM-DD" in await error(client, "search_messages", query="x", since="last week")
        assert "query" in await error(client, "search_messages", query=" ")
        assert "required" in await error(client, "search_messages")


async def test_read_message_returns_body_and_marks_read(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        msg = json.loads(await call(client, "read_message", message_id=1))
        assert msg["body"].startswith("Please pay") and msg["attachments"][0]["name"] == "INV-100.pdf"
        assert msg["from"] == "Acme Billing <billing@acme.example>"
        assert state.message(mworld, 1)["is_read"]


async def test_unknown_and_badly_typed_ids_are_tool_errors(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        assert "list_messages" in await error(client, "read_message", message_id=999)
        assert "valid integer" in await error(client, "read_message", message_id="first")


async def test_send_message_stores_in_sent_with_owner_and_clock(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        (mworld.workspace / "notes.txt").write_text("hello")
        text = await call(client, "send_message", to=["Sam Ortiz <Sam@Northwind.example>"], subject=" Hi ",
                          body="See notes.", cc=["lee@northwind.example"], attachments=["notes.txt"])
        new_id = int(text.split()[2])
        sent = state.message(mworld, new_id)
        assert sent["folder"] == "Sent" and sent["sender"] == OWNER
        assert sent["to"] == ["sam@northwind.example"] and sent["cc"] == ["lee@northwind.example"]
        assert sent["subject"] == "Hi" and sent["date"] == "2026-03-02T10:00:00"
        assert state.attachment_path(mworld, new_id, "notes.txt").read_bytes() == b"hello"
        second = int((await call(client, "send_message", to=["a@b.example"], subject="x", body="y")).split()[2])
        assert state.message(mworld, second)["date"] == "2026-03-02T10:01:00"
        assert [m["id"] for m in state.sent_messages(mworld)] == [4, new_id, second]


async def test_send_message_validates_input(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        assert "valid email" in await error(client, "send_message", to=["not-an-address"], subject="s", body="b")
        assert "at least one" in await error(client, "send_message", to=[], subject="s", body="b")
        assert "subject" in await error(client, "send_message", to=["a@b.example"], subject="  ", body="b")
        assert "body" in await error(client, "send_message", to=["a@b.example"], subject="s", body="")
        assert "valid list" in await error(client, "send_message", to="a@b.example", subject="s", body="b")
        assert "outside the workspace" in await error(
            client, "send_message", to=["a@b.example"], subject="s", body="b", attachments=["../state/mail.sqlite"])
        assert "not a file" in await error(
            client, "send_message", to=["a@b.example"], subject="s", body="b", attachments=["missing.txt"])
        assert state.sent_messages(mworld) == [state.message(mworld, 4)]


async def test_reply_goes_to_sender_with_re_subject(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        text = await call(client, "reply", message_id=1, body="Paying Friday.")
        m = state.message(mworld, int(text.split()[2]))
        assert m["to"] == ["billing@acme.example"] and m["cc"] == []
        assert m["subject"] == "Re: Invoice INV-100" and m["in_reply_to"] == 1


async def test_reply_all_includes_cc_and_own_message_replies_to_recipients(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        m = state.message(mworld, int((await call(client, "reply", message_id=1, body="x", reply_all=True)).split()[2]))
        assert m["to"] == ["billing@acme.example"] and m["cc"] == ["ar@acme.example"]
        m = state.message(mworld, int((await call(client, "reply", message_id=4, body="Update")).split()[2]))
        assert m["to"] == ["sam@northwind.example"] and m["subject"] == "Re: Budget"


async def test_reply_rejects_empty_body_and_unknown_id(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        assert "body" in await error(client, "reply", message_id=1, body=" ")
        assert "no message" in await error(client, "reply", message_id=42, body="hi")


async def test_forward_keeps_attachments_and_quotes_original(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        text = await call(client, "forward", message_id=1, to=["lee@northwind.example"], body="FYI")
        m = state.message(mworld, int(text.split()[2]))
        assert m["subject"] == "Fwd: Invoice INV-100" and m["forwarded_from"] == 1
        assert m["body"].startswith("FYI") and "Please pay INV-100" in m["body"]
        assert state.attachment_path(mworld, m["id"], "INV-100.pdf").read_bytes() == b"%PDF-fake"
        assert "valid email" in await error(client, "forward", message_id=1, to=["@@"])


async def test_create_folder_then_move(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        assert "create_folder" in await error(client, "move_message", message_id=1, folder="Invoices/Processed")
        await call(client, "create_folder", name="Invoices/Processed")
        assert "already exists" in await error(client, "create_folder", name="invoices/processed")
        assert "empty" in await error(client, "create_folder", name="Invoices//x")
        await call(client, "move_message", message_id=1, folder="invoices/processed")
        assert state.message(mworld, 1)["folder"] == "Invoices/Processed"
        assert "Invoices/Processed" in state.folders(mworld)
        assert "no message" in await error(client, "move_message", message_id=77, folder="Inbox")


async def test_save_attachment_into_workspace(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        await call(client, "save_attachment", message_id=1, filename="inv-100.PDF", dest_path="invoices/")
        assert (mworld.workspace / "invoices" / "INV-100.pdf").read_bytes() == b"%PDF-fake"
        await call(client, "save_attachment", message_id=1, filename="INV-100.pdf", dest_path="copy.pdf")
        assert (mworld.workspace / "copy.pdf").read_bytes() == b"%PDF-fake"


async def test_save_attachment_errors(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        assert "outside the workspace" in await error(
            client, "save_attachment", message_id=1, filename="INV-100.pdf", dest_path="../../escape.pdf")
        assert "INV-100.pdf" in await error(
            client, "save_attachment", message_id=1, filename="other.pdf", dest_path="x.pdf")
        assert "none" in await error(client, "save_attachment", message_id=2, filename="a", dest_path="x")
        assert not (mworld.root.parent / "escape.pdf").exists()


async def test_missing_mailbox_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no mailbox" in await error(c, "list_folders")


async def test_symlinks_cannot_lead_out_of_the_workspace(mworld, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (mworld.workspace / "out").symlink_to(outside)
    async with mcp.Client(build_server(mworld)) as client:
        assert "symbolic link" in await error(
            client, "save_attachment", message_id=1, filename="INV-100.pdf", dest_path="out/")
        assert "symbolic link" in await error(
            client, "send_message", to=["a@b.example"], subject="s", body="b", attachments=["out/secret.txt"])
    assert [p.name for p in outside.iterdir()] == ["secret.txt"]


async def test_paging_arguments_are_validated(mworld):
    async with mcp.Client(build_server(mworld)) as client:
        assert "limit" in await error(client, "list_messages", limit=0)
        assert "offset" in await error(client, "list_messages", offset=-1)
        assert "limit" in await error(client, "search_messages", query="x", limit=1000)


async def test_the_mailbox_attachment_budget_counts_sends_and_forwards(mworld, monkeypatch):
    """Attachments live in the World's state, outside the workspace cap: all of them together
    (the seeded 9-byte INV-100.pdf included) stay under the mailbox's budget."""
    from longhorizon.apps.mail import server as mail_server

    monkeypatch.setattr(mail_server, "MAX_MAILBOX_ATTACHMENT_BYTES", 100)
    (mworld.workspace / "a.bin").write_bytes(b"a" * 80)
    async with mcp.Client(build_server(mworld)) as client:
        await call(client, "send_message", to=["a@b.example"], subject="s", body="b", attachments=["a.bin"])
        await call(client, "forward", message_id=1, to=["lee@northwind.example"])  # 98 bytes held now
        before = state.sent_messages(mworld)
        assert "past the 0.0 MiB" in await error(client, "forward", message_id=1, to=["lee@northwind.example"])
        assert "past the" in await error(client, "reply", message_id=1, body="x", attachments=["a.bin"])
        assert state.sent_messages(mworld) == before
        await call(client, "reply", message_id=1, body="no files: fine")


async def test_one_call_cannot_stage_more_than_the_mailbox_budget(mworld, monkeypatch):
    from longhorizon.apps.mail import server as mail_server

    monkeypatch.setattr(mail_server, "MAX_MAILBOX_ATTACHMENT_BYTES", 100)
    for i in range(3):
        (mworld.workspace / f"{i}.bin").write_bytes(b"x" * 40)
    async with mcp.Client(build_server(mworld)) as client:
        text = await error(client, "send_message", to=["a@b.example"], subject="s", body="b",
                           attachments=["0.bin", "1.bin", "2.bin"])
    assert "add up to more than" in text and state.sent_messages(mworld) == [state.message(mworld, 4)]
