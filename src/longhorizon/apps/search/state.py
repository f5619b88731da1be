"""Search app state: a document archive with a SQLite FTS5 index (``state/search.sqlite``).

Documents have a string id (``DOC-0042``), title, body, date (``YYYY-MM-DD``), source (a
named collection such as ``press`` or ``meetings``) and an optional author. The index is an
external-content FTS5 table over title and body (porter stemming, unicode61 tokens) ranked
with BM25. ``create_index`` is deterministic: same documents in the same order give a
byte-identical file. The agent only reads it, so the server opens it read-only.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from datetime import date, datetime
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sources (name TEXT PRIMARY KEY, description TEXT NOT NULL, position INTEGER NOT NULL);
CREATE TABLE documents (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    date TEXT NOT NULL,
    source TEXT NOT NULL REFERENCES sources(name),
    author TEXT NOT NULL DEFAULT ''
);
CREATE INDEX documents_date ON documents(date);
CREATE INDEX documents_source ON documents(source, date);
CREATE VIRTUAL TABLE documents_fts USING fts5(
    title, body, content='documents', content_rowid='n', tokenize='porter unicode61'
);
"""

_DOC_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SOURCE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


def normalize_day(value: Any) -> str:
    """A date, datetime or ISO string -> ``YYYY-MM-DD``; ValueError when unreadable."""
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    text = str(value).strip()
    try:
        return datetime.fromisoformat(text).date().isoformat()
    except ValueError:
        return date.fromisoformat(text[:10]).isoformat()


def create_index(
    db_path: Path | str,
    documents: Iterable[Mapping[str, Any]],
    sources: Mapping[str, str] | None = None,
    *,
    title: str = "Document archive",
) -> Path:
    """Write a new archive. Same arguments -> byte-identical file.

    ``documents`` are dicts with ``id, title, body, date, source`` and optionally ``author``.
    ``sources`` maps each source name to a one-line description (order kept); sources that
    documents use but ``sources`` omits get an empty description.
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    srcs: dict[str, str] = dict(sources or {})
    rows, seen = [], set()
    for n, d in enumerate(documents, start=1):
        doc_id = str(d["id"])
        if not _DOC_ID.match(doc_id):
            raise ValueError(f"bad document id {doc_id!r}")
        if doc_id.lower() in seen:
            raise ValueError(f"duplicate document id {doc_id!r}")
        seen.add(doc_id.lower())
        source = str(d["source"])
        if not _SOURCE.match(source):
            raise ValueError(f"document {doc_id}: bad source name {source!r} (lower case, digits, - and _)")
        srcs.setdefault(source, "")
        rows.append((n, doc_id, str(d["title"]), str(d["body"]), normalize_day(d["date"]), source,
                     str(d.get("author", ""))))
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [("title", title)])
        conn.executemany("INSERT INTO sources VALUES (?, ?, ?)",
                         [(name, desc, i) for i, (name, desc) in enumerate(srcs.items())])
        conn.executemany("INSERT INTO documents VALUES (?,?,?,?,?,?,?)", rows)
        conn.execute("INSERT INTO documents_fts(rowid, title, body) SELECT n, title, body FROM documents ORDER BY n")
        conn.execute("INSERT INTO documents_fts(documents_fts) VALUES ('optimize')")
        conn.commit()
    return db_path


# -- readers for graders and tools ---------------------------------------------------------

def connect_readonly(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def document(world, doc_id: str) -> dict[str, Any] | None:
    with closing(world.db("search")) as conn:
        row = conn.execute("SELECT * FROM documents WHERE id = ? COLLATE NOCASE", (doc_id,)).fetchone()
    return {k: row[k] for k in ("id", "title", "body", "date", "source", "author")} if row else None


def document_ids(world) -> list[str]:
    with closing(world.db("search")) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM documents ORDER BY n")]


# -- query language -------------------------------------------------------------------------

_TOKEN = re.compile(r'"([^"]*)"?|(\S+)')
_WORD = re.compile(r"\w+", re.UNICODE)
OPERATORS = ("AND", "OR", "NOT")


def fts_query(text: str) -> tuple[str, list[str]]:
    """A user's query -> (an FTS5 MATCH expression that always parses, its plain terms).

    Plain words must all match; ``"quoted phrases"`` match in order; ``OR`` and ``NOT``
    (upper case) combine terms; a trailing ``*`` matches a prefix (``migrat*``). Any other
    punctuation only separates words, so ``INV-2041`` is the phrase ``"inv 2041"``.
    """
    parts: list[str] = []
    terms: list[str] = []
    for m in _TOKEN.finditer(text or ""):
        phrase, word = m.group(1), m.group(2)
        if word in OPERATORS:
            if parts and parts[-1] not in OPERATORS:
                parts.append(word)
            continue
        raw = phrase if phrase is not None else word
        prefix = phrase is None and raw.endswith("*")
        words = _WORD.findall(raw)
        if not words:
            continue
        term = '"' + " ".join(w.lower() for w in words) + '"' + ("*" if prefix else "")
        parts.append(term)
        terms.append(term)
    while parts and parts[-1] in OPERATORS:
        parts.pop()
    return " ".join(parts), terms
