"""Suite-wide guarantees, for every registered family at every level it declares: the oracle
solves it, the null policy fails it, every criterion can fail, and generation is deterministic."""

import dataclasses

import pytest

from longhorizon.core.task import HOLDOUT_SEED_BASE
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import NullPolicy, OraclePolicy
from longhorizon.tasks.registry import families

FAMILIES = [f.name for f in families()]
SEEDS = [0, HOLDOUT_SEED_BASE]  # seeds 0-9 also run through the runner in tests/rollout/test_suite_run.py
LEVELS = [pytest.param(f.name, lv, id=f.name + ("" if lv == f.levels else f"@L{lv}"))
          for f in families() for lv in range(1, f.levels + 1)]
"""(family, level) for every level of every family; the top level is the family's default."""


def make(family: str, seed: int, level: int):
    return next(f for f in families() if f.name == family).instance(seed, level)


def test_suite_has_27_categories_each_with_several_families():
    per_category = {}
    for f in families():
        per_category.setdefault(f.category, []).append(f.name)
    assert len(per_category) >= 27, sorted(per_category)
    thin = {c: names for c, names in per_category.items() if len(names) < 2}
    assert not thin, f"categories with a single family: {thin}"


def assert_graders_sound(traj, run: str) -> None:
    """No check broke (``Grade.grader_errors``): a TypeError in a grader must fail the suite,
    not pass for an unmet criterion."""
    assert not traj.grade.grader_errors(), f"grader bugs on the {run} run: {traj.grade.grader_errors()}"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family,level", LEVELS)
async def test_oracle_solves_and_null_fails(family, level, seed):
    task = make(family, seed, level)
    traj = await play_task(task, OraclePolicy())
    failed = [r for r in traj.grade.results if not r.passed]
    assert traj.passed and traj.grade.reward == 1.0, failed
    assert not any(c.is_error for c in traj.tool_calls), [c.result for c in traj.tool_calls if c.is_error]
    assert_graders_sound(traj, "oracle")
    null = await play_task(task, NullPolicy())
    assert not null.passed and null.grade.reward == 0.0
    assert_graders_sound(null, "null")


@pytest.mark.parametrize("bug", [TypeError, KeyError, AttributeError])
async def test_a_grader_that_raises_typeerror_fails_the_suite_instead_of_scoring_zero(bug):
    """A check that raises TypeError (or any of ``GRADER_BUGS``) is still graded, as unmet, so
    production runs go on; the null run's score alone cannot tell it from an idle agent, and
    the oracle loses only that criterion. Only ``grader_error`` tells the bug apart, and the
    suite's check refuses it on both runs."""

    task = next(f for f in families() if f.name == FAMILIES[0]).generate(0)
    victim = next(c for c in task.criteria if not c.guard)

    def broken(world, traj):
        raise bug("the check's own mistake")

    task = dataclasses.replace(task, criteria=[dataclasses.replace(c, check=broken) if c is victim else c
                                               for c in task.criteria])
    null = await play_task(task, NullPolicy())
    assert null.grade.reward == 0.0
    oracle = await play_task(task, OraclePolicy())
    assert [r.id for r in oracle.grade.results if not r.passed] == [victim.id]
    for traj, run in ((null, "null"), (oracle, "oracle")):
        assert traj.grade.grader_errors()[victim.id].startswith(bug.__name__)
        with pytest.raises(AssertionError, match=victim.id):
            assert_graders_sound(traj, run)


@pytest.mark.parametrize("family,level", LEVELS)
async def test_every_criterion_fails_on_its_perturbation(family, level):
    task = make(family, 3, level)
    kinds = {c.kind for c in task.criteria}
    assert kinds == {"final_state", "process"}, "each family needs both kinds of criteria"
    assert not all(c.guard for c in task.criteria), "a task needs criteria that only real work meets"
    for crit in task.criteria:
        assert crit.id in task.perturbations, f"no perturbed solution proves {crit.id} can fail"
        # with every tool of the apps, where a level offers fewer: a check reads the World and the
        # record, whichever tool made the change (the perturbation may use one the level leaves out)
        traj = await play_task(dataclasses.replace(task, tools=None), OraclePolicy(perturb=crit.id))
        result = next(r for r in traj.grade.results if r.id == crit.id)
        assert not result.passed, f"{crit.id} passed on the solution built to break it"
        assert_graders_sound(traj, f"perturbed ({crit.id})")


@pytest.mark.parametrize("family,level", LEVELS)
def test_generation_is_deterministic(family, level, tmp_path):
    fam = next(f for f in families() if f.name == family)
    a, b = fam.instance(5, level), fam.instance(5, level)
    assert a.instruction == b.instruction
    assert [c.id for c in a.criteria] == [c.id for c in b.criteria]
    ha = World.build(tmp_path / "a", a.build).hash()
    hb = World.build(tmp_path / "b", b.build).hash()
    assert ha == hb
    other = World.build(tmp_path / "c", fam.instance(6, level).build).hash()
    assert other != ha, "different seeds should give different worlds"
