"""Every tool of every app carries MCP annotations that hold: read-only tools leave the World as it was.

Tools are listed and called over real MCP sessions (``mcp.Client`` on each app's MCPServer). A
read-only tool is called with the arguments the oracles of the suite's families gave it (seed 0),
on a fresh fork of the task's World and on the World its oracle left, and neither World's hash
may move; one that no oracle calls is
called without arguments when it needs none, and otherwise reported as not exercised.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict

import mcp
import pytest

from longhorizon import __version__
from longhorizon.apps import APPS, build_server
from longhorizon.apps.common import EFFECTS
from longhorizon.apps.kinds import tool_effects
from longhorizon.core.world import WorldCache
from longhorizon.env.episode import SEP, play
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.registry import families

HINTS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")


def _world_for_every_app(cache: WorldCache):
    """app -> (task, World forked for it): the first family (seed 0) that uses the app."""
    out = {}
    for fam in families():
        task = fam.generate(0)
        for app in task.apps:
            if app not in out:
                out[app] = (task, cache.fork(task)[0])
    return out


async def _listed(world, app):
    async with mcp.Client(build_server(app, world), mode="legacy") as c:  # the initialize handshake
        return c.server_info, (await c.list_tools()).tools


def test_every_tool_of_every_app_has_sensible_annotations_and_the_server_a_version():
    cache = WorldCache()
    try:
        worlds = _world_for_every_app(cache)
        assert set(worlds) == set(APPS)  # the suite uses every app
        count = 0
        for app, (_, world) in worlds.items():
            info, tools = asyncio.run(_listed(world, app))
            assert info.name == app and info.version == __version__
            for t in tools:
                a = t.annotations
                assert a is not None and all(isinstance(getattr(a, h), bool) for h in HINTS), f"{app}.{t.name}"
                assert a.open_world_hint is False  # nothing reaches outside the World
                # the table that graders, the analysis and RL read (apps.kinds) is the tools' own hints
                table = EFFECTS[tool_effects()[f"{app}__{t.name}"]]
                assert all(getattr(a, h) == getattr(table, h) for h in HINTS), f"{app}.{t.name}"
                if a.read_only_hint:  # the MCP spec: the other hints only mean something for writers
                    assert not a.destructive_hint and a.idempotent_hint, f"{app}.{t.name}"
                    assert not t.name.startswith(("create", "update", "delete", "send", "add", "set", "write",
                                                  "cancel", "remove", "move", "book", "record")), f"{app}.{t.name}"
                count += 1
        assert count > 150
    finally:
        cache.close()


async def _oracle_read_calls(cache: WorldCache):
    """Per family (seed 0): the World its oracle left and the calls it made of read-only tools;
    and app -> the names of its read-only tools (the user app's differ by domain: all of them)."""
    read_only: dict[str, set[str]] = defaultdict(set)
    out = []
    for fam in families():
        task = fam.generate(0)
        world, digest = cache.fork(task)
        traj = await play(task, OraclePolicy(), world, world_hash=digest)
        assert traj.passed, task.id
        for app in task.apps:
            async with mcp.Client(build_server(app, world)) as c:
                read_only[app] |= {t.name for t in (await c.list_tools()).tools if t.annotations.read_only_hint}
        calls = defaultdict(list)
        for c in traj.tool_calls:
            app, _, tool = c.name.partition(SEP)
            if tool in read_only[app]:
                calls[app].append((tool, c.arguments))
        out.append((task, world, calls))
    return out, read_only


async def _replay_reads(task, world, calls):
    """Call the read-only tools on ``world``; returns the (app, tool) pairs called."""
    called = set()
    for app in task.apps:
        async with mcp.Client(build_server(app, world)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            for tool, args in calls.get(app, []):
                await c.call_tool(tool, args)
                called.add((app, tool))
            for name, t in tools.items():  # read-only tools that need no argument
                if t.annotations.read_only_hint and not (t.input_schema or {}).get("required"):
                    await c.call_tool(name, {})
                    called.add((app, name))
    return called


def test_read_only_tools_leave_the_world_unchanged(capsys):
    cache = WorldCache()
    try:
        played, read_only = asyncio.run(_oracle_read_calls(cache))
        called = set()
        for task, final, calls in played:
            fresh = cache.fork(task)[0]  # as the episode began (a first read may mark things, e.g. as read)
            for world in (fresh, final):
                before = world.hash()
                called |= asyncio.run(_replay_reads(task, world, calls))
                assert world.hash() == before, f"a read-only tool changed the World of {task.id}"
    finally:
        cache.close()
    every = {(app, t) for app, names in read_only.items() for t in names}
    missed = sorted(every - called)
    with capsys.disabled():
        print(f"\nread-only tools called: {len(called)} of {len(every)}; not exercised (need arguments "
              f"no oracle gives): {json.dumps([f'{a}.{t}' for a, t in missed])}")
    assert len(called) > len(every) / 2
    assert {app for app, _ in called} == {app for app, _ in every}  # every app with read-only tools


@pytest.mark.parametrize("app", ["files", "mail"])
def test_writers_are_annotated_as_writers(app, world):
    """The annotations are not all the same: an app's writing tools say they write."""
    _, tools = asyncio.run(_listed(world, app))
    kinds = {t.name: t.annotations for t in tools}
    writer = {"files": "write_file", "mail": "send_message"}[app]
    assert kinds[writer].read_only_hint is False
    assert any(a.read_only_hint for a in kinds.values())


def _contents(world) -> tuple[dict, dict]:
    """What a World holds, read back logically: workspace files -> bytes, and per state file
    either its bytes or, for SQLite, table -> {rowid: row} (page bytes may move on a no-op write)."""
    import sqlite3

    files = {p.relative_to(world.workspace).as_posix(): p.read_bytes()
             for p in sorted(world.workspace.rglob("*")) if p.is_file() and not p.is_symlink()}
    state = {}
    for p in sorted((world.root / "state").rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(world.root).as_posix()
        if p.read_bytes()[:16] != b"SQLite format 3\x00":
            state[rel] = p.read_bytes()
            continue
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                 "AND name NOT LIKE 'sqlite_%'")]
            state[rel] = {t: _rows(conn, t) for t in tables}
        finally:
            conn.close()
    return files, state


def _rows(conn, table: str) -> dict:
    """key -> row, keyed by the primary key (the rowid when the table declares none)."""
    pk = [c[1] for c in sorted(conn.execute(f'PRAGMA table_info("{table}")'), key=lambda c: c[5]) if c[5]]
    key, n = (", ".join(f'"{c}"' for c in pk), len(pk)) if pk else ("rowid", 1)
    return {r[:n]: r[n:] for r in conn.execute(f'SELECT {key}, * FROM "{table}"')}


def _lost(before: tuple[dict, dict], after: tuple[dict, dict]) -> list[str]:
    """What ``before`` held that ``after`` no longer does: a workspace file changed or gone (an
    office file may change: a paragraph, sheet or slide added rewrites its zip), a state file
    changed or gone, a table row gone (a row's values may change: a flag set)."""
    (fb, sb), (fa, sa) = before, after
    lost = [f"workspace/{p}" for p, b in fb.items()
            if p not in fa or (fa[p] != b and not p.endswith((".docx", ".xlsx", ".pptx")))]
    for rel, held in sb.items():
        now = sa.get(rel)
        if isinstance(held, bytes) or not isinstance(now, dict):
            lost += [rel] if now != held else []
            continue
        lost += [f"{rel}:{t} row {rowid}" for t, rows in held.items() for rowid in rows if rowid not in now.get(t, {})]
    return lost


async def _replay_writes(task, world, tool_calls):
    """Replay the oracle's calls in order over MCP: every idempotent writer is called twice (the
    second call may change nothing), every non-destructive writer may only add. Returns
    (problems, (app, tool) pairs of writers checked)."""
    from contextlib import AsyncExitStack

    problems, checked = [], set()
    async with AsyncExitStack() as stack:
        clients = {app: await stack.enter_async_context(mcp.Client(build_server(app, world))) for app in task.apps}
        hints = {app: {t.name: t.annotations for t in (await c.list_tools()).tools} for app, c in clients.items()}
        for call in tool_calls:
            app, _, tool = call.name.partition(SEP)
            a = hints[app][tool]
            before = None if a.read_only_hint else _contents(world)
            await clients[app].call_tool(tool, call.arguments)
            if a.read_only_hint:
                continue
            once = _contents(world)
            if not a.destructive_hint and (lost := _lost(before, once)):
                problems.append(f"{app}.{tool} says it only adds, but a call removed or changed {lost[:3]}")
            if a.idempotent_hint:
                await clients[app].call_tool(tool, call.arguments)
                if _contents(world) != once:
                    problems.append(f"{app}.{tool} says it is idempotent, but a second identical call changed the World")
            checked.add((app, tool))
    return problems, checked


def test_writers_do_what_their_destructive_and_idempotent_hints_say(capsys):
    """On a fresh fork of each family's World (seed 0), the oracle's calls in order: a writer
    that says it is idempotent changes nothing more when called again, one that says it is not
    destructive loses nothing (no file changed or gone, no row deleted)."""
    cache = WorldCache()
    problems, checked = [], set()
    try:
        for fam in families():
            task = fam.generate(0)
            world, digest = cache.fork(task)
            traj = asyncio.run(play(task, OraclePolicy(), world, world_hash=digest))
            fresh = cache.fork(task)[0]
            found, seen = asyncio.run(_replay_writes(task, fresh, traj.tool_calls))
            problems += [f"{task.id}: {p}" for p in found]
            checked |= seen
    finally:
        cache.close()
    with capsys.disabled():
        print(f"\nwriters checked against their hints: {len(checked)}")
    assert not problems, "\n".join(sorted(set(problems)))
    assert ("mail", "read_message") in checked and len(checked) > 40
