"""Shell scripting families: the agent writes a reusable script, runs it on the given data, and the
grader runs that same script again, inside the bubblewrap sandbox, on hidden inputs.

Helpers here let a (synchronous) grader run a command in the sandbox, copy what the agent wrote
into a fresh workspace, and read a folder tree back without following anything the agent's
script may have planted there (links, pipes, huge files).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import shutil
import stat
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longhorizon.apps.shell import sandbox
from longhorizon.core.world import GRADER_PREFIX, owned_temp_dir, sweep_stale_worlds
from longhorizon.tasks.common import output_bytes

MAX_COPY_BYTES = 4 * 1024 * 1024
"""What the grader copies out of the agent's scripts folder, at most."""
MAX_READ_BYTES = 2 * 1024 * 1024
"""A file bigger than this in a grader's snapshot is recorded by size only."""
MAX_ENTRIES = 5_000
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
"""What one snapshot reads in all; files past it are recorded by name only, like oversized ones."""


@dataclass
class Tree:
    """A folder as the grader sees it: regular files (bytes), folders, and anything else."""

    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    odd: list[str] = field(default_factory=list)
    """Links, pipes, unreadable or oversized entries (and files past the snapshot's byte budget):
    never followed, never read."""


def snapshot(root: Path) -> Tree:
    """Every entry under ``root`` (relative posix paths), without following links."""
    tree = Tree()
    root = Path(root)
    if root.is_symlink() or not root.is_dir():
        tree.odd.append(".")
        return tree
    count = budget = 0
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk never descends into links
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            count += 1
            if count > MAX_ENTRIES:
                tree.odd.append("(too many entries)")
                return tree
            p = here / name
            rel = p.relative_to(root).as_posix()
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                tree.dirs.add(rel)
            elif stat.S_ISREG(st.st_mode) and st.st_size <= MAX_READ_BYTES and budget + st.st_size <= MAX_SNAPSHOT_BYTES:
                try:
                    tree.files[rel] = output_bytes(p, MAX_READ_BYTES)
                    budget += len(tree.files[rel])
                except OSError:
                    tree.odd.append(rel)
            else:
                tree.odd.append(rel)
    return tree


def tree_digest(root: Path) -> str:
    """sha256 over a folder's regular files (paths and bytes); links and the like count by name."""
    h = hashlib.sha256()
    t = snapshot(root)
    for rel in sorted(t.files):
        h.update(rel.encode() + b"\0" + t.files[rel] + b"\0")
    for rel in sorted(t.odd):
        h.update(b"odd\0" + rel.encode() + b"\0")
    return h.hexdigest()


def copy_regular(src: Path, dest: Path) -> None:
    """Copy the regular files and folders under ``src`` into ``dest`` (links and others skipped),
    keeping the executable bit, up to ``MAX_COPY_BYTES`` in all."""
    budget = MAX_COPY_BYTES
    t = snapshot(src)
    dest.mkdir(parents=True, exist_ok=True)
    for rel in sorted(t.dirs):
        (dest / rel).mkdir(parents=True, exist_ok=True)
    for rel, data in sorted(t.files.items()):
        if len(data) > budget:
            continue
        budget -= len(data)
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        mode = os.lstat(src / rel).st_mode
        out.chmod(0o755 if mode & 0o111 else 0o644)


def force_rmtree(path: Path) -> None:
    """Remove a scratch tree even if a script made folders unreadable or unwritable."""
    def fix(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=fix)
    else:
        shutil.rmtree(path, onerror=fix)


def run_sandboxed_sync(command: str, workspace: Path, timeout_s: int = 30) -> sandbox.RunResult | None:
    """Run ``bash -c command`` in the sandbox over ``workspace`` from synchronous code (graders run
    inside the episode's event loop, so the sandbox gets a loop of its own on a worker thread).
    None when it timed out or the sandbox is unavailable: the caller's criterion then fails."""
    def work() -> sandbox.RunResult | None:
        try:
            return asyncio.run(sandbox.run_sandboxed(command, workspace, timeout_s))
        except (sandbox.SandboxTimeout, sandbox.SandboxUnavailable):
            return None

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(work).result()


class ScratchRuns:
    """Memoises grader runs of the agent's script: every criterion of one grading reads the same
    result, keyed by the world and what the agent wrote."""

    def __init__(self, size: int = 16):
        self._size = size
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        value = compute()
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return value

    def run_scripts(self, world, task_id: str, script: str, work: Callable[[Path], Any]) -> Any:
        """``work(ws)`` on a fresh scratch workspace ``ws`` that holds a copy of the agent's
        ``scripts/`` folder, memoised per task, World and scripts; ``(None, reason)`` when
        ``script`` is missing. The scratch tree is removed afterwards."""
        path = world.file(script)
        if path.is_symlink() or not path.is_file():
            return None, f"{script} is missing"
        key = (task_id, str(world.root), tree_digest(world.file("scripts")))

        def compute():
            tmp = scratch_dir()
            try:
                ws = tmp / "workspace"
                copy_regular(world.file("scripts"), ws / "scripts")
                return work(ws)
            finally:
                force_rmtree(tmp)
        return self.get(key, compute)


def scratch_dir() -> Path:
    """A fresh scratch folder for one grader run, marked with this process as its owner; the
    first one in a process sweeps those that dead processes left (a grading killed with -9),
    as a new ``WorldCache`` does (``sweep_stale_worlds``)."""
    _sweep_once()
    return owned_temp_dir(GRADER_PREFIX)


_SWEPT = threading.Event()


def _sweep_once() -> None:
    if not _SWEPT.is_set():
        _SWEPT.set()
        sweep_stale_worlds()
