"""Counting nouns in messages: "1 family", "3 families"."""

from __future__ import annotations

IRREGULAR = {"family": "families", "category": "categories", "is": "are", "was": "were"}


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, the noun in the plural unless ``n`` is 1: ``plural(1, "family")`` is
    "1 family", ``plural(2, "family")`` "2 families" (``many`` overrides the plural form)."""
    if n == 1:
        return f"{n} {noun}"
    head, _, last = noun.rpartition(" ")
    form = many or IRREGULAR.get(last, last + "s")
    return f"{n} {head + ' ' if head else ''}{form}"
