"""The KV-cache room a vLLM server is given: enough for every sequence in flight, so vLLM never
preempts and recomputes (with the old fixed 2 GiB, 32 float32 SmolLM2 episodes of 4,096 tokens
thrashed at 100% KV use)."""

import json

from longhorizon.serve.vllm import kv_cache_gib_for


def _model(tmp_path, **config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_room_is_layers_x_kv_heads_x_head_dim_x_two_x_bytes_x_tokens(tmp_path):
    # SmolLM2-135M's shape: 30 layers, 9 heads of 64 (hidden 576), 3 KV heads
    model = _model(tmp_path, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576)
    per_token_fp32 = 2 * 30 * 3 * 64 * 4  # 46,080 bytes
    room = kv_cache_gib_for(model, "float32", 32, 4096)
    assert room == 7 and isinstance(room, int)  # 1.1 x 5.6 GiB, rounded up: vLLM takes whole GiB only
    assert kv_cache_gib_for(model, "bfloat16", 32, 4096) == 4  # half the bytes a token


def test_small_needs_keep_the_floor_and_head_dim_and_text_config_are_read(tmp_path):
    model = _model(tmp_path, text_config={"num_hidden_layers": 2, "num_attention_heads": 2, "head_dim": 128,
                                          "hidden_size": 64})
    assert kv_cache_gib_for(model, "bfloat16", 1, 512) == 2  # 2 layers x 2 heads x 128: far below the floor
    assert kv_cache_gib_for(model, "float32", 1024, 8192, floor_gib=1) == 36  # 1.1 x 32 GiB, rounded up


def test_a_model_without_a_readable_config_gets_the_floor(tmp_path):
    assert kv_cache_gib_for(tmp_path, "float32", 64, 8192) == 2  # no config.json
    assert kv_cache_gib_for(_model(tmp_path, hidden_size=64), "float32", 64, 8192, floor_gib=3) == 3
