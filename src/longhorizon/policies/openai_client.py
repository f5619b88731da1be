"""A Policy that asks any OpenAI-compatible chat-completions server (vLLM, SGLang, OpenAI, ...).

The HTTP call, its retries and the parsing of replies are ``core/chat_api.py``'s ``ChatClient``
(shared with the simulated user); this adds what makes it a Policy: ``describe`` (provenance,
never the key) and ``act``.
"""

from __future__ import annotations

from typing import Any

from longhorizon.core.chat_api import ChatClient, parse_response
from longhorizon.core.policy import EpisodeContext


class OpenAIPolicy(ChatClient):
    """Chat completions over HTTP as a Policy. ``describe()`` records the model and sampling, never the key.

    Connections are pooled per event loop; ``async with OpenAIPolicy(...)`` (or ``aclose()``)
    closes them when the run is over.
    """

    name = "openai"

    def __init__(self, base_url: str, model: str, *, endpoint_label: str | None = None, **options: Any):
        super().__init__(base_url, model, **options)
        self.endpoint_label = endpoint_label
        """Recorded in place of ``base_url`` (a run's identity): for a server started on a free port
        per session, e.g. "vllm:MODEL_DIR", so a rerun behind a new port resumes the same run."""

    def describe(self) -> dict[str, Any]:
        return {
            "policy": self.name,
            "model": self.model,
            "base_url": self.endpoint_label or self.base_url,
            "sampling": {**self.sampling, **self.extra_body},
            "logprobs": self.logprobs,
            "return_token_ids": self.return_token_ids,
        }

    # -- Policy ------------------------------------------------------------------------------
    async def act(self, messages: list[dict], tools: list[dict], ctx: EpisodeContext | None = None) -> dict:
        return parse_response(await self.complete(self.request_body(messages, tools)))


