"""Store app state: an e-commerce back office in SQLite (``state/store.sqlite``).

Catalogue (products, suppliers), customers, orders with their lines, payments, refunds and
shipments, stock movements, purchase orders with their receipts, and supplier invoices.
Money is held as integer cents and shown with two decimals ("1234.50"). The store has its
own calendar day (``meta.today``): everything the agent does is stamped with it, so episodes
are reproducible. ``create_store`` is deterministic (same arguments, byte-identical file).

Order workflow: pending -> paid -> shipped -> delivered -> returned; pending and paid
orders can be cancelled; a shipped order can also come back as returned (refused or
undeliverable). Purchase orders go draft -> sent -> received (or cancelled before receipt).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

DEFAULT_TODAY = "2026-03-02"
DEFAULT_CARRIERS = ("UPS", "FedEx", "USPS", "DHL")
ORDER_STATUSES = ("pending", "paid", "shipped", "delivered", "cancelled", "returned")
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "pending": ("paid", "cancelled"),
    "paid": ("shipped", "cancelled"),
    "shipped": ("delivered", "returned"),
    "delivered": ("returned",),
    "cancelled": (),
    "returned": (),
}
"""Allowed order status changes (from -> to)."""
SHIPMENT_STATUSES = ("label_created", "in_transit", "delivered", "lost", "returned")
PO_STATUSES = ("draft", "sent", "received", "cancelled")
PRODUCT_STATUSES = ("active", "discontinued")

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE suppliers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL DEFAULT '',
    phone TEXT NOT NULL DEFAULT '',
    lead_time_days INTEGER NOT NULL DEFAULT 7,
    payment_terms TEXT NOT NULL DEFAULT 'Net 30',
    active INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE products (
    sku TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL DEFAULT '',
    price_cents INTEGER NOT NULL,
    cost_cents INTEGER NOT NULL DEFAULT 0,
    stock INTEGER NOT NULL DEFAULT 0 CHECK (stock >= 0),
    reorder_point INTEGER NOT NULL DEFAULT 0,
    reorder_qty INTEGER NOT NULL DEFAULT 0,
    case_size INTEGER NOT NULL DEFAULT 1 CHECK (case_size >= 1),
    supplier_id TEXT REFERENCES suppliers(id),
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'discontinued'))
);
CREATE TABLE customers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    phone TEXT NOT NULL DEFAULT '',
    city TEXT NOT NULL DEFAULT '',
    since TEXT NOT NULL DEFAULT ''
);
CREATE TABLE orders (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    status TEXT NOT NULL,
    placed_at TEXT NOT NULL,
    shipping_cents INTEGER NOT NULL DEFAULT 0,
    note TEXT NOT NULL DEFAULT ''
);
CREATE TABLE order_lines (
    order_id TEXT NOT NULL REFERENCES orders(id),
    line_no INTEGER NOT NULL,
    sku TEXT NOT NULL,
    name TEXT NOT NULL,
    qty INTEGER NOT NULL,
    unit_price_cents INTEGER NOT NULL,
    PRIMARY KEY (order_id, line_no)
);
CREATE TABLE payments (
    id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(id),
    amount_cents INTEGER NOT NULL,
    method TEXT NOT NULL,
    paid_at TEXT NOT NULL
);
CREATE TABLE refunds (
    id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(id),
    amount_cents INTEGER NOT NULL,
    reason TEXT NOT NULL,
    line_no INTEGER,
    created_at TEXT NOT NULL
);
CREATE TABLE shipments (
    id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(id),
    carrier TEXT NOT NULL,
    tracking TEXT NOT NULL,
    status TEXT NOT NULL,
    shipped_at TEXT NOT NULL,
    delivered_at TEXT,
    replaces TEXT,
    note TEXT NOT NULL DEFAULT ''
);
CREATE TABLE order_events (
    id INTEGER PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(id),
    at TEXT NOT NULL,
    event TEXT NOT NULL
);
CREATE TABLE stock_moves (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL,
    delta INTEGER NOT NULL,
    reason TEXT NOT NULL,
    ref TEXT NOT NULL DEFAULT '',
    at TEXT NOT NULL
);
CREATE TABLE purchase_orders (
    id TEXT PRIMARY KEY,
    supplier_id TEXT NOT NULL REFERENCES suppliers(id),
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    sent_at TEXT,
    received_at TEXT,
    note TEXT NOT NULL DEFAULT '',
    receipt_note TEXT NOT NULL DEFAULT ''
);
CREATE TABLE po_lines (
    po_id TEXT NOT NULL REFERENCES purchase_orders(id),
    line_no INTEGER NOT NULL,
    sku TEXT NOT NULL,
    qty INTEGER NOT NULL,
    unit_cost_cents INTEGER NOT NULL,
    received_qty INTEGER,
    PRIMARY KEY (po_id, line_no)
);
CREATE TABLE supplier_invoices (
    id TEXT PRIMARY KEY,
    supplier_id TEXT NOT NULL REFERENCES suppliers(id),
    invoice_number TEXT NOT NULL,
    po_id TEXT,
    invoice_date TEXT NOT NULL,
    total_cents INTEGER NOT NULL,
    recorded_at TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT ''
);
CREATE TABLE supplier_invoice_lines (
    invoice_id TEXT NOT NULL REFERENCES supplier_invoices(id),
    line_no INTEGER NOT NULL,
    sku TEXT NOT NULL,
    qty INTEGER NOT NULL,
    unit_cost_cents INTEGER NOT NULL,
    PRIMARY KEY (invoice_id, line_no)
);
CREATE INDEX orders_customer ON orders(customer_id);
CREATE INDEX refunds_order ON refunds(order_id);
CREATE INDEX shipments_order ON shipments(order_id);
"""


# -- money and small parsers -----------------------------------------------------------------

_MONEY_JUNK = re.compile(r"[\s,$€£]")


def parse_money(value: Any) -> int:
    """``"1,234.50"``, ``"$12"``, ``12.5`` -> cents (123450, 1200, 1250).

    ValueError when it is not an amount or has more than two decimals."""
    if isinstance(value, bool) or value is None:
        raise ValueError("not an amount")
    text = _MONEY_JUNK.sub("", str(value))
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{value!r} is not an amount") from None
    if not d.is_finite():
        raise ValueError(f"{value!r} is not an amount")
    cents = d * 100
    if cents != cents.to_integral_value():
        raise ValueError(f"{value!r} has more than two decimals")
    return int(cents)


def money(cents: int) -> str:
    """Cents -> ``"1234.50"`` (two decimals, no thousands separators)."""
    sign = "-" if cents < 0 else ""
    cents = abs(int(cents))
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def norm_code(text: str) -> str:
    """Letters and digits only, upper case: 'inv 2041' ~ 'INV-2041' (duplicate invoice numbers)."""
    return re.sub(r"[^A-Za-z0-9]", "", str(text or "")).upper()


def next_id(conn: sqlite3.Connection, table: str, prefix: str, width: int = 5, column: str = "id") -> str:
    """The next ``PREFIX-NNNNN`` id after the largest one already in ``table``."""
    best = 0
    for (value,) in conn.execute(f"SELECT {column} FROM {table} WHERE {column} LIKE ?", (f"{prefix}-%",)):
        tail = value[len(prefix) + 1:]
        if tail.isdigit():
            best = max(best, int(tail))
            width = max(width, len(tail))
    return f"{prefix}-{best + 1:0{width}d}"


# -- seeding -------------------------------------------------------------------------------------


def create_store(
    db_path: Path | str,
    *,
    store_name: str = "Store",
    today: str = DEFAULT_TODAY,
    carriers: Iterable[str] = DEFAULT_CARRIERS,
    suppliers: Iterable[Mapping[str, Any]] = (),
    products: Iterable[Mapping[str, Any]] = (),
    customers: Iterable[Mapping[str, Any]] = (),
    orders: Iterable[Mapping[str, Any]] = (),
    purchase_orders: Iterable[Mapping[str, Any]] = (),
    supplier_invoices: Iterable[Mapping[str, Any]] = (),
    stock_moves: Iterable[Mapping[str, Any]] = (),
    refund_limit_cents: int | None = None,
) -> Path:
    """Write a new store database. Same arguments -> byte-identical file. Money is in cents.

    ``suppliers``: ``id, name`` and optionally ``email, phone, lead_time_days, payment_terms, active``.
    ``products``: ``sku, name, price_cents`` and optionally ``category, cost_cents, stock,
    reorder_point, reorder_qty, case_size, supplier_id, status``.
    ``customers``: ``id, name, email`` and optionally ``phone, city, since``.
    ``orders``: ``id, customer_id, status, placed_at`` (``YYYY-MM-DDTHH:MM``), ``lines``
    (``sku, qty, unit_price_cents``, optional ``name``: defaults to the product's) and optionally
    ``shipping_cents, note, payments`` (``amount_cents, method, paid_at``, optional ``id``),
    ``refunds`` (``amount_cents, reason, created_at``, optional ``id, line_no``), ``shipments``
    (``carrier, tracking, status, shipped_at``, optional ``id, delivered_at, replaces, note``)
    and ``events`` (``at, event``).
    ``purchase_orders``: ``id, supplier_id, status, created_at, lines`` (``sku, qty,
    unit_cost_cents``, optional ``received_qty``) and optionally ``sent_at, received_at, note,
    receipt_note``.
    ``supplier_invoices``: ``supplier_id, invoice_number, invoice_date, lines`` (``sku, qty,
    unit_cost_cents``) and optionally ``id, po_id, recorded_at, note``.
    ``stock_moves``: ``sku, delta, reason, at`` and optionally ``ref`` (history only; stock
    levels come from the products).
    ``refund_limit_cents``: when set, one refund may not exceed it (larger ones need a manager).
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    today = date.fromisoformat(today).isoformat()
    carriers = list(carriers)
    sup_rows = [
        (s["id"], s["name"], s.get("email", ""), s.get("phone", ""), int(s.get("lead_time_days", 7)),
         s.get("payment_terms", "Net 30"), int(bool(s.get("active", True))))
        for s in suppliers
    ]
    sup_ids = {r[0] for r in sup_rows}
    prod_rows, names = [], {}
    for p in products:
        status = p.get("status", "active")
        if status not in PRODUCT_STATUSES:
            raise ValueError(f"product {p['sku']}: bad status {status!r}")
        if p.get("supplier_id") is not None and p["supplier_id"] not in sup_ids:
            raise ValueError(f"product {p['sku']}: unknown supplier {p['supplier_id']!r}")
        prod_rows.append((
            p["sku"], p["name"], p.get("category", ""), int(p["price_cents"]), int(p.get("cost_cents", 0)),
            int(p.get("stock", 0)), int(p.get("reorder_point", 0)), int(p.get("reorder_qty", 0)),
            int(p.get("case_size", 1)), p.get("supplier_id"), status,
        ))
        names[p["sku"]] = p["name"]
    cust_rows = [(c["id"], c["name"], c["email"].lower(), c.get("phone", ""), c.get("city", ""), c.get("since", ""))
                 for c in customers]
    cust_ids = {r[0] for r in cust_rows}
    order_rows, line_rows, pay_rows, ref_rows, ship_rows, event_rows = [], [], [], [], [], []
    n_pay = n_ref = n_ship = 0
    for o in orders:
        if o["status"] not in ORDER_STATUSES:
            raise ValueError(f"order {o['id']}: bad status {o['status']!r}")
        if o["customer_id"] not in cust_ids:
            raise ValueError(f"order {o['id']}: unknown customer {o['customer_id']!r}")
        order_rows.append((o["id"], o["customer_id"], o["status"], o["placed_at"], int(o.get("shipping_cents", 0)),
                           o.get("note", "")))
        for i, ln in enumerate(o["lines"], start=1):
            line_rows.append((o["id"], i, ln["sku"], ln.get("name") or names.get(ln["sku"], ln["sku"]),
                              int(ln["qty"]), int(ln["unit_price_cents"])))
        for p in o.get("payments", []):
            n_pay += 1
            pay_rows.append((p.get("id", f"PAY-{n_pay:05d}"), o["id"], int(p["amount_cents"]), p["method"], p["paid_at"]))
        for r in o.get("refunds", []):
            n_ref += 1
            ref_rows.append((r.get("id", f"RF-{n_ref:05d}"), o["id"], int(r["amount_cents"]), r["reason"],
                             r.get("line_no"), r["created_at"]))
        for s in o.get("shipments", []):
            n_ship += 1
            if s["status"] not in SHIPMENT_STATUSES:
                raise ValueError(f"order {o['id']}: bad shipment status {s['status']!r}")
            ship_rows.append((s.get("id", f"SHP-{n_ship:05d}"), o["id"], s["carrier"], s["tracking"], s["status"],
                              s["shipped_at"], s.get("delivered_at"), s.get("replaces"), s.get("note", "")))
        for e in o.get("events", []):
            event_rows.append((o["id"], e["at"], e["event"]))
    po_rows, po_line_rows = [], []
    for po in purchase_orders:
        if po["status"] not in PO_STATUSES:
            raise ValueError(f"purchase order {po['id']}: bad status {po['status']!r}")
        if po["supplier_id"] not in sup_ids:
            raise ValueError(f"purchase order {po['id']}: unknown supplier {po['supplier_id']!r}")
        po_rows.append((po["id"], po["supplier_id"], po["status"], po["created_at"], po.get("sent_at"),
                        po.get("received_at"), po.get("note", ""), po.get("receipt_note", "")))
        for i, ln in enumerate(po["lines"], start=1):
            po_line_rows.append((po["id"], i, ln["sku"], int(ln["qty"]), int(ln["unit_cost_cents"]),
                                 ln.get("received_qty")))
    inv_rows, inv_line_rows = [], []
    for i, inv in enumerate(supplier_invoices, start=1):
        iid = inv.get("id", f"SI-{i:05d}")
        total = sum(int(ln["qty"]) * int(ln["unit_cost_cents"]) for ln in inv["lines"])
        inv_rows.append((iid, inv["supplier_id"], inv["invoice_number"], inv.get("po_id"), inv["invoice_date"],
                         total, inv.get("recorded_at", inv["invoice_date"]), inv.get("note", "")))
        for k, ln in enumerate(inv["lines"], start=1):
            inv_line_rows.append((iid, k, ln["sku"], int(ln["qty"]), int(ln["unit_cost_cents"])))
    move_rows = [(m["sku"], int(m["delta"]), m["reason"], m.get("ref", ""), m["at"]) for m in stock_moves]

    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        settings = [("store_name", store_name), ("today", today), ("currency", "USD"),
                    ("carriers", json.dumps(carriers))]
        if refund_limit_cents is not None:
            settings.append(("refund_limit_cents", str(int(refund_limit_cents))))
        conn.executemany("INSERT INTO meta VALUES (?, ?)", settings)
        conn.executemany("INSERT INTO suppliers VALUES (?,?,?,?,?,?,?)", sup_rows)
        conn.executemany("INSERT INTO products VALUES (?,?,?,?,?,?,?,?,?,?,?)", prod_rows)
        conn.executemany("INSERT INTO customers VALUES (?,?,?,?,?,?)", cust_rows)
        conn.executemany("INSERT INTO orders VALUES (?,?,?,?,?,?)", order_rows)
        conn.executemany("INSERT INTO order_lines VALUES (?,?,?,?,?,?)", line_rows)
        conn.executemany("INSERT INTO payments VALUES (?,?,?,?,?)", pay_rows)
        conn.executemany("INSERT INTO refunds VALUES (?,?,?,?,?,?)", ref_rows)
        conn.executemany("INSERT INTO shipments VALUES (?,?,?,?,?,?,?,?,?)", ship_rows)
        conn.executemany("INSERT INTO order_events (order_id, at, event) VALUES (?,?,?)", event_rows)
        conn.executemany("INSERT INTO stock_moves (sku, delta, reason, ref, at) VALUES (?,?,?,?,?)", move_rows)
        conn.executemany("INSERT INTO purchase_orders VALUES (?,?,?,?,?,?,?,?)", po_rows)
        conn.executemany("INSERT INTO po_lines VALUES (?,?,?,?,?,?)", po_line_rows)
        conn.executemany("INSERT INTO supplier_invoices VALUES (?,?,?,?,?,?,?,?)", inv_rows)
        conn.executemany("INSERT INTO supplier_invoice_lines VALUES (?,?,?,?,?)", inv_line_rows)
        conn.commit()
    return db_path


# -- loaders shared by tools and graders (amounts in cents) ---------------------------------------


def meta(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def load_order(conn: sqlite3.Connection, order_id: str) -> dict[str, Any] | None:
    """One order with everything hanging off it; amounts in cents."""
    o = conn.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
    if o is None:
        return None
    cust = conn.execute("SELECT * FROM customers WHERE id = ?", (o["customer_id"],)).fetchone()
    lines = [dict(r) for r in conn.execute(
        "SELECT line_no, sku, name, qty, unit_price_cents FROM order_lines WHERE order_id = ? ORDER BY line_no",
        (order_id,))]
    payments = [dict(r) for r in conn.execute(
        "SELECT id, amount_cents, method, paid_at FROM payments WHERE order_id = ? ORDER BY paid_at, id", (order_id,))]
    refunds = [dict(r) for r in conn.execute(
        "SELECT id, amount_cents, reason, line_no, created_at FROM refunds WHERE order_id = ? ORDER BY rowid",
        (order_id,))]
    shipments = [dict(r) for r in conn.execute(
        "SELECT id, carrier, tracking, status, shipped_at, delivered_at, replaces, note FROM shipments"
        " WHERE order_id = ? ORDER BY rowid", (order_id,))]
    events = [dict(r) for r in conn.execute(
        "SELECT at, event FROM order_events WHERE order_id = ? ORDER BY id", (order_id,))]
    subtotal = sum(ln["qty"] * ln["unit_price_cents"] for ln in lines)
    paid = sum(p["amount_cents"] for p in payments)
    refunded = sum(r["amount_cents"] for r in refunds)
    return {
        "id": o["id"], "status": o["status"], "placed_at": o["placed_at"], "note": o["note"],
        "customer": {"id": cust["id"], "name": cust["name"], "email": cust["email"]} if cust else {"id": o["customer_id"]},
        "lines": lines, "subtotal_cents": subtotal, "shipping_cents": o["shipping_cents"],
        "total_cents": subtotal + o["shipping_cents"], "payments": payments, "paid_cents": paid,
        "refunds": refunds, "refunded_cents": refunded, "shipments": shipments, "events": events,
    }


def load_po(conn: sqlite3.Connection, po_id: str) -> dict[str, Any] | None:
    po = conn.execute("SELECT * FROM purchase_orders WHERE id = ?", (po_id,)).fetchone()
    if po is None:
        return None
    lines = [dict(r) for r in conn.execute(
        "SELECT line_no, sku, qty, unit_cost_cents, received_qty FROM po_lines WHERE po_id = ? ORDER BY line_no",
        (po_id,))]
    out = dict(po)
    out["lines"] = lines
    out["total_cents"] = sum(ln["qty"] * ln["unit_cost_cents"] for ln in lines)
    return out


def load_invoice(conn: sqlite3.Connection, invoice_id: str) -> dict[str, Any] | None:
    inv = conn.execute("SELECT * FROM supplier_invoices WHERE id = ?", (invoice_id,)).fetchone()
    if inv is None:
        return None
    out = dict(inv)
    out["lines"] = [dict(r) for r in conn.execute(
        "SELECT line_no, sku, qty, unit_cost_cents FROM supplier_invoice_lines WHERE invoice_id = ? ORDER BY line_no",
        (invoice_id,))]
    return out


# -- readers for graders -------------------------------------------------------------------------


def _connect(world) -> sqlite3.Connection:
    return world.db("store")


def order(world, order_id: str) -> dict[str, Any] | None:
    with closing(_connect(world)) as conn:
        return load_order(conn, order_id)


def orders(world) -> dict[str, dict[str, Any]]:
    """Every order by id (full records, amounts in cents)."""
    with closing(_connect(world)) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM orders ORDER BY id")]
        return {i: load_order(conn, i) for i in ids}


def order_statuses(world) -> dict[str, str]:
    with closing(_connect(world)) as conn:
        return dict(conn.execute("SELECT id, status FROM orders ORDER BY id").fetchall())


def refunds(world) -> list[dict[str, Any]]:
    """Every refund, oldest first: ``id, order_id, amount_cents, reason, line_no, created_at``."""
    with closing(_connect(world)) as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM refunds ORDER BY rowid")]


def shipments(world) -> list[dict[str, Any]]:
    with closing(_connect(world)) as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM shipments ORDER BY rowid")]


def products(world) -> dict[str, dict[str, Any]]:
    with closing(_connect(world)) as conn:
        return {r["sku"]: dict(r) for r in conn.execute("SELECT * FROM products ORDER BY sku")}


def stock_moves(world) -> list[dict[str, Any]]:
    with closing(_connect(world)) as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM stock_moves ORDER BY id")]


def purchase_orders(world) -> dict[str, dict[str, Any]]:
    """Every purchase order by id, with its lines (amounts in cents)."""
    with closing(_connect(world)) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM purchase_orders ORDER BY rowid")]
        return {i: load_po(conn, i) for i in ids}


def supplier_invoices(world) -> list[dict[str, Any]]:
    with closing(_connect(world)) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM supplier_invoices ORDER BY rowid")]
        return [load_invoice(conn, i) for i in ids]


def today(world) -> str:
    with closing(_connect(world)) as conn:
        return meta(conn)["today"]
