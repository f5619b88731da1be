"""Context policies: what a model reads when the whole episode would not fit its context.

``none`` (the default): the model reads the whole conversation, and an episode that outgrows
the model's context ends with status ``context_length``.

``elide-oldest``: every prompt is kept within ``max_context`` tokens by replacing the content
of the oldest tool results, one at a time, with ``ELIDED``, a marker the model sees, until the
prompt fits. It keeps the system turn and the tool schemas, the task (every user turn), every
assistant turn whole (its notes and tool calls: what the agent did and decided), and the
results of the latest turn (what the agent is about to answer). A result no longer than the
marker is never elided. If the prompt does not fit even with every older result elided, it is
sent as it is and the model's context decides (``context_length``).

One view for training and acting. Tokens are counted the way ``ChatRenderer`` renders an
episode (the first prompt, each assistant turn's canonical ids, each continuation), so which
results a turn elides depends only on the messages, the tools and the tokenizer. The acting
policies (``LocalModelPolicy``, ``OpenAIPolicy``: each prompt is ``view``) and SFT
(``sft_examples``) therefore elide the same results at the same turn: each assistant turn is
trained in the very view it is (or would be) acted in. A turn's view extends the previous
turn's until one more result has to go; SFT cuts an episode into one example per stretch of
turns that share their elisions, and trains each assistant turn once, in its own stretch.

RL and token-in/token-out: at a turn where one more result is elided, the prompt no longer
extends the ids sampled before it (the local policy renders it afresh, and records ``elided``
in the turn record), so the episode is no longer one sequence of sampled ids. ``train rl``
trains episodes as one such sequence and refuses a policy with a context policy; with
``none`` nothing changes.
"""

from __future__ import annotations

import json
from typing import Any

from longhorizon.policies.render import ChatRenderer

ELIDED = "[tool result elided to fit the context]"
CONTEXT_POLICIES = ("none", "elide-oldest")
_CACHE_ENTRIES = 20_000


class ContextPolicy:
    """``elide-oldest`` over ``max_context`` prompt tokens, counted with ``renderer`` (or a
    tokenizer with a chat template)."""

    kind = "elide-oldest"

    def __init__(self, renderer: Any, max_context: int):
        if max_context < 1:
            raise ValueError(f"max_context must be a positive number of tokens, got {max_context}")
        self.renderer = renderer if isinstance(renderer, ChatRenderer) else ChatRenderer(renderer)
        self.max_context = max_context
        self._lengths: dict[tuple, int] = {}

    def describe(self) -> dict[str, Any]:
        return {"policy": self.kind, "max_context": self.max_context}

    # -- the view ------------------------------------------------------------------------------
    def view(self, messages: list[dict], tools: list[dict] | None = None) -> tuple[list[dict], int]:
        """(the messages the model reads for its next turn, how many tool results were elided)."""
        candidates = self._candidates(messages)
        n = self.elisions(messages, tools, candidates)
        return elide(messages, candidates[:n]), n

    def elisions(self, messages: list[dict], tools: list[dict] | None = None,
                 candidates: list[int] | None = None) -> int:
        """How many of the oldest tool results the next turn's prompt elides: the fewest that
        make it fit, or all it may elide when none does."""
        candidates = self._candidates(messages) if candidates is None else candidates
        fits = _Fit(self, messages, tools, candidates)
        if not candidates or fits(0):
            return 0
        lo, hi = 1, len(candidates)
        if not fits(hi):
            return hi
        while lo < hi:  # the fewest that fit (eliding more never lengthens: only long results go)
            mid = (lo + hi) // 2
            if fits(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def prompt_length(self, messages: list[dict], tools: list[dict] | None = None) -> int:
        """Tokens of the prompt for the next turn, counted as ``ChatRenderer.episode`` renders it."""
        return _Fit(self, messages, tools, [])(0, length=True)

    # -- SFT -----------------------------------------------------------------------------------
    def sft_examples(self, messages: list[dict], tools: list[dict] | None = None) -> list[tuple[list[int], list[int]]]:
        """(ids, assistant mask) examples of one episode, each assistant turn trained once, in the
        view the acting policy reads before it (see the module docstring)."""
        turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if not turns:
            raise ValueError("conversation has no assistant turn")
        counts = [self.elisions(messages[:i], tools) for i in turns]
        out = []
        start = 0
        for k in range(len(turns)):
            if k + 1 < len(turns) and counts[k + 1] == counts[k]:
                continue  # the stretch goes on
            last = turns[k]
            shown = elide(messages[:last + 1], self._candidates(messages[:last])[:counts[k]])
            out.append(self.renderer.episode(shown, tools, first_trained=start))
            start = k + 1
        return out

    # -- counting ------------------------------------------------------------------------------
    @staticmethod
    def _candidates(messages: list[dict]) -> list[int]:
        """Indices of the tool results it may elide, oldest first: those before the latest
        assistant turn, longer than the marker."""
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        return [i for i in range(last) if messages[i].get("role") == "tool"
                and len(str(messages[i].get("content") or "")) > len(ELIDED)]

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


class _Fit:
    """Whether the prompt fits with the first ``c`` candidates elided; each piece counted once."""

    def __init__(self, policy: ContextPolicy, messages: list[dict], tools, candidates: list[int]):
        self.policy, self.messages, self.tools = policy, messages, tools
        self.candidates = candidates
        turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        self.turns = turns
        bounds = turns + [len(messages)]
        self.groups = [(i + 1, bounds[k + 1]) for k, i in enumerate(turns)]  # messages after each turn
        self._fixed: int | None = None
        self._group: dict[tuple[int, frozenset], int] = {}

    def __call__(self, c: int, *, length: bool = False):
        p, msgs = self.policy, self.messages
        if self._fixed is None:
            head = msgs[:self.turns[0]] if self.turns else msgs
            self._fixed = p._count("prompt", head, self.tools) + sum(
                p._count("assistant", [msgs[i]]) for i in self.turns)
        elided = set(self.candidates[:c])
        total = self._fixed
        for g, (a, b) in enumerate(self.groups):
            mine = frozenset(i for i in range(a, b) if i in elided)
            key = (g, mine)
            if key not in self._group:
                self._group[key] = p._count("continuation", elide(msgs[a:b], [i - a for i in mine]))
            total += self._group[key]
        return total if length else total <= p.max_context


def elide(messages: list[dict], indices) -> list[dict]:
    """``messages`` with the content of those at ``indices`` replaced by ``ELIDED`` (new dicts
    for those; the rest shared)."""
    chosen = set(indices)
    if not chosen:
        return list(messages)
    return [{**m, "content": ELIDED} if i in chosen else m for i, m in enumerate(messages)]


def make_context_policy(kind: str | None, max_context: int | None, renderer: Any) -> ContextPolicy | None:
    """The context policy named ``kind`` (None or "none": no policy). ``renderer``: a
    ChatRenderer or a tokenizer with a chat template, or a callable returning one (only called
    when a policy is made)."""
    if kind in (None, "none"):
        return None
    if kind not in CONTEXT_POLICIES:
        raise ValueError(f"unknown context policy {kind!r} (one of {', '.join(CONTEXT_POLICIES)})")
    if not max_context:
        raise ValueError(f"the {kind} context policy needs max_context (the prompt tokens it keeps within)")
    if callable(renderer) and not isinstance(renderer, ChatRenderer) and not hasattr(renderer, "apply_chat_template"):
        renderer = renderer()
    return ContextPolicy(renderer, max_context)
