"""What hostile data costs a tool call or a grader: peak extra memory and wall time.

Each case runs in a child process of its own; its peak RSS is compared with a baseline child
that imports the same modules and sets up the same Worlds, then makes benign calls. Cases:
SQL that allocates in one VM step or never ends, sparse files (250 MB of apparent size, ~no
disk) read and searched by the files app and read by a grader (`grade --world`), and mail
attachments piling up in the World's state. Target: <= 256 MiB extra and a few seconds.

Run: `.venv/bin/python benchmarks/hostile_data.py` (add `--before /path/to/other/src` to run
the same cases on another checkout, e.g. main, each child capped at 4 GiB of address space
and 180 s). Times are noisy on shared cores: say what else was running.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MiB = 2**20
CASES = {
    "sql zeroblob": "SELECT hex(zeroblob(450000000))",
    "sql printf": "SELECT printf('%.*c', 900000000, 'x')",
    "sql length(printf)": "SELECT length(printf('%.*c', 900000000, 'x'))",
    "sql endless CTE": "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n",
    "read_file 10 chars of 250 MB sparse": None,
    "search 40 x 250 MB sparse": None,
    "grade: 2 x 250 MB sparse outputs": 250 * MiB,
    "grade --world: 2 x 1 GiB sparse outputs": 1024 * MiB,
    "mail: 20 sends x 9.5 MiB, 5 forwards": None,
}
BASELINE = "baseline (benign calls)"


def sparse(path: Path, size: int, head: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def short(text: str, n: int = 48) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


async def child(case: str, tmp: Path) -> dict:
    """Set up every World (as the baseline does), then run ``case``; returns what it measured."""
    from longhorizon.apps.files.server import make_app as files_app
    from longhorizon.apps.mail import state as mail_state
    from longhorizon.apps.mail.server import make_app as mail_app
    from longhorizon.apps.sql import state as sql_state
    from longhorizon.apps.sql.server import make_app as sql_app
    from longhorizon.core.world import World
    from longhorizon.env.handoff import grade_world
    from longhorizon.tasks.registry import get_family

    sql = World.build(tmp / "sql", lambda r: sql_state.create_analytics_db(r / "state" / "sql.sqlite", {}))
    files = World.build(tmp / "files", lambda r: (r / "workspace" / "notes.txt").write_text("hello\n" * 100))
    mail = World.build(tmp / "mail", lambda r: mail_state.create_mailbox(
        r / "state" / "mail.sqlite", "me@x.example", "Me", messages=[]))
    task = get_family("log_error_summary").generate(0)
    graded = World.build(tmp / "graded", task.build)
    sql_s, files_s, mail_s = sql_app(sql).session(), files_app(files).session(), mail_app(mail).session()
    out: dict = {}

    async def call(session, tool, args):
        t = time.perf_counter()
        r = await session.call_tool(tool, args)
        out["seconds"] = max(out.get("seconds", 0.0), time.perf_counter() - t)
        return ("error: " if r.is_error else "") + r.content[0].text.removeprefix(f"Error executing tool {tool}: ")

    if case == BASELINE:
        await call(sql_s, "query", {"sql": "SELECT 1"})
        await call(files_s, "read_file", {"path": "notes.txt", "limit": 10})
        await call(files_s, "search", {"query": "hello"})
        (mail.workspace / "a.txt").write_text("a")
        await call(mail_s, "send_message", {"to": ["a@b.example"], "subject": "s", "body": "b", "attachments": ["a.txt"]})
        t = time.perf_counter()
        grade_world(task, graded.root)
        out["seconds"] = max(out["seconds"], time.perf_counter() - t)
        out["result"] = "ok"
    elif case.startswith("sql"):
        out["result"] = await call(sql_s, "query", {"sql": CASES[case]})
    elif case.startswith("read_file"):
        sparse(files.workspace / "big.log", 250 * MiB, head=b"first line\n")
        out["result"] = await call(files_s, "read_file", {"path": "big.log", "limit": 10})
    elif case.startswith("search"):
        for i in range(40):
            sparse(files.workspace / "logs" / f"{i:02d}.log", 250 * MiB, head=b"needle\n")
        out["result"] = await call(files_s, "search", {"query": "needle", "path": "logs"})
    elif case.startswith("grade"):
        for rel in ("reports/error_summary.csv", "reports/repeat_failures.txt"):
            sparse(graded.file(rel), CASES[case], head=b"service,errors,top_error\n")
        t = time.perf_counter()
        report = grade_world(task, graded.root)
        out["seconds"] = time.perf_counter() - t
        notes = {c["id"]: c["note"] for c in report["criteria"]}
        out["result"] = f"reward {report['final_state_reward']:.2f}; summary_csv: {notes['summary_csv']}"
    elif case.startswith("mail"):
        results = []
        for i in range(20):
            sparse(mail.workspace / f"att{i:02d}.bin", int(9.5 * MiB))
            results.append(await call(mail_s, "send_message", {
                "to": ["a@b.example"], "subject": f"s{i}", "body": "b", "attachments": [f"att{i:02d}.bin"]}))
        for _ in range(5):
            results.append(await call(mail_s, "forward", {"message_id": 1, "to": ["c@d.example"]}))
        held = sum(p.stat().st_size for p in (mail.state / "mail_attachments").rglob("*") if p.is_file())
        refused = sum(r.startswith("error") for r in results)
        out["result"] = f"state holds {held / MiB:.0f} MiB; {refused}/25 calls refused"
    out["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out


def run_child(case: str, src: str, cap: bool) -> dict:
    """One case in a fresh interpreter (its own peak RSS); ``cap``: 4 GiB of address space, 180 s."""
    env = {**os.environ, "PYTHONPATH": src}
    pre = None
    if cap:
        def pre():
            resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, __file__, "--child", case], env=env, capture_output=True, text=True,
                           timeout=180, preexec_fn=pre)
    except subprocess.TimeoutExpired:
        return {"result": "killed after 180 s", "seconds": time.perf_counter() - t, "maxrss_kib": None}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        return {"result": f"crashed: {why}", "seconds": time.perf_counter() - t, "maxrss_kib": None}
    return json.loads(lines[-1])


def table(title: str, src: str, cap: bool) -> None:
    base = run_child(BASELINE, src, cap)
    print(f"\n{title}  (source: {src}; baseline child peak {base['maxrss_kib'] / 1024:.0f} MiB, "
          f"benign calls <= {base['seconds']:.2f} s)")
    print(f"{'case':<42} {'extra MiB':>9} {'seconds':>8}  result")
    for case in CASES:
        r = run_child(case, src, cap)
        extra = "-" if r["maxrss_kib"] is None else f"{round((r['maxrss_kib'] - base['maxrss_kib']) / 1024):d}"
        print(f"{case:<42} {extra:>9} {r['seconds']:>8.2f}  {short(r['result'], 90)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--before", help="another checkout's src/ to run the same cases on (capped children)")
    args = ap.parse_args()
    if args.child:
        tmp = Path(tempfile.mkdtemp(prefix="hostile-"))
        try:
            print(json.dumps(asyncio.run(child(args.child, tmp))))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    here = str(Path(__file__).resolve().parents[1] / "src")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    table("This checkout", here, cap=False)
    if args.before:
        table("Before", args.before, cap=True)


if __name__ == "__main__":
    main()
