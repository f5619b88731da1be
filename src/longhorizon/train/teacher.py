"""A teacher that also shows recovery: the oracle, with one failed call and its repair in some episodes.

The oracle already states its local goal with every call, gathers state before acting and
reads its work back before declaring done. What it never does is fail, so a student trained
on it never sees how to get back on track. ``RecoveringOracle`` makes, in a chosen share of
episodes, one call with its required arguments left out (the server rejects it, nothing
changes), reads the error, says what went wrong, and makes the right call:

    assistant: "First, see which log files there are."   shell__run {}
    tool:      "Error: ... command ... required ..."
    assistant: "That call failed (the error says: ...). Retrying with the arguments it needs:
                First, see which log files there are."     shell__run {"command": "ls -laR logs"}

Which episodes and which call are drawn from the task id and sample (deterministic). Rejection
sampling still applies downstream: an episode whose grade the failed call costs is dropped.
"""

from __future__ import annotations

import hashlib
from typing import Any

from longhorizon.core.policy import EpisodeContext, assistant
from longhorizon.policies.scripted import OraclePolicy


def _draw(key: str) -> float:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


class RecoveringOracle:
    name = "oracle"

    def __init__(self, recovery: float = 0.25, max_call: int = 3):
        if not 0 <= recovery <= 1:
            raise ValueError("recovery must be a share in [0, 1]")
        self.recovery, self.max_call = recovery, max_call
        self.oracle = OraclePolicy()

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "model": None, "sampling": None, "perturb": None,
                "teacher": {"recovery": self.recovery, "max_call": self.max_call}}

    def _required(self, tools: list[dict], name: str) -> list[str]:
        for t in tools:
            if t["function"]["name"] == name:
                return list((t["function"].get("parameters") or {}).get("required") or [])
        return []

    async def act(self, messages: list[dict], tools: list[dict], ctx: EpisodeContext) -> dict:
        s = ctx.scratch
        held = s.pop("recovery_held", None)
        if held is not None:  # the flawed call's error is the last message: repair it
            error = (messages[-1].get("content") or "").strip().splitlines()[0][:160]
            note = held.get("content") or ""
            held = dict(held)
            held["content"] = (f"That call failed (the error says: {error}). Retrying with the arguments it "
                               f"needs{': ' + note if note else '.'}")
            return held
        msg = await self.oracle.act(messages, tools, ctx)
        calls = msg.get("tool_calls") or []
        n = s["recovery_calls"] = s.get("recovery_calls", 0) + 1
        key = f"{ctx.task.id}#{ctx.sample}"
        if (calls and not s.get("recovery_done") and _draw(key) < self.recovery
                and n >= 1 + int(_draw(key + "/call") * self.max_call) and self._required(tools, calls[0]["function"]["name"])):
            s["recovery_done"] = True
            s["recovery_held"] = msg
            bad = {**calls[0], "id": f"{calls[0]['id']}_0", "function": {**calls[0]["function"], "arguments": "{}"}}
            return assistant(msg.get("content") or "", [bad])
        return msg
