"""World: the state of every app for one episode, kept in one folder.

Layout: ``workspace/`` is the agent's files (the only place file tools and the shell can
touch); ``state/`` holds each app's private state (``mail.sqlite``, ``calendar.sqlite``, ...).
A Task's World is built once into a snapshot and forked (copied) per episode, so every
episode of a group starts from byte-identical state and no episode can see another's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path


class World:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def db_path(self, app: str) -> Path:
        return self.state / f"{app}.sqlite"

    def db(self, app: str) -> sqlite3.Connection:
        """A read-only connection to an app's database, for graders."""
        path = self.db_path(app)
        if not path.exists():
            raise FileNotFoundError(f"world has no {app} database")
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        return conn

    def file(self, rel: str) -> Path:
        return self.workspace / rel

    def hash(self) -> str:
        return tree_hash(self.root)

    @classmethod
    def build(cls, root: Path | str, build: Callable[[Path], None]) -> "World":
        root = Path(root)
        (root / "workspace").mkdir(parents=True, exist_ok=True)
        (root / "state").mkdir(parents=True, exist_ok=True)
        build(root)
        return cls(root)

    def fork(self, dest: Path | str) -> "World":
        """Copy this World to ``dest`` (which must not exist). The original stays untouched."""
        return self.image().materialize(dest)

    def image(self) -> "WorldImage":
        return WorldImage.of(self.root)


class WorldImage:
    """A World held in memory: folders, and files with their bytes and mode.

    Forking writes the image out (no reads, no stat copying): ~3x cheaper than copytree
    on small worlds, which is what a snapshot mostly is.
    """

    def __init__(self, dirs: list[str], files: list[tuple[str, bytes, int]]):
        self.dirs, self.files = dirs, files

    @classmethod
    def of(cls, root: Path) -> "WorldImage":
        dirs, files = [], []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            base = Path(dirpath)
            for d in dirnames:
                if (base / d).is_symlink():
                    raise ValueError(f"worlds may not contain symlinks: {base / d}")
                dirs.append((base / d).relative_to(root).as_posix())
            for name in sorted(filenames):
                p = base / name
                if p.is_symlink() or not p.is_file():
                    raise ValueError(f"worlds may hold only folders and regular files: {p}")
                files.append((p.relative_to(root).as_posix(), p.read_bytes(), p.stat().st_mode & 0o777))
        return cls(dirs, files)

    def materialize(self, dest: Path | str) -> World:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=False)
        for d in self.dirs:
            (dest / d).mkdir()
        for rel_path, data, mode in self.files:
            fd = os.open(dest / rel_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        return World(dest)


def tree_hash(root: Path) -> str:
    """sha256 over every file's relative path and bytes, in sorted order."""
    h = hashlib.sha256()
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            h.update(rel.encode() + b"\0")
            if p.is_symlink():
                h.update(b"L" + os.readlink(p).encode())
            elif not p.is_file():  # a pipe or device an agent made: never open it
                h.update(b"S")
            else:
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
            h.update(b"\0")
    return h.hexdigest()


def default_worlds_dir() -> str | None:
    """Where episode Worlds live: $LONGHORIZON_WORLDS_DIR, else /dev/shm when writable
    (creating a file there is ~15x cheaper than on a disk-backed /tmp), else the temp dir."""
    env = os.environ.get("LONGHORIZON_WORLDS_DIR")
    if env:
        Path(env).mkdir(parents=True, exist_ok=True)
        return env
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


class WorldCache:
    """Builds each Task's World once (the snapshot) and hands out forks.

    Snapshots are in-memory images, so no episode can touch them; forks live in one
    temporary folder that ``close()`` removes.
    """

    def __init__(self, base: Path | str | None = None):
        self._own = base is None
        self.base = Path(base) if base else Path(tempfile.mkdtemp(prefix="longhorizon-worlds-",
                                                                  dir=default_worlds_dir()))
        self.base.mkdir(parents=True, exist_ok=True)
        self._snapshots: dict[str, tuple[WorldImage, str]] = {}
        self._forks = 0
        self._lock = threading.Lock()  # forks may be taken from worker threads

    def snapshot(self, task) -> tuple[WorldImage, str]:
        """(snapshot image, its hash), building the World on first use."""
        with self._lock:
            if task.id not in self._snapshots:
                build_dir = self.base / "build" / task.id
                world = World.build(build_dir, task.build)
                self._snapshots[task.id] = (world.image(), world.hash())
                shutil.rmtree(build_dir)
            return self._snapshots[task.id]

    def fork(self, task) -> tuple[World, str]:
        image, digest = self.snapshot(task)
        with self._lock:
            self._forks += 1
            n = self._forks
        return image.materialize(self.base / "episodes" / f"{task.id}.{n}"), digest

    def close(self) -> None:
        if self._own:
            shutil.rmtree(self.base, ignore_errors=True)
