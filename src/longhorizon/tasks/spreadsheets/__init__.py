"""Spreadsheet task families ("spreadsheet analysis", "spreadsheet cleanup") and the grading
helpers they share: reading a sheet as computed values, tolerant number/flag parsing, and
telling which tool calls wrote to which workspace paths."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from longhorizon.apps.sheets.state import find_sheet, load_workbook, sheet_values, workbook_bytes
from longhorizon.tasks.common import norm_path

READ_ONLY_TOOLS = {
    "sheets__list_sheets", "sheets__read_range",
    "files__list_dir", "files__read_file", "files__search", "files__file_info",
}
WRITE_ARGS = {
    "files__copy": ("dst",),
    "files__move": ("src", "dst"),
}
"""Which arguments of a mutating tool name what it changes (default: ``path``)."""


def written_paths(call) -> list[str]:
    """Workspace paths a successful tool call may have changed (empty for reads and errors)."""
    if call.is_error or call.name in READ_ONLY_TOOLS or not isinstance(call.arguments, dict):
        return []
    keys = WRITE_ARGS.get(call.name, ("path",))
    return [norm_path(call.arguments[k]) for k in keys if k in call.arguments]


def touches(written: str, target: str) -> bool:
    """Whether changing ``written`` (a file or a whole folder) can change ``target``."""
    return written == "." or written == target or target.startswith(written + "/")


def writes_to(trajectory, targets: list[str]) -> list[str]:
    """Targets that some successful mutating call touched, with the tool that did it."""
    hits = []
    for call in trajectory.tool_calls:
        for w in written_paths(call):
            hits.extend(f"{t} (by {call.name})" for t in targets if touches(w, t))
    return hits


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def workspace_files(world) -> set[str]:
    """Every file under the workspace, as relative posix paths."""
    root = world.workspace
    out = set()
    for dirpath, _, names in os.walk(root):
        for name in names:
            out.add((Path(dirpath) / name).relative_to(root).as_posix())
    return out


class Files:
    """The workbooks a task writes, made once on first use and shared by build and graders."""

    def __init__(self, make: Callable[[], dict[str, Any]]):
        self._make = make
        self._bytes: dict[str, bytes] | None = None

    @property
    def bytes(self) -> dict[str, bytes]:
        if self._bytes is None:
            self._bytes = {rel: workbook_bytes(wb) for rel, wb in sorted(self._make().items())}
        return self._bytes

    def build(self, root: Path) -> None:
        for rel, data in self.bytes.items():
            p = root / "workspace" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)

    def changed(self, world) -> list[str]:
        """Files whose bytes differ from what was built, or that are gone."""
        out = []
        for rel, data in self.bytes.items():
            p = world.file(rel)
            if not p.is_file() or sha256(p.read_bytes()) != sha256(data):
                out.append(rel)
        return out


def read_table(path: Path, sheet: str) -> tuple[list[Any], list[list[Any]]] | None:
    """(header, data rows) of a sheet as computed values; rows after the last non-empty one
    are dropped; None when the file or sheet is missing."""
    if not path.is_file():
        return None
    st = path.stat()
    key = (str(path.resolve()), st.st_ino, st.st_mtime_ns, st.st_size, sheet)
    with _TABLES_LOCK:
        if key in _TABLES:
            return _TABLES[key]
    table = _read_table(path, sheet)
    with _TABLES_LOCK:
        while len(_TABLES) >= 32:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = table
    return table


_TABLES: dict[tuple, Any] = {}
"""Graders of one episode read the same output file several times: load it once."""
_TABLES_LOCK = threading.Lock()


def _read_table(path: Path, sheet: str) -> tuple[list[Any], list[list[Any]]] | None:
    wb = load_workbook(path)
    ws = find_sheet(wb, sheet)
    if ws is None:
        return None
    grid = sheet_values(wb, ws.title)
    return (grid[0], grid[1:]) if grid else ([], [])


def blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def norm_text(v: Any) -> str:
    """Case- and whitespace-insensitive form of a cell, for labels and names."""
    return " ".join(str(v).split()).lower() if v is not None else ""


def to_number(v: Any) -> float | None:
    """A cell as a number, accepting '1,234.50', '$1,234.50' and '(12.00)'; None if it is not one."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v).strip().replace(",", "").replace("$", "").replace(" ", "")
    neg = s.startswith("(") and s.endswith(")")
    s = s.strip("()")
    try:
        x = float(s)
    except ValueError:
        return None
    return -x if neg else x


def to_flag(v: Any) -> bool | None:
    """A yes/no cell: Yes/No, Y/N, TRUE/FALSE (any case); None if it is neither."""
    if isinstance(v, bool):
        return v
    s = norm_text(v)
    if s in ("yes", "y", "true"):
        return True
    if s in ("no", "n", "false"):
        return False
    return None


def close(a: float | None, b: float, tol: float = 0.01) -> bool:
    return a is not None and abs(a - b) <= tol + 1e-9


def parse_json(text: str) -> Any:
    """Tool result JSON for oracles; a readable error when a tool answered with an error instead."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise RuntimeError(f"oracle expected JSON from a tool, got: {text[:300]}") from None
