"""What a checkpoint was trained on, and what chose it: the firewall's paper trail.

Every trained model folder's provenance file (``longhorizon_model.json``) gets a ``training``
list, one record per stage, the parent model's records first::

    {"stage": "sft", "inputs": [{"kind": "sft_data", "path": ..., "source": "suite",
                                 "runs": [{"path": ..., "split": "train", "source": "suite", ...}]}],
     "chosen_by": {"signal": "final step", "source": "internal"}}

An input's ``source`` is ``suite`` when it comes from the suite's own splits (a run of the
suite, an SFT data folder built from such runs, RL on a suite split); anything else is named
as it is (``external:<name>``) or ``unknown`` when it cannot be traced. ``firewall_problems``
lists what breaks the firewall: an input that is not the suite's, a split other than train and
holdout, a checkpoint chosen by anything but an internal signal. The transfer report refuses
to call a comparison clean while that list is not empty.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TRAINING_SPLITS = ("train", "holdout")  # the holdout may choose checkpoints; it is internal
INTERNAL_SIGNALS = ("final step", "internal holdout", "train reward", "train loss", "train dev pass")
SUITE_SPLITS = ("train", "holdout", "holdout-family")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_input(run_dir: str | Path) -> dict[str, Any]:
    """One run folder as a training input: its split, policy and whether it is the suite's."""
    manifest = _read(Path(run_dir) / "run.json")
    if manifest is None:
        return {"path": str(run_dir), "source": "unknown", "why": "no readable run.json"}
    split = manifest.get("split")
    source = "suite" if split in SUITE_SPLITS and manifest.get("suite_version") is not None else \
        (manifest.get("source") or "unknown")
    return {"path": str(run_dir), "split": split, "families": manifest.get("families"),
            "policy": manifest.get("policy"), "suite_version": manifest.get("suite_version"), "source": source}


def sft_input(data_dir: str | Path) -> dict[str, Any]:
    """An SFT data folder (``longhorizon data sft``) as an input: the runs it was built from."""
    summary = _read(Path(data_dir) / "summary.json")
    if summary is None or not isinstance(summary.get("runs"), list):
        return {"kind": "sft_data", "path": str(data_dir), "source": "unknown",
                "why": "no summary.json listing the runs it came from"}
    runs = [run_input(r) for r in summary["runs"]]
    source = "suite" if runs and all(r["source"] == "suite" for r in runs) else "mixed"
    return {"kind": "sft_data", "path": str(data_dir), "min_reward": summary.get("min_reward"),
            "examples": summary.get("kept"), "runs": runs, "source": source}


def rl_input(split: str, seeds: int | None, families: list[str] | None,
             seed_offset: int | None = None, levels: list[int] | None = None) -> dict[str, Any]:
    """RL's tasks: ``seeds`` per family of ``split``, from ``seed_offset`` past the split's first
    seed, at ``levels`` (None: each family's default)."""
    return {"kind": "rl_tasks", "split": split, "seeds": seeds, "seed_offset": seed_offset, "families": families,
            "levels": levels, "source": "suite" if split in SUITE_SPLITS else "unknown"}


def stage_record(stage: str, inputs: list[dict], chosen_by: str = "final step") -> dict[str, Any]:
    return {"stage": stage, "inputs": inputs,
            "chosen_by": {"signal": chosen_by, "source": "internal" if chosen_by in INTERNAL_SIGNALS else "external"}}


def firewall_problems(prov: dict[str, Any] | None) -> list[str]:
    """Why a model's provenance does not prove the firewall held (empty: it does)."""
    if prov is None:
        return ["no provenance file: what the model was trained on is unknown"]
    problems = []
    for rec in prov.get("training", []) or []:
        st = rec.get("stage", "?")
        for inp in rec.get("inputs", []):
            items = inp.get("runs") if inp.get("kind") == "sft_data" and inp.get("runs") else [inp]
            for it in items:
                where = it.get("path") or inp.get("kind")
                if it.get("source") != "suite":
                    problems.append(f"{st}: input {where} is not from the suite (source: {it.get('source')}"
                                    + (f"; {it['why']}" if it.get("why") else "") + ")")
                elif it.get("split") not in TRAINING_SPLITS:
                    problems.append(f"{st}: input {where} uses split {it.get('split')!r}, not train/holdout")
        ch = rec.get("chosen_by") or {}
        if ch.get("source") != "internal":
            problems.append(f"{st}: checkpoint chosen by {ch.get('signal')!r}, not an internal signal")
    return problems


def training_chain(parent: dict[str, Any] | None, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The parent model's training records followed by this stage's."""
    return [*((parent or {}).get("training") or []), record]


def chosen_checkpoint(prov: dict[str, Any], signal: str, **detail: Any) -> dict[str, Any]:
    """The provenance of one of a training run's checkpoints, from the final model's (``prov``):
    the same records, the last stage's ``chosen_by`` naming ``signal`` (and ``detail``: which
    step, its score). A checkpoint folder has no provenance file of its own, and a model trained
    from it would otherwise lose every record before it."""
    import copy

    out = copy.deepcopy(prov)
    records = out.get("training") or []
    if records:
        records[-1]["chosen_by"] = {**stage_record("", [], signal)["chosen_by"], **detail}
    return out
