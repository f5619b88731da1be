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
        "routing":    perturb.change(oracle, perturb.on("mail__move_message",
                                                        where=lambda a: a["message_id"] in auto),
                                     folder="Inbox", count=None),
    }

Each function takes the oracle (a zero-argument callable returning its generator) and returns
another such callable; ``skip=n`` passes over the first n matching calls (edit the third
reply), ``count=None`` edits every match, ``replace`` plays other calls built from the
matched one (another tool, a wrong pick computed from the ground truth), and ``defer`` plays a
call later than the oracle did. A dropped call's result, as the oracle sees it, is ``""``: drop only
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


def on(name: str | tuple[str, ...], /, where: Callable[[dict], bool] | None = None, **arguments: Any) -> Match:
    """Match calls to tool ``name`` (or any of a tuple of names) whose arguments include every
    ``arguments`` item (equal values; an argument called ``name`` is fine) and, with ``where``,
    for which ``where(arguments)`` is true (a substring, a set of ids: what equality cannot say,
    e.g. ``where=lambda a: a["message_id"] in auto_replies``)."""
    names = (name,) if isinstance(name, str) else tuple(name)

    def match(call: ToolCall) -> bool:
        return (call.name in names and all(k in call.arguments and call.arguments[k] == v
                                           for k, v in arguments.items())
                and (where is None or bool(where(call.arguments))))
    shown = [f"{k}={v!r}" for k, v in arguments.items()] + (["where=..."] if where else [])
    match.__doc__ = f"{'|'.join(names)}({', '.join(shown)})"
    return match


def noted(name: str, note: str) -> Match:
    """Match calls to tool ``name`` whose note is ``note``: singles out a call whose arguments
    repeat an earlier one's (a final read-through after reads the oracle parses)."""
    def match(call: ToolCall) -> bool:
        return call.name == name and call.note == note
    match.__doc__ = f"{name}(...) noted {note!r}"
    return match


def _rewrite(oracle: Oracle, match: Match, calls: Callable[[ToolCall], list[ToolCall] | str], count: int | None,
             what: str, skip: int = 0) -> Oracle:
    """The oracle with its matching calls after the first ``skip`` ones, ``count`` of them (None:
    all), replaced by ``calls(call)`` (``core.task.rewrite_calls``: a string is sent to the
    oracle as the result, nothing played); raises
    ``LookupError`` at the end when no call was replaced."""
    if skip < 0 or (count is not None and count < 1):
        raise ValueError(f"{what}: need skip >= 0 and count >= 1 (or None)")

    def make() -> OracleScript:
        seen = hits = 0

        def fn(call: ToolCall) -> list[ToolCall]:
            nonlocal seen, hits
            if match(call):
                seen += 1
                if seen > skip and (count is None or hits < count):
                    hits += 1
                    return calls(call)
            return [call]

        def final(answer: str) -> str:
            if not hits:
                raise LookupError(f"{what}: the oracle made no call {match.__doc__ or match!r}")
            return answer

        return rewrite_calls(oracle, fn, final=final)()
    return make


def drop(oracle: Oracle, match: Match, *, count: int | None = 1, skip: int = 0,
         answer: str | Callable[[ToolCall], str] = "") -> Oracle:
    """Leave out the first ``count`` matching calls (None: every one) after the first ``skip``.
    The oracle is sent ``answer`` (or ``answer(call)``) as the result it did not get: a read it
    parses can be skipped by handing it what it would have assumed (a free/busy built from what
    it already knew, a made-up booking reference)."""
    return _rewrite(oracle, match, answer if callable(answer) else (lambda call: answer), count, "drop", skip)


def defer(oracle: Oracle, match: Match, until: Match, *, answer: str | Callable[[ToolCall], str] = "") -> Oracle:
    """Play the first matching call late: right after the first ``until`` call that follows it
    ("verified before the change", "told them before checking"). The oracle is sent ``answer``
    (or ``answer(call)``) in its place, as with ``drop``; raises ``LookupError`` at the end when
    either call never came."""
    feed = answer if callable(answer) else (lambda call: answer)

    def make() -> OracleScript:
        gen, held, played = oracle(), None, False
        try:
            call = next(gen)
            while True:
                if held is None and match(call):
                    held = call
                    call = gen.send(feed(call))
                    continue
                result = yield call
                if held is not None and not played and until(call):
                    yield held
                    played = True
                call = gen.send(result)
        except StopIteration as stop:
            if not played:
                missing = match if held is None else until
                raise LookupError(f"defer: the oracle made no call {missing.__doc__ or missing!r}"
                                  + ("" if held is None else " after the deferred one")) from None
            return stop.value
    return make


def repeat(oracle: Oracle, match: Match, *, times: int = 2, count: int | None = 1, skip: int = 0) -> Oracle:
    """Make the first ``count`` matching calls ``times`` times each (the oracle reads the last result)."""
    return _rewrite(oracle, match, lambda call: [call] * times, count, "repeat", skip)


def replace(oracle: Oracle, match: Match, calls: Callable[[ToolCall], ToolCall | list[ToolCall]], *,
            count: int | None = 1, skip: int = 0) -> Oracle:
    """Play ``calls(call)`` (a call or a list) in place of the first ``count`` matching calls after
    ``skip``: another tool, or extra calls built from the matched one. The oracle is sent the
    result of its own call when the list keeps it, else of the list's last call."""
    def fn(call: ToolCall) -> list[ToolCall]:
        out = calls(call)
        return list(out) if isinstance(out, (list, tuple)) else [out]
    return _rewrite(oracle, match, fn, count, "replace", skip)


def change(oracle: Oracle, match: Match, edit: Callable[[dict], dict] | None = None, *, count: int | None = 1,
           skip: int = 0, **arguments: Any) -> Oracle:
    """Send the first ``count`` matching calls with other arguments: ``edit(arguments)``'s result,
    or the arguments updated with ``arguments`` (a value of ``None`` removes the key)."""
    def edited(call: ToolCall) -> list[ToolCall]:
        args = edit(dict(call.arguments)) if edit else dict(call.arguments)
        for k, v in arguments.items():
            if v is None:
                args.pop(k, None)
            else:
                args[k] = v
        return [ToolCall(call.name, args, call.note)]
    return _rewrite(oracle, match, edited, count, "change", skip)


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
