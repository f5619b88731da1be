"""EpisodeRollout.play_batch: groups are admitted whole, and forks are hashed only as asked."""

from __future__ import annotations

import asyncio

from longhorizon.policies.scripted import OraclePolicy
from longhorizon.train.config import RLConfig
from longhorizon.train.rl import EpisodeRollout


class Watching(OraclePolicy):
    """The oracle, noting which tasks have an episode in flight at each turn."""

    def __init__(self):
        super().__init__()
        self.running: dict[str, int] = {}
        self.overlaps: set[tuple[str, str]] = set()

    async def act(self, messages, tools, ctx):
        tid = ctx.task.id
        if ctx.scratch.get("started") is None:
            ctx.scratch["started"] = True
            self.running[tid] = self.running.get(tid, 0) + 1
        self.overlaps |= {(tid, other) for other, n in self.running.items() if n and other != tid}
        await asyncio.sleep(0)  # let the other episodes in flight take their turns
        msg = await super().act(messages, tools, ctx)
        if not msg.get("tool_calls"):
            self.running[tid] -= 1
        return msg


def _rollout(tasks, **cfg) -> EpisodeRollout:
    return EpisodeRollout({t.id: t for t in tasks}, RLConfig(group_size=2, **cfg), tokenizer=None)


def test_a_concurrency_below_two_groups_plays_one_whole_group_at_a_time(make_copy_task):
    tasks = [make_copy_task("ga", "1"), make_copy_task("gb", "2"), make_copy_task("gc", "3")]
    rollout = _rollout(tasks, concurrency=3)  # 1.5 groups: rounded down to one whole group
    policy = Watching()
    try:
        trajs = asyncio.run(rollout.play_batch([t.id for t in tasks for _ in range(2)], policy))
    finally:
        rollout.close()
    assert [(t.task_id, t.sample) for t in trajs] == [(t.id, s) for t in tasks for s in range(2)]
    assert all(t.passed for t in trajs)
    assert policy.overlaps == set()  # never two groups at once, and a group's two episodes together


class Meeting(Watching):
    """Watching, with each episode's first turn held until an episode of every task has begun, so
    whether groups overlap does not depend on how fast each World forks. If the groups were played
    one after the other, the first would wait for the second forever: ``patience`` (a deadlock
    guard, not a timing threshold) ends the wait and the overlap is then missing."""

    def __init__(self, task_ids, patience: float = 60.0):
        super().__init__()
        self.expected, self.patience = set(task_ids), patience
        self.all_began = asyncio.Event()

    async def act(self, messages, tools, ctx):
        if ctx.scratch.get("started") is None:
            self.running.setdefault(ctx.task.id, 0)
            if self.expected <= set(self.running):
                self.all_began.set()
            try:
                await asyncio.wait_for(self.all_began.wait(), self.patience)
            except TimeoutError:
                pass
        return await super().act(messages, tools, ctx)


def test_groups_run_side_by_side_when_concurrency_allows(make_copy_task):
    tasks = [make_copy_task("gd", "1"), make_copy_task("ge", "2")]
    rollout = _rollout(tasks, concurrency=4)
    policy = Meeting([t.id for t in tasks])
    try:
        asyncio.run(rollout.play_batch([t.id for t in tasks for _ in range(2)], policy))
    finally:
        rollout.close()
    assert policy.all_began.is_set()
    assert policy.overlaps == {(tasks[0].id, tasks[1].id), (tasks[1].id, tasks[0].id)}


def test_only_the_first_fork_of_each_task_is_hashed_by_default(make_copy_task):
    tasks = [make_copy_task("gf", "1"), make_copy_task("gg", "2")]
    for mode, hashed in (("first", 1), ("every", 3), ("off", 0)):
        rollout = _rollout(tasks, concurrency=8, verify_forks=mode)
        try:
            trajs = asyncio.run(rollout.play_batch([t.id for t in tasks for _ in range(3)], OraclePolicy()))
        finally:
            rollout.close()
        for task in tasks:
            group = [t for t in trajs if t.task_id == task.id]
            forks = [t.provenance["fork_hash"] for t in group if "fork_hash" in t.provenance]
            assert len(forks) == hashed, mode
            assert set(forks) <= {group[0].provenance["world_hash"]}
