"""What an app's tools do with a call that goes wrong: it always comes back as a tool error
that says why.

``AppServer.build`` (apps/common.py) makes every tool of every app an ``AppTool``:

* Its input schema says ``additionalProperties: false``, and the server holds to it: an
  unknown argument (misspelled or extra) is refused with a message naming it, the closest
  accepted name and the tool's signature. The SDK's argument model would silently drop it.
* Arguments that fail validation come back as one short clause per argument
  (``missing required argument 'path'``, ``argument 'offset': Input should be a valid integer
  (got string)``), not pydantic's multi-line report with its input dump and URL.
* An unexpected exception inside a tool (a bug, or an input nobody foresaw) comes back as
  ``internal error (TypeName: first line of its message)`` instead of the SDK's bare
  "Error executing tool X", with absolute host paths taken out of the message; the traceback
  goes to the ``longhorizon.apps`` logger at DEBUG level, never to the agent.

A ``ToolError`` raised on purpose keeps its text (the SDK prefixes "Error executing tool X: "),
cut in the middle past 2,000 characters so that an echoed huge value cannot hide the reason.
``MCPError`` (a protocol error, e.g. the user app's model server failing: infrastructure, not the
agent) passes through untouched.
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
import re
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

from longhorizon.core.trajectory import clean_text

log = logging.getLogger("longhorizon.apps")

MAX_MESSAGE_CHARS = 600
MAX_ERROR_CHARS = 2_000
MAX_PROBLEMS = 4

_ABS_PATH = re.compile(r"(?<![\w.~/-])/[^\s'\"`,;()<>\[\]{}]*")


def _hide_path(m: re.Match) -> str:
    p = m.group(0)
    head, sep, tail = p.partition("/workspace/")
    if sep:
        return tail or "."
    if p.endswith("/workspace"):
        return "."
    head, sep, tail = p.partition("/state/")
    if sep:
        return f"<app state>/{tail}"
    return "<path>"


def scrub_paths(text: str) -> str:
    """Absolute host paths out of a message: a workspace path becomes relative, others ``<path>``."""
    return _ABS_PATH.sub(_hide_path, text)


def short(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def elide(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """A long error cut in the middle: an echoed value is shortened, the reason after it kept."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]} ...[{len(text) - head - tail:,} characters]... {text[-tail:]}"


def describe_exception(exc: BaseException) -> str:
    """``TypeName: first line of the message``, host paths removed, short, valid Unicode."""
    try:
        msg = str(exc)
    except Exception:  # a message that cannot even be formatted
        msg = ""
    line = next((ln.strip() for ln in msg.splitlines() if ln.strip()), "")
    text = f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    return clean_text(short(scrub_paths(text), 300))


def json_type(value: Any) -> str:
    """The JSON name of a value's type (what the agent sent)."""
    if value is None:
        return "null"
    for t, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                    (dict, "object"), ((list, tuple), "array")):
        if isinstance(value, t):
            return name
    return type(value).__name__


_TYPE_TAGS = {"str", "int", "float", "bool", "none", "bytes", "dict", "list", "decimal", "date", "datetime"}


def _union_tags(locs: list[tuple]) -> set[tuple]:
    """Positions in error locations that name a union's member ('str', 'list[str]'), not an
    argument: a type-like part with a sibling error that names another member there."""
    tags = set()
    for loc in locs:
        for i in range(1, len(loc)):
            p = loc[i]
            if isinstance(p, str) and (p in _TYPE_TAGS or "[" in p) and any(
                    other[:i] == loc[:i] and len(other) > i and other[i] != p for other in locs):
                tags.add(loc[:i + 1])
    return tags


def _loc(parts: tuple, tags: set[tuple] = frozenset()) -> str:
    out = ""
    for i, p in enumerate(parts):
        if isinstance(p, int):
            out += f"[{p}]"
        elif parts[:i + 1] not in tags:
            out += f".{p}" if out else str(p)
    return out or "arguments"


def describe_validation(exc, signature: str) -> str:
    """A pydantic ValidationError as short clauses, one per argument."""
    problems: dict[str, list[str]] = {}
    got: dict[str, str] = {}
    missing: list[str] = []
    errors = exc.errors(include_url=False, include_context=False)
    tags = _union_tags([tuple(e.get("loc", ())) for e in errors])
    for err in errors:
        loc = _loc(tuple(err.get("loc", ())), tags)
        kind = err.get("type", "")
        if kind == "missing":
            missing.append(loc)
            continue
        msgs = problems.setdefault(loc, [])
        if err.get("msg", "is not valid") not in msgs:
            msgs.append(err.get("msg", "is not valid"))
        if (kind.endswith("_type") or kind.endswith("_parsing")) and "input" in err:
            got.setdefault(loc, json_type(err["input"]))
    clauses = [f"missing required argument {m!r}" for m in missing]
    clauses += [f"argument {loc!r}: {' / '.join(msgs)}" + (f" (got {got[loc]})" if loc in got else "")
                for loc, msgs in problems.items()]
    more = len(clauses) - MAX_PROBLEMS
    text = "; ".join(clauses[:MAX_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")
    return clean_text(short(f"{text or 'invalid arguments'}. Usage: {signature}"))


def signature(name: str, schema: dict) -> str:
    """``read_file(path, offset=0, limit=20000)`` from a tool's input schema."""
    parts = []
    for arg, spec in (schema.get("properties") or {}).items():
        if isinstance(spec, dict) and "default" in spec:
            try:
                default = json.dumps(spec["default"], ensure_ascii=False)
            except (TypeError, ValueError):
                default = "..."
            parts.append(f"{arg}={short(default, 40)}")
        else:
            parts.append(arg)
    return f"{name}({', '.join(parts)})"


def unknown_arguments(name: str, schema: dict, given) -> str | None:
    """The refusal for argument names the tool does not take, or None when all are known."""
    accepted = list((schema.get("properties") or {}))
    unknown = [k for k in given if k not in accepted]
    if not unknown:
        return None
    shown = ", ".join(repr(short(str(k), 60)) for k in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
    hint = ""
    if len(unknown) == 1 and isinstance(unknown[0], str):
        close = difflib.get_close_matches(unknown[0], accepted, n=1)
        missing = close and close[0] not in given
        hint = f" (did you mean {close[0]!r}?)" if missing else ""
    noun = "argument" if len(unknown) == 1 else "arguments"
    return clean_text(short(f"unknown {noun} {shown}{hint}. Usage: {signature(name, schema)}"))


@functools.cache
def tool_class():
    """``AppTool``: the SDK's Tool, with the checks and messages this module describes.
    Built on first use so that importing apps.common stays light."""
    from mcp.server.mcpserver.tools import Tool
    from pydantic import ValidationError

    class AppTool(Tool):
        async def run(self, arguments: dict[str, Any], context, convert_result: bool = False) -> Any:
            prefix = f"Error executing tool {self.name}: "
            refusal = unknown_arguments(self.name, self.parameters, arguments)
            if refusal:
                raise ToolError(prefix + refusal)
            try:
                return await super().run(arguments, context, convert_result=convert_result)
            except UnexpectedToolError as exc:
                cause = exc
                while isinstance(cause, UnexpectedToolError) and cause.__cause__ is not None:
                    cause = cause.__cause__
                log.debug("tool %s raised an unexpected exception", self.name, exc_info=cause)
                raise ToolError(prefix + f"internal error ({describe_exception(cause)})") from None
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):
                    message = describe_validation(exc.__cause__, signature(self.name, self.parameters))
                    raise ToolError(prefix + message) from None
                raise ToolError(clean_text(elide(str(exc)))) from None

    return AppTool


def strict(schema: dict) -> dict:
    """The input schema with ``additionalProperties: false`` (in place; returned for chaining)."""
    schema["additionalProperties"] = False
    return schema
