"""Search-and-research task families, and what they share: a seeded document archive full of
realistic filler (meeting notes, tickets, trade news, memos, press releases, contracts), and
tolerant readers for answers people write (numbers with units, money in millions, dates in
several spellings, names), including "which value is stated first" for answers that also
mention history ("$45, up from $42")."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from faker import Faker

SOURCES = {
    "press": "Press releases published by vendors and other companies (official statements)",
    "contracts": "Our signed contracts, order forms and amendments (official)",
    "memos": "Internal memos from procurement, finance and legal (official)",
    "meetings": "Meeting notes, written by whoever was in the room (unofficial)",
    "news": "Trade press and blog articles (unofficial, may be speculative)",
    "tickets": "IT and support tickets (unofficial)",
}
OFFICIAL = ("press", "contracts", "memos")

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december"]


@dataclass
class Doc:
    title: str
    body: str
    date: date
    source: str
    author: str = ""
    id: str = ""
    tags: dict[str, Any] = field(default_factory=dict)
    """Ground truth the generator attaches (what fact the document states, and so on)."""

    def row(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "body": self.body, "date": self.date.isoformat(),
                "source": self.source, "author": self.author}


class Corpus:
    """Collects documents, then gives them shuffled ``DOC-nnnn`` ids and date order."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.docs: list[Doc] = []

    def add(self, doc: Doc) -> Doc:
        self.docs.append(doc)
        return doc

    def finish(self) -> list[dict[str, Any]]:
        numbers = self.rng.sample(range(1000, 10000), len(self.docs))
        for doc, n in zip(self.docs, numbers):
            doc.id = f"DOC-{n}"
        self.docs.sort(key=lambda d: (d.date, d.id))
        return [d.row() for d in self.docs]


def long_date(d: date) -> str:
    return f"{MONTHS[d.month - 1].capitalize()} {d.day}, {d.year}"


def pick_day(rng: random.Random, lo: date, hi: date) -> date:
    return lo + timedelta(days=rng.randint(0, max(0, (hi - lo).days)))


# -- filler -----------------------------------------------------------------------------------

MEETING_TOPICS = [
    "Quarterly planning", "Hiring sync", "Security review", "Budget check-in", "Team retro",
    "Customer escalation review", "Roadmap review", "Onboarding improvements", "Office move logistics",
    "Data platform sync", "Sales enablement", "Incident postmortem", "Design critique", "Vendor consolidation",
    "Support backlog triage", "Release readiness", "Finance close", "Marketing launch prep",
]
OPENERS = ["We agreed to", "Still need to", "Discussed how to", "Blocked on plans to", "Decided not to",
           "Proposal to", "Open question: should we", "Follow-up on the plan to"]
ACTIONS = ["draft a one-pager", "book a follow-up", "collect numbers from finance", "update the tracker",
           "ask legal for a review", "share the deck", "check with the vendor", "write up the decision"]
TICKET_ISSUES = [
    "VPN drops every hour", "Laptop battery swelling", "Cannot access the shared drive", "SSO login loop",
    "Printer on floor 3 offline", "Request for a second monitor", "Calendar invites arrive twice",
    "Password reset link expired", "Wi-Fi slow in meeting room B", "Phone will not enrol in MDM",
    "Expense tool rejects receipts", "Build agents out of disk space", "Mailbox over quota",
]
NEWS_THEMES = [
    "raises prices for its mid-tier plan", "opens an office in {city}", "partners with {other}",
    "launches an AI assistant", "is said to be exploring a sale", "cuts 8% of staff", "wins a government contract",
    "expands into {city}", "names a new CFO", "faces questions over data retention",
]
MEMO_THEMES = [
    ("Travel policy update", "Economy class is required for flights under six hours; book through the travel portal."),
    ("Security training deadline", "Everyone must finish the annual security training by the end of the month."),
    ("Expense limits", "Team dinners are capped per head; receipts are required for anything above the limit."),
    ("Laptop refresh", "Laptops older than four years will be replaced in batches by IT."),
    ("Procurement thresholds", "Purchases above the threshold need two quotes and a signed approval."),
    ("Office hours", "The office is open from 7:00 to 20:00 on weekdays; badge access is logged."),
    ("Records retention", "Contracts are kept for seven years after expiry; drafts may be deleted."),
]
CONTRACT_SERVICES = ["office cleaning", "catering", "printer leasing", "courier services", "security patrols",
                     "plant care", "coffee machines", "recruitment services", "translation services"]
CITIES = ["Austin", "Denver", "Toronto", "Dublin", "Amsterdam", "Berlin", "Singapore", "Boston", "Seattle",
          "Lisbon", "Warsaw", "Tallinn", "Madrid", "Zurich", "Oslo", "Chicago", "Atlanta", "Vancouver",
          "Copenhagen", "Helsinki", "Prague", "Vienna", "Melbourne", "Montreal"]


def people(fake: Faker, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        name = f"{fake.first_name()} {fake.last_name()}"
        if name not in out:
            out.append(name)
    return out


def add_filler(corpus: Corpus, rng: random.Random, fake: Faker, n: int, lo: date, hi: date,
               staff: list[str], companies: list[str], mention: list[str] = ()) -> None:
    """``n`` unrelated documents across all sources; a few mention a name from ``mention``
    in passing (so searching a bare name also finds noise)."""
    kinds = ["meetings"] * 5 + ["tickets"] * 4 + ["news"] * 3 + ["memos"] * 2 + ["press"] * 2 + ["contracts"]
    for i in range(n):
        kind = rng.choice(kinds)
        day = pick_day(rng, lo, hi)
        aside = rng.choice(mention) if mention and rng.random() < 0.12 else None
        if kind == "meetings":
            topic = rng.choice(MEETING_TOPICS)
            attendees = rng.sample(staff, rng.randint(3, 5))
            points = [f"- {rng.choice(OPENERS)} {fake.bs()}." for _ in range(rng.randint(3, 6))]
            if aside:
                points.append(f"- Someone asked whether the {aside} dashboards could help here; nobody knew.")
            acts = [f"- {rng.choice(attendees).split()[0]} to {rng.choice(ACTIONS)}" for _ in range(rng.randint(1, 3))]
            body = (f"Meeting notes: {topic}\nAttendees: {', '.join(attendees)}\n\n" + "\n".join(points)
                    + "\n\nAction items:\n" + "\n".join(acts))
            corpus.add(Doc(f"{topic} notes", body, day, kind, rng.choice(attendees)))
        elif kind == "tickets":
            issue = rng.choice(TICKET_ISSUES)
            who = rng.choice(staff)
            extra = f" Might be related to the {aside} integration." if aside else ""
            body = (f"Ticket IT-{rng.randint(10000, 99999)}: {issue}\nReporter: {who}\nPriority: P{rng.randint(2, 4)}\n"
                    f"Status: {rng.choice(['Open', 'In progress', 'Resolved', 'Closed'])}\n\n"
                    f"{issue}. {fake.sentence(nb_words=12)}{extra} {fake.sentence(nb_words=9)}")
            corpus.add(Doc(issue, body, day, kind, who))
        elif kind == "news":
            co = rng.choice(companies)
            theme = rng.choice(NEWS_THEMES).format(city=rng.choice(CITIES), other=rng.choice(companies))
            body = (f"{co} {theme}, according to people familiar with the matter. {fake.catch_phrase()} is "
                    f"the company's pitch; rivals say they {fake.bs()}. " + fake.paragraph(nb_sentences=3))
            if aside:
                body += f" Competitors such as {aside} were not mentioned."
            corpus.add(Doc(f"{co} {theme}", body, day, kind, fake.name()))
        elif kind == "memos":
            title, text = rng.choice(MEMO_THEMES)
            who = rng.choice(staff)
            body = f"MEMO: {title}\nFrom: {who}\n\n{text} {fake.paragraph(nb_sentences=2)}"
            corpus.add(Doc(title, body, day, kind, who))
        elif kind == "press":
            co = rng.choice(companies)
            what = rng.choice(["launches", "announces", "unveils", "introduces"])
            product = fake.catch_phrase()
            body = (f"{co} {what} {product}\n\n{rng.choice(CITIES)}, {long_date(day)} - {co} today {what} "
                    f"{product}, designed to help customers {fake.bs()}. " + fake.paragraph(nb_sentences=3))
            corpus.add(Doc(f"{co} {what} {product}", body, day, kind, f"{co} Communications"))
        else:
            service = rng.choice(CONTRACT_SERVICES)
            co = rng.choice(companies)
            body = (f"ORDER FORM - {service.title()}\nSupplier: {co}\nTerm: 12 months from {day.isoformat()}\n"
                    f"Fee: ${rng.randint(2, 90) * 500:,} per year\n\n{fake.paragraph(nb_sentences=2)}")
            corpus.add(Doc(f"Order form: {service} ({co})", body, day, kind, "Procurement"))


# -- tolerant answer reading ----------------------------------------------------------------

def norm(text: str) -> str:
    text = (text or "").lower()
    text = re.sub(r"[\u2010-\u2015\u2212]", "-", text)
    text = text.replace("\u00a0", " ").replace("\u2019", "'")
    return text


_DOC_REF = re.compile(r"\bdoc[\s_-]?(\d{3,5})\b")
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DATES = [
    re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b"),
    re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"),
    re.compile(rf"\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"),
    re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?\b"),
    re.compile(r"\b(?:19|20)\d{2}\b"),
]
_NUMBER = re.compile(
    r"(?P<cur>\$|us\$|usd|€|eur)?\s?(?P<num>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?"
    r"(?:\s*(?P<unit>%|percent|k\b|thousand|mm\b|mn\b|m\b|million|bn\b|b\b|billion))?"
    r"(?:\s*(?P<cur2>usd|dollars))?"
)
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mm": 1e6, "mn": 1e6, "million": 1e6,
          "b": 1e9, "bn": 1e9, "billion": 1e9}


def cited_docs(text: str) -> set[str]:
    """Document ids cited in ``text`` ("DOC-1234", "doc 1234", "DOC_1234"), as DOC-nnnn."""
    return {f"DOC-{m.group(1)}" for m in _DOC_REF.finditer(norm(text))}


def _blank(text: str, pattern: re.Pattern) -> str:
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def numbers(text: str, *, masked: bool = True) -> list[tuple[int, float, str]]:
    """Every number in ``text`` as (position, value, kind) with kind "money", "percent" or "plain";
    thousands separators, k/million/billion scales and currency signs understood. Document ids
    and dates are skipped unless ``masked`` is false."""
    t = norm(text)
    if masked:
        t = _blank(t, _DOC_REF)
        for p in _DATES:
            t = _blank(t, p)
    out = []
    for m in _NUMBER.finditer(t):
        if m.start("num") > 0 and (t[m.start("num") - 1].isalnum() or t[m.start("num") - 1] in "-."):
            if not m.group("cur"):
                continue
        value = float(m.group("num").replace(",", "") + (f".{m.group('frac')}" if m.group("frac") else ""))
        unit = m.group("unit") or ""
        if unit in _SCALE:
            value *= _SCALE[unit]
        kind = "percent" if unit in ("%", "percent") else "money" if (m.group("cur") or m.group("cur2")) else "plain"
        out.append((m.start(), value, kind))
    return out


def first_number(text: str, candidates: list[float], kind: str = "plain", rel: float = 1e-6) -> float | None:
    """The candidate value stated first in ``text``. For money (percent), amounts marked with a
    currency (a % sign) are preferred when there are any."""
    nums = numbers(text)
    marked = [n for n in nums if n[2] == kind]
    pool = marked if kind in ("money", "percent") and marked else nums
    for _, value, _ in pool:
        for c in candidates:
            if abs(value - c) <= max(0.005, abs(c) * rel):
                return c
    return None


def date_position(text: str, d: date) -> int | None:
    """Where day ``d`` is first written in ``text`` (ISO, 'March 31, 2027', '31 March', '3/31/2027',
    '31/03/2027'); None when it is not."""
    t = norm(text)
    month = MONTHS[d.month - 1]
    mon = rf"(?:{month}|{month[:3]}\.?)"
    day = rf"0?{d.day}(?:st|nd|rd|th)?"
    pats = [
        rf"\b{d.year}-0?{d.month}-0?{d.day}\b",
        rf"\b{mon},?\s+{day}\b",
        rf"\b{day}\s+(?:of\s+)?{mon}\b",
        rf"(?<![\d/.])0?{d.day}[/.]0?{d.month}[/.]\d{{2,4}}\b",
        rf"(?<![\d/.])0?{d.month}/0?{d.day}/\d{{2,4}}\b",
    ]
    found = [m.start() for p in pats for m in [re.search(p, t)] if m]
    return min(found) if found else None


def phrase_position(text: str, phrase: str) -> int | None:
    m = re.search(rf"(?<![a-z0-9]){re.escape(norm(phrase))}(?![a-z0-9])", " ".join(norm(text).split()))
    return m.start() if m else None


def person_position(text: str, name: str, others: list[str]) -> int | None:
    """Where person ``name`` is first named: full name, or the last name alone when no other
    candidate shares it."""
    spots = [phrase_position(text, name)]
    last = name.split()[-1]
    if all(o.split()[-1].lower() != last.lower() for o in others if o != name):
        spots.append(phrase_position(text, last))
    spots = [s for s in spots if s is not None]
    return min(spots) if spots else None


def stated_first(text: str, kind: str, right: Any, wrong: list[Any]) -> tuple[bool, str]:
    """Whether ``text`` states ``right`` before any of the ``wrong`` values.

    ``kind``: "person", "place", "word" (text values), "date", or "money"/"percent"/"count"
    (numbers)."""
    if kind in ("money", "percent", "count"):
        got = first_number(text, [right, *wrong], {"count": "plain"}.get(kind, kind))
        return got == right, f"first value stated: {got!r}, expected {right!r}"
    cands = [right, *wrong]
    if kind == "date":
        pos = {c: date_position(text, c) for c in cands}
    elif kind == "person":
        pos = {c: person_position(text, c, cands) for c in cands}
    else:
        pos = {c: phrase_position(text, c) for c in cands}
    seen = [(p, c) for c, p in pos.items() if p is not None]
    if not seen:
        return False, f"none of the candidate values is stated (expected {right!r})"
    first = min(seen, key=lambda x: x[0])[1]
    return first == right, f"first value stated: {first!r}, expected {right!r}"


_MARKER = re.compile(
    r"^[\s>*#|_\-]*(?:(?:q|question)\s*#?\s*(?P<q>\d{1,2})\b[\s:.)|*_\-\u2013\u2014]*"
    r"|(?P<n>\d{1,2})\s*[:.)|][\s*_]*)",
    re.IGNORECASE,
)


def answer_segments(text: str) -> dict[int, list[str]]:
    """Split a write-up into per-question pieces: a line starting with "Q3", "Question 3",
    "3." / "3)" / "3:" or a table row "| 3 |" opens question 3's piece, which runs until the
    next such line. A number may open several pieces (a restated question list, then answers)."""
    out: dict[int, list[str]] = {}
    current: int | None = None
    buf: list[str] = []
    for line in (text or "").splitlines():
        m = _MARKER.match(line)
        if m:
            if current is not None:
                out.setdefault(current, []).append("\n".join(buf))
            current = int(m.group("q") or m.group("n"))
            buf = [line[m.end():]]
        elif current is not None:
            buf.append(line)
    if current is not None:
        out.setdefault(current, []).append("\n".join(buf))
    return out
