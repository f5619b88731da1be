"""The run folder: a manifest, an append-only trajectory log, infra errors and a summary.

    run.json              what the run is (policy, split, seeds, families, samples, limits, reproducible)
    trajectories.jsonl    one finished, graded episode per line, appended and fsync'd as it ends
    infra_errors.jsonl    episodes that failed for reasons outside the agent (retried on resume)
    summary.json          metrics, rewritten atomically when the run ends
    run.lock              held (flock) by the one live run writing the folder; holds its pid

Resuming reads the log, drops a torn last line left by a kill, and skips finished episodes,
so a run killed at any moment and rerun yields every episode exactly once.

One run writes a folder at a time: ``RunStore.open`` takes an exclusive ``flock`` on
``run.lock`` and keeps it until ``close()``. The kernel drops the lock when the holder exits
or dies (kill -9 included), so a stale lock never blocks a resume; a second live run into
the folder is refused with the holder's pid. Readers (eval, compare, data sft) take no lock.

Should a log still hold an episode twice (written before the lock existed, or by hand),
readers count it once: ``unique_episodes`` keeps each episode's *first* line. That is the
line ``open`` already treated as "done" when resuming, and appending to a log can then never
change an episode already counted.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from longhorizon.core.errors import InfraError, UsageError

MANIFEST = "run.json"
TRAJECTORIES = "trajectories.jsonl"
INFRA_ERRORS = "infra_errors.jsonl"
SUMMARY = "summary.json"
LOCK = "run.lock"

IDENTITY_KEYS = ("suite_version", "policy", "split", "seeds", "families", "tasks", "samples", "reproducible")
"""Manifest fields that must match for a rerun to resume rather than be refused."""
IDENTITY_DEFAULTS = {"reproducible": False}
"""What a manifest written before a field existed meant by leaving it out."""


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``path`` whole or not at all (a full disk leaves the old file and no temporary)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def append_line(path: Path, line: str) -> None:
    """Append one line and fsync it, or leave the file as it was: a write cut short (a full
    disk, a quota) is truncated away again, so the next line never lands after half a line."""
    data = (line + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        start = os.lseek(fd, 0, os.SEEK_END)  # this process is the folder's only writer (run.lock)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, start)  # needs no space
            raise
    finally:
        os.close(fd)


def read_jsonl(path: Path, *, repair: bool = False, key: str | None = None) -> list[dict]:
    """Parse a JSONL file. A torn final line (a kill mid-write) is skipped, and cut off when
    ``repair`` is set so later appends start on a clean line. A bad line elsewhere is an error,
    and so is a line that is not an object with a string ``key`` (when ``key`` is given)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    rows, pos = [], 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:  # no newline: end of file, or a torn last line from a kill mid-write
            break
        line = data[pos:nl]
        try:
            row = json.loads(line) if line.strip() else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            lineno = data.count(b"\n", 0, pos) + 1
            raise UsageError(f"{path}: line {lineno} is not valid JSON") from None
        if row is not None:
            if key is not None and (not isinstance(row, dict) or not isinstance(row.get(key), str)):
                lineno = data.count(b"\n", 0, pos) + 1
                raise UsageError(f"{path}: line {lineno} is not an episode record (no {key})")
            rows.append(row)
        pos = nl + 1
    good_end = pos
    if repair and good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return rows


def unique_episodes(rows: list[dict]) -> tuple[list[dict], int]:
    """Each episode once, its first line kept (see the module docstring), and how many
    duplicate lines were dropped."""
    seen: set[str] = set()
    out = []
    for r in rows:
        if r["episode_id"] not in seen:
            seen.add(r["episode_id"])
            out.append(r)
    return out, len(rows) - len(out)


def _release(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)  # no pid left behind by a clean exit
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _holder_pid(fd: int) -> str:
    """The pid the holder wrote. It writes it right after locking, so an empty file means it
    is between the two: look again for a moment rather than say "unknown"."""
    deadline = time.monotonic() + 1.0
    while True:
        text = os.pread(fd, 64, 0).decode(errors="replace").strip()
        if text or time.monotonic() > deadline:
            return text.splitlines()[0] if text else "unknown"
        time.sleep(0.005)


class RunStore:
    """One run folder. ``open`` makes this process its only writer until ``close`` (also a
    context manager); a store that is garbage-collected, or a process that dies, lets go too.
    Opening the same folder again in one process after ``close`` is fine."""

    def __init__(self, out: Path | str):
        self.dir = Path(out)
        self._lock: weakref.finalize | None = None
        self._writing = threading.Lock()  # appends may come from threads (the runner writes off its event loop)

    def _acquire(self) -> None:
        if self._lock is not None and self._lock.alive:
            return
        fd = os.open(self.dir / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_pid(fd)
            os.close(fd)
            raise UsageError(f"{self.dir} is in use by another run (pid {holder}); "
                             "wait for it to end or stop it, then rerun to resume") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock = weakref.finalize(self, _release, fd)

    def close(self) -> None:
        """Let go of the folder (idempotent)."""
        if self._lock is not None:
            self._lock()
            self._lock = None

    @property
    def locked(self) -> bool:
        return self._lock is not None and self._lock.alive

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self, manifest: dict[str, Any]) -> set[str]:
        """Lock, then create or resume the run; returns the ids of episodes already finished.
        Refused (UsageError) while another live run holds the folder, if it holds a
        different run, or if it is a file or a folder with something else in it."""
        if self.dir.exists() and not self.dir.is_dir():
            raise UsageError(f"{self.dir} exists and is not a folder; choose another --out")
        if self.dir.is_dir() and not (self.dir / MANIFEST).exists() and any(
                p.name != LOCK for p in self.dir.iterdir()):
            raise UsageError(f"{self.dir} exists and is not a run folder (no {MANIFEST}); "
                             "choose another --out (an empty or new folder)")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._acquire()  # before anything is read or repaired: a live writer may be mid-line
            path = self.dir / MANIFEST
            if path.exists():
                old = read_manifest(path)
                diff = [k for k in IDENTITY_KEYS if old.get(k, IDENTITY_DEFAULTS.get(k))
                        != manifest.get(k, IDENTITY_DEFAULTS.get(k))]
                if diff:
                    raise UsageError(
                        f"{self.dir} holds a different run ({', '.join(diff)} differ); "
                        "rerun with the same arguments to resume, or choose another --out"
                    )
            else:
                write_json_atomic(path, manifest)
            return {row["episode_id"] for row in read_jsonl(self.dir / TRAJECTORIES, repair=True, key="episode_id")}
        except OSError as exc:  # e.g. a full disk: nothing started, rerun once there is room
            self.close()
            raise InfraError(f"cannot open the run folder {self.dir}: {exc}") from exc
        except BaseException:
            self.close()
            raise

    def _append(self, name: str, line: str) -> None:
        with self._writing:  # one at a time: a write cut short is truncated back to where it began
            append_line(self.dir / name, line)

    def add_trajectory(self, traj) -> None:
        self._append(TRAJECTORIES, traj.to_json())

    def add_infra_error(self, record: dict[str, Any]) -> None:
        self._append(INFRA_ERRORS, json.dumps(record, ensure_ascii=False))

    def manifest(self) -> dict[str, Any]:
        return read_manifest(self.dir / MANIFEST)

    def trajectories(self) -> list[dict]:
        """Every line of the log, as written (duplicates included; see ``episodes``)."""
        return read_jsonl(self.dir / TRAJECTORIES, key="episode_id")

    def episodes(self) -> tuple[list[dict], int]:
        """Each finished episode once (first line kept) and the number of duplicate lines dropped."""
        return unique_episodes(self.trajectories())

    def infra_errors(self) -> list[dict]:
        return read_jsonl(self.dir / INFRA_ERRORS, key="episode_id")

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.dir / SUMMARY, summary)


def read_manifest(path: Path) -> dict[str, Any]:
    """``run.json`` as a dict; a file that is not a JSON object is a UsageError naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON ({getattr(exc, 'msg', exc)}); "
                         "it is not a run this version can read") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} is not a run manifest (a JSON object), it holds a {type(data).__name__}")
    episodes = data.get("episodes")
    if episodes is not None and (not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 0):
        raise UsageError(f"{path}: 'episodes' must be a count (a whole number), not {episodes!r}")
    return data


def open_existing(path: Path | str) -> RunStore:
    store = RunStore(path)
    if store.dir.exists() and not store.dir.is_dir():
        raise UsageError(f"{store.dir} is a file, not a run folder")
    if not store.dir.is_dir():
        raise UsageError(f"no such run folder: {store.dir}")
    if not (store.dir / MANIFEST).exists():
        raise UsageError(f"{store.dir} is not a run folder (no {MANIFEST}); create one with `longhorizon run`")
    return store
