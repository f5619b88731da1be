"""Graders are fair to correct work done another way (issue 25), the positive counterpart of
tests/tasks/test_suite.py's perturbations: for every family, its oracle played with edits a
careful person would call equally correct still scores 1.0 and passes.

The edits know no family (``EDITS``). Which tools only read comes from the tools' MCP
annotations (``readOnlyHint``), as the apps declare them. Free text is what the agent says to
people (mails, chat posts, ticket comments, its final message) and the reports and documents it
writes; data files (JSON, CSV) keep their data and change their layout. One play per family and
seed applies every edit at once (each is harmless alone, so they are harmless together); a
family that fails names the criteria that broke. An edit that is not equally correct under one
family's instruction is dropped for that family in ``EXEMPT``, with the reason. The edits are
unit-tested, and shown in one family's trajectory, so that none silently stops doing anything.
"""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from longhorizon.apps import build_app
from longhorizon.core.task import HOLDOUT_SEED_BASE, ToolCall
from longhorizon.core.tool_kinds import call_key
from longhorizon.core.world import WorldCache
from longhorizon.env.episode import SEP, Episode, play
from longhorizon.policies.scripted import OraclePolicy, rewritten_oracle
from longhorizon.tasks.registry import families

FAMILIES = [f.name for f in families()]
SEEDS = [0, HOLDOUT_SEED_BASE]

EDITS = {
    "look_first": "a read-only tool that needs no argument (list a folder, the channels, ...) called before anything else",
    "reads_reordered": "the reads done before the first write, those that need no earlier result in reverse order",
    "reads_repeated": "every read-only call made twice in a row (a careful re-check)",
    "look_last": "the same look-around read called again after the last call, before the final message",
    "note_appended": "a closing note appended to every mail, chat post and ticket comment, and to the final message",
    "paragraphs_reordered": "the middle paragraphs of a message of four or more in reverse order",
    "bullets_numbered": "'- ' bullet lines in messages written as a numbered list (seed 0)",
    "bullets_as_table": "runs of '- name: detail' bullet lines in messages written as a markdown table (holdout seed)",
    "amounts_plain": "money in messages without thousands separators or '.00' ($1,200.00 -> $1200)",
    "dates_other_format": "dates in messages said another way (2026-03-14 <-> 14 March 2026; 'Friday, March 13, "
                          "2026' -> 'Friday 2026-03-13')",
    "times_12h": "clock times in messages on the 12-hour clock (14:30 -> 2:30 pm)",
    "labels_bold": "the labels of '- label: detail' bullet lines in messages in bold markdown",
    "reports_reworded": "markdown and text files written with the message edits above (all but the note)",
    "documents_reformatted": "money and dates in document paragraphs and slides said the other way (as in messages)",
    "addresses_recased": "mail recipients, attendees and free/busy addresses with a capital first letter "
                         "(Ana.lopez@corp.com: addresses are read case-blind), mail recipients with a display "
                         "name (Ana Lopez <Ana.lopez@corp.com>)",
    "files_reformatted": "JSON files written indented, CSV files with every field quoted and CRLF line ends",
}

EXEMPT: dict[str, dict[str, str]] = {
    # family -> {edit: why it is not equally correct for that family's instruction}
    "access_log_incident_timeline": {"times_12h": "the ticket asks for start, end and peak as HH:MM UTC"},
}

BY_SEED = {0: {"bullets_as_table": "the other bullet edit, at the holdout seed"},
           HOLDOUT_SEED_BASE: {"bullets_numbered": "the other bullet edit, at seed 0"}}
"""Edits that exclude each other, one per seed."""

NOTE = "Let me know if anything else is needed."
MESSAGE_TEXT = {"mail__send_message": "body", "mail__reply": "body", "mail__forward": "body",
                "chat__post_message": "text", "tickets__add_comment": "body"}
"""The tools that say something to people, and the argument holding what they say."""

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
WEEKDAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"


# -- the text edits --------------------------------------------------------------------------

def append_note(text: str) -> str:
    return f"{text.rstrip()}\n\n{NOTE}"


def number_bullets(text: str) -> str:
    """'- a\\n- b' -> '1. a\\n2. b' (each run of bullets counted from 1)."""
    out, n = [], 0
    for line in text.split("\n"):
        n = n + 1 if line.startswith("- ") else 0
        out.append(f"{n}. {line[2:]}" if n else line)
    return "\n".join(out)


def bullets_as_table(text: str) -> str:
    """Each run of two or more '- name: detail' bullet lines as a markdown table."""
    out, run = [], []
    for line in text.split("\n") + [None]:
        if line is not None and line.startswith("- "):
            run.append(line[2:])
            continue
        if len(run) >= 2:
            out += ["| Item | Detail |", "|---|---|"]
            out += ["| " + " | ".join((item.split(": ", 1) + [""])[:2]).replace("\n", " ") + " |" for item in run]
        else:
            out += [f"- {item}" for item in run]
        run = []
        if line is not None:
            out.append(line)
    return "\n".join(out)


def plain_amounts(text: str) -> str:
    """'$5,936.52' -> '$5936.52', '$25.00' -> '$25'."""
    text = re.sub(r"\$(\d{1,3}(?:,\d{3})+)", lambda m: "$" + m.group(1).replace(",", ""), text)
    return re.sub(r"\$(\d+)\.00(?!\d)", r"$\1", text)


def other_dates(text: str) -> str:
    """ISO dates said as '14 March 2026'; 'Friday, March 13, 2026' said as 'Friday 2026-03-13'."""
    def iso(m):
        return f"{int(m.group(3))} {MONTHS[int(m.group(2)) - 1]} {m.group(1)}"

    def long(m):
        day = f"{m.group(4)}-{MONTHS.index(m.group(2)) + 1:02d}-{int(m.group(3)):02d}"
        return f"{m.group(1)} {day}" if m.group(1) else day
    text2 = re.sub(r"(?<![\w-])(\d{4})-(\d{2})-(\d{2})(?![\w:-])", iso, text)
    return re.sub(rf"(?:({WEEKDAY}),? )?({'|'.join(MONTHS)}) (\d{{1,2}}), (\d{{4}})", long, text2) \
        if text2 == text else text2


def reorder_paragraphs(text: str) -> str:
    """The paragraphs between the first (the greeting) and the last, in reverse order."""
    paras = text.split("\n\n")
    return "\n\n".join([paras[0], *paras[1:-1][::-1], paras[-1]]) if len(paras) >= 4 else text


def twelve_hour(text: str) -> str:
    """'14:30' -> '2:30 pm', '09:05' -> '9:05 am' (not inside an ISO timestamp or HH:MM:SS)."""
    def say(m):
        h = int(m.group(1))
        return f"{h % 12 or 12}:{m.group(2)} {'am' if h < 12 else 'pm'}"
    return re.sub(r"(?<![\d:T])([01]\d|2[0-3]):([0-5]\d)(?![\d:])", say, text)


def bold_labels(text: str) -> str:
    return re.sub(r"(?m)^- ([^:\n*|]+):", r"- **\1**:", text)


TEXT_EDITS = {"paragraphs_reordered": reorder_paragraphs, "labels_bold": bold_labels,
              "bullets_numbered": number_bullets, "bullets_as_table": bullets_as_table,
              "amounts_plain": plain_amounts, "dates_other_format": other_dates, "times_12h": twelve_hour,
              "note_appended": append_note}
DOCUMENT_TEXT = {"docs__append_paragraph": "text", "docs__insert_paragraph": "text", "docs__set_paragraph": "text",
                 "docs__replace_text": "new", "slides__add_slide": "title"}
"""Document and slide tools, and the argument holding their text (slides' bullets too)."""
ADDRESS_KEYS = ("to", "cc", "attendees", "emails", "attendee")


def recase_addresses(call: ToolCall) -> ToolCall:
    def up(v):
        if isinstance(v, list):
            return [up(x) for x in v]
        if not isinstance(v, str) or "@" not in v or "<" in v:
            return v
        if not call.name.startswith("mail__"):
            return v[0].upper() + v[1:]
        name = " ".join(part.capitalize() for part in re.split(r"[._]", v.split("@")[0]) if part)
        return f"{name} <{v[0].upper() + v[1:]}>"
    args = {k: up(v) if k in ADDRESS_KEYS else v for k, v in call.arguments.items()}
    return ToolCall(call.name, args, call.note) if args != call.arguments else call


def redo_document(call: ToolCall) -> ToolCall:
    """Money and dates in a document paragraph or slide said the other way."""
    def edit(v):
        return other_dates(plain_amounts(v)) if isinstance(v, str) else v
    key = DOCUMENT_TEXT.get(call.name)
    if not key:
        return call
    args = {**call.arguments, key: edit(call.arguments.get(key))}
    if call.name == "slides__add_slide" and isinstance(args.get("bullets"), list):
        args["bullets"] = [edit(b) for b in args["bullets"]]
    return ToolCall(call.name, args, call.note)


def reformat_file(call: ToolCall, skip=()) -> ToolCall:
    """A file the call writes, the same content laid out another way: JSON indented, CSV fully
    quoted with CRLF line ends, markdown and text with the message edits not in ``skip``."""
    path, content = call.arguments.get("path", ""), call.arguments.get("content")
    if call.name != "files__write_file" or not isinstance(content, str):
        return call
    if path.endswith(".json") and "files_reformatted" not in skip:
        content = json.dumps(json.loads(content), indent=4) + "\n"
    elif path.endswith(".csv") and "files_reformatted" not in skip:
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\r\n").writerows(csv.reader(io.StringIO(content)))
        content = out.getvalue()
    elif path.endswith((".md", ".txt")) and "reports_reworded" not in skip:
        for name, edit in TEXT_EDITS.items():
            if name not in skip and name != "note_appended":
                content = edit(content)
    return ToolCall(call.name, {**call.arguments, "content": content}, call.note)


def test_the_edits_change_what_they_say_they_change():
    assert append_note("Hi,\nDone.\n") == f"Hi,\nDone.\n\n{NOTE}"
    assert number_bullets("Items:\n- a\n- b\nok\n- c") == "Items:\n1. a\n2. b\nok\n1. c"
    assert plain_amounts("paid $5,936.52 of $12,000.00, $25.00 due; $1,234,567.10") \
        == "paid $5936.52 of $12000, $25 due; $1234567.10"
    assert other_dates("due 2026-08-13, at 2026-08-13T09:00, ticket 2026-08-13-x") \
        == "due 13 August 2026, at 2026-08-13T09:00, ticket 2026-08-13-x"
    assert reorder_paragraphs("Hi,\n\nA.\n\nB.\n\nThanks") == "Hi,\n\nB.\n\nA.\n\nThanks"
    assert bullets_as_table("Done:\n- a: 1\n- b (x): 2\nok\n- c") \
        == "Done:\n| Item | Detail |\n|---|---|\n| a | 1 |\n| b (x) | 2 |\nok\n- c"
    assert other_dates("on Friday, July 24, 2026 or March 3, 2026") == "on Friday 2026-07-24 or 2026-03-03"
    assert twelve_hour("at 14:30, 09:05 and 00:10; not 2026-08-13T09:00 nor 09:14:03") \
        == "at 2:30 pm, 9:05 am and 12:10 am; not 2026-08-13T09:00 nor 09:14:03"
    assert bold_labels("x\n- Billing: 4\n- a b: c: d") == "x\n- **Billing**: 4\n- **a b**: c: d"
    slide = redo_document(ToolCall("slides__add_slide", {"path": "d.pptx", "title": "Q3 2026-09-30",
                                                         "bullets": ["$1,200.00 spent"]}))
    assert slide.arguments == {"path": "d.pptx", "title": "Q3 30 September 2026", "bullets": ["$1200 spent"]}
    sent = recase_addresses(ToolCall("mail__send_message", {"to": ["ana@x.com"], "cc": ["Bo <bo@x.com>"], "body": "a@b"}))
    assert sent.arguments == {"to": ["Ana <Ana@x.com>"], "cc": ["Bo <bo@x.com>"], "body": "a@b"}
    invite = recase_addresses(ToolCall("calendar__create_event", {"attendees": ["ana.b@x.com"], "title": "a@b"}))
    assert invite.arguments == {"attendees": ["Ana.b@x.com"], "title": "a@b"}
    written = reformat_file(ToolCall("files__write_file", {"path": "o.csv", "content": "a,b\n1,2\n"}))
    assert written.arguments["content"] == '"a","b"\r\n"1","2"\r\n'
    written = reformat_file(ToolCall("files__write_file", {"path": "o.json", "content": '{"a":[1]}'}))
    assert json.loads(written.arguments["content"]) == {"a": [1]} and "\n    " in written.arguments["content"]


# -- playing the oracle with every edit ---------------------------------------------------------

async def read_only_tools(task, world) -> tuple[set[str], list[str]]:
    """(the exposed names of the task's read-only tools, those of them that need no argument),
    from the tools' MCP annotations."""
    reads, bare = set(), []
    for app in task.apps:
        session = build_app(app, world).session()
        try:
            for t in (await session.list_tools()).tools:
                if t.annotations.read_only_hint:
                    reads.add(f"{app}{SEP}{t.name}")
                    if not (t.input_schema or {}).get("required"):
                        bare.append(f"{app}{SEP}{t.name}")
        finally:
            session.close()
    return reads, bare


async def leading_reads(task, world, reads: set[str]) -> list[tuple[ToolCall, str]]:
    """The oracle's calls before its first write, with their results, played on ``world``."""
    done = []
    gen = task.oracle()
    async with Episode(task, world) as ep:
        try:
            call = next(gen)
            while call.name in reads:
                result, _, _ = await ep.call(call.name, call.arguments)
                done.append((call, result))
                call = gen.send(result)
        except StopIteration:
            pass
    return done


def reordered(leading: list[tuple[ToolCall, str]]) -> list[ToolCall]:
    """The leading reads in another order: those that name nothing an earlier result said, in
    reverse, then the others as they came (an agent cannot name what it has not yet read)."""
    free, after, seen = [], [], ""
    for call, result in leading:
        named = [str(v) for v in call.arguments.values()
                 if isinstance(v, (str, int)) and not isinstance(v, bool) and len(str(v)) >= 2]
        (after if any(v in seen for v in named) else free).append(call)
        seen += result
    return free[::-1] + after


def reads_first(task, early: list[ToolCall]):
    """``task`` whose oracle makes the reads ``early`` before anything else, and is later sent
    their results when it asks for the same reads (without calling them again)."""
    import dataclasses

    def run():
        known = {}
        for call in early:
            known[call_key(call.name, call.arguments)] = yield call
        gen = task.oracle()
        try:
            call = next(gen)
            while True:
                key = call_key(call.name, call.arguments)
                call = gen.send(known.pop(key) if key in known else (yield call))
        except StopIteration as stop:
            return stop.value

    return dataclasses.replace(task, oracle=run)


def reworked(task, reads: set[str], bare: list[str], leading: list[tuple[ToolCall, str]], skip):
    """``task`` whose oracle does its work with every edit not in ``skip``."""
    look = ToolCall(bare[0], {}, "Looking around first.") if bare else None
    if "reads_reordered" not in skip and len(leading) > 1:
        task = reads_first(task, reordered(leading))
    first = [True]

    def text(call: ToolCall) -> ToolCall:
        key = MESSAGE_TEXT.get(call.name)
        if not key or not isinstance(call.arguments.get(key), str):
            return call
        said = call.arguments[key]
        for name, edit in TEXT_EDITS.items():
            if name not in skip:
                said = edit(said)
        return ToolCall(call.name, {**call.arguments, key: said}, call.note)

    def fn(call: ToolCall) -> list[ToolCall]:
        calls = [look] if first[0] and look and "look_first" not in skip else []
        first[0] = False
        if "addresses_recased" not in skip:
            call = recase_addresses(call)
        call = reformat_file(call, skip)
        if "documents_reformatted" not in skip:
            call = redo_document(call)
        calls.append(text(call))
        if call.name in reads and "reads_repeated" not in skip:
            calls.append(ToolCall(call.name, call.arguments, "Checking that again."))
        return calls

    return rewritten_oracle(task, fn, tail=[look] if look and "look_last" not in skip else [],
                            final=append_note if "note_appended" not in skip else None)


@pytest.fixture(scope="module")
def cache():
    c = WorldCache()
    yield c
    c.close()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
async def test_the_oracle_done_another_equally_correct_way_still_passes(family, seed, cache):
    task = next(f for f in families() if f.name == family).generate(seed)
    skip = {**EXEMPT.get(family, {}), **BY_SEED[seed]}
    world, _ = cache.fork(task)
    try:
        reads, bare = await read_only_tools(task, world)
        leading = await leading_reads(task, world, reads)
    finally:
        cache.release(world)
    world, digest = cache.fork(task)
    try:
        traj = await play(reworked(task, reads, bare, leading, skip), OraclePolicy(), world, world_hash=digest)
    finally:
        cache.release(world)
    failed = [(r.id, r.note) for r in traj.grade.results if not r.passed]
    full_marks = traj.passed and traj.grade.reward == 1.0
    assert full_marks, f"failed {failed} with the edits {sorted(set(EDITS) - set(skip))}"
    assert not traj.grade.grader_errors(), traj.grade.grader_errors()
    assert not any(c.is_error for c in traj.tool_calls), [c.result for c in traj.tool_calls if c.is_error]


def test_every_exemption_names_a_family_an_edit_and_a_reason():
    for family, edits in EXEMPT.items():
        assert family in FAMILIES and edits, family
        assert all(e in EDITS and len(reason) > 20 for e, reason in edits.items()), family


async def test_the_reworked_oracle_makes_every_edit(cache):
    """On one family, each edit shows in the trajectory: else the suite-wide test could pass
    while an edit had quietly stopped applying."""
    task = next(f for f in families() if f.name == "shared_inbox_routing").generate(0)
    world, digest = cache.fork(task)
    reads, bare = await read_only_tools(task, world)
    leading = await leading_reads(task, world, reads)
    plain = await play(task, OraclePolicy(), world, world_hash=digest)
    world, digest = cache.fork(task)
    traj = await play(reworked(task, reads, bare, leading, {}), OraclePolicy(), world, world_hash=digest)
    names = [c.name for c in traj.tool_calls]
    assert names[0] == names[-1] == bare[0] != plain.tool_calls[0].name
    assert [c.name for c in plain.tool_calls[:len(leading)]] == [c.name for c, _ in leading]
    early = [call_key(c.name, c.arguments) for c in traj.tool_calls[1:1 + 2 * len(leading):2]]
    assert sorted(early) == sorted(call_key(c.name, c.arguments) for c, _ in leading)
    assert early != [call_key(c.name, c.arguments) for c, _ in leading]  # another order
    calls, i = traj.tool_calls[1:-1], 0
    while i < len(calls):
        if calls[i].name in reads:
            assert call_key(calls[i].name, calls[i].arguments) == call_key(calls[i + 1].name, calls[i + 1].arguments)
            i += 1
        i += 1
    said = [c.arguments[MESSAGE_TEXT[c.name]] for c in traj.tool_calls if c.name in MESSAGE_TEXT]
    assert said and all(s.endswith(NOTE) for s in said) and traj.final_answer.endswith(NOTE)
