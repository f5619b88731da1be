"""Our Episode as a verl agent loop (verl 0.9's ``AgentLoopBase``), for verl's PPO/GRPO/GSPO
trainers: configs/verl/gspo_recipe.yaml and docs/distributed.md.

verl gives each dataset row to an agent loop, which talks to the rollout servers through
``server_manager.generate(request_id, prompt_ids, sampling_params) -> TokenOutput`` and returns
an ``AgentLoopOutput``: prompt ids, response ids, a response mask (1 on tokens the policy
sampled, 0 on tool results and template tokens between turns), the sampled log-probs and a
reward. ``LongHorizonAgentLoop`` plays the row's Task (``extra_info.task_id``, ``sample``) as a
real Episode — its own World fork, MCP sessions, limits, grader — with ``VerlServerPolicy``,
which samples token-in/token-out through verl's server (each turn's prompt is the previous ids
plus the rendered tool results: nothing is re-tokenised), so the sequence the loss sees is
exactly what was sampled. The Trajectory becomes the output by ``rl.episode_sequence`` (the
same conversion TRL training uses); the Grade's dense reward is the reward.

    pip install 'longhorizon[verl]'   # its own environment: verl pins transformers<5.11
"""

from __future__ import annotations

import uuid
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from longhorizon.core.policy import EpisodeContext
from longhorizon.env.episode import Limits
from longhorizon.policies.local_model import LocalModelPolicy, parse_completion
from longhorizon.policies.render import ChatRenderer

AGENT_NAME = "longhorizon_episode"


class VerlServerPolicy:
    """A Policy sampling through verl's server manager, token-in/token-out (the bookkeeping is
    ``LocalModelPolicy``'s own: the same prompts, the same parsing of sampled text)."""

    name = "verl"
    prompt_ids = LocalModelPolicy.prompt_ids
    _next_prompt = LocalModelPolicy._next_prompt
    _message = LocalModelPolicy._message
    context = None
    """No context policy: verl trains each episode as one token-in/token-out sequence."""

    def __init__(self, server_manager, tokenizer, sampling_params: dict[str, Any], model: str | None = None):
        self.server_manager, self.tokenizer = server_manager, tokenizer
        self.sampling_params = dict(sampling_params)
        self.model = model
        self.renderer = ChatRenderer(tokenizer)
        self.eos_ids = frozenset({self.renderer.eos_id})

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "model": self.model, "sampling": self.sampling_params}

    async def act(self, messages: list[dict], tools: list[dict], ctx: EpisodeContext) -> dict:
        state = ctx.scratch.setdefault("verl", {})
        prompt, _ = self._next_prompt(messages, tools, state)
        out = await self.server_manager.generate(request_id=state.setdefault("request_id", uuid.uuid4().hex),
                                                 prompt_ids=prompt, sampling_params=self.sampling_params)
        logprobs = list(out.log_probs) if out.log_probs else [0.0] * len(out.token_ids)
        first = ctx.scratch.get("verl_calls", 0)
        msg = self._message(messages, prompt, list(out.token_ids), logprobs, first, state)
        ctx.scratch["verl_calls"] = first + len(msg.get("tool_calls") or [])
        return msg


def episode_output(traj, eos_id: int, *, response_length: int | None = None) -> AgentLoopOutput:
    """A played, graded Trajectory as verl's ``AgentLoopOutput`` (cut to ``response_length``)."""
    from longhorizon.train.rl import episode_sequence

    seq = episode_sequence(traj, eos_id)
    n = response_length or len(seq["completion_ids"])
    return AgentLoopOutput(
        prompt_ids=seq["prompt_ids"], response_ids=seq["completion_ids"][:n], response_mask=seq["env_mask"][:n],
        response_logprobs=seq["logprobs"][:n], reward_score=traj.reward,
        num_turns=len(traj.messages), metrics=AgentLoopMetrics(),
        extra_fields={"episode_id": traj.episode_id, "status": traj.status, "passed": traj.passed,
                      "tool_calls": len(traj.tool_calls), "world_hash": traj.provenance.get("world_hash")},
    )


@register(AGENT_NAME)
class LongHorizonAgentLoop(AgentLoopBase):
    """verl's agent loop for a row ``{"extra_info": {"task_id": ..., "sample": k}, ...}``:
    one Episode of that Task, on its own fork of the Task's World."""

    _cache = None
    """One World cache per worker process (each Task's World is built once, forked per episode)."""

    def __init__(self, *args, limits: dict[str, Any] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.limits = Limits(**(limits or {}))
        if LongHorizonAgentLoop._cache is None:
            from longhorizon.core.world import WorldCache

            LongHorizonAgentLoop._cache = WorldCache()

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        from longhorizon.rollout.runner import LocalEpisodes
        from longhorizon.tasks.registry import get_task

        info = dict(kwargs.get("extra_info") or {})
        task = get_task(info["task_id"])
        from omegaconf import OmegaConf

        policy = VerlServerPolicy(self.server_manager, self.tokenizer, sampling_params,
                                  model=OmegaConf.select(self.config, "actor_rollout_ref.model.path"))
        episodes = LocalEpisodes(policy, self.limits, cache=LongHorizonAgentLoop._cache)
        try:
            traj = await episodes.play(task, int(info.get("sample", 0)))
        finally:
            await episodes.aclose()
        return episode_output(traj, self.tokenizer.eos_token_id, response_length=self.rollout_config.response_length)
