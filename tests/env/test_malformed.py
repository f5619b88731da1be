"""Malformed calls are the agent's problem, never the run's: each kind comes back as a tool
error that names the problem, the episode goes on, and the Trajectory is always writable."""

import asyncio
import json
from contextlib import AsyncExitStack

import pytest
from mcp import Client

from longhorizon.apps.common import READ, AppServer
from longhorizon.core.trajectory import Trajectory, json_safe
from longhorizon.core.world import World
from longhorizon.env.episode import Episode, play_task
from longhorizon.env.gym_env import TaskEnv
from longhorizon.policies.scripted import ReplayPolicy
from longhorizon.rollout.store import RunStore
from longhorizon.tasks.registry import get_task

TASK = "downloads_cleanup-000004"


Scripted = ReplayPolicy


def call(name, arguments, call_id="c", content=""):
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def nested(depth):
    top = cur = {}
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return top


def play(*messages):
    return asyncio.run(play_task(get_task(TASK), Scripted(*messages, call("files__list_dir", "{}"))))


def round_trip(traj, tmp_path):
    """Write through the run store, read back: the line is strict JSON in valid UTF-8."""
    store = RunStore(tmp_path / "run")
    store.open({"test": "malformed"})
    store.add_trajectory(traj)
    data = (tmp_path / "run" / "trajectories.jsonl").read_bytes()
    data.decode("utf-8")  # strict
    row = json.loads(data, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    back = Trajectory.from_dict(row)
    assert json.loads(back.to_json()) == json.loads(traj.to_json())
    return back


def results(traj):
    return [c.result for c in traj.tool_calls]


def assert_goes_on(traj):
    """The episode ended on its own final answer, after a valid call that worked."""
    assert traj.status == "completed" and traj.grade is not None
    assert not traj.tool_calls[-1].is_error and "Downloads/" in traj.tool_calls[-1].result


def test_invalid_unicode_anywhere_is_an_error_and_the_record_is_valid_utf8(tmp_path):
    traj = play(
        call("files__read_file", {"path": "a\ud800b"}),
        call("files__read_file", {"pa\udcffth": "x"}),
        call("files__read_file", '{"path": "\\udfff"}'),
        call("files__read_file\ud800", "{}"),
        call("files__read_file", "[1]", call_id="id-\udc80", content="thinking \ud83d..."),
    )
    r = results(traj)
    assert "not valid Unicode" in r[0] and "'path'" in r[0]
    assert "argument name" in r[1] and "not valid Unicode" in r[1]
    assert "not valid Unicode" in r[2]
    assert "unknown tool" in r[3] and "Did you mean 'files__read_file'" in r[3]
    assert "must be a JSON object" in r[4]
    assert traj.tool_calls[4].id == "id-\\udc80" and traj.messages[-4]["tool_call_id"] == "id-\\udc80"
    assert "\\ud83d" in traj.messages[-5]["content"]
    assert_goes_on(traj)
    back = round_trip(traj, tmp_path)
    assert back.tool_calls[1].arguments == {"pa\\udcffth": "x"}  # stored as received, surrogate escaped


def test_deep_nesting_as_text_and_as_a_parsed_dict(tmp_path):
    traj = play(
        call("files__read_file", '{"path": ' + "[" * 5000 + "]" * 5000 + "}"),
        call("files__read_file", {"path": nested(3000)}),
        call("files__read_file", nested(40)),
    )
    r = results(traj)
    assert "nest too deeply" in r[0]
    assert all("nest deeper than 32 levels" in x for x in r[1:3])
    assert_goes_on(traj)
    back = round_trip(traj, tmp_path)
    assert "<nested deeper than 64 levels>" in json.dumps(back.tool_calls[1].arguments)


def test_huge_integers_and_non_finite_numbers(tmp_path):
    traj = play(
        call("files__read_file", '{"path": "a", "offset": ' + "9" * 5000 + "}"),
        call("files__read_file", {"path": "a", "offset": 10 ** 5000}),
        call("files__read_file", {"path": "a", "limit": 2 ** 64}),
        call("files__read_file", '{"path": "a", "offset": NaN}'),
        call("files__read_file", '{"path": "a", "offset": 1e999}'),
        call("files__read_file", {"path": "a", "offset": float("-inf")}),
    )
    r = results(traj)
    assert "4,300 digits" in r[0]
    assert "5,001 digits" in r[1] and "64-bit range" in r[1] and "'offset'" in r[1]
    assert "'limit'" in r[2] and "64-bit range" in r[2]
    assert "NaN" in r[3] and "Infinity" in r[4] and "-Infinity" in r[5]
    assert_goes_on(traj)
    back = round_trip(traj, tmp_path)
    assert back.tool_calls[1].arguments["offset"] == "<integer of 5001 digits>"
    assert back.tool_calls[5].arguments["offset"] == "-Infinity"


def test_malformed_call_shapes_and_non_string_names(tmp_path):
    traj = play(
        call(None, "{}"),
        call(42, "{}"),
        {"role": "assistant", "content": "", "tool_calls": [{"id": "f", "function": "files__list_dir"}]},
        {"role": "assistant", "content": "", "tool_calls": {"id": "d", "function": {"name": "files__list_dir"}}},
        {"role": "assistant", "content": "", "tool_calls": "files__list_dir"},
        {"role": "assistant", "content": "", "tool_calls": [7, None]},
    )
    r = results(traj)
    assert all("tool name must be a string" in x for x in r[:2]) and "got null" in r[0] and "got integer" in r[1]
    assert "'function' object" in r[2]
    assert all("tool_calls must be a list" in x for x in r[3:5])
    assert all("a tool call must be an object" in x for x in r[5:7])
    # the history stays replayable: every recorded call has an id, a string name, and its answer
    for m in traj.messages:
        for c in m.get("tool_calls") or []:
            assert isinstance(c["id"], str) and isinstance(c["function"]["name"], str)
    answered = {m["tool_call_id"] for m in traj.messages if m["role"] == "tool"}
    assert answered == {c["id"] for m in traj.messages for c in m.get("tool_calls") or []}
    assert_goes_on(traj)
    round_trip(traj, tmp_path)


def test_raw_json_that_is_not_an_object():
    traj = play(*(call("files__list_dir", text) for text in ("[1, 2]", '"Downloads"', "12", "null", "true")),
                call("files__list_dir", ["a"]), call("files__list_dir", None))
    kinds = ["array", "string", "integer", "null", "boolean", "array", "null"]
    assert [f"must be a JSON object, got {k}." in x for x, k in zip(results(traj), kinds)] == [True] * 7
    assert_goes_on(traj)


def test_unknown_and_misspelled_arguments_are_refused_naming_them():
    traj = play(
        call("files__list_dir", json.dumps({"path": "Downloads", "recursve": True})),
        call("files__read_file", json.dumps({"pth": "a.txt"})),
        call("files__list_dir", json.dumps({"path": ".", "x": 1, "y": 2})),
    )
    r = results(traj)
    assert "unknown argument 'recursve' (did you mean 'recursive'?)" in r[0]
    assert "list_dir(path=\".\", recursive=false)" in r[0]
    assert "unknown argument 'pth' (did you mean 'path'?)" in r[1]
    assert "unknown arguments 'x', 'y'" in r[2]
    assert_goes_on(traj)


async def test_every_schema_says_no_additional_properties_and_the_server_enforces_it(tmp_path):
    task = get_task(TASK)
    world = World.build(tmp_path / "w", task.build)
    async with Episode(task, world) as ep:
        assert all(t["function"]["parameters"].get("additionalProperties") is False for t in ep.tools)
    from longhorizon.apps.files.server import build_server

    async with Client(build_server(world)) as client:  # a plain MCP client: the server itself refuses
        listed = await client.list_tools()
        assert all(t.input_schema.get("additionalProperties") is False for t in listed.tools)
        r = await client.call_tool("list_dir", {"path": ".", "colour": "red"})
        assert r.is_error and "unknown argument 'colour'" in r.content[0].text


def test_validation_errors_are_one_line_per_argument():
    traj = play(
        call("files__read_file", json.dumps({"path": 5, "offset": "abc"})),
        call("files__write_file", json.dumps({"path": "x.txt"})),
    )
    r = results(traj)
    assert "argument 'path': Input should be a valid string (got integer)" in r[0]
    assert "argument 'offset': Input should be a valid integer" in r[0]
    assert "missing required argument 'content'" in r[1] and "write_file(path, content, overwrite=true)" in r[1]
    assert not any("errors.pydantic.dev" in x or "validation error for" in x or "\n" in x for x in r[:2])


@pytest.mark.parametrize("path", ["sdk", "lean"])
async def test_a_tool_that_crashes_says_what_failed_without_host_paths(tmp_path, path):
    world = World.build(tmp_path / "w", lambda root: None)
    srv = AppServer("crashy", template_key="tests/crashy")

    @srv.tool(READ)
    def open_it(path: str) -> str:
        """Fails like a bug would, with the World's absolute path in the message."""
        return open(world.workspace / path).read()  # noqa: SIM115

    @srv.tool(READ)
    async def divide(n: int) -> str:
        """Fails with no path at all."""
        return str(1 / n)

    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(Client(srv.build())) if path == "sdk" else srv.session()
        r = await client.call_tool("open_it", {"path": "missing.txt"})
        text = r.content[0].text
        assert r.is_error and "internal error (FileNotFoundError: [Errno 2] No such file or directory" in text
        assert "missing.txt" in text and str(tmp_path) not in text and "/w/" not in text
        r = await client.call_tool("divide", {"n": 0})
        assert r.is_error and r.content[0].text == (
            "Error executing tool divide: internal error (ZeroDivisionError: division by zero)")


class Garbage(Scripted):
    """A policy whose replies are not messages at all."""


@pytest.mark.parametrize("reply", [42, None, ["a", "list"], "just a string", {"content": {"a": 1}},
                                   {"content": [{"type": "text", "text": "part"}]}, {"content": "x" * 2_000_000},
                                   {"content": "ok", 7: "int key", "token_ids": "not a list"}])
def test_a_policy_returning_garbage_ends_the_episode_as_a_recorded_answer(reply, tmp_path):
    traj = asyncio.run(play_task(get_task(TASK), Garbage(reply)))
    assert traj.status == "completed" and traj.grade is not None and not traj.passed
    last = traj.messages[-1]
    assert last["role"] == "assistant" and isinstance(last["content"], str) and len(last["content"]) <= 500_000
    assert isinstance(traj.final_answer, str)
    round_trip(traj, tmp_path)


def test_json_safe_keeps_good_values_and_shows_bad_ones():
    good = {"a": [1, 2.5, None, True, "ü"], "b": {"c": "d"}}
    assert json_safe(good) == good
    loop = [1]
    loop.append(loop)
    assert json_safe({"s": "x\ud800", "n": float("nan"), "i": -(10 ** 2000), "t": (1, 2), "b": b"\x00",
                      1: "k", "l": loop}) == {
        "s": "x\\ud800", "n": "NaN", "i": "-<integer of 2001 digits>", "t": [1, 2], "b": "b'\\x00'",
        "1": "k", "l": [1, "<cycle>"]}


def test_a_trajectory_holding_bad_values_anywhere_is_still_written(tmp_path):
    traj = play(call("files__list_dir", "{}"))
    traj.turns[0]["logprobs"] = [float("-inf"), float("nan")]
    traj.provenance["note"] = {"deep": nested(5000), "big": 10 ** 5000, "s": "\udfff"}
    back = round_trip(traj, tmp_path)
    assert back.turns[0]["logprobs"] == ["-Infinity", "NaN"]
    assert back.provenance["note"]["s"] == "\\udfff" and back.provenance["note"]["big"] == "<integer of 5001 digits>"


def test_gym_step_takes_any_action_without_raising():
    env = TaskEnv(get_task(TASK))
    try:
        env.reset()
        obs, reward, terminated, truncated, info = env.step(
            {"role": "assistant", "content": "", "tool_calls": "files__list_dir"})
        assert not terminated and "tool_calls must be a list" in obs[-1]["content"]
        obs, reward, terminated, truncated, info = env.step(call("files__list_dir", {"path": "\ud800"}))
        assert not terminated and "not valid Unicode" in obs[-1]["content"]
        obs, reward, terminated, truncated, info = env.step(42)
        assert terminated and info["trajectory"].turns[-1]["malformed"]
        json.loads(info["trajectory"].to_json())
    finally:
        env.close()


def test_history_with_unreadable_arguments_still_renders_for_object_argument_templates():
    from longhorizon.policies.render import _with_object_args

    for args in ('{"n": ' + "9" * 5000 + "}", "[" * 5000, "{not json"):
        c = {"id": "c", "type": "function", "function": {"name": "files__read_file", "arguments": args}}
        assert _with_object_args(c)["function"]["arguments"] == args  # kept as written, never raises


def many_calls(n, chars):
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{i}", "type": "function",
         "function": {"name": "files__write_file", "arguments": json.dumps({"path": f"f{i}.txt", "content": "x" * chars})}}
        for i in range(n)]}


def test_calls_past_the_tool_call_budget_are_neither_run_nor_recorded(tmp_path):
    from longhorizon.env.episode import Limits

    traj = asyncio.run(play_task(get_task(TASK), Scripted(many_calls(100, 1000)),
                                 limits=Limits(max_tool_calls=5)))
    assert traj.status == "max_tool_calls"
    assert len(traj.tool_calls) == 5
    assert len(traj.messages[2]["tool_calls"]) == 5
    assert any("neither run nor recorded" in n for n in traj.turns[0].get("malformed", []))
    round_trip(traj, tmp_path)


def test_a_trajectory_line_stays_bounded_whatever_the_calls_hold(tmp_path):
    from longhorizon.env.episode import MAX_RECORDED_ARGUMENT_CHARS, Limits

    traj = asyncio.run(play_task(get_task(TASK), Scripted(many_calls(20, 990_000)), limits=Limits(max_tool_calls=300)))
    back = round_trip(traj, tmp_path)
    size = (tmp_path / "run" / "trajectories.jsonl").stat().st_size
    assert size < 3 * MAX_RECORDED_ARGUMENT_CHARS  # the arguments once in the message, once in the call records
    refused = [c for c in back.tool_calls if "was not run" in c.result]
    assert refused and all(c.is_error for c in refused)
    assert len(back.tool_calls) == 20  # every call is answered: the history stays replayable
