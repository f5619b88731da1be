"""The Trajectory schema: version 2 keeps the tools an episode showed; version-1 records still load."""

import pytest

from longhorizon.core.trajectory import READABLE_VERSIONS, SCHEMA_VERSION, Trajectory

TOOL = {"type": "function", "function": {"name": "files__read_file", "description": "Read a file.",
                                         "parameters": {"type": "object", "properties": {}}}}


def record(**extra) -> dict:
    return {"episode_id": "t-000000#0", "task_id": "t-000000", "family": "t", "category": "c", "split": "train",
            "seed": 0, "sample": 0, "provenance": {}, "messages": [{"role": "user", "content": "hi"}], **extra}


def test_the_tools_shown_round_trip():
    t = Trajectory(**record(), tools=[TOOL])
    back = Trajectory.from_dict(t.to_dict())
    assert back.tools == [TOOL] and back.schema_version == SCHEMA_VERSION == 2


def test_a_version_1_record_loads_with_no_tools():
    old = record(schema_version=1, tool_calls=[], turns=[], status="completed", grade=None, wall_s=1.0)
    t = Trajectory.from_dict(old)
    assert t.tools == [] and t.schema_version == 1 and t.messages == old["messages"]


def test_an_unknown_version_is_refused_naming_the_readable_ones():
    assert READABLE_VERSIONS == (1, 2)
    with pytest.raises(ValueError, match=r"schema version 99 is not supported \(expected one of 1, 2\)"):
        Trajectory.from_dict(record(schema_version=99))
