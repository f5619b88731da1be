"""Grading one episode has a wall-clock bound: a grader that does not finish fails its task's
criteria with a note, and the episode is recorded."""

import asyncio
import threading
from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task
from longhorizon.env.episode import Limits, play_task
from longhorizon.policies.scripted import ReplayPolicy


def stuck_task(release: threading.Event) -> Task:
    def build(root: Path) -> None:
        (root / "workspace" / "in.txt").write_text("1\n")

    def oracle():
        return "done"
        yield  # a generator that makes no calls

    def stuck(world, traj):
        release.wait(30)  # a grader that meets something it cannot finish reading
        return True

    return Task(id="stuck-000000", family="stuck", category="test", split="train", seed=0,
                instruction="Do nothing.", apps=("files",), build=build, oracle=oracle,
                criteria=[Criterion("quick", "always met", "final_state", lambda w, t: True),
                          Criterion("stuck", "never finishes", "final_state", stuck)])


def test_grading_past_its_bound_fails_every_criterion_with_a_note():
    release = threading.Event()
    try:
        traj = asyncio.run(play_task(stuck_task(release), ReplayPolicy({"role": "assistant", "content": "done"}),
                                     limits=Limits(max_grade_s=0.2)))
    finally:
        release.set()
    assert traj.status == "completed"
    assert not traj.passed and traj.reward == 0
    assert all(not r.passed and "grading did not finish within 0.2 s" in r.note for r in traj.grade.results)
    assert traj.provenance["grading_timed_out_s"] == 0.2


def test_grading_within_its_bound_is_untouched():
    release = threading.Event()
    release.set()
    traj = asyncio.run(play_task(stuck_task(release), ReplayPolicy({"role": "assistant", "content": "done"}),
                                 limits=Limits(max_grade_s=30)))
    assert traj.passed
    assert "grading_timed_out_s" not in traj.provenance
