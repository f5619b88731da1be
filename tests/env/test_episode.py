"""The agent loop: malformed actions become readable tool errors, limits end episodes as the
agent's outcome, and the episode is graded whatever happened."""

import asyncio
import json

from longhorizon.core.errors import ContextLengthExceeded
from longhorizon.core.policy import assistant, tool_call
from longhorizon.env.episode import Limits, play_task
from longhorizon.policies.scripted import ReplayPolicy
from longhorizon.tasks.registry import get_task

TASK = "downloads_cleanup-000004"


Scripted = ReplayPolicy


def call(name, arguments):
    return assistant("", [tool_call("c", name, arguments)])


async def test_malformed_calls_come_back_as_readable_errors():
    policy = Scripted(
        call("files__read_file", "{not json"),
        call("files__teleport", "{}"),
        call("files__read_file", json.dumps({"path": 42})),
        call("files__read_file", json.dumps(["a", "list"])),
        call("files__read_file", json.dumps({"path": "../../etc/passwd"})),
        call("files__write_file", json.dumps({"path": "x.txt"})),
        assistant("", [{"id": "z", "type": "function"}, "not even a dict"]),
        call("files__list_dir", json.dumps({"path": "Downloads"})),
    )
    traj = await play_task(get_task(TASK), policy)
    results = [c.result for c in traj.tool_calls]
    assert traj.status == "completed" and len(results) == 9
    assert "not valid JSON" in results[0]
    assert "unknown tool 'files__teleport'" in results[1] and "files__read_file" in results[1]
    assert traj.tool_calls[2].is_error and "path" in results[2]
    assert "must be a JSON object" in results[3]
    assert "outside the workspace" in results[4]
    assert traj.tool_calls[5].is_error and "content" in results[5]
    assert traj.tool_calls[6].is_error and traj.tool_calls[7].is_error
    assert not traj.tool_calls[8].is_error and ("INV-" in results[8] or "scan_" in results[8])
    assert all(r.startswith("Error") for r in results[:8])
    assert traj.grade is not None and not traj.passed


async def test_huge_results_are_capped():
    limits = Limits(max_result_chars=300)
    traj = await play_task(get_task(TASK), Scripted(call("files__list_dir", json.dumps({"path": ".", "recursive": True}))),
                           limits=limits)
    assert len(traj.tool_calls[0].result) < 400 and "truncated" in traj.tool_calls[0].result


async def test_tool_call_budget_ends_the_episode():
    many = assistant("", [tool_call(str(i), "files__list_dir", "{}") for i in range(10)])
    traj = await play_task(get_task(TASK), Scripted(many, many), limits=Limits(max_tool_calls=15))
    assert traj.status == "max_tool_calls" and len(traj.tool_calls) == 15 and traj.grade is not None


async def test_turn_budget_ends_the_episode():
    forever = Scripted(*[call("files__list_dir", "{}") for _ in range(10)])
    traj = await play_task(get_task(TASK), forever, limits=Limits(max_turns=3))
    assert traj.status == "max_turns" and len(traj.turns) == 3


class Slow(Scripted):
    async def act(self, messages, tools, ctx):
        await asyncio.Event().wait()  # never answers


async def test_wall_time_limit_is_an_agent_outcome():
    traj = await play_task(get_task(TASK), Slow(), limits=Limits(max_wall_s=0.2))
    assert traj.status == "timeout" and traj.grade is not None and not traj.passed


class Overflowing(Scripted):
    async def act(self, messages, tools, ctx):
        if len(messages) > 3:
            raise ContextLengthExceeded("prompt is 40000 tokens, context is 32768")
        return call("files__list_dir", "{}")


async def test_context_overflow_ends_and_grades_the_episode():
    traj = await play_task(get_task(TASK), Overflowing())
    assert traj.status == "context_length" and len(traj.tool_calls) == 1 and traj.grade is not None


async def test_token_data_moves_from_messages_to_turns():
    msg = assistant("done")
    msg.update(token_ids=[5, 6, 7], logprobs=[-0.1, -0.2, -0.3], prompt_ids=[1, 2])
    traj = await play_task(get_task(TASK), Scripted(msg))
    assert traj.turns[0]["token_ids"] == [5, 6, 7] and traj.turns[0]["logprobs"] == [-0.1, -0.2, -0.3]
    assert "token_ids" not in traj.messages[-1]


class Vandal:
    """Sees the tools, then scribbles over the list it was given."""

    name = "vandal"
    seen: list = []

    def describe(self):
        return {"policy": self.name}

    async def act(self, messages, tools, ctx):
        Vandal.seen = json.loads(json.dumps(tools))
        tools[0]["function"]["description"] = "scribbled"
        tools.clear()
        return assistant("done")


async def test_the_trajectory_records_the_tools_the_policy_was_shown():
    traj = await play_task(get_task(TASK), Vandal())
    assert traj.tools == Vandal.seen and {t["function"]["name"] for t in traj.tools} >= {"files__list_dir"}


def cut(msg, tokens=None):
    """``msg`` as a policy returns a reply its token budget cut."""
    return {**msg, "finish_reason": "length", **({"completion_tokens": tokens} if tokens else {})}


async def test_a_cut_reply_is_not_run_the_agent_reads_why_and_goes_on():
    write = call("files__write_file", json.dumps({"path": "out.txt", "content": "x"}))
    traj = await play_task(get_task(TASK), Scripted(cut(write, 1024), call("files__list_dir", "{}")))
    first, second = traj.tool_calls
    assert first.is_error and "cut at 1,024 tokens" in first.result and "nothing in it was run" in first.result
    assert not second.is_error and "out.txt" not in second.result  # the write never ran
    assert traj.status == "completed"
    assert traj.turns[0]["finish_reason"] == "length" and traj.turns[0]["completion_tokens"] == 1024
    assert "finish_reason" not in traj.messages[2]  # the record, not the replayable message


async def test_a_cut_reply_without_calls_gets_the_error_as_a_user_turn():
    traj = await play_task(get_task(TASK), Scripted(cut(assistant("Here is the summ"), 7), assistant("Done.")))
    assert traj.status == "completed"
    note = traj.messages[3]
    assert note["role"] == "user" and "cut at 7 tokens" in note["content"]


async def test_cut_replies_in_a_row_end_the_episode_as_max_tokens():
    long_write = call("files__write_file", json.dumps({"path": "out.txt", "content": "x" * 50}))
    traj = await play_task(get_task(TASK), Scripted(cut(assistant("Let me"), 5), cut(long_write), cut(assistant("I"), 5),
                                                    assistant("never reached")))
    assert traj.status == "max_tokens" and len(traj.turns) == 3 and traj.grade is not None
    assert [c.is_error for c in traj.tool_calls] == [True]
    assert "cut at the token limit" in traj.tool_calls[0].result  # no count known: said without one
