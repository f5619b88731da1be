"""Helpers shared by app servers: confining paths to the workspace, capping outputs."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError

MAX_OUTPUT_CHARS = 20_000


def confine(workspace: Path, path: str) -> Path:
    """Resolve an agent-supplied path inside ``workspace``; refuse anything that escapes it.

    Absolute paths are read relative to the workspace root ("/report.txt" is
    ``workspace/report.txt``). Symlinks are resolved before the check, so a link
    pointing outside cannot be followed.
    """
    if not isinstance(path, str):
        raise ToolError("path must be a string")
    if "\x00" in path:
        raise ToolError("path contains a NUL byte")
    root = workspace.resolve()
    rel = path.strip().lstrip("/") or "."
    target = Path(os.path.realpath(root / rel))
    if target != root and root not in target.parents:
        raise ToolError(f"path {path!r} is outside the workspace")
    return target


def rel(workspace: Path, path: Path) -> str:
    """How the agent sees a path: relative to the workspace root."""
    r = path.resolve().relative_to(workspace.resolve()).as_posix()
    return r or "."


def cap(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Truncate long outputs with a note the agent can act on."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [output truncated: {len(text) - limit} more characters; narrow the request]"


def sqlite_connector(db_path: Path, what: str, app: str) -> Callable[[], sqlite3.Connection]:
    """``connect()`` for an app's SQLite state: rows by column name, and a tool error the agent
    can read when this World has no such app (never an empty database created on the fly)."""

    def connect() -> sqlite3.Connection:
        if not db_path.exists():
            raise ToolError(f"this world has no {what} ({app} app state is missing)")
        conn = sqlite3.connect(db_path)
        conn.row_factory = sqlite3.Row
        return conn

    return connect


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    """An app database's ``meta`` key/value table (its user, its clock, ...)."""
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def tick_clock(conn: sqlite3.Connection, advance: Callable[[str], str]) -> str:
    """The clock value for this write; moves the app's clock on (``advance``: one step of it)."""
    now = read_meta(conn)["now"]
    conn.execute("UPDATE meta SET value = ? WHERE key = 'now'", (advance(now),))
    return now


class AppServer:
    """Collects one World's tool closures and builds the app's MCPServer from them.

    Building a tool's argument schema (a pydantic model per tool) is the costly part of
    server creation, ~2 ms a tool; schemas depend only on the code, so they are built once
    per app and each World's server reuses them with its own closures.
    """

    _templates: dict[str, list] = {}

    def __init__(self, name: str, instructions: str = "", *, template_key: str | None = None):
        """``template_key`` names the tool set when one app offers different sets (default: the app)."""
        self.name, self.instructions = name, instructions
        self.template_key = template_key or name
        self._fns: list = []

    def tool(self):
        def register(fn):
            self._fns.append(fn)
            return fn
        return register

    def build(self):
        """The MCPServer. Every tool is an ``AppTool`` (see apps/tool_guard.py): its schema refuses
        unknown arguments and every failure comes back as a tool error that says why."""
        from mcp.server.mcpserver import MCPServer

        from longhorizon.apps.tool_guard import strict, tool_class

        names = [f.__name__ for f in self._fns]
        tpl = AppServer._templates.get(self.template_key)
        if tpl is None or [t.name for t in tpl] != names:
            tpl = [tool_class().from_function(f) for f in self._fns]
            for t in tpl:
                strict(t.parameters)
            AppServer._templates[self.template_key] = tpl
        tools = [t.model_copy(update={"fn": f}) for t, f in zip(tpl, self._fns)]
        return MCPServer(self.name, instructions=self.instructions, tools=tools)


class OfficeFiles:
    """One kind of office file (.docx, .pptx, .xlsx) in the workspace, as an app's tools open it:
    confined paths, the right extension, errors the agent can act on, and reads that reuse an
    unchanged file's last load (same inode, mtime, size). Edits always load a fresh copy, so a
    failed edit never leaks into the cache."""

    CACHE_SIZE = 16

    def __init__(self, workspace: Path, suffix: str, noun: str, load, *, kind: str, missing_hint: str):
        self.workspace, self.suffix, self.noun, self.load = workspace, suffix, noun, load
        self.kind = kind  # e.g. "a .docx document": what a file that fails to load is not
        self.missing_hint = missing_hint
        self._cache: dict[Path, tuple[tuple[int, int, int], object]] = {}

    def path(self, path: str, wrong_type: str) -> Path:
        p = confine(self.workspace, path)
        if p.suffix.lower() != self.suffix:
            raise ToolError(f"{path!r} {wrong_type}")
        return p

    def open(self, p: Path, path: str, for_read: bool = False):
        if not p.exists():
            raise ToolError(f"{self.noun} {path!r} does not exist{self.missing_hint}")
        if not p.is_file():
            raise ToolError(f"{path!r} is a folder, not a {self.noun}")
        st = p.stat()
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if for_read and p in self._cache and self._cache[p][0] == stamp:
            return self._cache[p][1]
        try:
            obj = self.load(p)
        except Exception as exc:  # corrupt, or not really that format: the agent should know, not crash
            raise ToolError(f"{path!r} could not be opened as {self.kind} ({type(exc).__name__})") from None
        if for_read:
            if len(self._cache) >= self.CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))
            self._cache[p] = (stamp, obj)
        return obj
