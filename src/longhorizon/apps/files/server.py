"""The `files` app: the agent's workspace folder, every path confined to it.

Paths go through ``apps.common.Workspace``: no tool follows a symbolic link (reading or
writing through one is an error naming it), listings show links as links, and only regular
files are ever opened (a FIFO, socket or device is listed, never read).

What a call reads is budgeted by a file's apparent size (``st_size``: a sparse file of 250 MB
takes almost no disk but reads as 250 MB of zeros): ``read_file`` reads a large file only up to
the piece asked for, never the whole of it, and ``search`` skips files over a size and stops
after a number of bytes scanned, saying what it left out.
"""

from __future__ import annotations

import codecs
import fnmatch
import io
import json
import os

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import (
    ADD, LINK_REFUSED, MARK, READ, SET, AppServer, Entry, Missing, Workspace, WrongKind, cap, kind_of,
    server_builder,
)

MAX_READ_CHARS = 20_000
MAX_LIST = 500
MAX_HITS = 200
WHOLE_FILE_BYTES = 8 * 2**20
"""read_file decodes a file up to this size whole (its note counts the characters left, and a
byte that is not UTF-8 anywhere in it is reported); a larger one is read only up to the piece."""
MAX_SCAN_BYTES = 64 * 2**20
"""How far into a large file read_file goes to find a character offset (it counts from the start)."""
READ_CHUNK = 2**20
MAX_SEARCH_FILE_BYTES = 8 * 2**20
"""search skips a file larger than this (and says so)."""
MAX_SEARCH_BYTES = 64 * 2**20
"""search stops after reading this many bytes in one call (and says which files it left out)."""


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _read_piece(f, size: int, offset: int, limit: int, path: str) -> str:
    """Characters [offset, offset + limit) of an open file of ``size`` bytes, with a note when
    more follows. A small file is decoded whole; a large one only up to the end of the piece,
    a chunk at a time, and never further than ``MAX_SCAN_BYTES`` into it."""
    if size <= WHOLE_FILE_BYTES:
        data = f.read(WHOLE_FILE_BYTES + 1)
        if len(data) <= WHOLE_FILE_BYTES:  # (a file that grew meanwhile is read as a large one)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise ToolError(f"{path!r} is not a UTF-8 text file (use the app made for its format)") from None
            piece = text[offset: offset + limit]
            if offset + limit < len(text):
                piece += (f"\n... [{len(text) - offset - limit} more characters; "
                          f"read again with offset={offset + limit}]")
            return piece
        f.seek(0)
    end = offset + limit
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []
    seen = read = 0  # characters decoded, bytes read
    at_end = False
    while seen < end and not at_end:
        if read >= MAX_SCAN_BYTES:
            if seen <= offset:
                raise ToolError(
                    f"{path!r} is {_mib(size)}; read_file counts characters from the start of a file and "
                    f"goes at most {_mib(MAX_SCAN_BYTES)} into it, which holds fewer than {offset} characters; "
                    "a shell, where there is one, reads any part (tail -c, grep -n, sed -n).")
            break
        data = f.read(READ_CHUNK)
        read += len(data)
        at_end = not data
        try:
            text = decoder.decode(data, final=at_end)
        except UnicodeDecodeError:
            raise ToolError(f"{path!r} is not a UTF-8 text file (use the app made for its format)") from None
        if seen + len(text) > offset:
            parts.append(text[max(offset - seen, 0): end - seen])
        seen += len(text)
    piece = "".join(parts)
    if seen > offset + len(piece) or not at_end and f.read(1):
        piece += (f"\n... [more follows: the file is {_mib(size)}; read again with offset={offset + len(piece)}]")
    return piece


def _line(e: Entry) -> str:
    """One listing line: folders end with '/', files show their size, links their target."""
    if e.kind == "folder":
        return f"{e.path.rel}/"
    if e.kind == "file":
        return f"{e.path.rel}  ({e.size} bytes)"
    if e.kind == "link":
        return f"{e.path.rel} -> {e.target}  (link)"
    return f"{e.path.rel}  ({e.kind})"


def _left_out(too_big: list[tuple[str, int]], not_reached: list[str]) -> str:
    """search's note on the files it did not read (empty when it read them all)."""
    notes = []
    if too_big:
        shown = ", ".join(f"{rel} ({_mib(size)})" for rel, size in too_big[:5])
        more = f" and {len(too_big) - 5} more" if len(too_big) > 5 else ""
        notes.append(f"{len(too_big)} file(s) over {_mib(MAX_SEARCH_FILE_BYTES)} not searched: {shown}{more} "
                     "(read them in pieces with read_file, or grep them in a shell where there is one)")
    if not_reached:
        shown = ", ".join(not_reached[:5])
        more = f" and {len(not_reached) - 5} more" if len(not_reached) > 5 else ""
        notes.append(f"stopped after reading {_mib(MAX_SEARCH_BYTES)}; {len(not_reached)} file(s) not searched: "
                     f"{shown}{more} (search a subfolder, or narrow glob)")
    return "".join(f"\n[{n}]" for n in notes)


def make_app(world):
    ws = Workspace(world.workspace)
    srv = AppServer(
        "files",
        instructions="Files in the shared workspace. Paths are relative to the workspace root. "
                     "Symbolic links are listed as links and never followed.",
    )

    def existing(path: str):
        p = ws.path(path)
        if not p.exists():
            raise ToolError(f"{path!r} does not exist; use list_dir to see what is there")
        return p

    @srv.tool(READ)
    def list_dir(path: str = ".", recursive: bool = False) -> str:
        """List a folder: one entry per line, folders end with '/', files show their size in bytes,
        symbolic links show 'name -> target  (link)' (links are never followed).
        recursive=true lists the whole subtree (paths relative to the workspace)."""
        root = existing(path)
        kind = root.kind()
        if kind == "link":
            raise ToolError(f"{root.rel!r} {LINK_REFUSED}; it points to {root.readlink()!r}")
        if kind != "folder":
            raise ToolError(f"{path!r} is a {kind}, not a folder")
        items: list[Entry] = []
        more = 0
        for e in root.walk(recursive):
            if len(items) < MAX_LIST:
                items.append(e)
            else:
                more += 1
        lines = [_line(e) for e in items]
        if more:
            lines.append(f"... {more} more entries; list a subfolder")
        return "\n".join(lines) if lines else f"{root.rel}/ is empty"

    @srv.tool(READ)
    def read_file(path: str, offset: int = 0, limit: int = MAX_READ_CHARS) -> str:
        """Read a text file. offset/limit are in characters; long files are returned in pieces,
        with a note saying which offset to read next. Large files are read only up to the
        piece asked for (at most 64 MiB into the file)."""
        p = existing(path)
        if offset < 0 or limit < 1:
            raise ToolError("offset must be >= 0 and limit >= 1")
        try:
            f = p.open_read()
        except WrongKind as exc:
            if exc.kind == "folder":
                raise ToolError(f"{path!r} is a folder; use list_dir") from None
            raise
        with f:
            return _read_piece(f, os.fstat(f.fileno()).st_size, offset, min(limit, MAX_READ_CHARS), path)

    @srv.tool(SET)
    def write_file(path: str, content: str, overwrite: bool = True) -> str:
        """Create or replace a text file (parent folders are created). overwrite=false refuses to
        replace an existing file."""
        p = ws.path(path)
        kind = p.kind()
        if kind == "folder":
            raise ToolError(f"{path!r} is a folder")
        if kind is not None and not overwrite:
            raise ToolError(f"{path!r} exists; pass overwrite=true to replace it")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("content cannot be stored as UTF-8 text (it holds lone surrogates)") from None
        p.write_bytes(data, new=not overwrite)
        return f"wrote {p.rel} ({len(data)} bytes)"

    @srv.tool(MARK)  # succeeds when the folder is there already: the same call again changes nothing
    def make_dir(path: str) -> str:
        """Create a folder (and its parents). Succeeds if it already exists."""
        p = ws.path(path)
        try:
            p.mkdir()
        except WrongKind as exc:
            if exc.kind == "file" and p.kind() == "file":
                raise ToolError(f"{path!r} is a file") from None
            raise
        return f"folder {p.rel}/ ready"

    def _target(src: str, dst: str):
        s, d = existing(src), ws.path(dst)
        if s.is_root:
            raise ToolError("cannot move or copy the workspace root")
        if d.kind() == "folder":  # a link to a folder is not one: it is never followed
            d = d / s.name
        if d.exists():
            raise ToolError(f"{d.rel!r} already exists; delete it first or pick another name")
        return s, d

    @srv.tool(SET)
    def move(src: str, dst: str) -> str:
        """Move or rename a file or folder (a symbolic link moves as the link itself). If dst is
        an existing folder, src goes inside it. Never overwrites: fails if the target exists."""
        s, d = _target(src, dst)
        s.move_to(d)
        return f"moved {src} -> {d.rel}"

    @srv.tool(ADD)
    def copy(src: str, dst: str) -> str:
        """Copy a file or folder. If dst is an existing folder, the copy goes inside it.
        Never overwrites: fails if the target exists. Inside a copied folder, symbolic links
        are copied as links and pipes, sockets and devices are skipped."""
        s, d = _target(src, dst)
        counts = s.copy_to(d)
        notes = []
        if counts["links"]:
            notes.append(f"{counts['links']} symbolic link(s) copied as links")
        if counts["skipped"]:
            notes.append(f"{counts['skipped']} pipe(s), socket(s) or device(s) skipped")
        return f"copied {src} -> {d.rel}" + (f" ({'; '.join(notes)})" if notes else "")

    @srv.tool(SET)
    def delete(path: str, recursive: bool = False) -> str:
        """Delete a file, or a folder (a non-empty folder needs recursive=true). A symbolic link
        is deleted itself, never what it points to."""
        p = existing(path)
        if p.is_root:
            raise ToolError("cannot delete the workspace root")
        kind = p.remove(recursive)
        return f"deleted {p.rel}" + (" (the link only)" if kind == "link" else "")

    @srv.tool(READ)
    def search(query: str, path: str = ".", glob: str = "*", case_sensitive: bool = False) -> str:
        """Find text in files under path whose names match glob (e.g. '*.txt'). Returns JSON
        hits [{path, line, text}], at most 200; file names containing the query count too.
        Symbolic links are neither followed nor searched. Files over 8 MiB are not searched,
        and one call reads at most 64 MiB; a note after the hits names what was left out."""
        root = existing(path)
        if not query:
            raise ToolError("query must not be empty")
        needle = query if case_sensitive else query.lower()
        hits: list[dict] = []
        kind = root.kind()
        if kind == "folder":
            files = [(e.path, e.size) for e in root.walk() if e.kind == "file"]
        elif kind == "file":
            files = [(root, root.lstat().st_size)]
        elif kind == "link":
            raise ToolError(f"{root.rel!r} {LINK_REFUSED}")
        else:
            raise ToolError(f"{root.rel!r} is a {kind}, not a regular file; it cannot be searched")
        too_big: list[tuple[str, int]] = []
        not_reached: list[str] = []
        scanned = 0
        for f, size in files:
            if not fnmatch.fnmatch(f.name, glob):
                continue
            name = f.name if case_sensitive else f.name.lower()
            if needle in name:
                hits.append({"path": f.rel, "line": 0, "text": "(file name matches)"})
            if not_reached:  # the byte budget is spent: the rest are only named
                not_reached.append(f.rel)
                continue
            try:
                with f.open_read() as raw:
                    size = os.fstat(raw.fileno()).st_size
                    if size > MAX_SEARCH_FILE_BYTES:
                        too_big.append((f.rel, size))
                        continue
                    if scanned + size > MAX_SEARCH_BYTES:
                        not_reached.append(f.rel)
                        continue
                    data = raw.read(MAX_SEARCH_FILE_BYTES)
                scanned += len(data)
                with io.TextIOWrapper(io.BytesIO(data), encoding="utf-8") as fh:
                    for i, line in enumerate(fh, 1):
                        if needle in (line if case_sensitive else line.lower()):
                            hits.append({"path": f.rel, "line": i, "text": line.rstrip("\n")[:300]})
                            if len(hits) >= MAX_HITS:
                                break
            except (UnicodeDecodeError, OSError, ToolError):  # not text, or swapped for a link meanwhile
                continue
            if len(hits) >= MAX_HITS:
                break
        return cap(json.dumps(hits, ensure_ascii=False)) + _left_out(too_big, not_reached)

    @srv.tool(READ)
    def file_info(path: str) -> str:
        """Kind and size of a file or folder (and a folder's entry count), as JSON. kind is
        "file", "folder", "link" (with its "target", not followed), "fifo", "socket" or "device"."""
        p = existing(path)
        st = p.lstat()
        if st is None:
            raise Missing(f"{path!r} does not exist; use list_dir to see what is there")
        kind = kind_of(st.st_mode)
        out = {"path": p.rel, "kind": kind, "size": st.st_size,
               "entries": len(p.entries()) if kind == "folder" else None}
        if kind == "link":
            out["target"] = p.readlink()
        return json.dumps(out, ensure_ascii=False)

    return srv


build_server = server_builder(make_app)
