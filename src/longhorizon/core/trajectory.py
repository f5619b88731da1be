"""Trajectory: the versioned record of one episode, one JSON object per line on disk.

Messages follow the OpenAI chat format (system/user/assistant/tool; assistant ``tool_calls``
carry ``arguments`` as a JSON string), so any chat template or API can replay them.
Token data a policy returns (ids, logprobs) is kept per assistant turn in ``turns``.

A Trajectory is always writable. An agent (or a broken policy) can send anything, so values
are made record-safe where they enter it (``env/episode.step`` applies ``json_safe`` to what it
records) and again, as a last resort, when a Trajectory is written (``to_json``). A value that
strict JSON cannot carry faithfully is kept as received when it can be, else replaced by a
string that shows what it was:

    lone surrogates in a string (keys too)   the same text, each one written as a \\udXXX escape
    NaN, Infinity, -Infinity (and 1e999)      the strings "NaN", "Infinity", "-Infinity"
    an integer of more than ~1,000 digits     "<integer of N digits>" (Python's json reads at most 4,300)
    nesting deeper than 64 levels             "<nested deeper than 64 levels>" in place of the subtree
    a string over 1,000,000 characters        cut, with "... [N more characters not recorded]"
    a container met again inside itself       "<cycle>"
    a non-JSON type (bytes, set, object)      its repr (at most 200 characters); tuples become lists
    a non-string key                          its JSON text ("1", "true", "null") or repr

so every line the run store writes is strict JSON in valid UTF-8 that ``json.loads`` reads back.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from longhorizon.core.grade import Grade

SCHEMA_VERSION = 2
"""2 added ``tools``. Records of every version in ``READABLE_VERSIONS`` load (older ones with no tools)."""
READABLE_VERSIONS = (1, 2)

AGENT_STATUSES = ("completed", "max_turns", "max_tool_calls", "max_tokens", "timeout", "context_length")
"""Ways an episode ends that are the agent's doing; an infrastructure error is not a Trajectory.
``max_tokens``: its replies kept being cut by the policy's token budget (env/episode.py)."""


MAX_DEPTH = 64
MAX_STRING_CHARS = 1_000_000
MAX_INT_BITS = 3_300  # ~1,000 decimal digits
MAX_NODES = 10_000_000
MAX_REPR_CHARS = 200


def clean_text(text: str) -> str:
    """``text`` as valid Unicode: each lone surrogate written as a ``\\udXXX`` escape."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters not recorded]"


def _repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a repr that itself fails (deep, huge, broken __repr__)
        text = f"<{type(value).__name__}>"
    return clean_text(_cut(text, MAX_REPR_CHARS))


def _key(key: Any) -> str:
    if isinstance(key, str):
        return clean_text(_cut(key, MAX_STRING_CHARS))
    if key is None or isinstance(key, (bool, int, float)):
        safe = json_safe(key)
        return safe if isinstance(safe, str) else json.dumps(safe)
    return _repr(key)


def json_safe(value: Any) -> Any:
    """``value`` as strict JSON can carry it (see the module docstring): unchanged when it
    already is (new containers, same contents), else with each bad part replaced."""
    budget = [MAX_NODES]
    path: set[int] = set()

    def walk(v: Any, depth: int) -> Any:
        budget[0] -= 1
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, str):
            return clean_text(_cut(v, MAX_STRING_CHARS))
        if isinstance(v, int):
            if v.bit_length() > MAX_INT_BITS:
                return f"{'-' if v < 0 else ''}<integer of {int(v.bit_length() * 0.30103) + 1} digits>"
            return int(v)
        if isinstance(v, float):
            if math.isnan(v):
                return "NaN"
            if math.isinf(v):
                return "Infinity" if v > 0 else "-Infinity"
            return float(v)
        if not isinstance(v, (dict, list, tuple)):
            return _repr(v)
        if depth >= MAX_DEPTH:
            return f"<nested deeper than {MAX_DEPTH} levels>"
        if budget[0] <= 0:
            return "<not recorded: the value is too large>"
        if id(v) in path:
            return "<cycle>"
        path.add(id(v))
        try:
            if isinstance(v, dict):
                return {_key(k): walk(x, depth + 1) for k, x in v.items()}
            return [walk(x, depth + 1) for x in v]
        finally:
            path.discard(id(v))

    return walk(value, 0)


def dumps(obj: Any) -> str:
    """One record as a line of strict JSON that encodes to valid UTF-8 (``json_safe`` applied
    only when the fast, plain dump would not give that)."""
    try:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        line.encode("utf-8")
        return line
    except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
        return json.dumps(json_safe(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass
class ToolCallRecord:
    turn: int
    id: str
    name: str
    arguments: Any
    """Parsed arguments (dict) when the JSON was valid, else the raw string the agent sent;
    made record-safe (``json_safe``) either way."""
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
    tools: list[dict[str, Any]] = field(default_factory=list)
    """The tool schemas the episode showed the policy (OpenAI function format), as it saw them:
    what SFT data and chat templates need to replay the episode. Empty in version-1 records."""
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
                content = m.get("content")
                return content if isinstance(content, str) else ""
        return ""

    # -- (de)serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["grade"] = self.grade.to_dict() if self.grade else None
        return d

    def _fields_dict(self) -> dict[str, Any]:
        """``to_dict`` without the deep copy ``asdict`` makes (the values themselves, shared)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["tool_calls"] = [{f.name: getattr(c, f.name) for f in fields(c)} for c in self.tool_calls]
        d["grade"] = self.grade.to_dict() if self.grade else None
        return d

    def to_json(self) -> str:
        """One JSONL line; always strict JSON in valid UTF-8 (see ``dumps``).

        Dumped straight from the fields (no deep copy): when that is plain strict JSON it is the
        line ``to_dict`` would give; anything else (a dataclass or other value JSON cannot take
        nested in a message) goes the way it always went."""
        try:
            line = json.dumps(self._fields_dict(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            line.encode("utf-8")
            return line
        except (ValueError, TypeError, RecursionError, UnicodeEncodeError):
            pass
        try:
            d = self.to_dict()
        except RecursionError:  # asdict copies nested values recursively; json_safe cuts them first
            d = self._fields_dict()
        return dumps(d)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trajectory":
        version = d.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise ValueError(f"trajectory schema version {version!r} is not supported "
                             f"(expected one of {', '.join(map(str, READABLE_VERSIONS))})")
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
