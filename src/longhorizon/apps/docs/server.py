"""The `docs` app: an MCP server over the Word documents (.docx) in the workspace.

The body of a document is a list of blocks (paragraphs and tables) numbered from 0, as
``read_document`` shows them; every editing tool takes those numbers. Each call loads the file,
edits it and saves it back byte-deterministically, so the file on disk is always the truth.
"""

from __future__ import annotations

import io
import json
import os
import threading
from pathlib import Path
from typing import Any

from docx.document import Document
from docx.table import Table
from docx.text.paragraph import Paragraph
from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import (
    ACT, ADD, READ, SET, AppServer, OfficeFiles, WorkspacePath, cap, server_builder,
)
from longhorizon.apps.docs.state import (
    add_table as _add_table,
)
from longhorizon.apps.docs.state import (
    StyleNames,
    blocks,
    comments,
    document_bytes,
    find_style,
    load_document,
    new_document,
    paragraph_styles,
    paragraph_text,
    replace_in_paragraph,
    set_paragraph_text,
    style_name,
    table_grid,
    table_rows,
    text_paragraphs,
)
from longhorizon.core.office_budget import BUDGETS, OfficeBudgetError, check_package, read_office

MAX_READ_CHARS = 16_000
MAX_LIST = 200
MAX_HITS = 100
MAX_TEXT = 10_000
MAX_TABLE_CELLS = 2_000
LIST_MARKUP = 2 * BUDGETS[".docx"].markup
"""list_documents opens documents until their XML markup together passes this (each within its
own office budget); the rest are listed unopened."""
COMMON_STYLES = ("Normal", "Title", "Heading 1", "Heading 2", "Heading 3", "List Bullet", "List Number", "Quote")

INSTRUCTIONS = (
    "Word documents (.docx) in the shared workspace; paths are relative to the workspace root. "
    "A document's body is a list of blocks (paragraphs and tables) numbered from 0: read_document "
    "shows each block's index, style and text, and every editing tool takes those indexes. "
    "Indexes after an inserted or deleted block shift by one, so re-read before editing by index."
)


def _json(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def make_app(world):
    ws: Path = world.workspace
    srv = AppServer("docs", instructions=INSTRUCTIONS)
    lock = threading.Lock()  # sync tools run on worker threads: one document edit at a time

    files = OfficeFiles(ws, ".docx", "document", load_document, kind="a .docx document",
                        missing_hint='; use list_documents to find documents (paths are relative to the workspace root)')

    def docx_path(path: str) -> WorkspacePath:
        return files.path(path, 'is not a .docx file; this app only opens Word .docx documents')

    def open_doc(path: str, for_read: bool = False):
        p = docx_path(path)
        return p, files.open(p, path, for_read)

    def save(doc: Document, p: WorkspacePath, new: bool = False) -> None:
        try:
            data = document_bytes(doc)
        except ValueError as exc:  # e.g. control characters XML cannot hold
            raise ToolError(f"the text cannot be stored in a document ({exc}); remove control characters") from None
        files.save(p, data, new=new)

    def check_text(text: Any, what: str = "text") -> str:
        if not isinstance(text, str):
            raise ToolError(f"{what} must be a string")
        if len(text) > MAX_TEXT:
            raise ToolError(f"{what} is longer than {MAX_TEXT} characters; split it over several paragraphs")
        bad = [c for c in text if ord(c) < 32 and c not in "\t\n"]
        if bad:
            raise ToolError(f"{what} contains control characters ({', '.join(repr(c) for c in set(bad))}); remove them")
        return text

    def resolve_style(doc: Document, style: str) -> str:
        name = find_style(doc, style)
        if name is None:
            have = paragraph_styles(doc)
            common = [s for s in COMMON_STYLES if s in have]
            raise ToolError(f"no paragraph style named {style!r}. Common styles: {', '.join(common)}; "
                            f"all styles: {', '.join(have)}")
        return name

    def block_at(doc: Document, index: int, path: str) -> Paragraph | Table:
        bl = blocks(doc)
        if not isinstance(index, int) or not 0 <= index < len(bl):
            if not bl:
                raise ToolError(f"{path!r} is empty; there is no block {index}")
            raise ToolError(f"{path!r} has blocks 0-{len(bl) - 1}; there is no block {index} "
                            "(use read_document to see the indexes)")
        return bl[index]

    def paragraph_at(doc: Document, index: int, path: str) -> Paragraph:
        b = block_at(doc, index, path)
        if isinstance(b, Table):
            raise ToolError(f"block {index} of {path!r} is a table, not a paragraph "
                            "(use set_table_cell or delete_table for tables)")
        return b

    def table_at(doc: Document, index: int, path: str) -> Table:
        b = block_at(doc, index, path)
        if not isinstance(b, Table):
            raise ToolError(f"block {index} of {path!r} is a paragraph, not a table")
        return b

    def move_to(doc: Document, element, index: int | None) -> None:
        """Place a just-appended block ``element`` before block ``index`` (None: keep at end)."""
        if index is None:
            return
        bl = blocks(doc)
        if index < len(bl) - 1:
            bl[index]._element.addprevious(element)  # noqa: SLF001

    def label(index: int, p: Paragraph) -> str:
        text = p.text
        short = text if len(text) <= 80 else text[:77] + "..."
        return f"[{index}] ({style_name(p)}) {short!r}"

    def title_of(doc: Document) -> str:
        t = doc.core_properties.title or ""
        if t:
            return t
        names = StyleNames(doc)
        for b in blocks(doc):
            if isinstance(b, Paragraph) and names.of(b) == "Title" and paragraph_text(b).strip():
                return paragraph_text(b)
        return ""

    @srv.tool(READ)
    def list_documents(folder: str = ".") -> str:
        """List the Word documents (.docx) under a folder, including its subfolders.

        Args:
            folder: folder relative to the workspace root (default: the whole workspace).

        Returns JSON [{path, title, blocks (number of paragraphs and tables), bytes}]."""
        root = files.workspace.path(folder)
        kind = root.kind()
        if kind is None:
            raise ToolError(f"folder {folder!r} does not exist")
        if kind == "link":
            raise ToolError(f"{root.rel!r} is a symbolic link; file tools do not follow links")
        if kind != "folder":
            raise ToolError(f"{folder!r} is a file, not a folder")
        found = [e for e in root.walk()  # links are listed, never opened nor entered
                 if e.path.name.lower().endswith(".docx") and not e.path.name.startswith(".")
                 and e.kind in ("file", "link")]
        out, spent = [], 0  # spent: markup of the documents opened so far (core/office_budget.py)
        for e in found[:MAX_LIST]:
            p = e.path
            if e.kind == "link":
                out.append({"path": p.rel, "title": None, "blocks": None, "bytes": None,
                            "note": f"a symbolic link to {e.target!r}; file tools do not follow links"})
                continue
            if spent > LIST_MARKUP:
                out.append({"path": p.rel, "title": None, "blocks": None, "bytes": e.size,
                            "note": "not opened: this listing has read its budget of document contents; "
                                    "list a subfolder, or read_document this one"})
                continue
            try:
                with p.open_read() as f:
                    size = os.fstat(f.fileno()).st_size
                    data = read_office(f, ".docx", name=p.rel)
                spent += check_package(data, ".docx", name=p.rel).markup
                doc = load_document(io.BytesIO(data))
                info = {"path": p.rel, "title": title_of(doc), "blocks": len(blocks(doc))}
            except OfficeBudgetError as exc:
                info, size = {"path": p.rel, "title": None, "blocks": None, "note": str(exc)}, e.size
            except Exception:  # noqa: BLE001 - a broken (or meanwhile swapped) file is listed, not fatal
                info, size = {"path": p.rel, "title": None, "blocks": None, "note": "cannot be opened"}, e.size
            info["bytes"] = size
            out.append(info)
        if len(found) > MAX_LIST:
            out.append({"note": f"{len(found) - MAX_LIST} more documents; list a subfolder"})
        return cap(_json(out))

    @srv.tool(READ)
    def read_document(path: str, start: int = 0) -> str:
        """Read a document: every block in order, with its index.

        Args:
            path: the .docx file, relative to the workspace root.
            start: first block index to show (for long documents, use next_start from the previous call).

        Returns JSON {path, title, total_blocks, blocks: [...], comments: [...], next_start}.
        A paragraph block is {index, style (e.g. "Heading 1", "List Bullet", "Normal"), text};
        a table block is {index, table: [[cell text, ...], ...]} (first row first).
        comments are review notes: {id, index (the block they are attached to), author, text}.
        next_start is null when the whole rest of the document was shown."""
        with lock:
            p, doc = open_doc(path, for_read=True)
        bl = blocks(doc)
        if not isinstance(start, int) or start < 0 or (bl and start >= len(bl)):
            raise ToolError(f"start must be between 0 and {max(len(bl) - 1, 0)}")
        names = StyleNames(doc)
        shown, size, nxt = [], 0, None
        for i in range(start, len(bl)):
            b = bl[i]
            item = ({"index": i, "style": names.of(b), "text": paragraph_text(b)} if isinstance(b, Paragraph)
                    else {"index": i, "table": table_rows(b)})
            size += len(_json(item))
            if shown and size > MAX_READ_CHARS:
                nxt = i
                break
            shown.append(item)
        out = {"path": p.rel, "title": title_of(doc), "total_blocks": len(bl), "blocks": shown,
               "comments": comments(doc), "next_start": nxt}
        return cap(_json(out))

    @srv.tool(READ)
    def find_text(path: str, query: str, match_case: bool = False) -> str:
        """Find the paragraphs (and table cells) of a document that contain some text.

        Args:
            path: the .docx file, relative to the workspace root.
            query: the text to look for (not empty).
            match_case: only exact-case matches (default: case-insensitive).

        Returns JSON {query, matches (total occurrences), hits: [{location, style, text}]}:
        location is the block index ("7"), or "block:row,column" for a table cell ("12:3,1",
        rows and columns from 0). At most 100 hits."""
        if not isinstance(query, str) or not query:
            raise ToolError("query must be non-empty text")
        with lock:
            _, doc = open_doc(path, for_read=True)
        needle = query if match_case else query.lower()
        names = StyleNames(doc)
        hits, total = [], 0
        for loc, par in text_paragraphs(doc):
            text = paragraph_text(par)
            n = (text if match_case else text.lower()).count(needle)
            if n:
                total += n
                if len(hits) < MAX_HITS:
                    hits.append({"location": loc, "style": names.of(par), "text": text[:500]})
        return cap(_json({"query": query, "matches": total, "hits": hits}))

    @srv.tool(ADD)
    def create_document(path: str, title: str | None = None) -> str:
        """Create a new, empty Word document. Refuses to overwrite an existing file.

        Args:
            path: where to create it, relative to the workspace root, ending in .docx
                (missing parent folders are created).
            title: optional; becomes the first paragraph (style "Title") and the document's title.

        Returns a confirmation. Add content with append_paragraph, insert_paragraph and add_table."""
        with lock:
            p = docx_path(path)
            if p.exists():
                raise ToolError(f"{path!r} already exists; edit it, or choose another path")
            if title is not None:
                check_text(title, "title")
            doc = new_document(title or None)
            save(doc, p, new=True)
            return f"Created {p.rel}" + (f" with title {title!r} (block 0)." if title else " (empty).")

    @srv.tool(ADD)
    def copy_document(source: str, path: str) -> str:
        """Save a copy of a document as a new file ("save as"), e.g. to start a new version while
        the original stays exactly as it is. Refuses to overwrite an existing file.

        Args:
            source: the .docx to copy, relative to the workspace root.
            path: where to save the copy, relative to the workspace root, ending in .docx
                (missing parent folders are created). Edit the copy by this path afterwards.

        Returns a confirmation naming the copy and how many blocks it has; the source is not changed."""
        with lock:
            src, doc = open_doc(source, for_read=True)
            dst = docx_path(path)
            if dst.exists():
                raise ToolError(f"{path!r} already exists; choose another path (copies never overwrite)")
            data = src.read_bytes()
            files.save(dst, data, new=True)
            return f"Copied {src.rel} to {dst.rel} ({len(blocks(doc))} blocks); the source is unchanged."

    @srv.tool(ADD)
    def append_paragraph(path: str, text: str, style: str = "Normal") -> str:
        """Add a paragraph at the end of a document.

        Args:
            path: the .docx file, relative to the workspace root.
            text: the paragraph's text ("\\n" inside it becomes a line break, not a new paragraph).
            style: paragraph style, e.g. "Normal", "Title", "Heading 1", "Heading 2", "Heading 3",
                "List Bullet", "List Number", "Quote".

        Returns the new paragraph's index."""
        with lock:
            p, doc = open_doc(path)
            name = resolve_style(doc, style)
            doc.add_paragraph(check_text(text), style=name)
            index = len(blocks(doc)) - 1
            save(doc, p)
            return f"Added paragraph {index} ({name}) to {p.rel}."

    @srv.tool(ADD)
    def insert_paragraph(path: str, index: int, text: str, style: str = "Normal") -> str:
        """Insert a paragraph before block ``index``; later blocks move down by one.

        Args:
            path: the .docx file, relative to the workspace root.
            index: the new paragraph's index (0 = first; the number of blocks = at the end).
            text: the paragraph's text.
            style: paragraph style, e.g. "Normal", "Heading 1", "List Bullet".

        Returns a confirmation naming the new paragraph and the block it now precedes."""
        with lock:
            p, doc = open_doc(path)
            bl = blocks(doc)
            if not isinstance(index, int) or not 0 <= index <= len(bl):
                raise ToolError(f"index must be between 0 and {len(bl)} (the number of blocks, to append)")
            name = resolve_style(doc, style)
            par = doc.add_paragraph(check_text(text), style=name)
            move_to(doc, par._p, index if index < len(bl) else None)  # noqa: SLF001
            save(doc, p)
            after = f"; block {index + 1} was block {index}" if index < len(bl) else " (at the end)"
            return f"Inserted paragraph {index} ({name}) in {p.rel}{after}."

    @srv.tool(SET)
    def set_paragraph(path: str, index: int, text: str | None = None, style: str | None = None) -> str:
        """Rewrite one paragraph's text and/or change its style.

        Args:
            path: the .docx file, relative to the workspace root.
            index: the paragraph's block index (see read_document).
            text: the new full text (omit to keep the text).
            style: the new style, e.g. "Heading 2" (omit to keep the style).

        Returns the paragraph as it was and as it is now."""
        if text is None and style is None:
            raise ToolError("give text, style or both")
        with lock:
            p, doc = open_doc(path)
            par = paragraph_at(doc, index, path)
            before = label(index, par)
            if style is not None:
                par.style = resolve_style(doc, style)
            if text is not None:
                set_paragraph_text(par, check_text(text))
            save(doc, p)
            return f"Updated {p.rel}: was {before}, now {label(index, par)}."

    @srv.tool(ACT)
    def delete_paragraph(path: str, index: int) -> str:
        """Delete one paragraph; later blocks move up by one.

        Args:
            path: the .docx file, relative to the workspace root.
            index: the paragraph's block index (see read_document).

        Returns the deleted paragraph."""
        with lock:
            p, doc = open_doc(path)
            par = paragraph_at(doc, index, path)
            gone = label(index, par)
            par._p.getparent().remove(par._p)  # noqa: SLF001
            save(doc, p)
            return f"Deleted {gone} from {p.rel}; later blocks moved up by one."

    @srv.tool(ACT)
    def replace_text(path: str, old: str, new: str, occurrence: int | None = None, match_case: bool = True) -> str:
        """Replace text everywhere in a document (paragraphs and table cells), or one occurrence.

        Args:
            path: the .docx file, relative to the workspace root.
            old: the text to replace (not empty; matched inside paragraphs, not across them).
            new: the replacement (may be "" to remove the text).
            occurrence: replace only this occurrence, counted from 1 in document order
                (find_text shows where they are); omit to replace all.
            match_case: match exact case only (default true).

        Returns how many occurrences were replaced and where."""
        if not isinstance(old, str) or not old:
            raise ToolError("old must be non-empty text")
        check_text(new, "new")
        if "\n" in old:
            raise ToolError("old cannot contain a line break: text is matched within one paragraph")
        if occurrence is not None and occurrence < 1:
            raise ToolError("occurrence counts from 1; omit it to replace every occurrence")
        with lock:
            p, doc = open_doc(path)
            which = None if occurrence is None else {occurrence}
            seen = replaced = 0
            where: list[str] = []
            for loc, par in text_paragraphs(doc):
                n, r = replace_in_paragraph(par, old, new, which, match_case, seen)
                seen += n
                if r:
                    replaced += r
                    where.append(loc)
            if not replaced:
                if seen:
                    raise ToolError(f"{old!r} occurs only {seen} time(s) in {path!r}; "
                                    f"occurrence {occurrence} does not exist")
                raise ToolError(f"{old!r} does not occur in {path!r}"
                                + ("; note that matching is case-sensitive (match_case=false to ignore case)"
                                   if match_case else ""))
            save(doc, p)
            return (f"Replaced {replaced} of {seen} occurrence(s) of {old!r} in {p.rel} "
                    f"(locations: {', '.join(where[:40])}{' ...' if len(where) > 40 else ''}).")

    @srv.tool(ADD)
    def add_table(path: str, rows: list[list[str]], after_index: int | None = None) -> str:
        """Add a table (grid style; the first row is the header and is bold).

        Args:
            path: the .docx file, relative to the workspace root.
            rows: the table's rows, each a list of cell texts, e.g. [["Risk", "Owner"], ["Delay", "Ana"]];
                shorter rows are padded with empty cells.
            after_index: put the table right after this block; omit to add it at the end.

        Returns the table's block index."""
        if not rows or not all(isinstance(r, list) for r in rows) or not any(rows):
            raise ToolError("rows must be a non-empty list of rows, e.g. [[\"Name\", \"Owner\"], [\"x\", \"y\"]]")
        width = max(len(r) for r in rows)
        if len(rows) * width > MAX_TABLE_CELLS:
            raise ToolError(f"at most {MAX_TABLE_CELLS} cells per table")
        clean = [[check_text("" if v is None else str(v), "cell text") for v in r] for r in rows]
        with lock:
            p, doc = open_doc(path)
            bl = blocks(doc)
            if after_index is not None and not 0 <= after_index < len(bl):
                raise ToolError(f"after_index must be between 0 and {len(bl) - 1}, or omitted to append")
            table = _add_table(doc, clean)
            target = None if after_index is None else after_index + 1
            move_to(doc, table._tbl, target if target is not None and target < len(bl) else None)  # noqa: SLF001
            index = len(bl) if target is None or target >= len(bl) else target
            save(doc, p)
            return f"Added a {len(clean)}x{width} table as block {index} of {p.rel}."

    @srv.tool(SET)
    def set_table_cell(path: str, index: int, row: int, column: int, text: str) -> str:
        """Rewrite one cell of a table.

        Args:
            path: the .docx file, relative to the workspace root.
            index: the table's block index (see read_document).
            row: row number from 0 (0 is the header row).
            column: column number from 0.
            text: the cell's new text.

        Returns the cell's old and new text."""
        with lock:
            p, doc = open_doc(path)
            table = table_at(doc, index, path)
            nrows, ncols = len(table.rows), len(table.columns)
            if not 0 <= row < nrows or not 0 <= column < ncols:
                raise ToolError(f"the table at block {index} has rows 0-{nrows - 1} and columns 0-{ncols - 1}")
            try:
                cells = table_grid(table)[row]
            except ValueError as exc:
                raise ToolError(f"the table at block {index} cannot be read ({exc})") from None
            if column >= len(cells):
                raise ToolError(f"row {row} of the table at block {index} has cells 0-{len(cells) - 1} only")
            cell = cells[column]
            old = cell.text
            pars = cell.paragraphs
            set_paragraph_text(pars[0], check_text(text))
            for extra in pars[1:]:
                extra._p.getparent().remove(extra._p)  # noqa: SLF001
            save(doc, p)
            return f"Cell ({row},{column}) of table {index} in {p.rel}: {old!r} -> {text!r}."

    @srv.tool(ACT)
    def delete_table(path: str, index: int) -> str:
        """Delete a whole table; later blocks move up by one.

        Args:
            path: the .docx file, relative to the workspace root.
            index: the table's block index (see read_document).

        Returns a confirmation with the table's size."""
        with lock:
            p, doc = open_doc(path)
            table = table_at(doc, index, path)
            size = f"{len(table.rows)}x{len(table.columns)}"
            table._tbl.getparent().remove(table._tbl)  # noqa: SLF001
            save(doc, p)
            return f"Deleted the {size} table at block {index} of {p.rel}; later blocks moved up by one."

    @srv.tool(ADD)
    def add_comment(path: str, index: int, text: str, author: str = "Reviewer") -> str:
        """Attach a review comment (a margin note, as in Word's review pane) to a paragraph.
        The paragraph's text is not changed.

        Args:
            path: the .docx file, relative to the workspace root.
            index: the block index of the paragraph to comment on (it must have text).
            text: the comment.
            author: who the comment is from (default "Reviewer").

        Returns the new comment's id."""
        if not isinstance(text, str) or not text.strip():
            raise ToolError("text must be a non-empty comment")
        check_text(text)
        check_text(author, "author")
        with lock:
            p, doc = open_doc(path)
            par = paragraph_at(doc, index, path)
            runs = [r for r in par.runs if r.text]
            if not runs:
                raise ToolError(f"paragraph {index} has no text to attach a comment to")
            initials = "".join(w[0] for w in author.split()[:3]).upper()
            c = doc.add_comment(runs, text=text, author=author, initials=initials)
            save(doc, p)
            return f"Added comment {c.comment_id} on paragraph {index} of {p.rel}."

    return srv


build_server = server_builder(make_app)
