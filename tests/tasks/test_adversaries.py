"""Graders cannot be gamed: doing nothing, claiming success, random tool calls and a shotgun of
plausible junk pass no task and earn a mean dense reward of at most 0.15."""

import statistics

import pytest

from longhorizon.core.registry import families
from longhorizon.core.task import HOLDOUT_SEED_BASE
from longhorizon.env.episode import Limits, play_task
from longhorizon.policies.adversaries import ClaimsDonePolicy, RandomToolPolicy, ShotgunPolicy
from longhorizon.policies.scripted import NullPolicy

ADVERSARIES = {
    "null": NullPolicy,
    "claims_done": ClaimsDonePolicy,
    "random_tools": RandomToolPolicy,
    "shotgun": ShotgunPolicy,
}
SEEDS = [1, HOLDOUT_SEED_BASE + 1]
MAX_MEAN_REWARD = 0.15


@pytest.mark.parametrize("adversary", list(ADVERSARIES))
async def test_adversary_passes_nothing_and_scores_low(adversary):
    rewards, passed = {}, []
    for fam in families():
        for seed in SEEDS:
            task = fam.generate(seed)
            traj = await play_task(task, ADVERSARIES[adversary](), limits=Limits(max_wall_s=120))
            rewards[task.id] = traj.grade.reward
            if traj.passed:
                passed.append(task.id)
    mean = statistics.mean(rewards.values())
    worst = sorted(rewards.items(), key=lambda kv: -kv[1])[:5]
    assert not passed, f"{adversary} passed {passed}"
    assert mean <= MAX_MEAN_REWARD, f"{adversary} mean reward {mean:.3f}; highest: {worst}"


async def test_shotgun_really_writes():
    """The shotgun is only a fair adversary if its writes land: it must change the World."""
    task = next(f for f in families() if f.name == "downloads_cleanup").generate(1)
    traj = await play_task(task, ShotgunPolicy())
    ok_writes = [c for c in traj.tool_calls if not c.is_error and c.tool in ("write_file", "move", "delete", "copy")]
    assert ok_writes, "shotgun made no successful write"
