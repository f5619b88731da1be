"""Pair two runs episode by episode and compare their behaviour metrics.

Episodes pair on (task, sample); each run's episodes are counted once (its first line,
``rollout.store.unique_episodes``). Every pair gets an outcome (A then B):

    fail→pass   A failed, B passed        pass→fail   A passed, B failed
    both-fail   neither passed             both-pass   both passed

A metric's paired statistics are over *tasks*: per task, the mean over its paired samples
where the metric is defined on both sides; Δ = mean(B - A) with a 95% paired bootstrap
interval over tasks (``evaluate.metrics.paired_bootstrap_ci``, one set of resampled tasks
for all metrics of a group). Pass@1, reward and McNemar come from ``evaluate.metrics.compare``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from longhorizon.analysis.behaviours import METRICS, metrics
from longhorizon.core.trajectory import Trajectory
from longhorizon.evaluate.metrics import BOOTSTRAP, SEED, compare, paired_bootstrap_ci
from longhorizon.rollout.store import unique_episodes

OUTCOMES = ("fail→pass", "pass→fail", "both-fail", "both-pass")


def outcome(a_passed: bool, b_passed: bool) -> str:
    return {(False, True): "fail→pass", (True, False): "pass→fail",
            (False, False): "both-fail", (True, True): "both-pass"}[(bool(a_passed), bool(b_passed))]


@dataclass
class Pair:
    task_id: str
    sample: int
    category: str
    family: str
    a: Trajectory
    b: Trajectory
    metrics_a: dict[str, Any] = field(default_factory=dict)
    metrics_b: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        return outcome(self.a.passed, self.b.passed)

    @property
    def id(self) -> str:
        return f"{self.task_id}#{self.sample}"


def make_pairs(rows_a: list[dict], rows_b: list[dict]) -> tuple[list[Pair], dict[str, int]]:
    """Pairs on (task, sample), sorted; and how many episodes each run had with no partner."""
    ua, _ = unique_episodes(list(rows_a))
    ub, _ = unique_episodes(list(rows_b))
    by_a = {(r["task_id"], r["sample"]): r for r in ua}
    by_b = {(r["task_id"], r["sample"]): r for r in ub}
    pairs = []
    for key in sorted(set(by_a) & set(by_b)):
        a, b = Trajectory.from_dict(by_a[key]), Trajectory.from_dict(by_b[key])
        pairs.append(Pair(a.task_id, a.sample, a.category, a.family, a, b, metrics(a), metrics(b)))
    common = set(by_a) & set(by_b)
    return pairs, {"only_a": len(set(by_a) - common), "only_b": len(set(by_b) - common)}


def metric_stats(pairs: list[Pair], n_boot: int = BOOTSTRAP, seed: int = SEED) -> dict[str, dict[str, Any]]:
    """Per metric: tasks with the metric defined on both sides, mean A, mean B, Δ and its 95%
    paired bootstrap interval over those tasks."""
    out = {}
    for name in METRICS:
        per_task: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for p in pairs:
            va, vb = p.metrics_a.get(name), p.metrics_b.get(name)
            if va is not None and vb is not None:
                per_task[p.task_id].append((float(va), float(vb)))
        tasks = sorted(per_task)
        a = np.array([np.mean([x for x, _ in per_task[t]]) for t in tasks])
        b = np.array([np.mean([y for _, y in per_task[t]]) for t in tasks])
        if not tasks:
            out[name] = {"tasks": 0, "a": None, "b": None, "delta": None, "delta_ci95": None}
            continue
        (ci,) = paired_bootstrap_ci([b - a], n_boot, seed)
        out[name] = {"tasks": len(tasks), "a": float(a.mean()), "b": float(b.mean()),
                     "delta": float((b - a).mean()), "delta_ci95": ci}
    return out


def outcome_counts(pairs: list[Pair]) -> dict[str, int]:
    counts = {o: 0 for o in OUTCOMES}
    for p in pairs:
        counts[p.outcome] += 1
    return counts


def first_divergence(a: Trajectory, b: Trajectory) -> int | None:
    """Index of the first tool call where the two episodes differ (name or arguments); the
    shorter length when one is a prefix of the other; None when they are the same calls."""
    for i, (x, y) in enumerate(zip(a.tool_calls, b.tool_calls)):
        if x.name != y.name or x.arguments != y.arguments:
            return i
    if len(a.tool_calls) != len(b.tool_calls):
        return min(len(a.tool_calls), len(b.tool_calls))
    return None


def analyze_pairs(rows_a: list[dict], rows_b: list[dict], n_boot: int = BOOTSTRAP,
                  seed: int = SEED) -> tuple[dict[str, Any], list[Pair]]:
    """The whole comparison as JSON-ready data (overall, per outcome, per category, the
    pair lists) and the pairs themselves (for the report's viewer)."""
    pairs, unpaired = make_pairs(rows_a, rows_b)
    by_cat: dict[str, list[Pair]] = defaultdict(list)
    by_outcome: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        by_cat[p.category].append(p)
        by_outcome[p.outcome].append(p)
    result = {
        "paired_episodes": len(pairs),
        "paired_tasks": len({p.task_id for p in pairs}),
        **unpaired,
        "outcome": compare(rows_a, rows_b, n_boot, seed),
        "outcomes": outcome_counts(pairs),
        "metrics": metric_stats(pairs, n_boot, seed),
        "by_outcome": {o: metric_stats(by_outcome[o], n_boot, seed) for o in OUTCOMES if by_outcome[o]},
        "categories": {c: {"pairs": len(ps), "outcomes": outcome_counts(ps), "metrics": metric_stats(ps, n_boot, seed)}
                       for c, ps in sorted(by_cat.items())},
        "pairs": {o: [{"pair": p.id, "task_id": p.task_id, "sample": p.sample, "category": p.category,
                       "reward_a": p.a.reward, "reward_b": p.b.reward,
                       "first_divergence": first_divergence(p.a, p.b)}
                      for p in by_outcome[o]] for o in OUTCOMES},
        "episodes": [{"pair": p.id, "outcome": p.outcome, "a": p.metrics_a, "b": p.metrics_b} for p in pairs],
    }
    return result, pairs
