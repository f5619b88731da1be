"""HTML views of trajectories: one episode, or two side by side; self-contained (inline CSS,
no scripts, no network), long outputs folded with ``<details>``.

Everything shown comes from the agent or the apps, so every string is escaped: a trajectory
is untrusted input and must not be able to add markup to the page.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from longhorizon.core.trajectory import Trajectory

FOLD_CHARS = 400
"""Results longer than this are folded (first lines shown, the rest behind a click)."""

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1600px}
h1,h2,h3{font-weight:600} table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3} code,pre{font:12px/1.35 ui-monospace,monospace}
pre{white-space:pre-wrap;word-break:break-word;margin:.2em 0;background:#f7f7f7;padding:.3em}
.traj .msg{border-left:3px solid #bbb;padding:.2em .6em;margin:.4em 0}
.traj .assistant{border-color:#4a7bd0} .traj .user{border-color:#3a3} .traj .system{border-color:#999}
.call{margin:.3em 0 .3em 1em;border:1px solid #ddd;padding:.2em .4em}
.call.error{background:#fde8e8;border-color:#d33} .call.diverge{outline:3px solid #e8a300}
.pass{color:#176617;font-weight:600} .fail{color:#b31b1b;font-weight:600}
.pair-view{display:grid;grid-template-columns:1fr 1fr;gap:1em;border-top:2px solid #888;margin-top:1.5em}
.pair-view>h3{grid-column:1/3;margin-bottom:0} .side{min-width:0}
svg text{font:11px system-ui,sans-serif}
"""


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)


def _folded(text: str, max_chars: int | None) -> str:
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars] + f"\n... [{len(text) - max_chars} more characters not shown]"
    if len(text) <= FOLD_CHARS:
        return f"<pre>{escape(text)}</pre>"
    head = text[:FOLD_CHARS].rsplit("\n", 1)[0] or text[:FOLD_CHARS]
    return (f"<details><summary><code>{escape(head[:160])}</code> … ({len(text)} characters)</summary>"
            f"<pre>{escape(text)}</pre></details>")


def criteria_table(traj: Trajectory) -> str:
    if not traj.grade:
        return "<p>No grade.</p>"
    rows = "".join(f"<tr><td><code>{escape(r.id)}</code></td><td>{escape(r.kind)}</td>"
                   f"<td class=\"{'pass' if r.passed else 'fail'}\">{'pass' if r.passed else 'fail'}</td>"
                   f"<td>{escape(r.note)}</td></tr>" for r in traj.grade.results)
    return f"<table class=\"criteria\"><tr><th>criterion</th><th>kind</th><th>result</th><th>note</th></tr>{rows}</table>"


def trajectory_html(traj: Trajectory, *, diverge_at: int | None = None, max_result_chars: int | None = None,
                    anchor: str = "") -> str:
    """One episode: header, messages in order with each assistant turn's calls (arguments and
    results; errors red, the call where a paired episode first differs outlined; a reply the
    token limit cut marked), criteria."""
    calls_by_id = {c.id: (i, c) for i, c in enumerate(traj.tool_calls)}
    verdict = "pass" if traj.passed else "fail"
    out = [f"<div class=\"traj\" id=\"{escape(anchor)}\"><p><b>{escape(traj.task_id)}</b> sample {traj.sample} · "
           f"{escape(traj.category)} · <span class=\"{verdict}\">{verdict}</span> · reward {traj.reward:.3f} · "
           f"{len(traj.tool_calls)} calls · ended: {escape(traj.status)} · policy "
           f"<code>{escape(str((traj.provenance.get('policy') or {}).get('policy', '?')))}</code></p>"]
    turns = iter(traj.turns)
    for m in traj.messages:
        role = m.get("role", "?")
        if role == "tool":
            continue  # shown under the call it answers
        record = next(turns, {}) if role == "assistant" else {}
        cut = ""
        if isinstance(record, dict) and record.get("finish_reason") == "length":
            n = record.get("completion_tokens")
            cut = f" <b class=\"fail cut\">cut at {escape(str(n))} tokens</b>" if n else " <b class=\"fail cut\">cut</b>"
        content = m.get("content")
        body = _folded(_text(content), None) if content else ""  # messages whole; only tool I/O is cut
        if role == "system":
            body = f"<details><summary>system prompt</summary>{body}</details>"
        calls = []
        for tc in m.get("tool_calls") or []:
            found = calls_by_id.get(tc.get("id"))
            if not found:
                calls.append(f"<div class=\"call\"><code>{escape(str(tc.get('function', {}).get('name')))}</code> "
                             "(not run)</div>")
                continue
            i, c = found
            cls = "call" + (" error" if c.is_error else "") + (" diverge" if i == diverge_at else "")
            mark = " <b>← first difference</b>" if i == diverge_at else ""
            calls.append(f"<div class=\"{cls}\" data-call=\"{i}\"><code>#{i} {escape(c.name)}</code>{mark}"
                         f"{'<b class=fail> error</b>' if c.is_error else ''}"
                         f"{_folded(_text(c.arguments), max_result_chars)}"
                         f"<div>→</div>{_folded(c.result, max_result_chars)}</div>")
        out.append(f"<div class=\"msg {escape(role)}\"><b>{escape(role)}</b>{cut}{body}{''.join(calls)}</div>")
    out.append(criteria_table(traj))
    out.append("</div>")
    return "".join(out)


def pair_html(title: str, a: Trajectory, b: Trajectory, names: tuple[str, str], diverge_at: int | None,
              anchor: str, max_result_chars: int | None = None) -> str:
    """Two episodes of one task side by side, the first differing call outlined in both."""
    where = "same calls throughout" if diverge_at is None else f"first difference at call #{diverge_at}"
    return (f"<section class=\"pair-view\" id=\"{escape(anchor)}\"><h3>{escape(title)} — {where}</h3>"
            f"<div class=\"side side-a\"><h4>A: {escape(names[0])}</h4>"
            f"{trajectory_html(a, diverge_at=diverge_at, max_result_chars=max_result_chars)}</div>"
            f"<div class=\"side side-b\"><h4>B: {escape(names[1])}</h4>"
            f"{trajectory_html(b, diverge_at=diverge_at, max_result_chars=max_result_chars)}</div></section>")


def run_html(name: str, trajs: list[Trajectory]) -> str:
    """The single-run viewer: an index of episodes (pass/fail, reward, calls) and each episode."""
    rows = "".join(f"<tr><td><a href=\"#ep-{i}\">{escape(t.task_id)}</a></td><td>{t.sample}</td>"
                   f"<td>{escape(t.category)}</td><td class=\"{'pass' if t.passed else 'fail'}\">"
                   f"{'pass' if t.passed else 'fail'}</td><td>{t.reward:.3f}</td><td>{len(t.tool_calls)}</td>"
                   f"<td>{sum(c.is_error for c in t.tool_calls)}</td></tr>" for i, t in enumerate(trajs))
    index = ("<table id=\"episodes\"><tr><th>task</th><th>sample</th><th>category</th><th>result</th>"
             f"<th>reward</th><th>calls</th><th>errors</th></tr>{rows}</table>")
    eps = "".join(f"<h2>{escape(t.task_id)} #{t.sample}</h2>{trajectory_html(t, anchor=f'ep-{i}')}"
                  for i, t in enumerate(trajs))
    return page(f"run {name}", f"<h1>Run {escape(name)}</h1><p>{len(trajs)} episodes</p>{index}{eps}")
