"""Metrics against textbook values and constructed runs."""

import pytest

from longhorizon.evaluate.metrics import compare, mcnemar_exact, run_status, summarize, wilson


def row(task, passed, reward, category="c1", sample=0):
    return {"episode_id": f"{task}#{sample}", "task_id": task, "family": "f", "category": category,
            "sample": sample, "status": "completed", "tool_calls": [],
            "grade": {"passed": passed, "reward": reward}}


def test_wilson_textbook_values():
    # Wilson 95% for 0/10 is [0, 0.2775]; for 5/10, [0.2366, 0.7634] (Newcombe 1998, table I)
    lo, hi = wilson(0, 10)
    assert lo == 0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))


def test_wilson_bounds_are_exactly_0_and_1_at_the_ends():
    # the float formula leaves 3.5e-18 at 0/100 (seen in a summary.json); none or all passed is exact
    for n in (1, 7, 100, 331):
        assert wilson(0, n)[0] == 0.0 and wilson(n, n)[1] == 1.0


def test_mcnemar_exact_matches_binomial():
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    # b=1, c=9: 2 * (1 + 10) / 1024
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024)


def test_summary_overall_and_per_category():
    rows = [row("a", True, 1.0), row("b", False, 0.5), row("c", False, 0.0, "c2"), row("d", True, 1.0, "c2")]
    s = summarize(rows, [{"episode_id": "e#0"}], expected=5)
    assert s["overall"]["pass@1"] == 0.5 and s["overall"]["mean_reward"] == pytest.approx(0.625)
    lo, hi = s["overall"]["mean_reward_ci95"]
    assert 0 <= lo < 0.625 < hi <= 1
    assert s["categories"]["c1"]["mean_reward"] == 0.75 and s["categories"]["c2"]["pass@1"] == 0.5
    assert s["infra_errors"] == 1 and not s["complete"]


def test_infra_error_later_finished_is_not_counted():
    s = summarize([row("a", True, 1.0)], [{"episode_id": "a#0"}], expected=1)
    assert s["infra_errors"] == 0 and s["complete"]


def test_compare_pairs_by_task():
    a = [row(t, False, 0.2) for t in "abcdefgh"] + [row("only_a", True, 1.0)]
    b = [row(t, True, 1.0) for t in "abcdef"] + [row("g", False, 0.2), row("h", False, 0.2)]
    c = compare(a, b)
    assert c["paired_tasks"] == 8 and c["only_a"] == 1 and c["only_b"] == 0
    assert c["delta_pass@1"] == pytest.approx(6 / 8)
    lo, hi = c["delta_pass@1_ci95"]
    assert 0 < lo <= 0.75 <= hi <= 1
    assert c["mcnemar"] == {"a_only_passed": 0, "b_only_passed": 6, "p_value": pytest.approx(2 / 64)}


def test_compare_identical_runs_shows_no_difference():
    a = [row(t, t in "ab", 0.5) for t in "abcd"]
    c = compare(a, a)
    assert c["delta_pass@1"] == 0 and c["delta_pass@1_ci95"] == [0, 0] and c["mcnemar"]["p_value"] == 1.0


def test_an_episode_logged_twice_counts_once_first_line_kept():
    rows = [row("a", True, 1.0), row("b", False, 0.0), row("a", False, 0.0), row("a", False, 0.0)]
    s = summarize(rows, expected=2)
    assert s["duplicates_dropped"] == 2 and s["complete"]
    assert s["overall"]["episodes"] == 2 and s["overall"]["pass@1"] == 0.5  # a's first line: passed
    c = compare(rows, [row("a", True, 1.0), row("b", True, 1.0), row("b", True, 1.0)])
    assert c["duplicates_dropped"] == {"a": 2, "b": 1}
    assert c["pass@1_a"] == 0.5 and c["mcnemar"] == {"a_only_passed": 0, "b_only_passed": 1, "p_value": 1.0}


def test_run_status_counts_missing_and_pending_episodes():
    rows = [row("a", True, 1.0), row("a", True, 1.0), row("b", False, 0.0)]
    infra = [{"episode_id": "c#0"}, {"episode_id": "c#0"}, {"episode_id": "b#0"}]
    assert run_status(rows, infra, expected=4) == {
        "expected": 4, "finished": 2, "missing": 2, "pending_infra_errors": 1, "complete": False}
    assert run_status(rows, infra, expected=2)["complete"]
    assert not run_status(rows, infra, expected=None)["complete"]  # unknown is not complete


def test_replies_cut_at_the_token_limit_are_counted_and_shown():
    from longhorizon.evaluate.metrics import format_summary

    recovered = {**row("a", True, 1.0), "turns": [{"finish_reason": "length"}, {}]}
    ended = {**row("b", False, 0.0), "status": "max_tokens", "turns": [{"finish_reason": "length"}] * 3}
    s = summarize([recovered, ended, row("c", True, 1.0)], expected=3)
    assert s["statuses"] == {"completed": 2, "max_tokens": 1}
    assert s["cut_replies"] == {"replies": 4, "episodes": 2}
    text = format_summary(s)
    assert "max_tokens 1" in text and "replies cut at the token limit: 4 in 2 episodes" in text
    assert "cut at the token limit" not in format_summary(summarize([row("c", True, 1.0)], expected=1))
