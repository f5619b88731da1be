"""The noise floor of a paired comparison: how far a model disagrees with itself.

Two runs of the same model behind a server need not agree (a sampled token at a tiny
temperature, batched numerics that depend on what else is in flight), so a Δ between two
models mixes their difference with run-to-run noise. Given a repeat run A2 of model A, the
floor is measured exactly as the comparison is (``metrics.compare`` of A and A2):

    self-disagreement = share of paired tasks whose pass verdict differs between A and A2
                        (first sample of each task, the greedy episode, as McNemar's pairs)
    self-Δ            = A2 − A, with its paired bootstrap 95% interval [lo, hi]
    floor             = max(|lo|, |hi|)

A model-vs-model Δ is **inside the floor** when |Δ| ≤ floor: the same model, run again,
moved at least that far within its 95% interval, so the comparison cannot tell the two models
apart from a rerun. Reported for pass@1 and mean reward. A floor of 0 (A2 agrees with A on
every task) puts only Δ = 0 inside.
"""

from __future__ import annotations

from typing import Any

from longhorizon.evaluate.metrics import compare

MEASURES = (("pass@1", "delta_pass@1"), ("mean_reward", "delta_mean_reward"))


def noise_floor(rows_a: list[dict], rows_a2: list[dict]) -> dict[str, Any]:
    """A vs its repeat A2 (rows in ``metrics.compare``'s shape): self-disagreement, self-Δ and floor."""
    c = compare(rows_a, rows_a2)
    n = c["paired_tasks"]
    if not n:
        return {"paired_tasks": 0, "disagreements": None, "self_disagreement": None,
                **{f"self_delta_{m}": None for m, _ in MEASURES}, **{f"self_delta_{m}_ci95": None for m, _ in MEASURES},
                "floor": {m: None for m, _ in MEASURES}}
    flips = c["mcnemar"]["a_only_passed"] + c["mcnemar"]["b_only_passed"]
    out: dict[str, Any] = {"paired_tasks": n, "disagreements": flips, "self_disagreement": flips / n}
    floor = {}
    for m, key in MEASURES:
        lo, hi = c[f"{key}_ci95"]
        out[f"self_delta_{m}"] = c[key]
        out[f"self_delta_{m}_ci95"] = [lo, hi]
        floor[m] = max(abs(lo), abs(hi))
    out["floor"] = floor
    return out


def inside(comparison: dict[str, Any], floor: dict[str, Any]) -> dict[str, bool | None]:
    """Per measure, whether the comparison's Δ lies inside the floor (|Δ| ≤ floor); None when
    either is unknown (nothing paired)."""
    out: dict[str, bool | None] = {}
    for m, key in MEASURES:
        d, f = comparison.get(key), (floor.get("floor") or {}).get(m)
        out[m] = None if d is None or f is None else abs(d) <= f + 1e-12
    return out


def with_floor(comparison: dict[str, Any], rows_a: list[dict], rows_a2: list[dict]) -> dict[str, Any]:
    """``comparison`` (A vs B) with ``noise_floor`` (A vs A2) and ``inside_noise_floor`` added."""
    floor = noise_floor(rows_a, rows_a2)
    return {**comparison, "noise_floor": floor, "inside_noise_floor": inside(comparison, floor)}


def format_floor(c: dict[str, Any], name_repeat: str = "A2") -> list[str]:
    """Text lines: the floor, then whether Δpass@1 and Δreward are inside it."""
    f = c.get("noise_floor")
    if f is None:
        return []
    if not f["paired_tasks"]:
        return [f"noise floor: A and its repeat ({name_repeat}) have no tasks in common: n/a"]
    lo, hi = f["self_delta_pass@1_ci95"]
    rlo, rhi = f["self_delta_mean_reward_ci95"]
    lines = [
        f"noise floor (A vs its repeat {name_repeat}, {f['paired_tasks']} paired tasks): self-disagreement "
        f"{f['disagreements']}/{f['paired_tasks']} = {f['self_disagreement']:.3f}",
        f"  self-Δ pass@1 {f['self_delta_pass@1']:+.3f}  95% CI [{lo:+.3f}, {hi:+.3f}]  floor ±{f['floor']['pass@1']:.3f}",
        f"  self-Δ reward {f['self_delta_mean_reward']:+.3f}  95% CI [{rlo:+.3f}, {rhi:+.3f}]  "
        f"floor ±{f['floor']['mean_reward']:.3f}",
    ]
    for m, key in MEASURES:
        verdict = c["inside_noise_floor"][m]
        if verdict is None:
            continue
        label = "INSIDE the noise floor: not distinguishable from a rerun of A" if verdict else "outside the noise floor"
        lines.append(f"Δ {m} {c[key]:+.3f}: {label} (|Δ| {'≤' if verdict else '>'} {f['floor'][m]:.3f})")
    return lines


def label(c: dict[str, Any]) -> str:
    """A short cell for tables: "inside" / "outside" the pass@1 floor, "" without a repeat."""
    v = (c.get("inside_noise_floor") or {}).get("pass@1")
    return "" if v is None else ("inside" if v else "outside")
