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
from pathlib import Path

import anyio

from longhorizon.apps import APPS, build_server
from longhorizon.core.errors import UsageError
from longhorizon.core.world import World

TRANSPORTS = ("stdio", "http")


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
          host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve app ``app_name`` over the World in ``world_dir`` until the client or a signal ends it."""
    world = check_args(app_name, world_dir, transport)
    server = build_server(app_name, world)
    logging.getLogger("mcp").setLevel(logging.WARNING)  # per-request INFO lines drown real problems
    if transport == "stdio":
        anyio.run(server.run_stdio_async)
    else:
        anyio.run(_serve_http, server, app_name, host, port)


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
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        serve(args.app, args.world, args.transport, args.host, args.port)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
