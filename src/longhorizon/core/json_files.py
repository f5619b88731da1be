"""Reading JSON files someone else wrote (another benchmark's results, a harness's output):
every way such a file can be wrong is one ``UsageError`` naming it, never a traceback or a hang.

``read_text`` refuses what is not a regular file (a FIFO would block the read forever) and
what is not UTF-8; ``parse_json`` turns JSON the parser rejects (including an integer longer
than Python converts, or nesting deeper than it recurses) into one line. A reader then turns
values of the wrong shape into one line naming the entry: ``SHAPE_ERRORS`` is what reading a
wrong shape raises, ``malformed`` the message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError

SHAPE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError, RecursionError)
"""What reading a value of the wrong shape raises (a string where a list belongs, a word where a
number does, an infinite number where an integer does, nesting deeper than Python recurses)."""


def read_text(path: Path | str) -> str:
    """A file's text; one line when it is missing, not a regular file, unreadable or not UTF-8."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"no such file: {p}")
    if not p.is_file():
        raise UsageError(f"{p} is not a regular file")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{p} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {p}: {exc.strerror}") from None


def parse_json(text: str, where: str) -> Any:
    """JSON, or a one-line UsageError naming ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where} is not JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{where} is not JSON this reader accepts: {short(exc)}") from None


def read_json(path: Path | str) -> Any:
    return parse_json(read_text(path), str(path))


def read_json_lines(path: Path | str) -> list[dict]:
    """Every non-blank line of a JSON-lines file, each a JSON object (else one line naming it)."""
    rows = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if line.strip():
            row = parse_json(line, f"{path} line {n}")
            if not isinstance(row, dict):
                raise UsageError(f"{path} line {n} is not a JSON object (it holds a {type(row).__name__})")
            rows.append(row)
    return rows


def short(exc: BaseException) -> str:
    """An exception's message on one line, at most 160 characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:160] + ("…" if len(text) > 160 else "")


def malformed(path: Path | str, what: str, exc: BaseException) -> UsageError:
    return UsageError(f"{path}: {what} is malformed ({type(exc).__name__}: {short(exc)})")
