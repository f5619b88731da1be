"""The pipeline report: base vs SFT vs RL on the holdout, learning curves, what the data was.

Writes ``report.md``, ``report.html`` and ``learning_curve.png`` into the demo folder and
returns the printed table. Numbers come from the run folders and training logs on disk, so
the report can be rebuilt at any time (``write_report(folder)``).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

MODELS = (("base", "base (untrained)"), ("sft", "SFT"), ("start", "SFT, RL's start"), ("rl", "SFT + GSPO"))
"""The models a report can hold; ``start`` is the SFT checkpoint RL started from, when the
pipeline chose one with headroom instead of the final SFT model (OUT/start.json)."""
PAIRS = (("base", "sft"), ("sft", "rl"), ("start", "rl"), ("base", "rl"))
"""Paired comparisons (A, B) as "B vs A", each when both were evaluated."""


def _load_run(path: Path):
    from longhorizon.evaluate.metrics import summarize
    from longhorizon.rollout.store import RunStore

    store = RunStore(path)
    if not (path / "run.json").exists():
        return None, []
    rows, _ = store.episodes()  # each episode once, as eval and compare count it
    return summarize(rows, store.infra_errors(), expected=store.manifest().get("episodes")), rows


def _fmt_ci(ci) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


SPLITS = (("", "holdout"), ("-transfer", "transfer"))
"""Eval folders: ``eval/NAME`` (the config's eval split) and ``eval/NAME-transfer`` (families the
run never trained on: a never-trained sibling's held-out seeds or holdout families;
``pipeline.transfer_eval``); plus ``eval/NAME-levelN`` per longer level (``longer_levels``)."""


def longer_levels(config: dict[str, Any] | None) -> list[int]:
    """The levels longer than trained that the pipeline evaluated (``eval.longer_levels`` of its
    ``pipeline_config.json``; none when unset or when the file is missing)."""
    return list(((config or {}).get("eval") or {}).get("longer_levels") or [])


def results_table(folder: Path, suffix: str = "") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows, runs = [], {}
    for key, label in MODELS:
        summary, trajs = _load_run(folder / "eval" / f"{key}{suffix}")
        if summary is None or not summary["overall"]["episodes"]:  # nothing played: no row (rates are n/a)
            continue
        runs[key] = trajs
        o = summary["overall"]
        rows.append({"model": key, "label": label, "episodes": o["episodes"], "pass@1": o["pass@1"],
                     "pass@1_ci95": o["pass@1_ci95"], "mean_reward": o["mean_reward"],
                     "mean_reward_ci95": o["mean_reward_ci95"], "tool_calls": o["mean_tool_calls"],
                     "families": {f: {"pass@1": g["pass@1"], "mean_reward": g["mean_reward"], "episodes": g["episodes"]}
                                  for f, g in summary["families"].items()},
                     "complete": summary["complete"]})
    return rows, runs


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'model':<20} {'eps':>4} {'pass@1':>7} {'95% CI':<16} {'reward':>7} {'95% CI':<16} {'calls':>6}"]
    for r in rows:
        lines.append(f"{r['label']:<20} {r['episodes']:>4} {r['pass@1']:>7.3f} {_fmt_ci(r['pass@1_ci95']):<16} "
                     f"{r['mean_reward']:>7.3f} {_fmt_ci(r['mean_reward_ci95']):<16} {r['tool_calls']:>6.1f}")
    fams = sorted({f for r in rows for f in r["families"]})
    if fams:
        lines.append("")
        lines.append(f"{'mean reward by family':<32} " + " ".join(f"{r['model']:>7}" for r in rows))
        for f in fams:
            vals = " ".join(f"{r['families'].get(f, {}).get('mean_reward', float('nan')):>7.3f}" for r in rows)
            lines.append(f"{f:<32} {vals}")
    return "\n".join(lines)


def learning_curves(folder: Path, png: Path) -> bool:
    """SFT loss and RL reward per step; False when matplotlib is missing or there is no log."""
    from longhorizon.train.logs import read_log

    sft_log = folder / "models" / "sft" / "log.jsonl"
    rl_log = folder / "models" / "rl" / "log.jsonl"
    sft = read_log(sft_log) if sft_log.exists() else []
    rl = read_log(rl_log) if rl_log.exists() else []
    if not sft and not rl:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    ax = axes[0]
    pts = [(r["step"], r["loss"]) for r in sft if r.get("loss") is not None]
    if pts:
        ax.plot(*zip(*pts), marker=".", color="tab:blue")
    ax.set_title("SFT: loss on assistant tokens")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy")
    ax.grid(alpha=0.3)
    ax = axes[1]
    for key, label, color in (("reward", "mean reward", "tab:green"), ("pass_rate", "pass rate", "tab:orange"),
                              ("zero_variance_groups", "zero-variance groups", "tab:gray")):
        pts = [(r["step"], r[key]) for r in rl if r.get(key) is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label, color=color)
    ax.set_title("RL (GSPO): rollouts, 8 episodes per task")
    ax.set_xlabel("optimizer step")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def _comparisons(runs: dict[str, list[dict]], split: str = "holdout",
                 repeat: list[dict] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Each pair of models, paired by task; with ``repeat`` (the base model's second run) each
    carries the base's noise floor and whether its Δ lies inside it (``evaluate.noise_floor``)."""
    from longhorizon.evaluate.metrics import compare
    from longhorizon.evaluate.noise_floor import inside, noise_floor

    floor = noise_floor(runs["base"], repeat) if repeat and "base" in runs else None
    out = []
    for a, b in PAIRS:
        if a in runs and b in runs:
            c = compare(runs[a], runs[b])
            if floor is not None:
                c = {**c, "noise_floor": floor, "inside_noise_floor": inside(c, floor)}
            out.append((f"{b} vs {a} ({split})", c))
    return out


def _repeat_rows(folder: Path, suffix: str = "") -> list[dict] | None:
    """The base model's repeat run (``eval/base-repeat``), when the pipeline made one."""
    summary, rows = _load_run(folder / "eval" / f"base-repeat{suffix}")
    return rows if summary is not None and rows else None


def _floor_cell(c: dict[str, Any]) -> str:
    from longhorizon.evaluate.noise_floor import label

    return label(c) or "-"


def format_floors(comps: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """One line per split whose comparisons carry a floor: the base model against its rerun."""
    lines, seen = [], set()
    for name, c in comps:
        f = c.get("noise_floor")
        split = name[name.index("(") + 1:-1]
        if not f or not f.get("paired_tasks") or split in seen:
            continue
        seen.add(split)
        lines.append(f"noise floor ({split}: base vs its rerun, {f['paired_tasks']} tasks): "
                     f"{f['disagreements']} verdicts flipped ({f['self_disagreement']:.3f}), "
                     f"floor ±{f['floor']['pass@1']:.3f} pass@1, ±{f['floor']['mean_reward']:.3f} reward")
    return lines


def format_comparisons(comps: list[tuple[str, dict[str, Any]]]) -> str:
    """B - A paired by task: Δ pass@1 and Δ mean reward with paired-bootstrap 95% intervals,
    McNemar's exact p on pass/fail; ``*`` marks a reward interval that excludes 0."""
    floors = any(c.get("noise_floor") for _, c in comps)
    lines = [f"{'paired (B vs A)':<34} {'tasks':>5} {'Δ pass@1':>9} {'95% CI':<17} {'Δ reward':>9} "
             f"{'95% CI':<17} {'McNemar p':>9}" + ("  noise floor" if floors else "")]
    for name, c in comps:
        if not c.get("paired_tasks"):
            lines.append(f"{name:<34} no tasks in common")
            continue
        lo, hi = c["delta_mean_reward_ci95"]
        mark = "*" if lo > 0 or hi < 0 else " "
        lines.append(f"{name:<34} {c['paired_tasks']:>5} {c['delta_pass@1']:>+9.3f} "
                     f"{_fmt_ci(c['delta_pass@1_ci95']):<17} {c['delta_mean_reward']:>+9.3f} "
                     f"{_fmt_ci(c['delta_mean_reward_ci95']):<16}{mark} {c['mcnemar']['p_value']:>9.3g}"
                     + (f"  {_floor_cell(c)}" if floors else ""))
    return "\n".join(lines + format_floors(comps))


def rl_steps(folder: Path) -> list[dict[str, Any]]:
    """Per GSPO step: reward, pass rate, the share of groups whose rewards were all equal (no
    learning signal), clip fraction, loss, grad norm (``models/rl/log.jsonl``)."""
    from longhorizon.train.logs import read_log

    log = folder / "models" / "rl" / "log.jsonl"
    return [r for r in read_log(log) if r.get("step") is not None] if log.exists() else []


def format_rl_steps(steps: list[dict[str, Any]]) -> str:
    def f(v, fmt):
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    lines = [f"{'GSPO step':>9} {'reward':>7} {'pass':>5} {'zero-var groups':>15} {'clip':>6} {'grad norm':>9} "
             f"{'loss':>9}"]
    for r in steps:
        lines.append(f"{r['step']:>9} {f(r.get('reward'), '.3f'):>7} {f(r.get('pass_rate'), '.2f'):>5} "
                     f"{f(r.get('zero_variance_groups'), '.2f'):>15} {f(r.get('clip_fraction'), '.3f'):>6} "
                     f"{f(r.get('grad_norm'), '.3g'):>9} {f(r.get('loss'), '+.4f'):>9}")
    return "\n".join(lines)


def weight_change(a: Path, b: Path) -> dict[str, float] | None:
    """How far model ``b``'s weights moved from ``a``'s: the largest absolute change and the
    relative L2 change over all shared tensors (None when either folder has no safetensors)."""
    fa, fb = sorted(a.glob("*.safetensors")), sorted(b.glob("*.safetensors"))
    if not fa or not fb:
        return None
    try:
        import torch
        from safetensors.torch import load_file
    except ImportError:
        return None
    ta, tb = {}, {}
    for f in fa:
        ta.update(load_file(f))
    for f in fb:
        tb.update(load_file(f))
    num = den = 0.0
    biggest = 0.0
    for k in sorted(set(ta) & set(tb)):
        x, y = ta[k].float(), tb[k].float()
        if x.shape != y.shape:
            continue
        d = y - x
        num += float(torch.sum(d * d))
        den += float(torch.sum(x * x))
        biggest = max(biggest, float(d.abs().max()))
    return {"max_abs": biggest, "relative_l2": (num / den) ** 0.5 if den else 0.0}


def write_report(folder: str | Path, stage_times: dict[str, float] | None = None) -> dict[str, Any]:
    folder = Path(folder)
    config = _read_json(folder / "pipeline_config.json")
    rows, runs = results_table(folder)
    t_rows, t_runs = results_table(folder, "-transfer")
    longer = [(lv, *results_table(folder, f"-level{lv}")) for lv in longer_levels(config)]
    png = folder / "learning_curve.png"
    has_plot = learning_curves(folder, png)
    comps = _comparisons(runs, repeat=_repeat_rows(folder)) + (
        _comparisons(t_runs, "transfer", _repeat_rows(folder, "-transfer")) if t_runs else [])
    for lv, _, l_runs in longer:
        comps += _comparisons(l_runs, f"level {lv}", _repeat_rows(folder, f"-level{lv}")) if l_runs else []
    steps = rl_steps(folder)
    start = _read_json(folder / "start.json") or {}
    expected = [k for k, _ in MODELS if k != "start" or start.get("checkpoint") is not None]
    moved = weight_change(Path(start["path"]) if start.get("path") else folder / "models" / "sft",
                          folder / "models" / "rl")
    parts = ["holdout", format_table(rows)]
    if t_rows:
        parts += ["", "transfer (never-trained families, on held-out instances)", format_table(t_rows)]
    for lv, l_rows, _ in longer:
        if l_rows:
            parts += ["", f"level {lv} (the evaluated families, longer than trained, on held-out instances)",
                      format_table(l_rows)]
    if comps:
        parts += ["", format_comparisons(comps), "(* : the reward interval excludes 0"
                  + ("; noise floor: Δ pass@1 inside or outside the base model's rerun floor)"
                     if any(c.get("noise_floor") for _, c in comps) else ")")]
    if start.get("dev_pass"):
        parts += ["", start_line(start)]
    if steps:
        parts += ["", format_rl_steps(steps)]
    if moved:
        parts.append(f"GSPO moved its start's weights: max |Δw| {moved['max_abs']:.3g}, "
                     f"relative L2 {moved['relative_l2']:.3g}")
    table = "\n".join(parts)
    data_summary = _read_json(folder / "sft_data" / "summary.json")
    sft_summary = _read_json(folder / "models" / "sft" / "summary.json")
    rl_summary = _read_json(folder / "models" / "rl" / "summary.json")
    times = stage_times or {}

    md = ["# longhorizon demo report", "",
          "Greedy pass@1 and mean dense reward on the holdout split (95% intervals: Wilson for pass@1, "
          "bootstrap for reward).", "", "```", table, "```", ""]
    if comps:
        md += ["## Paired comparisons (by task)", "",
               "| comparison | tasks | Δ pass@1 | 95% CI | Δ mean reward | 95% CI | McNemar p | noise floor |",
               "|---|---|---|---|---|---|---|---|"]
        for name, c in comps:
            if c.get("paired_tasks"):
                md.append(f"| {name} | {c['paired_tasks']} | {c['delta_pass@1']:+.3f} | "
                          f"{_fmt_ci(c['delta_pass@1_ci95'])} | {c['delta_mean_reward']:+.3f} | "
                          f"{_fmt_ci(c['delta_mean_reward_ci95'])} | {c['mcnemar']['p_value']:.3g} | "
                          f"{_floor_cell(c)} |")
        md += ["", "Noise floor: whether Δ pass@1 lies inside the base model's floor (the 95% interval of "
               "its self-Δ against a rerun; `evaluate.noise_floor`); `-`: no rerun (`eval.repeat_base`).", ""]
        md += [f"{x[0].upper()}{x[1:]}.  " for x in format_floors(comps)] + [""]
    if steps:
        md += ["## GSPO steps", "", "Zero-variance groups: the share of a step's groups whose episodes all "
               "earned the same reward (advantage 0: no learning signal).", "", "```", format_rl_steps(steps),
               "```", ""]
        if moved:
            md += [f"GSPO moved its start's weights: max |Δw| {moved['max_abs']:.3g}, relative L2 "
                   f"{moved['relative_l2']:.3g}.", ""]
    if start.get("dev_pass"):
        md += ["## Where RL started", "", start_line(start) + ".", ""]
    if has_plot:
        md += ["## Learning curves", "", "![learning curves](learning_curve.png)", ""]
    md += ["## Pipeline", ""]
    if data_summary:
        md.append(f"- Teacher data: kept {data_summary['kept']} of {data_summary['episodes_seen']} teacher episodes "
                  f"(reward ≥ {data_summary['min_reward']}), {data_summary['mean_tool_calls']:.1f} tool calls each; "
                  f"families: {', '.join(f'{k} ({v})' for k, v in data_summary['families'].items())}.")
    if sft_summary:
        last = sft_summary.get("last") or {}
        md.append(f"- SFT: {sft_summary['steps']} steps on {sft_summary['examples']} examples, final loss "
                  f"{last.get('loss', float('nan')):.3f}, LoRA {'yes' if sft_summary.get('lora') else 'no (full fine-tune)'}.")
    if rl_summary:
        md.append(f"- RL: {rl_summary['loss'].upper()}, {rl_summary['steps']} steps, group size "
                  f"{rl_summary['group_size']}, clip range {rl_summary['clip_range']}.")
    if times:
        md.append("- Stage wall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
                  + f" (total {sum(times.values()):.0f} s).")
    if config:
        md += ["", "<details><summary>configuration</summary>", "", "```json", json.dumps(config, indent=2), "```",
               "", "</details>"]
    (folder / "report.md").write_text("\n".join(md) + "\n")
    (folder / "report.html").write_text(_html(table, comps, has_plot, md))
    l_rows = [r for _, rs, _ in longer for r in rs]
    return {"table": table, "rows": rows, "transfer_rows": t_rows,
            "longer_rows": {lv: rs for lv, rs, _ in longer}, "comparisons": dict(comps), "rl_steps": steps,
            "weight_change": moved,
            "start": start or None,
            "complete": bool(rows) and all(r["complete"] for r in rows + t_rows + l_rows) and len(rows) == len(expected)
            and all(len(rs) == len(expected) for _, rs, _ in longer)}


def start_line(start: dict[str, Any]) -> str:
    """Which SFT model RL started from and why, with the dev pass rate of each checkpoint played."""
    from longhorizon.train.headroom import format_rates

    rates = format_rates({int(k): v for k, v in start["dev_pass"].items()})
    where = "the final SFT model" if start.get("checkpoint") is None else f"the SFT model after step {start['checkpoint']}"
    return (f"RL started from {where}: {start['why']} (greedy dev pass on {start.get('dev_tasks', '?')} train-split "
            f"dev instances: {rates})")


def _read_json(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def _html(table: str, comps, has_plot: bool, md: list[str]) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>longhorizon demo report</title>",
             "<style>body{font-family:sans-serif;max-width:960px;margin:2em auto;padding:0 1em}"
             "pre{background:#f6f6f6;padding:1em;overflow-x:auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}</style></head><body>",
             "<h1>longhorizon demo report</h1>",
             "<p>Greedy pass@1 and mean dense reward on the holdout split (95% intervals: Wilson for pass@1, "
             "bootstrap for reward).</p>",
             f"<pre>{html.escape(table)}</pre>"]
    if comps:
        parts.append("<h2>Paired comparisons (by task)</h2><table><tr><th>comparison</th><th>Δ pass@1</th>"
                     "<th>95% CI</th><th>Δ mean reward</th><th>95% CI</th></tr>")
        for name, c in comps:
            if c.get("paired_tasks"):
                parts.append(f"<tr><td>{html.escape(name)}</td><td>{c['delta_pass@1']:+.3f}</td>"
                             f"<td>{_fmt_ci(c['delta_pass@1_ci95'])}</td><td>{c['delta_mean_reward']:+.3f}</td>"
                             f"<td>{_fmt_ci(c['delta_mean_reward_ci95'])}</td></tr>")
        parts.append("</table>")
    if has_plot:
        parts.append("<h2>Learning curves</h2><img src='learning_curve.png' alt='learning curves' width='100%'>")
    pipeline = [line[2:] for line in md if line.startswith("- ")]
    if pipeline:
        parts.append("<h2>Pipeline</h2><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in pipeline) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
