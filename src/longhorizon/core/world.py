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
import stat
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

    def drop_links_and_specials(self) -> list[str]:
        """Remove every symbolic link, FIFO, socket and device from the workspace; returns what
        went, as ``"path (kind)"`` (a link also names its target), sorted by path.

        For grading: the agent's shell can leave a link where an output belongs (to an input,
        which would fake the output; to ``/dev/zero`` or a host file, which a grader would
        read), or a FIFO (opening one blocks). Graders read workspace files by path, so after
        this every path they open is a regular file or folder the agent really wrote. The walk
        never follows a link, and folders the agent made unreadable are made readable to the
        owner again so nothing stays hidden in them.
        """
        removed: list[str] = []
        if not self.workspace.is_dir() or self.workspace.is_symlink():
            return removed

        stack = [(str(self.workspace), "")]
        while stack:  # depth-first, in name order; a stack, not recursion (folders nest deep)
            folder, rel = stack.pop()
            try:
                mode = os.lstat(folder).st_mode
                if mode & 0o700 != 0o700:
                    os.chmod(folder, mode | 0o700)
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            subfolders = []
            for e in entries:
                path = f"{rel}{e.name}"
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    subfolders.append((e.path, f"{path}/"))
                elif not stat.S_ISREG(st.st_mode):
                    if stat.S_ISLNK(st.st_mode):
                        try:
                            what = f"link -> {os.readlink(e.path)}"
                        except OSError:
                            what = "link"
                    else:
                        what = ("fifo" if stat.S_ISFIFO(st.st_mode)
                                else "socket" if stat.S_ISSOCK(st.st_mode) else "device")
                    try:
                        os.unlink(e.path)
                    except OSError:
                        continue
                    removed.append(f"{path} ({what})".encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
            stack.extend(reversed(subfolders))
        return sorted(removed)

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


def remove_tree(path: Path | str) -> None:
    """Delete a folder whatever the agent left in it: ``shutil.rmtree`` recurses in Python
    (a shell can nest folders thousands deep, which raises RecursionError even with
    ignore_errors), so fall back to ``rm -rf``, which walks iteratively and, with
    ``--one-file-system``, never descends into a mount that could not be unmounted."""
    import subprocess

    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    except (RecursionError, OSError):
        quiet = {"check": False, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], **quiet)
        if os.path.lexists(path):  # folders made unreadable (not root): open them up (links are not followed)
            subprocess.run(["chmod", "-R", "u+rwx", "--", str(path)], **quiet)
            subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], **quiet)


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
    temporary folder: ``release(world)`` removes one fork, ``close()`` every fork left (and
    the folder, when the cache made it).

    Each fork's workspace is a tmpfs of its own when this process may mount one (root, or
    CAP_SYS_ADMIN; ``mount=False`` opts out): at most ``WORKSPACE_BYTES`` and
    ``WORKSPACE_FILES``, so nothing an agent or an app writes there can fill the host's memory,
    and the shell sandbox's mount table shows the workspace's root as ``/``, not its host path.
    Without the privilege (``bounded`` is then False) forks are plain folders: their bytes are
    not bounded, and the sandbox can read the workspace's path within its filesystem (e.g.
    ``/longhorizon-worlds-…/episodes/<task>.<n>/workspace``) from ``/proc/self/mountinfo``.

    The folder holds ``owner.pid`` (the pid and start time of the process that made the cache,
    beside ``build/`` and ``episodes/``): each new cache first unmounts the tmpfs and removes
    the folders of caches whose owner is gone (``sweep_stale_worlds``), e.g. a killed run's.
    """

    def __init__(self, base: Path | str | None = None, *, mount: bool = True):
        import weakref

        sweep_stale_worlds()
        self._own = base is None
        self.base = Path(base) if base else Path(tempfile.mkdtemp(prefix=_CACHE_PREFIX,
                                                                  dir=default_worlds_dir()))
        self.base.mkdir(parents=True, exist_ok=True)
        _write_owner(self.base)  # before any mount: a mount under a base without one is an orphan
        self.bounded = mount
        """Forks get a sized tmpfs workspace (turns False when this process may not mount)."""
        self._snapshots: dict[str, tuple[WorldImage, str]] = {}
        self._forks = 0
        self._lock = threading.Lock()  # forks may be taken from worker threads
        self._mounted: set[Path] = set()
        self._finalizer = weakref.finalize(self, _close_cache, self._mounted, self._lock,
                                           self.base, self._own)  # at exit too, if never closed

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
        dest = self.base / "episodes" / f"{task.id}.{n}"
        if not self.bounded:
            return image.materialize(dest), digest
        dest.mkdir(parents=True)
        ws = dest / "workspace"
        ws.mkdir()
        if _mount_workspace(ws):
            with self._lock:
                self._mounted.add(ws)
        else:
            self.bounded = False
        _write_image(image, dest, existing={"workspace"})
        return World(dest), digest

    def release(self, world: World) -> None:
        """Remove one fork: unmount its workspace, then delete its folder (the end of an
        episode; a plain ``rmtree`` cannot remove a mount point and would leave the mount)."""
        ws = world.workspace
        with self._lock:
            mounted = ws in self._mounted
            self._mounted.discard(ws)
        if mounted:
            _unmount(ws)
        remove_tree(world.root)

    def close(self) -> None:
        """Unmount every fork's workspace left (their files go with it) and remove the folder
        if this cache made it."""
        self._finalizer()


# -- per-episode workspace budget, and the folders dead caches leave -----------------------

WORKSPACE_BYTES = 1024**3
"""Bytes one fork's workspace may hold (the size of its tmpfs); every family's files are kilobytes."""
WORKSPACE_FILES = 100_000
"""Files and folders one fork's workspace may hold (its tmpfs's inodes: each costs host memory
beyond its bytes, so they are bounded too)."""
OWNER_FILE = "owner.pid"
_CACHE_PREFIX = "longhorizon-worlds-"
GRADER_PREFIX = "longhorizon-grader-"
"""Scratch folders a grader runs the agent's script in (``tasks.scripting``)."""
_OWNED_PREFIXES = (_CACHE_PREFIX, GRADER_PREFIX)
"""Folders made with an owner file where Worlds live: swept once their owner is gone."""
_FS_NAME = "lh-world"
"""A fork tmpfs's source name in mount tables: how the stale ones are recognised."""
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
_LIBC = None


def _libc():
    """libc with ``mount``/``umount2`` (None where there is none: not Linux)."""
    global _LIBC
    if _LIBC is None:
        import ctypes

        try:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
            lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        except (OSError, AttributeError):
            lib = False
        _LIBC = lib
    return _LIBC or None


def _mount_workspace(path: Path) -> bool:
    """Mount a sized tmpfs on the (empty) folder ``path``; False when this process may not."""
    import ctypes
    import errno

    lib = _libc()
    if lib is None:
        return False
    opts = f"size={WORKSPACE_BYTES},nr_inodes={WORKSPACE_FILES},mode=0755"
    if lib.mount(_FS_NAME.encode(), os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode()) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EPERM, errno.EACCES, errno.ENODEV, errno.ENOSYS):
        return False  # not root, or no tmpfs here: plain folders (see WorldCache)
    raise OSError(err, f"cannot mount the workspace's tmpfs: {os.strerror(err)}", str(path))


def _unmount(path: Path) -> None:
    """Detach a mount (at once, even if a process still has files open in it; the memory goes
    with its last user). Not mounted, or not allowed: nothing to do."""
    lib = _libc()
    if lib is not None:
        lib.umount2(os.fsencode(path), _MNT_DETACH)


def _write_image(image: WorldImage, dest: Path, existing: set[str]) -> None:
    """Write ``image`` into the folder ``dest`` (whose folders ``existing`` are already made)."""
    for d in image.dirs:
        if d not in existing:
            (dest / d).mkdir()
    for rel_path, data, mode in image.files:
        fd = os.open(dest / rel_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def _close_cache(mounted: set[Path], lock: threading.Lock, base: Path, own: bool) -> None:
    with lock:
        forks = sorted(mounted, key=lambda p: len(p.parts), reverse=True)
        mounted.clear()
    for ws in forks:
        _unmount(ws)
    if own:
        remove_tree(base)


def _mounts() -> list[tuple[Path, str, str]]:
    """(mount point, fs type, source) of each mount in this process's mount table."""
    import re

    try:
        text = Path("/proc/self/mountinfo").read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return []
    unescape = lambda s: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)  # noqa: E731
    found = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        left, right = left.split(), right.split()
        if len(left) > 4 and len(right) > 1:
            found.append((Path(unescape(left[4])), right[0], unescape(right[1])))
    return found


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _write_owner(base: Path) -> None:
    pid = os.getpid()
    stat = _proc_stat(pid)
    tmp = base / f".{OWNER_FILE}.{pid}"
    tmp.write_text(f"{pid} {stat[19] if stat and len(stat) > 19 else '-'}\n")
    os.replace(tmp, base / OWNER_FILE)  # whole or absent: a sweeper never reads half of it


def owned_temp_dir(prefix: str) -> Path:
    """A fresh folder where Worlds live (``default_worlds_dir``), marked with this process as
    its owner: if the process dies before removing it (kill -9), the next ``WorldCache`` (or
    ``sweep_stale_worlds``) removes it."""
    if prefix not in _OWNED_PREFIXES:
        raise ValueError(f"{prefix!r} is not a prefix sweep_stale_worlds knows")
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=default_worlds_dir()))
    _write_owner(folder)
    return folder


def owner_alive(folder: Path | str) -> bool | None:
    """Whether the process that made this cache folder still runs (None: unknown, i.e. no
    readable owner file — made before owner files, or being made right now).

    The start time recorded beside the pid tells a reused pid from the owner; a zombie is gone.
    """
    try:
        pid_text, start = (Path(folder) / OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    stat = _proc_stat(pid)
    if stat is None:  # no /proc to look at: trust the pid
        return True
    if stat[0] == "Z" or (start != "-" and len(stat) > 19 and stat[19] != start):
        return False
    return True


def sweep_stale_worlds(parent: Path | str | None = None) -> list[Path]:
    """Unmount fork tmpfs and remove cache and grader scratch folders that dead processes left.

    A fork tmpfs (``<base>/episodes/<fork>/workspace``) is stale when ``<base>``'s owner is
    gone or its owner file is (the folder was deleted around the mount). A cache folder
    ``longhorizon-worlds-*`` or grader scratch folder ``longhorizon-grader-*`` of ours in
    ``parent`` (default: where they are made) is removed when its owner is gone; one without
    an owner file is left alone. Returns the folders removed.
    """
    for point, fstype, source in _mounts():
        if fstype != "tmpfs" or source != _FS_NAME or point.parent.parent.name != "episodes":
            continue
        base = point.parent.parent.parent
        alive = owner_alive(base)
        if alive is False or (alive is None and not (base / OWNER_FILE).exists()):
            _unmount(point)
    where = Path(parent) if parent else Path(default_worlds_dir() or tempfile.gettempdir())
    try:
        entries = [e for e in os.scandir(where) if e.name.startswith(_OWNED_PREFIXES)]
    except OSError:
        return []
    removed = []
    mounts = None
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        folder = Path(os.path.realpath(entry.path))
        if owner_alive(folder) is not False:
            continue
        mounts = _mounts() if mounts is None else mounts
        if any(folder in point.parents for point, _, _ in mounts):
            continue  # something is still mounted in it (not ours, or not unmountable): leave it
        remove_tree(folder)
        removed.append(folder)
    return removed
