"""Workspace file guards: the files a World was built with stay as they were, nothing is written
to them, and no file appears that the task did not ask for.

A check sees only the final World, so the expected files are what the family built the World
from (``seeded``): ``Sources`` / ``Files`` objects, or mappings of workspace path -> bytes (or
text, written as UTF-8 like ``write_files`` does). They are read on the first check, not when the criterion is made, so generating a task
never builds its files. The final World is read without following links: a link, FIFO or any
non-regular file where a seeded file was, or a linked folder on its way, is not that file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from functools import cache

from longhorizon.core.grade import Criterion
from longhorizon.tasks.common import Sources, norm_path, writes_to

Seeded = Sources | Mapping[str, bytes | str]
"""Files a World was built with: a ``Sources`` (or ``Files``), or workspace path -> bytes or text."""


def _seeded_bytes(*seeded: Seeded) -> dict[str, bytes]:
    """Every seeded file as workspace path -> bytes (text as UTF-8), in path order."""
    out: dict[str, bytes] = {}
    for s in seeded:
        for rel, data in (s.bytes if isinstance(s, Sources) else s).items():
            out[norm_path(rel)] = data.encode("utf-8") if isinstance(data, str) else data
    return dict(sorted(out.items()))


def _lazy(seeded: tuple[Seeded, ...]) -> Callable[[], dict[str, bytes]]:
    return cache(lambda: _seeded_bytes(*seeded))


def _holds(world, rel: str, expected: bytes) -> bool:
    """Whether workspace ``rel`` is a regular file holding exactly ``expected``. Each folder on
    the way is opened without following a link, and so is the file, so a link to a copy
    elsewhere never passes; the file is read only when its size matches."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    *folders, name = norm_path(rel).split("/")
    try:
        fd = os.open(world.workspace, flags | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        for part in folders:
            nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        ffd = os.open(name, flags | os.O_NONBLOCK, dir_fd=fd)
        with os.fdopen(ffd, "rb") as f:
            st = os.fstat(ffd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != len(expected):
                return False
            return f.read(len(expected) + 1) == expected
    except OSError:
        return False
    finally:
        os.close(fd)


def _present(world) -> tuple[set[str], list[str]]:
    """(every non-folder entry under the workspace as a relative posix path: files, links
    (to folders too), FIFOs; folders the walk could not list). Never follows a link."""
    root = world.workspace
    found: set[str] = set()
    unlisted: list[str] = []
    if root.is_symlink() or not root.is_dir():
        return found, ["the workspace itself"]
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: unlisted.append(e.filename)):
        here = os.path.relpath(dirpath, root)
        prefix = "" if here == "." else here.replace(os.sep, "/") + "/"
        found.update(prefix + n for n in filenames)
        found.update(prefix + n for n in dirnames if os.path.islink(os.path.join(dirpath, n)))
    return found, [os.path.relpath(p, root) for p in unlisted]


def _shown(paths: Iterable[str]) -> list[str]:
    """Paths for a note: names the agent made need not be valid UTF-8."""
    return sorted(p.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for p in paths)


def unchanged(*seeded: Seeded, id: str = "sources_unchanged",
              description: str = "the files the task started from are byte-identical",
              weight: float = 1.0) -> Criterion:
    """A guard over the final World: every seeded file is still there, a regular file with the
    bytes it was built with (moved away, deleted, rewritten or replaced by a link: unmet)."""
    expected = _lazy(seeded)

    def check(world, traj):
        bad = [rel for rel, data in expected().items() if not _holds(world, rel, data)]
        return not bad, f"changed or missing: {_shown(bad)}" if bad else ""

    return Criterion(id, description, "final_state", check, weight, guard=True)


def not_written(*seeded: Seeded | Iterable[str], id: str = "no_source_writes",
                description: str = "no tool call wrote to a file the task started from",
                weight: float = 1.0) -> Criterion:
    """A guard over the trajectory: no successful workspace tool call changed a seeded file or
    a folder holding one (``writes_to``), even to write the same bytes back. A plain list of
    paths names the files without their bytes."""
    def paths() -> list[str]:
        out = set()
        for s in seeded:
            out.update(s.bytes if isinstance(s, Sources) else s)
        return sorted(norm_path(p) for p in out)
    targets = cache(paths)

    def check(world, traj):
        hits = writes_to(traj, targets())
        return not hits, f"wrote to: {hits}" if hits else ""

    return Criterion(id, description, "process", check, weight, guard=True)


def untouched(*seeded: Seeded, id: str = "sources_untouched",
              description: str = "the files the task started from are unchanged and were not written",
              weight: float = 1.0) -> Criterion:
    """``unchanged`` and ``not_written`` as one guard (a process criterion: it reads the
    trajectory), for families that count both as one constraint."""
    same, unwritten = unchanged(*seeded).check, not_written(*seeded).check

    def check(world, traj):
        for result in (unwritten(world, traj), same(world, traj)):
            if not result[0]:
                return result
        return True, ""

    return Criterion(id, description, "process", check, weight, guard=True)


def only_created(*seeded: Seeded, allowed: Iterable[str] = (), nothing_deleted: bool = False,
                 id: str = "no_stray_files", description: str = "", weight: float = 1.0) -> Criterion:
    """A guard over the final World: the workspace holds no file (nor link, nor FIFO) besides the
    seeded ones and the ``allowed`` new paths. Deleting a seeded file is not a stray file; with
    ``nothing_deleted`` every seeded path must also still be a regular file (its content is
    ``unchanged``'s business). Folders alone, made or removed, do not count."""
    allowed = frozenset(norm_path(p) for p in allowed)
    expected = _lazy(seeded)
    description = description or (f"no new files besides {', '.join(sorted(allowed))}" if allowed
                                   else "no new files")

    def check(world, traj):
        found, unlisted = _present(world)
        extra = found - set(expected()) - allowed
        notes = [f"unexpected files: {_shown(extra)}"] if extra else []
        if unlisted:
            notes.append(f"folders that could not be listed: {_shown(unlisted)}")
        if nothing_deleted:
            gone = [rel for rel in expected() if rel not in found
                    or not stat.S_ISREG(os.lstat(world.workspace / rel).st_mode)]
            if gone:
                notes.append(f"missing: {_shown(gone)}")
        return not notes, "; ".join(notes)

    return Criterion(id, description, "final_state", check, weight, guard=True)
