"""The family kit's criteria (tasks/kit): one function per guard idea, with its standard id."""

import os

import pytest

from longhorizon.apps.mail.state import create_mailbox
from longhorizon.core.trajectory import ToolCallRecord, Trajectory
from longhorizon.core.world import World
from longhorizon.tasks.common import Sources
from longhorizon.core.task import ToolCall
from longhorizon.tasks.kit import files, mail, perturb, process

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


# -- files --------------------------------------------------------------------------------------

SEEDED = {"data/ledger.csv": b"id,amount\n1,9.50\n", "notes/read me.txt": "caf\u00e9 notes\n"}
"""A World's files: bytes, and text the World holds as UTF-8."""


def seeded_world(tmp_path, name: str = "w") -> World:
    def build(root):
        for rel, data in SEEDED.items():
            p = root / "workspace" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return World.build(tmp_path / name, build)


def test_file_guards_have_their_standard_ids_kinds_and_overrides():
    made = [files.unchanged(SEEDED), files.not_written(SEEDED), files.untouched(SEEDED), files.only_created(SEEDED)]
    assert [(c.id, c.kind, c.guard) for c in made] == [
        ("sources_unchanged", "final_state", True), ("no_source_writes", "process", True),
        ("sources_untouched", "process", True), ("no_stray_files", "final_state", True)]
    c = files.only_created(SEEDED, allowed=["./out/r.xlsx"], id="only_report_created", weight=2.0)
    assert (c.id, c.weight, c.description) == ("only_report_created", 2.0, "no new files besides out/r.xlsx")


def test_file_guards_read_the_seeded_files_only_when_they_check(tmp_path):
    built = []
    sources = Sources(lambda: built.append(1) or {"data/ledger.csv": SEEDED["data/ledger.csv"]})
    c = files.unchanged(sources)
    assert not built  # generating a task builds no files
    assert met(c, seeded_world(tmp_path), traj()) and built == [1]


def test_unchanged_meets_an_untouched_world_and_fails_a_changed_or_missing_file(tmp_path):
    c = files.unchanged(SEEDED, {"data/ledger.csv": SEEDED["data/ledger.csv"]})  # several sources, overlapping
    assert met(c, seeded_world(tmp_path, "same"), traj())
    edited = seeded_world(tmp_path, "edited")
    edited.file("data/ledger.csv").write_bytes(b"id,amount\n1,9.51\n")
    assert not met(c, edited, traj())
    crlf = seeded_world(tmp_path, "crlf")  # the same text, other line ends: not the same file
    crlf.file("notes/read me.txt").write_bytes(b"caf\xc3\xa9 notes\r\n")
    assert not met(c, crlf, traj())
    gone = seeded_world(tmp_path, "gone")
    gone.file("notes/read me.txt").unlink()
    assert not met(c, gone, traj())


def test_unchanged_never_follows_a_link_to_an_identical_copy(tmp_path):
    c = files.unchanged(SEEDED)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "ledger.csv").write_bytes(SEEDED["data/ledger.csv"])
    linked_file = seeded_world(tmp_path, "file")
    linked_file.file("data/ledger.csv").unlink()
    linked_file.file("data/ledger.csv").symlink_to(outside / "ledger.csv")
    assert not met(c, linked_file, traj())
    linked_folder = seeded_world(tmp_path, "folder")  # the folder moved out, a link left in its place
    linked_folder.file("data").rename(tmp_path / "moved")
    linked_folder.file("data").symlink_to(tmp_path / "moved")
    assert (linked_folder.file("data/ledger.csv")).read_bytes() == SEEDED["data/ledger.csv"]
    assert not met(c, linked_folder, traj())


def test_not_written_fails_on_a_write_to_a_seeded_file_or_its_folder_even_of_the_same_bytes():
    c = files.not_written(SEEDED, ["extra/plan.md"])  # a plain list of paths counts too
    same = ("files__write_file", {"path": "./data/ledger.csv", "content": "id,amount\n1,9.50\n"})
    assert not met(c, None, traj(same))
    assert not met(c, None, traj(("files__move", {"src": "notes", "dst": "old"})))
    assert not met(c, None, traj(("files__write_file", {"path": "extra/plan.md", "content": "x"})))
    assert met(c, None, traj(("files__read_file", {"path": "data/ledger.csv"}),
                             ("files__write_file", {"path": "out/r.csv", "content": "x"}),
                             ("files__write_file", {"path": "data/ledger.csv", "content": "x"}, True)))


def test_untouched_needs_the_files_unchanged_and_unwritten(tmp_path):
    c = files.untouched(SEEDED)
    world = seeded_world(tmp_path, "a")
    assert met(c, world, traj(("files__read_file", {"path": "data/ledger.csv"})))
    assert not met(c, world, traj(("files__write_file", {"path": "data/ledger.csv", "content": "x"})))
    edited = seeded_world(tmp_path, "b")  # changed by a shell, which names no path
    edited.file("notes/read me.txt").write_text("changed\n")
    assert not met(c, edited, traj())


def test_only_created_allows_the_seeded_and_the_allowed_files_only(tmp_path):
    c = files.only_created(SEEDED, allowed=["out/r.csv"])
    world = seeded_world(tmp_path, "ok")
    world.file("out").mkdir()
    world.file("out/r.csv").write_text("x")
    world.file("empty").mkdir()  # a folder alone is no file
    assert met(c, world, traj())
    stray = seeded_world(tmp_path, "stray")
    (stray.file("out/deep")).mkdir(parents=True)
    stray.file("out/deep/draft.csv").write_text("x")
    assert not met(c, stray, traj())


def test_only_created_counts_links_and_odd_names_as_files(tmp_path):
    c = files.only_created(SEEDED)
    for k, make in enumerate([lambda w: w.file("to_file").symlink_to(w.file("data/ledger.csv")),
                              lambda w: w.file("to_folder").symlink_to(w.file("data")),
                              lambda w: w.file("dangling").symlink_to(tmp_path / "nowhere"),
                              lambda w: os.mkfifo(w.file("pipe"))]):
        world = seeded_world(tmp_path, f"w{k}")
        make(world)
        assert not met(c, world, traj())
    odd = seeded_world(tmp_path, "odd")
    open(os.path.join(bytes(odd.workspace), b"bad\xffname"), "wb").close()  # not UTF-8
    ok, note = c.check(odd, traj())
    assert not ok and "bad\ufffdname" in note


def test_only_created_counts_deletions_only_when_asked(tmp_path):
    world = seeded_world(tmp_path)
    world.file("data/ledger.csv").unlink()
    assert met(files.only_created(SEEDED), world, traj())
    assert not met(files.only_created(SEEDED, nothing_deleted=True), world, traj())
    assert met(files.only_created(SEEDED, nothing_deleted=True), seeded_world(tmp_path, "whole"), traj())


# -- perturbations as edits of the oracle's call stream ------------------------------------------

def _oracle():
    """A small interactive oracle: it reads a list, acts on every id it read, then verifies."""
    ids = (yield ToolCall("app__list", {})).split(",")
    seen = []
    for i in ids:
        seen.append((yield ToolCall("app__act", {"id": i, "text": "ok"})))
    yield ToolCall("app__verify", {})
    return f"acted on {ids}, saw {seen}"


def play(oracle) -> tuple[list[tuple[str, dict]], str]:
    """Drive an oracle as the scripted policy does: each call's result is 'a,b' for the list and
    'done NAME ID' otherwise; returns the calls made and the final message."""
    gen, made, result = oracle(), [], None
    try:
        call = gen.send(result)
        while True:
            made.append((call.name, dict(call.arguments)))
            result = "a,b" if call.name == "app__list" else f"done {call.name} {call.arguments.get('id', '')}"
            call = gen.send(result)
    except StopIteration as stop:
        return made, stop.value


def test_an_edited_oracle_makes_the_oracles_calls_with_one_edit_and_keeps_its_final_message():
    calls, message = play(_oracle)
    assert [c[0] for c in calls] == ["app__list", "app__act", "app__act", "app__verify"]

    dropped, msg = play(perturb.drop(_oracle, perturb.on("app__act", id="b")))
    assert dropped == calls[:2] + calls[3:]
    assert msg == "acted on ['a', 'b'], saw ['done app__act a', '']"  # a dropped call's result reads as ""

    repeated, msg = play(perturb.repeat(_oracle, perturb.on("app__act", id="a")))
    assert repeated == calls[:2] + calls[1:]
    assert msg == message

    changed, _ = play(perturb.change(_oracle, perturb.on("app__act", id="b"), text="wrong", id=None))
    assert changed[2] == ("app__act", {"text": "wrong"}) and changed[:2] == calls[:2] and changed[3:] == calls[3:]
    edited, _ = play(perturb.change(_oracle, perturb.on("app__act"), lambda a: {**a, "id": a["id"].upper()},
                                    count=None))
    assert [c[1]["id"] for c in edited[1:3]] == ["A", "B"]


def test_inserted_calls_go_where_asked_and_the_oracle_reads_only_its_own_results():
    extra = ToolCall("app__stray", {"id": "x"})
    calls, message = play(_oracle)
    before, msg = play(perturb.insert(_oracle, extra, before=perturb.on("app__verify")))
    assert before == calls[:3] + [("app__stray", {"id": "x"})] + calls[3:] and msg == message
    after, msg = play(perturb.insert(_oracle, extra, after=perturb.on("app__act", id="a")))
    assert after == calls[:2] + [("app__stray", {"id": "x"})] + calls[2:] and msg == message
    end, msg = play(perturb.insert(_oracle, extra))
    assert end == calls + [("app__stray", {"id": "x"})] and msg == message


def test_an_edit_whose_call_never_comes_is_a_family_bug_not_a_silent_oracle():
    for flawed in (perturb.drop(_oracle, perturb.on("app__act", id="zzz")),
                   perturb.change(_oracle, perturb.on("app__missing"), text="x"),
                   perturb.insert(_oracle, ToolCall("app__stray"), after=perturb.on("app__missing"))):
        with pytest.raises(LookupError, match="made no call"):
            play(flawed)


def test_where_skip_and_replace_single_out_calls_equality_and_the_first_match_cannot():
    calls, message = play(_oracle)
    # a predicate over the arguments: what equality cannot say (a set of ids, a substring)
    picked, _ = play(perturb.change(_oracle, perturb.on("app__act", where=lambda a: a["id"] in {"b", "c"}),
                                    text="wrong", count=None))
    assert [c[1]["text"] for c in picked[1:3]] == ["ok", "wrong"]
    # skip passes over earlier matches: the second act, not the first
    second, _ = play(perturb.drop(_oracle, perturb.on("app__act"), skip=1))
    assert second == calls[:2] + calls[3:]
    # replace plays other calls built from the matched one; the oracle reads its own call's result
    swapped, msg = play(perturb.replace(_oracle, perturb.on("app__act", id="a"),
                                        lambda c: ToolCall("app__undo", {"id": c.arguments["id"]})))
    assert swapped[1] == ("app__undo", {"id": "a"}) and swapped[2:] == calls[2:]
    assert msg == "acted on ['a', 'b'], saw ['done app__undo a', 'done app__act b']"
    kept, msg = play(perturb.replace(_oracle, perturb.on("app__act", id="b"),
                                     lambda c: [c, ToolCall("app__stray", {"id": "x"})]))
    assert kept == calls[:3] + [("app__stray", {"id": "x"})] + calls[3:] and msg == message
    # a skip past every match edits nothing: the family bug is reported, not a silent oracle
    with pytest.raises(LookupError, match="made no call"):
        play(perturb.drop(_oracle, perturb.on("app__act"), skip=2))
    with pytest.raises(ValueError):
        perturb.drop(_oracle, perturb.on("app__act"), skip=-1)


def test_a_dropped_read_can_hand_the_oracle_the_answer_it_would_have_assumed():
    calls, _ = play(_oracle)
    # the list is never read: the oracle acts on the ids it was handed instead
    assumed, msg = play(perturb.drop(_oracle, perturb.on("app__list"), answer="a,b,c"))
    assert [c[1].get("id") for c in assumed] == ["a", "b", "c", None]
    assert msg.startswith("acted on ['a', 'b', 'c']")
    second, msg = play(perturb.drop(_oracle, perturb.on("app__act"), skip=1,
                                    answer=lambda c: f"assumed {c.arguments['id']}"))
    assert second == calls[:2] + calls[3:] and msg.endswith("saw ['done app__act a', 'assumed b']")
    with pytest.raises(LookupError, match="made no call"):
        play(perturb.drop(_oracle, perturb.on("app__missing"), answer="x"))


def test_on_matches_any_of_several_tools_and_an_argument_called_name():
    either, _ = play(perturb.drop(_oracle, perturb.on(("app__verify", "app__missing")), count=None))
    assert [c[0] for c in either] == ["app__list", "app__act", "app__act"]
    match = perturb.on("sheets__add_sheet", name="Q3")
    assert match(ToolCall("sheets__add_sheet", {"name": "Q3"}))
    assert not match(ToolCall("sheets__add_sheet", {"name": "Q4"}))


def test_a_deferred_call_is_played_right_after_the_call_it_waits_for():
    calls, _ = play(_oracle)
    late, msg = play(perturb.defer(_oracle, perturb.on("app__act", id="a"), perturb.on("app__verify")))
    assert late == [calls[0], calls[2], calls[3], calls[1]]  # act a after the verify, not before it
    assert msg == "acted on ['a', 'b'], saw ['', 'done app__act b']"  # its result went nowhere
    fed, msg = play(perturb.defer(_oracle, perturb.on("app__act", id="a"), perturb.on("app__act", id="b"),
                                  answer="assumed"))
    assert fed == [calls[0], calls[2], calls[1], calls[3]] and "saw ['assumed', 'done app__act b']" in msg
    # the call it waits for must come after it: an earlier one does not count
    for flawed in (perturb.defer(_oracle, perturb.on("app__act", id="b"), perturb.on("app__list")),
                   perturb.defer(_oracle, perturb.on("app__missing"), perturb.on("app__verify"))):
        with pytest.raises(LookupError, match="made no call"):
            play(flawed)
