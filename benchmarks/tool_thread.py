"""What the per-call deadline costs: a tool call through the session's ToolThread (the default:
sync bodies off the event loop, each call under ``Limits.max_call_s``) against the same call run
inline on the event loop (the old lean path), in one process, alternating, on real apps.

Run: `.venv/bin/python benchmarks/tool_thread.py`. Prints median microseconds per call and the
ratio; absolute times on 2 shared cores are noisy, the ratio is what to compare.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from longhorizon.apps import build_app
from longhorizon.apps.common import LocalSession
from longhorizon.core.world import World
from longhorizon.tasks.registry import get_task

CALLS = 400
CASES = [  # (task whose World to use, app, tool, arguments)
    ("downloads_cleanup-000004", "files", "list_dir", {}),
    ("downloads_cleanup-000004", "files", "file_info", {"path": "."}),
]


def inline_session(app) -> LocalSession:
    """The old lean path: sync bodies run on the calling thread (for comparison only)."""
    tools = []
    for t, f in zip(app._template(), app._fns):
        if t.is_async:
            tools.append(t.model_copy(update={"fn": f}))
            continue

        async def call(_f=f, **kwargs):
            return _f(**kwargs)
        tools.append(t.model_copy(update={"fn": call, "is_async": True}))
    return LocalSession(tools)


async def per_call_us(session, tool, args) -> float:
    times = []
    for _ in range(CALLS):
        t = time.perf_counter()
        await session.call_tool(tool, args)
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


async def main() -> None:
    print(f"Tool call latency, median of {CALLS} calls (us): thread = ToolThread with a deadline, inline = on the loop")
    print(f"{'app.tool':<22} {'inline':>8} {'thread':>8} {'thread/inline':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (task_id, app_name, tool, args) in enumerate(CASES):
            task = get_task(task_id)
            world = World.build(Path(tmp) / str(i), task.build)
            app = build_app(app_name, world)
            threaded, inline = app.session(), inline_session(app)
            names = {t.name for t in (await threaded.list_tools()).tools}
            if tool not in names:
                print(f"{app_name}.{tool}: no such tool ({sorted(names)[:5]}...)")
                continue
            a, b = [], []
            for _ in range(3):  # alternate, so drift in machine load hits both
                a.append(await per_call_us(inline, tool, args))
                b.append(await per_call_us(threaded, tool, args))
            threaded.close()
            ai, bi = statistics.median(a), statistics.median(b)
            print(f"{app_name + '.' + tool:<22} {ai:>8.0f} {bi:>8.0f} {bi / ai:>14.2f}")


if __name__ == "__main__":
    asyncio.run(main())
