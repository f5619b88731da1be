"""Fixtures for the training tests: tiny tasks over the real files app, a very small model."""

import json
from pathlib import Path

import pytest

from longhorizon.core.task import Criterion, Task, ToolCall


def copy_task(name: str = "copy", value: str = "42") -> Task:
    """Read in.txt, write its content to out.txt: two tool calls, then a final answer."""

    def build(root: Path) -> None:
        (root / "workspace" / "in.txt").write_text(value + "\n")
        (root / "workspace" / "readme.txt").write_text(f"task {name}\n")  # each task's World is its own

    def oracle():
        text = yield ToolCall("files__read_file", {"path": "in.txt"}, note="First, read the input.")
        yield ToolCall("files__write_file", {"path": "out.txt", "content": text.strip() + "\n"},
                       note="Now write the copy.")
        return "Copied in.txt to out.txt."

    def copied(world, traj):
        p = world.file("out.txt")
        return p.exists() and p.read_text().strip() == value

    return Task(
        id=f"{name}-000000", family=name, category="test", split="train", seed=0,
        instruction="Copy in.txt to out.txt.", apps=("files",), build=build, oracle=oracle,
        criteria=[Criterion("copied", f"out.txt holds {value}", "final_state", copied),
                  Criterion("read", "in.txt was read", "process",
                            lambda world, traj: bool(traj.calls("files__read_file", ok_only=True)))],
    )


@pytest.fixture(scope="session")
def files_tools(tmp_path_factory):
    import asyncio

    from longhorizon.core.world import World
    from longhorizon.env.episode import Episode

    task = copy_task()

    async def tools():
        async with Episode(task, World.build(tmp_path_factory.mktemp("w") / "w", task.build)) as ep:
            return ep.tools

    return asyncio.run(tools())


@pytest.fixture(scope="session")
def small_model(tmp_path_factory, files_tools):
    """A 1-layer random Qwen3 with a tokenizer that knows the files tools (built once)."""
    pytest.importorskip("torch")
    from longhorizon.train.tiny import build_tiny_model, default_corpus

    corpus = default_corpus(families=[]) + [json.dumps(t) for t in files_tools]
    return build_tiny_model(tmp_path_factory.mktemp("small"), corpus, hidden_size=32, num_layers=1, num_heads=2,
                            num_kv_heads=1, intermediate_size=64)


@pytest.fixture(scope="session")
def make_copy_task():
    return copy_task
