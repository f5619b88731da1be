"""A run and its metrics: ``rollout.runner.play_run`` plays and persists every episode, then
the run's metrics (``evaluate.metrics.summarize``) are written to ``summary.json`` and returned.

The runner knows no metrics (one direction of flow: episodes, then trajectories, then
metrics); this is what ``longhorizon run``, the demo pipeline and the tests call.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from longhorizon.core.task import Task
from longhorizon.evaluate.metrics import summarize
from longhorizon.rollout.runner import EpisodePlayer, RunSpec, play_run

log = logging.getLogger("longhorizon.rollout")


async def run_episodes(tasks: list[Task], policy, spec: RunSpec, out: Path | str, *,
                       concurrency: int = 8, progress: bool = True,
                       episodes: EpisodePlayer | None = None) -> dict[str, Any]:
    """Play every (task, sample) not yet in ``out`` (``play_run``); return the run's summary,
    also written to ``out/summary.json``."""
    store = await play_run(tasks, policy, spec, out, concurrency=concurrency, progress=progress,
                           episodes=episodes)
    summary = summarize(store.trajectories(), store.infra_errors(), expected=len(tasks) * spec.samples)
    try:
        store.write_summary(summary)
    except OSError as exc:  # the run's lines are safe; the summary is rewritten by the next run or eval
        log.error("could not write %s: %s", store.dir / "summary.json", exc)
    return summary
