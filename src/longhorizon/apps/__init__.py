"""Apps: one package per simulated office application, each a real MCP server over a World.

Every app package has ``server.py`` with ``build_server(world) -> MCPServer`` (one server
per World, so concurrent episodes never share state) and ``state.py`` with its schema and
helpers that task families use to seed data.
"""

from __future__ import annotations

import importlib

from longhorizon.core.errors import UsageError

APPS = (
    "files", "sheets", "mail", "calendar", "shell",
    "docs", "slides", "crm", "tickets", "store", "chat", "wiki", "search", "sql", "travel", "user",
)


def build_server(name: str, world):
    """An MCPServer for app ``name`` whose tools act on ``world``."""
    if name not in APPS:
        raise UsageError(f"unknown app {name!r}: choose from {', '.join(APPS)}")
    module = importlib.import_module(f"longhorizon.apps.{name}.server")
    return module.build_server(world)
