"""The lean in-process MCP path gives what the SDK's client gives, byte for byte.

Every family's oracle (seed 0) is played twice from the same snapshot: through ``mcp.Client``
on each app's MCPServer (``mcp_path="sdk"``) and through ``LocalSession`` (the default). Every
tool result, error flag, criterion and the final World must be the same. Shell output that
prints the wall clock (``ls -l`` times) and gzip files (which stamp the time they were made)
are the only things allowed to differ, and only in those stamps.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from longhorizon.core.world import WorldCache
from longhorizon.env.episode import Episode, play
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.registry import families

CLOCK = re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d")


def _outcome(traj, world):
    results = [(c.name, CLOCK.sub("<time>", c.result), c.is_error) for c in traj.tool_calls]
    grade = [(r.id, r.passed) for r in traj.grade.results]
    files = world.image().files
    final = {path: (data if not path.endswith(".gz") else len(data), mode) for path, data, mode in files}
    return results, grade, final


@pytest.fixture(scope="module")
def both_paths():
    cache = WorldCache()
    out = {}

    async def run():
        for fam in families():
            task = fam.generate(0)
            for path in ("sdk", "lean"):
                world, digest = cache.fork(task)
                traj = await play(task, OraclePolicy(), world, world_hash=digest, mcp_path=path)
                out[(task.id, path)] = _outcome(traj, world)
                cache.release(world)

    try:
        asyncio.run(run())
        yield out
    finally:
        cache.close()


def test_every_family_gets_the_same_results_grade_and_world_through_both_paths(both_paths):
    ids = sorted({tid for tid, _ in both_paths})
    assert len(ids) == len(families())
    for tid in ids:
        sdk, lean = both_paths[(tid, "sdk")], both_paths[(tid, "lean")]
        assert lean[0] == sdk[0], f"{tid}: tool results differ"
        assert lean[1] == sdk[1], f"{tid}: grades differ"
        assert lean[2] == sdk[2], f"{tid}: final Worlds differ"
        assert all(passed for _, passed in lean[1]), tid


async def _listing(task, world, path):
    async with Episode(task, world, mcp_path=path) as ep:
        return ep.tools


def test_the_tools_an_episode_shows_are_the_same_through_both_paths(tmp_path):
    from longhorizon.core.world import World

    seen = set()
    for fam in families():
        task = fam.generate(0)
        if set(task.apps) <= seen:
            continue
        seen |= set(task.apps)
        world = World.build(tmp_path / task.id, task.build)
        assert asyncio.run(_listing(task, world, "lean")) == asyncio.run(_listing(task, world, "sdk")), task.id


def test_a_lean_session_hands_each_episode_its_own_schemas(tmp_path):
    from longhorizon.apps import build_app
    from longhorizon.core.world import World

    world = World.build(tmp_path / "w", lambda root: None)
    first = asyncio.run(build_app("files", world).session().list_tools()).tools[0]
    first.input_schema["properties"].clear()  # one episode's policy mangling what it was shown
    again = asyncio.run(build_app("files", world).session().list_tools()).tools[0]
    assert again.input_schema["properties"]
