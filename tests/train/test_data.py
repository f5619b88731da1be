"""Teacher data: rejection sampling over real runs into a Hugging Face chat dataset with tools."""

import asyncio
import json
import shutil

import pytest

pytest.importorskip("datasets")

from longhorizon.core.errors import UsageError  # noqa: E402
from longhorizon.evaluate.runs import run_episodes  # noqa: E402
from longhorizon.rollout.runner import RunSpec  # noqa: E402
from longhorizon.tasks.registry import tasks_for  # noqa: E402
from longhorizon.train.data import build_sft_dataset, load_sft_dataset  # noqa: E402

FAMILY = "downloads_cleanup"


def _run(policy, out):
    from longhorizon.policies.factory import make_policy

    p = make_policy(policy)
    tasks = tasks_for("train", 1, [FAMILY])
    asyncio.run(run_episodes(tasks, p, RunSpec(policy=p.describe(), split="train", seeds=1, families=[FAMILY]),
                             out, progress=False))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    _run("oracle", base / "oracle")
    _run("null", base / "null")
    return base


def test_keeps_only_finished_episodes_at_or_above_the_threshold(runs, tmp_path):
    summary = build_sft_dataset([runs / "oracle", runs / "null"], tmp_path / "d", min_reward=0.9)
    assert (summary["episodes_seen"], summary["kept"]) == (2, 1)
    assert summary["dropped"] == {"reward below threshold": 1}
    ds = load_sft_dataset(tmp_path / "d")
    row = ds[0]
    assert row["family"] == FAMILY and row["reward"] == 1.0
    tools = json.loads(row["tools"])
    assert {t["function"]["name"] for t in tools} >= {"files__list_dir", "files__read_file"}
    calls = [c for m in row["messages"] if m["role"] == "assistant" for c in (m.get("tool_calls") or [])]
    assert calls and all(isinstance(c["function"]["arguments"], str) for c in calls)  # JSON strings, not structs
    first = next(m for m in row["messages"] if m["role"] == "assistant")
    assert first["content"]  # the oracle states its local goal alongside each call


def test_nothing_kept_and_missing_runs_are_usage_errors(runs, tmp_path):
    with pytest.raises(UsageError, match="nothing to train on"):
        build_sft_dataset([runs / "null"], tmp_path / "e")
    with pytest.raises(UsageError, match="no such run folder"):
        build_sft_dataset([tmp_path / "nope"], tmp_path / "f")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "x").write_text("")
    with pytest.raises(UsageError, match="not empty"):
        build_sft_dataset([runs / "oracle"], tmp_path / "g")



def test_an_episode_logged_twice_becomes_one_row_and_is_reported(runs, tmp_path, capsys):
    from longhorizon.cli import main

    run = tmp_path / "oracle"
    shutil.copytree(runs / "oracle", run)
    log = run / "trajectories.jsonl"
    log.write_text(log.read_text() * 3)
    summary = build_sft_dataset([run, runs / "null"], tmp_path / "d")
    assert summary["duplicates_dropped"] == {str(run): 2}
    assert (summary["episodes_seen"], summary["kept"]) == (2, 1) and len(load_sft_dataset(tmp_path / "d")) == 1
    capsys.readouterr()
    assert main(["data", "sft", str(run), "--out", str(tmp_path / "e"), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["kept"] == 1
    notes = [line for line in err.splitlines() if "duplicate" in line]  # (datasets draws progress bars there too)
    assert notes == [f"{run}: dropped 2 duplicate episodes (each read once, its first line kept)"]


def _rewrite_episodes(run, change):
    log = run / "trajectories.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    log.write_text("".join(json.dumps(change(r)) + "\n" for r in rows))


def test_the_tools_come_from_the_trajectory_as_the_episode_showed_them(runs, tmp_path):
    run = tmp_path / "oracle"
    shutil.copytree(runs / "oracle", run)
    [row] = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    assert {t["function"]["name"] for t in row["tools"]} >= {"files__list_dir", "files__read_file"}
    shown = [{**t, "function": {**t["function"], "description": "as shown"}} for t in row["tools"]]
    _rewrite_episodes(run, lambda r: {**r, "tools": shown})  # recorded, so read: no World is built again
    build_sft_dataset([run], tmp_path / "d")
    assert json.loads(load_sft_dataset(tmp_path / "d")[0]["tools"]) == shown


def test_a_version_1_record_without_tools_gets_them_from_its_world(runs, tmp_path):
    run = tmp_path / "oracle"
    shutil.copytree(runs / "oracle", run)
    [recorded] = [json.loads(line)["tools"] for line in (run / "trajectories.jsonl").read_text().splitlines()]
    _rewrite_episodes(run, lambda r: {k: v for k, v in r.items() if k != "tools"} | {"schema_version": 1})
    build_sft_dataset([run], tmp_path / "d")
    assert json.loads(load_sft_dataset(tmp_path / "d")[0]["tools"]) == recorded


def test_the_same_run_folder_given_twice_is_a_usage_error(runs, tmp_path):
    with pytest.raises(UsageError, match="given twice"):
        build_sft_dataset([runs / "oracle", runs / "oracle" / ".." / "oracle"], tmp_path / "d")


def test_the_recovering_teacher_fails_once_repairs_and_still_passes():
    from longhorizon.env.episode import play_task
    from longhorizon.train.teacher import RecoveringOracle

    task = tasks_for("train", 1, [FAMILY])[0]
    traj = asyncio.run(play_task(task, RecoveringOracle(recovery=1.0)))
    assert traj.passed
    errors = [i for i, c in enumerate(traj.tool_calls) if c.is_error]
    assert len(errors) == 1
    bad, fixed = traj.tool_calls[errors[0]], traj.tool_calls[errors[0] + 1]
    assert bad.name == fixed.name and bad.arguments == {} and fixed.arguments
    repair = next(m for m in traj.messages if m.get("role") == "assistant" and "failed" in (m.get("content") or ""))
    assert repair["content"].startswith("That call failed (the error says: ")
    never = asyncio.run(play_task(task, RecoveringOracle(recovery=0.0)))
    assert not any(c.is_error for c in never.tool_calls)
