"""The family kit's criteria (tasks/kit): one function per guard idea, with its standard id."""

from longhorizon.apps.mail.state import create_mailbox
from longhorizon.core.trajectory import ToolCallRecord, Trajectory
from longhorizon.core.world import World
from longhorizon.tasks.kit import mail, process

ME, CUSTOMER, OUTSIDER = "desk@shop.example", "ana@mail.example", "bob@mail.example"


def traj(*calls) -> Trajectory:
    """Calls as (name, arguments) or (name, arguments, is_error)."""
    t = Trajectory(episode_id="t#0", task_id="t", family="f", category="c", split="train", seed=0, sample=0,
                   provenance={})
    t.tool_calls = [ToolCallRecord(turn=i, id=str(i), name=c[0], arguments=c[1], result="ok",
                                   is_error=c[2] if len(c) > 2 else False, duration_ms=0.0)
                    for i, c in enumerate(calls)]
    return t


def mailbox(tmp_path, *sent_to: str) -> World:
    """A World whose mailbox holds one seeded mail the owner sent to OUTSIDER, then one sent mail
    per address in ``sent_to`` (what an episode would have sent)."""
    msgs = [{"folder": "Sent", "sender": ME, "to": [to], "subject": "s", "body": "b",
             "date": f"2026-03-0{i + 1}T09:00:00"} for i, to in enumerate([OUTSIDER, *sent_to])]
    return World.build(tmp_path / "w", lambda root: create_mailbox(root / "state" / "mail.sqlite", ME, "Desk",
                                                                     messages=msgs))


def met(criterion, world, trajectory) -> bool:
    out = criterion.check(world, trajectory)
    return out[0] if isinstance(out, tuple) else out


def test_sends_only_is_a_guard_with_the_standard_id_unless_overridden():
    c = mail.sends_only([CUSTOMER], seeded=1)
    assert (c.id, c.kind, c.guard) == ("no_stray_mail", "process", True)
    assert mail.sends_only([CUSTOMER], seeded=1, id="mail_only_to_ap").id == "mail_only_to_ap"


def test_sends_only_reads_the_mail_the_episode_sent_not_what_the_world_began_with(tmp_path):
    c = mail.sends_only([CUSTOMER], seeded=1)
    assert met(c, mailbox(tmp_path / "a", CUSTOMER), traj())  # the seeded mail to OUTSIDER is not the episode's
    assert not met(c, mailbox(tmp_path / "b", CUSTOMER, OUTSIDER), traj())  # a reply shows only here


def test_sends_only_reads_every_sending_call_and_replies_only_when_allowed(tmp_path):
    world = mailbox(tmp_path)
    c = mail.sends_only([CUSTOMER], seeded=1)
    assert met(c, world, traj(("mail__send_message", {"to": [CUSTOMER.upper()], "subject": "s", "body": "b"})))
    assert not met(c, world, traj(("mail__send_message", {"to": [CUSTOMER], "cc": [OUTSIDER]})))
    assert not met(c, world, traj(("mail__forward", {"message_id": 1, "to": [f"Bob <{OUTSIDER}>"]})))
    assert met(c, world, traj(("mail__forward", {"message_id": 1, "to": [OUTSIDER]}, True)))  # refused: sent nothing
    reply = ("mail__reply", {"message_id": 1, "body": "b"})
    assert met(c, world, traj(reply))
    assert not met(mail.sends_only([CUSTOMER], seeded=1, replies=False), world, traj(reply))


def test_looked_up_before_needs_a_lookup_of_the_same_record_before_each_act():
    c = process.looked_up_before("store__record_payment", "store__get_order", "order_id", id="orders_checked",
                                 requires=("payments_recorded",))
    assert (c.id, c.kind, c.guard, c.requires) == ("orders_checked", "process", False, ("payments_recorded",))
    look, act = ("store__get_order", {"order_id": " so-1 "}), ("store__record_payment", {"order_id": "SO-1"})
    assert met(c, None, traj(look, act))
    assert not met(c, None, traj(act, look))  # looked only afterwards
    assert not met(c, None, traj(("store__get_order", {"order_id": "SO-2"}), act))  # another record
    assert not met(c, None, traj(("store__get_order", {"order_id": "SO-1"}, True), act))  # the lookup failed
    assert not met(c, None, traj(look))  # nothing acted on: nothing to credit


def test_read_back_needs_a_read_of_the_path_after_its_last_write():
    c = process.read_back("./out/report.xlsx", requires=("totals",))
    assert (c.id, c.kind, c.requires) == ("read_back", "process", ("totals",))
    write = ("sheets__write_cells", {"path": "out/report.xlsx", "sheet": "S", "cells": {}})
    read = ("sheets__read_range", {"path": "out/report.xlsx", "sheet": "S"})
    assert met(c, None, traj(write, read))
    assert not met(c, None, traj(write, read, write))  # written again after the read
    assert not met(c, None, traj(read, write))
    assert not met(c, None, traj(write, ("files__read_file", {"path": "out/other.xlsx"})))
    assert not met(c, None, traj(write, ("files__read_file", {"path": "out/report.xlsx"}, True)))
    assert not met(c, None, traj(read))  # never written
