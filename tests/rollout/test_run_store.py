"""One run per folder at a time: a live run's lock refuses a second writer, the kernel frees it
when the holder exits or is killed, and one process may open a folder again after closing it."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

import pytest

from longhorizon.core.errors import UsageError
from longhorizon.rollout.store import LOCK, RunStore, read_jsonl
from longhorizon.tasks.registry import tasks_for
from longhorizon.testing import OracleBrain, StandinLLM

FAMILY = "downloads_cleanup"
MANIFEST = {"suite_version": "x", "policy": {"policy": "oracle"}, "split": "train", "seeds": 1,
            "families": [FAMILY], "samples": 1, "episodes": 1}
DEADLINE_S = 180  # generous: only a broken lock or a hung child would reach it


def wait_for(cond, what):
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


# -- RunStore --------------------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys
    from longhorizon.rollout.store import RunStore
    store = RunStore(sys.argv[1])
    store.open({manifest!r})
    print("holding", flush=True)
    sys.stdin.read()  # hold until the parent closes our stdin (or kills us)
""")


def hold_in_child(folder):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(manifest=MANIFEST), str(folder)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "holding\n"  # blocks until the child holds the lock (or dies)
    return proc


def test_a_folder_held_by_a_live_process_is_refused_with_its_pid(tmp_path):
    child = hold_in_child(tmp_path)
    try:
        with pytest.raises(UsageError, match=rf"{tmp_path} is in use by another run \(pid {child.pid}\)") as exc:
            RunStore(tmp_path).open(MANIFEST)
        assert "\n" not in str(exc.value)
    finally:
        child.stdin.close()
        child.wait()
    RunStore(tmp_path).open(MANIFEST)  # the holder ended: free again


def test_kill_9_frees_the_folder(tmp_path):
    child = hold_in_child(tmp_path)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert (tmp_path / LOCK).exists()  # the file stays; only the kernel's lock mattered
    store = RunStore(tmp_path)
    assert store.open(MANIFEST) == set() and store.locked


def test_one_process_may_reopen_after_close_but_not_while_open(tmp_path):
    first = RunStore(tmp_path)
    first.open(MANIFEST)
    with pytest.raises(UsageError, match=rf"in use by another run \(pid {os.getpid()}\)"):
        RunStore(tmp_path).open(MANIFEST)
    first.close()
    first.close()  # idempotent
    with RunStore(tmp_path) as again:
        again.open(MANIFEST)
        assert again.locked
    assert not again.locked
    RunStore(tmp_path).open(MANIFEST)  # that store is garbage at once, and lets go
    gc.collect()
    RunStore(tmp_path).open(MANIFEST)


def test_refused_different_run_does_not_keep_the_lock(tmp_path):
    RunStore(tmp_path).open(MANIFEST)
    gc.collect()
    store = RunStore(tmp_path)
    with pytest.raises(UsageError, match="different run"):
        store.open({**MANIFEST, "samples": 3})
    assert not store.locked
    RunStore(tmp_path).open(MANIFEST)


# -- the CLI, as real processes --------------------------------------------------------------
class GatedOracle(OracleBrain):
    """Answers with each task's oracle, but requests for tasks not in ``allowed`` (None: any
    task once the gate is open) wait until ``release`` is set. ``allow_first`` lets the first
    task it is asked about through, so exactly one episode can finish before the gate."""

    def __init__(self, tasks, allow_first=False):
        super().__init__(tasks)
        self.release = threading.Event()
        self.allow_first = allow_first
        self.allowed: set[str] = set()

    def __call__(self, request):
        instruction = next(m["content"] for m in request["messages"] if m["role"] == "user")
        if self.allow_first and not self.allowed:
            self.allowed.add(instruction)
        if instruction not in self.allowed:
            assert self.release.wait(DEADLINE_S), "the test never opened the gate"
        return super().__call__(request)


def run_cmd(srv, out, seeds):
    return [sys.executable, "-m", "longhorizon.cli", "run", "--policy", "openai", "--base-url", srv.base_url,
            "--model", srv.model, "--family", FAMILY, "--seeds", str(seeds), "--concurrency", "1",
            "--quiet", "--out", str(out)]


def ids(out):
    return Counter(r["episode_id"] for r in read_jsonl(out / "trajectories.jsonl"))


def test_two_identical_runs_at_once_one_runs_one_is_refused(tmp_path):
    seeds = 2
    brain = GatedOracle(tasks_for("train", seeds, [FAMILY]))
    out = tmp_path / "run"
    with StandinLLM(brain) as srv:
        try:
            procs = [subprocess.Popen(run_cmd(srv, out, seeds), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True) for _ in range(2)]
            # the holder is stuck at the gate, so the other one must meet its lock
            wait_for(lambda: any(p.poll() is not None for p in procs), "one run to be refused")
            refused = next(p for p in procs if p.poll() is not None)
            holder = next(p for p in procs if p is not refused)
            err = refused.stderr.read()
            assert refused.returncode == 2, err
            assert err == (f"longhorizon: error: {out} is in use by another run (pid {holder.pid}); "
                           "wait for it to end or stop it, then rerun to resume\n")
            assert holder.poll() is None
        finally:
            brain.release.set()
        _, holder_err = holder.communicate(timeout=DEADLINE_S)
        assert holder.returncode == 0, holder_err
        assert set(ids(out).values()) == {1} and len(ids(out)) == seeds
        again = subprocess.run(run_cmd(srv, out, seeds), capture_output=True, text=True)
        assert again.returncode == 0, again.stderr  # the finished run let go of the folder
    assert set(ids(out).values()) == {1} and len(ids(out)) == seeds


def test_kill_9_then_rerun_resumes_every_episode_exactly_once(tmp_path):
    seeds = 3
    brain = GatedOracle(tasks_for("train", seeds, [FAMILY]), allow_first=True)
    out = tmp_path / "run"
    path = out / "trajectories.jsonl"
    with StandinLLM(brain) as srv:
        try:
            proc = subprocess.Popen(run_cmd(srv, out, seeds), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=True)
            # one episode finishes; the next waits at the gate, so the kill lands half-way
            wait_for(lambda: proc.poll() is not None or (path.exists() and path.read_bytes().count(b"\n") >= 1),
                     "the first episode to be written")
            assert proc.poll() is None, proc.stderr.read()
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stderr.close()
            assert len(ids(out)) == 1
        finally:
            brain.release.set()
        done = subprocess.run(run_cmd(srv, out, seeds), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    counts = ids(out)
    assert len(counts) == seeds and set(counts.values()) == {1}
