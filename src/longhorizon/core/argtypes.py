"""argparse value types that refuse impossible values with a message naming the rule.

Used by every command's parser, so ``--samples 0`` or ``--port 70000`` is one line and exit 2
before anything runs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _checked(name: str, parse: Callable[[str], Any], ok: Callable[[Any], bool], rule: str):
    """A type that parses with ``parse`` and refuses values ``ok`` rejects, saying ``rule``."""

    def check(text: str):
        value = parse(text)
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{rule}, got {text}")
        return value

    check.__name__ = name
    return check


positive_int = _checked("positive_int", _int, lambda v: v >= 1, "must be at least 1")
"""A whole number of at least 1 (counts: samples, seeds, turns, concurrency)."""
nonneg_int = _checked("nonneg_int", _int, lambda v: v >= 0, "must be 0 or more")
nonneg_float = _checked("nonneg_float", _float, lambda v: v >= 0, "must be 0 or more")
positive_float = _checked("positive_float", _float, lambda v: v > 0, "must be more than 0")
unit_interval = _checked("unit_interval", _float, lambda v: 0 < v <= 1, "must be in (0, 1]")
"""A probability-like value in (0, 1] (top-p)."""
fraction = _checked("fraction", _float, lambda v: 0 <= v <= 1, "must be between 0 and 1")
"""A value in [0, 1] (a reward threshold)."""
port = _checked("port", _int, lambda v: 0 <= v <= 65535, "a port is 0 to 65535")
"""A TCP port, 0 (pick a free one) to 65535."""


def json_object(text: str) -> dict[str, Any]:
    """A JSON object given on the command line (e.g. --extra-body)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object like '{{\"key\": 1}}', got {type(value).__name__}")
    return value
