"""Wiki upkeep: bring the team wiki in line with decisions announced in chat, then report.

Chat holds the decisions, spread over four channels and their threads: on-call rota changes
(one of them called off or corrected in a thread), an office move (whose address may have
changed once before it was final), a deploy-process change, a page rename that left broken
links, a team rename to carry out, and a request to tag every runbook. Alongside them:
proposals nobody agreed to, and ordinary chatter. About thirty pages; most must stay exactly
as they are.

Drawn per seed (``THREAD_KINDS``, ``ADDRESS_CHANGE_ODDS``, ``SOAK_PROPOSAL_ODDS``; recorded in
``Task.data``, empty when absent): the thread under one announced rota change calls it off or
names someone else for it; the office's first announced address falls through (a later message
gives the final one) or is final from the start; an unanswered-for-now proposal to raise the
soak time sits in #eng or not.
"""

from __future__ import annotations

import json
import re
from datetime import date, time, timedelta
from pathlib import Path
from typing import Any

from longhorizon.apps.chat import state as chat
from longhorizon.apps.wiki import state as wiki
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import affirms, kebab, rng_and_faker
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.research import CITIES, people
from longhorizon.tasks.wiki import page_now, pages_by_id

SERVICES = ["Payments", "Search", "Checkout", "Identity", "Notifications", "Data pipeline", "Billing", "Mobile API",
            "Storage", "Messaging"]
RUNBOOKS = ["Database failover", "Cache flush", "Certificate renewal", "Queue backlog", "Restore from backup",
            "DNS change", "Disk pressure", "Rotate API keys"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
THREAD_KINDS = ("called_off", "corrected")
"""What the thread under the third rota announcement says: no change after all, or another
engineer takes it instead of the one announced."""
THREAD_ODDS = (0.55, 0.45)
ADDRESS_CHANGE_ODDS = 0.6
"""How often the first announced office address falls through before the final one."""
SOAK_PROPOSAL_ODDS = 0.6
"""How often #eng holds a proposal (not agreed) to raise the staging soak time (levels 2-3)."""
OLD_SLUG, NEW_SLUG = "incident-handbook", "incident-response"
TEAM_OLD, TEAM_NEW, TEAM_TITLE = "platform-team", "devex-team", "Developer Experience team"
MISC = [
    ("glossary", "Glossary", "Terms we use every day."),
    ("holiday-calendar", "Holiday calendar", "Public holidays and office closures for the year."),
    ("expense-policy", "Expense policy", "What you can expense and how to submit receipts."),
    ("security-policy", "Security policy", "Passwords, laptops, and what to do if you lose one."),
    ("tools-list", "Tools we use", "The software we pay for, and who owns each tool."),
    ("meeting-norms", "Meeting norms", "Agendas in advance, notes afterwards, no meetings on Wednesday mornings."),
    ("team-directory", "Team directory", "Who is on which team."),
    ("faq", "FAQ", "Answers to questions new joiners ask."),
    ("postmortem-template", "Postmortem template", "Copy this page for every incident review."),
    ("code-review-guidelines", "Code review guidelines", "How we review code: be kind, be specific, be quick."),
    ("release-calendar", "Release calendar", "Planned releases for the quarter."),
    ("sre-team", "SRE team", "Site reliability engineering: who we are and how to reach us."),
    ("data-team", "Data team", "Analytics and data engineering."),
]


def _norm(text: str) -> str:
    t = (text or "").lower().replace("\u2019", "'")
    t = re.sub(r"[\u2010-\u2015\u2212]", "-", t)
    return " ".join(t.replace("*", " ").replace("_", " ").split())


def _hhmm_variants(t: time) -> list[str]:
    h12 = t.hour % 12 or 12
    ap = "am" if t.hour < 12 else "pm"
    out = [f"{t.hour}:{t.minute:02d}", f"{t.hour:02d}:{t.minute:02d}", f"{t.hour}.{t.minute:02d}",
           f"{t.hour:02d}.{t.minute:02d}", f"{t.hour}h{t.minute:02d}", f"{h12}:{t.minute:02d} {ap}",
           f"{h12}:{t.minute:02d}{ap}", f"{h12}:{t.minute:02d} {ap[0]}.m."]
    if t.minute == 0:
        out += [f"{h12} {ap}", f"{h12}{ap}", f"{h12} {ap[0]}.m.", f"{t.hour}h"]
    if t.hour == 12 and t.minute == 0:
        out.append("noon")
    return out


def mentions_time(text: str, t: time) -> bool:
    n = _norm(text)
    return any(re.search(rf"(?<![\d:.]){re.escape(v)}(?![\d])", n) for v in _hhmm_variants(t))


def count_near(text: str, k: int, word: str = "approv") -> bool:
    """``k`` (as digits or a word) is the count of ``word``: "2 approvals", "two code-owner approvals",
    "approvals required: 2"."""
    n = _norm(re.sub(r"(?m)^\s*\d+[.)]\s*", "", text or ""))
    k_ = rf"(?:(?<![\d.]){k}(?![\d.])|\b{NUMBER_WORDS[k]}\b)"
    return bool(re.search(rf"{k_}\W+(?:[\w-]+\W+){{0,3}}?{word}", n)
                or re.search(rf"{word}\w*\W+(?:[\w-]+\W+){{0,2}}?{k_}", n))


def address_key(number: str, street: str) -> str:
    return f"{number} {street.split()[0]}".lower()


def _address_re(key: str) -> str:
    return rf"(?<!\d){re.escape(key)}\b"


def has_address(text: str, key: str) -> bool:
    return re.search(_address_re(key), _norm(text)) is not None


def affirms_address(text: str, key: str, city: str, others: list[str]) -> bool:
    """``text`` gives the address ``key`` as done, not only as dropped ("... instead of 12 Oak
    St", "the 12 Oak St lease fell through, so ..." name it honestly as not applied). A mention
    runs to the end of the address ("12 Oak Street, Leeds 40213") so an aside around it reads."""
    whole = rf"{_address_re(key)}(?:(?:\s+[\w.'-]+){{0,3}}?,\s*{re.escape(_norm(city))}(?:\s+\d[\w-]*)?\b)?"
    return affirms(_norm(text), whole, [_address_re(o) for o in others])


def rota_table(body: str) -> dict[str, dict[str, str]]:
    """{service (lower case): {"primary": cell, "secondary": cell}} from the page's Markdown table."""
    rows = [ln.strip().strip("|").split("|") for ln in (body or "").splitlines() if ln.strip().startswith("|")]
    if not rows:
        return {}
    head = [_norm(c) for c in rows[0]]
    try:
        i_p = next(i for i, h in enumerate(head) if "primary" in h)
        i_s = next(i for i, h in enumerate(head) if "secondary" in h)
    except StopIteration:
        return {}
    out = {}
    for r in rows[1:]:
        cells = [c.strip() for c in r]
        if len(cells) <= max(i_p, i_s) or set("".join(cells)) <= set("-: "):
            continue
        out[_norm(cells[0])] = {"primary": cells[i_p], "secondary": cells[i_s]}
    return out


def set_rota(body: str, service: str, role: str, name: str) -> str:
    """The page with ``service``'s ``role`` cell replaced by ``name`` (how the oracle edits)."""
    lines = body.splitlines()
    head = [_norm(c) for c in lines[next(i for i, ln in enumerate(lines) if ln.startswith("|"))].strip("|").split("|")]
    col = next(i for i, h in enumerate(head) if role in h)
    for i, ln in enumerate(lines):
        cells = ln.strip().strip("|").split("|")
        if ln.startswith("|") and _norm(cells[0]) == _norm(service):
            cells[col] = f" {name} "
            lines[i] = "|" + "|".join(cells) + "|"
    return "\n".join(lines) + ("\n" if body.endswith("\n") else "")


@register
class WikiChatReconcile(TaskFamily):
    name = "wiki_chat_reconcile"
    category = "wiki upkeep"
    apps = ("wiki", "chat")
    description = ("Bring the team wiki in line with decisions announced in chat (rota, office move, process "
                   "change, renames and broken links, runbook tags), ignore proposals and reversed changes, "
                   "leave other pages alone, and post a summary.")

    levels = 3
    """1: one agreed rota change (another called off or corrected in a thread, a proposal left open) in a rota
    of four services (the proposal unanswered), the summary posted to #docs without reading it; 2: both
    rota changes, the office move (its address may have changed once) and the deploy-process decision;
    3 (default): also the broken links after a rename, the team rename and the runbook tags."""
    toolsets = {1: ("chat__post_message", "chat__read_channel", "chat__read_thread", "wiki__get_page",
                    "wiki__update_page")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        top = level == self.levels
        rng, fake = rng_and_faker(seed, self.name)
        today = date(2026, 1, 5) + timedelta(days=rng.randrange(300))
        staff = people(fake, 14)
        handles: dict[str, str] = {}
        for p in staff:
            h = f"{kebab(p.split()[0])}.{kebab(p.split()[-1])[0]}"
            while h in handles.values():
                h += "x"
            handles[p] = h
        me, ops_lead, eng_lead, office_mgr, docs_owner, *crew = staff
        first = lambda p: p.split()[0]  # noqa: E731
        H = handles

        def stamp(days_ago: int, hm: str) -> str:
            return f"{(today - timedelta(days=days_ago)).isoformat()}T{hm}:00"

        # -- the rota -------------------------------------------------------------------------------
        services = rng.sample(SERVICES, rng.randint(6, 7))
        engineers = crew[:8]
        rota = {s: {"primary": a, "secondary": b} for s in services for a, b in [rng.sample(engineers, 2)]}
        svc_changes = rng.sample(services, 4)
        changes = []  # (service, role, old, new) that were decided
        for s in svc_changes[:2]:
            role = rng.choice(["primary", "secondary"])
            new = rng.choice([e for e in engineers if e not in (rota[s]["primary"], rota[s]["secondary"])])
            changes.append((s, role, rota[s][role], new))
        s_rev = svc_changes[2]
        reversed_change = (s_rev, "primary", rota[s_rev]["primary"],
                           rng.choice([e for e in engineers if e not in rota[s_rev].values()]))
        s_prop = svc_changes[3]
        proposed = (s_prop, "secondary", rota[s_prop]["secondary"],
                    rng.choice([e for e in engineers if e not in rota[s_prop].values()]))
        # the trap mix (module docstring)
        thread_kind = rng.choices(THREAD_KINDS, weights=THREAD_ODDS)[0]
        address_changed = rng.random() < ADDRESS_CHANGE_ODDS
        soak_proposal = rng.random() < SOAK_PROPOSAL_ODDS
        corrected = None  # (service, role, old, new): the change as the thread corrected it
        if thread_kind == "corrected":
            corrected = (s_rev, "primary", reversed_change[2],
                         rng.choice([e for e in engineers if e not in (*rota[s_rev].values(), reversed_change[3])]))

        # -- office move ----------------------------------------------------------------------------
        city, city2 = rng.sample(CITIES, 2)
        streets: list[tuple[str, str]] = []
        while len(streets) < 4:
            num, st = fake.building_number(), fake.street_name()
            if all(num != n and st.split()[0] != s.split()[0] for n, s in streets):
                streets.append((num, st))
        postcode = fake.postcode()
        addr = [f"{n} {s}, {c} {postcode if c == city else fake.postcode()}"
                for (n, s), c in zip(streets, [city, city, city, city2])]
        old_addr, planned_addr, new_addr, other_addr = addr
        keys = [address_key(n, s) for n, s in streets]
        old_key, planned_key, new_key, _ = keys
        move_day = today + timedelta(days=rng.randint(10, 40))

        # -- deploy process ----------------------------------------------------------------------------
        approvals = rng.randint(1, 2)
        approvals2 = approvals + 1
        soak = rng.choice([15, 20, 30, 45])
        soak_proposed = soak + 15
        day1, day2 = rng.sample(DAYS[2:], 2)
        t1, t2 = time(rng.choice([12, 14, 16, 17]), 0), time(rng.choice([10, 11, 13, 15]), rng.choice([0, 30]))

        # -- pages ------------------------------------------------------------------------------------
        pages: dict[str, dict[str, Any]] = {}

        def page(slug: str, title: str, body: str, tags=(), author=None, days_ago=None, history=()) -> None:
            pages[slug] = {"slug": slug, "title": title, "body": body, "tags": list(tags),
                           "author": author or H[rng.choice(staff[1:])],
                           "updated": stamp(days_ago if days_ago is not None else rng.randint(20, 400),
                                            f"{rng.randint(8, 18):02d}:{rng.randrange(60):02d}"),
                           "history": list(history)}

        def para(n: int = 3) -> str:
            return fake.paragraph(nb_sentences=n)

        link_forms = [f"[[{OLD_SLUG}]]", f"[[{OLD_SLUG}|incident handbook]]", f"[[{OLD_SLUG}#paging|paging rules]]",
                      f"[[{OLD_SLUG}|the incident handbook]]"]
        runbook_titles = rng.sample(RUNBOOKS, rng.randint(5, 6))
        runbook_slugs = [f"runbook-{kebab(t)}" for t in runbook_titles]
        old_linkers = set(rng.sample(["home", "deploy-process", "postmortem-template", "sre-team", "faq",
                                      *runbook_slugs[:3]], rng.randint(3, 4))) | {"on-call-rota"}
        team_linkers = set(rng.sample(["home", "tools-list", "team-directory", "code-review-guidelines"],
                                      rng.randint(2, 3)))
        if not top:  # the same draws as the default, then no links to fix
            old_linkers, team_linkers = set(), set()
        address_pages = ["office-" + kebab(city)] + rng.sample(["visitor-guide", "mail-and-deliveries",
                                                                "onboarding-checklist"], 2)

        def extras(slug: str) -> str:
            out = []
            if slug in old_linkers:
                out.append(f"If something breaks, follow {rng.choice(link_forms)}.")
            if slug in team_linkers:
                out.append(f"Tooling questions go to the [[{TEAM_OLD}|Platform team]].")
            return ("\n\n" + "\n".join(out)) if out else ""

        if level == 1:  # the rota's four services that chat talks about
            services = [x for x in services if x in svc_changes]
        table = "\n".join(["| Service | Primary | Secondary |", "|---|---|---|"]
                          + [f"| {s} | {rota[s]['primary']} | {rota[s]['secondary']} |" for s in services])
        page("on-call-rota", "On-call rota",
             "# On-call rota\n\n" + ("Who carries the pager for each service this quarter. Changes are agreed in "
                                     "#ops.\n\n" if level > 1 else "")
             + f"{table}\n\nHandover is on Mondays at 10:00.{extras('on-call-rota')}\n", ["oncall"], H[ops_lead], 30)
        office = address_pages[0]
        page(office, f"{city} office",
             f"# {city} office\n\n**Address:** {old_addr}\n\nReception is on the ground floor; ask for a visitor "
             f"badge. Desks are first come, first served.\n\nVisitors: see [[visitor-guide]].\n", ["offices"],
             H[office_mgr])
        page("office-" + kebab(city2), f"{city2} office",
             f"# {city2} office\n\n**Address:** {other_addr}\n\nThe {city2} office is open on weekdays from 8:00 to "
             f"19:00.\n\nVisitors: see [[visitor-guide]].\n", ["offices"], H[office_mgr])
        page("visitor-guide", "Visitor guide",
             (f"# Visitor guide\n\nVisitors to the {city} office come to {old_addr} and sign in at reception."
              if "visitor-guide" in address_pages else "# Visitor guide\n\nSign in at reception in every office.")
             + f"\nIn {city2}, visitors go to {other_addr}.\n\n{para(2)}\n", ["offices"], H[office_mgr])
        page("mail-and-deliveries", "Mail and deliveries",
             (f"# Mail and deliveries\n\nParcels for the {city} office should be addressed to {old_addr}, "
              f"attention: Reception." if "mail-and-deliveries" in address_pages
              else "# Mail and deliveries\n\nParcels are collected at reception twice a day.")
             + f"\n\n{para(2)}\n", ["offices"], H[office_mgr])
        page("onboarding-checklist", "Onboarding checklist",
             "# Onboarding checklist\n\n"
             + (f"1. On day one, come to {old_addr} at 9:30.\n" if "onboarding-checklist" in address_pages
                else "1. On day one, come to your office at 9:30.\n")
             + f"2. Collect your laptop from IT.\n3. Read the [[security-policy]].\n4. Say hi in #general.\n"
               f"{extras('onboarding-checklist')}\n", ["onboarding"])
        page("deploy-process", "Deploy process",
             f"# Deploy process\n\n1. Open a pull request and get {approvals} approval"
             f"{'s' if approvals > 1 else ''} from code owners before merging.\n"
             f"2. Merge to main; CI deploys to staging automatically.\n"
             f"3. Watch the staging dashboard for {soak} minutes before promoting to production.\n"
             f"4. Announce the deploy in #eng.\n\n## Deploy freeze\n\nProduction deploys are frozen from {day1} "
             f"{t1.strftime('%H:%M')} until Monday 09:00.\n\nSee also [[code-review-guidelines]]."
             f"{extras('deploy-process')}\n", ["engineering"], H[eng_lead])
        page(NEW_SLUG, "Incident response",
             f"# Incident response\n\n## Paging\nPage the primary on call (see [[on-call-rota]]); if there is no "
             f"answer in 10 minutes, page the secondary.\n\n## Roles\n{para(2)}\n", ["oncall"], H[docs_owner], 9,
             history=[{"slug": OLD_SLUG, "title": "Incident handbook", "author": H[docs_owner],
                       "date": stamp(200, "10:00"), "body": f"# Incident handbook\n\n{para(2)}\n"}])
        page(TEAM_OLD, "Platform team",
             f"# Platform team\n\nWe build the internal tools, CI and developer environments.\n\n{para(2)}\n",
             ["teams"], H[eng_lead])
        page("ops-review", "Weekly ops review",
             f"# Weekly ops review\n\nEvery Monday at 11:00 the on-call engineers review last week's alerts.\n\n"
             f"{para(2)}\n", ["oncall"], H[ops_lead])
        page("writing-runbooks", "Writing good runbooks",
             f"# Writing good runbooks\n\nA runbook is a checklist someone can follow at 3am. Title it "
             f"'Runbook: <what it fixes>'.\n\n{para(2)}\n", ["docs"], H[docs_owner])
        tagged_already = runbook_slugs[-1]
        for t, s in zip(runbook_titles, runbook_slugs):
            steps = "\n".join(f"{i}. {fake.sentence(nb_words=8)}" for i in range(1, rng.randint(4, 6)))
            page(s, f"Runbook: {t}", f"# Runbook: {t}\n\n{steps}{extras(s)}\n",
                 ["runbook", "oncall"] if s == tagged_already else ["oncall"], H[rng.choice(engineers)])
        home_links = ", ".join(f"[[{s}]]" for s in ["on-call-rota", "deploy-process", "faq", "glossary"])
        page("home", "Home", f"# Welcome to the team wiki\n\nStart with {home_links}.{extras('home')}\n", ["index"],
             H[docs_owner])
        for slug, title, blurb in MISC:
            if slug not in pages:
                page(slug, title, f"# {title}\n\n{blurb}\n\n{para(3)}{extras(slug)}\n")
        slugs_sorted = sorted(pages)
        page_list = [pages[s] for s in slugs_sorted]
        original = {p["slug"]: {k: p[k] for k in ("title", "body", "tags")} for p in page_list}
        ids = {s: i for i, s in enumerate(slugs_sorted, start=1)}  # create_wiki numbers pages in order
        renames = [{"old_slug": OLD_SLUG, "new_slug": NEW_SLUG, "author": H[docs_owner], "date": stamp(9, "10:00")}]

        # -- chat -----------------------------------------------------------------------------------
        users = [{"handle": H[p], "name": p, "title": t} for p, t in zip(staff, [
            "Operations analyst", "Ops lead", "Engineering lead", "Office manager", "Docs owner",
            *["Engineer"] * 8, "Designer"])]
        who = lambda p: f"@{H[p]}"  # noqa: E731
        msgs: list[dict[str, Any]] = []

        def post(channel: str, user: str, days_ago: int, hm: str, text: str, thread: int | None = None) -> int:
            msgs.append({"channel": channel, "user": H[user], "ts": stamp(days_ago, hm), "text": text,
                         **({"thread_id": thread} if thread else {})})
            return len(msgs)

        (c1s, c1r, c1o, c1n), (c2s, c2r, c2o, c2n) = changes
        if level == 1:
            changes = changes[:1]
        if corrected:  # the announced change holds, with the engineer the thread names
            changes = [*changes, corrected]
        rs, _, ro, rn = reversed_change
        ps, _, po, pn = proposed
        post("general", crew[0], 13, "09:01", "Morning! Coffee machine on 3 is fixed.")
        if level > 1:
            post("announcements", office_mgr, 12, "10:15",
                 f"Heads-up: the {city} office is moving to {planned_addr if address_changed else new_addr} on "
                 f"{move_day.strftime('%B')} {move_day.day}. "
                 + ("More details soon." if address_changed else "Please update anything that has the old address."))
        post("ops", ops_lead, 11, "09:40",
             f"Rota change from next week: {c1n} takes over as {c1r} on call for {c1s} from {c1o}. "
             f"{who(c1n)} {who(c1o)}")
        post("eng", crew[1], 10, "15:02", "Anyone else seeing flaky integration tests on main?")
        prop_soak = None
        if level > 1 and soak_proposal:
            prop_soak = post("eng", crew[2], 9, "11:20",
                             f"Proposal: should we raise the staging soak time to {soak_proposed} minutes?")
            post("eng", eng_lead, 9, "11:45", "Let's talk about it at the next sync, no change for now.", prop_soak)
        rev = post("ops", ops_lead, 8, "14:05", f"Also: {rn} will take primary for {rs} (from {ro}).")
        post("ops", ops_lead, 8, "16:30",
             f"Scratch that: {ro} keeps primary for {rs} until the migration is done. No change." if not corrected
             else f"Small correction: {corrected[3]} takes primary for {rs} from {ro}, not {rn} ({first(rn)} is on "
                  f"leave that month).", rev)
        if top:
            post("docs", docs_owner, 8, "09:10",
                 f"I renamed {OLD_SLUG} to {NEW_SLUG} last week, but lots of pages still link to the old name, so "
                 f"those links are broken now. Could someone fix them?")
        if level > 1 and address_changed:
            post("announcements", office_mgr, 7, "12:00",
                 f"Update on the {city} move: the {planned_addr.split(',')[0]} lease fell through. We're moving to "
                 f"{new_addr} instead, same date. Please update anything that has the old address.")
            post("eng", eng_lead, 6, "17:10",
                 f"Decision from today's eng sync: production deploys now need {approvals2} approvals (was "
                 f"{approvals}), and the deploy freeze starts {day2} at {t2.strftime('%H:%M')} instead of {day1} "
                 f"{t1.strftime('%H:%M')}. Soak time stays as it is. Can someone update the wiki?")
        prop = post("ops", crew[3], 5, "10:00",
                    f"Thinking about moving the weekly ops review from Monday to Tuesday, and maybe {pn} could "
                    f"take {ps} secondary from {po}? Thoughts?")
        if level > 1:  # (level 1's proposal simply got no answer)
            post("ops", ops_lead, 5, "10:30", "Not decided yet, let's revisit next month.", prop)
        if level > 1:
            post("ops", ops_lead, 4, "09:20",
                 f"One more rota change, effective now: {c2n} is the new {c2r} for {c2s}, replacing {c2o}.")
        if top:
            post("docs", docs_owner, 4, "13:00",
                 f"The Platform team is now called the {TEAM_TITLE}. Please rename the {TEAM_OLD} page to {TEAM_NEW} "
                 f"(title '{TEAM_TITLE}') and fix the links to it.")
        post("random", crew[4], 3, "16:45", "Who left a cake in the kitchen? Asking for a friend.")
        docs_req = post("docs", docs_owner, 2, "11:30",
                        f"And please tag every runbook (the pages titled 'Runbook: ...') with 'runbook' so they show "
                        f"up in the runbook index. {who(me)} can you take all of this wiki cleanup and post a summary "
                        f"here when done?" if top else
                        f"{who(me)} can you bring the wiki in line with what was decided "
                        f"{'in #ops' if level == 1 else 'in chat'} lately and post a summary here when done?")
        post("general", crew[5], 1, "08:50", "Reminder: all-hands on Thursday.")
        channels = [{"name": "general", "topic": "Company-wide"},
                    {"name": "announcements", "topic": "Official announcements"},
                    {"name": "ops", "topic": "On-call, rota and incidents"},
                    {"name": "eng", "topic": "Engineering"},
                    {"name": "docs", "topic": "Wiki and documentation"},
                    {"name": "random", "topic": "Anything goes"}]
        now = f"{today.isoformat()}T09:00:00"

        def build(root: Path) -> None:
            wiki.create_wiki(root / "state" / "wiki.sqlite", page_list, user=H[me], now=now, renames=renames)
            chat.create_chat(root / "state" / "chat.sqlite", H[me], users, channels, msgs, now=now)

        where = "#announcements, #ops, #eng and #docs" if top else ["#ops", "#announcements, #ops and #eng"][level - 1]
        w = phrasing_rng(self.name, seed)
        hello = say(w, f"Hi, {first(me)} here.", f"Hello, it's {first(me)}.", f"Hi! {first(me)} here.")
        behind = say(w, f"The team wiki has fallen behind what's been decided in chat over the last two weeks (see "
                        f"{where}), and {first(docs_owner)} asked me to sort it out.",
                     f"{first(docs_owner)} asked me to sort out the team wiki: it has fallen behind what's been "
                     f"decided in chat over the last two weeks (see {where}).",
                     f"Over the last two weeks chat has decided things the team wiki doesn't show yet (see {where}), "
                     f"and {first(docs_owner)} asked me to sort that out.")
        ask = say(w, "Could you bring the wiki up to date?", "Can you bring the wiki up to date?",
                  "Please bring the wiki up to date.")
        rules = in_some_order(w, [
            say(w, "Only what was actually decided: proposals and changes that were called off don't count.",
                "Proposals and changes that were called off don't count; only what was actually decided does.",
                "Stick to what was actually decided: proposals don't count, and neither do changes that were "
                "called off."),
            say(w, "Leave pages that don't need changes alone.", "Pages that don't need changes stay as they are.",
                "Don't touch pages that don't need changes."),
        ])
        summary = say(w, "When you're done, post a short summary of what you changed in #docs.",
                      "Once you're finished, post a short summary of what you changed in #docs.",
                      "Then post a short summary of your changes in #docs.")
        closer = say(w, "Thanks!", "Thank you.", "")
        instruction = " ".join(x for x in [hello, behind, ask, *rules, summary, closer] if x)

        # -- the oracle ----------------------------------------------------------------------------
        new_freeze_line = (f"Production deploys are frozen from {day2} {t2.strftime('%H:%M')} until Monday 09:00.")

        def report(rota: bool = True) -> str:
            """The summary for #docs (``rota=False``: one that leaves the rota changes out)."""
            done = ", ".join(f"{s_} {r_} is now {n_}" for s_, r_, _, n_ in changes)
            thread = (f"{corrected[3]}, not {rn}, as corrected in the thread" if corrected else
                      f"{rs} unchanged, that change was called off")
            if level == 1:
                return (f"on-call-rota: {done} ({thread}; {ps} proposal undecided)."
                        if rota else "Done, the wiki is updated.")
            rota_txt = f"on-call-rota: {done} ({thread}). " if rota else ""
            return (f"Wiki caught up with recent decisions: {rota_txt}{office} and other pages: new {city} address "
                    f"{new_addr}. deploy-process: {approvals2} approvals, freeze from {day2} {t2.strftime('%H:%M')}."
                    + (f" Fixed links to {OLD_SLUG} (now {NEW_SLUG}). Renamed {TEAM_OLD} to {TEAM_NEW} "
                       f"({TEAM_TITLE}) and fixed its links. Tagged all runbook pages with 'runbook'." if top else ""))

        def rota_body(todo) -> str:
            """The rota page with the changes in ``todo`` applied (how the oracle edits it)."""
            body = original["on-call-rota"]["body"]
            for s, role, _, new in todo:
                body = set_rota(body, s, role, new)
            return body

        def solve():
            def read(slug: str, note: str):
                res = yield ToolCall("wiki__get_page", {"slug": slug}, note)
                return json.loads(res)["body"]

            reported = ToolCall("chat__post_message", {"channel": "#docs", "text": report()}
                                | ({"thread_id": docs_req} if level > 1 else {}), "Report in #docs.")
            if level > 1:
                yield ToolCall("chat__list_channels", {}, "Which channels carry the decisions?")
            for ch in ("announcements", "ops", "eng", "docs") if level > 1 else ("ops",):
                yield ToolCall("chat__read_channel", {"channel": f"#{ch}", "limit": 50}, f"Read #{ch}.")
            for tid, why in ((rev, "Was the rota change kept?"),
                             (prop if level > 1 else None, "Was the proposal agreed?"),
                             (prop_soak, "Was the soak-time proposal agreed?")):
                if tid is not None:
                    yield ToolCall("chat__read_thread", {"thread_id": tid}, why)
            if level > 1:
                yield ToolCall("wiki__list_pages", {}, "Get an overview of the wiki.")

            # 1. rota
            body = yield from read("on-call-rota", "Read the rota.")
            for s, role, _, new in changes:
                body = set_rota(body, s, role, new)
            yield ToolCall("wiki__update_page", {"slug": "on-call-rota", "body": body,
                                                 "summary": "Rota changes agreed in #ops"}, "Apply the rota changes.")
            if level == 1:
                yield reported
                return "Rota updated, summary posted."
            # 2. office move
            hits = json.loads((yield ToolCall("wiki__search_pages", {"query": f'"{old_key}"'},
                                              "Find every page with the old address.")))
            for hit in hits["pages"]:
                body = yield from read(hit["slug"], f"Read {hit['slug']}.")
                yield ToolCall("wiki__update_page", {"slug": hit["slug"], "body": body.replace(old_addr, new_addr),
                                                     "summary": f"{city} office moved to {new_addr}"},
                               f"Update the address on {hit['slug']}.")
            # 3. deploy process
            body = yield from read("deploy-process", "Read the deploy process.")
            old_step = f"get {approvals} approval{'s' if approvals > 1 else ''} from"
            body = body.replace(old_step, f"get {approvals2} approvals from")
            body = "\n".join(new_freeze_line if ln.startswith("Production deploys are frozen") else ln
                             for ln in body.splitlines()) + "\n"
            yield ToolCall("wiki__update_page", {"slug": "deploy-process", "body": body,
                                                 "summary": "Approvals and freeze window per eng sync"},
                           "Apply the eng decision.")
            if not top:
                yield ToolCall("wiki__get_page", {"slug": "on-call-rota"}, "Re-read the rota.")
                yield reported
                return "The wiki is up to date with the decisions from chat; summary posted in #docs."
            # 4. broken links after the incident-handbook rename
            back = json.loads((yield ToolCall("wiki__backlinks", {"slug": OLD_SLUG}, "Who links to the old slug?")))
            for ref in back["pages"]:
                body = yield from read(ref["slug"], f"Read {ref['slug']}.")
                yield ToolCall("wiki__update_page", {"slug": ref["slug"], "body": body.replace(
                    f"[[{OLD_SLUG}", f"[[{NEW_SLUG}"), "summary": f"Fix link: {OLD_SLUG} is now {NEW_SLUG}"},
                               f"Point {ref['slug']} at {NEW_SLUG}.")
            # 5. team rename
            yield ToolCall("wiki__get_page", {"slug": TEAM_OLD}, "Read the team page before renaming.")
            yield ToolCall("wiki__rename_page", {"slug": TEAM_OLD, "new_slug": TEAM_NEW, "new_title": TEAM_TITLE},
                           "Rename the team page.")
            back = json.loads((yield ToolCall("wiki__backlinks", {"slug": TEAM_OLD}, "Links to fix after the rename.")))
            for ref in back["pages"]:
                body = yield from read(ref["slug"], f"Read {ref['slug']}.")
                body = body.replace(f"[[{TEAM_OLD}|Platform team]]", f"[[{TEAM_NEW}|{TEAM_TITLE}]]")
                yield ToolCall("wiki__update_page", {"slug": ref["slug"], "body": body.replace(
                    f"[[{TEAM_OLD}", f"[[{TEAM_NEW}"), "summary": f"Link to {TEAM_NEW}"}, f"Fix {ref['slug']}.")
            # 6. runbook tags
            hits = json.loads((yield ToolCall("wiki__search_pages", {"query": "runbook", "limit": 50},
                                              "Find the runbooks.")))
            for hit in hits["pages"]:
                if hit["title"].lower().startswith("runbook:") and "runbook" not in hit["tags"]:
                    yield ToolCall("wiki__add_tag", {"slug": hit["slug"], "tag": "runbook"}, f"Tag {hit['slug']}.")
            # verify
            yield ToolCall("wiki__list_pages", {"tag": "runbook"}, "Check the runbook tags.")
            yield ToolCall("wiki__backlinks", {"slug": OLD_SLUG}, "No links to the old slug should be left.")
            yield ToolCall("wiki__backlinks", {"slug": TEAM_OLD}, "Nor to the old team slug.")
            yield ToolCall("wiki__get_page", {"slug": "on-call-rota"}, "Re-read the rota.")
            yield reported
            return "The wiki is up to date with the decisions from chat; summary posted in #docs."

        rota_write = perturb.on("wiki__update_page", slug="on-call-rota")  # the first: the rota changes
        to_docs = perturb.on("chat__post_message", channel="#docs")
        old_freeze_line = f"Production deploys are frozen from {day1} {t1.strftime('%H:%M')} until Monday 09:00."
        flawed = {
            "rota_updated": lambda: perturb.change(  # the engineer first announced, or the last change missing
                solve, rota_write, body=rota_body([*changes[:-1], reversed_change] if corrected else changes[:-1])),
            "rota_rest_unchanged": lambda: perturb.change(  # the called-off change (or the proposal) applied
                solve, rota_write, body=rota_body([*changes, proposed if corrected else reversed_change])),
            "address_updated": lambda: perturb.change(  # the address announced first, later abandoned
                solve, perturb.on("wiki__update_page", where=lambda a: new_addr in a["summary"]), lambda a: {
                    **a, "body": a["body"].replace(new_addr, planned_addr),
                    "summary": f"{city} office moved to {planned_addr}"}, count=None) if address_changed else
            perturb.drop(solve, perturb.on("wiki__update_page", where=lambda a: new_addr in a["summary"])),
            "process_updated": lambda: perturb.change(  # the approvals only, not the freeze start
                solve, perturb.on("wiki__update_page", slug="deploy-process"),
                lambda a: {**a, "body": a["body"].replace(new_freeze_line, old_freeze_line)}),
            "incident_links_fixed": lambda: perturb.drop(solve, perturb.on(
                "wiki__update_page", summary=f"Fix link: {OLD_SLUG} is now {NEW_SLUG}")),
            "team_renamed": lambda: perturb.change(solve, perturb.on("wiki__rename_page"), new_title=None),
            "team_links_fixed": lambda: perturb.drop(solve, perturb.on(
                "wiki__update_page", summary=f"Link to {TEAM_NEW}")),
            "runbooks_tagged": lambda: perturb.insert(solve, ToolCall(
                "wiki__add_tag", {"slug": "writing-runbooks", "tag": "runbook"}),
                before=perturb.on("wiki__list_pages", tag="runbook")),
            "summary_posted": lambda: perturb.change(solve, to_docs, text=report(rota=False)),
            "unrelated_unchanged": lambda: perturb.insert(  # acts on the proposal nobody agreed to
                solve, ToolCall("wiki__get_page", {"slug": "ops-review"}, "Read the ops review page."),
                ToolCall("wiki__update_page", {"slug": "ops-review", "body": original["ops-review"]["body"].replace(
                    "Monday", "Tuesday"), "summary": "Moved to Tuesday"}), before=to_docs),
            "chat_only_docs": lambda: perturb.insert(solve, ToolCall(
                "chat__post_message", {"channel": "#ops", "text": "Rota page updated."})),
        }

        # -- criteria ------------------------------------------------------------------------------
        def rota_updated(w, t):
            table_ = rota_table(page_now(w, ids, "on-call-rota")["body"])
            for s, role, old, new in changes:
                cell = table_.get(_norm(s), {}).get(role, "")
                if _norm(new) not in _norm(cell) or _norm(old) in _norm(cell):
                    return False, f"{s} {role} is {cell!r}, expected {new}"
            return True

        def rota_rest(w, t):
            table_ = rota_table(page_now(w, ids, "on-call-rota")["body"])
            changed = {(s, r) for s, r, _, _ in changes}
            for s in services:
                for role in ("primary", "secondary"):
                    if (s, role) in changed:
                        continue
                    cell = table_.get(_norm(s), {}).get(role, "")
                    if _norm(cell) != _norm(rota[s][role]):
                        return False, f"{s} {role} changed to {cell!r}"
            return True

        def address_updated(w, t):
            for slug in address_pages:
                body = page_now(w, ids, slug)["body"]
                if not has_address(body, new_key):
                    return False, f"{slug} lacks the new address"
                if has_address(body, old_key) or has_address(body, planned_key):
                    return False, f"{slug} still has the old or the abandoned address"
            others = [p["slug"] for p in wiki.pages(w).values() if has_address(p["body"], old_key)]
            return not others, f"old address still on {others}" if others else ""

        def process_updated(w, t):
            lines = [ln for ln in page_now(w, ids, "deploy-process")["body"].splitlines() if not ln.lstrip().startswith("#")]
            appr = [ln for ln in lines if "approv" in ln.lower()]
            if not any(count_near(ln, approvals2) for ln in appr) or \
                    any(count_near(ln, approvals) and not count_near(ln, approvals2) for ln in appr):
                return False, f"approval lines: {appr}"
            freeze = [ln for ln in lines if "freeze" in ln.lower() or "frozen" in ln.lower()]
            if not any(day2.lower() in ln.lower() and mentions_time(ln, t2) for ln in freeze):
                return False, f"freeze lines: {freeze}"
            for ln in freeze:  # the old start may only appear after the new one ("... (was Friday 12:00)")
                low = ln.lower()
                if day1.lower() in low and mentions_time(ln, t1) and not (
                        day2.lower() in low and low.index(day2.lower()) < low.index(day1.lower())):
                    return False, "the old freeze start is still there"
            soak_lines = [ln for ln in lines if "minute" in ln.lower()]
            if not any(re.search(rf"\b{soak}\b", ln) for ln in soak_lines):
                return False, "the soak time changed"
            return True

        def links_fixed(old: str, new: str, linkers: set[str]):
            def check(w, t):
                now_pages = pages_by_id(w)
                stale = [p["slug"] for p in now_pages.values() if old in wiki.link_targets(p["body"])]
                if stale:
                    return False, f"still linking to {old}: {stale}"
                unlinked = [s for s in linkers if new not in wiki.link_targets(now_pages[ids[s]]["body"])]
                return not unlinked, f"not linking to {new}: {unlinked}" if unlinked else ""
            return check

        def team_renamed(w, t):
            p = pages_by_id(w).get(ids[TEAM_OLD])
            ok = p is not None and p["slug"] == TEAM_NEW and _norm(p["title"]) == _norm(TEAM_TITLE)
            return ok, "" if ok else f"team page is {p and (p['slug'], p['title'])}"

        def runbooks_tagged(w, t):
            tagged = {p["slug"] for p in wiki.pages(w).values() if "runbook" in p["tags"]}
            want = set(runbook_slugs)
            return tagged == want, f"tagged {sorted(tagged)}, expected {sorted(want)}"

        def summary_posted(w, t):
            posts = [m for m in chat.posts_by_me(w) if m["channel"] == "docs"]
            need = {"rota": ["rota"], "office": [city, "address"], "process": ["deploy"],
                    "team": [TEAM_NEW, "developer experience"], "runbooks": ["runbook"],
                    "links": [NEW_SLUG, OLD_SLUG, "incident response", "incident handbook"]}
            if not top:  # what this level's chat decided
                need = {k: v for k, v in need.items() if k in ("rota", "office", "process")[:1 if level == 1 else 3]}
            for m in posts:
                text = _norm(m["text"]).replace("-", " ")
                if all(any(_norm(v).replace("-", " ") in text for v in vs) for vs in need.values()) \
                        and not affirms_address(m["text"], planned_key, city, [old_key, new_key]):
                    # everything seen is not a summary: the abandoned address may only be named as not applied
                    return True
            return False, f"{len(posts)} posts in #docs, none covering every change (without the abandoned address)"

        editable_body = {"on-call-rota", "deploy-process", TEAM_OLD, *address_pages, *old_linkers, *team_linkers}
        if not top:
            editable_body = {"on-call-rota"} | ({"deploy-process", *address_pages} if level > 1 else set())

        def unrelated_unchanged(w, t):
            now_pages = pages_by_id(w)
            if len(now_pages) != len(original):
                return False, f"{len(now_pages)} pages, expected {len(original)}"
            for slug, o in original.items():
                p = now_pages.get(ids[slug])
                if p is None:
                    return False, f"{slug} is gone"
                if slug not in editable_body and p["body"] != o["body"]:
                    return False, f"{slug} body changed"
                if (slug != TEAM_OLD or not top) and (p["slug"] != slug or p["title"] != o["title"]):
                    return False, f"{slug} renamed or retitled"
                extra = set(p["tags"]) ^ set(o["tags"])
                if extra and not (top and slug in runbook_slugs and extra == {"runbook"}):
                    return False, f"{slug} tags changed: {sorted(extra)}"
            return True

        def chat_only_docs(w, t):
            bad = [c.arguments for c in t.calls("chat__send_direct_message", ok_only=True)]
            bad += [c.arguments for c in t.calls("chat__post_message", ok_only=True)
                    if str(c.arguments.get("channel", "")).strip().lstrip("#").lower() != "docs"]
            return not bad, f"posted elsewhere: {bad}" if bad else ""

        criteria = [
            Criterion("rota_updated", "the agreed rota changes (as their thread left them) are on the rota page",
                      "final_state", rota_updated, 1.5),
            Criterion("rota_rest_unchanged", "no other rota cell changed (the called-off change and the proposal "
                      "included)", "final_state", rota_rest, guard=True),
            Criterion("address_updated", f"every page with the old {city} address has the final new one"
                      + (" (not the abandoned one)" if address_changed else ""), "final_state", address_updated, 1.5),
            Criterion("process_updated", "the deploy process has the new approvals and freeze start, soak unchanged",
                      "final_state", process_updated),
            Criterion("incident_links_fixed", f"no page links to {OLD_SLUG}; former linkers link {NEW_SLUG}",
                      "final_state", links_fixed(OLD_SLUG, NEW_SLUG, old_linkers), 1.5),
            Criterion("team_renamed", f"{TEAM_OLD} is now {TEAM_NEW}, titled '{TEAM_TITLE}'", "final_state",
                      team_renamed),
            Criterion("team_links_fixed", f"no page links to {TEAM_OLD}; former linkers link {TEAM_NEW}",
                      "final_state", links_fixed(TEAM_OLD, TEAM_NEW, team_linkers)),
            Criterion("runbooks_tagged", "exactly the 'Runbook:' pages carry the runbook tag", "final_state",
                      runbooks_tagged),
            Criterion("summary_posted", "a post in #docs summarises every change (the abandoned address at most as "
                      "not applied)", "final_state", summary_posted, requires=("rota_updated",)),
            Criterion("unrelated_unchanged", "pages that needed no change are untouched; no pages added",
                      "final_state", unrelated_unchanged, guard=True),
            Criterion("chat_only_docs", "chat posts only in #docs, no direct messages", "process", chat_only_docs,
                      guard=True),
        ]
        asked = {1: {"rota_updated", "rota_rest_unchanged"},
                 2: {"rota_updated", "rota_rest_unchanged", "address_updated", "process_updated"}}
        if not top:  # the decisions this level's chat holds, and the checks every level has
            criteria = [c for c in criteria if c.id in asked[level] or c.id in ("summary_posted", "unrelated_unchanged",
                                                                                  "chat_only_docs")]
        perturbations = {c.id: flawed[c.id]() for c in criteria}
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"changes": [list(c) for c in changes], "proposed": list(proposed),
                  "address_pages": address_pages, "new_address": new_addr,
                  # the drawn traps, empty when absent
                  "reversed": [] if corrected else list(reversed_change),
                  "corrected": [*corrected, reversed_change[3]] if corrected else [],
                  "abandoned_address": planned_addr if address_changed and level > 1 else "",
                  "soak_proposal": soak_proposed if soak_proposal and level > 1 else "",
                  "old_linkers": sorted(old_linkers), "team_linkers": sorted(team_linkers),
                  "runbooks": runbook_slugs},
        )
