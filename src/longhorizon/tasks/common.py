"""Small helpers task families share: seeded generators and argument normalisation."""

from __future__ import annotations

import random

from faker import Faker


def rng_and_faker(seed: int, family: str) -> tuple[random.Random, Faker]:
    """Per-instance generators: deterministic in (family, seed), independent of global state."""
    rng = random.Random(f"{family}:{seed}")
    fake = Faker("en_US")
    fake.seed_instance(rng.randrange(2**31))
    return rng, fake


def norm_path(p) -> str:
    """How graders compare agent-supplied workspace paths: no leading './' or '/', no trailing '/'."""
    s = str(p or "").strip().replace("\\", "/")
    while s.startswith("./"):
        s = s[2:]
    return s.strip("/")
