"""A verifiers rollout plays one task to a graded end: verifiers' own env, interception server
and client, the model replaced by the OpenAI-compatible stand-in on loopback."""

import pytest

pytest.importorskip("verifiers.v1", reason="needs verifiers 0.4: runs in .venvs/verifiers (`make venv-verifiers`; "
                                           "`make test` runs it there)")

import verifiers.v1 as vf  # noqa: E402

from longhorizon.adapters.verifiers import load_environment  # noqa: E402
from longhorizon.core.errors import UsageError  # noqa: E402
from longhorizon.tasks.registry import get_task  # noqa: E402
from longhorizon.core.world import World  # noqa: E402
from longhorizon.env.episode import Episode  # noqa: E402
from longhorizon.testing import OracleBrain, ScriptedBrain, StandinLLM  # noqa: E402

TASK = "downloads_cleanup-000001"


async def rollout(brain, task_id=TASK):
    """One verifiers episode of ``task_id`` against the stand-in: (its trace, the stand-in)."""
    env = load_environment(task_ids=[task_id])
    (task,) = list(env.taskset)
    with StandinLLM(brain) as srv:
        ctx = vf.ModelContext(model=srv.model, client=vf.EvalClientConfig(base_url=srv.base_url))
        async with env.serving():
            episode = await env.run_episode(task, ctx)
    assert episode.ok and not episode.errors
    (trace,) = episode.traces
    return trace, srv


async def episode_tools(task, tmp_path):
    async with Episode(task, World.build(tmp_path / "w", task.build)) as ep:
        return ep.tools


async def test_the_oracle_played_through_verifiers_earns_our_grade(tmp_path):
    task = get_task(TASK)
    trace, srv = await rollout(OracleBrain([task]))
    assert trace.info["status"] == "completed" and trace.info["grade"]["passed"] is True
    assert trace.reward == trace.rewards["grade"].score == trace.info["grade"]["reward"] == 1.0
    assert trace.metrics["passed"] == 1.0 and trace.metrics["tool_calls"] > 20
    assert trace.task.data.id == TASK and trace.task.data.prompt == task.instruction
    tools = await episode_tools(task, tmp_path)  # what verifiers showed the model is our Episode's schemas
    assert all(r["tools"] == tools for r in srv.requests)
    assert sorted(t.name for t in trace.tools) == sorted(t["function"]["name"] for t in tools)
    assert len(trace.calls) == len(srv.requests) == trace.metrics["tool_calls"] + 1  # every turn via interception


async def test_a_model_that_calls_no_tool_scores_zero():
    trace, _ = await rollout(ScriptedBrain([], final="All done."))
    assert trace.reward == 0.0 and trace.metrics["passed"] == 0.0 and trace.metrics["tool_calls"] == 0
    assert trace.info["status"] == "completed" and trace.info["grade"]["passed"] is False


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def test_malformed_tool_calls_come_back_as_errors_the_model_reads():
    brain = ScriptedBrain([{"role": "assistant", "content": "", "tool_calls": [
        call("c1", "files__list_dir", '{"path": "Downl'), call("c2", "files__nope", "{}")]}], final="Done.")
    trace, srv = await rollout(brain)
    results = {m["tool_call_id"]: m["content"] for m in srv.requests[1]["messages"] if m["role"] == "tool"}
    assert results["c1"].startswith("Error: arguments are not valid JSON")
    assert results["c2"].startswith("Error: unknown tool 'files__nope'") and "files__list_dir" in results["c2"]
    assert trace.info["status"] == "completed" and trace.reward == 0.0 and trace.metrics["tool_calls"] == 2


def test_tasks_come_from_the_train_split_unless_holdout_is_allowed():
    env = load_environment(families=["downloads_cleanup"], seeds=2)
    assert [t.data.id for t in env.taskset] == ["downloads_cleanup-000000", "downloads_cleanup-000001"]
    assert {t.data.split for t in env.taskset} == {"train"}
    with pytest.raises(UsageError, match="allow_holdout"):
        load_environment("holdout", families=["downloads_cleanup"], seeds=1)
    (held,) = load_environment("holdout", families=["downloads_cleanup"], seeds=1, allow_holdout=True).taskset
    assert held.data.split == "holdout" and get_task(held.data.id).split == "holdout"
    with pytest.raises(UsageError, match="allow_holdout"):  # one by one too
        load_environment(task_ids=[held.data.id])


@pytest.mark.parametrize("launch", ["our entry point", "plain vf-eval"])
def test_vf_eval_runs_the_taskset_and_writes_graded_traces(tmp_path, launch):
    """verifiers' own CLI: through our entry point, and as verifiers' ``vf-eval`` script, which
    finds the taskset by its top-level module name (the ``longhorizon_verifiers`` package)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    cli, extra = (([sys.executable, "-m", "longhorizon.adapters.verifiers"], []) if launch == "our entry point"
                  else ([str(Path(sys.executable).with_name("vf-eval"))], ["--no-push"]))
    tasks = [get_task("downloads_cleanup-000000"), get_task(TASK)]
    with StandinLLM(OracleBrain(tasks)) as srv:
        done = subprocess.run(
            [*cli, "longhorizon_verifiers", "-m", srv.model,
             "--client.base-url", srv.base_url, "--env.taskset.families", '["downloads_cleanup"]',
             "--env.taskset.seeds", "2", "-o", str(tmp_path), *extra], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (traces,) = tmp_path.glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    assert sorted(e["task"]["data"]["id"] for e in episodes) == [t.id for t in tasks]
    for e in episodes:
        (trace,) = e["traces"]
        assert e["ok"] and trace["rewards"]["grade"]["score"] == 1.0 and trace["metrics"]["passed"] == 1.0


def test_vf_eval_on_the_holdout_without_the_flag_is_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "longhorizon.adapters.verifiers", "longhorizon_verifiers", "-m", "any",
         "--client.base-url", "http://127.0.0.1:9/v1", "--env.taskset.split", "holdout",
         "--env.taskset.families", '["downloads_cleanup"]', "--env.taskset.seeds", "1", "-o", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("longhorizon: error: not serving holdout tasks") and "allow-holdout" in line
