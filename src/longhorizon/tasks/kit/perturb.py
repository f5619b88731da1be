"""Perturbations as edits of the oracle's call stream, so a reference solution carries no
``flaw`` branches and still reads like one.

A perturbation is a flawed oracle that fails one criterion. Instead of threading ``flaw ==``
tests through the oracle, a family writes the oracle once and derives each flawed copy by
editing the calls it makes, as they are made (the oracle is interactive: it reads results and
decides what to do next, so the edit happens on the live stream, not on a recorded list):

    perturbations = {
        "replied":    perturb.repeat(oracle, perturb.on("mail__reply", message_id=last)),
        "content":    perturb.change(oracle, perturb.on("mail__reply", message_id=last), body=short),
        "filed":      perturb.drop(oracle, perturb.on("mail__move_message", message_id=last)),
        "rest_kept":  perturb.insert(oracle, ToolCall("mail__move_message", {...}),
                                     before=perturb.on("mail__list_messages", folder=FOLDER)),
    }

Each function takes the oracle (a zero-argument callable returning its generator) and returns
another such callable. A dropped call's result, as the oracle sees it, is ``""``: drop only
calls whose result the oracle does not read (writes, verification reads). Calls added by
``insert`` go out with their own results, which the oracle never sees. An edit whose match
never fires is a family bug (the perturbation would be the oracle itself): the stream raises
``LookupError`` when it ends, and the suite test reports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from longhorizon.core.task import OracleScript, ToolCall, rewrite_calls

Oracle = Callable[[], OracleScript]
Match = Callable[[ToolCall], bool]


def on(name: str, **arguments: Any) -> Match:
    """Match calls to tool ``name`` whose arguments include every ``arguments`` item (equal values)."""
    def match(call: ToolCall) -> bool:
        return call.name == name and all(k in call.arguments and call.arguments[k] == v
                                         for k, v in arguments.items())
    match.__doc__ = f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
    return match


def noted(name: str, note: str) -> Match:
    """Match calls to tool ``name`` whose note is ``note``: singles out a call whose arguments
    repeat an earlier one's (a final read-through after reads the oracle parses)."""
    def match(call: ToolCall) -> bool:
        return call.name == name and call.note == note
    match.__doc__ = f"{name}(...) noted {note!r}"
    return match


def _rewrite(oracle: Oracle, match: Match, replace: Callable[[ToolCall], list[ToolCall]], count: int | None,
             what: str, tail: tuple[ToolCall, ...] = ()) -> Oracle:
    """The oracle with its first ``count`` calls that ``match`` (None: all) replaced by
    ``replace(call)``'s calls (``core.task.rewrite_calls``); raises ``LookupError`` at the end
    when no call matched."""
    def make() -> OracleScript:
        hits = 0

        def fn(call: ToolCall) -> list[ToolCall]:
            nonlocal hits
            if match(call) and (count is None or hits < count):
                hits += 1
                return replace(call)
            return [call]

        def final(answer: str) -> str:
            if not hits:
                raise LookupError(f"{what}: the oracle made no call {match.__doc__ or match!r}")
            return answer

        return rewrite_calls(oracle, fn, tail=tail, final=final)()
    return make


def drop(oracle: Oracle, match: Match, *, count: int | None = 1) -> Oracle:
    """Leave out the first ``count`` matching calls (None: every one)."""
    return _rewrite(oracle, match, lambda call: [], count, "drop")


def repeat(oracle: Oracle, match: Match, *, times: int = 2, count: int | None = 1) -> Oracle:
    """Make the first ``count`` matching calls ``times`` times each (the oracle reads the last result)."""
    return _rewrite(oracle, match, lambda call: [call] * times, count, "repeat")


def change(oracle: Oracle, match: Match, edit: Callable[[dict], dict] | None = None, *, count: int | None = 1,
           **arguments: Any) -> Oracle:
    """Send the first ``count`` matching calls with other arguments: ``edit(arguments)``'s result,
    or the arguments updated with ``arguments`` (a value of ``None`` removes the key)."""
    def replace(call: ToolCall) -> list[ToolCall]:
        args = edit(dict(call.arguments)) if edit else dict(call.arguments)
        for k, v in arguments.items():
            if v is None:
                args.pop(k, None)
            else:
                args[k] = v
        return [ToolCall(call.name, args, call.note)]
    return _rewrite(oracle, match, replace, count, "change")


def insert(oracle: Oracle, *calls: ToolCall, before: Match | None = None, after: Match | None = None) -> Oracle:
    """Add ``calls`` before (or after) the first matching call, the oracle still reading its own
    call's result; with neither, after the oracle's last call, before its final message."""
    if before is not None and after is not None:
        raise ValueError("insert: give before= or after=, not both")
    extra = list(calls)
    if before is not None:
        return _rewrite(oracle, before, lambda call: [*extra, call], 1, "insert")
    if after is not None:
        return _rewrite(oracle, after, lambda call: [call, *extra], 1, "insert")
    return rewrite_calls(oracle, tail=tuple(extra))
