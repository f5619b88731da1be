"""A Policy that samples from an OpenAI-compatible server token in, token out (vLLM's completions).

``OpenAIPolicy`` sends chat messages and the server renders them: fine for evaluation, wrong for
RL, because the server re-renders (and re-tokenizes) the whole history every turn, so the ids it
conditions on are not the ids it sampled the turn before. This policy keeps the local policy's
contract over HTTP instead:

* Rendering happens here, with the model's own tokenizer and chat template (``ChatRenderer``):
  the first turn's prompt is ``prompt_ids(messages, tools)``; every later prompt is the previous
  prompt + the ids the server *sampled* + ``continuation_ids`` of the messages since (tool
  results and the next generation prompt). Nothing is ever re-rendered.
* Each turn is one ``POST /completions`` whose ``prompt`` is that list of token ids, with
  ``logprobs``, ``return_token_ids`` and ``return_tokens_as_token_ids``: the reply's
  ``token_ids`` are what the server sampled and ``logprobs.token_logprobs`` their log-probs
  (vLLM; under the sampling distribution when the server runs with ``--logprobs-mode
  processed_logprobs``, as ``longhorizon serve --weight-sync`` and RL's sampler do). The prompt
  ids the server echoes must equal the ids sent, or the turn fails as an infrastructure error.
* The turn records ``prompt_ids``, ``token_ids`` and ``logprobs`` exactly as ``LocalModelPolicy``
  does, and its tool calls are parsed from the decoded sampled ids by the same
  ``parse_completion``. A completion cut by the token budget gets the end-of-turn token as an
  env token, as the local policy does.

Sampling seeds: each request's ``seed`` derives from (``seed``, task id, sample, turn), so an
episode's draws do not depend on which other episodes ran beside it.

Needs ``transformers`` for the tokenizer (no torch).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from longhorizon.core.chat_api import ChatClient
from longhorizon.core.errors import ContextLengthExceeded, InfraError
from longhorizon.core.policy import EpisodeContext
from longhorizon.policies.local_model import parse_completion
from longhorizon.policies.render import ChatRenderer, read_provenance, resolve_model


class ServedTokensPolicy(ChatClient):
    """Token-in/token-out turns against ``base_url``'s ``/completions`` (vLLM, or the stand-in).

    ``tokenizer`` is the served model's tokenizer: a folder (or a name in the local Hugging Face
    cache) or a loaded tokenizer. ``max_context`` is the server's context length (its
    ``max_model_len``): each turn asks for at most what is left of it.
    """

    name = "served_tokens"

    def __init__(self, base_url: str, model: str, tokenizer: Any, *, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 1024, seed: int = 0, max_context: int | None = None,
                 endpoint_label: str | None = None, api_key: str | None = None,
                 extra_body: dict[str, Any] | None = None, **options: Any):
        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1:
            raise ValueError("need temperature >= 0, 0 < top_p <= 1 and max_new_tokens >= 1")
        super().__init__(base_url, model, api_key=api_key, temperature=None, extra_body=extra_body, **options)
        self.tokenizer_path = None
        if isinstance(tokenizer, (str, Path)):
            from transformers import AutoTokenizer

            self.tokenizer_path = resolve_model(str(tokenizer))
            tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_path, local_files_only=True)
        if not tokenizer.chat_template:
            raise ValueError(f"the tokenizer of {model!r} has no chat template")
        self.tokenizer = tokenizer
        self.renderer = ChatRenderer(tokenizer)
        self.temperature, self.top_p, self.max_new_tokens, self.seed = temperature, top_p, max_new_tokens, seed
        self.max_context = max_context
        self.endpoint_label = endpoint_label
        self.eos_ids = frozenset({self.renderer.eos_id} | _generation_eos(self.tokenizer_path))
        self.provenance = read_provenance(self.tokenizer_path) if self.tokenizer_path else None

    def describe(self) -> dict[str, Any]:
        info = {
            "policy": self.name,
            "model": self.model,
            "base_url": self.endpoint_label or self.base_url,
            "tokenizer": self.tokenizer_path or type(self.tokenizer).__name__,
            "sampling": {"temperature": self.temperature, "top_p": self.top_p,
                         "max_new_tokens": self.max_new_tokens, "seed": self.seed, **self.extra_body},
            "max_context": self.max_context,
        }
        if self.provenance:
            info["model_provenance"] = {k: v for k, v in self.provenance.items() if k not in ("files", "gguf_metadata")}
        return info

    # -- token in ------------------------------------------------------------------------------
    def next_prompt(self, messages: list[dict], tools: list[dict], state: dict | None) -> list[int]:
        """The episode's ids so far + the continuation of the messages after our last turn, or a
        fresh rendering on an episode's first turn (as ``LocalModelPolicy._next_prompt``)."""
        n = state.get("messages", 0) if state else 0
        if state and len(messages) > n and messages[n - 1].get("role") == "assistant":
            return state["ids"] + self.renderer.continuation_ids(messages[n:])
        return self.renderer.prompt_ids(messages, tools)

    def budget(self, prompt: list[int]) -> int:
        if not self.max_context:
            return self.max_new_tokens
        room = self.max_context - len(prompt)
        if room <= 0:
            raise ContextLengthExceeded(f"prompt is {len(prompt)} tokens; {self.model} is served with a context "
                                        f"of {self.max_context}")
        return min(self.max_new_tokens, room)

    def reseed(self, seed: int) -> None:
        """Sample the next rollout with ``seed`` (RL gives each step its own: train/rl.py)."""
        self.seed = seed

    def request_seed(self, ctx: EpisodeContext | None, turn: int) -> int:
        key = f"{self.seed}\0{getattr(getattr(ctx, 'task', None), 'id', '')}\0{getattr(ctx, 'sample', 0)}\0{turn}"
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little") >> 1

    def completion_body(self, prompt: list[int], max_tokens: int, seed: int) -> dict[str, Any]:
        return {"model": self.model, "prompt": prompt, "max_tokens": max_tokens,
                "temperature": self.temperature, "top_p": self.top_p, "seed": seed,
                "logprobs": 0, "return_token_ids": True, "return_tokens_as_token_ids": True,
                "stop_token_ids": sorted(self.eos_ids), "skip_special_tokens": False, **self.extra_body}

    # -- token out -----------------------------------------------------------------------------
    @staticmethod
    def sampled(data: dict, prompt: list[int]) -> tuple[list[int], list[float]]:
        """(sampled ids, their log-probs) of a completions reply; InfraError when the reply lacks
        them or the server conditioned on other ids than those sent."""
        try:
            choice = data["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise InfraError(f"malformed completion (no choices[0]): {str(data)[:300]}") from None
        lp = choice.get("logprobs") or {}
        ids = choice.get("token_ids")
        tokens = lp.get("tokens") or []
        if ids is None and tokens and all(str(t).startswith("token_id:") for t in tokens):
            ids = [int(str(t).split(":", 1)[1]) for t in tokens]
        logprobs = lp.get("token_logprobs")
        if ids is None or logprobs is None:
            raise InfraError("the server returned no sampled token ids or log-probs (a completions endpoint with "
                             "return_token_ids and logprobs is needed, e.g. vLLM)")
        if len(logprobs) != len(ids) or any(v is None for v in logprobs):
            raise InfraError(f"the server returned {len(ids)} sampled ids but {len(logprobs)} log-probs")
        echo = choice.get("prompt_token_ids", data.get("prompt_token_ids"))
        if echo is not None and list(echo) != list(prompt):
            raise InfraError("the server conditioned on other token ids than the prompt sent "
                             f"({len(echo)} ids echoed for {len(prompt)} sent): token-in/token-out is broken")
        return [int(i) for i in ids], [float(v) for v in logprobs]

    async def complete_turn(self, messages: list[dict], tools: list[dict], state: dict | None,
                            ctx: EpisodeContext | None = None, first_call: int = 0) -> dict[str, Any]:
        prompt = self.next_prompt(messages, tools, state)
        turn = state.get("turns", 0) if state is not None else 0
        data = await self.post("/completions", self.completion_body(prompt, self.budget(prompt),
                                                                    self.request_seed(ctx, turn)))
        ids, logprobs = self.sampled(data, prompt)
        msg = parse_completion(self.tokenizer.decode(ids, skip_special_tokens=True), first_call)
        msg.update(token_ids=ids, prompt_ids=prompt, logprobs=logprobs)
        if (data["choices"][0] or {}).get("finish_reason") == "length":  # cut: answered as a cut (env/episode.py)
            msg.update(finish_reason="length", completion_tokens=len(ids))
        if state is not None:
            # A completion cut by the budget gets the end-of-turn token (an env token), as the local policy does.
            state["ids"] = prompt + ids + ([] if ids and ids[-1] in self.eos_ids else [self.renderer.eos_id])
            state["messages"] = len(messages) + 1
            state["turns"] = turn + 1
        return msg

    async def act(self, messages: list[dict], tools: list[dict], ctx: EpisodeContext | None = None) -> dict:
        scratch = ctx.scratch if ctx is not None else {}
        state = scratch.setdefault("served_tokens", {}) if ctx is not None else None
        msg = await self.complete_turn(messages, tools, state, ctx, scratch.get("served_calls", 0))
        scratch["served_calls"] = scratch.get("served_calls", 0) + len(msg.get("tool_calls") or [])
        return msg


def _generation_eos(folder: str | None) -> set[int]:
    """The end-of-turn ids a model folder's ``generation_config.json`` names (vLLM stops on them too)."""
    import json

    if not folder:
        return set()
    try:
        eos = json.loads((Path(folder) / "generation_config.json").read_text()).get("eos_token_id")
    except (OSError, ValueError, AttributeError):
        return set()
    eos = [eos] if isinstance(eos, int) else eos
    return {int(e) for e in eos or [] if isinstance(e, int)}
