"""CLI subcommands of the behaviour analysis.

    longhorizon analyze RUN_A RUN_B --out DIR          paired behaviour report (A = base, B = trained),
                                                       with both runs' viewers (DIR/view-a, DIR/view-b)
    longhorizon view RUN [--task ID] [--open]          single-run viewer (a folder: index.html, one page per episode)
    longhorizon import tau2 RESULTS.json --out RUN     τ²-bench results as a run folder
    longhorizon import bfcl RESULT --score SCORE --out RUN   BFCL multi-turn results as a run folder

Kept here so the analysis owns its commands; cli.py only calls ``add_commands``.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

from longhorizon.core.errors import UsageError
from longhorizon.core.progress import show_progress


VIEWS = {"a": "view-a", "b": "view-b"}
"""The folders, inside ``analyze``'s output, of each run's viewer (the report links every pair to them)."""


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
    from longhorizon.analysis.run_view import write_run_view

    if not args.no_views:
        for side, run, rows in (("a", args.run_a, rows_a), ("b", args.run_b, rows_b)):
            with _readable(run):
                write_run_view(out / VIEWS[side], names["ab".index(side)], rows)
    paths = write_report(out, result, pairs, names, max_viewed=args.max_viewed, result_chars=args.result_chars,
                         views=None if args.no_views else (VIEWS["a"], VIEWS["b"]))
    if args.format == "json":
        print(json.dumps({k: str(v) for k, v in paths.items()} | {"outcomes": result["outcomes"]}))
    else:
        print(f"paired episodes: {result['paired_episodes']} ({', '.join(f'{k} {v}' for k, v in result['outcomes'].items())})")
        for k in ("html", "md", "json"):
            print(f"wrote {paths[k]}")
    return 0


@contextmanager
def _readable(run: str):
    """Maps a record that is not a readable Trajectory to a one-line usage error."""
    try:
        yield
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{run} holds a record that is not a readable Trajectory: {exc}") from None


def open_in_browser(path: Path) -> bool:
    """Open a page in the machine's browser; False (after saying so) where it has none."""
    import webbrowser

    if webbrowser.open(path.resolve().as_uri()):
        return True
    print(f"no browser found on this machine: open {path} in one yourself", file=sys.stderr)
    return False


def cmd_view(args) -> int:
    from longhorizon.analysis.run_view import write_run_view

    rows = _episodes(args.run_dir)
    if args.task:
        rows = [r for r in rows if r.get("task_id") == args.task]
        if not rows:
            raise UsageError(f"{args.run_dir} has no episode of task {args.task!r}")
    out = Path(args.out) if args.out else Path(args.run_dir) / (f"view-{args.task}" if args.task else "view")
    if out.suffix == ".html" or out.is_file():
        raise UsageError(f"--out {out}: the viewer is a folder (index.html and one page per episode), not a file")
    with _readable(args.run_dir):
        index = write_run_view(out, args.run_dir + (f" · {args.task}" if args.task else ""), rows)
    print(index)
    if args.open:
        open_in_browser(index)
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
    a.add_argument("--no-views", action="store_true",
                   help="skip writing each run's viewer into OUT/view-a and OUT/view-b (the report then links no "
                        "episode pages; for a report kept small, e.g. committed)")
    a.add_argument("--judge-base-url", help="optional judged coding: an OpenAI-compatible endpoint (off by default)")
    a.add_argument("--judge-model", help="the judge's model name")
    a.add_argument("--judge-cache", help="verdict cache, JSONL (default: OUT/judge_cache.jsonl)")
    a.add_argument("--quiet", action="store_true", help="no progress bar while judging")
    a.add_argument("--allow-incomplete", action="store_true",
                   help="analyze a run with episodes missing from its manifest's count (only pairs both have)")
    a.add_argument("--format", choices=["text", "json"], default="text")
    a.set_defaults(func=cmd_analyze)

    v = sub.add_parser("view", help="write the HTML viewer of a run (or one task) and print its index's path",
                       description="Writes a static folder that opens from file://: index.html (pass@1, mean reward, "
                                   "endings; filters for failed episodes, family and ending; search; a paged table) "
                                   "and one page per episode in episodes/. Filters live in the URL's hash, e.g. "
                                   "index.html#failed=1&family=F.")
    v.add_argument("run_dir")
    v.add_argument("--task", help="only this task id")
    v.add_argument("--out", help="the viewer's folder (default: RUN/view or RUN/view-TASK)")
    v.add_argument("--open", action="store_true",
                   help="also open it in a browser (where the machine has none, says so; the path is printed either way)")
    v.set_defaults(func=cmd_view)

    imp = sub.add_parser("import", help="turn another benchmark's result files into a run folder of Trajectories")
    imp.add_argument("source", choices=["tau2", "bfcl"], help="tau2: a τ²-bench results JSON; bfcl: a BFCL-V4 "
                                                              "multi-turn result file (with --score)")
    imp.add_argument("file")
    imp.add_argument("--score", help="bfcl: the matching score file")
    imp.add_argument("--out", required=True, help="run folder to write (re-importing the same file adds nothing)")
    imp.add_argument("--format", choices=["text", "json"], default="text")
    imp.set_defaults(func=cmd_import)
