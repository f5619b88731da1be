"""RL's start with headroom: SFT keeps a model per step, the pipeline plays them on a train-split
dev set and starts RL from the earliest whose dev pass lies in the band (train/headroom.py)."""

import json

import pytest

from longhorizon.core.errors import UsageError
from longhorizon.train.config import PipelineConfig, StartConfig
from longhorizon.train.headroom import DEV_OFFSET, choose_checkpoint, dev_tasks, search, step_models

BAND = (0.25, 0.60)


def test_the_earliest_step_in_the_band_is_chosen():
    assert choose_checkpoint({1: 0.0, 2: 0.25, 3: 0.5}, BAND)[0] == 2
    assert choose_checkpoint({1: 0.1, 2: 0.6}, BAND)[0] == 2


def test_a_jump_over_the_band_takes_the_step_closest_to_its_middle_strictly_between_0_and_1():
    # middle 0.425: 0.125 is 0.3 away, 0.875 is 0.45 away
    k, why = choose_checkpoint({1: 0.0, 2: 0.125, 3: 0.875}, BAND)
    assert k == 2 and "closest" in why
    assert choose_checkpoint({1: 0.0, 2: 0.875}, BAND)[0] == 2


def test_no_step_strictly_between_0_and_1_means_no_headroom():
    k, why = choose_checkpoint({1: 0.0, 2: 1.0}, BAND)
    assert k is None and "strictly between 0 and 1" in why
    assert choose_checkpoint({}, BAND)[0] is None


@pytest.mark.parametrize("first", range(1, 11))
def test_bisection_finds_the_earliest_step_at_the_low_end_and_plays_few(first):
    """Steps 1..9, the dev pass 0 before step ``first`` and 0.5 from it (10: no step reaches the
    band). The earliest step at or past 0.25 is always played, and so is the step just before it,
    in at most ceil(log2(9)) + 1 = 5 plays."""
    rate = {k: 0.5 if k >= first else 0.0 for k in range(1, 10)}
    played = []

    def pass_rate(k):
        played.append(k)
        return rate[k]

    rates = search(list(range(1, 10)), pass_rate, BAND)
    assert len(played) == len(set(played)) <= 5
    reached = [k for k in range(1, 10) if rate[k] >= BAND[0]]
    if reached:
        assert reached[0] in rates and choose_checkpoint(rates, BAND)[0] == reached[0]
        if reached[0] > 1:
            assert reached[0] - 1 in rates
    else:
        assert 9 in rates and choose_checkpoint(rates, BAND)[0] is None


def test_the_dev_set_is_train_split_seeds_of_its_own():
    tasks = dev_tasks(["log_error_summary"], 2, level=1)
    assert [t.split for t in tasks] == ["train", "train"]
    assert all(t.seed >= DEV_OFFSET and t.level == 1 for t in tasks)
    assert len({t.id for t in tasks}) == 2


def test_step_models_are_the_kept_folders_with_a_model(tmp_path):
    for k in (1, 2, 10):
        (tmp_path / "steps" / f"step-{k}").mkdir(parents=True)
        (tmp_path / "steps" / f"step-{k}" / "config.json").write_text("{}")
    (tmp_path / "steps" / "step-3").mkdir()  # interrupted while saving: no model in it
    (tmp_path / "steps" / "step-x").mkdir()
    assert sorted(step_models(tmp_path)) == [1, 2, 10]


@pytest.mark.parametrize("bad", [dict(checkpoint="best"), dict(dev_seeds=0), dict(dev_seeds=True),
                                 dict(band=[0.6, 0.2]), dict(band=[0.2]), dict(band=[-0.1, 0.5])])
def test_start_settings_are_checked(bad):
    with pytest.raises(UsageError):
        StartConfig(**bad).validate()


def test_a_chosen_step_is_rls_start_and_carries_the_final_models_provenance(tmp_path, monkeypatch):
    """The choice, wired: steps are bisected (step 2, then step 1; step 3 never), the chosen folder gets the SFT records with ``chosen_by`` the dev pass, which the firewall accepts."""
    import longhorizon.train.pipeline as pipeline
    from longhorizon.policies.render import PROVENANCE_FILE
    from longhorizon.train.provenance import firewall_problems, stage_record

    sft = tmp_path / "sft"
    for k in (1, 2, 3):
        (sft / "steps" / f"step-{k}").mkdir(parents=True)
        (sft / "steps" / f"step-{k}" / "config.json").write_text("{}")
    record = stage_record("sft", [{"kind": "sft_data", "path": str(tmp_path / "data"), "source": "suite",
                                   "runs": [{"path": str(tmp_path / "teacher"), "split": "train", "source": "suite"}]}])
    (sft / PROVENANCE_FILE).write_text(json.dumps({"name": "m + sft", "training": [record]}))
    rates = {"step-1": 0.0, "step-2": 0.5, "step-3": 1.0}
    played = []

    def fake_evaluate(model, out, cfg, *, progress=True, policy=None, tasks=None):
        played.append(model.name)
        assert cfg.split == "train" and all(t.seed >= DEV_OFFSET for t in tasks)
        return {"overall": {"pass@1": rates[model.name], "episodes": len(tasks)}}

    monkeypatch.setattr(pipeline, "evaluate_model", fake_evaluate)
    cfg = PipelineConfig(start=StartConfig(checkpoint="headroom", dev_seeds=2))
    cfg.rl.families = ["log_error_summary"]
    chosen = pipeline.choose_start(cfg, sft, tmp_path / "dev", progress=False)
    assert played == ["step-2", "step-1"]
    assert chosen["checkpoint"] == 2 and chosen["path"] == str(sft / "steps" / "step-2")
    assert chosen["dev_pass"] == {"1": 0.0, "2": 0.5} and chosen["dev_tasks"] == 2
    prov = json.loads((sft / "steps" / "step-2" / PROVENANCE_FILE).read_text())
    assert prov["training"][-1]["chosen_by"]["signal"] == "train dev pass"
    assert prov["training"][-1]["chosen_by"]["step"] == 2
    assert firewall_problems(prov) == []
    assert not (sft / "steps" / "step-1" / PROVENANCE_FILE).exists()


def test_the_start_is_evaluated_between_sft_and_rl(tmp_path):
    from longhorizon.train.config import EvalConfig
    from longhorizon.train.pipeline import eval_plan

    models = {"base": tmp_path / "b", "sft": tmp_path / "s", "start": tmp_path / "s" / "steps" / "step-2",
              "rl": tmp_path / "r"}
    assert [k for k, *_ in eval_plan(EvalConfig(), None, models)] == ["base", "sft", "start", "rl"]


MICRO = """
model: {name: tiny, hidden_size: 32, num_layers: 1, num_heads: 2, num_kv_heads: 1, intermediate_size: 64, corpus_seeds: 1}
teacher: {families: [downloads_cleanup], seeds: 1, recovery: 1.0, level: 1}
sft: {max_steps: 2, max_length: 4096}
start: {checkpoint: headroom, dev_seeds: 1}
rl: {families: [downloads_cleanup], seeds: 1, group_size: 2, micro_batch_size: 2, updates_per_rollout: 1,
     max_steps: 1, max_new_tokens: 4, max_turns: 1, max_context: 4096, levels: [1]}
eval: {families: [downloads_cleanup], seeds: 1, max_new_tokens: 4, max_turns: 1, max_context: 4096, level: 1}
"""


def test_the_demo_with_a_headroom_start_plays_every_kept_step_and_says_where_rl_started(tmp_path, capsys):
    """The tiny model passes nothing, so no step has headroom: every kept step is played on the
    dev set, RL starts from the final SFT model, and the report says so."""
    pytest.importorskip("trl")
    from longhorizon.cli import main

    cfg = tmp_path / "micro.yaml"
    cfg.write_text(MICRO)
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--config", str(cfg), "--quiet"]) == 0
    steps = out / "models" / "sft" / "steps"
    assert sorted(p.name for p in steps.iterdir()) == ["step-1", "step-2"]
    assert (steps / "step-1" / "model.safetensors").exists() and not (steps / "step-1" / "optimizer.pt").exists()
    start = json.loads((out / "start.json").read_text())
    assert start["checkpoint"] is None and start["path"] == str(out / "models" / "sft")
    assert start["dev_pass"] == {"1": 0.0, "2": 0.0}
    run = json.loads((out / "dev" / "step-1" / "run.json").read_text())
    assert run["split"] == "train" and all(int(t.split("-")[-1].split("@")[0]) >= DEV_OFFSET for t in run["tasks"])
    assert not (out / "eval" / "start").exists()
    md = (out / "report.md").read_text()
    assert "RL started from the final SFT model" in md and "strictly between 0 and 1" in md
