"""`longhorizon demo` on a micro configuration: every stage runs, resumes, and the report is written.
Also: the RL reward options and LoRA fine-tuning."""

import json

import pytest

pytest.importorskip("trl")

from longhorizon.cli import main  # noqa: E402
from longhorizon.core.grade import CriterionResult, Grade  # noqa: E402
from longhorizon.core.trajectory import ToolCallRecord, Trajectory  # noqa: E402
from longhorizon.train.rl import shaped_reward  # noqa: E402

MICRO = """
model: {name: tiny, hidden_size: 32, num_layers: 1, num_heads: 2, num_kv_heads: 1, intermediate_size: 64, corpus_seeds: 1}
teacher: {families: [downloads_cleanup], seeds: 1, recovery: 1.0}
sft: {max_steps: 1, max_length: 4096}
rl: {families: [downloads_cleanup], seeds: 1, group_size: 2, micro_batch_size: 2, updates_per_rollout: 1,
     max_steps: 1, max_new_tokens: 4, max_turns: 1, max_context: 4096}
eval: {families: [downloads_cleanup], seeds: 1, max_new_tokens: 4, max_turns: 1, max_context: 4096}
"""


def test_demo_runs_every_stage_resumes_and_reports(tmp_path, capsys):
    cfg = tmp_path / "micro.yaml"
    cfg.write_text(MICRO)
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--config", str(cfg), "--quiet"]) == 0
    printed = capsys.readouterr().out
    for label in ("base (untrained)", "SFT", "SFT + GSPO"):
        assert label in printed
    for f in ("report.md", "report.html", "learning_curve.png", "models/rl/model.safetensors",
              "eval/base/trajectories.jsonl", "eval/rl/trajectories.jsonl"):
        assert (out / f).exists(), f
    md = (out / "report.md").read_text()
    assert "pass@1" in md and "learning_curve.png" in md
    data = json.loads((out / "sft_data" / "summary.json").read_text())
    assert data["kept"] == 1
    # rerun: finished stages are skipped, the report is rebuilt
    assert main(["demo", "--out", str(out), "--config", str(cfg), "--quiet"]) == 0
    assert "already done, skipped" in capsys.readouterr().out


def _traj(reward_passed, calls):
    t = Trajectory(episode_id="t#0", task_id="t", family="f", category="c", split="train", seed=0, sample=0,
                   provenance={})
    t.grade = Grade(tuple(CriterionResult(f"c{i}", "final_state", 1.0, p) for i, p in enumerate(reward_passed)))
    t.tool_calls = [ToolCallRecord(turn=0, id=str(i), name="files__x", arguments={}, result="", is_error=err,
                                   duration_ms=0.0) for i, err in enumerate(calls)]
    return t


def test_reward_modes_and_the_effort_floor():
    half = _traj([True, False], [False, True])
    assert shaped_reward(half, "dense") == 0.5
    assert shaped_reward(half, "pass") == 0.0
    zero = _traj([False, False], [False, False, False, True])
    assert shaped_reward(zero, "dense") == 0.0  # off by default
    assert shaped_reward(zero, "dense", effort_floor=0.1) == pytest.approx(0.075)  # 3 of 4 calls succeeded
    assert shaped_reward(half, "dense", effort_floor=0.1) == 0.5  # above the floor: untouched
    assert shaped_reward(_traj([False], []), "dense", effort_floor=0.1) == 0.0  # no calls, no effort


def test_the_repetition_penalty_costs_the_share_of_exact_repeats():
    t = _traj([True, False], [False, False, False, False])  # reward 0.5, four identical calls
    t.tool_calls[3].arguments = {"path": "other"}  # calls 1 and 2 repeat call 0; call 3 is new
    assert shaped_reward(t, "dense") == 0.5  # off by default
    assert shaped_reward(t, "dense", repetition_penalty=0.2) == pytest.approx(0.5 - 0.2 * 2 / 4)
    loop = _traj([True, False], [False, False, False, False])  # 3 of 4 calls repeat: 0.5 - 0.75 < 0
    assert shaped_reward(loop, "dense", repetition_penalty=1.0) == 0.0  # floored at 0


def test_lora_rank_32_alpha_32_on_attention_and_mlp_and_a_merged_save(small_model, tmp_path):
    from datasets import Dataset
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from longhorizon.train.config import LoraSettings, SFTConfig
    from longhorizon.train.sft import build_trainer
    from longhorizon.train.stage import save_final

    ds = Dataset.from_list([{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
                             "tools": "[]"}])
    model = AutoModelForCausalLM.from_pretrained(small_model)
    cfg = SFTConfig(out=str(tmp_path / "o"), max_steps=1, lora=LoraSettings(enabled="auto"))
    full = build_trainer(cfg, model=model, tokenizer=AutoTokenizer.from_pretrained(small_model), dataset=ds,
                         progress=False)
    assert not isinstance(full.model, PeftModel)  # auto: the tiny model is fully fine-tuned
    cfg.lora = LoraSettings(enabled=True)
    trainer = build_trainer(cfg, model=AutoModelForCausalLM.from_pretrained(small_model),
                            tokenizer=AutoTokenizer.from_pretrained(small_model), dataset=ds, progress=False)
    assert isinstance(trainer.model, PeftModel)
    lora = trainer.model.peft_config["default"]
    assert (lora.r, lora.lora_alpha) == (32, 32)
    assert set(lora.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    trainer.train()
    save_final(trainer, tmp_path / "o", cfg.lora)
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "o")
    assert not any("lora" in k for k in merged.state_dict())
    assert (tmp_path / "o" / "adapter" / "adapter_config.json").exists()


def test_models_are_evaluated_in_float32_by_default_with_either_engine(monkeypatch, tmp_path):
    """An RL update is smaller than rounding the weights to bfloat16: RL vs SFT is compared in float32."""
    import contextlib

    import torch

    import longhorizon.policies.local_model as local_model
    import longhorizon.serve.vllm as vllm
    from longhorizon.train.config import EvalConfig
    from longhorizon.train.pipeline import evaluate_model, served_policy

    seen = {}

    class Stop(Exception):
        pass

    def local(path, **kw):
        seen["local"] = kw.get("dtype")
        raise Stop

    @contextlib.contextmanager
    def server(path, **kw):
        seen["vllm"] = kw.get("dtype")
        yield type("S", (), {"base_url": "http://127.0.0.1:1/v1", "model_name": "m"})()

    monkeypatch.setattr(local_model, "LocalModelPolicy", local)
    monkeypatch.setattr(vllm, "VLLMServer", server)
    cfg = EvalConfig(families=["log_first_error"], seeds=1)
    assert cfg.dtype == "float32"
    with pytest.raises(Stop):
        evaluate_model(tmp_path, tmp_path / "run", cfg, progress=False)
    with served_policy(tmp_path, cfg, tmp_path / "log") as policy:
        assert policy.describe()["base_url"].endswith(":float32")  # a bfloat16 run never resumes as this one
    assert seen == {"local": torch.float32, "vllm": "float32"}


def test_a_served_evaluation_runs_the_base_twice_on_one_server_and_a_local_one_once(tmp_path):
    """The rerun (eval/base-repeat) is the report's noise floor; served runs need it (batching),
    and it shares the base's server (runs grouped by model)."""
    import dataclasses

    from longhorizon.train.config import EvalConfig
    from longhorizon.train.pipeline import eval_plan

    models = {"base": tmp_path / "b", "sft": tmp_path / "s", "rl": tmp_path / "r"}
    served = EvalConfig(engine="vllm")
    transfer = dataclasses.replace(served, split="holdout-family")
    plan = eval_plan(served, transfer, models)
    assert [(k, n) for k, n, _, _ in plan] == [
        ("base", "base"), ("base-repeat", "base"), ("base-transfer", "base"), ("base-repeat-transfer", "base"),
        ("sft", "sft"), ("sft-transfer", "sft"), ("rl", "rl"), ("rl-transfer", "rl")]
    assert all(path == models[n] for _, n, path, _ in plan)
    assert [k for k, *_ in eval_plan(EvalConfig(), None, models)] == ["base", "sft", "rl"]
    assert [k for k, *_ in eval_plan(EvalConfig(repeat_base=True), None, models)] == ["base", "base-repeat", "sft", "rl"]
    assert [k for k, *_ in eval_plan(EvalConfig(engine="vllm", repeat_base=False), None, models)] == ["base", "sft", "rl"]


def test_the_demos_transfer_family_is_a_never_trained_sibling_played_on_its_held_out_seeds():
    """log_last_warning trains in the suite but never in the demo: its held-out seeds measure transfer."""
    from longhorizon.core.task import HOLDOUT_SEED_BASE
    from longhorizon.tasks.registry import tasks_for
    from longhorizon.train.pipeline import demo_config, transfer_eval

    cfg = demo_config()
    t = transfer_eval(cfg)
    assert (t.split, t.families, t.transfer_families) == ("holdout", ["log_last_warning"], None)
    assert not set(t.families) & set(cfg.teacher.families + cfg.rl.families)
    tasks = tasks_for(t.split, t.seeds, t.families)
    assert len(tasks) == cfg.eval.transfer_seeds
    assert all(task.split == "holdout" and task.seed >= HOLDOUT_SEED_BASE for task in tasks)


def test_transfer_families_are_held_out_families_or_train_families_the_pipeline_leaves_out():
    from longhorizon.core.errors import UsageError
    from longhorizon.tasks.registry import HOLDOUT_FAMILIES
    from longhorizon.train.pipeline import demo_config, transfer_eval

    held = sorted(HOLDOUT_FAMILIES)[0]
    cfg = demo_config()
    cfg.eval.transfer_families = [held]
    assert transfer_eval(cfg).split == "holdout-family"
    cfg.eval.transfer_families = ["log_first_error"]  # the demo trains on it
    with pytest.raises(UsageError, match="is trained on"):
        transfer_eval(cfg)
    cfg.eval.transfer_families = ["log_last_warning"]
    cfg.rl.families = None  # RL on every train family: log_last_warning included
    with pytest.raises(UsageError, match="is trained on"):
        transfer_eval(cfg)
    cfg = demo_config()
    cfg.eval.transfer_families = ["log_last_warning", held]
    with pytest.raises(UsageError, match="mixes"):
        transfer_eval(cfg)
    cfg.eval.transfer_families = None
    assert transfer_eval(cfg) is None
