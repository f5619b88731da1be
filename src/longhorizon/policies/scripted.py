"""Policies that need no model: the oracle (the Task's reference solution) and null."""

from __future__ import annotations

from typing import Any

from longhorizon.core.policy import EpisodeContext, assistant, tool_call
from longhorizon.core.task import dumps_canonical, rewrite_calls
from longhorizon.apps.kinds import is_read
from longhorizon.core.tool_kinds import entities


class OraclePolicy:
    """Plays the Task's oracle generator through the same tools the agent gets.

    ``script`` picks another generator from the Task (``perturbations[criterion]``) so
    tests can play deliberately flawed solutions the same way.
    """

    name = "oracle"

    def __init__(self, perturb: str | None = None):
        self.perturb = perturb

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "model": None, "sampling": None, "perturb": self.perturb}

    async def act(self, messages, tools, ctx: EpisodeContext) -> dict:
        gen = ctx.scratch.get("oracle")
        try:
            if gen is None:
                make = ctx.task.perturbations[self.perturb] if self.perturb else ctx.task.oracle
                gen = ctx.scratch["oracle"] = make()
                call = next(gen)
            else:
                last = messages[-1]
                call = gen.send(last.get("content", "") if last.get("role") == "tool" else "")
        except StopIteration as stop:
            return assistant(stop.value or "Done.")
        n = ctx.scratch["n"] = ctx.scratch.get("n", 0) + 1
        return assistant(call.note, [tool_call(f"call_{n}", call.name, dumps_canonical(call.arguments))])


def rewritten_oracle(task, fn=None, *, final=None, tail=()):
    """``task`` with its oracle's calls passed through ``fn`` (``core.task.rewrite_calls``): the
    same solution worked another way (other wording, another tool, an extra look around), for
    tests that a grader accepts correct work it was not written against. ``tail`` is played
    after its last call, ``final`` rewrites its final message."""
    import dataclasses

    edited = rewrite_calls(task.oracle, fn, tail=tuple(tail),
                           final=(lambda answer: final(answer or "Done.")) if final else None)
    return dataclasses.replace(task, oracle=edited)


class HastyOraclePolicy:
    """The oracle without its care: it states no local goals (empty notes) and skips every
    read of something it already wrote (its verification reads; the script is sent an empty
    result instead). A weaker policy whose differences from the oracle are known, so a
    behaviour analysis of the pair has something real to find. A script that cannot go on
    without the skipped result ends the episode."""

    name = "hasty"

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "model": None, "sampling": None}

    async def act(self, messages, tools, ctx: EpisodeContext) -> dict:
        written: set[str] = ctx.scratch.setdefault("written", set())
        try:
            if "oracle" not in ctx.scratch:
                ctx.scratch["oracle"] = ctx.task.oracle()
                call = next(ctx.scratch["oracle"])
            else:
                last = messages[-1]
                call = ctx.scratch["oracle"].send(last.get("content", "") if last.get("role") == "tool" else "")
            while is_read(call.name, call.arguments) and written & set(entities(call.name, call.arguments)):
                call = ctx.scratch["oracle"].send("")
        except StopIteration:
            return assistant("Done.")
        except Exception:  # the script needed the result it was not given
            return assistant("Done.")
        if not is_read(call.name, call.arguments):
            written.update(entities(call.name, call.arguments))
        n = ctx.scratch["n"] = ctx.scratch.get("n", 0) + 1
        return assistant("", [tool_call(f"call_{n}", call.name, dumps_canonical(call.arguments))])


class NullPolicy:
    """Ends at once without touching anything: every task must fail under it."""

    name = "null"

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "model": None, "sampling": None}

    async def act(self, messages, tools, ctx) -> dict:
        return assistant("Done.")


class ReplayPolicy:
    """Sends the given assistant messages in order (anything at all, malformed ones too), then
    finishes: for tests and for replaying a recorded conversation through the tools."""

    name = "replay"

    def __init__(self, *messages):
        self.messages = list(messages)

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "model": None, "sampling": None}

    async def act(self, messages, tools, ctx) -> dict:
        return self.messages.pop(0) if self.messages else assistant("done")
