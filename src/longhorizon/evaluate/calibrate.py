"""Calibration: how hard each family is for the models at hand, side by side.

``longhorizon calibrate --out DIR --policy P [--samples 4] ...`` plays the suite (or a split, a
few families) with one policy into ``DIR/runs/NAME``; every model calibrated into the same DIR
becomes one column of ``DIR/calibration.md`` (and ``.json``). Per family and model:

    pass@1 [95% CI]   pass^k (all k samples pass: reliability)   mean reward   flag

flags, per model: ``CEILING`` when pass@1 >= the ceiling (default 0.8: a family the model
already solves tells little; make it harder or expect no headroom), ``NEVER`` when no sample of
any instance passed (check the family is fair before calling it hard: the oracle column must
read 1.000, the grader notes of the model's episodes must name real mistakes). The protocol is
in docs/calibration.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

CEILING = 0.8


def run_name(policy: str, model: str | None) -> str:
    """A column name from the policy and its model (``openai-gpt-4.1``, ``oracle``)."""
    name = policy if not model else f"{policy}-{Path(str(model).rstrip('/')).name}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"


def _cell(stats: dict[str, Any], ceiling: float) -> dict[str, Any]:
    k = max((int(x) for x in stats["pass^k"]), default=1)
    flag = "CEILING" if stats["pass@1"] >= ceiling else ("NEVER" if stats["pass@1"] == 0 else "")  # 0: no sample passed
    return {"episodes": stats["episodes"], "tasks": stats["tasks"], "pass@1": stats["pass@1"],
            "pass@1_ci95": stats["pass@1_ci95"], "k": k, "pass^k": stats["pass^k"].get(str(k)),
            "pass^k_ci95": stats["pass^k_ci95"].get(str(k)), "mean_reward": stats["mean_reward"], "flag": flag}


def calibration(runs: dict[str, dict[str, Any]], ceiling: float = CEILING) -> dict[str, Any]:
    """``runs``: column name -> ``metrics.summarize`` of that run. Per family, per column, the
    cell above; plus each column's overall row and its flagged families."""
    if not 0 < ceiling <= 1:
        raise ValueError(f"ceiling must be in (0, 1], not {ceiling}")
    families = sorted({f for s in runs.values() for f in s["families"]})
    table = {f: {name: _cell(s["families"][f], ceiling) for name, s in runs.items() if f in s["families"]}
             for f in families}
    columns = {}
    for name, s in runs.items():
        cells = {f: row[name] for f, row in table.items() if name in row}
        columns[name] = {"overall": _cell(s["overall"], ceiling) if s["overall"]["episodes"] else None,
                         "complete": s["complete"],
                         "ceiling": sorted(f for f, c in cells.items() if c["flag"] == "CEILING"),
                         "never": sorted(f for f, c in cells.items() if c["flag"] == "NEVER")}
    return {"ceiling": ceiling, "columns": columns, "families": table}


def _fmt(c: dict[str, Any] | None) -> str:
    if not c:
        return "-"
    lo, hi = c["pass@1_ci95"]
    hat = f" · ^{c['k']} {c['pass^k']:.2f}" if c["k"] > 1 and c["pass^k"] is not None else ""
    flag = f" **{c['flag']}**" if c["flag"] else ""
    return f"{c['pass@1']:.3f} [{lo:.2f}, {hi:.2f}]{hat} · r {c['mean_reward']:.2f}{flag}"


def format_markdown(cal: dict[str, Any]) -> str:
    names = list(cal["columns"])
    lines = ["# Calibration", "",
             f"Per family and model: pass@1 [95% CI] · pass^k (every one of k samples passes) · mean reward "
             f"(r). **CEILING**: pass@1 ≥ {cal['ceiling']:g}; **NEVER**: no sample passed. "
             "(`longhorizon calibrate`; protocol: docs/calibration.md)", "",
             "| family | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for f, row in cal["families"].items():
        lines.append(f"| {f} | " + " | ".join(_fmt(row.get(n)) for n in names) + " |")
    lines.append("| **overall** | " + " | ".join(_fmt(cal["columns"][n]["overall"]) for n in names) + " |")
    lines += ["", "| model | complete | families at the ceiling | families never passed |", "|---|---|---:|---:|"]
    for n, col in cal["columns"].items():
        lines.append(f"| {n} | {'yes' if col['complete'] else 'NO (rerun to finish)'} | "
                     f"{len(col['ceiling'])} | {len(col['never'])} |")
    return "\n".join(lines) + "\n"


def load_runs(folder: Path) -> dict[str, dict[str, Any]]:
    """Every run under ``folder/runs``, summarized, by folder name."""
    from longhorizon.evaluate.metrics import summarize
    from longhorizon.rollout.store import MANIFEST, open_existing

    out = {}
    for run in sorted(p for p in (folder / "runs").glob("*") if (p / MANIFEST).exists()):
        store = open_existing(run)
        out[run.name] = summarize(store.trajectories(), store.infra_errors(), expected=store.manifest().get("episodes"))
    return out


def write_calibration(folder: Path, ceiling: float = CEILING) -> dict[str, Any]:
    """``folder/calibration.{md,json}`` over every run in ``folder/runs``."""
    cal = calibration(load_runs(folder), ceiling)
    (folder / "calibration.json").write_text(json.dumps(cal, indent=1) + "\n")
    (folder / "calibration.md").write_text(format_markdown(cal))
    return cal
