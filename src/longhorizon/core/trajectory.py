"""Trajectory: the versioned record of one episode, one JSON object per line on disk.

Messages follow the OpenAI chat format (system/user/assistant/tool; assistant ``tool_calls``
carry ``arguments`` as a JSON string), so any chat template or API can replay them.
Token data a policy returns (ids, logprobs) is kept per assistant turn in ``turns``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from longhorizon.core.task import Grade

SCHEMA_VERSION = 1

AGENT_STATUSES = ("completed", "max_turns", "max_tool_calls", "timeout", "context_length")
"""Ways an episode ends that are the agent's doing; an infrastructure error is not a Trajectory."""


@dataclass
class ToolCallRecord:
    turn: int
    id: str
    name: str
    arguments: Any
    """Parsed arguments (dict) when the JSON was valid, else the raw string the agent sent."""
    result: str
    is_error: bool
    duration_ms: float

    @property
    def app(self) -> str:
        return self.name.split("__", 1)[0] if "__" in self.name else ""

    @property
    def tool(self) -> str:
        return self.name.split("__", 1)[-1]


@dataclass
class Trajectory:
    episode_id: str
    task_id: str
    family: str
    category: str
    split: str
    seed: int
    sample: int
    provenance: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    status: str = "completed"
    grade: Grade | None = None
    wall_s: float = 0.0
    schema_version: int = SCHEMA_VERSION

    # -- helpers for graders ------------------------------------------------------------
    def calls(self, name: str | None = None, *, ok_only: bool = False) -> list[ToolCallRecord]:
        """Tool calls, optionally only those to exposed tool ``name`` (e.g. ``mail__send``)."""
        return [
            c for c in self.tool_calls
            if (name is None or c.name == name) and not (ok_only and c.is_error)
        ]

    @property
    def final_answer(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "assistant" and not m.get("tool_calls"):
                return m.get("content") or ""
        return ""

    # -- (de)serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["grade"] = self.grade.to_dict() if self.grade else None
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trajectory":
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"trajectory schema version {version!r} is not supported (expected {SCHEMA_VERSION})")
        d = dict(d)
        d["tool_calls"] = [ToolCallRecord(**c) for c in d.get("tool_calls", [])]
        d["grade"] = Grade.from_dict(d["grade"]) if d.get("grade") else None
        return cls(**d)

    @property
    def reward(self) -> float:
        return self.grade.reward if self.grade else 0.0

    @property
    def passed(self) -> bool:
        return bool(self.grade and self.grade.passed)
