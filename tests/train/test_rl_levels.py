"""RL mixes levels: ``RLConfig.levels`` plays every family at each level it has, on the same
seeds (so the same splits), and the curriculum keeps one stream, and pass rate, per level."""

import pytest

from longhorizon.core.errors import UsageError
from longhorizon.tasks.registry import families
from longhorizon.train.config import RLConfig
from longhorizon.train.curriculum import Curriculum
from longhorizon.train.rl import rl_curriculum, rl_tasks

LEVELED = next(f.name for f in families() if f.levels >= 2)
PLAIN = next(f.name for f in families() if f.levels == 1 and not f.holdout_family)


def test_rl_tasks_mix_the_chosen_levels_on_the_same_train_seeds():
    tasks = rl_tasks(RLConfig(families=[LEVELED, PLAIN], seeds=2, levels=[1, 2]))
    got = sorted((t.family, t.level, t.seed) for t in tasks)
    assert got == sorted([(LEVELED, 1, 50_000), (LEVELED, 1, 50_001), (LEVELED, 2, 50_000), (LEVELED, 2, 50_001),
                          (PLAIN, 1, 50_000), (PLAIN, 1, 50_001)])  # PLAIN has level 1 only (its default)
    assert {t.split for t in tasks} == {"train"} and len({t.id for t in tasks}) == len(tasks)


def test_without_levels_rl_plays_each_familys_default():
    tasks = rl_tasks(RLConfig(families=[LEVELED], seeds=1))
    assert [t.id for t in tasks] == [f"{LEVELED}-050000"]


def test_a_named_family_with_none_of_the_levels_is_refused():
    with pytest.raises(UsageError, match="none of"):
        rl_tasks(RLConfig(families=[PLAIN], seeds=1, levels=[2]))


@pytest.mark.parametrize("bad", [[], [0], [1, 1], ["1"], 2])
def test_levels_must_be_a_list_of_distinct_positive_whole_numbers(bad):
    with pytest.raises(UsageError, match="levels must be"):
        RLConfig(levels=bad).validate()


def test_the_curriculum_keeps_a_stream_per_level():
    cur = rl_curriculum(RLConfig(families=[LEVELED], seeds=100, levels=[1, 2], curriculum=True))
    fresh = {t.id: t for t, _ in cur.weights().values()}
    assert sorted(fresh) == [f"{LEVELED}-050000@L1", f"{LEVELED}-050000@L2"]
    cur.observe(fresh[f"{LEVELED}-050000@L2"], [False] * 8)  # level 2 fails: its fresh seeds weigh less
    weights = {t.id: w for t, w in cur.weights().values()}
    assert 0 < weights[f"{LEVELED}-050001@L2"] < weights[f"{LEVELED}-050000@L1"] == 0.25


def test_of_tasks_keeps_levels_apart_too():
    tasks = rl_tasks(RLConfig(families=[LEVELED], seeds=1, levels=[1, 2]))
    assert len(Curriculum.of_tasks(tasks).recent) == 2
