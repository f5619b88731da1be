"""The acceptance runs over the WHOLE suite (every instance of every split) through the runner:
the oracle solves all of them, the null policy none, and the suite has the recipe's size,
breadth and horizon."""

import pytest

from longhorizon.cli import suite_stats
from longhorizon.core.task import SPLITS
from longhorizon.evaluate.runs import run_episodes
from longhorizon.policies.scripted import NullPolicy, OraclePolicy
from longhorizon.rollout.runner import RunSpec
from longhorizon.tasks.registry import tasks_for


@pytest.fixture(scope="module")
def suite():
    return [t for split in SPLITS for t in tasks_for(split)]


async def run(tasks, policy, out):
    spec = RunSpec(policy=policy.describe(), split="all", seeds=None)
    summary = await run_episodes(tasks, policy, spec, out, concurrency=8, progress=False)
    from longhorizon.rollout.store import read_jsonl

    return summary, read_jsonl(out / "trajectories.jsonl")


async def test_oracle_solves_every_instance_and_the_suite_is_long_horizon(suite, tmp_path):
    summary, rows = await run(suite, OraclePolicy(), tmp_path)
    failing = sorted(r["task_id"] for r in rows if not r["grade"]["passed"])
    assert summary["complete"] and summary["infra_errors"] == 0
    assert not failing and summary["overall"]["mean_reward"] == 1.0, failing[:10]
    stats = suite_stats([{"family": r["family"], "category": r["category"], "split": r["split"],
                          "oracle_tool_calls": len(r["tool_calls"])} for r in rows])
    assert stats["categories"] >= 27
    assert stats["splits"]["train"] >= 363 and stats["splits"]["holdout"] >= 40
    assert stats["instances"] >= 403
    assert stats["median_oracle_tool_calls"] >= 25 and stats["share_at_least_40_calls"] >= 0.25, stats
    holdout_fams = {r["family"]: r["category"] for r in rows if r["split"] == "holdout-family"}
    train_fams = {r["family"] for r in rows if r["split"] == "train"}
    assert len(set(holdout_fams.values())) >= 8 and not set(holdout_fams) & train_fams


async def test_null_policy_fails_every_instance(suite, tmp_path):
    summary, _ = await run(suite, NullPolicy(), tmp_path)
    assert summary["complete"] and summary["overall"]["episodes"] == len(suite)
    assert summary["overall"]["pass@1"] == 0.0 and summary["overall"]["mean_reward"] == 0.0
