"""Attention with learned per-head sinks (GPT-OSS's ``module.sinks``), on FlexAttention.

A sink is one extra logit per head that joins the softmax's denominator and is dropped from the
output (transformers' ``gpt_oss.eager_attention_forward``): a head can attend "nowhere". The
eager reference materialises every score; transformers' own ``flex_attention`` refuses sinks on
CPU. This implementation, registered as ``sink_flex`` (``register()``), takes one of two paths,
both the same softmax:

- FlexAttention, then the log-sum-exp renormalisation ``out *= exp(lse - log(exp(lse) + exp(sink)))``.
  On CUDA the compiled kernel, forward and backward. Elsewhere FlexAttention runs unfused and
  forward only (torch has no flex backward on CPU), so it serves inference and generation.
- Where a gradient is needed off CUDA: ``F.scaled_dot_product_attention`` with the sink as a
  virtual extra key column whose key and value are zeros and whose mask entry is the head's sink
  logit (``q . 0 + sink = sink``; its value adds nothing). SDPA gives the float mask, hence the
  sinks, their gradient.

Masks: the name is registered in ``AttentionMaskInterface`` with transformers' ``eager_mask``, so
``attention_mask`` arrives as the dense additive 4D mask (0 or the dtype's minimum) that already
holds causality, the sliding window of sliding layers and padding. Both paths add it to the
scores as eager does; a fully masked row (a left-padded position) stays finite: it puts its
weight on the sink (output 0), or without a sink on nothing (flex) or uniformly (SDPA, eager).
Attention dropout is refused: FlexAttention has none.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

NAME = "sink_flex"
"""The ``attn_implementation`` name (``SFTConfig.attn_implementation``, ``from_pretrained``)."""

_compiled_flex = None


def repeat_kv(hidden: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[batch, kv_heads, seq, dim] -> [batch, kv_heads * n_rep, seq, dim], as transformers does for GQA."""
    if n_rep == 1:
        return hidden
    b, h, s, d = hidden.shape
    return hidden[:, :, None].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)


def _additive_mask(attention_mask: torch.Tensor | None, kv_len: int, dtype: torch.dtype) -> torch.Tensor | None:
    """The mask as eager adds it: float, 0 where attended, the dtype's minimum where not."""
    if attention_mask is None:
        return None
    mask = attention_mask[..., :kv_len]
    if mask.dtype == torch.bool:
        return torch.where(mask, torch.zeros((), dtype=dtype, device=mask.device), torch.finfo(dtype).min)
    return mask.to(dtype)


def _sdpa_with_virtual_sink(query, key, value, mask, scaling, sinks):
    """SDPA over the keys plus one zero key/value column whose mask entry is each head's sink."""
    b, h, q_len, d = query.shape
    kv_len = key.shape[2]
    if mask is None:
        mask = query.new_zeros(1, 1, 1, 1)
    mask = mask.expand(b, h, q_len, kv_len)
    if sinks is not None:
        zero = key.new_zeros(b, h, 1, d)
        key, value = torch.cat([key, zero], dim=2), torch.cat([value, zero], dim=2)
        sink_column = sinks.to(query.dtype).reshape(1, h, 1, 1).expand(b, h, q_len, 1)
        mask = torch.cat([mask, sink_column], dim=-1)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling)


def _flex(query, key, value, mask, scaling, sinks):
    """FlexAttention with the mask as a score_mod, renormalised by the sinks through its LSE."""
    from torch.nn.attention.flex_attention import AuxRequest, flex_attention

    global _compiled_flex
    score_mod = None
    if mask is not None:
        per_batch, per_head = mask.shape[0] > 1, mask.shape[1] > 1  # eager's mask broadcasts over both

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + mask[b if per_batch else 0, h if per_head else 0, q_idx, kv_idx]

    kwargs = dict(score_mod=score_mod, scale=scaling, return_aux=AuxRequest(lse=sinks is not None))
    if query.device.type == "cuda":
        if _compiled_flex is None:
            _compiled_flex = torch.compile(flex_attention)
        result = _compiled_flex(query, key, value, **kwargs)
    else:  # unfused, forward only: no input may require grad (``_needs_cpu_gradient`` sent those to SDPA)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            result = flex_attention(query.detach(), key.detach(), value.detach(), **kwargs)
    if sinks is None:
        return result[0] if isinstance(result, tuple) else result
    out, aux = result
    lse = aux.lse.unsqueeze(-1)  # [batch, heads, q, 1], float32; -inf on a fully masked row
    sink = sinks.float().reshape(1, -1, 1, 1).expand_as(lse)
    with_sink = torch.logaddexp(lse, sink)
    return (out.float() * torch.exp(lse - with_sink)).to(out.dtype)


def _needs_cpu_gradient(*tensors) -> bool:
    return (torch.is_grad_enabled() and tensors[0].device.type != "cuda"
            and any(t is not None and t.requires_grad for t in tensors))


def sink_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, s_aux=None,
                           **kwargs):
    """transformers' attention-function signature: query [batch, heads, q, dim], key and value
    [batch, kv_heads, kv, dim], the dense additive mask; returns ([batch, q, heads, dim], None).
    ``s_aux``: the per-head sink logits (GPT-OSS passes ``module.sinks``), None for plain attention."""
    if dropout and module.training:
        raise ValueError(f"{NAME} has no attention dropout (FlexAttention has none): set the model config's "
                         f"attention_dropout to 0 (got {dropout})")
    n_rep = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, n_rep), repeat_kv(value, n_rep)
    mask = _additive_mask(attention_mask, key.shape[2], query.dtype)
    if _needs_cpu_gradient(query, key, value, s_aux):
        out = _sdpa_with_virtual_sink(query, key, value, mask, scaling, s_aux)
    else:
        out = _flex(query, key, value, mask, scaling, s_aux)
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Register ``sink_flex`` with transformers (attention function and mask builder); idempotent.
    Returns the name, for ``from_pretrained(..., attn_implementation=register())``."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(NAME, sink_attention_forward)
    AttentionMaskInterface.register(NAME, eager_mask)
    return NAME
