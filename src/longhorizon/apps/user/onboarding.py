"""Onboarding domain: a new hire before day one, and the HR/IT onboarding system.

Shared state: the HR system (new hires, the existing directory of usernames, accounts, the
equipment catalog and requests, contracts) and what the new hire can reach (``inbox``: their
personal email, where the contract and the activation link arrive; ``screen``: their browser).
The agent sends the contract, creates the account and orders equipment; only the new hire can
sign the contract, activate the account with a password of their own (the activation page does
not show the rules), set up MFA, and say which laptop they want and where to ship it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import ACT, ADD, READ
from longhorizon.apps.user.base import Desk, Hit, Intent, Session, UserTool, dumps, params
from longhorizon.apps.user.identity import MAILBOX, SCREEN, compose, fingerprint, known_rules, password_problems

SCHEMA = """
CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE hires (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    personal_email TEXT NOT NULL,
    role TEXT NOT NULL,
    team TEXT NOT NULL,
    manager TEXT NOT NULL,
    manager_email TEXT NOT NULL,
    start_date TEXT NOT NULL,
    work_mode TEXT NOT NULL CHECK (work_mode IN ('remote', 'office')),
    office TEXT NOT NULL
);
CREATE TABLE directory (username TEXT PRIMARY KEY, name TEXT NOT NULL, team TEXT NOT NULL);
CREATE TABLE accounts (
    username TEXT PRIMARY KEY,
    hire_id TEXT NOT NULL UNIQUE REFERENCES hires(id),
    email TEXT NOT NULL,
    groups TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending_activation', 'active')),
    password_fp TEXT NOT NULL DEFAULT '',
    mfa INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE catalog (sku TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, notes TEXT NOT NULL);
CREATE TABLE equipment (
    id INTEGER PRIMARY KEY, hire_id TEXT NOT NULL, sku TEXT NOT NULL, ship_to TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('requested', 'cancelled'))
);
CREATE TABLE contracts (
    hire_id TEXT PRIMARY KEY, status TEXT NOT NULL CHECK (status IN ('not_sent', 'sent', 'signed')),
    signed_name TEXT NOT NULL DEFAULT ''
);
CREATE TABLE inbox (id INTEGER PRIMARY KEY, to_address TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE screen (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

INSTRUCTIONS = (
    "Here the person is a new hire who has not started yet; the back office is the HR onboarding "
    "system (new hires, contracts, accounts, equipment). Read the onboarding checklist first "
    "(get_onboarding_policy)."
)

BASE_GROUP = "all-staff"
REMOTE_GROUP = "vpn-users"


def _kv(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    return dict(conn.execute(f"SELECT key, value FROM {table}").fetchall())


def team_groups(cfg: dict[str, str]) -> dict[str, list[str]]:
    return json.loads(cfg["team_groups"])


def laptop_rules(cfg: dict[str, str]) -> dict[str, dict[str, str]]:
    """{"power"|"standard": {"mac": sku, "windows": sku}}; power roles are in ``cfg.power_teams``."""
    return json.loads(cfg["laptops"])


def expected_groups(cfg: dict[str, str], team: str, remote: bool) -> list[str]:
    groups = [BASE_GROUP, *team_groups(cfg)[team]]
    if remote:
        groups.append(REMOTE_GROUP)
    return sorted(set(groups))


def policy_text(cfg: dict[str, str]) -> str:
    teams = "\n".join(f"     - {t}: {', '.join(g)}" for t, g in team_groups(cfg).items())
    lap = laptop_rules(cfg)
    power = ", ".join(json.loads(cfg["power_teams"]))
    rules = [f"at least {cfg['min_length']} characters", "at least one upper-case and one lower-case letter",
             "at least one digit"]
    if cfg["require_symbol"] == "1":
        rules.append("at least one symbol (e.g. ! # $ -)")
    if cfg["ban_name"] == "1":
        rules.append("must not contain their first name, last name or username")
    pw = "\n".join(f"     - {r}" for r in rules)
    return f"""{cfg['company']} new-hire onboarding checklist

1. Contract first. Send the employment contract (send_contract); the new hire signs it themselves
   from the e-sign email. Create their accounts only once the contract is signed
   (get_onboarding_status shows it).
2. Account. create_account with exactly these groups:
   - every employee: {BASE_GROUP}
   - the team's groups:
{teams}
   - remote employees also: {REMOTE_GROUP}
   The system picks the username (first.last, with a number if taken) and emails the new hire an
   activation link. They activate it themselves with a password that follows these rules (the
   activation page does not show them, so tell them), then set up MFA with an authenticator app.
   Never ask for their password.
{pw}
3. Equipment (request_equipment; SKUs in list_catalog). Ask the new hire whether they want a Mac
   or a Windows laptop.
   - {power} teams: {lap['power']['mac']} (Mac) or {lap['power']['windows']} (Windows).
   - Everyone else: {lap['standard']['mac']} (Mac) or {lap['standard']['windows']} (Windows).
   - Remote employees also get a monitor ({cfg['monitor']}) and a headset ({cfg['headset']}); everything is
     shipped to their home address (ask them for it).
   - Office-based employees also get a headset ({cfg['headset']}); ship to "<their office> office, IT desk".
4. First-week meetings, organised by you in the calendar; invite the new hire at their new work
   address, keep everyone inside their working hours and clear of their other meetings, and don't
   double-book the new hire (their day is 09:00-17:00):
   - "Orientation": the start day, 09:30-11:00, in {cfg['orientation_room']} (remote hires join by video).
   - "Welcome 1:1" with their manager: 30 minutes on the start day, after orientation.
   - "Buddy coffee" with their onboarding buddy: 30 minutes within their first three working days.
   - "Team intro" with the manager and the whole team: 60 minutes within their first week.
5. Welcome email to the new hire's personal address, copying their manager, with the start date,
   their work email address, when and where orientation is, and their buddy's name.
6. Finish with get_onboarding_status: contract signed, account active with MFA, equipment requested.
"""


# -- the agent's HR system -------------------------------------------------------------------

def register_agent_tools(srv, desk: Desk) -> None:
    def hire(conn, hire_id: str) -> dict:
        row = conn.execute("SELECT * FROM hires WHERE id = ?", ((hire_id or "").strip().upper(),)).fetchone()
        if row is None:
            raise ToolError(f"no new hire {hire_id!r}; see list_new_hires")
        return dict(row)

    def status_of(conn, h: dict) -> dict:
        c = conn.execute("SELECT * FROM contracts WHERE hire_id = ?", (h["id"],)).fetchone()
        a = conn.execute("SELECT * FROM accounts WHERE hire_id = ?", (h["id"],)).fetchone()
        eq = conn.execute("SELECT e.*, c.name AS item FROM equipment e LEFT JOIN catalog c ON c.sku = e.sku "
                          "WHERE hire_id = ? ORDER BY e.id", (h["id"],)).fetchall()
        return {
            "hire_id": h["id"], "name": h["name"],
            "contract": c["status"] if c else "not_sent",
            "account": None if a is None else {
                "username": a["username"], "email": a["email"], "groups": json.loads(a["groups"]),
                "status": a["status"], "password_set": bool(a["password_fp"]), "mfa_enrolled": bool(a["mfa"])},
            "equipment": [{"request_id": e["id"], "sku": e["sku"], "item": e["item"], "ship_to": e["ship_to"],
                           "status": e["status"]} for e in eq],
        }

    @srv.tool(READ)
    def get_onboarding_policy() -> str:
        """The onboarding checklist: order of steps, account groups, password rules, equipment
        rules, first-week meetings and the welcome email. Read it before acting."""
        with desk.read() as conn:
            return policy_text(_kv(conn, "config"))

    @srv.tool(READ)
    def list_new_hires() -> str:
        """New hires who have not started yet.

        Returns JSON [{hire_id, name, role, team, start_date}]."""
        with desk.read() as conn:
            rows = conn.execute("SELECT * FROM hires ORDER BY start_date, id").fetchall()
        return dumps([{"hire_id": r["id"], "name": r["name"], "role": r["role"], "team": r["team"],
                       "start_date": r["start_date"]} for r in rows])

    @srv.tool(READ)
    def get_new_hire(hire_id: str) -> str:
        """A new hire's HR record.

        Returns JSON {hire_id, name, personal_email, role, team, manager,
        manager_email, start_date, work_mode (remote/office), office}."""
        with desk.read() as conn:
            h = hire(conn, hire_id)
        return dumps({"hire_id": h["id"], **{k: h[k] for k in ("name", "personal_email", "role", "team", "manager",
                                                                "manager_email", "start_date", "work_mode", "office")}})

    @srv.tool(READ)
    def get_onboarding_status(hire_id: str) -> str:
        """Where a new hire's onboarding stands.

        Returns JSON {hire_id, name, contract (not_sent/sent/signed), account: null or
        {username, email, groups, status, password_set, mfa_enrolled},
        equipment: [{request_id, sku, item, ship_to, status}]}."""
        with desk.read() as conn:
            return dumps(status_of(conn, hire(conn, hire_id)))

    @srv.tool(ADD)
    def send_contract(hire_id: str) -> str:
        """Email the employment contract to the new hire's personal address for e-signature.
        Returns a confirmation."""
        with desk.write() as conn:
            h = hire(conn, hire_id)
            c = conn.execute("SELECT status FROM contracts WHERE hire_id = ?", (h["id"],)).fetchone()
            if c and c["status"] == "signed":
                raise ToolError(f"{h['name']}'s contract is already signed")
            conn.execute("INSERT OR REPLACE INTO contracts (hire_id, status) VALUES (?, 'sent')", (h["id"],))
            company = _kv(conn, "config")["company"]
            conn.execute("INSERT INTO inbox (to_address, subject, body) VALUES (?, ?, ?)",
                         (h["personal_email"], f"Your {company} employment contract is ready to sign",
                          "Open the e-sign link to review and sign your contract."))
            return desk.log(conn, "send_contract", {"hire_id": h["id"]},
                            f"Sent the employment contract to {h['personal_email']} for e-signature.")

    @srv.tool(ADD)
    def create_account(hire_id: str, groups: list[str]) -> str:
        """Create the new hire's work account and email them an activation link. The username is
        first.last (with a number if that is taken).

        Args:
            hire_id: the new hire.
            groups: the access groups to put the account in, e.g. ["all-staff", "sales"].

        Returns the username and work email address."""
        with desk.write() as conn:
            h = hire(conn, hire_id)
            cfg = _kv(conn, "config")
            if conn.execute("SELECT 1 FROM accounts WHERE hire_id = ?", (h["id"],)).fetchone():
                raise ToolError(f"{h['name']} already has an account; change its groups with set_account_groups")
            clean = _groups(groups, cfg)
            base = ".".join(re.sub(r"[^a-z]", "", p.lower()) for p in (h["name"].split()[0], h["name"].split()[-1]))
            taken = {r[0] for r in conn.execute("SELECT username FROM directory UNION SELECT username FROM accounts")}
            username, n = base, 1
            while username in taken:
                n += 1
                username = f"{base}{n}"
            email = f"{username}@{cfg['email_domain']}"
            conn.execute("INSERT INTO accounts (username, hire_id, email, groups, status) VALUES (?, ?, ?, ?, "
                         "'pending_activation')", (username, h["id"], email, json.dumps(clean)))
            conn.execute("INSERT INTO inbox (to_address, subject, body) VALUES (?, ?, ?)",
                         (h["personal_email"], f"Activate your {cfg['company']} account",
                          f"Your account {email} is ready. Open the activation link to choose your password."))
            return desk.log(conn, "create_account", {"hire_id": h["id"], "groups": clean},
                            f"Created account {username} ({email}) in groups {', '.join(clean)}; an activation link "
                            f"went to {h['personal_email']}.")

    @srv.tool(ACT)  # each call is logged in the shared action log: not idempotent
    def set_account_groups(username: str, groups: list[str]) -> str:
        """Replace an account's access groups. Returns a confirmation."""
        with desk.write() as conn:
            a = conn.execute("SELECT * FROM accounts WHERE username = ?", ((username or "").strip().lower(),)).fetchone()
            if a is None:
                raise ToolError(f"no account {username!r} created here; see get_onboarding_status")
            clean = _groups(groups, _kv(conn, "config"))
            conn.execute("UPDATE accounts SET groups = ? WHERE username = ?", (json.dumps(clean), a["username"]))
            return desk.log(conn, "set_account_groups", {"username": a["username"], "groups": clean},
                            f"{a['username']} is now in {', '.join(clean)}.")

    @srv.tool(READ)
    def list_catalog() -> str:
        """The equipment catalog. Returns JSON [{sku, name, kind, notes}]."""
        with desk.read() as conn:
            rows = conn.execute("SELECT * FROM catalog ORDER BY kind, sku").fetchall()
        return dumps([dict(r) for r in rows])

    @srv.tool(ADD)
    def request_equipment(hire_id: str, sku: str, ship_to: str) -> str:
        """Order one catalog item for a new hire.

        Args:
            hire_id: the new hire.
            sku: the catalog SKU, e.g. "MON-27".
            ship_to: the full delivery address (or "<office> office, IT desk").

        Returns a confirmation with the request id."""
        if not ship_to.strip():
            raise ToolError("ship_to must not be empty")
        with desk.write() as conn:
            h = hire(conn, hire_id)
            item = conn.execute("SELECT * FROM catalog WHERE sku = ?", ((sku or "").strip().upper(),)).fetchone()
            if item is None:
                raise ToolError(f"no catalog item {sku!r}; see list_catalog")
            cur = conn.execute("INSERT INTO equipment (hire_id, sku, ship_to, status) VALUES (?, ?, ?, 'requested')",
                               (h["id"], item["sku"], ship_to.strip()))
            return desk.log(conn, "request_equipment", {"hire_id": h["id"], "sku": item["sku"], "ship_to": ship_to.strip()},
                            f"Request {cur.lastrowid}: {item['name']} for {h['name']}, shipping to {ship_to.strip()}.")

    @srv.tool(ACT)  # each call is logged in the shared action log: not idempotent
    def cancel_equipment_request(request_id: int) -> str:
        """Cancel an equipment request. Returns a confirmation."""
        with desk.write() as conn:
            r = conn.execute("SELECT * FROM equipment WHERE id = ?", (request_id,)).fetchone()
            if r is None or r["status"] != "requested":
                raise ToolError(f"no open equipment request {request_id}")
            conn.execute("UPDATE equipment SET status = 'cancelled' WHERE id = ?", (r["id"],))
            return desk.log(conn, "cancel_equipment_request", {"request_id": r["id"], "hire_id": r["hire_id"]},
                            f"Cancelled request {r['id']} ({r['sku']}).")


def _groups(groups: list[str], cfg: dict[str, str]) -> list[str]:
    known = {BASE_GROUP, REMOTE_GROUP, *(g for gs in team_groups(cfg).values() for g in gs)}
    clean = sorted({(g or "").strip().lower() for g in groups})
    bad = [g for g in clean if g not in known]
    if bad or not clean:
        raise ToolError(f"unknown groups {bad}; groups are listed in the onboarding policy: {', '.join(sorted(known))}")
    return clean


# -- the new hire's side (their tools) ----------------------------------------------------------

def _mine(s: Session) -> dict:
    s.conn.row_factory = sqlite3.Row
    return dict(s.conn.execute("SELECT * FROM hires WHERE id = ?", (s.facts["hire_id"],)).fetchone())


def _account(s: Session) -> dict | None:
    row = s.conn.execute("SELECT * FROM accounts WHERE hire_id = ?", (s.facts["hire_id"],)).fetchone()
    return dict(row) if row else None


def t_check_email(s: Session) -> tuple[bool, str]:
    rows = s.conn.execute("SELECT * FROM inbox WHERE to_address = ? ORDER BY id DESC LIMIT 3",
                          (s.facts["personal_email"],)).fetchall()
    if not rows:
        return True, "There's nothing new in my email."
    return True, "My newest emails: " + " | ".join(f"'{r['subject']}': {r['body']}" for r in rows)


def t_sign_contract(s: Session) -> tuple[bool, str]:
    c = s.conn.execute("SELECT * FROM contracts WHERE hire_id = ?", (s.facts["hire_id"],)).fetchone()
    if c is None or c["status"] == "not_sent":
        return False, "I haven't received any contract to sign yet."
    if c["status"] == "signed":
        return True, "I already signed the contract."
    s.conn.execute("UPDATE contracts SET status = 'signed', signed_name = ? WHERE hire_id = ?", (s.name, c["hire_id"]))
    return True, f"I opened the e-sign email, read the contract and signed it as {s.name}. It says 'Signed'."


def t_activate_account(s: Session, password: str) -> tuple[bool, str]:
    a = _account(s)
    if a is None:
        return False, "I don't have any activation email yet."
    if a["status"] == "active":
        return True, "My account is already activated."
    cfg = _kv(s.conn, "config")
    if password_problems(password, cfg, {"name": s.name, "username": a["username"], "password_fp": a["password_fp"]}):
        return False, "The activation page says: 'This password doesn't meet the requirements.' It doesn't say why."
    s.conn.execute("UPDATE accounts SET status = 'active', password_fp = ? WHERE username = ?",
                   (fingerprint(password), a["username"]))
    s.put("screen", "page", "mfa_setup")
    return True, ("I opened the activation link and chose a password. It says 'Account activated' and now asks me to "
                  "set up multi-factor authentication.")


def t_set_up_mfa(s: Session) -> tuple[bool, str]:
    a = _account(s)
    if a is None or a["status"] != "active":
        return False, "I can't set that up: my account isn't activated yet."
    if a["mfa"]:
        return True, "MFA is already set up on my account."
    s.conn.execute("UPDATE accounts SET mfa = 1 WHERE username = ?", (a["username"],))
    s.put("screen", "page", "home")
    return True, "I scanned the QR code with the authenticator app on my phone and entered the code. It says 'MFA enabled'."


def t_look_at_screen(s: Session) -> tuple[bool, str]:
    page = s.get("screen", "page") or "none"
    return True, {
        "mfa_setup": "The page says 'Set up multi-factor authentication' and shows a QR code.",
        "home": "I'm signed in to my new work account.",
    }.get(page, "Nothing special: just my personal email.")


USER_TOOLS = {t.name: t for t in [
    UserTool("look_at_screen", t_look_at_screen, "Look at what your browser shows right now.", changes=False),
    UserTool("check_email", t_check_email, "Look at the newest emails in your personal mailbox.", changes=False),
    UserTool("sign_contract", t_sign_contract, "Open the e-sign email and sign your employment contract."),
    UserTool("activate_account", t_activate_account,
             "Open the activation link and choose the password for your new work account.",
             params(password=("string", "the password you choose; keep it to yourself"))),
    UserTool("set_up_mfa", t_set_up_mfa, "Set up multi-factor authentication with the authenticator app on your phone."),
]}


# -- how the rule-based new hire reads requests ---------------------------------------------------

def _do(s: Session, tool: str, **args: Any) -> str:
    _ok, text = s.act(tool, **args)
    return text


def _laptop(s: Session, hit: Hit) -> str:
    pref = s.facts["laptop"]
    return f"I'd like a {'Mac' if pref == 'mac' else 'Windows laptop'}, please."


def _address(s: Session, hit: Hit) -> str:
    if s.facts.get("home_address"):
        return f"Please ship it to my home address: {s.facts['home_address']}."
    return f"I'll be working from the {s.facts['office']} office, so the office is fine."


def _activate(s: Session, hit: Hit) -> str:
    f = dict(s.facts)
    return _do(s, "activate_account", password=compose(s.first_name, f, known_rules(s.agent_texts())))


ASKING = r"\?|\b(which|what|prefer|would you like|let me know|tell me|where|confirm)\b"

def _screen(s: Session, hit: Hit) -> str | None:
    return None if s.done else _do(s, "look_at_screen")


INTENTS = [
    Intent("screen", SCREEN, _screen),
    Intent("laptop", r"\b(mac|macbook|windows|pc|operating system|os)\b|\b(which|what|what kind of|what type of) "
                     r"laptop\b|\blaptop (would you|do you)\b", _laptop, kind="info", when=ASKING),
    Intent("address", r"\b(home address|your address|shipping address|delivery address|ship|shipped|shipping|"
                      r"deliver(ed)?|delivery|where (do you live|should we send))\b|\b(what|which) address\b|"
                      r"\bwhere (to|should we|shall we|do we|can we|should i|shall i) (send|ship|deliver|mail)\b",
           _address, kind="info", when=ASKING),
    Intent("start", r"\b(start date|when (do )?you (start|begin)|first day)\b|\b(which|what) (day|date) do you "
                    r"(start|begin)\b",
           lambda s, h: f"I start on {s.facts['start_date']}.", kind="info", when=r"\?"),
    Intent("contract", r"\b(sign|e-?sign|countersign)\b.{0,60}\b(contract|offer|agreement|documents?|paperwork)\b|"
                       r"\b(contract|agreement|paperwork)\b.{0,80}\b(sign|e-?sign)\b(?!ed|ature)|"
                       r"\b(open|use|follow|click)\b.{0,20}\be-?sign(ing)? (email|link|request)\b",
           lambda s, h: _do(s, "sign_contract")),
    Intent("activate", r"\b(activate|activation)\b|\b(set|choose|pick|create|come up with|make) (up )?(a |your |the )?"
                       r"(new |strong |account |work )*password\b", _activate),
    Intent("mfa", r"\b(set up|setup|enrol|enroll|add|register|scan|turn on|enable)\b.{0,40}\b(authenticator|qr|mfa|"
                  r"two-factor|2fa|multi-factor)\b|\b(mfa|multi-factor|two-factor)\b.{0,30}\b(set up|setup)\b",
           lambda s, h: _do(s, "set_up_mfa")),
    Intent("email", MAILBOX, lambda s, h: _do(s, "check_email")),
]


def opening(s: Session) -> str:
    return (f"Hi! This is {s.first_name}. I'm really excited to start on {s.facts['start_day_text']}. Is there "
            "anything I need to do before then?")


def brief(s: Session) -> str:
    f = s.facts
    where = (f"You will work remotely; your home address is {f['home_address']}." if f.get("home_address")
             else f"You will work from the {f['office']} office.")
    return (
        f"You are {s.name}, a new hire starting on {f['start_day_text']} ({f['start_date']}). Your personal email "
        f"is {f['personal_email']}. {where} You would like a {'Mac' if f['laptop'] == 'mac' else 'Windows'} laptop. "
        f"You are chatting with HR, who is getting you set up. Do the steps they ask (sign your contract from your "
        f"email, activate your account with a password you choose following the rules they give, set up MFA), and "
        f"never tell anyone your password. If they give no password rules you would use {f['old_password']}."
    )


# -- seeding -----------------------------------------------------------------------------------

def create(db_path, *, persona: dict, facts: dict, config: dict, hires: list[dict], directory: list[dict],
           catalog: list[dict], patience: int = 30, seed: int = 0, llm: dict | None = None):
    """Write an onboarding World's user state. ``facts`` needs ``hire_id, personal_email, start_date,
    start_day_text, laptop ("mac"/"windows"), office, home_address ("" for office hires),
    old_password, words, year, habit_digits``; ``config`` needs ``company, email_domain,
    min_length, require_symbol, ban_name, team_groups, power_teams, laptops, monitor, headset,
    orientation_room`` (JSON values as Python objects)."""
    from longhorizon.apps.user import state

    for key in ("hire_id", "personal_email", "start_date", "start_day_text", "laptop", "office", "home_address",
                "old_password", "words", "year", "habit_digits"):
        if key not in facts:
            raise ValueError(f"facts needs {key!r}")
    cfg = {k: (json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)) for k, v in config.items()}
    return state.create(
        db_path, "onboarding", persona=persona, facts=facts, patience=patience, seed=seed, llm=llm,
        tables={"config": [{"key": k, "value": v} for k, v in cfg.items()], "hires": hires,
                "directory": directory, "catalog": catalog,
                "contracts": [{"hire_id": h["id"], "status": "not_sent"} for h in hires],
                "screen": [{"key": "page", "value": "none"}]},
    )
