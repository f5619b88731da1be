"""World build vs fork, MCP tool-call latency, and runner throughput, measured in one process.

Run: `make bench` (or `.venv/bin/python benchmarks/world_and_tools.py`). Prints tables; the
ratios are what to compare across machines (absolute times on 2 shared cores are noisy).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from longhorizon.core.world import World, default_worlds_dir
from longhorizon.env.episode import Episode
from longhorizon.evaluate.runs import run_episodes
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.rollout.runner import RunSpec
from longhorizon.tasks.registry import families, tasks_for

REPEATS = 15


def median_ms(fn, repeats=REPEATS) -> float:
    times = []
    for i in range(repeats):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def build_vs_fork(tmp: Path) -> None:
    print(f"\nWorld build vs fork (median of {REPEATS}, ms). build = generate(seed) + write the World;")
    print("fork = write a copy from the in-memory snapshot (what each episode pays).")
    print(f"{'family':<28} {'generate':>9} {'write':>7} {'build':>7} {'fork':>6} {'build/fork':>11} {'files':>6} {'KiB':>7}")
    ratios, builds, forks = [], [], []
    for fam in families():
        gen = median_ms(lambda i: fam.generate(i))
        task = fam.generate(0)
        write = median_ms(lambda i: World.build(tmp / f"b-{fam.name}-{i}", task.build))
        image = World(tmp / f"b-{fam.name}-0").image()
        fork = median_ms(lambda i: image.materialize(tmp / f"f-{fam.name}-{i}"))
        size = sum(len(data) for _, data, _ in image.files) / 1024
        build = gen + write
        ratios.append(build / fork)
        builds.append(build)
        forks.append(fork)
        print(f"{fam.name:<28} {gen:>9.2f} {write:>7.2f} {build:>7.2f} {fork:>6.2f} {build / fork:>10.1f}x "
              f"{len(image.files):>6} {size:>7.1f}")
    print(f"{'median over families':<28} {'':>9} {'':>7} {statistics.median(builds):>7.2f} "
          f"{statistics.median(forks):>6.2f} {statistics.median(ratios):>10.1f}x")


async def tool_calls(tmp: Path) -> None:
    print("\nIn-process MCP tool call (median / p99 over 300 calls, ms)")
    probes = {
        "files": ("files__list_dir", {"path": "."}),
        "sheets": ("sheets__list_sheets", None),
        "mail": ("mail__list_folders", {}),
        "calendar": ("calendar__list_people", {}),
        "shell": ("shell__run", {"command": "true"}),
    }
    seen = set()
    for fam in families():
        task = fam.generate(0)
        world = World.build(tmp / f"tc-{fam.name}", task.build)
        async with Episode(task, world) as ep:
            for app in task.apps:
                if app in seen or app not in probes:
                    continue
                name, args = probes[app]
                if args is None:  # sheets: probe the first workbook in the workspace
                    book = next(world.workspace.rglob("*.xlsx"), None)
                    if book is None:
                        continue
                    args = {"path": book.relative_to(world.workspace).as_posix()}
                seen.add(app)
                n = 30 if app == "shell" else 300
                times = []
                for _ in range(n):
                    t = time.perf_counter()
                    text, err, _ = await ep.call(name, args)
                    times.append((time.perf_counter() - t) * 1000)
                    assert not err, text
                times.sort()
                print(f"{name:<26} {statistics.median(times):>8.3f} {times[int(len(times) * 0.99) - 1]:>8.3f}"
                      + ("   (spawns a bubblewrap sandbox per call)" if app == "shell" else ""))
        t = time.perf_counter()
        for _ in range(20):
            async with Episode(task, world):
                pass
    print(f"{'open all sessions of a task':<26} {(time.perf_counter() - t) / 20 * 1000:>8.2f}")


async def throughput(tmp: Path) -> None:
    print("\nOracle episodes through the runner (all families, 2 seeds)")
    tasks = tasks_for("train", 2)
    base = None
    for conc in (1, 8):
        policy = OraclePolicy()
        spec = RunSpec(policy=policy.describe(), split="train", seeds=2)
        t = time.perf_counter()
        s = await run_episodes(tasks, policy, spec, tmp / f"run-{conc}", concurrency=conc, progress=False)
        dt = time.perf_counter() - t
        calls = s["overall"]["mean_tool_calls"] * s["overall"]["episodes"]
        base = base or dt
        print(f"concurrency {conc:<3} {len(tasks)} episodes in {dt:6.2f} s  "
              f"{len(tasks) / dt:6.1f} ep/s  {calls / dt:7.0f} tool calls/s  speed-up {base / dt:4.2f}x")


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="lh-bench-", dir=default_worlds_dir()))
    try:
        build_vs_fork(tmp)
        asyncio.run(tool_calls(tmp))
        asyncio.run(throughput(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
