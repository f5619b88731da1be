"""Finds every TaskFamily in ``longhorizon.tasks`` and turns (family, seed) into Tasks.

A family module registers itself with ``@register``; adding a family is adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil

from longhorizon.core.errors import UsageError
from longhorizon.core.task import HOLDOUT_SEED_BASE, SPLITS, Task, TaskFamily

_FAMILIES: dict[str, TaskFamily] = {}
_loaded = False


def register(cls: type[TaskFamily]) -> type[TaskFamily]:
    fam = cls()
    if not fam.name or not fam.category or not fam.apps:
        raise ValueError(f"{cls.__name__} must set name, category and apps")
    if fam.name in _FAMILIES and type(_FAMILIES[fam.name]) is not cls:
        raise ValueError(f"two task families are named {fam.name!r}")
    _FAMILIES[fam.name] = fam
    return cls


def _load() -> None:
    global _loaded
    if _loaded:
        return
    import longhorizon.tasks as pkg

    for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(mod.name)
    _loaded = True


def families() -> list[TaskFamily]:
    _load()
    return [_FAMILIES[k] for k in sorted(_FAMILIES)]


def get_family(name: str) -> TaskFamily:
    _load()
    if name not in _FAMILIES:
        raise UsageError(f"unknown task family {name!r} (see `longhorizon tasks list`)")
    return _FAMILIES[name]


def get_task(task_id: str) -> Task:
    """``family-000123`` -> Task."""
    name, sep, seed = task_id.rpartition("-")
    if not sep or not seed.isdigit():
        raise UsageError(f"bad task id {task_id!r}: expected FAMILY-SEED, e.g. expense_rollup-000003")
    return get_family(name).generate(int(seed))


def split_seeds(split: str, n: int) -> list[int]:
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}: choose from {', '.join(SPLITS)}")
    if n < 1:
        raise UsageError("--seeds must be at least 1")
    base = HOLDOUT_SEED_BASE if split == "holdout" else 0
    return list(range(base, base + n))


def tasks_for(split: str, seeds: int, family_names: list[str] | None = None) -> list[Task]:
    fams = [get_family(n) for n in family_names] if family_names else families()
    return [f.generate(s) for f in fams for s in split_seeds(split, seeds)]
