"""The analysis report: ``report.html`` (self-contained: inline SVG plots drawn here, inline
CSS, no scripts, no network), ``report.md`` and ``metrics.json``.

The HTML holds, in order: the outcome summary (pass@1, McNemar, pair counts), one plot per
metric (A and B means, Δ with its 95% paired bootstrap interval), a forest plot of Δ for the
share metrics, the metric table overall, by outcome and per category, the fail→pass, pass→fail
and both-fail tables, and a side-by-side viewer of each of those pairs. Given the folders of
the two runs' viewers (``run_view``; ``analyze`` writes them next to the report), every pair
in the tables and every side-by-side view links to both episodes' full pages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from longhorizon.analysis.behaviours import METRICS
from longhorizon.analysis.pairs import Pair, first_divergence
from longhorizon.analysis.run_view import episode_page
from longhorizon.analysis.viewer import h, num, page, pair_html

SHOWN_OUTCOMES = ("fail→pass", "pass→fail", "both-fail")
REPORT_RESULT_CHARS = 600
"""Tool arguments and results are cut to this many characters in the report's pair viewer by
default (``view`` shows them whole), so a report stays small enough to commit."""


def anchor(pair_id: str) -> str:
    """The HTML id of a pair's side-by-side view (``TASK#SAMPLE`` -> ``pair-TASK-sSAMPLE``)."""
    return "pair-" + pair_id.replace("#", "-s")


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _ci(ci: list[float] | None) -> str:
    return "–" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def metric_plot(name: str, st: dict[str, Any]) -> str:
    """Two horizontal bars (mean of A, mean of B) on a shared scale, and the Δ interval."""
    w, bar_x, bar_w = 320, 24, 230
    a, b = st["a"], st["b"]
    label = METRICS[name]["label"]
    if a is None:
        body = "<text x=\"4\" y=\"40\">not defined on any paired task</text>"
    else:
        top = max(abs(a), abs(b), 1e-9)
        scale = 1.0 if top <= 1.0 else top
        body = ""
        for i, (who, v, colour) in enumerate((("A", a, "#9aa7b8"), ("B", b, "#3b6fc4"))):
            y = 24 + i * 22
            body += (f"<text x=\"4\" y=\"{y + 13}\">{who}</text>"
                     f"<rect class=\"bar bar-{'ab'[i]}\" x=\"{bar_x}\" y=\"{y}\" width=\"{bar_w * max(v, 0) / scale:.1f}\" "
                     f"height=\"16\" fill=\"{colour}\"/><text x=\"{bar_x + bar_w * max(v, 0) / scale + 4:.1f}\" "
                     f"y=\"{y + 13}\">{v:.3g}</text>")
        body += (f"<text x=\"4\" y=\"82\">Δ {st['delta']:+.3g}  95% CI {_ci(st['delta_ci95'])}  "
                 f"({st['tasks']} tasks)</text>")
    return (f"<figure class=\"plot\"><svg class=\"metric-plot\" data-metric=\"{name}\" width=\"{w}\" height=\"92\" "
            f"viewBox=\"0 0 {w} 92\" role=\"img\"><text x=\"4\" y=\"14\" font-weight=\"600\">{h(label)}</text>"
            f"{body}</svg></figure>")


def forest_plot(stats: dict[str, dict[str, Any]]) -> str:
    """Δ (B - A) with its interval for every share metric (all on the same -1..1 scale)."""
    names = [n for n, st in stats.items() if st["delta"] is not None and n.endswith(("_share", "closure", "error"))]
    w, left, span, row = 640, 260, 340, 20
    height = 30 + row * len(names)
    x = lambda v: left + (v + 1) / 2 * span  # noqa: E731
    parts = [f"<line x1=\"{x(0):.1f}\" y1=\"10\" x2=\"{x(0):.1f}\" y2=\"{height - 12}\" stroke=\"#888\"/>",
             f"<text x=\"{x(-1):.1f}\" y=\"{height - 2}\">-1</text><text x=\"{x(0) - 3:.1f}\" y=\"{height - 2}\">0</text>"
             f"<text x=\"{x(1) - 6:.1f}\" y=\"{height - 2}\">+1</text>"]
    for i, n in enumerate(names):
        st, y = stats[n], 20 + i * row
        lo, hi = st["delta_ci95"]
        parts.append(f"<text x=\"4\" y=\"{y + 4}\">{h(METRICS[n]['label'])}</text>"
                     f"<line x1=\"{x(lo):.1f}\" y1=\"{y}\" x2=\"{x(hi):.1f}\" y2=\"{y}\" stroke=\"#3b6fc4\" stroke-width=\"2\"/>"
                     f"<circle cx=\"{x(st['delta']):.1f}\" cy=\"{y}\" r=\"4\" fill=\"#3b6fc4\"/>")
    return (f"<svg class=\"forest-plot\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" role=\"img\">"
            f"{''.join(parts)}</svg>")


def _metric_rows(stats: dict[str, dict[str, Any]]) -> list[list[str]]:
    return [[METRICS[n]["behaviour"], n, _fmt(st["a"]), _fmt(st["b"]), _fmt(st["delta"]), _ci(st["delta_ci95"]),
             str(st["tasks"]), METRICS[n]["better"]] for n, st in stats.items()]


HEADLINE = ("goal_statement_share", "distinct_reads", "repeated_read_share", "verification_share", "closure")
"""The metrics whose Δ the per-category table shows (every metric per category is in metrics.json)."""


def _category_rows(result: dict[str, Any]) -> list[list[str]]:
    return [[c, str(v["pairs"])] + [str(v["outcomes"][k]) for k in result["outcomes"]]
            + [_fmt(v["metrics"][m]["delta"]) for m in HEADLINE] for c, v in result["categories"].items()]


METRIC_HEAD = ["behaviour", "metric", "A", "B", "Δ (B-A)", "95% CI", "tasks", "better"]
PAIR_HEAD = ["pair", "category", "reward A", "reward B", "first difference (call #)"]


def _pair_rows(items: list[dict[str, Any]]) -> list[list[str]]:
    return [[p["pair"], p["category"], num(p["reward_a"]), num(p["reward_b"]), _fmt(p["first_divergence"])]
            for p in items]


def episode_links(task_id: str, sample: int, views: tuple[str, str] | None) -> str:
    """Links to a pair's two episodes in the runs' viewers (empty without them)."""
    if views is None:
        return ""
    name = episode_page(task_id, sample)
    return " ".join(f"<a class=\"episode-link\" href=\"{h(v)}/episodes/{h(name)}\">{side}</a>"
                    for side, v in zip("AB", views))


def _html_table(head: list[str], rows: list[list[str]], table_id: str = "", links: frozenset[str] = frozenset(),
                extra: list[str] | None = None) -> str:
    """A table; a first cell naming a pair in ``links`` links to that pair's side-by-side view;
    ``extra`` (markup made here, one per row) fills a last column."""
    def cell(i: int, v: str) -> str:
        if i == 0 and v in links:
            return f"<td><a href=\"#{h(anchor(v))}\">{h(v)}</a></td>"
        return f"<td>{h(v)}</td>"

    ident = f" id=\"{table_id}\"" if table_id else ""
    last = lambda i: f"<td>{extra[i]}</td>" if extra is not None else ""  # noqa: E731
    return (f"<table{ident}><tr>{''.join(f'<th>{h(col)}</th>' for col in head)}"
            f"{'<th>episodes</th>' if extra is not None else ''}</tr>"
            + "".join(f"<tr>{''.join(cell(i, v) for i, v in enumerate(r))}{last(n)}</tr>" for n, r in enumerate(rows))
            + "</table>")


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _outcome_lines(result: dict[str, Any], names: tuple[str, str]) -> list[str]:
    o = result["outcome"]
    m = o.get("mcnemar", {})
    lines = [f"Paired episodes: {result['paired_episodes']} on {result['paired_tasks']} tasks "
             f"(unpaired: {result['only_a']} only in A, {result['only_b']} only in B)."]
    if o.get("paired_tasks"):
        lines.append(f"pass@1: A {o['pass@1_a']:.3f}, B {o['pass@1_b']:.3f}, Δ {o['delta_pass@1']:+.3f} "
                     f"95% CI {_ci(o['delta_pass@1_ci95'])}; mean reward: A {o['mean_reward_a']:.3f}, "
                     f"B {o['mean_reward_b']:.3f}, Δ {o['delta_mean_reward']:+.3f} 95% CI {_ci(o['delta_mean_reward_ci95'])}.")
        lines.append(f"McNemar exact: {m['a_only_passed']} passed only in A, {m['b_only_passed']} only in B, "
                     f"p = {m['p_value']:.4g}.")
    lines.append("Pairs: " + ", ".join(f"{k} {v}" for k, v in result["outcomes"].items()) + ".")
    return lines


def _judge_rows(judge: dict[str, Any]) -> list[list[str]]:
    return [[b, str(j["scored"]), _fmt(j["mean_a"]), _fmt(j["mean_b"]), str(j["agreement_n"]), _fmt(j["kappa"])]
            for b, j in judge["behaviours"].items()]


JUDGE_HEAD = ["behaviour", "episodes judged", "judged A", "judged B", "both scored", "Cohen's κ vs automatic"]


def write_report(out: Path, result: dict[str, Any], pairs: list[Pair], names: tuple[str, str],
                 max_viewed: int = 40, result_chars: int = REPORT_RESULT_CHARS,
                 views: tuple[str, str] | None = None) -> dict[str, Path]:
    """Write metrics.json, report.md and report.html into ``out``; returns their paths.
    ``views``: the folders (relative to ``out``) of run A's and run B's viewers, to link to."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "metrics.json", "md": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps({"runs": {"a": names[0], "b": names[1]}, **result}, indent=1,
                                        ensure_ascii=False) + "\n")
    summary = _outcome_lines(result, names)

    md = [f"# Behaviour analysis: B = {names[1]} vs A = {names[0]}", "", *summary, "",
          "Metrics are computed from each Trajectory alone (see `longhorizon.analysis.behaviours`); Δ is over "
          "tasks with a 95% paired bootstrap interval.", "", "## Metrics, all pairs", "",
          _md_table(METRIC_HEAD, _metric_rows(result["metrics"]))]
    for o, st in result["by_outcome"].items():
        md += ["", f"## Metrics, {o} pairs", "", _md_table(METRIC_HEAD, _metric_rows(st))]
    for o in SHOWN_OUTCOMES:
        md += ["", f"## {o} pairs ({len(result['pairs'][o])})", ""]
        md.append(_md_table(PAIR_HEAD, _pair_rows(result["pairs"][o])) if result["pairs"][o] else "none")
    category_head = ["category", "pairs"] + list(result["outcomes"]) + [f"Δ {m}" for m in HEADLINE]
    md += ["", "## Per category", "", _md_table(category_head, _category_rows(result))]
    if result.get("judge"):
        md += ["", f"## Judged coding ({result['judge']['model']})", "", _md_table(JUDGE_HEAD, _judge_rows(result["judge"]))]
    paths["md"].write_text("\n".join(md) + "\n")

    every = ("" if views is None else f"<p>Every episode: <a href=\"{h(views[0])}/index.html\">run A</a>, "
             f"<a href=\"{h(views[1])}/index.html\">run B</a>.</p>")
    body = [f"<h1>Behaviour analysis</h1><p>A = <code>{h(names[0])}</code>, B = <code>{h(names[1])}</code></p>"
            + every,
            "".join(f"<p>{h(s)}</p>" for s in summary),
            "<h2 id=\"plots\">Metrics, A vs B</h2><div class=\"plots\" style=\"display:flex;flex-wrap:wrap\">",
            "".join(metric_plot(n, st) for n, st in result["metrics"].items()), "</div>",
            "<h3>Δ (B - A) of the share metrics, 95% paired bootstrap intervals</h3>", forest_plot(result["metrics"]),
            "<h2>Metrics, all pairs</h2>", _html_table(METRIC_HEAD, _metric_rows(result["metrics"]), "metrics")]
    for o, st in result["by_outcome"].items():
        body += [f"<h3>{h(o)} pairs</h3>", _html_table(METRIC_HEAD, _metric_rows(st))]
    if result.get("judge"):
        body += [f"<h2>Judged coding ({h(result['judge']['model'])})</h2>",
                 _html_table(JUDGE_HEAD, _judge_rows(result["judge"]), "judge")]
    viewed = [p for o in SHOWN_OUTCOMES for p in pairs if p.outcome == o][:max_viewed]
    for o in SHOWN_OUTCOMES:
        tid = {"fail→pass": "fail-pass", "pass→fail": "pass-fail", "both-fail": "both-fail"}[o]
        items = result["pairs"][o]
        extra = None if views is None else [episode_links(p["task_id"], p["sample"], views) for p in items]
        body += [f"<h2>{h(o)} pairs ({len(items)})</h2>",
                 _html_table(PAIR_HEAD, _pair_rows(items), tid, frozenset(p.id for p in viewed), extra)]
    body += ["<h2>Per category</h2>", _html_table(category_head, _category_rows(result), "categories")]
    body.append(f"<h2 id=\"viewer\">Pairs side by side ({len(viewed)} shown)</h2>")
    body += [pair_html(f"{p.id} ({p.outcome})", p.a, p.b, names, first_divergence(p.a, p.b), anchor(p.id),
                       result_chars, episode_links(p.task_id, p.sample, views)) for p in viewed]
    paths["html"].write_text(page("behaviour analysis", "".join(body)))
    return paths
