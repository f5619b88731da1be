"""Serve one app over a World folder to any MCP client, over stdio or streamable HTTP.

    python -m longhorizon.apps.serve files --transport stdio --world path/to/world
    python -m longhorizon.apps.serve shell --transport http --world path/to/world --port 8000

Rollouts use in-process sessions; this is for outside clients (an IDE, another agent
framework, a debugging session). Over HTTP the server binds its socket before announcing
``serving APP ... at http://HOST:PORT/mcp`` on stderr, so a caller can connect as soon as
that line appears (``--port 0`` picks a free port and the line says which).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from longhorizon.apps import APPS, build_app
from longhorizon.core.errors import UsageError
from longhorizon.core.world import World

TRANSPORTS = ("stdio", "http")
log = logging.getLogger("longhorizon.apps")


def check_args(app_name: str, world_dir: Path | str, transport: str) -> World:
    """Validate before anything starts: unknown app, transport or World is a UsageError."""
    if app_name not in APPS:
        raise UsageError(f"unknown app {app_name!r}: choose from {', '.join(APPS)}")
    if transport not in TRANSPORTS:
        raise UsageError(f"unknown transport {transport!r}: choose from {', '.join(TRANSPORTS)}")
    world = World(Path(world_dir))
    if not world.workspace.is_dir():
        raise UsageError(f"{world_dir} is not a World folder (no workspace/ inside)")
    return world


def serve(app_name: str, world_dir: Path | str, transport: str = "stdio",
          host: str = "127.0.0.1", port: int = 8000, on_call: OnCall | None = None,
          tools: list[str] | None = None) -> None:
    """Serve app ``app_name`` over the World in ``world_dir`` until the client or a signal ends it.
    ``on_call(tool, arguments, result text, is_error, duration_ms)`` hears of every call served
    (``serve-app --record``: env/recording.py); ``tools`` (the app's own names) offers only
    those, as a Task with ``tools`` does."""
    world = check_args(app_name, world_dir, transport)
    try:
        app = build_app(app_name, world).only(tools)
    except ValueError as exc:
        raise UsageError(f"--tools: {exc}") from None
    server = app.build()
    if on_call is not None:
        observe_calls(server, on_call)
    logging.getLogger("mcp").setLevel(logging.WARNING)  # per-request INFO lines drown real problems
    if transport == "stdio":
        anyio.run(server.run_stdio_async)
    else:
        anyio.run(_serve_http, server, app_name, host, port)


OnCall = Callable[[str, Any, str, bool, float], None]


def observe_calls(server, on_call: OnCall) -> None:
    """Tell ``on_call`` of every tools/call ``server`` answers, with the text the client gets
    (``Error: ...`` when it is an error, as an episode records it). The SDK's handler calls
    ``server.call_tool``, so this wraps that; what the client receives is unchanged."""
    from longhorizon.core.trajectory import clean_text

    inner = server.call_tool

    async def call_tool(name, arguments, context=None):
        t0 = time.perf_counter()
        text, is_error = "Error: the call did not finish", True
        try:
            result = await inner(name, arguments, context)
        except Exception as exc:  # the SDK answers it as an error result (or a protocol error)
            text = f"Error: {exc}"
            raise
        else:
            text = clean_text("\n".join(getattr(c, "text", "") or f"[{c.type} content]"
                                        for c in getattr(result, "content", None) or []))
            is_error = bool(getattr(result, "is_error", False))
            if is_error and not text.startswith("Error"):
                text = f"Error: {text}"
            return result
        finally:
            try:
                on_call(name, arguments, text, is_error, (time.perf_counter() - t0) * 1000)
            except Exception as exc:  # the call was served; only its record is lost: say so
                log.error("could not record the call to %s: %s", name, exc)

    server.call_tool = call_tool


async def _serve_http(server, app_name: str, host: str, port: int) -> None:
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    bound = sock.getsockname()[1]
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning")
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"serving {app_name} over streamable HTTP at http://{shown}:{bound}/mcp", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The arguments, added to ``parser`` if given (so the CLI can reuse them as a subcommand)."""
    p = parser or argparse.ArgumentParser(
        prog="python -m longhorizon.apps.serve",
        description="Serve one longhorizon app over a World folder to any MCP client.",
    )
    p.add_argument("app", help=f"the app to serve: {', '.join(APPS)}")
    p.add_argument("--world", required=True, type=Path, help="World folder (holds workspace/ and state/)")
    p.add_argument("--transport", choices=TRANSPORTS, default="stdio",
                   help="stdio (default) or http (streamable HTTP at /mcp)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000; 0 picks a free one)")
    p.add_argument("--tools", type=tool_list, metavar="A,B", help=TOOLS_HELP)
    return p


TOOLS_HELP = ("offer only these tools (the app's own names, comma-separated), as a task that offers a subset "
              "does (a lower level, say); `world build` writes this into mcp.json when so")


def tool_list(text: str) -> list[str]:
    """``--tools A,B``: the names, blanks dropped (an empty list offers no tool)."""
    return [t.strip() for t in text.split(",") if t.strip()]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        serve(args.app, args.world, args.transport, args.host, args.port, tools=args.tools)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
