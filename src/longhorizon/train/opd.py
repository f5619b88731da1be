"""Direct-OPD: reuse another RL run's policy shift as a dense token reward for a new student.

A teacher pair (``pre``, ``post``) is a model before and after RL (e.g. the SFT checkpoint and
SFT+GSPO). What RL changed in it is, per token, the log-ratio

    r_t = log π_post(y_t | y_<t) − log π_pre(y_t | y_<t)

(positive where RL made the token likelier). The student samples its own on-policy episodes on
the suite; every token it sampled is scored by the pair and ``r_t`` becomes that token's
advantage, optionally mixed with the task's group-normalised advantage:

    A_t = scale · clip(r_t) + task_reward_weight · A_task

and the student is updated with the ordinary RL machinery (``train.rl``; token-level ratio, i.e.
``loss: grpo``: GSPO's sequence ratio would average the per-token rewards over the episode).
The pair must share the student's tokenizer (checked): the shift is over token ids. Both are
scored at temperature 1 (their own distributions), frozen, without gradient.
"""

from __future__ import annotations

from pathlib import Path

import torch

from longhorizon.core.errors import UsageError
from longhorizon.train.gspo import sampled_mask


def check_same_tokenizer(student, **others) -> None:
    """Raise a usage error naming each model whose tokenizer's vocabulary or special tokens differ
    from the student's (token ids would mean different things)."""
    want = (student.get_vocab(), student.eos_token_id, student.pad_token_id, student.bos_token_id)
    for name, tok in others.items():
        got = (tok.get_vocab(), tok.eos_token_id, tok.pad_token_id, tok.bos_token_id)
        if got != want:
            what = "vocabulary" if got[0] != want[0] else "special tokens"
            raise UsageError(f"opd: the {name} model's tokenizer differs from the student's ({what}): the policy "
                             "shift is per token id, so the pair and the student must share one tokenizer")


def episode_logps(model, batch: dict, prefixes: list[list[int]] | None = None, temperature: float = 1.0) -> torch.Tensor:
    """log π(completion token | prefix + prompt + completion before it), (B, T), one episode at a
    time at its own length (padding cut), no gradient; 0 where ``completion_mask`` is 0. A
    prefix (SEED's skill turn) goes before each episode's prompt; none by default."""
    completion_ids, completion_mask = batch["completion_ids"], batch["completion_mask"]
    out = torch.zeros(completion_ids.shape, dtype=torch.float32, device=completion_ids.device)
    for b in range(completion_ids.size(0)):
        if not completion_mask[b].any():
            continue
        n = int(completion_mask[b].nonzero().max()) + 1
        prompt = batch["prompt_ids"][b][batch["prompt_mask"][b].bool()]
        prefix = torch.tensor(prefixes[b] if prefixes else [], dtype=prompt.dtype, device=prompt.device)
        ids = torch.cat([prefix, prompt, completion_ids[b, :n]])[None].to(model.device)
        with torch.no_grad():
            logits = model(input_ids=ids, logits_to_keep=n + 1).logits[0, :-1].float() / temperature
        lp = torch.log_softmax(logits, -1).gather(-1, ids[0, -n:, None])[:, 0]
        out[b, :n] = lp.to(out.device) * completion_mask[b, :n].to(out.dtype)
    return out


class PolicyShift:
    """The frozen teacher pair and the token advantages it gives a rollout batch."""

    def __init__(self, pre, post, *, scale: float = 1.0, clip: float | None = None, task_reward_weight: float = 0.0):
        self.pre, self.post = pre.eval(), post.eval()
        for p in (*pre.parameters(), *post.parameters()):
            p.requires_grad_(False)
        self.scale, self.clip, self.task_reward_weight = scale, clip, task_reward_weight

    @classmethod
    def load(cls, pre: str | Path, post: str | Path, student_tokenizer, *, dtype=torch.float32, **kw) -> "PolicyShift":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        for name, path in (("pre", pre), ("post", post)):
            if not Path(path).is_dir():
                raise UsageError(f"opd: the {name} model {path} is not a model folder")
        check_same_tokenizer(student_tokenizer, pre=AutoTokenizer.from_pretrained(pre),
                             post=AutoTokenizer.from_pretrained(post))
        load = lambda p: AutoModelForCausalLM.from_pretrained(p, dtype=dtype)  # noqa: E731
        return cls(load(pre), load(post), **kw)

    def shift(self, batch: dict) -> torch.Tensor:
        """r_t for every sampled token of the batch, (B, T); 0 on tool results and padding."""
        mask = sampled_mask(batch)
        return (episode_logps(self.post, batch) - episode_logps(self.pre, batch)) * mask.to(torch.float32)

    def advantages(self, shift: torch.Tensor, mask: torch.Tensor, task_advantages: torch.Tensor) -> torch.Tensor:
        """A_t = scale · clip(r_t) + task_reward_weight · A_task, (B, T)."""
        r = shift if self.clip is None else shift.clamp(-self.clip, self.clip)
        adv = self.scale * r * mask.to(r.dtype)
        if self.task_reward_weight:
            adv = adv + self.task_reward_weight * task_advantages.view(-1, 1).to(r.dtype) * mask.to(r.dtype)
        return adv
