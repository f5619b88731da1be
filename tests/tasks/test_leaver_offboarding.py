"""leaver_offboarding draws its traps per seed: instances differ in what must be noticed."""

import re
from functools import cache

import pytest

from longhorizon.core.task import ToolCall
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy, rewritten_oracle
from longhorizon.tasks.diversity import trap_set
from longhorizon.tasks.registry import get_family

TRAPS = ("withdrawn", "existing_ticket", "no_handover", "termination", "namesake")


@cache
def task(seed: int, level: int | None = None):
    return get_family("leaver_offboarding").generate(seed, level)


def test_trap_mix_varies_over_seeds():
    tasks = [task(seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in TRAPS:
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:
        assert any(t.data[k] for k in TRAPS)
        ids = {c.id for c in t.criteria}
        assert ("checked_before_opening" in ids) == bool(t.data["existing_ticket"])
        assert {"access_tickets", "ticket_priority_due"} <= ids
    assert all(task(seed, 1).data["withdrawn"] for seed in range(20)), "level 1 keeps the withdrawn leaver"


@pytest.mark.parametrize("has_ticket", [True, False])
async def test_oracle_fixes_an_existing_ticket_or_opens_every_one(has_ticket):
    """With a ticket already open for the leaver whose day moved, the oracle fixes it and opening a
    second one fails access_tickets; without one, it opens a ticket per leaver."""
    t = next(t for t in (task(s) for s in range(20)) if bool(t.data["existing_ticket"]) == has_ticket)
    traj = await play_task(t, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    creates = [c for c in traj.tool_calls if c.name == "tickets__create_ticket"]
    assert len(creates) == len(t.data["leavers"]) - has_ticket
    if not has_ticket:
        return
    key = t.data["existing_ticket"]
    old = next(c for c in traj.tool_calls if c.name == "tickets__get_ticket" and c.arguments["key"] == key)
    title = re.search(r'"title":\s*"([^"]+)"', old.result).group(1)

    def second_ticket(call):  # a new ticket instead of fixing the old one
        if call.name == "tickets__update_ticket" and call.arguments["key"] == key:
            return ToolCall("tickets__create_ticket", {
                "project": "ITS", "title": title, "type": "task", "priority": "P2", "team": "Identity & Access",
                "labels": ["offboarding"], "due_date": call.arguments["due_date"], "description": title},
                call.note)
        return call

    traj = await play_task(rewritten_oracle(t, second_ticket), OraclePolicy())
    assert "access_tickets" in {r.id for r in traj.grade.results if not r.passed}
