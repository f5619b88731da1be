"""A hostile formula in one episode never freezes another episode on the same event loop.

On main before round two, ``=999999999^999999999`` held the interpreter inside one big-integer
power: every episode of the run stopped. The script below plays two episodes side by side on
one loop (one writes and reads that formula, the other lists files) in a child process, so a
regression fails the test at the hang guard instead of hanging the test run.
"""

import json
import subprocess
import sys

SCRIPT = r'''
import asyncio, json
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import ReplayPolicy
from longhorizon.tasks.registry import families

def call(name, args):
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}

fam = next(f for f in families() if "sheets" in f.apps and "files" in f.apps)
task = fam.generate(0)
hostile = ReplayPolicy(
    call("sheets__create_workbook", {"path": "bomb.xlsx"}),
    call("sheets__write_cells", {"path": "bomb.xlsx", "sheet": "Sheet1", "cells": {"A1": "=999999999^999999999"}}),
    call("sheets__read_range", {"path": "bomb.xlsx", "sheet": "Sheet1", "range": "A1"}),
    {"role": "assistant", "content": "done"})
plain = ReplayPolicy(call("files__list_dir", {}), {"role": "assistant", "content": "done"})

async def main():
    a, b = await asyncio.gather(play_task(task, hostile), play_task(task, plain))
    print(json.dumps({"a": a.status, "b": b.status, "read": a.tool_calls[-1].result,
                      "write": a.tool_calls[1].result}))

asyncio.run(main())
'''


def test_a_power_formula_in_one_episode_does_not_stop_the_other():
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:  # the hang guard, not a timing threshold
        raise AssertionError("two episodes on one loop did not finish: the formula froze the run") from None
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["a"] == "completed" and got["b"] == "completed"
    assert "#NUM!" in got["read"] or "#NUM!" in got["write"]
