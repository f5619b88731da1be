"""CRM app state: a sales team's CRM in SQLite (``state/crm.sqlite``).

Accounts (companies, each with its web domain), contacts (people at an account), deals
(opportunities moving through a fixed pipeline) and activities (calls, meetings, notes logged
on a contact, deal or account). Merged duplicate contacts stay in the table with
``status = 'merged'`` and ``merged_into`` pointing at the record that absorbed them.

``create_crm`` is deterministic (fixed insertion order, no clock reads). The CRM has its own
clock (``meta.now``): every write is stamped from it and moves it on a minute, so episodes
are reproducible too. ``meta.today`` is the business date (default for new activities).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

STAGES = ("Prospecting", "Qualification", "Proposal", "Negotiation", "Closed Won", "Closed Lost")
"""The sales pipeline, in order. The last two are closed stages."""
OPEN_STAGES = STAGES[:4]
CLOSED_STAGES = STAGES[4:]
TIERS = ("Enterprise", "Mid-Market", "SMB", "Prospect")
ACTIVITY_KINDS = ("call", "email", "meeting", "note", "task")
NOW_FMT = "%Y-%m-%dT%H:%M:%S"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE users (
    email TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL DEFAULT ''
);
CREATE TABLE accounts (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    domain TEXT NOT NULL,
    industry TEXT NOT NULL DEFAULT '',
    tier TEXT NOT NULL,
    owner TEXT NOT NULL REFERENCES users(email),
    created TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE TABLE contacts (
    id INTEGER PRIMARY KEY,
    account_id INTEGER NOT NULL REFERENCES accounts(id),
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    email TEXT NOT NULL,
    phone TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'merged')),
    merged_into INTEGER,
    created TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE TABLE deals (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    account_id INTEGER NOT NULL REFERENCES accounts(id),
    contact_id INTEGER,
    stage TEXT NOT NULL,
    amount REAL NOT NULL,
    close_date TEXT NOT NULL,
    owner TEXT NOT NULL REFERENCES users(email),
    created TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE TABLE activities (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    date TEXT NOT NULL,
    contact_id INTEGER,
    deal_id INTEGER,
    account_id INTEGER,
    author TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE INDEX contacts_account ON contacts(account_id);
CREATE INDEX deals_account ON deals(account_id);
CREATE INDEX activities_contact ON activities(contact_id);
CREATE INDEX activities_deal ON activities(deal_id);
"""

_EMAIL = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
_DOMAIN = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}$")


def parse_email(text: Any) -> str | None:
    """Lower-cased address, or None when it is not one (``Name <a@b.c>`` is accepted)."""
    if not isinstance(text, str):
        return None
    t = text.strip()
    if t.endswith(">") and "<" in t:
        t = t[t.rindex("<") + 1:-1].strip()
    t = t.lower()
    return t if _EMAIL.match(t) else None


def parse_domain(text: Any) -> str | None:
    """``acme.com`` (also from ``https://www.acme.com/``) lower case; None when it is not a domain."""
    if not isinstance(text, str):
        return None
    t = text.strip().lower()
    t = re.sub(r"^[a-z]+://", "", t).split("/", 1)[0]
    if t.startswith("www."):
        t = t[4:]
    return t if _DOMAIN.match(t) else None


def email_domain(email: str) -> str:
    return email.rsplit("@", 1)[-1].lower()


def parse_day(value: Any) -> str:
    """An ISO date (``YYYY-MM-DD``; a datetime keeps its date part) -> ``YYYY-MM-DD``; ValueError otherwise."""
    v = str(value).strip()
    if len(v) == 10:
        return date.fromisoformat(v).isoformat()
    return datetime.fromisoformat(v).date().isoformat()


def canonical_stage(text: Any) -> str | None:
    """A pipeline stage in any case or spacing ('closed-won', 'CLOSED WON') -> its name, else None."""
    key = re.sub(r"[^a-z]", "", str(text or "").lower())
    for s in STAGES:
        if re.sub(r"[^a-z]", "", s.lower()) == key:
            return s
    return None


def canonical_tier(text: Any) -> str | None:
    key = re.sub(r"[^a-z]", "", str(text or "").lower())
    for t in TIERS:
        if re.sub(r"[^a-z]", "", t.lower()) == key:
            return t
    return None


def phone_digits(text: Any) -> str:
    """Only the digits of a phone number (a leading US country code 1 dropped)."""
    d = re.sub(r"\D", "", str(text or ""))
    return d[1:] if len(d) == 11 and d.startswith("1") else d


def advance(clock: str, minutes: int = 1) -> str:
    return (datetime.strptime(clock, NOW_FMT) + timedelta(minutes=minutes)).strftime(NOW_FMT)


def create_crm(
    db_path: Path | str,
    *,
    user: str,
    users: Iterable[Mapping[str, Any]],
    accounts: Iterable[Mapping[str, Any]] = (),
    contacts: Iterable[Mapping[str, Any]] = (),
    deals: Iterable[Mapping[str, Any]] = (),
    activities: Iterable[Mapping[str, Any]] = (),
    today: str,
    now: str | None = None,
) -> Path:
    """Write a new CRM. Same arguments -> byte-identical file.

    ``user``: the email of the person using the CRM (must be in ``users``: dicts with
    ``email, name`` and optionally ``role``).
    ``accounts``: dicts with ``name, domain, tier, owner`` and optionally ``industry, id, created``.
    ``contacts``: ``account_id, first_name, last_name, email`` and optionally ``phone, title,
    status, merged_into, id, created``.
    ``deals``: ``name, account_id, stage, amount, close_date, owner`` and optionally ``contact_id, id, created``.
    ``activities``: ``kind, subject, date`` and at least one of ``contact_id, deal_id, account_id``;
    optionally ``body, author, id``.
    Ids default to 1, 2, ... in order. ``today`` is the business date; ``now`` the clock
    (default ``today`` at 09:00).
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    today = date.fromisoformat(today).isoformat()
    clock = datetime.fromisoformat(now).strftime(NOW_FMT) if now else f"{today}T09:00:00"
    stamp = f"{today}T08:00:00"
    me = parse_email(user)
    user_rows = []
    for u in users:
        email = parse_email(u["email"])
        if email is None:
            raise ValueError(f"bad user email {u['email']!r}")
        user_rows.append((email, u["name"], u.get("role", "")))
    emails = {r[0] for r in user_rows}
    if me not in emails:
        raise ValueError("the CRM user must be listed in users")

    acc_rows = []
    for i, a in enumerate(accounts, start=1):
        dom = parse_domain(a["domain"])
        tier = canonical_tier(a["tier"])
        owner = parse_email(a["owner"])
        if dom is None or tier is None or owner not in emails:
            raise ValueError(f"account {a['name']!r}: bad domain, tier or owner")
        created = a.get("created", stamp)
        acc_rows.append((int(a.get("id", i)), a["name"], dom, a.get("industry", ""), tier, owner, created, created))
    acc_ids = {r[0] for r in acc_rows}

    con_rows = []
    for i, c in enumerate(contacts, start=1):
        email = parse_email(c["email"])
        if email is None or c["account_id"] not in acc_ids:
            raise ValueError(f"contact {c.get('first_name')} {c.get('last_name')}: bad email or account")
        created = c.get("created", stamp)
        con_rows.append((int(c.get("id", i)), c["account_id"], c["first_name"], c["last_name"], email,
                         c.get("phone", ""), c.get("title", ""), c.get("status", "active"),
                         c.get("merged_into"), created, created))

    deal_rows = []
    for i, d in enumerate(deals, start=1):
        stage = canonical_stage(d["stage"])
        owner = parse_email(d["owner"])
        if stage is None or owner not in emails or d["account_id"] not in acc_ids or float(d["amount"]) < 0:
            raise ValueError(f"deal {d['name']!r}: bad stage, owner, account or amount")
        created = d.get("created", stamp)
        deal_rows.append((int(d.get("id", i)), d["name"], d["account_id"], d.get("contact_id"), stage,
                          round(float(d["amount"]), 2), parse_day(d["close_date"]), owner, created, created))

    act_rows = []
    for i, a in enumerate(activities, start=1):
        if a["kind"] not in ACTIVITY_KINDS:
            raise ValueError(f"activity {i}: bad kind {a['kind']!r}")
        if not any(a.get(k) is not None for k in ("contact_id", "deal_id", "account_id")):
            raise ValueError(f"activity {i}: needs a contact, deal or account")
        day = parse_day(a["date"])
        act_rows.append((int(a.get("id", i)), a["kind"], a["subject"], a.get("body", ""), day,
                         a.get("contact_id"), a.get("deal_id"), a.get("account_id"),
                         parse_email(a.get("author", me)) or me, f"{day}T12:00:00"))

    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [("user", me), ("today", today), ("now", clock)])
        conn.executemany("INSERT INTO users VALUES (?,?,?)", user_rows)
        conn.executemany("INSERT INTO accounts VALUES (?,?,?,?,?,?,?,?)", acc_rows)
        conn.executemany("INSERT INTO contacts VALUES (?,?,?,?,?,?,?,?,?,?,?)", con_rows)
        conn.executemany("INSERT INTO deals VALUES (?,?,?,?,?,?,?,?,?,?)", deal_rows)
        conn.executemany("INSERT INTO activities VALUES (?,?,?,?,?,?,?,?,?,?)", act_rows)
        conn.commit()
    return db_path


# -- readers shared by tools and graders ----------------------------------------------------

def _rows(world, sql: str, args: tuple = ()) -> list[dict[str, Any]]:
    with closing(world.db("crm")) as conn:
        return [dict(r) for r in conn.execute(sql, args).fetchall()]


def meta(world) -> dict[str, str]:
    with closing(world.db("crm")) as conn:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def accounts(world) -> list[dict[str, Any]]:
    return _rows(world, "SELECT * FROM accounts ORDER BY id")


def account(world, account_id: int) -> dict[str, Any] | None:
    rows = _rows(world, "SELECT * FROM accounts WHERE id = ?", (account_id,))
    return rows[0] if rows else None


def contacts(world, include_merged: bool = True) -> list[dict[str, Any]]:
    where = "" if include_merged else " WHERE status = 'active'"
    return _rows(world, f"SELECT * FROM contacts{where} ORDER BY id")


def contact(world, contact_id: int) -> dict[str, Any] | None:
    rows = _rows(world, "SELECT * FROM contacts WHERE id = ?", (contact_id,))
    return rows[0] if rows else None


def contacts_by_email(world, email: str, include_merged: bool = False) -> list[dict[str, Any]]:
    return [c for c in contacts(world, include_merged) if c["email"] == email.strip().lower()]


def deals(world) -> list[dict[str, Any]]:
    return _rows(world, "SELECT * FROM deals ORDER BY id")


def deal(world, deal_id: int) -> dict[str, Any] | None:
    rows = _rows(world, "SELECT * FROM deals WHERE id = ?", (deal_id,))
    return rows[0] if rows else None


def activities(world, *, contact_id: int | None = None, deal_id: int | None = None) -> list[dict[str, Any]]:
    sql, args = "SELECT * FROM activities WHERE 1 = 1", []
    if contact_id is not None:
        sql += " AND contact_id = ?"
        args.append(contact_id)
    if deal_id is not None:
        sql += " AND deal_id = ?"
        args.append(deal_id)
    return _rows(world, sql + " ORDER BY id", tuple(args))
