"""Judged criteria: a rubric scored by a judge over real HTTP (the loopback stand-in), cached on
disk, step verdicts aggregated, and a judge that fails recorded as infrastructure, never as the
agent's failure. The family is the test-only ``thank_you_note`` (testing/judged_family.py)."""

import asyncio
import json
import re

import pytest

from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.judged import (
    MAX_STEPS, RESULT_CHARS, Context, Rubric, condensed_context, configure_judge, is_judged, judged_criterion,
    require_judge,
)
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.testing.judged_family import STEPS, TONE, ThankYouNote
from longhorizon.testing.standin_llm import StandinLLM

TASK = ThankYouNote().generate(1)


def step_numbers(prompt: str) -> list[int]:
    return [int(n) for n in re.findall(r"^step (\d+):", prompt, re.M)]


def fair_judge(bad_steps=()):
    """A scripted judge: the tone rubric is met when the evidence says "Thank you"; every shown
    step is good except those in ``bad_steps``."""
    def brain(request):
        prompt = request["messages"][-1]["content"]
        if prompt.startswith(f"RUBRIC: {STEPS.question}"):
            steps = [{"step": n, "ok": n not in bad_steps, "reason": "a useless call" if n in bad_steps else "fine"}
                     for n in step_numbers(prompt)]
            return {"role": "assistant", "content": "```json\n" + json.dumps({"steps": steps}) + "\n```"}
        met = "Thank you" in prompt.split("EVIDENCE FROM THE FINAL STATE:")[-1]
        return {"role": "assistant", "content": json.dumps({"met": met, "reason": "warm" if met else "curt"})}
    return brain


@pytest.fixture(autouse=True)
def no_judge(monkeypatch):
    for var in ("LONGHORIZON_JUDGE_BASE_URL", "LONGHORIZON_JUDGE_MODEL", "LONGHORIZON_JUDGE_CACHE"):
        monkeypatch.delenv(var, raising=False)
    configure_judge(None, None)
    yield
    configure_judge(None, None)


def play(task=TASK, policy=None):
    return asyncio.run(play_task(task, policy or OraclePolicy()))


def test_a_family_mixes_deterministic_and_judged_criteria():
    assert [is_judged(c) for c in TASK.criteria] == [False, True, True]
    assert [c.get("judged", False) for c in TASK.card()["criteria"]] == [False, True, True]


def test_the_oracle_passes_through_the_standin_judge_and_a_rerun_asks_nothing(tmp_path):
    with StandinLLM(fair_judge()) as srv:
        configure_judge(srv.base_url, srv.model, tmp_path / "cache")
        first = play()
        asked = len(srv.requests)
        configure_judge(srv.base_url, srv.model, tmp_path / "cache")  # a fresh Judge: only the disk cache is shared
        again = play()
        assert len(srv.requests) == asked == 2  # one verdict per judged criterion, then none
    assert first.passed and again.passed
    assert [r.note for r in first.grade.results][1:] == ["judge standin: warm", "judge standin: 2/2 steps good"]
    assert again.grade.to_dict() == first.grade.to_dict()


def test_the_request_holds_the_rubric_and_the_condensed_episode(tmp_path):
    with StandinLLM(fair_judge()) as srv:
        configure_judge(srv.base_url, srv.model, tmp_path / "cache")
        play()
        tone, steps = sorted(srv.requests, key=lambda r: STEPS.question in r["messages"][-1]["content"])
    assert (tone["temperature"], tone["seed"], tone["model"]) == (0.0, 0, "standin")
    text = tone["messages"][-1]["content"]
    assert text.startswith(f"RUBRIC: {TONE.question}")
    assert TASK.instruction in text
    assert 'step 1: said "Read the order first."; called files__read_file {"path": "order.txt"}' in text
    assert f"customer: {TASK.data['customer']}" in text  # the read's result
    assert "FINAL MESSAGE:\nI wrote a thank-you note to note.txt." in text
    assert f"EVIDENCE FROM THE FINAL STATE:\nDear {TASK.data['customer']}," in text
    assert '"met": true' in text
    step_text = steps["messages"][-1]["content"]
    assert step_numbers(step_text) == [1, 2] and '"steps": [{"step": 1, "ok": true' in step_text
    assert "EVIDENCE" not in step_text  # the step rubric reads no World


def test_the_condensed_context_is_bounded():
    from longhorizon.core.trajectory import ToolCallRecord, Trajectory

    traj = Trajectory("e#0", "t", "f", "c", "train", 0, 0, {}, messages=[{"role": "user", "content": "Go."}])
    traj.tool_calls = [ToolCallRecord(i, f"c{i}", "files__read_file", {"path": "x" * 5000}, "y" * 50_000, False, 1.0)
                       for i in range(500)]
    ctx = condensed_context(traj)
    assert len(ctx.steps) == MAX_STEPS and ctx.steps[0] == 1 and ctx.steps[-1] == 500
    assert f"[steps {MAX_STEPS // 2 + 1} to {500 - MAX_STEPS // 2} are not shown]" in ctx.text
    assert len(ctx.text) < MAX_STEPS * (RESULT_CHARS + 400)
    assert "y" * (RESULT_CHARS + 1) not in ctx.text


def test_step_verdicts_aggregate_by_the_share_of_good_steps(tmp_path):
    lenient = judged_criterion("half", "half the steps good", "process", Rubric(STEPS.question, "steps", 0.5))
    with StandinLLM(fair_judge(bad_steps={2})) as srv:
        configure_judge(srv.base_url, srv.model, tmp_path / "cache")
        traj = play()
        by_id = {r.id: r for r in traj.grade.results}
        assert not by_id["sensible_steps"].passed
        assert by_id["sensible_steps"].note == "judge standin: 1/2 steps good; step 2: a useless call"
        assert lenient.check(None, traj) == (True, "judge standin: 1/2 steps good; step 2: a useless call")


@pytest.mark.parametrize("reply", [
    "The note looks fine to me.",                                  # no JSON
    json.dumps({"met": "yes"}),                                    # not a boolean
])
def test_a_garbage_verdict_is_an_infrastructure_error_not_a_failure(tmp_path, reply):
    with StandinLLM(lambda request: {"role": "assistant", "content": reply}) as srv:
        configure_judge(srv.base_url, srv.model, tmp_path / "cache")
        with pytest.raises(InfraError, match="could not be checked; warm_tone: JudgeError: .*no usable verdict"):
            play()
        assert not list((tmp_path / "cache").rglob("*.json"))  # garbage is never cached


def test_step_verdicts_must_cover_every_shown_step(tmp_path):
    def skips_a_step(request):
        return {"role": "assistant", "content": json.dumps({"steps": [{"step": 1, "ok": True}]})}

    with StandinLLM(skips_a_step) as srv:
        configure_judge(srv.base_url, srv.model, tmp_path / "cache")
        grade = TASK.grade(_world_after_oracle(tmp_path), _oracle_traj())
    r = {r.id: r for r in grade.results}["sensible_steps"]
    assert not r.passed and "steps [2] have no verdict" in r.infra_error


def test_an_unreachable_judge_is_an_infrastructure_error_on_the_criterion(tmp_path):
    with StandinLLM(fair_judge()) as srv:
        srv.fail_next(10, status=503)
        configure_judge(srv.base_url, srv.model, tmp_path / "cache", max_retries=1, backoff_s=0.0)
        grade = TASK.grade(_world_after_oracle(tmp_path), _oracle_traj())
    assert grade.infra_errors().keys() == {"warm_tone", "sensible_steps"}
    assert "failed after 2 attempts" in grade.infra_errors()["warm_tone"]
    assert not grade.grader_errors()
    assert {r.id: r.passed for r in grade.results} == {"names_customer": True, "warm_tone": False,
                                                        "sensible_steps": False}


def test_the_runner_records_a_failed_judge_as_an_infra_error_not_a_trajectory(tmp_path):
    from longhorizon.env.episode import Limits
    from longhorizon.rollout.runner import RunSpec, play_run

    with StandinLLM(lambda request: {"role": "assistant", "content": "no idea"}) as srv:
        configure_judge(srv.base_url, srv.model, tmp_path / "cache")
        spec = RunSpec(policy=OraclePolicy().describe(), split="train", seeds=1, families=None, samples=1,
                       limits=Limits(), tasks=[TASK.id])
        store = asyncio.run(play_run([TASK], OraclePolicy(), spec, tmp_path / "run", progress=False))
    assert store.trajectories() == []
    assert [e["episode_id"] for e in store.infra_errors()] == [f"{TASK.id}#0"]
    assert "JudgeError" in store.infra_errors()[0]["error"]


def test_a_judged_criterion_without_a_judge_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="has judged criteria and needs a judge"):
        require_judge([TASK])
    with pytest.raises(UsageError, match="needs a judge"):
        TASK.grade(_world_after_oracle(tmp_path), _oracle_traj())


def test_no_shipped_family_has_a_judged_criterion():
    from longhorizon.tasks.registry import families

    for fam in families():
        assert not any(is_judged(c) for c in fam.generate(1).criteria), fam.name


def test_a_step_rubric_is_a_process_criterion():
    with pytest.raises(ValueError, match="kind must be process"):
        judged_criterion("x", "x", "final_state", STEPS)


def test_run_takes_the_judge_from_its_options_and_refuses_to_run_without_one(tmp_path, monkeypatch, capsys):
    from longhorizon.cli import main
    from longhorizon.tasks import registry

    registry._load()
    monkeypatch.setitem(registry._FAMILIES, "thank_you_note", ThankYouNote())  # this test only
    args = ["run", "--policy", "oracle", "--task", TASK.id, "--quiet"]
    assert main(args + ["--out", str(tmp_path / "none")]) == 2
    assert "has judged criteria and needs a judge" in capsys.readouterr().err
    with StandinLLM(fair_judge()) as srv:
        assert main(args + ["--out", str(tmp_path / "run"), "--judge-base-url", srv.base_url,
                            "--judge-model", srv.model]) == 0
    row = json.loads((tmp_path / "run" / "trajectories.jsonl").read_text())
    assert row["grade"]["passed"] and len(srv.requests) == 2
    assert list((tmp_path / "run" / "judge_cache").rglob("*.json"))


# -- helpers ------------------------------------------------------------------------------------
_ORACLE = {}


def _oracle_traj():
    """One oracle episode, played once with the deterministic criterion only (no judge asked)."""
    if "traj" not in _ORACLE:
        task = ThankYouNote().generate(1)
        task.criteria = task.criteria[:1]  # deterministic only: no judge needed to record it
        _ORACLE["traj"] = play(task)
    return _ORACLE["traj"]


def _world_after_oracle(tmp_path):
    from longhorizon.core.world import World

    world = World.build(tmp_path / "world", TASK.build)
    (world.workspace / "note.txt").write_text(f"Dear {TASK.data['customer']},\n\nThank you!\n")
    return world


def test_context_steps_are_those_shown():
    ctx = condensed_context(_oracle_traj())
    assert isinstance(ctx, Context) and ctx.steps == (1, 2)


def test_a_transcript_too_long_for_the_judge_is_an_infrastructure_error(tmp_path):
    from longhorizon.testing.standin_llm import BrainError

    def small_context(request):
        raise BrainError("This model's maximum context length is 2048 tokens.", status=400)

    with StandinLLM(small_context) as srv:
        configure_judge(srv.base_url, srv.model, tmp_path / "cache")
        grade = TASK.grade(_world_after_oracle(tmp_path), _oracle_traj())
    assert "ContextLengthExceeded" in grade.infra_errors()["warm_tone"]
