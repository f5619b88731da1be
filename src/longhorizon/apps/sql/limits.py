"""What one agent-written SQL query may cost, in time and memory (``QueryGuard``).

A progress handler stops a query past a VM-step budget or its deadline, and a timer
interrupts it at the deadline; both act between VM steps only. What one step can cost is
bounded by SQLite's own limits (``LIMITS``): no string or blob (nor row record) over
``MAX_VALUE_BYTES`` (``zeroblob(450000000)`` or ``printf('%.*c', 900000000, 'x')`` would
otherwise allocate gigabytes in one step), few columns, shallow expressions, short LIKE/GLOB
patterns. A few built-in functions loop in one step for longer than any limit bounds:
``printf``'s ``%.*c`` repeats a character once per unit of precision even after its output
is refused, and ``trim``, ``instr`` and ``replace`` take time in the product of their two
arguments' lengths. Those are replaced on the connection by checks that refuse a too-large
width, character set or needle, then run SQLite's own function on a private in-memory
connection, so every result is exactly the built-in's (text arguments to trim, instr and
replace take a Python fast path whose results are the same).
"""

from __future__ import annotations

import functools
import re
import sqlite3
import threading
import time
from collections.abc import Callable

MAX_SQL_CHARS = 20_000
QUERY_TIMEOUT_S = 5.0
MAX_VM_STEPS = 200_000_000
"""A query may run this many SQLite VM instructions (and at most QUERY_TIMEOUT_S seconds)."""
PROGRESS_EVERY = 10_000
MAX_VALUE_BYTES = 1_000_000
"""The largest string or blob (and row record) a query may build: the analytics tables hold
short values, and a whole column joined by group_concat stays far below this."""
MAX_TRIM_CHARS = 64
"""trim/ltrim/rtrim's set of characters to strip (its cost is this times the text's length)."""
MAX_NEEDLE_BYTES = 1_000
"""What instr looks for and replace replaces (their cost is up to this times the text's length)."""

LIMITS = {
    sqlite3.SQLITE_LIMIT_LENGTH: MAX_VALUE_BYTES,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 4 * MAX_SQL_CHARS + 100,  # UTF-8 bytes, plus EXPLAIN's prefix
    sqlite3.SQLITE_LIMIT_COLUMN: 100,
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 200,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 50,
    sqlite3.SQLITE_LIMIT_VDBE_OP: 250_000,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 32,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 200,
    sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: 32,
}
"""SQLite limits on every connection that runs agent-written SQL."""

_LIMIT_ERRORS = (
    ("string or blob too big", f"a value (or row) this query builds would be over {MAX_VALUE_BYTES:,} bytes, "
     "the most one string or blob may hold here (think of zeroblob, printf widths, replace or "
     "group_concat over many rows). Return less: aggregate, substr(), or LIMIT."),
    ("too many columns", f"a query may have at most {LIMITS[sqlite3.SQLITE_LIMIT_COLUMN]} columns; select fewer."),
    ("expression tree is too large", "the expression nests too deeply; simplify it (e.g. IN (...) instead of "
     "chained ORs)."),
    ("too many terms in compound select", f"at most {LIMITS[sqlite3.SQLITE_LIMIT_COMPOUND_SELECT]} SELECTs may "
     "be joined by UNION; use a VALUES list or a table instead."),
    ("like or glob pattern too complex", f"LIKE/GLOB patterns may be at most "
     f"{LIMITS[sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH]} characters."),
    ("too many sql variables", "queries take no ? parameters here; write the values into the SQL."),
    ("too many arguments on function", f"functions take at most {LIMITS[sqlite3.SQLITE_LIMIT_FUNCTION_ARG]} "
     "arguments here."),
    ("too many", "a size limit on queries here was reached; simplify the query."),
)
"""SQLite's messages for the limits in ``LIMITS``, and what the agent can do about each."""

_SPEC = re.compile(r"%[-+ #0!,]*(\*|\d+)?(?:\.(\*|\d*))?l{0,2}(.)?", re.S)


_STRIP = {"trim": str.strip, "ltrim": str.lstrip, "rtrim": str.rstrip}


@functools.lru_cache(maxsize=256)
def _printf_specs(fmt: str) -> tuple[tuple[str | None, str | None, bool], ...]:
    """Each conversion of a printf format: (width, precision, whether it takes an argument),
    width and precision being None, "*" (from the next argument) or digits."""
    return tuple((m.group(1), m.group(2) or None, m.group(3) not in (None, "%")) for m in _SPEC.finditer(fmt))


class QueryGuard:
    """The budget of one query on ``conn`` (a connection of its own): install, run the query and
    fetch, then ``close()``. ``explain(exc)`` turns the error that stopped it into words."""

    def __init__(self, conn: sqlite3.Connection, authorizer: Callable | None = None):
        self.conn = conn
        self.refused: str | None = None  # why a checked function refused, for explain()
        self._helper: sqlite3.Connection | None = None
        if authorizer is not None:
            conn.set_authorizer(authorizer)
        for limit, value in LIMITS.items():
            conn.setlimit(limit, value)
        self._install_functions()
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        budget = [MAX_VM_STEPS // PROGRESS_EVERY]

        def progress() -> int:
            budget[0] -= 1
            return int(budget[0] <= 0 or time.monotonic() > deadline)

        conn.set_progress_handler(progress, PROGRESS_EVERY)
        self._lock = threading.Lock()
        self._timer = threading.Timer(QUERY_TIMEOUT_S, self._interrupt)  # when no VM step ends for long
        self._timer.daemon = True
        self._timer.start()

    def _interrupt(self) -> None:
        with self._lock:
            if self._timer is not None:
                self.conn.interrupt()

    def close(self) -> None:
        """Stop the timer (it never touches the connection after this returns)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if self._helper is not None:
            self._helper.close()
            self._helper = None

    def explain(self, exc: sqlite3.Error) -> str:
        msg = str(exc)
        if msg == "interrupted":
            return (f"query stopped: it ran longer than {QUERY_TIMEOUT_S:g} s (or did too much work). "
                    "Filter earlier, aggregate, or avoid unbounded joins/recursion.")
        if "not authorized" in msg:
            return "only read-only queries are allowed (no writes, ATTACH, or settings changes)."
        if self.refused and "user-defined function raised exception" in msg:
            return f"SQLite error: {self.refused}"
        for pattern, why in _LIMIT_ERRORS:
            if pattern in msg.lower():
                return f"SQLite error: {msg}: {why}"
        return f"SQLite error: {msg}"

    # -- functions whose one step could run for long -----------------------------------------

    def _private(self) -> sqlite3.Connection:
        """The connection where checked calls run SQLite's own functions (same limits)."""
        if self._helper is None:
            self._helper = sqlite3.connect(":memory:", check_same_thread=False)
            for limit, value in LIMITS.items():
                self._helper.setlimit(limit, value)
        return self._helper

    def _builtin(self, name: str, args: tuple):
        """SQLite's own ``name(*args)``: the checked function's result, exactly."""
        marks = ", ".join("?" * len(args))
        return self._private().execute(f"SELECT {name}({marks})", args).fetchone()[0]

    def _int(self, value) -> int:
        """A ``*`` argument as printf reads it (SQLite's integer conversion)."""
        if isinstance(value, int):
            return value
        return self._private().execute("SELECT CAST(? AS INTEGER)", (value,)).fetchone()[0] or 0

    def _refuse(self, why: str):
        """Fail the checked call; the query's error will carry ``why`` (see ``explain``)."""
        self.refused = why
        raise ValueError(why)

    def _check_printf(self, name: str, args: tuple) -> None:
        fmt = args[0] if args else None
        if isinstance(fmt, bytes):
            fmt = fmt.decode("utf-8", "replace")
        if not isinstance(fmt, str):
            return
        rest = list(args[1:])
        for width, precision, takes_arg in _printf_specs(fmt):
            for part in (width, precision):
                if part is None:
                    continue
                size = (abs(self._int(rest.pop(0))) if rest else 0) if part == "*" else \
                    (int(part) if len(part) < 12 else 2**63)
                if size > MAX_VALUE_BYTES:
                    self._refuse(f"{name}() width or precision {size:,} is over {MAX_VALUE_BYTES:,}, the "
                                 "longest text a query may build here")
            if takes_arg and rest:
                rest.pop(0)

    def _trim(self, name: str, args: tuple):
        text, chars = args
        if chars is not None and len(chars if isinstance(chars, (str, bytes)) else str(chars)) > MAX_TRIM_CHARS:
            self._refuse(f"{name}()'s second argument (the characters to strip) may hold at most "
                         f"{MAX_TRIM_CHARS} characters")
        if isinstance(text, str) and isinstance(chars, str):  # SQLite strips whole characters of the set
            return _STRIP[name](text, chars)
        return self._builtin(name, args)

    def _check_needle(self, name: str, needle) -> None:
        size = len(needle.encode("utf-8", "surrogatepass") if isinstance(needle, str) else needle) \
            if isinstance(needle, (str, bytes)) else 0
        if size > MAX_NEEDLE_BYTES:
            self._refuse(f"{name}()'s second argument (what to look for) may be at most {MAX_NEEDLE_BYTES:,} "
                         "bytes")

    def _instr(self, name: str, args: tuple):
        haystack, needle = args
        self._check_needle(name, needle)
        if type(haystack) is type(needle) and isinstance(needle, (str, bytes)):  # characters, or bytes of blobs
            return haystack.find(needle) + 1
        return self._builtin(name, args)

    def _replace(self, name: str, args: tuple):
        text, old, new = args
        self._check_needle(name, old)
        if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
            if not old:
                return text  # SQLite: an empty pattern changes nothing
            if 4 * (len(text) + text.count(old) * max(len(new) - len(old), 0)) <= MAX_VALUE_BYTES:
                return text.replace(old, new)
        return self._builtin(name, args)  # (SQLite refuses a result over the length limit)

    def _install_functions(self) -> None:
        def check_then_builtin(name, args):
            self._check_printf(name, args)
            return self._builtin(name, args)

        checked = [("printf", -1, check_then_builtin), ("format", -1, check_then_builtin),
                   ("trim", 2, self._trim), ("ltrim", 2, self._trim), ("rtrim", 2, self._trim),
                   ("instr", 2, self._instr), ("replace", 3, self._replace)]
        for name, nargs, fn in checked:
            self.conn.create_function(name, nargs, self._checked(name, fn), deterministic=True)

    def _checked(self, name: str, fn: Callable[[str, tuple], object]):
        def call(*args):
            try:
                return fn(name, args)
            except sqlite3.Error as exc:  # e.g. a result over MAX_VALUE_BYTES: say so, not "raised exception"
                self._refuse(f"{name}(): " + self.explain(exc).removeprefix("SQLite error: "))
        return call
