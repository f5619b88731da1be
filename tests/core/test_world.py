"""Worlds: built once, forked per episode; forks are isolated from each other and the snapshot."""

import sqlite3

import pytest

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
