"""Signal on purpose: each step samples with a new seed, flat groups are dropped and refilled
with fresh tasks, the curriculum prefers tasks the policy sometimes passes, RL's seeds are not
SFT's, and the effort floor cannot pass for a real success."""

import json
from types import SimpleNamespace

import pytest

from longhorizon.core.errors import UsageError
from longhorizon.train.config import RLConfig
from longhorizon.train.curriculum import Curriculum
from longhorizon.train.rl import EpisodeRollout, rl_curriculum, rl_tasks, rollout_seed


def _ep(tid, reward, passed=None):
    return SimpleNamespace(task_id=tid, status="completed", reward=reward,
                           passed=reward == 1.0 if passed is None else passed, tool_calls=[])


def _scripted_rollout(scores, **cfg):
    """An EpisodeRollout over task ids whose episodes score ``scores[task][sample]``, recording what it plays."""
    rollout = EpisodeRollout({t: None for t in scores}, RLConfig(group_size=2, micro_batch_size=2, **cfg),
                             tokenizer=None)
    played = []

    async def play_batch(task_ids, policy):
        played.append(task_ids)
        return [_ep(t, scores[t][k % 2]) for k, t in enumerate(task_ids)]

    rollout.play_batch = play_batch
    return rollout, played


SCORES = {"a": [0.0, 0.0], "b": [1.0, 0.5], "c": [1.0, 1.0], "d": [0.0, 0.5]}
"""a and c are flat (all fail, all pass); b and d have signal."""


def test_dynamic_sampling_drops_flat_groups_and_refills_them_with_fresh_tasks():
    rollout, played = _scripted_rollout(SCORES, tasks_per_step=2, resample_flat_groups=3)
    kept, dropped = rollout.play_step(["a", "b"], policy=None)
    assert played == [["a", "a", "b", "b"], ["c", "c"], ["d", "d"]]  # a flat: c is played, flat too: then d
    assert [t.task_id for t in kept] == ["b", "b", "d", "d"]
    assert [t.task_id for t in dropped] == ["a", "a", "c", "c"]
    assert rollout.stats | {"pass_rate_played": 0} == {
        "groups_played": 4.0, "sampling_rounds": 3.0, "flat_groups_dropped": 2.0, "signal_groups_short": 0.0,
        "pass_rate_played": 0, "reward_played": pytest.approx(4.0 / 8)}
    assert rollout.stats["pass_rate_played"] == 3 / 8  # over every episode played, the dropped ones too


def test_dynamic_sampling_stops_at_its_cap_and_reports_the_shortfall():
    rollout, played = _scripted_rollout(SCORES, tasks_per_step=2, resample_flat_groups=1)
    kept, dropped = rollout.play_step(["a", "b"], policy=None)
    assert played == [["a", "a", "b", "b"], ["c", "c"]]  # one refill round only
    assert [t.task_id for t in kept] == ["a", "a", "b", "b"]  # the first flat group makes up the number
    assert [t.task_id for t in dropped] == ["c", "c"]
    assert (rollout.stats["signal_groups_short"], rollout.stats["flat_groups_dropped"]) == (1.0, 1.0)
    off, played = _scripted_rollout(SCORES, tasks_per_step=2)
    assert [t.task_id for t in off.play_step(["a", "c"], policy=None)[0]] == ["a", "a", "c", "c"]
    assert played == [["a", "a", "c", "c"]]  # dynamic sampling off (the default): nothing refilled


def _tasks(family, n):
    return [SimpleNamespace(id=f"{family}-{k}", family=family) for k in range(n)]


def test_the_curriculum_prefers_tasks_whose_pass_rate_is_strictly_between_0_and_1():
    f = _tasks("f", 3)
    cur = Curriculum.of_tasks(f, seed=1)
    for task, passed in zip(f, ([True, False, True, False], [False] * 4, [True] * 4)):
        cur.observe(task, passed)
    weights = {tid: w for tid, (_, w) in cur.weights().items()}
    assert weights == {"f-0": 0.25, "f-1": 0.0, "f-2": 0.0}  # no fresh seed of f left
    assert all(cur.pick(1) == [f[0]] for _ in range(20))  # only the mid-pass-rate task is drawn
    assert cur.pick(1, exclude={"f-0"})[0] in f[1:]  # nothing else has weight: uniform

    g = _tasks("g", 2) + _tasks("h", 2)
    cur = Curriculum.of_tasks(g, seed=0)
    cur.observe(g[0], [False] * 8)  # g fails everywhere so far: its fresh seeds are drawn less
    weights = {tid: w for tid, (_, w) in cur.weights().items()}
    assert weights["g-0"] == 0.0 and weights["h-0"] == 0.25 and 0 < weights["g-1"] < weights["h-0"]


def test_the_curriculum_draws_fresh_train_seeds_past_the_teachers():
    cfg = RLConfig(families=["log_first_error"], seeds=1000, curriculum=True)
    cur = rl_curriculum(cfg)
    drawn = cur.pick(3)
    assert [t.seed for t in drawn] == [50_000, 50_001, 50_002]  # fresh seeds, generated as drawn
    assert {t.split for t in drawn} == {"train"}


def test_rl_seeds_are_disjoint_from_the_sft_teachers_and_stay_in_the_train_split():
    from longhorizon.tasks.registry import tasks_for

    cfg = RLConfig(families=["log_first_error"], seeds=3)
    rl = rl_tasks(cfg)
    assert [t.seed for t in rl] == [50_000, 50_001, 50_002] and {t.split for t in rl} == {"train"}
    teacher = {t.id for t in tasks_for("train", 16, ["log_first_error"])}  # the demo teacher's
    assert teacher.isdisjoint(t.id for t in rl)
    with pytest.raises(UsageError, match="leave the train split"):
        rl_tasks(RLConfig(families=["log_first_error"], seeds=3, seed_offset=99_999))


def test_each_step_samples_with_its_own_seed(small_model, make_copy_task):
    """The policy is made once and kept; the rollout gives it each step's seed, so the same task
    played at steps 0 and 1 gets different draws (and the same step again the same ones)."""
    pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(small_model)
    model = AutoModelForCausalLM.from_pretrained(small_model)
    task = make_copy_task("seeded", "1")
    cfg = RLConfig(group_size=2, micro_batch_size=2, max_turns=1, max_new_tokens=8, max_context=None, temperature=1.0)
    rollout = EpisodeRollout({task.id: task}, cfg, tok)

    def step(k):
        trainer = SimpleNamespace(model=model, accelerator=SimpleNamespace(unwrap_model=lambda m: m),
                                  state=SimpleNamespace(global_step=k))
        rollout([task.id] * 2, trainer)
        return [t.turns[0]["token_ids"] for t in rollout.last]

    try:
        ids0, ids1, again = step(0), step(1), step(0)
    finally:
        rollout.close()
    assert rollout_seed(0, 0) != rollout_seed(0, 1)
    assert ids0 != ids1 and ids0 == again
    assert rollout._policy.describe()["sampling"]["seed"] == rollout_seed(0, 0)


def test_an_all_fail_group_keeps_its_effort_floor_advantages_small():
    """Both episodes fail (dense reward 0); only the floor ranks them (all calls ok: 0.05, half: 0.025).
    TRL's group normalisation would give them ±0.71, as much as a success against a failure."""
    pytest.importorskip("torch")
    from longhorizon.train.gspo import group_advantages
    from longhorizon.train.rl import advantage_scales

    def ep(reward, errors):
        return SimpleNamespace(reward=reward, passed=reward == 1.0, status="completed",
                               tool_calls=[SimpleNamespace(is_error=e, name="x", arguments={}) for e in errors])

    cfg = RLConfig(group_size=2, micro_batch_size=2, effort_floor=0.05)
    fail = [ep(0.0, [False, False]), ep(0.0, [False, True])]
    mixed = [ep(1.0, [False]), ep(0.0, [False, True])]
    scales = advantage_scales(fail + mixed, [False] * 4, cfg)
    trl = group_advantages([0.05, 0.025, 1.0, 0.025], 2)  # what TRL hands over
    adv = [a * s for a, s in zip(trl.tolist(), scales)]
    assert adv[:2] == pytest.approx([0.0125, -0.0125], abs=1e-6)  # the centred floor rewards: at most the floor
    assert adv[2:] == pytest.approx(trl.tolist()[2:])  # a group with a success is normalised as before
    assert advantage_scales(fail, [False] * 2, RLConfig(group_size=2, micro_batch_size=2)) == [1.0, 1.0]


def test_flat_groups_played_are_kept_on_record(tmp_path):
    rollout, _ = _scripted_rollout(SCORES, tasks_per_step=1, resample_flat_groups=1)
    rollout.record_dir = tmp_path
    kept, dropped = rollout.play_step(["a"], policy=None)
    for t in kept + dropped:
        t.to_dict = lambda t=t: {"task_id": t.task_id, "turns": []}
        t.provenance, t.episode_id, t.sample = {}, t.task_id, 0
    rollout._record(kept, 0, [False] * len(kept), dropped)
    rows = [json.loads(x) for x in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["rl_dropped"], r["rl_flat"]) for r in rows] == [
        ("b", False, False), ("b", False, False), ("a", True, True), ("a", True, True)]


def test_the_permuted_reward_control_shuffles_rewards_within_each_group_only():
    import random

    from longhorizon.train.rl import permuted_within_groups

    rewards = [0.0, 0.25, 0.5, 1.0, None, 10.0, 20.0, 30.0]
    seen = set()
    for seed in range(20):
        out = permuted_within_groups(rewards, 4, random.Random(seed))
        assert sorted(out[:4]) == [0.0, 0.25, 0.5, 1.0]  # a group keeps its rewards: same mean, same std
        assert out[4] is None and sorted(out[5:]) == [10.0, 20.0, 30.0]  # left-out episode stays out
        seen.add(tuple(out[:4]))
    assert len(seen) > 5  # episodes get other episodes' rewards, differently per seed


def test_permute_rewards_changes_which_episode_gets_which_reward_in_the_update(monkeypatch):
    from longhorizon.train import rl

    monkeypatch.setattr(rl, "episode_sequence", lambda t, eos: {"prompt_ids": [1], "completion_ids": [2],
                                                                 "env_mask": [1], "logprobs": [0.0]})
    trajs = [_ep("b", r) for r in (0.0, 0.25, 0.5, 0.75, 1.0, 0.1, 0.2, 0.3)]
    for k, t in enumerate(trajs):
        t.turns, t.episode_id, t.provenance = [], f"b-{k}", {}
    tok = SimpleNamespace(eos_token_id=0)
    plain = EpisodeRollout({"b": None}, RLConfig(group_size=8, micro_batch_size=8), tokenizer=tok)
    control = EpisodeRollout({"b": None}, RLConfig(group_size=8, micro_batch_size=8, permute_rewards=True),
                             tokenizer=tok)
    truth = plain.to_trl(trajs)["episode_reward"]
    shuffled = control.to_trl(trajs)
    assert truth == [t.reward for t in trajs]
    assert sorted(shuffled["episode_reward"]) == sorted(truth) and shuffled["episode_reward"] != truth
    assert shuffled["episode_dense_reward"] == truth  # the logs keep what each episode really earned
