"""The training commands end to end on the embedded defaults: model init -> teacher run ->
data sft -> train sft -> train rl (checkpoint, then --resume), and their usage errors."""

import json

import pytest

pytest.importorskip("trl")

from longhorizon.cli import main  # noqa: E402

FAMILY = "downloads_cleanup"


def test_bad_input_exits_with_code_2(tmp_path, capsys):
    assert main(["data", "sft", str(tmp_path / "missing"), "--out", str(tmp_path / "d")]) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("group_sise: 8\n")
    assert main(["train", "rl", "--config", str(bad), "--model", "x", "--out", str(tmp_path / "o")]) == 2
    assert "group_sise" in capsys.readouterr().err
    assert main(["train", "sft", "--data", str(tmp_path / "none"), "--model", "x", "--out", str(tmp_path / "s")]) == 2


def test_pipeline_commands_end_to_end_with_resume(tmp_path, capsys):
    model, teacher, data = tmp_path / "tiny", tmp_path / "teacher", tmp_path / "data"
    sft, rl = tmp_path / "sft", tmp_path / "rl"
    assert main(["model", "init", "--tiny", "--out", str(model), "--family", FAMILY]) == 0
    assert json.loads((model / "config.json").read_text())["model_type"] == "qwen3"
    assert main(["run", "--policy", "oracle", "--family", FAMILY, "--seeds", "2", "--out", str(teacher),
                 "--quiet"]) == 0
    assert main(["data", "sft", str(teacher), "--min-reward", "0.9", "--out", str(data)]) == 0
    capsys.readouterr()
    assert main(["train", "sft", "--data", str(data), "--model", str(model), "--out", str(sft), "--max-steps", "2",
                 "--max-length", "2048", "--quiet"]) == 0
    out, err = capsys.readouterr()  # the summary, the data line: no trainer dicts, no bars
    assert json.loads(out)["steps"] == 2 and err.count("\n") == 1 and err.startswith("SFT data: "), (out, err)
    assert (sft / "model.safetensors").exists() and len((sft / "log.jsonl").read_text().splitlines()) == 2
    rl_args = ["train", "rl", "--model", str(sft), "--out", str(rl), "--family", FAMILY, "--seeds", "1",
               "--group-size", "2", "--micro-batch-size", "2", "--max-turns", "2", "--max-new-tokens", "8",
               "--max-context", "4096", "--save-steps", "1", "--quiet"]
    assert main(rl_args + ["--max-steps", "1"]) == 0
    out, err = capsys.readouterr()
    assert "{'" not in out + err and "%|" not in out + err, (out, err)  # no trainer dicts, no bars
    assert (rl / "checkpoint-1").is_dir()
    assert main(rl_args + ["--max-steps", "2"]) == 2  # checkpoints there: refuses to start over silently
    assert main(rl_args + ["--max-steps", "2", "--resume"]) == 0
    steps = [json.loads(line) for line in (rl / "log.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    assert {"reward", "pass_rate", "zero_variance_groups", "tokens_seen", "episode_turns", "clip_fraction"} <= set(steps[0])
    rollouts = [json.loads(line) for line in (rl / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 4 and len({r["provenance"]["world_hash"] for r in rollouts}) == 1
    assert (rl / "model.safetensors").exists()
