"""The store app through a real in-process MCP session over a real SQLite back office."""

import json

import mcp
import pytest

from longhorizon.apps.store import state
from longhorizon.apps.store.server import build_server
from longhorizon.core.world import World

TODAY = "2026-03-10"


def seed(root, refund_limit_cents=None):
    state.create_store(
        root / "state" / "store.sqlite", store_name="Harbor Goods", today=TODAY, carriers=["UPS", "USPS"],
        refund_limit_cents=refund_limit_cents,
        suppliers=[
            {"id": "SUP-101", "name": "Acme Kitchen Supply", "email": "orders@acme.example", "lead_time_days": 5},
            {"id": "SUP-102", "name": "Bolt Outdoor", "email": "sales@bolt.example"},
            {"id": "SUP-103", "name": "Old Vendor", "active": False},
        ],
        products=[
            {"sku": "KIT-001", "name": "Chef Knife 8in", "category": "Kitchen", "price_cents": 4990, "cost_cents": 2100,
             "stock": 3, "reorder_point": 5, "reorder_qty": 20, "case_size": 6, "supplier_id": "SUP-101"},
            {"sku": "KIT-002", "name": "Cutting Board", "category": "Kitchen", "price_cents": 2500, "cost_cents": 900,
             "stock": 40, "reorder_point": 10, "supplier_id": "SUP-101"},
            {"sku": "OUT-001", "name": "Camping Lantern", "category": "Outdoor", "price_cents": 3450,
             "cost_cents": 1500, "stock": 2, "reorder_point": 4, "supplier_id": "SUP-102", "status": "discontinued"},
            {"sku": "OUT-002", "name": "Trail Bottle", "category": "Outdoor", "price_cents": 1800, "cost_cents": 600,
             "stock": 12, "reorder_point": 5, "supplier_id": "SUP-102"},
        ],
        customers=[
            {"id": "C-1001", "name": "Maya Ortiz", "email": "maya@example.com", "city": "Austin"},
            {"id": "C-1002", "name": "Ben Cho", "email": "ben.cho@example.com", "city": "Reno"},
        ],
        orders=[
            {"id": "SO-5001", "customer_id": "C-1001", "status": "delivered", "placed_at": "2026-02-20T10:15",
             "shipping_cents": 599,
             "lines": [{"sku": "KIT-001", "qty": 1, "unit_price_cents": 4990},
                       {"sku": "KIT-002", "qty": 2, "unit_price_cents": 2500}],
             "payments": [{"amount_cents": 10589, "method": "card", "paid_at": "2026-02-20T10:16"}],
             "shipments": [{"carrier": "UPS", "tracking": "1ZAAA", "status": "delivered", "shipped_at": "2026-02-21",
                            "delivered_at": "2026-02-24"}]},
            {"id": "SO-5002", "customer_id": "C-1001", "status": "paid", "placed_at": "2026-03-08T09:00",
             "lines": [{"sku": "OUT-002", "qty": 3, "unit_price_cents": 1800}],
             "payments": [{"amount_cents": 5400, "method": "paypal", "paid_at": "2026-03-08T09:01"}]},
            {"id": "SO-5003", "customer_id": "C-1002", "status": "pending", "placed_at": "2026-03-09T17:30",
             "lines": [{"sku": "KIT-002", "qty": 1, "unit_price_cents": 2500}]},
            {"id": "SO-5004", "customer_id": "C-1002", "status": "shipped", "placed_at": "2026-03-01T12:00",
             "lines": [{"sku": "KIT-001", "qty": 2, "unit_price_cents": 4990}],
             "payments": [{"amount_cents": 9980, "method": "card", "paid_at": "2026-03-01T12:01"}],
             "shipments": [{"carrier": "USPS", "tracking": "9400111", "status": "lost", "shipped_at": "2026-03-02"}]},
        ],
        purchase_orders=[
            {"id": "PO-0007", "supplier_id": "SUP-102", "status": "sent", "created_at": "2026-03-01",
             "sent_at": "2026-03-01", "lines": [{"sku": "OUT-002", "qty": 24, "unit_cost_cents": 600},
                                                {"sku": "OUT-001", "qty": 6, "unit_cost_cents": 1500}]},
            {"id": "PO-0006", "supplier_id": "SUP-101", "status": "received", "created_at": "2026-02-10",
             "sent_at": "2026-02-10", "received_at": "2026-02-15",
             "lines": [{"sku": "KIT-002", "qty": 10, "unit_cost_cents": 900, "received_qty": 10}]},
        ],
        supplier_invoices=[
            {"supplier_id": "SUP-101", "invoice_number": "AK-7781", "po_id": "PO-0006", "invoice_date": "2026-02-16",
             "lines": [{"sku": "KIT-002", "qty": 10, "unit_cost_cents": 900}]},
        ],
    )


@pytest.fixture
def sworld(tmp_path):
    return World.build(tmp_path / "w", seed)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def js(c, tool, **args):
    return json.loads(await call(c, tool, **args))


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


# -- state ---------------------------------------------------------------------------------------


def test_create_store_is_byte_identical(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("store").read_bytes() == b.db_path("store").read_bytes()


def test_money_parsing_and_display():
    assert state.parse_money("1,234.50") == 123450
    assert state.parse_money("$12") == 1200
    assert state.parse_money(12.5) == 1250
    assert state.money(123450) == "1234.50" and state.money(-5) == "-0.05"
    for bad in ("12.345", "abc", None, True, "nan"):
        with pytest.raises(ValueError):
            state.parse_money(bad)


def test_readers_give_cents_and_totals(sworld):
    o = state.order(sworld, "SO-5001")
    assert o["total_cents"] == 10589 and o["paid_cents"] == 10589 and o["refunded_cents"] == 0
    assert o["customer"]["email"] == "maya@example.com"
    assert state.order_statuses(sworld)["SO-5003"] == "pending"
    assert state.purchase_orders(sworld)["PO-0007"]["total_cents"] == 24 * 600 + 6 * 1500
    assert state.supplier_invoices(sworld)[0]["total_cents"] == 9000
    assert state.today(sworld) == TODAY


# -- store, catalogue, stock ---------------------------------------------------------------------


async def test_store_info(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        info = await js(c, "get_store_info")
        assert info["today"] == TODAY and info["carriers"] == ["UPS", "USPS"] and info["refund_limit"] is None
        assert info["order_transitions"]["paid"] == ["shipped", "cancelled"]


async def test_search_products_filters_and_pages(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        low = await js(c, "search_products", below_reorder_point=True)
        assert [p["sku"] for p in low["products"]] == ["KIT-001", "OUT-001"]
        active_low = await js(c, "search_products", below_reorder_point=True, status="active")
        assert [p["sku"] for p in active_low["products"]] == ["KIT-001"]
        page = await js(c, "search_products", limit=3)
        assert page["total"] == 4 and page["next_offset"] == 3
        assert (await js(c, "search_products", limit=3, offset=3))["next_offset"] is None
        assert [p["sku"] for p in (await js(c, "search_products", query="board"))["products"]] == ["KIT-002"]
        assert [p["sku"] for p in (await js(c, "search_products", supplier_id="sup-102"))["products"]] == [
            "OUT-001", "OUT-002"]
        assert (await js(c, "search_products", category="outdoor"))["total"] == 2
        assert "status" in await error(c, "search_products", status="gone")
        assert "limit" in await error(c, "search_products", limit=0)


async def test_get_and_update_product(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        p = await js(c, "get_product", sku="kit-001")
        assert p["cost"] == "21.00" and p["case_size"] == 6 and p["supplier"] == "Acme Kitchen Supply"
        assert "search_products" in await error(c, "get_product", sku="NOPE")
        await call(c, "update_product", sku="KIT-001", price="54.90", reorder_point=8)
        p = await js(c, "get_product", sku="KIT-001")
        assert p["price"] == "54.90" and p["reorder_point"] == 8
        assert "nothing to change" in await error(c, "update_product", sku="KIT-001")
        assert "status" in await error(c, "update_product", sku="KIT-001", status="archived")
        assert "amount" in await error(c, "update_product", sku="KIT-001", price="cheap")


async def test_adjust_stock_records_a_move_and_refuses_negative(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "now 5" in await call(c, "adjust_stock", sku="KIT-001", delta=2, reason="cycle count")
        assert "reason" in await error(c, "adjust_stock", sku="KIT-001", delta=1, reason=" ")
        assert "cannot remove" in await error(c, "adjust_stock", sku="KIT-001", delta=-6, reason="write-off")
        assert "not be 0" in await error(c, "adjust_stock", sku="KIT-001", delta=0, reason="nothing")
        hist = await js(c, "stock_history", sku="KIT-001")
        assert hist == [{"at": TODAY, "delta": 2, "reason": "cycle count", "ref": "adjustment"}]
    assert state.products(sworld)["KIT-001"]["stock"] == 5


# -- customers and orders -----------------------------------------------------------------------


async def test_customers(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        hits = await js(c, "search_customers", query="MAYA@")
        assert [h["id"] for h in hits] == ["C-1001"]
        cust = await js(c, "get_customer", customer_id="c-1001")
        assert [o["id"] for o in cust["orders"]] == ["SO-5002", "SO-5001"]
        assert "empty" in await error(c, "search_customers", query="  ")
        assert "search_customers" in await error(c, "get_customer", customer_id="C-9")


async def test_search_orders_filters(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        all_ = await js(c, "search_orders")
        assert [o["id"] for o in all_["orders"]] == ["SO-5003", "SO-5002", "SO-5004", "SO-5001"]
        assert [o["id"] for o in (await js(c, "search_orders", query="maya"))["orders"]] == ["SO-5002", "SO-5001"]
        assert [o["id"] for o in (await js(c, "search_orders", sku="KIT-001"))["orders"]] == ["SO-5004", "SO-5001"]
        assert [o["id"] for o in (await js(c, "search_orders", status="pending"))["orders"]] == ["SO-5003"]
        assert [o["id"] for o in (await js(c, "search_orders", since="2026-03-01", until="2026-03-08"))["orders"]] == [
            "SO-5002", "SO-5004"]
        assert [o["id"] for o in (await js(c, "search_orders", query="cutting board ben"))["orders"]] == ["SO-5003"]
        assert "YYYY-MM-DD" in await error(c, "search_orders", since="last week")
        assert "status" in await error(c, "search_orders", status="lost")


async def test_get_order_shows_totals_and_refundable(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        o = await js(c, "get_order", order_id="so-5001")
        assert o["total"] == "105.89" and o["refundable"] == "105.89" and o["shipping"] == "5.99"
        assert o["lines"][1] == {"line_no": 2, "sku": "KIT-002", "name": "Cutting Board", "qty": 2,
                                 "unit_price": "25.00", "line_total": "50.00", "refunded": "0.00"}
        assert o["shipments"][0]["tracking"] == "1ZAAA"
        assert "search_orders" in await error(c, "get_order", order_id="SO-1")


async def test_update_order_status_follows_the_workflow(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "can move to: returned" in await error(c, "update_order_status", order_id="SO-5001", status="paid")
        assert "cannot be marked paid" in await error(c, "update_order_status", order_id="SO-5003", status="paid")
        assert "cancel_order" in await error(c, "update_order_status", order_id="SO-5003", status="cancelled")
        assert "create_shipment" in await error(c, "update_order_status", order_id="SO-5002", status="shipped")
        assert "already" in await error(c, "update_order_status", order_id="SO-5002", status="paid")
        assert "status must" in await error(c, "update_order_status", order_id="SO-5002", status="lost")
        await call(c, "update_order_status", order_id="SO-5001", status="returned", note="customer sent it back")
        o = await js(c, "get_order", order_id="SO-5001")
        assert o["status"] == "returned" and "customer sent it back" in o["history"][-1]["event"]


async def test_cancel_order_only_before_shipping(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        text = await call(c, "cancel_order", order_id="SO-5002", reason="customer request")
        assert "54.00" in text and "issue_refund" in text
        assert "reason" in await error(c, "cancel_order", order_id="SO-5003", reason="")
        assert "only pending or paid" in await error(c, "cancel_order", order_id="SO-5004", reason="too late")
        assert "Nothing was paid" in await call(c, "cancel_order", order_id="SO-5003", reason="duplicate order")
    assert state.order_statuses(sworld)["SO-5002"] == "cancelled"


async def test_add_order_note(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        await call(c, "add_order_note", order_id="SO-5001", note="escalated to manager")
        assert "note" in await error(c, "add_order_note", order_id="SO-5001", note="")
    assert state.order(sworld, "SO-5001")["events"] == [{"at": TODAY, "event": "note: escalated to manager"}]


# -- payments and refunds -----------------------------------------------------------------------


async def test_issue_refund_within_limits(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        text = await call(c, "issue_refund", order_id="SO-5001", amount="49.90", reason="damaged knife", line_no=1)
        assert "RF-00001" in text and "55.99 remains" in text
        assert "at most 0.00" in await error(c, "issue_refund", order_id="SO-5001", amount=1, reason="x again",
                                             line_no=1)
        assert "at most 55.99" in await error(c, "issue_refund", order_id="SO-5001", amount="60", reason="too much")
        assert "reason" in await error(c, "issue_refund", order_id="SO-5001", amount="5", reason="")
        assert "positive" in await error(c, "issue_refund", order_id="SO-5001", amount="-5", reason="negative")
        assert "two decimals" in await error(c, "issue_refund", order_id="SO-5001", amount="1.234", reason="odd")
        assert "no line 7" in await error(c, "issue_refund", order_id="SO-5001", amount="1", reason="bad line",
                                          line_no=7)
        assert "nothing left" in await error(c, "issue_refund", order_id="SO-5003", amount="1", reason="unpaid")
        await call(c, "issue_refund", order_id="SO-5001", amount=5.99, reason="late delivery: shipping")
        refunds = await js(c, "search_refunds", order_id="SO-5001")
        assert [r["amount"] for r in refunds] == ["5.99", "49.90"]
        o = await js(c, "get_order", order_id="SO-5001")
        assert o["refunded"] == "55.89" and o["refundable"] == "50.00" and o["lines"][0]["refunded"] == "49.90"
    assert [r["amount_cents"] for r in state.refunds(sworld)] == [4990, 599]


async def test_refund_limit_is_enforced_when_set(tmp_path):
    w = World.build(tmp_path / "w", lambda root: seed(root, refund_limit_cents=5000))
    async with mcp.Client(build_server(w)) as c:
        assert (await js(c, "get_store_info"))["refund_limit"] == "50.00"
        assert "manager" in await error(c, "issue_refund", order_id="SO-5001", amount="50.01", reason="big one")
        await call(c, "issue_refund", order_id="SO-5001", amount="50.00", reason="within limit")


async def test_search_payments(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        pays = await js(c, "search_payments", since="2026-03-01")
        assert [p["order_id"] for p in pays] == ["SO-5002", "SO-5004"]
        assert (await js(c, "search_payments", order_id="so-5001"))[0]["amount"] == "105.89"


# -- shipments ------------------------------------------------------------------------------------


async def test_create_shipment_ships_a_paid_order(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "unknown carrier" in await error(c, "create_shipment", order_id="SO-5002", carrier="Pigeon")
        assert "only paid" in await error(c, "create_shipment", order_id="SO-5003", carrier="UPS")
        text = await call(c, "create_shipment", order_id="SO-5002", carrier="ups")
        assert "SHP-00003" in text and "tracking number 1Z" in text
        o = await js(c, "get_order", order_id="SO-5002")
        assert o["status"] == "shipped" and o["shipments"][0]["status"] == "label_created"
        assert "replaces=" in await error(c, "create_shipment", order_id="SO-5002", carrier="UPS")
        await call(c, "update_order_status", order_id="SO-5002", status="delivered")
        o = await js(c, "get_order", order_id="SO-5002")
        assert o["shipments"][0]["status"] == "delivered" and o["shipments"][0]["delivered_at"] == TODAY
    assert state.products(sworld)["OUT-002"]["stock"] == 9


async def test_replacement_shipment_only_for_lost_ones(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "only a lost or returned" in await error(c, "create_shipment", order_id="SO-5001", carrier="UPS",
                                                         replaces="SHP-00001")
        assert "no shipment" in await error(c, "create_shipment", order_id="SO-5004", carrier="UPS", replaces="SHP-9")
        await call(c, "adjust_stock", sku="KIT-001", delta=-2, reason="damaged in warehouse")
        assert "not enough stock" in await error(c, "create_shipment", order_id="SO-5004", carrier="UPS",
                                                 replaces="SHP-00002")
        await call(c, "adjust_stock", sku="KIT-001", delta=5, reason="found a case")
        text = await call(c, "create_shipment", order_id="SO-5004", carrier="USPS", replaces="9400111")
        assert "SHP-00003" in text
        assert "already been replaced" in await error(c, "create_shipment", order_id="SO-5004", carrier="UPS",
                                                      replaces="SHP-00002")
        assert "no line" in await error(c, "create_shipment", order_id="SO-5002", carrier="UPS", line_nos=[9])
        ship = await js(c, "get_shipment", shipment_id="SHP-00003")
        assert ship["replaces"] == "SHP-00002" and ship["carrier"] == "USPS" and len(ship["tracking"]) == 22
        assert [s["id"] for s in await js(c, "search_shipments", status="lost")] == ["SHP-00002"]
        assert [s["id"] for s in await js(c, "search_shipments", order_id="SO-5004")] == ["SHP-00003", "SHP-00002"]
        assert "search_shipments" in await error(c, "get_shipment", shipment_id="nope")
    assert state.products(sworld)["KIT-001"]["stock"] == 4


# -- suppliers and purchasing --------------------------------------------------------------------


async def test_suppliers(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert [s["id"] for s in await js(c, "search_suppliers", query="bolt")] == ["SUP-102"]
        assert len(await js(c, "search_suppliers")) == 3
        sup = await js(c, "get_supplier", supplier_id="sup-101")
        assert sup["products"] == 2 and sup["lead_time_days"] == 5
        assert "search_suppliers" in await error(c, "get_supplier", supplier_id="SUP-999")


async def test_purchase_order_lifecycle(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "inactive" in await error(c, "create_purchase_order", supplier_id="SUP-103")
        assert "PO-0008" in await call(c, "create_purchase_order", supplier_id="SUP-101", note="weekly reorder")
        assert "no lines" in await error(c, "send_purchase_order", po_id="PO-0008")
        assert "line 1" in await call(c, "add_po_line", po_id="PO-0008", sku="KIT-001", qty=24)
        assert "bought from SUP-102" in await error(c, "add_po_line", po_id="PO-0008", sku="OUT-002", qty=5)
        assert "already line 1" in await error(c, "add_po_line", po_id="PO-0008", sku="KIT-001", qty=5)
        assert "positive" in await error(c, "add_po_line", po_id="PO-0008", sku="KIT-002", qty=0)
        await call(c, "add_po_line", po_id="PO-0008", sku="KIT-002", qty=10, unit_cost="8.50")
        await call(c, "update_po_line", po_id="PO-0008", line_no=1, qty=30)
        assert "no line 5" in await error(c, "update_po_line", po_id="PO-0008", line_no=5, qty=3)
        await call(c, "remove_po_line", po_id="PO-0008", line_no=2)
        po = await js(c, "get_purchase_order", po_id="po-0008")
        assert po["status"] == "draft" and [(ln["sku"], ln["qty"], ln["unit_cost"]) for ln in po["lines"]] == [
            ("KIT-001", 30, "21.00")]
        await call(c, "send_purchase_order", po_id="PO-0008")
        assert "only draft" in await error(c, "add_po_line", po_id="PO-0008", sku="KIT-002", qty=1)
        listed = await js(c, "search_purchase_orders", status="sent")
        assert [p["id"] for p in listed["purchase_orders"]] == ["PO-0008", "PO-0007"]
        assert [p["id"] for p in (await js(c, "search_purchase_orders", sku="OUT-001"))["purchase_orders"]] == ["PO-0007"]
        await call(c, "cancel_purchase_order", po_id="PO-0008", reason="ordered by mistake")
        assert "only draft or sent" in await error(c, "cancel_purchase_order", po_id="PO-0006", reason="too late")
    assert state.purchase_orders(sworld)["PO-0008"]["status"] == "cancelled"


async def test_discontinued_products_cannot_be_ordered(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        await call(c, "create_purchase_order", supplier_id="SUP-102")
        assert "discontinued" in await error(c, "add_po_line", po_id="PO-0008", sku="OUT-001", qty=6)


async def test_receive_purchase_order_updates_stock(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "not on PO-0007" in await error(c, "receive_purchase_order", po_id="PO-0007",
                                               lines=[{"sku": "KIT-001", "qty": 1}])
        assert "twice" in await error(c, "receive_purchase_order", po_id="PO-0007",
                                      lines=[{"sku": "OUT-002", "qty": 1}, {"sku": "out-002", "qty": 2}])
        text = await call(c, "receive_purchase_order", po_id="PO-0007", lines=[{"sku": "OUT-002", "qty": 20}],
                          note="4 bottles short, lanterns missing")
        assert "OUT-002: ordered 24, received 20 (short 4)" in text and "OUT-001: ordered 6, received 0 (short 6)" in text
        po = await js(c, "get_purchase_order", po_id="PO-0007")
        assert po["status"] == "received" and po["receipt_note"].startswith("4 bottles")
        assert [ln["received_qty"] for ln in po["lines"]] == [20, 0]
        assert "only sent" in await error(c, "receive_purchase_order", po_id="PO-0007", lines=[])
    assert state.products(sworld)["OUT-002"]["stock"] == 32
    assert state.stock_moves(sworld)[-1]["ref"] == "PO-0007"


# -- supplier invoices ---------------------------------------------------------------------------


async def test_record_supplier_invoice_and_refuse_duplicates(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert [i["id"] for i in await js(c, "search_supplier_invoices", invoice_number="ak 7781")] == ["SI-00001"]
        assert "already recorded as SI-00001" in await error(
            c, "record_supplier_invoice", supplier_id="SUP-101", invoice_number="AK7781", invoice_date="2026-03-01",
            lines=[{"sku": "KIT-002", "qty": 1, "unit_cost": "9.00"}])
        assert "belongs to SUP-102" in await error(
            c, "record_supplier_invoice", supplier_id="SUP-101", invoice_number="AK-7800", invoice_date="2026-03-01",
            po_id="PO-0007", lines=[{"sku": "KIT-002", "qty": 1, "unit_cost": "9.00"}])
        assert "add up to 144.00" in await error(
            c, "record_supplier_invoice", supplier_id="SUP-102", invoice_number="B-1", invoice_date="2026-03-09",
            po_id="PO-0007", total="150", lines=[{"sku": "OUT-002", "qty": 24, "unit_cost": "6.00"}])
        assert "at least one line" in await error(
            c, "record_supplier_invoice", supplier_id="SUP-102", invoice_number="B-1", invoice_date="2026-03-09",
            lines=[])
        assert "date" in await error(
            c, "record_supplier_invoice", supplier_id="SUP-102", invoice_number="B-1", invoice_date="soon",
            lines=[{"sku": "OUT-002", "qty": 24, "unit_cost": "6.00"}])
        text = await call(c, "record_supplier_invoice", supplier_id="SUP-102", invoice_number="B-1",
                          invoice_date="2026-03-09", po_id="po-0007", total="144.00",
                          lines=[{"sku": "OUT-002", "qty": 24, "unit_cost": 6}])
        assert "SI-00002" in text and "144.00" in text
        inv = await js(c, "get_supplier_invoice", invoice_id="SI-00002")
        assert inv["po_id"] == "PO-0007" and inv["lines"] == [{"line_no": 1, "sku": "OUT-002", "qty": 24,
                                                               "unit_cost": "6.00"}]
        assert [i["id"] for i in await js(c, "search_supplier_invoices", po_id="PO-0007")] == ["SI-00002"]
        assert "search_supplier_invoices" in await error(c, "get_supplier_invoice", invoice_id="SI-9")
    assert [i["invoice_number"] for i in state.supplier_invoices(sworld)] == ["AK-7781", "B-1"]


async def test_badly_typed_arguments_are_tool_errors(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "valid integer" in await error(c, "adjust_stock", sku="KIT-001", delta="many", reason="count")
        assert "qty" in await error(c, "receive_purchase_order", po_id="PO-0007", lines=[{"sku": "OUT-002"}])


async def test_missing_store_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no store" in await error(c, "get_store_info")


async def test_set_product_sourcing_switches_supplier_and_cost(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "nothing to change" in await error(c, "set_product_sourcing", sku="KIT-002")
        assert "inactive" in await error(c, "set_product_sourcing", sku="KIT-002", supplier_id="SUP-103")
        assert "search_suppliers" in await error(c, "set_product_sourcing", sku="KIT-002", supplier_id="SUP-999")
        assert "positive" in await error(c, "set_product_sourcing", sku="KIT-002", cost="0")
        text = await call(c, "set_product_sourcing", sku="kit-002", supplier_id="sup-102", cost="8.75")
        assert "SUP-102" in text and "8.75" in text
        p = await js(c, "get_product", sku="KIT-002")
        assert p["supplier_id"] == "SUP-102" and p["cost"] == "8.75"
        pid = (await call(c, "create_purchase_order", supplier_id="SUP-102")).split("purchase order ")[1].split()[0]
        assert "at 8.75" in await call(c, "add_po_line", po_id=pid, sku="KIT-002", qty=4)
        assert "cost = 9.10" in await call(c, "set_product_sourcing", sku="KIT-002", cost=9.1)
    assert state.products(sworld)["KIT-002"]["cost_cents"] == 910
    assert state.purchase_orders(sworld)["PO-0008"]["lines"][0]["unit_cost_cents"] == 875


async def test_record_payment_up_to_the_outstanding_balance(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "outstanding" in await error(c, "record_payment", order_id="SO-5003", amount="30.00")
        assert "already fully paid" in await error(c, "record_payment", order_id="SO-5002", amount="1")
        assert "future" in await error(c, "record_payment", order_id="SO-5003", amount="5", paid_at="2026-03-11")
        assert "positive" in await error(c, "record_payment", order_id="SO-5003", amount="-5")
        text = await call(c, "record_payment", order_id="so-5003", amount="10.00", paid_at="2026-03-09",
                          reference="SO5003 part")
        assert "PAY-00004" in text and "15.00 is still outstanding" in text
        assert "cannot be marked paid" in await error(c, "update_order_status", order_id="SO-5003", status="paid")
        text = await call(c, "record_payment", order_id="SO-5003", amount=15)
        assert "fully paid" in text
        await call(c, "update_order_status", order_id="SO-5003", status="paid")
        o = await js(c, "get_order", order_id="SO-5003")
        assert o["paid"] == "25.00" and [p["paid_at"] for p in o["payments"]] == ["2026-03-09", TODAY]
        assert any("ref SO5003 part" in e["event"] for e in o["history"])
        await call(c, "cancel_order", order_id="SO-5002", reason="customer request")
    async with mcp.Client(build_server(sworld)) as c:
        assert "cancelled" in await error(c, "record_payment", order_id="SO-5002", amount="1")
    assert [p["method"] for p in (state.order(sworld, "SO-5003"))["payments"]] == ["bank transfer", "bank transfer"]
