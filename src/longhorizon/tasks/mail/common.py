"""Helpers shared by the mail and calendar task families: people, dates, tolerant text checks.

Graders are tolerant where a person would be (case, spacing, dashes, date and time
spellings) and strict on content (the right invoice number, the right day and hour).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from faker import Faker

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
FIRST_MONDAY_2026 = date(2026, 1, 5)


@dataclass(frozen=True)
class Person:
    first: str
    last: str
    email: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


def faker_for(seed: int) -> Faker:
    fake = Faker("en_US")
    fake.seed_instance(seed)
    return fake


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def company(fake: Faker) -> tuple[str, str]:
    """(company name, its mail domain) e.g. ("Turner Inc", "turnerinc.example")."""
    name = fake.company()
    return name, f"{slug(name)[:24]}.example"


class People:
    """Makes people with unique names and addresses (no two share a first name unless asked)."""

    def __init__(self, fake: Faker):
        self.fake = fake
        self.used_names: set[str] = set()
        self.used_first: set[str] = set()
        self.used_emails: set[str] = set()

    def make(self, domain: str, first: str | None = None, last: str | None = None) -> Person:
        for _ in range(200):
            f = first or self.fake.first_name()
            l_ = last or self.fake.last_name()
            if not slug(f) or not slug(l_):
                continue
            if first is None and f in self.used_first:
                continue
            email = f"{slug(f)}.{slug(l_)}@{domain}"
            if f"{f} {l_}" in self.used_names or email in self.used_emails:
                if first is not None and last is not None:
                    raise ValueError(f"{f} {l_} already exists")
                continue
            self.used_names.add(f"{f} {l_}")
            self.used_first.add(f)
            self.used_emails.add(email)
            return Person(f, l_, email)
        raise RuntimeError("could not make a unique person")


# -- dates -----------------------------------------------------------------------------

def monday_of(rng: random.Random, weeks: int = 44) -> date:
    """A Monday in 2026, chosen by ``rng``."""
    return FIRST_MONDAY_2026 + timedelta(weeks=rng.randrange(weeks))


def weekday(d: date) -> str:
    return WEEKDAYS[d.weekday()].capitalize()


def long_date(d: date) -> str:
    """"Friday, March 13, 2026"."""
    return f"{weekday(d)}, {MONTHS[d.month - 1].capitalize()} {d.day}, {d.year}"


def day_month(d: date) -> str:
    """"Friday 13 March"."""
    return f"{weekday(d)} {d.day} {MONTHS[d.month - 1].capitalize()}"


def hhmm(dt: datetime) -> str:
    return dt.strftime("%H:%M")


# -- tolerant text checks -----------------------------------------------------------------

def norm(text: str) -> str:
    """Lower case, one space between words, plain dashes and quotes."""
    text = (text or "").lower()
    text = re.sub(r"[\u2010-\u2015\u2212]", "-", text)
    text = text.replace("\u2018", "'").replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"\s+", " ", text).strip()


def squash(text: str) -> str:
    """Only letters and digits, lower case: 'INV-2041' ~ 'inv 2041' ~ 'inv2041'."""
    return re.sub(r"[^a-z0-9]", "", (text or "").lower())


def mentions_code(text: str, code: str) -> bool:
    """``code`` (an invoice number, say) appears, ignoring case and punctuation inside it."""
    return squash(code) in squash(text)


def mentions_date(text: str, d: date) -> bool:
    """The day is named as ISO, 'March 13', '13 March', 'Mar. 13th', '13/03' or '3/13'."""
    t = norm(text)
    if d.isoformat() in t:
        return True
    month = MONTHS[d.month - 1]
    mon = rf"(?:{month}|{month[:3]}\.?)"
    day = rf"0?{d.day}(?:st|nd|rd|th)?"
    patterns = [
        rf"\b{mon},?\s+{day}\b",
        rf"\b{day}\s+(?:of\s+)?{mon}\b",
        rf"(?<![\d/.]){'0?' + str(d.day)}[/.]0?{d.month}(?![\d])",
        rf"(?<![\d/.])0?{d.month}/0?{d.day}(?![\d])",
    ]
    return any(re.search(p, t) for p in patterns)


def mentions_weekday(text: str, d: date) -> bool:
    return WEEKDAYS[d.weekday()] in norm(text)


def mentions_time(text: str, dt: datetime) -> bool:
    """The clock time as '14:00', '14.00', '2pm', '2:00 pm', '2 p.m.', '2:30pm'."""
    t = norm(text)
    h, m = dt.hour, dt.minute
    if re.search(rf"(?<![\d:.])0?{h}[:.h]{m:02d}(?![\d])", t):
        return True
    h12 = h % 12 or 12
    ap = "a" if h < 12 else "p"
    minutes = rf"(?:[:.]00)?" if m == 0 else rf"[:.]{m:02d}"
    if re.search(rf"(?<![\d:.]){h12}{minutes}\s*{ap}\.?\s?m\b\.?", t):
        return True
    return h == 12 and m == 0 and "noon" in t


def mentions_day(text: str, d: date) -> bool:
    """Either the date or its weekday is named."""
    return mentions_date(text, d) or mentions_weekday(text, d)


def loads(result: str) -> Any:
    """Parse a tool's JSON result (oracles read what they are given)."""
    return json.loads(result)


def parse_id(result: str) -> int:
    """The id in a confirmation like 'Sent message 42 ...' / 'Created event 7 ...'."""
    m = re.search(r"(?:message|event) (\d+)", result)
    if not m:
        raise ValueError(f"no id in {result!r}")
    return int(m.group(1))
