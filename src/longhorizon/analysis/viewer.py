"""HTML views of trajectories: one episode, or two side by side; self-contained (inline CSS,
no scripts, no network: the page's Content-Security-Policy forbids both), long outputs folded
with ``<details>``. A whole run's viewer is ``run_view``.

Everything shown comes from the agent, the apps or a file someone else wrote, so every value
is escaped (``h``: numbers too, since a file can put a string where a number belongs): a
trajectory is untrusted input and must not be able to add markup to the page. Values of the
wrong shape (a message that is not an object, a reward that is not a number) are shown as
they are, never a crash.
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


def h(value: Any) -> str:
    """Any value as escaped HTML text (quotes too, so it is safe in attributes)."""
    return escape(value if isinstance(value, str) else str(value))


def num(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals; anything else escaped as it is."""
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else h(value)


def _reward(traj: Trajectory) -> Any:
    try:
        return traj.reward
    except (TypeError, ValueError, ZeroDivisionError):  # a grade whose weights are not numbers
        return "?"


NO_SCRIPTS = "default-src 'none'; style-src 'unsafe-inline'"
"""The Content-Security-Policy of a page with no scripts: should markup ever slip through the
escaping, the browser still runs nothing and loads nothing."""


def page(title: str, body: str, *, csp: str = NO_SCRIPTS, css: str = "") -> str:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{h(csp)}\"><title>{h(title)}</title>"
            f"<style>{CSS}{css}</style></head><body>{body}</body></html>\n")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, indent=1)
    except (TypeError, ValueError):
        return str(value)


def _key(value: Any) -> Any:
    """A call id usable as a dict key whatever the file put there."""
    return value if isinstance(value, (str, int)) else repr(value)


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
    rows = "".join(f"<tr><td><code>{h(r.id)}</code></td><td>{h(r.kind)}</td>"
                   f"<td class=\"{'pass' if r.passed else 'fail'}\">{'pass' if r.passed else 'fail'}</td>"
                   f"<td>{h(r.note)}</td></tr>" for r in traj.grade.results)
    return f"<table class=\"criteria\"><tr><th>criterion</th><th>kind</th><th>result</th><th>note</th></tr>{rows}</table>"


def trajectory_html(traj: Trajectory, *, diverge_at: int | None = None, max_result_chars: int | None = None,
                    anchor: str = "") -> str:
    """One episode: header, messages in order with each assistant turn's calls (arguments and
    results; errors red, the call where a paired episode first differs outlined; a reply the
    token limit cut marked), criteria."""
    calls_by_id = {_key(c.id): (i, c) for i, c in enumerate(traj.tool_calls)}
    verdict = "pass" if traj.passed else "fail"
    policy = traj.provenance.get("policy") if isinstance(traj.provenance, dict) else None
    out = [f"<div class=\"traj\" id=\"{h(anchor)}\"><p><b>{h(traj.task_id)}</b> sample {h(traj.sample)} · "
           f"{h(traj.category)} · <span class=\"{verdict}\">{verdict}</span> · reward {num(_reward(traj))} · "
           f"{len(traj.tool_calls)} calls · ended: {h(traj.status)} · policy "
           f"<code>{h((policy if isinstance(policy, dict) else {}).get('policy', '?'))}</code></p>"]
    turns = iter(traj.turns if isinstance(traj.turns, list) else [])
    for m in traj.messages if isinstance(traj.messages, list) else []:
        if not isinstance(m, dict):
            out.append(f"<div class=\"msg\">{_folded(_text(m), None)}</div>")
            continue
        role = m.get("role", "?")
        if role == "tool":
            continue  # shown under the call it answers
        record = next(turns, {}) if role == "assistant" else {}
        cut = ""
        if isinstance(record, dict) and record.get("finish_reason") == "length":
            n = record.get("completion_tokens")
            cut = f" <b class=\"fail cut\">cut at {h(n)} tokens</b>" if n else " <b class=\"fail cut\">cut</b>"
        content = m.get("content")
        body = _folded(_text(content), None) if content else ""  # messages whole; only tool I/O is cut
        if role == "system":
            body = f"<details><summary>system prompt</summary>{body}</details>"
        calls = []
        tool_calls = m.get("tool_calls")
        for tc in tool_calls if isinstance(tool_calls, list) else []:
            tc = tc if isinstance(tc, dict) else {}
            found = calls_by_id.get(_key(tc.get("id")))
            if not found:
                fn = tc.get("function")
                calls.append(f"<div class=\"call\"><code>{h(fn.get('name') if isinstance(fn, dict) else None)}</code> "
                             "(not run)</div>")
                continue
            i, c = found
            cls = "call" + (" error" if c.is_error else "") + (" diverge" if i == diverge_at else "")
            mark = " <b>← first difference</b>" if i == diverge_at else ""
            calls.append(f"<div class=\"{cls}\" data-call=\"{i}\"><code>#{i} {h(c.name)}</code>{mark}"
                         f"{'<b class=fail> error</b>' if c.is_error else ''}"
                         f"{_folded(_text(c.arguments), max_result_chars)}"
                         f"<div>→</div>{_folded(_text(c.result), max_result_chars)}</div>")
        out.append(f"<div class=\"msg {h(role)}\"><b>{h(role)}</b>{cut}{body}{''.join(calls)}</div>")
    out.append(criteria_table(traj))
    out.append("</div>")
    return "".join(out)


def pair_html(title: str, a: Trajectory, b: Trajectory, names: tuple[str, str], diverge_at: int | None,
              anchor: str, max_result_chars: int | None = None, links: str = "") -> str:
    """Two episodes of one task side by side, the first differing call outlined in both;
    ``links`` (markup made by the caller, e.g. to each episode's full page) goes in the heading."""
    where = "same calls throughout" if diverge_at is None else f"first difference at call #{diverge_at}"
    links = f" <small>full episodes: {links}</small>" if links else ""
    return (f"<section class=\"pair-view\" id=\"{h(anchor)}\"><h3>{h(title)} — {h(where)}{links}</h3>"
            f"<div class=\"side side-a\"><h4>A: {h(names[0])}</h4>"
            f"{trajectory_html(a, diverge_at=diverge_at, max_result_chars=max_result_chars)}</div>"
            f"<div class=\"side side-b\"><h4>B: {h(names[1])}</h4>"
            f"{trajectory_html(b, diverge_at=diverge_at, max_result_chars=max_result_chars)}</div></section>")
