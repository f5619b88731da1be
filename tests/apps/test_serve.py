"""serve-app: one app served to a real MCP client in another process, over stdio and HTTP."""

import asyncio
import re
import subprocess
import sys

import mcp
import pytest

from longhorizon.apps.serve import main

SERVE = [sys.executable, "-m", "longhorizon.apps.serve"]


@pytest.fixture
def world_dir(world):
    (world.workspace / "hello.txt").write_text("hello from the world\n")
    return world.root


async def test_stdio_session_lists_tools_and_reads_a_file(world_dir):
    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "longhorizon.apps.serve", "files", "--transport", "stdio", "--world", str(world_dir)],
    )
    async with mcp.Client(params) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"list_dir", "read_file", "write_file"} <= names
        r = await c.call_tool("read_file", {"path": "hello.txt"})
        assert not r.is_error and r.content[0].text == "hello from the world\n"


async def test_http_session_calls_a_tool(world_dir):
    proc = await asyncio.create_subprocess_exec(
        *SERVE, "files", "--transport", "http", "--world", str(world_dir), "--port", "0",
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        # The server binds before it announces the URL; a safety bound, not a timing assert.
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        url = re.search(r"http://\S+/mcp", line)
        assert url, f"no URL announced: {line!r}"
        async with mcp.Client(url.group(0)) as c:
            r = await c.call_tool("write_file", {"path": "out/note.txt", "content": "via http"})
            assert not r.is_error
            r = await c.call_tool("list_dir", {"path": "out"})
            assert "out/note.txt" in r.content[0].text
        assert (world_dir / "workspace" / "out" / "note.txt").read_text() == "via http"
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


def test_unknown_app_exits_2_with_one_line(world_dir):
    r = subprocess.run([*SERVE, "nope", "--world", str(world_dir)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "unknown app 'nope'" in r.stderr


def test_missing_world_exits_2(tmp_path, capsys):
    assert main(["files", "--world", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert "not a World folder" in err and err.strip().count("\n") == 0
