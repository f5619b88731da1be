"""OpenAIPolicy over real HTTP against the stand-in server on loopback."""

import json
import socket
from pathlib import Path

import pytest

from longhorizon.core.errors import ContextLengthExceeded, InfraError
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, ToolCall
from longhorizon.env.episode import play_task
from longhorizon.policies.openai_client import OpenAIPolicy
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.testing import OracleBrain, ScriptedBrain, StandinLLM

TOOLS = [{
    "type": "function",
    "function": {
        "name": "files__read_file",
        "description": "Read a text file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}]
MESSAGES = [{"role": "system", "content": "Be useful."}, {"role": "user", "content": "What is in a.txt?"}]


def call(name, args, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def policy(srv, **kw):
    kw.setdefault("backoff_s", 0.0)
    return OpenAIPolicy(base_url=srv.base_url, model=srv.model, api_key="", **kw)


async def ask(srv, messages=MESSAGES, **kw):
    async with policy(srv, **kw) as pol:
        return await pol.act(messages, TOOLS, None)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_tool_call_reply_is_parsed_with_json_string_arguments():
    brain = ScriptedBrain([{"role": "assistant", "content": "Reading it.",
                            "tool_calls": [call("files__read_file", {"path": "a.txt"})]}])
    with StandinLLM(brain) as srv:
        msg = await ask(srv)
    assert msg["role"] == "assistant" and msg["content"] == "Reading it."
    (tc,) = msg["tool_calls"]
    assert tc["id"] == "call_1" and tc["type"] == "function"
    assert tc["function"]["name"] == "files__read_file"
    assert json.loads(tc["function"]["arguments"]) == {"path": "a.txt"}


async def test_dict_arguments_from_a_sloppy_server_become_json_strings():
    brain = ScriptedBrain([{"role": "assistant", "content": None,
                            "tool_calls": [call("files__read_file", {"path": "b.txt"})]}])
    with StandinLLM(brain, dump_arguments=False) as srv:
        msg = await ask(srv)
    assert msg["content"] == ""
    assert msg["tool_calls"][0]["function"]["arguments"] == '{"path": "b.txt"}'


async def test_plain_reply_has_no_tool_calls():
    with StandinLLM(ScriptedBrain(["It says hello."])) as srv:
        msg = await ask(srv)
    assert msg == {"role": "assistant", "content": "It says hello."}


async def test_request_carries_tools_sampling_and_only_api_keys():
    history = MESSAGES + [
        {"role": "assistant", "content": "", "tool_calls": [call("files__read_file", '{"path": "a.txt"}')]},
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
    ]
    history[2]["note"] = "not for the API"
    with StandinLLM(ScriptedBrain(["ok"]), api_key="sk-test") as srv:
        async with OpenAIPolicy(srv.base_url, srv.model, api_key="sk-test", temperature=0.7, top_p=0.9,
                                max_tokens=64, seed=3, extra_body={"top_k": 20}, backoff_s=0.0) as pol:
            await pol.act(history, TOOLS, None)
    (body,) = srv.requests
    assert body["tools"] == TOOLS and body["tool_choice"] == "auto"
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"], body["top_k"]) == (0.7, 0.9, 64, 3, 20)
    assert "note" not in body["messages"][2]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "hello"}
    assert pol.describe() == {
        "policy": "openai", "model": "standin", "base_url": srv.base_url,
        "sampling": {"temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "seed": 3, "top_k": 20},
        "logprobs": False, "return_token_ids": False,
    }
    assert "sk-test" not in json.dumps(pol.describe())


async def test_token_ids_and_logprobs_come_back_when_asked():
    brain = ScriptedBrain([{"role": "assistant", "content": "hi", "token_ids": [5, 7], "logprobs": [-0.5, -0.25]}])
    with StandinLLM(brain) as srv:
        msg = await ask(srv, logprobs=True, return_token_ids=True)
    assert msg["token_ids"] == [5, 7] and msg["logprobs"] == [-0.5, -0.25]
    assert srv.requests[0]["logprobs"] is True and srv.requests[0]["return_tokens_as_token_ids"] is True
    assert len(msg["prompt_ids"]) > 0


async def test_503_twice_then_success_is_retried():
    with StandinLLM(ScriptedBrain(["finally"])) as srv:
        srv.fail_next(2, status=503)
        msg = await ask(srv, max_retries=3)
    assert msg["content"] == "finally"
    assert len(srv.requests) == 3


async def test_429_honours_retry_after_and_succeeds():
    with StandinLLM(ScriptedBrain(["ok"])) as srv:
        srv.fail_next(1, status=429, retry_after=0)
        msg = await ask(srv)
    assert msg["content"] == "ok" and len(srv.requests) == 2


async def test_permanent_failure_raises_infra_error_after_retries():
    with StandinLLM(ScriptedBrain(["never"])) as srv:
        srv.fail_next(100, status=500, message="model worker crashed")
        with pytest.raises(InfraError, match="model worker crashed"):
            await ask(srv, max_retries=2)
    assert len(srv.requests) == 3


async def test_connection_refused_raises_infra_error():
    pol = OpenAIPolicy(f"http://127.0.0.1:{closed_port()}/v1", "m", api_key="", max_retries=1, backoff_s=0.0)
    async with pol:
        with pytest.raises(InfraError, match="failed after 2 attempts"):
            await pol.act(MESSAGES, TOOLS, None)


async def test_bad_request_raises_infra_error_with_the_server_message_and_no_retry():
    with StandinLLM(ScriptedBrain(["x"])) as srv:
        async with OpenAIPolicy(srv.base_url, "no-such-model", api_key="", backoff_s=0.0) as pol:
            with pytest.raises(InfraError, match="does not exist"):
                await pol.act(MESSAGES, TOOLS, None)
    assert len(srv.requests) == 1


async def test_wrong_api_key_is_refused():
    with StandinLLM(ScriptedBrain(["x"]), api_key="right") as srv:
        with pytest.raises(InfraError, match="401"):
            async with OpenAIPolicy(srv.base_url, srv.model, api_key="wrong") as pol:
                await pol.act(MESSAGES, TOOLS, None)


async def test_api_key_defaults_to_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    with StandinLLM(ScriptedBrain(["hello"]), api_key="from-env") as srv:
        async with OpenAIPolicy(srv.base_url, srv.model) as pol:
            assert (await pol.act(MESSAGES, TOOLS, None))["content"] == "hello"


async def test_context_overflow_is_not_an_infra_error():
    with StandinLLM(ScriptedBrain(["x"])) as srv:
        srv.fail_next(1, status=400, message="This model's maximum context length is 4096 tokens.")
        with pytest.raises(ContextLengthExceeded):
            await ask(srv)


# -- end to end: a real episode over real MCP tools, the model replaced by the stand-in ------


def _adhoc_task() -> Task:
    """A one-criterion files task, so this test does not depend on any task family."""

    def build(root: Path) -> None:
        (root / "workspace" / "in.txt").write_text("42\n")

    def oracle():
        text = yield ToolCall("files__read_file", {"path": "in.txt"}, note="Reading the input.")
        yield ToolCall("files__write_file", {"path": "out.txt", "content": text.strip() + "\n"})
        return "Copied."

    return Task(
        id="adhoc-000000", family="adhoc", category="test", split="train", seed=0,
        instruction="Copy in.txt to out.txt.", apps=("files",), build=build, oracle=oracle,
        criteria=[Criterion("copied", "out.txt holds 42", "final_state",
                            lambda world, traj: world.file("out.txt").read_text().strip() == "42")],
    )


def _family_task():
    from longhorizon.tasks import registry

    fams = registry.families()
    if not fams:
        pytest.skip("no task family registered yet")
    fam = next((f for f in fams if f.name == "downloads_cleanup"), fams[0])
    return fam.generate(0)


@pytest.mark.parametrize("make_task", [_adhoc_task, _family_task], ids=["adhoc", "family"])
async def test_episode_over_http_matches_the_oracle_played_directly(make_task):
    task = make_task()
    direct = await play_task(task, OraclePolicy())
    with StandinLLM(OracleBrain([task])) as srv:
        async with policy(srv) as pol:
            traj = await play_task(task, pol)
    assert traj.status == "completed"
    assert [(c.name, c.arguments) for c in traj.tool_calls] == [(c.name, c.arguments) for c in direct.tool_calls]
    assert traj.grade.reward == direct.grade.reward
    assert traj.provenance["policy"]["policy"] == "openai"
    assert len(srv.requests) == len(traj.turns)


async def test_a_reply_the_server_cuts_at_max_tokens_ends_as_max_tokens_with_a_readable_error():
    """The holdout failure: the oracle's write was cut at max_tokens and graded as a normal end."""
    task = _adhoc_task()
    with StandinLLM(OracleBrain([task])) as srv:
        async with policy(srv, max_tokens=3) as pol:
            traj = await play_task(task, pol)
    assert traj.status == "max_tokens" and not traj.passed
    assert [t["finish_reason"] for t in traj.turns] == ["length"] * 3
    told = srv.requests[1]["messages"][-1]  # what the agent read after its first cut reply
    assert told["role"] == "user" and "cut at 3 tokens" in told["content"] and "nothing in it was run" in told["content"]


async def test_after_a_cut_reply_the_agent_can_recover():
    long_write = {"role": "assistant", "content": "Writing it all at once: " + "data " * 50,
                  "tool_calls": [call("files__write_file", json.dumps({"path": "out.txt", "content": "42\n"}))]}
    task = _adhoc_task()
    brain = ScriptedBrain([long_write, {"role": "assistant", "content": "",
                                        "tool_calls": [call("files__write_file", '{"path":"out.txt","content":"42"}')]}])
    with StandinLLM(brain) as srv:
        async with policy(srv, max_tokens=40) as pol:
            traj = await play_task(task, pol)
    assert traj.status == "completed" and traj.passed
    assert traj.turns[0]["finish_reason"] == "length" and traj.turns[0]["completion_tokens"] == 40
    assert "finish_reason" not in traj.turns[1]


# -- the stand-in itself behaves like a real server ----------------------------------------


def _post(srv, body):
    import httpx2

    return httpx2.post(f"{srv.base_url}/chat/completions", json=body, timeout=10)


@pytest.mark.parametrize("body, fragment", [
    ({"messages": MESSAGES}, "model"),
    ({"model": "standin"}, "messages"),
    ({"model": "standin", "messages": []}, "messages"),
    ({"model": "standin", "messages": MESSAGES, "tools": [{"type": "function", "function": {"name": "bad name!"}}]},
     "tools[0].function.name"),
    ({"model": "standin", "messages": MESSAGES, "tools": [{"function": {"name": "f"}}]}, "tools[0]"),
    ({"model": "standin", "messages": MESSAGES + [{"role": "tool", "tool_call_id": "x", "content": "r"}]},
     "messages[2]"),
    ({"model": "standin", "messages": MESSAGES + [
        {"role": "assistant", "content": "", "tool_calls": [call("f", {"a": 1})]}]}, "arguments"),
    ({"model": "standin", "messages": MESSAGES, "temperature": 3}, "temperature"),
])
def test_standin_rejects_malformed_requests_with_400(body, fragment):
    with StandinLLM(ScriptedBrain(["x"])) as srv:
        resp = _post(srv, body)
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["type"] == "invalid_request_error" and fragment in (err["param"] or "") + err["message"]


def test_standin_answers_in_the_openai_schema():
    import httpx2

    brain = ScriptedBrain([{"role": "assistant", "content": "", "tool_calls": [call("files__read_file", {"path": "a"})]},
                           "done"])
    with StandinLLM(brain, model="m1") as srv:
        models = httpx2.get(f"{srv.base_url}/models", timeout=10).json()
        first = _post(srv, {"model": "m1", "messages": MESSAGES, "tools": TOOLS}).json()
        second = _post(srv, {"model": "m1", "messages": MESSAGES}).json()
    assert [m["id"] for m in models["data"]] == ["m1"] and models["object"] == "list"
    assert first["object"] == "chat.completion" and first["id"].startswith("chatcmpl-")
    assert isinstance(first["created"], int) and first["model"] == "m1"
    choice = first["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"]["arguments"] == '{"path": "a"}'
    usage = first["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    assert second["choices"][0]["finish_reason"] == "stop"
    assert second["choices"][0]["message"]["content"] == "done"


def test_standin_honours_max_tokens_with_finish_reason_length():
    with StandinLLM(ScriptedBrain(["one two three four five"])) as srv:
        out = _post(srv, {"model": "standin", "messages": MESSAGES, "max_tokens": 2}).json()
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["choices"][0]["message"]["content"] == "one two"
    assert out["usage"]["completion_tokens"] == 2


async def test_concurrent_episodes_share_one_policy_and_all_pass():
    import asyncio

    task = _adhoc_task()
    with StandinLLM(OracleBrain(task)) as srv:
        async with policy(srv) as pol:
            trajs = await asyncio.gather(*(play_task(task, pol, sample=i) for i in range(4)))
    assert [t.passed for t in trajs] == [True] * 4
    assert len(srv.requests) == sum(len(t.turns) for t in trajs)
