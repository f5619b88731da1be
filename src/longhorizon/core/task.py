"""Task and TaskFamily: what a task is (its judging lives in ``core/grade.py``).

A Task is plain data plus three callables: ``build`` writes its World into a folder,
``oracle`` solves it through the agent's own tools, and each Criterion's ``check`` judges
the final World and the trajectory. Nothing here runs an episode.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.grade import GRADER_BUGS, Criterion, CriterionResult, Grade

if TYPE_CHECKING:
    from longhorizon.core.trajectory import Trajectory
    from longhorizon.core.world import World

SUITE_VERSION = "0.12.0"
"""Bumped whenever a family's World, instruction, criteria, tools offered, split or simulated user changes
(at any level): recorded in every Trajectory."""

SPLITS = ("train", "holdout", "holdout-family")
"""train: seeds of the training families; holdout: unseen seeds of those same families;
holdout-family: whole families that never appear in train (transfer within the suite)."""
HOLDOUT_SEED_BASE = 100_000
"""Holdout instances use seeds from here on, so they never collide with train seeds."""


@dataclass(frozen=True)
class ToolCall:
    """One call the oracle (or any scripted policy) makes: exposed tool name and arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    """What the assistant says alongside the call (its local goal); becomes the message content."""


OracleScript = Generator[ToolCall, str, str]
"""An oracle is a generator: it yields a ToolCall, receives the tool's result text, and
returns its final message to the user. Interactive, so it can read state before acting."""


def rewrite_calls(oracle: Callable[[], OracleScript],
                  fn: Callable[[ToolCall], ToolCall | list[ToolCall] | str] | None = None, *,
                  tail: tuple[ToolCall, ...] | list[ToolCall] = (),
                  final: Callable[[str], str] | None = None) -> Callable[[], OracleScript]:
    """Another oracle: ``oracle``'s calls passed through ``fn`` as they are made, then ``tail``.

    ``fn`` gives a ToolCall or a list played in order; the oracle is sent the result of its own
    call when the list holds it (the last time it does), else of the list's last call, and ``""``
    for an empty list (the call skipped). A string instead plays nothing and is sent to the
    oracle as its call's result (a read skipped, its answer assumed). ``final`` rewrites its final message. The one way to
    derive a solution from another: flawed ones (``tasks.kit.perturb``) and correct ones worked
    another way (``policies.scripted.rewritten_oracle``)."""
    def play(own: ToolCall, calls: ToolCall | list[ToolCall] | str):
        if isinstance(calls, str):
            return calls
        calls = calls if isinstance(calls, list) else [calls]
        result = mine = ""
        found = False
        for c in calls:
            result = yield c
            if c is own:
                mine, found = result, True
        return mine if found else result

    def run() -> OracleScript:
        gen = oracle()
        try:
            call = next(gen)
            while True:
                call = gen.send((yield from play(call, fn(call) if fn else call)))
        except StopIteration as stop:
            answer = stop.value
        for c in tail:
            yield c
        return final(answer) if final else answer

    return run


@dataclass
class Task:
    """One instance of a TaskFamily. Deterministic in (family, seed)."""

    id: str
    family: str
    category: str
    split: str
    seed: int
    instruction: str
    apps: tuple[str, ...]
    build: Callable[[Path], None]
    """Writes the World into an empty folder: ``workspace/`` for the agent, ``state/`` for apps."""
    oracle: Callable[[], OracleScript]
    criteria: list[Criterion]
    perturbations: dict[str, Callable[[], OracleScript]] = field(default_factory=dict)
    """criterion id -> a flawed solution that must fail that criterion (proves it can fail)."""
    data: dict[str, Any] = field(default_factory=dict)
    """Ground truth the generator knew (hidden from the agent; handy for graders and oracles)."""
    level: int | None = None
    """The family's level (horizon) this instance was made at; set by ``TaskFamily.instance``.
    None: made by a plain ``generate(seed)``, i.e. the family's default (top) level."""
    tools: tuple[str, ...] | None = None
    """The tools offered, as ``APP__TOOL`` names (None: every tool of every app in ``apps``).
    A family's lower levels offer what the job needs, so that the tool schemas (most of a first
    prompt: 1.5k-7k tokens of SmolLM2's tokenizer for a whole toolset) fit a small model."""

    def __post_init__(self) -> None:
        self.check_tools()
        ids = {c.id for c in self.criteria}
        guards = {c.id for c in self.criteria if c.guard}
        for c in self.criteria:
            bad = [q for q in c.requires if q not in ids or q in guards or q == c.id]
            if bad:
                raise ValueError(f"task {self.id}: criterion {c.id} requires {bad}: "
                                 "requirements must be other, non-guard criteria of the task")

    def grade(self, world: "World", trajectory: "Trajectory") -> Grade:
        from longhorizon.core.parse_cache import per_grade

        with per_grade():  # each office file is parsed once for all the criteria
            return self._grade(world, trajectory)

    def _grade(self, world: "World", trajectory: "Trajectory") -> Grade:
        from longhorizon.core.judged import is_judged

        results = []
        for c in self.criteria:
            bug = infra = ""
            try:
                out = c.check(world, trajectory)
            except Exception as exc:  # a broken World (e.g. agent deleted a file) fails the criterion
                if isinstance(exc, UsageError) and is_judged(c):  # no judge configured: the user's to fix
                    raise
                out = (False, f"check raised {type(exc).__name__}: {exc}")
                if isinstance(exc, GRADER_BUGS):  # ... and so does a broken check, marked as such
                    bug = f"{type(exc).__name__}: {exc}"[:500]
                elif isinstance(exc, InfraError):  # ... but the judge failing is never the agent failing
                    out, infra = (False, "not checked (infrastructure error)"), f"{type(exc).__name__}: {exc}"[:500]
            passed, note = (out if isinstance(out, tuple) else (out, ""))
            results.append(CriterionResult(c.id, c.kind, c.weight, bool(passed), str(note), c.guard, c.requires,
                                           grader_error=bug, infra_error=infra))
        return Grade(tuple(results))

    def check_tools(self) -> None:
        """``tools``, when set, must be distinct ``APP__TOOL`` names of the task's apps."""
        if self.tools is None:
            return
        wrong = [t for t in self.tools if t.partition("__")[0] not in self.apps or not t.partition("__")[2]]
        if wrong or not self.tools or len(set(self.tools)) != len(self.tools):
            raise ValueError(f"task {self.id}: tools must be distinct APP__TOOL names of its apps "
                             f"{list(self.apps)}; wrong: {wrong or list(self.tools)}")

    def offered(self, app: str) -> frozenset[str] | None:
        """The names of ``app``'s tools this task offers (None: all of them)."""
        if self.tools is None:
            return None
        return frozenset(t.partition("__")[2] for t in self.tools if t.partition("__")[0] == app)

    def card(self) -> dict[str, Any]:
        """Public description (no ground truth): for `tasks list/show`."""
        from longhorizon.core.judged import is_judged

        return {
            "id": self.id,
            "family": self.family,
            "category": self.category,
            "split": self.split,
            "seed": self.seed,
            "level": self.level,
            "apps": list(self.apps),
            "tools": list(self.tools) if self.tools is not None else None,
            "instruction": self.instruction,
            "criteria": [
                {"id": c.id, "kind": c.kind, "weight": c.weight, "guard": c.guard,
                 "requires": list(c.requires), "description": c.description}
                | ({"judged": True} if is_judged(c) else {})
                for c in self.criteria
            ],
        }


class TaskFamily:
    """A procedural task template. Subclasses set the class attributes and implement ``generate``.

    Levels (the horizon as a knob): a family with ``levels = L > 1`` implements
    ``generate(seed, level=None)``, where level 1 is the shortest instance that is still the same
    job and each level up adds work of the same kind; ``None`` and ``L`` are today's instance, so
    a family's default never changes when it gains levels. A family without levels has one
    (``levels = 1``) and a ``generate(seed)``. Callers that pick a level go through ``instance``.
    """

    name: str = ""
    category: str = ""
    apps: tuple[str, ...] = ()
    description: str = ""
    levels: int = 1
    """How many levels the family has; the top one (``levels``) is the default."""
    holdout_family: bool = False
    """Set by the registry for families kept out of training entirely."""
    toolsets: dict[int, tuple[str, ...]] = {}
    """Level -> the tools its instances offer (``Task.tools``; a level not named offers every
    tool of the family's apps). The same for every seed of a level, so it tells nothing about
    one instance: lower levels offer the tools the job uses, to fit a small model's context."""
    level_apps: dict[int, tuple[str, ...]] = {}
    """Level -> the apps its instances use, for lower levels that leave some of ``apps`` out
    (the instruction names what a mailbox or a folder held); a level not named uses ``apps``."""

    def generate(self, seed: int) -> Task:  # pragma: no cover - interface
        raise NotImplementedError

    def level_of(self, level: int | None) -> int:
        """``level`` checked against the family's (None: the default, its top level)."""
        if level is None:
            return self.levels
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= self.levels:
            raise UsageError(f"task family {self.name!r} has levels 1-{self.levels}, not {level!r}")
        return level

    def instance(self, seed: int, level: int | None = None) -> Task:
        """Instance ``seed`` at ``level`` (None: the default). The default level is made by the
        very call ``generate(seed)`` that made it before the family had levels."""
        lvl = self.level_of(level)
        task = self.generate(seed) if lvl == self.levels else self.generate(seed, level=lvl)  # type: ignore[call-arg]
        if task.id != self.task_id(seed, lvl):
            raise ValueError(f"{self.name}.generate({seed}, level={lvl}) made task {task.id!r}, "
                             f"expected {self.task_id(seed, lvl)!r} (use self.task_id(seed, level))")
        task.level = lvl
        if lvl in self.toolsets:
            task.tools = tuple(self.toolsets[lvl])
            task.check_tools()
        return task

    def apps_at(self, level: int | None = None) -> tuple[str, ...]:
        """The apps an instance at ``level`` uses (None: the default level): ``level_apps``'s
        entry or ``apps``; ``listing`` shows these without generating."""
        return self.level_apps.get(self.level_of(level), self.apps)

    def task_id(self, seed: int, level: int | None = None) -> str:
        """``name-000123``; below the top level ``name-000123@L1``, so default ids never change."""
        suffix = "" if level is None or level == self.levels else f"@L{level}"
        return f"{self.name}-{seed:06d}{suffix}"

    def split_of(self, seed: int) -> str:
        """The split depends on the seed (and the family) only: every level of a holdout seed or
        a holdout family is held out too."""
        if self.holdout_family:
            return "holdout-family"
        return "holdout" if seed >= HOLDOUT_SEED_BASE else "train"

    def listing(self, seed: int, level: int | None = None) -> dict[str, Any]:
        """What `tasks list` shows of instance ``seed``, without generating it (generating the
        whole suite takes seconds); its Task's card says the same (tests/tasks/test_suite.py)."""
        return {"id": self.task_id(seed, level), "category": self.category, "family": self.name,
                "split": self.split_of(seed), "level": self.level_of(level), "apps": list(self.apps_at(level))}


def dumps_canonical(obj: Any) -> str:
    """JSON used for hashing and for oracle arguments: sorted keys, no whitespace drift."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
