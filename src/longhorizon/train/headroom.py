"""Choosing the SFT checkpoint RL starts from: one that leaves headroom.

GSPO learns from reward differences inside a group of episodes. From a model that already
passes every task greedy, most groups are all-pass and carry no signal; from one that passes
nothing, all-fail. So RL starts from the earliest SFT checkpoint whose greedy pass rate on a
*dev set* lies in a band (default [0.25, 0.60]). The dev set is train-split instances on seeds
of their own (``DEV_OFFSET`` on): not the teacher's, not RL's, never the holdout, so choosing a
checkpoint reads nothing an evaluation later reports. The steps are searched by bisection
(``search``), so a long SFT run costs a few dev evaluations, not one per step.
"""

from __future__ import annotations

from pathlib import Path

DEV_OFFSET = 90_000
"""Dev seeds start here in the train split: past the teacher's (0..N-1) and RL's (``RLConfig.seed_offset``,
50,000 by default), below the holdout's."""


def dev_tasks(families: list[str], n: int, level: int | None = None) -> list:
    """``n`` dev instances of each family (train split, seeds from ``DEV_OFFSET``), at ``level``."""
    from longhorizon.tasks.registry import get_family, suite_seeds

    out = []
    for name in families:
        f = get_family(name)
        start = suite_seeds("train", f)[0] + DEV_OFFSET
        out += [f.instance(s, level) for s in range(start, start + n)]
    return out


def step_models(folder: str | Path) -> dict[int, Path]:
    """The models an SFT run kept after each step (``SFTConfig.keep_steps``: ``folder/steps/step-N``), by step."""
    return {int(p.name.split("-")[1]): p for p in (Path(folder) / "steps").glob("step-*")
            if p.is_dir() and p.name.split("-")[1].isdigit() and (p / "config.json").exists()}


def search(steps: list[int], pass_rate, band: tuple[float, float] | list[float]) -> dict[int, float]:
    """Play steps (``pass_rate(step)``) to find the earliest whose dev pass reaches the band's low
    end, by bisection: SFT's pass rate climbs with its steps (noisily), so ~log2(steps) + 1 are
    played instead of all of them (8 steps: 3-4). Returns every played step's rate, for
    ``choose_checkpoint``; the earliest step at or past the low end is always among them, and so
    is the last one below it when there is one."""
    order = sorted(steps)
    rates: dict[int, float] = {}
    lo, hi = 0, len(order) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        k = order[mid]
        rates[k] = pass_rate(k)
        if rates[k] >= band[0]:
            hi = mid - 1
        else:
            lo = mid + 1
    return rates


def choose_checkpoint(rates: dict[int, float], band: tuple[float, float] | list[float]) -> tuple[int | None, str]:
    """The step to start RL from, and why: the earliest with dev pass in ``band``; else (SFT jumped
    over the band between two checkpoints) the one closest to the band's middle among those
    strictly between 0 and 1; else None (no checkpoint has headroom)."""
    lo, hi = band
    inside = [k for k in sorted(rates) if lo <= rates[k] <= hi]
    if inside:
        return inside[0], f"the earliest checkpoint with dev pass in [{lo:g}, {hi:g}]"
    mid = [k for k in sorted(rates) if 0 < rates[k] < 1]
    if not mid:
        return None, f"no checkpoint has a dev pass rate strictly between 0 and 1 ({format_rates(rates)})"
    middle = (lo + hi) / 2
    k = min(mid, key=lambda k: (abs(rates[k] - middle), k))
    return k, f"no checkpoint in [{lo:g}, {hi:g}]: the one closest to {middle:.3f} strictly between 0 and 1"


def format_rates(rates: dict[int, float]) -> str:
    """Dev pass rates by step, in step order, as the start stage and the report print them."""
    return ", ".join(f"step {k} {v:.3f}" for k, v in sorted(rates.items())) or "none played"
