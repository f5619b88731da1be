"""Episode runtime: in-process MCP sessions over a forked World, and the agent loop.

``Episode`` opens one real MCP client session per app the Task uses and exposes their tools
under ``APP__TOOL`` names in OpenAI function format. ``play`` runs a Policy against it under
limits and returns a graded Trajectory. Anything the agent sends (unknown tool, bad JSON,
wrong types, paths outside the workspace) comes back as a tool error it can read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from typing import Any

from mcp import Client

from longhorizon import __version__
from longhorizon.apps import build_server
from longhorizon.apps.common import cap
from longhorizon.core.errors import ContextLengthExceeded
from longhorizon.core.task import SUITE_VERSION, Task
from longhorizon.core.trajectory import ToolCallRecord, Trajectory
from longhorizon.core.world import World
from longhorizon.policies.base import EpisodeContext

# The SDK logs every rejected tool call at WARNING; the agent already sees the error.
logging.getLogger("mcp").setLevel(logging.ERROR)

SYSTEM_PROMPT = (
    "You are a capable office assistant working inside a company's workspace. "
    "You act only through the tools provided; tool names are APP__TOOL. "
    "Work step by step: find out what you need before acting, do the whole request, "
    "check the result, and when you are finished reply with a short summary and no tool calls."
)

SEP = "__"
TOKEN_KEYS = ("token_ids", "prompt_ids", "logprobs")


@dataclass(frozen=True)
class Limits:
    max_turns: int = 150
    max_tool_calls: int = 300
    max_wall_s: float = 600.0
    max_result_chars: int = 20_000

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _openai_tool(app: str, tool) -> dict:
    schema = dict(tool.input_schema or {"type": "object", "properties": {}})
    schema.pop("title", None)
    return {
        "type": "function",
        "function": {
            "name": f"{app}{SEP}{tool.name}",
            "description": (tool.description or "").strip(),
            "parameters": schema,
        },
    }


class Episode:
    """Open MCP sessions for a Task's apps over ``world``. Use as ``async with``."""

    def __init__(self, task: Task, world: World, limits: Limits = Limits()):
        self.task, self.world, self.limits = task, world, limits
        self.tools: list[dict] = []
        self._clients: dict[str, Client] = {}
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> "Episode":
        self._stack = AsyncExitStack()
        try:
            for app in self.task.apps:
                client = await self._stack.enter_async_context(Client(build_server(app, self.world)))
                self._clients[app] = client
                listed = await client.list_tools()
                self.tools.extend(_openai_tool(app, t) for t in listed.tools)
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

    async def call(self, name: str, arguments: Any) -> tuple[str, bool, Any]:
        """Run one tool call. Returns (result text, is_error, parsed arguments)."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return f"Error: arguments are not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object.", True, arguments
        if not isinstance(arguments, dict):
            return f"Error: arguments must be a JSON object, got {type(arguments).__name__}.", True, arguments
        app, sep, tool = (name or "").partition(SEP)
        if not sep or app not in self._clients or name not in self.tool_names:
            return (
                f"Error: unknown tool {name!r}. Available tools: {', '.join(self.tool_names)}.",
                True,
                arguments,
            )
        result = await self._clients[app].call_tool(tool, arguments)
        text = "\n".join(getattr(c, "text", "") or f"[{c.type} content]" for c in result.content)
        if result.is_error and not text.startswith("Error"):
            text = f"Error: {text}"
        return cap(text, self.limits.max_result_chars), bool(result.is_error), arguments


async def play(task: Task, policy, world: World, *, sample: int = 0, limits: Limits = Limits(),
               world_hash: str | None = None, ctx=None) -> Trajectory:
    """Play one episode of ``task`` with ``policy`` on ``world`` (already forked) and grade it.

    Policy or infrastructure exceptions propagate (the runner records them as infra errors);
    limits end the episode as an agent outcome and it is graded as it stands.
    """
    ctx = ctx or EpisodeContext(task=task, sample=sample)
    traj = new_trajectory(task, policy.describe(), world_hash or world.hash(), sample, limits)
    t0 = time.perf_counter()
    async with Episode(task, world, limits) as ep:
        try:
            async with asyncio.timeout(limits.max_wall_s):
                traj.status = await _loop(ep, policy, traj, ctx, limits)
        except TimeoutError:
            traj.status = "timeout"
        except ContextLengthExceeded:
            traj.status = "context_length"
    traj.wall_s = time.perf_counter() - t0
    # graders parse files and databases: off the event loop, so other episodes keep moving
    traj.grade = await asyncio.to_thread(task.grade, world, traj)
    return traj


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


async def step(ep: Episode, traj: Trajectory, msg: dict, latency_s: float = 0.0) -> str | None:
    """Record one assistant message and run its tool calls in order.

    Returns how the episode ended ("completed" when the message has no tool calls,
    "max_tool_calls" when the budget runs out) or None to go on.
    """
    msg = dict(msg)
    turn = len(traj.turns)
    record = {"turn": turn, "latency_s": latency_s}
    record.update({k: msg.pop(k) for k in TOKEN_KEYS if k in msg})
    msg["role"] = "assistant"
    traj.turns.append(record)
    traj.messages.append(msg)
    calls = msg.get("tool_calls") or []
    if not calls:
        return "completed"
    for i, call in enumerate(calls):
        if len(traj.tool_calls) >= ep.limits.max_tool_calls:
            return "max_tool_calls"
        call = call if isinstance(call, dict) else {}
        fn = call.get("function") if isinstance(call.get("function"), dict) else {}
        call_id = str(call.get("id") or f"call_{turn}_{i}")
        t = time.perf_counter()
        text, is_error, args = await ep.call(fn.get("name", ""), fn.get("arguments", "{}"))
        traj.tool_calls.append(ToolCallRecord(
            turn=turn, id=call_id, name=fn.get("name", ""), arguments=args, result=text,
            is_error=is_error, duration_ms=(time.perf_counter() - t) * 1000,
        ))
        traj.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return None


async def play_task(task: Task, policy, *, sample: int = 0, limits: Limits = Limits()) -> Trajectory:
    """Build ``task``'s World in a temporary folder, play one episode on it, grade, clean up."""
    import tempfile
    from pathlib import Path

    from longhorizon.core.world import default_worlds_dir

    with tempfile.TemporaryDirectory(prefix="longhorizon-", dir=default_worlds_dir()) as tmp:
        world = World.build(Path(tmp) / "world", task.build)
        return await play(task, policy, world, sample=sample, limits=limits)
