"""How far a judge agrees with the deterministic criteria on the same episodes (Cohen's κ).

Before a judged criterion is trusted where no code can check, the judge is measured where code
can: each criterion of a graded episode is put to the judge as a rubric made of its own
description (``criterion_rubric``), over the episode's condensed transcript
(``core.judged.condensed_context``; the World is gone after a run, so the judge reads what the
tool results showed), and its yes/no is set against the criterion's deterministic result.
Reported: per criterion kind and overall, the episodes' criteria judged, raw agreement, how
often each side said yes, and κ; and the judge's cost per episode (requests, prompt and
completion tokens, seconds). Verdicts go through the judge's cache, so a rerun asks nothing.

``benchmarks/judge_agreement.py`` runs it on a run folder against an OpenAI-compatible server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from longhorizon.analysis.judge import cohen_kappa
from longhorizon.core.judged import Judge, Rubric, condensed_context
from longhorizon.core.task import Task
from longhorizon.core.trajectory import Trajectory


def criterion_rubric(description: str) -> Rubric:
    """The rubric that asks the judge what a deterministic criterion checks."""
    return Rubric(f"Judging from the transcript, did the agent achieve this: {description}?")


async def judge_criteria(judge: Judge, trajs: Iterable[Trajectory], task_of: Callable[[str], Task],
                         concurrency: int = 1) -> list[dict[str, Any]]:
    """One row per (graded episode, criterion): the judge's verdict next to the criterion's
    deterministic result. ``task_of(task_id)`` gives the criteria's descriptions."""
    gate = asyncio.Semaphore(concurrency)
    jobs = []
    for t in trajs:
        if t.grade is None:
            continue
        described = {c.id: c.description for c in task_of(t.task_id).criteria}
        context = condensed_context(t)
        for r in t.grade.results:
            if r.id in described:
                jobs.append((t, r, criterion_rubric(described[r.id]), context))

    async def one(t, r, rubric, context):
        async with gate:
            v = await judge.averdict(rubric, context)
        return {"episode_id": t.episode_id, "criterion": r.id, "kind": r.kind, "judge": bool(v.met),
                "deterministic": r.passed, "cached": v.cached}

    return list(await asyncio.gather(*(one(*j) for j in jobs)))


def agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per criterion kind and ``all``: n, raw agreement, the judge's and the criteria's yes
    share, and Cohen's κ (None when undefined)."""
    out = {}
    for kind in ("all", "final_state", "process"):
        sel = [r for r in rows if kind == "all" or r["kind"] == kind]
        j, d = [r["judge"] for r in sel], [r["deterministic"] for r in sel]
        n = len(sel)
        out[kind] = {"n": n, "agreement": sum(a == b for a, b in zip(j, d)) / n if n else None,
                     "judge_yes": sum(j) / n if n else None, "deterministic_yes": sum(d) / n if n else None,
                     "kappa": cohen_kappa(j, d)}
    return out


def cost_per_episode(judge: Judge, episodes: int) -> dict[str, float]:
    """What the judge cost per episode in this process: requests (cache hits are free), tokens, seconds."""
    n = max(episodes, 1)
    return {"requests": judge.requests / n, "prompt_tokens": judge.usage["prompt_tokens"] / n,
            "completion_tokens": judge.usage["completion_tokens"] / n, "seconds": judge.usage["seconds"] / n}
