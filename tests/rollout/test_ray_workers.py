"""Episodes on Ray workers (a contained local Ray, 2 CPUs): the same Trajectories as a local
run, each episode exactly once even when a worker is killed mid-episode, and nothing of Ray
left in the home folder."""

import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from longhorizon.cli import main
from longhorizon.core.errors import InfraError, UsageError
from longhorizon.evaluate.runs import run_episodes
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.rollout.runner import RunSpec
from longhorizon.rollout.store import read_jsonl
from longhorizon.tasks.registry import tasks_for

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'longhorizon[ray]')")

from longhorizon.rollout.ray_workers import RayEpisodes, start_ray  # noqa: E402

FAMILIES = ["downloads_cleanup", "monthly_expense_report", "pipeline_hygiene"]
"""Families whose oracle never lists file times (``ls -l`` shows when the World was forked)."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One contained Ray for the module, started with a HOME of its own (checked empty after)."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        stop = start_ray("local", num_cpus=2)
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the test policies below
        try:
            yield home
        finally:
            stop()


def spec(policy, tasks_seeds=1, samples=2):
    return RunSpec(policy=policy.describe(), split="train", seeds=tasks_seeds, families=sorted(FAMILIES),
                   samples=samples)


def by_episode(out: Path) -> dict[str, dict]:
    rows = read_jsonl(out / "trajectories.jsonl")
    counts = Counter(r["episode_id"] for r in rows)
    assert set(counts.values()) == {1}, counts
    return {r["episode_id"]: r for r in rows}


def replayable(row: dict) -> dict:
    """A Trajectory less what differs between any two runs (timings)."""
    return {"grade": row["grade"], "provenance": row["provenance"], "status": row["status"],
            "messages": row["messages"],
            "tool_calls": [(c["name"], c["arguments"], c["result"], c["is_error"]) for c in row["tool_calls"]]}


async def test_ray_run_matches_the_local_run_episode_for_episode(cluster, tmp_path):
    tasks = tasks_for("train", 1, FAMILIES)
    s = spec(OraclePolicy())
    await run_episodes(tasks, OraclePolicy(), s, tmp_path / "local", concurrency=4, progress=False)
    workers = RayEpisodes(OraclePolicy(), s.limits, workers=2)
    summary = await run_episodes(tasks, OraclePolicy(), s, tmp_path / "ray", concurrency=4, progress=False,
                                 episodes=workers)
    local, remote = by_episode(tmp_path / "local"), by_episode(tmp_path / "ray")
    assert sorted(remote) == sorted(f"{t.id}#{k}" for t in tasks for k in range(2)) == sorted(local)
    assert summary["complete"] and summary["overall"]["pass@1"] == 1.0
    for eid in local:
        assert remote[eid]["provenance"]["world_hash"]
        assert replayable(remote[eid]) == replayable(local[eid]), eid
    assert [s.played > 0 for s in workers.slots] == [True, True], "both workers played episodes"
    assert len({i["pid"] for i in workers.identities} | {os.getpid()}) == 3, "in two other processes"


class DiesOnce(OraclePolicy):
    """The oracle, except that the worker playing ``victim`` kills its own process (SIGKILL)
    after three tool calls, the first time only (a marker file remembers, across processes)."""

    def __init__(self, victim: str, marker: Path):
        super().__init__()
        self.victim, self.marker = victim, str(marker)

    async def act(self, messages, tools, ctx):
        if ctx.task.id == self.victim and ctx.sample == 0 and ctx.scratch.get("n") == 3:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                os.kill(os.getpid(), signal.SIGKILL)
        return await super().act(messages, tools, ctx)


async def test_a_worker_killed_mid_episode_still_leaves_every_episode_exactly_once(cluster, tmp_path):
    tasks = tasks_for("train", 1, FAMILIES)
    victim = tasks[1].id
    marker = tmp_path / "killed.pid"
    policy = DiesOnce(victim, marker)
    s = spec(OraclePolicy())
    workers = RayEpisodes(policy, s.limits, workers=2)
    summary = await run_episodes(tasks, policy, s, tmp_path / "run", concurrency=4, progress=False,
                                 episodes=workers)
    killed = int(marker.read_text())
    assert killed in {i["pid"] for i in workers.identities} and workers.replaced == 1
    rows = by_episode(tmp_path / "run")  # asserts each episode once
    assert sorted(rows) == sorted(f"{t.id}#{k}" for t in tasks for k in range(2))
    assert all(r["grade"]["passed"] for r in rows.values()), "the killed episode was played again, not graded"
    errors = read_jsonl(tmp_path / "run" / "infra_errors.jsonl")  # every episode in flight on the dead worker
    assert f"{victim}#0" in {e["episode_id"] for e in errors}
    assert all(e["retried"] and e["error"].startswith("WorkerLost: Ray worker worker-") for e in errors), errors
    assert summary["complete"] and summary["infra_errors"] == 0 and summary["overall"]["pass@1"] == 1.0


def test_ray_keeps_its_files_in_its_temp_folder_and_none_in_home(cluster):
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    assert session.parent.name.startswith("lh-ray-")
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    assert os.environ["RAY_AUTH_MODE"] == "disabled" and os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
    assert list(cluster.iterdir()) == [], "Ray wrote into the home folder"


def test_ray_with_an_in_process_model_is_refused(capsys):
    assert main(["run", "--policy", "local", "--ray", "--out", "/nonexistent/x"]) == 2
    assert "--ray plays against a policy served elsewhere" in capsys.readouterr().err


async def test_the_rl_rollout_plays_its_groups_on_ray_workers_as_it_would_locally(cluster):
    from longhorizon.train.config import RLConfig
    from longhorizon.train.rl import EpisodeRollout

    tasks = {t.id: t for t in tasks_for("train", 1, FAMILIES[:2])}
    ids = [tid for tid in tasks for _ in range(2)]  # two groups of two
    room = dict(group_size=2, max_turns=200, max_tool_calls=300)  # the oracle's whole solution
    local = EpisodeRollout(tasks, RLConfig(**room, verify_forks="every"), None)  # every local fork hashed
    remote = EpisodeRollout(tasks, RLConfig(**room, ray="local", ray_workers=2), None,
                            policy_factory=lambda model: OraclePolicy())
    try:
        here = await local.play_batch(ids, OraclePolicy())
        there = await remote.play_batch(ids, OraclePolicy())
        assert [t.episode_id for t in there] == [t.episode_id for t in here]
        for a, b in zip(here, there):
            assert a.provenance.pop("fork_hash") == b.provenance["world_hash"]  # only the local path re-hashes forks
            ra, rb = (replayable(json.loads(t.to_json())) for t in (a, b))
            assert ra == rb and b.passed
        assert sum(s.played for s in remote._workers.slots) == len(ids)
    finally:
        local.close()
        remote.close()
    with pytest.raises(UsageError, match="policy served outside"):
        EpisodeRollout(tasks, RLConfig(ray="local"), None)


class DownFor(OraclePolicy):
    """The oracle, with the model server "down" for the episodes of ``victims``."""

    def __init__(self, victims):
        super().__init__()
        self.victims = set(victims)

    async def act(self, messages, tools, ctx):
        if ctx.task.id in self.victims:
            raise InfraError("connection refused by model server")
        return await super().act(messages, tools, ctx)


async def test_an_error_inside_a_worker_is_recorded_as_a_local_run_records_it_and_resumes(cluster, tmp_path):
    tasks = tasks_for("train", 1, FAMILIES)
    s = spec(OraclePolicy(), samples=1)
    down = DownFor({tasks[0].id})
    summary = await run_episodes(tasks, down, s, tmp_path, progress=False,
                                 episodes=RayEpisodes(down, s.limits, workers=2))
    [err] = read_jsonl(tmp_path / "infra_errors.jsonl")
    assert err["episode_id"] == f"{tasks[0].id}#0" and "retried" not in err
    assert err["error"] == "InfraError: connection refused by model server"
    assert "in act" in err["traceback"], "the worker's own traceback"
    assert summary["infra_errors"] == 1 and summary["overall"]["episodes"] == len(tasks) - 1
    summary = await run_episodes(tasks, OraclePolicy(), s, tmp_path, progress=False,
                                 episodes=RayEpisodes(OraclePolicy(), s.limits, workers=2))
    assert summary["complete"] and summary["overall"]["pass@1"] == 1.0
    assert sorted(by_episode(tmp_path)) == sorted(f"{t.id}#0" for t in tasks)
