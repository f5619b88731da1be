"""The suite's listing without importing a single family module.

Importing every family (and through them the apps and the MCP SDK) costs seconds; a listing
needs only each family's name, category, apps, levels and holdout flag. Those are cached per suite
fingerprint (a hash of the sources that define tasks, so adding or editing a family refreshes
it), and the listing is built from stand-ins that generate a Task, when asked, through the real
family.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import longhorizon
from longhorizon.core.task import Task, TaskFamily
from longhorizon.tasks.registry import families, get_family, instances


@functools.cache
def suite_fingerprint() -> str:
    """A hash of the sources a task's content depends on (core, apps, tasks, env); read once
    per process."""
    root = Path(longhorizon.__file__).parent
    h = hashlib.sha256()
    for sub in ("core", "apps", "tasks", "env"):
        for p in sorted((root / sub).rglob("*.py")):
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "longhorizon"


def write_cache(path: Path, data) -> None:
    """Atomically; a read-only home only costs recomputation."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass


class ListedFamily(TaskFamily):
    """A family as the cache knows it: enough to name, place and list its instances."""

    def __init__(self, name: str, category: str, apps: list[str], holdout_family: bool, levels: int):
        self.name, self.category, self.apps, self.holdout_family = name, category, tuple(apps), holdout_family
        self.levels = levels

    def generate(self, seed: int) -> Task:
        return get_family(self.name).generate(seed)

    def instance(self, seed: int, level: int | None = None) -> Task:
        return get_family(self.name).instance(seed, level)


def listed_families() -> list[TaskFamily]:
    """Every family, from the cache when it holds this suite (else imported, then cached)."""
    path = cache_dir() / f"families-{suite_fingerprint()}.json"
    try:
        cards = json.loads(path.read_text())
    except (OSError, ValueError):
        cards = [{"name": f.name, "category": f.category, "apps": list(f.apps), "holdout_family": f.holdout_family,
                  "levels": f.levels}
                 for f in families()]
        write_cache(path, cards)
    return [ListedFamily(**c) for c in cards]


def listed_instances(split: str, seeds: int | None = None, family_names: list[str] | None = None,
                     level: int | None = None) -> list[tuple[TaskFamily, int, int]]:
    """``registry.instances`` over the cached families: the same (family, seed, level), in order."""
    return instances(split, seeds, family_names, among=listed_families(), level=level)
