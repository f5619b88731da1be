"""The `wiki` app: an MCP server over a team wiki (``state/wiki.sqlite``).

Each tool opens its own short connection. Edits keep a revision (with the agent's summary)
and re-derive the page's outgoing links; the agent edits as the wiki's ``meta.user``.
"""

from __future__ import annotations

import difflib
import json
import re
import sqlite3
from contextlib import closing
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import (
    ADD, READ, SET, AppServer, cap, read_meta, server_builder, sqlite_connector, tick_clock,
)
from longhorizon.apps.wiki.state import SLUG, TAG, advance, link_targets, page_dict

MAX_LIMIT = 100
MAX_BODY_CHARS = 100_000
PAGE_CHARS = 12_000

INSTRUCTIONS = (
    "The team wiki. Pages are addressed by slug (lower-case words joined by hyphens, e.g. "
    "on-call-rota) and written in Markdown; link to another page with [[slug]] or "
    "[[slug|label]]. Every edit keeps a revision with a short summary. Find pages with "
    "search_pages or list_pages, read one with get_page."
)


def _dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


def _snippet(text: str, words: list[str], width: int = 160) -> str:
    flat = " ".join(text.split())
    low = flat.lower()
    pos = min((low.find(w) for w in words if w in low), default=0)
    start = max(0, pos - width // 3)
    piece = flat[start:start + width]
    return ("..." if start else "") + piece + ("..." if start + width < len(flat) else "")


def make_app(world):
    db_path = world.db_path("wiki")
    srv = AppServer("wiki", instructions=INSTRUCTIONS)

    connect = sqlite_connector(db_path, "wiki", "wiki")

    meta = read_meta

    def tick(conn) -> str:
        return tick_clock(conn, advance)

    def get(conn, slug: str) -> sqlite3.Row:
        wanted = (slug or "").strip().strip("/").lower()
        if wanted.startswith("[[") and wanted.endswith("]]"):
            wanted = wanted[2:-2].split("|")[0].strip()
        row = conn.execute("SELECT * FROM pages WHERE slug = ?", (wanted,)).fetchone()
        if row is not None:
            return row
        moved = conn.execute(
            "SELECT r.new_slug, r.date, p.slug AS now_slug FROM renames r JOIN pages p ON p.id = r.page_id "
            "WHERE r.old_slug = ? ORDER BY r.id DESC LIMIT 1", (wanted,)).fetchone()
        if moved is not None:
            raise ToolError(
                f"there is no page {wanted!r}: it was renamed to {moved['now_slug']!r} on {moved['date'][:10]}. "
                f"Links that still point to [[{wanted}]] are broken (see backlinks)."
            )
        slugs = [r[0] for r in conn.execute("SELECT slug FROM pages")]
        near = difflib.get_close_matches(wanted, slugs, n=3, cutoff=0.6)
        hint = f" Similar slugs: {', '.join(near)}." if near else ""
        raise ToolError(f"no page with slug {slug!r}.{hint} Use search_pages or list_pages to find pages.")

    def set_links(conn, page_id: int, body: str) -> None:
        conn.execute("DELETE FROM links WHERE page_id = ?", (page_id,))
        conn.executemany("INSERT INTO links VALUES (?, ?)", [(page_id, t) for t in link_targets(body)])

    def add_revision(conn, page_id: int, slug: str, title: str, body: str, summary: str) -> int:
        user, clock = meta(conn)["user"], tick(conn)
        rev = conn.execute("SELECT MAX(revision) FROM revisions WHERE page_id = ?", (page_id,)).fetchone()[0] or 0
        conn.execute(
            "INSERT INTO revisions (page_id, revision, slug, title, body, author, summary, date) "
            "VALUES (?,?,?,?,?,?,?,?)", (page_id, rev + 1, slug, title, body, user, summary, clock))
        conn.execute("UPDATE pages SET slug = ?, title = ?, body = ?, author = ?, updated = ?, revision = ? "
                     "WHERE id = ?", (slug, title, body, user, clock, rev + 1, page_id))
        return rev + 1

    def check_body(body: str) -> str:
        if not isinstance(body, str) or not body.strip():
            raise ToolError("body must not be empty (write the whole page in Markdown)")
        if len(body) > MAX_BODY_CHARS:
            raise ToolError(f"body is longer than {MAX_BODY_CHARS} characters; split the page")
        return body

    def check_slug(slug: str) -> str:
        s = (slug or "").strip()
        if not SLUG.match(s):
            raise ToolError(f"slug {slug!r} is not valid: use lower-case letters and digits joined by single "
                            "hyphens, e.g. 'incident-response'")
        return s

    def check_tag(tag: str) -> str:
        t = (tag or "").strip().lower().lstrip("#")
        if not TAG.match(t):
            raise ToolError(f"tag {tag!r} is not valid: use lower-case letters and digits, with - or _ between "
                            "words, e.g. 'runbook'")
        return t

    def links_of(conn, page_id: int) -> list[dict]:
        rows = conn.execute(
            "SELECT l.target, p.id IS NOT NULL AS ok FROM links l LEFT JOIN pages p ON p.slug = l.target "
            "WHERE l.page_id = ? ORDER BY l.rowid", (page_id,)).fetchall()
        return [{"slug": r["target"], "exists": bool(r["ok"])} for r in rows]

    def referrers(conn, slug: str) -> list[sqlite3.Row]:
        return conn.execute(
            "SELECT p.slug, p.title FROM links l JOIN pages p ON p.id = l.page_id WHERE l.target = ? ORDER BY p.slug",
            (slug,)).fetchall()

    @srv.tool(READ)
    def search_pages(query: str, tag: str | None = None, limit: int = 20) -> str:
        """Search page titles and bodies. Every word of ``query`` must appear (case-insensitive);
        pages with the words in the title come first.

        Args:
            query: words to look for, e.g. "berlin office"; a quoted "phrase" must appear as written.
            tag: only pages with this tag.
            limit: at most this many results (1-100).

        Returns JSON {total, pages: [{slug, title, tags, updated, snippet}]}."""
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"limit must be 1-{MAX_LIMIT}")
        phrases = [p.lower() for p in re.findall(r'"([^"]+)"', query or "")]
        words = [w.lower() for w in re.sub(r'"[^"]*"', " ", query or "").split()] + phrases
        if not words:
            raise ToolError("give at least one word to search for (use list_pages to browse)")
        with closing(connect()) as conn:
            rows = conn.execute("SELECT * FROM pages ORDER BY slug").fetchall()
            want_tag = check_tag(tag) if tag else None
            hits = []
            for r in rows:
                p = page_dict(conn, r)
                if want_tag and want_tag not in p["tags"]:
                    continue
                title = f"{p['title']} {p['slug']}".lower()
                hay = f"{title} {' '.join(p['body'].split())} {' '.join(p['tags'])}".lower()
                if all(w in hay for w in words):
                    in_title = sum(w in title for w in words)
                    hits.append((-in_title, p))
        hits.sort(key=lambda h: (h[0], h[1]["slug"]))
        out = [{"slug": p["slug"], "title": p["title"], "tags": p["tags"], "updated": p["updated"],
                "snippet": _snippet(p["body"], words)} for _, p in hits[:limit]]
        return _dumps({"total": len(hits), "pages": out})

    @srv.tool(READ)
    def get_page(slug: str, revision: int | None = None, offset: int = 0) -> str:
        """Read a page: title, Markdown body, tags, last editor and time, and the pages it links to.

        Args:
            slug: the page's slug, e.g. "on-call-rota".
            revision: an older revision number to read instead of the current text (see list_revisions).
            offset: character offset into the body, for very long pages (use next_offset).

        Returns JSON {slug, title, body, tags, author, updated, revision,
        links: [{slug, exists}], offset, next_offset}. A link with exists=false is broken."""
        if offset < 0:
            raise ToolError("offset must be >= 0")
        with closing(connect()) as conn:
            row = get(conn, slug)
            p = page_dict(conn, row)
            links = links_of(conn, row["id"])
            if revision is not None and revision != p["revision"]:
                rev = conn.execute("SELECT * FROM revisions WHERE page_id = ? AND revision = ?",
                                   (row["id"], revision)).fetchone()
                if rev is None:
                    raise ToolError(f"page {p['slug']!r} has revisions 1-{p['revision']}; see list_revisions")
                p.update(title=rev["title"], body=rev["body"], author=rev["author"], updated=rev["date"],
                         revision=revision)
                links = [{"slug": t, "exists": None} for t in link_targets(rev["body"])]
        body = p["body"]
        nxt = offset + PAGE_CHARS if offset + PAGE_CHARS < len(body) else None
        return _dumps({"slug": p["slug"], "title": p["title"], "body": body[offset:offset + PAGE_CHARS],
                       "tags": p["tags"], "author": p["author"], "updated": p["updated"],
                       "revision": p["revision"], "links": links, "offset": offset, "next_offset": nxt})

    @srv.tool(READ)
    def list_pages(tag: str | None = None) -> str:
        """List every page (or those with ``tag``), in slug order.

        Returns JSON {total, pages: [{slug, title, tags, updated}]}."""
        with closing(connect()) as conn:
            want = check_tag(tag) if tag else None
            rows = conn.execute("SELECT * FROM pages ORDER BY slug").fetchall()
            ps = [page_dict(conn, r) for r in rows]
        ps = [p for p in ps if want is None or want in p["tags"]]
        keys = ("slug", "title", "tags", "updated")
        return _dumps({"total": len(ps), "pages": [{k: p[k] for k in keys} for p in ps]})

    @srv.tool(ADD)
    def create_page(slug: str, title: str, body: str, tags: list[str] = []) -> str:  # noqa: B006 - schema default
        """Create a new page.

        Args:
            slug: its address: lower-case letters and digits joined by hyphens, e.g. "berlin-office".
            title: the page title shown to readers.
            body: the page text in Markdown; link to pages with [[slug]] or [[slug|label]].
            tags: optional tags, e.g. ["runbook"].

        Returns a confirmation."""
        s = check_slug(slug)
        if not (title or "").strip():
            raise ToolError("title must not be empty")
        check_body(body)
        clean_tags = list(dict.fromkeys(check_tag(t) for t in tags))
        with closing(connect()) as conn, conn:
            if conn.execute("SELECT 1 FROM pages WHERE slug = ?", (s,)).fetchone():
                raise ToolError(f"a page with slug {s!r} already exists; use update_page to change it")
            user, clock = meta(conn)["user"], tick(conn)
            pid = conn.execute(
                "INSERT INTO pages (slug, title, body, author, created, updated, revision) VALUES (?,?,?,?,?,?,1)",
                (s, title.strip(), body, user, clock, clock)).lastrowid
            conn.execute(
                "INSERT INTO revisions (page_id, revision, slug, title, body, author, summary, date) "
                "VALUES (?,1,?,?,?,?,?,?)", (pid, s, title.strip(), body, user, "Created", clock))
            conn.executemany("INSERT INTO tags VALUES (?, ?)", [(pid, t) for t in clean_tags])
            set_links(conn, pid, body)
            broken = [lk["slug"] for lk in links_of(conn, pid) if not lk["exists"]]
        note = f" Warning: links to missing pages: {', '.join(broken)}." if broken else ""
        return f"Created page {s!r} (revision 1).{note}"

    @srv.tool(SET)
    def update_page(slug: str, body: str, summary: str) -> str:
        """Replace a page's body with new Markdown, keeping the old text as a revision.

        Args:
            slug: the page to edit.
            body: the complete new page text (not a diff): read the page first and change what is needed.
            summary: a short description of the change, e.g. "Updated Berlin office address".

        Returns a confirmation with the new revision number, and a warning if the page now
        links to pages that do not exist."""
        check_body(body)
        if not (summary or "").strip():
            raise ToolError("summary must not be empty: say briefly what changed")
        with closing(connect()) as conn, conn:
            row = get(conn, slug)
            if row["body"] == body:
                return (f"Page {row['slug']!r} already has this text; nothing changed "
                        f"(still revision {row['revision']}).")
            rev = add_revision(conn, row["id"], row["slug"], row["title"], body, summary.strip())
            set_links(conn, row["id"], body)
            broken = [lk["slug"] for lk in links_of(conn, row["id"]) if not lk["exists"]]
        note = f" Warning: links to missing pages: {', '.join(broken)}." if broken else ""
        return f"Updated page {row['slug']!r} (revision {rev}).{note}"

    @srv.tool(SET)
    def rename_page(slug: str, new_slug: str, new_title: str | None = None) -> str:
        """Move a page to a new slug (and optionally give it a new title). Links in other pages
        are NOT rewritten: pages that linked to the old slug are listed so you can fix them.

        Returns a confirmation and the pages that still link to the old slug."""
        new = check_slug(new_slug)
        with closing(connect()) as conn, conn:
            row = get(conn, slug)
            if new == row["slug"] and (not new_title or new_title.strip() == row["title"]):
                raise ToolError(f"the page is already called {new!r}" + (f" with title {row['title']!r}"
                                                                         if new_title else ""))
            if new != row["slug"] and conn.execute("SELECT 1 FROM pages WHERE slug = ?", (new,)).fetchone():
                raise ToolError(f"a page with slug {new!r} already exists")
            title = (new_title or "").strip() or row["title"]
            old = row["slug"]
            summary = f"Renamed from {old} to {new}" if new != old else f"Retitled to {title!r}"
            add_revision(conn, row["id"], new, title, row["body"], summary)
            if new != old:
                stamp = conn.execute("SELECT author, updated FROM pages WHERE id = ?", (row["id"],)).fetchone()
                conn.execute("INSERT INTO renames (page_id, old_slug, new_slug, author, date) VALUES (?,?,?,?,?)",
                             (row["id"], old, new, stamp["author"], stamp["updated"]))
            stale = [r["slug"] for r in referrers(conn, old)] if new != old else []
        text = f"Renamed page {old!r} to {new!r}" + (f" (title {title!r})." if new_title else ".")
        if stale:
            text += f" These pages still link to [[{old}]] and need updating: {', '.join(stale)}."
        return text

    @srv.tool(ADD)
    def add_tag(slug: str, tag: str) -> str:
        """Add a tag to a page (tags are lower-case, e.g. "runbook"). Returns the page's tags."""
        t = check_tag(tag)
        with closing(connect()) as conn, conn:
            row = get(conn, slug)
            conn.execute("INSERT OR IGNORE INTO tags VALUES (?, ?)", (row["id"], t))
            tags = [r[0] for r in conn.execute("SELECT tag FROM tags WHERE page_id = ? ORDER BY tag", (row["id"],))]
        return f"Page {row['slug']!r} tags: {', '.join(tags)}."

    @srv.tool(SET)
    def remove_tag(slug: str, tag: str) -> str:
        """Remove a tag from a page. Returns the page's remaining tags."""
        t = check_tag(tag)
        with closing(connect()) as conn, conn:
            row = get(conn, slug)
            if conn.execute("DELETE FROM tags WHERE page_id = ? AND tag = ?", (row["id"], t)).rowcount == 0:
                raise ToolError(f"page {row['slug']!r} has no tag {t!r}")
            tags = [r[0] for r in conn.execute("SELECT tag FROM tags WHERE page_id = ? ORDER BY tag", (row["id"],))]
        return f"Page {row['slug']!r} tags: {', '.join(tags) or '(none)'}."

    @srv.tool(READ)
    def list_revisions(slug: str) -> str:
        """A page's edit history, newest first.

        Returns JSON [{revision, date, author, summary, slug, title}]; read an old
        text with get_page(slug, revision=N)."""
        with closing(connect()) as conn:
            row = get(conn, slug)
            revs = conn.execute("SELECT * FROM revisions WHERE page_id = ? ORDER BY revision DESC",
                                (row["id"],)).fetchall()
        return _dumps([{k: r[k] for k in ("revision", "date", "author", "summary", "slug", "title")} for r in revs])

    @srv.tool(READ)
    def backlinks(slug: str) -> str:
        """Pages that link to ``slug`` with [[slug]]. Works for slugs that no longer exist too,
        which is how to find broken links (e.g. after a rename).

        Returns JSON {slug, exists, renamed_to (or null), pages: [{slug, title}]}."""
        wanted = (slug or "").strip().lower()
        with closing(connect()) as conn:
            exists = conn.execute("SELECT 1 FROM pages WHERE slug = ?", (wanted,)).fetchone() is not None
            moved = None
            if not exists:
                r = conn.execute("SELECT p.slug FROM renames r JOIN pages p ON p.id = r.page_id "
                                 "WHERE r.old_slug = ? ORDER BY r.id DESC LIMIT 1", (wanted,)).fetchone()
                moved = r[0] if r else None
            refs = [{"slug": r["slug"], "title": r["title"]} for r in referrers(conn, wanted)]
        return _dumps({"slug": wanted, "exists": exists, "renamed_to": moved, "pages": refs})

    return srv


build_server = server_builder(make_app)
