"""Behaviour metrics of one episode, computed from its Trajectory alone.

Only tool calls (name, arguments, result, error flag), messages and the Grade are used, so the
same numbers come out for our suite, for any model's run, and for trajectories imported from
other benchmarks. Read/write and repeated calls come from ``apps.kinds`` (the apps' annotations),
the entities a call touches from ``core.tool_kinds``.

A metric is ``None`` when it is undefined for the episode (a share with nothing to share
over, e.g. the repeated-read share of an episode that read nothing); paired statistics then
leave that pair out of that metric.

    local-goal formation   goal_statement_share    assistant turns with calls that also say, in
                                                   words, what they are about to do
                           lookup_before_act_share acting calls on an entity the instruction does
                                                   not name, made after that entity was looked up
                                                   (named by an earlier read or seen in a result)
    working state          distinct_reads          distinct (tool, arguments) reads that worked
                           repeated_read_share     reads that repeat an earlier read exactly, with
                                                   no write to what they read in between
                           read_before_write_share entities written that were read before the
                                                   first write
    parent-goal stability  error_recovery_share    tool errors followed by the same tool working
                                                   later or by a later successful act
                           ended_after_error       the last tool call failed and the agent stopped
    verification           verification_share      entities written that were read again after
                                                   their last write
                           verifies                the episode read back at least one of them (the
                                                   published "share of trajectories that check")
    parallelism            calls_per_turn          mean calls per assistant turn that made calls
                           parallel_turn_share     such turns with more than one call
    closure                final_state_share       final-state criteria met (the artefacts exist
                                                   and are right), guards left out (doing nothing
                                                   meets "nothing else touched"); ``closure``: all
                                                   of them met
    effort                 tool_calls, turns, tool_errors, tokens (completion tokens, when the
                           policy recorded them; else None)
"""

from __future__ import annotations

import re
from typing import Any

from longhorizon.apps.kinds import is_read, repeats as repeated
from longhorizon.core.tool_kinds import call_key, entities
from longhorizon.core.trajectory import Trajectory

GOAL_WORDS = 3
"""An assistant text of at least this many words alongside a call counts as a stated step."""

_TABLE = (  # name, behaviour, which direction is better, label
    ("goal_statement_share", "local-goal formation", "higher", "turns that state the next step"),
    ("lookup_before_act_share", "local-goal formation", "higher", "acts on an entity after looking it up"),
    ("distinct_reads", "working state", "higher", "distinct reads"),
    ("repeated_read_share", "working state", "lower", "repeated-read share"),
    ("read_before_write_share", "working state", "higher", "entities read before first write"),
    ("error_recovery_share", "parent-goal stability", "higher", "tool errors recovered from"),
    ("ended_after_error", "parent-goal stability", "lower", "ended right after a tool error"),
    ("verification_share", "verification", "higher", "written entities read back after last write"),
    ("verifies", "verification", "higher", "episodes that read back a write"),
    ("calls_per_turn", "parallel tool calls", "higher", "calls per turn"),
    ("parallel_turn_share", "parallel tool calls", "higher", "turns with parallel calls"),
    ("final_state_share", "task closure", "higher", "final-state criteria met"),
    ("closure", "task closure", "higher", "all final-state criteria met"),
    ("tool_calls", "effort", "neither", "tool calls"),
    ("turns", "effort", "neither", "assistant turns"),
    ("tool_errors", "effort", "lower", "tool errors"),
    ("tokens", "effort", "neither", "completion tokens"),
)
METRICS: dict[str, dict[str, str]] = {name: {"behaviour": b, "better": better, "label": label}
                                      for name, b, better, label in _TABLE}
"""Every metric: the behaviour it measures, which direction is better, a short label."""


def _share(num: int, den: int) -> float | None:
    return num / den if den else None


def _user_text(traj: Trajectory) -> str:
    return "\n".join(m.get("content") for m in traj.messages
                     if m.get("role") == "user" and isinstance(m.get("content"), str))


def _entity_value(entity: str) -> str:
    return entity.split(":", 1)[1].split("=", 1)[-1]


def mentions(text: str, value: str) -> bool:
    """``value`` appears in ``text`` as a whole token (id 7 is not mentioned by "2027")."""
    return re.search(r"(?<![\w-])" + re.escape(value) + r"(?![\w-])", text) is not None


def goal_statements(traj: Trajectory) -> tuple[int, int]:
    """(assistant turns with calls whose text states a step, assistant turns with calls)."""
    turns = [m for m in traj.messages if m.get("role") == "assistant" and m.get("tool_calls")]
    said = sum(isinstance(m.get("content"), str) and len(m["content"].split()) >= GOAL_WORDS for m in turns)
    return said, len(turns)


def metrics(traj: Trajectory) -> dict[str, Any]:
    """Every metric of ``METRICS`` for one episode (see the module docstring)."""
    calls = traj.tool_calls
    instruction = _user_text(traj)
    said, call_turns = goal_statements(traj)

    seen_text = ""          # everything earlier tool results showed
    looked_up: set[str] = set()
    acts_unnamed = acts_looked_up = 0
    read_keys: list[str] = []
    repeats = 0
    repeat_at = repeated(calls)         # the same call again with nothing written in between it could see
    write_at: dict[str, list[int]] = {}  # entity -> indexes of writes
    first_read: dict[str, int] = {}
    reads_of: dict[str, list[int]] = {}
    for i, c in enumerate(calls):
        ents = entities(c.name, c.arguments)
        if is_read(c.name, c.arguments):
            repeats += repeat_at[i]
            read_keys.append(call_key(c.name, c.arguments))
            for e in ents:
                looked_up.add(e)
                first_read.setdefault(e, i)
                reads_of.setdefault(e, []).append(i)
        else:
            for e in ents:
                write_at.setdefault(e, []).append(i)
            new = [e for e in ents if not mentions(instruction, _entity_value(e))]
            if new:
                acts_unnamed += 1
                acts_looked_up += all(e in looked_up or mentions(seen_text, _entity_value(e)) for e in new)
        if not c.is_error:
            seen_text += "\n" + c.result

    written = [e for e, idx in write_at.items() if any(not calls[i].is_error for i in idx)]
    verified = sum(any(r > max(write_at[e]) and not calls[r].is_error for r in reads_of.get(e, []))
                   for e in written)
    read_first = sum(e in first_read and first_read[e] < min(write_at[e]) for e in written)

    errors = [i for i, c in enumerate(calls) if c.is_error]
    recovered = sum(any(not c.is_error and (c.name == calls[i].name or not is_read(c.name, c.arguments))
                        for c in calls[i + 1:]) for i in errors)

    per_turn: dict[int, int] = {}
    for c in calls:
        per_turn[c.turn] = per_turn.get(c.turn, 0) + 1
    final = [r for r in (traj.grade.results if traj.grade else ()) if r.kind == "final_state" and not r.guard]
    tokens = [len(t["token_ids"]) for t in traj.turns if isinstance(t.get("token_ids"), list)]
    return {
        "goal_statement_share": _share(said, call_turns),
        "lookup_before_act_share": _share(acts_looked_up, acts_unnamed),
        "distinct_reads": len({call_key(c.name, c.arguments) for c in calls if is_read(c.name, c.arguments) and not c.is_error}),
        "repeated_read_share": _share(repeats, len(read_keys)),
        "read_before_write_share": _share(read_first, len(written)),
        "error_recovery_share": _share(recovered, len(errors)),
        "ended_after_error": float(bool(calls) and calls[-1].is_error and traj.status == "completed"),
        "verification_share": _share(verified, len(written)),
        "verifies": float(verified > 0) if written else None,
        "calls_per_turn": _share(len(calls), len(per_turn)),
        "parallel_turn_share": _share(sum(n > 1 for n in per_turn.values()), len(per_turn)),
        "final_state_share": _share(sum(r.passed for r in final), len(final)),
        "closure": float(all(r.passed for r in final)) if final else None,
        "tool_calls": len(calls),
        "turns": sum(m.get("role") == "assistant" for m in traj.messages),
        "tool_errors": len(errors),
        "tokens": sum(tokens) if tokens else None,
    }
