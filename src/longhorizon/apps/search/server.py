"""The `search` app: an MCP server over a read-only document archive (``state/search.sqlite``).

Full-text search is SQLite FTS5 ranked by BM25 (title matches weigh more than body
matches). The archive is opened read-only, so no tool can change it.
"""

from __future__ import annotations

import difflib
import json
import sqlite3
from contextlib import closing
from datetime import date
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import READ, AppServer, cap, server_builder
from longhorizon.apps.search.state import OPERATORS, connect_readonly, fts_query

MAX_LIMIT = 50
PAGE_CHARS = 8_000
TITLE_WEIGHT, BODY_WEIGHT = 5.0, 1.0

INSTRUCTIONS = (
    "A read-only full-text search engine over the company's document archive (press releases, "
    "memos, contracts, meeting notes, tickets, ...). Find documents with search (best matches "
    "first), read one in full with get_document, and see the collections with list_sources. "
    "Document ids look like DOC-0042; dates are YYYY-MM-DD."
)


def _dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


def make_app(world):
    db_path = world.db_path("search")
    srv = AppServer("search", instructions=INSTRUCTIONS)

    def connect() -> sqlite3.Connection:
        if not db_path.exists():
            raise ToolError("this world has no document archive (search app state is missing)")
        return connect_readonly(db_path)

    def resolve_source(conn, name: str) -> str:
        names = [r[0] for r in conn.execute("SELECT name FROM sources ORDER BY position")]
        wanted = (name or "").strip().lower()
        if wanted in names:
            return wanted
        raise ToolError(f"no source named {name!r}; sources are: {', '.join(names)} (see list_sources)")

    def run(conn, match: str, where: list[str], args: list[Any], limit: int, offset: int):
        cond = " AND ".join(["documents_fts MATCH ?", *where])
        total = conn.execute(
            f"SELECT COUNT(*) FROM documents_fts JOIN documents d ON d.n = documents_fts.rowid WHERE {cond}",
            [match, *args],
        ).fetchone()[0]
        rows = conn.execute(
            "SELECT d.id, d.title, d.date, d.source, d.author, "
            "snippet(documents_fts, 1, '[', ']', ' ... ', 24) AS snip, "
            f"bm25(documents_fts, {TITLE_WEIGHT}, {BODY_WEIGHT}) AS score "
            f"FROM documents_fts JOIN documents d ON d.n = documents_fts.rowid WHERE {cond} "
            "ORDER BY score, d.date DESC, d.n LIMIT ? OFFSET ?",
            [match, *args, limit, offset],
        ).fetchall()
        return total, rows

    @srv.tool(READ)
    def search(query: str, limit: int = 10, offset: int = 0, source: str | None = None,
               since: str | None = None) -> str:
        """Full-text search over the archive, best matches first (BM25 ranking; title matches count more).

        Args:
            query: words to look for. Every plain word must appear (word endings are ignored:
                "renewal" also finds "renewals"). Use "double quotes" for an exact phrase,
                OR between alternatives (upper case), NOT to exclude a word, and a trailing *
                for a prefix (migrat*). May be "" when source or since is given: then the
                matching documents are listed newest first.
            limit: how many hits to return (1-50).
            offset: how many hits to skip, for paging (use next_offset from the previous page).
            source: only documents from this source (see list_sources), e.g. "press".
            since: only documents dated on or after this day (YYYY-MM-DD).

        Returns JSON {query, total, offset, hits: [{id, title, date, source,
        author, snippet}], next_offset} (next_offset is null on the last page). Matched
        words are shown in [brackets] in the snippet. If no document contains every word,
        documents containing any of them are returned instead and "note" says so."""
        if not 1 <= limit <= MAX_LIMIT or offset < 0:
            raise ToolError(f"limit must be 1-{MAX_LIMIT} and offset >= 0")
        match, terms = fts_query(query)
        if not terms and not (source or since):
            raise ToolError("give some words to search for (or a source/since filter to browse)")
        where, args = [], []
        note = None
        with closing(connect()) as conn:
            if source:
                where.append("d.source = ?")
                args.append(resolve_source(conn, source))
            if since:
                try:
                    day = date.fromisoformat(since.strip()[:10]).isoformat()
                except ValueError:
                    raise ToolError(f"since={since!r} is not a date: use YYYY-MM-DD") from None
                where.append("d.date >= ?")
                args.append(day)
            if not terms:
                cond = " AND ".join(where)
                total = conn.execute(f"SELECT COUNT(*) FROM documents d WHERE {cond}", args).fetchone()[0]
                rows = conn.execute(
                    f"SELECT d.id, d.title, d.date, d.source, d.author, substr(d.body, 1, 160) AS snip "
                    f"FROM documents d WHERE {cond} ORDER BY d.date DESC, d.n LIMIT ? OFFSET ?",
                    [*args, limit, offset],
                ).fetchall()
            else:
                total, rows = run(conn, match, where, args, limit, offset)
                if total == 0 and len(terms) > 1 and not set(match.split()) & set(OPERATORS):
                    total, rows = run(conn, " OR ".join(terms), where, args, limit, offset)
                    if total:
                        note = "no document contains every word; showing documents that contain any of them"
        hits = [{"id": r["id"], "title": r["title"], "date": r["date"], "source": r["source"],
                 "author": r["author"], "snippet": " ".join(r["snip"].split())} for r in rows]
        nxt = offset + len(hits) if offset + len(hits) < total else None
        out: dict[str, Any] = {"query": query, "total": total, "offset": offset, "hits": hits, "next_offset": nxt}
        if note:
            out["note"] = note
        return _dumps(out)

    @srv.tool(READ)
    def get_document(doc_id: str, offset: int = 0) -> str:
        """Read one document in full: title, date, source, author and body text.

        Args:
            doc_id: the document id from a search hit, e.g. "DOC-0042" (case does not matter).
            offset: character offset into the body, for long documents (use next_offset).

        Returns JSON {id, title, date, source, author, body, offset,
        total_chars, next_offset}; the body comes in pieces of up to 8000 characters and
        next_offset is null once the end is reached."""
        if offset < 0:
            raise ToolError("offset must be >= 0")
        with closing(connect()) as conn:
            row = conn.execute("SELECT * FROM documents WHERE id = ? COLLATE NOCASE",
                               ((doc_id or "").strip(),)).fetchone()
            if row is None:
                ids = [r[0] for r in conn.execute("SELECT id FROM documents")]
                near = difflib.get_close_matches((doc_id or "").strip().upper(), ids, n=3, cutoff=0.8)
                hint = f" Did you mean {', '.join(near)}?" if near else ""
                raise ToolError(f"no document with id {doc_id!r}.{hint} Use search to find document ids.")
        body = row["body"]
        if offset and offset >= len(body):
            raise ToolError(f"offset {offset} is past the end of {row['id']} ({len(body)} characters)")
        piece = body[offset:offset + PAGE_CHARS]
        nxt = offset + PAGE_CHARS if offset + PAGE_CHARS < len(body) else None
        return _dumps({"id": row["id"], "title": row["title"], "date": row["date"], "source": row["source"],
                       "author": row["author"], "body": piece, "offset": offset, "total_chars": len(body),
                       "next_offset": nxt})

    @srv.tool(READ)
    def list_sources() -> str:
        """List the archive's sources (collections of documents) with what each holds.

        Returns JSON [{name, description, documents, oldest, newest}] (dates YYYY-MM-DD)."""
        with closing(connect()) as conn:
            rows = conn.execute(
                "SELECT s.name, s.description, COUNT(d.n) AS n, MIN(d.date) AS oldest, MAX(d.date) AS newest "
                "FROM sources s LEFT JOIN documents d ON d.source = s.name GROUP BY s.name ORDER BY s.position"
            ).fetchall()
        return _dumps([{"name": r["name"], "description": r["description"], "documents": r["n"],
                        "oldest": r["oldest"], "newest": r["newest"]} for r in rows])

    return srv


build_server = server_builder(make_app)
