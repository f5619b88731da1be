"""rl.step_judge: step-level judged credit added to the RL reward (off by default), scored by a
stand-in judge over loopback HTTP; an episode the judge cannot score is left out of the update."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from longhorizon.core.errors import UsageError
from longhorizon.core.trajectory import Trajectory
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.testing.standin_llm import StandinLLM
from longhorizon.train.config import RLConfig
from longhorizon.train.rl import INFRA_STATUS, STEP_JUDGE_KEY, EpisodeRollout, shaped_reward


@pytest.fixture(autouse=True)
def no_env_judge(monkeypatch):
    for var in ("LONGHORIZON_JUDGE_BASE_URL", "LONGHORIZON_JUDGE_MODEL", "LONGHORIZON_JUDGE_CACHE"):
        monkeypatch.delenv(var, raising=False)


def step_judge(bad=()):
    """Every shown step is sensible, except those numbered in ``bad``."""
    def brain(request):
        steps = [int(n) for n in re.findall(r"^step (\d+):", request["messages"][-1]["content"], re.M)]
        return {"role": "assistant", "content": json.dumps({"steps": [{"step": n, "ok": n not in bad} for n in steps]})}
    return brain


def test_shaped_reward_adds_the_judged_share_only_when_asked():
    t = Trajectory("e#0", "t", "f", "c", "train", 0, 0, {STEP_JUDGE_KEY: 0.5})
    assert shaped_reward(t, "dense") == 0.0  # off by default
    assert shaped_reward(t, "dense", step_judge=0.2) == pytest.approx(0.1)


def play(tasks, srv, tmp_path, samples=2):
    cfg = RLConfig(group_size=samples, micro_batch_size=samples, step_judge=0.5, judge_base_url=srv.base_url, judge_model=srv.model)
    cfg.validate()
    rollout = EpisodeRollout({t.id: t for t in tasks}, cfg, tokenizer=None, record_dir=tmp_path)
    try:
        return rollout, asyncio.run(rollout.play_batch([t.id for t in tasks for _ in range(samples)], OraclePolicy()))
    finally:
        rollout.close()


def test_each_episode_gets_its_share_of_sensible_steps_and_the_reward_counts_it(make_copy_task, tmp_path):
    tasks = [make_copy_task("ja", "1"), make_copy_task("jb", "2")]
    with StandinLLM(step_judge(bad={2})) as srv:
        rollout, trajs = play(tasks, srv, tmp_path)
        asked = len(srv.requests)
    assert [t.provenance[STEP_JUDGE_KEY] for t in trajs] == [0.5] * 4  # step 2 of 2 judged not sensible
    c = rollout.cfg
    assert [shaped_reward(t, c.reward, c.effort_floor, c.repetition_penalty, c.step_judge) for t in trajs] == [1.25] * 4
    assert asked == 2  # one per distinct episode: a group's identical oracle episodes share a cached verdict
    assert list((tmp_path / "judge_cache").rglob("*.json"))


def test_an_episode_the_judge_cannot_score_is_left_out_not_zeroed(make_copy_task, tmp_path):
    with StandinLLM(lambda request: {"role": "assistant", "content": "Looks good!"}) as srv:
        _, trajs = play([make_copy_task("jc", "3")], srv, tmp_path)
    assert [t.status for t in trajs] == [INFRA_STATUS] * 2
    assert all("the step judge failed" in t.provenance["infra_error"] for t in trajs)


def test_step_judge_without_a_judge_is_a_usage_error():
    with pytest.raises(UsageError, match="step_judge needs a judge"):
        RLConfig(step_judge=0.1).validate()
    RLConfig().validate()  # off by default: no judge needed


def test_rl_on_a_family_with_judged_criteria_needs_a_judge():
    from longhorizon.testing.judged_family import ThankYouNote
    from longhorizon.train.rl import build_trainer

    with pytest.raises(UsageError, match="has judged criteria and needs a judge"):
        build_trainer(RLConfig(group_size=2, micro_batch_size=2), tasks=[ThankYouNote().generate(1)])
