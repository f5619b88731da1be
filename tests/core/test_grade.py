"""Grades: weighted dense reward, all-or-nothing pass, guards that inaction cannot earn."""

from longhorizon.core.task import CriterionResult, Grade


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
