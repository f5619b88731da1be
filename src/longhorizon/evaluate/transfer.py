"""The transfer report: base vs trained on the internal holdout, holdout families, BFCL-V4
categories and τ² domains, in one table (Markdown and a self-contained HTML page).

Inputs are run folders (``longhorizon run``; keyed by their split and level) and benchmark
``results.json`` files (keyed by benchmark, then category or domain). Each row pairs base and
trained by task or entry (``metrics.compare``): Δ with a paired bootstrap interval and
McNemar's exact p. With ``repeat`` (the base model's inputs run again, same kinds) each row
also carries its noise floor (``noise_floor``): the base's self-disagreement, the floor, and
whether Δ is inside it.

The firewall verdict: a comparison is called clean only when the trained model's provenance
(``train.provenance``) shows nothing but suite inputs and internal checkpoint choice, and an
audit (``longhorizon audit``) of the suite against the benchmarks passed. Otherwise the report
says, at the top, why it is not clean.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.evaluate.metrics import compare
from longhorizon.evaluate.noise_floor import with_floor
from longhorizon.evaluate.results import _as_rows, is_results, load_results


def _source(path: str) -> tuple[str, list[dict], dict]:
    """(key, rows in ``metrics.compare``'s shape, what it is) of a run folder or a results.json.
    A benchmark's rows are named CATEGORY/ID (category, else domain, from the entry or the
    file's meta), so one benchmark's files per domain can be joined without id clashes."""
    if is_results(path):
        res = load_results(path)
        meta = res.get("meta", {})
        cat = lambda e: e.get("category") or e.get("domain") or meta.get("domain") or res["benchmark"]  # noqa: E731
        rows = _as_rows([{**e, "category": cat(e), "id": f"{cat(e)}/{e['id']}"} for e in res["entries"]])
        return res["benchmark"], rows, {"model": res.get("model"), "meta": meta}
    from longhorizon.rollout.store import open_existing

    try:
        store = open_existing(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable input is the user's to fix
        raise UsageError(f"{path} is neither a run folder nor a results.json: {exc}") from None
    manifest = store.manifest()
    rows = store.trajectories()
    return f"suite:{manifest.get('split')}{_level_of(rows)}", rows, {"policy": manifest.get("policy")}


def _level_of(rows: list[dict]) -> str:
    """`` level N`` for a run below its families' top level, read from its task ids
    (``family-seed@LN``; the highest N when they differ), else "" (each family's top level: a
    family whose top level is N has no suffix, so its ids are the default run's, as its tasks
    are). Keys the suite's rows by level too: held-out seeds at the trained level and at a
    longer one are two rows, not a clash."""
    levels = {int(tid.rsplit("@L", 1)[1]) for r in rows if "@L" in (tid := str(r.get("task_id", "")))
              and tid.rsplit("@L", 1)[1].isdigit()}
    return f" level {max(levels)}" if levels else ""


def _side(paths: list[str]) -> dict[str, tuple[str, list[dict], dict]]:
    """One side's inputs by key. Several results of one benchmark (e.g. one per τ² domain) are
    joined; two run folders of one split and level are refused (which would the row be?)."""
    out: dict[str, tuple[str, list[dict], dict]] = {}
    for p in paths:
        k, rows, meta = _source(p)
        if k in out:
            if k.startswith("suite:"):
                raise UsageError(f"two runs of split {k[6:]} on one side ({out[k][0]}, {p}): give one")
            prev = out[k]
            rows, p = prev[1] + rows, f"{prev[0]}, {p}"
        out[k] = (p, rows, meta)
    return out


def _model_provenance(meta: dict) -> dict | None:
    pol = meta.get("policy") or {}
    return pol.get("model_provenance") if isinstance(pol, dict) else None


def build(base: list[str], trained: list[str], trained_model: str | None = None,
          audit_path: str | None = None, repeat: list[str] | None = None) -> dict[str, Any]:
    from longhorizon.policies.render import read_provenance
    from longhorizon.train.provenance import firewall_problems

    b, t = _side(base), _side(trained)
    r2 = _side(repeat) if repeat else {}
    stray = sorted(set(r2) - set(b))
    if stray:
        raise UsageError(f"--repeat gives {', '.join(stray)}, which --base does not: a repeat pairs with a base input")
    missing = sorted(set(b) ^ set(t))
    rows = []
    order = sorted(set(b) & set(t), key=lambda k: (not k.startswith("suite:"), k != "suite:holdout", k))
    for key in order:
        ra, rb = b[key][1], t[key][1]
        ra2 = r2[key][1] if key in r2 else None
        rows.append({"suite": key, "row": "overall", **_pair(ra, rb, ra2)})
        if not key.startswith("suite:"):
            for cat in sorted({r["category"] for r in ra} & {r["category"] for r in rb}):
                of = lambda rs: None if rs is None else [r for r in rs if r["category"] == cat]  # noqa: E731
                rows.append({"suite": key, "row": cat, **_pair(of(ra), of(rb), of(ra2))})
    # The firewall verdict.
    if trained_model:
        prov, prov_from = read_provenance(trained_model), trained_model
    else:
        found = [_model_provenance(meta) for _, _, meta in t.values() if _model_provenance(meta)]
        prov, prov_from = (found[0], "the trained runs' policy record") if found else (None, None)
    problems = firewall_problems(prov)
    audit = None
    if audit_path:
        try:
            audit = json.loads(Path(audit_path).read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read the audit {audit_path}: {exc}") from None
        if not audit.get("passed"):
            problems.append(f"the audit {audit_path} flagged {audit.get('flagged')} overlaps with the benchmarks")
    else:
        problems.append("no audit given (--audit DIR/audit.json from `longhorizon audit`)")
    return {"rows": rows, "unpaired": missing, "clean": not problems, "firewall_problems": problems,
            "provenance_from": prov_from, "audit": audit_path,
            "inputs": {"base": {k: v[0] for k, v in b.items()}, "trained": {k: v[0] for k, v in t.items()},
                       **({"repeat": {k: v[0] for k, v in r2.items()}} if r2 else {})}}


def _pair(ra: list[dict], rb: list[dict], ra2: list[dict] | None = None) -> dict:
    """One row: base vs trained, and with the base's repeat ``ra2`` the noise floor."""
    c = compare(ra, rb)
    if not c["paired_tasks"]:
        return {"n": 0}
    row = {"n": c["paired_tasks"], "base": c["pass@1_a"], "trained": c["pass@1_b"], "delta": c["delta_pass@1"],
           "ci95": c["delta_pass@1_ci95"], "p": c["mcnemar"]["p_value"],
           "base_only": c["mcnemar"]["a_only_passed"], "trained_only": c["mcnemar"]["b_only_passed"]}
    if ra2 is not None:
        fl = with_floor(c, ra, ra2)
        f = fl["noise_floor"]
        row["noise_floor"] = {"paired_tasks": f["paired_tasks"], "self_disagreement": f["self_disagreement"],
                              "self_delta": f["self_delta_pass@1"], "self_delta_ci95": f["self_delta_pass@1_ci95"],
                              "floor": f["floor"]["pass@1"], "inside": fl["inside_noise_floor"]["pass@1"]}
    return row


FLOOR_NOTE = ("Noise floor (where a repeat run of the base was given): the base's self-disagreement (share of "
              "tasks whose verdict differs between its two runs) and floor = max |bound| of its self-Δ 95% interval; "
              "Δ is INSIDE the floor when |Δ| ≤ floor (not distinguishable from a rerun of the base).")
HEAD = ("benchmark", "row", "n", "base", "trained", "Δ", "95% CI", "McNemar p",
        "base self-disagreement", "noise floor", "Δ vs floor")


def _cells(r: dict) -> list[str]:
    if not r["n"]:
        return [r["suite"], r["row"], "0"] + [""] * (len(HEAD) - 3)
    lo, hi = r["ci95"]
    f = r.get("noise_floor")
    floor = ["", "", ""] if not f or not f["paired_tasks"] else [
        f"{f['self_disagreement']:.3f}", f"±{f['floor']:.3f}", "INSIDE" if f["inside"] else "outside"]
    return [r["suite"].replace("suite:", "internal "), r["row"], str(r["n"]), f"{r['base']:.3f}", f"{r['trained']:.3f}",
            f"{r['delta']:+.3f}", f"[{lo:+.3f}, {hi:+.3f}]", f"{r['p']:.3g}", *floor]


def _verdict(rep: dict) -> str:
    if rep["clean"]:
        return (f"Firewall: clean — the trained model's provenance ({rep['provenance_from']}) names only suite "
                f"inputs and internal checkpoint choice, and the audit ({rep['audit']}) passed.")
    return "Firewall: NOT shown clean — " + "; ".join(rep["firewall_problems"]) + "."


def format_markdown(rep: dict) -> str:
    lines = ["# Transfer: base vs trained", "", f"**{_verdict(rep)}**", "",
             "pass@1 (greedy) paired by task or entry; Δ = trained − base with a paired bootstrap 95% interval; "
             "McNemar's exact p on the discordant pairs. " + FLOOR_NOTE, "",
             "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rep["rows"]]
    if rep["unpaired"]:
        lines += ["", f"Given for one side only (not compared): {', '.join(rep['unpaired'])}."]
    lines += ["", "Inputs:", ""] + [f"- {side} {k}: `{p}`" for side in ("base", "trained")
                                    for k, p in rep["inputs"][side].items()]
    return "\n".join(lines) + "\n"


def format_html(rep: dict) -> str:
    e = html.escape
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in _cells(r)) + "</tr>" for r in rep["rows"])
    colour = "#1a7f37" if rep["clean"] else "#b42318"
    inputs = "".join(f"<li>{e(side)} {e(k)}: <code>{e(p)}</code></li>" for side in ("base", "trained")
                     for k, p in rep["inputs"][side].items())
    unpaired = f"<p>Given for one side only (not compared): {e(', '.join(rep['unpaired']))}.</p>" if rep["unpaired"] else ""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Transfer: base vs trained</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:right}}td:nth-child(-n+2),th:nth-child(-n+2){{text-align:left}}
.verdict{{color:{colour};font-weight:bold}}</style></head><body>
<h1>Transfer: base vs trained</h1>
<p class="verdict">{e(_verdict(rep))}</p>
<p>pass@1 (greedy) paired by task or entry; Δ = trained − base with a paired bootstrap 95% interval;
McNemar's exact p on the discordant pairs. {e(FLOOR_NOTE)}</p>
<table><tr>{''.join(f'<th>{e(h)}</th>' for h in HEAD)}</tr>{body}</table>
{unpaired}<p>Inputs:</p><ul>{inputs}</ul>
</body></html>
"""


def write(rep: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "transfer.json").write_text(json.dumps(rep, indent=1))
    (out / "report.md").write_text(format_markdown(rep))
    (out / "report.html").write_text(format_html(rep))
