"""How many tool calls each task's oracle makes, cached per suite fingerprint.

Running an oracle is the only honest way to count its calls (oracles read before they act),
so counts are computed by playing oracle episodes and cached under the user's cache folder,
keyed by a hash of the task and app sources: editing a family invalidates the cache. With the
cache present nothing is generated or played (`tasks list` answers at once); a cold cache costs
one oracle episode per task, once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from longhorizon.core.task import Task, TaskFamily
from longhorizon.tasks.listing import cache_dir, suite_fingerprint, write_cache


def cache_path() -> Path:
    return cache_dir() / f"oracle-calls-{suite_fingerprint()}.json"


def cached_counts() -> dict[str, int]:
    """Every count the cache holds for the suite as it is now (empty when cold or unreadable)."""
    try:
        return json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}


def oracle_tool_calls(tasks: list[Task], *, progress: bool = False, concurrency: int = 8) -> dict[str, int]:
    return oracle_tool_calls_of([(t.id, lambda t=t: t) for t in tasks], progress=progress, concurrency=concurrency)


def instance_calls(instances: list[tuple[TaskFamily, int, int]], *, progress: bool = False) -> dict[str, int]:
    """Counts for (family, seed, level) triples: a Task is generated only when the cache lacks it."""
    return oracle_tool_calls_of([(f.task_id(s, lv), lambda f=f, s=s, lv=lv: f.instance(s, lv))
                                 for f, s, lv in instances], progress=progress)


def oracle_tool_calls_of(items: list[tuple[str, Callable[[], Task]]], *, progress: bool = False,
                         concurrency: int = 8) -> dict[str, int]:
    """``items``: (task id, a callable making its Task). Cached ids are answered from the cache;
    the rest are made and played (with a progress bar when asked), then cached."""
    cache = cached_counts()
    missing = [(tid, make) for tid, make in items if tid not in cache]

    async def count_all() -> None:
        from longhorizon.env.episode import play_task  # the MCP SDK and the apps: only when counting
        from longhorizon.policies.scripted import OraclePolicy

        sem = asyncio.Semaphore(concurrency)
        bar = tqdm(total=len(missing), desc="oracle episodes (counted once, then cached)", unit="task",
                   disable=not progress)

        async def one(tid: str, make) -> None:
            async with sem:
                traj = await play_task(make(), OraclePolicy())
                cache[tid] = len(traj.tool_calls)
                bar.update(1)

        await asyncio.gather(*(one(tid, make) for tid, make in missing))
        bar.close()

    if missing:
        asyncio.run(count_all())
        write_cache(cache_path(), cache)
    return {tid: cache[tid] for tid, _ in items}
