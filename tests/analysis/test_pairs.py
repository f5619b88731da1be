"""Pairing and paired statistics match values computed by hand (the bootstrap interval is
recomputed here from its definition: percentiles of the mean over resampled tasks)."""

import math

import numpy as np
from analysis_synth import call, traj

from longhorizon.analysis.pairs import analyze_pairs, first_divergence, make_pairs

WRITE = call("files__write_file", {"path": "out.txt", "content": "x"})
VERIFY = call("files__read_file", {"path": "out.txt"}, "x")


def ep(task, *, passed, verified, sample=0, category="cat"):
    turns = [("", [WRITE])] + ([("", [VERIFY])] if verified else []) + [("Done.", [])]
    return traj(turns, task=task, sample=sample, passed=passed, category=category).to_dict()


def test_outcomes_lists_and_mcnemar():
    a = [ep("t1", passed=False, verified=False), ep("t2", passed=True, verified=True),
         ep("t3", passed=False, verified=False), ep("t4", passed=True, verified=True),
         ep("t5", passed=False, verified=False), ep("t6", passed=False, verified=False)]
    b = [ep("t1", passed=True, verified=True), ep("t2", passed=False, verified=True),
         ep("t3", passed=False, verified=True), ep("t4", passed=True, verified=True),
         ep("t5", passed=True, verified=True), ep("t6", passed=True, verified=False)]
    result, pairs = analyze_pairs(a, b, n_boot=200)
    assert result["outcomes"] == {"fail→pass": 3, "pass→fail": 1, "both-fail": 1, "both-pass": 1}
    assert [p["task_id"] for p in result["pairs"]["fail→pass"]] == ["t1", "t5", "t6"]
    assert [p["task_id"] for p in result["pairs"]["pass→fail"]] == ["t2"]
    # McNemar exact, 1 vs 3 discordant: 2 * (C(4,0) + C(4,1)) / 2^4
    assert math.isclose(result["outcome"]["mcnemar"]["p_value"], 2 * (1 + 4) / 16)
    v = result["metrics"]["verification_share"]
    assert (v["a"], v["b"], v["delta"]) == (2 / 6, 5 / 6, 3 / 6)
    assert result["by_outcome"]["fail→pass"]["verification_share"]["delta"] == 2 / 3  # t1 +1, t5 +1, t6 0


def test_delta_interval_is_the_paired_bootstrap_over_tasks():
    verified_a = [0, 0, 1, 1, 0]
    verified_b = [1, 1, 1, 0, 1]
    a = [ep(f"t{i}", passed=False, verified=bool(x)) for i, x in enumerate(verified_a)]
    b = [ep(f"t{i}", passed=True, verified=bool(x)) for i, x in enumerate(verified_b)]
    result, _ = analyze_pairs(a, b, n_boot=1000, seed=7)
    diffs = np.array(verified_b, float) - np.array(verified_a, float)
    means = diffs[np.random.default_rng(7).integers(0, 5, size=(1000, 5))].mean(axis=1)
    st = result["metrics"]["verification_share"]
    assert st["delta"] == 2 / 5
    assert st["delta_ci95"] == [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def test_constant_differences_give_a_point_interval():
    a = [ep(f"t{i}", passed=False, verified=False) for i in range(4)]
    b = [ep(f"t{i}", passed=True, verified=True) for i in range(4)]
    st = analyze_pairs(a, b, n_boot=300)[0]["metrics"]["verification_share"]
    assert (st["delta"], st["delta_ci95"]) == (1.0, [1.0, 1.0])


def test_samples_are_averaged_per_task_before_the_task_mean():
    a = [ep("x", passed=False, verified=False, sample=0), ep("x", passed=False, verified=False, sample=1),
         ep("y", passed=False, verified=False)]
    b = [ep("x", passed=True, verified=True, sample=0), ep("x", passed=True, verified=False, sample=1),
         ep("y", passed=True, verified=False)]
    st = analyze_pairs(a, b, n_boot=100)[0]["metrics"]["verification_share"]
    assert st["tasks"] == 2
    assert st["delta"] == (0.5 + 0.0) / 2  # x: (1 + 0) / 2 samples, y: 0


def test_undefined_metrics_drop_the_pair_for_that_metric_only():
    read_only = traj([("", [VERIFY]), ("Done.", [])], task="t1").to_dict()  # wrote nothing: verification undefined
    a = [read_only, ep("t2", passed=False, verified=False)]
    b = [ep("t1", passed=True, verified=True), ep("t2", passed=True, verified=True)]
    m = analyze_pairs(a, b, n_boot=100)[0]["metrics"]
    assert m["verification_share"]["tasks"] == 1
    assert m["tool_calls"]["tasks"] == 2


def test_pairs_by_category_and_unpaired_counts():
    a = [ep("t1", passed=False, verified=False, category="mail"), ep("t2", passed=True, verified=True, category="docs"),
         ep("only-a", passed=True, verified=True)]
    b = [ep("t1", passed=True, verified=True, category="mail"), ep("t2", passed=True, verified=True, category="docs")]
    result, _ = analyze_pairs(a, b, n_boot=100)
    assert (result["only_a"], result["only_b"]) == (1, 0)
    assert result["categories"]["mail"]["outcomes"]["fail→pass"] == 1
    assert result["categories"]["docs"]["outcomes"]["both-pass"] == 1


def test_a_duplicated_episode_counts_once_first_line_kept():
    first = ep("t1", passed=False, verified=False)
    later = ep("t1", passed=True, verified=True)
    pairs, _ = make_pairs([first, later], [ep("t1", passed=True, verified=True)])
    assert len(pairs) == 1 and pairs[0].outcome == "fail→pass"


def test_first_divergence_is_the_first_differing_call():
    a = traj([("", [WRITE]), ("", [VERIFY]), ("Done.", [])])
    b = traj([("", [WRITE]), ("", [call("files__read_file", {"path": "other.txt"})]), ("Done.", [])])
    assert first_divergence(a, b) == 1
    assert first_divergence(a, traj([("", [WRITE]), ("Done.", [])])) == 1  # a prefix: where the shorter ends
    assert first_divergence(a, a) is None
