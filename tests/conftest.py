"""Shared fixtures: a fresh World in a temp folder; how `make test` shares the tests between
pytest-xdist workers."""

from pathlib import Path

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


VLLM_FILES = {"tests/serve/test_vllm.py", "tests/serve/test_vllm_rl.py"}
"""Files that start vLLM servers (GBs each, and both cores while they start): one worker runs them."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under `--dist loadgroup` (`make test`) a file's tests stay on one worker, so its module and
    session fixtures (a tiny model, a running server) are built once, and the vLLM files share
    one worker. A test's own xdist_group mark wins."""
    root = Path(str(config.rootpath))
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            rel = Path(str(item.fspath)).relative_to(root).as_posix()
            item.add_marker(pytest.mark.xdist_group("vllm" if rel in VLLM_FILES else rel))
