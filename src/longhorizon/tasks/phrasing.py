"""Wording pools for instructions: the same requirements said in different words per seed.

A family whose every seed reads the same sentence teaches its surface (tasks/diversity.py
measures it). The wording gets its own generator, apart from the one that draws the World, so
a family can gain phrasings without moving a single drawn value: its Worlds and graders stay
as they were, only the instruction text changes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def phrasing_rng(family: str, seed: int) -> random.Random:
    """The generator for an instance's wording, deterministic in (family, seed)."""
    return random.Random(f"{family}:{seed}:phrasing")


def say(rng: random.Random, *variants: str) -> str:
    """One of ``variants``: ways of saying the same requirement."""
    return rng.choice(variants)


def in_some_order(rng: random.Random, sentences: Sequence[str]) -> list[str]:
    """Independent sentences (constraints that do not refer to each other) in a drawn order."""
    out = list(sentences)
    rng.shuffle(out)
    return out
