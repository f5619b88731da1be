"""CLI subcommands of the behaviour analysis.

    longhorizon analyze RUN_A RUN_B --out DIR          paired behaviour report (A = base, B = trained)
    longhorizon view RUN [--task ID] [--open]          single-run viewer (an HTML file)
    longhorizon import tau2 RESULTS.json --out RUN     τ²-bench results as a run folder
    longhorizon import bfcl RESULT --score SCORE --out RUN   BFCL multi-turn results as a run folder

Kept here so the analysis owns its commands; cli.py only calls ``add_commands``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from longhorizon.core.errors import UsageError
from longhorizon.core.progress import show_progress


def _episodes(path: str, allow_incomplete: bool = True) -> list[dict]:
    """A run's episodes, each once; an incomplete run (episodes missing from its manifest's
    count) is refused unless allowed, as ``compare`` does."""
    from longhorizon.evaluate.metrics import describe_incomplete, run_status
    from longhorizon.rollout.store import open_existing

    store = open_existing(path)
    rows, dups = store.episodes()
    if dups:
        print(f"{path}: dropped {dups} duplicate episode{'s' * (dups != 1)} (first line kept)", file=sys.stderr)
    status = run_status(rows, store.infra_errors(), store.manifest().get("episodes"))
    if not status["complete"]:
        if not allow_incomplete:
            raise UsageError(f"incomplete run, not analyzed: {describe_incomplete(path, status)}; rerun it to "
                             "finish, or pass --allow-incomplete to pair only the episodes both have")
        print(f"INCOMPLETE: {describe_incomplete(path, status)}", file=sys.stderr)
    return rows


def cmd_analyze(args) -> int:
    from longhorizon.analysis.pairs import analyze_pairs
    from longhorizon.analysis.report import write_report

    rows_a = _episodes(args.run_a, args.allow_incomplete)
    rows_b = _episodes(args.run_b, args.allow_incomplete)
    try:
        result, pairs = analyze_pairs(rows_a, rows_b)
    except (ValueError, KeyError, TypeError) as exc:  # a line that is not a Trajectory of our schema
        raise UsageError(f"a run holds a record that is not a readable Trajectory: {exc}") from None
    if not pairs:
        raise UsageError(f"{args.run_a} and {args.run_b} have no (task, sample) in common: nothing to pair")
    out = Path(args.out)
    if args.judge_model or args.judge_base_url:
        if not (args.judge_model and args.judge_base_url):
            raise UsageError("judged coding needs both --judge-base-url and --judge-model")
        from longhorizon.analysis.judge import Judge, judged_coding

        judge = Judge(args.judge_base_url, args.judge_model, Path(args.judge_cache or out / "judge_cache.jsonl"),
                      progress=show_progress(args.quiet))
        result["judge"] = judged_coding(judge, pairs)
    names = (args.name_a or args.run_a, args.name_b or args.run_b)
    result["run_paths"] = {"a": args.run_a, "b": args.run_b}
    paths = write_report(out, result, pairs, names, max_viewed=args.max_viewed, result_chars=args.result_chars)
    if args.format == "json":
        print(json.dumps({k: str(v) for k, v in paths.items()} | {"outcomes": result["outcomes"]}))
    else:
        print(f"paired episodes: {result['paired_episodes']} ({', '.join(f'{k} {v}' for k, v in result['outcomes'].items())})")
        for k in ("html", "md", "json"):
            print(f"wrote {paths[k]}")
    return 0


def cmd_view(args) -> int:
    from longhorizon.analysis.viewer import run_html
    from longhorizon.core.trajectory import Trajectory

    rows = _episodes(args.run_dir)
    if args.task:
        rows = [r for r in rows if r["task_id"] == args.task]
        if not rows:
            raise UsageError(f"{args.run_dir} has no episode of task {args.task!r}")
    try:
        trajs = sorted((Trajectory.from_dict(r) for r in rows), key=lambda t: (t.task_id, t.sample))
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{args.run_dir} holds a record that is not a readable Trajectory: {exc}") from None
    out = Path(args.out) if args.out else Path(args.run_dir) / (f"view-{args.task}.html" if args.task else "view.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(run_html(args.run_dir + (f" · {args.task}" if args.task else ""), trajs))
    print(out)
    if args.open:
        import webbrowser

        webbrowser.open(out.resolve().as_uri())
    return 0


def cmd_import(args) -> int:
    from longhorizon.analysis import importers

    if args.source == "tau2":
        trajs = importers.tau2_trajectories(args.file)
        source = {"source": "tau2-bench", "file": str(args.file)}
    else:
        if not args.score:
            raise UsageError("import bfcl needs the score file too (--score BFCL_v4_..._score.json)")
        trajs = importers.bfcl_trajectories(args.file, args.score)
        source = {"source": "bfcl-v4", "file": str(args.file), "score": str(args.score)}
    summary = importers.write_run(args.out, trajs, source)
    dups = summary["duplicates"]
    print(json.dumps({**summary, "run": str(args.out)}) if args.format == "json" else
          f"{summary['episodes']} episodes ({summary['passed']} passed), {summary['written']} written to {args.out}"
          + (f"; {dups} duplicate id{'s' * (dups != 1)} dropped (first kept)" if dups else ""))
    return 0


def add_commands(sub) -> None:
    a = sub.add_parser("analyze", help="paired behaviour analysis of two runs: report.html, report.md, metrics.json",
                       description="Pairs RUN_A (e.g. the base model) and RUN_B (e.g. the trained one) by task and "
                                   "sample and compares behaviour metrics computed from each Trajectory: local-goal "
                                   "formation, working state, parent-goal stability, verification, parallel calls, "
                                   "task closure, effort. Δ = B - A with 95%% paired bootstrap intervals over tasks; "
                                   "fail→pass, pass→fail and both-fail pairs listed apart; per category.")
    a.add_argument("run_a")
    a.add_argument("run_b")
    a.add_argument("--out", required=True, help="folder for report.html, report.md and metrics.json")
    a.add_argument("--name-a", help="label of run A in the report (default: its path)")
    a.add_argument("--name-b", help="label of run B in the report (default: its path)")
    a.add_argument("--max-viewed", type=int, default=40, help="pairs shown side by side in the report (default 40)")
    a.add_argument("--result-chars", type=int, default=600,
                   help="cut tool arguments and results to this many characters in the pair viewer (default 600)")
    a.add_argument("--judge-base-url", help="optional judged coding: an OpenAI-compatible endpoint (off by default)")
    a.add_argument("--judge-model", help="the judge's model name")
    a.add_argument("--judge-cache", help="verdict cache, JSONL (default: OUT/judge_cache.jsonl)")
    a.add_argument("--quiet", action="store_true", help="no progress bar while judging")
    a.add_argument("--allow-incomplete", action="store_true",
                   help="analyze a run with episodes missing from its manifest's count (only pairs both have)")
    a.add_argument("--format", choices=["text", "json"], default="text")
    a.set_defaults(func=cmd_analyze)

    v = sub.add_parser("view", help="write an HTML viewer of a run (or one task) and print its path")
    v.add_argument("run_dir")
    v.add_argument("--task", help="only this task id")
    v.add_argument("--out", help="the HTML file (default: RUN/view.html or RUN/view-TASK.html)")
    v.add_argument("--open", action="store_true", help="also open it in a browser")
    v.set_defaults(func=cmd_view)

    imp = sub.add_parser("import", help="turn another benchmark's result files into a run folder of Trajectories")
    imp.add_argument("source", choices=["tau2", "bfcl"], help="tau2: a τ²-bench results JSON; bfcl: a BFCL-V4 "
                                                              "multi-turn result file (with --score)")
    imp.add_argument("file")
    imp.add_argument("--score", help="bfcl: the matching score file")
    imp.add_argument("--out", required=True, help="run folder to write (re-importing the same file adds nothing)")
    imp.add_argument("--format", choices=["text", "json"], default="text")
    imp.set_defaults(func=cmd_import)
