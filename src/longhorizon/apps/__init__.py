"""Apps: one package per simulated office application, each a real MCP server over a World.

Every app package has ``server.py`` with ``make_app(world) -> AppServer`` (the tools over one
World, so concurrent episodes never share state; ``build_server(world)`` is its MCPServer for
MCP clients) and ``state.py`` with its schema and helpers that task families use to seed data.
"""

from __future__ import annotations

import importlib

from longhorizon.core.errors import UsageError

APPS = (
    "files", "sheets", "mail", "calendar", "shell",
    "docs", "slides", "crm", "tickets", "store", "chat", "wiki", "search", "sql", "travel", "user",
)


def _module(name: str):
    if name not in APPS:
        raise UsageError(f"unknown app {name!r}: choose from {', '.join(APPS)}")
    return importlib.import_module(f"longhorizon.apps.{name}.server")


def build_app(name: str, world):
    """App ``name``'s tools over ``world`` (an ``AppServer``: ``.session()`` for rollouts in
    process, ``.build()`` for the MCPServer)."""
    return _module(name).make_app(world)


def build_server(name: str, world):
    """An MCPServer for app ``name`` whose tools act on ``world`` (for MCP clients: stdio, HTTP)."""
    return _module(name).build_server(world)
