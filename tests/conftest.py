"""Shared fixtures: a fresh World in a temp folder."""

import pytest

from longhorizon.core.world import World


@pytest.fixture
def world(tmp_path):
    return World.build(tmp_path / "world", lambda root: None)
