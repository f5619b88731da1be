"""The demo report's pieces: paired comparisons with McNemar, GSPO steps, how far RL moved the weights."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from safetensors.torch import save_file  # noqa: E402

from longhorizon.train.report import format_comparisons, format_rl_steps, rl_steps, weight_change  # noqa: E402


def _comparison(lo, hi):
    return {"paired_tasks": 16, "delta_pass@1": 0.0, "delta_pass@1_ci95": [0.0, 0.0], "delta_mean_reward": 0.2,
            "delta_mean_reward_ci95": [lo, hi], "mcnemar": {"a_only_passed": 0, "b_only_passed": 0, "p_value": 1.0}}


def test_a_reward_interval_that_excludes_zero_is_marked_and_mcnemar_is_printed():
    text = format_comparisons([("sft vs base (holdout)", _comparison(0.1, 0.3)),
                               ("rl vs sft (holdout)", _comparison(-0.1, 0.3))])
    win, tie = text.splitlines()[1:]
    assert win.rstrip().endswith("1") and "*" in win
    assert "*" not in tie
    assert "McNemar p" in text.splitlines()[0]


def test_rl_steps_show_the_zero_variance_share_of_each_step(tmp_path):
    log = tmp_path / "models" / "rl" / "log.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps(r) + "\n" for r in [
        {"step": 1, "reward": 0.25, "pass_rate": 0.0, "zero_variance_groups": 0.0, "loss": 0.01},
        {"step": 2, "grad_norm": 0.5}]))
    steps = rl_steps(tmp_path)
    assert [s["step"] for s in steps] == [1, 2]
    lines = format_rl_steps(steps).splitlines()
    assert "zero-var groups" in lines[0]
    assert lines[1].split()[3] == "0.00" and lines[2].split()[3] == "-"


def test_weight_change_is_zero_for_the_same_weights_and_positive_after_a_change(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    w = {"w": torch.ones(2, 2)}
    save_file(w, a / "model.safetensors")
    save_file(w, b / "model.safetensors")
    assert weight_change(a, b) == {"max_abs": 0.0, "relative_l2": 0.0}
    save_file({"w": torch.tensor([[1.0, 1.0], [1.0, 3.0]])}, b / "model.safetensors")
    moved = weight_change(a, b)
    assert moved["max_abs"] == pytest.approx(2.0) and moved["relative_l2"] == pytest.approx(1.0)
    assert weight_change(a, tmp_path / "missing") is None


def _rows(passed: list[bool]) -> list[dict]:
    return [{"episode_id": f"e{i}", "task_id": f"t{i}", "sample": 0, "family": "f",
             "grade": {"reward": float(p), "passed": p}} for i, p in enumerate(passed)]


def test_a_base_rerun_gives_every_comparison_its_noise_floor():
    """Base vs its rerun: 2 of 8 verdicts flip (by hand), so the floor is wide; SFT's +0.75 is
    outside it and a Δ of one task inside."""
    from longhorizon.train.report import _comparisons

    base = [True, False, False, False, False, False, False, False]
    rerun = [False, True, False, False, False, False, False, False]  # tasks 0 and 1 flip
    sft = [True, True, True, True, True, True, True, False]
    rl = [True, True, True, True, True, True, True, True]
    comps = dict(_comparisons({"base": _rows(base), "sft": _rows(sft), "rl": _rows(rl)}, repeat=_rows(rerun)))
    floor = comps["sft vs base (holdout)"]["noise_floor"]
    assert (floor["disagreements"], floor["paired_tasks"]) == (2, 8) and floor["self_disagreement"] == 0.25
    assert floor["floor"]["pass@1"] > 1 / 8
    assert comps["sft vs base (holdout)"]["inside_noise_floor"]["pass@1"] is False
    assert comps["rl vs sft (holdout)"]["inside_noise_floor"]["pass@1"] is True
    text = format_comparisons(list(comps.items()))
    assert "noise floor" in text.splitlines()[0]
    assert text.splitlines()[1].endswith("outside") and text.splitlines()[2].endswith("inside")
    assert "2 verdicts flipped (0.250)" in text
    plain = format_comparisons(list(_comparisons({"base": _rows(base), "sft": _rows(sft)})))
    assert "noise floor" not in plain
