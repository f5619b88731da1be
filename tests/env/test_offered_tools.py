"""A Task that offers a subset of its apps' tools (``Task.tools``, a family's ``toolsets`` for a
level): the episode lists only those, a call to another is an error the agent reads, outside
MCP clients see the same subset, and the names are checked."""

import dataclasses
import json
import subprocess
import sys

import mcp
import pytest

from longhorizon.core.policy import assistant, tool_call
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy, ReplayPolicy
from longhorizon.tasks.registry import families, get_task

TASK = "downloads_cleanup-000004"  # one app: files
OFFERED = ("files__list_dir", "files__read_file")


def offering(tools):
    return dataclasses.replace(get_task(TASK), tools=tools)


def call(name, arguments):
    return assistant("", [tool_call("c", name, arguments)])


async def test_the_episode_shows_and_runs_only_the_offered_tools():
    policy = ReplayPolicy(call("files__list_dir", json.dumps({"path": "."})),
                          call("files__delete", json.dumps({"path": "x"})),
                          assistant("Done."))
    traj = await play_task(offering(OFFERED), policy)
    assert [t["function"]["name"] for t in traj.tools] == list(OFFERED)
    listed, refused = [m for m in traj.messages if m["role"] == "tool"]
    assert not listed["content"].startswith("Error")
    assert refused["content"].startswith("Error: unknown tool 'files__delete'")
    assert "Available tools: files__list_dir, files__read_file." in refused["content"]


async def test_without_a_subset_every_tool_of_the_apps_is_shown():
    traj = await play_task(get_task(TASK), ReplayPolicy(assistant("Done.")))
    assert {"files__delete", "files__move", *OFFERED} <= {t["function"]["name"] for t in traj.tools}


@pytest.mark.parametrize("tools", [("mail__read_message",), ("files__",), (), OFFERED[:1] * 2])
def test_a_subset_must_name_distinct_tools_of_the_task_apps(tools):
    with pytest.raises(ValueError, match="tools must be distinct APP__TOOL names"):
        offering(tools)


async def test_a_tool_the_app_lacks_stops_the_episode_before_it_starts():
    with pytest.raises(ValueError, match="app files has no tool nope"):
        await play_task(offering(("files__nope",)), ReplayPolicy(assistant("Done.")))


@pytest.mark.parametrize("family", [f for f in families() if f.toolsets], ids=lambda f: f.name)
async def test_a_family_level_offers_every_tool_its_oracle_calls(family):
    """(An unknown name would fail the episode's start: the apps refuse it.)"""
    assert set(family.toolsets) <= set(range(1, family.levels + 1))
    for level, tools in family.toolsets.items():
        task = family.instance(0, level)
        assert task.tools == tuple(tools)
        traj = await play_task(task, OraclePolicy())
        assert {c.name for c in traj.tool_calls} <= set(tools) and traj.grade.passed


async def test_an_outside_client_sees_the_same_subset_through_world_build(tmp_path):
    family = next(f for f in families() if f.toolsets)
    level, tools = next(iter(family.toolsets.items()))
    task_id = family.task_id(0, level)
    out = tmp_path / "world"
    r = subprocess.run([sys.executable, "-m", "longhorizon.cli", "world", "build", task_id, "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    config = json.loads((out / "mcp.json").read_text())["mcpServers"]
    seen = set()
    for app, entry in config.items():
        params = mcp.StdioServerParameters(command=entry["command"], args=entry["args"], env=entry.get("env"))
        async with mcp.Client(params) as c:
            seen |= {f"{app}__{t.name}" for t in (await c.list_tools()).tools}
    assert seen == set(tools)
    assert json.loads((out / "task.json").read_text())["tools"] == list(tools)


def test_serve_app_refuses_a_tool_the_app_lacks(world):
    r = subprocess.run([sys.executable, "-m", "longhorizon.cli", "serve-app", "files", "--world", str(world.root),
                        "--tools", "read_file,teleport"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "app files has no tool teleport" in r.stderr
