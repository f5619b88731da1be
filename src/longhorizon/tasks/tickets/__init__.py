"""Ticket tracker task families ("support tickets", "project tracking") and what they share:
reading keys out of confirmations and recognising response-time promises in comments."""

from __future__ import annotations

import re

from longhorizon.tasks.common import norm

TARGETS = {"P1": "1 hour", "P2": "4 hours", "P3": "1 business day", "P4": "3 business days"}
"""First-response targets of the current SLA policy."""
OLD_TARGETS = {"P1": "30 minutes", "P2": "2 hours", "P3": "8 hours", "P4": "2 business days"}
"""...and of the superseded one (a distractor in the workspace)."""

_TARGET_PATTERNS = {
    "P1": [r"(?<![\d.])(1|one)\s*-?\s*(hour|hr)\b", r"(?<![\d.])60\s*-?\s*min"],
    "P2": [r"(?<![\d.])(4|four)\s*-?\s*(hours|hrs|h)\b"],
    "P3": [r"(?<![\d.])(1|one)\s*-?\s*(business|working)\s*-?\s*day\b", r"\bnext\s+(business|working)\s+day\b"],
    "P4": [r"(?<![\d.])(3|three)\s*-?\s*(business|working)\s*-?\s*days\b"],
}


def promises(text: str, priority: str) -> bool:
    """Whether ``text`` states the first-response target of ``priority`` ('within 4 hours', 'four hrs')."""
    t = norm(text)
    return any(re.search(p, t) for p in _TARGET_PATTERNS[priority])


def created_key(result: str) -> str:
    """The key in 'Created PRJ-12 ...'."""
    m = re.search(r"Created ([A-Z][A-Z0-9]*-\d+)", result)
    if not m:
        raise RuntimeError(f"oracle expected a new ticket key in: {result[:300]}")
    return m.group(1)


def mentions_key(text: str, key: str) -> bool:
    """``key`` (SUP-12) appears as a whole key, not as the start of SUP-123."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?!\d)", text or "", re.IGNORECASE) is not None
