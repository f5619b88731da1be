"""pass@k, pass^k and task-clustered intervals against values worked out by hand."""

import itertools

import pytest

from longhorizon.evaluate.metrics import format_summary, pass_at_k, pass_hat_k, summarize, wilson


def row(task, passed, sample, reward=None):
    return {"episode_id": f"{task}#{sample}", "task_id": task, "family": "f", "category": "c", "sample": sample,
            "status": "completed", "tool_calls": [],
            "grade": {"passed": passed, "reward": float(passed) if reward is None else reward}}


def run(outcomes):
    """{task: [passed per sample]} -> trajectory rows."""
    return [row(t, p, i) for t, ps in outcomes.items() for i, p in enumerate(ps)]


def test_per_task_estimators_match_counting_every_subset():
    # the unbiased estimators equal the share of k-subsets of the n samples with any / all passing
    for n in range(1, 7):
        for c in range(n + 1):
            samples = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(samples, k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
                assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def test_run_level_pass_at_k_and_pass_hat_k_by_hand():
    # A: 2 of 4 passed, B: 4 of 4, C: 0 of 4
    # pass@2 = (1 - C(2,2)/C(4,2) + 1 + 0) / 3 = (5/6 + 1) / 3 = 11/18;  pass^2 = (1/6 + 1 + 0) / 3 = 7/18
    # pass@3 = (1 + 1 + 0) / 3;  pass^3 = (0 + 1 + 0) / 3;  pass@4 = 2/3, pass^4 = 1/3
    s = summarize(run({"A": [True, False, True, False], "B": [True] * 4, "C": [False] * 4}), expected=12)
    o = s["overall"]
    assert o["pass@1"] == pytest.approx(0.5) and o["samples_per_task"] == [4, 4]
    assert o["pass@k"] == pytest.approx({"1": 0.5, "2": 11 / 18, "3": 2 / 3, "4": 2 / 3})
    assert o["pass^k"] == pytest.approx({"1": 0.5, "2": 7 / 18, "3": 1 / 3, "4": 1 / 3})


def test_k_stops_at_the_fewest_samples_any_task_has():
    o = summarize(run({"A": [True, True, False], "B": [False, True]}))["overall"]
    assert sorted(o["pass@k"]) == ["1", "2"]
    # A: pass^2 = C(2,2)/C(3,2) = 1/3; B: 0 -> 1/6.  pass@1 = (2/3 + 1/2) / 2 (each task weighs the same)
    assert o["pass^k"]["2"] == pytest.approx(1 / 6) and o["pass@1"] == pytest.approx(7 / 12)


def test_repeated_samples_get_an_interval_clustered_by_task():
    # two tasks, ten samples each, one always passes and one never: there are really two
    # observations. Resampling tasks, a draw's mean is 0, 1/2 or 1 (chance 1/4, 1/2, 1/4), so the
    # 95% interval is [0, 1]; treating the 20 episodes as independent (Wilson 10/20) is far narrower.
    o = summarize(run({"A": [True] * 10, "B": [False] * 10}))["overall"]
    assert o["ci"] == "bootstrap over tasks"
    assert o["pass@1_ci95"] == [0.0, 1.0] and o["mean_reward_ci95"] == [0.0, 1.0]
    lo, hi = wilson(10, 20)
    assert 0.25 < lo and hi < 0.75


def test_one_sample_per_task_keeps_the_wilson_interval():
    o = summarize(run({"A": [True], "B": [False], "C": [True], "D": [True]}))["overall"]
    assert o["ci"] == "wilson over episodes" and o["pass@1_ci95"] == pytest.approx(list(wilson(3, 4)))
    assert o["pass@k"] == {"1": 0.75}


def test_pass_at_1_has_one_interval_in_every_field():
    o = summarize(run({"A": [True], "B": [False], "C": [True], "D": [True]}))["overall"]
    assert o["pass@k_ci95"]["1"] == o["pass^k_ci95"]["1"] == o["pass@1_ci95"] == pytest.approx(list(wilson(3, 4)))


def test_tasks_that_all_agree_have_a_point_interval():
    o = summarize(run({"A": [True, True], "B": [True, True], "C": [True, True]}))["overall"]
    assert o["pass@1_ci95"] == [1.0, 1.0] and o["pass^k_ci95"]["2"] == [1.0, 1.0]


def test_an_empty_run_says_n_a_and_incomplete():
    s = summarize([], expected=4)
    assert s["overall"]["pass@1"] is None and s["overall"]["mean_reward"] is None
    text = format_summary(s)
    assert text.splitlines()[0] == "INCOMPLETE: 0 of 4 episodes; rerun the run to finish it"
    assert "n/a" in text.splitlines()[2] and "0.000" not in text


def test_summary_text_shows_pass_k_and_the_clustering():
    text = format_summary(summarize(run({"A": [True, False], "B": [True, True]}), expected=4))
    assert "pass^k k=1 0.750" in text and "k=2 0.500" in text
    assert "2 samples per task: 95% intervals bootstrap over the 2 tasks" in text
    assert "INCOMPLETE" not in text


def test_run_with_samples_reports_pass_k_and_an_empty_run_says_n_a(tmp_path, capsys):
    import json

    from longhorizon.cli import main

    out = tmp_path / "oracle"
    assert main(["run", "--policy", "oracle", "--task", "downloads_cleanup-000001", "--task",
                 "downloads_cleanup-000002", "--samples", "2", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--format", "json"]) == 0
    o = json.loads(capsys.readouterr().out)["overall"]
    assert o["episodes"] == 4 and o["samples_per_task"] == [2, 2] and o["ci"] == "bootstrap over tasks"
    assert o["pass@k"] == {"1": 1.0, "2": 1.0} and o["pass^k"] == {"1": 1.0, "2": 1.0}
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "run.json").write_text(json.dumps({"episodes": 3}))
    assert main(["eval", str(empty)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("INCOMPLETE: 0 of 3 episodes") and "n/a" in text
