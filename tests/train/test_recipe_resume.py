"""The recipe's pipeline shape (configs/recipe_cpu.yaml) on the tiny model: level-1 teacher and
RL, evaluation on held-out seeds, a holdout family and a longer level; a crash at a stage
boundary and one inside the evaluation, then a rerun that skips what finished."""

import json

import pytest

pytest.importorskip("trl")

FAMILIES = ["downloads_cleanup", "contact_list_cleanup"]  # both have levels 1-3

RECIPE_TINY = f"""
model: {{name: tiny, hidden_size: 32, num_layers: 1, num_heads: 2, num_kv_heads: 1, intermediate_size: 64, corpus_seeds: 1}}
teacher: {{families: {FAMILIES}, seeds: 1, level: 1, recovery: 0.0}}
sft: {{max_steps: 1, max_length: 4096}}
start: {{checkpoint: headroom, dev_seeds: 1}}
rl: {{families: {FAMILIES}, levels: [1], curriculum: true, seeds: 1, group_size: 2, micro_batch_size: 2,
     max_steps: 1, max_new_tokens: 4, max_turns: 1, max_context: 4096}}
eval: {{families: {FAMILIES}, seeds: 1, level: 1, transfer_families: [sla_breach_escalation], transfer_seeds: 1,
       transfer_level: 1, longer_levels: [2], max_new_tokens: 4, max_turns: 1, max_context: 4096, engine: local}}
"""


class Killed(Exception):
    pass


def test_a_recipe_run_killed_at_a_stage_and_inside_evaluation_resumes_to_a_complete_result(
        tmp_path, monkeypatch, capsys):
    import longhorizon.train.pipeline as pipeline
    import longhorizon.train.rl as rl
    import longhorizon.train.sft as sft

    cfg = tmp_path / "recipe_tiny.yaml"
    cfg.write_text(RECIPE_TINY)
    out = tmp_path / "run"
    times = out / "stage_times.json"

    # 1: killed as RL starts: model, teacher, data and SFT are done and recorded
    def killed(*a, **kw):
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(rl, "run_rl", killed)
        with pytest.raises(Killed):
            pipeline.run_pipeline(out, config=cfg, progress=False)
    assert list(json.loads(times.read_text())) == ["model", "teacher", "data", "sft", "start"]
    teacher_rows = (out / "teacher" / "trajectories.jsonl").read_text().splitlines()
    assert {json.loads(r)["task_id"] for r in teacher_rows} == ids("train", FAMILIES, 1)  # level 1 of each

    # 2: killed inside the evaluation, on its last run (RL's longer level)
    real = pipeline.evaluate_model
    played, kill = [], {"rl-level2"}

    def evaluate(path, run_out, ec, **kw):
        played.append(run_out.name)
        if run_out.name in kill:
            raise Killed
        return real(path, run_out, ec, **kw)

    monkeypatch.setattr(pipeline, "evaluate_model", evaluate)
    with monkeypatch.context() as m:
        m.setattr(sft, "run_sft", killed)  # finished: never called again
        with pytest.raises(Killed):
            pipeline.run_pipeline(out, config=cfg, progress=False)
    assert "rl" in json.loads(times.read_text()) and "eval" not in json.loads(times.read_text())
    assert sorted(played) == sorted(f"{m}{s}" for m in ("base", "sft", "rl") for s in ("", "-transfer", "-level2"))

    # 3: the rerun skips every finished stage and run, plays the one missing run, and reports
    capsys.readouterr()
    played.clear()
    kill.clear()
    with monkeypatch.context() as m:
        m.setattr(sft, "run_sft", killed)
        m.setattr(rl, "run_rl", killed)
        result = pipeline.run_pipeline(out, config=cfg, progress=False)
    printed = capsys.readouterr().out
    assert played == ["rl-level2"]
    for stage in ("data", "sft", "start", "rl"):
        assert f"{stage}: " in printed and printed.split(f"] {stage}: ")[1].split("\n")[0].endswith(
            "(already done, skipped)"), stage
    assert (out / "teacher" / "trajectories.jsonl").read_text().splitlines() == teacher_rows  # nothing replayed
    assert result["complete"]
    assert list(json.loads(times.read_text())) == ["model", "teacher", "data", "sft", "start", "rl", "eval", "report"]
    report = result["report"]
    assert [r["model"] for r in report["transfer_rows"]] == ["base", "sft", "rl"]
    assert [r["model"] for r in report["longer_rows"][2]] == ["base", "sft", "rl"]
    assert "rl vs base (level 2)" in report["comparisons"]
    for key, expected in (("rl", ids("holdout", FAMILIES, 1)), ("rl-level2", ids("holdout", FAMILIES, 2)),
                          ("rl-transfer", ids("holdout-family", ["sla_breach_escalation"], 1))):
        rows = (out / "eval" / key / "trajectories.jsonl").read_text().splitlines()
        assert {json.loads(r)["task_id"] for r in rows} == expected, key


def ids(split, families, level):
    from longhorizon.tasks.registry import tasks_for

    found = {t.id for t in tasks_for(split, 1, families, level)}
    assert all(i.endswith(f"@L{level}") for i in found)  # ids name the level below the top one
    return found


def test_the_recipe_config_evaluates_held_out_seeds_holdout_families_and_longer_levels():
    """configs/recipe_cpu.yaml: (a) level 1 on held-out seeds, (b) every holdout family at level 1,
    (c) levels 2 and 3 of the families that have them; the teacher and RL play level 1."""
    from pathlib import Path

    from longhorizon.tasks.registry import HOLDOUT_FAMILIES, get_family
    from longhorizon.train.config import load_pipeline
    from longhorizon.train.pipeline import demo_config, longer_evals, transfer_eval

    cfg = load_pipeline(Path(__file__).parents[2] / "configs" / "recipe_cpu.yaml", base=demo_config())
    assert (cfg.teacher.level, cfg.teacher.families, cfg.rl.levels, cfg.rl.sampler) == (1, None, [1], "vllm")
    assert (cfg.eval.level, cfg.eval.engine, cfg.eval.dtype) == (1, "vllm", "float32")
    t = transfer_eval(cfg)
    assert (t.split, t.level, sorted(t.families)) == ("holdout-family", 1, sorted(HOLDOUT_FAMILIES))
    longer = longer_evals(cfg)
    assert [(s, c.level, c.split) for s, c in longer] == [("-level2", 2, "holdout"), ("-level3", 3, "holdout")]


def test_longer_levels_must_be_longer_than_every_trained_level():
    from longhorizon.core.errors import UsageError
    from longhorizon.train.pipeline import demo_config, longer_evals

    cfg = demo_config()
    assert longer_evals(cfg) == []  # the demo: unset, nothing more is evaluated
    cfg.eval.longer_levels = [2]
    with pytest.raises(UsageError, match="default"):  # the demo trains each family's top level
        longer_evals(cfg)
    cfg.teacher.level, cfg.rl.levels = 1, [1, 2]
    with pytest.raises(UsageError, match="not longer"):
        longer_evals(cfg)
    cfg.eval.families, cfg.rl.levels = ["downloads_cleanup", "log_first_error"], [1]  # the second has one level
    [(suffix, ec)] = longer_evals(cfg)
    assert (suffix, ec.level, ec.families) == ("-level2", 2, ["downloads_cleanup"])
