"""Docs state: Word documents (.docx) in the workspace, read and written with python-docx.

A document's body is a sequence of *blocks*: paragraphs and tables, numbered from 0 in body
order. Tools and graders share that numbering (``blocks``), so "paragraph 7" means the same
thing to the agent, the app and the grader.

Saving is byte-deterministic (``document_bytes``): a docx is a zip, and python-docx stamps the
save time into every zip entry; core-property times and comment dates are pinned too, so the
same content always gives the same bytes. ``stable_zip`` is shared with the slides app.
"""

from __future__ import annotations

import datetime as _dt
import io
import os
import re
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import docx
from docx.document import Document
from docx.enum.style import WD_STYLE_TYPE
from docx.styles import BabelFish
from docx.oxml.ns import qn
from docx.oxml.simpletypes import ST_Merge
from docx.table import Table, _Cell
from docx.text.paragraph import Paragraph

from longhorizon.core.office_budget import office_bytes
from longhorizon.core.parse_cache import parse_once

FIXED_TIME = _dt.datetime(2024, 1, 1, 0, 0, 0)
"""Stamped as created/modified on every saved document, so equal content means equal bytes."""
FIXED_TIME_UTC = FIXED_TIME.replace(tzinfo=_dt.timezone.utc)
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
ZIP_LEVEL = 1
"""Fast deflate: files come out ~40% larger than at the default level, and saving ~3x faster."""

Block = Paragraph | Table


# -- files ---------------------------------------------------------------------------------------


def stable_zip(data: bytes) -> bytes:
    """Rewrite zip ``data`` with pinned entry times and modes (entry order is kept).

    Office files are zips whose writers stamp the current time on every entry; this makes
    the bytes a function of the content alone.
    """
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=ZIP_LEVEL) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=ZIP_TIME)
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = 0o644 << 16
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


class _StableZipWriter:
    """The physical-package writer python-docx and python-pptx write parts through, with
    pinned entry times: one compression pass instead of save-then-rewrite."""

    def __init__(self):
        self.buffer = io.BytesIO()
        self.zip = zipfile.ZipFile(self.buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=ZIP_LEVEL)

    def write(self, pack_uri, blob: bytes) -> None:
        info = zipfile.ZipInfo(pack_uri.membername, date_time=ZIP_TIME)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, blob)

    def close(self) -> None:
        self.zip.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def package_bytes(package, save) -> bytes:
    """Serialise an OPC ``package`` (python-docx or python-pptx) with pinned zip entry times.

    Uses the libraries' own part writers through ``_StableZipWriter``; if their internals ever
    change shape, falls back to ``save`` (a normal save) followed by ``stable_zip``, which gives
    the same bytes, only slower."""
    try:
        w = _StableZipWriter()
        if type(package).__module__.startswith("pptx."):  # python-pptx
            from pptx.opc.serialized import PackageWriter as PptxWriter

            pw = PptxWriter(None, package._rels, tuple(package.iter_parts()))  # noqa: SLF001
            pw._write_content_types_stream(w)  # noqa: SLF001
            pw._write_pkg_rels(w)  # noqa: SLF001
            pw._write_parts(w)  # noqa: SLF001
        else:  # python-docx
            from docx.opc.pkgwriter import PackageWriter as DocxWriter

            parts = list(package.parts)
            for part in parts:
                part.before_marshal()
            DocxWriter._write_content_types_stream(w, parts)  # noqa: SLF001
            DocxWriter._write_pkg_rels(w, package.rels)  # noqa: SLF001
            DocxWriter._write_parts(w, parts)  # noqa: SLF001
        w.close()
        return w.buffer.getvalue()
    except (AttributeError, TypeError, ImportError):  # pragma: no cover - library internals moved
        raw = io.BytesIO()
        save(raw)
        return stable_zip(raw.getvalue())


def atomic_write(path: Path | str, data: bytes) -> None:
    """Write next to the target and move into place, so a crash never leaves half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def document_bytes(doc: Document) -> bytes:
    """The .docx bytes of ``doc``, identical for identical content."""
    props = doc.core_properties
    props.created = FIXED_TIME
    props.modified = FIXED_TIME
    props.last_printed = FIXED_TIME
    _pin_comment_dates(doc)
    return package_bytes(doc.part.package, doc.save)


def _comments_part(doc: Document):
    """The document's comments part, or None (never creates one, unlike python-docx's own)."""
    from docx.opc.constants import RELATIONSHIP_TYPE as RT

    try:
        return doc.part.part_related_by(RT.COMMENTS)
    except KeyError:
        return None


def _pin_comment_dates(doc: Document) -> None:
    part = _comments_part(doc)
    if part is None:
        return
    for c in part.element.comment_lst:
        c.date = FIXED_TIME_UTC


def save_document(doc: Document, path: Path | str) -> None:
    """Write ``doc`` to ``path`` byte-deterministically (see ``document_bytes``)."""
    atomic_write(path, document_bytes(doc))


def load_document(path: Path | str | BinaryIO) -> Document:
    """A document from a path or an open binary file, within the office budgets
    (core/office_budget.py: ``OfficeBudgetError`` past them)."""
    return docx.Document(io.BytesIO(office_bytes(path, ".docx")))


KEEP_TABLE_STYLES = ("Normal Table", "Table Grid")


def _slim(doc: Document) -> None:
    """Trim python-docx's default template to what documents here use: the Word 2010
    ``stylesWithEffects`` copy of the styles, the thumbnail and ~100 unused table styles go
    (every paragraph and character style stays). Documents get ~10x smaller and faster to save."""
    for rId, rel in list(doc.part.rels.items()):
        if rel.reltype.endswith("/stylesWithEffects"):
            del doc.part.rels[rId]
    pkg_rels = doc.part.package.rels
    for rId, rel in list(pkg_rels.items()):
        if rel.reltype.endswith("/thumbnail"):
            del pkg_rels[rId]
    styles = doc.styles.element
    for st in list(styles.style_lst):
        if st.type == WD_STYLE_TYPE.TABLE and BabelFish.internal2ui(st.name_val or "") not in KEEP_TABLE_STYLES:
            styles.remove(st)


def new_document(title: str | None = None) -> Document:
    """An empty document from python-docx's default template (slimmed, see ``_slim``);
    ``title`` becomes a Title paragraph and the document's title property."""
    doc = docx.Document()
    _slim(doc)
    doc.core_properties.author = ""
    doc.core_properties.last_modified_by = ""
    if title:
        doc.core_properties.title = title
        doc.add_paragraph(title, style="Title")
    return doc


def build_document(blocks: Iterable[Any], title: str | None = None) -> Document:
    """A document from a plain description, for task families seeding Worlds.

    Each item is ``(style, text)`` for a paragraph (e.g. ``("Heading 1", "Scope")``), a bare
    string for a Normal paragraph, or ``{"table": [[...], ...]}`` for a table (first row is
    the header). ``title`` only sets the title property (add a ``("Title", ...)`` item to show it).
    """
    doc = new_document()
    if title:
        doc.core_properties.title = title
    for item in blocks:
        if isinstance(item, dict):
            add_table(doc, item["table"])
        elif isinstance(item, str):
            doc.add_paragraph(item, style="Normal")
        else:
            style, text = item
            doc.add_paragraph(text, style=style)
    return doc


# -- structure -----------------------------------------------------------------------------------


def blocks(doc: Document) -> list[Block]:
    """The body's paragraphs and tables in order: block ``i`` is what tools call index ``i``."""
    return list(doc.iter_inner_content())


class StyleNames:
    """Paragraph style id -> display name ("Heading1" -> "Heading 1") for one document, read once.

    python-docx resolves ``paragraph.style`` with an XPath query per call, which dominates
    reading a document of a few dozen paragraphs; this table makes it a dict lookup."""

    def __init__(self, doc: Document):
        self.names: dict[str, str] = {}
        self.default = "Normal"
        for s in doc.styles.element.style_lst:
            if s.type != WD_STYLE_TYPE.PARAGRAPH:
                continue
            name = BabelFish.internal2ui(s.name_val or s.styleId)
            self.names[s.styleId] = name
            if s.default:
                self.default = name

    def of(self, p: Paragraph) -> str:
        sid = p._p.style  # noqa: SLF001
        return self.names.get(sid, self.default) if sid else self.default


_RUN, _HYPERLINK = qn("w:r"), qn("w:hyperlink")


def paragraph_text(p: Paragraph) -> str:
    """``p.text``, read without python-docx's XPath query per paragraph (its runs and
    hyperlinks, in order, as that query selects them): what reading a long document costs."""
    return "".join(e.text for e in p._p.iterchildren(_RUN, _HYPERLINK))  # noqa: SLF001


def style_name(p: Paragraph, names: StyleNames | None = None) -> str:
    if names is not None:
        return names.of(p)
    try:
        return p.style.name if p.style is not None else "Normal"
    except (KeyError, AttributeError):
        return "Normal"


MAX_GRID_SPAN = 64
"""Columns one table cell counts as spanning here (Word's tables have at most 63): python-docx
repeats a spanned cell once per column, and a file may say ``gridSpan="100000000"``."""


def table_grid(t: Table) -> list[list[_Cell]]:
    """Each row's cells as python-docx's ``row.cells`` gives them (a cell spanning columns
    repeated, a vertically merged one as the cell it continues), in one pass: python-docx
    finds each merged cell's origin again from the rows above (quadratic in a table's size)
    and repeats any span, however wide. Spans count at most ``MAX_GRID_SPAN`` columns.
    ValueError, as python-docx gives, for a continued cell with nothing above it."""
    rows: list[list[_Cell]] = []
    above: dict[int, tuple[_Cell, int]] = {}  # grid offset -> (origin cell, its span), row above
    for tr in t._tbl.tr_lst:  # noqa: SLF001
        here: dict[int, tuple[_Cell, int]] = {}
        cells: list[_Cell] = []
        offset = tr.grid_before
        for tc in tr.tc_lst:
            span = tc.grid_span
            if tc.vMerge == ST_Merge.CONTINUE:
                if offset not in above:
                    raise ValueError(f"no cell above grid column {offset} to continue")
                origin = above[offset]
            else:
                origin = (_Cell(tc, t), min(span, MAX_GRID_SPAN))
            cells.extend([origin[0]] * origin[1])
            here[offset] = origin
            offset += span
        rows.append(cells)
        above = here
    return rows


def _cell_text(cell: _Cell) -> str:
    """``cell.text``, its paragraphs read by ``paragraph_text``."""
    return "\n".join(paragraph_text(p) for p in cell.paragraphs)


def table_rows(t: Table) -> list[list[str]]:
    """The text of each cell, row by row, as ``table_grid`` lays them out."""
    texts: dict[int, str] = {}
    out = []
    for row in table_grid(t):
        out.append([texts[id(c)] if id(c) in texts else texts.setdefault(id(c), _cell_text(c)) for c in row])
    return out


def paragraph_styles(doc: Document) -> list[str]:
    return [s.name for s in doc.styles if s.type == WD_STYLE_TYPE.PARAGRAPH]


def find_style(doc: Document, name: str) -> str | None:
    """A paragraph style's exact name from ``name`` (exact, then case/space-insensitive)."""
    names = paragraph_styles(doc)
    if name in names:
        return name
    want = " ".join(str(name).split()).lower()
    for n in names:
        if n.lower() == want:
            return n
    return None


def add_table(doc: Document, rows: Sequence[Sequence[Any]], header: bool = True) -> Table:
    """Append a grid table holding ``rows`` (text); the first row bold when ``header``."""
    width = max(len(r) for r in rows)
    table = doc.add_table(rows=len(rows), cols=width)
    table.style = "Table Grid"
    for i, r in enumerate(rows):
        for j in range(width):
            value = r[j] if j < len(r) else ""
            cell = table.cell(i, j)
            cell.text = "" if value is None else str(value)
            if header and i == 0:
                for run in cell.paragraphs[0].runs:
                    run.bold = True
    return table


_TEXT_HOLDERS = {qn("w:r"), qn("w:hyperlink"), qn("w:fldSimple"), qn("w:smartTag"), qn("w:ins")}


def set_paragraph_text(p: Paragraph, text: str) -> None:
    """Replace a paragraph's text, keeping its style, the first run's formatting and any
    comment anchors (so review comments stay attached)."""
    first = next((r for r in p.runs if r.text), None) or (p.runs[0] if p.runs else None)
    for child in list(p._p):  # noqa: SLF001
        if child.tag not in _TEXT_HOLDERS or (first is not None and child is first._r):  # noqa: SLF001
            continue
        if child.tag == qn("w:r") and child.find(qn("w:commentReference")) is not None:
            continue
        p._p.remove(child)  # noqa: SLF001
    if first is None:
        p.add_run(text)
    else:
        first.text = text


def replace_in_paragraph(p: Paragraph, old: str, new: str, which: set[int] | None, match_case: bool,
                         start_count: int = 0) -> tuple[int, int]:
    """Replace occurrences of ``old`` in one paragraph.

    Occurrences are numbered from ``start_count + 1`` across the document; only those in
    ``which`` (all when None) change. Returns (occurrences seen here, occurrences replaced).
    A match inside one run keeps that run's formatting; one spanning runs is merged into the
    first run it touches.
    """
    text = paragraph_text(p)
    hay, needle = (text, old) if match_case else (text.lower(), old.lower())
    spans, pos = [], 0
    while True:
        i = hay.find(needle, pos)
        if i < 0:
            break
        spans.append((i, i + len(old)))
        pos = i + len(old)
    chosen = [s for k, s in enumerate(spans, start=start_count + 1) if which is None or k in which]
    if not chosen:
        return len(spans), 0
    runs = p.runs
    if "".join(r.text for r in runs) != text:  # hyperlinks or fields: rewrite the paragraph as plain text
        out, last = [], 0
        for a, b in chosen:
            out.append(text[last:a] + new)
            last = b
        set_paragraph_text(p, "".join(out) + text[last:])
        return len(spans), len(chosen)
    for a, b in reversed(chosen):
        offsets, acc = [], 0
        for r in runs:
            offsets.append((acc, acc + len(r.text)))
            acc += len(r.text)
        first = next(k for k, (s, e) in enumerate(offsets) if s <= a < e)
        last = next(k for k, (s, e) in enumerate(offsets) if s < b <= e)
        s0 = offsets[first][0]
        if first == last:
            t = runs[first].text
            runs[first].text = t[: a - s0] + new + t[b - s0:]
        else:
            tail = runs[last].text[b - offsets[last][0]:]
            runs[first].text = runs[first].text[: a - s0] + new + tail
            for k in range(first + 1, last + 1):
                runs[k].text = ""
        runs = p.runs
    return len(spans), len(chosen)


def text_paragraphs(doc: Document) -> list[tuple[str, Paragraph]]:
    """Every paragraph holding text, with where it is: "N" for body block N, "N:r,c" for a
    paragraph in row r, column c of the table at block N (rows and columns from 0)."""
    out = []
    for i, b in enumerate(blocks(doc)):
        if isinstance(b, Paragraph):
            out.append((str(i), b))
        else:
            for r, row in enumerate(table_grid(b)):
                seen = set()
                for c, cell in enumerate(row):
                    if id(cell) in seen:  # merged cells repeat
                        continue
                    seen.add(id(cell))
                    for p in cell.paragraphs:
                        out.append((f"{i}:{r},{c}", p))
    return out


# -- comments ------------------------------------------------------------------------------------


def comments(doc: Document) -> list[dict[str, Any]]:
    """Review comments with the body block each is anchored to (-1 when it cannot be told)."""
    if _comments_part(doc) is None:
        return []
    anchor: dict[int, int] = {}
    for i, b in enumerate(blocks(doc)):
        el = b._element  # noqa: SLF001
        for tag in ("w:commentRangeStart", "w:commentReference"):
            for m in el.iter(qn(tag)):
                cid = int(m.get(qn("w:id")))
                anchor.setdefault(cid, i)
    out = []
    for c in doc.comments:
        out.append({"id": c.comment_id, "index": anchor.get(c.comment_id, -1), "author": c.author,
                    "text": c.text})
    return out


# -- readers for graders --------------------------------------------------------------------------


def read_blocks(path: Path | str) -> list[dict[str, Any]]:
    """The document's body as plain data: ``{"index", "type": "paragraph", "style", "text"}``
    or ``{"index", "type": "table", "rows": [[cell text, ...], ...]}`` (parsed once per grade)."""
    return parse_once("docx blocks", path, lambda p: describe(_graded_document(p)))


def _graded_document(path: Path | str) -> Document:
    """The parsed document, shared by the readers of one grade (they only read it)."""
    return parse_once("docx", path, load_document, copy_result=False)


def describe(doc: Document) -> list[dict[str, Any]]:
    out = []
    names = StyleNames(doc)
    for i, b in enumerate(blocks(doc)):
        if isinstance(b, Paragraph):
            out.append({"index": i, "type": "paragraph", "style": names.of(b), "text": paragraph_text(b)})
        else:
            out.append({"index": i, "type": "table", "rows": table_rows(b)})
    return out


def read_comments(path: Path | str) -> list[dict[str, Any]]:
    return comments(_graded_document(path))


def norm(text: Any) -> str:
    """Case-, dash- and whitespace-insensitive form of a text, for tolerant comparisons."""
    s = str(text or "").replace("\u2013", "-").replace("\u2014", "-").replace("\u2019", "'")
    return " ".join(s.split()).lower()


def sections(doc_blocks: list[dict[str, Any]], level: str = "Heading 1") -> list[tuple[dict, list[dict]]]:
    """Split blocks into (heading block, blocks under it) at every paragraph of style ``level``
    (or a higher heading). Blocks before the first such heading are dropped."""
    rank = _heading_rank(level)
    out: list[tuple[dict, list[dict]]] = []
    for b in doc_blocks:
        r = _heading_rank(b.get("style", "")) if b["type"] == "paragraph" else None
        if r is not None and r <= rank:
            out.append((b, []))
        elif out:
            out[-1][1].append(b)
    return out


_HEADING = re.compile(r"^heading (\d)$")


def _heading_rank(style: str) -> int | None:
    s = norm(style)
    if s == "title":
        return 0
    m = _HEADING.match(s)
    return int(m.group(1)) if m else None
