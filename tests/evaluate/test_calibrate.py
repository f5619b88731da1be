"""`longhorizon calibrate`: per family and model pass@1, pass^k and flags, one table per folder."""

import json

from longhorizon.cli import main
from longhorizon.evaluate.calibrate import calibration, run_name


def _stats(p1, episodes=8, hat=None):
    return {"episodes": episodes, "tasks": episodes // 2, "pass@1": p1, "pass@1_ci95": [max(0, p1 - .2), min(1, p1 + .2)],
            "pass^k": {"1": p1, "2": p1 if hat is None else hat}, "pass^k_ci95": {"1": [0, 1], "2": [0, 1]},
            "mean_reward": p1}


def _summary(fams):
    return {"overall": _stats(sum(fams.values()) / len(fams)), "families": {f: _stats(v) for f, v in fams.items()},
            "complete": True}


def test_flags_mark_families_at_the_ceiling_and_never_passed_per_model():
    cal = calibration({"strong": _summary({"a": 0.875, "b": 0.5, "c": 0.0}), "weak": _summary({"a": 0.25, "b": 0.0})},
                      ceiling=0.8)
    assert cal["families"]["a"]["strong"]["flag"] == "CEILING" and cal["families"]["a"]["weak"]["flag"] == ""
    assert cal["families"]["b"]["strong"]["flag"] == "" and cal["families"]["b"]["weak"]["flag"] == "NEVER"
    assert "weak" not in cal["families"]["c"]  # a family one model did not play is no cell, not a zero
    assert cal["columns"]["strong"] == {"overall": cal["columns"]["strong"]["overall"], "complete": True,
                                        "ceiling": ["a"], "never": ["c"]}
    assert cal["families"]["a"]["strong"]["k"] == 2  # pass^k at the most samples every task has


def test_run_names_are_folder_names():
    assert run_name("openai", "gpt-4.1") == "openai-gpt-4.1"
    assert run_name("local", "/models/my model/") == "local-my_model"
    assert run_name("oracle", None) == "oracle"


def test_calibrating_two_policies_gives_one_table_and_a_rerun_resumes(tmp_path, capsys):
    out = tmp_path / "cal"
    common = ["--family", "log_first_error", "--seeds", "2", "--samples", "2", "--out", str(out), "--quiet"]
    assert main(["calibrate", "--policy", "oracle", *common]) == 0
    assert main(["calibrate", "--policy", "null", *common]) == 0
    cal = json.loads((out / "calibration.json").read_text())
    assert sorted(cal["columns"]) == ["null", "oracle"]
    oracle, null = cal["families"]["log_first_error"]["oracle"], cal["families"]["log_first_error"]["null"]
    assert (oracle["pass@1"], oracle["pass^k"], oracle["k"], oracle["flag"]) == (1.0, 1.0, 2, "CEILING")
    assert (null["pass@1"], null["flag"], null["episodes"]) == (0.0, "NEVER", 4)
    md = (out / "calibration.md").read_text()
    assert "| log_first_error |" in md and "**NEVER**" in md
    lines = (out / "runs" / "oracle" / "trajectories.jsonl").read_text().splitlines()
    assert main(["calibrate", "--policy", "oracle", *common]) == 0  # resumed: nothing played again
    assert (out / "runs" / "oracle" / "trajectories.jsonl").read_text().splitlines() == lines
    (out / "calibration.md").unlink()
    assert main(["calibrate", "--out", str(out), "--ceiling", "1"]) == 0  # the table alone, new ceiling
    assert json.loads((out / "calibration.json").read_text())["ceiling"] == 1.0
    assert (out / "calibration.md").exists()


def test_bad_calibrate_input_is_a_usage_error(tmp_path, capsys):
    assert main(["calibrate", "--out", str(tmp_path / "empty")]) == 2
    assert "no runs yet" in capsys.readouterr().err
    assert main(["calibrate", "--out", str(tmp_path / "x"), "--name", "a"]) == 2
    assert main(["calibrate", "--policy", "null", "--name", "../up", "--out", str(tmp_path / "x")]) == 2
    assert "--name" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["calibrate", "--out", str(tmp_path / "file")]) == 2
