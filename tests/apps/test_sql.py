"""The sql app through a real in-process MCP session over a real, read-only SQLite database."""

import json

import mcp
import pytest

from longhorizon.apps.sql import limits
from longhorizon.apps.sql import state
from longhorizon.apps.sql.server import build_server
from longhorizon.core.world import World

ROWS = {
    "regions": [(1, "North", "US"), (2, "South", "US")],
    "customers": [
        (1, "Ada Park", "ada@x.example", 1, "consumer", "2025-01-03", 0),
        (2, "QA Bot", "qa@test.example", 2, "consumer", "2025-01-04", 1),
    ],
    "products": [(1, "SKU-1", "Desk Lamp", "Lighting", 40.0, 1), (2, "SKU-2", "Chair", "Furniture", 120.0, 1)],
    "orders": [(10, 1, "2025-02-01", "completed", "web", None), (11, 2, "2025-02-02", "cancelled", "web", None)],
    "order_items": [(10, 1, 1, 2, 39.5), (10, 2, 2, 1, 110.0), (11, 1, 1, 1, 40.0)],
    "refunds": [(1, 10, "2025-02-10", 39.5, "damaged")],
}


def seed(root):
    state.create_analytics_db(root / "state" / "sql.sqlite", ROWS)


@pytest.fixture
def sworld(tmp_path):
    return World.build(tmp_path / "w", seed)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


def test_create_database_is_byte_identical(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("sql").read_bytes() == b.db_path("sql").read_bytes()


def test_grader_reader_queries_the_world(sworld):
    assert state.query(sworld, "SELECT SUM(quantity * unit_price) FROM order_items WHERE order_id = ?", (10,)) == [
        (189.0,)]


async def test_list_tables_hides_bookkeeping_and_counts_rows(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        tables = {t["name"]: t for t in json.loads(await call(c, "list_tables"))}
        assert "_catalog" not in tables
        assert tables["orders"]["rows"] == 2 and tables["orders"]["kind"] == "table"
        assert "old BI job" in tables["revenue_snapshot"]["description"]


async def test_describe_table_columns_notes_keys_and_sample(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        d = json.loads(await call(c, "describe_table", name="CUSTOMERS"))
        assert d["name"] == "customers" and d["rows"] == 2
        cols = {col["name"]: col for col in d["columns"]}
        assert cols["customer_id"]["primary_key"] and not cols["customer_id"]["nullable"]
        assert cols["region_id"]["references"] == "regions.region_id"
        assert "test accounts" in cols["is_test"]["note"]
        assert d["sample"]["rows"][0][1] == "Ada Park"
        assert "orders" in await error(c, "describe_table", name="ordres")


async def test_query_returns_columns_rows_and_rounds_floats(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        out = json.loads(await call(c, "query", sql=(
            "SELECT o.order_id, SUM(i.quantity * i.unit_price) AS total FROM orders o "
            "JOIN order_items i USING (order_id) GROUP BY o.order_id ORDER BY o.order_id")))
        assert out["columns"] == ["order_id", "total"]
        assert out["rows"] == [[10, 189], [11, 40]] and out["truncated"] is False
        out = json.loads(await call(c, "query", sql="SELECT 0.1 + 0.2 AS x; -- trailing comment"))
        assert out["rows"] == [[0.3]]


async def test_query_caps_rows_and_says_so(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        sql = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 500) SELECT x FROM n"
        out = json.loads(await call(c, "query", sql=sql, limit=50))
        assert out["row_count"] == 50 and out["truncated"] and "note" in out
        out = json.loads(await call(c, "query", sql=sql))
        assert out["row_count"] == 200
        assert "limit" in await error(c, "query", sql="SELECT 1", limit=5000)


async def test_huge_cells_are_shortened(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        out = json.loads(await call(c, "query", sql="SELECT printf('%.*c', 50000, 'x') AS big"))
        assert len(out["rows"][0][0]) < 2_100 and "more characters" in out["rows"][0][0]


async def test_query_reports_sqlite_errors(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "no such column: totl" in await error(c, "query", sql="SELECT totl FROM orders")
        assert "no such table: ordrs" in await error(c, "query", sql="SELECT * FROM ordrs")
        assert "one statement" in await error(c, "query", sql="SELECT 1; SELECT 2")


@pytest.mark.parametrize("sql", [
    "DELETE FROM orders",
    "UPDATE customers SET is_test = 0",
    "INSERT INTO regions VALUES (3, 'East', 'US')",
    "DROP TABLE refunds",
    "PRAGMA query_only = 0",
    "ATTACH DATABASE 'other.db' AS o",
    "/* sneaky */ CREATE TABLE x (a)",
])
async def test_writes_and_non_queries_are_refused(sworld, sql):
    before = sworld.db_path("sql").read_bytes()
    async with mcp.Client(build_server(sworld)) as c:
        assert "only read-only" in await error(c, "query", sql=sql)
    assert sworld.db_path("sql").read_bytes() == before


async def test_cte_with_a_write_is_refused_by_the_authorizer(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        text = await error(c, "query", sql="WITH t AS (SELECT 1) DELETE FROM orders")
        assert "read-only" in text
        assert json.loads(await call(c, "query", sql="SELECT COUNT(*) FROM orders"))["rows"] == [[2]]


async def test_pragma_table_functions_may_be_read(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        out = json.loads(await call(c, "query", sql="SELECT name FROM pragma_table_info('regions')"))
        assert [r[0] for r in out["rows"]] == ["region_id", "name", "country"]


async def test_long_queries_are_stopped(sworld, monkeypatch):
    monkeypatch.setattr(limits, "MAX_VM_STEPS", 100_000)
    async with mcp.Client(build_server(sworld)) as c:
        text = await error(c, "query", sql=(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n"))
        assert "query stopped" in text


async def test_explain_shows_a_plan(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        plan = json.loads(await call(c, "explain", sql="SELECT * FROM orders WHERE order_date >= '2025-02-01'"))
        assert any("orders" in p["detail"] for p in plan)
        assert "only read-only" in await error(c, "explain", sql="DELETE FROM orders")


async def test_empty_sql_is_a_tool_error(sworld):
    async with mcp.Client(build_server(sworld)) as c:
        assert "empty" in await error(c, "query", sql="   ")


async def test_missing_database_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no analytics database" in await error(c, "list_tables")


@pytest.mark.parametrize("sql, says", [
    ("SELECT length(zeroblob(2000000))", "1,000,000 bytes"),
    ("SELECT length(group_concat(printf('%.*c', 900, 'x'))) FROM "
     "(WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 2000) SELECT x FROM n)",
     "1,000,000 bytes"),
    ("SELECT length(replace(printf('%.*c', 600000, 'a'), 'a', 'bb'))", "replace(): string or blob too big"),
    ("SELECT " + ", ".join(str(i) for i in range(150)), "at most 100 columns"),
    ("SELECT 1" + " + 1" * 300, "nests too deeply"),
])
async def test_queries_over_a_size_limit_are_refused_with_the_reason(sworld, sql, says):
    async with mcp.Client(build_server(sworld)) as c:
        assert says in await error(c, "query", sql=sql)


@pytest.mark.parametrize("sql, says", [
    ("SELECT length(printf('%.*c', 5000000, 'x'))", "precision 5,000,000"),
    ("SELECT length(format('%9000000d', 1))", "precision 9,000,000"),
    ("SELECT trim('abc', printf('%.*c', 100, 'x'))", "at most 64 characters"),
    ("SELECT instr('abc', printf('%.*c', 5000, 'x'))", "at most 1,000 bytes"),
    ("SELECT replace('abc', printf('%.*c', 5000, 'x'), '')", "at most 1,000 bytes"),
])
async def test_functions_that_could_run_long_in_one_step_are_refused(sworld, sql, says):
    """printf's %.*c loops once per unit of precision; trim, instr and replace take time in the
    product of their arguments' lengths: none of it can be interrupted between VM steps."""
    async with mcp.Client(build_server(sworld)) as c:
        assert says in await error(c, "query", sql=sql)


CHECKED_CALLS = [
    "printf('%5.2f|%-*d|%s|%%|%c|%.*s', 3.14159, 6, 42, 'x', 'yz', 2, 'abcdef')", "format('%03d', 7)",
    "printf(NULL)", "printf('%d')", "printf('%.*c', '3', 'é')", "printf(x'256400', 5)", "printf(12, 3)",
    "trim('  a  ')", "trim('xxaxx', 'x')", "ltrim('..a.', '.')", "rtrim(12300, '0')", "trim('éaé', 'é')",
    "trim('abc', '')", "trim('abc', NULL)", "trim(NULL, 'a')", "trim(x'616263', 'a')", "trim(2.50, '0')",
    "instr('hello', 'll')", "instr('héllo', 'l')", "instr('abc', '')", "instr(x'0102', x'02')",
    "instr('abc', NULL)", "instr(12345, 34)", "instr(x'616263', 'c')",
    "replace('aXbX', 'X', '--')", "replace('abc', '', 'z')", "replace(5, 5, 6)", "replace('aaa', 'aa', 'b')",
    "replace('éé', 'é', 'e')", "replace(NULL, 'a', 'b')", "replace('a', 'a', NULL)", "replace(x'6161', 'a', 'b')",
]


async def test_checked_functions_answer_as_sqlite_does(sworld):
    """The checked printf/format/trim/instr/replace give the built-ins' results, types included."""
    import sqlite3

    sql = "SELECT " + ", ".join(f"{c}, typeof({c})" for c in CHECKED_CALLS)
    want = [list(sqlite3.connect(":memory:").execute(sql).fetchone())]
    want = [[f"<blob {len(v)} bytes>" if isinstance(v, bytes) else v for v in want[0]]]
    async with mcp.Client(build_server(sworld)) as c:
        out = json.loads(await call(c, "query", sql=sql))
    assert out["rows"] == want


async def test_a_query_whose_steps_never_end_is_interrupted_at_the_deadline(sworld, monkeypatch):
    """The timer stops a query even when the progress handler never runs (long single steps)."""
    monkeypatch.setattr(limits, "PROGRESS_EVERY", 2**31 - 1)
    monkeypatch.setattr(limits, "QUERY_TIMEOUT_S", 0.2)
    async with mcp.Client(build_server(sworld)) as c:
        text = await error(c, "query", sql=(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n"))
        assert "query stopped" in text


async def test_rows_past_the_result_cap_are_never_computed(sworld):
    """Fetching stops at the character cap: row 60 would fail (integer overflow), but only the
    first dozen rows of ~1,000 characters each fit the result, so the query succeeds."""
    sql = ("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100) "
           "SELECT x, printf('%.*c', 1000, 'x'), CASE WHEN x >= 60 THEN abs(-9223372036854775807 - 1) END FROM n")
    async with mcp.Client(build_server(sworld)) as c:
        out = json.loads(await call(c, "query", sql=sql))
    assert out["truncated"] and 5 < out["row_count"] < 60
