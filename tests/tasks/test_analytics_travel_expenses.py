"""The SQL analytics, travel booking and expense report families: their traps are really in the
World (so the shortcut answer is wrong), and their graders are tolerant where the request is."""

import functools
from contextlib import closing
from datetime import date

import pytest

from longhorizon.apps.sql import state as sqlstate
from longhorizon.apps.travel import state as travel
from longhorizon.core.registry import get_family
from longhorizon.core.world import World
from longhorizon.tasks.analytics import add_months, mentions_month, mentions_number, month_end, month_key, pct_close
from longhorizon.tasks.analytics.kpi_review import top_products_sql
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
    t = task("quarterly_kpi_review", 1)
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
    for seed in (0, 1, 2):
        lines = task("monthly_expense_report", seed).data["lines"]
        assert {ln[5] for ln in lines} == {"OK", "Over limit", "Missing receipt", "Not reimbursable"}
        assert any(ln[2] < 0 for ln in lines)
        amazon = [ln for ln in lines if ln[1].startswith("AMZN")]
        assert {ln[3] for ln in amazon} == {"Office Supplies", "Personal"}


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
