"""The horizon as a knob: a family's levels, the ids that name them, the splits that hold them
out, and the oracle's horizon growing from level 1 (2-8 calls) to the family's default."""

import asyncio

import pytest

from longhorizon.core.errors import UsageError
from longhorizon.core.task import HOLDOUT_SEED_BASE
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks import registry
from longhorizon.tasks.registry import families, get_family, get_task, instances, parse_task_id, tasks_for

LEVELED = [f.name for f in families() if f.levels > 1]
TRAINED = [n for n in LEVELED if n not in registry.HOLDOUT_FAMILIES]
"""Leveled families with train and holdout seeds (a holdout family has neither)."""
SEEDS = [0, HOLDOUT_SEED_BASE]


def oracle_calls(task) -> int:
    traj = asyncio.run(play_task(task, OraclePolicy()))
    assert traj.passed, task.id
    return len(traj.tool_calls)


def test_every_family_declares_its_levels_and_some_have_several():
    assert all(isinstance(f.levels, int) and f.levels >= 1 for f in families())
    assert LEVELED, "no family has levels yet"


def test_the_default_level_is_the_top_one_with_todays_id():
    fam = get_family(LEVELED[0])
    assert fam.task_id(7) == fam.task_id(7, fam.levels) == f"{fam.name}-000007"
    assert fam.task_id(7, 1) == f"{fam.name}-000007@L1"
    assert fam.instance(7).id == fam.generate(7).id == f"{fam.name}-000007"
    assert fam.instance(7).level == fam.levels


def test_a_level_id_names_that_level_and_round_trips():
    fam = get_family(LEVELED[0])
    task = get_task(f"{fam.name}-000003@L1")
    assert (task.id, task.level, task.seed) == (f"{fam.name}-000003@L1", 1, 3)
    assert parse_task_id(task.id) == (fam.name, 3, 1)
    assert parse_task_id(f"{fam.name}-000003") == (fam.name, 3, None)


@pytest.mark.parametrize("bad", ["x-000001@L", "x-000001@Lz", "x-0000a1@L1", "nodash@L1"])
def test_a_malformed_level_id_is_a_usage_error(bad):
    with pytest.raises(UsageError, match="bad task id"):
        parse_task_id(bad)


@pytest.mark.parametrize("level", [0, -1, 99, True, "1"])
def test_a_level_the_family_lacks_is_refused(level):
    fam = get_family(LEVELED[0])
    with pytest.raises(UsageError, match="has levels"):
        fam.instance(1, level)


def test_a_family_without_levels_has_only_its_default():
    fam = next(f for f in families() if f.levels == 1)
    assert fam.instance(2, 1).id == fam.generate(2).id
    with pytest.raises(UsageError, match="has levels 1-1"):
        fam.instance(2, 2)


def test_levels_are_left_out_for_families_without_them_and_refused_when_named():
    chosen = instances("train", 1, level=2)
    assert chosen and {f.name for f, _, _ in chosen} == {f.name for f in families()
                                                         if f.levels >= 2 and not f.holdout_family}
    assert {lv for _, _, lv in chosen} == {2}
    plain = next(f.name for f in families() if f.levels == 1)
    with pytest.raises(UsageError, match="has levels"):
        instances("train", 1, [plain], level=2)


@pytest.mark.parametrize("level", [1, 2])
def test_holdout_seeds_and_holdout_families_stay_held_out_at_every_level(level):
    held_families = set(registry.HOLDOUT_FAMILIES)
    train = instances("train", level=level)
    assert not {f.name for f, _, _ in train} & held_families
    assert all(s < HOLDOUT_SEED_BASE for _, s, _ in train)
    holdout = instances("holdout", level=level)
    assert holdout and all(s >= HOLDOUT_SEED_BASE and f.split_of(s) == "holdout" for f, s, _ in holdout)
    assert not {f.name for f, _, _ in holdout} & held_families
    held_out = instances("holdout-family", level=level)
    assert {f.name for f, _, _ in held_out} == {f.name for f in families() if f.holdout_family and f.levels >= level}
    assert all(f.split_of(s) == "holdout-family" for f, s, _ in held_out)
    for split in ("train", "holdout"):  # asking for more seeds does not let a holdout family in
        assert not {f.name for f, _, _ in instances(split, 3, level=level)} & held_families
    tasks = tasks_for("holdout", 1, TRAINED[:1], level=1)
    assert [(t.split, t.level) for t in tasks] == [("holdout", 1)]
    leveled_held = sorted(held_families & set(LEVELED))
    if leveled_held:  # a holdout family is held out at every level, whatever the seed
        tasks = tasks_for("holdout-family", 1, leveled_held[:1], level=1)
        assert [(t.split, t.level) for t in tasks] == [("holdout-family", 1)]


@pytest.mark.parametrize("family", LEVELED)
def test_the_oracles_horizon_grows_with_the_level(family):
    fam = get_family(family)
    for seed in SEEDS:
        calls = [oracle_calls(fam.instance(seed, lv)) for lv in range(1, fam.levels + 1)]
        assert calls == sorted(set(calls)), f"{family} seed {seed}: oracle calls per level {calls}"


@pytest.mark.parametrize("family", LEVELED)
def test_level_one_takes_two_to_eight_oracle_calls(family):
    fam = get_family(family)
    for seed in [*SEEDS, 1, 2, 3]:
        n = oracle_calls(fam.instance(seed, 1))
        assert 2 <= n <= 8, f"{family} seed {seed}: level 1 takes {n} oracle calls"


def test_instance_refuses_a_generate_that_ignores_the_level():
    """A family that declares levels but names every level's task alike would make ids collide."""
    fam = get_family(LEVELED[0])

    class Careless(type(fam)):
        def generate(self, seed, level=None):
            return super().generate(seed)

    with pytest.raises(ValueError, match="expected"):
        Careless().instance(1, 1)


@pytest.mark.parametrize("family, level, seed", [("sales_commission_calc", 1, 35),
                                                 ("shared_drive_retention", 1, HOLDOUT_SEED_BASE + 2),
                                                 ("shared_drive_retention", 2, HOLDOUT_SEED_BASE + 2)])
def test_a_lower_level_exists_where_the_default_draw_cannot_be_cut_down_as_planned(family, level, seed):
    """Seeds whose default World lacks what the lower level keeps (no one rep who shows every
    mistake; every expired draft on hold) once raised instead of generating; they generate now, and
    their oracle still earns 1.0."""
    task = get_family(family).instance(seed, level)
    assert asyncio.run(play_task(task, OraclePolicy())).grade.reward == 1.0
