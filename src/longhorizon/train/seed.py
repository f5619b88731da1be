"""SEED: self-evolving on-policy distillation from hindsight skills.

After each rollout an analyzer reads each group's episodes (the instruction, the tool calls with
their results cut short, the final answer, and the Grade's criteria with their notes) and writes
one short *skill*: a reusable workflow, a decisive observation, or a failure to avoid. The
analyzer is the policy being trained (the published method; greedy, in this process) or any
OpenAI-compatible model (``rl.seed.analyzer_base_url``).

The episodes' sampled tokens are then scored twice by the current policy: under their ordinary
context and under the same context with the skill inserted before it (as a system turn). The
per-token shift

    d_t = log π(y_t | skill, context) − log π(y_t | context)

says which sampled tokens the skill makes likelier. It is a dense token-level distillation
signal, optimised jointly with the GSPO objective (``rl_trainer``):

    L = L_GSPO − λ · mean_i (1/|y_i|) Σ_t clip(d_t) · log π_θ(y_t | context)

(``d_t`` detached, clipped to ±``clip``): on-policy distillation towards the skill-conditioned
policy. The skill only ever enters this re-scoring: the rollouts and every evaluation see the
ordinary context. Skills are logged with the episodes they came from (``OUT/skills.jsonl``) and
cached by the content they were written from.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from longhorizon.core.errors import UsageError
from longhorizon.train.opd import episode_logps

ANALYZER_SYSTEM = (
    "You review an AI agent's attempts at one office task and what the grader said about them. "
    "Write ONE short skill (at most three sentences) that would help on the next attempt of tasks "
    "like it: a reusable workflow, a decisive observation, or a mistake to avoid. Write only the skill."
)
SKILL_HEADER = "A skill learned from earlier attempts at this kind of task:\n"
RESULT_CHARS = 300
"""How much of each tool result the analyzer sees."""


def condensed(trajs) -> str:
    """What the analyzer reads about a group: the task once, then each attempt's calls (results
    cut at ``RESULT_CHARS``), final answer and graded criteria with their notes."""
    first = trajs[0]
    task = next((m.get("content", "") for m in first.messages if m.get("role") == "user"), "")
    parts = [f"Task:\n{task}"]
    for k, t in enumerate(trajs):
        lines = [f"\nAttempt {k + 1} (reward {t.reward:.2f}, {'passed' if t.passed else 'failed'}):"]
        for c in t.tool_calls:
            args = json.dumps(c.arguments, ensure_ascii=False) if isinstance(c.arguments, dict) else str(c.arguments)
            result = c.result if len(c.result) <= RESULT_CHARS else c.result[:RESULT_CHARS] + " ..."
            lines.append(f"- {c.name}({args[:200]}) -> {'ERROR ' if c.is_error else ''}{result}")
        lines.append(f"Final answer: {t.final_answer[:500]}")
        for r in (t.grade.results if t.grade else ()):
            lines.append(f"  [{'met' if r.passed else 'NOT met'}] {r.id}{': ' + r.note if r.note else ''}")
        parts.append("\n".join(lines))
    return "\n".join(parts)


class SkillAnalyzer:
    """Writes a group's skill: with the trained model in this process, or an OpenAI-compatible
    server. Skills are cached on disk by the hash of (analyzer, text read)."""

    def __init__(self, tokenizer, *, base_url: str | None = None, model: str | None = None,
                 max_new_tokens: int = 96, cache_path: str | Path | None = None):
        if base_url and not model:
            raise UsageError("seed: an analyzer_base_url needs an analyzer_model")
        self.tokenizer, self.base_url, self.model, self.max_new_tokens = tokenizer, base_url, model, max_new_tokens
        self.cache_path = Path(cache_path) if cache_path else None
        self.cache: dict[str, str] = {}
        if self.cache_path and self.cache_path.exists():
            for line in self.cache_path.read_text().splitlines():
                row = json.loads(line)
                self.cache[row["key"]] = row["skill"]

    def _key(self, text: str, policy_step: int | None) -> str:
        # the trained model changes every step: its skills are cached per step; a server's are not
        who = f"remote:{self.base_url}:{self.model}" if self.base_url else f"policy:step{policy_step}"
        return hashlib.sha256(f"{who}\n{text}".encode()).hexdigest()

    def skill(self, trajs, policy_model=None, *, step: int | None = None, episodes: list[str] | None = None) -> str:
        text = condensed(trajs)
        key = self._key(text, step)
        if key not in self.cache:
            raw = self._remote(text) if self.base_url else self._local(text, policy_model)
            self.cache[key] = " ".join(raw.split())[:1000]
            if self.cache_path:
                with self.cache_path.open("a") as f:
                    f.write(json.dumps({"key": key, "skill": self.cache[key], "step": step,
                                        "episodes": episodes or [t.episode_id for t in trajs]}) + "\n")
        return self.cache[key]

    def _messages(self, text: str) -> list[dict]:
        return [{"role": "system", "content": ANALYZER_SYSTEM}, {"role": "user", "content": text}]

    def _local(self, text: str, model) -> str:
        ids = self.tokenizer.apply_chat_template(self._messages(text), add_generation_prompt=True, return_dict=False)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = model.generate(torch.tensor([ids], device=model.device), max_new_tokens=self.max_new_tokens,
                                     do_sample=False, pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id)
        finally:
            model.train(was_training)
        return self.tokenizer.decode(out[0, len(ids):], skip_special_tokens=True)

    def _remote(self, text: str) -> str:
        from longhorizon.core.chat_api import ChatClient

        async def ask():
            async with ChatClient(self.base_url, self.model, temperature=0.0, max_tokens=self.max_new_tokens) as c:
                reply = await c.complete(c.request_body(self._messages(text), []))
            return reply["choices"][0]["message"].get("content") or ""

        return asyncio.run(ask())


def skill_prefix_ids(tokenizer, skill: str) -> list[int]:
    """The skill as a system turn of the model's chat template, to put before an episode's prompt."""
    return list(tokenizer.apply_chat_template([{"role": "system", "content": SKILL_HEADER + skill}],
                                              add_generation_prompt=False, return_dict=False))


def distillation_loss(logps: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """−mean_i (1/|y_i|) Σ_t clip(d_t) log π_θ(y_t), d_t = teacher − logps (detached); and d."""
    m = mask.to(logps.dtype)
    d = ((teacher.to(logps.dtype) - logps.detach()) * m).clamp(-clip, clip)
    per_episode = (d * logps * m).sum(-1) / m.sum(-1).clamp(min=1.0)
    return -per_episode.mean(), d


@dataclass
class SkillDistillation:
    """What ``rl_trainer.RLTrainer`` needs for SEED: the analyzer, λ and the clip of d_t."""

    analyzer: SkillAnalyzer
    weight: float
    clip: float
    group_size: int

    def teacher_logps(self, trajs, batch: dict, model, *, step: int, temperature: float) -> torch.Tensor:
        """Each group's skill, then its episodes' sampled tokens scored under it."""
        tok = self.analyzer.tokenizer
        prefixes = []
        for k in range(0, len(trajs), self.group_size):
            group = trajs[k:k + self.group_size]
            scored = [t for t in group if t.grade is not None]
            prefix = skill_prefix_ids(tok, self.analyzer.skill(scored, model, step=step)) if scored else []
            prefixes += [prefix] * len(group)
        return episode_logps(model, batch, prefixes, temperature)
