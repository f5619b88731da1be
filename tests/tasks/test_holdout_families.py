"""The holdout-family split measures transfer to unseen jobs: enough families, spread over
categories, none a copy of a train family, and each category it draws from still trained on
(docs/holdout.md gives each family's nearest train family and why it differs)."""

from longhorizon.core.task import TaskFamily
from longhorizon.tasks.registry import (
    HOLDOUT_FAMILIES, HOLDOUT_FAMILY_SEEDS, SUITE_HOLDOUT, SUITE_TRAIN, families, instances,
)

HELD = [f for f in families() if f.holdout_family]
TRAIN = [f for f in families() if not f.holdout_family]


def test_every_named_holdout_family_is_registered_and_flagged():
    assert {f.name for f in HELD} == set(HOLDOUT_FAMILIES)


def test_ten_to_fifteen_holdout_families_over_at_least_eight_categories():
    assert 10 <= len(HELD) <= 15
    assert len({f.category for f in HELD}) >= 8


def test_every_category_with_a_holdout_family_keeps_a_train_family():
    """So "unseen family, seen category" can be told apart from "unseen category"."""
    trained = {f.category for f in TRAIN}
    assert not {f.category for f in HELD} - trained


def test_no_holdout_family_shares_a_class_generator_or_module_with_a_train_family():
    """A subclass or a sibling on one generator (log_last_warning and log_first_error) is the same
    job with other parameters: it would measure memory of the job, not transfer."""
    for h in HELD:
        for t in TRAIN:
            hc, tc = type(h), type(t)
            assert set(hc.__mro__) & set(tc.__mro__) <= {TaskFamily, object}, (h.name, t.name)
            assert hc.generate.__code__ is not tc.generate.__code__, (h.name, t.name)
            assert hc.__module__ != tc.__module__, (h.name, t.name)


def test_the_split_sizes_keep_the_published_recipes_floor():
    count = {s: len(instances(s)) for s in ("train", "holdout", "holdout-family")}
    assert count["train"] >= SUITE_TRAIN and count["holdout"] >= SUITE_HOLDOUT
    assert count["holdout-family"] == HOLDOUT_FAMILY_SEEDS * len(HELD)
