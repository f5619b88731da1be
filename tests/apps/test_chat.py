"""The chat app through a real in-process MCP session over a real SQLite workspace."""

import json

import mcp
import pytest

from longhorizon.apps.chat import state
from longhorizon.apps.chat.server import build_server
from longhorizon.core.world import World

USERS = [
    {"handle": "dana", "name": "Dana Whitfield", "title": "Ops lead"},
    {"handle": "priya.s", "name": "Priya Shah", "title": "SRE"},
    {"handle": "tom", "name": "Tom Berg", "title": "SRE"},
]
CHANNELS = [
    {"name": "general", "topic": "Everything"},
    {"name": "ops", "topic": "On-call and incidents", "members": ["priya.s", "tom"]},
]
MESSAGES = [
    {"channel": "general", "user": "tom", "text": "Morning all", "ts": "2026-02-02T09:00:00"},
    {"channel": "ops", "user": "priya.s", "text": "I take primary on-call for payments from March. @tom ok?",
     "ts": "2026-02-02T10:00:00", "reactions": {"thumbsup": ["tom", "dana"]}},
    {"channel": "ops", "user": "tom", "text": "Scratch that, I keep payments until April.", "ts": "2026-02-02T10:05:00",
     "thread_id": 2},
    {"channel": "@tom", "user": "tom", "text": "Can you update the rota page?", "ts": "2026-02-02T11:00:00"},
    {"channel": "ops", "user": "tom", "text": "Deploy freeze Friday", "ts": "2026-02-03T08:00:00"},
]


def seed(root):
    state.create_chat(root / "state" / "chat.sqlite", "dana", USERS, CHANNELS, MESSAGES, now="2026-02-03T09:00:00")


@pytest.fixture
def cworld(tmp_path):
    return World.build(tmp_path / "w", seed)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


def test_create_chat_is_byte_identical(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("chat").read_bytes() == b.db_path("chat").read_bytes()


def test_create_chat_parses_mentions_and_rejects_bad_threads(cworld, tmp_path):
    assert state.messages(cworld, "#ops")[0]["mentions"] == ["tom"]
    assert state.reactions(cworld, 2) == {"thumbsup": ["tom", "dana"]}
    with pytest.raises(ValueError, match="earlier"):
        state.create_chat(tmp_path / "x.sqlite", "dana", USERS, CHANNELS,
                          [dict(MESSAGES[0], thread_id=5)], now="2026-02-03T09:00:00")


def test_mentions_ignore_emails_and_unknown_handles():
    assert state.mentions("cc @Tom and @priya.s, mail tom@x.example, @nobody", ["tom", "priya.s"]) == ["tom", "priya.s"]


async def test_list_channels_and_users(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        chans = json.loads(await call(c, "list_channels"))
        assert [ch["name"] for ch in chans] == ["#general", "#ops", "@tom"]
        assert chans[1]["members"] == 3 and chans[1]["messages"] == 3
        users = json.loads(await call(c, "list_users"))
        assert users[0] == {"handle": "dana", "name": "Dana Whitfield", "title": "Ops lead", "email": "", "me": True}


async def test_read_channel_hides_replies_and_pages(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        out = json.loads(await call(c, "read_channel", channel="#ops"))
        assert [m["id"] for m in out["messages"]] == [2, 5] and out["next_before"] is None
        first = out["messages"][0]
        assert first["reply_count"] == 1 and first["reactions"] == {"thumbsup": ["tom", "dana"]}
        page = json.loads(await call(c, "read_channel", channel="ops", limit=1))
        assert [m["id"] for m in page["messages"]] == [5] and page["next_before"] == 5
        older = json.loads(await call(c, "read_channel", channel="ops", limit=1, before=5))
        assert [m["id"] for m in older["messages"]] == [2] and older["next_before"] is None
        dm = json.loads(await call(c, "read_channel", channel="@tom"))
        assert dm["messages"][0]["text"].startswith("Can you")


async def test_read_thread_from_root_or_reply(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        out = json.loads(await call(c, "read_thread", thread_id=3))
        assert out["thread_id"] == 2 and [m["id"] for m in out["messages"]] == [2, 3]
        assert out["channel"] == "#ops"
        assert "no message" in await error(c, "read_thread", thread_id=99)


async def test_search_messages_filters(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        out = json.loads(await call(c, "search_messages", query="payments"))
        assert [m["id"] for m in out["messages"]] == [3, 2] and out["messages"][0]["thread_id"] == 2
        assert json.loads(await call(c, "search_messages", query="", user="Tom Berg", channel="#ops"))["total"] == 2
        assert json.loads(await call(c, "search_messages", query='"freeze friday"'))["total"] == 1
        assert "filter" in await error(c, "search_messages", query="")


async def test_post_message_and_thread_reply(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "post_message", channel="#general", text="Rota updated, thanks @priya.s")
        assert "Posted message 6 in #general" in text
        m = state.messages(cworld, "general")[-1]
        assert m["user"] == "dana" and m["ts"] == "2026-02-03T09:00:00" and m["mentions"] == ["priya.s"]
        assert "thread 2" in await call(c, "post_message", channel="ops", text="Noted", thread_id=3)
        assert state.messages(cworld, "ops")[-1]["thread_id"] == 2
        assert state.messages(cworld, "ops")[-1]["ts"] == "2026-02-03T09:01:00"
        assert [m["id"] for m in state.posts_by_me(cworld)] == [6, 7]


async def test_post_message_errors(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        assert "#general, #ops" in await error(c, "post_message", channel="#random", text="hi")
        assert "not in #general" in await error(c, "post_message", channel="general", text="hi", thread_id=2)
        assert "empty" in await error(c, "post_message", channel="general", text="  ")
        assert "send_direct_message" in await error(c, "post_message", channel="@tom", text="hi")
        assert state.posts_by_me(cworld) == []


async def test_send_direct_message_by_handle_or_name(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        assert "@priya.s" in await call(c, "send_direct_message", user="Priya Shah", text="hello")
        await call(c, "send_direct_message", user="@tom", text="done")
        assert [m["text"] for m in state.messages(cworld, "@tom")] == ["Can you update the rota page?", "done"]
        assert "@priya.s" in [ch["name"] for ch in json.loads(await call(c, "list_channels"))]
        assert "list_users" in await error(c, "send_direct_message", user="zed", text="hi")
        assert "you" in await error(c, "send_direct_message", user="dana", text="hi")


async def test_add_reaction(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        await call(c, "add_reaction", message_id=5, emoji=":eyes:")
        assert state.reactions(cworld, 5) == {"eyes": ["dana"]}
        assert "no message" in await error(c, "add_reaction", message_id=50, emoji="eyes")
        assert "emoji" in await error(c, "add_reaction", message_id=5, emoji="two words")


async def test_missing_chat_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no chat" in await error(c, "list_channels")
