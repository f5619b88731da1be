"""The `longhorizon` command line. Every subcommand has --help; bad input exits with code 2."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.task import SPLITS

POLICIES = ("oracle", "null", "openai", "local")


def _policy(args):
    from longhorizon.policies.factory import make_policy

    return make_policy(
        args.policy, model=args.model, base_url=args.base_url, temperature=args.temperature,
        top_p=args.top_p, max_tokens=args.max_tokens, seed=args.sampling_seed,
    )


# -- tasks ---------------------------------------------------------------------------------
def cmd_tasks_list(args) -> int:
    from longhorizon.core.registry import tasks_for
    from longhorizon.env.oracle_stats import oracle_tool_calls

    splits = [args.split] if args.split else list(SPLITS)
    tasks = [t for s in splits for t in tasks_for(s, args.seeds, args.family)]
    counts = oracle_tool_calls(tasks, progress=args.format == "table" and sys.stderr.isatty())
    rows = [{k: t.card()[k] for k in ("id", "category", "family", "split", "apps")}
            | {"oracle_tool_calls": counts[t.id]} for t in tasks]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'id':<40} {'category':<28} {'split':<14} {'calls':>5}  apps")
    for r in rows:
        print(f"{r['id']:<40} {r['category']:<28} {r['split']:<14} {r['oracle_tool_calls']:>5}  {','.join(r['apps'])}")
    print(f"{len(rows)} tasks, {len({r['family'] for r in rows})} families, "
          f"{len({r['category'] for r in rows})} categories")
    return 0


def cmd_tasks_show(args) -> int:
    from longhorizon.core.registry import get_task

    card = get_task(args.task_id).card()
    if args.format == "json":
        print(json.dumps(card, indent=2))
        return 0
    print(f"{card['id']}  ({card['category']} / {card['family']}, split {card['split']})")
    print(f"apps: {', '.join(card['apps'])}\n\n{card['instruction']}\n\ncriteria:")
    for c in card["criteria"]:
        print(f"  [{c['kind']}] {c['id']} (weight {c['weight']:g}): {c['description']}")
    return 0


# -- world / serve-app ---------------------------------------------------------------------
def cmd_world_build(args) -> int:
    from longhorizon.core.registry import get_task
    from longhorizon.core.world import World

    task = get_task(args.task_id)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty")
    world = World.build(out, task.build)
    print(json.dumps({"task_id": task.id, "world": str(out), "world_hash": world.hash(),
                      "apps": list(task.apps)}))
    return 0


def cmd_serve_app(args) -> int:
    from longhorizon.apps.serve import serve

    serve(args.app, args.world, transport=args.transport, host=args.host, port=args.port)
    return 0


# -- run / eval / compare --------------------------------------------------------------------
def cmd_run(args) -> int:
    from longhorizon.core.registry import tasks_for
    from longhorizon.env.episode import Limits
    from longhorizon.evaluate.metrics import format_summary
    from longhorizon.rollout.runner import RunSpec, run_episodes

    tasks = tasks_for(args.split, args.seeds, args.family)
    if not tasks:
        raise UsageError(f"split {args.split} has no instances of the chosen families "
                         "(holdout families are only in split holdout-family)")
    policy = _policy(args)
    limits = Limits(max_turns=args.max_turns, max_tool_calls=args.max_tool_calls, max_wall_s=args.max_wall_s)
    spec = RunSpec(policy=policy.describe(), split=args.split, seeds=args.seeds,
                   families=sorted(args.family) if args.family else None, samples=args.samples, limits=limits)
    summary = asyncio.run(run_episodes(tasks, policy, spec, args.out, concurrency=args.concurrency,
                                       progress=not args.quiet))
    print(format_summary(summary))
    print(f"trajectories: {Path(args.out) / 'trajectories.jsonl'}")
    return 0 if summary["complete"] else 1


def _load_run(path: str) -> tuple[list[dict], list[dict], dict]:
    from longhorizon.rollout.store import open_existing

    store = open_existing(path)
    return store.trajectories(), store.infra_errors(), store.manifest()


def cmd_eval(args) -> int:
    from longhorizon.evaluate.metrics import format_summary, summarize

    rows, infra, manifest = _load_run(args.run_dir)
    summary = summarize(rows, infra, expected=manifest.get("episodes"))
    print(json.dumps(summary, indent=2) if args.format == "json" else format_summary(summary))
    return 0


def cmd_compare(args) -> int:
    from longhorizon.evaluate.metrics import compare, format_compare

    a, _, _ = _load_run(args.run_a)
    b, _, _ = _load_run(args.run_b)
    result = compare(a, b)
    print(json.dumps(result, indent=2) if args.format == "json" else format_compare(result, args.run_a, args.run_b))
    return 0


# -- parser ----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="longhorizon",
        description="Long-horizon office tasks over real MCP apps: list tasks, play episodes with a "
                    "policy, evaluate and compare runs.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tasks = sub.add_parser("tasks", help="list or show tasks").add_subparsers(dest="tasks_command", required=True)
    tl = tasks.add_parser("list", help="every task with category, family, split, apps and oracle tool-call count")
    tl.add_argument("--split", choices=SPLITS, help="only this split (default: all)")
    tl.add_argument("--seeds", type=int, help="instances per family and split (default: the suite's own)")
    tl.add_argument("--family", action="append", help="only this family (repeatable)")
    tl.add_argument("--format", choices=["table", "json"], default="table")
    tl.set_defaults(func=cmd_tasks_list)
    ts = tasks.add_parser("show", help="instruction, apps and criteria of one task")
    ts.add_argument("task_id", help="FAMILY-SEED, as printed by `tasks list`")
    ts.add_argument("--format", choices=["text", "json"], default="text")
    ts.set_defaults(func=cmd_tasks_show)

    world = sub.add_parser("world", help="build a task's World into a folder").add_subparsers(dest="world_command", required=True)
    wb = world.add_parser("build", help="write a task's World (workspace/ and state/) to --out")
    wb.add_argument("task_id")
    wb.add_argument("--out", required=True)
    wb.set_defaults(func=cmd_world_build)

    sa = sub.add_parser("serve-app", help="serve one app over a World to any MCP client")
    sa.add_argument("app", help="files, sheets, mail, calendar or shell")
    sa.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    sa.add_argument("--world", required=True, help="a World folder (see `longhorizon world build`)")
    sa.add_argument("--host", default="127.0.0.1")
    sa.add_argument("--port", type=int, default=8000)
    sa.set_defaults(func=cmd_serve_app)

    r = sub.add_parser("run", help="play episodes concurrently and write trajectories (resumable)",
                       description="Plays every task of a split (N seeds per family) with a policy. Each "
                                   "finished episode is appended to OUT/trajectories.jsonl; rerunning the same "
                                   "command after a crash finishes the rest.")
    r.add_argument("--policy", choices=POLICIES, required=True,
                   help="oracle (reference solutions), null (does nothing), openai (any OpenAI-compatible "
                        "server: --base-url, --model), local (a transformers model: --model PATH)")
    r.add_argument("--split", choices=SPLITS, default="train")
    r.add_argument("--seeds", type=int, help="instances per family (default: the suite's own split)")
    r.add_argument("--family", action="append", help="only this family (repeatable)")
    r.add_argument("--samples", type=int, default=1, help="episodes per task (default 1)")
    r.add_argument("--out", required=True, help="run folder (created, or resumed if it holds the same run)")
    r.add_argument("--concurrency", type=int, default=8, help="episodes in flight (default 8)")
    r.add_argument("--max-turns", type=int, default=80)
    r.add_argument("--max-tool-calls", type=int, default=200)
    r.add_argument("--max-wall-s", type=float, default=600.0, help="wall time per episode, seconds")
    r.add_argument("--model", help="model name (openai) or path/name of a transformers model (local)")
    r.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--top-p", type=float, default=1.0)
    r.add_argument("--max-tokens", type=int, default=1024, help="tokens per assistant turn")
    r.add_argument("--sampling-seed", type=int, default=0)
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_run)

    e = sub.add_parser("eval", help="pass@1 and mean reward with 95%% CIs, overall and per category")
    e.add_argument("run_dir")
    e.add_argument("--format", choices=["table", "json"], default="table")
    e.set_defaults(func=cmd_eval)

    c = sub.add_parser("compare", help="B vs A paired by task: Δpass@1 with bootstrap CI, McNemar p")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--format", choices=["table", "json"], default="table")
    c.set_defaults(func=cmd_compare)

    from longhorizon.train.commands import add_commands  # data / train subcommands

    add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"longhorizon: error: {exc}", file=sys.stderr)
        return 2
    except InfraError as exc:
        print(f"longhorizon: infrastructure error: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("longhorizon: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
