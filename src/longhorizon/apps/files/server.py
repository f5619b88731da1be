"""The `files` app: the agent's workspace folder, every path confined to it."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import AppServer, cap, confine, rel

MAX_READ_CHARS = 20_000
MAX_LIST = 500
MAX_HITS = 200


def build_server(world):
    ws = world.workspace
    srv = AppServer(
        "files",
        instructions="Files in the shared workspace. Paths are relative to the workspace root.",
    )

    def existing(path: str):
        p = confine(ws, path)
        if not p.exists():
            raise ToolError(f"{path!r} does not exist; use list_dir to see what is there")
        return p

    @srv.tool()
    def list_dir(path: str = ".", recursive: bool = False) -> str:
        """List a folder: one entry per line, folders end with '/', files show their size in bytes.
        recursive=true lists the whole subtree (paths relative to the workspace)."""
        root = existing(path)
        if not root.is_dir():
            raise ToolError(f"{path!r} is a file, not a folder")
        items = sorted(root.rglob("*")) if recursive else sorted(root.iterdir())
        lines = [
            f"{rel(ws, p)}/" if p.is_dir() else f"{rel(ws, p)}  ({p.stat().st_size} bytes)"
            for p in items[:MAX_LIST]
        ]
        if len(items) > MAX_LIST:
            lines.append(f"... {len(items) - MAX_LIST} more entries; list a subfolder")
        return "\n".join(lines) if lines else f"{rel(ws, root)}/ is empty"

    @srv.tool()
    def read_file(path: str, offset: int = 0, limit: int = MAX_READ_CHARS) -> str:
        """Read a text file. offset/limit are in characters; long files are returned in pieces,
        with a note saying which offset to read next."""
        p = existing(path)
        if p.is_dir():
            raise ToolError(f"{path!r} is a folder; use list_dir")
        if not p.is_file():
            raise ToolError(f"{path!r} is not a regular file (a pipe or device); it cannot be read")
        if offset < 0 or limit < 1:
            raise ToolError("offset must be >= 0 and limit >= 1")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{path!r} is not a UTF-8 text file (use the app made for its format)") from None
        limit = min(limit, MAX_READ_CHARS)
        piece = text[offset : offset + limit]
        if offset + limit < len(text):
            piece += f"\n... [{len(text) - offset - limit} more characters; read again with offset={offset + limit}]"
        return piece

    @srv.tool()
    def write_file(path: str, content: str, overwrite: bool = True) -> str:
        """Create or replace a text file (parent folders are created). overwrite=false refuses to
        replace an existing file."""
        p = confine(ws, path)
        if p.is_dir():
            raise ToolError(f"{path!r} is a folder")
        if p.exists() and not overwrite:
            raise ToolError(f"{path!r} exists; pass overwrite=true to replace it")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")
        return f"wrote {rel(ws, p)} ({len(content.encode())} bytes)"

    @srv.tool()
    def make_dir(path: str) -> str:
        """Create a folder (and its parents). Succeeds if it already exists."""
        p = confine(ws, path)
        if p.exists() and not p.is_dir():
            raise ToolError(f"{path!r} is a file")
        p.mkdir(parents=True, exist_ok=True)
        return f"folder {rel(ws, p)}/ ready"

    def _transfer(src: str, dst: str, op) -> str:
        s, d = existing(src), confine(ws, dst)
        if s == ws.resolve():
            raise ToolError("cannot move or copy the workspace root")
        if d.is_dir():
            d = d / s.name
        if d.exists():
            raise ToolError(f"{rel(ws, d)!r} already exists; delete it first or pick another name")
        if s.is_dir() and (d == s or s in d.parents):
            raise ToolError("cannot put a folder inside itself")
        d.parent.mkdir(parents=True, exist_ok=True)
        op(s, d)
        return rel(ws, d)

    @srv.tool()
    def move(src: str, dst: str) -> str:
        """Move or rename a file or folder. If dst is an existing folder, src goes inside it.
        Never overwrites: fails if the target exists."""
        return f"moved {src} -> {_transfer(src, dst, lambda s, d: shutil.move(s, d))}"

    @srv.tool()
    def copy(src: str, dst: str) -> str:
        """Copy a file or folder. If dst is an existing folder, the copy goes inside it.
        Never overwrites: fails if the target exists."""
        def op(s, d):
            shutil.copytree(s, d) if s.is_dir() else shutil.copy2(s, d)
        return f"copied {src} -> {_transfer(src, dst, op)}"

    @srv.tool()
    def delete(path: str, recursive: bool = False) -> str:
        """Delete a file, or a folder (a non-empty folder needs recursive=true)."""
        p = existing(path)
        if p == ws.resolve():
            raise ToolError("cannot delete the workspace root")
        if p.is_dir():
            if any(p.iterdir()) and not recursive:
                raise ToolError(f"{path!r} is a non-empty folder; pass recursive=true to delete it")
            shutil.rmtree(p)
        else:
            p.unlink()
        return f"deleted {rel(ws, p)}"

    @srv.tool()
    def search(query: str, path: str = ".", glob: str = "*", case_sensitive: bool = False) -> str:
        """Find text in files under path whose names match glob (e.g. '*.txt'). Returns JSON
        hits [{path, line, text}], at most 200; file names containing the query count too."""
        root = existing(path)
        if not query:
            raise ToolError("query must not be empty")
        needle = query if case_sensitive else query.lower()
        hits: list[dict] = []
        files = [root] if not root.is_dir() else sorted(p for p in root.rglob("*") if p.is_file())
        for f in files:
            if not f.is_file() or not fnmatch.fnmatch(f.name, glob):
                continue
            name = f.name if case_sensitive else f.name.lower()
            if needle in name:
                hits.append({"path": rel(ws, f), "line": 0, "text": "(file name matches)"})
            try:
                with open(f, encoding="utf-8") as fh:
                    for i, line in enumerate(fh, 1):
                        if needle in (line if case_sensitive else line.lower()):
                            hits.append({"path": rel(ws, f), "line": i, "text": line.rstrip("\n")[:300]})
                            if len(hits) >= MAX_HITS:
                                break
            except (UnicodeDecodeError, OSError):
                continue
            if len(hits) >= MAX_HITS:
                break
        return cap(json.dumps(hits, ensure_ascii=False))

    @srv.tool()
    def file_info(path: str) -> str:
        """Kind and size of a file or folder (and a folder's entry count), as JSON."""
        p = existing(path)
        st = p.stat()
        return json.dumps({"path": rel(ws, p), "kind": "folder" if p.is_dir() else "file",
                           "size": st.st_size, "entries": len(os.listdir(p)) if p.is_dir() else None})

    return srv.build()
