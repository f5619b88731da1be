"""Small helpers task families share: seeded generators and argument normalisation."""

from __future__ import annotations

import posixpath
import random

from faker import Faker


def rng_and_faker(seed: int, family: str) -> tuple[random.Random, Faker]:
    """Per-instance generators: deterministic in (family, seed), independent of global state."""
    rng = random.Random(f"{family}:{seed}")
    fake = Faker("en_US")
    fake.seed_instance(rng.randrange(2**31))
    return rng, fake


def norm_path(path) -> str:
    """An agent-supplied workspace path in one canonical spelling ('./a//b.xlsx' -> 'a/b.xlsx'),
    so graders compare what the agent touched, not how it spelled it."""
    p = posixpath.normpath(str(path or "").strip().replace("\\", "/").lstrip("/") or ".")
    return "." if p in ("", ".") else p
