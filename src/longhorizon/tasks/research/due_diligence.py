"""Due diligence: find every archive document reporting a legal or regulatory event about an
acquisition target and its subsidiaries, extract the facts into a workbook, mail it back.

The request is a mail from legal. A near-namesake company has events of its own; the entities
also turn up in documents that are not events (launches, hires, passing mentions); data breaches
and recalls come with counts that are not dollar amounts. One row per document.

Drawn per seed (``FOLLOWUP_KINDS``, ``RENAMED_ODDS``; recorded in ``Task.data``, empty when
absent): legal's follow-up adds a subsidiary the request left out, takes one out (it was sold:
its events are no longer wanted), or there is no follow-up; the target was renamed (older
documents use its former name: count them under the target) or not; legal's memos repeat some
events (each its own row) or none.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from openpyxl import Workbook

from longhorizon.apps.mail import state as mail
from longhorizon.apps.search.state import create_index
from longhorizon.apps.sheets.state import workbook_bytes
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.kit import files as files_kit, perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    blank,
    kebab,
    norm_text,
    parse_json,
    read_table,
    rng_and_faker,
    write_files,
)
from longhorizon.tasks.research import (
    CITIES,
    SOURCES,
    Corpus,
    Doc,
    add_filler,
    cited_docs,
    date_position,
    long_date,
    norm,
    numbers,
    people,
    pick_day,
)

WORD_A = ["Harbor", "Summit", "Granite", "Bluewater", "Redwood", "Ironbridge", "Silverline", "Crestview", "Maple",
          "Northgate", "Copperfield", "Westbrook", "Eastlake", "Fairhaven"]
WORD_B = ["Line", "Point", "Ridge", "Gate", "Field", "Stone", "Crest", "Bay"]
INDUSTRIES = {"Logistics": "freight trackers", "Foods": "frozen meals", "Medical": "infusion pumps",
              "Energy": "home batteries", "Robotics": "warehouse robots", "Textiles": "work jackets"}
FORMER = ["Holdings", "Group", "Enterprises", "Industries", "Partners"]
SUB_A = ["Quayside", "Tidewater", "Kestrel", "Falcon", "Juniper", "Lantern", "Osprey", "Ridgeway", "Marlow",
         "Thistle", "Bramble", "Cinder"]
SUB_B = ["Storage", "Parts", "Freight", "Packaging", "Labs", "Services", "Components", "Systems"]
REGULATORS = ["Consumer Protection Bureau", "Data Protection Authority", "Environmental Agency",
              "Competition Commission", "Transport Safety Board", "Financial Conduct Office"]
VIOLATIONS = ["misleading advertising", "late safety reporting", "unlawful data sharing", "emissions breaches",
              "price coordination", "unsafe working conditions"]
ISSUES = ["a breached supply contract", "patent infringement", "unpaid invoices", "wrongful termination",
          "a failed software rollout", "trademark misuse"]
CLAIMS = ["a class action over hidden fees", "a dispute with a former distributor", "overtime claims by drivers",
          "a contract dispute with a customer", "a patent dispute"]
DEFECTS = ["reports of overheating", "a faulty latch", "a labelling error", "contamination concerns",
           "a software fault"]
EVENTS = ("lawsuit", "fine", "settlement", "data breach", "recall")
SYNONYMS = {
    "lawsuit": ("lawsuit", "law suit", "suit", "litigation", "legal action", "sued", "court case"),
    "fine": ("fine", "fined", "penalty", "regulatory fine"),
    "settlement": ("settlement", "settled", "settle"),
    "data breach": ("data breach", "breach", "data leak", "security incident", "cyber incident"),
    "recall": ("recall", "recalled", "product recall"),
}
FOLLOWUP_KINDS = ("adds", "drops", "")
"""Legal's follow-up at the default level: one more subsidiary, one fewer (sold), or none."""
FOLLOWUP_ODDS = (0.4, 0.35, 0.25)
RENAMED_ODDS = 0.7
"""How often the target had another name before (older documents use it)."""
MEMO_ODDS = 0.25
"""How often legal's memo repeats an event (each memo its own row)."""
HEADER = ["Doc ID", "Date", "Entity", "Event", "Amount (USD)"]
SHEET = "Events"


def _amount(v: float) -> str:
    if v >= 1e6:
        m = v / 1e6
        return f"${m:.1f} million" if m != int(m) else f"${m:.0f} million"
    return f"${v:,.0f}"


def event_kind(cell: Any) -> str | None:
    """Which of the five events a cell names (None when none or more than one)."""
    t = " ".join(norm(str(cell or "")).replace("_", " ").split())
    hits = {k for k, words in SYNONYMS.items() if any(re.search(rf"\b{re.escape(w)}\b", t) for w in words)}
    return hits.pop() if len(hits) == 1 else None


_RELATION = r"(?:subsidiary|subsidiaries|owned|part of|unit of|division of|parent|affiliate|member of|belongs to)"


def entity_parts(cell: str) -> tuple[str, list[str]]:
    """An entity cell split into the entity it names and its qualifiers: text in brackets, and a
    tail that says how it is related ("Osprey Services, a subsidiary of ...", "Osprey Services -
    owned by ...", "Osprey Services subsidiary of ...")."""
    qualifiers = re.findall(r"[(\[]([^)\]]*)[)\]]", cell)
    main = re.sub(r"[(\[][^)\]]*[)\]]", " ", cell)
    tail = re.search(rf"\s*(?:[,;:/]|\s[-\u2013\u2014]\s)\s*(?=.*\b{_RELATION}\b)"
                     rf"|\s+(?=(?:(?:an?|the|wholly|fully|[-\s])+)?{_RELATION}\b)", main)
    if tail:
        qualifiers.append(main[tail.end():])
        main = main[:tail.start()]
    return main.strip(), qualifiers


def cell_amount(cell: Any) -> float | None:
    """A money cell as dollars: numbers as they are, text like "$4.2 million" parsed; None if blank."""
    if isinstance(cell, bool):
        return None
    if isinstance(cell, (int, float)):
        return float(cell)
    if blank(cell) or norm_text(cell) in ("-", "n/a", "na", "none", "--", "—"):
        return None
    nums = numbers(str(cell), masked=False)
    return nums[0][1] if nums else float("nan")


def cell_date(cell: Any, want: date) -> bool:
    if isinstance(cell, datetime):
        return cell.date() == want
    if isinstance(cell, date):
        return cell == want
    text = str(cell or "").strip()
    try:
        return date.fromisoformat(text[:10]) == want
    except ValueError:
        return date_position(text, want) is not None and str(want.year) in text


def read_events(path: Path) -> tuple[dict[str, dict[str, Any]], str]:
    """{doc id: {"entity", "date", "event", "amount"}} from the Events sheet (columns found by
    their header names, any order), and a note when the sheet cannot be read."""
    table = read_table(path, SHEET)
    if table is None:
        return {}, f"{path.name} has no {SHEET} sheet" if path.is_file() else f"{path.name} is missing"
    header, rows = table
    names = [norm_text(h) for h in header]

    def col(*keys: str) -> int | None:
        for i, h in enumerate(names):
            if any(k in h for k in keys):
                return i
        return None

    c_doc, c_date, c_ent = col("doc", "id", "source"), col("date"), col("entity", "company")
    c_event, c_amt = col("event", "type"), col("amount", "usd", "$")
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        cells = list(r) + [None] * len(header)
        ids = cited_docs(str(cells[c_doc])) if c_doc is not None else set()
        if not ids:
            ids = set().union(*(cited_docs(str(v)) for v in r if v is not None)) if r else set()
        if len(ids) != 1:
            continue
        doc_id = ids.pop()
        if doc_id in out:
            continue
        get = lambda c: cells[c] if c is not None else None  # noqa: E731
        out[doc_id] = {"entity": get(c_ent), "date": get(c_date), "event": get(c_event), "amount": get(c_amt)}
    return out, ""


def _fewer_events(plan: list[tuple], keep: dict[str, int]) -> list[tuple]:
    """The first ``keep[name]`` planned events of each name kept, the rest dropped; beyond one
    event, at least one carries a dollar amount and one a count (a breach or recall)."""
    left, out = dict(keep), []
    for item in plan:
        if left.get(item[0], 0) > 0:
            out.append(item)
            left[item[0]] -= 1
    if len(out) > 1 and not any(k in ("lawsuit", "fine", "settlement") for _, _, k, _ in out):
        out[0] = (*out[0][:2], "lawsuit", out[0][3])
    if len(out) > 1 and not any(k in ("data breach", "recall") for _, _, k, _ in out):
        out[-1] = (*out[-1][:2], "data breach", out[-1][3])
    return out


@register
class EntityDueDiligence(TaskFamily):
    name = "entity_due_diligence"
    category = "search and research"
    apps = ("mail", "search", "sheets", "files")
    description = ("Register every archive document reporting a legal or regulatory event about an acquisition "
                   "target (and its former name and subsidiaries) in a workbook, and mail it back to legal.")

    levels = 3
    """1: the target alone, one event (and perhaps legal's memo on it) among its non-event mentions (no
    filler ones) and the near-namesake's events, registered from the search hits; 2: also its former
    name (when it has one) and two subsidiaries (one added by a follow-up mail), up to five events;
    3 (default): three subsidiaries (a follow-up adds one, takes one out, or none), about nine to
    twelve events."""
    toolsets = {1: ("mail__read_message", "mail__reply", "mail__search_messages", "search__search",
                    "sheets__create_workbook", "sheets__write_rows")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        today = date(2026, 1, 5) + timedelta(days=rng.randrange(300))
        lo, hi = today - timedelta(days=1000), today - timedelta(days=1)
        a, a_other = rng.sample(WORD_A, 2)
        b, b2 = rng.sample(WORD_B, 2)
        industry = rng.choice(list(INDUSTRIES))
        product = INDUSTRIES[industry]
        target, near = f"{a} {b} {industry}", f"{a} {b2} {industry}"
        former = f"{a} {rng.choice(FORMER)}"
        other = f"{a_other} {rng.choice(WORD_B)} {rng.choice([i for i in INDUSTRIES if i != industry])}"
        subs: list[str] = []
        for sa, sb in zip(rng.sample(SUB_A, 3), rng.sample(SUB_B, 3)):
            subs.append(f"{sa} {sb}")
        renamed = pick_day(rng, lo + timedelta(days=250), today - timedelta(days=300))
        # the trap mix (module docstring); levels 1-2 keep their follow-up (none, adds)
        followup = rng.choices(FOLLOWUP_KINDS, weights=FOLLOWUP_ODDS)[0]
        has_former = rng.random() < RENAMED_ODDS
        if level < self.levels:
            followup = "adds" if level == 2 else ""
        dropped = None
        staff = people(fake, 12)
        companies = [fake.company() for _ in range(14)]
        corpus = Corpus(rng)

        def fill(n: int = 2) -> str:
            return fake.paragraph(nb_sentences=n)

        def event_doc(entity: str, kind: str, day: date, *, expected_entity: str | None) -> Doc:
            amount, count = None, None
            if kind == "lawsuit":
                amount = rng.randint(15, 600) / 10 * 1e6
                plaintiff = rng.choice(companies)
                title = f"{plaintiff} sues {entity}"
                lead = (f"{plaintiff} has filed a lawsuit against {entity}, seeking {_amount(amount)} in damages over "
                        f"{rng.choice(ISSUES)}.")
                body = f"{lead} {entity} said it would defend itself. {fill()}"
                source = "news"
            elif kind == "fine":
                amount = rng.randint(5, 500) * 10_000.0
                reg = rng.choice(REGULATORS)
                title = f"{entity} fined by the {reg}"
                lead = f"The {reg} has fined {entity} {_amount(amount)} for {rng.choice(VIOLATIONS)}."
                body = f"{lead} {fill()}"
                source = rng.choice(["news", "press"])
            elif kind == "settlement":
                amount = rng.randint(5, 200) / 10 * 1e6
                claim = rng.choice(CLAIMS)
                title = f"{entity} settles {claim}"
                lead = f"{entity} has agreed to pay {_amount(amount)} to settle {claim}."
                body = f"{lead} The settlement includes no admission of wrongdoing. {fill()}"
                source = rng.choice(["press", "news"])
            elif kind == "data breach":
                count = rng.randint(12, 900) * 1000 + rng.randint(1, 999)
                title = f"{entity} discloses data breach"
                lead = f"{entity} disclosed a data breach that exposed the records of {count:,} customers."
                body = f"{lead} Regulators have been notified. {fill()}"
                source = "news"
            else:
                count = rng.randint(2, 400) * 100
                title = f"{entity} recalls {product}"
                lead = f"{entity} is recalling {count:,} units of its {product} after {rng.choice(DEFECTS)}."
                body = f"{lead} {fill()}"
                source = "press"
            return corpus.add(Doc(title, body, day, source, f"{fake.name()}",
                                  tags={"entity": expected_entity, "event": kind, "amount": amount, "count": count,
                                        "named": entity, "lead": lead}))

        def memo_copy(doc: Doc) -> Doc:
            day = min(doc.date + timedelta(days=rng.randint(1, 20)), hi)
            return corpus.add(Doc(f"Legal note: {doc.title}", f"MEMO from Legal\n\nFor the record: {doc.tags['lead']} "
                                  f"{fill(1)}", day, "memos", "Legal", tags=dict(doc.tags)))

        def mention_doc(entity: str, day: date) -> Doc:
            kind = rng.randrange(4)
            if kind == 0:
                title, body = f"{entity} opens {rng.choice(CITIES)} site", f"{entity} has opened a new site. {fill()}"
                src = "press"
            elif kind == 1:
                co = rng.choice(companies)
                title, body = f"{entity} partners with {co}", f"{entity} and {co} announced a partnership. {fill()}"
                src = "press"
            elif kind == 2:
                title = f"{entity} named a top employer"
                body = f"{entity} was named one of the region's best places to work. {fill()}"
                src = "news"
            else:
                title = f"Intro call with {entity}"
                body = (f"Meeting notes: intro call\n\n- {entity} walked us through their {product}.\n"
                        f"- {fill(1)}")
                src = "meetings"
            return corpus.add(Doc(title, body, day, src, fake.name(), tags={"mention": entity}))

        # -- events and mentions --------------------------------------------------------------------
        kinds = list(EVENTS)
        plan: list[tuple[str, str, str, date]] = []  # (named entity, expected entity, kind, day)
        for _ in range(rng.randint(3, 4)):
            plan.append((target, target, rng.choice(kinds), pick_day(rng, renamed + timedelta(days=5), hi)))
        for _ in range(rng.randint(1, 2) if has_former else 0):
            plan.append((former, target, rng.choice(kinds), pick_day(rng, lo, renamed - timedelta(days=5))))
        if followup == "drops":  # sold: its events are no longer the target's
            dropped = subs[1]
        for s in subs:
            for _ in range(2):
                plan.append((s, None if s == dropped else s, rng.choice(kinds), pick_day(rng, lo, hi)))
        # at least one money event and one breach/recall, so every column is exercised
        if not any(k in ("lawsuit", "fine", "settlement") for _, e, k, _ in plan if e):
            plan[0] = (*plan[0][:2], "lawsuit", plan[0][3])
        if not any(k in ("data breach", "recall") for _, e, k, _ in plan if e):
            plan[1] = (*plan[1][:2], "data breach", plan[1][3])
        covered = [s for s in subs if s != dropped]  # the follow-up adds the third, or takes the second out
        if level < self.levels:  # the same draws as the default, then fewer entities and events
            covered = {1: [], 2: [subs[0], subs[2]]}[level]
            plan = _fewer_events(plan, {1: {target: 1}, 2: {target: 2, former: 1, subs[0]: 1, subs[2]: 1}}[level])
        expected_docs: list[Doc] = []
        sold_docs: list[Doc] = []  # the dropped subsidiary's events: no rows
        memos: list[str] = []
        for named, ent, kind, day in plan:
            d = event_doc(named, kind, day, expected_entity=ent)
            if ent is None:
                sold_docs.append(d)
                continue
            expected_docs.append(d)
            if rng.random() < MEMO_ODDS:
                expected_docs.append(memo_copy(d))
                memos.append(expected_docs[-1].id)
        noise: list[Doc] = []
        for ent in [target, subs[0], subs[1], subs[2]]:
            for _ in range(rng.randint(1, 2)):
                noise.append(mention_doc(ent, pick_day(rng, renamed if ent == target else lo, hi)))
        if has_former:
            noise.append(corpus.add(Doc(
                f"{former} is now {target}",
                f"{former} today announced that it has changed its name to {target}. Nothing else changes for "
                f"customers. {fill()}", renamed, "press", f"{target} Communications", tags={"mention": target})))
        near_docs = [event_doc(near, rng.choice(kinds), pick_day(rng, lo, hi), expected_entity=None)
                     for _ in range(rng.randint(2, 3))]
        near_docs.append(mention_doc(near, pick_day(rng, lo, hi)))
        old_register = [event_doc(other, k, pick_day(rng, lo, today - timedelta(days=380)), expected_entity=None)
                        for k in rng.sample(kinds, 3)]
        for co in rng.sample(companies, 5):
            event_doc(co, rng.choice(kinds), pick_day(rng, lo, hi), expected_entity=None)
        add_filler(corpus, rng, fake, rng.randint(165, 180), lo, hi, staff, companies + [other],
                   mention=[target, subs[0], subs[1], near] if level > 1 else [subs[0], subs[1], near])
        documents = corpus.finish()
        expected = {d.id: d for d in expected_docs}
        rows_expected = sorted(expected.values(), key=lambda d: (d.date, d.id))

        # -- mail ----------------------------------------------------------------------------------
        domain = f"{kebab(fake.last_name())}-{rng.choice(['group', 'capital', 'partners'])}.example"
        mk = lambda n: (n, f"{kebab(n.split()[0])}.{kebab(n.split()[-1])}@{domain}")  # noqa: E731
        me, counsel, colleague, *rest = [mk(n) for n in staff[:6]]
        path = f"diligence/{kebab(target)}-events.xlsx"
        old_path = f"diligence/{kebab(other)}-events.xlsx"
        stamp = lambda d, hm: f"{d.isoformat()}T{hm}:00"  # noqa: E731
        in_request = [s for s in subs if s != subs[2]] if followup == "adds" else subs  # (level 2: subs[0])
        if level == 2:
            in_request = [subs[0]]
        named_subs = ("" if not covered else f" or its subsidiary {in_request[0]}" if len(in_request) == 1
                      else f" or its subsidiaries {', '.join(in_request[:-1])} and {in_request[-1]}")
        renaming = (f"{target} was called {former} until {long_date(renamed)}, so older documents use that name: "
                    f"count those under {target}. " if level > 1 and has_former else "")
        request_body = (
            f"Hi {me[0].split()[0]},\n\nAs part of the diligence on {target}, I need a register of every legal or "
            f"regulatory event involving {target}{named_subs} that shows up in our "
            f"document archive: lawsuits, regulatory fines, settlements, data breaches and product recalls. "
            f"{renaming}{near} is an unrelated company.\n\nPlease put it in {path}, sheet \"{SHEET}\", "
            f"one row per document, with the columns Doc ID, Date (the document's date), Entity, Event (lawsuit, "
            f"fine, settlement, data breach or recall) and Amount (USD): the dollar figure the document gives "
            f"(damages sought, fine or settlement amount), left empty when there is none. "
            + (f"Same layout as last year's {other} register in diligence/. " if level > 1 else "")
            + f"Documents that mention the companies without one of those "
            f"events (launches, hires and so on) stay out.\n\nReply to this mail with the workbook attached.\n\n"
            f"Thanks,\n{counsel[0]}"
        )
        inbox = [
            {"folder": "Inbox", "sender": f"news@{kebab(fake.company())}.example", "sender_name": "Deal Digest",
             "subject": "This week in M&A", "body": f"Deals are back. {fill(3)}",
             "date": stamp(today - timedelta(days=3), "06:00")},
            {"folder": "Inbox", "sender": colleague[1], "sender_name": colleague[0],
             "subject": f"{near} invoice", "body": f"Do you know who handles the {near} invoice? {fill(1)}",
             "date": stamp(today - timedelta(days=2), "11:20")},
            {"folder": "Inbox", "sender": counsel[1], "sender_name": counsel[0],
             "subject": f"Diligence: {target} events register", "body": request_body,
             "date": stamp(today - timedelta(days=1), "09:10")},
            {"folder": "Inbox", "sender": rest[0][1], "sender_name": rest[0][0], "subject": "Team lunch Friday",
             "body": "Pizza or tacos? Vote in the thread.", "date": stamp(today - timedelta(days=1), "12:30")},
            {"folder": "Inbox", "sender": counsel[1], "sender_name": counsel[0],
             "subject": f"Re: Diligence: {target} events register",
             "body": (f"One more thing: {target} also owns {subs[2]}, so please cover {subs[2]} in the register "
                      f"as well.\n\n{counsel[0].split()[0]}" if followup != "drops" else
                      f"One more thing: {target} sold {subs[1]} to {companies[0]} last month, so it is out of scope: "
                      f"please leave {subs[1]} out of the register.\n\n{counsel[0].split()[0]}"),
             "date": stamp(today - timedelta(days=1), "15:45")},
            {"folder": "Inbox", "sender": rest[1][1], "sender_name": rest[1][0], "subject": "Printer",
             "body": "The printer on 2 is fixed.", "date": stamp(today, "08:05")},
        ]
        request_id, followup_id = 3, 5
        if not followup:  # nothing for a follow-up to add or take out
            inbox = [m for m in inbox if not m["subject"].startswith("Re: ")]
            followup_id = request_id
        for i, m in enumerate(inbox, start=1):
            m["id"] = i
            m["to"] = [me[1]]

        old_wb = Workbook()
        ws = old_wb.active
        ws.title = SHEET
        ws.append(HEADER)
        for d in old_register:
            ws.append([d.id, d.date.isoformat(), other, d.tags["event"], d.tags["amount"]])
        seeded = {old_path: workbook_bytes(old_wb)}

        def build(root: Path) -> None:
            create_index(root / "state" / "search.sqlite", documents, SOURCES)
            mail.create_mailbox(root / "state" / "mail.sqlite", me[1], me[0], messages=inbox,
                                now=stamp(today, "09:00"))
            write_files(root / "workspace", seeded)

        w = phrasing_rng(self.name, seed)
        mine, theirs = me[0].split()[0], counsel[0].split()[0]
        hello = say(w, f"Hi, it's {mine}.", f"{mine} here.", f"Hello, {mine} speaking.", f"Hi! {mine} here.")
        mailed = say(w, f"{theirs} from legal mailed me about the {target} diligence and I'm swamped.",
                     f"I'm swamped, and {theirs} from legal has mailed me about the {target} diligence.",
                     f"{theirs} in legal sent me a mail about the {target} diligence, and I'm completely swamped.",
                     f"Legal ({theirs}) emailed me about the {target} diligence, but I'm swamped.")
        ask = say(w, "Could you take care of it?", "Can you handle it for me?", "Would you take it on?",
                  "Please could you deal with it?")
        where = say(w, "The archive search should have everything.",
                    "Everything you need should be in the archive search.",
                    "You should find it all through the archive search.")
        instruction = " ".join([hello, mailed, *in_some_order(w, [ask, where])])

        # -- the oracle ----------------------------------------------------------------------------
        names = [target, *([former] if level > 1 and has_former else []), *covered]
        brief = level == 1  # no survey, no layout to copy, and no document opened (the hits say it all)
        breach = next((d for d in rows_expected if d.tags["event"] in ("data breach", "recall")), None)
        money = [d for d in rows_expected if d.tags["amount"]]
        renamed_rows = [d for d in rows_expected if d.tags["named"] == former]

        def table(mistake: str | None = None) -> list[list]:
            """The register's rows; ``mistake`` (a criterion id) makes the one a perturbation writes."""
            out = [list(HEADER)]
            for i, d in enumerate(rows_expected):
                if mistake == "rows_complete" and i == len(rows_expected) - 1:
                    continue
                ent, kind, amt, day = d.tags["entity"], d.tags["event"], d.tags["amount"], d.date
                if mistake == "entities_right" and d.tags["named"] == former:
                    ent = former
                if mistake == "entities_right" and not renamed_rows and i == 0:  # (no former-name row)
                    ent = near
                if mistake == "events_right" and d is (money[0] if money else rows_expected[0]):
                    kind = {"lawsuit": "settlement", "settlement": "lawsuit", "fine": "lawsuit",
                            "data breach": "recall", "recall": "data breach"}[kind]
                if mistake == "amounts_right" and d is (breach or money[0]):
                    amt = d.tags["count"] if d is breach else amt * 2
                if mistake == "dates_right" and i == 0:
                    day = day + timedelta(days=1)
                out.append([d.id, day.isoformat(), ent, kind, amt])
            if mistake == "rows_precise":  # the sold subsidiary's event where there is one, else the namesake's
                d = (sold_docs or near_docs)[0]
                out.append([d.id, d.date.isoformat(), d.tags["named"], d.tags["event"], d.tags["amount"]])
            return out

        def solve():
            hits = parse_json((yield ToolCall("mail__search_messages", {"query": "diligence"},
                                              "Find legal's request.")))
            for m in sorted(hits["messages"], key=lambda m: m["id"]):
                yield ToolCall("mail__read_message", {"message_id": m["id"]}, "Read it in full.")
            if not brief:
                yield ToolCall("search__list_sources", {}, "See what the archive holds.")
            opened: set[str] = set()
            for name in names:
                res = parse_json((yield ToolCall("search__search", {"query": f'"{name}"', "limit": 50},
                                                 f"Every document naming {name}.")))
                for h in res["hits"]:
                    if brief and h["id"] not in expected:  # its title reports no event (a launch, a hire ...)
                        continue
                    if brief:  # the hit's title, date and snippet (the lead, with the figure) are the row
                        opened.add(h["id"])
                        continue
                    if h["id"] not in opened:
                        opened.add(h["id"])
                        yield ToolCall("search__get_document", {"doc_id": h["id"]},
                                       f"Is {h['id']} a legal or regulatory event, and about whom?")
            missing = set(expected) - opened
            if missing:
                raise RuntimeError(f"oracle searches missed {sorted(missing)}")
            if not brief:
                yield ToolCall("files__list_dir", {"path": "diligence"}, "Find last year's register.")
                yield ToolCall("sheets__read_range", {"path": old_path, "sheet": SHEET}, "Copy its layout.")
            yield ToolCall("sheets__create_workbook", {"path": path, "sheets": [SHEET]}, "Create the register.")
            yield ToolCall("sheets__write_rows", {"path": path, "sheet": SHEET, "start_cell": "A1",
                                                  "rows": table()}, "Write one row per document.")
            if not brief:
                yield ToolCall("sheets__read_range", {"path": path, "sheet": SHEET}, "Check the register.")
            body = (f"Hi {counsel[0].split()[0]},\n\nAttached is the events register for {target} "
                    f"(incl. {', '.join(names[1:])}): {len(rows_expected)} documents"
                    + (f" ({dropped} left out, as it was sold)" if dropped else "") + f".\n\nBest,\n{me[0]}"
                    if level == self.levels else f"Hi {counsel[0].split()[0]},\n\nAttached is the events register "
                    f"for {', '.join(names)}: {len(rows_expected)} documents.\n\nBest,\n{me[0]}")
            yield ToolCall("mail__reply", {"message_id": request_id, "body": body,
                                           "attachments": [path]},
                           "Send it back to legal.")
            return (f"Registered {len(rows_expected)} documents in {path} and replied to {counsel[0]}." if not brief
                    else "Register written and sent to legal.")

        register, reply = perturb.on("sheets__write_rows", path=path), perturb.on("mail__reply")
        flawed = {
            **{cid: perturb.change(solve, register, rows=table(cid)) for cid in (
                "rows_complete", "entities_right", "events_right", "amounts_right", "dates_right", "rows_precise")},
            "files_untouched": perturb.insert(solve, ToolCall(
                "sheets__write_cells", {"path": old_path, "sheet": SHEET, "cells": {"F1": "Checked"}}), before=reply),
            "replied_with_workbook": perturb.change(solve, reply, attachments=[]),
            "mail_only_to_legal": perturb.insert(solve, ToolCall("mail__send_message", {
                "to": [colleague[1]], "subject": f"{target}", "body": "FYI the register is done."})),
        }

        # -- criteria ------------------------------------------------------------------------------
        def events(w) -> dict[str, dict[str, Any]]:
            found, note = read_events(w.file(path))
            if note:
                raise FileNotFoundError(note)
            return found

        def rows_complete(w, t):
            missing = sorted(set(expected) - set(events(w)))
            return not missing, f"missing: {missing}" if missing else ""

        def rows_precise(w, t):
            found = events(w)
            extra = sorted(set(found) - set(expected))
            return bool(found) and not extra, f"extra rows: {extra}" if extra else ("no rows" if not found else "")

        def per_row(test):
            def check(w, t):
                found = events(w)
                common = [i for i in expected if i in found]
                if not common:
                    return False, "no expected document has a row"
                bad = [i for i in common if not test(expected[i], found[i])]
                return not bad, f"wrong for: {bad}" if bad else ""
            return check

        listed = [target, subs[0], subs[1], subs[2]]

        parent_of = {s: target for s in subs}

        def entity_ok(d: Doc, row: dict) -> bool:
            """The cell names the document's entity and no other; a qualifier may add its parent
            ("Osprey Services (Ironbridge Point Logistics subsidiary)")."""
            main, qualifiers = entity_parts(" ".join(norm(str(row["entity"] or "")).split()))
            want = d.tags["entity"]

            def named(text: str) -> set[str]:
                return {o for o in listed + [near] if norm(o) in text}

            allowed = {want, parent_of.get(want)}
            return named(main) == {want} and all(named(q) <= allowed for q in qualifiers)

        def event_ok(d: Doc, row: dict) -> bool:
            return event_kind(row["event"]) == d.tags["event"]

        def amount_ok(d: Doc, row: dict) -> bool:
            got, want = cell_amount(row["amount"]), d.tags["amount"]
            if want is None:
                return got is None or got == 0
            return got is not None and abs(got - want) <= max(1.0, want * 0.001)

        def date_ok(d: Doc, row: dict) -> bool:
            return cell_date(row["date"], d.date)

        def replied(w, t):
            saved, _ = read_events(w.file(path))
            sent = [m for m in mail.sent_messages(w) if counsel[1] in m["to"]]
            for m in sent:
                for a in m["attachments"]:
                    if a["name"].lower().endswith(".xlsx"):
                        found, _ = read_events(mail.attachment_path(w, m["id"], a["name"]))
                        if found and set(found) == set(saved) and set(found) & set(expected):
                            return True
            return False, f"{len(sent)} mails to legal, none with the saved register attached"

        def only_legal(w, t):
            for name in ("mail__send_message", "mail__reply", "mail__forward"):
                for c in t.calls(name, ok_only=True):
                    args = c.arguments if isinstance(c.arguments, dict) else {}
                    if name == "mail__reply":
                        if str(args.get("message_id")) not in (str(request_id), str(followup_id)) \
                                or args.get("reply_all"):
                            return False, f"reply to message {args.get('message_id')}"
                        continue
                    rcpts = [mail.parse_address(x) for x in [*args.get("to", []), *args.get("cc", [])]]
                    if any(r != counsel[1] for r in rcpts):
                        return False, f"{name} to {rcpts}"
            return True

        criteria = [
            # a register listing every document in the archive is no diligence: recall and the per-row
            # values pay only when the rows are the events (and nothing else)
            Criterion("rows_complete", "every document reporting an event about the target, its former name or a "
                      "subsidiary has a row", "final_state", rows_complete, 2.0, requires=("rows_precise",)),
            Criterion("rows_precise", "no row for other documents (near-namesake, non-events, other companies"
                      + (", the sold subsidiary" if dropped else "") + ")", "final_state", rows_precise),
            Criterion("entities_right", "each row names the right entity (former-name documents under the target)",
                      "final_state", per_row(entity_ok), requires=("rows_precise",)),
            Criterion("events_right", "each row has the right event type", "final_state", per_row(event_ok),
                      requires=("rows_precise",)),
            Criterion("amounts_right", "each row has the document's dollar amount, or none", "final_state",
                      per_row(amount_ok), requires=("rows_precise",)),
            Criterion("dates_right", "each row has the document's date", "final_state", per_row(date_ok),
                      requires=("rows_precise",)),
            Criterion("replied_with_workbook", "legal got a reply with the register (as saved) attached",
                      "final_state", replied, 1.5, requires=("rows_complete",)),
            Criterion("mail_only_to_legal", "mail went only to legal, as a reply to the request", "process",
                      only_legal, guard=True),
            files_kit.unchanged(seeded, id="files_untouched", description="last year's register is unchanged"),
        ]
        perturbations = {c.id: flawed[c.id] for c in criteria}
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"target": target, "former": former, "subsidiaries": subs, "near_namesake": near, "path": path,
                  # the drawn traps, empty when absent
                  "renamed": former if has_former and level > 1 else "",
                  "added_subsidiary": subs[2] if followup == "adds" else "",
                  "dropped_subsidiary": dropped or "", "memo_copies": memos,
                  "rows": [{"id": d.id, "date": d.date.isoformat(), "entity": d.tags["entity"],
                            "event": d.tags["event"], "amount": d.tags["amount"]} for d in rows_expected]},
        )
