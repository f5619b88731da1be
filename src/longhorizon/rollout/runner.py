"""Concurrent, resumable runner: plays many episodes and persists each as it ends.

Worlds are built once per Task (snapshot) and forked per episode. Episodes run as asyncio
tasks, at most ``concurrency`` at a time (``play_groups``: the batch loop, shared with RL),
played by an *episode player*: ``LocalEpisodes`` (this process: in-process MCP sessions, async
shell; the default) or ``RayEpisodes`` (rollout/ray_workers.py: Ray actors, each with its own
World cache and MCP sessions). Either way this process alone writes the run folder. A finished episode is appended to
``trajectories.jsonl`` at once; an exception from the policy or the infrastructure (building
the World, an app server failing, a grader, writing the line) is appended to
``infra_errors.jsonl`` instead and retried on the next resume; the other episodes go on. A
worker that dies while playing an episode (``WorkerLost``) is recorded the same way and the
episode is played again at once, elsewhere, up to ``LOST_WORKER_ATTEMPTS`` times.

A full disk never ends the run: a line that cannot be written whole is cut off again (so the
log stays valid JSONL), the episode counts as an infrastructure error, and a rerun after
freeing space resumes.

The runner computes no metrics: ``evaluate.runs.run_episodes`` is ``play_run`` plus the run's
summary.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from tqdm import tqdm

from longhorizon.core.errors import InfraError
from longhorizon.core.task import SUITE_VERSION, Task
from longhorizon.core.trajectory import Trajectory, json_safe
from longhorizon.core.world import WorldCache
from longhorizon.env.episode import Limits, play
from longhorizon.rollout.store import RunStore


log = logging.getLogger("longhorizon.rollout")

LOST_WORKER_ATTEMPTS = 3
"""How many times one run plays an episode whose worker keeps dying under it."""


def release_fork(cache: WorldCache, world) -> None:
    """``cache.release(world)``, never raising: what an agent leaves in its World (folders
    thousands deep defeat a recursive remove) must not stop the other episodes."""
    try:
        cache.release(world)
    except Exception as exc:
        log.warning("could not remove the World at %s: %s: %s", world.root, type(exc).__name__, exc)


class WorkerLost(InfraError):
    """The worker playing an episode died under it (killed, out of memory, its node lost):
    nothing about the episode is known, so it is played again on another worker."""


class EpisodeFailed(InfraError):
    """An episode failed where it was played (another process): carries that error's text and
    traceback, so the record reads as a local run's would."""

    def __init__(self, error: str, tb: str):
        super().__init__(error)
        self.error, self.tb = error, tb


def episode_failure(exc: BaseException) -> bool:
    """Whether ``exc`` ends one episode (an infrastructure error) rather than the run: any
    Exception, and ``SystemExit``/``GeneratorExit`` or groups of them raised inside an episode
    (an app server or a policy calling exit). Cancellation and Ctrl-C end the run."""
    if isinstance(exc, BaseExceptionGroup):
        return all(episode_failure(e) for e in exc.exceptions)
    return isinstance(exc, (Exception, SystemExit, GeneratorExit))


def describe_failure(exc: BaseException) -> str:
    """``Type: message``; a group of one (an app server's task group) is named by what it holds."""
    if isinstance(exc, EpisodeFailed):
        return exc.error
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def infra_record(task_id: str, sample: int, exc: BaseException, **extra) -> dict[str, Any]:
    """The ``infra_errors.jsonl`` line for an episode that failed with ``exc`` (record-safe:
    the message may quote what the agent sent)."""
    tb = exc.tb if isinstance(exc, EpisodeFailed) else "".join(traceback.format_exception(exc))
    return json_safe({"episode_id": f"{task_id}#{sample}", "task_id": task_id, "sample": sample,
                      "error": describe_failure(exc), "traceback": tb, "time": time.time(), **extra})


class EpisodePlayer(Protocol):
    """Where episodes are played: ``play`` returns the graded Trajectory of one (task, sample)
    or raises (an infrastructure error; ``WorkerLost`` when the worker died under it)."""

    async def play(self, task: Task, sample: int) -> Trajectory: ...

    async def aclose(self) -> None: ...


class LocalEpisodes:
    """Plays episodes in this process: one World cache (its own, or ``cache`` shared with other
    players, which then stays open), forks released as episodes end.

    ``verify_forks`` (RL's check that forks are byte-identical): "first" hashes each task's first
    fork this player makes and raises InfraError if it differs from the snapshot (recorded as
    ``fork_hash``), "every" hashes them all, "off" none."""

    def __init__(self, policy, limits: Limits, cache: WorldCache | None = None, *, verify_forks: str = "off"):
        self.policy, self.limits = policy, limits
        self._own = cache is None
        self.cache = cache or WorldCache()
        self.verify_forks = verify_forks
        self._verified: set[str] = set()

    async def play(self, task: Task, sample: int) -> Trajectory:
        world = None
        try:
            world, digest = await asyncio.to_thread(self.cache.fork, task)
            fork_hash = None
            if self.verify_forks == "every" or (self.verify_forks == "first" and task.id not in self._verified):
                self._verified.add(task.id)
                fork_hash = await asyncio.to_thread(world.hash)  # the fork's own bytes, before play
                if fork_hash != digest:
                    raise InfraError(f"a fork of {task.id} differs from its snapshot")
            traj = await play(task, self.policy, world, sample=sample, limits=self.limits, world_hash=digest)
            if fork_hash is not None:
                traj.provenance["fork_hash"] = fork_hash
            return traj
        finally:
            if world is not None:
                release_fork(self.cache, world)  # unmounts its workspace, then removes it

    async def aclose(self) -> None:
        if self._own:
            self.cache.close()


Job = tuple[Task, int]
"""One episode to play: (task, sample)."""


async def play_groups(groups: list[list[Job]], episodes: EpisodePlayer, *, slots: int, attempts: int = 1,
                      retry: Callable[[BaseException], bool] = lambda exc: True,
                      keep: Callable[[Task, int, Trajectory], Any] | None = None,
                      failed: Callable[[Task, int, BaseException, int, bool], None] | None = None,
                      ) -> list[list[Trajectory | BaseException]]:
    """Play every episode of ``groups`` on ``episodes``: the one episode-batch loop of runs
    (``run_episodes``: groups of one episode) and of RL (``train/rl.py``: a task's samples).

    At most ``slots`` groups are in flight, every episode of a group at once (so a group's wall is
    its longest episode). An episode that fails (``episode_failure``) is played again while
    ``retry(exc)`` says so, up to ``attempts`` times in all; ``failed(task, sample, exc, attempt,
    again)`` hears of each failure, and ``keep(task, sample, trajectory)`` gets each finished
    episode as it ends, awaited when it returns an awaitable (what it raises counts as the
    episode failing). Returns, group by group,
    each episode's Trajectory or the exception of its last attempt. Cancellation and Ctrl-C end
    the batch."""
    sem = asyncio.Semaphore(max(1, slots))

    async def one(task: Task, sample: int) -> Trajectory | BaseException:
        for attempt in range(1, attempts + 1):
            try:
                traj = await episodes.play(task, sample)
                if keep is not None and inspect.isawaitable(kept := keep(task, sample, traj)):
                    await kept
                return traj
            except BaseException as exc:
                if not episode_failure(exc):
                    raise
                again = attempt < attempts and retry(exc)
                if failed is not None:
                    failed(task, sample, exc, attempt, again)
                if not again:
                    return exc
        raise AssertionError("unreachable")  # pragma: no cover - attempts >= 1

    async def group(jobs: list[Job]) -> list[Trajectory | BaseException]:
        async with sem:
            return list(await asyncio.gather(*(one(t, s) for t, s in jobs)))

    return list(await asyncio.gather(*(group(g) for g in groups)))


@dataclass
class RunSpec:
    """What a run is; its identity decides whether a rerun resumes it."""

    policy: dict[str, Any]
    split: str
    seeds: int | None
    families: list[str] | None = None
    samples: int = 1
    limits: Limits = field(default_factory=Limits)
    tasks: list[str] | None = None
    """Task ids chosen one by one (``run --task``); None when the split and families decide."""
    reproducible: bool = False
    """Played for a run that repeats exactly (``run --reproducible``: one episode in flight, so no
    request's numerics depend on others batched beside it); recorded whether on or off."""

    def manifest(self, tasks: list[Task]) -> dict[str, Any]:
        return {
            "suite_version": SUITE_VERSION,
            "policy": self.policy,
            "split": self.split,
            "seeds": self.seeds,
            "families": self.families,
            "tasks": self.tasks,
            "samples": self.samples,
            "limits": self.limits.to_dict(),
            "episodes": len(tasks) * self.samples,
            "reproducible": self.reproducible,
        }


async def play_run(tasks: list[Task], policy, spec: RunSpec, out: Path | str, *,
                   concurrency: int = 8, progress: bool = True,
                   episodes: EpisodePlayer | None = None) -> RunStore:
    """Play every (task, sample) not yet in ``out``, each persisted as it ends; return the
    run's store (closed: the folder is free again). Its metrics are the caller's
    (``evaluate.runs.run_episodes`` adds them).

    ``episodes`` says where they are played (default ``LocalEpisodes(policy, spec.limits)``);
    the runner closes it when the run ends."""
    store = RunStore(out)
    done = store.open(spec.manifest(tasks))
    todo = [(t, s) for t in tasks for s in range(spec.samples) if f"{t.id}#{s}" not in done]
    episodes = episodes or LocalEpisodes(policy, spec.limits)
    bar = tqdm(total=len(tasks) * spec.samples, initial=len(done), unit="ep",
               desc=f"{spec.policy.get('policy', 'policy')} {spec.split}", disable=not progress,
               dynamic_ncols=True)
    stats = {"passed": 0, "ended": 0, "infra": 0}

    def advance() -> None:
        bar.update(1)
        rate = f"{stats['passed'] / stats['ended']:.2f}" if stats["ended"] else "n/a"  # nothing graded yet
        bar.set_postfix(pass_rate=rate, infra=stats["infra"])

    async def keep(task: Task, sample: int, traj: Trajectory) -> None:
        await asyncio.to_thread(store.add_trajectory, traj)  # the fsync off the event loop (RunStore locks)
        stats["ended"] += 1
        stats["passed"] += traj.passed
        advance()

    def failed(task: Task, sample: int, exc: BaseException, attempt: int, again: bool) -> None:
        """Infrastructure: recorded apart and retried on resume; a lost worker's episode at once."""
        stats["infra"] += 1
        extra = {"attempt": attempt, "retried": again} if isinstance(exc, WorkerLost) else {}
        try:
            store.add_infra_error(infra_record(task.id, sample, exc, **extra))
        except OSError as write_exc:  # a full disk: the episode is still missing, so a resume retries it
            log.error("could not record the infrastructure error of %s#%d (%s) either: %s",
                      task.id, sample, describe_failure(exc), write_exc)
        if not again:
            advance()

    try:
        await play_groups([[job] for job in todo], episodes, slots=concurrency, attempts=LOST_WORKER_ATTEMPTS,
                          retry=lambda exc: isinstance(exc, WorkerLost), keep=keep, failed=failed)
    finally:
        bar.close()
        try:
            await episodes.aclose()
        finally:
            if hasattr(policy, "aclose"):  # e.g. the OpenAI client's connection pool
                await policy.aclose()
    store.close()  # the folder is free for the next run (a crash frees it too)
    return store
