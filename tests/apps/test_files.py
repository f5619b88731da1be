"""The files app through a real in-process MCP client session."""

import json

import pytest
from mcp import Client

from longhorizon.apps.files.server import build_server


async def call(c, name, **args):
    r = await c.call_tool(name, args)
    return r.content[0].text, r.is_error


@pytest.fixture
def ws(world):
    (world.workspace / "docs").mkdir()
    (world.workspace / "docs" / "a.txt").write_text("alpha\nBeta line\n")
    (world.workspace / "notes.md").write_text("# notes\nbeta\n")
    return world


async def test_write_read_list_roundtrip(ws):
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "write_file", path="out/report.txt", content="hello")
        assert not err and "out/report.txt" in text
        assert (ws.workspace / "out" / "report.txt").read_text() == "hello"
        text, err = await call(c, "read_file", path="out/report.txt")
        assert (text, err) == ("hello", False)
        text, _ = await call(c, "list_dir", path=".", recursive=True)
        assert "docs/a.txt" in text and "out/" in text and "notes.md" in text


async def test_move_copy_delete(ws):
    async with Client(build_server(ws)) as c:
        _, err = await call(c, "copy", src="notes.md", dst="docs")
        assert not err and (ws.workspace / "docs" / "notes.md").exists()
        _, err = await call(c, "move", src="notes.md", dst="archive/old.md")
        assert not err and not (ws.workspace / "notes.md").exists()
        assert (ws.workspace / "archive" / "old.md").read_text().startswith("# notes")
        text, err = await call(c, "move", src="docs/a.txt", dst="archive/old.md")
        assert err and "already exists" in text
        text, err = await call(c, "delete", path="docs")
        assert err and "recursive" in text
        _, err = await call(c, "delete", path="docs", recursive=True)
        assert not err and not (ws.workspace / "docs").exists()


async def test_search_is_case_insensitive_by_default(ws):
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "search", query="beta")
        hits = json.loads(text)
        assert not err and {(h["path"], h["line"]) for h in hits} == {("docs/a.txt", 2), ("notes.md", 2)}
        text, _ = await call(c, "search", query="beta", glob="*.md")
        assert [h["path"] for h in json.loads(text)] == ["notes.md"]


@pytest.mark.parametrize("path", ["../outside.txt", "docs/../../x", "/../../etc/passwd"])
async def test_paths_cannot_escape_workspace(ws, path):
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "write_file", path=path, content="x")
        assert err and "outside the workspace" in text
    assert not (ws.root / "outside.txt").exists()


async def test_absolute_path_means_workspace_root(ws):
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "read_file", path="/notes.md")
        assert not err and text.startswith("# notes")


async def test_symlink_out_of_workspace_is_refused(ws, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (ws.workspace / "link").symlink_to(secret)
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "read_file", path="link")
        assert err and "symbolic link" in text and "top secret" not in text


async def test_bad_input_is_a_readable_error(ws):
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "read_file", path="missing.txt")
        assert err and "does not exist" in text
        r = await c.call_tool("read_file", {"path": ["not", "a", "string"]})
        assert r.is_error
        text, err = await call(c, "delete", path=".")
        assert err and "root" in text


async def test_long_file_is_paged(ws):
    (ws.workspace / "big.txt").write_text("x" * 50_000)
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "read_file", path="big.txt")
        assert not err and "offset=20000" in text and len(text) < 20_200
        text, _ = await call(c, "read_file", path="big.txt", offset=40_000)
        assert text == "x" * 10_000


async def test_pipes_are_refused_not_read(ws):
    import os

    os.mkfifo(ws.workspace / "pipe")
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "read_file", path="pipe")
        assert err and "not a regular file" in text
        text, err = await call(c, "search", query="x")
        assert not err


async def test_paths_deeper_than_the_walk_limit_are_refused_readably(tmp_path):
    """A destination thousands of folders deep would make trees no cleanup can recurse into."""
    from longhorizon.apps.common import MAX_WALK_DEPTH, Workspace
    from mcp.server.mcpserver.exceptions import ToolError

    ws = Workspace(tmp_path)
    assert ws.path("/".join(["a"] * MAX_WALK_DEPTH)).parts
    import pytest
    with pytest.raises(ToolError, match="folders deep"):
        ws.path("a/" * 3000 + "x")


def sparse(path, size, head=b"", tail=b""):
    """A file of apparent size ``size`` that takes almost no disk: ``head``, a hole, ``tail``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size - len(tail))
        f.seek(size - len(tail))
        f.write(tail)


async def test_read_file_reads_a_large_file_only_up_to_the_piece_asked_for(ws):
    """The tail of this 250 MiB file is not UTF-8: decoding the whole file would say so."""
    sparse(ws.workspace / "big.log", 250 * 2**20, head=b"first line\n", tail=b"\xff")
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "read_file", path="big.log", limit=10)
    assert not err and text.startswith("first line") and "offset=10" in text and "250.0 MiB" in text


async def test_read_file_refuses_an_offset_past_what_it_scans(ws):
    sparse(ws.workspace / "big.log", 250 * 2**20)
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "read_file", path="big.log", offset=200_000_000, limit=10)
    assert err and "at most 64.0 MiB into it" in text


async def test_read_file_of_a_small_file_still_counts_what_is_left(ws):
    (ws.workspace / "mid.txt").write_text("é" * 30_000)
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "read_file", path="mid.txt", offset=5, limit=10)
    assert not err and text.startswith("é" * 10) and "[29985 more characters; read again with offset=15]" in text


async def test_search_skips_files_over_its_size_budget_and_names_them(ws):
    sparse(ws.workspace / "logs" / "huge.log", 250 * 2**20, head=b"beta in a huge file\n")
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "search", query="beta")
    hits, note = text.split("\n[", 1)
    assert not err and {h["path"] for h in json.loads(hits)} == {"docs/a.txt", "notes.md"}
    assert "not searched: logs/huge.log (250.0 MiB)" in note


async def test_search_stops_at_its_byte_budget_and_names_what_it_left_out(ws):
    for i in range(10):
        sparse(ws.workspace / "logs" / f"part{i}.log", 8 * 2**20, head=b"beta\n")
    async with Client(build_server(ws)) as c:
        text, err = await call(c, "search", query="beta", path="logs")
    hits, note = text.split("\n[", 1)
    assert not err and len(json.loads(hits)) == 8
    assert "stopped after reading 64.0 MiB; 2 file(s) not searched: logs/part8.log, logs/part9.log" in note


def test_workspace_read_bytes_refuses_a_file_over_its_budget(tmp_path):
    """Every tool that reads a whole workspace file gets at most MAX_READ_BYTES, by apparent size."""
    from mcp.server.mcpserver.exceptions import ToolError

    from longhorizon.apps.common import MAX_READ_BYTES, Workspace

    sparse(tmp_path / "big.bin", MAX_READ_BYTES + 1)
    with pytest.raises(ToolError, match="the most a tool reads of one file"):
        Workspace(tmp_path).path("big.bin").read_bytes()
