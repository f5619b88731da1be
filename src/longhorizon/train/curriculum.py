"""Which tasks an RL step plays: a curriculum that prefers tasks the policy sometimes passes.

A group of episodes teaches only when its rewards differ (the advantage is the reward minus the
group's mean). A task the policy always fails, or always passes, gives a flat group; a task it
passes some of the time gives signal. So the curriculum keeps, for every task it has played, the
pass rate of its last group, and for every family the pass rate of its recent episodes, and draws
each step's tasks with weight p(1 - p) (the variance of a pass/fail reward at pass rate p):

    a task played before                    p = the pass rate of its last group
    the next fresh seed of a family         p = (passes + 1) / (episodes + 2) over the family's
                                                last ``window`` episodes (1/2 before any)

A task last seen at pass rate 0 or 1 has weight 0 (not replayed while anything else can be
drawn); a fresh seed never has weight 0, so every family stays reachable and new instances keep
coming (the suite is procedural: fresh seeds cost nothing). Draws are seeded, without
replacement within a step. If every weight is 0, the draw is uniform over the candidates.

With levels (``RLConfig.levels``) each family's level is a stream of its own (``stream``): its
pass rate is its own, so the draw favours the levels the policy passes some of the time: short
ones while long ones fail, longer ones as the short ones are mastered.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Iterator

from longhorizon.core.task import Task

WINDOW = 64
"""Episodes per family that its pass rate is measured over (recent ones: the policy changes)."""


def stream_name(family: str, level: int | None) -> str:
    """A family at one level (the family's name alone when the level is not set)."""
    return family if level is None else f"{family}@L{level}"


def stream(task: Task) -> str:
    """The stream a task is drawn from: its family, at its level."""
    return stream_name(task.family, getattr(task, "level", None))  # stand-ins in tests may have none


class Curriculum:
    """``families``: for each stream (a family, or a family at one level: ``stream``), its tasks in the order fresh ones are drawn (an iterator,
    so tasks can be generated only when drawn)."""

    def __init__(self, families: dict[str, Iterable[Task]], *, seed: int = 0, window: int = WINDOW):
        self._fresh: dict[str, Iterator[Task]] = {f: iter(tasks) for f, tasks in families.items()}
        self._head: dict[str, Task | None] = {}
        self.rate: dict[str, float] = {}
        """The pass rate of each played task's last group, by task id."""
        self.played: dict[str, Task] = {}
        self.recent: dict[str, deque] = {f: deque(maxlen=window) for f in families}
        self.rng = random.Random(seed)

    @classmethod
    def of_tasks(cls, tasks: Iterable[Task], **kw) -> Curriculum:
        by_family: dict[str, list[Task]] = {}
        for t in tasks:
            by_family.setdefault(stream(t), []).append(t)
        return cls(by_family, **kw)

    def _next_fresh(self, family: str) -> Task | None:
        if family not in self._head:
            self._head[family] = next(self._fresh[family], None)
        while self._head[family] is not None and self._head[family].id in self.played:
            self._head[family] = next(self._fresh[family], None)
        return self._head[family]

    def family_rate(self, family: str) -> float:
        outcomes = self.recent[family]
        return (sum(outcomes) + 1) / (len(outcomes) + 2)

    def weights(self, exclude: Iterable[str] = ()) -> dict[str, tuple[Task, float]]:
        """Every task that can be drawn now, with its weight (by task id)."""
        skip = set(exclude)
        out = {tid: (self.played[tid], p * (1 - p)) for tid, p in self.rate.items() if tid not in skip}
        for family in self._fresh:
            task = self._next_fresh(family)
            if task is not None and task.id not in skip:
                p = self.family_rate(family)
                out[task.id] = (task, p * (1 - p))
        return out

    def pick(self, n: int, exclude: Iterable[str] = ()) -> list[Task]:
        """Up to ``n`` distinct tasks, none of ``exclude`` (fewer only when nothing is left)."""
        chosen: list[Task] = []
        skip = set(exclude)
        for _ in range(n):
            cands = list(self.weights(skip).values())
            if not cands:
                break
            total = sum(w for _, w in cands)
            if total <= 0:
                task = self.rng.choice(cands)[0]
            else:
                x, task = self.rng.random() * total, cands[-1][0]
                for t, w in cands:
                    x -= w
                    if x < 0:
                        task = t
                        break
            chosen.append(task)
            skip.add(task.id)
            if task.id not in self.played:  # a fresh one: its stream's next seed is up next
                self.played[task.id] = task
                self._head.pop(stream(task), None)
        return chosen

    def observe(self, task: Task, passed: list[bool]) -> None:
        """Record a played group's outcomes (infrastructure failures left out by the caller)."""
        if not passed:
            return
        self.played[task.id] = task
        self.rate[task.id] = sum(passed) / len(passed)
        self.recent.setdefault(stream(task), deque(maxlen=WINDOW)).extend(float(p) for p in passed)
