"""Graders cannot be gamed: doing nothing, claiming success, random tool calls, a shotgun of
plausible junk, and five policies that game one kind of criterion each (read-only, empty
artefacts, instruction echo, reply-to-everything, copy inputs to outputs) pass no task and
earn a mean dense reward of at most 0.05 on every split, at every level of every family."""

import json
import statistics
from collections import defaultdict

import pytest

from longhorizon.core.task import HOLDOUT_SEED_BASE
from longhorizon.env.episode import Limits, play_task
from longhorizon.policies.adversaries import ADVERSARIES, ShotgunPolicy
from longhorizon.policies.scripted import NullPolicy
from longhorizon.tasks.registry import families

POLICIES = {"null": NullPolicy, **ADVERSARIES}
SEEDS = [1, HOLDOUT_SEED_BASE + 1]
MAX_MEAN_REWARD = 0.05


@pytest.mark.parametrize("adversary", list(POLICIES))
async def test_adversary_passes_nothing_and_scores_low_on_every_split(adversary):
    rewards: dict[str, dict[str, float]] = defaultdict(dict)
    passed = []
    # every level of every family: short instances must be no easier to game
    for fam, level, seed in ((f, lv, s) for f in families() for lv in range(1, f.levels + 1) for s in SEEDS):
        task = fam.instance(seed, level)
        traj = await play_task(task, POLICIES[adversary](), limits=Limits(max_wall_s=120))
        rewards[task.split][task.id] = traj.grade.reward
        assert not traj.grade.grader_errors(), f"grader bugs on {task.id}: {traj.grade.grader_errors()}"
        if traj.passed:
            passed.append(task.id)
    assert set(rewards) == {"train", "holdout", "holdout-family"}
    assert not passed, f"{adversary} passed {passed}"
    for split, by_task in rewards.items():
        mean = statistics.mean(by_task.values())
        worst = sorted(by_task.items(), key=lambda kv: -kv[1])[:5]
        assert mean <= MAX_MEAN_REWARD, f"{adversary} on {split}: mean reward {mean:.3f}; highest: {worst}"


async def test_shotgun_really_writes():
    """The shotgun is only a fair adversary if its writes land: it must change the World."""
    task = next(f for f in families() if f.name == "downloads_cleanup").generate(1)
    traj = await play_task(task, ShotgunPolicy())
    ok_writes = [c for c in traj.tool_calls if not c.is_error and c.tool in ("write_file", "move", "delete", "copy")]
    assert ok_writes, "shotgun made no successful write"


@pytest.mark.parametrize("adversary,tool", [
    ("empty_artefact", "write_file"), ("instruction_echo", "write_file"),
    ("copy_inputs", "copy"), ("reply_to_everything", "reply"),
])
async def test_junk_adversaries_really_make_their_junk(adversary, tool):
    """Each junk adversary is only a fair test if its junk lands where a grader looks."""
    name = {"reply": "invoice_followup"}.get(tool, "log_error_summary")
    task = next(f for f in families() if f.name == name).generate(1)
    traj = await play_task(task, POLICIES[adversary]())
    assert [c for c in traj.tool_calls if not c.is_error and c.tool == tool], f"{adversary} made no {tool}"


async def test_read_only_reads_every_input_and_writes_nothing():
    task = next(f for f in families() if f.name == "log_error_summary").generate(1)
    traj = await play_task(task, POLICIES["read_only"]())
    reads = {c.arguments.get("path") for c in traj.tool_calls if c.tool == "read_file" and not c.is_error}
    assert reads >= {"logs/inventory.log", "logs/orders.log"}
    assert all(c.tool in ("list_dir", "read_file") for c in traj.tool_calls)


def test_every_adversary_is_a_policy_the_cli_can_name(tmp_path, capsys):
    """`--policy adversary:NAME` (run, calibrate): the help lists each, an unknown name is one line."""
    from longhorizon.cli import main
    from longhorizon.core.errors import UsageError
    from longhorizon.policies.factory import check_spec, make_policy

    for name, cls in ADVERSARIES.items():
        assert type(make_policy(f"adversary:{name}")) is cls
    with pytest.raises(UsageError, match="unknown adversary 'nope'"):
        check_spec("adversary:nope")
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert all(name in helptext for name in ADVERSARIES)
    assert main(["run", "--policy", "adversary:shotgun", "--task", "downloads_cleanup-000001",
                 "--out", str(tmp_path / "run"), "--quiet"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["grade"]["passed"] is False and len(rows[0]["tool_calls"]) > 3
    assert rows[0]["provenance"]["policy"]["policy"] == "shotgun"
