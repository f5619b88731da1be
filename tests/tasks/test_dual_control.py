"""The dual-control families: solvable by their oracle, which talks to the simulated person like
any agent would; impossible without the person's own actions; every criterion able to fail;
deterministic in the seed."""

import statistics
from functools import cache

import pytest

from longhorizon.core.policy import assistant, tool_call
from longhorizon.core.task import dumps_canonical
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.openai_client import OpenAIPolicy
from longhorizon.policies.scripted import NullPolicy, OraclePolicy
from longhorizon.tasks.registry import get_family
from longhorizon.testing.standin_llm import OracleBrain, StandinLLM

FAMILIES = {
    "mobile_data_troubleshooting": "dual-control support",
    "mfa_account_recovery": "dual-control support",
    "new_hire_onboarding": "HR onboarding",
}
SEEDS = [0, 1, 2, 3, 4, 5, 100000, 100001, 100002]
NEEDS_THE_PERSON = {
    "mobile_data_troubleshooting": {"data_working", "verified_after_fix"},
    "mfa_account_recovery": {"identity_verified", "mfa_reenrolled", "password_changed", "sign_in_confirmed"},
    "new_hire_onboarding": {"contract_signed", "account_activated", "status_checked"},
}


@cache
def task(family: str, seed: int):
    return get_family(family).generate(seed)


class ScriptPolicy:
    """Plays a Task's oracle but lets ``keep(call)`` drop calls; a dropped call's result is ''."""

    name = "script"

    def __init__(self, keep):
        self.keep = keep

    def describe(self):
        return {"policy": self.name}

    async def act(self, messages, tools, ctx):
        gen = ctx.scratch.get("gen")
        try:
            if gen is None:
                gen = ctx.scratch["gen"] = ctx.task.oracle()
                call = next(gen)
            else:
                last = messages[-1]
                call = gen.send(last.get("content", "") if last.get("role") == "tool" else "")
            while not self.keep(call):
                call = gen.send("")
        except StopIteration as stop:
            return assistant(stop.value or "Done.")
        n = ctx.scratch["n"] = ctx.scratch.get("n", 0) + 1
        return assistant(call.note, [tool_call(f"call_{n}", call.name, dumps_canonical(call.arguments))])


def failed(traj) -> set[str]:
    return {r.id for r in traj.grade.results if not r.passed}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_metadata(family):
    fam = get_family(family)
    assert fam.category == FAMILIES[family]
    assert "user" in fam.apps
    t = task(family, 100000)
    held = ("holdout-family",) * 2 if fam.holdout_family else ("train", "holdout")  # registry.HOLDOUT_FAMILIES
    assert (task(family, 0).split, t.split) == held
    assert set(t.perturbations) == {c.id for c in t.criteria}
    assert {c.kind for c in t.criteria} == {"final_state", "process"}


@pytest.mark.parametrize("family", list(FAMILIES))
async def test_oracle_solves_every_seed_through_the_person(family):
    counts = []
    for seed in SEEDS:
        traj = await play_task(task(family, seed), OraclePolicy())
        assert traj.passed and traj.reward == 1.0, (seed, [(r.id, r.note) for r in traj.grade.results if not r.passed])
        assert [c.result for c in traj.tool_calls if c.is_error] == []
        assert traj.calls("user__send_message", ok_only=True), "the oracle must talk to the person"
        counts.append(len(traj.tool_calls))
    assert min(counts) >= 22 and statistics.median(counts) >= 25, counts


@pytest.mark.parametrize("family", list(FAMILIES))
async def test_null_policy_scores_zero(family):
    traj = await play_task(task(family, 1), NullPolicy())
    assert traj.grade.reward == 0.0


@pytest.mark.parametrize("family", list(FAMILIES))
async def test_cannot_pass_without_the_persons_actions(family):
    """All of the agent's own tool work, but never a message to the person: the task fails."""
    for seed in (0, 100001):
        traj = await play_task(task(family, seed), ScriptPolicy(lambda c: c.name != "user__send_message"))
        assert not traj.calls("user__send_message")
        assert not traj.passed
        assert NEEDS_THE_PERSON[family] <= failed(traj), failed(traj)


class ReplayMessages:
    """Sends a fixed list of messages to the person and nothing else."""

    name = "replay"

    def __init__(self, texts):
        self.texts = list(texts)

    def describe(self):
        return {"policy": self.name}

    async def act(self, messages, tools, ctx):
        n = ctx.scratch["n"] = ctx.scratch.get("n", 0) + 1
        if n > len(self.texts):
            return assistant("Done.")
        return assistant("", [tool_call(f"m_{n}", "user__send_message", dumps_canonical({"text": self.texts[n - 1]}))])


@pytest.mark.parametrize("family", list(FAMILIES))
async def test_talking_alone_does_not_pass_either(family):
    """The oracle's messages to the person, word for word, but none of the back-office work."""
    t = task(family, 2)
    oracle = await play_task(t, OraclePolicy())
    texts = [c.arguments["text"] for c in oracle.calls("user__send_message")]
    traj = await play_task(t, ReplayMessages(texts))
    assert len(traj.calls("user__send_message", ok_only=True)) == len(texts)
    assert not traj.passed and traj.grade.reward < 0.5


@pytest.mark.parametrize("family", list(FAMILIES))
async def test_each_perturbation_fails_its_criterion_on_a_holdout_seed(family):
    t = task(family, 100001)
    for cid in t.perturbations:
        traj = await play_task(t, OraclePolicy(perturb=cid))
        result = next(r for r in traj.grade.results if r.id == cid)
        assert not result.passed, f"{cid} passed on the solution built to break it"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_generation_is_deterministic(family, tmp_path):
    a, b = get_family(family).generate(4), get_family(family).generate(4)
    assert a.instruction == b.instruction
    assert World.build(tmp_path / "a", a.build).hash() == World.build(tmp_path / "b", b.build).hash()
    assert World.build(tmp_path / "c", get_family(family).generate(5).build).hash() != \
        World.build(tmp_path / "d", a.build).hash()


async def test_oracle_through_a_real_chat_client():
    """The agent side over real HTTP (OpenAIPolicy against the stand-in playing the oracle)."""
    t = task("mfa_account_recovery", 3)
    with StandinLLM(OracleBrain(t)) as srv:
        async with OpenAIPolicy(srv.base_url, srv.model, api_key="") as policy:
            traj = await play_task(t, policy)
    assert traj.passed



async def test_revoking_every_session_is_not_revoking_the_lost_phone():
    """The oracle's work, plus every other session of the employee ended: the revocation criterion fails."""
    import json
    from dataclasses import replace

    from longhorizon.core.task import ToolCall

    t = get_family("mfa_account_recovery").generate(1)

    def and_the_rest():
        summary = yield from t.oracle()
        listing = yield ToolCall("user__list_sessions", {"account_id": t.data["account_id"]})
        for s in json.loads(listing):
            if s["active"]:
                yield ToolCall("user__revoke_session", {"session_id": s["session_id"]})
        return summary

    traj = await play_task(replace(t, oracle=and_the_rest), OraclePolicy())
    got = {r.id: r for r in traj.grade.results}
    assert not got["lost_device_sessions_revoked"].passed, got["lost_device_sessions_revoked"].note
