"""The commerce task families (order operations, inventory and procurement, invoicing and
reconciliation): solvable by their oracle through the store app, long, failed by null, every
criterion able to fail, and built around the traps their instructions describe."""

import functools
import tempfile
from pathlib import Path

import pytest

from longhorizon.apps.store import state as store
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import NullPolicy, OraclePolicy
from longhorizon.tasks.registry import get_family

FAMILIES = {
    "customer_complaint_resolution": "order operations",
    "restock_purchase_orders": "inventory and procurement",
    "supplier_invoice_reconciliation": "invoicing and reconciliation",
}
SEEDS = (0, 1, 100_000)


@functools.cache
def task(name: str, seed: int):
    return get_family(name).generate(seed)


CASES = [(name, seed) for name in FAMILIES for seed in SEEDS]
PERTURBED = [(name, 1, c.id) for name in FAMILIES for c in task(name, 1).criteria]


@pytest.mark.parametrize("name", FAMILIES)
def test_family_metadata(name):
    fam = get_family(name)
    assert fam.category == FAMILIES[name] and "store" in fam.apps
    t = task(name, 100_000)
    held = ("holdout-family",) * 2 if fam.holdout_family else ("train", "holdout")  # registry.HOLDOUT_FAMILIES
    assert (task(name, 0).split, t.split) == held
    assert set(t.perturbations) == {c.id for c in t.criteria}


@pytest.mark.parametrize("name,seed", CASES)
async def test_oracle_solves_with_many_calls_and_no_errors(name, seed):
    traj = await play_task(task(name, seed), OraclePolicy())
    assert [c.result for c in traj.tool_calls if c.is_error] == []
    assert traj.passed and traj.reward == 1.0, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    assert len(traj.tool_calls) >= 30


@pytest.mark.parametrize("name,seed", CASES)
async def test_null_policy_scores_nothing(name, seed):
    traj = await play_task(task(name, seed), NullPolicy())
    assert traj.reward == 0.0


@pytest.mark.parametrize("name,seed,criterion", PERTURBED)
async def test_each_perturbation_fails_its_criterion_cleanly(name, seed, criterion):
    traj = await play_task(task(name, seed), OraclePolicy(perturb=criterion))
    assert {r.id: r.passed for r in traj.grade.results}[criterion] is False
    assert [c.result for c in traj.tool_calls if c.is_error] == []


def built(name: str, seed: int, tmp: Path) -> World:
    return World.build(tmp / f"{name}-{seed}", task(name, seed).build)


def test_complaints_cover_every_decision_and_hide_some_order_numbers():
    kinds, hidden = set(), 0
    for seed in range(6):
        cases = task("customer_complaint_resolution", seed).data["cases"]
        kinds |= {c["kind"] for c in cases}
        hidden += sum(c["omit_id"] for c in cases)
        assert {"cancel_paid", "damaged_ok", "lost", "over_limit"} <= {c["kind"] for c in cases}
    assert kinds == {"cancel_paid", "cancel_pending", "cancel_shipped", "damaged_ok", "damaged_late", "over_limit",
                     "already_refunded", "lost", "in_transit"}
    assert hidden > 0


def test_complaint_policy_archive_disagrees_with_the_current_policy(tmp_path):
    t = task("customer_complaint_resolution", 2)
    w = built("customer_complaint_resolution", 2, tmp_path)
    current = (w.workspace / "policies" / "customer_service_policy.md").read_text()
    old = next((w.workspace / "policies" / "archive").iterdir()).read_text()
    assert f"within {t.data['window']} days" in current and f"within {t.data['window']} days" not in old
    assert "SUPERSEDED" in old and t.data["manager"] in current and t.data["manager"] not in old


def test_restock_expects_no_discontinued_or_covered_skus(tmp_path):
    for seed in range(4):
        t = task("restock_purchase_orders", seed)
        w = built("restock_purchase_orders", seed, tmp_path)
        prods = store.products(w)
        open_skus = {ln["sku"] for po in store.purchase_orders(w).values() if po["status"] == "sent"
                     and po["id"] != t.data["arriving"] for ln in po["lines"]}
        assert all(prods[s]["status"] == "active" for s in t.data["expected"])
        assert all(q % prods[s]["case_size"] == 0 for s, q in t.data["expected"].items())
        low = {s for s, p in prods.items() if p["stock"] <= p["reorder_point"]}
        assert low - set(t.data["expected"]), "some low SKUs must be traps (discontinued, covered, arriving)"
        assert open_skus, "an open purchase order covers some SKUs"
        assert len(t.data["suppliers"]) < len({p["supplier_id"] for p in prods.values()})


def test_reconciliation_batch_mixes_every_status_and_both_delivery_ways():
    statuses, attached, inline = set(), 0, 0
    for seed in range(4):
        invs = task("supplier_invoice_reconciliation", seed).data["invoices"]
        statuses |= {i["status"] for i in invs}
        attached += sum(i["attached"] for i in invs)
        inline += sum(not i["attached"] for i in invs)
    assert statuses == {"Matched", "Price mismatch", "Quantity mismatch", "Duplicate"}
    assert attached and inline


def trap_sets(name: str) -> set:
    from longhorizon.tasks.diversity import DIVERSITY_SEEDS, trap_set

    return {trap_set(get_family(name).instance(seed)) for seed in DIVERSITY_SEEDS}


async def traps_graded_only_when_there(name: str, traps: dict[str, str]) -> None:
    """``traps``: Task.data key -> the criterion id a trap gets. Over seeds 0..19 each trap is
    there in some instances and not in others; an instance without it has no criterion for it;
    the first one with it has the criterion, met by the oracle and failed, with no tool error,
    by its perturbation."""
    tasks = [get_family(name).instance(seed) for seed in range(20)]
    for key, cid in traps.items():
        with_it = [t for t in tasks if t.data[key]]
        without = [t for t in tasks if not t.data[key]]
        assert with_it and without, key
        assert all(cid not in {c.id for c in t.criteria} for t in without), cid
        t = with_it[0]
        assert cid in {c.id for c in t.criteria}, cid
        ok = await play_task(t, OraclePolicy())
        assert {r.id: r.passed for r in ok.grade.results}[cid] is True
        bad = await play_task(t, OraclePolicy(perturb=cid))
        assert {r.id: r.passed for r in bad.grade.results}[cid] is False
        assert [c.result for c in bad.tool_calls if c.is_error] == []


async def test_restock_traps_are_drawn_per_seed_and_graded_only_when_there(tmp_path):
    name = "restock_purchase_orders"
    assert len(trap_sets(name)) >= 3
    await traps_graded_only_when_there(name, {"at_point": "at_point_reordered", "covered": "covered_not_reordered",
                                              "partly_covered": "partly_covered_topped_up"})
    for seed in range(20):  # the delivery's discrepancies vary too, and the receipt note is held to them
        t = get_family(name).instance(seed)
        assert t.data["covered"] or t.data["partly_covered"], "an open order always covers something"
        assert t.data["discrepancies"] == [t.data["left_short"]] + [
            t.data[k] for k in ("over_delivered", "not_shipped", "not_ordered") if t.data[k]]
    t = task(name, 2)  # seed 2: only the short line is off; every line of the order is on the packing list
    assert t.data["discrepancies"] == [t.data["left_short"]]
    listing = next((built(name, 2, tmp_path).workspace / "receiving").glob("delivery_*")).read_text()
    assert all(sku in listing for sku in t.data["counted"]) and "carton(s) missing" in listing


async def test_quote_selection_traps_are_drawn_per_seed_and_graded_only_when_there():
    from longhorizon.tasks.commerce.quote_selection import TRAPS

    name = "supplier_quote_selection"
    assert len(trap_sets(name)) >= 3
    await traps_graded_only_when_there(name, {key: cid for key, cid, _ in TRAPS.values()})
    for seed in range(20):
        d = get_family(name).instance(seed).data
        roles = {r for a in d["awards"].values() for r in a["roles"]}
        assert bool(d["expired"]) == ("expired" in roles) == bool(d["expired_quote"])
        assert d["expired_quote"] or d["price_tie"], "always a quote from a supplier that wins nothing"


async def test_complaint_traps_are_drawn_per_seed_and_graded_only_when_there():
    from longhorizon.tasks.commerce.complaints import TRAPS

    name = "customer_complaint_resolution"
    assert len(trap_sets(name)) >= 3
    await traps_graded_only_when_there(name, {key: cid for key, cid in TRAPS.values() if cid})
    for seed in range(20):
        d = get_family(name).instance(seed).data
        for kind, (key, _) in TRAPS.items():
            assert d[key] == [c["order"] for c in d["cases"] if c["kind"] == kind]
        assert any(d[key] for key, _ in TRAPS.values())


async def test_reconciliation_traps_are_drawn_per_seed_and_graded_only_when_there():
    """Which traps a month's batch carries is drawn: at least three trap sets over seeds 0..19;
    each trap present has its criterion (the oracle meets it, its perturbation fails it), and an
    instance without the trap names no invoice for it and has no criterion for it."""
    from longhorizon.tasks.commerce.reconcile import TRAPS

    name = "supplier_invoice_reconciliation"
    assert len(trap_sets(name)) >= 3
    for kind, (key, cid, _) in TRAPS.items():
        tasks = [get_family(name).instance(seed) for seed in range(20)]
        with_it = [t for t in tasks if t.data[key]]
        without = [t for t in tasks if not t.data[key]]
        assert with_it and without, kind
        assert all(cid not in {c.id for c in t.criteria} for t in without)
        t = with_it[0]
        assert cid in {c.id for c in t.criteria}
        assert {i["status"] for i in t.data["invoices"] if i["number"] in t.data[key]} == {
            "Matched" if kind == "match_short" else "Duplicate" if kind == "duplicate"
            else "Price mismatch" if kind == "price" else "Quantity mismatch"}
        ok = await play_task(t, OraclePolicy())
        assert {r.id: r.passed for r in ok.grade.results}[cid] is True
        bad = await play_task(t, OraclePolicy(perturb=cid))
        assert {r.id: r.passed for r in bad.grade.results}[cid] is False
        assert [c.result for c in bad.tool_calls if c.is_error] == []


def test_generation_is_deterministic_per_family():
    with tempfile.TemporaryDirectory() as d:
        for name in FAMILIES:
            a = World.build(Path(d) / f"{name}-a", get_family(name).generate(7).build).hash()
            b = World.build(Path(d) / f"{name}-b", get_family(name).generate(7).build).hash()
            assert a == b


def pasting(t, extra: str, tools=("mail__send_message", "mail__reply", "mail__forward")):
    """``t`` whose oracle also pastes ``extra`` into every mail it sends (a kitchen-sink reply)."""
    from dataclasses import replace

    from longhorizon.core.task import ToolCall

    def script():
        gen = t.oracle()
        call = next(gen)
        while True:
            if call.name in tools:
                call = ToolCall(call.name, {**call.arguments, "body": f"{call.arguments['body']}\n\n{extra}"}, call.note)
            result = yield call
            try:
                call = gen.send(result)
            except StopIteration as stop:
                return stop.value
    return replace(t, oracle=script)


async def graded(t) -> dict:
    traj = await play_task(t, OraclePolicy())
    earned = traj.grade.earned()
    return {r.id: (r.passed, earned[r.id]) for r in traj.grade.results}


async def test_answers_that_quote_every_complaint_earn_neither_details_nor_replies():
    t = task("customer_complaint_resolution", 1)
    got = await graded(pasting(t, "Orders: " + ", ".join(c["order"] for c in t.data["cases"])))
    assert got["reply_details"] == (False, False)
    assert got["replies"] == (True, False), "one answer each pays only with the right details"


async def test_a_winner_mail_naming_every_rfq_item_fails_reply_details():
    t = task("supplier_quote_selection", 1)
    got = await graded(pasting(t, "RFQ items: " + ", ".join(t.data["awards"])))
    assert got["reply_details"][0] is False and got["awarded_suppliers"] == (True, True)


async def test_an_ap_summary_that_also_names_last_months_invoices_fails():
    t = task("supplier_invoice_reconciliation", 1)
    ok = await graded(t)
    assert ok["ap_summary"] == (True, True)
    from longhorizon.apps.mail import state as mail

    with tempfile.TemporaryDirectory() as d:
        world = World.build(Path(d) / "w", t.build)
        filed = "\n".join(m["subject"] for m in mail.messages(world, folder="Invoices/Processed"))
    got = await graded(pasting(t, f"Also on file:\n{filed}"))
    assert got["ap_summary"][0] is False


def test_quote_selection_is_a_frozen_scenario_and_pure_functions_of_it(tmp_path):
    """Every draw happens in ``draw(seed)``; the World, the instruction, the oracle and the
    criteria are made from the Scenario alone, so one Scenario gives one instance."""
    import dataclasses

    from longhorizon.tasks.commerce import quote_selection as qs

    sc = qs.draw(3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sc.rfq = "RFQ-0"
    task = get_family("supplier_quote_selection").generate(3)
    assert qs.instruction(sc) == task.instruction and sc.data == task.data
    assert [c.id for c in qs._criteria(sc)] == [c.id for c in task.criteria]
    first = World.build(tmp_path / "a", functools.partial(qs.build, sc)).hash()
    assert World.build(tmp_path / "b", functools.partial(qs.build, sc)).hash() == first
    assert World.build(tmp_path / "c", task.build).hash() == first


async def test_backorder_traps_are_drawn_per_seed_and_graded_only_when_there():
    """The namesake on the list, the cancelled order, the item this delivery does not bring and the
    customer who wrote in are each there or not: at least three trap sets over seeds 0..19; the
    one who wrote in is graded (answer in their thread) only where there is one."""
    name = "backorder_fulfilment"
    assert len(trap_sets(name)) >= 3
    await traps_graded_only_when_there(name, {"asker_order": "asker_answered_in_thread"})
    for key in ("namesake_order", "cancelled_order", "missing_item"):
        got = [bool(get_family(name).instance(seed).data[key]) for seed in range(20)]
        assert any(got) and not all(got), key
    for seed in range(20):
        d = get_family(name).instance(seed).data
        assert any(d[k] for k in ("namesake_order", "cancelled_order", "missing_item", "asker_order"))
        assert d["cancelled_order"] not in {b["order"] for b in d["backorders"] if b["outcome"] != "cancelled"}
        if d["missing_item"]:
            assert any(d["missing_item"] in b["awaited"] for b in d["backorders"])


async def test_payment_matching_traps_are_drawn_per_seed_and_graded_only_when_there():
    """Which trap credits a statement carries (swapped digits, no reference, one transfer for two
    orders, short, a balance, an order paid twice, an unknown payer) is drawn: at least three trap
    sets over seeds 0..19; the short payments' criteria only where a payment is short; something
    always goes to the Unmatched sheet."""
    from longhorizon.tasks.commerce.payment_matching import TRAPS

    name = "customer_payment_matching"
    assert len(trap_sets(name)) >= 3
    await traps_graded_only_when_there(name, {"short_payment": "short_log"})
    await traps_graded_only_when_there(name, {"short_payment": "short_mails"})
    for seed in range(20):
        d = get_family(name).instance(seed).data
        for kind, key in TRAPS.items():
            assert len(d[key]) == sum(c["kind"] == kind for c in d["credits"]), key
        assert d["paid_twice"] or d["unknown_payer"]
        assert "unmatched_log" in {c.id for c in get_family(name).instance(seed).criteria}
    for key in TRAPS.values():
        got = [bool(get_family(name).instance(seed).data[key]) for seed in range(20)]
        assert any(got) and not all(got), key


async def test_backorder_without_a_missing_item_still_draws_an_order_that_may_ship_in_part():
    """Seed 139 draws no missing-item trap and, on the first draw, no order of two lines: the draw
    is made again instead of failing (IndexError before), and the instance still plays."""
    task = get_family("backorder_fulfilment").instance(139, 3)
    orders = task.data["backorders"]
    assert any(o["partial_ok"] for o in orders)
    traj = await play_task(task, OraclePolicy())
    assert traj.grade.passed, [r.id for r in traj.grade.results if not r.passed]
