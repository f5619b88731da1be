"""The SQL analytics, travel booking and expense report families: their traps are really in the
World (so the shortcut answer is wrong), and their graders are tolerant where the request is."""

import dataclasses
import functools
import json
import re
from contextlib import closing
from datetime import date

import pytest

from longhorizon.apps.sql import state as sqlstate
from longhorizon.apps.travel import state as travel
from longhorizon.core.task import ToolCall
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.analytics import add_months, mentions_month, mentions_number, month_end, month_key, pct_close
from longhorizon.tasks.analytics.kpi_review import top_products_sql
from longhorizon.tasks.registry import get_family
from longhorizon.tasks.travel.offsite_booking import required_cabin

FAMILIES = {
    "quarterly_kpi_review": "SQL analytics",
    "marketing_csv_exports": "SQL analytics",
    "offsite_travel_booking": "travel booking",
    "monthly_expense_report": "expense reports",
}


@functools.cache
def task(name: str, seed: int):
    return get_family(name).generate(seed)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_is_registered_in_its_category(name):
    assert get_family(name).category == FAMILIES[name]


def test_kpi_review_has_a_tie_and_test_accounts_change_the_answer(tmp_path):
    t = next(task("quarterly_kpi_review", s) for s in range(20) if task("quarterly_kpi_review", s).data["test_bulk_region"])
    regions = [r[0] for r in t.data["truth"]["top"]]
    assert len(regions) > len(set(regions)), "some region should list tied products"
    world = World.build(tmp_path / "w", t.build)
    q = t.data["quarter"].split()
    quarter, year = int(q[0][1]), int(q[1])
    first = date(year, 3 * quarter - 2, 1)
    sql = top_products_sql(first, month_end(add_months(first, 2)))
    with_tests = sqlstate.query(world, sql.replace("c.is_test = 0 AND ", ""))
    assert [list(r) for r in sqlstate.query(world, sql)] == t.data["truth"]["top"]
    assert [list(r) for r in with_tests] != t.data["truth"]["top"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_travel_policy_choice_is_never_the_naive_cheapest(seed, tmp_path):
    t = task("offsite_travel_booking", seed)
    world = World.build(tmp_path / "w", t.build)
    with closing(world.db("travel")) as conn:
        for person in t.data["expected"].values():
            f = travel.flight_row(conn, person["out"])
            day_flights = conn.execute(
                "SELECT f.flight_id, MIN(x.price) FROM flights f JOIN fares x ON x.flight_id = f.flight_id "
                "WHERE f.origin = ? AND f.destination = ? AND substr(f.depart, 1, 10) = ? AND x.cabin = 'economy' "
                "AND x.seats_left > 0 GROUP BY f.flight_id ORDER BY MIN(x.price)",
                (f["origin"], f["destination"], f["depart"][:10])).fetchall()
            assert day_flights[0][0] != person["out"], "the cheapest economy seat should be a trap"
            assert person["out_cabin"] == required_cabin(f["duration_minutes"])
    legs = t.data["expected"].values()
    assert {p["out_cabin"] for p in legs} | {p["back_cabin"] for p in legs} <= {"economy", "premium_economy"}


def test_travel_some_trip_needs_premium_economy():
    cabins = set()
    for seed in range(6):
        for p in task("offsite_travel_booking", seed).data["expected"].values():
            cabins |= {p["out_cabin"], p["back_cabin"]}
    assert "premium_economy" in cabins


def test_expense_report_uses_every_status_and_a_negative_refund():
    for seed in range(6):
        t = task("monthly_expense_report", seed)
        lines = t.data["lines"]
        assert {ln[5] for ln in lines} == {"OK", "Over limit", "Missing receipt", "Not reimbursable"}
        assert any(ln[2] < 0 for ln in lines) == bool(t.data["refund"])
        amazon = [ln for ln in lines if ln[1].startswith("AMZN")]
        want = {"Office Supplies", "Personal"} if t.data["personal_order"] else {"Office Supplies"}
        assert {ln[3] for ln in amazon} == want


async def test_expense_report_draws_its_traps_per_seed(tmp_path):
    """The statement's traps vary over seeds (at least 3 trap sets); each drawn trap is there in
    the World only where it is drawn, and the oracle handles either way."""
    from longhorizon.tasks.diversity import trap_set
    tasks = [task("monthly_expense_report", s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for trap in ("alcohol", "personal_order", "refund", "duplicate_receipt"):
        assert {bool(t.data[trap]) for t in tasks} == {True, False}, trap
    with_alc = next(t for t in tasks if t.data["alcohol"] and t.data["duplicate_receipt"])
    without = next(t for t in tasks if t.data["alcohol_free_drink"] and not t.data["duplicate_receipt"])
    status = {t.seed: {ln[1]: ln[5] for ln in t.data["lines"]} for t in (with_alc, without)}
    assert status[with_alc.seed][with_alc.data["alcohol"][0]] == "Not reimbursable"
    assert status[without.seed][without.data["alcohol_free_drink"][0]] in ("OK", "Over limit")
    for t in (with_alc, without):
        world = World.build(tmp_path / str(t.seed), t.build)
        receipts = {p.name for p in (world.root / "workspace" / "receipts").iterdir()}
        assert any(" (1)" in n for n in receipts) == bool(t.data["duplicate_receipt"])
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [r for r in traj.grade.results if not r.passed]


def test_marketing_exports_leave_running_campaigns_out():
    t = task("marketing_csv_exports", 2)
    names = [r[0] for r in t.data["truth"]["roas"]]
    assert names and len(names) == len(set(names))
    assert {"roas", "conversion"} <= set(t.data["questions"])


def test_tolerant_parsers():
    assert month_key("Mar 2025") == month_key("2025-03-01") == month_key("03/2025") == "2025-03"
    assert month_key("Q1") is None
    assert pct_close("12.5%", 12.46) and pct_close(0.1246, 12.46) and not pct_close(13, 12.46)
    assert mentions_month("May 2025 grew fastest", "2025-05") and not mentions_month("you may", "2025-05")
    assert mentions_number("up $1,234.50 (12.3%)", 1234.5, 0.01) and mentions_number("fell 3.5%", -3.5, 0.05)


async def _junk_reward(t, script) -> tuple[float, set[str]]:
    """Reward and met criteria when ``script`` (a generator of ToolCalls) is played as the solution."""
    traj = await play_task(dataclasses.replace(t, oracle=script), OraclePolicy())
    return traj.grade.reward, {r.id for r in traj.grade.results if r.passed}


@pytest.mark.parametrize("verdict", [("Approved", None), ("Rejected", "DUPLICATE"), ("Rejected", "OVER_LIMIT")])
async def test_claim_audit_pays_nothing_for_one_verdict_on_every_claim(verdict):
    """Approving (or rejecting with one code) every open claim meets no decision criterion."""
    t = get_family("expense_claim_audit").generate(1)
    book, open_ids = t.data["book"], set(t.data["decisions"])

    def stamp_all():
        rows = json.loads((yield ToolCall("sheets__read_range", {"path": book, "sheet": "Claims"})))["rows"]
        cells = {}
        for r in rows:
            if r["values"] and r["values"][0] in open_ids:
                cells[f"J{r['row']}"] = verdict[0]
                if verdict[1]:
                    cells[f"K{r['row']}"] = verdict[1]
        yield ToolCall("sheets__write_cells", {"path": book, "sheet": "Claims", "cells": cells})
        return "done"

    reward, met = await _junk_reward(t, stamp_all)
    assert reward == 0.0 and not met & {"duplicates", "receipts", "alcohol", "limits", "approvals"}, met


async def test_rebooking_pays_nothing_for_cancelling_every_booking():
    """Cancelling everything also cancels the cancelled flight's bookings and the dropout's: no credit."""
    t = get_family("cancelled_flight_rebooking").generate(1)

    def cancel_all():
        listing = yield ToolCall("travel__list_bookings", {})
        for ref in sorted(set(re.findall(r"BK-\d+", listing))):
            yield ToolCall("travel__cancel_booking", {"booking_id": ref})
        return "done"

    reward, met = await _junk_reward(t, cancel_all)
    assert reward == 0.0 and not met & {"old_cancelled", "dropout_cancelled"}, met


async def test_claim_audit_draws_its_traps_per_seed():
    """The batch's traps vary over seeds (at least 3 trap sets); a batch without alcohol has no
    alcohol criterion and an alcohol-free drink the oracle approves, one with it has the criterion
    and the oracle rejects that claim as ALCOHOL."""
    from longhorizon.tasks.diversity import trap_set
    fam = get_family("expense_claim_audit")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for trap in ("same_day_over", "last_month_repeat", "alcohol", "mismatch", "small_no_receipt"):
        assert {bool(t.data[trap]) for t in tasks} == {True, False}, trap
    with_alc = next(t for t in tasks if t.data["alcohol"])
    without = next(t for t in tasks if not t.data["alcohol"])
    assert "alcohol" in {c.id for c in with_alc.criteria} and "alcohol" not in {c.id for c in without.criteria}
    assert not without.data["alcohol"] and without.data["alcohol_free_drink"]
    assert [with_alc.data["decisions"][cid] for cid in with_alc.data["alcohol"]] == ["ALCOHOL"]
    assert [without.data["decisions"][cid] for cid in without.data["alcohol_free_drink"]] == ["Approved"]
    for t in (with_alc, without):
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [r for r in traj.grade.results if not r.passed]
    same_day = next(t for t in tasks if t.data["same_day_over"])
    assert [same_day.data["decisions"][cid] for cid in same_day.data["same_day_over"]] == ["OVER_LIMIT"]


async def test_cancelled_flight_rebooking_draws_its_traps_per_seed():
    """Who writes about not flying (drops out: cancel everything; drives: cancel the flights, keep
    the hotel; nobody), the same flight number a week later booked for someone else, and the
    terminal-change notice vary over seeds (at least 3 trap sets). Only an instance with the mail
    has the criterion for it; the oracle keeps the driver's hotel and cancels the dropout's."""
    from longhorizon.tasks.diversity import trap_set
    fam = get_family("cancelled_flight_rebooking")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("dropout", "driving", "same_number_later", "terminal_notice"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    by_kind = {kind: next(t for t in tasks if test(t.data)) for kind, test in (
        ("cancel", lambda d: d["dropout"]), ("drive", lambda d: d["driving"]),
        ("nobody", lambda d: not d["dropout"] and not d["driving"]))}
    ids = {kind: {c.id for c in t.criteria} for kind, t in by_kind.items()}
    assert "dropout_cancelled" in ids["cancel"] and "driver_flights_cancelled" not in ids["cancel"]
    assert "driver_flights_cancelled" in ids["drive"] and "dropout_cancelled" not in ids["drive"]
    assert not ids["nobody"] & {"dropout_cancelled", "driver_flights_cancelled"}
    for kind, t in by_kind.items():
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, (kind, [r for r in traj.grade.results if not r.passed])
    drive = by_kind["drive"]  # cancelling the driver's hotel too (the whole-trip reflex) fails
    traj = await play_task(drive, OraclePolicy(perturb="driver_flights_cancelled"))
    assert not next(r for r in traj.grade.results if r.id == "driver_flights_cancelled").passed
    assert all(not t.data["dropout"] and not t.data["driving"] for t in (fam.instance(s, 1) for s in range(3)))


async def test_offsite_travel_booking_draws_its_traps_per_seed():
    """The extra night (approved, refused, nobody asks), what was booked for the old dates (a whole
    trip, a hotel stay, both) and the tag-along request vary over seeds (at least 3 trap sets); the
    return the grader expects follows the lead's answer, and the oracle meets it either way."""
    from longhorizon.tasks.diversity import trap_set
    fam = get_family("offsite_travel_booking")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("extension", "extension_refused", "old_trip", "old_stay", "tagalong"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    assert all(t.data["superseded"] for t in tasks), "something is always booked for the old dates"
    approved = next(t for t in tasks if t.data["extension"])
    refused = next(t for t in tasks if t.data["extension_refused"])
    nobody = next(t for t in tasks if not t.data["extension"] and not t.data["extension_refused"])
    day_after = lambda t: date.fromisoformat(t.data["end"]).toordinal() + 1  # noqa: E731
    assert date.fromisoformat(approved.data["expected"][approved.data["extension"]]["check_out"]).toordinal() \
        == day_after(approved)
    assert refused.data["expected"][refused.data["extension_refused"]]["check_out"] == refused.data["end"]
    assert all(e["check_out"] == nobody.data["end"] for e in nobody.data["expected"].values())
    for t in (approved, refused, nobody, next(t for t in tasks if not t.data["old_trip"])):
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [r for r in traj.grade.results if not r.passed]


async def test_kpi_review_draws_its_trap_mix_per_seed(tmp_path):
    """Last quarter's request, the note on the frozen snapshot table and the test account's bulk
    order are each there or not: at least three trap sets over seeds 0..19; the inbox holds only
    the mails drawn, and the oracle meets every criterion either way."""
    from longhorizon.apps.mail import state as mail_state
    from longhorizon.tasks.diversity import DIVERSITY_SEEDS, trap_set

    fam = get_family("quarterly_kpi_review")
    tasks = [fam.instance(seed) for seed in DIVERSITY_SEEDS]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("stale_request", "snapshot_note", "test_bulk_region"):
        assert any(t.data[key] for t in tasks) and not all(t.data[key] for t in tasks), key
    for t in tasks[:5]:
        w = World.build(tmp_path / f"kpi{t.seed}", t.build)
        subjects = [m["subject"] for m in mail_state.messages(w)]
        for key in ("stale_request", "snapshot_note"):
            assert (t.data[key] in subjects) == bool(t.data[key]), key
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0 and not [c for c in traj.tool_calls if c.is_error]
