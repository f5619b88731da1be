"""Rollouts under load: N concurrent oracle episodes against a model stand-in, before and after.

    PYTHONPATH=src .venv/bin/python benchmarks/rollout_load.py            # curve 1 8 64 256 512
    PYTHONPATH=src .venv/bin/python benchmarks/rollout_load.py --curve 8,64 --tail 64

The model stand-in waits 50 ms per turn (``--tail``: the slow-tail variant, where one turn in 20
waits 1 s instead) and replays the Task's oracle, so every episode is a real one: the real runner
(``evaluate.runs.run_episodes``), real Worlds forked per episode, in-process MCP sessions, real
grading, Trajectories written to a run folder. Episodes come in GSPO groups of 8 (one task, 8
samples); tasks are spread over every family. Each (path, N) runs in a fresh process, so CPU and
memory figures are its own:

* ``before``: the path as it was: ``mcp.Client`` on each app's MCPServer (``mcp_path="sdk"``),
  every office file parsed again by each criterion (``core.parse_cache.ENABLED = False``), every
  edit loading its file again and no parse shared between episodes (``OfficeFiles.ENABLED``,
  ``core.parse_cache.SHARED`` off; the one-pass workbook save cannot be switched off);
* ``after``: the current path: the lean in-process path (``apps.common.LocalSession``), one
  parse per file per grade, the sheets app's edit cache and parses shared across episodes;
* ``--base-src DIR``: the ``after`` path of the code in DIR (another commit's ``src/``, from
  ``git worktree add``), in the same run, labelled ``--base-label``;
* ``--workers K``: ``after`` on K Ray worker processes (``rollout.ray_workers.RayEpisodes``, a
  contained local Ray) at the ``--workers-at`` N: CPU is then the driver's plus every process
  under it (workers and Ray's own daemons), memory is not measured.

    PYTHONPATH=src .venv/bin/python benchmarks/rollout_load.py --paths after \
        --base-src ../base/src --base-label 05642f0 --workers 2     # the README's table

Reported: episodes/s and tool calls/s over the run's wall; the environment's share of an
episode's wall (1 - the time the stand-in model was asked to wait / the episode's wall, averaged
over episodes: everything that is not the model: tools, sessions, the event loop's queue when it
is saturated); the process's CPU per episode (all threads: fork, sessions, tools, grading,
writing; the stand-in costs next to nothing) and the same per 30 tool calls (the shell app's
sandbox processes are counted apart: ``sandbox_cpu_ms_per_episode`` in ``--json``); memory per episode
in flight (peak RSS over the run less RSS before it, / episodes in flight); whether a GSPO
group's wall (first turn of its first episode to last turn of its last) equals its longest
episode; and that no episode was lost (every one stored, no infrastructure error, all passed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

GROUP = 8
LATENCY_S = 0.05
TAIL_P, TAIL_S = 0.05, 1.0


class StandinModel:
    """The oracle behind a model's latency: each turn waits ``LATENCY_S`` (slow tail: one turn
    in 20 waits ``TAIL_S``, drawn from a seed per episode), then replays the next oracle call."""

    name = "standin"

    def __init__(self, tail: bool, log_dir: str | None = None):
        from longhorizon.policies.scripted import OraclePolicy

        self.oracle, self.tail, self.log_dir = OraclePolicy(), tail, log_dir
        self.episodes: dict[tuple[str, int], dict] = {}
        """Per episode: first and last turn (perf_counter: the system-wide monotonic clock, so
        comparable across processes) and the time it was asked to wait. With ``log_dir`` (the
        policy plays in other processes) each finished episode's record is also appended to a
        file there, which the driver reads back (``read_logs``)."""

    def describe(self) -> dict:
        return {"policy": self.name, "model": None, "sampling": None, "tail": self.tail}

    async def act(self, messages, tools, ctx):
        rec = self.episodes.setdefault((ctx.task.id, ctx.sample), {
            "first": time.perf_counter(), "waited": 0.0,
            "rng": random.Random(f"{ctx.task.id}#{ctx.sample}")})
        wait = TAIL_S if self.tail and rec["rng"].random() < TAIL_P else LATENCY_S
        rec["waited"] += wait
        await asyncio.sleep(wait)
        msg = await self.oracle.act(messages, tools, ctx)
        rec["last"] = time.perf_counter()
        if self.log_dir and not (isinstance(msg, dict) and msg.get("tool_calls")):  # its last turn
            line = json.dumps({"task": ctx.task.id, "sample": ctx.sample, "first": rec["first"],
                               "last": rec["last"], "waited": rec["waited"]})
            with open(Path(self.log_dir) / f"{os.getpid()}.jsonl", "a") as f:
                f.write(line + "\n")
        return msg

    def read_logs(self) -> None:
        for path in Path(self.log_dir).glob("*.jsonl"):
            for line in path.read_text().splitlines():
                r = json.loads(line)
                self.episodes[(r["task"], r["sample"])] = r


def _children_cpu() -> float:
    """CPU of the child processes reaped so far (the shell app's sandboxes)."""
    t = os.times()
    return t.children_user + t.children_system


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples RSS every 10 ms on a thread (the event loop may be too busy to)."""

    def __init__(self):
        self.base = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, _rss())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _tree_cpu(root: int) -> tuple[float, float]:
    """CPU seconds of ``root``'s descendants now alive (not ``root`` itself): their own, and
    that of the children they reaped (the shell's sandboxes). Ray's daemons and its workers
    are started under the driver."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, stats = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parent[pid] = int(fields[1])
        stats[pid] = ((int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick)
    own = kids = 0.0
    for pid, (mine, reaped) in stats.items():
        p = parent.get(pid)
        while p and p != root:
            p = parent.get(p)
        if p == root:
            own, kids = own + mine, kids + reaped
    return own, kids


class _Measured:
    """An episode player that reads the CPU of the process tree just before it closes (Ray's
    workers end with it)."""

    def __init__(self, inner):
        self.inner, self.cpu_at_end = inner, (0.0, 0.0)

    async def play(self, task, sample):
        return await self.inner.play(task, sample)

    async def aclose(self):
        self.cpu_at_end = _tree_cpu(os.getpid())
        await self.inner.aclose()


def tasks_for(n: int):
    """``n // GROUP`` tasks (at least one), spread evenly over the families (sorted by name), so
    that each N sees a mix like the suite's; past one per family, the next seeds."""
    from longhorizon.tasks.registry import families

    fams = families()
    g, f = max(1, n // GROUP), len(fams)
    picks = [(i * f // g + f // (2 * g)) % f if g < f else i % f for i in range(g)]
    return [fams[k].generate(i // f) for i, k in enumerate(picks)]


def warm_up(tasks, path: str) -> None:
    """Imports, tool schemas and first-use costs, outside the measured run."""
    import docx  # noqa: F401
    import openpyxl  # noqa: F401
    import pptx  # noqa: F401

    from longhorizon.apps import build_app, build_server
    from longhorizon.core.world import World

    with tempfile.TemporaryDirectory() as tmp:
        seen = set()
        for t in tasks:
            for app in t.apps:
                if app in seen:
                    continue
                seen.add(app)
                world = World.build(Path(tmp) / f"{t.id}-{app}", t.build)
                build_app(app, world).session()
                if path == "sdk":
                    build_server(app, world)


def child(path: str, n: int, tail: bool, workers: int = 0) -> dict:
    """One measured run, in this process (``workers``: on that many Ray worker processes);
    returns its figures."""
    from longhorizon.core import parse_cache
    from longhorizon.core.trajectory import Trajectory
    from longhorizon.env import episode
    from longhorizon.env.episode import Limits
    from longhorizon.rollout.runner import RunSpec
    from longhorizon.rollout.store import RunStore

    try:
        from longhorizon.evaluate.runs import run_episodes
    except ImportError:  # --base-src of a commit before the runner/metrics split (05642f0)
        from longhorizon.rollout.runner import run_episodes

    if path == "before":
        from longhorizon.apps.common import OfficeFiles

        episode.DEFAULT_MCP_PATH, parse_cache.ENABLED, OfficeFiles.ENABLED = "sdk", False, False
        parse_cache.SHARED = False
    tasks = tasks_for(n)
    warm_up(tasks, episode.DEFAULT_MCP_PATH)
    logs = tempfile.mkdtemp(prefix="lh-standin-") if workers else None
    policy = StandinModel(tail, logs)
    spec = RunSpec(policy=policy.describe(), split="train", seeds=None, samples=GROUP, limits=Limits(max_wall_s=None))
    player = tree0 = None
    if workers:
        from longhorizon.rollout.ray_workers import RayEpisodes

        player = _Measured(RayEpisodes(policy, spec.limits, workers=workers, num_cpus=os.cpu_count()))
        asyncio.run(player.inner._started())  # the workers up (Ray, imports) before the clock starts
        tree0 = _tree_cpu(os.getpid())
    with tempfile.TemporaryDirectory() as out:
        with PeakRSS() as mem:
            c0, k0, t0 = time.process_time(), _children_cpu(), time.perf_counter()
            asyncio.run(run_episodes(tasks, policy, spec, out, concurrency=n, progress=False, episodes=player))
            wall, cpu, kids = time.perf_counter() - t0, time.process_time() - c0, _children_cpu() - k0
        if workers:  # the workers' CPU (and their sandboxes'), Ray's daemons included
            cpu += player.cpu_at_end[0] - tree0[0]
            kids += player.cpu_at_end[1] - tree0[1]
            policy.read_logs()
        store = RunStore(out)
        trajs, infra = [Trajectory.from_dict(d) for d in store.trajectories()], store.infra_errors()
    expected = len(tasks) * GROUP
    calls = sum(len(t.tool_calls) for t in trajs)
    shares = [1 - policy.episodes[(t.task_id, t.sample)]["waited"] / t.wall_s for t in trajs]
    ratios = []
    for task in tasks:
        recs = [policy.episodes[(task.id, s)] for s in range(GROUP)]
        span = max(r["last"] for r in recs) - min(r["first"] for r in recs)
        ratios.append(span / max(r["last"] - r["first"] for r in recs))
    in_flight = min(n, expected)
    return {
        "path": path if not workers else f"{path}, {workers} procs", "n": n, "tail": tail, "workers": workers, "episodes": expected, "stored": len(trajs), "infra": len(infra),
        "passed": sum(t.passed for t in trajs), "wall_s": wall, "cpu_s": cpu, "tool_calls": calls,
        "episodes_per_s": len(trajs) / wall, "calls_per_s": calls / wall,
        "env_share": statistics.mean(shares), "cpu_ms_per_episode": cpu * 1000 / expected,
        "cpu_ms_per_30_calls": cpu * 1000 / calls * 30, "sandbox_cpu_ms_per_episode": kids * 1000 / expected, "mb_per_episode": None if workers else (mem.peak - mem.base) / in_flight / 2**20,
        "group_wall_over_longest": max(ratios), "loadavg": os.getloadavg(),
    }


def fork_vs_hash(k: int = 20) -> tuple[float, float]:
    """Median fork and World-hash times (ms) over the first ``k`` families' snapshots."""
    from longhorizon.core.world import WorldCache

    cache = WorldCache()
    forks, hashes = [], []
    try:
        for task in tasks_for(k * GROUP):
            cache.snapshot(task)
            t = time.perf_counter()
            world, _ = cache.fork(task)
            forks.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            world.hash()
            hashes.append((time.perf_counter() - t) * 1000)
            cache.release(world)
    finally:
        cache.close()
    return statistics.median(forks), statistics.median(hashes)


def run_child(path: str, n: int, tail: bool, *, src: str | None = None, workers: int = 0) -> dict:
    """One row in a fresh process; ``src``: import longhorizon from that source tree instead
    (the code of another commit, e.g. a ``git worktree`` of it)."""
    cmd = [sys.executable, __file__, "--child", path, str(n)] + (["--tail-run"] if tail else [])
    cmd += ["--workers", str(workers)] if workers else []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])) if src else None
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode:
        raise SystemExit(f"{path} at {n} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(r: dict) -> str:
    lost = r["episodes"] - r["stored"] + r["infra"] + (r["stored"] - r["passed"])
    group = "n/a (one at a time)" if r["n"] < GROUP else f"{r['group_wall_over_longest']:.2f}"
    return (f"| {r['n']:>4} | {r['path']:<6} | {r['episodes_per_s']:>6.1f} | {r['calls_per_s']:>7.0f} | "
            f"{r['env_share'] * 100:>5.1f}% | {r['cpu_ms_per_episode']:>6.1f} | {r['cpu_ms_per_30_calls']:>6.1f} | "
            f"{'n/a' if r['mb_per_episode'] is None else format(r['mb_per_episode'], '5.2f'):>5} | {group:>6} | "
            f"{lost} of {r['episodes']} |")


HEADER = ("|    N | path   | ep/s   | calls/s | env share | CPU ms/ep | CPU ms/30 calls | MB/ep | "
          "group wall / longest | lost |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--curve", default="1,8,64,256,512", help="concurrent episodes to measure (default 1,8,64,256,512)")
    p.add_argument("--tail", default="64", help="the slow-tail variant at these N ('' for none; default 64)")
    p.add_argument("--json", type=Path, help="also write every run's figures to this file")
    p.add_argument("--base-src", help="also measure the 'after' path of the code in this source folder "
                   "(e.g. src/ of a `git worktree add` of an earlier commit), labelled --base-label")
    p.add_argument("--base-label", default="base", help="the label of --base-src rows (default base)")
    p.add_argument("--workers", type=int, default=0,
                   help="also play the 'after' path on this many Ray worker processes (needs the ray extra)")
    p.add_argument("--workers-at", default="512", help="the N for --workers rows (default 512)")
    p.add_argument("--paths", default="before,after", help="paths per row (default before,after)")
    p.add_argument("--child", nargs=2, metavar=("PATH", "N"), help=argparse.SUPPRESS)
    p.add_argument("--tail-run", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        path = "after" if args.child[0] == "base" else args.child[0]
        r = child(path, int(args.child[1]), args.tail_run, args.workers)
        if args.child[0] == "base":
            r["path"] = os.environ.get("LH_BENCH_LABEL", "base")
        print(json.dumps(r))
        return 0
    if args.base_src:
        os.environ["LH_BENCH_LABEL"] = args.base_label
    runs = []
    print(f"oracle episodes in groups of {GROUP}, stand-in model {LATENCY_S * 1000:.0f} ms per turn; "
          f"{os.cpu_count()} CPUs; one process per row\n")
    for label, ns, tail in (("50 ms per turn", args.curve, False),
                            (f"slow tail: 1 turn in {round(1 / TAIL_P)} waits {TAIL_S:.0f} s", args.tail, True)):
        ns = [int(x) for x in ns.split(",") if x.strip()]
        if not ns:
            continue
        print(f"{label}\n{HEADER}")
        for n in ns:
            for path in args.paths.split(","):
                if path == "after" and args.base_src:
                    r = run_child("base", n, tail, src=args.base_src)
                    runs.append(r)
                    print(row(r), flush=True)
                r = run_child(path, n, tail)
                runs.append(r)
                print(row(r), flush=True)
            if args.workers and not tail and str(n) in args.workers_at.split(","):
                r = run_child("after", n, tail, workers=args.workers)
                runs.append(r)
                print(row(r), flush=True)
        print()
    loads = [r["loadavg"][0] for r in runs if "loadavg" in r]
    if loads:
        print(f"1-minute load average at the end of each row: {min(loads):.1f} to {max(loads):.1f}")
    fork_ms, hash_ms = fork_vs_hash()
    print(f"fork a World {fork_ms:.2f} ms, hash it {hash_ms:.2f} ms (median over 20 families): "
          f"a hash costs {hash_ms / fork_ms:.1f}x the fork")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "fork_ms": fork_ms, "hash_ms": hash_ms}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
