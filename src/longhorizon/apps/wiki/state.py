"""Wiki app state: a team wiki in one SQLite file (``state/wiki.sqlite``).

Pages have a slug (``incident-response``), a title, a Markdown body, tags, an author and an
``updated`` stamp; every change to title, slug or body is kept as a numbered revision.
Pages link to each other with wikilinks, ``[[slug]]`` or ``[[slug|label]]``; the ``links``
table is derived from the bodies on every write, so ``backlinks`` also finds links to pages
that no longer exist (broken links). Renames are recorded, so a lookup of an old slug can
say where the page went.

``create_wiki`` is deterministic (fixed insertion order, no clock reads). The wiki has its
own clock (``meta.now``); each edit the agent makes is stamped from it, a minute apart.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

DATE_FMT = "%Y-%m-%dT%H:%M:%S"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE pages (
    id INTEGER PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    author TEXT NOT NULL,
    created TEXT NOT NULL,
    updated TEXT NOT NULL,
    revision INTEGER NOT NULL
);
CREATE TABLE tags (page_id INTEGER NOT NULL REFERENCES pages(id), tag TEXT NOT NULL, PRIMARY KEY (page_id, tag));
CREATE TABLE revisions (
    id INTEGER PRIMARY KEY,
    page_id INTEGER NOT NULL REFERENCES pages(id),
    revision INTEGER NOT NULL,
    slug TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    author TEXT NOT NULL,
    summary TEXT NOT NULL,
    date TEXT NOT NULL,
    UNIQUE (page_id, revision)
);
CREATE TABLE links (page_id INTEGER NOT NULL REFERENCES pages(id), target TEXT NOT NULL, PRIMARY KEY (page_id, target));
CREATE INDEX links_target ON links(target);
CREATE TABLE renames (id INTEGER PRIMARY KEY, page_id INTEGER NOT NULL, old_slug TEXT NOT NULL,
                      new_slug TEXT NOT NULL, author TEXT NOT NULL, date TEXT NOT NULL);
"""

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
TAG = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")
WIKILINK = re.compile(r"\[\[\s*([^\]|#]+?)\s*(?:#[^\]|]*)?(?:\|[^\]]*)?\]\]")


def link_targets(body: str) -> list[str]:
    """The slugs a body links to with ``[[slug]]`` / ``[[slug|label]]`` / ``[[slug#section]]``, in order."""
    return list(dict.fromkeys(m.group(1).strip().lower() for m in WIKILINK.finditer(body or "")))


def normalize_stamp(value: str) -> str:
    dt = datetime.fromisoformat(str(value).strip())
    return dt.replace(tzinfo=None).strftime(DATE_FMT)


def advance(clock: str, minutes: int = 1) -> str:
    return (datetime.strptime(clock, DATE_FMT) + timedelta(minutes=minutes)).strftime(DATE_FMT)


def create_wiki(
    db_path: Path | str,
    pages: Iterable[Mapping[str, Any]],
    *,
    user: str,
    now: str,
    renames: Iterable[Mapping[str, Any]] = (),
) -> Path:
    """Write a new wiki. Same arguments -> byte-identical file.

    ``pages`` are dicts with ``slug, title, body, author, updated`` and optionally ``tags``
    and ``history``: earlier revisions, oldest first, each a dict with ``body, author, date``
    and optionally ``title, slug, summary``. The current text becomes the last revision
    (its summary is ``summary`` or "Edited"). ``renames`` are ``{old_slug, new_slug, author,
    date}`` records for pages renamed in the past. ``user`` is who the agent edits as;
    ``now`` is the wiki clock.
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    page_rows, tag_rows, rev_rows, link_rows = [], [], [], []
    slugs: dict[str, int] = {}
    for pid, p in enumerate(pages, start=1):
        slug = p["slug"]
        if not SLUG.match(slug):
            raise ValueError(f"bad slug {slug!r}")
        if slug in slugs:
            raise ValueError(f"duplicate slug {slug!r}")
        slugs[slug] = pid
        history = list(p.get("history", []))
        revs = [*history, {"slug": slug, "title": p["title"], "body": p["body"], "author": p["author"],
                           "date": p["updated"], "summary": p.get("summary", "Edited" if history else "Created")}]
        for n, r in enumerate(revs, start=1):
            rev_rows.append((pid, n, r.get("slug", slug), r.get("title", p["title"]), r["body"], r["author"],
                             r.get("summary", "Created" if n == 1 else "Edited"), normalize_stamp(r["date"])))
        created = normalize_stamp(revs[0]["date"])
        page_rows.append((pid, slug, p["title"], p["body"], p["author"], created, normalize_stamp(p["updated"]),
                          len(revs)))
        for tag in dict.fromkeys(p.get("tags", [])):
            if not TAG.match(tag):
                raise ValueError(f"page {slug}: bad tag {tag!r}")
            tag_rows.append((pid, tag))
        link_rows.extend((pid, t) for t in link_targets(p["body"]))
    rename_rows = []
    for r in renames:
        pid = slugs.get(r["new_slug"])
        if pid is None:
            raise ValueError(f"rename to unknown page {r['new_slug']!r}")
        rename_rows.append((pid, r["old_slug"], r["new_slug"], r["author"], normalize_stamp(r["date"])))
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [("user", user), ("now", normalize_stamp(now))])
        conn.executemany("INSERT INTO pages VALUES (?,?,?,?,?,?,?,?)", page_rows)
        conn.executemany("INSERT INTO tags VALUES (?, ?)", tag_rows)
        conn.executemany("INSERT INTO revisions (page_id, revision, slug, title, body, author, summary, date)"
                         " VALUES (?,?,?,?,?,?,?,?)", rev_rows)
        conn.executemany("INSERT INTO links VALUES (?, ?)", link_rows)
        conn.executemany("INSERT INTO renames (page_id, old_slug, new_slug, author, date) VALUES (?,?,?,?,?)",
                         rename_rows)
        conn.commit()
    return db_path


# -- readers for graders and tools ---------------------------------------------------------

def page_dict(conn, row) -> dict[str, Any]:
    tags = [r[0] for r in conn.execute("SELECT tag FROM tags WHERE page_id = ? ORDER BY tag", (row["id"],))]
    return {
        "id": row["id"], "slug": row["slug"], "title": row["title"], "body": row["body"],
        "author": row["author"], "created": row["created"], "updated": row["updated"],
        "revision": row["revision"], "tags": tags,
    }


def pages(world) -> dict[str, dict[str, Any]]:
    """Every page by slug (with tags), in slug order."""
    with closing(world.db("wiki")) as conn:
        rows = conn.execute("SELECT * FROM pages ORDER BY slug").fetchall()
        return {r["slug"]: page_dict(conn, r) for r in rows}


def page(world, slug: str) -> dict[str, Any] | None:
    with closing(world.db("wiki")) as conn:
        row = conn.execute("SELECT * FROM pages WHERE slug = ?", (slug,)).fetchone()
        return page_dict(conn, row) if row else None


def page_by_id(world, page_id: int) -> dict[str, Any] | None:
    with closing(world.db("wiki")) as conn:
        row = conn.execute("SELECT * FROM pages WHERE id = ?", (page_id,)).fetchone()
        return page_dict(conn, row) if row else None


def revisions(world, page_id: int) -> list[dict[str, Any]]:
    """A page's revisions, oldest first."""
    with closing(world.db("wiki")) as conn:
        rows = conn.execute("SELECT * FROM revisions WHERE page_id = ? ORDER BY revision", (page_id,)).fetchall()
    return [{k: r[k] for k in ("revision", "slug", "title", "body", "author", "summary", "date")} for r in rows]


def user(world) -> str:
    with closing(world.db("wiki")) as conn:
        return conn.execute("SELECT value FROM meta WHERE key = 'user'").fetchone()[0]
