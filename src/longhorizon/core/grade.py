"""Criterion and Grade: how a task is judged.

A Criterion is one atomic, deterministic check over (final World, trajectory); a Grade holds
each criterion's result and turns them into the dense reward and pass/fail. Kept apart from
``core/task.py`` so that what reads a Grade (trajectories, metrics, RL rewards) needs nothing
about how tasks are built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from longhorizon.core.trajectory import Trajectory
    from longhorizon.core.world import World


CheckResult = bool | tuple[bool, str]

GRADER_BUGS: tuple[type[BaseException], ...] = (
    TypeError, AttributeError, NameError, KeyError, IndexError, ZeroDivisionError, AssertionError,
    ImportError, RecursionError)
"""Exceptions that mean the check's own code is wrong. A World the agent broke (a missing or
malformed file, a bad workbook) raises ``OSError``/``ValueError`` and friends, and fails the
criterion as the agent's doing; a check that must cope with absent keys or short lists says
so itself (``(False, "no column X")``) rather than let a KeyError or IndexError speak for it."""


@dataclass(frozen=True)
class Criterion:
    """One atomic, deterministic check. ``check(world, trajectory)`` returns a bool or (bool, note)."""

    id: str
    description: str
    kind: Literal["final_state", "process"]
    check: Callable[["World", "Trajectory"], CheckResult]
    weight: float = 1.0
    guard: bool = False
    """A constraint that doing nothing meets (nothing deleted, no stray mail). A guard earns
    its weight only once a *substantive* criterion (neither a guard nor dependent) earns, so
    inaction, and junk that only meets dependent criteria, score 0."""
    requires: tuple[str, ...] = ()
    """Ids of criteria that must be met for this one to earn: what junk can meet on its own
    (the right file name or layout, "read the inputs", "verified the output", "mentions X")
    pays only together with the content it is about. Such a criterion never unlocks guards."""

    def __post_init__(self) -> None:
        if self.kind not in ("final_state", "process"):
            raise ValueError(f"criterion {self.id}: kind must be final_state or process, not {self.kind!r}")
        if self.weight <= 0:
            raise ValueError(f"criterion {self.id}: weight must be positive")
        if isinstance(self.requires, str):
            raise ValueError(f"criterion {self.id}: requires must be a tuple of criterion ids")
        object.__setattr__(self, "requires", tuple(self.requires))
        if self.guard and self.requires:
            raise ValueError(f"criterion {self.id}: a guard cannot also require other criteria")


@dataclass(frozen=True)
class CriterionResult:
    id: str
    kind: str
    weight: float
    passed: bool
    note: str = ""
    guard: bool = False
    requires: tuple[str, ...] = ()
    grader_error: str = ""
    """``"TypeError: ..."`` when the check itself is broken (``GRADER_BUGS``): still scored as
    unmet, so a run goes on, but a bug in the grader, not the agent's failure; the suite's
    tests refuse it on oracle, null, perturbed and adversary runs."""
    infra_error: str = ""
    """``"JudgeError: ..."`` when the check could not be made for reasons outside the agent (a
    judged criterion's judge unreachable or replying garbage, ``core/judged.py``): scored as
    unmet here, and the episode runtime records the whole episode as an infrastructure error."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "requires", tuple(self.requires))  # lists, after a JSON round trip


@dataclass(frozen=True)
class Grade:
    """Each criterion's result; ``reward`` is the weighted fraction earned, ``passed`` means all met."""

    results: tuple[CriterionResult, ...]

    def earned(self) -> dict[str, bool]:
        """Which criteria earn their weight: met, with everything they require earned, and for
        a guard, once some substantive criterion (no guard, no requirements) has earned."""
        by_id = {r.id: r for r in self.results}
        memo: dict[str, bool] = {}

        def earns(cid: str, path: tuple[str, ...] = ()) -> bool:
            if cid not in memo:
                r = by_id.get(cid)
                memo[cid] = bool(r and r.passed and cid not in path
                                 and all(earns(q, path + (cid,)) for q in r.requires))
            return memo[cid]

        worked = any(earns(r.id) for r in self.results if not r.guard and not r.requires)
        return {r.id: earns(r.id) and (worked or not r.guard) for r in self.results}

    @property
    def reward(self) -> float:
        """Weighted fraction of criteria earned (see ``earned``): junk that meets only guards
        or dependent criteria scores 0."""
        total = sum(r.weight for r in self.results)
        earned = self.earned()
        return sum(r.weight for r in self.results if earned[r.id]) / total if total else 0.0

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    def grader_errors(self) -> dict[str, str]:
        """Criterion id -> the error of each check that broke (``CriterionResult.grader_error``)."""
        return {r.id: r.grader_error for r in self.results if r.grader_error}

    def infra_errors(self) -> dict[str, str]:
        """Criterion id -> why its check could not be made (``CriterionResult.infra_error``)."""
        return {r.id: r.infra_error for r in self.results if r.infra_error}

    def to_dict(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "passed": self.passed,
            "criteria": [{k: v for k, v in r.__dict__.items() if v or k not in ("grader_error", "infra_error")}
                         for r in self.results],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Grade":
        return cls(tuple(CriterionResult(**c) for c in d["criteria"]))
