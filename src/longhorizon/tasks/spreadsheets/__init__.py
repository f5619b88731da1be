"""Spreadsheet task families ("spreadsheet analysis", "spreadsheet cleanup"). The grading
helpers they share with other categories (reading a sheet as computed values, tolerant number
parsing, telling which tool calls wrote to which workspace paths) live in
``longhorizon.tasks.common``; what only these families use is here."""

from __future__ import annotations

from typing import Any

from longhorizon.tasks.common import norm_text


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
