"""Graders are fair to correct work a careful person would accept (issue 25): each case plays
the family's oracle through the real tools with one output said another valid way, and
scores 1.0; the same output made wrong still fails its criterion."""

import json
import re

import mcp

from longhorizon.apps import build_server
from longhorizon.apps.chat import state as chat
from longhorizon.apps.mail import state as mail
from longhorizon.core.task import ToolCall
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy, rewritten_oracle
from longhorizon.tasks.registry import get_family


async def grade(task, fn):
    traj = await play_task(rewritten_oracle(task, fn), OraclePolicy())
    return traj, {r.id: r for r in traj.grade.results}


def assert_full_marks(traj):
    assert traj.passed and traj.grade.reward == 1.0, [(r.id, r.note) for r in traj.grade.results if not r.passed]


# -- shared_inbox_routing: the summary's counts ------------------------------------------------

def routing_summary(task, body_of):
    """Rewrites the summary to the lead with ``body_of(counts by short name, left in the inbox)``."""
    c = {f.split("/")[-1]: n for f, n in task.data["counts"].items()}

    def fn(call):
        if call.name == "mail__send_message" and task.data["lead"] in call.arguments["to"]:
            return ToolCall(call.name, {**call.arguments, "body": body_of(c, task.data["new_in_inbox"])}, call.note)
        return call
    return fn


def routed_prose(c, rest):
    return (f"Hi,\n\nRouted {sum(c.values())} new messages: {c['Priority']} to Priority, {c['Billing']} to "
            f"Billing, {c['Technical']} to Technical and {c['Auto-replies']} to Auto-replies; {rest} stayed in "
            f"the Inbox.\n")


def vertical_table(c, rest):
    rows = "".join(f"| Support/{k} | {n} |\n" for k, n in c.items())
    return (f"Routing run done:\n\n| Folder | Messages |\n|---|---|\n{rows}"
            f"| Inbox (left for the duty agent) | {rest} |\n")


def horizontal_table(c, rest):
    return ("Counts for this run:\n\n| " + " | ".join(c) + " | Left in Inbox |\n|" + "---|" * (len(c) + 1)
            + "\n| " + " | ".join(str(n) for n in c.values()) + f" | {rest} |\n")


async def test_routing_summary_binds_each_count_to_its_folder_in_prose():
    """ "Routed 22 new messages: 4 to Priority" gives Priority 4, not the total before it."""
    task = get_family("shared_inbox_routing").generate(0)
    traj, _ = await grade(task, routing_summary(task, routed_prose))
    assert_full_marks(traj)


async def test_routing_summary_reads_markdown_tables_either_way_round():
    task = get_family("shared_inbox_routing").generate(1)
    for body in (vertical_table, horizontal_table):
        traj, _ = await grade(task, routing_summary(task, body))
        assert_full_marks(traj)


async def test_routing_summary_with_a_wrong_count_still_fails():
    task = get_family("shared_inbox_routing").generate(1)
    for body in (routed_prose, vertical_table, horizontal_table):
        def off_by_one(c, rest, body=body):
            return body({**c, "Priority": c["Priority"] + 1}, rest)
        _, results = await grade(task, routing_summary(task, off_by_one))
        assert not results["summary"].passed, body.__name__


# -- cancelled_flight_rebooking: what "presenters first" means --------------------------------

async def test_rebooking_mail_and_policy_say_presenters_get_the_policy_flights_seats_not_a_free_pick(tmp_path):
    """The presenters' precedence is over the seats on the flight the rules pick, stated so in the
    lead's mail and the policy: no "first pick" reading where presenters choose the most
    convenient flight (the grader books them on the cheapest one)."""
    for seed in (0, 1, 100001):
        task = get_family("cancelled_flight_rebooking").generate(seed)
        world = World.build(tmp_path / str(seed), task.build)
        lead = next(m for m in mail.messages(world) if m["subject"].endswith(": presenters"))["body"].lower()
        assert "first pick" not in lead and "the same rebooking rules apply to them" in lead, lead
        async with mcp.Client(build_server("travel", world)) as c:
            seats = json.loads((await c.call_tool("get_policy", {})).content[0].text)["policy"]["disruptions"]["seats"]
        assert "the flight these rules pick" in seats and "next flight the rules allow" in seats, seats


# -- wiki_chat_reconcile: the abandoned address named as not applied ---------------------------

def summary_with(task, tmp_path, sentence_of):
    """Appends ``sentence_of(abandoned address)`` to the oracle's #docs summary."""
    world = World.build(tmp_path / "w", task.build)
    heads_up = next(m["text"] for m in chat.messages(world, "announcements") if m["text"].startswith("Heads-up"))
    planned = re.search(r"moving to (.+?) on ", heads_up).group(1)

    def fn(call):
        if call.name == "chat__post_message" and call.arguments["channel"] == "#docs":
            return ToolCall(call.name, {**call.arguments, "text": f"{call.arguments['text']} {sentence_of(planned)}"},
                            call.note)
        return call
    return fn


async def test_wiki_summary_may_name_the_abandoned_address_as_not_applied(tmp_path):
    task = get_family("wiki_chat_reconcile").generate(4)
    for i, say in enumerate((lambda a: f"The first announced address, {a}, was not applied (the lease fell through).",
                             lambda a: f"Not {a}: that plan was dropped.")):
        traj, _ = await grade(task, summary_with(task, tmp_path / str(i), say))
        assert_full_marks(traj)


async def test_wiki_summary_that_applies_the_abandoned_address_still_fails(tmp_path):
    task = get_family("wiki_chat_reconcile").generate(4)
    _, results = await grade(task, summary_with(task, tmp_path, lambda a: f"Also set the office address to {a}."))
    assert not results["summary_posted"].passed


# -- entity_due_diligence: a subsidiary with its parent named ----------------------------------

def entity_cells(task, cell_of):
    """Rewrites the register's Entity cells with ``cell_of(entity)``."""
    def fn(call):
        if call.name == "sheets__write_rows":
            rows = [list(r) for r in call.arguments["rows"]]
            for r in rows[1:]:
                r[2] = cell_of(r[2])
            return ToolCall(call.name, {**call.arguments, "rows": rows}, call.note)
        return call
    return fn


async def test_due_diligence_accepts_a_subsidiary_qualified_by_its_parent():
    task = get_family("entity_due_diligence").generate(1)
    subs, target = task.data["subsidiaries"], task.data["target"]
    for qualify in (lambda e: f"{e} ({target} subsidiary)", lambda e: f"{e}, a subsidiary of {target}"):
        traj, _ = await grade(task, entity_cells(task, lambda e, q=qualify: q(e) if e in subs else e))
        assert_full_marks(traj)


async def test_due_diligence_still_fails_the_parent_or_a_sibling_for_a_subsidiary():
    task = get_family("entity_due_diligence").generate(1)
    subs, target = task.data["subsidiaries"], task.data["target"]
    sibling = {s: subs[(i + 1) % len(subs)] for i, s in enumerate(subs)}
    for wrong in (lambda e: f"{target} ({e})", lambda e: f"{e} ({sibling[e]})", lambda e: f"{sibling[e]} ({target})"):
        _, results = await grade(task, entity_cells(task, lambda e, w=wrong: w(e) if e in subs else e))
        assert not results["entities_right"].passed
