"""The slides app, driven through a real in-process MCP client session."""

import json

import mcp
import pytest

from longhorizon.apps.slides.server import build_server
from longhorizon.apps.slides.state import (
    build_presentation,
    presentation_bytes,
    read_deck,
    save_presentation,
)

DECK = "decks/q2.pptx"


def session(world):
    return mcp.Client(build_server(world))


async def call(client, tool, **args):
    r = await client.call_tool(tool, args)
    return r.content[0].text, r.is_error


async def ok(client, tool, **args):
    text, err = await call(client, tool, **args)
    assert not err, text
    return text


async def fails(client, tool, **args):
    text, err = await call(client, tool, **args)
    assert err, text
    return text


@pytest.fixture
def ws(world):
    prs = build_presentation([
        {"title": "Q2 Review", "bullets": ["Sales team"], "layout": "title"},
        {"title": "North", "bullets": ["Revenue: $1.2M", "New customers: 4"], "notes": "Ana presents"},
        {"title": "South", "bullets": ["Revenue: $0.9M"]},
    ])
    p = world.file(DECK)
    p.parent.mkdir(parents=True)
    save_presentation(prs, p)
    return world


def titles(world, path=DECK):
    return [s["title"] for s in read_deck(world.file(path))]


async def test_list_and_read_slides(ws):
    async with session(ws) as c:
        out = json.loads(await ok(c, "list_slides", path=DECK))
        assert out["slides"] == [
            {"index": 0, "layout": "title", "title": "Q2 Review", "bullets": 1, "has_notes": False},
            {"index": 1, "layout": "title_and_content", "title": "North", "bullets": 2, "has_notes": True},
            {"index": 2, "layout": "title_and_content", "title": "South", "bullets": 1, "has_notes": False},
        ]
        one = json.loads(await ok(c, "read_slide", path=DECK, index=1))
    assert one == {"index": 1, "layout": "title_and_content", "title": "North",
                   "bullets": ["Revenue: $1.2M", "New customers: 4"], "notes": "Ana presents"}


async def test_create_deck_and_add_slides(world):
    async with session(world) as c:
        await ok(c, "create_deck", path="out/q3.pptx")
        assert json.loads(await ok(c, "list_slides", path="out/q3.pptx"))["slides"] == []
        await ok(c, "add_slide", path="out/q3.pptx", title="Q3 Review", bullets=["Ops"], layout="title")
        msg = await ok(c, "add_slide", path="out/q3.pptx", title="East", bullets=["a", "b"], notes="Bo\npresents")
        assert "slide 1" in msg
        await ok(c, "add_slide", path="out/q3.pptx", title="Agenda", layout="Title Only", position=1)
        await fails(c, "create_deck", path="out/q3.pptx")
    deck = read_deck(world.file("out/q3.pptx"))
    assert [(s["layout"], s["title"], s["bullets"]) for s in deck] == [
        ("title", "Q3 Review", ["Ops"]), ("title_only", "Agenda", []), ("title_and_content", "East", ["a", "b"])]
    assert deck[2]["notes"] == "Bo\npresents"


async def test_update_slide_changes_only_what_is_given(ws):
    async with session(ws) as c:
        out = json.loads(await ok(c, "update_slide", path=DECK, index=1, bullets=["Revenue: $1.3M"]))
        assert out["title"] == "North" and out["notes"] == "Ana presents"
        await ok(c, "update_slide", path=DECK, index=2, title="South & Islands", notes="Cy presents")
        await ok(c, "update_slide", path=DECK, index=1, notes="")
        await fails(c, "update_slide", path=DECK, index=1)
    deck = read_deck(ws.file(DECK))
    assert deck[1]["bullets"] == ["Revenue: $1.3M"] and deck[1]["notes"] == ""
    assert deck[2] == {"index": 2, "layout": "title_and_content", "title": "South & Islands",
                       "bullets": ["Revenue: $0.9M"], "notes": "Cy presents"}


async def test_delete_and_move_slides(ws):
    async with session(ws) as c:
        msg = await ok(c, "move_slide", path=DECK, index=2, new_index=1)
        assert '["Q2 Review", "South", "North"]' in msg
        await ok(c, "delete_slide", path=DECK, index=0)
        await ok(c, "add_slide", path=DECK, title="West", bullets=["x"])
    assert titles(ws) == ["South", "North", "West"]
    assert read_deck(ws.file(DECK))[1]["notes"] == "Ana presents"


async def test_bad_input_is_a_readable_error(ws):
    async with session(ws) as c:
        assert "does not exist" in await fails(c, "list_slides", path="nope.pptx")
        assert ".pptx" in await fails(c, "read_slide", path="a.docx", index=0)
        assert "outside the workspace" in await fails(c, "create_deck", path="../x.pptx")
        assert "numbered from 0" in await fails(c, "read_slide", path=DECK, index=3)
        assert "unknown layout" in await fails(c, "add_slide", path=DECK, title="x", layout="fancy")
        assert "no text body" in await fails(c, "add_slide", path=DECK, title="x", bullets=["a"], layout="title_only")
        assert "line break" in await fails(c, "add_slide", path=DECK, title="x", bullets=["a\nb"])
        await fails(c, "add_slide", path=DECK, title="x", position=7)
        await fails(c, "move_slide", path=DECK, index=0, new_index=3)
        await fails(c, "delete_slide", path=DECK, index=-1)
    assert titles(ws) == ["Q2 Review", "North", "South"]


def test_saving_is_byte_deterministic():
    spec = [{"title": "T", "bullets": ["a"], "layout": "title"}, {"title": "S", "bullets": ["b"], "notes": "n"}]
    assert presentation_bytes(build_presentation(spec)) == presentation_bytes(build_presentation(spec))


async def test_same_edits_give_identical_files(tmp_path):
    from longhorizon.core.world import World

    digests = []
    for name in ("a", "b"):
        w = World.build(tmp_path / name, lambda root: None)
        async with session(w) as c:
            await ok(c, "create_deck", path="d.pptx")
            await ok(c, "add_slide", path="d.pptx", title="A", bullets=["1"], notes="n")
            await ok(c, "add_slide", path="d.pptx", title="B", bullets=["2"])
            await ok(c, "delete_slide", path="d.pptx", index=0)
        digests.append(w.file("d.pptx").read_bytes())
    assert digests[0] == digests[1]
