"""Adversarial policies the suite's graders must defeat (none may pass a task).

- ``ClaimsDonePolicy``: says the work is done without doing any.
- ``RandomToolPolicy``: calls random tools with arguments drawn from their JSON schemas.
- ``ShotgunPolicy``: reads everything it can, then writes plausible junk with every
  mutating tool, using names, paths, ids and addresses it saw in the results.

They are deterministic in (task, sample, seed) so a failing test can be replayed.
"""

from __future__ import annotations

import random
import re
from typing import Any

from longhorizon.core.task import dumps_canonical
from longhorizon.policies.base import EpisodeContext, assistant, tool_call

READ_PREFIXES = ("list", "read", "get", "search", "find", "describe", "query", "free_busy", "lookup", "check")
PATH_RE = re.compile(r"[\w./-]+\.(?:txt|md|csv|json|xlsx|docx|pptx|log|gz|sh|py|yaml|tsv)\b")
EMAIL_RE = re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+")
ID_RE = re.compile(r'"(?:id|message_id|event_id|ticket_id|order_id|doc_id|key|slug|sku)"\s*:\s*"?([\w-]+)"?')


class _Memory:
    """What an adversary has seen in tool results: candidate paths, addresses and ids."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.emails: list[str] = []
        self.ids: list[str] = []

    def absorb(self, text: str) -> None:
        for bag, found in ((self.paths, PATH_RE.findall(text)), (self.emails, EMAIL_RE.findall(text)),
                           (self.ids, ID_RE.findall(text))):
            for item in found:
                if item not in bag and len(bag) < 200:
                    bag.append(item)


def _plausible(name: str, schema: dict, rng: random.Random, mem: _Memory) -> Any:
    """A value that looks right for a parameter called ``name`` with this JSON schema."""
    kind = schema.get("type")
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"] or schema["anyOf"]
        return _plausible(name, rng.choice(options), rng, mem)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    n = name.lower()
    if kind == "array":
        return [_plausible(n.rstrip("s"), schema.get("items", {"type": "string"}), rng, mem)]
    if kind == "object":
        if n == "cells":
            return {"A1": "Total", "B2": rng.choice([0, 1, 100, 1234.5])}
        return {}
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("integer", "number"):
        if "id" in n and mem.ids:
            ids = [int(i) for i in mem.ids if i.isdigit()]
            if ids:
                return rng.choice(ids)
        return rng.choice([0, 1, 2, 3, 5, 10, 100]) if kind == "integer" else rng.choice([0.0, 1.0, 99.99, 1000.0])
    # strings
    if any(k in n for k in ("path", "file", "src", "dst", "dest", "folder")):
        return rng.choice(mem.paths) if mem.paths and rng.random() < 0.7 else rng.choice(
            ["report.xlsx", "notes.txt", "output.csv", "summary.docx", "Downloads", "."])
    if any(k in n for k in ("email", "to", "cc", "user", "attendee", "assignee", "traveler", "sender")):
        return rng.choice(mem.emails) if mem.emails else "someone@example.com"
    if n.endswith("id") or n in ("key", "slug", "sku", "channel"):
        return rng.choice(mem.ids) if mem.ids else "1"
    if any(k in n for k in ("start", "end", "date", "since", "until", "check_in", "check_out", "due")):
        return rng.choice(["2026-03-02T10:00", "2026-03-03", "2026-04-01T09:30"])
    if n in ("sheet", "old", "new", "name"):
        return rng.choice(["Sheet1", "Summary", "Data", "Report"])
    if n in ("range", "start_cell"):
        return rng.choice(["A1", "A1:D20", "B2"])
    if n in ("command", "sql", "query"):
        return rng.choice(["ls -la", "cat *.txt | head", "SELECT 1", "report", "invoice"])
    return rng.choice(["Done", "Updated as requested", "Total", "Approved", "See attached", "N/A"])


def _arguments(tool: dict, rng: random.Random, mem: _Memory, *, all_params: bool) -> dict:
    params = tool["function"].get("parameters") or {}
    props = params.get("properties") or {}
    required = set(params.get("required") or [])
    return {k: _plausible(k, s, rng, mem) for k, s in props.items() if all_params or k in required}


def _is_read(tool: dict) -> bool:
    name = tool["function"]["name"].split("__", 1)[-1]
    return name.startswith(READ_PREFIXES)


class _Base:
    name = "adversary"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "model": None, "sampling": {"seed": self.seed}}

    def _state(self, ctx: EpisodeContext) -> dict:
        if "adv" not in ctx.scratch:
            ctx.scratch["adv"] = {"rng": random.Random(f"{self.name}:{ctx.task.id}:{ctx.sample}:{self.seed}"),
                                  "mem": _Memory(), "n": 0, "queue": None}
        return ctx.scratch["adv"]

    @staticmethod
    def _observe(st: dict, messages: list[dict]) -> None:
        for m in messages[st.get("seen", 0):]:
            if m.get("role") in ("tool", "user"):
                st["mem"].absorb(str(m.get("content") or ""))
        st["seen"] = len(messages)

    @staticmethod
    def _call(st: dict, tool: dict, args: dict) -> dict:
        st["n"] += 1
        return assistant("", [tool_call(f"adv_{st['n']}", tool["function"]["name"], dumps_canonical(args))])


class ClaimsDonePolicy(_Base):
    """Claims success at once; graders must not take its word for it."""

    name = "claims_done"

    async def act(self, messages, tools, ctx) -> dict:
        return assistant("I have completed everything you asked: all items are processed, the files are "
                         "updated, the messages are sent and the results were verified. Done!")


class RandomToolPolicy(_Base):
    """Random tools, schema-shaped random arguments, a fixed number of calls."""

    name = "random_tools"

    def __init__(self, seed: int = 0, calls: int = 40):
        super().__init__(seed)
        self.calls = calls

    async def act(self, messages, tools, ctx) -> dict:
        st = self._state(ctx)
        self._observe(st, messages)
        if st["n"] >= self.calls or not tools:
            return assistant("Done.")
        rng = st["rng"]
        tool = rng.choice(tools)
        return self._call(st, tool, _arguments(tool, rng, st["mem"], all_params=rng.random() < 0.5))


class ShotgunPolicy(_Base):
    """Reads with every read tool (twice, to learn names), then fires every write tool with
    plausible junk built from what it read, several times over."""

    name = "shotgun"

    def __init__(self, seed: int = 0, rounds: int = 3, max_calls: int = 150):
        super().__init__(seed)
        self.rounds, self.max_calls = rounds, max_calls

    async def act(self, messages, tools, ctx) -> dict:
        st = self._state(ctx)
        self._observe(st, messages)
        if st["queue"] is None:
            reads = [t for t in tools if _is_read(t)]
            writes = [t for t in tools if not _is_read(t)]
            st["queue"] = [("r", t) for t in reads] * 2 + [("w", t) for t in writes] * self.rounds
        while st["queue"] and st["n"] < self.max_calls:
            kind, tool = st["queue"].pop(0)
            args = _arguments(tool, st["rng"], st["mem"], all_params=True)
            return self._call(st, tool, args)
        return assistant("All done: everything has been read, updated and sent.")


ADVERSARIES = {
    "claims_done": ClaimsDonePolicy,
    "random_tools": RandomToolPolicy,
    "shotgun": ShotgunPolicy,
}
