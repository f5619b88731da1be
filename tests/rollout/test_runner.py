"""The runner: concurrent episodes, provenance, resume without loss or duplication,
infrastructure errors kept apart from agent failures."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.task import SUITE_VERSION
from longhorizon.core.world import World
from longhorizon.evaluate.runs import run_episodes
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.rollout.runner import RunSpec
from longhorizon.rollout.store import read_jsonl
from longhorizon.tasks.registry import tasks_for

FAMILY = "downloads_cleanup"


def spec(policy, seeds=3, samples=1):
    return RunSpec(policy=policy.describe(), split="train", seeds=seeds, families=[FAMILY], samples=samples)


def lines(out):
    return read_jsonl(out / "trajectories.jsonl")


async def test_run_writes_graded_trajectories_with_provenance(tmp_path):
    tasks = tasks_for("train", 3, [FAMILY])
    policy = OraclePolicy()
    summary = await run_episodes(tasks, policy, spec(policy, samples=2), tmp_path, concurrency=4, progress=False)
    rows = lines(tmp_path)
    assert sorted(r["episode_id"] for r in rows) == sorted(f"{t.id}#{s}" for t in tasks for s in (0, 1))
    assert summary["overall"]["pass@1"] == 1.0 and summary["complete"]
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    by_task = {}
    for r in rows:
        p = r["provenance"]
        assert p["suite_version"] == SUITE_VERSION and p["policy"]["policy"] == "oracle"
        assert p["task_id"] == r["task_id"] and p["seed"] == r["seed"]
        by_task.setdefault(r["task_id"], set()).add(p["world_hash"])
    # both samples of a task start from the same snapshot, whose hash is the built World's
    for task in tasks:
        assert by_task[task.id] == {World.build(tmp_path / "w" / task.id, task.build).hash()}


async def test_rerun_resumes_without_duplicates(tmp_path):
    tasks = tasks_for("train", 4, [FAMILY])
    policy = OraclePolicy()
    await run_episodes(tasks[:2], policy, spec(policy, seeds=4), tmp_path, progress=False)
    assert len(lines(tmp_path)) == 2
    await run_episodes(tasks, policy, spec(policy, seeds=4), tmp_path, progress=False)
    await run_episodes(tasks, policy, spec(policy, seeds=4), tmp_path, progress=False)
    ids = [r["episode_id"] for r in lines(tmp_path)]
    assert sorted(ids) == sorted(f"{t.id}#0" for t in tasks)


async def test_torn_last_line_is_repaired_on_resume(tmp_path):
    tasks = tasks_for("train", 2, [FAMILY])
    policy = OraclePolicy()
    await run_episodes(tasks, policy, spec(policy, seeds=2), tmp_path, progress=False)
    path = tmp_path / "trajectories.jsonl"
    data = path.read_bytes()
    second = data.index(b"\n") + 1
    path.write_bytes(data[: second + 40])  # the kill hit while the second line was being written
    await run_episodes(tasks, policy, spec(policy, seeds=2), tmp_path, progress=False)
    assert sorted(r["episode_id"] for r in lines(tmp_path)) == sorted(f"{t.id}#0" for t in tasks)


async def test_different_run_in_same_folder_is_refused(tmp_path):
    tasks = tasks_for("train", 1, [FAMILY])
    policy = OraclePolicy()
    await run_episodes(tasks, policy, spec(policy, seeds=1), tmp_path, progress=False)
    with pytest.raises(UsageError, match="different run"):
        await run_episodes(tasks, policy, spec(policy, seeds=1, samples=3), tmp_path, progress=False)


class FlakyServer(OraclePolicy):
    """Stands in for a model server that is down for some episodes."""

    def __init__(self, down_for):
        super().__init__()
        self.down_for = down_for

    async def act(self, messages, tools, ctx):
        if ctx.task.id in self.down_for:
            raise InfraError("connection refused by model server")
        return await super().act(messages, tools, ctx)


async def test_infra_errors_are_recorded_apart_and_retried(tmp_path):
    tasks = tasks_for("train", 3, [FAMILY])
    flaky = FlakyServer({tasks[1].id})
    s = spec(OraclePolicy(), seeds=3)
    summary = await run_episodes(tasks, flaky, s, tmp_path, progress=False)
    assert summary["infra_errors"] == 1 and not summary["complete"]
    assert summary["overall"]["episodes"] == 2 and summary["overall"]["pass@1"] == 1.0
    errors = read_jsonl(tmp_path / "infra_errors.jsonl")
    assert [e["task_id"] for e in errors] == [tasks[1].id] and "connection refused" in errors[0]["error"]
    summary = await run_episodes(tasks, FlakyServer(set()), s, tmp_path, progress=False)
    assert summary["complete"] and summary["infra_errors"] == 0 and summary["overall"]["episodes"] == 3


def test_killed_run_finishes_every_episode_exactly_once(tmp_path):
    out = tmp_path / "run"
    total = 12
    cmd = [sys.executable, "-m", "longhorizon.cli", "run", "--policy", "oracle", "--family", FAMILY,
           "--seeds", str(total), "--concurrency", "1", "--quiet", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    path = out / "trajectories.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written = len(read_jsonl(path))
    assert 3 <= written < total, "the kill should land half-way through the run"
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ids = Counter(r["episode_id"] for r in read_jsonl(path))
    assert len(ids) == total and set(ids.values()) == {1}


def nested(depth):
    top = cur = {}
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return top


POISON = [  # what a broken model or client might send; each is answered, none harms the episode
    {"role": "assistant", "content": "", "tool_calls": [{"id": "p1", "type": "function", "function": {
        "name": "files__read_file", "arguments": {"path": "a\ud800", "deep": nested(3000), "n": 10 ** 5000}}}]},
    {"role": "assistant", "content": "\udfff", "tool_calls": "files__list_dir"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": None, "function": {"name": None,
                                                                                 "arguments": "[" * 5000}}]},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "p4", "function": {
        "name": "files__read_file", "arguments": '{"path": NaN, "x": ' + "9" * 5000 + "}"}}]},
]


class Poisoned(OraclePolicy):
    """Opens every episode with poisoned calls, then plays the oracle; raises inside the
    episodes of ``raise_for`` (a bug in our code, with a message that is not valid Unicode)."""

    def __init__(self, raise_for=()):
        super().__init__()
        self.raise_for = set(raise_for)

    async def act(self, messages, tools, ctx):
        k = ctx.scratch.setdefault("poison", 0)
        if k < len(POISON):
            ctx.scratch["poison"] = k + 1
            return POISON[k]
        if ctx.task.id in self.raise_for:
            raise RuntimeError("policy bug on \ud800 input")
        return await super().act(messages, tools, ctx)


async def test_a_run_survives_poisoned_calls_and_an_exception_inside_one_episode(tmp_path):
    tasks = tasks_for("train", 4, [FAMILY])
    s = spec(OraclePolicy(), seeds=4)
    summary = await run_episodes(tasks, Poisoned({tasks[2].id}), s, tmp_path, concurrency=4, progress=False)
    assert summary["infra_errors"] == 1 and not summary["complete"]
    rows = lines(tmp_path)
    assert sorted(r["episode_id"] for r in rows) == sorted(f"{t.id}#0" for i, t in enumerate(tasks) if i != 2)
    for r in rows:  # the poisoned calls were answered and the episode went on to pass
        assert [c["is_error"] for c in r["tool_calls"][:4]] == [True] * 4 and r["grade"]["passed"]
    (tmp_path / "trajectories.jsonl").read_bytes().decode("utf-8")  # strict
    errors = read_jsonl(tmp_path / "infra_errors.jsonl")
    assert [e["episode_id"] for e in errors] == [f"{tasks[2].id}#0"]
    assert "RuntimeError: policy bug on \\ud800 input" in errors[0]["error"]
    summary = await run_episodes(tasks, Poisoned(), s, tmp_path, progress=False)  # resume retries it
    assert summary["complete"] and summary["overall"]["episodes"] == 4 and summary["overall"]["pass@1"] == 1.0
    assert sorted(r["episode_id"] for r in lines(tmp_path)) == sorted(f"{t.id}#0" for t in tasks)


class Logged:
    """Answers at once (one turn per episode), logging which episode it plays; fails the first
    time it plays each episode in ``flaky``."""

    name = "logged"

    def __init__(self, flaky=()):
        self.log, self.flaky = [], set(flaky)

    def describe(self):
        return {"policy": self.name}

    async def act(self, messages, tools, ctx):
        key = f"{ctx.task.id}#{ctx.sample}"
        self.log.append(key)
        if key in self.flaky:
            self.flaky.discard(key)
            raise InfraError(f"{key} failed once")
        return {"role": "assistant", "content": "done"}


async def test_play_groups_admits_groups_whole_and_retries_as_told():
    from longhorizon.env.episode import Limits
    from longhorizon.rollout.runner import LocalEpisodes, play_groups

    a, b = tasks_for("train", 2, [FAMILY])
    policy = Logged(flaky={f"{b.id}#1"})
    episodes = LocalEpisodes(policy, Limits())
    failures = []
    try:
        played = await play_groups([[(a, 0), (a, 1)], [(b, 0), (b, 1)]], episodes, slots=1, attempts=2,
                                   failed=lambda t, s, exc, attempt, again: failures.append((s, attempt, again)))
        assert sorted(policy.log[:2]) == [f"{a.id}#0", f"{a.id}#1"], "one slot: the second group waits for the first"
        assert [[t.episode_id for t in g] for g in played] == [[f"{a.id}#0", f"{a.id}#1"], [f"{b.id}#0", f"{b.id}#1"]]
        assert failures == [(1, 1, True)] and policy.log.count(f"{b.id}#1") == 2
        policy.flaky = {f"{a.id}#0"}
        [[out]] = await play_groups([[(a, 0)]], episodes, slots=1, retry=lambda exc: False, attempts=3)
        assert isinstance(out, InfraError), "not retried: the last attempt's exception comes back"
    finally:
        await episodes.aclose()
