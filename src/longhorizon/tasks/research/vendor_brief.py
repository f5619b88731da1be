"""Vendor research brief: answer a colleague's questions about a vendor from a 200+ document
archive, with sources, and tell her in chat.

The questions live in a chat thread (one more is added in a reply, and a colleague chimes in
with a rumour). Every answer has conflicting candidates in the archive: an older official
figure, a newer official one (the answer), unofficial notes or news that are newer still but
stale or speculative, and official releases from a near-namesake company. The rule of thumb
is in the request: official documents only, and the newest official one wins.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

from longhorizon.apps.chat import state as chat
from longhorizon.apps.search.state import create_index
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import kebab, output_text, rng_and_faker, write_files
from longhorizon.tasks.kit import files as files_kit, perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.research import (
    CITIES,
    SOURCES,
    Corpus,
    Doc,
    add_filler,
    answer_segments,
    cited_docs,
    long_date,
    people,
    pick_day,
    stated_first,
)

PREFIXES = ["Nimbus", "Vertex", "Quantia", "Lumen", "Stratus", "Cobalt", "Helix", "Orbit", "Pinnacle", "Arbor",
            "Kestrel", "Meridian", "Solace", "Tandem", "Zephyr", "Beacon", "Corvid", "Ember", "Fathom", "Juniper"]
SUFFIXES = ["Analytics", "Cloud", "Systems", "Software", "Labs", "Networks", "Data", "Works"]
PRODUCTS = ["expense management platform", "helpdesk software", "HR information system", "data warehouse",
            "e-signature service", "project tracking tool", "customer data platform", "payroll service"]
PLANS = ["Team", "Business", "Pro", "Growth"]
REGIONS = ["Frankfurt", "Dublin", "Ashburn", "Oregon", "Paris", "Stockholm", "Sydney", "Tokyo", "London",
           "Milan", "Mumbai", "Sao Paulo"]
TIERS = ["Bronze", "Silver", "Gold", "Platinum", "Diamond", "Titanium"]
UPTIMES = [99.0, 99.5, 99.9, 99.95, 99.99]
ROUNDS = ["A", "B", "C", "D", "E"]

QUESTIONS = {
    "ceo": ("person", "Who is {Vs} chief executive at the moment?", "CEO"),
    "price": ("money", "What is the current list price of {Vs} {plan} plan, per user per month?", "price"),
    "hq": ("place", "Which city is {V} headquartered in now?", "headquarters"),
    "headcount": ("count", "What is the latest official employee headcount at {V}?", "employees"),
    "funding": ("money", "How much did {V} raise in its most recent funding round?", "funding"),
    "uptime": ("percent", "What uptime does our contract with {V} guarantee?", "uptime"),
    "contract_end": ("date", "When does our current contract with {V} end?", "term"),
    "region": ("place", "Where (which data-centre location) is our data with {V} hosted?", "hosted"),
    "manager": ("person", "Who is our account manager at {V} these days?", "account manager"),
    "tier": ("word", "Which support tier are we on with {V}?", "support tier"),
}
OFFICIAL_SOURCE = {"ceo": "press", "price": "press", "hq": "press", "headcount": "press", "funding": "press",
                   "uptime": "contracts", "contract_end": "contracts", "region": "contracts",
                   "manager": "memos", "tier": "memos"}


def _possessive(name: str) -> str:
    return f"{name}'" if name.endswith("s") else f"{name}'s"


def _money(v: float) -> str:
    return f"${v:,.0f}" if v == int(v) else f"${v:,.2f}"


def _render(kind: str, fact: str, v: Any) -> str:
    """How a value is written in documents and in the oracle's answers."""
    if fact == "funding":
        return f"${v / 1e6:,.0f} million"
    if kind == "money":
        return _money(v)
    if kind == "percent":
        return f"{v:g}%"
    if kind == "count":
        return f"{v:,}"
    if kind == "date":
        return long_date(v)
    return str(v)


def _distinct(make, n: int, avoid=()) -> list:
    out: list = []
    while len(out) < n:
        v = make()
        if v not in out and v not in avoid:
            out.append(v)
    return out


@register
class VendorResearchBrief(TaskFamily):
    name = "vendor_research_brief"
    category = "search and research"
    apps = ("chat", "search", "files")
    description = ("Answer a colleague's questions about a vendor from a large, contradictory document archive "
                   "(newest official source wins), cite document ids in a brief, and reply in her chat thread.")

    levels = 3
    """1: one question (its archive has a stale, unofficial or namesake candidate), answered from the
    search hits (their snippets hold the values), no amendment in the thread; 2: two questions and
    one more added in the thread; 3 (default): six to eight and the one added. Every level has the
    rumour: at level 1 a post in the channel right after the request (no thread to read), above it a
    reply in the request's thread."""
    toolsets = {1: ("chat__post_message", "chat__read_channel", "files__write_file", "search__search")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        today = date(2026, 1, 5) + timedelta(days=rng.randrange(300))
        lo, hi = today - timedelta(days=900), today - timedelta(days=1)
        prefix, other_prefix, *more = rng.sample(PREFIXES, 5)
        suf, suf2, other_suf = rng.sample(SUFFIXES, 3)
        V, V2 = f"{prefix} {suf}", f"{prefix} {suf2}"  # the vendor and its near-namesake
        OTHER = f"{other_prefix} {other_suf}"  # last quarter's brief
        rivals = [f"{p} {rng.choice(SUFFIXES)}" for p in more]
        product = rng.choice(PRODUCTS)
        plan = rng.choice(PLANS)
        staff = people(fake, 14)
        companies = [fake.company() for _ in range(12)] + rivals
        corpus = Corpus(rng)

        # -- the facts: candidate values and the documents that state them ----------------------
        names = iter(_distinct(lambda: f"{fake.first_name()} {fake.last_name()}", 12, avoid=staff))
        values: dict[str, list] = {}
        p0 = rng.randint(12, 40) + rng.choice([0, 0, 0.5])
        values["price"] = [p0, p0 + rng.randint(3, 9), p0 + rng.randint(10, 16), p0 + rng.randint(17, 25)]
        h0 = rng.randint(12, 60) * 10
        values["headcount"] = [h0, h0 + rng.randint(6, 40) * 10 + rng.randint(1, 9),
                               h0 + rng.randint(45, 80) * 10, rng.randint(100, 1800)]
        while values["headcount"][3] in values["headcount"][:3]:
            values["headcount"][3] += 7
        f0 = rng.randint(5, 30)
        values["funding"] = [f0 * 1e6, (f0 + rng.randint(15, 60)) * 1e6, (f0 + rng.randint(65, 120)) * 1e6,
                             0.0]
        while values["funding"][3] in values["funding"][:3] or not values["funding"][3]:
            values["funding"][3] = rng.randint(3, 200) * 1e6
        values["uptime"] = rng.sample(UPTIMES, 4)
        ends: list[date] = []
        for a, b in ((-100, 200), (250, 900), (30, 900), (30, 400)):  # old end, renewed end, rumour, trial
            while True:
                d = pick_day(rng, today + timedelta(days=a), today + timedelta(days=b))
                if d.day > 12 and all((d.month, d.day) != (e.month, e.day) for e in ends):
                    ends.append(d)
                    break
        values["contract_end"] = ends
        values["hq"] = rng.sample(CITIES, 4)
        values["region"] = rng.sample(REGIONS, 4)
        values["tier"] = rng.sample(TIERS, 4)
        values["ceo"] = [next(names) for _ in range(4)]
        values["manager"] = [next(names) for _ in range(4)]
        round0 = rng.randrange(3)

        facts: dict[str, dict[str, Any]] = {}
        for key in QUESTIONS:
            v0, v1, v2, v3 = values[key]
            has_old = rng.random() < 0.8
            d0 = pick_day(rng, lo + timedelta(days=30), today - timedelta(days=380))
            d1 = pick_day(rng, d0 + timedelta(days=90), today - timedelta(days=60))
            d2 = pick_day(rng, d1 + timedelta(days=5), today - timedelta(days=3))
            d3 = pick_day(rng, d1 + timedelta(days=1), today - timedelta(days=2))
            facts[key] = {"v0": v0, "v1": v1, "v2": v2, "v3": v3, "has_old": has_old,
                          "stale_unofficial": has_old and rng.random() < 0.5,
                          "d0": d0, "d1": d1, "d2": d2, "d3": d3,
                          "repeat": rng.random() < 0.3, "neardup": rng.random() < 0.75, "docs": {}}
        kind_of = {k: q[0] for k, q in QUESTIONS.items()}

        def r(key: str, v: Any) -> str:
            return _render(kind_of[key], key, v)

        def fill(n: int = 2) -> str:
            return fake.paragraph(nb_sentences=n)

        def add(key: str, role: str, title: str, body: str, day: date, source: str, author: str) -> None:
            doc = corpus.add(Doc(title, body, day, source, author, tags={"fact": key, "role": role}))
            facts[key]["docs"][role] = doc

        for key, f in facts.items():
            v0, v1, v3 = f["v0"], f["v1"], f["v3"]
            unoff = v0 if f["stale_unofficial"] else f["v2"]
            f["unofficial_value"] = unoff
            pr = f"{V} Communications"
            if key == "ceo":
                if f["has_old"]:
                    add(key, "old", f"{V} names {v0} CEO",
                        f"{long_date(f['d0'])} - {V}, maker of the {product}, today announced that {v0} has "
                        f"been appointed CEO. {fill()}", f["d0"], "press", pr)
                prev = f"succeeding {v0}" if f["has_old"] else "succeeding the company's co-founder"
                add(key, "new", f"{V} announces leadership transition",
                    f"{long_date(f['d1'])} - {V} today announced that {v1} has been named CEO, {prev}, "
                    f"effective immediately. {fill()}", f["d1"], "press", pr)
                if f["repeat"]:
                    add(key, "repeat", f"{V} CEO {v1} outlines product roadmap",
                        f"At its customer conference, {V} CEO {v1} outlined the roadmap for the {product}. {fill()}",
                        pick_day(rng, f["d1"] + timedelta(days=2), today - timedelta(days=2)), "press", pr)
                add(key, "unofficial", f"Vendor sync: {V}",
                    f"Meeting notes: vendor sync with {V}\n\n- Their CEO {unoff} joined the call for ten minutes.\n"
                    f"- {fill(1)}", f["d2"], "meetings", rng.choice(staff))
                if f["neardup"]:
                    add(key, "neardup", f"{V2} appoints {v3} as CEO",
                        f"{V2} today announced that {v3} has been appointed CEO. {fill()}", f["d3"], "press",
                        f"{V2} Communications")
            elif key == "price":
                if f["has_old"]:
                    add(key, "old", f"{V} launches {plan} plan",
                        f"{V} today launched its {plan} plan. The list price is {r(key, v0)} per user per month. "
                        f"{fill()}", f["d0"], "press", pr)
                add(key, "new", f"{V} updates {plan} plan pricing",
                    f"Effective {long_date(f['d1'])}, the list price of the {V} {plan} plan is {r(key, v1)} per user "
                    f"per month. {fill()}", f["d1"], "press", pr)
                if f["repeat"]:
                    add(key, "repeat", f"{V} price sheet",
                        f"{V} price sheet. {plan} plan: {r(key, v1)} per user per month (list price). {fill(1)}",
                        pick_day(rng, f["d1"] + timedelta(days=2), today - timedelta(days=2)), "press", pr)
                add(key, "unofficial", f"Will {V} raise prices again?",
                    f"Analysts expect the {V} {plan} plan list price to be {r(key, unoff)} per user per month "
                    f"before long, though the company would not comment. {fill()}", f["d2"], "news", fake.name())
                if f["neardup"]:
                    add(key, "neardup", f"{V2} cuts {plan} plan price",
                        f"{V2} has set the list price of its {plan} plan at {r(key, v3)} per user per month. {fill()}",
                        f["d3"], "press", f"{V2} Communications")
            elif key == "hq":
                if f["has_old"]:
                    add(key, "old", f"{V} opens headquarters in {v0}",
                        f"{V} today opened its headquarters in {v0}. {fill()}", f["d0"], "press", pr)
                add(key, "new", f"{V} moves headquarters to {v1}",
                    f"{V} has moved its headquarters to {v1}" + (f", leaving {v0}" if f["has_old"] else "")
                    + f". {fill()}", f["d1"], "press", pr)
                if f["repeat"]:
                    add(key, "repeat", f"{V} hosts customer day",
                        f"{V} welcomed customers to its headquarters in {v1} for its annual customer day. {fill(1)}",
                        pick_day(rng, f["d1"] + timedelta(days=2), today - timedelta(days=2)), "press", pr)
                add(key, "unofficial", f"Site visit to {V}",
                    f"Ticket VR-{rng.randint(1000, 9999)}: travel for a site visit to the {V} headquarters in "
                    f"{unoff}.\nStatus: Closed\n\n{fill(1)}", f["d2"], "tickets", rng.choice(staff))
                if f["neardup"]:
                    add(key, "neardup", f"{V2} opens headquarters in {v3}",
                        f"{V2} today opened new headquarters in {v3}. {fill()}", f["d3"], "press",
                        f"{V2} Communications")
            elif key == "headcount":
                if f["has_old"]:
                    add(key, "old", f"{V} passes {r(key, v0)} employees",
                        f"{V} now has {r(key, v0)} employees across four offices. {fill()}", f["d0"], "press", pr)
                add(key, "new", f"{V} annual update",
                    f"{V} closed the year with {r(key, v1)} employees, the company said in its annual update. "
                    f"{fill()}", f["d1"], "press", pr)
                add(key, "unofficial", f"How big is {V} really?",
                    f"Profiles on professional networks suggest {V} has about {r(key, unoff)} employees. {fill()}",
                    f["d2"], "news", fake.name())
                if f["neardup"]:
                    add(key, "neardup", f"{V2} grows to {r(key, v3)} employees",
                        f"{V2} now has {r(key, v3)} employees. {fill()}", f["d3"], "press", f"{V2} Communications")
            elif key == "funding":
                r0, r1 = ROUNDS[round0], ROUNDS[round0 + 1]
                if f["has_old"]:
                    add(key, "old", f"{V} raises {r(key, v0)} Series {r0}",
                        f"{V} has raised {r(key, v0)} in Series {r0} funding. {fill()}", f["d0"], "press", pr)
                add(key, "new", f"{V} closes {r(key, v1)} Series {r1}",
                    f"{V} today closed a {r(key, v1)} Series {r1} funding round. {fill()}", f["d1"], "press", pr)
                add(key, "unofficial", f"{V} said to be raising again",
                    f"{V} is in talks about a funding round of {r(key, unoff)}, people familiar with the matter "
                    f"said. {fill()}", f["d2"], "news", fake.name())
                if f["neardup"]:
                    add(key, "neardup", f"{V2} secures {r(key, v3)}",
                        f"{V2} has secured {r(key, v3)} in new funding. {fill()}", f["d3"], "press",
                        f"{V2} Communications")
            elif key == "uptime":
                if f["has_old"]:
                    add(key, "old", f"Order form: {V} {product}",
                        f"ORDER FORM\nSupplier: {V}\nService: {product}\nService level: {r(key, v0)} monthly uptime\n"
                        f"\n{fill(1)}", f["d0"], "contracts", "Procurement")
                add(key, "new", f"Amendment: {V} service levels",
                    f"AMENDMENT to our agreement with {V}\nThe uptime commitment is replaced by {r(key, v1)} monthly "
                    f"uptime, with service credits below that level.\n\n{fill(1)}", f["d1"], "contracts", "Legal")
                add(key, "unofficial", f"{V} QBR notes",
                    f"Meeting notes: quarterly review with {V}\n\n- Their rep said our uptime commitment is "
                    f"{r(key, unoff)}.\n- {fill(1)}", f["d2"], "meetings", rng.choice(staff))
                if f["neardup"]:
                    add(key, "neardup", f"{V2} uptime guarantee",
                        f"{V2} now guarantees {r(key, v3)} uptime to every customer. {fill()}", f["d3"], "press",
                        f"{V2} Communications")
            elif key == "contract_end":
                if f["has_old"]:
                    add(key, "old", f"Agreement: {V}",
                        f"AGREEMENT with {V} for the {product}\nTerm: from {f['d0'].isoformat()} until "
                        f"{long_date(v0)}.\n\n{fill(1)}", f["d0"], "contracts", "Procurement")
                add(key, "new", f"Renewal: {V}",
                    f"RENEWAL of our agreement with {V}\nThe term is extended and now ends on {long_date(v1)}.\n\n"
                    f"{fill(1)}", f["d1"], "contracts", "Legal")
                add(key, "unofficial", "Renewals planning",
                    f"Meeting notes: renewals planning\n\n- Reminder: the {V} contract term ends {long_date(unoff)}.\n"
                    f"- {fill(1)}", f["d2"], "meetings", rng.choice(staff))
                if f["neardup"]:
                    add(key, "neardup", f"Trial agreement: {V2}",
                        f"TRIAL AGREEMENT with {V2}\nTerm: the trial ends on {long_date(v3)}.\n\n{fill(1)}",
                        f["d3"], "contracts", "Procurement")
            elif key == "region":
                if f["has_old"]:
                    add(key, "old", f"Data processing addendum: {V}",
                        f"DATA PROCESSING ADDENDUM with {V}\nCustomer data is hosted in {v0}.\n\n{fill(1)}",
                        f["d0"], "contracts", "Legal")
                add(key, "new", f"Hosting change: {V}",
                    f"AMENDMENT to the data processing addendum with {V}\nFrom {long_date(f['d1'])} customer data is "
                    f"hosted in {v1}.\n\n{fill(1)}", f["d1"], "contracts", "Legal")
                add(key, "unofficial", f"Slow {V} reports",
                    f"Ticket IT-{rng.randint(10000, 99999)}: {V} reports are slow\nStatus: Open\n\nProbably latency, "
                    f"our data is hosted in {unoff}. {fill(1)}", f["d2"], "tickets", rng.choice(staff))
                if f["neardup"]:
                    add(key, "neardup", f"{V2} opens data centre in {v3}",
                        f"{V2} customers can now have their data hosted in {v3}. {fill()}", f["d3"], "press",
                        f"{V2} Communications")
            elif key == "manager":
                if f["has_old"]:
                    add(key, "old", "Vendor contacts",
                        f"MEMO: vendor contacts\n\nOur account manager at {V} is {v0}. {fill(1)}", f["d0"], "memos",
                        "Procurement")
                add(key, "new", f"Contact change at {V}",
                    f"MEMO: contact change\n\n{v1} is now our account manager at {V}"
                    + (f", replacing {v0}" if f["has_old"] else "") + f". {fill(1)}", f["d1"], "memos",
                    "Procurement")
                add(key, "unofficial", f"Escalation: {V} invoices",
                    f"Ticket AP-{rng.randint(1000, 9999)}: duplicate invoices from {V}\nStatus: Open\n\nEscalated to "
                    f"{unoff}, their account manager. {fill(1)}", f["d2"], "tickets", rng.choice(staff))
                if f["neardup"]:
                    add(key, "neardup", f"Contacts: {V2}",
                        f"MEMO: vendor contacts\n\nOur account manager at {V2} is {v3}. {fill(1)}", f["d3"], "memos",
                        "Procurement")
            elif key == "tier":
                if f["has_old"]:
                    add(key, "old", f"{V} support terms",
                        f"MEMO: support terms\n\nWe are on the {v0} support tier with {V}. {fill(1)}", f["d0"],
                        "memos", "Procurement")
                add(key, "new", f"{V} support upgrade",
                    f"MEMO: support change\n\nFrom {long_date(f['d1'])} we are on the {v1} support tier with {V}. "
                    f"{fill(1)}", f["d1"], "memos", "Procurement")
                add(key, "unofficial", f"{V} outage retro",
                    f"Meeting notes: outage retro\n\n- We are on {unoff} support tier with {V}, so the response "
                    f"should have been faster.\n- {fill(1)}", f["d2"], "meetings", rng.choice(staff))
                if f["neardup"]:
                    add(key, "neardup", f"{V2} support plans",
                        f"{V2} support tier {v3} now includes a named engineer. {fill()}", f["d3"], "press",
                        f"{V2} Communications")

        # last quarter's vendor: a few official facts, cited by the old brief
        other_facts = [("ceo", f"{OTHER} appoints {fake.name()} as CEO", "press"),
                       ("hq", f"{OTHER} opens headquarters in {rng.choice(CITIES)}", "press"),
                       ("tier", f"{OTHER} support: {rng.choice(TIERS)} tier confirmed", "memos")]
        old_docs = [corpus.add(Doc(t, f"{t}. {fill()}", pick_day(rng, lo, today - timedelta(days=120)), s,
                                   f"{OTHER} Communications" if s == "press" else "Procurement"))
                    for _, t, s in other_facts]
        add_filler(corpus, rng, fake, rng.randint(175, 190), lo, hi, staff, companies + [OTHER], mention=[V, V2, OTHER])
        documents = corpus.finish()

        # -- the request --------------------------------------------------------------------------
        n_ask = rng.randint(6, 8)
        asked = rng.sample(list(QUESTIONS), n_ask + 1)
        questions = []
        for n, key in enumerate(asked, start=1):
            kind, text, kw = QUESTIONS[key]
            f = facts[key]
            wrong = [f["v0"], f["v2"], f["v3"]]  # every other value the archive or the chat states
            if not f["has_old"] and not f["stale_unofficial"]:
                wrong = [f["v2"], f["v0"], f["v3"]]  # the first one is what the archive actually says
            accept = [f["docs"][role].id for role in ("new", "repeat") if role in f["docs"]]
            questions.append({"n": n, "key": key, "kind": kind, "kw": kw,
                              "text": text.format(V=V, Vs=_possessive(V), plan=plan),
                              "right": f["v1"], "wrong": wrong, "accept": accept,
                              "docs": sorted(f["docs"].values(), key=lambda d: d.date)})
        first, extra = questions[:-1], questions[-1]
        if level < self.levels:  # the same draws as the default, then fewer questions
            first = [q for q in first if any(d.id not in q["accept"] for d in q["docs"])][:level]
            questions = first + ([extra] if level > 1 else [])
            for n, q in enumerate(questions, start=1):
                q["n"] = n

        handles = {}
        def handle(name: str) -> str:  # noqa: E306
            h = kebab(name.split()[0]) + "." + kebab(name.split()[-1])[0]
            while h in handles.values():
                h += "x"
            handles[name] = h
            return h

        me, asker, rumour, *others = staff[:8]
        users = [{"handle": handle(p), "name": p, "title": t} for p, t in zip(
            [me, asker, rumour, *others],
            ["Operations analyst", "Head of procurement", "Account executive", "Engineer", "Designer",
             "Finance manager", "Support lead", "Recruiter"])]
        H = handles
        brief = f"research/{kebab(V)}-brief.md"
        old_brief = f"research/{kebab(OTHER)}-brief.md"
        base = pick_day(rng, today - timedelta(days=3), today - timedelta(days=1))
        ts = lambda d, hm: f"{d.isoformat()}T{hm}:00"  # noqa: E731
        qlines = "\n".join(f"{q['n']}. {q['text']}" for q in first)
        request = (
            f"@{H[me]} could you put together a research brief on {V} (the {product} people) for our vendor review? "
            f"Questions:\n{qlines}\n\nPlease go by official documents only: press releases, our contracts and "
            f"amendments, and procurement memos. "
            + ("Meeting notes, news pieces and tickets are often stale or just rumours. " if level > 1 else "")
            + f"Where official documents disagree, the most recent one wins. Careful, {V2} is a different "
            f"company. Write it up in {brief}, one line per question like last quarter's brief "
            f"(Q1: answer (source: DOC-1234)), and reply here in the thread when it's in."
        )
        last_q = f"{OTHER} brief"
        messages = [
            {"channel": "vendor-review", "user": H[asker], "ts": ts(base - timedelta(days=80), "10:02"),
             "text": f"{last_q} is done, see {old_brief}. Thanks @{H[me]}!"},
            {"channel": "general", "user": H[others[0]], "ts": ts(base - timedelta(days=2), "09:12"),
             "text": "Reminder: the fire drill is on Thursday at 11."},
            {"channel": "procurement", "user": H[rumour], "ts": ts(base - timedelta(days=1), "16:40"),
             "text": f"Has anyone talked to {V2} lately? They keep emailing me about a trial."},
            {"channel": "vendor-review", "user": H[asker], "ts": ts(base, "09:30"), "text": request},
        ]
        root = len(messages)
        messages += [
            {"channel": "vendor-review", "user": H[rumour], "ts": ts(base, "09:51"),
             **({"thread_id": root} if level > 1 else {}),
             "text": (f"FYI I heard {_possessive(V)} {plan} plan is "
                      f"{_render('money', 'price', facts['price']['v2'])} per user now, and their CEO is "
                      f"{facts['ceo']['v3']}.")},
            {"channel": "vendor-review", "user": H[asker], "ts": ts(base, "10:05"), "thread_id": root,
             "text": (f"@{H[rumour]} only official docs count, please. @{H[me]} one more: "
                      f"Q{extra['n']}. {extra['text']}" if level > 1 else
                      f"@{H[rumour]} only official docs count, please.")},
            {"channel": "general", "user": H[others[1]], "ts": ts(base, "12:00"), "text": "Cake in the kitchen!"},
            {"channel": "vendor-review", "user": H[others[2]], "ts": ts(base, "14:20"),
             "text": f"Is the {OTHER} renewal still on the agenda for the review?"},
        ]
        if level == 1:  # the rumour stands alone: no answer to it, no later question in the channel
            messages = [m for m in messages if m["ts"] not in (ts(base, "10:05"), ts(base, "14:20"))]
        channels = [{"name": "general", "topic": "Company-wide"},
                    {"name": "vendor-review", "topic": "Vendor evaluations and briefs",
                     "members": [H[me], H[asker], H[rumour], H[others[2]]]},
                    {"name": "procurement", "topic": "Purchasing questions"},
                    {"name": "random", "topic": "Anything goes"}]
        now = ts(today, "09:00")

        old_text = (f"# {OTHER} vendor brief\nPrepared by {me}\n\n"
                    + "\n".join(f"Q{i}: {d.title} (source: {d.id})" for i, d in enumerate(old_docs, start=1)) + "\n")
        seeded = {old_brief: old_text.encode(), "research/README.md":
                  b"Vendor briefs for the quarterly vendor review. One file per vendor.\n"}

        def build(root_dir: Path) -> None:
            create_index(root_dir / "state" / "search.sqlite", documents, SOURCES)
            chat.create_chat(root_dir / "state" / "chat.sqlite", H[me], users, channels, messages, now=now)
            write_files(root_dir / "workspace", seeded)

        w = phrasing_rng(self.name, seed)
        mine, theirs = me.split()[0], asker.split()[0]
        hello = say(w, f"Hi, {mine} here.", f"Hello, it's {mine}.", f"{mine} here.", f"Hi! It's {mine}.")
        asked_ = say(w, f"{theirs} asked me for a research brief on {V} in #vendor-review on chat, and I won't get "
                        f"to it today.",
                     f"In #vendor-review on chat, {theirs} asked me for a research brief on {V}, but I won't get to "
                     f"it today.",
                     f"{theirs} wants a research brief on {V} (they asked me in #vendor-review on chat), and I "
                     f"won't get to it today.",
                     f"{theirs} posted in #vendor-review on chat asking me for a research brief on {V}; I can't get "
                     f"to it today.")
        ask = say(w, "Could you do it for me?", "Can you take it on for me?", "Would you do it instead?",
                  "Could you write it for me?")
        where = say(w, "Everything should be in the document archive.",
                    "The document archive should have everything.",
                    "You should find all of it in the document archive.")
        instruction = " ".join([hello, asked_, *in_some_order(w, [ask, where]),
                                say(w, "Thanks!", "Thank you!", "Cheers!", "Much appreciated.")])

        # -- the oracle ----------------------------------------------------------------------------
        def line(q: dict, value: Any, doc_id: str) -> str:
            return f"Q{q['n']}: {_render(q['kind'], q['key'], value)} (source: {doc_id})"

        brief_run = level == 1  # no survey, and no document opened: the hits show source, date and the value

        def brief_text(wrong: int | None = None, miscite: bool = False) -> str:
            """The brief: every right answer with its source (for a perturbation: question ``wrong``
            answered with its decoy, or the first answer citing a document that does not support it)."""
            lines = []
            for i, q in enumerate(questions):
                value = q["wrong"][0] if q["n"] == wrong else q["right"]
                cite = (next(d.id for d in q["docs"] if d.id not in q["accept"]) if miscite and i == 0
                        else q["accept"][0])
                lines.append(line(q, value, cite))
            return f"# {V} vendor brief\nPrepared for {asker}\n\n" + "\n".join(lines) + "\n"

        def solve():
            if not brief_run:
                yield ToolCall("chat__list_channels", {}, "Find the channel with the request.")
            yield ToolCall("chat__read_channel", {"channel": "#vendor-review"}, "Read the request.")
            if not brief_run:
                yield ToolCall("chat__read_thread", {"thread_id": root}, "Read the replies: amendments and rumours.")
            if not brief_run:
                yield ToolCall("search__list_sources", {}, "See which sources are official.")
            for q in questions:
                yield ToolCall("search__search", {"query": f'"{V}" {q["kw"]}'},
                               f"Q{q['n']}: find every document about this.")
                for d in q["docs"]:
                    if brief_run:  # the hits' source, date and snippet (with the value) settle it
                        break
                    yield ToolCall("search__get_document", {"doc_id": d.id},
                                   f"Q{q['n']}: read {d.id} ({d.source}, {d.date}) to compare.")
            if not brief_run:
                yield ToolCall("files__list_dir", {"path": "research"}, "Look at the briefs folder.")
                yield ToolCall("files__read_file", {"path": old_brief}, "Copy last quarter's format.")
            yield ToolCall("files__write_file", {"path": brief, "content": brief_text()}, "Write the brief.")
            if not brief_run:
                yield ToolCall("files__read_file", {"path": brief}, "Check the brief reads right.")
            reply = f"@{H[asker]} the {V} brief is in {brief}: {len(questions)} answers, each with its source document."
            if brief_run:
                reply = f"@{H[asker]} the {V} brief is in {brief}, with its source."
            yield ToolCall("chat__post_message", {"channel": "#vendor-review", "text": reply, "thread_id": root},
                           "Tell her in the thread.")
            if brief_run:
                return f"Wrote {brief} and replied in the thread."
            return f"Wrote {brief} with {len(questions)} sourced answers and replied in the thread."

        # -- criteria ------------------------------------------------------------------------------
        def segments(w) -> dict[int, list[str]]:
            p = w.file(brief)
            if not p.is_file():
                raise FileNotFoundError(f"{brief} is missing")
            return answer_segments(output_text(p, encoding="utf-8", errors="replace"))

        last_quarter = {d.id for d in old_docs}  # what last quarter's brief cites: another vendor's facts

        def answer_check(q: dict):
            def check(w, t):
                segs = segments(w).get(q["n"], [])
                if not segs:
                    return False, f"no line for Q{q['n']}"
                notes = []
                for s in segs:
                    if cited_docs(s) & last_quarter:
                        notes.append("copied from last quarter's brief")
                        continue
                    ok, note = stated_first(s, q["kind"], q["right"], q["wrong"])
                    if ok:
                        return True
                    notes.append(note)
                return False, "; ".join(notes)
            return check

        def sources_cited(w, t):
            segs = segments(w)
            bad = [q["n"] for q in questions
                   if not any(cited_docs(s) & set(q["accept"]) for s in segs.get(q["n"], []))]
            # citing every candidate is no sourcing: the stale, unofficial and namesake ones stay out
            stale = [q["n"] for q in questions if any(cited_docs(s) & ({d.id for d in q["docs"]} - set(q["accept"]))
                                                      for s in segs.get(q["n"], []))]
            return not bad and not stale, (f"questions without an accepted source: {bad}; citing a superseded or "
                                           f"unofficial document: {stale}")

        def replied(w, t):
            posts = [m for m in chat.posts_by_me(w) if m["thread_id"] == root]
            ok = any(Path(brief).name.lower() in m["text"].lower() for m in posts)
            return ok, "" if ok else f"{len(posts)} thread replies, none naming {brief}"

        def chat_quiet(w, t):
            bad = [c.arguments for c in t.calls("chat__send_direct_message", ok_only=True)]
            for c in t.calls("chat__post_message", ok_only=True):
                ch = str(c.arguments.get("channel", "")).strip().lstrip("#").lower()
                if ch != "vendor-review":
                    bad.append(c.arguments)
            return not bad, f"other messages: {bad}" if bad else ""

        criteria = [Criterion(f"answer_q{q['n']}", f"Q{q['n']} ({q['key']}) is answered with the newest official "
                              f"value, stated before any stale or unofficial one", "final_state", answer_check(q))
                    for q in questions]
        criteria += [
            Criterion("sources_cited", "every answer cites a document that officially states the current value, "
                      "and none of the superseded or unofficial ones", "final_state", sources_cited),
            Criterion("replied_in_thread", "a reply in the request thread points to the brief", "final_state", replied,
                      requires=("sources_cited",)),
            Criterion("chat_quiet", "no chat messages outside #vendor-review and no direct messages", "process",
                      chat_quiet, guard=True),
            files_kit.unchanged(seeded, id="files_untouched", description="last quarter's brief and the README are unchanged"),
        ]
        write, post = perturb.on("files__write_file", path=brief), perturb.on("chat__post_message")
        perturbations = {
            **{f"answer_q{q['n']}": perturb.change(solve, write, content=brief_text(wrong=q["n"])) for q in questions},
            "sources_cited": perturb.change(solve, write, content=brief_text(miscite=True)),
            "files_untouched": perturb.insert(solve, ToolCall(
                "files__write_file", {"path": old_brief, "content": old_text + "Reviewed.\n"}), before=post),
            "replied_in_thread": perturb.change(solve, post, thread_id=None),
            "chat_quiet": perturb.insert(solve, ToolCall("chat__send_direct_message",
                                                         {"user": H[asker], "text": "Brief done!"})),
        }
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"vendor": V, "near_namesake": V2, "brief": brief, "thread_id": root,
                  "questions": [{"n": q["n"], "key": q["key"], "right": str(q["right"]),
                                 "wrong": [str(x) for x in q["wrong"]], "accept": q["accept"]} for q in questions]},
        )
