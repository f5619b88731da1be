"""The run folder: a manifest, an append-only trajectory log, infra errors and a summary.

    run.json              what the run is (policy, split, seeds, families, samples, limits)
    trajectories.jsonl    one finished, graded episode per line, appended and fsync'd as it ends
    infra_errors.jsonl    episodes that failed for reasons outside the agent (retried on resume)
    summary.json          metrics, rewritten atomically when the run ends

Resuming reads the log, drops a torn last line left by a kill, and skips finished episodes,
so a run killed at any moment and rerun yields every episode exactly once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError

MANIFEST = "run.json"
TRAJECTORIES = "trajectories.jsonl"
INFRA_ERRORS = "infra_errors.jsonl"
SUMMARY = "summary.json"

IDENTITY_KEYS = ("suite_version", "policy", "split", "seeds", "families", "samples")
"""Manifest fields that must match for a rerun to resume rather than be refused."""


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def read_jsonl(path: Path, *, repair: bool = False) -> list[dict]:
    """Parse a JSONL file. A torn final line (a kill mid-write) is skipped, and cut off when
    ``repair`` is set so later appends start on a clean line. A bad line elsewhere is an error."""
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
            if line.strip():
                rows.append(json.loads(line))
        except json.JSONDecodeError:
            lineno = data.count(b"\n", 0, pos) + 1
            raise UsageError(f"{path}: line {lineno} is not valid JSON") from None
        pos = nl + 1
    good_end = pos
    if repair and good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return rows


class RunStore:
    def __init__(self, out: Path | str):
        self.dir = Path(out)

    def open(self, manifest: dict[str, Any]) -> set[str]:
        """Create or resume the run; returns the ids of episodes already finished."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / MANIFEST
        if path.exists():
            old = json.loads(path.read_text())
            diff = [k for k in IDENTITY_KEYS if old.get(k) != manifest.get(k)]
            if diff:
                raise UsageError(
                    f"{self.dir} holds a different run ({', '.join(diff)} differ); "
                    "rerun with the same arguments to resume, or choose another --out"
                )
        else:
            write_json_atomic(path, manifest)
        return {row["episode_id"] for row in read_jsonl(self.dir / TRAJECTORIES, repair=True)}

    def _append(self, name: str, line: str) -> None:
        with open(self.dir / name, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def add_trajectory(self, traj) -> None:
        self._append(TRAJECTORIES, traj.to_json())

    def add_infra_error(self, record: dict[str, Any]) -> None:
        self._append(INFRA_ERRORS, json.dumps(record, ensure_ascii=False))

    def manifest(self) -> dict[str, Any]:
        return json.loads((self.dir / MANIFEST).read_text())

    def trajectories(self) -> list[dict]:
        return read_jsonl(self.dir / TRAJECTORIES)

    def infra_errors(self) -> list[dict]:
        return read_jsonl(self.dir / INFRA_ERRORS)

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.dir / SUMMARY, summary)


def open_existing(path: Path | str) -> RunStore:
    store = RunStore(path)
    if not store.dir.is_dir():
        raise UsageError(f"no such run folder: {store.dir}")
    if not (store.dir / MANIFEST).exists():
        raise UsageError(f"{store.dir} is not a run folder (no {MANIFEST}); create one with `longhorizon run`")
    return store
