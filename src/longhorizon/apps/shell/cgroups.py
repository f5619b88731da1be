"""One cgroup per shell command: a cap on its processes (``pids``) and on its memory, all of
its processes together, and the kernel's count of how often it hit either.

Made under the cgroup this process is in, for each controller wherever it is mounted: cgroup v2
(``pids.max``, ``memory.max``; the parent must let its children use both controllers) or v1
(``pids.max``, ``memory.limit_in_bytes``), the two mixed as a host mounts them. That needs write
access to the cgroup folders: root with a writable cgroup fs, or a delegated subtree. Where
neither controller can be used, ``create`` returns None and the sandbox falls back to rlimits
(see ``sandbox``).

The command joins its cgroups before bubblewrap starts (``join_argv``: a host ``sh`` writes its
own pid into each ``cgroup.procs``, then execs bubblewrap), so everything the command starts is
counted from its first fork. Folders are named ``longhorizon-shell-<pid>-<random>``; the first
use in a process removes those a dead process left (a cgroup that still holds processes cannot
be removed, and is left alone).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PREFIX = "longhorizon-shell-"
JOIN_FAILED = b"longhorizon: cannot join the command's cgroup"
_JOIN = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || '
         '{ echo "' + JOIN_FAILED.decode() + '" >&2; exit 125; }; shift; n=$((n - 1)); done; exec "$@"')


@dataclass(frozen=True)
class Usage:
    """What one command used and hit; None where the kernel does not say."""

    process_limit: int | None
    memory_limit: int | None
    peak_processes: int | None
    peak_memory_bytes: int | None
    process_limit_hits: int
    oom_kills: int

    def note(self) -> str:
        """A line for the agent when a limit stopped something, else ''."""
        lines = []
        if self.process_limit_hits:
            n = self.process_limit_hits
            lines.append(f"the command reached the sandbox's limit of {self.process_limit} processes at once: "
                         f"starting a process failed {n} time{'s' if n > 1 else ''} "
                         "(fork: Resource temporarily unavailable)")
        if self.oom_kills:
            lines.append(f"the command's processes reached the sandbox's memory limit of "
                         f"{_size(self.memory_limit)} together: the kernel killed {self.oom_kills} of them "
                         "(out of memory, signal 9)")
        return "\n".join(lines)


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class _Parent:
    folder: Path
    version: int  # 1 or 2
    controllers: tuple[str, ...]  # of ("pids", "memory"), those this folder's children get


class CommandCgroup:
    """The cgroup folders of one command (one per hierarchy: two on a v1 host, one on v2)."""

    def __init__(self, folders: list[tuple[Path, _Parent]], process_limit: int | None, memory_limit: int | None):
        self.folders = folders
        self.process_limit = process_limit
        self.memory_limit = memory_limit

    def join_argv(self) -> list[str]:
        """The argv prefix that puts a program (and so all it starts) into these cgroups."""
        procs = [str(folder / "cgroup.procs") for folder, _ in self.folders]
        return ["/bin/sh", "-c", _JOIN, "join", str(len(procs)), *procs]

    def usage(self) -> Usage:
        peak_procs = peak_mem = None
        hits = ooms = 0
        for folder, parent in self.folders:
            if "pids" in parent.controllers:
                peak_procs = _read_int(folder / "pids.peak")
                hits = _event(folder / "pids.events", "max")
            if "memory" in parent.controllers:
                if parent.version == 2:
                    peak_mem = _read_int(folder / "memory.peak")
                    ooms = _event(folder / "memory.events", "oom_kill")
                else:
                    peak_mem = _read_int(folder / "memory.max_usage_in_bytes")
                    ooms = _event(folder / "memory.oom_control", "oom_kill")
        return Usage(self.process_limit if self.process_limit and any("pids" in p.controllers for _, p in self.folders)
                     else None,
                     self.memory_limit if any("memory" in p.controllers for _, p in self.folders) else None,
                     peak_procs, peak_mem, hits, ooms)

    def kill(self) -> None:
        """SIGKILL every process still in these cgroups (the sandbox's pid namespace already
        takes them down with its init; this is the belt to those braces)."""
        for folder, _ in self.folders:
            for pid in _pids(folder):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def remove(self) -> bool:
        """Remove the folders; False (and queued for a later try) while one still holds a process."""
        left = []
        for folder, parent in self.folders:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                left.append((folder, parent))
        self.folders = left
        if left:
            with _LOCK:
                _PENDING.append(self)
        return not left


_LOCK = threading.Lock()
_PENDING: list[CommandCgroup] = []
"""Cgroups whose processes were still being reaped at removal: retried at the next create."""


def create(process_limit: int | None, memory_limit: int | None) -> CommandCgroup | None:
    """A fresh cgroup per hierarchy with the limits set, or None where no controller can be used."""
    parents = parents_here()
    if not parents:
        return None
    with _LOCK:
        pending = list(_PENDING)
        _PENDING.clear()
    for group in pending:
        group.remove()
    name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
    made: list[tuple[Path, _Parent]] = []
    try:
        for parent in parents:
            folder = parent.folder / name
            folder.mkdir()
            made.append((folder, parent))
            if "pids" in parent.controllers and process_limit:
                (folder / "pids.max").write_text(str(process_limit))
            if "memory" in parent.controllers and memory_limit:
                if parent.version == 2:
                    (folder / "memory.max").write_text(str(memory_limit))
                    _write_if_there(folder / "memory.swap.max", "0")
                else:
                    (folder / "memory.limit_in_bytes").write_text(str(memory_limit))
                    _write_if_there(folder / "memory.memsw.limit_in_bytes", str(memory_limit))
    except OSError:
        CommandCgroup(made, None, None).remove()
        return None
    return CommandCgroup(made, process_limit, memory_limit)


@cache
def parents_here() -> tuple[_Parent, ...]:
    """Where this process may make command cgroups: for ``pids`` and ``memory``, this process's
    own cgroup folder in the hierarchy that has the controller, when it is writable (found once
    per process; stale folders of dead processes are removed then)."""
    mounts = _cgroup_mounts()
    mine = _own_cgroups()
    found: dict[Path, _Parent] = {}
    for controller in ("pids", "memory"):
        spot = _v1_folder(controller, mounts, mine) or _v2_folder(controller, mounts, mine)
        if spot is None:
            continue
        folder, version = spot
        old = found.get(folder)
        found[folder] = _Parent(folder, version, (old.controllers if old else ()) + (controller,))
    parents = tuple(found.values())
    for p in parents:
        sweep_stale(p.folder)
    return parents


def sweep_stale(folder: Path) -> list[Path]:
    """Remove the command cgroups in ``folder`` whose maker is gone (empty ones only: the
    kernel refuses to remove a cgroup with processes)."""
    removed = []
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(PREFIX) and e.is_dir(follow_symlinks=False)]
    except OSError:
        return removed
    for e in entries:
        m = re.match(rf"{PREFIX}(\d+)-", e.name)
        if not m or _alive(int(m.group(1))):
            continue
        try:
            os.rmdir(e.path)
            removed.append(Path(e.path))
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cgroup_mounts() -> list[tuple[Path, str, str, set[str]]]:
    """(mount point, root within the hierarchy, fs type, super options) of each cgroup mount."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        left, right = left.split(), right.split()
        if len(left) > 4 and len(right) > 2 and right[0] in ("cgroup", "cgroup2"):
            unescape = lambda s: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)  # noqa: E731
            out.append((Path(unescape(left[4])), unescape(left[3]), right[0], set(right[2].split(","))))
    return out


def _own_cgroups() -> list[tuple[str, set[str], str]]:
    """(hierarchy id, controllers, path) of each line of /proc/self/cgroup."""
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[0], set(filter(None, parts[1].split(","))), parts[2]))
    return out


def _under(mount: Path, root: str, path: str) -> Path | None:
    """The folder of cgroup ``path`` in a hierarchy mounted at ``mount`` from ``root``."""
    root = root.rstrip("/") or "/"
    if root != "/" and not (path == root or path.startswith(root + "/")):
        return None
    rel = path[len(root):] if root != "/" else path
    folder = mount / rel.lstrip("/")
    return folder if folder.is_dir() else None


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK) and os.access(folder / "cgroup.procs", os.W_OK)


def _v1_folder(controller: str, mounts, mine) -> tuple[Path, int] | None:
    for point, root, fstype, options in mounts:
        if fstype != "cgroup" or controller not in options:
            continue
        for _, controllers, path in mine:
            if controller in controllers:
                folder = _under(point, root, path)
                if folder and _writable(folder):
                    return folder, 1
    return None


def _v2_folder(controller: str, mounts, mine) -> tuple[Path, int] | None:
    """This process's v2 cgroup, when its children can get ``controller`` (enabled in its
    ``subtree_control``, or enabled here; a cgroup with processes of its own other than the
    root cannot enable one: then there is none)."""
    path = next((p for hid, controllers, p in mine if hid == "0" and not controllers), None)
    if path is None:
        return None
    for point, root, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        folder = _under(point, root, path)
        if not folder or not _writable(folder):
            continue
        try:
            available = (folder / "cgroup.controllers").read_text().split()
            enabled = (folder / "cgroup.subtree_control").read_text().split()
        except OSError:
            continue
        if controller not in available:
            continue
        if controller not in enabled:
            try:
                (folder / "cgroup.subtree_control").write_text(f"+{controller}")
            except OSError:
                continue
        return folder, 2
    return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _event(path: Path, key: str) -> int:
    """The count ``key`` in a flat keyed file (``pids.events``, ``memory.events``, ``memory.oom_control``)."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _pids(folder: Path) -> list[int]:
    try:
        return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _write_if_there(path: Path, value: str) -> None:
    if path.exists():
        try:
            path.write_text(value)
        except OSError:
            pass
