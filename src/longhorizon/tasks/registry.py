"""Finds every TaskFamily in ``longhorizon.tasks`` and turns (family, seed) into Tasks.

A family module registers itself with ``@register``; adding a family is adding a module.
"""

from __future__ import annotations

import importlib
import math
import pkgutil

from longhorizon.core.errors import UsageError
from longhorizon.core.task import HOLDOUT_SEED_BASE, SPLITS, Task, TaskFamily

SUITE_TRAIN = 363
SUITE_HOLDOUT = 40
HOLDOUT_FAMILY_SEEDS = 4
"""The suite's size, as in the published recipe: at least 363 train and 40 holdout instances,
spread evenly over the training families, plus a few instances of each holdout family."""

HOLDOUT_FAMILIES: frozenset[str] = frozenset({
    "shared_inbox_routing",          # mail triage (invoice_followup trains)
    "shared_drive_retention",        # file organisation (downloads_cleanup trains)
    "access_log_incident_timeline",  # log analysis (log_error_summary trains)
    "log_last_warning",              # log analysis, short horizon (log_first_error trains)
})
"""Families never used for training (in different categories), for transfer within the suite."""

_FAMILIES: dict[str, TaskFamily] = {}
_loaded = False


def register(cls: type[TaskFamily]) -> type[TaskFamily]:
    fam = cls()
    fam.holdout_family = fam.name in HOLDOUT_FAMILIES
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


def suite_seeds(split: str, family: TaskFamily, n_train: int | None = None) -> list[int]:
    """The seeds of ``family`` that the suite puts in ``split`` (empty if none). ``n_train``: how
    many training families the suite has (default: counted among the registered ones)."""
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}: choose from {', '.join(SPLITS)}")
    if family.holdout_family:
        n = HOLDOUT_FAMILY_SEEDS if split == "holdout-family" else 0
    elif split == "holdout-family":
        n = 0
    else:
        if n_train is None:
            n_train = sum(not f.holdout_family for f in families())
        n = math.ceil((SUITE_TRAIN if split == "train" else SUITE_HOLDOUT) / n_train)
    base = 0 if split == "train" else HOLDOUT_SEED_BASE
    return list(range(base, base + n))


def tasks_for(split: str, seeds: int | None = None, family_names: list[str] | None = None) -> list[Task]:
    """The Tasks of ``split``: the suite's instances, or ``seeds`` per family when given.

    Holdout families never yield train or holdout instances, whatever ``seeds`` says.
    """
    return [f.generate(s) for f, s in instances(split, seeds, family_names)]


def instances(split: str, seeds: int | None = None, family_names: list[str] | None = None,
              among: list[TaskFamily] | None = None) -> list[tuple[TaskFamily, int]]:
    """(family, seed) of each Task ``tasks_for`` would generate, in the same order, generating none.
    ``among``: the suite's families (default: the registered ones; tasks/listing.py passes
    cached stand-ins so a listing imports no family module)."""
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}: choose from {', '.join(SPLITS)}")
    if seeds is not None and seeds < 1:
        raise UsageError("--seeds must be at least 1")
    suite = families() if among is None else among
    if family_names:
        by_name = {f.name: f for f in suite}
        for n in family_names:
            if n not in by_name:
                raise UsageError(f"unknown task family {n!r} (see `longhorizon tasks list`)")
        fams = [by_name[n] for n in family_names]
    else:
        fams = suite
    n_train = sum(not f.holdout_family for f in suite)
    chosen = []
    for f in fams:
        ss = suite_seeds(split, f, n_train)
        if seeds is not None and ss:
            ss = list(range(ss[0], ss[0] + seeds))
        chosen.extend((f, s) for s in ss)
    return chosen
