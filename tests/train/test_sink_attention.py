"""``sink_flex`` (train.sink_attention) equals transformers' eager GPT-OSS attention, sinks and
sliding windows included: logits, and every parameter's gradient, on a tiny random GPT-OSS."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from longhorizon.train.sink_attention import NAME, register, sink_attention_forward  # noqa: E402

WINDOW = 4
SLIDING = ["sliding_attention", "full_attention"]
FULL = ["full_attention"] * 2


def tiny_gpt_oss(layer_types, sinks: float | None = 2.0, attn: str = "eager"):
    """A seeded 2-layer GPT-OSS (hidden 64, 4 heads, 2 kv heads, 2 experts) with sinks drawn at
    scale ``sinks`` (GPT-OSS initialises them near 0; here they must matter)."""
    from transformers import GptOssConfig, GptOssForCausalLM

    register()
    torch.manual_seed(0)
    config = GptOssConfig(vocab_size=100, hidden_size=64, intermediate_size=64, num_hidden_layers=len(layer_types),
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=2,
                          num_experts_per_tok=2, sliding_window=WINDOW, layer_types=layer_types,
                          max_position_embeddings=64, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                          attn_implementation=attn)
    model = GptOssForCausalLM(config).float()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.copy_(torch.randn(4) * sinks)
    return model


def batch():
    """Two sequences of 12 tokens (longer than the window), the second left-padded by 3."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (2, 12), generator=g)
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, :3] = 0
    labels = ids.masked_fill(mask == 0, -100)
    return dict(input_ids=ids, attention_mask=mask, labels=labels)


def with_attn(model, attn: str):
    other = copy.deepcopy(model)
    other.set_attn_implementation(attn)
    return other


def grads(model, inputs):
    model.train()
    model.zero_grad()
    out = model(**inputs)
    out.loss.backward()
    return out.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("layer_types", [SLIDING, FULL], ids=["sliding", "full"])
def test_flex_forward_equals_eager(layer_types):
    eager = tiny_gpt_oss(layer_types).eval()
    flex = with_attn(eager, NAME)
    with torch.no_grad():
        want, got = eager(**batch()).logits, flex(**batch()).logits
    assert flex.config._attn_implementation == NAME
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layer_types", [SLIDING, FULL], ids=["sliding", "full"])
def test_training_logits_and_every_gradient_equal_eager(layer_types):
    eager = tiny_gpt_oss(layer_types)
    flex = with_attn(eager, NAME)
    want_logits, want = grads(eager, batch())
    got_logits, got = grads(flex, batch())
    torch.testing.assert_close(got_logits, want_logits, atol=1e-5, rtol=1e-5)
    assert got.keys() == want.keys() and any(name.endswith("sinks") for name in got)
    for name in want:
        torch.testing.assert_close(got[name], want[name], atol=1e-5, rtol=1e-4, msg=name)


def test_the_sinks_change_the_output():
    """So the comparisons above would see sinks being ignored: zero sinks vs large ones."""
    small, large = tiny_gpt_oss(SLIDING, sinks=0.0, attn=NAME), tiny_gpt_oss(SLIDING, sinks=0.0, attn=NAME)
    with torch.no_grad():
        for layer in large.model.layers:
            layer.self_attn.sinks.fill_(3.0)
        assert (small(**batch()).logits - large(**batch()).logits).abs().max() > 1e-2


@pytest.mark.parametrize("grad", [False, True], ids=["flex", "sdpa"])
@pytest.mark.parametrize("sinks", [None, 1.0], ids=["no-sinks", "sinks"])
def test_fully_masked_rows_stay_finite(grad, sinks):
    """A query that may attend to nothing (a left-padded position) gives a finite output and
    gradient on both paths: all weight on the sink (output 0), or none on anything."""
    module = torch.nn.Module()
    module.training = True
    q, k, v = (torch.randn(1, 2, 3, 8, requires_grad=grad) for _ in range(3))
    mask = torch.zeros(1, 1, 3, 3)
    mask[0, 0, 0] = torch.finfo(torch.float32).min
    s_aux = None if sinks is None else torch.full((2,), sinks, requires_grad=grad)
    with torch.set_grad_enabled(grad):
        out, _ = sink_attention_forward(module, q, k, v, mask, scaling=0.3, s_aux=s_aux)
    assert torch.isfinite(out).all()
    if sinks is not None:
        assert out[0, 0].abs().max() < 1e-6  # the sink took all of the masked row's weight
    if grad:
        out.sum().backward()
        assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize("grad", [False, True], ids=["flex", "sdpa"])
def test_without_sinks_it_is_plain_attention(grad):
    module = torch.nn.Module()
    q = torch.randn(2, 4, 5, 8, requires_grad=grad)
    k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    mask = torch.full((2, 1, 5, 5), torch.finfo(torch.float32).min).triu(1)
    with torch.set_grad_enabled(grad):
        out, weights = sink_attention_forward(module, q, k, v, mask, scaling=0.25)
    want = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), attn_mask=mask, scale=0.25)
    assert weights is None
    torch.testing.assert_close(out, want.transpose(1, 2), atol=1e-6, rtol=1e-5)


def test_attention_dropout_in_training_is_refused():
    module = torch.nn.Module()
    q = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="attention_dropout"):
        sink_attention_forward(module, q, q, q, None, dropout=0.1)


def test_register_is_idempotent_and_from_pretrained_loads_it(tmp_path):
    from transformers import AttentionInterface, AutoModelForCausalLM
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    assert register() == register() == NAME
    assert AttentionInterface()[NAME] is sink_attention_forward and NAME in ALL_MASK_ATTENTION_FUNCTIONS
    eager = tiny_gpt_oss(SLIDING).eval()
    eager.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation=NAME).eval()
    assert loaded.config._attn_implementation == NAME
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch()).logits, eager(**batch()).logits, atol=1e-5, rtol=1e-5)


def test_training_stages_load_the_configured_attention(tmp_path):
    from longhorizon.train.stage import load_model

    tiny_gpt_oss(SLIDING).save_pretrained(tmp_path)
    model, _ = load_model(str(tmp_path), tokenizer=object(), attn_implementation=NAME)
    assert model.config._attn_implementation == NAME
    model, _ = load_model(None, model=model, tokenizer=object(), attn_implementation="eager")
    assert model.config._attn_implementation == "eager"
