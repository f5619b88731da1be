"""Episode runtime: in-process MCP sessions over a forked World, and the agent loop.

``Episode`` opens one MCP session per app the Task uses and exposes their tools under
``APP__TOOL`` names in OpenAI function format. Sessions are in process: the lean path
(``apps.common.LocalSession``, the default) answers tools/list and tools/call as the app's
MCPServer does without the SDK's per-call machinery; ``mcp_path="sdk"`` goes through
``mcp.Client`` on the MCPServer instead (same results; for comparisons and benchmarks). ``play`` runs a Policy against it under
limits and returns a graded Trajectory.

Anything the agent sends comes back as a tool error it can read, and the episode goes on:
a tool name that is unknown or not a string, arguments that are not JSON or not an object,
that nest past 32 levels, hold invalid Unicode (lone surrogates), NaN or Infinity, integers
outside the signed 64-bit range, non-JSON values or more than 1,000,000 characters; a call or ``function`` that is
not an object, a ``tool_calls`` that is not a list. Past that boundary the app's server
refuses unknown argument names and wrong types with a message naming them, and turns any
crash of a tool into an error that says what failed (apps/tool_guard.py). A policy reply that
is not a message at all is recorded (``assistant_message``) and ends the episode as an answer.
Only failures of the machinery itself (the policy raising, an MCP session dying, a grader
crashing) raise: the runner records those as infrastructure errors.

A reply the policy's token budget cut (it says ``finish_reason: "length"``, as an
OpenAI-compatible server does and the local policy does) is not a finished reply: it is
recorded as sent (its turn record keeps ``finish_reason`` and, when known,
``completion_tokens``), none of its tool calls is run, and the agent is told why and goes on:
each call is answered with a tool error ("your reply was cut at N tokens ... so nothing in it
was run"), and a cut reply without calls gets that message as a user turn. A cut is never an
ending by itself: ``MAX_CUT_REPLIES`` cut replies in a row end the episode with status
``max_tokens`` (graded as it stands); an episode that recovered keeps its cuts in its turn
records, which ``eval`` counts and the viewer marks.
"""

from __future__ import annotations

import asyncio
import copy
import difflib
import json
import logging
import math
import os
import time
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from typing import Any

from mcp import Client

from longhorizon import __version__
from longhorizon.apps import build_app
from longhorizon.apps.common import CALL_LIMIT_S, cap
from longhorizon.apps.tool_guard import describe_exception, json_type
from longhorizon.core.errors import ContextLengthExceeded, InfraError
from longhorizon.core.grade import CriterionResult, Grade
from longhorizon.core.judged import is_judged
from longhorizon.core.policy import EpisodeContext
from longhorizon.core.task import SUITE_VERSION, Task
from longhorizon.core.trajectory import ToolCallRecord, Trajectory, clean_text, dumps, json_safe
from longhorizon.core.world import World
from longhorizon.env.tool_spec import SEP, openai_tool

# The SDK logs every rejected tool call at WARNING; the agent already sees the error.
logging.getLogger("mcp").setLevel(logging.ERROR)

SYSTEM_PROMPT = (
    "You are a capable office assistant working inside a company's workspace. "
    "You act only through the tools provided; tool names are APP__TOOL. "
    "Work step by step: find out what you need before acting, do the whole request, "
    "check the result, and when you are finished reply with a short summary and no tool calls."
)

TOKEN_KEYS = ("token_ids", "prompt_ids", "logprobs")
TURN_KEYS = TOKEN_KEYS + ("finish_reason", "completion_tokens", "elided")
"""What a policy may add to its reply about the turn (core/policy.py): moved into the turn record."""
MAX_CUT_REPLIES = 3
"""Cut replies in a row (``finish_reason: "length"``) that end an episode with status ``max_tokens``."""


@dataclass(frozen=True)
class Limits:
    max_turns: int = 150
    max_tool_calls: int = 300
    max_wall_s: float | None = 600.0
    """None: no wall-clock limit (in-process models on a CPU, whose episodes take turns)."""
    max_result_chars: int = 20_000
    max_call_s: float | None = CALL_LIMIT_S
    """How long one tool call may run before the agent gets an error saying so (apps/common.py
    ``ToolThread``): synchronous tool bodies run off the event loop, so no call stalls the others."""
    max_grade_s: float | None = 120.0
    """How long grading one episode may take; past it every criterion fails with a note saying so
    (graders read through byte budgets, so only a hostile World gets near it)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


MCP_PATHS = ("lean", "sdk")
DEFAULT_MCP_PATH = "lean"
"""What ``play`` uses when not told (benchmarks/rollout_load.py sets "sdk" to measure the old path)."""


class Episode:
    """Open MCP sessions for a Task's apps over ``world``. Use as ``async with``."""

    def __init__(self, task: Task, world: World, limits: Limits = Limits(), *, mcp_path: str = "lean"):
        if mcp_path not in MCP_PATHS:
            raise ValueError(f"mcp_path must be one of {MCP_PATHS}, not {mcp_path!r}")
        self.task, self.world, self.limits, self.mcp_path = task, world, limits, mcp_path
        self.tools: list[dict] = []
        self._clients: dict = {}  # app -> LocalSession or mcp.Client
        self._names: set[str] = set()
        self.argument_chars = 0
        """Argument characters this episode's recorded calls hold (``bound_calls``)."""
        self._stack: AsyncExitStack | None = None
        roots = {os.path.realpath(world.root), os.path.abspath(world.root)} - {"/"}
        self._roots = sorted(roots, key=len, reverse=True)

    async def __aenter__(self) -> "Episode":
        self._stack = AsyncExitStack()
        try:
            for app in self.task.apps:
                served = build_app(app, self.world).only(self.task.offered(app))
                if self.mcp_path == "lean":
                    client = served.session(self.limits.max_call_s)
                    self._stack.callback(client.close)
                else:
                    server = served.build(self.limits.max_call_s)
                    client = await self._stack.enter_async_context(Client(server))
                self._clients[app] = client
                listed = await client.list_tools()
                self.tools.extend(openai_tool(app, t) for t in listed.tools)
            self._names = set(self.tool_names)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc) -> None:
        if self._stack:
            await self._stack.aclose()

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    async def call(self, name: Any, arguments: Any) -> tuple[str, bool, Any]:
        """Run one tool call. Returns (result text, is_error, arguments as recorded).

        Whatever the agent sent comes back as a tool error naming the problem (see the module
        docstring); the arguments returned are record-safe (``json_safe``). Only the session
        itself failing (an MCPError, a closed stream) raises: that is infrastructure.
        """
        problem, arguments = self._check(name, arguments)
        if problem:
            return clean_text(cap(f"Error: {problem}", self.limits.max_result_chars)), True, json_safe(arguments)
        app, _, tool = name.partition(SEP)
        try:
            result = await self._clients[app].call_tool(tool, arguments)
        except (ValueError, TypeError, RecursionError, UnicodeError, OverflowError) as exc:
            # the client could not even send these arguments: still the agent's call to fix
            return (f"Error: {name} could not be called with these arguments ({describe_exception(exc)})",
                    True, json_safe(arguments))
        text = "\n".join(getattr(c, "text", "") or f"[{c.type} content]" for c in result.content)
        text = self._scrub(clean_text(text))
        if result.is_error and not text.startswith("Error"):
            text = f"Error: {text}" if text.strip() else f"Error: {name} failed without saying why"
        return cap(text, self.limits.max_result_chars), bool(result.is_error), json_safe(arguments)

    def _check(self, name: Any, arguments: Any) -> tuple[str | None, Any]:
        """(what is wrong with this call, or None; the arguments, parsed when they were JSON text)."""
        if not isinstance(name, str):
            return (f"the tool name must be a string, got {json_type(name)}. "
                    f"Available tools: {', '.join(self.tool_names)}."), arguments
        if name not in self._names:
            close = difflib.get_close_matches(name[:200], self._names, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            return (f"unknown tool {clean_text(repr(name[:100]))}{'...' if len(name) > 100 else ''}.{hint} "
                    f"Available tools: {', '.join(self.tool_names)}."), arguments
        if isinstance(arguments, str):
            if len(arguments) > MAX_ARGUMENT_CHARS:
                return (f"the arguments are {len(arguments):,} characters long; at most {MAX_ARGUMENT_CHARS:,} "
                        "are accepted in one call"), arguments
            text = arguments.strip()
            try:
                arguments = json.loads(text) if text else {}
            except json.JSONDecodeError as exc:
                return (f"arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
                        "send a JSON object."), arguments
            except ValueError:  # Python's json refuses integers of more than 4,300 digits
                return "arguments are not valid JSON (a number in them has more than 4,300 digits).", arguments
            except RecursionError:
                return "arguments nest too deeply to be read; send a JSON object of plain values.", arguments
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {json_type(arguments)}.", arguments
        return json_problem(arguments), arguments

    def _scrub(self, text: str) -> str:
        """The World's own location never reaches the agent (paths show relative to the workspace)."""
        for root in self._roots:
            if root in text:
                text = text.replace(root + "/workspace/", "").replace(root + "/workspace", ".")
                text = text.replace(root, "<world>")
        return text


MAX_ARGUMENT_CHARS = 1_000_000
MAX_ARGUMENT_DEPTH = 32
MAX_ARGUMENT_VALUES = 200_000
INT_RANGE = (-(2**63), 2**63 - 1)
"""Integers a tool may receive: the signed 64-bit range (SQLite's INTEGER, most JSON readers)."""
MAX_CONTENT_CHARS = 500_000


def _arg_path(parts: list) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return clean_text(out[:120])


def json_problem(arguments: dict) -> str | None:
    """What in already-parsed arguments is no JSON value a tool can take, or None: non-string
    names, invalid Unicode, NaN/Infinity, integers outside ``INT_RANGE``, nesting past 32 levels,
    non-JSON types, and more than 1,000,000 characters or 200,000 values in all."""
    chars = values = 0
    stack: list[tuple[Any, list, int]] = [(arguments, [], 0)]
    while stack:
        v, path, depth = stack.pop()
        values += 1
        where = f"argument {_arg_path(path)!r}" if path else "the arguments"
        if values > MAX_ARGUMENT_VALUES:
            return f"the arguments hold more than {MAX_ARGUMENT_VALUES:,} values; send less in one call"
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, str):
            chars += len(v)
            if chars > MAX_ARGUMENT_CHARS:
                return f"the arguments hold more than {MAX_ARGUMENT_CHARS:,} characters; send less in one call"
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                return (f"{where} is not valid Unicode text (a lone surrogate {v[exc.start]!r} at position "
                        f"{exc.start}); send UTF-8 text")
            continue
        if isinstance(v, int):
            if not INT_RANGE[0] <= v <= INT_RANGE[1]:
                digits = int(v.bit_length() * 0.30103) + 1
                return (f"{where} is an integer of about {digits:,} digits, outside the signed 64-bit range "
                        f"({INT_RANGE[0]:,} to {INT_RANGE[1]:,})")
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                shown = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
                return f"{where} is {shown}, which is not a JSON number; send a finite number"
            continue
        if not isinstance(v, (dict, list)):
            return f"{where} is a {type(v).__name__}, which is not a JSON value"
        if depth >= MAX_ARGUMENT_DEPTH:
            return f"the arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels (at {_arg_path(path)!r})"
        if isinstance(v, list):
            stack.extend((x, path + [i], depth + 1) for i, x in enumerate(v))
            continue
        for k, x in v.items():
            if not isinstance(k, str):
                return f"argument names must be strings; {where} has a {json_type(k)} name"
            try:
                k.encode("utf-8")
            except UnicodeEncodeError:
                return f"the argument name {clean_text(repr(k[:60]))} is not valid Unicode text; send UTF-8 text"
            stack.append((x, path + [k], depth + 1))
    return None


async def play(task: Task, policy, world: World, *, sample: int = 0, limits: Limits = Limits(),
               world_hash: str | None = None, ctx=None, mcp_path: str | None = None) -> Trajectory:
    """Play one episode of ``task`` with ``policy`` on ``world`` (already forked) and grade it.

    Policy or infrastructure exceptions propagate (the runner records them as infra errors);
    limits end the episode as an agent outcome and it is graded as it stands.
    """
    ctx = ctx or EpisodeContext(task=task, sample=sample)
    traj = new_trajectory(task, policy.describe(), world_hash or world.hash(), sample, limits)
    t0 = time.perf_counter()
    async with Episode(task, world, limits, mcp_path=mcp_path or DEFAULT_MCP_PATH) as ep:
        traj.tools = copy.deepcopy(ep.tools)  # as shown: what the policy does with them is its own
        try:
            async with asyncio.timeout(limits.max_wall_s):
                traj.status = await _loop(ep, policy, traj, ctx, limits)
        except TimeoutError:
            traj.status = "timeout"
        except ContextLengthExceeded:
            traj.status = "context_length"
    traj.wall_s = time.perf_counter() - t0
    # graders read workspace files by path: a link the agent's shell left (to an input, to
    # /dev/zero, to a host file) or a FIFO must not count as an output nor hang or leak
    removed = await asyncio.to_thread(world.drop_links_and_specials)
    if removed:
        traj.provenance["removed_before_grading"] = removed
    # graders parse files and databases: off the event loop, so other episodes keep moving
    traj.grade = await bounded_grade(task, world, traj, limits.max_grade_s)
    unchecked = traj.grade.infra_errors()
    if unchecked:  # a judge that failed: the episode is the infrastructure's failure, not the agent's
        cid, why = next(iter(unchecked.items()))
        raise InfraError(f"{len(unchecked)} criteria of {task.id} could not be checked; {cid}: {why}")
    return traj


async def bounded_grade(task: Task, world: World, traj: Trajectory, limit_s: float | None) -> Grade:
    """``task.grade`` in a worker thread, waited for at most ``limit_s``: past it, a Grade whose
    every criterion failed with a note (the grader thread is abandoned; its result is dropped).
    The judge's time counts in the bound: a judged criterion left unchecked is an infrastructure
    error (``play`` raises), not the agent's failure."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(task.grade, world, traj), limit_s)
    except TimeoutError:
        note = f"grading did not finish within {limit_s:g} s (the World holds more than the graders can read)"
        traj.provenance["grading_timed_out_s"] = limit_s
        return Grade(tuple(CriterionResult(c.id, c.kind, c.weight, False, note, c.guard, c.requires,
                                           infra_error=note if is_judged(c) else "")
                           for c in task.criteria))


def new_trajectory(task: Task, policy_info: dict, world_hash: str, sample: int, limits: Limits) -> Trajectory:
    """An empty Trajectory with its provenance and the opening system and user messages."""
    return Trajectory(
        episode_id=f"{task.id}#{sample}",
        task_id=task.id, family=task.family, category=task.category, split=task.split,
        seed=task.seed, sample=sample,
        provenance={
            "suite_version": SUITE_VERSION,
            "longhorizon_version": __version__,
            "task_id": task.id, "seed": task.seed,
            "world_hash": world_hash,
            "policy": policy_info,
            "limits": limits.to_dict(),
        },
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task.instruction},
        ],
    )


async def _loop(ep: Episode, policy, traj: Trajectory, ctx, limits: Limits) -> str:
    for turn in range(limits.max_turns):
        t = time.perf_counter()
        msg = await policy.act(traj.messages, ep.tools, ctx)
        status = await step(ep, traj, msg, latency_s=time.perf_counter() - t)
        if status:
            return status
    return "max_turns"


async def step(ep: Episode, traj: Trajectory, msg: Any, latency_s: float = 0.0) -> str | None:
    """Record one assistant message and run its tool calls in order.

    Returns how the episode ended ("completed" when the message has no tool calls,
    "max_tool_calls" when the budget runs out, "max_tokens" after ``MAX_CUT_REPLIES`` cut
    replies in a row) or None to go on. A cut reply's calls are not run (each gets the cut
    error; one without calls gets it as a user turn). Never raises for what the
    message holds: a malformed message is recorded in a form any chat template or API can
    replay (see ``assistant_message``) and each malformed call gets a tool error.
    """
    turn = len(traj.turns)
    msg, calls, notes = assistant_message(msg, turn)
    calls, over_budget, ep.argument_chars = bound_calls(msg, calls, ep.limits.max_tool_calls - len(traj.tool_calls),
                                                        notes, ep.argument_chars)
    record: dict[str, Any] = {"turn": turn, "latency_s": latency_s}
    record.update({k: msg.pop(k) for k in TURN_KEYS if k in msg})
    if notes:
        record["malformed"] = notes
    traj.turns.append(record)
    traj.messages.append(msg)
    cut = cut_reply_error(record)
    if cut:  # not a finished reply: nothing in it runs, and the agent is told why (module docstring)
        calls = [(call_id, name, arguments, cut) for call_id, name, arguments, _ in calls]
        if not calls:
            traj.messages.append({"role": "user", "content": cut})
    if not calls:
        if over_budget:
            return "max_tool_calls"
        return ("max_tokens" if cut_streak(traj) >= MAX_CUT_REPLIES else None) if cut else "completed"
    for call_id, name, arguments, problem in calls:
        if len(traj.tool_calls) >= ep.limits.max_tool_calls:
            return "max_tool_calls"
        t = time.perf_counter()
        if problem:
            text, is_error, args = f"Error: {problem}", True, json_safe(arguments)
        else:
            text, is_error, args = await ep.call(name, arguments)
        traj.tool_calls.append(ToolCallRecord(
            turn=turn, id=call_id, name=_recorded_name(name), arguments=args, result=text,
            is_error=is_error, duration_ms=(time.perf_counter() - t) * 1000,
        ))
        traj.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    if over_budget:
        return "max_tool_calls"
    return "max_tokens" if cut and cut_streak(traj) >= MAX_CUT_REPLIES else None


MAX_RECORDED_ARGUMENT_CHARS = 4_000_000
"""Argument text an episode may have recorded over all its calls (each call may hold up to
``MAX_ARGUMENT_CHARS``): a Trajectory line stays bounded whatever a policy emits."""


def bound_calls(msg: dict, calls: list, room: int, notes: list[str], spent: int = 0) -> tuple[list, bool, int]:
    """The calls of one message that are run and recorded: at most ``room`` (what is left of the
    tool-call budget; the rest are neither run nor recorded, and the episode ends on the budget),
    and once the episode's recorded arguments pass ``MAX_RECORDED_ARGUMENT_CHARS`` (``spent``
    so far), calls recorded with their arguments elided and answered with an error.
    Returns (calls, whether any were over the call budget, argument characters spent after them)."""
    over_budget = len(calls) > room
    if over_budget:
        dropped = len(calls) - max(room, 0)
        calls = calls[:max(room, 0)]
        msg["tool_calls"] = msg["tool_calls"][:len(calls)]
        notes.append(f"{dropped} tool call(s) past the tool-call budget were neither run nor recorded")
    total, bounded = spent, []
    for i, (call_id, name, arguments, problem) in enumerate(calls):
        fn = msg["tool_calls"][i].get("function") or {}
        size = len(fn["arguments"]) if isinstance(fn.get("arguments"), str) else len(_text(fn.get("arguments")))
        total += size
        if total > MAX_RECORDED_ARGUMENT_CHARS:
            total -= size
            msg["tool_calls"][i] = {**msg["tool_calls"][i],
                                    "function": {**fn, "arguments": f"[{size:,} characters not recorded]"}}
            problem = (f"this episode's tool calls have sent more than {MAX_RECORDED_ARGUMENT_CHARS:,} characters "
                       f"of arguments in all; this call ({size:,} characters) was not run. Write large content "
                       "with fewer, smaller calls (e.g. build a file from the shell).")
            arguments = {}
        bounded.append((call_id, name, arguments, problem))
    return bounded, over_budget, total


def cut_reply_error(record: dict) -> str | None:
    """What the agent is told about a reply its token budget cut (turn record ``finish_reason``
    "length"), or None for a finished reply."""
    if record.get("finish_reason") != "length":
        return None
    n = record.get("completion_tokens")
    if not (isinstance(n, int) and not isinstance(n, bool) and n > 0):
        n = len(record["token_ids"]) if isinstance(record.get("token_ids"), list) else None
    at = f"at {n:,} tokens" if n else "at the token limit"
    return (f"Error: your reply was cut {at} (the limit on tokens per reply) before it ended, so nothing in it "
            "was run. Send it again, shorter: split a long write into several smaller tool calls and keep "
            "the text around them brief.")


def cut_streak(traj: Trajectory) -> int:
    """How many of the last turns in a row were cut by the token budget."""
    n = 0
    for record in reversed(traj.turns):
        if record.get("finish_reason") != "length":
            break
        n += 1
    return n


CALL_SHAPE = '{"id": "...", "type": "function", "function": {"name": "APP__TOOL", "arguments": "{...}"}}'


def _text(value: Any) -> str:
    """A value the message cannot hold as it is, as JSON text."""
    return dumps(json_safe(value))


def _recorded_name(name: Any) -> str:
    if isinstance(name, str):
        return clean_text(name[:1000])
    return "" if name is None else _text(name)[:1000]


def assistant_message(msg: Any, turn: int) -> tuple[dict, list[tuple[str, Any, Any, str | None]], list[str]]:
    """A policy's reply as it is recorded, the calls to run, and notes on what was malformed.

    A well-formed OpenAI message is recorded as it came (token data included, for the turn
    record). Otherwise only the malformed parts change, so the history stays replayable: a
    non-dict reply becomes an empty message (a string is taken as the content), non-string
    content becomes text, content over 500,000 characters is cut, values strict JSON cannot
    carry are made record-safe, a call without an id gets one, a non-string tool name becomes
    text, and a ``tool_calls`` that is not a list becomes one call answered with an error.
    Each call is (id, name, arguments, problem): problem is set for calls that cannot be run.
    """
    notes: list[str] = []
    if isinstance(msg, dict):
        m = dict(msg)
    elif isinstance(msg, str):
        m = {"content": msg}
        notes.append("the policy returned a string, not a message: taken as the content")
    else:
        m = {"content": ""}
        notes.append(f"the policy returned {json_type(msg)}, not a message: {_text(msg)[:200]}")
    tokens = {k: m.pop(k) for k in TURN_KEYS if k in m}  # kept exactly as sampled (the RL loss reads them)
    raw_calls = m.pop("tool_calls", None)
    m = {k if isinstance(k, str) else _text(k): v for k, v in m.items()}
    content = m.get("content")
    if content is not None and not isinstance(content, str):
        parts = content if isinstance(content, list) else None
        if parts and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
            m["content"] = "".join(p["text"] for p in parts)
        else:
            m["content"] = _text(content)
            notes.append(f"the content was {json_type(content)}, not a string: recorded as JSON text")
    if isinstance(m.get("content"), str) and len(m["content"]) > MAX_CONTENT_CHARS:
        notes.append(f"the content was {len(m['content']):,} characters: cut to {MAX_CONTENT_CHARS:,}")
        m["content"] = m["content"][:MAX_CONTENT_CHARS]
    m = json_safe(m)
    m["role"] = "assistant"
    calls: list[tuple[str, Any, Any, str | None]] = []
    if raw_calls is None or (isinstance(raw_calls, list) and not raw_calls):
        if raw_calls is not None:
            m["tool_calls"] = raw_calls
    elif not isinstance(raw_calls, list):
        if raw_calls:
            call_id = f"call_{turn}_0"
            m["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": "", "arguments": _text(raw_calls)}}]
            calls.append((call_id, None, raw_calls,
                          f"tool_calls must be a list of tool calls, got {json_type(raw_calls)}; send "
                          f"[{CALL_SHAPE}, ...]"))
        notes.append(f"tool_calls was {json_type(raw_calls)}, not a list")
    else:
        m["tool_calls"] = []
        for i, call in enumerate(raw_calls):
            recorded, run = _tool_call(call, turn, i)
            m["tool_calls"].append(recorded)
            calls.append(run)
    m.update(tokens)
    return m, calls, notes


def _tool_call(call: Any, turn: int, i: int) -> tuple[dict, tuple[str, Any, Any, str | None]]:
    """One entry of ``tool_calls``: (as recorded, (id, name, arguments, problem))."""
    if not isinstance(call, dict):
        call_id = f"call_{turn}_{i}"
        recorded = {"id": call_id, "type": "function", "function": {"name": "", "arguments": _text(call)}}
        return recorded, (call_id, None, call, f"a tool call must be an object like {CALL_SHAPE}, "
                                               f"got {json_type(call)}")
    raw_id = call.get("id")
    if isinstance(raw_id, str) and raw_id.strip():
        call_id = clean_text(raw_id[:200])
    elif isinstance(raw_id, int) and not isinstance(raw_id, bool) and abs(raw_id) < 2**63:
        call_id = str(raw_id)
    else:
        call_id = f"call_{turn}_{i}"
    fn = call.get("function")
    if isinstance(fn, dict):
        name, arguments = fn.get("name", ""), fn.get("arguments", "{}")
        rec_fn = json_safe(fn)
        rec_fn["name"] = _recorded_name(name)
        if not isinstance(arguments, (str, dict)):
            rec_fn["arguments"] = _text(arguments)
        run = (call_id, name, arguments, None)
    else:
        rec_fn = {"name": "", "arguments": _text(fn)}
        run = (call_id, None, fn, f"a tool call needs a 'function' object with a name and arguments, "
                                  f"got {json_type(fn)}; send {CALL_SHAPE}")
    recorded = json_safe({k: v for k, v in call.items()})  # the same keys, in the same order
    recorded["id"], recorded["function"] = call_id, rec_fn
    return recorded, run


def toolset(task: Task) -> tuple:
    """What decides the tools an Episode of ``task`` shows: its apps and the tools it offers."""
    return task.apps, task.tools


async def tool_schemas(tasks: list[Task]) -> dict[tuple, list[dict]]:
    """The tool schemas an Episode shows, per distinct ``toolset`` among ``tasks`` (one World
    built per set). For what has no Trajectory to read them from: records older than schema
    version 2, and the tiny model's corpus, made before any episode."""
    import tempfile
    from pathlib import Path

    out: dict[tuple[str, ...], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="longhorizon-tools-") as tmp:
        for i, task in enumerate(tasks):
            if toolset(task) in out:
                continue
            world = World.build(Path(tmp) / str(i), task.build)
            async with Episode(task, world) as ep:
                out[toolset(task)] = list(ep.tools)
    return out


async def play_task(task: Task, policy, *, sample: int = 0, limits: Limits = Limits()) -> Trajectory:
    """Build ``task``'s World in a temporary folder, play one episode on it, grade, clean up."""
    import tempfile
    from pathlib import Path

    from longhorizon.core.world import default_worlds_dir, remove_tree

    tmp = tempfile.mkdtemp(prefix="longhorizon-", dir=default_worlds_dir())
    try:
        world = World.build(Path(tmp) / "world", task.build)
        return await play(task, policy, world, sample=sample, limits=limits)
    finally:
        remove_tree(tmp)  # whatever the agent left (folders thousands deep too)
