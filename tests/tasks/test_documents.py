"""The document and slide-deck families: registered in their categories, solved by their oracle
without tool errors, failed by the null policy, every criterion able to fail on a holdout seed,
and graders tolerant where the request is (dates, amounts, rephrasing)."""

import datetime as dt
import functools

import pytest

from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import NullPolicy, OraclePolicy
from longhorizon.tasks.documents import find_dates, find_numbers, strip_dates
from longhorizon.tasks.documents.policy_faq import answer_ok
from longhorizon.tasks.documents.status_report import bullet_items, due_date, similar, statuses_in
from longhorizon.tasks.registry import get_family
from longhorizon.tasks.slides.quarterly_review import close_money

FAMILIES = {
    "project_status_report": "document drafting",
    "new_joiner_faq": "document drafting",
    "contract_checklist_review": "document review",
    "quarterly_review_deck": "slide decks",
}
MIN_CALLS = {"project_status_report": 25, "new_joiner_faq": 25, "contract_checklist_review": 40,
             "quarterly_review_deck": 38}
SEEDS = (0, 1, 100_000)


@functools.cache
def task(name: str, seed: int):
    return get_family(name).generate(seed)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_is_registered_in_its_category(name):
    fam = get_family(name)
    assert fam.category == FAMILIES[name]
    t = task(name, 100_000)
    held = ("holdout-family",) * 2 if fam.holdout_family else ("train", "holdout")  # registry.HOLDOUT_FAMILIES
    assert (task(name, 0).split, t.split) == held
    assert set(t.perturbations) == {c.id for c in t.criteria}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", FAMILIES)
async def test_oracle_solves_with_a_long_horizon(name, seed):
    traj = await play_task(task(name, seed), OraclePolicy())
    assert [c.result for c in traj.tool_calls if c.is_error] == []
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    assert len(traj.tool_calls) >= MIN_CALLS[name]


@pytest.mark.parametrize("name", FAMILIES)
async def test_null_policy_scores_zero(name):
    traj = await play_task(task(name, 1), NullPolicy())
    assert not traj.passed and traj.grade.reward == 0.0


@pytest.mark.parametrize("name,criterion", [(n, c.id) for n in FAMILIES for c in task(n, 100_000).criteria])
async def test_each_criterion_fails_on_its_perturbation(name, criterion):
    traj = await play_task(task(name, 100_000), OraclePolicy(perturb=criterion))
    assert [c.result for c in traj.tool_calls if c.is_error] == []
    assert {r.id: r.passed for r in traj.grade.results}[criterion] is False


def test_dates_are_read_in_the_usual_spellings():
    want = dt.date(2026, 4, 18)
    for text in ["due 2026-04-18", "due 18 April 2026", "due April 18, 2026", "due 18th Apr", "due Apr. 18"]:
        assert find_dates(text, 2026) == [want], text
    assert find_dates("no date here, 12 items", 2026) == []
    assert find_numbers(strip_dates("From 1 April 2026 the allowance is $500")) == [500]


def test_amounts_tolerate_format_and_rounding():
    assert find_numbers("$1,234,567 (104% of target)")[0] == 1_234_567
    assert close_money(find_numbers("$1.23M")[0], 1_234_567)
    assert not close_money(find_numbers("$1.2M")[0], 1_234_567)
    assert close_money(find_numbers("850k")[0], 850_210)


def test_faq_answers_may_mention_the_old_value_after_the_new_one():
    assert answer_ok("Yes: $500, up from $400 last year.", 500, [400])[0]
    assert not answer_ok("It was $400; it is now $500.", 500, [400])[0]
    assert not answer_ok("Yes, $400.", 500, [400])[0]
    assert answer_ok("From 1 April 2026 it is 3 days a week.", 3, [1, 2026])[0]


def test_rephrased_items_still_match_but_other_items_do_not():
    assert similar("Maria will update the RAID log", "Maria to update the RAID log")
    assert not similar("Maria to book the steering committee slot", "Maria to update the RAID log")
    blocks = [{"type": "paragraph", "style": "List Bullet", "text": "A"},
              {"type": "paragraph", "style": "Normal", "text": "- B"},
              {"type": "paragraph", "style": "Normal", "text": "C"}]
    assert bullet_items(blocks) == ["A", "B"]


def test_milestone_bullets_are_read_in_any_reasonable_spelling():
    assert statuses_in("Data migration \u2014 At-risk \u2014 due 2026-04-18") == {"at risk"}
    assert statuses_in("Go-live: Completed on 3 March") == {"complete"}
    assert due_date("Go-live (updated 2026-03-02), due 18 Apr 2026", 2026) == dt.date(2026, 4, 18)
    assert due_date("Go-live - On track - 2026-05-01", 2026) == dt.date(2026, 5, 1)


# -- junk earns nothing ---------------------------------------------------------------------------

def then(t, extra):
    """``t`` whose oracle, once done, also runs ``extra()`` (a generator of calls, like an oracle)."""
    from dataclasses import replace

    def script():
        summary = yield from t.oracle()
        yield from extra()
        return summary
    return replace(t, oracle=script)


async def test_a_review_comment_on_every_paragraph_is_not_the_governing_law_comment():
    import json

    from longhorizon.core.task import ToolCall

    t = task("contract_checklist_review", 1)
    v2 = t.data["v2"]

    def comment_everywhere():
        doc = json.loads((yield ToolCall("docs__read_document", {"path": v2})))
        for b in doc["blocks"]:
            if b.get("type", "paragraph") == "paragraph" and b.get("text", "").strip():
                yield ToolCall("docs__add_comment", {"path": v2, "index": b["index"], "text": "Please check."})

    traj = await play_task(then(t, comment_everywhere), OraclePolicy())
    assert {r.id: r.passed for r in traj.grade.results}["governing_law_comment"] is False


async def test_a_copy_of_last_weeks_report_earns_nothing():
    from dataclasses import replace

    from longhorizon.core.task import ToolCall

    t = task("project_status_report", 1)

    def copy_last_week():
        yield ToolCall("files__copy", {"src": t.data["last_report"], "dst": t.data["report"]})
        return "done"

    traj = await play_task(replace(t, oracle=copy_last_week), OraclePolicy())
    met = {r.id for r in traj.grade.results if r.passed and not r.guard}
    assert "headings_in_order" in met and traj.grade.reward == 0.0


async def test_postmortem_deck_draws_its_conflicts_per_seed(tmp_path):
    """The incident's conflicts vary over seeds (at least 3 trap sets); an incident without the
    corrected recovery time has no correction in its channel and no criterion text about it, one
    with it has both, and the oracle earns 1.0 on both."""
    from longhorizon.apps.chat import state as chat
    from longhorizon.core.world import World
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("incident_postmortem_deck")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("stale", "prelim", "theory", "former_ic"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    with_fix = next(t for t in tasks if t.data["stale"] and not t.data["former_ic"])
    without = next(t for t in tasks if not t.data["stale"] and t.data["former_ic"])
    for t, has in ((with_fix, True), (without, False)):
        timeline = next(c for c in t.criteria if c.id == "timeline")
        assert ("corrected" in timeline.description) == has
        world = World.build(tmp_path / str(t.seed), t.build)
        texts = [m["text"] for m in chat.messages(world, t.data["chan"])]
        assert any(x.startswith("Correction for the timeline") for x in texts) == has
        assert any("Handing incident commander over" in x for x in texts) == (not has)
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [(r.id, r.note) for r in traj.grade.results if not r.passed]


async def test_contract_review_draws_its_traps_per_seed():
    """The affiliate, the rate card's old date and the contradicted cap item vary over seeds (at
    least 3 trap sets); a draft without the conflict keeps liability_cap and has no
    cap_conflict_flagged, one with it the other way round, and the oracle earns 1.0 on both."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("contract_checklist_review")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key, cid in (("affiliate", "affiliate_kept"), ("rate_card_old_date", "rate_card_kept"),
                     ("cap_conflict", "cap_conflict_flagged")):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
        for t in tasks:
            assert (cid in {c.id for c in t.criteria}) == bool(t.data[key]), (key, t.seed)
    for t in tasks:
        ids = {c.id for c in t.criteria}
        assert t.data["affiliate"] or t.data["rate_card_old_date"] or t.data["cap_conflict"]
        assert ("liability_cap" in ids) != ("cap_conflict_flagged" in ids)
    assert all(fam.generate(s, 1).data["affiliate"] for s in range(5)), "level 1 keeps the affiliate"
    with_conflict = next(t for t in tasks if t.data["cap_conflict"] and not t.data["affiliate"])
    without = next(t for t in tasks if not t.data["cap_conflict"] and t.data["affiliate"])
    for t in (with_conflict, without):
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [(r.id, r.note) for r in traj.grade.results if not r.passed]
        comments = [c for c in traj.tool_calls if c.name == "docs__add_comment"]
        assert len(comments) == (2 if t.data["cap_conflict"] else 1)


async def test_policy_redline_draws_its_traps_per_seed(tmp_path):
    """The taxi limit sharing the old meal figure, the travel desk sharing the old owner's surname
    and a later mail correcting one figure vary over seeds (at least 3 trap sets); the correction
    mail is in the inbox only where one is drawn, the oracle reads it and earns 1.0, and the
    figure as first mistyped fails figures_updated."""
    from longhorizon.apps.mail import state as mail
    from longhorizon.core.world import World
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("policy_document_redline")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("taxi_shares_meal", "desk_namesake", "corrected"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    assert all(t.data["taxi_shares_meal"] or t.data["desk_namesake"] or t.data["corrected"] for t in tasks)
    assert all(fam.generate(s, 1).data["taxi_shares_meal"] for s in range(5)), "level 1 keeps the taxi limit"
    with_fix = next(t for t in tasks if t.data["corrected"] == "hotel")
    without = next(t for t in tasks if not t.data["corrected"])
    for t in (with_fix, without):
        world = World.build(tmp_path / str(t.seed), t.build)
        subjects = [m["subject"] for m in mail.messages(world, "Inbox")]
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [(r.id, r.note) for r in traj.grade.results if not r.passed]
        reads = {c.arguments.get("message_id") for c in traj.tool_calls if c.name == "mail__read_message"}
        assert (t.data["correction_id"] in reads) == bool(t.data["corrected"])
        assert any(s.startswith("Re: Travel & expense policy") for s in subjects) == bool(t.data["corrected"])
    traj = await play_task(with_fix, OraclePolicy(perturb="figures_updated"))
    assert {r.id: r.passed for r in traj.grade.results}["figures_updated"] is False


async def test_status_report_draws_its_traps_per_seed(tmp_path):
    """The stale sync change, the closed risk and the reversed change vary over seeds (at least 3
    trap sets); the reversed milestone's notes carry the change and its reversal only where one is
    drawn, the oracle reports the reversed status and earns 1.0, and the tracker's status fails."""
    from longhorizon.core.task import ToolCall
    from longhorizon.core.world import World
    from longhorizon.policies.scripted import rewritten_oracle
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("project_status_report")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("stale_notes", "closed_risks", "reversed"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    assert all(t.data["stale_notes"] or t.data["closed_risks"] or t.data["reversed"] for t in tasks)
    with_rev = next(t for t in tasks if t.data["reversed"])
    without = next(t for t in tasks if not t.data["reversed"])
    for t in (with_rev, without):
        world = World.build(tmp_path / str(t.seed), t.build)
        notes = "\n".join(world.file(p).read_text() for p in t.data["notes"])
        assert (": back to " in notes) == bool(t.data["reversed"])
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    m = with_rev.data["reversed"]
    truth = with_rev.data["truth"][m]
    assert truth["tracker_status"] != truth["status"]

    right = f"{m} \u2014 {truth['status']} \u2014"
    wrong = f"{m} \u2014 {truth['tracker_status']} \u2014"

    def first_change(call):  # the change the later sync reverses, believed
        text = call.arguments.get("text", "")
        if text.startswith(right):
            return ToolCall(call.name, {**call.arguments, "text": text.replace(right, wrong)}, call.note)
        return call

    traj = await play_task(rewritten_oracle(with_rev, first_change), OraclePolicy())
    assert {r.id: r.passed for r in traj.grade.results}["milestone_status"] is False


async def test_faq_draws_its_traps_per_seed(tmp_path):
    """The archive, the draft, the old mail and the requester's follow-up vary over seeds (at least
    3 trap sets, at least one stale source each); the follow-up's question is in the inbox, graded
    by added_question and answered last by the oracle only where drawn, and leaving it out fails."""
    from longhorizon.apps.mail import state as mail
    from longhorizon.core.world import World
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("new_joiner_faq")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("archived_docs", "draft_doc", "old_note_id", "added_question"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    assert all(t.data["archived_docs"] or t.data["draft_doc"] or t.data["old_note_id"] for t in tasks)
    level1 = fam.generate(0, 1).data
    assert level1["archived_docs"] and level1["draft_doc"] and level1["old_note_id"] and not level1["added_question"]
    with_q = next(t for t in tasks if t.data["added_question"])
    without = next(t for t in tasks if not t.data["added_question"])
    for t, has in ((with_q, True), (without, False)):
        assert ("added_question" in {c.id for c in t.criteria}) == has
        world = World.build(tmp_path / str(t.seed), t.build)
        subjects = [m["subject"] for m in mail.messages(world, "Inbox")]
        assert ("Re: New joiner FAQ" in subjects) == has
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [(r.id, r.note) for r in traj.grade.results if not r.passed]
        if has:
            assert t.data["questions"][-1] == t.data["added_question"]
    traj = await play_task(with_q, OraclePolicy(perturb="added_question"))
    assert {r.id: r.passed for r in traj.grade.results}["added_question"] is False
