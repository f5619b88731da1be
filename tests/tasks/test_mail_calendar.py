"""The mail and calendar task families: solvable by their oracle, failed by the null policy,
every criterion able to fail, and deterministic in the seed."""

from functools import cache

import pytest

from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import NullPolicy, OraclePolicy
from longhorizon.tasks.registry import get_family

FAMILIES = ["invoice_followup", "team_one_on_ones", "meeting_requests"]
LONG = {"invoice_followup", "team_one_on_ones"}
SEEDS = [0, 1, 100000]
CATEGORIES = {"invoice_followup": "mail triage", "team_one_on_ones": "calendar scheduling",
              "meeting_requests": "meeting coordination"}


@cache
def task(family: str, seed: int):
    return get_family(family).generate(seed)


def perturbation_cases():
    return [(f, s, cid) for f in FAMILIES for s in SEEDS for cid in task(f, s).perturbations]


@pytest.mark.parametrize("family", FAMILIES)
def test_family_metadata(family):
    fam = get_family(family)
    assert fam.category == CATEGORIES[family]
    t = task(family, 100000)
    held = ("holdout-family",) * 2 if fam.holdout_family else ("train", "holdout")  # registry.HOLDOUT_FAMILIES
    assert (task(family, 0).split, t.split) == held
    assert t.id == f"{family}-100000"
    assert set(t.perturbations) == {c.id for c in t.criteria}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
async def test_oracle_passes_without_tool_errors(family, seed):
    traj = await play_task(task(family, seed), OraclePolicy())
    failed = [(r.id, r.note) for r in traj.grade.results if not r.passed]
    assert traj.passed and traj.reward == 1.0, failed
    assert [c.name for c in traj.tool_calls if c.is_error] == []
    if family in LONG:
        assert len(traj.tool_calls) >= 20


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
async def test_null_policy_fails(family, seed):
    traj = await play_task(task(family, seed), NullPolicy())
    assert not traj.passed and traj.reward < 0.5


@pytest.mark.parametrize(("family", "seed", "criterion"), perturbation_cases())
async def test_each_perturbation_fails_its_criterion(family, seed, criterion):
    traj = await play_task(task(family, seed), OraclePolicy(perturb=criterion))
    results = {r.id: r.passed for r in traj.grade.results}
    assert results[criterion] is False
    assert not traj.passed


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_task_and_world(family, seed, tmp_path):
    a, b = get_family(family).generate(seed), get_family(family).generate(seed)
    assert a.instruction == b.instruction
    assert World.build(tmp_path / "a", a.build).hash() == World.build(tmp_path / "b", b.build).hash()


@pytest.mark.parametrize("family", FAMILIES)
def test_seeds_give_different_tasks(family):
    assert task(family, 0).instruction != task(family, 1).instruction


# -- graders are tolerant where the request is ---------------------------------------------

def test_date_and_time_spellings_are_recognised():
    from datetime import date, datetime

    from longhorizon.tasks.common import mentions_code, mentions_date, mentions_time

    d = date(2026, 3, 13)
    for text in ["on 2026-03-13", "Friday, March 13", "13 March", "Mar. 13th", "13/03/2026", "3/13"]:
        assert mentions_date(text, d), text
    for text in ["March 3", "2026-03-14", "113/03", "$1,213.03"]:
        assert not mentions_date(text, d), text
    t = datetime(2026, 3, 13, 14, 0)
    for text in ["at 14:00", "14.00", "2pm", "2 p.m.", "2:00 PM"]:
        assert mentions_time(text, t), text
    for text in ["at 4:00", "2am", "12:00", "114:00"]:
        assert not mentions_time(text, t), text
    assert mentions_code("ref inv 20411, thanks", "INV-20411") and not mentions_code("INV-2041", "INV-20411")


async def test_invoice_grader_accepts_other_valid_wording():
    """Another spelling of the date, the number and the folder name still earns full marks."""
    from dataclasses import replace

    from longhorizon.core.task import ToolCall

    t = task("invoice_followup", 1)
    pay = t.data["pay_date"]
    dd, mm = pay[8:10], pay[5:7]

    def alt():
        yield ToolCall("mail__create_folder", {"name": "invoices/processed"})
        for inv in t.data["overdue"]:
            number = inv["number"].lower().replace("-", " ")
            yield ToolCall("mail__reply", {"message_id": inv["id"], "body": f"Sorry! {number} will be paid {dd}/{mm}."})
            yield ToolCall("mail__move_message", {"message_id": inv["id"], "folder": "Invoices/Processed"})
        return "done"

    traj = await play_task(replace(t, oracle=alt), OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]


async def test_one_on_one_grader_accepts_title_spacing_and_named_addresses():
    from dataclasses import replace

    from longhorizon.core.task import ToolCall

    t = task("team_one_on_ones", 0)

    def alt():
        for email, (start, end) in t.data["plan"].items():
            title = "  ".join(t.data["titles"][email].upper().split())
            yield ToolCall("calendar__create_event", {"title": title, "start": start, "end": end,
                                                      "attendees": [f"Someone <{email.upper()}>"]})
        return "done"

    traj = await play_task(replace(t, oracle=alt), OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]


# -- junk earns nothing -----------------------------------------------------------------------

async def test_replying_to_every_meeting_request_is_no_decline():
    """A reply to every request (none booked) declines them all: the Focus-time decline does not pay."""
    from dataclasses import replace

    from longhorizon.core.task import ToolCall

    t = task("meeting_requests", 1)

    def reply_to_all():
        for r in t.data["requests"]:
            yield ToolCall("mail__reply", {"message_id": r["mail_id"],
                                           "body": "Sorry, that time doesn't work; could you suggest another?"})
        return "done"

    traj = await play_task(replace(t, oracle=reply_to_all), OraclePolicy())
    got = {r.id: r for r in traj.grade.results}
    assert not got["conflict_declined"].passed and traj.grade.reward == 0.0


async def test_one_on_one_details_pay_only_with_one_meeting_each():
    """Right times and titles, but one member booked twice: the 1:1s' properties earn nothing."""
    from dataclasses import replace

    from longhorizon.core.task import ToolCall

    t = task("team_one_on_ones", 0)
    plan = t.data["plan"]

    def twice():
        for n, (email, (start, end)) in enumerate(plan.items()):
            for _ in range(2 if n == 0 else 1):
                yield ToolCall("calendar__create_event", {"title": t.data["titles"][email], "start": start,
                                                          "end": end, "attendees": [email]})
        return "done"

    traj = await play_task(replace(t, oracle=twice), OraclePolicy())
    got = {r.id: r.passed for r in traj.grade.results}
    assert got["timing"] and got["titles"] and not got["one_each"]
    assert traj.grade.reward == 0.0



def test_holiday_reschedule_draws_its_trap_mix_per_seed():
    """The provisional closure mail, the team member out per mail and the Friday rule in force
    now or only from the week after are drawn per seed; the instruction names none of them."""
    from longhorizon.tasks.diversity import trap_set

    tasks = [get_family("holiday_week_reschedule").generate(seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("provisional", "ooo", "friday_cutoff", "friday_rule_later"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:
        assert bool(t.data["friday_cutoff"]) != bool(t.data["friday_rule_later"])
        assert "provisional" not in t.instruction


def _friday(iso: str) -> bool:
    from datetime import date

    return date.fromisoformat(iso[:10]).weekday() == 4


@pytest.mark.parametrize("variant", ["friday_cutoff", "friday_rule_later"])
async def test_holiday_reschedule_friday_rule_either_way(variant):
    """With the rule in force no moved meeting runs past noon on the Friday; with it only from the
    week after, one closure meeting keeps a Friday afternoon; the oracle passes either way and
    the misplacing perturbation fails new_slots."""
    fam = get_family("holiday_week_reschedule")
    t = next(t for t in (fam.generate(s) for s in range(40))
             if t.data[variant] and any(_friday(d) for d in t.data["closure"]))
    fri_pm = [s for s, e in t.data["plan"].values() if _friday(s) and e[11:16] > "12:00"]
    assert bool(fri_pm) == (variant == "friday_rule_later")
    traj = await play_task(t, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    traj = await play_task(t, OraclePolicy(perturb="new_slots"))
    assert "new_slots" in {r.id for r in traj.grade.results if not r.passed}


async def test_holiday_reschedule_without_someone_out_reads_the_other_mails():
    """An instance with no one out has no out-of-office mail to read; mails_read asks for the
    confirmed and Friday mails, and its perturbation still fails it."""
    t = next(t for t in (get_family("holiday_week_reschedule").generate(s) for s in range(20)) if not t.data["ooo"])
    traj = await play_task(t, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    traj = await play_task(t, OraclePolicy(perturb="mails_read"))
    assert "mails_read" in {r.id for r in traj.grade.results if not r.passed}


def test_meeting_requests_draw_their_trap_mix_per_seed():
    """The request on Focus time, the request with no time and the fixed time its sender moves by
    a later mail are each there or not (at least one of the first two); a criterion only for what
    is there, and level 1 keeps the Focus-time request alone."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("meeting_requests")
    tasks = [fam.generate(seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("conflict", "vague", "moved"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:
        ids = {c.id for c in t.criteria}
        assert t.data["conflict"] or t.data["vague"]
        assert ("conflict_declined" in ids) == bool(t.data["conflict"])
        assert ("vague_asked" in ids) == bool(t.data["vague"])
    for seed in range(10):
        low = fam.generate(seed, 1)
        assert low.data["conflict"] and not low.data["vague"] and not low.data["moved"]


async def test_meeting_requests_vague_request_gets_a_question_not_a_booking():
    """The oracle asks the sender of the request with no time when suits them; dropping that reply,
    or replying to every request without booking, fails vague_asked."""
    from dataclasses import replace

    from longhorizon.core.task import ToolCall

    t = next(t for t in (get_family("meeting_requests").generate(s) for s in range(20)) if t.data["vague"])
    traj = await play_task(t, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    traj = await play_task(t, OraclePolicy(perturb="vague_asked"))
    assert "vague_asked" in {r.id for r in traj.grade.results if not r.passed}

    def reply_to_all():
        for r in t.data["requests"]:
            yield ToolCall("mail__reply", {"message_id": r["mail_id"], "body": "When would suit you?"})
        return "done"

    traj = await play_task(replace(t, oracle=reply_to_all), OraclePolicy())
    assert not {r.id: r.passed for r in traj.grade.results}["vague_asked"]


async def test_meeting_requests_moved_time_is_booked_at_the_later_mails_time():
    """A sender who moves their fixed time by a later mail is booked at the new time; the oracle
    passes, and booking the first mail's time fails events_booked."""
    from dataclasses import replace
    from datetime import date, timedelta

    from longhorizon.tasks.calendar.slots import at, iso
    from longhorizon.tasks.kit import perturb

    t = next(t for t in (get_family("meeting_requests").generate(s) for s in range(20)) if t.data["moved"])
    topic, first, new = t.data["moved"]
    r = next(r for r in t.data["requests"] if r["topic"] == topic)
    assert r["start"] == new and r["slot"][0][11:16] == new
    traj = await play_task(t, OraclePolicy())
    assert traj.passed, [(x.id, x.note) for x in traj.grade.results if not x.passed]

    def at_first(args: dict) -> dict:
        s = at(date.fromisoformat(r["day"]), first)
        return {**args, "start": iso(s), "end": iso(s + timedelta(minutes=r["minutes"]))}

    stale = perturb.change(t.oracle, perturb.on("calendar__create_event", where=lambda a: a["start"] == r["slot"][0]),
                           edit=at_first)
    traj = await play_task(replace(t, oracle=stale), OraclePolicy())
    assert not {x.id: x.passed for x in traj.grade.results}["events_booked"]


async def test_one_on_ones_draw_their_trap_mix_per_seed():
    """The day kept free, the first-name look-alikes, the cancelled sync and the declined
    invitation are each there or not; blocked_day and the instruction's rule only where a day is
    kept free, and the oracle passes without one."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("team_one_on_ones")
    tasks = [fam.generate(seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("blocked", "first_name_lookalikes", "cancelled_sync", "declined_invite"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:
        assert ("blocked_day" in {c.id for c in t.criteria}) == bool(t.data["blocked"])
        assert ("planning" in t.instruction) == bool(t.data["blocked"])
    free = next(t for t in tasks if not t.data["blocked"])
    traj = await play_task(free, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    low = next(t for t in (fam.generate(s, 1) for s in range(20)) if not t.data["blocked"])
    traj = await play_task(low, OraclePolicy())
    assert traj.passed and 2 <= len(traj.tool_calls) <= 8


# -- invoice_followup draws its traps per seed ----------------------------------------------------

async def test_invoice_traps_vary_and_the_paid_one_is_graded_only_when_there():
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("invoice_followup")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("vendor_with_both", "due_today", "paid_since"):  # each trap there in some seeds, not in others
        assert 0 < sum(bool(t.data[key]) for t in tasks) < 20, key
    assert all(t.data["vendor_with_both"] or t.data["due_today"] or t.data["paid_since"] for t in tasks)
    with_paid = next(t for t in tasks if t.data["paid_since"])
    without = next(t for t in tasks if not t.data["paid_since"])
    assert "paid_left_alone" not in {c.id for c in without.criteria}
    assert "paid_left_alone" in {c.id for c in with_paid.criteria}
    paid = with_paid.data["paid_since"][0]["id"]
    assert paid not in {inv["id"] for inv in with_paid.data["overdue"]}
    traj = await play_task(with_paid, OraclePolicy())
    assert traj.passed and traj.reward == 1.0
    assert paid not in {c.arguments.get("message_id") for c in traj.tool_calls if c.name != "mail__read_message"}
    traj = await play_task(with_paid, OraclePolicy(perturb="paid_left_alone"))
    assert {r.id: r.passed for r in traj.grade.results}["paid_left_alone"] is False
