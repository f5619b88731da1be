"""Agreement between a judge and the deterministic criteria: κ against a hand computation, and
benchmarks/judge_agreement.py run end to end against the loopback stand-in judge."""

import importlib.util
import json
from pathlib import Path

from longhorizon.core.grade import CriterionResult, Grade
from longhorizon.core.trajectory import Trajectory
from longhorizon.evaluate.judge_agreement import agreement
from longhorizon.tasks.registry import get_task
from longhorizon.testing.standin_llm import StandinLLM

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_agreement.py"


def row(judge, det, kind="final_state"):
    return {"judge": judge, "deterministic": det, "kind": kind}


def test_kappa_against_a_hand_computation():
    rows = [row(True, True), row(True, False), row(False, False), row(False, False, "process"),
            row(True, True, "process")]
    a = agreement(rows)["all"]
    # po = 4/5; judge yes 3/5, deterministic yes 2/5; pe = 3/5*2/5 + 2/5*3/5 = 12/25; κ = (20/25 - 12/25) / (13/25)
    assert (a["n"], a["agreement"], a["judge_yes"], a["deterministic_yes"]) == (5, 0.8, 0.6, 0.4)
    assert abs(a["kappa"] - 8 / 13) < 1e-12
    assert agreement(rows)["process"]["kappa"] == 1.0
    assert agreement([])["all"]["kappa"] is None


def graded(task, passed: dict, final: str, sample: int) -> Trajectory:
    t = Trajectory(f"{task.id}#{sample}", task.id, task.family, task.category, task.split, task.seed, sample, {},
                   messages=[{"role": "user", "content": task.instruction}, {"role": "assistant", "content": final}])
    t.grade = Grade(tuple(CriterionResult(c.id, c.kind, c.weight, passed[c.id]) for c in task.criteria))
    return t


def test_the_script_reports_kappa_and_cost_against_a_standin_judge(tmp_path, capsys):
    task = get_task("downloads_cleanup-000001")
    ids = [c.id for c in task.criteria]
    k, f = len(ids), len(ids) // 2
    good = graded(task, {c: True for c in ids}, "All done.", 0)
    bad = graded(task, {c: i >= f for i, c in enumerate(ids)}, "I gave up.", 1)  # the first f criteria failed
    (tmp_path / "trajectories.jsonl").write_text("".join(t.to_json() + "\n" for t in (good, bad)))

    def judge(request):  # says yes to every criterion of the episode that claims success
        met = "FINAL MESSAGE:\nAll done." in request["messages"][-1]["content"]
        return {"role": "assistant", "content": json.dumps({"met": met, "reason": "by the final message"})}

    spec = importlib.util.spec_from_file_location("judge_agreement_script", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with StandinLLM(judge) as srv:
        args = [str(tmp_path), "--base-url", srv.base_url, "--model", srv.model, "--json"]
        assert script.main(args) == 0
        first = json.loads(capsys.readouterr().out)
        assert script.main(args) == 0
        again = json.loads(capsys.readouterr().out)
        assert len(srv.requests) == 2 * k  # every verdict of the rerun came from the cache
    # judge: yes on the k of `good`, no on the k of `bad`; deterministic: yes on 2k - f
    po, pj, pd = (k + f) / (2 * k), 1 / 2, (2 * k - f) / (2 * k)
    pe = pj * pd + (1 - pj) * (1 - pd)
    a = first["agreement"]["all"]
    assert (a["n"], a["agreement"], a["judge_yes"], a["deterministic_yes"]) == (2 * k, po, pj, pd)
    assert abs(a["kappa"] - (po - pe) / (1 - pe)) < 1e-12
    assert first["cost_per_episode"]["requests"] == k and again["cost_per_episode"]["requests"] == 0
    assert first["cost_per_episode"]["completion_tokens"] > 0
    assert again["agreement"] == first["agreement"]
    assert script.main([str(tmp_path), "--base-url", srv.base_url, "--model", srv.model]) == 0
    assert "| all | " in capsys.readouterr().out
