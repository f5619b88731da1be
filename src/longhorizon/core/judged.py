"""Judged criteria: a rubric scored by a model, for what no deterministic check can read.

A judged criterion is an ordinary ``Criterion`` whose check is a ``JudgedCheck``: it shows a
model (the *judge*, any OpenAI-compatible server, called through ``core.chat_api.ChatClient``
at temperature 0 and seed 0) a condensed record of the episode and a rubric, and reads back a
verdict as JSON. Two scopes:

    episode   {"met": true|false, "reason": "..."}: the criterion is met when the judge says so
    steps     {"steps": [{"step": 1, "ok": true|false, "reason": "..."}, ...]}: one verdict per
              tool call shown (a *process* criterion); met when the share of good steps is at
              least ``Rubric.min_share`` (1.0: every step)

What the judge reads (``condensed_context``) is bounded: the instruction, each tool call as a
numbered step (arguments and result cut to a few hundred characters; past ``MAX_STEPS`` the
middle steps are left out and said to be), the final message, and, for a final-state rubric,
``evidence`` the rubric reads from the final World (cut to ``EVIDENCE_CHARS``).

Every verdict is cached on disk by the hash of (judge model, the request's messages), which
hold the rubric and the condensed context: a rerun, or a resumed run, asks nothing twice.
Only well-formed verdicts are cached.

The judge failing is never the agent failing: an unreachable server or a reply that is not a
verdict of the asked shape raises ``JudgeError`` (an ``InfraError``); ``Task.grade`` records it
on the criterion (``CriterionResult.infra_error``) and the episode runtime turns a Grade with
one into an infrastructure error (retried on resume, left out of RL's update). A judged
criterion with no judge configured raises ``UsageError``.

Which judge: ``configure_judge`` (the CLI's ``--judge-base-url`` / ``--judge-model`` /
``--judge-cache``), else the environment: ``LONGHORIZON_JUDGE_BASE_URL``,
``LONGHORIZON_JUDGE_MODEL``, ``LONGHORIZON_JUDGE_CACHE`` (default ``~/.cache/longhorizon/judge``),
``LONGHORIZON_JUDGE_API_KEY``.

The shipped suite uses none: a judged criterion is never used where a deterministic check
exists. They are for families whose outcome only a reader can judge (tone, faithfulness of a
summary), and for RL's step-level judged credit (``rl.step_judge``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from longhorizon.core.aio import run_sync
from longhorizon.core.errors import ContextLengthExceeded, InfraError, UsageError
from longhorizon.core.grade import Criterion

if TYPE_CHECKING:
    from longhorizon.core.trajectory import Trajectory
    from longhorizon.core.world import World

ENV_BASE_URL = "LONGHORIZON_JUDGE_BASE_URL"
ENV_MODEL = "LONGHORIZON_JUDGE_MODEL"
ENV_CACHE = "LONGHORIZON_JUDGE_CACHE"
ENV_API_KEY = "LONGHORIZON_JUDGE_API_KEY"

TEXT_CHARS = 200
"""Per step: the assistant's words before the call, and the call's arguments, at most this long."""
RESULT_CHARS = 300
"""Per step: the tool result, at most this long."""
MAX_STEPS = 40
"""Steps shown; past it the first and last ``MAX_STEPS // 2`` are shown and the middle left out."""
FINAL_CHARS = 1_000
INSTRUCTION_CHARS = 2_000
EVIDENCE_CHARS = 4_000

SYSTEM = ("You are a strict grader of transcripts of a tool-using agent doing an office task. "
          "Judge only what the transcript and evidence show. Answer with one JSON object and nothing else.")
EPISODE_FORMAT = 'Answer {"met": true, "reason": "..."} if the rubric is met, else {"met": false, "reason": "..."}.'
STEPS_FORMAT = ('Give a verdict for every step shown, in order: {"steps": [{"step": 1, "ok": true, "reason": "..."}, '
                '...]}, with "ok" true when the step meets the rubric and false when it does not.')


class JudgeError(InfraError):
    """The judge could not give a verdict (server down, or a reply that is not one): infrastructure."""


def _cut(text: str, limit: int, flat: bool = True) -> str:
    """``text`` at most ``limit`` characters (saying how many were left out); ``flat``: on one line."""
    text = " ".join(str(text).split()) if flat else str(text).strip()
    return text if len(text) <= limit else text[:limit] + f" ...[{len(text) - limit} more chars]"


@dataclass(frozen=True)
class Context:
    """What the judge reads of an episode: the text, and the step numbers it shows (1-based)."""

    text: str
    steps: tuple[int, ...]


def condensed_context(traj: "Trajectory", evidence: str = "") -> Context:
    """The episode as bounded text: instruction, numbered steps (words, call, result), final
    message, and ``evidence`` read from the final World."""
    user = next((m.get("content") for m in traj.messages if m.get("role") == "user"), "") or ""
    notes: dict[str, str] = {}
    for m in traj.messages:  # the words an assistant turn said alongside its calls
        if m.get("role") == "assistant" and m.get("tool_calls") and isinstance(m.get("content"), str):
            for tc in m["tool_calls"]:
                notes[tc.get("id", "")] = m["content"]
    calls = traj.tool_calls
    n = len(calls)
    shown = list(range(1, n + 1))
    if n > MAX_STEPS:
        half = MAX_STEPS // 2
        shown = shown[:half] + shown[-half:]
    lines = [f"INSTRUCTION:\n{_cut(user if isinstance(user, str) else json.dumps(user), INSTRUCTION_CHARS, False)}", "",
             f"STEPS ({n} tool calls):"]
    for i in shown:
        if n > MAX_STEPS and i == n - MAX_STEPS // 2 + 1:
            lines.append(f"[steps {MAX_STEPS // 2 + 1} to {n - MAX_STEPS // 2} are not shown]")
        c = calls[i - 1]
        args = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments, ensure_ascii=False)
        said = notes.get(c.id, "").strip()
        lines.append(f"step {i}: " + (f'said "{_cut(said, TEXT_CHARS)}"; ' if said else "")
                     + f"called {c.name} {_cut(args, TEXT_CHARS)}")
        lines.append(f"  {'error' if c.is_error else 'result'}: {_cut(c.result, RESULT_CHARS)}")
    lines += ["", f"FINAL MESSAGE:\n{_cut(traj.final_answer, FINAL_CHARS, False) or '(none)'}"]
    if evidence:
        lines += ["", f"EVIDENCE FROM THE FINAL STATE:\n{_cut(evidence, EVIDENCE_CHARS, False)}"]
    return Context("\n".join(lines), tuple(shown))


@dataclass(frozen=True)
class Rubric:
    """What a judged criterion asks the judge."""

    question: str
    scope: Literal["episode", "steps"] = "episode"
    min_share: float = 1.0
    """steps: the share of shown steps judged good for the criterion to be met."""
    evidence: Callable[["World"], str] | None = None
    """What of the final World the judge reads (e.g. an output file's text); None: nothing."""

    def __post_init__(self) -> None:
        if self.scope not in ("episode", "steps"):
            raise ValueError(f"rubric scope must be episode or steps, not {self.scope!r}")
        if not 0 < self.min_share <= 1:
            raise ValueError("rubric min_share must be in (0, 1]")
        if not self.question.strip():
            raise ValueError("a rubric needs a question")

    def messages(self, context: Context) -> list[dict]:
        fmt = STEPS_FORMAT if self.scope == "steps" else EPISODE_FORMAT
        return [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"RUBRIC: {self.question}\n\n{fmt}\n\nTRANSCRIPT:\n{context.text}"}]


@dataclass(frozen=True)
class Verdict:
    """The judge's answer: ``met`` (episode), or ``steps`` (step number -> good) and the reason(s)."""

    met: bool | None = None
    steps: dict[int, bool] = field(default_factory=dict)
    reason: str = ""
    cached: bool = False

    def share(self) -> float:
        """steps: the share of judged steps that are good (1.0 with no step: nothing went wrong)."""
        return sum(self.steps.values()) / len(self.steps) if self.steps else 1.0


def _json_object(text: str) -> dict:
    m = re.search(r"\{.*\}", text or "", re.S)
    if not m:
        raise ValueError("no JSON object")
    obj = json.loads(m.group(0))
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def parse_verdict(reply: str, rubric: Rubric, steps: tuple[int, ...]) -> Verdict:
    """The verdict in ``reply``; ValueError when it is not one of the asked shape (every shown
    step judged exactly once, verdicts true or false)."""
    obj = _json_object(reply)
    if rubric.scope == "episode":
        if not isinstance(obj.get("met"), bool):
            raise ValueError('"met" is not true or false')
        return Verdict(met=obj["met"], reason=str(obj.get("reason", ""))[:300])
    rows = obj.get("steps")
    if not isinstance(rows, list):
        raise ValueError('no "steps" list')
    got: dict[int, bool] = {}
    reasons = []
    for row in rows:
        if not (isinstance(row, dict) and type(row.get("step")) is int and isinstance(row.get("ok"), bool)):
            raise ValueError(f"a step verdict is not {{step: int, ok: bool}}: {str(row)[:100]}")
        if row["step"] in got or row["step"] not in steps:
            raise ValueError(f"step {row['step']} is repeated or was not shown")
        got[row["step"]] = row["ok"]
        if not row["ok"] and row.get("reason"):
            reasons.append(f"step {row['step']}: {str(row['reason'])[:120]}")
    if set(got) != set(steps):
        raise ValueError(f"steps {sorted(set(steps) - set(got))[:10]} have no verdict")
    return Verdict(steps=got, reason="; ".join(reasons)[:300])


class Judge:
    """A model that gives verdicts on rubrics, with an on-disk cache (one file per verdict).

    ``requests`` counts what was asked of the server; ``usage`` adds up its reported prompt and
    completion tokens and the seconds waited: the judge's cost."""

    def __init__(self, base_url: str, model: str, cache_dir: str | Path, *, api_key: str | None = None,
                 max_tokens: int = 1024, timeout_s: float = 300.0, max_retries: int = 2, backoff_s: float = 1.0):
        self.base_url, self.model = base_url, model
        self.backoff_s = backoff_s
        self.cache_dir = Path(cache_dir)
        self.api_key = api_key
        self.max_tokens, self.timeout_s, self.max_retries = max_tokens, timeout_s, max_retries
        self.requests = 0
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        self._lock = threading.Lock()
        self._asking: dict[tuple[int, str], tuple[asyncio.Lock, int]] = {}

    def describe(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "model": self.model}

    def key(self, messages: list[dict]) -> str:
        return hashlib.sha256(json.dumps([self.model, messages], sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _cached(self, key: str) -> dict | None:
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _store(self, key: str, row: dict) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")  # whole or not at all, across processes
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(row, f, ensure_ascii=False)
        os.replace(tmp, path)

    async def averdict(self, rubric: Rubric, context: Context) -> Verdict:
        """The judge's verdict on ``context`` by ``rubric`` (the cache's, if it has one). The
        same question asked twice at once (a group's identical episodes) is asked once."""
        messages = rubric.messages(context)
        key = self.key(messages)
        slot = (id(asyncio.get_running_loop()), key)
        with self._lock:
            lock, users = self._asking.get(slot) or (asyncio.Lock(), 0)
            self._asking[slot] = (lock, users + 1)
        try:
            async with lock:
                return await self._verdict(rubric, context, messages, key)
        finally:
            with self._lock:
                lock, users = self._asking.pop(slot)
                if users > 1:
                    self._asking[slot] = (lock, users - 1)

    async def _verdict(self, rubric: Rubric, context: Context, messages: list[dict], key: str) -> Verdict:
        row = self._cached(key)
        if row is not None:
            try:
                return _replace_cached(parse_verdict(row["reply"], rubric, context.steps))
            except (ValueError, KeyError, TypeError):
                pass  # a cache file of another shape: ask again
        from longhorizon.core.chat_api import ChatClient

        t0 = time.perf_counter()
        async with ChatClient(self.base_url, self.model, api_key=self.api_key, temperature=0.0, seed=0,
                              max_tokens=self.max_tokens, timeout_s=self.timeout_s,
                              max_retries=self.max_retries, backoff_s=self.backoff_s) as client:
            with self._lock:
                self.requests += 1
            try:
                data = await client.complete(client.request_body(messages, []))
            except (InfraError, ContextLengthExceeded) as exc:  # a transcript too long for the judge is its limit
                raise JudgeError(f"the judge {self.model} at {self.base_url} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(data, dict):
            raise JudgeError(f"the judge {self.model} sent no completion: {str(data)[:200]}")
        used = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        with self._lock:
            self.usage["seconds"] += time.perf_counter() - t0
            for k in ("prompt_tokens", "completion_tokens"):
                self.usage[k] += used.get(k, 0) if isinstance(used.get(k), int) else 0
        try:
            reply = data["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise JudgeError(f"the judge {self.model} sent no message: {str(data)[:200]}") from None
        try:
            verdict = parse_verdict(reply, rubric, context.steps)
        except (ValueError, TypeError) as exc:
            raise JudgeError(f"the judge {self.model} replied with no usable verdict ({exc}): "
                             f"{reply[:200]!r}") from None
        self._store(key, {"model": self.model, "reply": reply, "messages": messages})
        return verdict

    def verdict(self, rubric: Rubric, context: Context) -> Verdict:
        return run_sync(self.averdict(rubric, context))


def _replace_cached(v: Verdict) -> Verdict:
    return Verdict(met=v.met, steps=v.steps, reason=v.reason, cached=True)


# -- which judge --------------------------------------------------------------------------------
_configured: dict[str, Any] = {}
_judges: dict[tuple, Judge] = {}


def configure_judge(base_url: str | None, model: str | None, cache_dir: str | Path | None = None,
                    api_key: str | None = None, **options: Any) -> None:
    """Set the judge of this process (None, None: back to the environment's); ``options`` go to
    ``Judge`` (``max_retries``, ``timeout_s``, ``max_tokens``)."""
    if bool(base_url) != bool(model):
        raise UsageError("a judge needs both --judge-base-url and --judge-model")
    _configured.clear()
    if base_url:
        _configured.update(base_url=base_url, model=model, cache_dir=cache_dir, api_key=api_key, options=options)


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "longhorizon" / "judge"


def judge_from(base_url: str | None, model: str | None, cache_dir: str | Path | None = None) -> Judge | None:
    """A Judge on ``base_url``/``model``, else on the environment's, else None."""
    if not base_url:
        base_url, model = os.environ.get(ENV_BASE_URL), os.environ.get(ENV_MODEL)
        cache_dir = cache_dir or os.environ.get(ENV_CACHE)
    if not (base_url and model):
        return None
    return Judge(base_url, model, cache_dir or default_cache_dir(), api_key=os.environ.get(ENV_API_KEY))


def current_judge() -> Judge | None:
    """The configured judge, else the environment's, else None (one Judge object per setting)."""
    c = dict(_configured) or {"base_url": os.environ.get(ENV_BASE_URL), "model": os.environ.get(ENV_MODEL),
                              "cache_dir": os.environ.get(ENV_CACHE), "api_key": os.environ.get(ENV_API_KEY)}
    if not (c["base_url"] and c["model"]):
        return None
    options = c.get("options") or {}
    spec = (c["base_url"], c["model"], str(c["cache_dir"] or default_cache_dir()), c["api_key"],
            tuple(sorted(options.items())))
    if spec not in _judges:
        _judges[spec] = Judge(spec[0], spec[1], spec[2], api_key=spec[3], **options)
    return _judges[spec]


NO_JUDGE = (f"needs a judge: give --judge-base-url and --judge-model (or set {ENV_BASE_URL} and {ENV_MODEL}) "
            "to an OpenAI-compatible server")


def require_judge(tasks) -> Judge | None:
    """The judge, or UsageError when some task has a judged criterion and none is configured."""
    judged = next((t for t in tasks if any(is_judged(c) for c in t.criteria)), None)
    judge = current_judge()
    if judged is not None and judge is None:
        raise UsageError(f"task {judged.id} has judged criteria and {NO_JUDGE}")
    return judge


# -- the criterion kind -------------------------------------------------------------------------
class JudgedCheck:
    """A criterion's check that asks the judge: met or not, with the judge's reason as the note."""

    def __init__(self, rubric: Rubric):
        self.rubric = rubric

    def __call__(self, world: "World", traj: "Trajectory") -> tuple[bool, str]:
        judge = current_judge()
        if judge is None:
            raise UsageError(f"a judged criterion {NO_JUDGE}")
        evidence = self.rubric.evidence(world) if self.rubric.evidence is not None else ""
        v = judge.verdict(self.rubric, condensed_context(traj, evidence))
        if self.rubric.scope == "steps":
            bad = sorted(s for s, ok in v.steps.items() if not ok)
            return (v.share() >= self.rubric.min_share,
                    f"judge {judge.model}: {len(v.steps) - len(bad)}/{len(v.steps)} steps good"
                    + (f"; {v.reason}" if v.reason else ""))
        return bool(v.met), f"judge {judge.model}: {v.reason}"


def judged_criterion(id: str, description: str, kind: Literal["final_state", "process"], rubric: Rubric,
                     weight: float = 1.0, **options: Any) -> Criterion:
    """A Criterion whose check is ``rubric`` scored by the judge. A step-scoped rubric is a
    process criterion (it judges how the agent worked)."""
    if rubric.scope == "steps" and kind != "process":
        raise ValueError(f"criterion {id}: a step-level rubric judges the process: kind must be process")
    return Criterion(id, description, kind, JudgedCheck(rubric), weight, **options)


def is_judged(criterion: Criterion) -> bool:
    return isinstance(criterion.check, JudgedCheck)


# -- step-level judged credit (RL) --------------------------------------------------------------
STEP_RUBRIC = ("Does this step move the task forward: a sensible action given the instruction and what the "
               "agent has seen so far (not a useless repeat, not a guess where it should have looked, not "
               "ignoring an error)?")


async def step_credit(judge: Judge, traj: "Trajectory", question: str = STEP_RUBRIC) -> float:
    """The share of the episode's shown steps the judge calls good (0.0 with no tool call: no credit
    for doing nothing)."""
    if not traj.tool_calls:
        return 0.0
    v = await judge.averdict(Rubric(question, scope="steps"), condensed_context(traj))
    return v.share()
