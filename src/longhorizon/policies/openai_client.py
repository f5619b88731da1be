"""A Policy that asks any OpenAI-compatible chat-completions server (vLLM, SGLang, OpenAI, ...).

The HTTP call, its retries and the parsing of replies are ``core/chat_api.py``'s ``ChatClient``
(shared with the simulated user); this adds what makes it a Policy: ``describe`` (provenance,
never the key) and ``act``.

A reply the server cut at ``max_tokens`` comes back marked ``finish_reason: "length"``
(``parse_response``) and the episode answers it as a cut, not as a finished reply. With a
context policy (``context``, ``policies/context.py``) each request sends the policy's view of
the conversation, counted with the served model's tokenizer, and the reply records how many
tool results that view elided (``elided``).
"""

from __future__ import annotations

from typing import Any

from longhorizon.core.chat_api import ChatClient, parse_response
from longhorizon.core.policy import EpisodeContext
from longhorizon.policies.context import ContextPolicy


class OpenAIPolicy(ChatClient):
    """Chat completions over HTTP as a Policy. ``describe()`` records the model and sampling, never the key.

    Connections are pooled per event loop; ``async with OpenAIPolicy(...)`` (or ``aclose()``)
    closes them when the run is over.
    """

    name = "openai"

    def __init__(self, base_url: str, model: str, *, endpoint_label: str | None = None,
                 context: ContextPolicy | None = None, **options: Any):
        super().__init__(base_url, model, **options)
        self.context = context
        self.endpoint_label = endpoint_label
        """Recorded in place of ``base_url`` (a run's identity): for a server started on a free port
        per session, e.g. "vllm:MODEL_DIR", so a rerun behind a new port resumes the same run."""

    def describe(self) -> dict[str, Any]:
        info = {
            "policy": self.name,
            "model": self.model,
            "base_url": self.endpoint_label or self.base_url,
            "sampling": {**self.sampling, **self.extra_body},
            "logprobs": self.logprobs,
            "return_token_ids": self.return_token_ids,
        }
        if self.context is not None:
            info["context_policy"] = self.context.describe()
        return info

    # -- Policy ------------------------------------------------------------------------------
    async def act(self, messages: list[dict], tools: list[dict], ctx: EpisodeContext | None = None) -> dict:
        elided = 0
        if self.context is not None:
            memo = ctx.scratch.setdefault("context", {}) if ctx is not None else None
            messages, elided = self.context.view(messages, tools, memo)
        msg = parse_response(await self.complete(self.request_body(messages, tools)))
        if elided:
            msg["elided"] = elided
        return msg


