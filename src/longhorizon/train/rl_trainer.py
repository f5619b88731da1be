"""TRL's GRPOTrainer with what RL on our episodes adds around its loss (``train.rl`` builds it).

* **Sampler correction.** The episodes' sampled log-probs ride along from the sampler
  (``sampling_per_token_logps``). The trainer's own log-probs of the same tokens come from TRL
  when a rollout feeds several updates (``old_per_token_logps``); on-policy (one update per
  rollout, the default) they are the training forward's own, detached: the weights have not
  moved since the rollout, so no extra forward pass is spent on them (it cost a fifth of the
  update). Then ``gspo.importance_weights`` (``is_correction``: truncated token-level IS by default, capped at
  ``is_cap``) multiplies each episode's terms in the loss: the correction for a sampler that is
  not the trainer (vLLM in bfloat16 for a float32 trainer). The in-process sampler is the
  trainer's own model, whose weights come out as 1 to float rounding. The weights are folded into
  the advantages at loss time: w ≥ 0 carries no gradient, so w·min(rA, clip(r)A) =
  min(r·wA, clip(r)·wA), which is TRL's loss with advantages wA.
* **Mismatch, logged.** Each step logs ``sampler/logp_diff`` (mean |Δ log p| over the sampled
  tokens), ``sampler/logp_diff_max``, ``sampler/kl`` (KL(sampler || trainer), k3 estimate), the
  mean weight and the share of tokens (or episodes) the correction truncated or masked.
* **Micro-batches cut to their own length** (``trim_padding``): TRL pads every episode of a
  rollout to the longest one and hands each micro-batch over at that width, so an update at
  micro-batch 1 paid for the longest episode on every episode (and a padded attention mask kept
  SDPA on its slow masked path). The columns that are padding in the whole micro-batch are cut
  before the forward pass; the loss is the same (RoPE positions are relative).
* **Advantage scales from the rollout** (``rl.advantage_scales``): all-fail groups ranked by the
  effort floor only keep advantages at the floor's scale.
* **Zero-gradient steps are skipped.** When the gradient is exactly zero everywhere (every group
  flat, every term clipped), AdamW would still move the weights (momentum, weight decay): such a
  step drops the gradients (torch optimizers leave a parameter without one untouched), so the
  weights stay bitwise the same. Each step logs ``optimizer/stepped`` (1 or 0) and
  ``optimizer/weight_change``: ||θ_after - θ_before|| / ||θ_before|| over the trained
  parameters, measured (it keeps one copy of the trained parameters during the step). The
  learning-rate schedule advances either way; ``grad_norm`` is the trainer's pre-clip norm.
"""

from __future__ import annotations

import math

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from longhorizon.train.gspo import IS_MODES, importance_weights, sampled_mask, sampler_mismatch
from longhorizon.train.seed import distillation_loss


class RLTrainer(GRPOTrainer):
    def __init__(self, *args, is_correction: str = "token_truncate", is_cap: float = 2.0, opd=None, skills=None,
                 **kwargs):
        if is_correction not in IS_MODES:
            raise ValueError(f"is_correction must be one of {', '.join(IS_MODES)}, not {is_correction!r}")
        super().__init__(*args, **kwargs)
        self.is_correction, self.is_cap = is_correction, is_cap
        self.opd = opd
        """A ``train.opd.PolicyShift``: token advantages from a teacher pair's RL shift (Direct-OPD)."""
        self.skills = skills
        """A ``train.seed.SkillDistillation``: SEED's hindsight-skill distillation term."""
        self.add_callback(StepGuard(self))

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        rollout = self.rollout_func
        scale = getattr(rollout, "advantage_scale", None)
        if scale:
            out["advantages"] = out["advantages"] * torch.tensor(scale, dtype=out["advantages"].dtype,
                                                                 device=out["advantages"].device)
        for name, value in (getattr(rollout, "stats", None) or {}).items():
            self._metrics[mode][f"sampling/{name}"].append(float(value))
        if self.opd is not None:
            self._policy_shift_advantages(out, mode)
        if self.skills is not None and getattr(rollout, "last", None):
            model = self.accelerator.unwrap_model(self.model)
            out["seed_teacher_logps"] = self.skills.teacher_logps(
                rollout.last, out, model, step=self.state.global_step, temperature=self.temperature
            ).to(out["completion_ids"].device)
        self._correct_for_the_sampler(out, mode)
        return out

    def _policy_shift_advantages(self, out, mode: str) -> None:
        """Direct-OPD: each sampled token's advantage from the teacher pair's shift (``train.opd``)."""
        mask = sampled_mask(out)
        shift = self.opd.shift(out).to(out["advantages"].device)
        out["advantages"] = self.opd.advantages(shift, mask, out["advantages"])
        live = mask.bool()
        if live.any():
            self._metrics[mode]["opd/shift_mean"].append(shift[live].mean().item())
            self._metrics[mode]["opd/shift_abs_mean"].append(shift[live].abs().mean().item())

    def _prepare_inputs(self, generation_batch):
        return trim_padding(super()._prepare_inputs(generation_batch))

    def _correct_for_the_sampler(self, out, mode: str) -> None:
        """Off-policy (TRL computed ``old_per_token_logps``): the weights for the whole rollout now.
        On-policy: nothing here; ``_compute_loss`` corrects each micro-batch from its own forward."""
        if out.get("sampling_per_token_logps") is None or out.get("old_per_token_logps") is None:
            return
        weights = self._weigh(out["old_per_token_logps"], out, mode)
        if weights is not None:
            out["is_weights"] = weights

    def _weigh(self, trainer, inputs, mode: str):
        """Logs the sampler/trainer mismatch of ``inputs``' sampled tokens and returns the
        correction's weights (None when ``is_correction`` is off)."""
        sampler = inputs["sampling_per_token_logps"]
        mask = sampled_mask(inputs)
        for name, value in sampler_mismatch(trainer, sampler, mask).items():
            self._metrics[mode][f"sampler/{name}"].append(value)
        if self.is_correction == "off":
            return None
        weights = importance_weights(trainer, sampler, mask, mode=self.is_correction, cap=self.is_cap)
        if weights.shape[1] == 1:  # one weight per episode: over the episodes that have tokens
            live = mask.sum(-1) > 0
            w, raw = weights[live, 0], None
        else:
            live = mask.bool()
            w = weights[live]
            raw = torch.exp(torch.nan_to_num(trainer - sampler, nan=0.0))[live]
        if w.numel():
            corrected = (w == 0) if raw is None or self.is_correction == "token_mask" else (w < raw)
            self._metrics[mode]["sampler/is_weight_mean"].append(w.float().mean().item())
            self._metrics[mode]["sampler/is_corrected"].append(corrected.float().mean().item())
        return weights

    def _compute_loss(self, model, inputs):
        weights = inputs.get("is_weights")
        if weights is not None:
            inputs = {**inputs, "advantages": per_token(inputs["advantages"]) * weights}
        elif inputs.get("sampling_per_token_logps") is not None and inputs.get("old_per_token_logps") is None:
            # on-policy: TRL reads the advantages after its forward pass, so the hook below can
            # still fold the correction into them from that pass's log-probs
            inputs = self._pending = dict(inputs)
        self._capture = inputs.get("seed_teacher_logps") is not None
        try:
            loss = super()._compute_loss(model, inputs)
            if self._capture and self._captured is not None:
                loss = loss + self._skill_term(inputs)
            return loss
        finally:
            self._pending, self._capture, self._captured = None, False, None

    _pending: dict | None = None
    _capture: bool = False
    _captured: torch.Tensor | None = None

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        logps, entropies, *rest = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        inputs, self._pending = self._pending, None
        if inputs is not None:  # the training forward of an on-policy micro-batch (see _compute_loss)
            weights = self._weigh(logps.detach(), inputs, "train" if self.model.training else "eval")
            if weights is not None:
                inputs["advantages"] = per_token(inputs["advantages"]) * weights
        if self._capture:  # SEED's term needs the same forward's log-probs, with their gradient
            self._captured = logps
        return (logps, entropies, *rest)

    def _skill_term(self, inputs) -> torch.Tensor:
        """λ x SEED's distillation loss for this micro-batch, scaled like TRL's loss."""
        mask = sampled_mask(inputs)
        term, d = distillation_loss(self._captured, inputs["seed_teacher_logps"], mask, self.skills.clip)
        mode = "train" if self.model.training else "eval"
        live = mask.bool()
        if live.any():
            self._metrics[mode]["seed/shift_mean"].append(d[live].mean().item())
            self._metrics[mode]["seed/shift_abs_mean"].append(d[live].abs().mean().item())
        self._metrics[mode]["seed/distill_loss"].append(term.item())
        return self.skills.weight * term / (self.current_gradient_accumulation_steps if mode == "train" else 1.0)


def per_token(advantages: torch.Tensor) -> torch.Tensor:
    """(B,) episode advantages as (B, 1); token advantages (B, T) as they are."""
    return advantages if advantages.dim() == 2 else advantages.view(-1, 1)


PROMPT_KEYS = ("prompt_ids", "prompt_mask")


def trim_padding(batch: dict) -> dict:
    """``batch`` without the prompt columns that are left padding in every row and the completion
    columns that are right padding in every row (every 2-D tensor as wide as the completion is cut
    alike: ids, masks, per-token log-probs, weights)."""
    prompt, completion = batch["prompt_mask"], batch["completion_mask"]
    width = completion.size(1)
    used = prompt.bool().any(0).nonzero()
    start = int(used[0]) if used.numel() else prompt.size(1)
    used = completion.bool().any(0).nonzero()
    end = int(used[-1]) + 1 if used.numel() else 1  # never 0: TRL's logits_to_keep=0 means every position
    if start == 0 and end == width:
        return batch
    out = dict(batch)
    for key, value in batch.items():
        if not isinstance(value, torch.Tensor) or value.dim() < 2:
            continue
        if key in PROMPT_KEYS:
            out[key] = value[:, start:]
        elif value.size(1) == width:
            out[key] = value[:, :end]
    return out


class StepGuard(TrainerCallback):
    """Skips optimizer steps whose gradient is zero everywhere, and measures how far each step
    moves the trained weights (see the module docstring)."""

    def __init__(self, trainer: RLTrainer):
        self.trainer = trainer
        self._before: list[torch.Tensor] | None = None
        self._stepped = True

    def _params(self) -> list[torch.nn.Parameter]:
        return [p for p in self.trainer.model.parameters() if p.requires_grad]

    def _reduce(self, values: list[float]) -> list[float]:
        acc = self.trainer.accelerator
        t = torch.tensor(values, dtype=torch.float64, device=acc.device)
        return (acc.reduce(t, reduction="sum") if acc.num_processes > 1 else t).tolist()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        params = self._params()
        nonzero = any(p.grad is not None and bool(torch.count_nonzero(p.grad)) for p in params)
        self._stepped = self._reduce([float(nonzero)])[0] > 0
        if not self._stepped:
            for p in params:
                p.grad = None
        self._before = [p.detach().clone() for p in params]

    def on_optimizer_step(self, args, state, control, **kwargs):
        if self._before is None:
            return
        moved = norm = 0.0
        with torch.no_grad():
            for p, b in zip(self._params(), self._before):
                moved += float((p.detach().double() - b.double()).pow(2).sum())
                norm += float(b.double().pow(2).sum())
        self._before = None
        moved, norm = self._reduce([moved, norm])
        metrics = self.trainer._metrics["train"]
        metrics["optimizer/stepped"].append(float(self._stepped))
        metrics["optimizer/weight_change"].append(math.sqrt(moved / norm) if norm > 0 else math.sqrt(moved))
