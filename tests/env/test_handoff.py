"""A World handed to an outside agent: played over stdio MCP using only the written mcp.json,
then graded by `longhorizon grade` (the oracle's calls earn 1.0, doing nothing earns 0)."""

import json
import os
import subprocess
import sys
from contextlib import AsyncExitStack

import pytest
from mcp import Client, StdioServerParameters

from longhorizon.core.task import dumps_canonical
from longhorizon.tasks.registry import get_task

TASK = "expense_claim_audit-000000"  # four apps: sheets, files, wiki, mail; has process criteria


def lh(*args, timeout=None):
    r = subprocess.run([sys.executable, "-m", "longhorizon.cli", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def build(tmp_path):
    world = tmp_path / "world"
    r = lh("world", "build", TASK, "--out", world)
    assert r.returncode == 0, r.stderr
    return world, json.loads(r.stdout)


async def play_through_mcp_json(world, moves):
    """An outside agent: opens every server named in mcp.json (and nothing else), then makes
    ``moves``' calls, APP__TOOL sent to server APP as TOOL; returns its chat-format record."""
    config = json.loads((world / "mcp.json").read_text())["mcpServers"]
    messages = [{"role": "user", "content": (world / "instruction.md").read_text()}]
    async with AsyncExitStack() as stack:
        clients = {}
        for name, entry in config.items():
            params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry.get("env"))
            clients[name] = await stack.enter_async_context(Client(params))
        gen = moves()
        n, result = 0, None
        try:
            call = next(gen)
            while True:
                n += 1
                app, _, tool = call.name.partition("__")
                messages.append({"role": "assistant", "content": call.note, "tool_calls": [
                    {"id": f"c{n}", "type": "function",
                     "function": {"name": call.name, "arguments": dumps_canonical(call.arguments)}}]})
                out = await clients[app].call_tool(tool, call.arguments)
                result = "\n".join(getattr(c, "text", "") for c in out.content)
                messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result})
                call = gen.send(result)
        except StopIteration as stop:
            messages.append({"role": "assistant", "content": stop.value or "Done."})
    return messages, set(config)


async def test_the_oracle_played_through_mcp_json_grades_one(tmp_path):
    world, built = build(tmp_path)
    task = get_task(TASK)
    assert (world / "instruction.md").read_text().strip() == task.instruction.strip()
    messages, servers = await play_through_mcp_json(world, task.oracle)
    assert servers == set(task.apps) == set(built["apps"])
    assert sum(1 for m in messages if m["role"] == "tool") > 20
    record = tmp_path / "agent.json"
    record.write_text(json.dumps(messages))
    r = lh("grade", TASK, "--world", world, "--trajectory", record, "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["reward"] == 1.0 and report["passed"] is True
    assert all(c["passed"] for c in report["criteria"]) and len(report["criteria"]) == len(task.criteria)
    text = lh("grade", TASK, "--world", world, "--trajectory", record).stdout
    assert text.splitlines()[-1] == "reward 1.000  passed yes" and text.count("PASS") == len(task.criteria)


async def test_the_null_play_grades_zero(tmp_path):
    world, _ = build(tmp_path)
    messages, _ = await play_through_mcp_json(world, lambda: iter(()))
    record = tmp_path / "agent.json"
    record.write_text(json.dumps({"messages": messages}))
    report = json.loads(lh("grade", TASK, "--world", world, "--trajectory", record, "--format", "json").stdout)
    assert report["reward"] == 0.0 and report["passed"] is False


@pytest.mark.parametrize("play", ["oracle", "nothing"])
async def test_the_servers_record_lets_grade_check_process_criteria(tmp_path, play):
    """world build --record: the servers (one per app) keep the calls of any MCP client in one
    Trajectory file, and grading it gives what the agent's own record gives."""
    world, record = tmp_path / "world", tmp_path / "calls.json"
    assert lh("world", "build", TASK, "--out", world, "--record", record).returncode == 0
    task = get_task(TASK)
    messages, _ = await play_through_mcp_json(world, task.oracle if play == "oracle" else lambda: iter(()))
    traj = json.loads(record.read_text())
    made = [c["function"]["name"] for m in messages for c in m.get("tool_calls", [])]
    assert [c["name"] for c in traj["tool_calls"]] == made and traj["task_id"] == TASK
    report = json.loads(lh("grade", TASK, "--world", world, "--trajectory", record, "--format", "json").stdout)
    process = [c for c in report["criteria"] if c["kind"] == "process"]
    if play == "oracle":
        assert len(made) > 20 and {n.split("__")[0] for n in made} == set(task.apps)
        assert report["passed"] is True and report["reward"] == 1.0 and all(c["passed"] for c in process)
    else:
        assert report["reward"] == 0.0 and all(c["passed"] is not None for c in process)


def test_without_a_trajectory_process_criteria_say_they_are_not_checked(tmp_path):
    world, _ = build(tmp_path)
    task = get_task(TASK)
    report = json.loads(lh("grade", TASK, "--world", world, "--format", "json").stdout)
    process = [c for c in report["criteria"] if c["kind"] == "process"]
    assert process and all(c["passed"] is None and "needs --trajectory" in c["note"] for c in process)
    assert report["reward"] is None and report["final_state_reward"] == 0.0
    assert len(report["criteria"]) == len(task.criteria)
    text = lh("grade", TASK, "--world", world).stdout
    assert "not checked: needs --trajectory" in text
    assert text.splitlines()[-1].startswith("reward over the final-state criteria only: 0.000")


def test_grading_the_world_of_another_task_is_refused(tmp_path):
    world, _ = build(tmp_path)
    r = lh("grade", "downloads_cleanup-000001", "--world", world)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"World of task {TASK}" in r.stderr


# -- a hostile World folder: refused in one line, never a hang, never read through a link --------

def _fifo_at_a_database(world, tmp_path):
    (world / "state" / "mail.sqlite").unlink()
    os.mkfifo(world / "state" / "mail.sqlite")  # opening it would block until a writer comes


def _linked_workspace(world, tmp_path):
    (world / "workspace").rename(tmp_path / "elsewhere")
    (world / "workspace").symlink_to(tmp_path / "elsewhere")


def _linked_state(world, tmp_path):
    (world / "state").rename(tmp_path / "elsewhere")
    (world / "state").symlink_to(tmp_path / "elsewhere")


def _socket_in_state(world, tmp_path):
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(world / "state" / "wiki.sqlite-wal"))


@pytest.mark.parametrize("plant, message", [
    (_fifo_at_a_database, "state/mail.sqlite is a FIFO"),
    (_socket_in_state, "state/wiki.sqlite-wal is a socket"),
    (_linked_workspace, "workspace is a symbolic link"),
    (_linked_state, "state is a symbolic link"),
])
def test_a_hostile_world_folder_is_refused_in_one_line(tmp_path, plant, message):
    world, _ = build(tmp_path)
    plant(world, tmp_path)
    r = lh("grade", TASK, "--world", world, timeout=120)  # a hang fails here instead of stalling the suite
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert message in r.stderr


def test_links_inside_the_workspace_are_dropped_before_grading(tmp_path):
    world, _ = build(tmp_path)
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "secret.txt").write_text("host data\n")
    (world / "workspace" / "to-host").symlink_to(outside)
    report = json.loads(lh("grade", TASK, "--world", world, "--format", "json", timeout=120).stdout)
    assert report["removed_before_grading"] == [f"to-host (link -> {outside})"]
    assert not (world / "workspace" / "to-host").exists() and (outside / "secret.txt").exists()
