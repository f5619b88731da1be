"""The spreadsheet task families: solvable by their oracle, failed by null, every criterion can
fail, and generation is deterministic in the seed."""

import dataclasses
import functools
import json

import pytest

from longhorizon.core.task import ToolCall
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import NullPolicy, OraclePolicy
from longhorizon.tasks.registry import get_family

FAMILIES = {
    "department_spend_review": "spreadsheet analysis",
    "contact_list_cleanup": "spreadsheet cleanup",
}
SEEDS = (0, 1, 100_000)


@functools.cache
def task(name: str, seed: int):
    return get_family(name).generate(seed)


CASES = [(name, seed) for name in FAMILIES for seed in SEEDS]
PERTURBED = [(name, seed, c.id) for name, seed in CASES for c in task(name, seed).criteria]


@pytest.mark.parametrize("name", FAMILIES)
def test_family_is_registered_in_its_category(name):
    fam = get_family(name)
    assert fam.category == FAMILIES[name]
    assert "sheets" in fam.apps


@pytest.mark.parametrize("name,seed", CASES)
async def test_oracle_solves_the_task(name, seed):
    traj = await play_task(task(name, seed), OraclePolicy())
    assert [c for c in traj.tool_calls if c.is_error] == []
    assert traj.passed, [r for r in traj.grade.results if not r.passed]
    assert traj.grade.reward == 1.0


@pytest.mark.parametrize("name,seed", CASES)
async def test_null_policy_fails(name, seed):
    traj = await play_task(task(name, seed), NullPolicy())
    assert not traj.passed


@pytest.mark.parametrize("name,seed,criterion", PERTURBED)
async def test_each_criterion_can_fail(name, seed, criterion):
    t = task(name, seed)
    assert criterion in t.perturbations
    traj = await play_task(t, OraclePolicy(perturb=criterion))
    results = {r.id: r.passed for r in traj.grade.results}
    assert results[criterion] is False


@pytest.mark.parametrize("name,seed", CASES)
def test_same_seed_gives_the_same_task_and_world(name, seed, tmp_path):
    a, b = get_family(name).generate(seed), get_family(name).generate(seed)
    assert a.instruction == b.instruction
    assert [c.id for c in a.criteria] == [c.id for c in b.criteria]
    assert World.build(tmp_path / "a", a.build).hash() == World.build(tmp_path / "b", b.build).hash()


@pytest.mark.parametrize("name", FAMILIES)
def test_seeds_give_different_tasks(name, tmp_path):
    a, b = task(name, 0), task(name, 1)
    assert a.instruction != b.instruction
    assert World.build(tmp_path / "a", a.build).hash() != World.build(tmp_path / "b", b.build).hash()
    assert (a.split, task(name, 100_000).split) == ("train", "holdout")


@pytest.mark.parametrize("seed", SEEDS)
async def test_spend_review_is_long_horizon(seed):
    traj = await play_task(task("department_spend_review", seed), OraclePolicy())
    assert len(traj.tool_calls) >= 20


async def test_spend_review_accepts_an_equivalent_formula_answer():
    """Graders judge computed values: SUMIF-style formulas and plain numbers grade the same."""
    t = task("department_spend_review", 0)
    d = t.data

    def formula_oracle():
        rows = []
        for i, dept in enumerate(d["order"], start=2):
            truth = d["truth"][dept]
            rows.append([dept, truth["budget"], f"=ROUND({truth['spent']}*1,2)", f"=B{i}-C{i}",
                         f'=IF(B{i}-C{i}<0,"yes","no")'])
        yield ToolCall("sheets__create_workbook", {"path": d["report"], "sheets": [d["sheet"]]})
        yield ToolCall("sheets__write_rows", {"path": d["report"], "sheet": d["sheet"], "start_cell": "A1",
                                              "rows": [d["header"]] + rows})
        return "done"

    traj = await play_task(dataclasses.replace(t, oracle=formula_oracle), OraclePolicy())
    assert traj.passed, [r for r in traj.grade.results if not r.passed]


@pytest.mark.parametrize("seed", SEEDS)
async def test_cleanup_pays_nothing_for_an_empty_clean_sheet(seed):
    """Row rules (no duplicates, no blanks, formats) hold vacuously on no rows: they must not pay."""
    t = task("contact_list_cleanup", seed)

    def empty_sheet():
        yield ToolCall("sheets__add_sheet", {"path": t.data["export"], "name": t.data["clean_sheet"]})
        return "done"

    traj = await play_task(dataclasses.replace(t, oracle=empty_sheet), OraclePolicy())
    assert [c for c in traj.tool_calls if c.is_error] == []
    assert traj.grade.reward == 0.0, [r.id for r in traj.grade.results if r.passed]


def _junk(t, script):
    """The task with ``script`` (a generator of ToolCalls) played as its solution."""
    return dataclasses.replace(t, oracle=script)


@pytest.mark.parametrize("seed", SEEDS)
async def test_cleanup_pays_nothing_for_the_export_pasted_as_it_is(seed):
    """Everyone is on a pasted copy, duplicates and blank rows too: that is no clean list."""
    t = task("contact_list_cleanup", seed)
    d = t.data

    def paste():
        rows = json.loads((yield ToolCall("sheets__read_range", {"path": d["export"], "sheet": d["sheet"]})))["rows"]
        yield ToolCall("sheets__add_sheet", {"path": d["export"], "name": d["clean_sheet"]})
        yield ToolCall("sheets__write_rows", {"path": d["export"], "sheet": d["clean_sheet"], "start_cell": "A1",
                                              "rows": [["" if v is None else v for v in r["values"]] for r in rows]})
        return "done"

    traj = await play_task(_junk(t, paste), OraclePolicy())
    assert [c for c in traj.tool_calls if c.is_error] == []
    assert traj.grade.reward == 0.0, [r.id for r in traj.grade.results if r.passed]


async def test_cleanup_pays_nothing_for_a_single_clean_row():
    """One tidy row has no duplicates and no blanks, but it is not the list."""
    t = task("contact_list_cleanup", 1)
    d = t.data
    first = next(iter(d["truth"].values()))

    def one_row():
        yield ToolCall("sheets__add_sheet", {"path": d["export"], "name": d["clean_sheet"]})
        yield ToolCall("sheets__write_rows", {"path": d["export"], "sheet": d["clean_sheet"], "start_cell": "A1",
                                              "rows": [["Name", "Email", "Phone", "Company", "Signup Date"],
                                                       [first["name"], first["email"], first["phone"],
                                                        first["company"], first["date"]]]})
        return "done"

    traj = await play_task(_junk(t, one_row), OraclePolicy())
    passed = {r.id for r in traj.grade.results if r.passed}
    assert {"no_duplicates", "no_blank_rows"} <= passed  # met, but they pay only with the whole list
    assert traj.grade.reward == 0.0, passed


@pytest.mark.parametrize("seed", [13, 25])
async def test_inventory_level_1_exists_where_no_single_site_of_the_default_draw_shows_every_mistake(seed):
    """Seeds 13 and 25: no one site of the default's draw tells every mistake apart, so level 1
    draws again instead of failing; its oracle still earns 1.0."""
    fam = get_family("inventory_sheet_cleanup")
    task = fam.instance(seed, 1)
    traj = await play_task(task, OraclePolicy())
    assert task.level == 1 and traj.grade.reward == 1.0


# -- weekly_sales_report draws its traps per seed --------------------------------------------------

async def test_weekly_sales_draws_its_traps_per_seed():
    """Over seeds 0..19 the stale cc and the order cancelled since the export come and go; the
    cancellation is graded only where it is there, and the oracle leaves that order out."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("weekly_sales_report")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("stale_cc", "cancelled_since", "cc_added"):
        assert 0 < sum(bool(t.data[key]) for t in tasks) < 20, key
    assert all(t.data["stale_cc"] or t.data["cancelled_since"] or t.data["cc_added"] for t in tasks)
    for t in tasks:
        assert ("added_cc_copied" in {c.id for c in t.criteria}) == bool(t.data["cc_added"])
    with_c = next(t for t in tasks if t.data["cancelled_since"])
    without = next(t for t in tasks if not t.data["cancelled_since"])
    assert "late_cancellation" not in {c.id for c in without.criteria}
    assert "late_cancellation" in {c.id for c in with_c.criteria}
    traj = await play_task(with_c, OraclePolicy())
    assert traj.passed and traj.reward == 1.0
    traj = await play_task(with_c, OraclePolicy(perturb="late_cancellation"))
    got = {r.id: r.passed for r in traj.grade.results}
    assert got["late_cancellation"] is False and not traj.passed
    with_cc = next(t for t in tasks if t.data["cc_added"])
    traj = await play_task(with_cc, OraclePolicy())
    assert traj.passed and traj.reward == 1.0
    mailed = next(c.arguments for c in traj.tool_calls if c.name == "mail__send_message")
    assert with_cc.data["cc_added"] in mailed["cc"]


def test_cleanup_draws_its_traps_per_seed():
    """Blank rows in the export and last month's export beside it are each there or not: over
    seeds 0..19 at least three trap mixes, and a criterion only for the traps there."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("contact_list_cleanup")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for t in tasks:
        ids = {c.id for c in t.criteria}
        assert ("no_blank_rows" in ids) == (t.data["blank_rows"] > 0)
        assert ("old_export_untouched" in ids) == bool(t.data["old_export"])
        assert set(t.perturbations) == ids
        if t.data["old_export"]:
            assert t.data["old_export"] in t.instruction
        else:
            assert "older export" not in t.instruction
    assert {bool(t.data["blank_rows"]) for t in tasks} == {True, False}
    assert {bool(t.data["old_export"]) for t in tasks} == {True, False}


@pytest.mark.parametrize("seed", [4, 8])  # neither blank rows nor an older export (4 sorts by date, 8 does not)
async def test_cleanup_oracle_solves_an_instance_without_the_optional_traps(seed, tmp_path):
    t = get_family("contact_list_cleanup").generate(seed)
    assert not t.data["blank_rows"] and not t.data["old_export"]
    world = World.build(tmp_path / "w", t.build)
    assert len(list((world.workspace / "crm").iterdir())) == 1  # the export alone
    traj = await play_task(t, OraclePolicy())
    assert traj.grade.reward == 1.0, [r.id for r in traj.grade.results if not r.passed]
    assert not any(c.arguments.get("path", "").startswith("crm/contacts_export_") and
                   c.arguments["path"] != t.data["export"] for c in traj.tool_calls)


def test_spend_review_draws_its_traps_per_seed():
    """A budget revised this year and hand-made Total rows are each there or not: over seeds
    0..19 at least three trap mixes, and a criterion only for the traps there."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("department_spend_review")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for t in tasks:
        ids = {c.id for c in t.criteria}
        assert ("revised_budget" in ids) == bool(t.data["revised"])
        assert ("total_rows_skipped" in ids) == bool(t.data["total_rows"])
        assert "Revisions sheet" in t.instruction  # named either way: no cue for which seeds revise
        for dept, r in t.data["revised"].items():  # the revision flips the over-budget flag
            truth = t.data["truth"][dept]
            assert truth["budget"] == r["to"] != r["from"]
            assert truth["over"] == (truth["spent"] > r["to"]) != (truth["spent"] > r["from"])
    assert {bool(t.data["revised"]) for t in tasks} == {True, False}
    assert {bool(t.data["total_rows"]) for t in tasks} == {True, False}


@pytest.mark.parametrize("seed", [10, 17])  # a revised budget and no Total rows
async def test_spend_review_oracle_uses_the_revised_budget(seed):
    t = get_family("department_spend_review").generate(seed)
    assert t.data["revised"] and not t.data["total_rows"]
    traj = await play_task(t, OraclePolicy())
    assert traj.grade.reward == 1.0, [r.id for r in traj.grade.results if not r.passed]
    missed = await play_task(t, OraclePolicy(perturb="revised_budget"))
    failed = {r.id for r in missed.grade.results if not r.passed}
    assert {"revised_budget", "budgets", "over_budget"} <= failed


def test_inventory_draws_its_traps_per_seed():
    """Recounts, pack sizes changed since the catalog's old sheet and a day/month/year site are each
    there or not (one of the first two always): at least three trap mixes over seeds 0..19, a
    criterion only where its trap shows, and levels 1-2 keep every trap."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("inventory_sheet_cleanup")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    pairs = {"recounted": "recounts_used", "stale_case": "current_case_sizes", "day_first_dates": "day_first_dates"}
    for t in tasks:
        ids = {c.id for c in t.criteria}
        assert t.data["recounted"] or t.data["stale_case"]
        for key, cid in pairs.items():
            assert (cid in ids) == bool(t.data[key])
        assert any(t.data["day_first"].values()) == bool(t.data["day_first_dates"])
    for key in pairs:
        assert {bool(t.data[key]) for t in tasks} == {True, False}
    assert all(fam.generate(0, 2).data[key] for key in pairs)


@pytest.mark.parametrize("seed", [7, 6])  # 7: changed pack sizes only; 6: recounts only
async def test_inventory_oracle_solves_an_instance_with_one_trap(seed):
    t = get_family("inventory_sheet_cleanup").generate(seed)
    assert bool(t.data["recounted"]) != bool(t.data["stale_case"]) and not t.data["day_first_dates"]
    traj = await play_task(t, OraclePolicy())
    assert traj.grade.reward == 1.0, [r.id for r in traj.grade.results if not r.passed]


def test_commission_draws_its_plan_exception_per_seed():
    """The plan's Exceptions section holds a draw for this quarter, one for last quarter only, or
    none: at least three trap mixes over seeds 0..19, and a criterion only for the draw there."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("sales_commission_calc")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    kinds = set()
    for t in tasks:
        ids = {c.id for c in t.criteria}
        current, expired = t.data["guaranteed_draw"], t.data["expired_draw"]
        assert not (current and expired)
        assert ("guaranteed_draw" in ids) == bool(current) and ("expired_draw_ignored" in ids) == bool(expired)
        for rep, amount in current.items():  # under quota, and the draw is what they are paid
            assert t.data["attainment"][rep] < 1 and t.data["commission"][rep] == amount
        for rep, amount in expired.items():  # the tiers alone, below the stale draw
            assert t.data["commission"][rep] < amount
        kinds.add("current" if current else "expired" if expired else "none")
    assert kinds == {"current", "expired", "none"}
    assert not any(fam.generate(s, 1).data[k] for s in range(5) for k in ("guaranteed_draw", "expired_draw"))


@pytest.mark.parametrize("seed,criterion", [(2, "guaranteed_draw"), (3, "expired_draw_ignored")])
async def test_commission_oracle_handles_the_draw(seed, criterion):
    t = get_family("sales_commission_calc").generate(seed)
    traj = await play_task(t, OraclePolicy())
    assert traj.grade.reward == 1.0, [r.id for r in traj.grade.results if not r.passed]
    missed = await play_task(t, OraclePolicy(perturb=criterion))
    failed = {r.id for r in missed.grade.results if not r.passed}
    assert {criterion, "commission", "totals_row"} <= failed
