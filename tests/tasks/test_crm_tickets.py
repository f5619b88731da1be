"""The CRM and ticket-tracker families: categories, long oracles without tool errors, and the
traps each world is built around (the graders must see them)."""

import dataclasses
import json
import re
from datetime import date
from functools import cache

import pytest

from longhorizon.apps.crm import state as crm
from longhorizon.apps.tickets import state as tix
from longhorizon.core.task import ToolCall
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy, rewritten_oracle
from longhorizon.tasks.registry import get_family

CATEGORIES = {"trade_show_leads": "CRM updates", "pipeline_hygiene": "CRM updates",
              "support_triage": "support tickets", "sprint_planning": "project tracking"}
SEEDS = [1, 100001]


@cache
def task(family: str, seed: int):
    return get_family(family).generate(seed)


@pytest.mark.parametrize("family", sorted(CATEGORIES))
def test_category_and_perturbation_per_criterion(family):
    assert get_family(family).category == CATEGORIES[family]
    t = task(family, 1)
    assert set(t.perturbations) == {c.id for c in t.criteria}
    assert any(c.guard for c in t.criteria) and not all(c.guard for c in t.criteria)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", sorted(CATEGORIES))
async def test_oracle_is_long_and_clean(family, seed):
    traj = await play_task(task(family, seed), OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    assert [c.name for c in traj.tool_calls if c.is_error] == []
    assert 25 <= len(traj.tool_calls) < 75, "long, but well inside the 80-turn episode limit"


def test_trade_show_world_holds_its_traps(tmp_path):
    t = next(task("trade_show_leads", s) for s in range(2, 20) if task("trade_show_leads", s).data["double_scan"])
    w = World.build(tmp_path / "w", t.build)
    scans = w.file(t.data["csv"]).read_text()
    assert t.data["dnc"] and all(e.lower() in scans.lower() for e in t.data["dnc"])
    assert len(scans.strip().splitlines()) - 1 == len(t.data["new"]) + len(t.data["updates"]) + len(t.data["dnc"]) + 1
    assert scans.lower().count(t.data["double_scan"].lower()) == 2, "a double scan"
    assert not [a for a in crm.accounts(w) if a["domain"] == t.data["new_account"]]
    for email in t.data["new"]:
        assert crm.contacts_by_email(w, email) == []


def test_pipeline_world_orders_are_corrected_once(tmp_path):
    t = task("pipeline_hygiene", 2)
    w = World.build(tmp_path / "w", t.build)
    assert set(t.data["overdue_order"]) <= set(t.data["orders"])
    deals = {d["id"]: d for d in crm.deals(w)}
    for did, (amount, _) in t.data["orders"].items():
        assert deals[did]["stage"] in crm.OPEN_STAGES and deals[did]["amount"] != amount


def test_support_queue_duplicates_point_at_open_tickets_of_the_same_customer(tmp_path):
    t = task("support_triage", 2)
    w = World.build(tmp_path / "w", t.build)
    for dup, orig in t.data["duplicates"].items():
        a, b = tix.ticket(w, dup), tix.ticket(w, orig)
        assert a["status"] == "New" and a["customer"] == b["customer"]
        assert b["status"] not in ("Resolved", "Closed") and b["number"] < a["number"]
    for key in t.data["lookalikes"]:
        assert key in t.data["regular"]


def test_sprint_plan_reuses_a_backlog_ticket(tmp_path):
    t = next(task("sprint_planning", seed) for seed in range(20) if task("sprint_planning", seed).data["reused"])
    w = World.build(tmp_path / "w", t.build)
    reused = tix.ticket(w, t.data["reused"])
    assert reused["sprint_id"] is None and reused["title"] in [i["title"] for i in t.data["items"]]


async def _junk_reward(t, script) -> tuple[float, set[str]]:
    """Reward and met criteria when ``script`` (a generator of ToolCalls) is played as the solution."""
    traj = await play_task(dataclasses.replace(t, oracle=script), OraclePolicy())
    return traj.grade.reward, {r.id for r in traj.grade.results if r.passed}


async def test_triage_pays_nothing_for_marking_the_whole_queue_triaged():
    """A bulk status flip (duplicates included) is no triage: Triaged pays only with the priorities."""
    t = task("support_triage", 1)

    def flip_all():
        queue = json.loads((yield ToolCall("tickets__search_tickets", {"project": "SUP", "status": "New",
                                                                        "limit": 50})))["tickets"]
        for x in queue:
            yield ToolCall("tickets__update_ticket", {"key": x["key"], "status": "Triaged"})
        return "done"

    reward, met = await _junk_reward(t, flip_all)
    assert "triaged" in met and reward == 0.0, met


async def test_sla_sweep_pays_nothing_for_raising_every_priority():
    """Stepping up every open ticket also steps up the ones that did not breach."""
    t = get_family("sla_breach_escalation").generate(1)
    up = {"P4": "P3", "P3": "P2", "P2": "P1", "P1": "P1"}

    def raise_all():
        found = json.loads((yield ToolCall("tickets__search_tickets", {"project": "SUP", "open_only": True,
                                                                        "limit": 100})))["tickets"]
        for x in found:
            yield ToolCall("tickets__update_ticket", {"key": x["key"], "priority": up[x["priority"]]})
        return "done"

    reward, met = await _junk_reward(t, raise_all)
    assert reward == 0.0 and "breached_priority" not in met, met


async def test_release_summary_naming_every_key_seen_fails():
    """A message listing every ticket key in the tracker is not the release summary."""
    t = get_family("release_readiness_review").generate(1)
    d = t.data

    def kitchen_sink():
        keys = re.findall(r'"key":\s*"([^"]+)"', (yield ToolCall("tickets__search_tickets", {"limit": 100})))
        text = f"{d['done']} Done. " + ", ".join(keys)
        yield ToolCall("chat__post_message", {"channel": "#release-" + d["release"].replace(".", "-"), "text": text})
        return "done"

    reward, met = await _junk_reward(t, kitchen_sink)
    assert "summary_posted" not in met and reward == 0.0, met


REPEAT_CUE = re.compile(r"reported this already|already raised this|repeat of an earlier|mentioned this to you before"
                        r"|\bagain\b|still getting", re.IGNORECASE)


def test_support_queue_repeat_cues_do_not_give_duplicates_away(tmp_path):
    """'A colleague may have reported this already' and '... again' appear on look-alikes and
    regular tickets too, and some duplicate goes without: only code, customer and status tell."""
    cued, cued_dups, quiet_dups = 0, 0, 0
    for seed in range(6):
        t = task("support_triage", seed)
        w = World.build(tmp_path / str(seed), t.build)
        for key in [*t.data["regular"], *t.data["duplicates"]]:
            x = tix.ticket(w, key)
            cue = bool(REPEAT_CUE.search(x["description"]))
            cued += cue
            cued_dups += cue and key in t.data["duplicates"]
            quiet_dups += not cue and key in t.data["duplicates"]
    assert quiet_dups > 0 and cued_dups <= cued / 2, (cued, cued_dups, quiet_dups)


def test_support_queue_draws_its_trap_mix_per_seed():
    """Look-alikes, twin customers, mailed-in tickets, a security report and a second open
    report of a duplicate's code are each there or not: instances differ in what must be noticed."""
    from longhorizon.tasks.diversity import trap_set

    tasks = [task("support_triage", seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("lookalike_other_customer", "lookalike_closed", "twin_customers", "no_component", "security",
                "second_open"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:  # a guard about look-alikes only where there are some
        assert ("no_false_duplicates" in {c.id for c in t.criteria}) == bool(t.data["lookalikes"])
        assert t.data["duplicates"] and "duplicates_closed" in {c.id for c in t.criteria}


async def test_support_queue_duplicate_goes_to_the_oldest_open_ticket(tmp_path):
    """Where the customer has two open tickets on the duplicate's code, linking to the later one fails."""
    t = next(task("support_triage", s) for s in range(20) if task("support_triage", s).data["second_open"]
             and not task("support_triage", s).data["lookalikes"])
    assert "no_false_duplicates" not in {c.id for c in t.criteria}
    traj = await play_task(t, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    w = World.build(tmp_path / "w", t.build)
    (dup, later), = t.data["second_open"].items()
    orig = t.data["duplicates"][dup]
    a, b = tix.ticket(w, orig), tix.ticket(w, later)
    assert a["customer"] == b["customer"] and a["number"] < b["number"] and b["status"] not in ("Resolved", "Closed")

    def to_the_later(call):
        if call.name == "tickets__link_tickets" and call.arguments["key"] == dup:
            return ToolCall(call.name, {**call.arguments, "other": later}, call.note)
        return call

    traj = await play_task(rewritten_oracle(t, to_the_later), OraclePolicy())
    assert "duplicates_closed" in {r.id for r in traj.grade.results if not r.passed}


def test_sla_sweep_draws_its_trap_mix_per_seed():
    """The note-only breach, the late reply, the waiting tickets, the twin customers and the
    deadline just outside the window are each there or not; the swap covers today or ended."""
    from longhorizon.tasks.diversity import trap_set

    tasks = [get_family("sla_breach_escalation").generate(seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("internal_note_only", "late_reply", "waiting", "twin_customers", "just_outside", "swap_ended"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:
        assert bool(t.data["swap_today"]) != bool(t.data["swap_ended"])


@pytest.mark.parametrize("variant", ["swap_today", "swap_ended"])
async def test_sla_sweep_swap_that_ended_yesterday_leaves_the_rota_engineer_on_call(variant):
    """A swap covering today puts its cover on call; one that ended yesterday does not: the oracle
    follows each, and handing the swap team's tickets to the other engineer fails on_call_assigned."""
    fam = get_family("sla_breach_escalation")
    t = next(t for t in (fam.generate(s) for s in range(20)) if t.data[variant])
    team, cover = t.data[variant]
    on_call = t.data["swap"][1]
    assert (on_call == cover) == (variant == "swap_today")
    traj = await play_task(t, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    traj = await play_task(t, OraclePolicy(perturb="on_call_assigned"))
    assert "on_call_assigned" in {r.id for r in traj.grade.results if not r.passed}


def test_release_review_draws_its_trap_mix_per_seed():
    """Today's correction goes back to In Progress or on to Done; the stale ticket, the absent
    engineer's, the web look-alikes and the blocker Done today are each there or not."""
    from longhorizon.tasks.diversity import trap_set

    tasks = [get_family("release_readiness_review").generate(seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("correction_done", "stale", "absent", "web_lookalikes", "blocker_done_today"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:
        assert bool(t.data["correction_back"]) != bool(t.data["correction_done"])
        assert ("unmentioned_kept" in {c.id for c in t.criteria}) == bool(t.data["stale"] or t.data["absent"])
    assert not any(get_family("release_readiness_review").generate(s, 1).data["correction_done"] for s in range(20))


@pytest.mark.parametrize("variant", ["correction_back", "correction_done"])
async def test_release_review_applies_the_correction_either_way(variant, tmp_path):
    """The oracle ends the corrected ticket where the correction says (In Progress, moved to the next
    release; or Done, staying), and keeping the first message's 'in review' fails statuses."""
    t = next(t for t in (get_family("release_readiness_review").generate(s) for s in range(20)) if t.data[variant])
    key = t.data[variant]
    assert t.data["statuses"][key] == ("Done" if variant == "correction_done" else "In Progress")
    assert (key in t.data["moved"]) == (variant == "correction_back")
    traj = await play_task(t, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    traj = await play_task(t, OraclePolicy(perturb="statuses"))
    assert "statuses" in {r.id for r in traj.grade.results if not r.passed}


def test_pipeline_draws_its_trap_mix_per_seed():
    """The correction, the overdue signed deal, the sibling deal, the unsigned quote, the namesake
    contact and the window's edge deals are each there or not: instances differ in what must be noticed."""
    from longhorizon.tasks.diversity import trap_set

    tasks = [task("pipeline_hygiene", seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("corrected", "overdue_order", "sibling", "quoted", "namesake", "edges"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:  # a criterion for the overdue signed deal and the window's edges only where they are
        ids = {c.id for c in t.criteria}
        assert ("overdue_order_won" in ids) == bool(t.data["overdue_order"])
        assert ("window_edges" in ids) == bool(t.data["edges"])
        assert {"orders_won", "stale_pushed", "stale_closed_lost"} <= ids


async def test_pipeline_window_edges_are_graded(tmp_path):
    """Where deals were last worked exactly 30 and 31 days ago, the oracle pushes the first and
    closes the second lost; pushing both fails window_edges. Without them there is no such criterion."""
    with_edges = next(task("pipeline_hygiene", s) for s in range(20) if task("pipeline_hygiene", s).data["edges"])
    without = next(task("pipeline_hygiene", s) for s in range(20) if not task("pipeline_hygiene", s).data["edges"])
    assert "window_edges" not in {c.id for c in without.criteria}
    traj = await play_task(with_edges, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    w = World.build(tmp_path / "w", with_edges.build)
    today = date.fromisoformat(with_edges.data["today"])
    last = {}
    for did in with_edges.data["edges"]:
        last[did] = max(date.fromisoformat(a["date"][:10]) for a in crm.activities(w, deal_id=did))
    assert sorted((today - d).days for d in last.values()) == [30, 31]
    push_edge = next(d for d in with_edges.data["edges"] if (today - last[d]).days == 30)
    assert push_edge in with_edges.data["push"]

    def push_both(call):
        if call.name == "crm__update_deal" and call.arguments["deal_id"] in with_edges.data["edges"]:
            return ToolCall(call.name, {"deal_id": call.arguments["deal_id"],
                                        "close_date": with_edges.data["push_date"]}, call.note)
        return call

    traj = await play_task(rewritten_oracle(with_edges, push_both), OraclePolicy())
    assert "window_edges" in {r.id for r in traj.grade.results if not r.passed}


def test_trade_show_draws_its_trap_mix_per_seed():
    """The shortened first name, the namesake, the double scan, the brand-new company and each
    do-not-contact scan are there or not (one do-not-contact scan always)."""
    from longhorizon.tasks.diversity import trap_set

    tasks = [task("trade_show_leads", seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("nickname", "namesake", "double_scan", "new_account", "dnc_by_address", "dnc_by_domain"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:
        ids = {c.id for c in t.criteria}
        assert t.data["dnc"] and {"existing_updated", "new_contacts", "meetings_logged"} <= ids
        assert ("namesake_kept_apart" in ids) == bool(t.data["namesake"])
        assert ("double_scan_once" in ids) == bool(t.data["double_scan"])
        assert ("new_account" in ids) == bool(t.data["new_account"])


async def test_trade_show_without_a_namesake_or_double_scan_has_no_criterion_for_them(tmp_path):
    """An instance without the namesake and the double scan grades neither; one with them passes
    the oracle and fails namesake_kept_apart when the namesake's meeting goes to the existing contact."""
    tasks = [task("trade_show_leads", s) for s in range(20)]
    without = next(t for t in tasks if not t.data["namesake"] and not t.data["double_scan"])
    assert not {"namesake_kept_apart", "double_scan_once"} & {c.id for c in without.criteria}
    traj = await play_task(without, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    both = next(t for t in tasks if t.data["namesake"] and t.data["double_scan"])
    traj = await play_task(both, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    traj = await play_task(both, OraclePolicy(perturb="namesake_kept_apart"))
    assert "namesake_kept_apart" in {r.id for r in traj.grade.results if not r.passed}


# -- team_backlog_digest draws its traps per seed --------------------------------------------------

async def test_backlog_digest_draws_its_traps_per_seed():
    """Over seeds 0..19 the lead change, next week's cover and the late-commented tickets come and
    go; whoever is drawn is off the recipients, and a changed lead's predecessor gets nothing."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("team_backlog_digest")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("former_lead", "cover_next_week", "late_comment"):
        assert 0 < sum(bool(t.data[key]) for t in tasks) < 20, key
    for t in tasks:
        drawn = {t.data["former_lead"], t.data["cover_next_week"]} - {""}
        assert drawn <= set(t.data["not_recipients"]) and len(t.data["not_recipients"]) == 1 + len(drawn)
        assert not drawn & set(t.data["leads"].values())
    changed = next(t for t in tasks if t.data["former_lead"])
    same = next(t for t in tasks if not t.data["former_lead"])
    for t in (changed, same):
        traj = await play_task(t, OraclePolicy())
        assert traj.passed and traj.reward == 1.0
        sent = [c.arguments for c in traj.tool_calls if c.name == "mail__send_message"]
        assert sorted(a["to"][0] for a in sent) == sorted(t.data["leads"].values())
    traj = await play_task(changed, OraclePolicy(perturb="right_recipients"))
    assert {r.id: r.passed for r in traj.grade.results}["right_recipients"] is False


async def test_sprint_plan_draws_its_trap_mix_per_seed(tmp_path):
    """Last sprint's plan, the backlog ticket to reuse, the deferred ticket and item and the item
    that needs a carried-over ticket are each there or not: at least three trap sets over seeds
    0..19; the mail and the tracker carry only the ones drawn, and the oracle meets every criterion
    either way."""
    from longhorizon.apps.mail import state as mail_state
    from longhorizon.tasks.diversity import DIVERSITY_SEEDS, trap_set

    fam = get_family("sprint_planning")
    tasks = [fam.instance(seed) for seed in DIVERSITY_SEEDS]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("old_plan_mail", "reused", "deferred_ticket", "deferred_item", "needs_carried"):
        assert any(t.data[key] for t in tasks) and not all(t.data[key] for t in tasks), key
    for t in tasks[:6]:
        w = World.build(tmp_path / f"sp{t.seed}", t.build)
        subjects = [m["subject"] for m in mail_state.messages(w)]
        assert (t.data["old_plan_mail"] in subjects) == bool(t.data["old_plan_mail"])
        plan = next(m["body"] for m in mail_state.messages(w) if m["subject"] == f"{t.data['sprint']} planning")
        assert ("Not this sprint" in plan) == bool(t.data["deferred_ticket"] or t.data["deferred_item"])
        if t.data["deferred_item"]:
            assert t.data["deferred_item"] in plan
        if t.data["needs_carried"]:
            assert f"{t.data['needs_carried']} to be finished" in plan
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0 and not [c for c in traj.tool_calls if c.is_error]
