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
    # One family from each of 13 categories; the category's other family trains, so "unseen
    # family, seen category" is measured. None subclasses, shares a generator with or re-asks the
    # job of a train family (docs/holdout.md gives the nearest train family of each and why).
    "customer_complaint_resolution",  # order operations: mail, store, files
    "incident_postmortem_deck",       # slide decks: slides, tickets, chat, files
    "leaver_offboarding",             # HR onboarding: sheets, calendar, tickets, mail
    "mfa_account_recovery",           # dual-control support: user
    "new_joiner_faq",                 # document drafting: mail, docs, files
    "sales_commission_calc",          # spreadsheet analysis: sheets, files
    "shared_drive_retention",         # file organisation: files
    "shared_inbox_routing",           # mail triage: mail, files
    "sla_breach_escalation",          # support tickets: tickets, wiki
    "trade_show_leads",               # CRM updates: crm, files
    "vendor_research_brief",          # search and research: chat, search, files
    "wiki_link_audit",                # wiki upkeep: wiki, files
    "workshop_coordination",          # meeting coordination: mail, calendar
})
"""Whole families never used for training, for transfer to unseen jobs within the suite."""

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


def parse_task_id(task_id: str) -> tuple[str, int, int | None]:
    """``family-000123`` -> (family, 123, None); ``family-000123@L1`` -> (family, 123, 1)."""
    head, at, lvl = task_id.partition("@L")
    name, sep, seed = head.rpartition("-")
    if not sep or not seed.isdigit() or (at and not lvl.isdigit()):
        raise UsageError(f"bad task id {task_id!r}: expected FAMILY-SEED or FAMILY-SEED@LLEVEL, "
                         "e.g. expense_rollup-000003 or expense_rollup-000003@L1")
    return name, int(seed), int(lvl) if at else None


def get_task(task_id: str) -> Task:
    """``family-000123`` (the default level) or ``family-000123@L1`` -> Task."""
    name, seed, level = parse_task_id(task_id)
    return get_family(name).instance(seed, level)


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


def tasks_for(split: str, seeds: int | None = None, family_names: list[str] | None = None,
              level: int | None = None) -> list[Task]:
    """The Tasks of ``split``: the suite's instances, or ``seeds`` per family when given, at
    ``level`` (None: each family's default).

    Holdout families never yield train or holdout instances, whatever ``seeds`` or ``level`` say.
    """
    return [f.instance(s, lv) for f, s, lv in instances(split, seeds, family_names, level=level)]


def instances(split: str, seeds: int | None = None, family_names: list[str] | None = None,
              among: list[TaskFamily] | None = None,
              level: int | None = None) -> list[tuple[TaskFamily, int, int]]:
    """(family, seed, level) of each Task ``tasks_for`` would generate, in the same order,
    generating none. ``among``: the suite's families (default: the registered ones;
    tasks/listing.py passes cached stand-ins so a listing imports no family module).

    ``level``: None gives each family's default (top) level; a number gives that level of every
    family that has it (families with fewer levels are left out, or refused when named)."""
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}: choose from {', '.join(SPLITS)}")
    if seeds is not None and seeds < 1:
        raise UsageError("--seeds must be at least 1")
    if level is not None and (isinstance(level, bool) or not isinstance(level, int) or level < 1):
        raise UsageError(f"--level must be a whole number of at least 1, not {level!r}")
    suite = families() if among is None else among
    if family_names:
        by_name = {f.name: f for f in suite}
        for n in family_names:
            if n not in by_name:
                raise UsageError(f"unknown task family {n!r} (see `longhorizon tasks list`)")
        fams = [by_name[n] for n in family_names]
        for f in fams:
            f.level_of(level)  # a named family without that level is refused
    else:
        fams = [f for f in suite if level is None or level <= f.levels]
    n_train = sum(not f.holdout_family for f in suite)
    chosen = []
    for f in fams:
        ss = suite_seeds(split, f, n_train)
        if seeds is not None and ss:
            ss = list(range(ss[0], ss[0] + seeds))
        chosen.extend((f, s, f.level_of(level)) for s in ss)
    return chosen
