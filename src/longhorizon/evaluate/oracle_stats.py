"""How many tool calls each task's oracle makes, cached per suite fingerprint.

Running an oracle is the only honest way to count its calls (oracles read before they act),
so counts are computed by playing oracle episodes and cached under the user's cache folder,
keyed by a hash of the task and app sources: editing a family invalidates the cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

from tqdm import tqdm

import longhorizon
from longhorizon.core.task import Task


def suite_fingerprint() -> str:
    root = Path(longhorizon.__file__).parent
    h = hashlib.sha256()
    for sub in ("core", "apps", "tasks", "env"):
        for p in sorted((root / sub).rglob("*.py")):
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _cache_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "longhorizon" / f"oracle-calls-{suite_fingerprint()}.json"


def oracle_tool_calls(tasks: list[Task], *, progress: bool = False, concurrency: int = 8) -> dict[str, int]:
    from longhorizon.env.episode import play_task
    from longhorizon.policies.scripted import OraclePolicy

    path = _cache_path()
    cache: dict[str, int] = json.loads(path.read_text()) if path.exists() else {}
    missing = [t for t in tasks if t.id not in cache]

    async def count_all() -> None:
        sem = asyncio.Semaphore(concurrency)
        bar = tqdm(total=len(missing), desc="oracle episodes", unit="task", disable=not progress)

        async def one(task: Task) -> None:
            async with sem:
                traj = await play_task(task, OraclePolicy())
                cache[task.id] = len(traj.tool_calls)
                bar.update(1)

        await asyncio.gather(*(one(t) for t in missing))
        bar.close()

    if missing:
        asyncio.run(count_all())
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(cache, sort_keys=True))
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only home only costs recomputation
    return {t.id: cache[t.id] for t in tasks}
