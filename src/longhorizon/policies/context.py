"""Context policies: what a model reads when the whole episode would not fit its context.

``none`` (the default): the model reads the whole conversation, and an episode that outgrows
the model's context ends with status ``context_length``.

``elide-oldest``: every prompt is kept within ``max_context`` tokens by eliding the oldest
parts of the conversation, replaced by markers the model sees:

1. tool results, oldest first: their content becomes ``ELIDED``;
2. then, if that is not enough, the arguments of the oldest tool calls (a long write stays in
   the conversation as its call, with ``ARGUMENTS_ELIDED`` for arguments).

It keeps the system turn and the tool schemas, the task (every user turn), every assistant
turn's notes and tool names, and the latest turn whole with its results (what the agent is
about to answer). Only what is longer than its marker is elided. When it has to elide, it
elides down to ``LOW_WATER`` of ``max_context`` (or, when what it may not elide fills more than
that, halfway from that to ``max_context``), so the view then holds for a few turns: each
change of view costs the local policy its KV cache and SFT one more example. If the prompt
does not fit even with all of that elided, it is sent as it is (``context_length``).

One view for training and acting. Tokens are counted as ``ChatRenderer`` renders an episode
(the first prompt, each assistant turn's canonical ids, each continuation), and what a turn
elides follows from the turns before it, so it depends only on the messages, the tools and the
tokenizer. The acting policies (``LocalModelPolicy``, ``OpenAIPolicy``: each prompt is
``view``) and SFT (``sft_examples``) therefore elide the same things at the same turn, and each
assistant turn is trained in the very view it is (or would be) acted in. Once elided, a part
stays elided; between changes each turn's view extends the previous one. SFT cuts an episode
into one example per stretch of turns that share their view and trains each assistant turn
once, in its own stretch.

RL and token-in/token-out: at a turn where the view changes, the prompt no longer extends the
ids sampled before it (the local policy renders it afresh and records ``elided`` in the turn
record), so the episode is no longer one sequence of sampled ids. ``train rl`` trains episodes
as one such sequence and refuses a policy with a context policy; with ``none`` nothing changes.
"""

from __future__ import annotations

import json
from typing import Any

from longhorizon.policies.render import ChatRenderer

ELIDED = "[tool result elided to fit the context]"
ARGUMENTS_ELIDED = json.dumps({"elided": "[arguments elided to fit the context]"})
"""Still a JSON object: servers and templates that parse arguments keep working."""
CONTEXT_POLICIES = ("none", "elide-oldest")
LOW_WATER = 0.75
"""When a prompt outgrows ``max_context``, elide until it fits in this share of it."""
_CACHE_ENTRIES = 20_000

State = tuple[int, int]
"""(tool results elided, tool-call turns whose arguments are elided), oldest first."""


class ContextPolicy:
    """``elide-oldest`` over ``max_context`` prompt tokens, counted with ``renderer`` (or a
    tokenizer with a chat template)."""

    kind = "elide-oldest"

    def __init__(self, renderer: Any, max_context: int):
        if max_context < 1:
            raise ValueError(f"max_context must be a positive number of tokens, got {max_context}")
        self.renderer = renderer if isinstance(renderer, ChatRenderer) else ChatRenderer(renderer)
        self.max_context = max_context
        self.low_water = max(1, int(max_context * LOW_WATER))
        self._lengths: dict[tuple, int] = {}

    def describe(self) -> dict[str, Any]:
        return {"policy": self.kind, "max_context": self.max_context}

    # -- the view ------------------------------------------------------------------------------
    def view(self, messages: list[dict], tools: list[dict] | None = None,
             memo: dict | None = None) -> tuple[list[dict], int]:
        """(the messages the model reads for its next turn, how many parts are elided).
        ``memo``: a dict kept per episode, so each turn continues from the last (optional)."""
        state = self.state(messages, tools, memo)
        return apply(messages, state), sum(state)

    def state(self, messages: list[dict], tools: list[dict] | None = None, memo: dict | None = None) -> State:
        """What the prompt after ``messages`` elides, following the view turn by turn from the start
        (or from ``memo``, when it holds an earlier prefix of this conversation)."""
        ends = [i for i, m in enumerate(messages) if m.get("role") == "assistant"] + [len(messages)]
        state: State = (0, 0)
        if memo is not None and memo.get("upto", 0) <= len(messages):
            state, done = tuple(memo.get("state", (0, 0))), memo.get("upto", 0)
            ends = [e for e in ends if e > done]
        for e in ends:
            state = self._next(messages[:e], tools, state)
        if memo is not None:
            memo.update(upto=len(messages), state=state)
        return state

    def _next(self, prompt: list[dict], tools, state: State) -> State:
        """The state for ``prompt`` given the previous turn's: kept while it fits, else the least
        more elided (results first, then calls' arguments) that fits in ``low_water``, or, when
        what cannot be elided already fills more than that, halfway from it to ``max_context``."""
        fit = _Fit(self, prompt, tools)
        if fit(state) <= self.max_context:
            return state
        results, calls = len(fit.results), len(fit.calls)
        steps = (results - state[0]) + (calls - state[1])

        def at(k: int) -> State:
            more = results - state[0]
            return (state[0] + k, state[1]) if k <= more else (results, state[1] + k - more)

        floor = fit(at(steps))
        if floor > self.max_context:
            return at(steps)  # all it may elide; the model's context decides
        target = max(self.low_water, (floor + self.max_context) // 2)
        lo, hi = 1, steps
        while lo < hi:  # eliding more never lengthens (only what is longer than its marker goes)
            mid = (lo + hi) // 2
            if fit(at(mid)) <= target:
                hi = mid
            else:
                lo = mid + 1
        return at(lo)

    def prompt_length(self, messages: list[dict], tools: list[dict] | None = None) -> int:
        """Tokens of the prompt for the next turn, counted as ``ChatRenderer.episode`` renders it."""
        return _Fit(self, messages, tools)((0, 0))

    # -- SFT -----------------------------------------------------------------------------------
    def sft_examples(self, messages: list[dict], tools: list[dict] | None = None) -> list[tuple[list[int], list[int]]]:
        """(ids, assistant mask) examples of one episode, each assistant turn trained once, in the
        view the acting policy reads before it (see the module docstring)."""
        turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if not turns:
            raise ValueError("conversation has no assistant turn")
        memo: dict = {}
        states = [self.state(messages[:i], tools, memo) for i in turns]
        out, start = [], 0
        for k, last in enumerate(turns):
            if k + 1 < len(turns) and states[k + 1] == states[k]:
                continue  # the stretch goes on
            shown = apply(messages[:last], states[k]) + [messages[last]]
            out.append(self.renderer.episode(shown, tools, first_trained=start))
            start = k + 1
        return out

    # -- counting ------------------------------------------------------------------------------
    def _count(self, kind: str, piece: list[dict], tools: list[dict] | None = None) -> int:
        key = (kind, json.dumps(piece, sort_keys=True, default=str),
               json.dumps(tools, sort_keys=True, default=str) if kind == "prompt" else "")
        n = self._lengths.get(key)
        if n is None:
            r = self.renderer
            if kind == "prompt":
                n = len(r.prompt_ids(piece, tools))
            elif kind == "assistant":
                n = len(r.assistant_ids(piece[0]))
            else:
                n = len(r.continuation_ids(piece))
            if len(self._lengths) >= _CACHE_ENTRIES:
                self._lengths.clear()
            self._lengths[key] = n
        return n


def candidates(messages: list[dict]) -> tuple[list[int], list[int]]:
    """(tool results, tool-call turns) that may be elided, oldest first: those before the latest
    assistant turn and longer than their marker. Each list only grows at its end as the
    conversation does, so the first n of them are the same parts at every later turn."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    results = [i for i in range(last) if messages[i].get("role") == "tool"
               and len(str(messages[i].get("content") or "")) > len(ELIDED)]
    calls = [i for i in range(last) if messages[i].get("role") == "assistant"
             and any(_long_arguments(c) for c in messages[i].get("tool_calls") or [])]
    return results, calls


def _long_arguments(call: Any) -> bool:
    args = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
    return len(args if isinstance(args, str) else json.dumps(args, default=str)) > len(ARGUMENTS_ELIDED)


def apply(messages: list[dict], state: State) -> list[dict]:
    """``messages`` with the first ``state`` candidates elided (new dicts for those; the rest shared)."""
    results, calls = candidates(messages)
    return elide(messages, results[:state[0]], calls[:state[1]])


def elide(messages: list[dict], results=(), calls=()) -> list[dict]:
    """``messages`` with the tool results at ``results`` replaced by ``ELIDED`` and the long
    arguments of the assistant turns at ``calls`` by ``ARGUMENTS_ELIDED``."""
    results, calls = set(results), set(calls)
    if not results and not calls:
        return list(messages)
    out = []
    for i, m in enumerate(messages):
        if i in results:
            m = {**m, "content": ELIDED}
        elif i in calls:
            m = {**m, "tool_calls": [
                {**c, "function": {**c["function"], "arguments": ARGUMENTS_ELIDED}} if _long_arguments(c) else c
                for c in m["tool_calls"]]}
        out.append(m)
    return out


class _Fit:
    """Prompt length of ``messages`` under a state; each piece counted once."""

    def __init__(self, policy: ContextPolicy, messages: list[dict], tools):
        self.policy, self.messages, self.tools = policy, messages, tools
        self.results, self.calls = candidates(messages)
        self.turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        bounds = self.turns + [len(messages)]
        self.groups = [(i + 1, bounds[k + 1]) for k, i in enumerate(self.turns)]  # messages after each turn
        self._head: int | None = None
        self._pieces: dict[tuple, int] = {}

    def __call__(self, state: State) -> int:
        p, msgs = self.policy, self.messages
        if self._head is None:
            self._head = p._count("prompt", msgs[:self.turns[0]] if self.turns else msgs, self.tools)
        results, calls = set(self.results[:state[0]]), set(self.calls[:state[1]])
        total = self._head
        for i in self.turns:
            key = ("a", i, i in calls)
            if key not in self._pieces:
                self._pieces[key] = p._count("assistant", elide([msgs[i]], (), [0] if i in calls else ()))
            total += self._pieces[key]
        for a, b in self.groups:
            mine = frozenset(i for i in range(a, b) if i in results)
            key = ("g", a, mine)
            if key not in self._pieces:
                self._pieces[key] = p._count("continuation", elide(msgs[a:b], [i - a for i in mine]))
            total += self._pieces[key]
        return total


def make_context_policy(kind: str | None, max_context: int | None, renderer: Any) -> ContextPolicy | None:
    """The context policy named ``kind`` (None or "none": no policy). ``renderer``: a
    ChatRenderer or a tokenizer with a chat template."""
    if kind in (None, "none"):
        return None
    if kind not in CONTEXT_POLICIES:
        raise ValueError(f"unknown context policy {kind!r} (one of {', '.join(CONTEXT_POLICIES)})")
    if not max_context:
        raise ValueError(f"the {kind} context policy needs max_context (the prompt tokens it keeps within)")
    return ContextPolicy(renderer, max_context)
