"""The `crm` app: an MCP server over a sales team's CRM (``state/crm.sqlite``).

Every tool opens its own short connection, so calls stay independent and the file is always
consistent on disk. Bad input comes back as a ToolError that says how to fix it: stages must
come from the pipeline, dates are ISO, amounts are not negative, emails are real addresses,
and no two active contacts share an email.
"""

from __future__ import annotations

import json
import re
from contextlib import closing
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import (
    ACT, ADD, READ, SET, AppServer, cap, read_meta, server_builder, sqlite_connector, tick_clock,
)
from longhorizon.apps.crm.state import (
    ACTIVITY_KINDS,
    CLOSED_STAGES,
    OPEN_STAGES,
    STAGES,
    TIERS,
    advance,
    canonical_stage,
    canonical_tier,
    parse_day,
    parse_domain,
    parse_email,
)

MAX_LIMIT = 100
STAGE_LIST = ", ".join(STAGES)

INSTRUCTIONS = (
    "The sales team's CRM: accounts (companies, each with its web domain), contacts (people at an "
    "account), deals (opportunities) and activities (calls, meetings, notes). Records have integer "
    f"ids. Deal stages, in pipeline order: {STAGE_LIST}. Dates are ISO (YYYY-MM-DD); amounts are "
    "plain numbers in dollars. Find records with the search_* tools, open one with get_*."
)


def _dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


def _day(value: str, name: str) -> str:
    try:
        return parse_day(value)
    except (ValueError, TypeError):
        raise ToolError(f"{name}={value!r} is not a date: use YYYY-MM-DD, e.g. 2026-03-31") from None


def _page(limit: int, offset: int) -> None:
    if not 1 <= limit <= MAX_LIMIT or offset < 0:
        raise ToolError(f"limit must be 1-{MAX_LIMIT} and offset >= 0")


def _words(query: str | None) -> list[str]:
    return (query or "").lower().split()


def _clean(text: str | None, field: str, required: bool = False, limit: int = 200) -> str:
    value = " ".join(str(text or "").split())
    if required and not value:
        raise ToolError(f"{field} must not be empty")
    if len(value) > limit:
        raise ToolError(f"{field} must be at most {limit} characters")
    return value


def _phone(text: str | None) -> str:
    value = " ".join(str(text or "").split())
    if not value:
        return ""
    if not re.fullmatch(r"[0-9+().\-\s/x]+", value.lower()) or len(re.sub(r"\D", "", value)) < 7:
        raise ToolError(f"phone {text!r} is not a phone number: use digits with optional + ( ) - . spaces, "
                        "e.g. +1 415-555-0132")
    return value


def make_app(world):
    db_path = world.db_path("crm")
    srv = AppServer("crm", instructions=INSTRUCTIONS)

    connect = sqlite_connector(db_path, "CRM", "crm")

    meta = read_meta

    def tick(conn) -> str:
        return tick_clock(conn, advance)

    def user_of(conn, who: str | None, field: str = "owner") -> str:
        """A CRM user by email or (part of) name, case-insensitive; None -> the current user."""
        if who is None or not str(who).strip():
            return meta(conn)["user"]
        users = [dict(r) for r in conn.execute("SELECT * FROM users ORDER BY name")]
        w = str(who).strip().lower()
        email = parse_email(w)
        hits = [u for u in users if u["email"] == email] if email else []
        hits = hits or [u for u in users if u["name"].lower() == w] or [u for u in users if w in u["name"].lower()]
        if len(hits) != 1:
            listing = ", ".join(f"{u['name']} <{u['email']}>" for u in users)
            why = "matches several users" if hits else "is not a CRM user"
            raise ToolError(f"{field} {who!r} {why}; users: {listing}")
        return hits[0]["email"]

    def get_account_row(conn, account_id: int) -> dict:
        row = conn.execute("SELECT * FROM accounts WHERE id = ?", (account_id,)).fetchone()
        if row is None:
            raise ToolError(f"no account with id {account_id}; use search_accounts to find ids")
        return dict(row)

    def get_contact_row(conn, contact_id: int, active: bool = False) -> dict:
        row = conn.execute("SELECT * FROM contacts WHERE id = ?", (contact_id,)).fetchone()
        if row is None:
            raise ToolError(f"no contact with id {contact_id}; use search_contacts to find ids")
        c = dict(row)
        if active and c["status"] == "merged":
            raise ToolError(f"contact {contact_id} was merged into contact {c['merged_into']}; use that record")
        return c

    def get_deal_row(conn, deal_id: int) -> dict:
        row = conn.execute("SELECT * FROM deals WHERE id = ?", (deal_id,)).fetchone()
        if row is None:
            raise ToolError(f"no deal with id {deal_id}; use search_deals to find ids")
        return dict(row)

    def account_names(conn) -> dict[int, str]:
        return {r[0]: r[1] for r in conn.execute("SELECT id, name FROM accounts")}

    def contact_out(c: dict, names: dict[int, str]) -> dict:
        out = {
            "id": c["id"], "name": f"{c['first_name']} {c['last_name']}", "first_name": c["first_name"],
            "last_name": c["last_name"], "email": c["email"], "phone": c["phone"], "title": c["title"],
            "account_id": c["account_id"], "account": names.get(c["account_id"], ""),
        }
        if c["status"] != "active":
            out.update(status=c["status"], merged_into=c["merged_into"])
        return out

    def deal_out(d: dict, names: dict[int, str]) -> dict:
        return {
            "id": d["id"], "name": d["name"], "account_id": d["account_id"], "account": names.get(d["account_id"], ""),
            "stage": d["stage"], "amount": d["amount"], "close_date": d["close_date"], "owner": d["owner"],
            "contact_id": d["contact_id"],
        }

    def activity_out(a: dict) -> dict:
        return {k: a[k] for k in ("id", "kind", "date", "subject", "body", "contact_id", "deal_id", "account_id",
                                  "author")}

    def email_taken(conn, email: str, except_id: int | None = None) -> dict | None:
        row = conn.execute(
            "SELECT * FROM contacts WHERE email = ? AND status = 'active' AND id != ?", (email, except_id or -1)
        ).fetchone()
        return dict(row) if row else None

    def valid_email(value: str, field: str = "email") -> str:
        email = parse_email(value)
        if email is None:
            raise ToolError(f"{field} {value!r} is not a valid email address (name@domain.tld)")
        return email

    def paged(items: list, key: str, limit: int, offset: int) -> str:
        page = items[offset:offset + limit]
        nxt = offset + len(page) if offset + len(page) < len(items) else None
        return _dumps({"total": len(items), "offset": offset, key: page, "next_offset": nxt})

    # -- users and accounts -------------------------------------------------------------

    @srv.tool(READ)
    def list_users() -> str:
        """List the CRM users (sales reps and managers) who can own accounts and deals.

        Returns JSON [{email, name, role}]; the current user is marked "you": true."""
        with closing(connect()) as conn:
            me = meta(conn)["user"]
            rows = [dict(r) for r in conn.execute("SELECT * FROM users ORDER BY name")]
        return _dumps([{**r, **({"you": True} if r["email"] == me else {})} for r in rows])

    @srv.tool(READ)
    def search_accounts(query: str = "", industry: str | None = None, tier: str | None = None,
                        owner: str | None = None, limit: int = 25, offset: int = 0) -> str:
        """Find accounts (companies). Every word of ``query`` must appear (case-insensitive) in the
        account's name or web domain; "" lists all.

        Args:
            query: words to look for, e.g. "acme" or "acme.com".
            industry: only this industry (case-insensitive).
            tier: only this tier: Enterprise, Mid-Market, SMB or Prospect.
            owner: only accounts owned by this user (email or name).
            limit: page size (1-100). offset: how many to skip (use next_offset).

        Returns JSON {total, offset, accounts: [{id, name, domain, industry, tier,
        owner}], next_offset} (next_offset is null on the last page)."""
        _page(limit, offset)
        with closing(connect()) as conn:
            rows = [dict(r) for r in conn.execute("SELECT * FROM accounts ORDER BY name, id")]
            who = user_of(conn, owner) if owner else None
        t = canonical_tier(tier) if tier else None
        if tier and t is None:
            raise ToolError(f"tier {tier!r} is not one of {', '.join(TIERS)}")
        words = _words(query)
        hits = [
            {k: r[k] for k in ("id", "name", "domain", "industry", "tier", "owner")}
            for r in rows
            if all(w in f"{r['name']} {r['domain']}".lower() for w in words)
            and (not industry or r["industry"].lower() == industry.strip().lower())
            and (t is None or r["tier"] == t) and (who is None or r["owner"] == who)
        ]
        return paged(hits, "accounts", limit, offset)

    @srv.tool(READ)
    def get_account(account_id: int) -> str:
        """One account with its active contacts and its deals.

        Returns JSON {id, name, domain, industry, tier, owner, created, updated,
        contacts: [contact...], deals: [deal...]}."""
        with closing(connect()) as conn:
            a = get_account_row(conn, account_id)
            names = account_names(conn)
            cons = [contact_out(dict(r), names) for r in conn.execute(
                "SELECT * FROM contacts WHERE account_id = ? AND status = 'active' ORDER BY id", (account_id,))]
            ds = [deal_out(dict(r), names) for r in conn.execute(
                "SELECT * FROM deals WHERE account_id = ? ORDER BY id", (account_id,))]
        return _dumps({**a, "contacts": cons, "deals": ds})

    @srv.tool(ADD)
    def create_account(name: str, domain: str, industry: str = "", tier: str = "Prospect",
                       owner: str | None = None) -> str:
        """Create an account (a company).

        Args:
            name: company name (not empty).
            domain: the company's web domain, e.g. "acme.com" (unique across accounts).
            industry: optional industry, e.g. "Manufacturing".
            tier: Enterprise, Mid-Market, SMB or Prospect (default Prospect).
            owner: the user who owns it (email or name; default: you).

        Returns a confirmation with the new account id."""
        name = _clean(name, "name", required=True)
        dom = parse_domain(domain)
        if dom is None:
            raise ToolError(f"domain {domain!r} is not a web domain; use e.g. acme.com")
        t = canonical_tier(tier)
        if t is None:
            raise ToolError(f"tier {tier!r} is not one of {', '.join(TIERS)}")
        with closing(connect()) as conn, conn:
            who = user_of(conn, owner)
            same = conn.execute("SELECT id, name, domain FROM accounts WHERE domain = ? OR lower(name) = ?",
                                (dom, name.lower())).fetchone()
            if same:
                raise ToolError(f"account {same['id']} ({same['name']}, {same['domain']}) already has this name "
                                "or domain; use it instead of creating another")
            now = tick(conn)
            cur = conn.execute(
                "INSERT INTO accounts (name, domain, industry, tier, owner, created, updated) VALUES (?,?,?,?,?,?,?)",
                (name, dom, _clean(industry, "industry"), t, who, now, now))
        return f"Created account {cur.lastrowid} {name!r} ({dom}, {t}, owner {who})."

    @srv.tool(SET)
    def update_account(account_id: int, name: str | None = None, industry: str | None = None,
                       tier: str | None = None, owner: str | None = None) -> str:
        """Change an account. Only the fields you pass change.

        Args:
            account_id: the account.
            name: new company name. industry: new industry.
            tier: Enterprise, Mid-Market, SMB or Prospect.
            owner: new owner (user email or name).

        Returns what changed."""
        with closing(connect()) as conn, conn:
            a = get_account_row(conn, account_id)
            new = dict(a)
            if name is not None:
                new["name"] = _clean(name, "name", required=True)
            if industry is not None:
                new["industry"] = _clean(industry, "industry")
            if tier is not None:
                new["tier"] = canonical_tier(tier) or ""
                if not new["tier"]:
                    raise ToolError(f"tier {tier!r} is not one of {', '.join(TIERS)}")
            if owner is not None:
                new["owner"] = user_of(conn, owner)
            changed = [k for k in ("name", "industry", "tier", "owner") if new[k] != a[k]]
            if changed:
                conn.execute("UPDATE accounts SET name = ?, industry = ?, tier = ?, owner = ?, updated = ? WHERE id = ?",
                             (new["name"], new["industry"], new["tier"], new["owner"], tick(conn), account_id))
        what = "; ".join(f"{k}: {a[k]!r} -> {new[k]!r}" for k in changed) or "nothing (values were already the same)"
        return f"Updated account {account_id}: {what}."

    # -- contacts -----------------------------------------------------------------------

    @srv.tool(READ)
    def search_contacts(query: str = "", account_id: int | None = None, include_merged: bool = False,
                        limit: int = 25, offset: int = 0) -> str:
        """Find contacts. Every word of ``query`` must appear (case-insensitive) in the contact's
        name, email, phone, title or account name; "" lists all (ordered by id).

        Args:
            query: words to look for, e.g. "maria lopez" or "m.lopez@acme.com".
            account_id: only contacts of this account.
            include_merged: also show records merged into another contact (marked "status": "merged").
            limit: page size (1-100). offset: how many to skip (use next_offset).

        Returns JSON {total, offset, contacts: [{id, name, first_name, last_name, email,
        phone, title, account_id, account}], next_offset}."""
        _page(limit, offset)
        with closing(connect()) as conn:
            if account_id is not None:
                get_account_row(conn, account_id)
            names = account_names(conn)
            rows = [dict(r) for r in conn.execute("SELECT * FROM contacts ORDER BY id")]
        words = _words(query)
        hits = []
        for c in rows:
            if (c["status"] != "active" and not include_merged) or (account_id is not None and c["account_id"] != account_id):
                continue
            hay = " ".join([c["first_name"], c["last_name"], c["email"], c["phone"], c["title"],
                            names.get(c["account_id"], "")]).lower()
            if all(w in hay for w in words):
                hits.append(contact_out(c, names))
        return paged(hits, "contacts", limit, offset)

    @srv.tool(READ)
    def get_contact(contact_id: int) -> str:
        """One contact with its account, its deals and every activity logged on it (newest first).

        Returns JSON {id, name, first_name, last_name, email, phone, title, account_id,
        account, status, merged_into, created, updated, deals: [...], activities: [{id,
        kind, date, subject, body, contact_id, deal_id, account_id, author}]}."""
        with closing(connect()) as conn:
            c = get_contact_row(conn, contact_id)
            names = account_names(conn)
            acts = [activity_out(dict(r)) for r in conn.execute(
                "SELECT * FROM activities WHERE contact_id = ? ORDER BY date DESC, id DESC", (contact_id,))]
            ds = [deal_out(dict(r), names) for r in conn.execute(
                "SELECT * FROM deals WHERE contact_id = ? ORDER BY id", (contact_id,))]
        out = contact_out(c, names)
        out.update(status=c["status"], merged_into=c["merged_into"], created=c["created"], updated=c["updated"],
                   deals=ds, activities=acts)
        return _dumps(out)

    @srv.tool(ADD)
    def create_contact(account_id: int, first_name: str, last_name: str, email: str, title: str = "",
                       phone: str = "") -> str:
        """Create a contact (a person) at an account. Refused when an active contact already has
        the email: update that record instead.

        Args:
            account_id: the account the person works for (see search_accounts).
            first_name, last_name: the person's name (not empty).
            email: their email address (unique among active contacts).
            title: job title. phone: phone number.

        Returns a confirmation with the new contact id."""
        first = _clean(first_name, "first_name", required=True, limit=80)
        last = _clean(last_name, "last_name", required=True, limit=80)
        addr = valid_email(email)
        with closing(connect()) as conn, conn:
            acc = get_account_row(conn, account_id)
            other = email_taken(conn, addr)
            if other:
                raise ToolError(f"contact {other['id']} ({other['first_name']} {other['last_name']}) already has "
                                f"email {addr}; update that contact instead of creating a duplicate")
            now = tick(conn)
            cur = conn.execute(
                "INSERT INTO contacts (account_id, first_name, last_name, email, phone, title, status, created, updated)"
                " VALUES (?,?,?,?,?,?,'active',?,?)",
                (account_id, first, last, addr, _phone(phone), _clean(title, "title"), now, now))
        return f"Created contact {cur.lastrowid} {first} {last} <{addr}> at account {account_id} ({acc['name']})."

    @srv.tool(SET)
    def update_contact(contact_id: int, first_name: str | None = None, last_name: str | None = None,
                       email: str | None = None, title: str | None = None, phone: str | None = None,
                       account_id: int | None = None) -> str:
        """Change a contact. Only the fields you pass change ("" clears title or phone).

        Args:
            contact_id: the contact (must not be a merged record).
            first_name, last_name, email, title, phone: new values.
            account_id: move the person to another account.

        Returns what changed."""
        with closing(connect()) as conn, conn:
            c = get_contact_row(conn, contact_id, active=True)
            new = dict(c)
            if first_name is not None:
                new["first_name"] = _clean(first_name, "first_name", required=True, limit=80)
            if last_name is not None:
                new["last_name"] = _clean(last_name, "last_name", required=True, limit=80)
            if email is not None:
                new["email"] = valid_email(email)
                other = email_taken(conn, new["email"], except_id=contact_id)
                if other:
                    raise ToolError(f"contact {other['id']} ({other['first_name']} {other['last_name']}) already "
                                    f"has email {new['email']}; merge the two records with merge_contacts instead")
            if title is not None:
                new["title"] = _clean(title, "title")
            if phone is not None:
                new["phone"] = _phone(phone)
            if account_id is not None:
                get_account_row(conn, account_id)
                new["account_id"] = account_id
            fields = ("first_name", "last_name", "email", "title", "phone", "account_id")
            changed = [k for k in fields if new[k] != c[k]]
            if changed:
                conn.execute(
                    "UPDATE contacts SET first_name = ?, last_name = ?, email = ?, title = ?, phone = ?, "
                    "account_id = ?, updated = ? WHERE id = ?",
                    (*(new[k] for k in fields), tick(conn), contact_id))
        what = "; ".join(f"{k}: {c[k]!r} -> {new[k]!r}" for k in changed) or "nothing (values were already the same)"
        return f"Updated contact {contact_id} ({new['first_name']} {new['last_name']}): {what}."

    @srv.tool(ACT)
    def merge_contacts(keep_id: int, duplicate_id: int) -> str:
        """Merge a duplicate contact into the record you keep. The kept record's empty title or
        phone is filled from the duplicate; the duplicate's activities and deals move to the kept
        record; the duplicate is marked merged (it stays findable with include_merged). Cannot be undone.

        Args:
            keep_id: the contact that remains.
            duplicate_id: the contact merged into it.

        Returns a summary of what moved."""
        if keep_id == duplicate_id:
            raise ToolError("keep_id and duplicate_id are the same contact")
        with closing(connect()) as conn, conn:
            keep = get_contact_row(conn, keep_id, active=True)
            dup = get_contact_row(conn, duplicate_id, active=True)
            filled = []
            for f in ("title", "phone"):
                if not keep[f] and dup[f]:
                    keep[f] = dup[f]
                    filled.append(f)
            now = tick(conn)
            conn.execute("UPDATE contacts SET title = ?, phone = ?, updated = ? WHERE id = ?",
                         (keep["title"], keep["phone"], now, keep_id))
            conn.execute("UPDATE contacts SET status = 'merged', merged_into = ?, updated = ? WHERE id = ?",
                         (keep_id, now, duplicate_id))
            moved_acts = conn.execute("UPDATE activities SET contact_id = ? WHERE contact_id = ?",
                                      (keep_id, duplicate_id)).rowcount
            moved_deals = conn.execute("UPDATE deals SET contact_id = ? WHERE contact_id = ?",
                                       (keep_id, duplicate_id)).rowcount
        fill = f"; filled {', '.join(filled)} from the duplicate" if filled else ""
        return (f"Merged contact {duplicate_id} ({dup['first_name']} {dup['last_name']} <{dup['email']}>) into "
                f"contact {keep_id} ({keep['first_name']} {keep['last_name']} <{keep['email']}>): moved "
                f"{moved_acts} activities and {moved_deals} deals{fill}.")

    # -- deals --------------------------------------------------------------------------

    @srv.tool(READ)
    def search_deals(query: str = "", account_id: int | None = None, stage: str | None = None,
                     owner: str | None = None, open_only: bool = False, close_from: str | None = None,
                     close_to: str | None = None, limit: int = 25, offset: int = 0) -> str:
        """Find deals, ordered by close date. Every word of ``query`` must appear (case-insensitive)
        in the deal's name or its account's name; "" lists all.

        Args:
            query: words to look for.
            account_id: only this account's deals.
            stage: only this pipeline stage.
            owner: only deals owned by this user (email or name).
            open_only: only deals not yet Closed Won / Closed Lost.
            close_from, close_to: only deals whose close date is within these dates (YYYY-MM-DD, inclusive).
            limit: page size (1-100). offset: how many to skip (use next_offset).

        Returns JSON {total, offset, deals: [{id, name, account_id, account, stage,
        amount, close_date, owner, contact_id}], next_offset}."""
        _page(limit, offset)
        st = None
        if stage:
            st = canonical_stage(stage)
            if st is None:
                raise ToolError(f"stage {stage!r} is not a pipeline stage; use one of: {STAGE_LIST}")
        lo = _day(close_from, "close_from") if close_from else None
        hi = _day(close_to, "close_to") if close_to else None
        with closing(connect()) as conn:
            if account_id is not None:
                get_account_row(conn, account_id)
            who = user_of(conn, owner) if owner else None
            names = account_names(conn)
            rows = [dict(r) for r in conn.execute("SELECT * FROM deals ORDER BY close_date, id")]
        words = _words(query)
        hits = [
            deal_out(d, names) for d in rows
            if all(w in f"{d['name']} {names.get(d['account_id'], '')}".lower() for w in words)
            and (account_id is None or d["account_id"] == account_id)
            and (st is None or d["stage"] == st) and (who is None or d["owner"] == who)
            and (not open_only or d["stage"] in OPEN_STAGES)
            and (lo is None or d["close_date"] >= lo) and (hi is None or d["close_date"] <= hi)
        ]
        return paged(hits, "deals", limit, offset)

    @srv.tool(READ)
    def get_deal(deal_id: int) -> str:
        """One deal with every activity logged on it (newest first).

        Returns JSON {id, name, account_id, account, stage, amount, close_date, owner,
        contact_id, created, updated, activities: [{id, kind, date, subject, body, ...}]}."""
        with closing(connect()) as conn:
            d = get_deal_row(conn, deal_id)
            names = account_names(conn)
            acts = [activity_out(dict(r)) for r in conn.execute(
                "SELECT * FROM activities WHERE deal_id = ? ORDER BY date DESC, id DESC", (deal_id,))]
        return _dumps({**deal_out(d, names), "created": d["created"], "updated": d["updated"], "activities": acts})

    def check_amount(amount: float) -> float:
        if amount is None or amount != amount or amount < 0:
            raise ToolError(f"amount {amount!r} must be a number >= 0 (dollars, e.g. 48500 or 48500.5)")
        return round(float(amount), 2)

    @srv.tool(ADD)
    def create_deal(name: str, account_id: int, amount: float, close_date: str, stage: str = "Prospecting",
                    owner: str | None = None, contact_id: int | None = None) -> str:
        """Create a deal (an opportunity) for an account.

        Args:
            name: deal name (not empty).
            account_id: the account.
            amount: expected value in dollars (>= 0).
            close_date: expected close date, YYYY-MM-DD.
            stage: pipeline stage (default Prospecting); one of the pipeline stages.
            owner: the user who owns it (email or name; default: you).
            contact_id: the main contact, optional.

        Returns a confirmation with the new deal id."""
        name = _clean(name, "name", required=True)
        st = canonical_stage(stage)
        if st is None:
            raise ToolError(f"stage {stage!r} is not a pipeline stage; use one of: {STAGE_LIST}")
        amt = check_amount(amount)
        day = _day(close_date, "close_date")
        with closing(connect()) as conn, conn:
            get_account_row(conn, account_id)
            if contact_id is not None:
                get_contact_row(conn, contact_id, active=True)
            who = user_of(conn, owner)
            now = tick(conn)
            cur = conn.execute(
                "INSERT INTO deals (name, account_id, contact_id, stage, amount, close_date, owner, created, updated)"
                " VALUES (?,?,?,?,?,?,?,?,?)", (name, account_id, contact_id, st, amt, day, who, now, now))
        return f"Created deal {cur.lastrowid} {name!r} ({st}, {amt:,.2f}, closes {day})."

    @srv.tool(SET)
    def update_deal(deal_id: int, stage: str | None = None, amount: float | None = None,
                    close_date: str | None = None, owner: str | None = None, name: str | None = None) -> str:
        """Change a deal. Only the fields you pass change.

        Args:
            deal_id: the deal.
            stage: new pipeline stage, one of: Prospecting, Qualification, Proposal, Negotiation,
                Closed Won, Closed Lost.
            amount: new amount in dollars (a number >= 0).
            close_date: new close date, YYYY-MM-DD.
            owner: new owner (user email or name).
            name: new deal name.

        Returns what changed (old -> new)."""
        with closing(connect()) as conn, conn:
            d = get_deal_row(conn, deal_id)
            new = dict(d)
            if stage is not None:
                st = canonical_stage(stage)
                if st is None:
                    raise ToolError(f"stage {stage!r} is not a pipeline stage; use one of: {STAGE_LIST}")
                new["stage"] = st
            if amount is not None:
                new["amount"] = check_amount(amount)
            if close_date is not None:
                new["close_date"] = _day(close_date, "close_date")
            if owner is not None:
                new["owner"] = user_of(conn, owner)
            if name is not None:
                new["name"] = _clean(name, "name", required=True)
            fields = ("name", "stage", "amount", "close_date", "owner")
            changed = [k for k in fields if new[k] != d[k]]
            if changed:
                conn.execute("UPDATE deals SET name = ?, stage = ?, amount = ?, close_date = ?, owner = ?, updated = ?"
                             " WHERE id = ?", (*(new[k] for k in fields), tick(conn), deal_id))
        what = "; ".join(f"{k}: {d[k]!r} -> {new[k]!r}" for k in changed) or "nothing (values were already the same)"
        note = ""
        if "stage" in changed and new["stage"] in CLOSED_STAGES:
            note = " The deal is now closed."
        return f"Updated deal {deal_id} ({new['name']}): {what}.{note}"

    # -- activities ---------------------------------------------------------------------

    @srv.tool(ADD)
    def log_activity(kind: str, subject: str, body: str = "", date: str | None = None,
                     contact_id: int | None = None, deal_id: int | None = None,
                     account_id: int | None = None) -> str:
        """Log an activity (a call, email, meeting, note or task) on a contact, a deal and/or an account.

        Args:
            kind: one of call, email, meeting, note, task.
            subject: a short subject line (not empty).
            body: the notes.
            date: when it happened, YYYY-MM-DD (default: today in the CRM).
            contact_id, deal_id, account_id: what it is about (at least one). The account is filled
                in from the contact or deal when not given.

        Returns a confirmation with the new activity id."""
        k = (kind or "").strip().lower()
        if k not in ACTIVITY_KINDS:
            raise ToolError(f"kind {kind!r} must be one of: {', '.join(ACTIVITY_KINDS)}")
        subj = _clean(subject, "subject", required=True)
        if contact_id is None and deal_id is None and account_id is None:
            raise ToolError("give at least one of contact_id, deal_id or account_id")
        with closing(connect()) as conn, conn:
            m = meta(conn)
            day = _day(date, "date") if date else m["today"]
            acc = account_id
            if contact_id is not None:
                c = get_contact_row(conn, contact_id, active=True)
                acc = acc if acc is not None else c["account_id"]
            if deal_id is not None:
                d = get_deal_row(conn, deal_id)
                acc = acc if acc is not None else d["account_id"]
            if acc is not None:
                get_account_row(conn, acc)
            cur = conn.execute(
                "INSERT INTO activities (kind, subject, body, date, contact_id, deal_id, account_id, author, created)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (k, subj, str(body or "").strip(), day, contact_id, deal_id, acc, m["user"], tick(conn)))
        on = ", ".join(f"{n} {v}" for n, v in (("contact", contact_id), ("deal", deal_id), ("account", acc))
                       if v is not None)
        return f"Logged activity {cur.lastrowid} ({k}, {day}) {subj!r} on {on}."

    @srv.tool(READ)
    def list_activities(contact_id: int | None = None, deal_id: int | None = None, account_id: int | None = None,
                        since: str | None = None, until: str | None = None, limit: int = 50, offset: int = 0) -> str:
        """List activities, newest first, optionally only those on a contact, deal or account and
        within dates (YYYY-MM-DD, inclusive).

        Returns JSON {total, offset, activities: [{id, kind, date, subject, body,
        contact_id, deal_id, account_id, author}], next_offset}."""
        _page(limit, offset)
        sql, args = ["SELECT * FROM activities WHERE 1 = 1"], []
        for col, val in (("contact_id", contact_id), ("deal_id", deal_id), ("account_id", account_id)):
            if val is not None:
                sql.append(f"AND {col} = ?")
                args.append(val)
        if since:
            sql.append("AND date >= ?")
            args.append(_day(since, "since"))
        if until:
            sql.append("AND date <= ?")
            args.append(_day(until, "until"))
        with closing(connect()) as conn:
            rows = [activity_out(dict(r)) for r in conn.execute(" ".join(sql) + " ORDER BY date DESC, id DESC", args)]
        return paged(rows, "activities", limit, offset)

    return srv


build_server = server_builder(make_app)
