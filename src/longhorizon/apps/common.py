"""Helpers shared by app servers: confining paths to the workspace, capping outputs."""

from __future__ import annotations

import os
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
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.tools import Tool

        names = [f.__name__ for f in self._fns]
        tpl = AppServer._templates.get(self.template_key)
        if tpl is None or [t.name for t in tpl] != names:
            tpl = AppServer._templates[self.template_key] = [Tool.from_function(f) for f in self._fns]
        tools = [t.model_copy(update={"fn": f}) for t, f in zip(tpl, self._fns)]
        return MCPServer(self.name, instructions=self.instructions, tools=tools)
