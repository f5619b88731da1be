"""Concurrent, resumable runner: plays many episodes and persists each as it ends.

Worlds are built once per Task (snapshot) and forked per episode. Episodes run as asyncio
tasks (in-process MCP sessions, async shell), at most ``concurrency`` at a time. A finished
episode is appended to ``trajectories.jsonl`` at once; an exception from the policy or the
infrastructure (building the World, a grader, writing the line) is appended to
``infra_errors.jsonl`` instead and retried on the next resume; the other episodes go on.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from longhorizon.core.task import SUITE_VERSION, Task
from longhorizon.core.trajectory import json_safe
from longhorizon.core.world import WorldCache
from longhorizon.env.episode import Limits, play
from longhorizon.rollout.store import RunStore


log = logging.getLogger("longhorizon.rollout")


def release_fork(cache: WorldCache, world) -> None:
    """``cache.release(world)``, never raising: what an agent leaves in its World (folders
    thousands deep defeat a recursive remove) must not stop the other episodes."""
    try:
        cache.release(world)
    except Exception as exc:
        log.warning("could not remove the World at %s: %s: %s", world.root, type(exc).__name__, exc)


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
        }


async def run_episodes(tasks: list[Task], policy, spec: RunSpec, out: Path | str, *,
                       concurrency: int = 8, progress: bool = True) -> dict[str, Any]:
    """Play every (task, sample) not yet in ``out``; return the run's summary."""
    from longhorizon.evaluate.metrics import summarize

    store = RunStore(out)
    done = store.open(spec.manifest(tasks))
    todo = [(t, s) for t in tasks for s in range(spec.samples) if f"{t.id}#{s}" not in done]
    cache = WorldCache()
    sem = asyncio.Semaphore(max(1, concurrency))
    bar = tqdm(total=len(tasks) * spec.samples, initial=len(done), unit="ep",
               desc=f"{spec.policy.get('policy', 'policy')} {spec.split}", disable=not progress,
               dynamic_ncols=True)
    stats = {"passed": 0, "ended": 0, "infra": 0}

    async def one(task: Task, sample: int) -> None:
        async with sem:
            world = None
            try:
                world, digest = await asyncio.to_thread(cache.fork, task)
                traj = await play(task, policy, world, sample=sample, limits=spec.limits, world_hash=digest)
                store.add_trajectory(traj)
            except Exception as exc:  # infrastructure: recorded apart, retried on resume
                stats["infra"] += 1
                store.add_infra_error(json_safe({  # the message may quote what the agent sent
                    "episode_id": f"{task.id}#{sample}", "task_id": task.id, "sample": sample,
                    "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
                    "time": time.time(),
                }))
            else:
                stats["ended"] += 1
                stats["passed"] += traj.passed
            finally:
                if world is not None:
                    release_fork(cache, world)  # unmounts its workspace, then removes it
            bar.update(1)
            bar.set_postfix(pass_rate=f"{stats['passed'] / max(1, stats['ended']):.2f}", infra=stats["infra"])

    try:
        await asyncio.gather(*(one(t, s) for t, s in todo))
    finally:
        bar.close()
        cache.close()
        if hasattr(policy, "aclose"):  # e.g. the OpenAI client's connection pool
            await policy.aclose()
    summary = summarize(store.trajectories(), store.infra_errors(), expected=len(tasks) * spec.samples)
    store.write_summary(summary)
    store.close()  # the folder is free for the next run (a crash frees it too)
    return summary
