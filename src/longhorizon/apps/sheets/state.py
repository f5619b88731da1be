"""Sheets state: xlsx files in the workspace, saved byte-deterministically, and a small formula evaluator.

openpyxl keeps formulas as text and never computes them, so the app (to show computed values)
and graders (to accept formula answers) share ``Evaluator``: numbers, strings, booleans, cell
and range references (also ``'Other Sheet'!B3`` and whole columns ``A:A``), arithmetic,
comparisons, ``&``, and a handful of common functions. Anything else evaluates to None, meaning
"not known", never a guess.

Formulas are agent input, and Python's big integers and strings grow without a bound, in C
calls that no timeout can interrupt (``=999999999^999999999`` never returns). So the evaluator
computes within Excel's own limits: a number past the float range is ``#NUM!``, text past
32,767 characters ``#VALUE!`` (both propagate to the formulas that use them, as in Excel), and
within a work budget per Evaluator (formulas evaluated, reference depth, range cells, text
characters); past that budget a formula is "not computed" (None). Files are loaded within the
office budgets of core/office_budget.py, plus the cells openpyxl makes for merged and linked
ranges (``MAX_SPANNED_CELLS``).
"""

from __future__ import annotations

import datetime as _dt
import io
import math
import os
import re
import zipfile
from decimal import ROUND_HALF_UP, Context, Decimal
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, BinaryIO

import openpyxl
from lxml import etree
from openpyxl.utils.cell import column_index_from_string, get_column_letter, range_boundaries
from openpyxl.workbook import Workbook
from openpyxl.drawing.spreadsheet_drawing import SpreadsheetDrawing
from openpyxl.worksheet._writer import WorksheetWriter
from openpyxl.writer.excel import ExcelWriter

from longhorizon.core.office_budget import OfficeBudgetError, office_bytes, read_office
from longhorizon.core.parse_cache import parse_once, shared_parse

FIXED_TIME = _dt.datetime(2024, 1, 1, 0, 0, 0)
"""Stamped as created/modified on every saved workbook, so equal content means equal bytes."""
ZIP_TIME = (1980, 1, 1, 0, 0, 0)

MAX_ROW = 1_048_576
MAX_COL = 16_384
SHEET_TITLE_BAD = set('[]:*?/\\')


# -- files ---------------------------------------------------------------------------------------


class _PinnedZip(zipfile.ZipFile):
    """A zip whose entries all get pinned times and modes as they are written (the names and
    order openpyxl writes, deflated at the default level): the bytes the former save-then-copy
    gave, in one compression pass."""

    def writestr(self, zinfo_or_arcname, data, *args, **kwargs):
        name = zinfo_or_arcname.filename if isinstance(zinfo_or_arcname, zipfile.ZipInfo) else zinfo_or_arcname
        fixed = zipfile.ZipInfo(name, date_time=ZIP_TIME)
        fixed.compress_type = zipfile.ZIP_DEFLATED
        fixed.external_attr = 0o644 << 16
        super().writestr(fixed, data)

    def write(self, filename, arcname=None, *args, **kwargs):
        with open(filename, "rb") as f:
            self.writestr(arcname or filename, f.read())


class _MemoryExcelWriter(ExcelWriter):
    """openpyxl's writer with each worksheet's XML built in memory: its own writer puts every
    sheet in a named temporary file (created, read back and removed on every save: on a
    disk-backed /tmp the removal alone cost ~2 ms a sheet)."""

    def write_worksheet(self, ws):
        if self.workbook.write_only:  # pragma: no cover - workbooks here are never write-only
            return super().write_worksheet(ws)
        ws._drawing = SpreadsheetDrawing()  # noqa: SLF001 - as ExcelWriter.write_worksheet does
        ws._drawing.charts = ws._charts  # noqa: SLF001
        ws._drawing.images = ws._images  # noqa: SLF001
        writer = WorksheetWriter(ws, out=io.BytesIO())
        writer.write()
        ws._rels = writer._rels  # noqa: SLF001
        self._archive.writestr(ws.path[1:], writer.read())
        self.manifest.append(ws)


def workbook_bytes(wb: Workbook) -> bytes:
    """The xlsx bytes of ``wb``, identical for identical content.

    openpyxl stamps the save time into docProps/core.xml and into every zip entry; both are
    pinned here (created/modified and entry times are constants), in one pass (``_PinnedZip``,
    worksheets built in memory: ``_MemoryExcelWriter``).
    """
    wb.properties.created = FIXED_TIME
    wb.properties.modified = FIXED_TIME
    out = io.BytesIO()
    with _PinnedZip(out, "w", zipfile.ZIP_DEFLATED) as archive:
        _MemoryExcelWriter(wb, archive).write_data()
    return out.getvalue()


def workbook_bytes_two_pass(wb: Workbook) -> bytes:
    """``workbook_bytes`` as it was: openpyxl's own save, then every entry copied with pinned
    times. Kept so tests can show both give the same bytes."""
    wb.properties.created = FIXED_TIME
    wb.properties.modified = FIXED_TIME
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
        ExcelWriter(wb, archive).write_data()
    out = io.BytesIO()
    with zipfile.ZipFile(raw) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=ZIP_TIME)
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = 0o644 << 16
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


def save_workbook(wb: Workbook, path: Path | str) -> None:
    """Write ``wb`` to ``path`` byte-deterministically (see ``workbook_bytes``).

    Written next to the target and moved into place, so a crash never leaves half a workbook.
    """
    path = Path(path)
    data = workbook_bytes(wb)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def reloads_exactly(value: Any) -> bool:
    """Whether a cell value the app stores reads back from the saved file as the same value of
    the same type: openpyxl writes numbers as ``"%.16g"`` and reads text with a point or an
    exponent as a float, else as an int (so 1.0 comes back as 1, -0.0 as 0, 10**17 as 1e+17,
    0.1 + 0.2 as 0.3), and writes "" as an empty cell (back as None). Text, formulas, booleans
    and None come back as they were."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        return value != ""
    if type(value) not in (int, float):
        return False
    text = "%.16g" % value
    back = float(text) if ("." in text or "e" in text or "E" in text) else int(text)
    return type(back) is type(value) and back == value and (math.copysign(1.0, back) == math.copysign(1.0, value))


def all_reload_exactly(wb: Workbook) -> bool:
    """``reloads_exactly`` for every cell of ``wb`` (a loaded file may hold values that do not:
    dates, 17-digit floats written by another program)."""
    return all(reloads_exactly(cell._value) for ws in wb.worksheets for cell in ws._cells.values())  # noqa: SLF001


def forget_save_state(wb: Workbook) -> None:
    """Undo what openpyxl's writer leaves behind in a workbook it saved and a reload of the
    file would not have: the column outline level it computes while writing, which the next
    save would then write out (``outlineLevelCol="0"``). After this, saving ``wb`` again gives
    what saving a reload of the file gives (tests/apps/test_sheets_edit_cache.py)."""
    for ws in wb.worksheets:
        ws.column_dimensions.max_outline = None


MAX_SPANNED_CELLS = 100_000
"""Cells the merged ranges and linked ranges (hyperlinks) of one workbook may cover: openpyxl
makes an object for every cell they cover while loading (one merge of A1:XFD1048576 is 17
billion), so they are counted in the file's bytes before it is parsed."""


class _SpannedCells:
    """``office_bytes``'s ``inspect`` for workbooks: refuses one whose merged and linked
    ranges cover more than ``MAX_SPANNED_CELLS`` cells, counted in every part that names them
    (read by lxml as a stream of start tags, no tree built; a whole-column range counts every
    row)."""

    def __init__(self):
        self.total = 0

    def __call__(self, part: str, content: bytes) -> None:
        if b"mergeCell" not in content and b"hyperlink" not in content:
            return
        parser = etree.XMLParser(target=self, resolve_entities=False, no_network=True, huge_tree=True)
        try:
            etree.fromstring(content, parser)
        except etree.XMLSyntaxError as exc:
            raise OfficeBudgetError(f"has part {part!r} that is not well-formed XML ({exc}); it was not opened") from None

    def start(self, tag: str, attrib) -> None:
        if tag.rpartition("}")[2] in ("mergeCell", "hyperlink"):
            self.total += _area(attrib.get("ref", ""))
            if self.total > MAX_SPANNED_CELLS:
                raise OfficeBudgetError(f"merges or links ranges covering more than {MAX_SPANNED_CELLS:,} cells, "
                                        "more than a workbook may here (openpyxl makes an object for each); "
                                        "it was not opened")

    def close(self) -> None:
        return None


def _area(ref: str) -> int:
    """Cells in a range reference like 'A1:C3' or 'A:C' (whole columns count every row)."""
    try:
        c1, r1, c2, r2 = range_boundaries(ref.rpartition("!")[2].strip())
    except (ValueError, TypeError):
        return 0  # openpyxl cannot read it either: the load fails
    c1, c2 = c1 or 1, c2 or MAX_COL
    r1, r2 = r1 or 1, r2 or MAX_ROW
    return (abs(c2 - c1) + 1) * (abs(r2 - r1) + 1)


def load_workbook(path: Path | str | BinaryIO) -> Workbook:
    """Open an xlsx (a path, or an open binary file) with formulas kept as their ``=...`` text
    (we compute them ourselves), within the office budgets (``OfficeBudgetError`` past them)."""
    data = office_bytes(path, ".xlsx", inspect=_SpannedCells())
    return openpyxl.load_workbook(io.BytesIO(data), data_only=False)


def read_workbook(path: Path | str) -> Workbook:
    """``load_workbook`` for graders: parsed once per grade and shared by its checks, which
    only read it (see core/parse_cache.py)."""
    return parse_once("xlsx", path, _load_shared, copy_result=False)


def _load_shared(path: Path | str) -> Workbook:
    """A workbook file's parse, shared with every reader of the same bytes (the sheets app's
    reads, other episodes' graders: core/parse_cache.shared_parse); none of them changes it.
    Its bytes are read up to the office file budget and checked by ``load_workbook``."""
    return shared_parse(".xlsx", read_office(path, ".xlsx"), load_workbook)


def find_sheet(wb: Workbook, name: str):
    """The worksheet called ``name`` (exact, then case-insensitive as Excel does), or None."""
    if name in wb.sheetnames:
        return wb[name]
    for title in wb.sheetnames:
        if title.lower() == name.lower():
            return wb[title]
    return None


def is_formula(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("=") and len(value) > 1


def cell_value(path: Path | str, sheet: str, coord: str) -> Any:
    """The value a reader sees in ``sheet!coord``: a formula's computed value (None when the
    evaluator cannot compute it), otherwise the stored value. For graders."""
    return Evaluator(load_workbook(path)).value(sheet, coord)


def evaluate(wb: Workbook, sheet: str, coord: str) -> Any:
    """Computed value of the formula in ``sheet!coord`` (or the plain value); None if unsupported."""
    return Evaluator(wb).value(sheet, coord)


MAX_GRID_CELLS = 4_000_000
"""The largest used range ``sheet_values`` lays out (a value at XFD1048576 alone spans 17
billion cells)."""


def sheet_values(wb: Workbook, sheet: str) -> list[list[Any]]:
    """Every row of the used range of ``sheet`` with formulas replaced by computed values
    (row by row, as a reader goes). ValueError past ``MAX_GRID_CELLS``."""
    ev = Evaluator(wb)
    ws = find_sheet(wb, sheet)
    if ws is None:
        raise KeyError(sheet)
    bounds = used_bounds(ws)
    if bounds is None:
        return []
    _, _, max_col, max_row = bounds
    if max_col * max_row > MAX_GRID_CELLS:
        raise ValueError(f"sheet {ws.title!r} spans {max_row:,} rows by {max_col:,} columns (to "
                         f"{get_column_letter(max_col)}{max_row}), more than {MAX_GRID_CELLS:,} cells to read")
    grid: list[list[Any]] = [[None] * max_col for _ in range(max_row)]
    for r, c in sorted(k for k, cell in ws._cells.items() if cell.value is not None):  # noqa: SLF001
        grid[r - 1][c - 1] = ev.value_at(ws.title, r, c)
    return grid


def used_bounds(ws) -> tuple[int, int, int, int] | None:
    """(1, 1, max_col, max_row): the block from A1 to the last cell holding a value, or None
    for an empty sheet. Shaped like openpyxl's ``range_boundaries`` (col, row, col, row).

    Scans values instead of trusting openpyxl's dimensions, which still count cleared cells.
    """
    rows = [r for (r, c), cell in ws._cells.items() if cell.value is not None]
    if not rows:
        return None
    cols = [c for (r, c), cell in ws._cells.items() if cell.value is not None]
    return 1, 1, max(cols), max(rows)


# -- formula evaluation --------------------------------------------------------------------------


class Unsupported(Exception):
    """Raised inside the evaluator for anything it cannot compute; surfaces as None."""


class OverBudget(Unsupported):
    """The Evaluator's work budget is spent (or references nest too deep): surfaces as None,
    and is not remembered for the cell, since it depends on what was evaluated before."""


class CellError(Unsupported):
    """An Excel error value the formula evaluates to (``code``: "#NUM!", "#VALUE!"), as Excel
    gives past its limits; it propagates to every formula that uses the cell."""

    def __init__(self, code: str, why: str):
        super().__init__(code, why)
        self.code = code


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"]|"")*")
  | (?P<ref>(?:(?:'(?:[^']|'')+'|[A-Za-z_][A-Za-z0-9_.]*)!)?
        (?:\$?[A-Za-z]{1,3}\$?[0-9]+(?::\$?[A-Za-z]{1,3}\$?[0-9]+)?|\$?[A-Za-z]{1,3}:\$?[A-Za-z]{1,3})
        (?![A-Za-z0-9_(]))
  | (?P<func>[A-Za-z][A-Za-z0-9_.]*(?=\s*\())
  | (?P<bool>(?:TRUE|FALSE)(?![A-Za-z0-9_]))
  | (?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?%?)
  | (?P<op><>|<=|>=|[-+*/^&=<>(),:])
    """,
    re.VERBOSE | re.IGNORECASE,
)

_CELL = re.compile(r"^\$?([A-Za-z]{1,3})\$?([0-9]+)$")
_COLS = re.compile(r"^\$?([A-Za-z]{1,3}):\$?([A-Za-z]{1,3})$")


def parse_cell(coord: str) -> tuple[int, int]:
    """'B3' / '$B$3' -> (row 3, column 2); ValueError when it is not a cell inside Excel's grid."""
    m = _CELL.match(coord.strip())
    if not m:
        raise ValueError(f"{coord!r} is not a cell reference like 'B3'")
    col = column_index_from_string(m.group(1).upper())
    row = int(m.group(2))
    if not (1 <= row <= MAX_ROW and 1 <= col <= MAX_COL):
        raise ValueError(f"{coord!r} is outside the sheet (rows 1-{MAX_ROW}, columns A-XFD)")
    return row, col


def _tokenize(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise Unsupported(f"cannot read formula at {text[pos:pos + 10]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group()))
    return out


class _Range:
    """A rectangular block of values read from one sheet (row-major)."""

    def __init__(self, rows: list[list[Any]]):
        self.rows = rows

    def flat(self) -> list[Any]:
        return [v for row in self.rows for v in row]

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.rows[0]) if self.rows else 0


MAX_RANGE_CELLS = 1_000_000
EVALUATION_BUDGET_CELLS = 4_000_000
"""Cells all the ranges of one Evaluator may span together: an agent's workbook of many formulas
over huge ranges would otherwise keep a tool (or a grader) computing for hours."""
EVALUATION_BUDGET_CHARS = 64_000_000
"""Characters of text one Evaluator may read through ranges and build with ``&``: what the
criteria of COUNTIF and the like scan, and what its remembered results hold."""
EVALUATION_BUDGET_FORMULA_CHARS = 2_000_000
"""Formula text one Evaluator may read, each evaluation counted as its length plus
``FORMULA_OVERHEAD`` (each cell is evaluated once, unless a depth failure makes it again)."""
FORMULA_OVERHEAD = 32
MAX_DEPTH = 64
"""References nested in one evaluation (A1 uses A2, which uses A3, ...): below Python's own
recursion limit wherever the Evaluator is called from, so every caller gets the same answer."""
MAX_FORMULA_CHARS = 8_192
"""Excel's limit on a formula's length; a longer one is not computed."""
MAX_TEXT = 32_767
"""Excel's limit on a cell's text: longer text in a formula is ``#VALUE!``."""
MAX_CRITERION = 255
"""Excel's limit on a COUNTIF-style criterion's text: longer is ``#VALUE!``."""


class Evaluator:
    """Computes formula cells of one workbook, memoising results (and failures) and refusing
    cycles, within the work budgets above: past any of them a formula evaluates to None."""

    def __init__(self, wb: Workbook):
        self.wb = wb
        self._memo: dict[tuple[str, int, int], Any] = {}
        self._failed: dict[tuple[str, int, int], Unsupported] = {}
        self._active: set[tuple[str, int, int]] = set()
        self._budget = EVALUATION_BUDGET_CELLS
        self._chars = EVALUATION_BUDGET_CHARS
        self._formula_chars = EVALUATION_BUDGET_FORMULA_CHARS

    # public ---------------------------------------------------------------------------------
    def value(self, sheet: str, coord: str) -> Any:
        """Computed value at ``sheet!coord``: plain values as stored, formulas evaluated, an
        Excel error value ("#NUM!", "#VALUE!") past Excel's limits, or None (not computed)."""
        ws = find_sheet(self.wb, sheet)
        if ws is None:
            return None
        try:
            row, col = parse_cell(coord)
        except ValueError:
            return None
        return self.value_at(ws.title, row, col)

    def value_at(self, title: str, row: int, col: int) -> Any:
        """``value`` of the cell at (row, col) of the sheet titled exactly ``title``."""
        try:
            return self._cell(title, row, col)
        except CellError as exc:
            return exc.code
        except (Unsupported, RecursionError):
            return None

    def formula(self, sheet: str, text: str) -> Any:
        """Evaluate formula ``text`` (with or without '=') as if it sat on ``sheet``; None if unsupported."""
        try:
            return _finite(_scalar(self._eval_text(sheet, text.lstrip("="))))
        except CellError as exc:
            return exc.code
        except (Unsupported, RecursionError):
            return None

    # internals ------------------------------------------------------------------------------
    def _cell(self, sheet: str, row: int, col: int) -> Any:
        key = (sheet, row, col)
        if key in self._memo:
            return self._memo[key]
        if key in self._failed:
            failed = self._failed[key]
            raise type(failed)(*failed.args)
        ws = self.wb[sheet]
        raw = ws._cells[(row, col)].value if (row, col) in ws._cells else None
        if not isinstance(raw, str) or not is_formula(raw):
            if raw is not None and not isinstance(raw, (str, int, float, bool, _dt.datetime, _dt.date)):
                raise Unsupported(f"cell holds {type(raw).__name__}")  # array formulas and the like
            return raw
        if key in self._active:
            raise Unsupported("circular reference")
        if len(self._active) >= MAX_DEPTH:
            raise OverBudget(f"references nest more than {MAX_DEPTH} deep")
        self._formula_chars -= len(raw) + FORMULA_OVERHEAD
        if self._formula_chars < 0:
            raise OverBudget("the workbook's formulas are too many or too long to evaluate")
        self._active.add(key)
        try:
            result = _finite(_scalar(self._eval_text(sheet, raw[1:])))
        except OverBudget:
            raise
        except Unsupported as exc:  # the same whenever it is evaluated: remembered
            self._failed[key] = type(exc)(*exc.args)
            raise
        finally:
            self._active.discard(key)
        self._memo[key] = result
        return result

    def _eval_text(self, sheet: str, text: str) -> Any:
        if len(text) >= MAX_FORMULA_CHARS:
            raise Unsupported(f"formula longer than Excel's {MAX_FORMULA_CHARS:,} characters")
        tokens = _tokenize(text)
        parser = _Parser(tokens, self, sheet)
        try:
            result = parser.expression()
        except OverflowError:
            raise CellError("#NUM!", "a number past the float range") from None
        except (ArithmeticError, ValueError) as exc:  # e.g. decimal's, or a reference past the grid
            raise Unsupported(f"{type(exc).__name__}: {exc}") from None
        if parser.pos != len(tokens):
            raise Unsupported(f"unexpected {tokens[parser.pos][1]!r}")
        return result

    def _operand(self, sheet: str, row: int, col: int) -> Any:
        """A cell's value as a formula reads it: text within Excel's limit, counted against
        the text budget."""
        v = self._cell(sheet, row, col)
        if isinstance(v, str):
            if len(v) > MAX_TEXT:
                raise CellError("#VALUE!", f"text longer than {MAX_TEXT:,} characters")
            self._spend_chars(len(v))
        return v

    def _spend_chars(self, n: int) -> None:
        self._chars -= n
        if self._chars < 0:
            raise OverBudget(f"the workbook's formulas read more than {EVALUATION_BUDGET_CHARS:,} characters")

    def _ref(self, sheet: str, text: str) -> Any:
        if "!" in text:
            name, _, text = text.rpartition("!")
            if name.startswith("'"):
                name = name[1:-1].replace("''", "'")
            ws = find_sheet(self.wb, name)
            if ws is None:
                raise Unsupported(f"no sheet {name!r}")
            sheet = ws.title
        ws = self.wb[sheet]
        m = _COLS.match(text)
        if m:
            c1 = column_index_from_string(m.group(1).upper())
            c2 = column_index_from_string(m.group(2).upper())
            bounds = used_bounds(ws)
            max_row = bounds[3] if bounds else 1
            return self._block(sheet, 1, min(c1, c2), max_row, max(c1, c2))
        if ":" in text:
            a, b = text.split(":")
            r1, c1 = parse_cell(a)
            r2, c2 = parse_cell(b)
            return self._block(sheet, min(r1, r2), min(c1, c2), max(r1, r2), max(c1, c2))
        row, col = parse_cell(text)
        return self._operand(sheet, row, col)

    def _block(self, sheet: str, r1: int, c1: int, r2: int, c2: int) -> _Range:
        size = (r2 - r1 + 1) * (c2 - c1 + 1)
        if size > MAX_RANGE_CELLS:
            raise Unsupported("range too large")
        self._budget -= size
        if self._budget < 0:
            raise OverBudget("the workbook's formulas span too many cells to evaluate")
        return _Range([[self._operand(sheet, r, c) for c in range(c1, c2 + 1)] for r in range(r1, r2 + 1)])


class _Parser:
    """Recursive descent over Excel's precedence: comparison < & < +- < */ < ^ < unary < atom."""

    def __init__(self, tokens, ev: Evaluator, sheet: str):
        self.tokens, self.ev, self.sheet, self.pos = tokens, ev, sheet, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise Unsupported(f"expected {value or 'more'}")
        self.pos += 1
        return tok

    def at_op(self, *ops: str) -> str | None:
        tok = self.peek()
        return tok[1] if tok and tok[0] == "op" and tok[1] in ops else None

    def expression(self) -> Any:
        left = self.concat()
        while op := self.at_op("=", "<>", "<", ">", "<=", ">="):
            self.take()
            left = _compare(op, _scalar(left), _scalar(self.concat()))
        return left

    def concat(self) -> Any:
        left = self.additive()
        while self.at_op("&"):
            self.take()
            a, b = _text(_scalar(left)), _text(_scalar(self.additive()))
            if len(a) + len(b) > MAX_TEXT:
                raise CellError("#VALUE!", f"text longer than {MAX_TEXT:,} characters")
            self.ev._spend_chars(len(a) + len(b))
            left = a + b
        return left

    def additive(self) -> Any:
        left = self.term()
        while op := self.at_op("+", "-"):
            self.take()
            a, b = _num(_scalar(left)), _num(_scalar(self.term()))
            left = _finite(a + b if op == "+" else a - b)
        return left

    def term(self) -> Any:
        left = self.power()
        while op := self.at_op("*", "/"):
            self.take()
            a, b = _num(_scalar(left)), _num(_scalar(self.power()))
            if op == "/" and b == 0:
                raise Unsupported("division by zero")
            left = _finite(a * b if op == "*" else a / b)
        return left

    def power(self) -> Any:
        left = self.unary()
        while self.at_op("^"):
            self.take()
            left = _power(_num(_scalar(left)), _num(_scalar(self.unary())))
        return left

    def unary(self) -> Any:
        if op := self.at_op("-", "+"):
            self.take()
            v = _num(_scalar(self.unary()))
            return -v if op == "-" else v
        return self.atom()

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "number":
            pct = text.endswith("%")
            v = _finite(float(text.rstrip("%")))
            v = v / 100 if pct else v
            return int(v) if v.is_integer() and "." not in text and "e" not in text.lower() and not pct else v
        if kind == "string":
            return text[1:-1].replace('""', '"')
        if kind == "bool":
            return text.upper() == "TRUE"
        if kind == "ref":
            return self.ev._ref(self.sheet, text)
        if kind == "func":
            name = text.upper()
            self.take("(")
            args: list[Any] = []
            if not self.at_op(")"):
                args.append(self.expression())
                while self.at_op(","):
                    self.take()
                    args.append(self.expression())
            self.take(")")
            fn = _FUNCTIONS.get(name)
            if fn is None:
                raise Unsupported(f"function {name} is not supported")
            return fn(args)
        if kind == "op" and text == "(":
            v = self.expression()
            self.take(")")
            return v
        raise Unsupported(f"unexpected {text!r}")


# -- value helpers -------------------------------------------------------------------------------


def _scalar(v: Any) -> Any:
    if isinstance(v, _Range):
        if v.shape == (1, 1):
            return v.rows[0][0]
        raise Unsupported("a range where one value was expected")
    return v


def _num(v: Any) -> int | float:
    if v is None:
        return 0
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return _finite(v)
    if isinstance(v, str):
        try:
            x = float(v.strip().replace(",", "")) if v.strip() else 0
        except ValueError:
            raise Unsupported(f"{v!r} is not a number") from None
        if not math.isfinite(x):  # "inf", "nan", "1e999": text Excel does not read as a number
            raise Unsupported(f"{v!r} is not a number")
        return x
    raise Unsupported(f"{type(v).__name__} is not a number")


def _finite(v: Any) -> Any:
    """``v``, when it is a number within Excel's (the float) range; ``#NUM!`` otherwise.
    Integers stay exact below that bound (at most 1,024 bits, so every operation on them is
    cheap); other values pass through."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        if v.bit_length() > 1024:
            raise CellError("#NUM!", "a number past the float range")
        try:
            float(v)
        except OverflowError:
            raise CellError("#NUM!", "a number past the float range") from None
    elif isinstance(v, float) and not math.isfinite(v):
        raise CellError("#NUM!", "a number past the float range")
    return v


def _power(a: int | float, b: int | float) -> int | float:
    """``a ^ b`` within the float range, its size told before it is computed: an integer
    power is computed exactly only when its result has at most ~2,048 bits."""
    if isinstance(a, int) and isinstance(b, int) and b >= 0 and abs(a) > 1:
        if (abs(a).bit_length() - 1) * b >= 1024:  # |a|^b >= 2^1024
            raise CellError("#NUM!", "a number past the float range")
        return _finite(a ** b)
    try:
        result = a ** b  # float arithmetic (or a tiny integer one): bounded time
    except OverflowError:
        raise CellError("#NUM!", "a number past the float range") from None
    except ZeroDivisionError as exc:
        raise Unsupported(str(exc)) from None
    if isinstance(result, complex):
        raise Unsupported("complex result")
    return _finite(result)


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _truthy(v: Any) -> bool:
    v = _scalar(v)
    if isinstance(v, str):
        if v.upper() in ("TRUE", "FALSE"):
            return v.upper() == "TRUE"
        raise Unsupported("text used as a condition")
    return bool(_num(v))


def _compare(op: str, a: Any, b: Any) -> bool:
    def key(v: Any) -> tuple[int, Any]:  # Excel orders numbers < text < booleans
        if v is None:
            return (0, 0)
        if isinstance(v, bool):
            return (2, v)
        if isinstance(v, (int, float)):
            return (0, v)
        if isinstance(v, str):
            return (1, v.lower())
        raise Unsupported("cannot compare dates")
    if a is None and isinstance(b, str):
        a = ""
    if b is None and isinstance(a, str):
        b = ""
    ka, kb = key(a), key(b)
    return {
        "=": ka == kb, "<>": ka != kb, "<": ka < kb, ">": ka > kb, "<=": ka <= kb, ">=": ka >= kb,
    }[op]


def _numbers(args: list[Any]) -> list[float]:
    """Numbers for SUM-like functions: ranges contribute their numeric cells only; direct
    arguments are coerced (as Excel does)."""
    out: list[float] = []
    for a in args:
        if isinstance(a, _Range):
            out.extend(v for v in a.flat() if isinstance(v, (int, float)) and not isinstance(v, bool))
        else:
            out.append(_num(a))
    return out


def _round(args: list[Any]) -> float:
    if not 1 <= len(args) <= 2:
        raise Unsupported("ROUND takes 1 or 2 arguments")
    x = _num(_scalar(args[0]))
    digits = int(_num(_scalar(args[1]))) if len(args) == 2 else 0
    digits = max(-400, min(400, digits))  # past the float range either way: the same result
    q = Decimal(1).scaleb(-digits)
    r = float(Decimal(repr(x)).quantize(q, rounding=ROUND_HALF_UP, context=_ROUND_CONTEXT))
    return int(r) if digits <= 0 else r


_ROUND_CONTEXT = Context(prec=1_000)
"""Enough digits to round any float at any place from 10^-400 to 10^400 (the default 28 would
refuse ROUND(1.5, 40))."""


def _criterion(crit: Any):
    """SUMIF-style criterion -> predicate over cell values."""
    crit = _scalar(crit)
    if isinstance(crit, (int, float)) and not isinstance(crit, bool):
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v == crit
    if isinstance(crit, bool):
        return lambda v: v is crit
    text = _text(crit)
    if len(text) > MAX_CRITERION:
        raise CellError("#VALUE!", f"a criterion longer than {MAX_CRITERION} characters")
    op = "="
    for candidate in ("<=", ">=", "<>", "<", ">", "="):
        if text.startswith(candidate):
            op, text = candidate, text[len(candidate):]
            break
    try:
        target: Any = float(text)
    except ValueError:
        target = text.lower()
    if isinstance(target, float):
        def numeric(v: Any) -> bool:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return op == "<>"
            return _compare(op, v, target)
        return numeric
    if op in ("=", "<>"):
        def textual(v: Any) -> bool:
            s = "" if v is None else _text(v).lower()
            hit = fnmatchcase(s, target.replace("[", "[[]")) if ("*" in target or "?" in target) else s == target
            return hit if op == "=" else not hit
        return textual
    return lambda v: isinstance(v, str) and _compare(op, v.lower(), target)


def _pairs(args: list[Any]) -> list[tuple[_Range, Any]]:
    if len(args) % 2:
        raise Unsupported("criteria come in range, criterion pairs")
    pairs = []
    for rng, crit in zip(args[::2], args[1::2]):
        if not isinstance(rng, _Range):
            raise Unsupported("criteria range must be a range")
        pairs.append((rng, _criterion(crit)))
    return pairs


def _matching(target: _Range, pairs: list[tuple[_Range, Any]]) -> list[Any]:
    if any(rng.shape != target.shape for rng, _ in pairs):
        raise Unsupported("criteria ranges must be the same size")
    columns = [(rng.flat(), pred) for rng, pred in pairs]
    return [v for i, v in enumerate(target.flat()) if all(pred(flat[i]) for flat, pred in columns)]


def _only_nums(vals: list[Any]) -> list[float]:
    return [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _sumif(args: list[Any]) -> float:
    if len(args) not in (2, 3):
        raise Unsupported("SUMIF takes 2 or 3 arguments")
    rng = args[0]
    target = args[2] if len(args) == 3 else rng
    if not isinstance(target, _Range):
        raise Unsupported("SUMIF sums a range")
    return sum(_only_nums(_matching(target, _pairs([rng, args[1]]))))


def _averageif(args: list[Any]) -> float:
    if len(args) not in (2, 3):
        raise Unsupported("AVERAGEIF takes 2 or 3 arguments")
    target = args[2] if len(args) == 3 else args[0]
    if not isinstance(target, _Range):
        raise Unsupported("AVERAGEIF averages a range")
    vals = _only_nums(_matching(target, _pairs([args[0], args[1]])))
    if not vals:
        raise Unsupported("AVERAGEIF of nothing")
    return sum(vals) / len(vals)


def _ifs_target(args: list[Any], name: str) -> tuple[_Range, list]:
    if len(args) < 3 or not isinstance(args[0], _Range):
        raise Unsupported(f"{name} takes a range then range, criterion pairs")
    return args[0], _pairs(args[1:])


def _averageifs(args: list[Any]) -> float:
    target, pairs = _ifs_target(args, "AVERAGEIFS")
    vals = _only_nums(_matching(target, pairs))
    if not vals:
        raise Unsupported("AVERAGEIFS of nothing")
    return sum(vals) / len(vals)


def _countifs(args: list[Any]) -> int:
    pairs = _pairs(args)
    if not pairs:
        raise Unsupported("COUNTIFS needs criteria")
    return len(_matching(pairs[0][0], pairs))


def _average(args: list[Any]) -> float:
    nums = _numbers(args)
    if not nums:
        raise Unsupported("AVERAGE of nothing")
    return sum(nums) / len(nums)


def _if(args: list[Any]) -> Any:
    if not 2 <= len(args) <= 3:
        raise Unsupported("IF takes 2 or 3 arguments")
    if _truthy(args[0]):
        return _scalar(args[1])
    return _scalar(args[2]) if len(args) == 3 else False


def _counta(args: list[Any]) -> int:
    n = 0
    for a in args:
        vals = a.flat() if isinstance(a, _Range) else [a]
        n += sum(1 for v in vals if v is not None and v != "")
    return n


def _one(name: str, fn):
    def call(args: list[Any]) -> Any:
        if len(args) != 1:
            raise Unsupported(f"{name} takes one argument")
        return fn(_num(_scalar(args[0])))
    return call


def _logic(args: list[Any]) -> list[bool]:
    out = []
    for a in args:
        vals = a.flat() if isinstance(a, _Range) else [a]
        out.extend(_truthy(v) for v in vals if v is not None)
    if not out:
        raise Unsupported("no logical values")
    return out


def _not(args: list[Any]) -> bool:
    if len(args) != 1:
        raise Unsupported("NOT takes one argument")
    return not _truthy(args[0])


def _countif(args: list[Any]) -> int:
    if len(args) != 2:
        raise Unsupported("COUNTIF takes 2 arguments")
    return _countifs(args)


_FUNCTIONS = {
    "SUM": lambda a: sum(_numbers(a)),
    "AVERAGE": _average,
    "MIN": lambda a: min(_numbers(a), default=0),
    "MAX": lambda a: max(_numbers(a), default=0),
    "COUNT": lambda a: sum(
        len(_only_nums(x.flat())) if isinstance(x, _Range) else int(isinstance(x, (int, float)) and not isinstance(x, bool))
        for x in a
    ),
    "COUNTA": _counta,
    "ROUND": _round,
    "ABS": _one("ABS", abs),
    "IF": _if,
    "AND": lambda a: all(_logic(a)),
    "OR": lambda a: any(_logic(a)),
    "NOT": _not,
    "SUMIF": _sumif,
    "SUMIFS": lambda a: sum(_only_nums(_matching(*_ifs_target(a, "SUMIFS")))),
    "COUNTIF": _countif,
    "COUNTIFS": _countifs,
    "AVERAGEIF": _averageif,
    "AVERAGEIFS": _averageifs,
}
