"""The OpenAI-compatible chat-completions call: one POST with retries, and its reply parsed.

Used by what talks to a chat model: the ``openai`` policy (``policies/openai_client.py``), the
LLM-played simulated user (``apps/user/simulator.py``), the behaviour judge and the judge of
judged criteria (``core/judged.py``). Transport
failures, 429 and 5xx are retried with exponential backoff and then raised as ``InfraError``:
the model server failing is never the agent failing. Other 4xx are a bad request and raise
``InfraError`` at once with the server's message, except a prompt longer than the model's
context, which raises ``ContextLengthExceeded`` (the agent's own outcome).

Token data for RL is opt-in because only some servers have it: ``logprobs=True`` asks for
per-token log-probs; ``return_token_ids=True`` adds vLLM's ``return_token_ids`` and
``return_tokens_as_token_ids`` so sampled ids come back exactly.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from typing import Any

import httpx2

from longhorizon.core.control_text import escape_generic, escape_message
from longhorizon.core.errors import ContextLengthExceeded, InfraError

API_KEYS = {
    "system": ("role", "content", "name"),
    "developer": ("role", "content", "name"),
    "user": ("role", "content", "name"),
    "assistant": ("role", "content", "name", "tool_calls"),
    "tool": ("role", "content", "tool_call_id"),
}
"""Per role, the message keys the chat API defines; anything else (token data, notes) stays home."""

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def _context_overflow(status: int, message: str, code: Any) -> bool:
    return status == 400 and (code == "context_length_exceeded"
                              or bool(re.search(r"maximum context length|context length|too many tokens|"
                                                r"prompt is too long", message, re.I)))


def api_messages(messages: list[dict]) -> list[dict]:
    """The messages as the API expects them: only the keys it defines, arguments as JSON strings,
    and text that spells a control token escaped (``core/control_text.py``: a server's chat
    template would otherwise tokenize ``<|im_start|>`` in a tool result as a real turn marker)."""
    out = []
    for m in messages:
        keys = API_KEYS.get(m.get("role"), ("role", "content"))
        msg = escape_message({k: m[k] for k in keys if k in m}, escape_generic)
        if m.get("role") == "assistant":
            if msg.get("tool_calls"):
                msg["tool_calls"] = [_api_call(c) for c in msg["tool_calls"]]
            else:
                msg.pop("tool_calls", None)
            if msg.get("content") is None:
                msg["content"] = ""
        out.append(msg)
    return out


def _api_call(call: dict) -> dict:
    fn = call.get("function") or {}
    args = fn.get("arguments", "{}")
    return {"id": call.get("id", ""), "type": "function",
            "function": {"name": fn.get("name", ""), "arguments": args if isinstance(args, str) else json.dumps(args)}}


class ChatClient:
    """Chat completions over HTTP: ``complete(request_body(messages, tools))``.

    Connections are pooled per event loop; ``async with ChatClient(...)`` (or ``aclose()``)
    closes them when the work is over.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float | None = 0.0,
        top_p: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        extra_body: dict[str, Any] | None = None,
        logprobs: bool = False,
        return_token_ids: bool = False,
        timeout_s: float = 600.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = os.environ.get("OPENAI_API_KEY", "") if api_key is None else api_key
        self.sampling = {k: v for k, v in {
            "temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": seed,
        }.items() if v is not None}
        self.extra_body = dict(extra_body or {})
        self.logprobs = logprobs
        self.return_token_ids = return_token_ids
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._client: httpx2.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    # -- HTTP --------------------------------------------------------------------------------
    def _http(self) -> httpx2.AsyncClient:
        """One pooled client per event loop (an httpx client cannot cross loops)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx2.AsyncClient(timeout=self.timeout_s, headers=headers,
                                              limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64))
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close pooled connections. The policy stays usable (a new pool opens on demand)."""
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = self._client_loop = None

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (Ray ships the policy to its episode workers): the pool stays behind."""
        return {**self.__dict__, "_client": None, "_client_loop": None}

    async def __aenter__(self) -> "ChatClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def request_body(self, messages: list[dict], tools: list[dict]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": api_messages(messages), **self.sampling}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        if self.logprobs:
            body["logprobs"] = True
        if self.return_token_ids:
            body["return_token_ids"] = True
            body["return_tokens_as_token_ids"] = True
        body.update(self.extra_body)
        return body

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.max_backoff_s)
            except ValueError:
                pass
        base = min(self.backoff_s * 2 ** attempt, self.max_backoff_s)
        return base * (0.5 + random.random() / 2)  # jitter, so many episodes do not retry in lockstep

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``/chat/completions`` with retries; the parsed JSON response."""
        return await self.post("/chat/completions", body)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``base_url + path`` with retries (``/completions`` for token-id prompts)."""
        url = f"{self.base_url}{path}"
        last = ""
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                resp = await self._http().post(url, json=body)
            except httpx2.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 200:
                    try:
                        return resp.json()
                    except ValueError as exc:
                        raise InfraError(f"{url} returned a body that is not JSON: {resp.text[:200]!r}") from exc
                message, code = _error_of(resp)
                if resp.status_code not in RETRY_STATUSES:
                    if _context_overflow(resp.status_code, message, code):
                        raise ContextLengthExceeded(message)
                    raise InfraError(f"{url} refused the request ({resp.status_code}): {message}")
                last = f"HTTP {resp.status_code}: {message}"
                retry_after = resp.headers.get("Retry-After")
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        raise InfraError(f"{url} failed after {self.max_retries + 1} attempts; last error: {last}")


def _error_of(resp) -> tuple[str, Any]:
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:500] or resp.reason_phrase, None
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        return str(err.get("message") or err.get("detail") or data)[:2000], err.get("code")
    return str(err)[:2000], None


def parse_response(data: dict[str, Any]) -> dict[str, Any]:
    """The assistant message of a chat-completion response, in the episode's format.

    Tool-call arguments become JSON strings (some servers send objects); reasoning text, when a
    server separates it, is kept as ``reasoning_content``; token ids and log-probs, when
    present, become ``token_ids`` / ``prompt_ids`` / ``logprobs``. A reply the server cut at
    ``max_tokens`` (``finish_reason`` "length") says so, with its ``completion_tokens`` when the
    usage gives them: the episode answers it as a cut, never as a finished reply.
    """
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise InfraError(f"malformed chat completion (no choices[0].message): {str(data)[:300]}") from exc
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning:
        out["reasoning_content"] = reasoning
    calls = []
    for i, c in enumerate(message.get("tool_calls") or []):
        fn = c.get("function") or {}
        args = fn.get("arguments")
        if args is None:
            args = "{}"
        elif not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        calls.append({"id": c.get("id") or f"call_{i}", "type": "function",
                      "function": {"name": fn.get("name") or "", "arguments": args}})
    if calls:
        out["tool_calls"] = calls
    if choice.get("finish_reason") == "length":
        out["finish_reason"] = "length"
        used = (data.get("usage") or {}).get("completion_tokens") if isinstance(data.get("usage"), dict) else None
        if isinstance(used, int) and not isinstance(used, bool) and used > 0:
            out["completion_tokens"] = used
    out.update(_token_data(data, choice))
    return out


def _token_data(data: dict, choice: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    entries = (choice.get("logprobs") or {}).get("content") or []
    if entries:
        out["logprobs"] = [float(e["logprob"]) for e in entries]
    ids = choice.get("token_ids")
    if ids is None and entries and all(str(e.get("token", "")).startswith("token_id:") for e in entries):
        ids = [int(e["token"].split(":", 1)[1]) for e in entries]
    if ids is not None:
        out["token_ids"] = list(ids)
    prompt_ids = data.get("prompt_token_ids") or choice.get("prompt_token_ids")
    if prompt_ids is not None:
        out["prompt_ids"] = list(prompt_ids)
    return out
