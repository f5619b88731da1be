"""The acceptance runs: the oracle solves every family's first 10 train instances through the
runner (pass@1 = 1, mean reward = 1) and the null policy solves none of them."""

import pytest

from longhorizon.core.registry import tasks_for
from longhorizon.policies.scripted import NullPolicy, OraclePolicy
from longhorizon.rollout.runner import RunSpec, run_episodes

SEEDS = 10


@pytest.fixture(scope="module")
def tasks():
    return tasks_for("train", SEEDS)


async def test_oracle_run_over_every_family(tasks, tmp_path):
    policy = OraclePolicy()
    spec = RunSpec(policy=policy.describe(), split="train", seeds=SEEDS)
    summary = await run_episodes(tasks, policy, spec, tmp_path, concurrency=8, progress=False)
    failing = {k: v["pass@1"] for k, v in summary["families"].items() if v["pass@1"] < 1}
    assert summary["complete"] and summary["infra_errors"] == 0
    assert summary["overall"]["pass@1"] == 1.0 and summary["overall"]["mean_reward"] == 1.0, failing


async def test_null_run_over_every_family(tasks, tmp_path):
    policy = NullPolicy()
    spec = RunSpec(policy=policy.describe(), split="train", seeds=SEEDS)
    summary = await run_episodes(tasks, policy, spec, tmp_path, concurrency=8, progress=False)
    assert summary["complete"] and summary["overall"]["episodes"] == len(tasks)
    assert summary["overall"]["pass@1"] == 0.0 and summary["overall"]["mean_reward"] == 0.0
