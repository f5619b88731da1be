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

from longhorizon.core.errors import UsageError


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
    res = run_bfcl(args.base_url, args.model, cats, Path(args.out), limit=args.limit, threads=args.threads,
                   temperature=args.temperature, quiet=args.quiet)
    print(json.dumps(res["summary"], indent=2) if args.format == "json" else format_markdown(res))
    print(f"results: {Path(args.out) / 'results.json'}", file=sys.stderr)
    return 0


def add_commands(sub) -> None:
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
    b.add_argument("--limit", type=int, help="only the first N entries of each category (scored as a partial run)")
    b.add_argument("--threads", type=int, default=4, help="requests in flight (default 4)")
    b.add_argument("--temperature", type=float, default=0.001, help="BFCL's default 0.001 (greedy in effect)")
    b.add_argument("--out", required=True, help="output folder")
    b.add_argument("--format", choices=["md", "json"], default="md")
    b.add_argument("--quiet", action="store_true", help="no BFCL progress output (still in OUT/bfcl/bfcl.log)")
    b.set_defaults(func=cmd_bench_bfcl)
