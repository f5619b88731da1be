"""SQL app state: an analytics database in SQLite (``state/sql.sqlite``), read-only to the agent.

``create_database`` writes any schema plus rows, deterministically (fixed insertion order,
no clock reads, ``journal_mode=DELETE``), and keeps human-written notes about tables and
columns in a ``_catalog`` table that ``describe_table`` shows (tables whose names start with
``_`` are bookkeeping and are not listed). ``ANALYTICS_SCHEMA`` and ``ANALYTICS_DOCS`` are a
realistic e-commerce warehouse (regions, customers, products, orders, order items, refunds,
marketing campaigns, web sessions, and a stale revenue snapshot) that task families fill.

Graders read with ``query(world, sql, params)``, which uses the World's read-only connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

CATALOG = "_catalog"

ANALYTICS_SCHEMA = """
CREATE TABLE regions (
    region_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    country TEXT NOT NULL
);
CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    region_id INTEGER NOT NULL REFERENCES regions(region_id),
    segment TEXT NOT NULL,
    signup_date TEXT NOT NULL,
    is_test INTEGER NOT NULL DEFAULT 0 CHECK (is_test IN (0, 1))
);
CREATE TABLE products (
    product_id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    list_price REAL NOT NULL,
    active INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE campaigns (
    campaign_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    channel TEXT NOT NULL,
    start_date TEXT NOT NULL,
    end_date TEXT NOT NULL,
    budget REAL NOT NULL
);
CREATE TABLE orders (
    order_id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
    order_date TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('completed', 'cancelled', 'pending')),
    channel TEXT NOT NULL,
    campaign_id INTEGER REFERENCES campaigns(campaign_id)
);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders(order_id),
    line_no INTEGER NOT NULL,
    product_id INTEGER NOT NULL REFERENCES products(product_id),
    quantity INTEGER NOT NULL,
    unit_price REAL NOT NULL,
    PRIMARY KEY (order_id, line_no)
);
CREATE TABLE refunds (
    refund_id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders(order_id),
    refund_date TEXT NOT NULL,
    amount REAL NOT NULL,
    reason TEXT NOT NULL
);
CREATE TABLE web_sessions (
    session_id INTEGER PRIMARY KEY,
    customer_id INTEGER REFERENCES customers(customer_id),
    started_at TEXT NOT NULL,
    source TEXT NOT NULL,
    campaign_id INTEGER REFERENCES campaigns(campaign_id),
    pages_viewed INTEGER NOT NULL,
    order_id INTEGER REFERENCES orders(order_id)
);
CREATE TABLE revenue_snapshot (
    month TEXT NOT NULL,
    region TEXT NOT NULL,
    revenue REAL NOT NULL,
    refreshed_at TEXT NOT NULL
);
CREATE INDEX orders_customer ON orders(customer_id);
CREATE INDEX orders_date ON orders(order_date);
CREATE INDEX items_product ON order_items(product_id);
CREATE INDEX refunds_order ON refunds(order_id);
CREATE INDEX sessions_started ON web_sessions(started_at);
"""

ANALYTICS_DOCS: dict[str, str] = {
    "regions": "Sales regions; every customer belongs to one.",
    "customers": "One row per customer account.",
    "customers.segment": "consumer, smb or enterprise.",
    "customers.signup_date": "Day the account was created (YYYY-MM-DD).",
    "customers.is_test": "1 for QA/test accounts created by staff; 0 for real customers.",
    "products": "The product catalogue.",
    "products.list_price": "Current list price; what a customer paid is order_items.unit_price.",
    "products.active": "0 when the product is discontinued.",
    "campaigns": "Marketing campaigns with their run dates and budget.",
    "orders": "One row per order (header). Amounts live in order_items.",
    "orders.order_date": "Day the order was placed (YYYY-MM-DD).",
    "orders.status": "completed, cancelled or pending (not yet paid).",
    "orders.channel": "web, mobile or phone.",
    "orders.campaign_id": "Campaign credited with the order, if any.",
    "order_items": "Order lines. Line amount = quantity * unit_price.",
    "order_items.unit_price": "Price actually charged per unit (after any discount).",
    "refunds": "Money returned to customers; an order can have several refunds.",
    "refunds.amount": "Refunded amount (positive number).",
    "web_sessions": "Website visits. customer_id is null for anonymous visitors.",
    "web_sessions.started_at": "Session start, YYYY-MM-DD HH:MM:SS.",
    "web_sessions.source": "Traffic source: organic, paid_search, social, email, direct or referral.",
    "web_sessions.order_id": "The order placed during the session, if one was.",
    "revenue_snapshot": "Monthly revenue per region exported by the old BI job. Not maintained "
                        "since the job was retired; use orders/order_items for current figures.",
    "revenue_snapshot.refreshed_at": "When the row was last refreshed.",
}


def create_database(
    db_path: Path | str,
    schema: str,
    rows: Mapping[str, Iterable[Sequence[Any]]],
    docs: Mapping[str, str] | None = None,
) -> Path:
    """Write a new database. Same arguments -> byte-identical file.

    ``schema`` is SQL DDL; ``rows`` maps a table name to its rows (tuples in column order),
    inserted in the mapping's order; ``docs`` maps ``"table"`` or ``"table.column"`` to a note
    shown by ``describe_table``.
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(schema)
        for table, data in rows.items():
            data = [tuple(r) for r in data]
            if not data:
                continue
            marks = ",".join("?" * len(data[0]))
            conn.executemany(f'INSERT INTO "{table}" VALUES ({marks})', data)
        if docs:
            conn.execute(f"CREATE TABLE {CATALOG} (object TEXT PRIMARY KEY, note TEXT NOT NULL)")
            conn.executemany(f"INSERT INTO {CATALOG} VALUES (?, ?)", list(docs.items()))
        conn.commit()
    return db_path


def create_analytics_db(db_path: Path | str, rows: Mapping[str, Iterable[Sequence[Any]]],
                        docs: Mapping[str, str] | None = None) -> Path:
    """The analytics warehouse (``ANALYTICS_SCHEMA``) filled with ``rows``."""
    return create_database(db_path, ANALYTICS_SCHEMA, rows, ANALYTICS_DOCS if docs is None else docs)


# -- readers for graders -------------------------------------------------------------------

def query(world, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    """Rows of ``sql`` over the World's database, read-only."""
    with closing(world.db("sql")) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def user_tables(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(name, 'table' | 'view') of everything the agent may see, by name."""
    return [
        (r[0], r[1]) for r in conn.execute(
            "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY name"
        )
    ]


def notes(conn: sqlite3.Connection) -> dict[str, str]:
    """The ``_catalog`` notes (empty when the database has none)."""
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (CATALOG,)).fetchone()
    if not exists:
        return {}
    return dict(conn.execute(f"SELECT object, note FROM {CATALOG}").fetchall())
