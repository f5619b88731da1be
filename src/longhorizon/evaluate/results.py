"""``results.json``: one external benchmark's per-entry results, summarized and comparable.

The shape, shared by every external benchmark (BFCL, τ²-bench)::

    {"benchmark": "bfcl", "model": NAME, "meta": {...},
     "entries": [{"id": ..., "category": ..., "passed": bool, "reward": float, "trial": int?}],
     "summary": {"overall": {...}, "categories": {CATEGORY: {...}}}}

Summaries use the same statistics as internal runs (``metrics``): pass rate with a Wilson 95%
interval, mean reward with a bootstrap interval. Two results of one benchmark pair by entry id
(and trial) in ``compare_results``, which reuses ``metrics.compare``: Δ with a paired
bootstrap interval and McNemar's exact p.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from longhorizon.core.errors import UsageError
from longhorizon.core.json_files import read_json
from longhorizon.evaluate.metrics import bootstrap_mean, compare, wilson


def _group(entries: list[dict]) -> dict[str, Any]:
    k, n = sum(bool(e["passed"]) for e in entries), len(entries)
    rewards = [float(e["reward"]) for e in entries]
    return {"entries": n, "accuracy": k / n if n else 0.0, "accuracy_ci95": list(wilson(k, n)),
            "mean_reward": float(np.mean(rewards)) if n else 0.0, "mean_reward_ci95": list(bootstrap_mean(rewards))}


def summarize_entries(entries: list[dict]) -> dict[str, Any]:
    """Overall (every entry pooled) and per category (or domain). Also the unweighted mean of the category
    accuracies, which is closer to how BFCL's leaderboard averages (its overall weights
    sections further; this is not that number)."""
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for e in entries:
        by_cat[e.get("category") or e.get("domain") or "all"].append(e)
    cats = {k: _group(v) for k, v in sorted(by_cat.items())}
    return {"overall": _group(entries), "categories": cats,
            "mean_of_categories": float(np.mean([c["accuracy"] for c in cats.values()])) if cats else 0.0}


def format_markdown(res: dict[str, Any]) -> str:
    s = res["summary"]
    lines = [f"# {res['benchmark']}: {res['model']}", ""]
    for k, v in res.get("meta", {}).items():
        lines.append(f"- {k}: {', '.join(map(str, v)) if isinstance(v, list) else v}")
    lines += ["", "| category | entries | accuracy | 95% CI |", "|---|---:|---:|---|"]

    def row(name: str, g: dict) -> str:
        lo, hi = g["accuracy_ci95"]
        return f"| {name} | {g['entries']} | {g['accuracy']:.3f} | [{lo:.3f}, {hi:.3f}] |"

    lines += [row(k, g) for k, g in s["categories"].items()]
    lines += [row("**overall (pooled)**", s["overall"]),
              f"| mean of categories | | {s['mean_of_categories']:.3f} | |", ""]
    return "\n".join(lines)


def write_results(out: Path, benchmark: str, model: str, entries: list[dict], meta: dict) -> dict[str, Any]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    res = {"benchmark": benchmark, "model": model, "meta": meta, "entries": entries,
           "summary": summarize_entries(entries)}
    (out / "results.json").write_text(json.dumps(res, indent=1))
    (out / "results.md").write_text(format_markdown(res))
    return res


def is_results(path: str | Path) -> bool:
    """A results.json file, or a folder holding one (rather than a run folder)."""
    p = Path(path)
    return (p.is_file() and p.suffix == ".json") or (p.is_dir() and (p / "results.json").exists()
                                                     and not (p / "trajectories.jsonl").exists())


def load_results(path: str | Path) -> dict[str, Any]:
    """A results.json (or a folder holding one), checked entry by entry: an entry of the wrong
    shape is one UsageError naming it. An (id, trial) given twice is paired once by
    ``compare_results`` (``metrics.compare`` keeps the first and counts the rest)."""
    p = Path(path)
    p = p / "results.json" if p.is_dir() else p
    res = read_json(p)
    if not (isinstance(res, dict) and isinstance(res.get("benchmark"), str) and isinstance(res.get("entries"), list)):
        raise UsageError(f"{p} is not a benchmark results.json (needs 'benchmark' and 'entries')")
    for i, e in enumerate(res["entries"]):
        if not _entry_ok(e):
            raise UsageError(f"{p}: entry {i} is malformed (needs an 'id' string or number, 'passed' true or "
                             "false, a numeric 'reward', and an integer 'trial' if any)")
    return res


def _entry_ok(e: Any) -> bool:
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    return (isinstance(e, dict) and (isinstance(e.get("id"), str) or number(e.get("id")))
            and isinstance(e.get("passed"), bool) and number(e.get("reward"))
            and (e.get("trial") is None or (isinstance(e["trial"], int) and not isinstance(e["trial"], bool)))
            and isinstance(e.get("category", ""), str))


def _as_rows(entries: list[dict]) -> list[dict]:
    """Entries in the shape ``metrics.compare`` pairs (task = entry id, sample = trial)."""
    return [{"task_id": e["id"], "sample": int(e.get("trial", 0)), "episode_id": f"{e['id']}#{e.get('trial', 0)}",
             "category": e.get("category", ""), "grade": {"passed": bool(e["passed"]), "reward": float(e["reward"])}}
            for e in entries]


def compare_results(a: dict[str, Any], b: dict[str, Any], by_category: bool = True) -> dict[str, Any]:
    """B minus A over the entries both have; refused across different benchmarks."""
    if a["benchmark"] != b["benchmark"]:
        raise UsageError(f"cannot pair {a['benchmark']} results with {b['benchmark']} results")
    ra, rb = _as_rows(a["entries"]), _as_rows(b["entries"])
    out = {"benchmark": a["benchmark"], "model_a": a.get("model"), "model_b": b.get("model"), **compare(ra, rb)}
    if by_category:
        cats = sorted({r["category"] for r in ra} & {r["category"] for r in rb})
        out["categories"] = {c: compare([r for r in ra if r["category"] == c], [r for r in rb if r["category"] == c])
                             for c in cats}
    return out


def compare_with_repeat(a: dict[str, Any], b: dict[str, Any], a2: dict[str, Any]) -> dict[str, Any]:
    """``compare_results`` of A and B with the noise floor of A's repeat A2 (``noise_floor``),
    overall and per category; A2 must be the same benchmark."""
    from longhorizon.evaluate.noise_floor import with_floor

    if a2["benchmark"] != a["benchmark"]:
        raise UsageError(f"--repeat is {a2['benchmark']} results, A is {a['benchmark']}: give a repeat of A")
    c = compare_results(a, b)
    ra, ra2 = _as_rows(a["entries"]), _as_rows(a2["entries"])
    out = with_floor(c, ra, ra2)
    out["categories"] = {cat: with_floor(cc, [r for r in ra if r["category"] == cat],
                                         [r for r in ra2 if r["category"] == cat])
                         for cat, cc in c.get("categories", {}).items()}
    return out


def compare_benchmark_files(path_a: str, path_b: str, fmt: str = "table", repeat: str | None = None) -> int:
    """``longhorizon compare`` on two results.json: overall, then per category; with ``repeat``
    (a results.json of A run again) the noise floor next to each Δ."""
    from longhorizon.evaluate.metrics import format_compare
    from longhorizon.evaluate.noise_floor import format_floor, label

    a, b = load_results(path_a), load_results(path_b)
    if repeat is not None and not is_results(repeat):
        raise UsageError(f"--repeat {repeat}: A is a benchmark results.json, so its repeat must be one too")
    c = compare_with_repeat(a, b, load_results(repeat)) if repeat else compare_results(a, b)
    if fmt == "json":
        print(json.dumps(c, indent=2))
        return 0
    print(f"{c['benchmark']}: A = {a.get('model')} ({path_a}), B = {b.get('model')} ({path_b})")
    print("\n".join([format_compare(c, path_a, path_b), *format_floor(c, repeat)]))
    for cat, cc in c.get("categories", {}).items():
        if cc["paired_tasks"]:
            lo, hi = cc["delta_pass@1_ci95"]
            floor = cc.get("noise_floor")
            extra = "" if not floor or not floor["paired_tasks"] else (
                f"  self-disagreement {floor['self_disagreement']:.3f}  floor ±{floor['floor']['pass@1']:.3f} "
                f"{label(cc)}")
            print(f"  {cat:<26} n {cc['paired_tasks']:>4}  A {cc['pass@1_a']:.3f}  B {cc['pass@1_b']:.3f}  "
                  f"Δ {cc['delta_pass@1']:+.3f} [{lo:+.3f}, {hi:+.3f}]  p {cc['mcnemar']['p_value']:.3g}{extra}")
    return 0
