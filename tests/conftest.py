"""Shared fixtures: a fresh World in a temp folder."""

import mcp.client.stdio  # noqa: F401  binds its default errlog (sys.stderr) before any test swaps it
import pytest

from longhorizon.core.world import World


@pytest.fixture
def world(tmp_path):
    return World.build(tmp_path / "world", lambda root: None)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Keep caches (oracle call counts) out of the user's home during tests."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
