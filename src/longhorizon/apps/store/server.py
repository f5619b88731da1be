"""The `store` app: an MCP server over an e-commerce back office (``state/store.sqlite``).

Every tool opens its own short connection, so calls stay independent and the file is always
consistent on disk. Money goes in as "12.50" (or a number) and comes out as text with two
decimals; it is kept as integer cents. Business rules live here, not in the agent's goodwill:
order status changes follow the workflow, refunds never exceed what was paid and not yet
refunded, stock never goes negative, purchase orders are edited only while in draft.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from datetime import date
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from longhorizon.apps.common import ACT, ADD, READ, SET, AppServer, cap, server_builder, sqlite_connector
from longhorizon.apps.store.state import (
    ORDER_STATUSES,
    PO_STATUSES,
    PRODUCT_STATUSES,
    SHIPMENT_STATUSES,
    TRANSITIONS,
    load_invoice,
    load_order,
    load_po,
    meta,
    money,
    next_id,
    norm_code,
    parse_money,
)

MAX_LIMIT = 100
MIN_REASON = 3

INSTRUCTIONS = (
    "The store's back office: products and stock, customers, orders (pending -> paid -> shipped -> "
    "delivered, or cancelled / returned), payments, refunds, shipments, suppliers, purchase orders "
    "(draft -> sent -> received) and supplier invoices. Ids look like SO-10234 (orders), C-1042 "
    "(customers), SUP-101 (suppliers), PO-2041 (purchase orders). Money is written with two "
    "decimals, e.g. \"149.90\". get_store_info gives today's date and the carriers."
)


class ReceivedLine(BaseModel):
    """One SKU counted in a delivery."""

    sku: str = Field(description="the SKU as it appears on the purchase order")
    qty: int = Field(description="units actually received (0 if none arrived)")


class InvoiceLine(BaseModel):
    """One line of a supplier invoice."""

    sku: str = Field(description="the SKU invoiced")
    qty: int = Field(description="units invoiced")
    unit_cost: float | str = Field(description='price per unit, e.g. "12.40"')


def _dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


def _amount(value: Any, name: str) -> int:
    try:
        return parse_money(value)
    except ValueError as exc:
        raise ToolError(f"{name}={value!r} is not a money amount ({exc}); write it like \"149.90\"") from None


def _day(value: str, name: str) -> str:
    try:
        return date.fromisoformat(str(value).strip()[:10]).isoformat()
    except ValueError:
        raise ToolError(f"{name}={value!r} is not a date; use YYYY-MM-DD") from None


def _reason(text: str, what: str = "reason") -> str:
    text = (text or "").strip()
    if len(text) < MIN_REASON:
        raise ToolError(f"a {what} is required: say briefly why (at least {MIN_REASON} characters)")
    return text


def _page(limit: int, offset: int = 0) -> None:
    if not 1 <= limit <= MAX_LIMIT or offset < 0:
        raise ToolError(f"limit must be 1-{MAX_LIMIT} and offset >= 0")


def _tracking(carrier: str, order_id: str, shipment_id: str) -> str:
    digest = hashlib.sha256(f"{carrier}|{order_id}|{shipment_id}".encode()).hexdigest()
    digits = str(int(digest[:24], 16))
    if carrier == "UPS":
        return "1Z" + digest[:16].upper()
    if carrier == "USPS":
        return ("9400" + digits)[:22].ljust(22, "0")
    if carrier == "DHL":
        return digits[:10].ljust(10, "0")
    return digits[:12].ljust(12, "0")


def _show_order(o: dict) -> dict:
    refunded_by_line: dict[int, int] = {}
    for r in o["refunds"]:
        if r["line_no"] is not None:
            refunded_by_line[r["line_no"]] = refunded_by_line.get(r["line_no"], 0) + r["amount_cents"]
    return {
        "id": o["id"], "status": o["status"], "placed_at": o["placed_at"], "customer": o["customer"],
        "lines": [{
            "line_no": ln["line_no"], "sku": ln["sku"], "name": ln["name"], "qty": ln["qty"],
            "unit_price": money(ln["unit_price_cents"]), "line_total": money(ln["qty"] * ln["unit_price_cents"]),
            "refunded": money(refunded_by_line.get(ln["line_no"], 0)),
        } for ln in o["lines"]],
        "subtotal": money(o["subtotal_cents"]), "shipping": money(o["shipping_cents"]),
        "total": money(o["total_cents"]),
        "payments": [{"id": p["id"], "amount": money(p["amount_cents"]), "method": p["method"], "paid_at": p["paid_at"]}
                     for p in o["payments"]],
        "paid": money(o["paid_cents"]),
        "refunds": [{"id": r["id"], "amount": money(r["amount_cents"]), "reason": r["reason"], "line_no": r["line_no"],
                     "created_at": r["created_at"]} for r in o["refunds"]],
        "refunded": money(o["refunded_cents"]),
        "refundable": money(o["paid_cents"] - o["refunded_cents"]),
        "shipments": [{k: s[k] for k in ("id", "carrier", "tracking", "status", "shipped_at", "delivered_at", "replaces")}
                      for s in o["shipments"]],
        "note": o["note"],
        "history": o["events"],
    }


def _show_po(po: dict, supplier_name: str) -> dict:
    return {
        "id": po["id"], "supplier_id": po["supplier_id"], "supplier": supplier_name, "status": po["status"],
        "created_at": po["created_at"], "sent_at": po["sent_at"], "received_at": po["received_at"],
        "note": po["note"], "receipt_note": po["receipt_note"],
        "lines": [{
            "line_no": ln["line_no"], "sku": ln["sku"], "qty": ln["qty"], "unit_cost": money(ln["unit_cost_cents"]),
            "line_total": money(ln["qty"] * ln["unit_cost_cents"]), "received_qty": ln["received_qty"],
        } for ln in po["lines"]],
        "total": money(po["total_cents"]),
    }


def _show_invoice(inv: dict) -> dict:
    return {
        "id": inv["id"], "supplier_id": inv["supplier_id"], "invoice_number": inv["invoice_number"],
        "po_id": inv["po_id"], "invoice_date": inv["invoice_date"], "total": money(inv["total_cents"]),
        "recorded_at": inv["recorded_at"], "note": inv["note"],
        "lines": [{"line_no": ln["line_no"], "sku": ln["sku"], "qty": ln["qty"], "unit_cost": money(ln["unit_cost_cents"])}
                  for ln in inv["lines"]],
    }


def _product_summary(r: sqlite3.Row) -> dict:
    return {"sku": r["sku"], "name": r["name"], "category": r["category"], "price": money(r["price_cents"]),
            "stock": r["stock"], "reorder_point": r["reorder_point"], "supplier_id": r["supplier_id"],
            "status": r["status"]}


def make_app(world):
    db_path = world.db_path("store")
    srv = AppServer("store", instructions=INSTRUCTIONS)

    connect = sqlite_connector(db_path, "store", "store")

    def today(conn) -> str:
        return meta(conn)["today"]

    def carriers(conn) -> list[str]:
        return json.loads(meta(conn).get("carriers", "[]"))

    def get_order_or_fail(conn, order_id: str) -> dict:
        o = load_order(conn, (order_id or "").strip().upper())
        if o is None:
            raise ToolError(f"no order {order_id!r}; find order ids with search_orders (they look like SO-10234)")
        return o

    def product_row(conn, sku: str) -> sqlite3.Row:
        key = (sku or "").strip()
        row = conn.execute("SELECT * FROM products WHERE sku = ?", (key,)).fetchone()
        if row is None:
            row = conn.execute("SELECT * FROM products WHERE upper(sku) = upper(?)", (key,)).fetchone()
        if row is None:
            raise ToolError(f"no product with SKU {sku!r}; find SKUs with search_products")
        return row

    def supplier_row(conn, supplier_id: str) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM suppliers WHERE upper(id) = upper(?)", ((supplier_id or "").strip(),)).fetchone()
        if row is None:
            raise ToolError(f"no supplier {supplier_id!r}; find supplier ids with search_suppliers")
        return row

    def get_po_or_fail(conn, po_id: str) -> dict:
        po = load_po(conn, (po_id or "").strip().upper())
        if po is None:
            raise ToolError(f"no purchase order {po_id!r}; find ids with search_purchase_orders")
        return po

    def draft_po(conn, po_id: str) -> dict:
        po = get_po_or_fail(conn, po_id)
        if po["status"] != "draft":
            raise ToolError(f"purchase order {po['id']} is {po['status']}; only draft purchase orders can be edited")
        return po

    def event(conn, order_id: str, text: str) -> None:
        conn.execute("INSERT INTO order_events (order_id, at, event) VALUES (?, ?, ?)", (order_id, today(conn), text))

    def move_stock(conn, sku: str, delta: int, reason: str, ref: str = "") -> int:
        row = product_row(conn, sku)
        new = row["stock"] + delta
        if new < 0:
            raise ToolError(f"{row['sku']} has {row['stock']} in stock; cannot remove {-delta}")
        conn.execute("UPDATE products SET stock = ? WHERE sku = ?", (new, row["sku"]))
        conn.execute("INSERT INTO stock_moves (sku, delta, reason, ref, at) VALUES (?, ?, ?, ?, ?)",
                     (row["sku"], delta, reason, ref, today(conn)))
        return new

    # -- store, catalogue, stock -----------------------------------------------------------------

    @srv.tool(READ)
    def get_store_info() -> str:
        """The store's name, today's date, currency, shipping carriers, the largest refund this
        account may issue (null: no limit) and the status workflows.

        Returns JSON {store, today, currency, carriers, refund_limit, order_transitions,
        purchase_order_statuses}."""
        with closing(connect()) as conn:
            m = meta(conn)
        return _dumps({
            "store": m.get("store_name", ""), "today": m["today"], "currency": m.get("currency", "USD"),
            "carriers": json.loads(m.get("carriers", "[]")),
            "refund_limit": money(int(m["refund_limit_cents"])) if "refund_limit_cents" in m else None,
            "order_transitions": {k: list(v) for k, v in TRANSITIONS.items()},
            "purchase_order_statuses": list(PO_STATUSES),
        })

    @srv.tool(READ)
    def search_products(query: str = "", category: str | None = None, supplier_id: str | None = None,
                        status: str | None = None, below_reorder_point: bool = False,
                        limit: int = 50, offset: int = 0) -> str:
        """Search the catalogue, ordered by SKU.

        Args:
            query: words that must all appear in the SKU or name (case-insensitive); "" for all.
            category: only this category (exact, case-insensitive).
            supplier_id: only products bought from this supplier, e.g. "SUP-101".
            status: "active" or "discontinued".
            below_reorder_point: only products whose stock is at or below their reorder point.
            limit: page size (1-100); offset: rows to skip (use next_offset).

        Returns JSON {total, offset, products: [{sku, name, category, price, stock,
        reorder_point, supplier_id, status}], next_offset} (null on the last page)."""
        _page(limit, offset)
        if status is not None and status not in PRODUCT_STATUSES:
            raise ToolError(f"status must be one of {', '.join(PRODUCT_STATUSES)}")
        words = (query or "").lower().split()
        with closing(connect()) as conn:
            rows = conn.execute("SELECT * FROM products ORDER BY sku").fetchall()
        hits = []
        for r in rows:
            if category and r["category"].lower() != category.strip().lower():
                continue
            if supplier_id and (r["supplier_id"] or "").upper() != supplier_id.strip().upper():
                continue
            if status and r["status"] != status:
                continue
            if below_reorder_point and r["stock"] > r["reorder_point"]:
                continue
            hay = f"{r['sku']} {r['name']}".lower()
            if all(w in hay for w in words):
                hits.append(_product_summary(r))
        page = hits[offset:offset + limit]
        nxt = offset + len(page) if offset + len(page) < len(hits) else None
        return _dumps({"total": len(hits), "offset": offset, "products": page, "next_offset": nxt})

    @srv.tool(READ)
    def get_product(sku: str) -> str:
        """Everything about one product, including its cost, reorder settings, case size
        (purchase quantities should be whole cases) and supplier.

        Returns JSON {sku, name, category, price, cost, stock, reorder_point,
        reorder_qty, case_size, supplier_id, supplier, status}."""
        with closing(connect()) as conn:
            r = product_row(conn, sku)
            sup = conn.execute("SELECT name FROM suppliers WHERE id = ?", (r["supplier_id"],)).fetchone()
        out = _product_summary(r)
        out.update({"cost": money(r["cost_cents"]), "reorder_qty": r["reorder_qty"], "case_size": r["case_size"],
                    "supplier": sup["name"] if sup else None})
        return _dumps(out)

    @srv.tool(SET)
    def update_product(sku: str, price: float | str | None = None, reorder_point: int | None = None,
                       reorder_qty: int | None = None, status: str | None = None) -> str:
        """Change a product's catalogue settings; only the fields you pass change (stock is
        changed with adjust_stock).

        Args:
            sku: the product.
            price: new selling price, e.g. "49.90".
            reorder_point: stock level at or below which it should be reordered.
            reorder_qty: the usual reorder quantity.
            status: "active" or "discontinued" (discontinued products cannot be ordered from suppliers).

        Returns what changed."""
        with closing(connect()) as conn, conn:
            r = product_row(conn, sku)
            changes: dict[str, Any] = {}
            if price is not None:
                cents = _amount(price, "price")
                if cents <= 0:
                    raise ToolError("price must be positive")
                changes["price_cents"] = cents
            for name, value in (("reorder_point", reorder_point), ("reorder_qty", reorder_qty)):
                if value is not None:
                    if value < 0:
                        raise ToolError(f"{name} must be 0 or more")
                    changes[name] = value
            if status is not None:
                if status not in PRODUCT_STATUSES:
                    raise ToolError(f"status must be one of {', '.join(PRODUCT_STATUSES)}")
                changes["status"] = status
            if not changes:
                raise ToolError("nothing to change: pass price, reorder_point, reorder_qty or status")
            conn.execute(f"UPDATE products SET {', '.join(f'{k} = ?' for k in changes)} WHERE sku = ?",
                         [*changes.values(), r["sku"]])
        shown = {k.replace("_cents", ""): (money(v) if k.endswith("_cents") else v) for k, v in changes.items()}
        return f"Updated {r['sku']}: " + ", ".join(f"{k} = {v}" for k, v in shown.items()) + "."

    @srv.tool(SET)
    def set_product_sourcing(sku: str, supplier_id: str | None = None, cost: float | str | None = None) -> str:
        """Change where a product is bought from and/or what we pay for it (after a quote round,
        or when a supplier changes its price). Only the fields you pass change. Purchase orders
        already raised keep their own supplier and prices.

        Args:
            sku: the product.
            supplier_id: the supplier we now buy it from, e.g. "SUP-104" (must be active).
            cost: the new purchase cost per unit, e.g. "12.40" (what add_po_line uses by default).

        Returns what changed."""
        with closing(connect()) as conn, conn:
            r = product_row(conn, sku)
            changes: dict[str, Any] = {}
            if supplier_id is not None:
                sup = supplier_row(conn, supplier_id)
                if not sup["active"]:
                    raise ToolError(f"supplier {sup['id']} is inactive; we no longer buy from them")
                changes["supplier_id"] = sup["id"]
            if cost is not None:
                cents = _amount(cost, "cost")
                if cents <= 0:
                    raise ToolError("cost must be positive")
                changes["cost_cents"] = cents
            if not changes:
                raise ToolError("nothing to change: pass supplier_id and/or cost")
            conn.execute(f"UPDATE products SET {', '.join(f'{k} = ?' for k in changes)} WHERE sku = ?",
                         [*changes.values(), r["sku"]])
        shown = [f"supplier = {changes['supplier_id']}"] if "supplier_id" in changes else []
        if "cost_cents" in changes:
            shown.append(f"cost = {money(changes['cost_cents'])}")
        return f"Updated {r['sku']}: " + ", ".join(shown) + "."

    @srv.tool(ACT)
    def adjust_stock(sku: str, delta: int, reason: str) -> str:
        """Correct a product's stock on hand (a count, damage, write-off, a customer return put back
        on the shelf). Purchase-order receipts and shipments move stock by themselves.

        Args:
            sku: the product.
            delta: units to add (positive) or remove (negative); stock cannot go below 0.
            reason: why (required), e.g. "cycle count", "damaged in warehouse".

        Returns the new stock level."""
        if delta == 0:
            raise ToolError("delta must not be 0")
        why = _reason(reason)
        with closing(connect()) as conn, conn:
            r = product_row(conn, sku)
            new = move_stock(conn, r["sku"], delta, why, "adjustment")
        return f"Adjusted {r['sku']} by {delta:+d} ({why}); stock is now {new}."

    @srv.tool(READ)
    def stock_history(sku: str, limit: int = 50) -> str:
        """A product's recorded stock movements, newest first: receipts, shipments, adjustments.

        Returns JSON [{at, delta, reason, ref}]."""
        _page(limit)
        with closing(connect()) as conn:
            r = product_row(conn, sku)
            rows = conn.execute("SELECT at, delta, reason, ref FROM stock_moves WHERE sku = ? ORDER BY id DESC LIMIT ?",
                                (r["sku"], limit)).fetchall()
        return _dumps([dict(x) for x in rows])

    # -- customers ---------------------------------------------------------------------------------

    @srv.tool(READ)
    def search_customers(query: str, limit: int = 25) -> str:
        """Find customers whose id, name, email or phone contains ``query`` (case-insensitive).

        Returns JSON [{id, name, email, city}]."""
        _page(limit)
        q = (query or "").strip().lower()
        if not q:
            raise ToolError("query must not be empty: give part of a name, email, phone or customer id")
        with closing(connect()) as conn:
            rows = conn.execute("SELECT * FROM customers ORDER BY id").fetchall()
        hits = [{"id": r["id"], "name": r["name"], "email": r["email"], "city": r["city"]} for r in rows
                if any(q in (r[k] or "").lower() for k in ("id", "name", "email", "phone"))]
        return _dumps(hits[:limit])

    @srv.tool(READ)
    def get_customer(customer_id: str) -> str:
        """One customer with their orders (newest first).

        Returns JSON {id, name, email, phone, city, since, orders: [{id, status,
        placed_at, total}]}."""
        with closing(connect()) as conn:
            r = conn.execute("SELECT * FROM customers WHERE upper(id) = upper(?)", ((customer_id or "").strip(),)).fetchone()
            if r is None:
                raise ToolError(f"no customer {customer_id!r}; find ids with search_customers")
            ids = [x[0] for x in conn.execute(
                "SELECT id FROM orders WHERE customer_id = ? ORDER BY placed_at DESC, id DESC", (r["id"],))]
            orders = [load_order(conn, i) for i in ids]
        return _dumps({
            "id": r["id"], "name": r["name"], "email": r["email"], "phone": r["phone"], "city": r["city"],
            "since": r["since"],
            "orders": [{"id": o["id"], "status": o["status"], "placed_at": o["placed_at"], "total": money(o["total_cents"])}
                       for o in orders],
        })

    # -- orders --------------------------------------------------------------------------------------

    @srv.tool(READ)
    def search_orders(query: str = "", customer_id: str | None = None, status: str | None = None,
                      sku: str | None = None, since: str | None = None, until: str | None = None,
                      limit: int = 25, offset: int = 0) -> str:
        """Search orders, newest first.

        Args:
            query: words that must all appear in the order id, the customer's name or email, or a
                product name/SKU on the order; "" for all.
            customer_id: only this customer's orders.
            status: one of pending, paid, shipped, delivered, cancelled, returned.
            sku: only orders with this SKU on a line.
            since / until: placed on or after / on or before this day (YYYY-MM-DD).
            limit: page size (1-100); offset: rows to skip (use next_offset).

        Returns JSON {total, offset, orders: [{id, customer_id, customer, status,
        placed_at, total, paid, refunded}], next_offset}."""
        _page(limit, offset)
        if status is not None and status not in ORDER_STATUSES:
            raise ToolError(f"status must be one of {', '.join(ORDER_STATUSES)}")
        lo = _day(since, "since") if since else None
        hi = _day(until, "until") if until else None
        words = (query or "").lower().split()
        with closing(connect()) as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM orders ORDER BY placed_at DESC, id DESC")]
            found = []
            for oid in ids:
                o = load_order(conn, oid)
                if customer_id and o["customer"]["id"].upper() != customer_id.strip().upper():
                    continue
                if status and o["status"] != status:
                    continue
                if sku and not any(ln["sku"].upper() == sku.strip().upper() for ln in o["lines"]):
                    continue
                if lo and o["placed_at"][:10] < lo or hi and o["placed_at"][:10] > hi:
                    continue
                hay = " ".join([o["id"], o["customer"].get("name", ""), o["customer"].get("email", ""),
                                *(f"{ln['sku']} {ln['name']}" for ln in o["lines"])]).lower()
                if all(w in hay for w in words):
                    found.append(o)
        page = found[offset:offset + limit]
        nxt = offset + len(page) if offset + len(page) < len(found) else None
        return _dumps({"total": len(found), "offset": offset, "orders": [{
            "id": o["id"], "customer_id": o["customer"]["id"], "customer": o["customer"].get("name"),
            "status": o["status"], "placed_at": o["placed_at"], "total": money(o["total_cents"]),
            "paid": money(o["paid_cents"]), "refunded": money(o["refunded_cents"]),
        } for o in page], "next_offset": nxt})

    @srv.tool(READ)
    def get_order(order_id: str) -> str:
        """One order in full: customer, lines (with line numbers and what was refunded per line),
        totals, payments, refunds, what can still be refunded, shipments and history.

        Returns JSON {id, status, placed_at, customer: {id, name, email}, lines: [{line_no,
        sku, name, qty, unit_price, line_total, refunded}], subtotal, shipping, total,
        payments, paid, refunds, refunded, refundable, shipments: [{id, carrier,
        tracking, status, shipped_at, delivered_at, replaces}], note, history}."""
        with closing(connect()) as conn:
            return _dumps(_show_order(get_order_or_fail(conn, order_id)))

    @srv.tool(SET)
    def update_order_status(order_id: str, status: str, note: str = "") -> str:
        """Move an order along its workflow: pending -> paid (only when fully paid), shipped ->
        delivered (marks the open shipment delivered today), shipped or delivered -> returned.
        Shipping is done with create_shipment and cancelling with cancel_order.

        Args:
            order_id: e.g. "SO-10234".
            status: the new status.
            note: optional remark kept in the order history.

        Returns a confirmation."""
        if status not in ORDER_STATUSES:
            raise ToolError(f"status must be one of {', '.join(ORDER_STATUSES)}")
        if status == "cancelled":
            raise ToolError("use cancel_order to cancel an order (it records the reason)")
        if status == "shipped":
            raise ToolError("use create_shipment to ship an order (it books the carrier and tracking number)")
        with closing(connect()) as conn, conn:
            o = get_order_or_fail(conn, order_id)
            if status == o["status"]:
                raise ToolError(f"order {o['id']} is already {status}")
            if status not in TRANSITIONS[o["status"]]:
                allowed = ", ".join(TRANSITIONS[o["status"]]) or "none (final status)"
                raise ToolError(f"order {o['id']} is {o['status']}; it can move to: {allowed}")
            if status == "paid" and o["paid_cents"] < o["total_cents"]:
                raise ToolError(f"order {o['id']} has {money(o['paid_cents'])} paid of {money(o['total_cents'])}; "
                                "it cannot be marked paid")
            if status == "delivered":
                open_ = [s for s in o["shipments"] if s["status"] in ("label_created", "in_transit")]
                for s in open_:
                    conn.execute("UPDATE shipments SET status = 'delivered', delivered_at = ? WHERE id = ?",
                                 (today(conn), s["id"]))
            conn.execute("UPDATE orders SET status = ? WHERE id = ?", (status, o["id"]))
            event(conn, o["id"], f"status {o['status']} -> {status}" + (f": {note.strip()}" if note.strip() else ""))
        return f"Order {o['id']} is now {status} (was {o['status']})."

    @srv.tool(SET)
    def cancel_order(order_id: str, reason: str) -> str:
        """Cancel an order that has not shipped (pending or paid). Money is not returned
        automatically: refund a paid order with issue_refund.

        Args:
            order_id: e.g. "SO-10234".
            reason: why (required), e.g. "customer request".

        Returns a confirmation with the amount still to refund."""
        why = _reason(reason)
        with closing(connect()) as conn, conn:
            o = get_order_or_fail(conn, order_id)
            if o["status"] not in ("pending", "paid"):
                raise ToolError(f"order {o['id']} is {o['status']}; only pending or paid (unshipped) orders can be "
                                "cancelled")
            conn.execute("UPDATE orders SET status = 'cancelled' WHERE id = ?", (o["id"],))
            event(conn, o["id"], f"cancelled: {why}")
        due = o["paid_cents"] - o["refunded_cents"]
        tail = f" {money(due)} was paid and not yet refunded: use issue_refund." if due > 0 else " Nothing was paid."
        return f"Cancelled order {o['id']} ({why}).{tail}"

    @srv.tool(ADD)
    def add_order_note(order_id: str, note: str) -> str:
        """Add a remark to an order's history (e.g. "escalated to manager"). Returns a confirmation."""
        text = _reason(note, "note")
        with closing(connect()) as conn, conn:
            o = get_order_or_fail(conn, order_id)
            event(conn, o["id"], f"note: {text}")
        return f"Noted on order {o['id']}."

    # -- payments and refunds ----------------------------------------------------------------------

    @srv.tool(READ)
    def search_payments(order_id: str | None = None, since: str | None = None, until: str | None = None,
                        limit: int = 50) -> str:
        """Payments received, newest first, optionally for one order or a date range (YYYY-MM-DD).

        Returns JSON [{id, order_id, amount, method, paid_at}]."""
        _page(limit)
        sql, args = ["SELECT * FROM payments WHERE 1 = 1"], []
        if order_id:
            sql.append("AND upper(order_id) = upper(?)")
            args.append(order_id.strip())
        if since:
            sql.append("AND substr(paid_at, 1, 10) >= ?")
            args.append(_day(since, "since"))
        if until:
            sql.append("AND substr(paid_at, 1, 10) <= ?")
            args.append(_day(until, "until"))
        sql.append("ORDER BY paid_at DESC, id DESC LIMIT ?")
        with closing(connect()) as conn:
            rows = conn.execute(" ".join(sql), [*args, limit]).fetchall()
        return _dumps([{"id": r["id"], "order_id": r["order_id"], "amount": money(r["amount_cents"]),
                        "method": r["method"], "paid_at": r["paid_at"]} for r in rows])

    @srv.tool(ADD)
    def record_payment(order_id: str, amount: float | str, paid_at: str | None = None, method: str = "bank transfer",
                       reference: str = "") -> str:
        """Record money received for an order outside the checkout (a bank transfer, a cheque).
        It does not change the order's status: once an order is fully paid, move it to paid with
        update_order_status.

        Args:
            order_id: the order the money is for, e.g. "SO-10234" (not cancelled).
            amount: how much, e.g. "149.90"; at most what is still outstanding on the order
                (its total minus what was already paid). Split a payment that covers several
                orders into one payment per order.
            paid_at: the day the money arrived (YYYY-MM-DD), not after today; default today.
            method: e.g. "bank transfer", "cheque".
            reference: the payer's reference as it appeared on the statement (kept in the order history).

        Returns the new payment id and what is still outstanding."""
        cents = _amount(amount, "amount")
        if cents <= 0:
            raise ToolError("amount must be positive")
        how = (method or "").strip() or "bank transfer"
        with closing(connect()) as conn, conn:
            o = get_order_or_fail(conn, order_id)
            day = _day(paid_at, "paid_at") if paid_at else today(conn)
            if day > today(conn):
                raise ToolError(f"paid_at {day} is in the future (today is {today(conn)})")
            if o["status"] == "cancelled":
                raise ToolError(f"order {o['id']} is cancelled; a payment cannot be recorded on it")
            due = o["total_cents"] - o["paid_cents"]
            if due <= 0:
                raise ToolError(f"order {o['id']} is already fully paid ({money(o['paid_cents'])} of "
                                f"{money(o['total_cents'])}); nothing is outstanding")
            if cents > due:
                raise ToolError(f"order {o['id']} has only {money(due)} outstanding (total {money(o['total_cents'])}, "
                                f"paid {money(o['paid_cents'])}); record at most that much on it")
            pid = next_id(conn, "payments", "PAY")
            conn.execute("INSERT INTO payments VALUES (?, ?, ?, ?, ?)", (pid, o["id"], cents, how, day))
            ref = reference.strip()
            event(conn, o["id"], f"payment {pid} {money(cents)} by {how}" + (f" (ref {ref})" if ref else ""))
        left = due - cents
        tail = "the order is now fully paid." if left == 0 else f"{money(left)} is still outstanding."
        return f"Recorded payment {pid} of {money(cents)} on order {o['id']} ({day}); {tail}"

    @srv.tool(READ)
    def search_refunds(order_id: str | None = None, since: str | None = None, until: str | None = None,
                       limit: int = 50) -> str:
        """Refunds issued, newest first, optionally for one order or a date range (YYYY-MM-DD).

        Returns JSON [{id, order_id, amount, reason, line_no, created_at}]."""
        _page(limit)
        sql, args = ["SELECT * FROM refunds WHERE 1 = 1"], []
        if order_id:
            sql.append("AND upper(order_id) = upper(?)")
            args.append(order_id.strip())
        if since:
            sql.append("AND created_at >= ?")
            args.append(_day(since, "since"))
        if until:
            sql.append("AND created_at <= ?")
            args.append(_day(until, "until"))
        sql.append("ORDER BY created_at DESC, rowid DESC LIMIT ?")
        with closing(connect()) as conn:
            rows = conn.execute(" ".join(sql), [*args, limit]).fetchall()
        return _dumps([{"id": r["id"], "order_id": r["order_id"], "amount": money(r["amount_cents"]),
                        "reason": r["reason"], "line_no": r["line_no"], "created_at": r["created_at"]} for r in rows])

    @srv.tool(ADD)
    def issue_refund(order_id: str, amount: float | str, reason: str, line_no: int | None = None) -> str:
        """Refund money to the customer's original payment method.

        Args:
            order_id: e.g. "SO-10234".
            amount: how much, e.g. "49.90"; at most what was paid minus what was already refunded
                (see "refundable" in get_order).
            reason: why (required), e.g. "item arrived damaged".
            line_no: the order line this refund is for, when it is for one item (then it may not exceed
                that line's total minus earlier refunds on it); leave out for shipping or whole-order refunds.

        Returns a confirmation with the refund id and what remains refundable."""
        cents = _amount(amount, "amount")
        if cents <= 0:
            raise ToolError("amount must be positive")
        why = _reason(reason)
        with closing(connect()) as conn, conn:
            o = get_order_or_fail(conn, order_id)
            limit_cents = meta(conn).get("refund_limit_cents")
            if limit_cents is not None and cents > int(limit_cents):
                raise ToolError(f"refunds above {money(int(limit_cents))} need a manager's approval; "
                                "this account cannot issue them")
            room = o["paid_cents"] - o["refunded_cents"]
            if room <= 0:
                raise ToolError(f"order {o['id']} has nothing left to refund (paid {money(o['paid_cents'])}, "
                                f"refunded {money(o['refunded_cents'])})")
            if cents > room:
                raise ToolError(f"order {o['id']} can be refunded at most {money(room)} (paid {money(o['paid_cents'])}, "
                                f"already refunded {money(o['refunded_cents'])})")
            if line_no is not None:
                line = next((ln for ln in o["lines"] if ln["line_no"] == line_no), None)
                if line is None:
                    raise ToolError(f"order {o['id']} has no line {line_no}; lines are "
                                    f"{', '.join(str(ln['line_no']) for ln in o['lines'])}")
                done = sum(r["amount_cents"] for r in o["refunds"] if r["line_no"] == line_no)
                left = line["qty"] * line["unit_price_cents"] - done
                if cents > left:
                    raise ToolError(f"line {line_no} of {o['id']} ({line['sku']}) can be refunded at most {money(left)}")
            rid = next_id(conn, "refunds", "RF")
            conn.execute("INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?)",
                         (rid, o["id"], cents, why, line_no, today(conn)))
            event(conn, o["id"], f"refund {rid} {money(cents)}: {why}")
        return (f"Refund {rid} of {money(cents)} issued on order {o['id']} ({why}); "
                f"{money(room - cents)} remains refundable.")

    # -- shipments -----------------------------------------------------------------------------------

    @srv.tool(READ)
    def search_shipments(order_id: str | None = None, tracking: str | None = None, status: str | None = None,
                         carrier: str | None = None, limit: int = 50) -> str:
        """Shipments, newest first, filtered by order, tracking number, status (label_created,
        in_transit, delivered, lost, returned) or carrier.

        Returns JSON [{id, order_id, carrier, tracking, status, shipped_at, delivered_at,
        replaces}]."""
        _page(limit)
        if status is not None and status not in SHIPMENT_STATUSES:
            raise ToolError(f"status must be one of {', '.join(SHIPMENT_STATUSES)}")
        sql, args = ["SELECT * FROM shipments WHERE 1 = 1"], []
        for col, val in (("order_id", order_id), ("tracking", tracking), ("carrier", carrier)):
            if val:
                sql.append(f"AND upper({col}) = upper(?)")
                args.append(val.strip())
        if status:
            sql.append("AND status = ?")
            args.append(status)
        sql.append("ORDER BY shipped_at DESC, rowid DESC LIMIT ?")
        with closing(connect()) as conn:
            rows = conn.execute(" ".join(sql), [*args, limit]).fetchall()
        return _dumps([{k: r[k] for k in ("id", "order_id", "carrier", "tracking", "status", "shipped_at",
                                           "delivered_at", "replaces")} for r in rows])

    @srv.tool(READ)
    def get_shipment(shipment_id: str) -> str:
        """One shipment by id (e.g. "SHP-00012") or tracking number, with the carrier's latest status
        and the order it belongs to.

        Returns JSON {id, order_id, carrier, tracking, status, shipped_at, delivered_at,
        replaces, note}."""
        key = (shipment_id or "").strip()
        with closing(connect()) as conn:
            r = conn.execute("SELECT * FROM shipments WHERE upper(id) = upper(?) OR upper(tracking) = upper(?)",
                             (key, key)).fetchone()
        if r is None:
            raise ToolError(f"no shipment {shipment_id!r}; see the shipments listed in get_order or search_shipments")
        return _dumps(dict(r))

    @srv.tool(ADD)
    def create_shipment(order_id: str, carrier: str, replaces: str | None = None, line_nos: list[int] = [],
                        note: str = "") -> str:
        """Ship an order: books the carrier, generates a tracking number, takes the units out of
        stock and marks the order shipped.

        Args:
            order_id: a paid order, e.g. "SO-10234"; or, with ``replaces``, a shipped or delivered order.
            carrier: one of the store's carriers (see get_store_info).
            replaces: to send a replacement, the id of the shipment that was lost or came back.
            line_nos: order line numbers to send (default: every line), e.g. [2] to resend one item.
            note: optional remark.

        Returns the new shipment id and tracking number."""
        with closing(connect()) as conn, conn:
            o = get_order_or_fail(conn, order_id)
            names = carriers(conn)
            match = [c for c in names if c.lower() == (carrier or "").strip().lower()]
            if not match:
                raise ToolError(f"unknown carrier {carrier!r}; use one of {', '.join(names)}")
            carrier_name = match[0]
            original = None
            if replaces:
                original = next((s for s in o["shipments"] if s["id"].upper() == replaces.strip().upper()
                                 or s["tracking"].upper() == replaces.strip().upper()), None)
                if original is None:
                    raise ToolError(f"order {o['id']} has no shipment {replaces!r}; its shipments are "
                                    f"{', '.join(s['id'] for s in o['shipments']) or 'none'}")
                if original["status"] not in ("lost", "returned"):
                    raise ToolError(f"shipment {original['id']} is {original['status']}; only a lost or returned "
                                    "shipment can be replaced")
                if any(s["replaces"] == original["id"] for s in o["shipments"]):
                    raise ToolError(f"shipment {original['id']} has already been replaced")
                if o["status"] not in ("shipped", "delivered"):
                    raise ToolError(f"order {o['id']} is {o['status']}; replacements are for shipped or delivered orders")
            elif o["status"] != "paid":
                hint = " (pass replaces=<shipment id> to send a replacement)" if o["status"] in ("shipped", "delivered") else ""
                raise ToolError(f"order {o['id']} is {o['status']}; only paid orders can be shipped{hint}")
            by_no = {ln["line_no"]: ln for ln in o["lines"]}
            wanted = list(dict.fromkeys(line_nos)) or list(by_no)
            bad = [n for n in wanted if n not in by_no]
            if bad:
                raise ToolError(f"order {o['id']} has no line(s) {bad}; lines are {', '.join(map(str, by_no))}")
            sid = next_id(conn, "shipments", "SHP")
            for n in wanted:
                ln = by_no[n]
                stock = product_row(conn, ln["sku"])["stock"]
                if stock < ln["qty"]:
                    raise ToolError(f"not enough stock of {ln['sku']} to ship {ln['qty']} (have {stock})")
                move_stock(conn, ln["sku"], -ln["qty"], "shipment", sid)
            tracking = _tracking(carrier_name, o["id"], sid)
            conn.execute("INSERT INTO shipments VALUES (?, ?, ?, ?, 'label_created', ?, NULL, ?, ?)",
                         (sid, o["id"], carrier_name, tracking, today(conn), original["id"] if original else None,
                          note.strip()))
            conn.execute("UPDATE orders SET status = 'shipped' WHERE id = ?", (o["id"],))
            what = f"replacement for {original['id']}" if original else "shipment"
            event(conn, o["id"], f"{what} {sid} via {carrier_name}, tracking {tracking}")
        return f"Created shipment {sid} for order {o['id']} via {carrier_name}, tracking number {tracking}."

    # -- suppliers and purchasing -----------------------------------------------------------------

    @srv.tool(READ)
    def search_suppliers(query: str = "") -> str:
        """Suppliers whose id, name or email contains ``query`` (case-insensitive); "" for all.

        Returns JSON [{id, name, email, lead_time_days, active}]."""
        q = (query or "").strip().lower()
        with closing(connect()) as conn:
            rows = conn.execute("SELECT * FROM suppliers ORDER BY id").fetchall()
        return _dumps([{"id": r["id"], "name": r["name"], "email": r["email"], "lead_time_days": r["lead_time_days"],
                        "active": bool(r["active"])} for r in rows
                       if not q or any(q in (r[k] or "").lower() for k in ("id", "name", "email"))])

    @srv.tool(READ)
    def get_supplier(supplier_id: str) -> str:
        """One supplier: contact, lead time, payment terms and how many products we buy from them.

        Returns JSON {id, name, email, phone, lead_time_days, payment_terms, active,
        products}."""
        with closing(connect()) as conn:
            r = supplier_row(conn, supplier_id)
            n = conn.execute("SELECT COUNT(*) FROM products WHERE supplier_id = ?", (r["id"],)).fetchone()[0]
        out = dict(r)
        out["active"] = bool(out["active"])
        out["products"] = n
        return _dumps(out)

    @srv.tool(READ)
    def search_purchase_orders(supplier_id: str | None = None, status: str | None = None, sku: str | None = None,
                               limit: int = 50, offset: int = 0) -> str:
        """Purchase orders, newest first, by supplier, status (draft, sent, received, cancelled) or SKU.

        Returns JSON {total, offset, purchase_orders: [{id, supplier_id, status,
        created_at, sent_at, received_at, lines, total}], next_offset}."""
        _page(limit, offset)
        if status is not None and status not in PO_STATUSES:
            raise ToolError(f"status must be one of {', '.join(PO_STATUSES)}")
        with closing(connect()) as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM purchase_orders ORDER BY created_at DESC, rowid DESC")]
            found = []
            for pid in ids:
                po = load_po(conn, pid)
                if supplier_id and po["supplier_id"].upper() != supplier_id.strip().upper():
                    continue
                if status and po["status"] != status:
                    continue
                if sku and not any(ln["sku"].upper() == sku.strip().upper() for ln in po["lines"]):
                    continue
                found.append(po)
        page = found[offset:offset + limit]
        nxt = offset + len(page) if offset + len(page) < len(found) else None
        return _dumps({"total": len(found), "offset": offset, "purchase_orders": [{
            "id": p["id"], "supplier_id": p["supplier_id"], "status": p["status"], "created_at": p["created_at"],
            "sent_at": p["sent_at"], "received_at": p["received_at"], "lines": len(p["lines"]),
            "total": money(p["total_cents"]),
        } for p in page], "next_offset": nxt})

    @srv.tool(READ)
    def get_purchase_order(po_id: str) -> str:
        """One purchase order with its lines (ordered and, once received, received quantities).

        Returns JSON {id, supplier_id, supplier, status, created_at, sent_at, received_at,
        note, receipt_note, lines: [{line_no, sku, qty, unit_cost, line_total,
        received_qty}], total}."""
        with closing(connect()) as conn:
            po = get_po_or_fail(conn, po_id)
            sup = conn.execute("SELECT name FROM suppliers WHERE id = ?", (po["supplier_id"],)).fetchone()
        return _dumps(_show_po(po, sup["name"] if sup else ""))

    @srv.tool(ADD)
    def create_purchase_order(supplier_id: str, note: str = "") -> str:
        """Open a new draft purchase order for a supplier; add lines with add_po_line, then
        send_purchase_order. Returns the new purchase order id."""
        with closing(connect()) as conn, conn:
            sup = supplier_row(conn, supplier_id)
            if not sup["active"]:
                raise ToolError(f"supplier {sup['id']} is inactive; we no longer buy from them")
            pid = next_id(conn, "purchase_orders", "PO", width=4)
            conn.execute("INSERT INTO purchase_orders VALUES (?, ?, 'draft', ?, NULL, NULL, ?, '')",
                         (pid, sup["id"], today(conn), note.strip()))
        return f"Created draft purchase order {pid} for {sup['name']} ({sup['id']})."

    @srv.tool(ADD)
    def add_po_line(po_id: str, sku: str, qty: int, unit_cost: float | str | None = None) -> str:
        """Add a product to a draft purchase order.

        Args:
            po_id: the draft purchase order.
            sku: a product bought from that purchase order's supplier, not yet on it.
            qty: units to order (positive).
            unit_cost: price per unit, e.g. "12.40"; defaults to the product's current cost.

        Returns the line number and the purchase order's new total."""
        if qty <= 0:
            raise ToolError("qty must be positive")
        with closing(connect()) as conn, conn:
            po = draft_po(conn, po_id)
            p = product_row(conn, sku)
            if p["supplier_id"] != po["supplier_id"]:
                raise ToolError(f"{p['sku']} is bought from {p['supplier_id']}, not {po['supplier_id']}; "
                                "put it on a purchase order for its own supplier")
            if p["status"] != "active":
                raise ToolError(f"{p['sku']} is {p['status']}; it cannot be ordered")
            dup = next((ln for ln in po["lines"] if ln["sku"] == p["sku"]), None)
            if dup:
                raise ToolError(f"{p['sku']} is already line {dup['line_no']} of {po['id']}; change it with update_po_line")
            cost = _amount(unit_cost, "unit_cost") if unit_cost is not None else p["cost_cents"]
            if cost <= 0:
                raise ToolError("unit_cost must be positive")
            n = max((ln["line_no"] for ln in po["lines"]), default=0) + 1
            conn.execute("INSERT INTO po_lines VALUES (?, ?, ?, ?, ?, NULL)", (po["id"], n, p["sku"], qty, cost))
            total = po["total_cents"] + qty * cost
        return f"Added line {n} to {po['id']}: {qty} x {p['sku']} at {money(cost)}; total now {money(total)}."

    @srv.tool(SET)
    def update_po_line(po_id: str, line_no: int, qty: int | None = None, unit_cost: float | str | None = None) -> str:
        """Change the quantity or unit cost of a line on a draft purchase order. Returns a confirmation."""
        with closing(connect()) as conn, conn:
            po = draft_po(conn, po_id)
            line = next((ln for ln in po["lines"] if ln["line_no"] == line_no), None)
            if line is None:
                raise ToolError(f"{po['id']} has no line {line_no}")
            if qty is None and unit_cost is None:
                raise ToolError("nothing to change: pass qty and/or unit_cost")
            new_qty = line["qty"] if qty is None else qty
            new_cost = line["unit_cost_cents"] if unit_cost is None else _amount(unit_cost, "unit_cost")
            if new_qty <= 0 or new_cost <= 0:
                raise ToolError("qty and unit_cost must be positive (remove a line with remove_po_line)")
            conn.execute("UPDATE po_lines SET qty = ?, unit_cost_cents = ? WHERE po_id = ? AND line_no = ?",
                         (new_qty, new_cost, po["id"], line_no))
        return f"Line {line_no} of {po['id']} is now {new_qty} x {line['sku']} at {money(new_cost)}."

    @srv.tool(SET)
    def remove_po_line(po_id: str, line_no: int) -> str:
        """Remove a line from a draft purchase order. Returns a confirmation."""
        with closing(connect()) as conn, conn:
            po = draft_po(conn, po_id)
            if not any(ln["line_no"] == line_no for ln in po["lines"]):
                raise ToolError(f"{po['id']} has no line {line_no}")
            conn.execute("DELETE FROM po_lines WHERE po_id = ? AND line_no = ?", (po["id"], line_no))
        return f"Removed line {line_no} from {po['id']}."

    @srv.tool(SET)
    def send_purchase_order(po_id: str) -> str:
        """Send a draft purchase order (with at least one line) to its supplier; it can no longer
        be edited. Returns a confirmation."""
        with closing(connect()) as conn, conn:
            po = draft_po(conn, po_id)
            if not po["lines"]:
                raise ToolError(f"{po['id']} has no lines; add some with add_po_line first")
            conn.execute("UPDATE purchase_orders SET status = 'sent', sent_at = ? WHERE id = ?", (today(conn), po["id"]))
        return f"Sent purchase order {po['id']} ({len(po['lines'])} lines, total {money(po['total_cents'])})."

    @srv.tool(SET)
    def cancel_purchase_order(po_id: str, reason: str) -> str:
        """Cancel a draft or sent purchase order that has not been received. Returns a confirmation."""
        why = _reason(reason)
        with closing(connect()) as conn, conn:
            po = get_po_or_fail(conn, po_id)
            if po["status"] not in ("draft", "sent"):
                raise ToolError(f"purchase order {po['id']} is {po['status']}; only draft or sent ones can be cancelled")
            conn.execute("UPDATE purchase_orders SET status = 'cancelled', note = ? WHERE id = ?",
                         ((po["note"] + "\n" if po["note"] else "") + f"cancelled: {why}", po["id"]))
        return f"Cancelled purchase order {po['id']} ({why})."

    @srv.tool(ACT)
    def receive_purchase_order(po_id: str, lines: list[ReceivedLine], note: str = "") -> str:
        """Book a delivery against a sent purchase order: each line's received quantity is recorded
        and added to stock, and the purchase order is closed as received (suppliers do not
        back-order; anything short is simply not coming).

        Args:
            po_id: the sent purchase order the delivery belongs to.
            lines: what actually arrived, one entry per SKU on the purchase order:
                [{"sku": "KIT-0412", "qty": 24}, ...]; a SKU left out counts as 0 received.
            note: receiving remarks, e.g. shortages, extra or damaged units.

        Returns what was received against what was ordered, line by line."""
        with closing(connect()) as conn, conn:
            po = get_po_or_fail(conn, po_id)
            if po["status"] != "sent":
                raise ToolError(f"purchase order {po['id']} is {po['status']}; only sent purchase orders can be received")
            by_sku = {ln["sku"].upper(): ln for ln in po["lines"]}
            got: dict[str, int] = {}
            for item in lines:
                key = item.sku.strip().upper()
                if key not in by_sku:
                    raise ToolError(f"{item.sku} is not on {po['id']} (it has {', '.join(ln['sku'] for ln in po['lines'])}); "
                                    "note unexpected items in the note instead")
                if key in got:
                    raise ToolError(f"{item.sku} is listed twice; give one total per SKU")
                if item.qty < 0:
                    raise ToolError("received quantities cannot be negative")
                got[key] = item.qty
            report = []
            for key, ln in by_sku.items():
                qty = got.get(key, 0)
                conn.execute("UPDATE po_lines SET received_qty = ? WHERE po_id = ? AND line_no = ?",
                             (qty, po["id"], ln["line_no"]))
                if qty:
                    move_stock(conn, ln["sku"], qty, "purchase order receipt", po["id"])
                diff = qty - ln["qty"]
                flag = "" if diff == 0 else (f" (short {-diff})" if diff < 0 else f" (over {diff})")
                report.append(f"{ln['sku']}: ordered {ln['qty']}, received {qty}{flag}")
            conn.execute("UPDATE purchase_orders SET status = 'received', received_at = ?, receipt_note = ? WHERE id = ?",
                         (today(conn), note.strip(), po["id"]))
        return f"Received purchase order {po['id']}:\n" + "\n".join(report)

    # -- supplier invoices -------------------------------------------------------------------------

    @srv.tool(READ)
    def search_supplier_invoices(supplier_id: str | None = None, invoice_number: str | None = None,
                                 po_id: str | None = None, limit: int = 50) -> str:
        """Supplier invoices already recorded, newest first. ``invoice_number`` matches ignoring case,
        spaces and dashes.

        Returns JSON [{id, supplier_id, invoice_number, po_id, invoice_date, total,
        recorded_at}]."""
        _page(limit)
        with closing(connect()) as conn:
            rows = conn.execute("SELECT * FROM supplier_invoices ORDER BY invoice_date DESC, rowid DESC").fetchall()
        out = []
        for r in rows:
            if supplier_id and r["supplier_id"].upper() != supplier_id.strip().upper():
                continue
            if invoice_number and norm_code(r["invoice_number"]) != norm_code(invoice_number):
                continue
            if po_id and (r["po_id"] or "").upper() != po_id.strip().upper():
                continue
            out.append({"id": r["id"], "supplier_id": r["supplier_id"], "invoice_number": r["invoice_number"],
                        "po_id": r["po_id"], "invoice_date": r["invoice_date"], "total": money(r["total_cents"]),
                        "recorded_at": r["recorded_at"]})
        return _dumps(out[:limit])

    @srv.tool(READ)
    def get_supplier_invoice(invoice_id: str) -> str:
        """One recorded supplier invoice (by our id, e.g. "SI-00004") with its lines.

        Returns JSON {id, supplier_id, invoice_number, po_id, invoice_date, total,
        recorded_at, note, lines: [{line_no, sku, qty, unit_cost}]}."""
        with closing(connect()) as conn:
            inv = load_invoice(conn, (invoice_id or "").strip().upper())
        if inv is None:
            raise ToolError(f"no supplier invoice {invoice_id!r}; find ids with search_supplier_invoices")
        return _dumps(_show_invoice(inv))

    @srv.tool(ADD)
    def record_supplier_invoice(supplier_id: str, invoice_number: str, invoice_date: str, lines: list[InvoiceLine],
                                po_id: str | None = None, total: float | str | None = None, note: str = "") -> str:
        """Record a supplier's invoice in accounts payable (this is what gets it paid).

        Args:
            supplier_id: who issued it, e.g. "SUP-101".
            invoice_number: the supplier's own invoice number; a number already recorded for that
                supplier is refused (duplicates must not be paid twice).
            invoice_date: YYYY-MM-DD.
            lines: the invoiced lines: [{"sku": "KIT-0412", "qty": 24, "unit_cost": "12.40"}, ...].
            po_id: the purchase order it bills, if any (must be that supplier's).
            total: the invoice total as printed, to check against the lines (optional).
            note: optional remark.

        Returns the new invoice id and total."""
        number = (invoice_number or "").strip()
        if not norm_code(number):
            raise ToolError("invoice_number must not be empty")
        when = _day(invoice_date, "invoice_date")
        if not lines:
            raise ToolError("an invoice needs at least one line")
        with closing(connect()) as conn, conn:
            sup = supplier_row(conn, supplier_id)
            for r in conn.execute("SELECT id, invoice_number FROM supplier_invoices WHERE supplier_id = ?", (sup["id"],)):
                if norm_code(r["invoice_number"]) == norm_code(number):
                    raise ToolError(f"invoice {r['invoice_number']} from {sup['id']} is already recorded as {r['id']}; "
                                    "a duplicate must not be recorded again")
            po = None
            if po_id:
                po = get_po_or_fail(conn, po_id)
                if po["supplier_id"] != sup["id"]:
                    raise ToolError(f"purchase order {po['id']} belongs to {po['supplier_id']}, not {sup['id']}")
            rows = []
            for item in lines:
                p = product_row(conn, item.sku)
                if item.qty <= 0:
                    raise ToolError(f"{item.sku}: qty must be positive")
                cost = _amount(item.unit_cost, f"unit_cost of {item.sku}")
                if cost < 0:
                    raise ToolError(f"{item.sku}: unit_cost cannot be negative")
                rows.append((p["sku"], item.qty, cost))
            sum_cents = sum(q * c for _, q, c in rows)
            if total is not None and _amount(total, "total") != sum_cents:
                raise ToolError(f"the lines add up to {money(sum_cents)}, not {money(_amount(total, 'total'))}; "
                                "check the quantities and unit costs")
            iid = next_id(conn, "supplier_invoices", "SI")
            conn.execute("INSERT INTO supplier_invoices VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (iid, sup["id"], number, po["id"] if po else None, when, sum_cents, today(conn), note.strip()))
            conn.executemany("INSERT INTO supplier_invoice_lines VALUES (?, ?, ?, ?, ?)",
                             [(iid, k, s, q, c) for k, (s, q, c) in enumerate(rows, start=1)])
        return f"Recorded supplier invoice {iid} ({sup['id']} {number}, total {money(sum_cents)})."

    return srv


build_server = server_builder(make_app)
