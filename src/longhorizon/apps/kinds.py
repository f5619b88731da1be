"""Does a call read or write? The one answer, from the apps' own tool annotations.

Every tool is registered with its effect (``@srv.tool(READ)``, ``apps/common.py``), which is
also its MCP annotations, held to what the tool does by ``tests/apps/test_annotations.py``.
A call *reads* when its tool's effect is READ or OPEN (shows something and marks it seen, like
``mail__read_message``); every other call writes. Graders (which paths a trajectory wrote,
"read back after the last write"), the behaviour analysis and RL's repetition penalty all ask
here, so they cannot disagree. A tool no app has (another benchmark's log) falls back to the
name rule of ``core.tool_kinds.reads_by_name``.

``repeats`` says which calls of an episode repeat an earlier one with nothing written in
between that they could see: re-reading what the context already holds, or redoing a write.
A read after a write that touches it is verification, not repetition.
"""

from __future__ import annotations

import functools
import tempfile

from longhorizon.core.tool_kinds import call_key, entities, reads_by_name

READS = ("read", "open")
"""The effects whose calls read (``apps/common.py``)."""


@functools.cache
def tool_effects() -> dict[str, str]:
    """``app__tool`` -> effect name, for every tool of every app (every domain of the user
    app), read off their registrations on an empty World (a registration writes nothing)."""
    from longhorizon.apps import APPS, build_app
    from longhorizon.apps.common import AppServer
    from longhorizon.apps.user import state as user_state
    from longhorizon.core.world import World

    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="longhorizon-kinds-") as root:
        world = World(root)
        for app in APPS:
            out.update({f"{app}__{t}": e for t, e in build_app(app, world).effects().items()})
    for domain in user_state.DOMAINS:  # the user app's back office depends on the World's domain
        srv = AppServer("user")
        user_state.domain_module(domain).register_agent_tools(srv, None)
        out.update({f"user__{t}": e for t, e in srv.effects().items()})
    return out


def is_read(name: str, arguments=None) -> bool:
    """True when the call of ``name`` (exposed ``app__tool``) only reads (see the module doc)."""
    effect = tool_effects().get(name)
    return effect in READS if effect is not None else reads_by_name(name, arguments)


def _touches(write: tuple[str, list[str]], call: tuple[str, list[str]]) -> bool:
    """Whether a write (app, entities) may change what a call (app, entities) sees: they share
    an entity (a path is shared by every app that opens files), or one of them names none
    (``send_message``, ``list_messages``) and both are the same app's."""
    (wapp, wents), (capp, cents) = write, call
    return bool(set(wents) & set(cents)) or ((not wents or not cents) and wapp == capp)


def repeats(calls) -> list[bool]:
    """Per call (records with ``.name .arguments .is_error``): does it repeat an earlier call
    exactly (same tool, same arguments) with no successful write in between that touches it?"""
    out: list[bool] = []
    last_at: dict[str, int] = {}
    writes: list[tuple[int, tuple[str, list[str]]]] = []  # (index, (app, entities)) of successful writes
    for i, c in enumerate(calls):
        key = call_key(c.name, c.arguments)
        here = (c.name.split("__", 1)[0] if "__" in c.name else "", entities(c.name, c.arguments))
        j = last_at.get(key)
        out.append(j is not None and not any(j < w < i and _touches(we, here) for w, we in writes))
        last_at[key] = i
        if not c.is_error and not is_read(c.name, c.arguments):
            writes.append((i, here))
    return out
