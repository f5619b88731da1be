"""User app state: the simulated person in a dual-control task, and the systems both sides share.

One SQLite file, ``state/user.sqlite``. Common tables:

- ``meta``: the domain (``mobile``, ``identity``, ``onboarding``), the persona, what the person
  knows (``facts``, JSON), their patience (how many messages they answer), a seed for the
  person's deterministic choices, and optionally an LLM to play them (``llm``, JSON).
- ``conversation``: every message between the agent and the person, in order.
- ``actions``: every change to shared state and who made it: ``user`` for the person's own
  tools (reboot the phone, sign the contract), ``agent`` for back-office tools. Graders read
  it to check who did what, and in which order (``message`` is how many agent messages had
  been sent when the action happened; ``seq`` orders everything).
- ``llm_messages``: the LLM-played person's own chat history, when one plays them.

Each domain module adds its tables (``DOMAIN.SCHEMA``). ``create`` is deterministic: same
arguments, byte-identical file.
"""

from __future__ import annotations

import importlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

DOMAINS = ("mobile", "identity", "onboarding")
ACTORS = ("agent", "user")

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE conversation (
    seq INTEGER PRIMARY KEY,
    role TEXT NOT NULL CHECK (role IN ('agent', 'user')),
    text TEXT NOT NULL
);
CREATE TABLE actions (
    seq INTEGER PRIMARY KEY,
    actor TEXT NOT NULL CHECK (actor IN ('agent', 'user')),
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    ok INTEGER NOT NULL,
    result TEXT NOT NULL,
    message INTEGER NOT NULL
);
CREATE TABLE llm_messages (seq INTEGER PRIMARY KEY, message TEXT NOT NULL);
"""


def domain_module(name: str):
    """The module that defines domain ``name`` (its schema, tools and simulated person)."""
    if name not in DOMAINS:
        raise ValueError(f"unknown user domain {name!r}: choose from {', '.join(DOMAINS)}")
    return importlib.import_module(f"longhorizon.apps.user.{name}")


def create(
    db_path: Path | str,
    domain: str,
    *,
    persona: Mapping[str, Any],
    facts: Mapping[str, Any],
    tables: Mapping[str, Iterable[Mapping[str, Any]]] = (),
    patience: int = 30,
    seed: int = 0,
    llm: Mapping[str, Any] | None = None,
) -> Path:
    """Write a new user world. Same arguments -> byte-identical file.

    ``persona``: ``{"name", "style"}`` (style: a sentence about how they talk, for an LLM user).
    ``facts``: what the person knows and can tell the agent (domain-specific keys).
    ``tables``: rows for the domain's tables, ``{table: [{column: value}]}``, inserted in order.
    ``patience``: how many agent messages the person answers before giving up.
    ``llm``: ``{"base_url", "model"}`` to have an LLM play the person (env vars override).
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    module = domain_module(domain)
    if "name" not in persona:
        raise ValueError("persona needs a name")
    if patience < 1:
        raise ValueError("patience must be at least 1")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        conn.executescript(module.SCHEMA)
        meta = [
            ("domain", domain),
            ("persona", json.dumps(dict(persona), sort_keys=True, ensure_ascii=False)),
            ("facts", json.dumps(dict(facts), sort_keys=True, ensure_ascii=False)),
            ("patience", str(int(patience))),
            ("seed", str(int(seed))),
        ]
        if llm:
            meta.append(("llm", json.dumps(dict(llm), sort_keys=True)))
        conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
        for table, rows in dict(tables).items():
            for row in rows:
                cols = list(row)
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [_cell(row[c]) for c in cols],
                )
        conn.commit()
    return db_path


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


# -- writers the app and the simulated person share ------------------------------------------

def agent_messages(conn: sqlite3.Connection) -> int:
    """How many messages the agent has sent so far."""
    return conn.execute("SELECT COUNT(*) FROM conversation WHERE role = 'agent'").fetchone()[0]


def log_action(conn: sqlite3.Connection, actor: str, tool: str, arguments: Mapping[str, Any],
               ok: bool, result: str) -> None:
    """Record one action in the shared log (call inside the transaction that made the change)."""
    if actor not in ACTORS:
        raise ValueError(f"actor must be one of {ACTORS}")
    conn.execute(
        "INSERT INTO actions (actor, tool, arguments, ok, result, message) VALUES (?, ?, ?, ?, ?, ?)",
        (actor, tool, json.dumps(dict(arguments), sort_keys=True, ensure_ascii=False), int(bool(ok)), result,
         agent_messages(conn)),
    )


def read_meta(conn: sqlite3.Connection) -> dict[str, Any]:
    raw = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    out: dict[str, Any] = dict(raw)
    for key in ("persona", "facts", "llm"):
        if key in raw:
            out[key] = json.loads(raw[key])
    out["patience"] = int(raw.get("patience", 30))
    out["seed"] = int(raw.get("seed", 0))
    return out


# -- readers for graders ---------------------------------------------------------------------

def meta(world) -> dict[str, Any]:
    with closing(world.db("user")) as conn:
        return read_meta(conn)


def conversation(world) -> list[dict[str, Any]]:
    """Every message, in order: ``[{"seq", "role", "text"}]`` (role ``agent`` or ``user``)."""
    with closing(world.db("user")) as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM conversation ORDER BY seq")]


def actions(world, actor: str | None = None, tool: str | None = None, ok_only: bool = False) -> list[dict[str, Any]]:
    """The shared action log, in order, optionally filtered: ``[{"seq", "actor", "tool",
    "arguments" (dict), "ok", "result", "message"}]``."""
    sql, args = ["SELECT * FROM actions WHERE 1 = 1"], []
    if actor is not None:
        sql.append("AND actor = ?")
        args.append(actor)
    if tool is not None:
        sql.append("AND tool = ?")
        args.append(tool)
    if ok_only:
        sql.append("AND ok = 1")
    sql.append("ORDER BY seq")
    with closing(world.db("user")) as conn:
        rows = conn.execute(" ".join(sql), args).fetchall()
    out = []
    for r in rows:
        d = dict(r)
        d["arguments"] = json.loads(d["arguments"])
        d["ok"] = bool(d["ok"])
        out.append(d)
    return out


def rows(world, table: str, order: str = "rowid") -> list[dict[str, Any]]:
    """Every row of one of the domain's tables (for graders), in ``order``."""
    if not table.isidentifier() or not all(part.isidentifier() for part in order.replace(",", " ").split()
                                          if part.upper() not in ("ASC", "DESC")):
        raise ValueError("bad table or order")
    with closing(world.db("user")) as conn:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]
