"""`bench tau2` end to end through τ²'s own harness (`tau2 run`, litellm, its evaluator), with the
agent and the user simulator on loopback OpenAI-compatible stand-ins: the agent replays each
mock task's reference actions (its evaluation_criteria), the user states the task and stops. τ²'s
evaluator must score every task whose reference is complete 1.0, and the results file must carry
the "local user simulator" label. Skipped only when the τ² venv cannot be built here, with pip's reason."""

from __future__ import annotations

import json

import pytest

from longhorizon.testing.standin_llm import StandinLLM

MARK = "[task:"


def _text(m: dict) -> str:
    c = m.get("content")
    return c if isinstance(c, str) else "".join(p.get("text", "") for p in c or [] if isinstance(p, dict))


class ReplayUser:
    """The user simulator: says which task it is with the scenario's instructions, then stops."""

    def __init__(self):
        self.tasks: list[dict] = []

    def __call__(self, request: dict) -> dict:
        system = _text(request["messages"][0])
        task = next(t for t in self.tasks if t["user_scenario"]["instructions"] in system)
        if any(MARK in _text(m) for m in request["messages"] if m["role"] == "assistant"):
            return {"role": "assistant", "content": "###STOP###"}
        return {"role": "assistant", "content": f"{MARK}{task['id']}] {task['user_scenario']['instructions']}"}


class ReplayAgent:
    """The agent: once the user has named the task, its reference actions in order, one call per
    turn, then a closing message with every fact the task wants communicated."""

    def __init__(self, tasks: list[dict]):
        self.by_id = {t["id"]: t for t in tasks}

    def __call__(self, request: dict) -> dict:
        msgs = request["messages"]
        start = next((i for i, m in enumerate(msgs) if m["role"] == "user" and MARK in _text(m)), None)
        if start is None:
            return {"role": "assistant", "content": "Hi! How can I help you today?"}
        task = self.by_id[_text(msgs[start]).split(MARK, 1)[1].split("]", 1)[0]]
        criteria = task.get("evaluation_criteria") or {}
        actions = [a for a in criteria.get("actions") or [] if a.get("requestor", "assistant") == "assistant"]
        done = sum(len(m.get("tool_calls") or []) for m in msgs[start:] if m["role"] == "assistant")
        if done < len(actions):
            a = actions[done]
            return {"role": "assistant", "content": "", "tool_calls": [{
                "id": f"call_{done}", "type": "function",
                "function": {"name": a["name"], "arguments": json.dumps(a["arguments"])}}]}
        return {"role": "assistant", "content": " ".join(["Done."] + list(criteria.get("communicate_info") or []))}


def runs_with_unique_scenarios(tasks: list[dict]) -> list[list[dict]]:
    """Tasks grouped so no two in a group share a user scenario (the user side tells them apart by it)."""
    groups: list[list[dict]] = []
    for t in tasks:
        key = t["user_scenario"]["instructions"]
        group = next((g for g in groups if all(key != u["user_scenario"]["instructions"] for u in g)), None)
        if group is None:
            groups.append(group := [])
        group.append(t)
    return groups


@pytest.fixture(scope="module")
def mock_tasks():
    from longhorizon.serve.tau2_bench import tau2_data_dir
    from longhorizon.serve.venvs import VenvError

    try:
        data = tau2_data_dir()
    except VenvError as exc:
        print(f"SKIP reason: {exc}")
        pytest.skip(f"τ²-bench cannot be installed here: {exc}")
    return json.loads((data / "domains" / "mock" / "tasks.json").read_text())


def test_replaying_the_reference_actions_scores_every_mock_task_1(mock_tasks, tmp_path):
    from longhorizon.serve.tau2_bench import USER_LABEL, run_tau2

    user = ReplayUser()
    scored = {}
    with StandinLLM(ReplayAgent(mock_tasks), model="replay-agent") as agent_srv, \
            StandinLLM(user, model="replay-user") as user_srv:
        for i, group in enumerate(runs_with_unique_scenarios(mock_tasks)):
            user.tasks = group
            out = tmp_path / f"run{i}"
            results = run_tau2("mock", agent_srv.base_url, "replay-agent", out, user_base_url=user_srv.base_url,
                               user_model="replay-user", task_ids=[t["id"] for t in group], concurrency=3,
                               quiet=True)
            assert json.loads((out / "results.json").read_text())["user_simulator"] == USER_LABEL
            scored.update({e["id"]: e["reward"] for e in results["entries"]})
    # τ²'s own data: this task lists no reference actions, yet its environment assertion wants
    # task_2 completed, so replaying its (empty) reference cannot pass: the assertion is checked.
    no_reference = {"update_task_with_history_and_env_assertions"}
    assert scored == {t["id"]: 0.0 if t["id"] in no_reference else 1.0 for t in mock_tasks}


def test_an_agent_that_does_nothing_scores_0_on_a_task_that_needs_an_action(mock_tasks, tmp_path):
    from longhorizon.serve.tau2_bench import run_tau2

    user = ReplayUser()
    user.tasks = [t for t in mock_tasks if t["id"] == "create_task_1"]
    idle = lambda request: {"role": "assistant", "content": "Hi! How can I help you today?"}  # noqa: E731
    with StandinLLM(idle, model="idle-agent") as agent_srv, StandinLLM(user, model="replay-user") as user_srv:
        results = run_tau2("mock", agent_srv.base_url, "idle-agent", tmp_path, user_base_url=user_srv.base_url,
                           user_model="replay-user", task_ids=["create_task_1"], quiet=True)
    assert [(e["id"], e["reward"], e["passed"]) for e in results["entries"]] == [("create_task_1", 0.0, False)]
    assert results["summary"]["pass@1"] == 0.0


def test_tau2_sends_temperature_0_and_a_seed_to_agent_and_user_and_records_reproducible(mock_tasks, tmp_path):
    from longhorizon.serve.tau2_bench import run_tau2

    user = ReplayUser()
    user.tasks = [t for t in mock_tasks if t["id"] == "create_task_1"]
    idle = lambda request: {"role": "assistant", "content": "Hi! How can I help you today?"}  # noqa: E731
    with StandinLLM(idle, model="idle-agent") as agent_srv, StandinLLM(user, model="replay-user") as user_srv:
        results = run_tau2("mock", agent_srv.base_url, "idle-agent", tmp_path, user_base_url=user_srv.base_url,
                           user_model="replay-user", task_ids=["create_task_1"], quiet=True, reproducible=True)
    for srv in (agent_srv, user_srv):
        sent = {(r.get("temperature"), r.get("seed")) for r in srv.requests}
        assert len(sent) == 1 and next(iter(sent))[0] == 0 and isinstance(next(iter(sent))[1], int)
    assert results["settings"]["reproducible"] is True and results["settings"]["concurrency"] == 1


def test_summary_counts_a_task_solved_only_at_reward_1_and_gives_pass_hat_k_over_trials():
    from longhorizon.serve.tau2_bench import USER_LABEL, summarise

    sims = [{"task_id": "a", "trial": 0, "reward_info": {"reward": 1.0}, "termination_reason": "user_stop"},
            {"task_id": "a", "trial": 1, "reward_info": {"reward": 1.0}, "termination_reason": "user_stop"},
            {"task_id": "b", "trial": 0, "reward_info": {"reward": 1.0}, "termination_reason": "user_stop"},
            {"task_id": "b", "trial": 1, "reward_info": {"reward": 0.5}, "termination_reason": "max_steps"}]
    r = summarise({"simulations": sims}, domain="mock", model="m", user_model="u", settings={})
    assert [e["passed"] for e in r["entries"]] == [True, True, True, False]
    s = r["summary"]
    assert (s["n"], s["tasks"], s["pass@1"], s["mean_reward"]) == (4, 2, 0.75, 0.875)
    assert s["pass^k"] == {"1": 0.75, "2": 0.5}  # a: both trials pass; b: one of two
    lo, hi = s["pass@1_ci95"]
    assert lo < 0.75 < hi
    assert r["user_simulator"] == USER_LABEL and r["comparable_to_leaderboard"] is False


@pytest.mark.parametrize("sims", [[1], [{"trial": 0}], [{"task_id": "a", "trial": "first"}],
                                  [{"task_id": "a", "reward_info": {"reward": "high"}}], "not a list"])
def test_a_malformed_simulation_is_one_line_naming_it(sims):
    from longhorizon.core.errors import InfraError
    from longhorizon.serve.tau2_bench import summarise

    with pytest.raises(InfraError) as err:
        summarise({"simulations": sims}, domain="mock", model="m", user_model="u", settings={})
    assert "\n" not in str(err.value) and ("simulation 0 is malformed" in str(err.value) or "no 'simulations'" in
                                            str(err.value))


def test_a_task_and_trial_given_twice_count_once():
    from longhorizon.serve.tau2_bench import summarise

    sim = {"task_id": "a", "trial": 0, "reward_info": {"reward": 1.0}}
    r = summarise({"simulations": [sim, dict(sim), {**sim, "trial": 1}]}, domain="mock", model="m", user_model="u",
                  settings={})
    assert r["summary"]["n"] == 2 and r["summary"]["duplicates_dropped"] == 1
