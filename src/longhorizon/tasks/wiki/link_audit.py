"""Wiki upkeep: a link audit of one wiki space after a docs migration.

The migration renamed some Engineering pages (the wiki records those renames), copied others to
new slugs and left the old copies behind with a "moved" note (one old copy gained a section
after the copy that the new page lacks), undid one rename, and had already archived one page
properly. Pages in the space still link to the old slugs, the space index lists old slugs and
old titles and misses the new copies, and one Engineering page links to a Support page that was
renamed too. The space guidelines say how to archive a superseded page and what the index must
look like; the migration log (a CSV in the workspace) lists every move, including the undone
one and the Support space's own. The Support space has broken links of its own that its team
will fix; it must stay exactly as it is.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from longhorizon.apps.wiki import state as wiki
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import kebab, rng_and_faker
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.wiki import page_now, pages_by_id

LOG = "docs-migration/moves.csv"
INDEX, GUIDE = "eng-index", "eng-space-guidelines"
AUDIT = "Link audit: point links at current slugs"  # the summary of each link fix
RECHECK = "Nothing in the space links to"  # the note of each check at the end
TOPICS = [
    ("Deploy checklist", "Production deploy checklist"), ("Local setup", "Development environment"),
    ("Code review guide", "Code review guidelines"), ("On-call handbook", "On-call guide"),
    ("Service catalogue", "Service directory"), ("Database migrations", "Schema migrations"),
    ("Feature flags", "Feature flag playbook"), ("Logging conventions", "Logging standards"),
    ("Incident severity levels", "Severity levels"), ("API guidelines", "API style guide"),
    ("Dependency upgrades", "Upgrading dependencies"), ("Secrets management", "Handling secrets"),
    ("Load testing", "Performance testing"), ("Architecture overview", "System architecture"),
    ("Monitoring and alerts", "Alerting guide"), ("Testing strategy", "Test pyramid"),
    ("Branching model", "Git workflow"), ("Release notes", "Writing release notes"),
    ("Build system", "CI pipeline"), ("Access requests", "Requesting access"),
]
SUP_TOPICS = [
    ("Refund macros", "Refund templates"), ("Escalation path", "Escalation matrix"),
    ("Tone of voice", "Writing to customers"), ("Ticket tagging", "Tagging guide"),
    ("Known issues", "Known issues list"), ("Shift handover", "Handover checklist"),
    ("Chargebacks", "Handling chargebacks"),
]
SECTIONS = ["Before you start", "Steps", "Gotchas", "Who to ask", "Examples", "Background", "Checklist"]
EXTRA_SECTIONS = ["Apple Silicon notes", "Windows notes", "Rollback notes", "Known limitations",
                  "Notes from the last audit"]
LINK = re.compile(r"\[\[[^\]]*\]\]")


def _norm(text: str) -> str:
    return " ".join(str(text or "").lower().split())


def strip_links(body: str) -> list[str]:
    """A page's non-empty lines with every wikilink blanked out, whitespace collapsed: what must not
    change when only links are fixed."""
    out = []
    for line in (body or "").splitlines():
        line = _norm(LINK.sub("[[]]", line))
        if line:
            out.append(line)
    return out


def relink(body: str, old: str, new: str) -> str:
    """``body`` with every link to ``old`` pointed at ``new`` (labels and anchors kept)."""
    return re.sub(r"\[\[\s*" + re.escape(old) + r"\s*(?=[\]|#])", "[[" + new, body)


def _contains_in_order(have: list[str], want: list[str]) -> bool:
    it = iter(have)
    return all(any(w == h for h in it) for w in want)


@register
class WikiLinkAudit(TaskFamily):
    name = "wiki_link_audit"
    category = "wiki upkeep"
    apps = ("wiki", "files")
    description = ("Audit one wiki space after a docs migration: point links at renamed and moved pages, "
                   "archive the stale copies per the space guidelines (merging what only they have), rebuild the "
                   "space index, leave an undone rename and the other space alone, and verify no old links remain.")

    levels = 3
    """1: one renamed page linked from one page, and the index (the undone rename, the already
    archived page and Support's own broken links stay as they are), in a space of five short pages;
    2: three renamed pages, the renamed Support page an Engineering page links to, and one
    left-behind copy to archive (with a section to merge first); 3 (default): two copies."""
    toolsets = {1: ("files__read_file", "wiki__backlinks", "wiki__get_page", "wiki__update_page")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        today = date(2026, 1, 12) + timedelta(days=rng.randrange(300))
        staff = [f"{fake.first_name().lower()}.{fake.last_name().lower()[0]}" for _ in range(8)]
        me, owner, migrator, sup_owner = staff[:4]

        def stamp(days_ago: int) -> str:
            day = (today - timedelta(days=days_ago)).isoformat()
            return f"{day}T{rng.randint(8, 18):02d}:{rng.randrange(60):02d}:00"

        def para(n: int = 3) -> str:
            return fake.paragraph(nb_sentences=n)

        def section_text() -> str:
            if level == 1:  # short pages at level 1
                return fake.sentence(nb_words=rng.randint(6, 10))
            if rng.random() < 0.5:
                return para(rng.randint(2, 3))
            return "\n".join(f"- {fake.sentence(nb_words=rng.randint(6, 10))}" for _ in range(rng.randint(2, 4)))

        def content(title: str, n_sections: int = 2) -> str:
            n_sections = 0 if level == 1 else n_sections
            secs = rng.sample(SECTIONS, n_sections)
            parts = [f"# {title}", "", para(1 if level == 1 else 2)]
            for s in secs:
                parts += ["", f"## {s}", section_text()]
            return "\n".join(parts) + "\n"

        # -- which topic plays which part ------------------------------------------------------------
        picks = rng.sample(TOPICS, 14)
        renamed, copied, (reverted,), (done_arch,), normal = picks[:3], picks[3:5], picks[5:6], picks[6:7], picks[7:]
        if level < self.levels:  # the default's topics, then fewer pages to fix (the later draws differ)
            copied = copied[:1]
            if level == 1:
                renamed, copied, normal = renamed[:1], [], normal[:2]
        eng = lambda t: f"eng-{kebab(t)}"  # noqa: E731
        sup = lambda t: f"sup-{kebab(t)}"  # noqa: E731
        sup_picks = rng.sample(SUP_TOPICS, 6)
        sup_renamed, sup_normal = sup_picks[0], sup_picks[1:]

        pages: dict[str, dict[str, Any]] = {}
        renames: list[dict] = []

        def page(slug, title, body, tags, author=None, days_ago=None, history=()):
            pages[slug] = {"slug": slug, "title": title, "body": body, "tags": list(tags),
                           "author": author or rng.choice(staff[1:]),
                           "updated": stamp(days_ago if days_ago is not None else rng.randint(30, 400)),
                           "history": list(history)}

        # current slug and title of every page a link may point at, in the space
        cur_title: dict[str, str] = {}
        for old, _ in normal:
            cur_title[eng(old)] = old
        cur_title[eng(done_arch[1])] = done_arch[1]  # the archived page's successor is a normal page
        for old, new in renamed:
            cur_title[eng(new)] = new
        for old, new in copied:
            cur_title[eng(new)] = new
        cur_title[eng(reverted[0])] = reverted[0]
        cur_title[GUIDE] = "Engineering space guidelines"

        # -- links to fix (and to leave) -------------------------------------------------------------
        linkable = [s for s in cur_title if s != GUIDE]
        hubs = rng.sample(linkable, min(6, len(linkable)))  # (level 1 has only five)
        links_in: dict[str, list[tuple[str, str]]] = {s: [] for s in cur_title}  # page -> [(target slug, title)]
        stale: dict[str, str] = {}  # old slug -> new slug, for links that must be fixed in the space
        for old, new in renamed:
            stale[eng(old)] = eng(new)
            for h in rng.sample([h for h in hubs if h != eng(new)], rng.randint(1, 2) if level > 1 else 1):
                links_in[h].append((eng(old), old))
        for old, new in copied:
            stale[eng(old)] = eng(new)
            for h in rng.sample([h for h in hubs if h != eng(new)], rng.randint(1, 2)):
                links_in[h].append((eng(old), old))
        if level > 1:  # an Engineering page links to the renamed Support page
            stale[sup(sup_renamed[0])] = sup(sup_renamed[1])
            links_in[rng.choice(hubs)].append((sup(sup_renamed[0]), sup_renamed[0]))
        rev_linkers = rng.sample([h for h in hubs if h != eng(reverted[0])], rng.randint(1, 2))
        for h in rev_linkers:
            links_in[h].append((eng(reverted[0]), reverted[0]))
        for s in linkable:  # ordinary, valid links
            if rng.random() < 0.5:
                t = rng.choice([x for x in linkable if x != s])
                links_in[s].append((t, cur_title[t]))
        sup_valid = sup(sup_normal[0][0])
        links_in[rng.choice(linkable)].append((sup_valid, sup_normal[0][0]))

        def link(slug: str, title: str) -> str:
            return rng.choice([f"[[{slug}]]", f"[[{slug}|{title}]]", f"[[{slug}|the {title.lower()} page]]",
                               f"[[{slug}#{kebab(rng.choice(SECTIONS))}|{title}]]"])

        def see_also(slug: str) -> str:
            items = links_in.get(slug, [])
            if not items:
                return ""
            lines = [f"- {rng.choice(['See', 'Related:', 'Also read', 'Background:'])} {link(t, ti)}"
                     for t, ti in items]
            return "\n## See also\n" + "\n".join(lines) + "\n"

        # -- Engineering pages -----------------------------------------------------------------------
        for old, _ in normal:
            page(eng(old), old, content(old) + see_also(eng(old)), ["eng"])
        succ = eng(done_arch[1])
        page(succ, done_arch[1], content(done_arch[1]) + see_also(succ), ["eng"], author=migrator,
             days_ago=rng.randint(20, 60))
        page(eng(done_arch[0]), f"[Archived] {done_arch[0]}", f"Archived: see [[{succ}]].\n", ["archived"],
             author=migrator, days_ago=rng.randint(20, 40),
             history=[{"body": content(done_arch[0]), "author": owner, "date": stamp(300)}])
        for old, new in renamed:
            d = rng.randint(10, 30)
            page(eng(new), new, content(new) + see_also(eng(new)), ["eng"], author=migrator, days_ago=d,
                 history=[{"slug": eng(old), "title": old, "body": content(old), "author": owner,
                           "date": stamp(200)}])
            renames.append({"old_slug": eng(old), "new_slug": eng(new), "author": migrator, "date": stamp(d)})
        extra_head = rng.choice(EXTRA_SECTIONS)
        extra_body = para(3)
        merge_from, merge_to = (eng(copied[0][0]), eng(copied[0][1])) if copied else (None, None)
        for n, (old, new) in enumerate(copied):
            base = content(new)
            note = (f"> **Moved:** this page was copied to [[{eng(new)}]] during the docs migration. Edit that one "
                    f"instead.\n\n")
            old_body = note + base.replace(f"# {new}", f"# {old}", 1)
            if n == 0:
                old_body += f"\n## {extra_head}\n{extra_body}\n"
                new_body = base + see_also(eng(new))
            else:
                later = rng.choice([s for s in SECTIONS if f"## {s}" not in base])
                new_body = base + f"\n## {later}\n{section_text()}\n" + see_also(eng(new))
            page(eng(old), old, old_body, ["eng"], author=owner, days_ago=rng.randint(3, 9))
            page(eng(new), new, new_body, ["eng"], author=migrator, days_ago=rng.randint(10, 30))
        rev_slug, rev_gone = eng(reverted[0]), eng(reverted[1])
        page(rev_slug, reverted[0], content(reverted[0]) + see_also(rev_slug), ["eng"], author=owner,
             days_ago=rng.randint(10, 30),
             history=[{"body": content(reverted[0]), "author": owner, "date": stamp(120)},
                      {"slug": rev_gone, "title": reverted[1], "body": content(reverted[0]), "author": migrator,
                       "date": stamp(25), "summary": f"Renamed from {rev_slug} to {rev_gone}"}])
        renames.append({"old_slug": rev_gone, "new_slug": rev_slug, "author": owner, "date": stamp(24)})
        page(GUIDE, "Engineering space guidelines", (
            "# Engineering space guidelines\n\nHow we keep this space tidy.\n\n"
            "## Links\nLink to pages by their current slug. After a page is renamed or moved, fix the links in "
            "this space; don't rely on redirects or moved notes.\n\n"
            "## Superseded pages\nWe never delete a superseded page. Archive it instead:\n"
            "1. Move anything that exists only on the old page into the current page first.\n"
            "2. Replace the old page's body with a single line that links to the current page, the way the "
            f"already archived [[{eng(done_arch[0])}]] does.\n"
            "3. Retitle it `[Archived] <old title>` (keep its slug).\n"
            "4. Tag it `archived` and remove the `eng` tag, so it drops out of the space.\n\n"
            f"## Space index\n[[{INDEX}]] lists every current page of the space (pages tagged `eng`, except the "
            "index itself), one per line as `- [[slug|Title]]`, sorted by title. Archived pages are not listed.\n"
            + see_also(GUIDE)), ["eng"], author=owner, days_ago=rng.randint(60, 200))
        # the stale index: old slugs and titles, the left-behind copies, not the new copies
        old_entries = [(old, eng(old)) for old, _ in normal] + [(done_arch[1], succ)]
        old_entries += [(old, eng(old)) for old, _ in renamed] + [(old, eng(old)) for old, _ in copied]
        old_entries += [(reverted[0], rev_slug), ("Engineering space guidelines", GUIDE)]
        old_entries.sort(key=lambda e: e[0].lower())
        page(INDEX, "Engineering space index",
             "# Engineering space index\n\nEvery page in this space, by title.\n\n"
             + "\n".join(f"- [[{s}|{t}]]" for t, s in old_entries) + "\n", ["eng", "index"], author=owner,
             days_ago=rng.randint(40, 90))

        # -- Support pages (leave alone: their own broken links included) ----------------------------
        s_old, s_new = sup_renamed
        sup_linkers = rng.sample(sup_normal, 2)
        eng_old_any = eng(renamed[0][0])
        for i, (t, _) in enumerate(sup_normal):
            extra = ""
            if (t, _) in sup_linkers:
                extra += f"\n## See also\n- {link(sup(s_old), s_old)}\n"
            if i == 0:
                extra += f"\nEngineering's side of this: {link(eng_old_any, renamed[0][0])}.\n"
            page(sup(t), t, content(t) + extra, ["support"], author=sup_owner)
        page(sup(s_new), s_new, content(s_new), ["support"], author=sup_owner, days_ago=rng.randint(5, 20),
             history=[{"slug": sup(s_old), "title": s_old, "body": content(s_old), "author": sup_owner,
                       "date": stamp(150)}])
        renames.append({"old_slug": sup(s_old), "new_slug": sup(s_new), "author": sup_owner, "date": stamp(12)})
        sup_list = sorted([(t, sup(t)) for t, _ in sup_normal] + [(s_old, sup(s_old))], key=lambda e: e[0].lower())
        page("sup-index", "Support space index", "# Support space index\n\n"
             + "\n".join(f"- [[{s}|{t}]]" for t, s in sup_list) + "\n", ["support", "index"], author=sup_owner)
        page("home", "Home", f"# Welcome\n\nSpaces: [[{INDEX}|Engineering]], [[sup-index|Support]].\n", ["index"],
             author=owner)

        slugs_sorted = sorted(pages)
        page_list = [pages[s] for s in slugs_sorted]
        ids = {s: i for i, s in enumerate(slugs_sorted, start=1)}
        original = {s: {k: pages[s][k] for k in ("title", "body", "tags")} for s in slugs_sorted}
        eng_space = {s for s in slugs_sorted if "eng" in pages[s]["tags"]}
        now = f"{today.isoformat()}T09:00:00"

        # -- the migration log ---------------------------------------------------------------------------
        log_rows = []
        for old, new in renamed:
            log_rows.append(("engineering", eng(old), eng(new), "rename", "done", ""))
        for old, new in copied:
            log_rows.append(("engineering", eng(old), eng(new), "copy", "copied",
                             "old page kept with a moved note until it is archived"))
        log_rows.append(("engineering", rev_slug, rev_gone, "rename", "reverted",
                         f"rename undone the next day; {rev_slug} stays"))
        if level > 1:  # (level 1's log leaves out the page archived long ago)
            log_rows.append(("engineering", eng(done_arch[0]), succ, "copy", "archived", ""))
        log_rows.append(("support", sup(s_old), sup(s_new), "rename", "done", "support team fixes its own links"))
        rng.shuffle(log_rows)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["date", "space", "old_slug", "new_slug", "method", "status", "note"])
        for r in log_rows:
            w.writerow([(today - timedelta(days=rng.randint(8, 30))).isoformat(), *r])
        log_bytes = buf.getvalue().encode()
        readme = (b"# Docs migration\n\nmoves.csv lists every page the migration touched. method=rename: the wiki "
                  b"renamed the page. method=copy: the page was copied to a new slug and the old one left in place. "
                  b"status=reverted: the move was undone.\n")

        def build(root: Path) -> None:
            wiki.create_wiki(root / "state" / "wiki.sqlite", page_list, user=me, now=now, renames=renames)
            ws = root / "workspace" / "docs-migration"
            ws.mkdir(parents=True, exist_ok=True)
            (ws / "moves.csv").write_bytes(log_bytes)
            (ws / "README.md").write_bytes(readme)

        w = phrasing_rng(self.name, seed)
        state = say(w, "The docs migration left the Engineering space of the wiki in a state: links to pages that "
                       "were renamed or moved, old copies lying around, and an index that's out of date.",
                    "Since the docs migration, the Engineering space of the wiki is untidy: some links point at pages "
                    "that were renamed or moved, old copies are still lying around, and the index is out of date.",
                    "After the docs migration the wiki's Engineering space needs a clean-up: links to renamed or "
                    "moved pages, left-over old copies, and an out-of-date index.")
        ask = say(w, "Could you do a link audit of the space?", "Can you audit the space's links?",
                  "Please do a link audit of the space.")
        work = say(w, f"Fix every link on Engineering pages that points to an old slug, archive the left-over copies "
                      f"the way {GUIDE} says, and bring {INDEX} up to date.",
                   f"Every link on an Engineering page that points to an old slug needs fixing; the left-over copies "
                   f"get archived as {GUIDE} describes; and {INDEX} needs bringing up to date.",
                   f"Bring {INDEX} up to date, archive the left-over copies following {GUIDE}, and fix each link on "
                   f"Engineering pages that still points to an old slug.")
        log = say(w, f"The migration log is in {LOG} (not everything in it still applies).",
                  f"{LOG} is the migration log, though not everything in it still applies.",
                  f"You'll find the migration log in {LOG}; not all of it still applies.")
        limits = in_some_order(w, [
            say(w, "Support is migrating on its own schedule, so don't touch their pages.",
                "Leave the Support pages alone: they're migrating on their own schedule.",
                "Don't touch Support's pages; they migrate on their own schedule."),
            say(w, "Please don't create pages or change any slugs.", "Don't create any pages or change any slugs.",
                "No new pages and no slug changes, please."),
        ])
        verify = say(w, "When you're done, check that nothing in the space still links to an old slug.",
                     "Once you're finished, check that no page in the space still links to an old slug.",
                     "At the end, please check that nothing in the space links to an old slug any more.")
        if level == 1:  # one rename, no copies
            state = ("The docs migration renamed a page in the wiki's Engineering space; links to it still use its "
                     "old slug.")
            work = f"Fix every link on Engineering pages that points to an old slug, and bring {INDEX} up to date."
            ask = ""
        instruction = " ".join(x for x in [say(w, "Hi!", "Hello,", "Hi there,"), state, ask, work, log, *limits, verify,
                                say(w, "Thanks!", "Thank you!", "Cheers!")] if x)

        # expected end state
        moved_old = [eng(o) for o, _ in copied]
        final_eng = sorted((s for s in eng_space if s not in moved_old and s != INDEX),
                           key=lambda s: cur_title[s].lower())
        linkers = {old: sorted(p for p in eng_space if old in wiki.link_targets(original[p]["body"])
                               and p not in moved_old and p != INDEX) for old in stale}
        fix_pages = sorted({p for ps in linkers.values() for p in ps})
        verify_slugs = sorted(stale)

        # -- oracle ------------------------------------------------------------------------------------
        section = f"\n\n## {extra_head}\n{extra_body}\n"

        def fix(p: str, body: str, links: dict[str, str], merge: bool = True) -> str:
            """``p``'s body with its links to the old slugs in ``links`` pointed at the new ones (and,
            on the merge target, the section only the old copy has)."""
            for old, new in links.items():
                body = relink(body, old, new)
            return body.rstrip("\n") + section if p == merge_to and merge else body

        def index_body(entries: list[str]) -> str:
            return ("# Engineering space index\n\nEvery page in this space, by title.\n\n"
                    + "\n".join(f"- [[{s}|{cur_title[s]}]]" for s in entries) + "\n")

        def solve():
            def read(slug: str, note: str):
                return json.loads((yield ToolCall("wiki__get_page", {"slug": slug}, note)))

            full = level > 1  # level 1: one rename, a small space: no survey of the space or of the traps
            if full:
                yield ToolCall("files__list_dir", {"path": "docs-migration"}, "What the migration left behind.")
            yield ToolCall("files__read_file", {"path": LOG}, "The list of moves.")
            if full:
                yield from read(GUIDE, "The space's rules for archiving and the index.")
            yield from read(INDEX, "The current index.")
            if full:
                yield ToolCall("wiki__list_pages", {"tag": "eng"}, "Every page in the Engineering space.")
            todo: dict[str, str] = {}
            for old in verify_slugs:
                res = json.loads((yield ToolCall("wiki__backlinks", {"slug": old}, f"Who still links to {old}?")))
                todo[old] = res["renamed_to"] or stale[old]
            if full:
                yield ToolCall("wiki__backlinks", {"slug": rev_gone},
                               f"The undone rename: is {rev_gone} linked anywhere?")
                yield ToolCall("wiki__list_revisions", {"slug": rev_slug}, f"Confirm {rev_slug}'s rename was undone.")
                yield from read(eng(done_arch[0]), "The log says this one is already archived: is it?")
            bodies = {}
            for old, new in copied:
                bodies[eng(old)] = (yield from read(eng(old), "The left-behind copy."))["body"]
                bodies[eng(new)] = (yield from read(eng(new), "The current page: anything missing from it?"))["body"]
            # 1. fix links on every page of the space that links to an old slug
            for p in fix_pages:
                body = bodies.get(p) or (yield from read(p, f"Read {p} before fixing its links."))["body"]
                body = fix(p, body, todo)
                yield ToolCall("wiki__update_page", {"slug": p, "body": body, "summary": AUDIT},
                               f"Fix the links on {p}.")
                bodies[p] = body
            if copied and merge_to not in fix_pages:
                yield ToolCall("wiki__update_page", {"slug": merge_to, "body": fix(merge_to, bodies[merge_to], {}),
                                                     "summary": f"Merge '{extra_head}' from {merge_from}"},
                               "Bring over the section only the old copy has.")
            # 2. archive the left-behind copies
            for old, new in copied:
                yield ToolCall("wiki__update_page", {"slug": eng(old), "body": f"Archived: see [[{eng(new)}]].\n",
                                                     "summary": f"Archived: superseded by {eng(new)}"},
                               f"Archive {eng(old)}: one-line pointer.")
                yield ToolCall("wiki__rename_page", {"slug": eng(old), "new_slug": eng(old),
                                                     "new_title": f"[Archived] {old}"}, "Retitle it.")
                yield ToolCall("wiki__add_tag", {"slug": eng(old), "tag": "archived"}, "Tag it archived.")
                yield ToolCall("wiki__remove_tag", {"slug": eng(old), "tag": "eng"}, "Take it out of the space.")
            # 3. the index
            yield ToolCall("wiki__update_page", {"slug": INDEX, "body": index_body(final_eng),
                                                 "summary": "Link audit: current pages only, by title"},
                           "Rebuild the index.")
            # 4. verify
            for old in verify_slugs:
                yield ToolCall("wiki__backlinks", {"slug": old}, f"{RECHECK} {old} now?")
            if full:
                yield ToolCall("wiki__list_pages", {"tag": "eng"}, "The space after the audit.")
                yield from read(INDEX, "Re-read the index.")
                return (f"Fixed links on {len(fix_pages)} pages, archived {', '.join(moved_old)}, merged "
                        f"'{extra_head}' into {merge_to}, and rebuilt {INDEX}. Support pages untouched; "
                        f"{rev_slug} kept (its rename was undone).")
            return f"Fixed the links on {', '.join(fix_pages)} and rebuilt {INDEX}; {rev_slug} kept (rename undone)."

        renamed_map = [(eng(o), eng(n)) for o, n in renamed] + ([(sup(s_old), sup(s_new))] if level > 1 else [])

        # -- perturbations: the oracle with one small mistake in its calls -----------------------------
        index = perturb.on("wiki__update_page", slug=INDEX)

        def audit_update(call: ToolCall) -> bool:
            return call.name == "wiki__update_page" and call.arguments.get("summary") == AUDIT

        def left_linking(olds: list[str]):
            """The oracle with the first page linking each of ``olds`` still linking it."""
            keep: dict[str, set[str]] = {}
            for old in olds:
                keep.setdefault(linkers[old][0], set()).add(old)
            return perturb.change(
                solve, lambda c: audit_update(c) and c.arguments["slug"] in keep,
                lambda a: {**a, "body": fix(a["slug"], original[a["slug"]]["body"],
                                            {o: n for o, n in stale.items() if o not in keep[a["slug"]]})},
                count=None)

        def reverted_moved():
            """The undone rename taken for a move: every link to it pointed at the slug it came back from."""
            oracle, updated = solve, [p for p in rev_linkers if p in fix_pages or p == merge_to]
            if updated:  # the oracle writes these pages: change what it writes
                oracle = perturb.change(oracle, lambda c: c.name == "wiki__update_page"
                                        and c.arguments["slug"] in updated,
                                        lambda a: {**a, "body": relink(a["body"], rev_slug, rev_gone)}, count=None)
            rest = [ToolCall("wiki__update_page", {"slug": p, "body": relink(original[p]["body"], rev_slug, rev_gone),
                                                   "summary": AUDIT}, f"Fix the links on {p}.")
                    for p in rev_linkers if p not in updated]
            return perturb.insert(oracle, *rest, before=index) if rest else oracle

        support = sup(sup_linkers[0][0])
        flawed = {
            "renamed_links_fixed": lambda: left_linking([renamed_map[0][0]]),
            "moved_links_fixed": lambda: left_linking(moved_old),
            "reverted_left_alone": reverted_moved,
            "stale_archived": lambda: perturb.drop(solve, lambda c: c.name in ("wiki__add_tag", "wiki__remove_tag"),
                                                   count=None),
            "stale_retitled": lambda: perturb.drop(solve, lambda c: c.name == "wiki__rename_page", count=None),
            "content_merged": lambda: (
                perturb.change(solve, perturb.on("wiki__update_page", slug=merge_to),
                               body=fix(merge_to, original[merge_to]["body"], stale, merge=False))
                if merge_to in fix_pages else
                perturb.drop(solve, perturb.on("wiki__update_page", slug=merge_to))),
            # the new copies left out of the index (at level 1, the last page)
            "index_updated": lambda: perturb.change(solve, index, body=index_body(
                [s for s in final_eng if s not in {eng(n) for _, n in copied}] if copied else final_eng[:-1])),
            # (not on the merge target, which gains a section anyway)
            "eng_text_preserved": lambda: perturb.change(
                solve, lambda c: audit_update(c) and c.arguments["slug"] != merge_to,
                lambda a: {**a, "body": a["body"].rstrip("\n") + "\n\nLinks checked during the link audit.\n"}),
            "other_spaces_untouched": lambda: perturb.insert(
                solve, ToolCall("wiki__get_page", {"slug": support}, "A Support page with a broken link."),
                ToolCall("wiki__update_page", {"slug": support, "summary": "Fix link",
                                               "body": relink(original[support]["body"], sup(s_old), sup(s_new))},
                         "Fix it too."), after=index),
            "no_pages_added_or_renamed": lambda: perturb.insert(solve, ToolCall(
                "wiki__create_page", {"slug": "eng-link-audit", "title": "Link audit report",
                                      "body": "Fixed links and archived stale copies.\n"}, "Write up the audit."),
                after=index),
            "verified_at_end": lambda: perturb.drop(
                solve, lambda c: c.name == "wiki__backlinks" and c.note.startswith(RECHECK), count=None),
        }

        # -- grading -------------------------------------------------------------------------------------
        def links_fixed(olds: list[str]):
            def check(w, t):
                bad = []
                for old in olds:
                    new = stale[old]
                    for p in eng_space - set(moved_old):
                        targets = wiki.link_targets(page_now(w, ids, p)["body"])
                        if old in targets:
                            bad.append(f"{p} still links to {old}")
                        elif p in linkers[old] and new not in targets:
                            bad.append(f"{p} no longer links to {new}")
                return not bad, "; ".join(bad[:5])
            return check

        def reverted_left_alone(w, t):
            bad = [p["slug"] for p in wiki.pages(w).values() if rev_gone in wiki.link_targets(p["body"])]
            lost = [p for p in rev_linkers if rev_slug not in wiki.link_targets(page_now(w, ids, p)["body"])]
            return not bad and not lost, f"link to {rev_gone}: {bad}; lost the link to {rev_slug}: {lost}"

        def stale_archived(w, t):
            bad = []
            for old, new in copied:
                p = page_now(w, ids, eng(old))
                lines = [ln for ln in p["body"].splitlines() if ln.strip()]
                if wiki.link_targets(p["body"]) != [eng(new)] or len(lines) > 2:
                    bad.append(f"{eng(old)} body is {p['body'][:120]!r}")
                if "archived" not in p["tags"] or "eng" in p["tags"]:
                    bad.append(f"{eng(old)} tags {p['tags']}")
            return not bad, "; ".join(bad)

        def stale_retitled(w, t):
            bad = []
            for old, _ in copied:
                title = _norm(page_now(w, ids, eng(old))["title"])
                if not title.startswith("[archived]") or _norm(old) not in title:
                    bad.append(title)
            return not bad, f"titles: {bad}" if bad else ""

        def content_merged(w, t):
            body = strip_links(page_now(w, ids, merge_to)["body"])
            joined = " ".join(body)
            ok = any(_norm(extra_head) in ln and ln.startswith("#") for ln in body) and _norm(extra_body) in joined
            return ok, f"'{extra_head}' and its text are not on {merge_to}" if not ok else ""

        def index_updated(w, t):
            got = wiki.link_targets(page_now(w, ids, INDEX)["body"])
            return got == final_eng, f"index links {got}, expected {final_eng}"

        def eng_text_preserved(w, t):
            bad = []
            for s in eng_space - set(moved_old) - {INDEX}:
                before, after = strip_links(original[s]["body"]), strip_links(page_now(w, ids, s)["body"])
                if s == merge_to:
                    if not _contains_in_order(after, before):
                        bad.append(s)
                elif before != after:
                    bad.append(s)
                if page_now(w, ids, s)["title"] != original[s]["title"] or set(page_now(w, ids, s)["tags"]) != set(
                        original[s]["tags"]):
                    bad.append(f"{s} (title or tags)")
            return not bad, f"changed beyond links: {sorted(bad)}" if bad else ""

        def others_untouched(w, t):
            bad = []
            for s in slugs_sorted:
                if s in eng_space:
                    continue
                p = page_now(w, ids, s)
                if (p["title"], p["body"], sorted(p["tags"])) != (original[s]["title"], original[s]["body"],
                                                                  sorted(original[s]["tags"])):
                    bad.append(s)
            return not bad, f"changed: {bad}" if bad else ""

        def no_pages_added(w, t):
            now_pages = pages_by_id(w)
            if len(now_pages) != len(original):
                return False, f"{len(now_pages)} pages, expected {len(original)}"
            moved = [s for s in slugs_sorted if now_pages[ids[s]]["slug"] != s]
            return not moved, f"slugs changed: {moved}" if moved else ""

        def verified(w, t):
            writes = [i for i, c in enumerate(t.tool_calls) if c.app == "wiki" and not c.is_error and c.tool in (
                "update_page", "rename_page", "add_tag", "remove_tag", "create_page")]
            if not writes:
                return False, "nothing was changed"
            after = [c for c in t.tool_calls[writes[-1] + 1:] if not c.is_error and isinstance(c.arguments, dict)]
            checked = {str(c.arguments.get("slug", "")).strip().lower() for c in after if c.name == "wiki__backlinks"}
            searched = " ".join(str(c.arguments.get("query", "")).lower() for c in after
                                if c.name == "wiki__search_pages")
            reread = {str(c.arguments.get("slug", "")).strip().lower() for c in after if c.name == "wiki__get_page"}
            missing = [s for s in verify_slugs
                       if s not in checked and s not in searched and not set(linkers[s]) <= reread]
            return not missing, f"old slugs not checked after the last edit: {missing}" if missing else ""

        criteria = [
            Criterion("renamed_links_fixed", "no Engineering page links to a renamed page's old slug (the renamed "
                      "Support page included); the pages that did now link the new slug" if level > 1 else
                      "no Engineering page links to the renamed page's old slug; the page that did now links the "
                      "new slug", "final_state",
                      links_fixed([o for o, _ in renamed_map]), 1.5),
            Criterion("moved_links_fixed", "no Engineering page links to a left-behind copy; its linkers now link the "
                      "new page", "final_state", links_fixed(moved_old), 1.5),
            Criterion("reverted_left_alone", f"links to {rev_slug} (rename undone) stay; nothing links to {rev_gone}",
                      "final_state", reverted_left_alone, guard=True),
            Criterion("stale_archived", "each left-behind copy is a one-line pointer to its current page, tagged "
                      "archived and no longer eng", "final_state", stale_archived),
            Criterion("stale_retitled", "each left-behind copy is titled '[Archived] <old title>'", "final_state",
                      stale_retitled, requires=("stale_archived",)),
            Criterion("content_merged", f"the section only the old copy had is now on {merge_to}", "final_state",
                      content_merged),
            Criterion("index_updated", f"{INDEX} lists exactly the current pages of the space, sorted by title",
                      "final_state", index_updated, 2.0),
            Criterion("eng_text_preserved", "Engineering pages changed only in their links (the merge target only "
                      "gained the merged section); titles and tags kept", "final_state", eng_text_preserved,
                      guard=True),
            Criterion("other_spaces_untouched", "Support pages, the home page and the already archived page are "
                      "unchanged", "final_state", others_untouched, guard=True),
            Criterion("no_pages_added_or_renamed", "no page was created and no slug changed", "final_state",
                      no_pages_added, guard=True),
            Criterion("verified_at_end", "after the last edit, every old slug was checked again (backlinks, a "
                      "search, or re-reading the pages that linked it; counts once the links are fixed)", "process",
                      verified, requires=("renamed_links_fixed", "moved_links_fixed") if copied else
                      ("renamed_links_fixed",)),
        ]
        if not copied:  # level 1: nothing was copied, so nothing to archive, retitle or merge
            copies = {"moved_links_fixed", "stale_archived", "stale_retitled", "content_merged"}
            criteria = [c for c in criteria if c.id not in copies]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"stale": stale, "moved": moved_old, "reverted": [rev_slug, rev_gone], "index": final_eng,
                  "fix_pages": fix_pages, "merge": [merge_from, merge_to, extra_head]},
        )
