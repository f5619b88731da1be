"""`compare --repeat A2`: the noise floor (self-disagreement, self-Δ and its interval) next to Δ.

The run folders are real runs (`longhorizon run`, null and oracle policies on one family); a
repeat of the null run that disagrees with it is the null run with one task's episode taken
from the oracle run, so the expected self-disagreement is known by hand."""

from __future__ import annotations

import json
import shutil

import pytest

from longhorizon.cli import main
from longhorizon.evaluate.metrics import paired_bootstrap_ci

SEEDS = 4


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    for policy in ("null", "oracle"):
        assert main(["run", "--family", "downloads_cleanup", "--seeds", str(SEEDS), "--quiet", "--policy", policy,
                     "--out", str(base / policy)]) == 0
    return base


def lines(run) -> dict[str, str]:
    return {json.loads(line)["task_id"]: line for line in (run / "trajectories.jsonl").read_text().splitlines()}


def rerun_with_one_task_from(runs, tmp_path, name: str, task_index: int):
    """A copy of the null run in which one task's episode is the oracle's (a verdict that flipped)."""
    out = tmp_path / name
    shutil.copytree(runs / "null", out)
    null, oracle = lines(runs / "null"), lines(runs / "oracle")
    task = sorted(null)[task_index]
    (out / "trajectories.jsonl").write_text("".join((oracle if t == task else null)[t] + "\n" for t in null))
    return out


def verdicts(run) -> dict[str, bool]:
    return {t: json.loads(line)["grade"]["passed"] for t, line in lines(run).items()}


def test_compare_repeat_reports_the_self_disagreement_counted_by_hand(runs, tmp_path, capsys):
    a, b = runs / "null", runs / "oracle"
    a2 = rerun_with_one_task_from(runs, tmp_path, "null-again", 0)
    va, va2 = verdicts(a), verdicts(a2)
    differ = sum(va[t] != va2[t] for t in va)
    assert differ == 1  # the fixture is what it claims
    diffs = [float(va2[t]) - float(va[t]) for t in sorted(va)]
    (lo, hi), = paired_bootstrap_ci([diffs])
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--repeat", str(a2), "--format", "json"]) == 0
    c = json.loads(capsys.readouterr().out)
    f = c["noise_floor"]
    assert (f["paired_tasks"], f["disagreements"], f["self_disagreement"]) == (SEEDS, differ, differ / SEEDS)
    assert f["self_delta_pass@1"] == sum(diffs) / SEEDS and f["self_delta_pass@1_ci95"] == [lo, hi]
    assert f["floor"]["pass@1"] == max(abs(lo), abs(hi)) < 1.0
    assert c["delta_pass@1"] == 1.0 and c["inside_noise_floor"]["pass@1"] is False


def test_a_delta_within_the_floor_is_labelled_inside(runs, tmp_path, capsys):
    a = runs / "null"
    a2 = rerun_with_one_task_from(runs, tmp_path, "null-again", 0)
    b = rerun_with_one_task_from(runs, tmp_path, "other", 1)  # B differs from A on one task: Δ 0.25
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--repeat", str(a2)]) == 0
    text = capsys.readouterr().out
    assert "self-disagreement 1/4 = 0.250" in text
    assert "Δ pass@1 +0.250: INSIDE the noise floor" in text


def test_compare_without_repeat_reports_no_floor(runs, capsys):
    capsys.readouterr()
    assert main(["compare", str(runs / "null"), str(runs / "oracle"), "--format", "json"]) == 0
    assert "noise_floor" not in json.loads(capsys.readouterr().out)


def test_an_incomplete_repeat_is_refused_like_an_incomplete_run(runs, tmp_path, capsys):
    a2 = tmp_path / "a2"
    shutil.copytree(runs / "null", a2)
    log = a2 / "trajectories.jsonl"
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines()[:-1]))
    capsys.readouterr()
    assert main(["compare", str(runs / "null"), str(runs / "oracle"), "--repeat", str(a2)]) == 2
    assert f"{a2}: 3 of 4 episodes finished" in capsys.readouterr().err
