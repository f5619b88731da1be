"""The `sql` app: an MCP server over a read-only analytics database (``state/sql.sqlite``).

Read-only in three layers: the file is opened with ``mode=ro``, the connection sets
``PRAGMA query_only``, and an authorizer refuses anything but reading (so ``WITH ... DELETE``
or ``ATTACH`` fail even though they start like a query). Only one SELECT/WITH statement per
call.

Bounded in time and memory: every query runs under a ``limits.QueryGuard`` (a step budget,
a deadline, SQLite's size limits, checked versions of the functions one step of which could
run for long); rows are fetched one at a time and fetching stops at the row or character cap
of the result. SQLite's own error message comes back to the agent so it can fix its SQL (a
limit's message is explained).
"""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import READ, AppServer, cap, server_builder
from longhorizon.apps.sql.limits import MAX_SQL_CHARS, QueryGuard
from longhorizon.apps.sql.state import notes, user_tables

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000
MAX_RESULT_CHARS = 16_000
SAMPLE_ROWS = 3
MAX_CELL_CHARS = 2_000

INSTRUCTIONS = (
    "A read-only analytics database (SQLite dialect). Start with list_tables and describe_table "
    "(columns, types, notes, sample rows), then run one SELECT (or WITH ... SELECT) per query call. "
    "Dates are text: YYYY-MM-DD, timestamps YYYY-MM-DD HH:MM:SS; use strftime/date() to group them."
)

_ALLOWED = {
    sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE,
}
_READ_PRAGMAS = {
    "table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list",
    "table_list", "collation_list", "function_list",
}
_LEADING = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*", re.S)


def _authorize(action: int, arg1, arg2, db, trigger) -> int:
    if action in _ALLOWED:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and arg1 in _READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    # pragma table-valued functions read the schema through an internal UPDATE check
    if action == sqlite3.SQLITE_UPDATE and arg1 in ("sqlite_master", "sqlite_schema"):
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _first_keyword(sql: str) -> str:
    rest = _LEADING.sub("", sql, count=1)
    m = re.match(r"[A-Za-z]+", rest)
    return m.group().upper() if m else ""


def _show(v: Any) -> Any:
    if isinstance(v, float):
        r = round(v, 9)
        return int(r) if r.is_integer() and abs(r) < 1e15 else r
    if isinstance(v, bytes):
        return f"<blob {len(v)} bytes>"
    if isinstance(v, str) and len(v) > MAX_CELL_CHARS:
        return v[:MAX_CELL_CHARS] + f"... [{len(v) - MAX_CELL_CHARS} more characters]"
    return v


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def make_app(world):
    db_path = world.db_path("sql")
    srv = AppServer("sql", instructions=INSTRUCTIONS)

    def connect() -> sqlite3.Connection:
        if not db_path.exists():
            raise ToolError("this world has no analytics database (sql app state is missing)")
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        conn.execute("PRAGMA query_only = 1")
        return conn

    def check_sql(sql: str) -> str:
        if not isinstance(sql, str) or not sql.strip():
            raise ToolError("sql is empty; pass one SELECT statement, e.g. SELECT COUNT(*) FROM orders")
        if len(sql) > MAX_SQL_CHARS:
            raise ToolError(f"sql is longer than {MAX_SQL_CHARS} characters; simplify the query")
        kw = _first_keyword(sql)
        if kw not in ("SELECT", "WITH"):
            raise ToolError(
                f"only read-only queries are allowed: the statement must start with SELECT or WITH "
                f"(got {kw or 'nothing'!r}). To see a table's columns use describe_table."
            )
        return sql

    def run(guard: QueryGuard, sql: str) -> sqlite3.Cursor:
        try:
            return guard.conn.execute(sql)
        except (sqlite3.Warning, sqlite3.ProgrammingError) as exc:  # e.g. more than one statement
            hint = " Send a single SELECT statement per call." if "one statement" in str(exc) else ""
            raise ToolError(f"SQLite error: {exc}{hint}") from None
        except sqlite3.DatabaseError as exc:
            raise ToolError(guard.explain(exc)) from None

    def fetch_capped(cur: sqlite3.Cursor, limit: int, size: int) -> tuple[list[list], bool]:
        """Rows as shown (``_show``), fetched one at a time: at most ``limit`` rows and about
        ``MAX_RESULT_CHARS`` of JSON (the first row always comes back). Returns the rows and
        whether more exist; SQLite never computes rows past the cap."""
        rows: list[list] = []
        while (r := cur.fetchone()) is not None:
            if len(rows) == limit:
                return rows, True
            row = [_show(v) for v in r]
            del r  # a row's full-size values go now, not after the next one is fetched
            size += len(json.dumps(row, ensure_ascii=False)) + 2
            if rows and size > MAX_RESULT_CHARS:
                return rows, True
            rows.append(row)
        return rows, False

    def table_name(conn: sqlite3.Connection, name: str) -> tuple[str, str]:
        tables = user_tables(conn)
        wanted = (name or "").strip().strip('"').strip("`").strip("[]")
        for t, kind in tables:
            if t == wanted:
                return t, kind
        for t, kind in tables:
            if t.lower() == wanted.lower():
                return t, kind
        raise ToolError(f"no table or view named {name!r}; tables: {', '.join(t for t, _ in tables)}")

    @srv.tool(READ)
    def list_tables() -> str:
        """List the database's tables and views with their row counts and a short description.

        Returns JSON [{name, kind (table or view), rows, description}]."""
        with closing(connect()) as conn:
            docs = notes(conn)
            out = []
            for name, kind in user_tables(conn):
                n = conn.execute(f"SELECT COUNT(*) FROM {_quote(name)}").fetchone()[0]
                out.append({"name": name, "kind": kind, "rows": n, "description": docs.get(name, "")})
        return cap(json.dumps(out, ensure_ascii=False))

    @srv.tool(READ)
    def describe_table(name: str) -> str:
        """Describe one table or view: its columns (name, type, nullable, primary key, foreign key
        reference, notes), its row count and a few sample rows.

        Args:
            name: table or view name as shown by list_tables (case-insensitive).

        Returns JSON {name, kind, description, rows, columns: [{name, type,
        nullable, primary_key, references, note}], sample: {columns: [...], rows: [[...]]}}."""
        with closing(connect()) as conn:
            t, kind = table_name(conn, name)
            docs = notes(conn)
            fks = {r[3]: f"{r[2]}.{r[4]}" if r[4] else r[2]
                   for r in conn.execute(f"PRAGMA foreign_key_list({_quote(t)})")}
            cols = []
            for cid, col, ctype, notnull, _default, pk in conn.execute(f"PRAGMA table_info({_quote(t)})"):
                cols.append({
                    "name": col, "type": ctype or "", "nullable": not notnull and not pk,
                    "primary_key": bool(pk), "references": fks.get(col), "note": docs.get(f"{t}.{col}", ""),
                })
            n = conn.execute(f"SELECT COUNT(*) FROM {_quote(t)}").fetchone()[0]
            cur = conn.execute(f"SELECT * FROM {_quote(t)} LIMIT {SAMPLE_ROWS}")
            sample = {"columns": [d[0] for d in cur.description],
                      "rows": [[_show(v) for v in r] for r in cur.fetchall()]}
        return cap(json.dumps({"name": t, "kind": kind, "description": docs.get(t, ""), "rows": n,
                               "columns": cols, "sample": sample}, ensure_ascii=False))

    @srv.tool(READ)
    def query(sql: str, limit: int = DEFAULT_LIMIT) -> str:
        """Run one read-only SQL query (SQLite dialect): a single SELECT or WITH ... SELECT.

        Args:
            sql: the query. Writes, several statements, ATTACH and PRAGMA statements are refused.
            limit: at most this many rows come back (1-1000, default 200); use ORDER BY and
                aggregation rather than paging through raw rows.

        Returns JSON {columns: [...], rows: [[...], ...], row_count, truncated}; when
        truncated is true more rows exist than were returned. On a mistake the error carries
        SQLite's message (e.g. "no such column: x") so the query can be fixed. Queries running
        longer than a few seconds are stopped."""
        if isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"limit must be 1-{MAX_LIMIT}")
        sql = check_sql(sql)
        with closing(connect()) as conn, closing(QueryGuard(conn, _authorize)) as guard:
            cur = run(guard, sql)
            columns = [d[0] for d in cur.description] if cur.description else []
            try:
                rows, more = fetch_capped(cur, limit, len(json.dumps(columns, ensure_ascii=False)) + 80)
            except sqlite3.DatabaseError as exc:
                raise ToolError(guard.explain(exc)) from None
        out: dict[str, Any] = {"columns": columns, "rows": rows, "row_count": len(rows), "truncated": more}
        if more:
            out["note"] = (f"only the first {len(rows)} rows are shown; aggregate, filter, or add "
                           "ORDER BY ... LIMIT to get what you need")
        return json.dumps(out, ensure_ascii=False)

    @srv.tool(READ)
    def explain(sql: str) -> str:
        """Show SQLite's query plan for a SELECT without running it (EXPLAIN QUERY PLAN), to spot
        full scans before running a heavy query.

        Returns JSON [{id, parent, detail}]."""
        sql = check_sql(sql)
        with closing(connect()) as conn, closing(QueryGuard(conn, _authorize)) as guard:
            cur = run(guard, "EXPLAIN QUERY PLAN " + sql)
            plan = [{"id": r[0], "parent": r[1], "detail": r[3]} for r in cur.fetchall()]
        return cap(json.dumps(plan, ensure_ascii=False))

    return srv


build_server = server_builder(make_app)
