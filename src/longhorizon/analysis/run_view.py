"""The run viewer: a static folder that opens from ``file://`` and stays light at any run size.

    DIR/index.html              summary header, filters, search and a paged table of episodes
    DIR/episodes/NAME.html      one page per episode (``episode_page``), no scripts at all

The index holds no transcript: one short row per episode (task, family, result, reward,
ending, calls, the instruction's start for search), so a run of thousands of episodes is an
index of a few hundred kilobytes plus one page per episode, where one file holding every
transcript was 20 MB for 364 episodes. Filters and search are a few lines of vanilla JS over
the rows; their state lives in the URL's hash (``#failed=1&family=F&ending=E&q=TEXT&page=N``),
so a filtered view is a link.

Everything shown comes from a file someone else wrote, so nothing agent-written ever reaches
the page as markup: the rows are JSON inside ``<script type="application/json">`` with ``<``,
``>`` and ``&`` written as ``\\u003c``-style escapes (no ``</script>`` can close it), the JS
puts every value in with ``textContent`` (never ``innerHTML``), link targets are file names
made here (``episode_page``), and each page carries a Content-Security-Policy that allows
only the index's own script (by its hash) and none on episode pages.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

from longhorizon.analysis.viewer import h, num, page, trajectory_html
from longhorizon.core.trajectory import Trajectory

PAGE_SIZE = 200
"""Rows the index's table shows at once (the rest behind next/previous), so its DOM stays small."""

SEARCH_CHARS = 300
"""How much of each task's instruction the index keeps for search."""

COLUMNS = ("task", "sample", "family", "category", "passed", "reward", "ending", "calls", "errors", "page", "text")
"""The fields of each row in the index's JSON (rows are lists, in this order, to keep it small)."""

_SAFE_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,99}")


def episode_page(task_id: Any, sample: Any) -> str:
    """The file name of an episode's page: ``TASK-sSAMPLE.html`` for a plain task id (lower-case
    letters, digits, ``_.-``) and a whole-number sample; otherwise ``ep-HASH.html``. Never a
    path, a URL scheme or markup, whatever the file holds; the two forms cannot collide."""
    if (isinstance(task_id, str) and _SAFE_NAME.fullmatch(task_id) and isinstance(sample, int)
            and not isinstance(sample, bool) and sample >= 0):
        return f"{task_id}-s{sample}.html"
    return "ep-" + hashlib.sha256(repr((task_id, sample)).encode("utf-8", "replace")).hexdigest()[:16] + ".html"


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _reward(traj: Trajectory) -> float | None:
    try:
        return _number(traj.reward)
    except (TypeError, ValueError, ZeroDivisionError):  # a grade whose weights are not numbers
        return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _instruction(traj: Trajectory) -> str:
    for m in traj.messages if isinstance(traj.messages, list) else []:
        if isinstance(m, dict) and m.get("role") == "user":
            return _text(m.get("content"))[:SEARCH_CHARS]
    return ""


def episode_row(traj: Trajectory) -> list[Any]:
    """The index's row of one episode (``COLUMNS``): strings and numbers only."""
    calls = traj.tool_calls if isinstance(traj.tool_calls, list) else []
    sample = traj.sample if _number(traj.sample) is not None else _text(traj.sample)
    return [_text(traj.task_id), sample, _text(traj.family), _text(traj.category), traj.passed, _reward(traj),
            _text(traj.status), len(calls), sum(bool(getattr(c, "is_error", False)) for c in calls),
            episode_page(traj.task_id, traj.sample), _instruction(traj)]


def summarize_rows(rows: list[list[Any]]) -> dict[str, Any]:
    """The header's numbers, defined as ``eval`` defines them: pass@1 and mean reward are means
    over tasks of each task's mean over its samples; endings count episodes per status. An
    episode with no grade counts as failed with reward 0."""
    c = {name: i for i, name in enumerate(COLUMNS)}
    by_task: dict[str, list[list[Any]]] = defaultdict(list)
    for r in rows:
        by_task[r[c["task"]]].append(r)
    rates = [sum(bool(r[c["passed"]]) for r in rs) / len(rs) for rs in by_task.values()]
    rewards = [sum(r[c["reward"]] or 0.0 for r in rs) / len(rs) for rs in by_task.values()]
    return {"episodes": len(rows), "tasks": len(by_task), "passed": sum(bool(r[c["passed"]]) for r in rows),
            "pass@1": sum(rates) / len(rates) if rates else None,
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,
            "endings": dict(sorted(Counter(r[c["ending"]] for r in rows).items())),
            "families": sorted({r[c["family"]] for r in rows})}


def _csp(script: str) -> str:
    """The index's Content-Security-Policy: nothing loads or runs but the inline style and its
    one script (allowed by hash)."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"


def json_for_script(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` as JSON escapes, so no
    value can close the element or open a comment, and ``JSON.parse`` gives them back."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


INDEX_JS = """(() => {
"use strict";
const data = JSON.parse(document.getElementById("episodes-data").textContent);
const C = {};
data.columns.forEach((name, i) => { C[name] = i; });
const rows = data.rows, size = data.page_size;
const $ = (id) => document.getElementById(id);
const form = {failed: $("f-failed"), family: $("f-family"), ending: $("f-ending"), q: $("f-q")};
for (const [select, values] of [[form.family, data.families], [form.ending, Object.keys(data.endings)]]) {
  for (const v of values) {
    const o = document.createElement("option");
    o.value = v; o.textContent = v; select.appendChild(o);
  }
}
let page = 0;

function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  form.failed.checked = p.get("failed") === "1";
  form.family.value = p.get("family") || "";  // a value the run lacks selects "all"
  form.ending.value = p.get("ending") || "";
  form.q.value = p.get("q") || "";
  page = Math.max(0, (parseInt(p.get("page") || "1", 10) || 1) - 1);
}

function writeHash() {
  const p = new URLSearchParams();
  if (form.failed.checked) p.set("failed", "1");
  if (form.family.value) p.set("family", form.family.value);
  if (form.ending.value) p.set("ending", form.ending.value);
  if (form.q.value) p.set("q", form.q.value);
  if (page) p.set("page", String(page + 1));
  history.replaceState(null, "", "#" + p.toString());
}

function selected() {
  const q = form.q.value.trim().toLowerCase();
  return rows.filter((r) =>
    (!form.failed.checked || !r[C.passed]) &&
    (!form.family.value || r[C.family] === form.family.value) &&
    (!form.ending.value || r[C.ending] === form.ending.value) &&
    (!q || [r[C.task], r[C.family], r[C.category], r[C.ending], r[C.text]].join("\\n").toLowerCase().includes(q)));
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function render() {
  const shown = selected();
  const pages = Math.max(1, Math.ceil(shown.length / size));
  page = Math.min(page, pages - 1);
  const body = $("episodes-body");
  body.replaceChildren();
  for (const r of shown.slice(page * size, (page + 1) * size)) {
    const tr = document.createElement("tr");
    tr.className = "ep " + (r[C.passed] ? "ep-pass" : "ep-fail");
    const a = document.createElement("a");
    a.href = "episodes/" + r[C.page];
    a.textContent = r[C.task];
    cell(tr, "").appendChild(a);
    cell(tr, String(r[C.sample]));
    cell(tr, r[C.family]);
    cell(tr, r[C.category]);
    cell(tr, r[C.passed] ? "pass" : "fail", r[C.passed] ? "pass" : "fail");
    cell(tr, typeof r[C.reward] === "number" ? r[C.reward].toFixed(3) : "?");
    cell(tr, r[C.ending]);
    cell(tr, String(r[C.calls]));
    cell(tr, String(r[C.errors]));
    body.appendChild(tr);
  }
  const passed = shown.filter((r) => r[C.passed]).length;
  const reward = shown.reduce((s, r) => s + (r[C.reward] || 0), 0);
  $("n-shown").textContent = String(shown.length);
  $("n-shown-passed").textContent = String(passed);
  $("shown-reward").textContent = shown.length ? (reward / shown.length).toFixed(3) : "n/a";
  $("page-of").textContent = "page " + (page + 1) + " of " + pages;
  $("prev").disabled = page === 0;
  $("next").disabled = page >= pages - 1;
  writeHash();
}

for (const input of Object.values(form)) input.addEventListener("input", () => { page = 0; render(); });
$("prev").addEventListener("click", () => { page -= 1; render(); });
$("next").addEventListener("click", () => { page += 1; render(); });
window.addEventListener("hashchange", () => { readHash(); render(); });
readHash();
render();
})();
"""

EXTRA_CSS = """
#summary td,#summary th{padding:.2em .8em} #filters{margin:1em 0;display:flex;gap:1.2em;align-items:center}
#filters input[type=search]{width:22em} #selection{color:#444} #pager{margin:.6em 0}
"""


def _hash_link(text: str, **params: str) -> str:
    target = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())
    return f"<a href=\"#{h(target)}\">{text}</a>"


def index_html(name: str, rows: list[list[Any]]) -> str:
    """The index page: summary header (each ending a link that filters on it), filters, search,
    and the table the script fills from the rows."""
    s = summarize_rows(rows)
    failed = _hash_link(f"{s['episodes'] - s['passed']} failed", failed="1")
    endings = ", ".join(_hash_link(f"{h(k)} {v}", ending=k) for k, v in s["endings"].items()) or "none"
    header = (f"<table id=\"summary\"><tr><th>episodes</th><th>tasks</th><th>pass@1</th><th>passed</th>"
              f"<th>mean reward</th><th>endings</th></tr><tr><td id=\"s-episodes\">{s['episodes']}</td>"
              f"<td id=\"s-tasks\">{s['tasks']}</td><td id=\"s-pass1\">{num(s['pass@1']) if s['tasks'] else 'n/a'}</td>"
              f"<td id=\"s-passed\">{s['passed']} ({failed})"
              f"</td><td id=\"s-reward\">{num(s['mean_reward']) if s['tasks'] else 'n/a'}</td>"
              f"<td id=\"s-endings\">{endings}</td></tr></table>"
              "<p>pass@1 and mean reward: the mean over tasks of each task's mean over its samples, as "
              "<code>longhorizon eval</code> counts them.</p>")
    filters = ("<form id=\"filters\" onsubmit=\"return false\">"
               "<label><input type=\"checkbox\" id=\"f-failed\"> failed only</label>"
               "<label>family <select id=\"f-family\"><option value=\"\">all</option></select></label>"
               "<label>ending <select id=\"f-ending\"><option value=\"\">all</option></select></label>"
               "<label>search <input type=\"search\" id=\"f-q\" placeholder=\"task, family, category, "
               "instruction\"></label></form>")
    selection = ("<p id=\"selection\"><span id=\"n-shown\">?</span> of " + str(s["episodes"]) + " episodes match; "
                 "<span id=\"n-shown-passed\">?</span> passed, mean reward <span id=\"shown-reward\">?</span></p>")
    table = ("<table id=\"episodes\"><thead><tr><th>task</th><th>sample</th><th>family</th><th>category</th>"
             "<th>result</th><th>reward</th><th>ending</th><th>calls</th><th>errors</th></tr></thead>"
             "<tbody id=\"episodes-body\"></tbody></table>"
             "<div id=\"pager\"><button type=\"button\" id=\"prev\">← previous</button> <span id=\"page-of\"></span> "
             "<button type=\"button\" id=\"next\">next →</button></div>"
             "<noscript><p>The table needs JavaScript; every episode's page is in the <code>episodes/</code> "
             "folder.</p></noscript>")
    data = {"columns": list(COLUMNS), "rows": rows, "page_size": PAGE_SIZE, "endings": s["endings"],
            "families": s["families"]}
    body = (f"<h1>Run {h(name)}</h1>{header}{filters}{selection}{table}"
            f"<script type=\"application/json\" id=\"episodes-data\">{json_for_script(data)}</script>"
            f"<script>{INDEX_JS}</script>")
    return page(f"run {name}", body, csp=_csp(INDEX_JS), css=EXTRA_CSS)


def episode_html(name: str, traj: Trajectory, prev: str | None, next_: str | None) -> str:
    """One episode's page: links back to the index and to its neighbours, then the episode."""
    nav = ["<a href=\"../index.html\">all episodes</a>"]
    if prev:
        nav.append(f"<a href=\"{h(prev)}\" rel=\"prev\">← previous</a>")
    if next_:
        nav.append(f"<a href=\"{h(next_)}\" rel=\"next\">next →</a>")
    body = (f"<nav>{' · '.join(nav)}</nav><h1>{h(traj.task_id)} #{h(traj.sample)}</h1>"
            f"<p>run <code>{h(name)}</code></p>{trajectory_html(traj)}")
    return page(f"{traj.task_id} #{traj.sample}", body)


def _order(record: dict) -> tuple:
    sample = record.get("sample")
    n = _number(sample)
    return (_text(record.get("task_id")), 0 if n is not None else 1, n or 0.0, _text(sample))


def write_run_view(out: Path, name: str, records: Iterable[dict]) -> Path:
    """Write the viewer of a run's episode records (dicts, as the run stores them) into ``out``;
    returns the index's path. One Trajectory is held at a time. A record that is not a
    Trajectory of a readable schema raises ValueError, KeyError or TypeError."""
    records = sorted(records, key=_order)
    names, taken = [], set()
    for i, r in enumerate(records):  # two records of one (task, sample): the first keeps the plain name
        n = episode_page(r.get("task_id"), r.get("sample"))
        n = n if n not in taken else episode_page(repr((r.get("task_id"), r.get("episode_id"))), i)
        taken.add(n)
        names.append(n)
    (out / "episodes").mkdir(parents=True, exist_ok=True)
    rows = []
    for i, record in enumerate(records):
        traj = Trajectory.from_dict(record)
        rows.append(episode_row(traj))
        prev, next_ = (names[i - 1] if i else None), (names[i + 1] if i + 1 < len(names) else None)
        (out / "episodes" / names[i]).write_text(episode_html(name, traj, prev, next_), encoding="utf-8")
    index = out / "index.html"
    index.write_text(index_html(name, rows), encoding="utf-8")
    return index
