"""The docs app, driven through a real in-process MCP client session."""

import json

import mcp
import pytest

from longhorizon.apps.docs.server import build_server
from longhorizon.apps.docs.state import (
    build_document,
    document_bytes,
    read_blocks,
    read_comments,
    save_document,
    sections,
)

DOC = "legal/msa.docx"


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
    doc = build_document([
        ("Title", "Master Services Agreement"),
        ("Heading 1", "1. Definitions"),
        "The Customer means Acme Ltd. The Customer pays.",
        ("List Bullet", "Services"),
        {"table": [["Milestone", "Date"], ["Kick-off", "1 March 2025"]]},
        ("Heading 1", "2. Term"),
        "This Agreement starts on 1 March 2025.",
    ], title="MSA")
    p = world.file(DOC)
    p.parent.mkdir(parents=True)
    save_document(doc, p)
    return world


def texts(world, path=DOC):
    return [(b.get("style"), b.get("text", b.get("rows"))) for b in read_blocks(world.file(path))]


async def test_read_document_numbers_blocks_with_styles_and_tables(ws):
    async with session(ws) as c:
        out = json.loads(await ok(c, "read_document", path=DOC))
    assert out["title"] == "MSA" and out["total_blocks"] == 7 and out["next_start"] is None
    assert out["blocks"][0] == {"index": 0, "style": "Title", "text": "Master Services Agreement"}
    assert out["blocks"][3] == {"index": 3, "style": "List Bullet", "text": "Services"}
    assert out["blocks"][4] == {"index": 4, "table": [["Milestone", "Date"], ["Kick-off", "1 March 2025"]]}
    assert out["comments"] == []


async def test_long_documents_are_paged(world):
    save_document(build_document([f"Paragraph {i} " + "x" * 400 for i in range(80)]), world.file("big.docx"))
    async with session(world) as c:
        first = json.loads(await ok(c, "read_document", path="big.docx"))
        assert first["next_start"] and len(first["blocks"]) == first["next_start"]
        rest = json.loads(await ok(c, "read_document", path="big.docx", start=first["next_start"]))
    assert rest["blocks"][0]["index"] == first["next_start"]
    assert rest["blocks"][-1]["index"] == 79 or rest["next_start"]


async def test_create_and_append_builds_a_document(world):
    async with session(world) as c:
        await ok(c, "create_document", path="out/report.docx", title="Status")
        msg = await ok(c, "append_paragraph", path="out/report.docx", text="Summary", style="heading 1")
        assert "paragraph 1" in msg and "Heading 1" in msg
        await ok(c, "append_paragraph", path="out/report.docx", text="All good.")
        await ok(c, "append_paragraph", path="out/report.docx", text="Item", style="List Bullet")
        await fails(c, "create_document", path="out/report.docx")
    assert texts(world, "out/report.docx") == [
        ("Title", "Status"), ("Heading 1", "Summary"), ("Normal", "All good."), ("List Bullet", "Item")]


async def test_insert_set_and_delete_paragraphs(ws):
    async with session(ws) as c:
        await ok(c, "insert_paragraph", path=DOC, index=1, text="Draft v2", style="Subtitle")
        await ok(c, "set_paragraph", path=DOC, index=2, text="1. Interpretation")
        await ok(c, "set_paragraph", path=DOC, index=4, style="List Number")
        gone = await ok(c, "delete_paragraph", path=DOC, index=3)
        assert "The Customer means" in gone
        await ok(c, "insert_paragraph", path=DOC, index=7, text="Signed.")
    t = texts(ws)
    assert t[1] == ("Subtitle", "Draft v2")
    assert t[2] == ("Heading 1", "1. Interpretation")
    assert t[3] == ("List Number", "Services")
    assert t[-1] == ("Normal", "Signed.") and len(t) == 8


async def test_replace_text_all_or_one_occurrence(ws):
    async with session(ws) as c:
        msg = await ok(c, "replace_text", path=DOC, old="1 March 2025", new="1 April 2026")
        assert "Replaced 2 of 2" in msg and "4:1,1" in msg
        await ok(c, "replace_text", path=DOC, old="Customer", new="Client", occurrence=2)
        text = await fails(c, "replace_text", path=DOC, old="customer", new="x")
        assert "case" in text
        await fails(c, "replace_text", path=DOC, old="Customer", new="x", occurrence=5)
    t = texts(ws)
    assert t[2][1] == "The Customer means Acme Ltd. The Client pays."
    assert t[4][1][1] == ["Kick-off", "1 April 2026"]
    assert t[6][1] == "This Agreement starts on 1 April 2026."


async def test_replace_text_spanning_runs_keeps_the_paragraph(world):
    doc = build_document(["x"])
    par = doc.paragraphs[0]
    par.runs[0].text = "Harlow Data "
    par.add_run("Systems Inc.").bold = True
    par.add_run(" agrees.")
    save_document(doc, world.file("a.docx"))
    async with session(world) as c:
        await ok(c, "replace_text", path="a.docx", old="Data Systems Inc.", new="Data Systems Ltd")
    assert texts(world, "a.docx") == [("Normal", "Harlow Data Systems Ltd agrees.")]


async def test_find_text_reports_paragraphs_and_cells(ws):
    async with session(ws) as c:
        out = json.loads(await ok(c, "find_text", path=DOC, query="march 2025"))
        assert out["matches"] == 2 and [h["location"] for h in out["hits"]] == ["4:1,1", "6"]
        out = json.loads(await ok(c, "find_text", path=DOC, query="customer", match_case=True))
        assert out["matches"] == 0
        await fails(c, "find_text", path=DOC, query="")


async def test_tables_add_edit_delete(ws):
    async with session(ws) as c:
        msg = await ok(c, "add_table", path=DOC, rows=[["Risk", "Owner"], ["Delay"]], after_index=1)
        assert "block 2" in msg
        await ok(c, "set_table_cell", path=DOC, index=2, row=1, column=1, text="Ana")
        await fails(c, "set_table_cell", path=DOC, index=2, row=5, column=0, text="x")
        await fails(c, "set_paragraph", path=DOC, index=2, text="x")
        await fails(c, "delete_paragraph", path=DOC, index=2)
        await ok(c, "add_table", path=DOC, rows=[["Total", "3"]])
    t = texts(ws)
    assert t[2] == (None, [["Risk", "Owner"], ["Delay", "Ana"]])
    assert t[-1] == (None, [["Total", "3"]])
    async with session(ws) as c:
        await fails(c, "delete_table", path=DOC, index=1)
        await ok(c, "delete_table", path=DOC, index=2)
    assert len(texts(ws)) == 8


async def test_comments_are_real_and_anchored(ws):
    async with session(ws) as c:
        msg = await ok(c, "add_comment", path=DOC, index=6, text="Confirm the start date", author="Dana Lee")
        assert "comment 0" in msg
        out = json.loads(await ok(c, "read_document", path=DOC))
        await fails(c, "add_comment", path=DOC, index=4, text="on a table")
        await fails(c, "add_comment", path=DOC, index=6, text="  ")
    assert out["comments"] == [{"id": 0, "index": 6, "author": "Dana Lee", "text": "Confirm the start date"}]
    assert read_comments(ws.file(DOC))[0]["index"] == 6
    assert texts(ws)[6][1] == "This Agreement starts on 1 March 2025."


async def test_list_documents(ws):
    (ws.workspace / "notes.txt").write_text("not a doc")
    async with session(ws) as c:
        out = json.loads(await ok(c, "list_documents"))
        assert out == [{"path": DOC, "title": "MSA", "blocks": 7, "bytes": ws.file(DOC).stat().st_size}]
        assert json.loads(await ok(c, "list_documents", folder="legal"))[0]["path"] == DOC
        await fails(c, "list_documents", folder="nowhere")


async def test_bad_input_is_a_readable_error(ws):
    async with session(ws) as c:
        assert "does not exist" in await fails(c, "read_document", path="missing.docx")
        assert ".docx" in await fails(c, "read_document", path="notes.txt")
        assert "outside the workspace" in await fails(c, "read_document", path="../x.docx")
        assert "no paragraph style" in await fails(c, "append_paragraph", path=DOC, text="x", style="Fancy")
        assert "no block 99" in await fails(c, "set_paragraph", path=DOC, index=99, text="x")
        assert "between 0 and 7" in await fails(c, "insert_paragraph", path=DOC, index=9, text="x")
        await fails(c, "set_paragraph", path=DOC, index=1)
        assert "control" in await fails(c, "append_paragraph", path=DOC, text="bad\x07bell")
        assert "rows" in await fails(c, "add_table", path=DOC, rows=[])
    (ws.workspace / "broken.docx").write_text("not a zip")
    async with session(ws) as c:
        assert "could not be opened" in await fails(c, "read_document", path="broken.docx")


def test_saving_is_byte_deterministic():
    blocks = [("Title", "T"), ("Heading 1", "H"), "Body", {"table": [["a", "b"], ["c", "d"]]}]
    assert document_bytes(build_document(blocks)) == document_bytes(build_document(blocks))


async def test_same_edits_give_identical_files(tmp_path):
    from longhorizon.core.world import World

    digests = []
    for name in ("a", "b"):
        w = World.build(tmp_path / name, lambda root: None)
        async with session(w) as c:
            await ok(c, "create_document", path="r.docx", title="R")
            await ok(c, "append_paragraph", path="r.docx", text="Hello")
            await ok(c, "add_comment", path="r.docx", index=1, text="note")
        digests.append(w.file("r.docx").read_bytes())
    assert digests[0] == digests[1]


def test_sections_split_at_headings():
    blocks = [{"type": "paragraph", "style": s, "text": t} for s, t in [
        ("Title", "R"), ("Heading 1", "A"), ("Normal", "a1"), ("Heading 2", "A.1"), ("Heading 1", "B")]]
    got = [(h["text"], [b["text"] for b in body]) for h, body in sections(blocks)]
    assert got == [("R", []), ("A", ["a1", "A.1"]), ("B", [])]


async def test_rewriting_a_commented_paragraph_keeps_its_comment(ws):
    async with session(ws) as c:
        await ok(c, "add_comment", path=DOC, index=2, text="Check the definition")
        await ok(c, "set_paragraph", path=DOC, index=2, text="The Client means Acme Ltd.")
        await ok(c, "replace_text", path=DOC, old="Acme", new="Apex")
    assert texts(ws)[2] == ("Normal", "The Client means Apex Ltd.")
    assert [(x["index"], x["text"]) for x in read_comments(ws.file(DOC))] == [(2, "Check the definition")]


async def test_copy_document_saves_a_new_version_and_leaves_the_original(ws):
    before = ws.file(DOC).read_bytes()
    async with session(ws) as c:
        msg = await ok(c, "copy_document", source=DOC, path="legal/v2/msa_v2.docx")
        assert "legal/v2/msa_v2.docx" in msg and "7 blocks" in msg
        await ok(c, "replace_text", path="legal/v2/msa_v2.docx", old="Customer", new="Client")
    assert ws.file(DOC).read_bytes() == before
    assert texts(ws, "legal/v2/msa_v2.docx")[2] == ("Normal", "The Client means Acme Ltd. The Client pays.")
    assert texts(ws, "legal/v2/msa_v2.docx")[4] == texts(ws)[4]


async def test_copy_document_refuses_overwrites_and_bad_paths(ws):
    (ws.workspace / "notes.txt").write_text("not a doc")
    async with session(ws) as c:
        assert "already exists" in await fails(c, "copy_document", source=DOC, path=DOC)
        await ok(c, "copy_document", source=DOC, path="copy.docx")
        assert "already exists" in await fails(c, "copy_document", source=DOC, path="copy.docx")
        assert "does not exist" in await fails(c, "copy_document", source="missing.docx", path="x.docx")
        assert ".docx" in await fails(c, "copy_document", source=DOC, path="copy.txt")
        assert ".docx" in await fails(c, "copy_document", source="notes.txt", path="y.docx")
        assert "outside the workspace" in await fails(c, "copy_document", source=DOC, path="../out.docx")
    assert not (ws.workspace / "x.docx").exists() and not (ws.workspace / "y.docx").exists()
