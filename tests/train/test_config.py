"""Stage configs: defaults < YAML < flags; the shipped YAML files load; mistakes are caught."""

from dataclasses import asdict
from pathlib import Path

import pytest

from longhorizon.core.errors import UsageError
from longhorizon.train.config import (
    LoraSettings, PipelineConfig, RLConfig, SFTConfig, TeacherConfig, load_pipeline, load_stage,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_flags_override_yaml_which_overrides_defaults(tmp_path):
    path = tmp_path / "rl.yaml"
    path.write_text("group_size: 4\nloss: grpo\nmax_steps: 3\nlora: false\n")
    cfg = load_stage(RLConfig, path, {"max_steps": 7, "seeds": None})
    assert (cfg.group_size, cfg.loss, cfg.max_steps, cfg.seeds) == (4, "grpo", 7, 10)
    assert cfg.lora == LoraSettings(enabled=False)
    assert cfg.clip_range() == (0.2, 0.2)  # token-level GRPO's default range


def test_gspo_defaults_are_the_papers():
    cfg = RLConfig()
    assert (cfg.loss, cfg.clip_range(), cfg.beta, cfg.group_size, cfg.reward, cfg.effort_floor) == (
        "gspo", (3e-4, 4e-4), 0.0, 8, "dense", 0.0)


def test_unknown_keys_and_bad_values_are_usage_errors(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("learning_rat: 0.1\n")
    with pytest.raises(UsageError, match="learning_rat"):
        load_stage(SFTConfig, path)
    with pytest.raises(UsageError, match="micro_batch_size"):
        RLConfig(group_size=8, micro_batch_size=3).validate()
    with pytest.raises(UsageError, match="loss"):
        RLConfig(loss="ppo").validate()
    with pytest.raises(UsageError, match="no such config"):
        load_stage(SFTConfig, tmp_path / "missing.yaml")


def test_attn_implementation_is_checked_in_both_training_stages(tmp_path):
    path = tmp_path / "sft.yaml"
    path.write_text("attn_implementation: sink_flex\n")
    assert load_stage(SFTConfig, path).attn_implementation == "sink_flex"
    assert SFTConfig().attn_implementation is None and RLConfig().attn_implementation is None
    for cfg in (SFTConfig(attn_implementation="sinks"), RLConfig(attn_implementation="sinks")):
        with pytest.raises(UsageError, match="must be one of eager, sdpa.*sink_flex, got 'sinks'"):
            cfg.validate()


def test_the_recipe_config_mirrors_the_published_recipe():
    path = CONFIGS / "recipe_qwen3_30b_a3b.yaml"
    sft, rl, teacher = load_stage(SFTConfig, path), load_stage(RLConfig, path), load_stage(TeacherConfig, path)
    assert teacher.min_reward == 0.9
    for lora in (sft.lora, rl.lora):
        assert (lora.enabled, lora.r, lora.alpha) == (True, 32, 32)
        assert set(lora.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert (rl.loss, rl.group_size, rl.clip_range(), rl.beta) == ("gspo", 8, (3e-4, 4e-4), 0.0)
    rl.validate()


def test_tiny_stage_configs_and_the_demo_config_load():
    from longhorizon.train.pipeline import demo_config

    sft = load_stage(SFTConfig, CONFIGS / "sft_tiny.yaml")
    rl = load_stage(RLConfig, CONFIGS / "rl_tiny.yaml")
    rl.validate()
    assert sft.lora.enabled == "auto" and rl.group_size == 8
    demo = load_pipeline(CONFIGS / "demo.yaml", base=demo_config())
    assert asdict(demo) == asdict(demo_config())  # the YAML documents exactly the built-in demo
    assert isinstance(load_pipeline(None), PipelineConfig)


def test_the_served_samplers_dtype_defaults_to_what_the_machine_serves_fastest():
    from longhorizon.serve.vllm import auto_dtype
    from longhorizon.train.config import RLConfig

    assert RLConfig().sampler_dtype == "auto"
    assert auto_dtype("auto", cuda=False) == "float32"   # bfloat16 is emulated on a CPU without it
    assert auto_dtype("auto", cuda=True) == "bfloat16"
    assert auto_dtype("bfloat16", cuda=False) == "bfloat16"  # a dtype named is a dtype kept
    with pytest.raises(UsageError, match="sampler_dtype"):
        RLConfig(sampler="vllm", sampler_dtype="fp8").validate()
