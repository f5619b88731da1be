"""The served sampler's weight folders: a run killed outright leaves its folder behind (in
/dev/shm, that is memory); the next run removes it, and never a live run's."""

import os
import subprocess
import sys

from longhorizon.train.served_sampler import OWNER_FILE, SCRATCH_PREFIX, _started, scratch_dir, sweep_stale_scratch


def folder(parent, name, owner=None):
    d = parent / (SCRATCH_PREFIX + name)
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"\0" * 1024)
    if owner is not None:
        (d / OWNER_FILE).write_text(owner)
    return d


def test_the_folders_of_dead_runs_are_swept_and_live_or_unmarked_ones_kept(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    me = os.getpid()
    dead = folder(tmp_path, "dead", f"{dead_pid} 12345\n")
    reused = folder(tmp_path, "reused", f"{me} {int(_started(me)) + 1}\n")  # our pid, another process's start
    live = folder(tmp_path, "live", f"{me} {_started(me)}\n")
    unmarked = folder(tmp_path, "old-version")
    other = tmp_path / "someone-else"
    other.mkdir()
    removed = sweep_stale_scratch(tmp_path)
    assert sorted(removed) == sorted([dead, reused])
    assert not dead.exists() and not reused.exists()
    assert live.exists() and unmarked.exists() and other.exists()


def test_a_new_scratch_folder_names_its_owner():
    work = scratch_dir()
    try:
        pid, started = (work / OWNER_FILE).read_text().split()
        assert int(pid) == os.getpid() and started == _started(os.getpid())
        assert work not in sweep_stale_scratch(work.parent) and work.exists()  # its run is alive: kept
    finally:
        import shutil

        shutil.rmtree(work)
