"""What a tool call touches, read from its name and arguments alone: which entities (files,
messages, tickets, pages...) it names, and what "the same call again" means.

Whether a call reads or writes is the apps' to say (``apps/kinds.is_read``, from each tool's
annotations); ``reads_by_name`` is only its fallback for tools no app has (another benchmark's
log): a tool whose name starts with a reading verb reads, every other tool acts, and ``query``
(SQL) reads only when its statement is a SELECT/WITH.
"""

from __future__ import annotations

import json
from typing import Any

READ_VERBS = ("list", "read", "get", "search", "find", "describe", "free_busy", "lookup", "check",
              "show", "view", "backlinks", "ls", "cat", "stat", "count", "display", "pwd")
PATH_KEYS = ("path", "src", "dst", "dest", "destination_path", "folder", "file", "file_name", "filename")
ENTITY_KEYS = ("id", "key", "slug", "sku", "channel", "page", "doc", "ticket")


def reads_by_name(name: str, arguments: Any = None) -> bool:
    """True when the tool ``name`` (exposed ``app__tool`` or bare) reads, judged by its name
    alone: for tools no app has (``apps/kinds.is_read`` asks the apps first)."""
    tool = name.split("__", 1)[-1].lower()
    if tool == "query":
        sql = arguments.get("sql", "") if isinstance(arguments, dict) else ""
        return isinstance(sql, str) and sql.lstrip().lower().startswith(("select", "with", "pragma"))
    return tool.startswith(READ_VERBS)


def _norm_path(value: str) -> str:
    v = value.strip()
    while v.startswith("./"):
        v = v[2:]
    return v.rstrip("/") or "."


def entities(name: str, arguments: Any) -> list[str]:
    """The entities a call names, as stable strings: ``path:reports/q3.xlsx`` for workspace
    paths (shared by every app that opens files), ``APP:KEY=VALUE`` for ids, keys and slugs."""
    if not isinstance(arguments, dict):
        return []
    app = name.split("__", 1)[0] if "__" in name else ""
    out = []
    for k, v in arguments.items():
        if isinstance(v, bool) or not isinstance(v, (str, int)) or v == "":
            continue
        key = k.lower()
        if key in PATH_KEYS:
            out.append(f"path:{_norm_path(str(v))}")
        elif key in ENTITY_KEYS or key.endswith("_id"):
            out.append(f"{app}:{key}={v}")
    return out


def call_key(name: str, arguments: Any) -> str:
    """One string per distinct call (same tool, same arguments): what "the same call again" means
    for repeated-read metrics and the RL repetition penalty."""
    return name + " " + (json.dumps(arguments, sort_keys=True, default=str) if isinstance(arguments, dict)
                         else str(arguments))
