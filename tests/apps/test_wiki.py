"""The wiki app through a real in-process MCP session over a real SQLite wiki."""

import json

import mcp
import pytest

from longhorizon.apps.wiki import state
from longhorizon.apps.wiki.server import build_server
from longhorizon.core.world import World

PAGES = [
    {"slug": "home", "title": "Home", "author": "ana", "updated": "2026-01-02T09:00:00", "tags": ["index"],
     "body": "# Welcome\nSee [[incident-handbook|the handbook]] and [[berlin-office]]."},
    {"slug": "berlin-office", "title": "Berlin office", "author": "ben", "updated": "2026-01-03T10:00:00",
     "tags": ["offices"], "body": "Address: Torstrasse 1, Berlin.\nIncidents: [[incident-handbook#paging]].",
     "history": [{"body": "Address: TBD", "author": "ben", "date": "2025-12-01T10:00:00"}]},
    {"slug": "incident-response", "title": "Incident response", "author": "cy", "updated": "2026-01-04T11:00:00",
     "body": "1. Page the on-call.\n2. Open a channel."},
    {"slug": "runbook-db-failover", "title": "Runbook: DB failover", "author": "cy",
     "updated": "2026-01-04T12:00:00", "body": "Steps to fail over the database."},
]
RENAMES = [{"old_slug": "incident-handbook", "new_slug": "incident-response", "author": "cy",
            "date": "2026-01-04T11:00:00"}]


def seed(root):
    state.create_wiki(root / "state" / "wiki.sqlite", PAGES, user="dana", now="2026-02-01T09:00:00",
                      renames=RENAMES)


@pytest.fixture
def wworld(tmp_path):
    return World.build(tmp_path / "w", seed)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


def test_create_wiki_is_byte_identical(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("wiki").read_bytes() == b.db_path("wiki").read_bytes()


def test_create_wiki_keeps_history_and_rejects_bad_slugs(wworld, tmp_path):
    p = state.page(wworld, "berlin-office")
    assert p["revision"] == 2 and p["created"] == "2025-12-01T10:00:00"
    assert [r["body"] for r in state.revisions(wworld, p["id"])] == ["Address: TBD", PAGES[1]["body"]]
    with pytest.raises(ValueError, match="slug"):
        state.create_wiki(tmp_path / "x.sqlite", [dict(PAGES[0], slug="Bad Slug")], user="u", now="2026-01-01")


def test_link_targets_reads_every_wikilink_form():
    assert state.link_targets("[[a]] [[B-c|label]] [[d#sec]] [[ a ]] [not](a)") == ["a", "b-c", "d"]


async def test_search_pages_ranks_title_matches_and_filters_tags(wworld):
    async with mcp.Client(build_server(wworld)) as c:
        out = json.loads(await call(c, "search_pages", query="berlin"))
        assert [p["slug"] for p in out["pages"]] == ["berlin-office", "home"]
        assert "Torstrasse" in out["pages"][0]["snippet"]
        out = json.loads(await call(c, "search_pages", query='"torstrasse 1"', tag="offices"))
        assert out["total"] == 1
        assert json.loads(await call(c, "search_pages", query="berlin", tag="index"))["total"] == 1
        assert "word" in await error(c, "search_pages", query=" ")


async def test_get_page_shows_links_and_broken_ones(wworld):
    async with mcp.Client(build_server(wworld)) as c:
        p = json.loads(await call(c, "get_page", slug="home"))
        assert p["tags"] == ["index"] and p["revision"] == 1
        assert p["links"] == [{"slug": "incident-handbook", "exists": False}, {"slug": "berlin-office", "exists": True}]
        old = json.loads(await call(c, "get_page", slug="berlin-office", revision=1))
        assert old["body"] == "Address: TBD" and old["revision"] == 1


async def test_get_page_explains_renames_and_suggests(wworld):
    async with mcp.Client(build_server(wworld)) as c:
        assert "renamed to 'incident-response'" in await error(c, "get_page", slug="incident-handbook")
        assert "berlin-office" in await error(c, "get_page", slug="berlin-ofice")
        assert "revisions 1-2" in await error(c, "get_page", slug="berlin-office", revision=7)


async def test_list_pages_by_tag(wworld):
    async with mcp.Client(build_server(wworld)) as c:
        out = json.loads(await call(c, "list_pages"))
        assert out["total"] == 4 and out["pages"][0]["slug"] == "berlin-office"
        assert [p["slug"] for p in json.loads(await call(c, "list_pages", tag="offices"))["pages"]] == ["berlin-office"]


async def test_update_page_keeps_revision_and_relinks(wworld):
    async with mcp.Client(build_server(wworld)) as c:
        text = await call(c, "update_page", slug="home", body="See [[incident-response]].", summary="Fix link")
        assert "revision 2" in text and "Warning" not in text
        p = state.page(wworld, "home")
        assert p["author"] == "dana" and p["updated"] == "2026-02-01T09:00:00"
        revs = state.revisions(wworld, p["id"])
        assert revs[-1]["summary"] == "Fix link" and revs[0]["body"] == PAGES[0]["body"]
        back = json.loads(await call(c, "backlinks", slug="incident-handbook"))
        assert [r["slug"] for r in back["pages"]] == ["berlin-office"] and back["renamed_to"] == "incident-response"
        assert "Warning" in await call(c, "update_page", slug="home", body="[[nowhere]]", summary="x")
        assert state.page(wworld, "home")["updated"] == "2026-02-01T09:01:00"


async def test_update_page_validates(wworld):
    async with mcp.Client(build_server(wworld)) as c:
        assert "summary" in await error(c, "update_page", slug="home", body="x", summary=" ")
        assert "body" in await error(c, "update_page", slug="home", body="", summary="x")
        assert "nothing changed" in await call(c, "update_page", slug="home", body=PAGES[0]["body"], summary="x")
        assert state.page(wworld, "home")["revision"] == 1


async def test_create_page_and_duplicates(wworld):
    async with mcp.Client(build_server(wworld)) as c:
        await call(c, "create_page", slug="paris-office", title="Paris office", body="[[home]]", tags=["Offices"])
        p = state.page(wworld, "paris-office")
        assert p["tags"] == ["offices"] and p["revision"] == 1 and p["author"] == "dana"
        assert "already exists" in await error(c, "create_page", slug="home", title="x", body="y")
        assert "not valid" in await error(c, "create_page", slug="Paris Office", title="x", body="y")


async def test_rename_page_lists_stale_links(wworld):
    async with mcp.Client(build_server(wworld)) as c:
        text = await call(c, "rename_page", slug="berlin-office", new_slug="office-berlin", new_title="Office: Berlin")
        assert "home" in text and "need updating" in text
        p = state.page(wworld, "office-berlin")
        assert p["title"] == "Office: Berlin" and state.page(wworld, "berlin-office") is None
        assert "renamed to 'office-berlin'" in await error(c, "get_page", slug="berlin-office")
        assert "already exists" in await error(c, "rename_page", slug="home", new_slug="office-berlin")
        revs = json.loads(await call(c, "list_revisions", slug="office-berlin"))
        assert revs[0]["summary"] == "Renamed from berlin-office to office-berlin" and revs[0]["revision"] == 3


async def test_tags_add_and_remove(wworld):
    async with mcp.Client(build_server(wworld)) as c:
        assert "runbook" in await call(c, "add_tag", slug="runbook-db-failover", tag="#Runbook")
        await call(c, "add_tag", slug="runbook-db-failover", tag="runbook")
        assert state.page(wworld, "runbook-db-failover")["tags"] == ["runbook"]
        assert "no tag" in await error(c, "remove_tag", slug="home", tag="runbook")
        assert "(none)" in await call(c, "remove_tag", slug="runbook-db-failover", tag="runbook")
        assert "not valid" in await error(c, "add_tag", slug="home", tag="two words")


async def test_missing_wiki_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no wiki" in await error(c, "list_pages")
