"""``Trajectory.to_json`` dumps the fields straight, without ``asdict``'s deep copy, and writes
the very line the copy gave; values JSON cannot take still go the way they always went."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from longhorizon.tasks.registry import families
from longhorizon.core.trajectory import Trajectory, dumps
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy


def _old_line(traj: Trajectory) -> str:
    return dumps(traj.to_dict())


def test_an_oracle_trajectory_is_written_as_the_deep_copy_wrote_it():
    for fam in families()[:6]:
        traj = asyncio.run(play_task(fam.generate(0), OraclePolicy()))
        line = traj.to_json()
        assert line == _old_line(traj)
        assert Trajectory.from_dict(json.loads(line)).to_json() == line


@dataclass
class Odd:
    x: int


def test_values_json_cannot_take_are_written_as_before():
    traj = Trajectory(episode_id="t#0", task_id="t", family="f", category="c", split="train", seed=0,
                      sample=0, provenance={"odd": Odd(1), "nan": float("nan"), "tuple": (1, 2)},
                      messages=[{"role": "user", "content": "a\udc80b"}])
    line = traj.to_json()
    assert line == _old_line(traj)
    assert json.loads(line)["provenance"]["odd"] == {"x": 1}
