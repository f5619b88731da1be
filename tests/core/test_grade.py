"""Grades: weighted dense reward, all-or-nothing pass, guards that inaction cannot earn."""

from longhorizon.core.grade import CriterionResult, Grade


def r(cid, passed, weight=1.0, guard=False):
    return CriterionResult(cid, "final_state", weight, passed, "", guard)


def test_reward_is_weighted_fraction_and_pass_needs_all():
    g = Grade((r("a", True, 2.0), r("b", False, 1.0), r("c", True, 1.0)))
    assert g.reward == 0.75 and not g.passed
    assert Grade((r("a", True), r("b", True))).passed


def test_guards_earn_nothing_until_real_work_is_credited():
    idle = Grade((r("work", False, 2.0), r("nothing_deleted", True, guard=True), r("no_spam", True, guard=True)))
    assert idle.reward == 0.0
    some = Grade((r("work", True, 2.0), r("other", False), r("nothing_deleted", True, guard=True)))
    assert some.reward == 0.75


def test_grade_round_trips_through_json_dict():
    g = Grade((r("work", True), r("nothing_deleted", False, guard=True)))
    assert Grade.from_dict(g.to_dict()) == g


def dep(cid, passed, requires, weight=1.0):
    return CriterionResult(cid, "final_state", weight, passed, "", False, tuple(requires))


def test_dependent_criteria_earn_only_with_what_they_require():
    """An empty file with the right name (layout) or "read the inputs" (process) pays nothing
    until the content they are about is right."""
    junk = Grade((r("totals_right", False, 2.0), dep("file_exists", True, ["totals_right"]),
                  dep("read_inputs", True, ["totals_right"])))
    assert junk.reward == 0.0
    real = Grade((r("totals_right", True, 2.0), dep("file_exists", True, ["totals_right"]),
                  dep("read_inputs", False, ["totals_right"])))
    assert real.reward == 0.75


def test_dependent_criteria_never_unlock_guards():
    junk = Grade((r("content", False), dep("layout", True, ["content"]), r("nothing_deleted", True, guard=True)))
    assert junk.reward == 0.0
    chained = Grade((r("content", True), dep("layout", True, ["content"]), dep("header", True, ["layout"]),
                     r("nothing_deleted", True, guard=True)))
    assert chained.reward == 1.0 and chained.passed


def test_requirement_cycles_earn_nothing():
    cyc = Grade((dep("a", True, ["b"]), dep("b", True, ["a"]), r("g", True, guard=True)))
    assert cyc.reward == 0.0


def test_dependent_grade_round_trips_through_json():
    import json
    g = Grade((r("content", True), dep("layout", True, ["content"])))
    back = Grade.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back == g and back.reward == g.reward


def test_task_refuses_requirements_on_unknown_or_guard_criteria():
    import pytest

    from longhorizon.core.grade import Criterion
    from longhorizon.core.task import Task

    def make(criteria):
        return Task("t-1", "t", "c", "train", 1, "do it", (), lambda root: None, lambda: iter(()), criteria)

    ok = Criterion("content", "d", "final_state", lambda w, t: True)
    guard = Criterion("nothing_deleted", "d", "final_state", lambda w, t: True, guard=True)
    with pytest.raises(ValueError, match="requires"):
        make([ok, Criterion("layout", "d", "final_state", lambda w, t: True, requires=("missing",))])
    with pytest.raises(ValueError, match="requires"):
        make([ok, guard, Criterion("layout", "d", "final_state", lambda w, t: True, requires=("nothing_deleted",))])


def test_a_broken_check_is_a_grader_error_and_a_broken_world_is_not(tmp_path):
    """A TypeError in a check is the grader's bug: still unmet (the run goes on), but marked; a
    missing file the agent should have written is the agent's failure, not marked."""
    from longhorizon.core.grade import Criterion
    from longhorizon.core.task import Task

    def broken(world, traj):
        return len(None) > 0  # TypeError

    def reads_output(world, traj):
        return (tmp_path / "missing.txt").read_text() == "x"  # FileNotFoundError

    def reads_key(world, traj):
        return {}["total"] == 3  # KeyError: the check should have said "no total"

    crits = [Criterion("broken", "d", "final_state", broken), Criterion("missing", "d", "final_state", reads_output),
             Criterion("key", "d", "final_state", reads_key)]
    task = Task("t-1", "f", "c", "train", 1, "do", (), lambda p: None, lambda: iter(()), crits)
    grade = task.grade(None, None)
    assert not any(r.passed for r in grade.results)
    assert set(grade.grader_errors()) == {"broken", "key"}
    assert grade.grader_errors()["broken"].startswith("TypeError: ")
    assert Grade.from_dict(grade.to_dict()) == grade
    assert "grader_error" not in grade.to_dict()["criteria"][1]  # nothing written for a check that did not break
