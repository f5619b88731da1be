"""Hostile shell commands against the sandbox's per-command limits, and what the limits cost.

Run by hand: `.venv/bin/python benchmarks/hostile_shell.py` (as root where cgroups are
writable, else the rlimit fallback is what gets measured; the first lines say which). Prints:

* each hostile case (a fork bomb, a memory hog of four processes) and a benign one, each in a
  child process of its own: how the command ended, the peak processes and the peak memory of
  the command (its cgroup's own counters: every process and what it wrote to tmpfs), the host
  process's peak RSS against the benign case, the wall time to a result, and the processes
  left afterwards (there must be none);
* the cost per command: `true` run N times with the limits and N times without (no cgroup),
  interleaved, median ms and the ratio.

`--unbounded` also runs the fork bomb without a cgroup limit (only counted), for a before
figure: that starts thousands of processes for the timeout; do not run it on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from longhorizon.apps.shell import cgroups, sandbox

CASES = {
    "benign": "seq 1 1000 | sort -n | tail -n 1",
    "fork bomb": "exec -a {marker} bash -c 'f(){{ f|f& }}; f; sleep 1000'",
    "memory hog": ("for i in 1 2 3 4; do exec -a {marker} python3 -c "
                   "\"x = b'a' * (1536 << 20); import time; time.sleep(2)\" & done; wait"),
}
TIMEOUT_S = {"benign": 30, "fork bomb": 5, "memory hog": 60}
"""The hog needs time: page faults on this VM fill ~0.3-0.5 GB/s."""


def left_behind(marker: str) -> int:
    n = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            n += marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            pass
    return n


def one_case(name: str, unbounded: bool) -> dict:
    """Runs in a child process: one command, its outcome and counters."""
    if unbounded:  # count, but do not limit
        make = cgroups.create
        cgroups.create = lambda p, m: make(None, None)  # type: ignore[assignment]
    marker = f"lh-hostile-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as ws:
        t = time.perf_counter()
        try:
            r = asyncio.run(sandbox.run_sandboxed(CASES[name].format(marker=marker), ws, TIMEOUT_S[name]))
            ended = f"exit {r.exit_code}"
        except sandbox.SandboxTimeout as exc:
            r, ended = exc.partial, f"timeout {TIMEOUT_S[name]} s"
        wall = time.perf_counter() - t
    u = r.usage
    return {"case": name + (" (unbounded)" if unbounded else ""), "ended": ended,
            "limit hit": "processes" if u and u.process_limit_hits else "memory" if u and u.oom_kills else "-",
            "peak procs": u.peak_processes if u else None,
            "peak MiB": round(u.peak_memory_bytes / 2**20) if u and u.peak_memory_bytes else None,
            "host RSS MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "wall s": wall, "left": left_behind(marker)}


def _cpu_s() -> float:
    """CPU seconds of this process and its reaped children (the sandbox's processes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def per_command_cost(n: int) -> None:
    """Wall and CPU per `true`, with and without the cgroup, interleaved (CPU is the steadier
    figure on a shared machine: wall time includes waiting for the other jobs)."""
    wall: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    make = cgroups.create
    with tempfile.TemporaryDirectory() as ws:
        for i in range(2 * n):
            limited = i % 2 == 0
            cgroups.create = make if limited else (lambda p, m: None)  # type: ignore[assignment]
            t, c = time.perf_counter(), _cpu_s()
            asyncio.run(sandbox.run_sandboxed("true", ws))
            wall[limited].append((time.perf_counter() - t) * 1000)
            cpu[limited].append((_cpu_s() - c) * 1000)
    cgroups.create = make
    print(f"\nPer command (`true`, median of {n} each, interleaved), ms:")
    print(f"{'':<6} {'with limits':>12} {'without':>9} {'ratio':>7} {'extra':>7}")
    for name, d in (("wall", wall), ("CPU", cpu)):
        on, off = statistics.median(d[True]), statistics.median(d[False])
        print(f"{name:<6} {on:>12.2f} {off:>9.2f} {on / off:>7.3f} {on - off:>7.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--unbounded", action="store_true")
    ap.add_argument("--repeats", type=int, default=40)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(one_case(args.case, args.unbounded)))
        return
    print(f"uid {os.getuid()}; limits in force: {sandbox.limits_in_force()}; "
          f"PROCESS_LIMIT {sandbox.PROCESS_LIMIT}, COMMAND_MEMORY_BYTES {sandbox.COMMAND_MEMORY_BYTES >> 20} MiB, "
          f"timeouts {TIMEOUT_S}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    runs = [(c, False) for c in CASES] + ([("fork bomb", True)] if args.unbounded else [])
    rows = []
    for case, unbounded in runs:
        argv = [sys.executable, __file__, "--case", case] + (["--unbounded"] if unbounded else [])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        rows.append(json.loads(done.stdout.splitlines()[-1]))
    base = rows[0]["host RSS MiB"]
    print(f"\n{'case':<24} {'ended':<14} {'limit hit':<10} {'peak procs':>10} {'peak MiB':>9} "
          f"{'host RSS Δ MiB':>15} {'wall s':>7} {'left':>5}")
    for r in rows:
        print(f"{r['case']:<24} {r['ended']:<14} {r['limit hit']:<10} {str(r['peak procs']):>10} "
              f"{str(r['peak MiB']):>9} {r['host RSS MiB'] - base:>15.1f} {r['wall s']:>7.2f} {r['left']:>5}")
    per_command_cost(args.repeats)


if __name__ == "__main__":
    main()
