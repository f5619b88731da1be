"""The `sheets` app: xlsx workbooks in the workspace, read and edited cell by cell.

Every path is confined to the workspace; every bad argument (missing file, unknown sheet,
malformed range) comes back as a ToolError that says how to fix it. Formulas are stored as
their text, as Excel would, and shown with the value our evaluator computes for them.
"""

from __future__ import annotations

import builtins
import datetime as _dt
import json
import threading
import weakref
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from openpyxl import Workbook
from openpyxl.utils.cell import column_index_from_string, get_column_letter

from longhorizon.apps.common import ADD, READ, SET, AppServer, OfficeFiles, WorkspacePath, cap, server_builder
from longhorizon.apps.sheets.state import (
    MAX_COL,
    MAX_ROW,
    SHEET_TITLE_BAD,
    Evaluator,
    all_reload_exactly,
    forget_save_state,
    is_formula,
    load_workbook,
    parse_cell,
    reloads_exactly,
    used_bounds,
    workbook_bytes,
)

MAX_READ_CELLS = 2_000
"""read_range returns at most this many cells per call and says which range to read next."""
MAX_READ_CHARS = 16_000
"""...and at most about this many characters, so the JSON never needs cutting."""
MAX_WRITE_CELLS = 10_000
MAX_CLEAR_CELLS = 100_000

Value = str | float | int | bool | None


def _json(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _show(v: Any) -> Any:
    """A cell value as JSON: dates as ISO text, floats without binary noise."""
    if isinstance(v, _dt.datetime):
        return v.date().isoformat() if v.time() == _dt.time(0) else v.isoformat(sep=" ")
    if isinstance(v, (_dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, _dt.timedelta):
        return str(v)
    if isinstance(v, float):
        r = round(v, 10)
        return int(r) if r.is_integer() and abs(r) < 1e15 else r
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return str(v)


def parse_range(text: str, ws=None) -> tuple[int, int, int, int]:
    """'A1:C10', 'B3', 'A:C' (whole columns, up to the last used row) -> (min_col, min_row, max_col, max_row)."""
    if not isinstance(text, str) or not text.strip():
        raise ToolError("range must be text like 'A1:D20' (or 'B3' for one cell, 'A:C' for whole columns)")
    t = text.strip()
    if "!" in t:  # "Data!A1:B2" is fine when it names the sheet being read
        name, _, t = t.rpartition("!")
        name = name.strip().strip("'").replace("''", "'")
        if ws is None or name.lower() != ws.title.lower():
            raise ToolError(
                f"range {text!r} names sheet {name!r}; pass the sheet in the sheet argument "
                "and only the cells in range, e.g. 'A1:D20'"
            )
    t = t.replace("$", "").upper()
    try:
        if ":" not in t:
            row, col = parse_cell(t)
            return col, row, col, row
        a, _, b = t.partition(":")
        if a.isalpha() and b.isalpha():
            c1, c2 = column_index_from_string(a), column_index_from_string(b)
            if max(c1, c2) > MAX_COL:
                raise ValueError("column beyond XFD")
            bounds = used_bounds(ws) if ws is not None else None
            last = bounds[3] if bounds else 1
            return min(c1, c2), 1, max(c1, c2), last
        r1, c1 = parse_cell(a)
        r2, c2 = parse_cell(b)
    except ValueError:
        raise ToolError(
            f"{text!r} is not a range: use A1 notation like 'A1:D20', 'B3' or 'A:C' "
            "(no sheet name; pass the sheet separately)"
        ) from None
    return min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2)


def _range_text(c1: int, r1: int, c2: int, r2: int) -> str:
    a, b = f"{get_column_letter(c1)}{r1}", f"{get_column_letter(c2)}{r2}"
    return a if a == b else f"{a}:{b}"


def _check_title(title: Any, taken: list[str], what: str = "sheet name") -> str:
    if not isinstance(title, str) or not title.strip():
        raise ToolError(f"{what} must be non-empty text")
    if title != title.strip():
        raise ToolError(f"{what} {title!r} has leading or trailing spaces; remove them")
    if len(title) > 31:
        raise ToolError(f"{what} {title!r} is longer than 31 characters (Excel's limit); shorten it")
    bad = sorted(set(title) & SHEET_TITLE_BAD)
    if bad or title.startswith("'") or title.endswith("'"):
        raise ToolError(f"{what} {title!r} may not contain {' '.join(bad) or 'a leading/trailing apostrophe'}")
    if title.lower() in (t.lower() for t in taken):
        raise ToolError(f"the workbook already has a sheet named {title!r}; sheets: {', '.join(taken)}")
    return title


def make_app(world):
    ws_root: Path = world.workspace
    srv = AppServer(
        "sheets",
        instructions=(
            "Excel workbooks (.xlsx) in the shared workspace. Paths are relative to the workspace root. "
            "Cells use A1 notation; a text value starting with '=' is stored as a formula."
        ),
    )
    lock = threading.Lock()  # sync tools run on worker threads: one workbook edit at a time

    # edits reuse the parse of an unchanged file and keep what they saved when every value they
    # stored reads back exactly (``reloads_exactly``): one load per file per episode, not per
    # call; reads (which never change a workbook) share one parse of the same bytes across sessions
    files = OfficeFiles(ws_root, ".xlsx", "workbook", load_workbook, kind="an .xlsx workbook",
                        missing_hint=" (paths are relative to the workspace root)", edit_cached=True,
                        share_reads=True)

    def xlsx_path(path: str) -> WorkspacePath:
        return files.path(path, "is not an .xlsx file; this app only opens .xlsx workbooks")

    exact_books: weakref.WeakSet = weakref.WeakSet()  # every value in them reloads exactly (checked)

    def save_workbook(wb: Workbook, p: WorkspacePath, new: bool = False, exact: bool = False) -> None:
        """``exact``: the values this edit stored reload exactly. The workbook is then kept for
        the next call when all its other values do too (checked once per loaded workbook), so
        that reloading the file would give ``wb`` back."""
        keep = exact and (wb in exact_books or all_reload_exactly(wb))
        if keep:
            exact_books.add(wb)
        data = workbook_bytes(wb)
        if keep:
            forget_save_state(wb)
        files.save(p, data, new=new, keep=wb if keep else None)

    def open_wb(path: str, for_read: bool = False):
        p = xlsx_path(path)
        return p, files.open(p, path, for_read)

    def get_sheet(wb: Workbook, path: str, sheet: str):
        if sheet in wb.sheetnames:
            return wb[sheet]
        raise ToolError(f"workbook {path!r} has no sheet {sheet!r}; its sheets are: {', '.join(wb.sheetnames)}")

    def coord_of(key: Any) -> tuple[int, int]:
        try:
            return parse_cell(str(key))
        except ValueError as exc:
            raise ToolError(f"{exc}; give one cell per key (for blocks use write_rows)") from None

    def store(cell, value: Value) -> None:
        if isinstance(value, str) and value.startswith("=") and len(value) == 1:
            raise ToolError(f"{cell.coordinate}: '=' alone is not a formula")
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            raise ToolError(f"{cell.coordinate}: value must be a finite number")
        try:
            cell.value = value
        except Exception as exc:  # e.g. control characters xlsx cannot hold
            raise ToolError(f"{cell.coordinate}: this value cannot be stored in a cell ({exc}); "
                            "remove control characters") from None

    def describe_formulas(wb: Workbook, sheet: str, coords: list[str]) -> str:
        ev = Evaluator(wb)
        parts = []
        for coord in coords[:20]:
            raw = wb[sheet][coord].value
            if is_formula(raw):
                v = ev.value(sheet, coord)
                parts.append(f"{coord} {raw} = {_json(_show(v))}" if v is not None else f"{coord} {raw} (not computed here)")
        more = sum(1 for c in coords[20:] if is_formula(wb[sheet][c].value))
        if more:
            parts.append(f"... and {more} more formulas")
        return ("; formulas: " + "; ".join(parts)) if parts else ""

    def cells_of(wb: Workbook, path: str, sheet: str, range: str | None) -> str:  # noqa: A002
        """read_range's answer over an open workbook."""
        ws = get_sheet(wb, path, sheet)
        if range is None:
            b = used_bounds(ws)
            if b is None:
                return _json({"sheet": ws.title, "range": None, "columns": [], "rows": [], "note": "the sheet is empty"})
            c1, r1, c2, r2 = b
        else:
            c1, r1, c2, r2 = parse_range(range, ws)
        ncols = c2 - c1 + 1
        max_rows = max(1, MAX_READ_CELLS // ncols)
        if ncols > MAX_READ_CELLS:
            raise ToolError(f"range {range!r} is {ncols} columns wide; read at most {MAX_READ_CELLS} columns at a time")
        last = min(r2, r1 + max_rows - 1)
        ev = Evaluator(wb)
        rows, size, shown = [], 0, r1 - 1
        for r in builtins.range(r1, last + 1):
            values = []
            for c in builtins.range(c1, c2 + 1):
                raw = ws._cells[(r, c)].value if (r, c) in ws._cells else None
                if is_formula(raw):
                    values.append({"formula": raw, "value": _show(ev.value(ws.title, f"{get_column_letter(c)}{r}"))})
                else:
                    values.append(_show(raw))
            row = {"row": r, "values": values}
            size += len(_json(row)) + 2
            if rows and size > MAX_READ_CHARS:  # keep the answer valid JSON: stop at a row boundary
                break
            rows.append(row)
            shown = r
        out: dict[str, Any] = {
            "sheet": ws.title,
            "range": _range_text(c1, r1, c2, shown),
            "columns": [get_column_letter(c) for c in builtins.range(c1, c2 + 1)],
            "rows": rows,
        }
        if shown < r2:
            out["truncated"] = (
                f"showing rows {r1}-{shown} of {r1}-{r2}; call read_range again with "
                f"range \"{_range_text(c1, shown + 1, c2, r2)}\" for the rest"
            )
        return cap(_json(out))

    @srv.tool(ADD)
    def create_workbook(path: str, sheets: list[str] = ["Sheet1"]) -> str:  # noqa: B006 - schema default
        """Create a new, empty .xlsx workbook. Refuses to overwrite an existing file.

        Args:
            path: where to create it, relative to the workspace root, ending in .xlsx
                (missing parent folders are created).
            sheets: sheet names in order (default ["Sheet1"]); each at most 31 characters,
                without [ ] : * ? / \\.
        Returns a confirmation naming the file and its sheets.
        """
        with lock:
            p = xlsx_path(path)
            if p.exists():
                raise ToolError(f"{path!r} already exists; open it with list_sheets/read_range or choose another path")
            if not sheets:
                raise ToolError("give at least one sheet name, e.g. sheets=[\"Sheet1\"]")
            names: list[str] = []
            for name in sheets:
                names.append(_check_title(name, names))
            wb = Workbook()
            wb.active.title = names[0]
            for name in names[1:]:
                wb.create_sheet(name)
            save_workbook(wb, p, new=True, exact=True)  # empty: a reload of it saves to the same bytes
            return f"Created {p.rel} with sheets: {', '.join(names)}"

    @srv.tool(READ)
    def list_sheets(path: str) -> str:
        """List a workbook's sheets with the size of their used range.

        Args:
            path: the .xlsx file, relative to the workspace root.
        Returns JSON [{name, used_range (e.g. "A1:E120", null if empty), rows, columns}].
        """
        with lock:  # held while reading: an edit takes the cached workbook out to change it
            p, wb = open_wb(path, for_read=True)
            out = []
            for ws in wb.worksheets:
                b = used_bounds(ws)
                out.append({
                    "name": ws.title,
                    "used_range": _range_text(*b) if b else None,
                    "rows": b[3] if b else 0,
                    "columns": b[2] if b else 0,
                })
            return _json(out)

    @srv.tool(READ)
    def read_range(path: str, sheet: str, range: str | None = None) -> str:  # noqa: A002 - tool arg name
        """Read cells from a sheet.

        Args:
            path: the .xlsx file, relative to the workspace root.
            sheet: sheet name (exact).
            range: A1 range like "A1:E40", one cell "B3", or whole columns "A:C";
                omit to read the sheet's whole used range.
        Returns JSON {sheet, range, columns: ["A", ...], rows: [{row: 1, values: [...]}]}.
        values line up with columns; empty cells are null; dates are "YYYY-MM-DD" text. A formula
        cell is {formula: "=SUM(B2:B9)", value: <computed value, or null if it cannot be
        computed here>}. At most 2000 cells (about 16,000 characters) come back per call; a
        "truncated" note then names the range to read next.
        """
        with lock:  # held while reading: an edit takes the cached workbook out to change it
            _, wb = open_wb(path, for_read=True)
            return cells_of(wb, path, sheet, range)

    @srv.tool(SET)
    def write_cells(path: str, sheet: str, cells: dict[str, Value]) -> str:
        """Set individual cells.

        Args:
            path: the .xlsx file, relative to the workspace root.
            sheet: sheet name (exact).
            cells: {"A1": value, ...}: text, number, true/false, or null to empty the cell.
                Text starting with "=" is stored as a formula, e.g. "=SUM(B2:B9)" or
                "='Other Sheet'!B3*2".
        Returns a confirmation with the computed value of each formula written.
        """
        with lock:
            p, wb = open_wb(path)
            ws = get_sheet(wb, path, sheet)
            if not cells:
                raise ToolError("cells is empty; pass {\"A1\": value, ...}")
            if len(cells) > MAX_WRITE_CELLS:
                raise ToolError(f"at most {MAX_WRITE_CELLS} cells per call; split the write")
            coords, exact = [], True
            for key, value in cells.items():
                row, col = coord_of(key)
                cell = ws.cell(row=row, column=col)
                store(cell, value)
                coords.append(cell.coordinate)
                exact = exact and reloads_exactly(cell.value)
            save_workbook(wb, p, exact=exact)
            return f"Wrote {len(coords)} cell(s) in {ws.title}: {', '.join(coords[:30])}" + (
                " ..." if len(coords) > 30 else ""
            ) + describe_formulas(wb, ws.title, coords)

    @srv.tool(SET)
    def write_rows(path: str, sheet: str, start_cell: str, rows: list[list[Value]]) -> str:
        """Write a block of rows starting at one cell (row by row, left to right).

        Args:
            path: the .xlsx file, relative to the workspace root.
            sheet: sheet name (exact).
            start_cell: top-left cell of the block, e.g. "A1".
            rows: list of rows, each a list of values (text, number, true/false, null = empty).
                Text starting with "=" is stored as a formula. Rows may differ in length.
        Returns the range written and the computed value of each formula.
        """
        with lock:
            p, wb = open_wb(path)
            ws = get_sheet(wb, path, sheet)
            row0, col0 = coord_of(start_cell)
            if not rows or not any(rows):
                raise ToolError("rows is empty; pass a list of rows, e.g. [[\"Name\", \"Total\"], [\"A\", 3]]")
            width = max(len(r) for r in rows)
            if len(rows) * width > MAX_WRITE_CELLS:
                raise ToolError(f"at most {MAX_WRITE_CELLS} cells per call; split the rows into several calls")
            if row0 + len(rows) - 1 > MAX_ROW or col0 + width - 1 > MAX_COL:
                raise ToolError("the block would extend past the sheet's last row or column")
            coords, exact = [], True
            for i, values in enumerate(rows):
                for j, value in enumerate(values):
                    cell = ws.cell(row=row0 + i, column=col0 + j)
                    store(cell, value)
                    coords.append(cell.coordinate)
                    exact = exact and reloads_exactly(cell.value)
            save_workbook(wb, p, exact=exact)
            area = _range_text(col0, row0, col0 + width - 1, row0 + len(rows) - 1)
            return f"Wrote {len(rows)} row(s) to {ws.title}!{area}" + describe_formulas(wb, ws.title, coords)

    @srv.tool(ADD)
    def add_sheet(path: str, name: str) -> str:
        """Add an empty sheet at the end of a workbook.

        Args:
            path: the .xlsx file, relative to the workspace root.
            name: the new sheet's name (unique, at most 31 characters, without [ ] : * ? / \\).
        """
        with lock:
            p, wb = open_wb(path)
            _check_title(name, wb.sheetnames)
            wb.create_sheet(name)
            save_workbook(wb, p)
            return f"Added sheet {name!r} to {p.rel}; sheets: {', '.join(wb.sheetnames)}"

    @srv.tool(SET)
    def rename_sheet(path: str, old: str, new: str) -> str:
        """Rename a sheet. Formulas that refer to the old name are not rewritten.

        Args:
            path: the .xlsx file, relative to the workspace root.
            old: the current sheet name (exact).
            new: the new name (unique, at most 31 characters, without [ ] : * ? / \\).
        """
        with lock:
            p, wb = open_wb(path)
            ws = get_sheet(wb, path, old)
            _check_title(new, [t for t in wb.sheetnames if t != old])
            ws.title = new
            save_workbook(wb, p)
            return f"Renamed sheet {old!r} to {new!r} in {p.rel}"

    @srv.tool(SET)
    def clear_range(path: str, sheet: str, range: str) -> str:  # noqa: A002 - tool arg name
        """Empty every cell in a range (values and formulas).

        Args:
            path: the .xlsx file, relative to the workspace root.
            sheet: sheet name (exact).
            range: A1 range like "A2:E40", one cell "B3", or whole columns "A:C".
        """
        with lock:
            p, wb = open_wb(path)
            ws = get_sheet(wb, path, sheet)
            c1, r1, c2, r2 = parse_range(range, ws)
            if (c2 - c1 + 1) * (r2 - r1 + 1) > MAX_CLEAR_CELLS:
                raise ToolError(f"range {range!r} is larger than {MAX_CLEAR_CELLS} cells; clear it in parts")
            n = 0
            for (r, c), cell in list(ws._cells.items()):
                if r1 <= r <= r2 and c1 <= c <= c2:
                    if cell.value is not None:
                        n += 1
                    del ws._cells[(r, c)]
            save_workbook(wb, p, exact=True)  # what is left is as it was loaded
            return f"Cleared {ws.title}!{_range_text(c1, r1, c2, r2)} ({n} non-empty cell(s) emptied)"

    return srv


build_server = server_builder(make_app)
