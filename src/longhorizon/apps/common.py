"""Helpers shared by app servers: the workspace as tools may touch it (``Workspace``), capping
outputs, SQLite state."""

from __future__ import annotations

import asyncio
import contextvars
import errno
import functools
import io
import os
import secrets
import shutil
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO, NamedTuple

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.core.office_budget import OfficeBudgetError, read_office
from longhorizon.core.parse_cache import shared_parse

MAX_OUTPUT_CHARS = 20_000


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


# -- what a tool does to the World: its MCP annotations -----------------------------------------
# Every tool says which kind it is (``@srv.tool(READ)``); MCP clients read these hints to decide
# what needs a confirmation. No tool reaches outside the World (``openWorldHint`` false).

def _effect(read_only: bool, destructive: bool, idempotent: bool):
    from mcp_types import ToolAnnotations

    return ToolAnnotations(read_only_hint=read_only, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


READ = _effect(True, False, True)
"""Looks only: the World is unchanged (the tests call each one on a fork and compare hashes)."""
ADD = _effect(False, False, False)
"""Adds something new (an event, a message, a row); nothing that was there is lost or changed."""
SET = _effect(False, True, True)
"""Overwrites or removes what is there with what the call says; the same call again changes nothing more."""
ACT = _effect(False, True, False)
"""Changes or removes state in a way that repeating it changes again (moves, relative edits, sends)."""
MARK = _effect(False, False, True)
"""Only adds a mark or makes sure something exists (a folder made): nothing is lost or
overwritten, and the same call again changes nothing more."""
OPEN = _effect(False, False, True)
"""Shows something and marks it as seen (a message opened is marked read): MARK's hints, since
the World changes, but the call is a read for everything that asks "did it read or write"
(``apps/kinds.py``)."""
EFFECTS = {"read": READ, "add": ADD, "set": SET, "act": ACT, "mark": MARK, "open": OPEN}
"""Each effect by name. OPEN and MARK carry equal hints, so an effect is told by identity
(``effect_name``), never by comparing its hints."""


def effect_name(effect) -> str:
    """The name of one of the effects above (``"read"``, ..., ``"open"``), by identity."""
    for name, e in EFFECTS.items():
        if e is effect:
            return name
    raise TypeError("a tool's effect must be one of apps.common's: READ, ADD, SET, ACT, MARK or OPEN")


def keep_root_logging(make):
    """``make()``, restoring the root logger's handlers and level afterwards: ``MCPServer()``
    calls ``logging.basicConfig(level=INFO)`` with a rich console handler, after which every
    library's INFO line (each HTTP request of an OpenAI client, ...) is formatted and printed."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return make()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


CALL_LIMIT_S = 60.0
"""How long one synchronous tool call may run before the agent gets an error (``Limits.max_call_s``)."""


class ToolThread:
    """The worker thread that runs one app instance's synchronous tool bodies, one call at a time.

    A tool body that loops for long (a huge search, a slow parse) must never stall the event
    loop that every other episode of the run shares: each call runs here, and the caller waits
    at most ``limit_s``. Past that the agent gets a tool error and the episode goes on; the body
    cannot be killed, so it finishes in the background and the app's next call waits behind it
    (calls stay in order, the World never sees two writers). Work that never releases the
    interpreter (a big-integer power, one huge SQLite step) is bounded where it happens, by the
    apps' own budgets; this deadline is the net under them. One thread per app instance (per
    World), started on first use, ended by ``close`` or when the instance is collected.
    """

    def __init__(self, app: str, limit_s: float | None = CALL_LIMIT_S):
        self.app, self.limit_s = app, limit_s
        self._pool = None

    def _executor(self):
        if self._pool is None:
            import weakref
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"longhorizon-{self.app}")
            weakref.finalize(self, self._pool.shutdown, wait=False)
        return self._pool

    def wrap(self, fn):
        """``fn`` as a coroutine function that runs it on this thread under the deadline."""
        thread = self

        async def call(**kwargs):
            ctx = contextvars.copy_context()
            future = asyncio.wrap_future(thread._executor().submit(ctx.run, functools.partial(fn, **kwargs)))
            try:
                return await asyncio.wait_for(future, thread.limit_s)
            except TimeoutError:
                raise ToolError(f"{fn.__name__} did not finish within {thread.limit_s:g} s and was stopped "
                                f"waiting; ask for less at once (a narrower query, a smaller file). Calls "
                                f"to {thread.app} wait until it is done.") from None

        return call

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


class AppServer:
    """Collects one World's tool closures; serves them as a real MCPServer (``build``) to
    outside clients over stdio or HTTP, and in-process to rollouts (``session``).

    Building a tool's argument schema (a pydantic model per tool) is the costly part of
    server creation, ~2 ms a tool; schemas depend only on the code, so they are built once
    per app and each World's tools reuse them with their own closures.
    """

    _templates: dict[str, list] = {}

    def __init__(self, name: str, instructions: str = "", *, template_key: str | None = None):
        """``template_key`` names the tool set when one app offers different sets (default: the app)."""
        self.name, self.instructions = name, instructions
        self.template_key = template_key or name
        self._fns: list = []
        self._effects: list = []
        self._offered: frozenset[str] | None = None

    def only(self, names) -> "AppServer":
        """Offer only the tools named (None: all): the others are neither listed nor callable,
        in process and to outside clients alike. An unknown name is a ValueError."""
        if names is not None:
            names = frozenset(names)
            if unknown := sorted(names - {f.__name__ for f in self._fns}):
                raise ValueError(f"app {self.name} has no tool {', '.join(unknown)}")
        self._offered = names
        return self

    def tool(self, effect):
        """Register a tool; ``effect`` (READ, ADD, SET, ACT, MARK or OPEN) is its MCP annotations."""
        effect_name(effect)  # one of ours, or a TypeError

        def register(fn):
            self._fns.append(fn)
            self._effects.append(effect)
            return fn
        return register

    def effects(self) -> dict[str, str]:
        """Tool name -> the name of its effect (``"read"``, ``"add"``, ...), as registered."""
        return {f.__name__: effect_name(e) for f, e in zip(self._fns, self._effects)}

    def _template(self) -> list:
        """The app's tools (``AppTool``, see apps/tool_guard.py), built on first use: each
        schema refuses unknown arguments, every failure comes back as a tool error saying why."""
        from longhorizon.apps.tool_guard import strict, tool_class

        names = [f.__name__ for f in self._fns]
        tpl = AppServer._templates.get(self.template_key)
        if tpl is None or [t.name for t in tpl] != names:
            tpl = [tool_class().from_function(f, annotations=e) for f, e in zip(self._fns, self._effects)]
            for t in tpl:
                strict(t.parameters)
            AppServer._templates[self.template_key] = tpl
        return tpl

    def _threaded(self, limit_s: float | None) -> tuple[list, ToolThread]:
        """The tools, their synchronous bodies on one ``ToolThread`` under ``limit_s``."""
        thread = ToolThread(self.name, limit_s)
        tools = []
        for t, f in zip(self._template(), self._fns):
            if self._offered is not None and t.name not in self._offered:
                continue
            update = {"fn": f} if t.is_async else {"fn": thread.wrap(f), "is_async": True}
            tools.append(t.model_copy(update=update))
        return tools, thread

    def build(self, call_limit_s: float | None = CALL_LIMIT_S):
        """The MCPServer, for MCP clients over stdio or streamable HTTP (the SDK's full path).
        Building it leaves the root logger as it was (see ``keep_root_logging``)."""
        from mcp.server.mcpserver import MCPServer

        from longhorizon import __version__

        tools, _ = self._threaded(call_limit_s)
        return keep_root_logging(lambda: MCPServer(self.name, instructions=self.instructions, tools=tools,
                                                   version=__version__))

    def session(self, call_limit_s: float | None = CALL_LIMIT_S) -> "LocalSession":
        """An in-process MCP session on these tools, as rollouts use them (see ``LocalSession``);
        synchronous tool bodies run on its ``ToolThread`` under ``call_limit_s``."""
        tools, thread = self._threaded(call_limit_s)
        return LocalSession(tools, thread)


class LocalSession:
    """The two requests a rollout makes of an app (``tools/list``, ``tools/call``), answered in
    process exactly as ``MCPServer`` answers them, without the SDK's per-call machinery.

    Same tools, same ``AppTool`` checks, same result conversion (``Tool.run`` with
    ``convert_result``), same error results (a ToolError becomes ``isError`` content holding
    its text; an MCPError propagates, as a protocol error does to a client). Left out, because
    a rollout pays for them on every call and gains nothing: the client/server dispatch and
    result (de)serialisation, the OpenTelemetry middleware, the request-state boundary, the
    client re-validating each result against an output schema it compiles again per session.
    Sync tools run on the session's own ``ToolThread`` (one thread, calls in order, a deadline
    per call). tests/env check that an oracle episode of every family gets byte-identical
    results through this and through ``mcp.Client``.
    """

    def __init__(self, tools: list, thread: ToolThread | None = None):
        self._tools = {t.name: t for t in tools}
        self._thread = thread

    def close(self) -> None:
        """End the session's tool thread (a call still running finishes in the background)."""
        if self._thread is not None:
            self._thread.close()

    async def list_tools(self):
        """``ListToolsResult`` as ``MCPServer.list_tools`` builds it (schemas copied: each
        session may change its own without touching another's)."""
        import copy

        from mcp_types import ListToolsResult, Tool

        return ListToolsResult(tools=[
            Tool(name=t.name, title=t.title, description=t.description, input_schema=copy.deepcopy(t.parameters),
                 output_schema=copy.deepcopy(t.output_schema), annotations=t.annotations, icons=t.icons,
                 _meta=t.meta)
            for t in self._tools.values()])

    async def call_tool(self, name: str, arguments: dict | None = None):
        """``CallToolResult`` as ``MCPServer``'s tools/call handler returns it."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CallToolResult, TextContent

        tool = self._tools.get(name)
        try:
            if tool is None:
                raise ToolError(f"Unknown tool: {name}")
            return await tool.run(arguments or {}, None, convert_result=True)
        except MCPError:
            raise
        except Exception as exc:
            return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)


def server_builder(make_app):
    """An app module's ``build_server(world, **kw)``: the MCPServer of ``make_app(world, **kw)``."""

    def build_server(world, **kwargs):
        return make_app(world, **kwargs).build()

    build_server.__doc__ = f"The MCPServer of {make_app.__module__}.make_app (for MCP clients)."
    return build_server


# -- the workspace, as app tools touch it ---------------------------------------------------------

LINK_REFUSED = "is a symbolic link; file tools do not follow links"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # never blocks on a FIFO
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_WALK_DEPTH = 64
MAX_READ_BYTES = 64 * 2**20
"""What ``WorkspacePath.read_bytes`` reads of one file unless told otherwise, by apparent size
(``st_size``: a sparse file costs no disk yet reads as its full length of zeros)."""
MAX_COPY_ENTRIES = 50_000


class Missing(ToolError):
    """A workspace path (or a folder on its way) does not exist."""


class WrongKind(ToolError):
    """A workspace path exists but is not the kind the operation needs; ``kind`` says what it is."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def kind_of(mode: int) -> str:
    """What ``st_mode`` is, in the words tools use: folder, file, link, fifo, socket or device."""
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


def shown(name: str) -> str:
    """A file name as text a tool result can carry (bytes that are not UTF-8 become U+FFFD)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class Entry(NamedTuple):
    """One thing in a folder, as ``lstat`` sees it (links are not followed)."""

    path: "WorkspacePath"
    kind: str  # folder, file, link, fifo, socket, device
    size: int
    target: str | None  # a link's target text (never resolved), else None


class Workspace:
    """The agent's workspace as app tools (and nothing else on the host) may touch it.

    The agent has a real shell on this folder, so anything in it may be a symbolic link (to
    ``/``, to ``/proc/self/cwd``, to another World on this host, dangling), a FIFO, a socket,
    and may change between two system calls. Every operation therefore walks its path one
    component at a time from a descriptor of the workspace root, opening each folder with
    ``O_NOFOLLOW | O_DIRECTORY`` relative to the one before (``openat``), and acts on the last
    component relative to its folder's descriptor with calls that never follow a link
    (``O_NOFOLLOW`` opens, ``lstat``, ``unlinkat``, ``renameat``, ``mkdirat``). A path is only
    ever checked by using it, so there is no window between a check and a use.

    The policy for links the agent made: file tools never follow one. Reading or writing
    through a link is refused with an error naming it; listings show a link as a link (its
    own name and target text); walks never descend into links; copying a folder copies links
    as links; move and delete act on the link itself. Reads open only regular files and never
    block (no FIFOs, sockets or devices). Writes go to a new file in the same folder, renamed
    into place.
    """

    def __init__(self, root: Path | str):
        self.root = Path(root)

    def path(self, path: str) -> "WorkspacePath":
        """An agent-supplied path: "/" and "" are the workspace root, absolute paths are read
        from it, ".." may not climb above it. Nothing is touched on disk."""
        if not isinstance(path, str):
            raise ToolError("path must be a string")
        if "\x00" in path:
            raise ToolError("path contains a NUL byte")
        parts: list[str] = []
        for part in path.strip().split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise ToolError(f"path {path!r} is outside the workspace")
                parts.pop()
            else:
                parts.append(part)
        if len(parts) > MAX_WALK_DEPTH:
            raise ToolError(f"path is {len(parts)} folders deep; file tools go at most {MAX_WALK_DEPTH} deep")
        return WorkspacePath(self, tuple(parts))

    @property
    def top(self) -> "WorkspacePath":
        return WorkspacePath(self, ())

    # -- descriptors ---------------------------------------------------------------------------

    def _root_fd(self) -> int:
        try:  # the root itself is the host's choice (it may be reached through host links)
            return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            raise ToolError("the workspace folder is missing") from None

    def open_dir(self, parts: tuple[str, ...], create: bool = False) -> int:
        """A descriptor of the folder ``parts`` (the caller closes it), every component opened
        without following links; ``create`` makes missing folders on the way."""
        fd = self._root_fd()
        try:
            for i, name in enumerate(parts):
                nfd = self._open_child_dir(fd, name, parts[: i + 1], create)
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _open_child_dir(self, fd: int, name: str, upto: tuple[str, ...], create: bool) -> int:
        for _ in range(3):  # a concurrent shell may remove what was just made: try again
            try:
                return os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise Missing(f"{_rel(upto)!r} does not exist") from None
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                except OSError as exc:
                    raise ToolError(f"cannot create folder {_rel(upto)!r} ({exc.strerror})") from None
            except OSError as exc:
                raise self._why(fd, name, upto, exc, want="folder") from None
        raise ToolError(f"folder {_rel(upto)!r} keeps changing; try again")

    @staticmethod
    def _why(fd: int, name: str, upto: tuple[str, ...], exc: OSError, want: str) -> ToolError:
        """The readable error for a component that could not be opened as a ``want``."""
        try:
            kind = kind_of(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return Missing(f"{_rel(upto)!r} does not exist")
        except OSError:
            kind = None
        where = _rel(upto)
        if kind == "link":
            return WrongKind(f"{where!r} {LINK_REFUSED}", "link")
        if kind is not None and kind != want:
            article = "an" if want[0] in "aeiou" else "a"
            noun = {"file": "a file", "folder": "a folder"}.get(kind, f"a {kind}")
            return WrongKind(f"{where!r} is {noun}, not {article} {want}", kind)
        return ToolError(f"{where!r} cannot be opened ({exc.strerror or type(exc).__name__})")

    # -- walking -------------------------------------------------------------------------------

    def scan(self, dir_fd: int, parts: tuple[str, ...]) -> list[Entry]:
        """The entries of an open folder, sorted by name, links and specials included as such."""
        out = []
        with os.scandir(dir_fd) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:  # gone meanwhile
                    continue
                kind = kind_of(st.st_mode)
                target = None
                if kind == "link":
                    try:
                        target = shown(os.readlink(e.name, dir_fd=dir_fd))
                    except OSError:
                        target = "?"
                out.append(Entry(WorkspacePath(self, parts + (e.name,)), kind, st.st_size, target))
        out.sort(key=lambda e: e.path.parts[-1])
        return out

    def walk(self, top: "WorkspacePath", recursive: bool = True) -> Iterator[Entry]:
        """Every entry under folder ``top``, parents before children, in name order; never
        descends into a link (nor deeper than ``MAX_WALK_DEPTH`` folders)."""
        fd = self.open_dir(top.parts)
        try:
            yield from self._walk(fd, top.parts, recursive, 0)
        finally:
            os.close(fd)

    def _walk(self, fd: int, parts: tuple[str, ...], recursive: bool, depth: int) -> Iterator[Entry]:
        for e in self.scan(fd, parts):
            yield e
            if recursive and e.kind == "folder" and depth < MAX_WALK_DEPTH:
                name = e.path.parts[-1]
                try:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:  # swapped for a link or removed meanwhile: not entered
                    continue
                try:
                    yield from self._walk(sub, e.path.parts, recursive, depth + 1)
                finally:
                    os.close(sub)


def _rel(parts: tuple[str, ...]) -> str:
    return "/".join(shown(p) for p in parts) or "."


class WorkspacePath:
    """A path in a ``Workspace``; every method is one confined operation (see ``Workspace``).
    Errors are ``ToolError``s an agent can act on (``Missing`` when something does not exist)."""

    __slots__ = ("ws", "parts")

    def __init__(self, ws: Workspace, parts: tuple[str, ...]):
        self.ws, self.parts = ws, parts

    def __repr__(self) -> str:
        return f"WorkspacePath({self.rel!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, WorkspacePath) and other.ws.root == self.ws.root and other.parts == self.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __truediv__(self, name: str) -> "WorkspacePath":
        """The entry ``name`` (one path component) inside this folder."""
        if not isinstance(name, str) or not name or "/" in name or "\x00" in name or name in (".", ".."):
            raise ToolError(f"{name!r} is not a file name")
        return WorkspacePath(self.ws, self.parts + (name,))

    @property
    def rel(self) -> str:
        """How the agent sees it: relative to the workspace root ("." for the root)."""
        return _rel(self.parts)

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def is_root(self) -> bool:
        return not self.parts

    @property
    def parent(self) -> "WorkspacePath":
        return WorkspacePath(self.ws, self.parts[:-1])

    def contains(self, other: "WorkspacePath") -> bool:
        """Whether ``other`` is this path or lies under it (exact: links are never followed)."""
        return other.parts[: len(self.parts)] == self.parts

    def _parent_fd(self, create: bool = False) -> int:
        return self.ws.open_dir(self.parts[:-1], create=create)

    # -- looking -------------------------------------------------------------------------------

    def lstat(self) -> os.stat_result | None:
        """Its own ``lstat`` (a link is not followed), or None when it (or a folder on the way)
        does not exist. A link or file on the way is an error."""
        if self.is_root:
            fd = self.ws._root_fd()
            try:
                return os.fstat(fd)
            finally:
                os.close(fd)
        try:
            fd = self._parent_fd()
        except Missing:
            return None
        except WrongKind as exc:
            if exc.kind == "link":
                raise
            return None  # "notes.md/x": there is no such thing
        try:
            return os.stat(self.parts[-1], dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ToolError(f"{self.rel!r} cannot be examined ({exc.strerror})") from None
        finally:
            os.close(fd)

    def kind(self) -> str | None:
        """folder, file, link, fifo, socket, device, or None when it does not exist."""
        st = self.lstat()
        return None if st is None else kind_of(st.st_mode)

    def exists(self) -> bool:
        return self.lstat() is not None

    def is_dir(self) -> bool:
        return self.kind() == "folder"

    def is_file(self) -> bool:
        return self.kind() == "file"

    def readlink(self) -> str:
        fd = self._parent_fd()
        try:
            return shown(os.readlink(self.parts[-1], dir_fd=fd))
        except OSError as exc:
            raise self.ws._why(fd, self.parts[-1], self.parts, exc, want="link") from None
        finally:
            os.close(fd)

    def entries(self) -> list[Entry]:
        """What the folder holds, links and specials as themselves."""
        fd = self.ws.open_dir(self.parts)
        try:
            return self.ws.scan(fd, self.parts)
        finally:
            os.close(fd)

    def walk(self, recursive: bool = True) -> Iterator[Entry]:
        return self.ws.walk(self, recursive)

    # -- reading -------------------------------------------------------------------------------

    def open_read(self) -> BinaryIO:
        """A binary file object on it, only if it is a regular file (links are refused; a FIFO,
        socket or device is never opened for real, so this never blocks)."""
        if self.is_root:
            raise WrongKind("'.' is a folder (the workspace root), not a file", "folder")
        fd = self._parent_fd()
        try:
            name = self.parts[-1]
            try:
                f = os.open(name, _READ_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise self.ws._why(fd, name, self.parts, exc, want="file") from None
        finally:
            os.close(fd)
        try:
            mode = os.fstat(f).st_mode
            if not stat.S_ISREG(mode):
                kind = kind_of(mode)
                if kind == "folder":
                    raise WrongKind(f"{self.rel!r} is a folder, not a file", kind)
                raise WrongKind(f"{self.rel!r} is not a regular file (a {kind}); it cannot be read", kind)
            os.set_blocking(f, True)
            return os.fdopen(f, "rb")
        except BaseException:
            os.close(f)
            raise

    def read_bytes(self, limit: int | None = MAX_READ_BYTES) -> bytes:
        """Its bytes; a file larger than ``limit`` is an error, by its apparent size (checked on
        the open file, and never more than ``limit`` bytes are read even if it grows meanwhile)."""
        with self.open_read() as f:
            if limit is None:
                return f.read()
            data = f.read(limit + 1) if os.fstat(f.fileno()).st_size <= limit else None
            if data is None or len(data) > limit:  # (it may have grown since the fstat)
                raise ToolError(f"{self.rel!r} is larger than {limit:,} bytes, the most a tool reads of one file")
            return data

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    # -- writing -------------------------------------------------------------------------------

    def write_bytes(self, data: bytes, *, new: bool = False, parents: bool = True) -> None:
        """Create or replace it with ``data`` (``new``: refuse if anything is there). Missing
        folders on the way are made (``parents``). A replacement is written to a new file in
        the same folder and renamed over the old one, keeping its permission bits; a link,
        folder, FIFO or other non-regular thing in the way is refused, not written through."""
        if self.is_root:
            raise WrongKind("'.' is the workspace root folder, not a file", "folder")
        fd = self._parent_fd(create=parents)
        name = self.parts[-1]
        try:
            if new:
                self._write_new(fd, name, data)
                return
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise self._not_writable(kind_of(st.st_mode))
            tmp = f".{secrets.token_hex(6)}.tmp"
            self._write_new(fd, tmp, data, mode=(stat.S_IMODE(st.st_mode) if st else None))
            try:
                os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except OSError as exc:
                _unlink_quietly(tmp, fd)
                if isinstance(exc, (IsADirectoryError, NotADirectoryError)):
                    raise self._not_writable("folder") from None
                raise ToolError(f"cannot write {self.rel!r} ({exc.strerror})") from None
        finally:
            os.close(fd)

    def _not_writable(self, kind: str) -> ToolError:
        if kind == "link":
            return WrongKind(f"{self.rel!r} {LINK_REFUSED}; delete the link first to put a file there", kind)
        if kind == "folder":
            return WrongKind(f"{self.rel!r} is a folder", kind)
        return WrongKind(f"{self.rel!r} is a {kind}, not a regular file; delete it first", kind)

    def _write_new(self, fd: int, name: str, data: bytes, mode: int | None = None) -> None:
        try:
            out = os.open(name, _NEW_FLAGS, 0o666, dir_fd=fd)
        except FileExistsError:
            try:
                kind = kind_of(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
            except OSError:
                kind = "file"
            if kind == "link":
                raise self._not_writable(kind) from None
            raise WrongKind(f"{self.rel!r} already exists", kind) from None
        except OSError as exc:
            raise ToolError(f"cannot write {self.rel!r} ({exc.strerror})") from None
        try:
            if mode is not None:
                os.fchmod(out, mode)
            with os.fdopen(out, "wb", closefd=False) as f:
                f.write(data)
        except BaseException as exc:
            os.close(out)
            _unlink_quietly(name, fd)
            if isinstance(exc, OSError):
                raise ToolError(f"cannot write {self.rel!r} ({exc.strerror})") from None
            raise
        os.close(out)

    def mkdir(self) -> None:
        """Make it a folder, with any missing parents; fine if it already is one."""
        os.close(self.ws.open_dir(self.parts, create=True))

    def remove(self, recursive: bool = False) -> str:
        """Delete it: a file, link (never its target) or special directly; a folder only if
        empty or ``recursive``. Returns what it was."""
        if self.is_root:
            raise ToolError("cannot delete the workspace root")
        fd = self._parent_fd()
        name = self.parts[-1]
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            kind = kind_of(st.st_mode)
            if kind != "folder":
                os.unlink(name, dir_fd=fd)
                return kind
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                if not recursive:
                    raise WrongKind(f"{self.rel!r} is a non-empty folder; pass recursive=true to delete it",
                                    kind) from None
                shutil.rmtree(name, dir_fd=fd)  # the descriptor-based rmtree: never follows links
            return kind
        except FileNotFoundError:
            raise Missing(f"{self.rel!r} does not exist") from None
        except ToolError:
            raise
        except OSError as exc:
            raise ToolError(f"cannot delete {self.rel!r} ({exc.strerror})") from None
        finally:
            os.close(fd)

    def move_to(self, dst: "WorkspacePath") -> None:
        """Rename it (a link moves as the link) to ``dst``, which must not exist; missing
        folders on the way to ``dst`` are made."""
        if self.is_root or dst.is_root:
            raise ToolError("cannot move the workspace root")
        if self.contains(dst):
            raise ToolError("cannot put a folder inside itself")
        sfd = self._parent_fd()
        try:
            if dst.exists():
                raise ToolError(f"{dst.rel!r} already exists; delete it first or pick another name")
            dfd = dst._parent_fd(create=True)
            try:
                os.rename(self.parts[-1], dst.parts[-1], src_dir_fd=sfd, dst_dir_fd=dfd)
            except FileNotFoundError:
                raise Missing(f"{self.rel!r} does not exist") from None
            except OSError as exc:
                raise ToolError(f"cannot move {self.rel!r} to {dst.rel!r} ({exc.strerror})") from None
            finally:
                os.close(dfd)
        finally:
            os.close(sfd)

    def copy_to(self, dst: "WorkspacePath") -> dict[str, int]:
        """Copy a regular file, or a folder tree, to ``dst`` (which must not exist). In a tree,
        links are copied as links (their target text, never their target) and FIFOs, sockets
        and devices are skipped. Returns counts: files, folders, links, skipped."""
        if self.is_root:
            raise ToolError("cannot copy the workspace root")
        if self.contains(dst):
            raise ToolError("cannot put a folder inside itself")
        kind = self.kind()
        if kind is None:
            raise Missing(f"{self.rel!r} does not exist")
        if dst.exists():
            raise ToolError(f"{dst.rel!r} already exists; delete it first or pick another name")
        counts = {"files": 0, "folders": 0, "links": 0, "skipped": 0}
        if kind != "folder":
            with self.open_read() as src:  # a link or special is refused here
                dfd = dst._parent_fd(create=True)
                try:
                    _copy_file(src.fileno(), dfd, dst.parts[-1], dst)
                finally:
                    os.close(dfd)
            counts["files"] = 1
            return counts
        sfd = self.ws.open_dir(self.parts)
        try:
            dpar = dst._parent_fd(create=True)
            try:
                try:
                    os.mkdir(dst.parts[-1], 0o777, dir_fd=dpar)
                except FileExistsError:
                    raise ToolError(f"{dst.rel!r} already exists; delete it first or pick another name") from None
                dfd = self.ws._open_child_dir(dpar, dst.parts[-1], dst.parts, create=False)
            finally:
                os.close(dpar)
            try:
                counts["folders"] = 1
                _copy_tree(self.ws, sfd, self.parts, dfd, dst, counts, 0)
            finally:
                os.close(dfd)
        finally:
            os.close(sfd)
        return counts


def _unlink_quietly(name: str, fd: int) -> None:
    try:
        os.unlink(name, dir_fd=fd)
    except OSError:
        pass


def _copy_file(src_fd: int, dir_fd: int, name: str, shown_as: WorkspacePath) -> None:
    st = os.fstat(src_fd)
    try:
        out = os.open(name, _NEW_FLAGS, stat.S_IMODE(st.st_mode) or 0o644, dir_fd=dir_fd)
    except FileExistsError:
        raise ToolError(f"{shown_as.rel!r} already exists; delete it first or pick another name") from None
    try:
        os.lseek(src_fd, 0, os.SEEK_SET)
        while chunk := os.read(src_fd, 1 << 20):
            os.write(out, chunk)
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(out)


def _copy_tree(ws: Workspace, sfd: int, sparts: tuple[str, ...], dfd: int, dst: WorkspacePath,
               counts: dict[str, int], depth: int) -> None:
    for e in ws.scan(sfd, sparts):
        if sum(counts.values()) >= MAX_COPY_ENTRIES:
            raise ToolError(f"the folder holds more than {MAX_COPY_ENTRIES} entries; copy it in parts")
        name = e.path.parts[-1]
        here = WorkspacePath(ws, dst.parts + (name,))
        if e.kind == "link":
            os.symlink(os.readlink(name, dir_fd=sfd), name, dir_fd=dfd)
            counts["links"] += 1
        elif e.kind == "file":
            try:
                f = os.open(name, _READ_FLAGS, dir_fd=sfd)
            except OSError:  # swapped for a link or special meanwhile: skipped
                counts["skipped"] += 1
                continue
            try:
                if stat.S_ISREG(os.fstat(f).st_mode):
                    os.set_blocking(f, True)
                    _copy_file(f, dfd, name, here)
                    counts["files"] += 1
                else:
                    counts["skipped"] += 1
            finally:
                os.close(f)
        elif e.kind == "folder" and depth < MAX_WALK_DEPTH:
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=sfd)
            except OSError:
                counts["skipped"] += 1
                continue
            try:
                os.mkdir(name, 0o777, dir_fd=dfd)
                dsub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
                try:
                    counts["folders"] += 1
                    _copy_tree(ws, sub, e.path.parts, dsub, here, counts, depth + 1)
                finally:
                    os.close(dsub)
            finally:
                os.close(sub)
        else:
            counts["skipped"] += 1


class OfficeFiles:
    """One kind of office file (.docx, .pptx, .xlsx) in the workspace, as an app's tools open it:
    confined paths (``Workspace``: links are never followed, only regular files are opened, and
    the loader gets a file object on that descriptor, never a path), the right extension, errors
    the agent can act on, and reads that reuse an unchanged file's last load (same inode, mtime,
    size).

    Edits load a fresh copy, unless the app allows ``edit_cached``: then an edit takes this
    session's cached object of an unchanged file *out* of the cache (so a failed edit never
    leaks into it), and a save may put the edited object back (``save(..., keep=obj)``) under
    the stamp of the file it just wrote. An app keeps an object only when reloading what it
    wrote would give the same object (the same values, the same bytes on the next save): a parse
    of the disk bytes and the kept object are then interchangeable, and tool results and Worlds
    stay what a fresh load per call gives. Graders never see these objects: they parse what is
    on disk.

    ``share_reads``: reads of the same bytes share one parse across sessions (the 8 episodes of
    a GSPO group fork the same files), keyed by the bytes' digest. For apps whose read tools
    never change what they read; a shared object is never handed to an edit.

    A file is read only up to its office budget (core/office_budget.py), and the loader
    (``load_workbook``, ``load_document``, ``load_presentation``) checks the rest before parsing;
    a file over budget is a tool error saying which limit it passed."""

    CACHE_SIZE = 16
    ENABLED = True
    """Benchmarks and tests switch this off to compare with a fresh load on every edit
    (``core.parse_cache.SHARED`` switches off the parses shared between sessions)."""

    def __init__(self, workspace: Path, suffix: str, noun: str, load, *, kind: str, missing_hint: str,
                 edit_cached: bool = False, share_reads: bool = False):
        self.workspace, self.suffix, self.noun, self.load = Workspace(workspace), suffix, noun, load
        self.kind = kind  # e.g. "a .docx document": what a file that fails to load is not
        self.missing_hint = missing_hint
        self.edit_cached, self.share_reads = edit_cached, share_reads
        self._cache: dict[tuple[str, ...], tuple[tuple[int, int, int], object, bool]] = {}

    def path(self, path: str, wrong_type: str) -> WorkspacePath:
        p = self.workspace.path(path)
        if p.suffix.lower() != self.suffix:
            raise ToolError(f"{path!r} {wrong_type}")
        return p

    @staticmethod
    def _stamp(f) -> tuple[int, int, int]:
        st = os.fstat(f.fileno())
        return st.st_ino, st.st_mtime_ns, st.st_size

    def open(self, p: WorkspacePath, path: str, for_read: bool = False):
        try:
            f = p.open_read()
        except Missing:
            raise ToolError(f"{self.noun} {path!r} does not exist{self.missing_hint}") from None
        except WrongKind as exc:
            if exc.kind == "folder":
                raise ToolError(f"{path!r} is a folder, not a {self.noun}") from None
            raise
        with f:
            stamp = self._stamp(f)
            hit = self._cache.get(p.parts)
            if hit is not None and hit[0] == stamp:
                if for_read:
                    return hit[1]
                if self.edit_cached and OfficeFiles.ENABLED and not hit[2]:
                    del self._cache[p.parts]  # the edit owns it now: only a successful save puts it back
                    return hit[1]
            data = self._read(f, path)
        if for_read and self.share_reads:
            obj = self._parse(data, path, shared=True)
            self._put(p, stamp, obj, shared=True)
            return obj
        obj = self._parse(data, path)
        if for_read:
            self._put(p, stamp, obj)
        return obj

    def _read(self, f, path: str) -> bytes:
        try:
            return read_office(f, self.suffix, name=path)
        except OfficeBudgetError as exc:
            raise ToolError(exc.named(path)) from None

    def _parse(self, data: bytes, path: str, shared: bool = False):
        """``load`` of the file's bytes; ``shared``: the parse every session shares
        (core/parse_cache.shared_parse)."""
        try:
            return shared_parse(self.suffix, data, self.load) if shared else self.load(io.BytesIO(data))
        except OfficeBudgetError as exc:
            raise ToolError(exc.named(path)) from None
        except Exception as exc:  # corrupt, or not really that format: the agent should know, not crash
            raise ToolError(f"{path!r} could not be opened as {self.kind} ({type(exc).__name__})") from None

    def _put(self, p: WorkspacePath, stamp: tuple[int, int, int], obj, shared: bool = False) -> None:
        self._cache.pop(p.parts, None)
        if len(self._cache) >= self.CACHE_SIZE:
            self._cache.pop(next(iter(self._cache)))
        self._cache[p.parts] = (stamp, obj, shared)

    def save(self, p: WorkspacePath, data: bytes, *, new: bool = False, keep=None) -> None:
        """Write a file's bytes through the confined walk (``new``: refuse an existing path).
        ``keep``: the object these bytes were saved from, which reloading them would give back
        exactly (see the class docstring); it is cached as this file's parse."""
        if new and p.exists():
            raise ToolError(f"{p.rel!r} already exists; edit it, or choose another path")
        self._cache.pop(p.parts, None)
        p.write_bytes(data, new=new)
        if keep is not None and self.edit_cached and OfficeFiles.ENABLED:
            try:
                with p.open_read() as f:
                    self._put(p, self._stamp(f), keep)
            except ToolError:  # gone or replaced already: nothing to keep
                pass
