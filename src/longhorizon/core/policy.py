"""The Policy interface: ``async act(messages, tools, ctx) -> assistant message``.

An assistant message is an OpenAI-format dict: ``{"role": "assistant", "content": str,
"tool_calls": [{"id", "type": "function", "function": {"name", "arguments": JSON str}}]}``.
Policies that sample tokens may add ``token_ids``, ``prompt_ids`` and ``logprobs``; a reply
its token budget cut says ``finish_reason: "length"`` (and ``completion_tokens`` when known); a
policy whose context policy elided tool results from the prompt says how many (``elided``).
The episode moves these into the Trajectory's per-turn records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from longhorizon.core.task import Task


@dataclass
class EpisodeContext:
    """What a policy may know about the episode besides the messages (oracles need the Task)."""

    task: Task
    sample: int = 0
    scratch: dict[str, Any] = field(default_factory=dict)


class Policy(Protocol):
    name: str

    def describe(self) -> dict[str, Any]:
        """Provenance: model, sampling settings. Recorded in every Trajectory."""
        ...

    async def act(self, messages: list[dict], tools: list[dict], ctx: EpisodeContext) -> dict: ...


def assistant(content: str = "", tool_calls: list[dict] | None = None) -> dict:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return msg


def tool_call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
