r"""GSPO (and token-level GRPO) written out top to bottom: the objective RL optimises.

Group Sequence Policy Optimization (Zheng et al., 2025, arXiv:2507.18071). For a task x, the
old policy plays a group of G episodes y_1..y_G; each gets a reward r_i from our grader.

    advantage        A_i = (r_i - mean(r_1..r_G)) / std(r_1..r_G)

    sequence ratio   s_i(θ) = ( π_θ(y_i | x) / π_old(y_i | x) ) ^ (1 / |y_i|)
                            = exp( (1 / |y_i|) Σ_t  log π_θ(y_i,t | x, y_i,<t) - log π_old(y_i,t | x, y_i,<t) )

    objective        J(θ) = (1 / G) Σ_i  min( s_i(θ) A_i,  clip(s_i(θ), 1 - ε_low, 1 + ε_high) A_i )

with ε_low = 3e-4 and ε_high = 4e-4 in the paper, and no KL term. The loss is -J. The
ratio is a geometric mean over the sequence's tokens (length-normalised), so one long episode
does not swing it, and clipping keeps or drops whole episodes.

Token-level GRPO (Shao et al., 2024) clips each token's ratio r_i,t(θ) = π_θ(y_i,t) / π_old(y_i,t)
and averages over each sequence's tokens:

    J(θ) = (1 / G) Σ_i (1 / |y_i|) Σ_t  min( r_i,t A_i,  clip(r_i,t, 1 - ε_low, 1 + ε_high) A_i )

In a multi-turn episode y_i is every token the policy sampled, across all its turns; tool
results, user turns and the prompt are conditioning only (masked out of |y_i| and of the sums).

When the sampler is not the trainer (another engine, another precision: vLLM in bfloat16 sampling
for a float32 trainer), the tokens were drawn from π_sampler, not π_old. A truncated importance
weight corrects for it (Yao et al., 2025, "Your efficient RL framework secretly brings you
off-policy RL training"), computed from the log-probs the sampler recorded and the trainer's own:

    token level (TIS)    w_i,t = min( π_old(y_i,t) / π_sampler(y_i,t),  C )
    sequence level       w_i   = 1[ 1/C <= exp( (1/|y_i|) Σ_t log π_old - log π_sampler ) <= C ]

and each episode's term above is multiplied by its w (``importance_weights``; the mask variants
set w to 0 outside [1/C, C] instead of truncating). The mismatch itself is reported each step
(``sampler_mismatch``): mean |log π_old - log π_sampler| over the sampled tokens and an estimate
of KL(π_sampler || π_old). The in-process sampler is the trainer's own float32 model: there the
weights are 1 to float rounding.

Training runs on TRL's GRPOTrainer, whose loss computes exactly this when configured by
``trl_settings`` (``importance_sampling_level="sequence"`` is GSPO); the tests check TRL's loss
against ``policy_loss`` and both against numbers worked out by hand. The functions here are
the specification, small enough to read in one sitting.
"""

from __future__ import annotations

import math
from typing import Any

from longhorizon.train.config import IS_MODES

STD_EPS = 1e-4
"""Added to the group's std before dividing (TRL's constant), so a flat group gives A = 0."""


def group_advantages(rewards, group_size: int, scale: str = "group"):
    """A_i = (r_i - group mean) / (group std + 1e-4); ``scale="none"`` skips the division.

    ``rewards`` lists the episodes group by group (G consecutive episodes share a task). The
    std is the sample std (n - 1), as TRL computes it.
    """
    import torch

    r = torch.as_tensor(rewards, dtype=torch.float32).view(-1, group_size)
    centred = r - r.mean(dim=1, keepdim=True)
    if scale == "none":
        return centred.flatten()
    return (centred / (r.std(dim=1, keepdim=True) + STD_EPS)).flatten()


def policy_loss(logps, old_logps, advantages, mask, *, level: str = "sequence",
                epsilon_low: float = 3e-4, epsilon_high: float = 4e-4, is_weights=None):
    """-J(θ) for a batch of B episodes padded to T tokens.

    logps, old_logps: (B, T) log-probs of the sampled tokens under π_θ and π_old.
    advantages: (B,).  mask: (B, T), 1 where the policy sampled the token.
    level: ``sequence`` (GSPO) or ``token`` (GRPO).
    is_weights: None, or the sampler correction of ``importance_weights``, (B, T) or (B, 1),
    multiplying each token's term.
    Returns (loss, clipped) where clipped is a (B, 1) or (B, T) bool of where clipping acted.
    """
    import torch

    mask = mask.to(logps.dtype)
    lengths = mask.sum(-1).clamp(min=1.0)                                  # |y_i|
    A = advantages.view(-1, 1)
    log_ratio = (logps - old_logps) * mask
    if level == "sequence":
        ratio = torch.exp(log_ratio.sum(-1, keepdim=True) / lengths.view(-1, 1))   # s_i(θ): (B, 1)
    elif level == "token":
        ratio = torch.exp(log_ratio)                                              # r_i,t(θ): (B, T)
    else:
        raise ValueError(f"level must be sequence or token, not {level!r}")
    clipped_ratio = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    objective = torch.min(ratio * A, clipped_ratio * A)
    if is_weights is not None:  # one term per token from here on (the sequence term repeated)
        objective = objective * is_weights.to(logps.dtype) * torch.ones_like(mask)
        per_episode = (objective * mask).sum(-1) / lengths
    elif level == "sequence":
        per_episode = objective.squeeze(-1)
    else:
        per_episode = (objective * mask).sum(-1) / lengths
    clipped = ((ratio < 1 - epsilon_low) & (A < 0)) | ((ratio > 1 + epsilon_high) & (A > 0))
    return -per_episode.mean(), clipped


def trl_settings(loss: str, epsilon_low: float, epsilon_high: float, beta: float = 0.0,
                 scale_rewards: str = "group") -> dict[str, Any]:
    """GRPOConfig arguments under which TRL's GRPOTrainer optimises ``policy_loss``.

    TRL's ``loss_type="grpo"`` averages each episode's per-token terms over its own tokens and
    then over episodes: for GSPO every token of an episode carries the same clipped sequence
    term, so that is the mean over episodes above.
    """
    if loss not in ("gspo", "grpo"):
        raise ValueError(f"loss must be gspo or grpo, not {loss!r}")
    return {
        "loss_type": "grpo",
        "importance_sampling_level": "sequence" if loss == "gspo" else "token",
        "epsilon": epsilon_low,
        "epsilon_high": epsilon_high,
        "beta": beta,
        "scale_rewards": scale_rewards,
    }


def importance_weights(trainer_logps, sampler_logps, mask, *, mode: str = "token_truncate", cap: float = 2.0):
    """The truncated importance weights between the sampler and the trainer (no gradient).

    trainer_logps, sampler_logps: (B, T) log-probs of the sampled tokens under π_old (the
    trainer's recomputation) and under the sampler (what it recorded).  mask: (B, T).
    ``token_truncate`` (TIS): w_t = min(π_old / π_sampler, cap), shape (B, T).
    ``token_mask``: w_t = 1 if 1/cap <= π_old / π_sampler <= cap else 0, shape (B, T).
    ``sequence_mask``: w_i = 1 if the episode's geometric-mean ratio (GSPO's length-normalised
    form, so a long episode is not masked for its length alone) lies in [1/cap, cap], else 0;
    shape (B, 1).  A token the sampler could not score (NaN) counts as ratio 1.
    """
    import torch

    if mode not in IS_MODES or mode == "off":
        raise ValueError(f"mode must be one of {', '.join(IS_MODES[:-1])}, not {mode!r}")
    if cap <= 1:
        raise ValueError(f"cap must be above 1, got {cap}")
    mask = mask.to(trainer_logps.dtype)
    diff = torch.nan_to_num((trainer_logps - sampler_logps).detach(), nan=0.0) * mask
    high = math.log(cap)
    low = -high
    if mode == "token_truncate":
        return torch.exp(diff.clamp(max=high)) * mask + (1 - mask)
    if mode == "token_mask":
        return ((diff >= low) & (diff <= high)).to(diff.dtype)
    mean = diff.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1.0)
    return ((mean >= low) & (mean <= high)).to(diff.dtype)


def sampler_mismatch(trainer_logps, sampler_logps, mask) -> dict[str, float]:
    """How far the sampler's recorded log-probs are from the trainer's, over the sampled tokens.

    ``logp_diff``: mean |log π_old - log π_sampler|; ``logp_diff_max``: the largest;
    ``kl``: KL(π_sampler || π_old) estimated from the sampled tokens with the k3 estimator
    E[r - 1 - log r], r = π_old / π_sampler (unbiased, never negative). 0 for no tokens.
    """
    import torch

    diff = (trainer_logps - sampler_logps).detach()
    keep = mask.bool() & ~torch.isnan(diff)
    d = diff[keep].double()
    if d.numel() == 0:
        return {"logp_diff": 0.0, "logp_diff_max": 0.0, "kl": 0.0}
    return {"logp_diff": d.abs().mean().item(), "logp_diff_max": d.abs().max().item(),
            "kl": (torch.expm1(d) - d).mean().item()}


def sampled_mask(batch: dict):
    """1 on the batch's sampled tokens: completion tokens that are not tool results."""
    return batch["completion_mask"] if batch.get("tool_mask") is None else batch["completion_mask"] * batch["tool_mask"]
