"""Worlds: built once, forked per episode; forks are isolated from each other and the snapshot."""

import os
import sqlite3
import subprocess
import sys

import pytest

from longhorizon.core import world as world_mod
from longhorizon.core.world import World, WorldCache


def build(root):
    (root / "workspace" / "docs").mkdir()
    (root / "workspace" / "docs" / "a.txt").write_text("hello")
    script = root / "workspace" / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    conn = sqlite3.connect(root / "state" / "mail.sqlite")
    conn.execute("create table m (id integer primary key, subject text)")
    conn.execute("insert into m (subject) values ('hi')")
    conn.commit()
    conn.close()


class FakeTask:
    id = "fake-000001"
    build = staticmethod(build)


def test_forks_are_identical_and_isolated(tmp_path):
    cache = WorldCache(tmp_path / "cache")
    a, ha = cache.fork(FakeTask)
    b, hb = cache.fork(FakeTask)
    assert ha == hb == a.hash() == b.hash() == World.build(tmp_path / "ref", build).hash()
    (a.workspace / "docs" / "a.txt").write_text("changed")
    with sqlite3.connect(a.db_path("mail")) as conn:
        conn.execute("delete from m")
    assert a.hash() != ha
    assert b.hash() == ha and (b.workspace / "docs" / "a.txt").read_text() == "hello"
    c, hc = cache.fork(FakeTask)
    assert hc == ha and c.hash() == ha, "the snapshot must not see an episode's writes"
    assert (c.workspace / "run.sh").stat().st_mode & 0o777 == 0o755


def test_snapshot_is_built_once(tmp_path):
    calls = []

    class Counting(FakeTask):
        @staticmethod
        def build(root):
            calls.append(root)
            build(root)

    cache = WorldCache(tmp_path / "cache")
    for _ in range(3):
        cache.fork(Counting)
    assert len(calls) == 1


def test_hash_sees_names_and_bytes(tmp_path):
    w = World.build(tmp_path / "w", build)
    h = w.hash()
    (w.workspace / "docs" / "a.txt").rename(w.workspace / "docs" / "b.txt")
    assert w.hash() != h


def test_symlinks_are_refused_in_snapshots(tmp_path):
    w = World.build(tmp_path / "w", build)
    (w.workspace / "link").symlink_to("/etc/passwd")
    with pytest.raises(ValueError, match="only folders and regular files"):
        w.image()


def test_graders_get_a_read_only_database(tmp_path):
    w = World.build(tmp_path / "w", build)
    conn = w.db("mail")
    assert conn.execute("select subject from m").fetchone()["subject"] == "hi"
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("delete from m")


def mounted_at(path) -> bool:
    return any(line.split(" - ")[0].split()[4] == str(path)
               for line in open("/proc/self/mountinfo").read().splitlines())


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a workspace tmpfs needs root")


@needs_root
def test_a_forks_workspace_is_a_filesystem_of_its_own_with_a_byte_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(world_mod, "WORKSPACE_BYTES", 1024**2)
    cache = WorldCache(tmp_path / "cache")
    a, ha = cache.fork(FakeTask)
    assert cache.bounded and mounted_at(a.workspace) and not mounted_at(a.state)
    assert a.hash() == ha and (a.workspace / "run.sh").stat().st_mode & 0o777 == 0o755
    with pytest.raises(OSError, match="No space left"):
        (a.workspace / "big.bin").write_bytes(b"x" * 2 * 1024**2)
    (a.state / "big.bin").write_bytes(b"x" * 2 * 1024**2)  # apps' state is not the agent's budget
    cache.close()


@needs_root
def test_release_and_close_unmount_what_fork_mounted(tmp_path):
    cache = WorldCache(tmp_path / "cache")
    a, _ = cache.fork(FakeTask)
    b, _ = cache.fork(FakeTask)
    cache.release(a)
    assert not mounted_at(a.workspace) and not a.root.exists()
    assert mounted_at(b.workspace)
    cache.close()
    assert not mounted_at(b.workspace)


def test_without_mounting_forks_are_plain_folders(tmp_path):
    cache = WorldCache(tmp_path / "cache", mount=False)
    a, ha = cache.fork(FakeTask)
    assert not cache.bounded and not mounted_at(a.workspace) and a.hash() == ha
    cache.release(a)
    assert not a.root.exists()


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_a_new_cache_removes_what_dead_caches_left_and_keeps_live_ones(tmp_path, monkeypatch):
    worlds = tmp_path / "worlds"
    monkeypatch.setenv("LONGHORIZON_WORLDS_DIR", str(worlds))
    worlds.mkdir()
    me = os.getpid()
    start = open(f"/proc/{me}/stat").read().rsplit(")", 1)[1].split()[19]
    owners = {"stale": f"{dead_pid()} 1", "reused": f"{me} {int(start) + 1}", "live": f"{me} {start}", "unknown": None}
    for name, owner in owners.items():
        folder = worlds / f"longhorizon-worlds-{name}"
        (folder / "episodes" / "t.1" / "workspace").mkdir(parents=True)
        (folder / "episodes" / "t.1" / "workspace" / "f.txt").write_text("x")
        if owner:
            (folder / "owner.pid").write_text(owner + "\n")
    stale_mount = worlds / "longhorizon-worlds-stale" / "episodes" / "t.1" / "workspace"
    if os.geteuid() == 0:
        assert world_mod._mount_workspace(stale_mount) and mounted_at(stale_mount)
    cache = WorldCache()
    names = sorted(p.name for p in worlds.iterdir())
    assert names == sorted(["longhorizon-worlds-live", "longhorizon-worlds-unknown", cache.base.name])
    assert not mounted_at(stale_mount)
    assert (worlds / "longhorizon-worlds-live" / "episodes" / "t.1" / "workspace" / "f.txt").exists()
    assert (cache.base / "owner.pid").read_text().split() == [str(me), start]
    cache.close()
    assert not cache.base.exists()


@needs_root
def test_a_mount_whose_cache_folder_was_deleted_is_swept(tmp_path):
    base = tmp_path / "cache"
    ws = base / "episodes" / "t.1" / "workspace"
    ws.mkdir(parents=True)
    assert world_mod._mount_workspace(ws)  # no owner.pid: its cache folder was removed around it
    WorldCache(tmp_path / "other").close()
    assert not mounted_at(ws)


def test_remove_tree_removes_folders_nested_deeper_than_python_recurses(tmp_path):
    """A shell can nest folders thousands deep; cleaning up after such an episode must not
    raise (shutil.rmtree recurses in Python and fails there)."""
    from longhorizon.core.world import remove_tree

    root = tmp_path / "world"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(1500):  # relative to the parent's fd, as a shell's `mkdir d && cd d` (a bash loop: minutes)
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)
    remove_tree(root)
    assert not root.exists()
    remove_tree(root)  # already gone: nothing to do, no error


def test_a_new_cache_removes_grader_scratch_folders_of_dead_processes(tmp_path, monkeypatch):
    worlds = tmp_path / "worlds"
    monkeypatch.setenv("LONGHORIZON_WORLDS_DIR", str(worlds))
    stale = world_mod.owned_temp_dir(world_mod.GRADER_PREFIX)
    (stale / "workspace" / "locked").mkdir(parents=True)
    (stale / "workspace" / "locked").chmod(0)  # what an agent's script may leave
    (stale / "owner.pid").write_text(f"{dead_pid()} 1\n")
    live = world_mod.owned_temp_dir(world_mod.GRADER_PREFIX)
    assert stale.parent == worlds and stale.name.startswith("longhorizon-grader-")
    cache = WorldCache()
    assert not stale.exists() and live.exists()
    cache.close()
