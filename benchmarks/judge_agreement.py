"""Agreement (Cohen's κ) between a judge and the deterministic criteria on the same episodes,
and the judge's cost per episode.

    .venv/bin/python benchmarks/judge_agreement.py RUN [--base-url URL --model NAME]
                                                    [--limit 50] [--cache DIR] [--concurrency 1] [--json]

RUN is a run folder (or its trajectories.jsonl) from `longhorizon run`: each graded episode's
criteria are put to the judge as rubrics made of their descriptions (evaluate/judge_agreement.py)
and its yes/no set against each criterion's deterministic result. The judge is any
OpenAI-compatible server; here the only real one is the embedded model served by
`longhorizon serve` (default --base-url http://127.0.0.1:8000/v1). Verdicts are cached (default
RUN/judge_agreement_cache), so a rerun only prints. Prints a table per criterion kind (n,
agreement, judge yes, deterministic yes, κ) and the judge's cost per episode of this
invocation (requests, prompt and completion tokens, seconds; zero when all came from the cache).

Not run for the change that added it: the shared machine was busy (no vLLM server could be
started). Times depend on what else runs on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path


def load(run: Path, limit: int | None):
    from longhorizon.core.trajectory import Trajectory

    path = run / "trajectories.jsonl" if run.is_dir() else run
    trajs = [Trajectory.from_dict(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    trajs = [t for t in trajs if t.grade is not None]
    return trajs[:limit] if limit else trajs


def table(result: dict) -> str:
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    lines = [f"judge: {result['judge']['model']}  episodes: {result['episodes']}", "",
             "| criteria | n | agreement | judge yes | deterministic yes | Cohen's κ |", "|---|---|---|---|---|---|"]
    for kind, a in result["agreement"].items():
        lines.append(f"| {kind} | {a['n']} | {fmt(a['agreement'])} | {fmt(a['judge_yes'])} | "
                     f"{fmt(a['deterministic_yes'])} | {fmt(a['kappa'])} |")
    c = result["cost_per_episode"]
    lines += ["", f"judge cost per episode (this invocation): {c['requests']:.1f} requests, "
                  f"{c['prompt_tokens']:.0f} prompt + {c['completion_tokens']:.0f} completion tokens, "
                  f"{c['seconds']:.2f} s"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from longhorizon.core.judged import Judge
    from longhorizon.evaluate.judge_agreement import agreement, cost_per_episode, judge_criteria
    from longhorizon.tasks.registry import get_task

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a run folder or its trajectories.jsonl")
    p.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    p.add_argument("--model", default="smollm2-135m-instruct", help="the served model's name")
    p.add_argument("--limit", type=int, help="only the first N graded episodes")
    p.add_argument("--cache", type=Path, help="verdict cache folder (default RUN/judge_agreement_cache)")
    p.add_argument("--concurrency", type=int, default=1, help="requests in flight (default 1: one small server)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)

    trajs = load(args.run, args.limit)
    cache = args.cache or (args.run if args.run.is_dir() else args.run.parent) / "judge_agreement_cache"
    judge = Judge(args.base_url, args.model, cache)
    tasks: dict = {}
    rows = asyncio.run(judge_criteria(judge, trajs, lambda tid: tasks.get(tid) or tasks.setdefault(tid, get_task(tid)),
                                      concurrency=args.concurrency))
    result = {"judge": judge.describe(), "episodes": len(trajs), "agreement": agreement(rows),
              "cost_per_episode": cost_per_episode(judge, len(trajs)), "rows": rows}
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
