"""Judged coding: a real OpenAI-compatible server on loopback (the stand-in) scores episodes;
verdicts are cached; agreement with the automatic metrics is Cohen's κ (computed by hand)."""

import json

from analysis_synth import call, traj

from longhorizon.analysis.judge import RUBRICS, Judge, cohen_kappa, judged_coding
from longhorizon.analysis.pairs import make_pairs
from longhorizon.testing.standin_llm import StandinLLM

WRITE = call("files__write_file", {"path": "out.txt", "content": "x"})
VERIFY = call("files__read_file", {"path": "out.txt"}, "x")
READ_IN = call("files__read_file", {"path": "in.txt"}, "input")


def brain(request):
    """Answers the verification rubric: yes when the transcript shows any read_file call (a
    cruder reading than the automatic metric, so the two disagree on one episode)."""
    prompt = request["messages"][-1]["content"]
    if RUBRICS["verification"] not in prompt:
        return {"role": "assistant", "content": "I cannot tell."}  # no JSON: not scored
    score = int("[call] files__read_file" in prompt)
    return {"role": "assistant", "content": json.dumps({"score": score, "reason": "read_file seen" if score else "none"})}


def test_cohen_kappa_by_hand():
    # po = 3/4; p(x=1) = 1/2, p(y=1) = 1/4; pe = 1/2*1/4 + 1/2*3/4 = 1/2; κ = (3/4 - 1/2) / (1/2)
    assert cohen_kappa([True, True, False, False], [True, False, False, False]) == 0.5
    assert cohen_kappa([True, False], [True, False]) == 1.0
    assert cohen_kappa([True, True], [True, True]) is None  # chance agreement 1: undefined
    assert cohen_kappa([], []) is None


def _pairs():
    a = [traj([("", [WRITE]), ("Done.", [])], task=f"t{i}", instruction=f"Task {i}.").to_dict() for i in range(4)]
    b = [traj([("", [WRITE]), ("", [VERIFY]), ("Done.", [])], task=f"t{i}", instruction=f"Task {i}.").to_dict()
         for i in range(3)]
    b.append(traj([("", [READ_IN]), ("", [WRITE]), ("Done.", [])], task="t3", instruction="Task 3.").to_dict())
    return make_pairs(a, b)[0]


def test_judged_scores_kappa_and_cache(tmp_path):
    pairs = _pairs()
    with StandinLLM(brain) as srv:
        judge = Judge(srv.base_url, srv.model, tmp_path / "cache.jsonl")
        result = judged_coding(judge, pairs)
        sent = len(srv.requests)
        body = srv.requests[0]
        again = judged_coding(Judge(srv.base_url, srv.model, tmp_path / "cache.jsonl"), pairs)
        assert len(srv.requests) == sent  # every verdict came from the cache
    assert sent == 8 * len(RUBRICS) and result["requests"] == sent and again["requests"] == 0
    assert (body["temperature"], body["seed"]) == (0.0, 0)
    v = result["behaviours"]["verification"]
    assert (v["scored"], v["mean_a"], v["mean_b"], v["agreement_n"]) == (8, 0.0, 1.0, 8)
    # judge: A 0,0,0,0 B 1,1,1,1; automatic: A 0,0,0,0 B 1,1,1,0 -> po 7/8, pe 1/2*3/8 + 1/2*5/8 = 1/2
    assert v["kappa"] == (7 / 8 - 1 / 2) / (1 - 1 / 2)
    assert result["behaviours"]["local-goal formation"]["scored"] == 0  # replies without JSON are not scores
    assert again["behaviours"] == result["behaviours"]


def test_analyze_reports_judged_coding_next_to_the_metrics(tmp_path, capsys):
    from analysis_synth import write_run

    from longhorizon.cli import main

    a = [traj([("", [WRITE]), ("Done.", [])], task="t0", passed=False, final=[False])]
    b = [traj([("", [WRITE]), ("", [VERIFY]), ("Done.", [])], task="t0")]
    write_run(tmp_path / "a", a)
    write_run(tmp_path / "b", b)
    with StandinLLM(brain) as srv:
        assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r"), "--quiet",
                     "--judge-base-url", srv.base_url, "--judge-model", srv.model]) == 0
    judged = json.loads((tmp_path / "r" / "metrics.json").read_text())["judge"]["behaviours"]["verification"]
    assert (judged["mean_a"], judged["mean_b"], judged["kappa"]) == (0.0, 1.0, 1.0)
    assert "Judged coding (standin)" in (tmp_path / "r" / "report.md").read_text()
    assert (tmp_path / "r" / "judge_cache.jsonl").exists()
