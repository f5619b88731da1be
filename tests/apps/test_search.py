"""The search app through a real in-process MCP session over a real FTS5 archive."""

import json
import sqlite3

import mcp
import pytest

from longhorizon.apps.search import state
from longhorizon.apps.search.server import PAGE_CHARS, build_server
from longhorizon.core.world import World

SOURCES = {"press": "Vendor press releases (official)", "meetings": "Internal meeting notes"}
DOCS = [
    {"id": "DOC-0001", "title": "Acme raises list price", "source": "press", "date": "2026-01-10",
     "body": "Acme Corp announced today that the list price per seat rises to $45 per month.", "author": "Acme PR"},
    {"id": "DOC-0002", "title": "Weekly sync", "source": "meetings", "date": "2026-02-01",
     "body": "Someone heard Acme pricing may go up again. Ticket INV-2041 still open.", "author": "Dana"},
    {"id": "DOC-0003", "title": "Globex renewals", "source": "press", "date": "2025-11-05",
     "body": "Globex renewed its contracts with three customers.", "author": "Globex PR"},
    {"id": "DOC-0004", "title": "Long report", "source": "meetings", "date": "2026-03-01",
     "body": "Budget planning. " + "filler words here. " * 600 + "The end."},
]


def seed(root):
    state.create_index(root / "state" / "search.sqlite", DOCS, SOURCES)


@pytest.fixture
def sworld(tmp_path):
    return World.build(tmp_path / "w", seed)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


def test_create_index_is_byte_identical_and_has_fts5(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("search").read_bytes() == b.db_path("search").read_bytes()
    with sqlite3.connect(a.db_path("search")) as conn:
        assert conn.execute("SELECT COUNT(*) FROM documents_fts WHERE documents_fts MATCH 'acme'").fetchone()[0] == 2


def test_create_index_rejects_duplicate_ids(tmp_path):
    with pytest.raises(ValueError, match="duplicate"):
        state.create_index(tmp_path / "s.sqlite", [DOCS[0], dict(DOCS[1], id="doc-0001")])


def test_fts_query_always_parses():
    assert state.fts_query("INV-2041")[0] == '"inv 2041"'
    assert state.fts_query('acme "list price" OR globex')[0] == '"acme" "list price" OR "globex"'
    assert state.fts_query("NOT acme migrat* OR")[0] == '"acme" "migrat"*'
    assert state.fts_query("?! --")[1] == []


async def test_search_ranks_and_snippets(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        out = json.loads(await call(c, "search", query="acme price"))
        assert [h["id"] for h in out["hits"]] == ["DOC-0001", "DOC-0002"]  # title match ranks first
        assert "[price]" in out["hits"][0]["snippet"].lower() and out["next_offset"] is None
        assert out["hits"][0]["source"] == "press" and out["hits"][0]["date"] == "2026-01-10"


async def test_search_stems_phrases_and_punctuation(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert [h["id"] for h in json.loads(await call(c, "search", query="renewal"))["hits"]] == ["DOC-0003"]
        assert [h["id"] for h in json.loads(await call(c, "search", query="INV-2041"))["hits"]] == ["DOC-0002"]
        assert json.loads(await call(c, "search", query='"price acme"'))["total"] == 0
        assert json.loads(await call(c, "search", query="acme NOT ticket"))["total"] == 1


async def test_search_falls_back_to_any_word(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        out = json.loads(await call(c, "search", query="globex budget"))
        assert out["total"] == 2 and "any" in out["note"]


async def test_search_filters_and_pages(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        out = json.loads(await call(c, "search", query="acme", source="Press"))
        assert [h["id"] for h in out["hits"]] == ["DOC-0001"]
        out = json.loads(await call(c, "search", query="acme OR globex", since="2026-01-01"))
        assert {h["id"] for h in out["hits"]} == {"DOC-0001", "DOC-0002"}
        page = json.loads(await call(c, "search", query="", source="meetings", limit=1))
        assert page["hits"][0]["id"] == "DOC-0004" and page["next_offset"] == 1 and page["total"] == 2
        page2 = json.loads(await call(c, "search", query="", source="meetings", limit=1, offset=1))
        assert page2["hits"][0]["id"] == "DOC-0002" and page2["next_offset"] is None


async def test_search_errors_say_how_to_fix(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "press, meetings" in await error(c, "search", query="acme", source="blogs")
        assert "YYYY-MM-DD" in await error(c, "search", query="acme", since="last week")
        assert "words" in await error(c, "search", query="  ")
        assert "limit" in await error(c, "search", query="acme", limit=0)


async def test_get_document_pages_long_bodies(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        doc = json.loads(await call(c, "get_document", doc_id="doc-0001"))
        assert doc["id"] == "DOC-0001" and doc["body"].startswith("Acme Corp") and doc["next_offset"] is None
        long = json.loads(await call(c, "get_document", doc_id="DOC-0004"))
        assert len(long["body"]) == PAGE_CHARS and long["next_offset"] == PAGE_CHARS
        rest = json.loads(await call(c, "get_document", doc_id="DOC-0004", offset=long["next_offset"]))
        assert rest["body"].endswith("The end.") and rest["next_offset"] is None


async def test_get_document_unknown_id_suggests(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "DOC-0001" in await error(c, "get_document", doc_id="DOC-001")
        assert "past the end" in await error(c, "get_document", doc_id="DOC-0001", offset=9999)


async def test_list_sources_counts_and_ranges(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        out = json.loads(await call(c, "list_sources"))
        assert out[0] == {"name": "press", "description": SOURCES["press"], "documents": 2,
                          "oldest": "2025-11-05", "newest": "2026-01-10"}
        assert [s["name"] for s in out] == ["press", "meetings"]


async def test_archive_is_read_only(sworld):
    before = sworld.db_path("search").read_bytes()
    async with mcp.Client(build_server(sworld)) as c:
        await call(c, "search", query="acme")
        await call(c, "get_document", doc_id="DOC-0002")
    assert sworld.db_path("search").read_bytes() == before
    with pytest.raises(sqlite3.OperationalError):
        with state.connect_readonly(sworld.db_path("search")) as conn:
            conn.execute("DELETE FROM documents")


async def test_missing_archive_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no document archive" in await error(c, "list_sources")
