"""Teacher data: rejection-sample graded trajectories into a chat dataset with tools.

    longhorizon run --policy oracle --split train --out runs/teacher
    longhorizon data sft runs/teacher --min-reward 0.9 --out data/sft

Each kept episode becomes one row: ``messages`` (OpenAI chat format; tool-call ``arguments``
stay JSON strings, so Arrow never merges argument keys across rows), ``tools`` (the JSON
schemas the episode showed the agent, as its Trajectory recorded them, in one JSON string), and
where it came from. Saved as a Hugging Face dataset (``datasets.load_from_disk``), plus
``data.jsonl`` and ``summary.json``.
Only episodes the agent finished itself (status ``completed``) at or above ``min_reward`` are
kept; infrastructure errors never become data. An episode logged twice in one run folder is
read once (its first line, as ``eval`` counts it); ``duplicates_dropped`` says how many per
folder. The same episode id in two different folders is two episodes (e.g. two teachers).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError

MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id")


def clean_message(m: dict[str, Any]) -> dict[str, Any]:
    """A chat message with only the keys a template reads (Arrow adds None for missing ones)."""
    out = {k: m[k] for k in MESSAGE_KEYS if m.get(k) is not None}
    out.setdefault("content", "")
    if "tool_calls" in out:
        out["tool_calls"] = [
            {"id": c.get("id") or "", "type": "function",
             "function": {"name": c["function"]["name"], "arguments": _as_json_string(c["function"].get("arguments"))}}
            for c in out["tool_calls"]
        ]
    return out


def _as_json_string(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args if args is not None else {}, ensure_ascii=False)


def tools_by_task(task_ids: list[str]) -> dict[str, list[dict]]:
    """The tool schemas of each task, from Worlds built again: only for records older than
    Trajectory schema version 2, which did not keep the tools they showed."""
    from longhorizon.env.episode import tool_schemas, toolset
    from longhorizon.tasks.registry import get_task
    from longhorizon.core.aio import run_sync

    tasks = {tid: get_task(tid) for tid in sorted(set(task_ids))}
    by_apps = run_sync(tool_schemas(list(tasks.values())))
    return {tid: by_apps[toolset(t)] for tid, t in tasks.items()}


def select(rows: list[dict], min_reward: float) -> tuple[list[dict], Counter]:
    """Rows to keep (finished by the agent, reward >= min_reward) and why others were dropped."""
    kept, dropped = [], Counter()
    for r in rows:
        if r.get("status") != "completed":
            dropped[f"status {r.get('status')}"] += 1
        elif not r.get("grade") or float(r["grade"]["reward"]) < min_reward:
            dropped["reward below threshold"] += 1
        elif not any(m.get("role") == "assistant" for m in r.get("messages", [])):
            dropped["no assistant turn"] += 1
        else:
            kept.append(r)
    return kept, dropped


def holdout_refusal(counts: dict[str, Counter]) -> str | None:
    """The firewall: a message refusing data outside the train split, or None when all is train.
    ``counts`` maps a source (a run folder, a dataset) to its episodes per split."""
    bad = {src: {s: n for s, n in c.items() if s != "train"} for src, c in counts.items()}
    bad = {src: c for src, c in bad.items() if c}
    if not bad:
        return None
    where = "; ".join(f"{src}: " + ", ".join(f"{n} {s}" for s, n in sorted(c.items())) for src, c in bad.items())
    return (f"not training on held-out episodes ({where}); training data must come from the train split "
            "(pass --allow-holdout to do it anyway, and never report that holdout again)")


def build_sft_dataset(run_dirs: list[str | Path], out: str | Path, *, min_reward: float = 0.9,
                      overwrite: bool = False, allow_holdout: bool = False) -> dict[str, Any]:
    """Write the rejection-sampled dataset to ``out``; returns its summary. Episodes outside
    the train split are refused unless ``allow_holdout`` (the firewall)."""
    from datasets import Dataset

    from longhorizon.rollout.store import open_existing

    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise UsageError(f"{out} exists and is not empty (pass --overwrite to replace it)")
    if not run_dirs:
        raise UsageError("give at least one run folder")
    seen_dirs: dict[Path, str] = {}
    for d in run_dirs:
        real = Path(d).resolve()
        if real in seen_dirs:
            raise UsageError(f"run folder {d} is given twice (as {seen_dirs[real]} too); give each once")
        seen_dirs[real] = str(d)
    rows, duplicates = [], {}
    for d in run_dirs:
        episodes, dups = open_existing(d).episodes()
        if dups:
            duplicates[str(d)] = dups
        rows.extend({**r, "_run": str(d)} for r in episodes)
    refusal = holdout_refusal({str(d): Counter(r.get("split", "train") for r in rows if r["_run"] == str(d))
                               for d in run_dirs})
    if refusal and not allow_holdout:
        raise UsageError(refusal)
    kept, dropped = select(rows, min_reward)
    if not kept:
        raise UsageError(f"no trajectory in {', '.join(map(str, run_dirs))} reached reward {min_reward} "
                         "(finished by the agent); nothing to train on")
    rebuilt = tools_by_task([r["task_id"] for r in kept if not r.get("tools")])
    records = []
    for r in kept:
        records.append({
            "messages": [clean_message(m) for m in r["messages"]],
            "tools": json.dumps(r.get("tools") or rebuilt[r["task_id"]], ensure_ascii=False),
            "episode_id": r["episode_id"],
            "task_id": r["task_id"],
            "family": r["family"],
            "category": r["category"],
            "split": r.get("split", "train"),
            "reward": float(r["grade"]["reward"]),
            "tool_calls": len(r.get("tool_calls", [])),
            "policy": json.dumps(r.get("provenance", {}).get("policy"), sort_keys=True),
            "run": r["_run"],
        })
    out.mkdir(parents=True, exist_ok=True)
    Dataset.from_list(records).save_to_disk(str(out / "hf"))
    with open(out / "data.jsonl", "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    summary = {
        "runs": [str(d) for d in run_dirs],
        "min_reward": min_reward,
        "episodes_seen": len(rows),
        "duplicates_dropped": duplicates,
        "kept": len(records),
        "dropped": dict(dropped),
        "families": dict(sorted(Counter(r["family"] for r in records).items())),
        "mean_tool_calls": sum(r["tool_calls"] for r in records) / len(records),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def load_sft_dataset(path: str | Path):
    """The Hugging Face dataset written by ``build_sft_dataset`` (the folder or its ``hf/``)."""
    from datasets import load_from_disk

    p = Path(path)
    if (p / "hf").is_dir():
        p = p / "hf"
    if not p.is_dir():
        raise UsageError(f"no SFT dataset at {path} (write one with `longhorizon data sft`)")
    return load_from_disk(str(p))


def example_messages(row: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """(messages, tools) of one dataset row, as a chat template wants them."""
    tools = row["tools"]
    return [clean_message(m) for m in row["messages"]], (json.loads(tools) if isinstance(tools, str) else tools)
