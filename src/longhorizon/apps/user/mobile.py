"""Mobile domain: a carrier's customer whose mobile data does not work, and their phone.

Shared state: the carrier's records (customers, lines, bills, charges, resolutions) and the
customer's phone (``device``: airplane mode, mobile data, data roaming, APN, where it is, which
line provisioning it last registered with). Whether data works depends on both: the agent can
fix the account (resume a line once its overdue bills are paid, enable roaming, add a data
refuel) but only the customer can change their phone, approve charges on it and restart it so
it re-registers after the line changed. ``phone_status`` computes what the phone sees.
"""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import ACT, ADD, READ
from longhorizon.apps.user.base import Desk, Hit, Intent, Session, UserTool, dumps, normalize, params

SCHEMA = """
CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE customers (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, address TEXT NOT NULL, since TEXT NOT NULL
);
CREATE TABLE lines (
    number TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    label TEXT NOT NULL,
    plan TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
    suspend_reason TEXT NOT NULL DEFAULT '',
    roaming INTEGER NOT NULL DEFAULT 0,
    data_used_gb REAL NOT NULL,
    data_limit_gb REAL NOT NULL,
    refuel_gb REAL NOT NULL DEFAULT 0,
    provision INTEGER NOT NULL DEFAULT 0,
    last_network TEXT NOT NULL DEFAULT ''
);
CREATE TABLE bills (
    id TEXT PRIMARY KEY,
    number TEXT NOT NULL REFERENCES lines(number),
    period TEXT NOT NULL,
    amount REAL NOT NULL,
    due TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('paid', 'overdue', 'open'))
);
CREATE TABLE charges (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('bill', 'refuel')),
    number TEXT NOT NULL,
    bill_id TEXT,
    gb REAL NOT NULL DEFAULT 0,
    amount REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'declined'))
);
CREATE TABLE resolutions (id INTEGER PRIMARY KEY, number TEXT NOT NULL, causes TEXT NOT NULL, note TEXT NOT NULL);
CREATE TABLE device (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

INSTRUCTIONS = (
    "Here the person is a mobile customer; the back office is the carrier's customer desk "
    "(customers, lines, bills, charges). Read the support policy first (get_support_policy)."
)

AUTO_MODE = "5G/4G/3G/2G (automatic)"
SLOW_MODE = "2G only"

CAUSES = {
    "airplane_mode_on": "airplane mode was on on the phone",
    "mobile_data_off": "mobile data was switched off on the phone",
    "apn_misconfigured": "the phone's APN setting was wrong",
    "network_mode_2g_only": "the phone's preferred network type was set to 2G only",
    "device_roaming_off": "data roaming was off on the phone while abroad",
    "line_suspended_unpaid": "the line was suspended for an unpaid bill",
    "roaming_not_enabled": "roaming was not enabled on the line while abroad",
    "data_exhausted": "the line's data allowance was used up",
}
"""Root-cause codes for ``record_resolution``, with what each means."""


# -- shared reads ----------------------------------------------------------------------------

def _kv(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    return dict(conn.execute(f"SELECT key, value FROM {table}").fetchall())


def _line(conn: sqlite3.Connection, number: str) -> dict[str, Any] | None:
    conn.row_factory = sqlite3.Row
    row = conn.execute("SELECT * FROM lines WHERE number = ?", (number,)).fetchone()
    return dict(row) if row else None


def remaining_gb(line: dict) -> float:
    return round(line["data_limit_gb"] + line["refuel_gb"] - line["data_used_gb"], 2)


def phone_status(conn: sqlite3.Connection) -> dict[str, Any]:
    """What the customer's phone sees: ``service`` (airplane | sos | none | ok), whether the
    data indicator shows (``data_icon``) and whether the internet actually works."""
    dev, cfg = _kv(conn, "device"), _kv(conn, "config")
    line = _line(conn, dev["number"])
    abroad = dev["country"] != cfg["home_country"]
    if dev["airplane"] == "1":
        service = "airplane"
    elif line is None or line["status"] == "suspended" or (abroad and not line["roaming"]):
        service = "sos"
    elif int(dev["registered"]) < line["provision"]:
        service = "none"
    else:
        service = "ok"
    data_icon = service == "ok" and dev["mobile_data"] == "1" and (not abroad or dev["data_roaming"] == "1")
    apn_ok = dev["apn"] == cfg["apn"]
    fast = dev.get("network_mode", AUTO_MODE) == AUTO_MODE
    has_data = line is not None and remaining_gb(line) > 0
    return {"service": service, "abroad": abroad, "data_icon": data_icon, "apn_ok": apn_ok, "fast": fast,
            "has_data": has_data, "internet": data_icon and apn_ok and has_data and fast}


def status(world) -> dict[str, Any]:
    """``phone_status`` of a World (for graders)."""
    with closing(world.db("user")) as conn:
        return phone_status(conn)


def policy_text(cfg: dict[str, str]) -> str:
    price, most = cfg["price_per_gb"], cfg["max_refuel_gb"]
    codes = "\n".join(f"   - {k}: {v}" for k, v in CAUSES.items())
    return f"""{cfg['carrier']} customer support: mobile data troubleshooting policy

1. Identify the line and the caller. Ask for the phone number of the affected line and look it
   up (find_customer, get_customer, get_line). A customer may have several lines: work only on the
   affected one. Before you change anything on the account, the caller must confirm the account
   holder's full name and the ZIP code of the billing address, matching get_customer.
2. Find out what the phone shows. Only the customer can see and change their phone: ask them to
   read the status bar at the top of the screen, and to check or change settings as needed.
   Phone-side requirements: airplane mode off; mobile data on; when abroad, data roaming on;
   preferred network type '{AUTO_MODE}' (never '{SLOW_MODE}');
   APN set to "{cfg['apn']}" (if it differs, have the customer reset the APN settings to default).
3. Account-side fixes are yours:
   - A line suspended for non-payment may be resumed (resume_line) only after every overdue bill
     of that line is paid. Send a payment request for each overdue bill (send_payment_request);
     it is paid when the customer approves it on their phone. Never request payment for bills
     that are not overdue, or for other lines.
   - Roaming may be enabled on a line (set_line_roaming) only for a customer who confirms they
     are abroad right now. Do not change roaming otherwise.
   - If the data allowance is used up, offer a data refuel ({price} {cfg['currency']} per GB, 1 to {most} GB).
     Ask the customer how much they want, add exactly that (add_data_refuel) and have them
     approve the charge on their phone. One refuel per case.
   - After any change to the line's provisioning (resume, roaming) the phone must re-register
     on the network: ask the customer to restart their phone.
4. Confirm the fix: after the last change, the customer runs a speed test and it succeeds.
5. Record the resolution on the line (record_resolution) with every root cause you found:
{codes}
"""


# -- the agent's back office -------------------------------------------------------------------

def _digits(text: str) -> str:
    return re.sub(r"\D", "", text or "")


def register_agent_tools(srv, desk: Desk) -> None:
    def line_or_error(conn, number: str) -> dict:
        d = _digits(number)
        rows = [dict(r) for r in conn.execute("SELECT * FROM lines")]
        match = [r for r in rows if _digits(r["number"]) == d or (len(d) >= 7 and _digits(r["number"]).endswith(d))]
        if len(match) != 1:
            raise ToolError(f"no line with number {number!r}; numbers look like {rows[0]['number']} "
                            "(find them with find_customer)")
        return match[0]

    def line_view(conn, line: dict) -> dict:
        return {
            "number": line["number"], "customer_id": line["customer_id"], "label": line["label"],
            "plan": line["plan"], "status": line["status"], "suspend_reason": line["suspend_reason"] or None,
            "roaming_enabled": bool(line["roaming"]), "data_used_gb": line["data_used_gb"],
            "data_limit_gb": line["data_limit_gb"], "refuel_gb": line["refuel_gb"],
            "data_remaining_gb": max(remaining_gb(line), 0.0), "last_network": line["last_network"],
        }

    @srv.tool(READ)
    def get_support_policy() -> str:
        """The carrier's troubleshooting policy: what you may do, in which order, and the
        root-cause codes for record_resolution. Read it before acting."""
        with desk.read() as conn:
            return policy_text(_kv(conn, "config"))

    @srv.tool(READ)
    def find_customer(query: str) -> str:
        """Find customers by (part of) their name or by a phone number of one of their lines.

        Args:
            query: a name ("Dana Reyes", "reyes") or a phone number in any format ("+1 555 010 2233").

        Returns JSON [{customer_id, name, lines: [phone numbers]}]."""
        q = normalize(query)
        if not q:
            raise ToolError("query must not be empty: give a name or a phone number")
        d = _digits(query)
        with desk.read() as conn:
            customers = [dict(r) for r in conn.execute("SELECT * FROM customers ORDER BY id")]
            lines = [dict(r) for r in conn.execute("SELECT number, customer_id FROM lines ORDER BY number")]
        out = []
        for c in customers:
            numbers = [ln["number"] for ln in lines if ln["customer_id"] == c["id"]]
            by_number = len(d) >= 7 and any(_digits(n).endswith(d) for n in numbers)
            if by_number or (not d and q in c["name"].lower()):
                out.append({"customer_id": c["id"], "name": c["name"], "lines": numbers})
        return dumps(out)

    @srv.tool(READ)
    def get_customer(customer_id: str) -> str:
        """A customer's record and a summary of their lines.

        Returns JSON {customer_id, name, email, address, customer_since,
        lines: [{number, label, plan, status}]}."""
        with desk.read() as conn:
            c = conn.execute("SELECT * FROM customers WHERE id = ?", (customer_id.strip(),)).fetchone()
            if c is None:
                raise ToolError(f"no customer {customer_id!r}; find ids with find_customer")
            lines = conn.execute("SELECT number, label, plan, status FROM lines WHERE customer_id = ? ORDER BY number",
                                 (c["id"],)).fetchall()
        return dumps({"customer_id": c["id"], "name": c["name"], "email": c["email"], "address": c["address"],
                      "customer_since": c["since"], "lines": [dict(r) for r in lines]})

    @srv.tool(READ)
    def get_line(number: str) -> str:
        """A line's details: status (active/suspended, and why), whether roaming is enabled, data
        used/allowance/refuels this cycle, and the network the phone last registered on.

        Args:
            number: the line's phone number, in any format.

        Returns JSON {number, customer_id, label, plan, status, suspend_reason,
        roaming_enabled, data_used_gb, data_limit_gb, refuel_gb, data_remaining_gb,
        last_network}."""
        with desk.read() as conn:
            return dumps(line_view(conn, line_or_error(conn, number)))

    @srv.tool(READ)
    def list_bills(customer_id: str) -> str:
        """Every bill of every line of a customer, newest first.

        Returns JSON [{bill_id, number, period, amount, due, status}] where status
        is paid, overdue (past due and unpaid) or open (not yet due)."""
        with desk.read() as conn:
            if conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id.strip(),)).fetchone() is None:
                raise ToolError(f"no customer {customer_id!r}; find ids with find_customer")
            rows = conn.execute(
                "SELECT b.* FROM bills b JOIN lines l ON l.number = b.number WHERE l.customer_id = ? "
                "ORDER BY b.due DESC, b.id", (customer_id.strip(),)).fetchall()
        return dumps([{"bill_id": r["id"], "number": r["number"], "period": r["period"], "amount": r["amount"],
                       "due": r["due"], "status": r["status"]} for r in rows])

    @srv.tool(ADD)
    def send_payment_request(bill_id: str) -> str:
        """Send a payment request for one bill to the phone of the bill's line. The bill is paid
        only when the customer approves the request on that phone.

        Returns a confirmation with the request id."""
        with desk.write() as conn:
            b = conn.execute("SELECT * FROM bills WHERE id = ?", (bill_id.strip(),)).fetchone()
            if b is None:
                raise ToolError(f"no bill {bill_id!r}; see list_bills")
            if b["status"] == "paid":
                raise ToolError(f"bill {b['id']} is already paid")
            if conn.execute("SELECT 1 FROM charges WHERE bill_id = ? AND status = 'pending'", (b["id"],)).fetchone():
                raise ToolError(f"a payment request for bill {b['id']} is already waiting for the customer's approval")
            cur = conn.execute("INSERT INTO charges (kind, number, bill_id, amount, status) "
                               "VALUES ('bill', ?, ?, ?, 'pending')", (b["number"], b["id"], b["amount"]))
            cfg = _kv(conn, "config")
            msg = (f"Sent payment request {cur.lastrowid} for bill {b['id']} ({b['amount']:.2f} {cfg['currency']}) "
                   f"to the phone on line {b['number']}; it is paid once the customer approves it there.")
            return desk.log(conn, "send_payment_request", {"bill_id": b["id"]}, msg)

    @srv.tool(ACT)  # each call is logged in the shared action log: not idempotent
    def resume_line(number: str) -> str:
        """Resume a suspended line. Refused while the line has overdue unpaid bills. The phone
        must then re-register (the customer restarts it) before service returns.

        Returns a confirmation."""
        with desk.write() as conn:
            line = line_or_error(conn, number)
            if line["status"] == "active":
                raise ToolError(f"line {line['number']} is not suspended")
            overdue = [r[0] for r in conn.execute("SELECT id FROM bills WHERE number = ? AND status = 'overdue' ORDER BY id",
                                                  (line["number"],))]
            if overdue:
                raise ToolError(f"line {line['number']} still has overdue bills ({', '.join(overdue)}): they must be "
                                "paid (send_payment_request, approved by the customer) before it can be resumed")
            conn.execute("UPDATE lines SET status = 'active', suspend_reason = '', provision = provision + 1 "
                         "WHERE number = ?", (line["number"],))
            return desk.log(conn, "resume_line", {"number": line["number"]},
                            f"Line {line['number']} is active again. The phone must restart to re-register on the network.")

    @srv.tool(ACT)  # each call is logged in the shared action log: not idempotent
    def set_line_roaming(number: str, enabled: bool) -> str:
        """Enable or disable roaming on a line (its use abroad). After enabling, the phone must
        re-register (the customer restarts it).

        Returns a confirmation."""
        with desk.write() as conn:
            line = line_or_error(conn, number)
            if bool(line["roaming"]) == bool(enabled):
                what = "enabled" if enabled else "disabled"
                return f"Roaming is already {what} on line {line['number']}; nothing changed."
            conn.execute("UPDATE lines SET roaming = ?, provision = provision + ? WHERE number = ?",
                         (int(bool(enabled)), int(bool(enabled)), line["number"]))
            what = "enabled" if enabled else "disabled"
            extra = " The phone must restart to re-register on the network." if enabled else ""
            return desk.log(conn, "set_line_roaming", {"number": line["number"], "enabled": bool(enabled)},
                            f"Roaming {what} on line {line['number']}.{extra}")

    @srv.tool(ADD)
    def add_data_refuel(number: str, gb: float) -> str:
        """Add a data refuel to a line (extra data for this cycle). It is charged to the customer:
        a payment request goes to their phone and the data is added once they approve it.

        Args:
            number: the line's phone number.
            gb: how many GB to add (a whole number within the policy's range).

        Returns a confirmation with the charge id and price."""
        with desk.write() as conn:
            line = line_or_error(conn, number)
            cfg = _kv(conn, "config")
            most = int(cfg["max_refuel_gb"])
            if gb != int(gb) or not 1 <= gb <= most:
                raise ToolError(f"gb must be a whole number from 1 to {most}")
            if conn.execute("SELECT 1 FROM charges WHERE kind = 'refuel' AND number = ? AND status = 'pending'",
                            (line["number"],)).fetchone():
                raise ToolError(f"a refuel for line {line['number']} is already waiting for the customer's approval")
            amount = round(int(gb) * float(cfg["price_per_gb"]), 2)
            cur = conn.execute("INSERT INTO charges (kind, number, gb, amount, status) "
                               "VALUES ('refuel', ?, ?, ?, 'pending')", (line["number"], int(gb), amount))
            return desk.log(conn, "add_data_refuel", {"number": line["number"], "gb": int(gb)},
                            f"Refuel charge {cur.lastrowid}: {int(gb)} GB for {amount:.2f} {cfg['currency']} sent to the "
                            f"phone on line {line['number']}; the data is added once the customer approves it.")

    @srv.tool(READ)
    def list_charges(number: str) -> str:
        """Payment requests and refuel charges sent for a line, with their status (pending,
        approved, declined).

        Returns JSON [{charge_id, kind, bill_id, gb, amount, status}]."""
        with desk.read() as conn:
            line = line_or_error(conn, number)
            rows = conn.execute("SELECT * FROM charges WHERE number = ? ORDER BY id", (line["number"],)).fetchall()
        return dumps([{"charge_id": r["id"], "kind": r["kind"], "bill_id": r["bill_id"], "gb": r["gb"],
                       "amount": r["amount"], "status": r["status"]} for r in rows])

    @srv.tool(ADD)
    def record_resolution(number: str, causes: list[str], note: str) -> str:
        """Record how the case was resolved on a line: the root causes found and a short note.

        Args:
            number: the affected line's phone number.
            causes: root-cause codes from the support policy, e.g. ["airplane_mode_on", "data_exhausted"].
            note: one or two sentences on what was done.

        Returns a confirmation."""
        bad = [c for c in causes if c not in CAUSES]
        if bad:
            raise ToolError(f"unknown cause codes {bad}; use codes from the policy: {', '.join(CAUSES)}")
        if not causes:
            raise ToolError("list at least one root cause")
        if not note.strip():
            raise ToolError("note must not be empty")
        with desk.write() as conn:
            line = line_or_error(conn, number)
            codes = sorted(set(causes))
            cur = conn.execute("INSERT INTO resolutions (number, causes, note) VALUES (?, ?, ?)",
                               (line["number"], json.dumps(codes), note.strip()))
            return desk.log(conn, "record_resolution", {"number": line["number"], "causes": codes, "note": note.strip()},
                            f"Recorded resolution {cur.lastrowid} on line {line['number']}: {', '.join(codes)}.")


# -- the customer's phone (their tools) -------------------------------------------------------

def _dev(s: Session, key: str) -> str:
    return s.get("device", key) or ""


def _status_text(s: Session) -> str:
    st = phone_status(s.conn)
    dev, cfg = _kv(s.conn, "device"), _kv(s.conn, "config")
    if st["service"] == "airplane":
        return "There's a little airplane icon at the top and no signal bars at all."
    if st["service"] == "sos":
        return "Where the network name usually is, it says 'SOS only', and there are no signal bars."
    if st["service"] == "none":
        return "It says 'No service' at the top and there are no signal bars."
    network = dev["network"] if st["abroad"] else cfg["carrier"]
    text = f"I see {dev['bars']} signal bars and '{network}'"
    if st["abroad"]:
        text += " with a small 'R' next to the bars"
    if st["data_icon"]:
        rat = dev["rat"] if dev.get("network_mode", AUTO_MODE) == AUTO_MODE else "E"
        return text + f", and '{rat}' next to them."
    return text + ", but there's no 4G/5G/LTE symbol."


def t_check_status_bar(s: Session) -> tuple[bool, str]:
    return True, _status_text(s)


def _toggle(s: Session, key: str, label: str, on: Any) -> tuple[bool, str]:
    if not isinstance(on, bool):
        return False, "on must be true or false"
    was = _dev(s, key) == "1"
    if was == on:
        return True, f"{label} was already {'on' if on else 'off'}."
    s.put("device", key, "1" if on else "0")
    if key == "airplane" and not on:
        _register(s)
    return True, f"I turned {label} {'on' if on else 'off'}."


def _register(s: Session) -> None:
    """The phone attaches to the network again, picking up the line's current provisioning."""
    num = _dev(s, "number")
    prov = s.conn.execute("SELECT provision FROM lines WHERE number = ?", (num,)).fetchone()
    if prov is not None:
        s.put("device", "registered", prov[0])


def t_set_airplane_mode(s: Session, on: bool) -> tuple[bool, str]:
    return _toggle(s, "airplane", "airplane mode", on)


def t_set_mobile_data(s: Session, on: bool) -> tuple[bool, str]:
    return _toggle(s, "mobile_data", "mobile data", on)


def t_set_data_roaming(s: Session, on: bool) -> tuple[bool, str]:
    return _toggle(s, "data_roaming", "data roaming", on)


def t_check_network_settings(s: Session) -> tuple[bool, str]:
    onoff = lambda k: "on" if _dev(s, k) == "1" else "off"  # noqa: E731
    return True, (f"In Settings > Network it shows: Airplane mode {onoff('airplane')}, Mobile data "
                  f"{onoff('mobile_data')}, Data roaming {onoff('data_roaming')}, Preferred network type "
                  f"'{_dev(s, 'network_mode') or AUTO_MODE}'.")


def t_set_network_mode(s: Session, mode: str) -> tuple[bool, str]:
    m = normalize(mode)
    if re.search(r"\b(auto|automatic|5g|4g|lte|recommended|default|fastest)\b", m):
        new = AUTO_MODE
    elif re.search(r"\b2g\b", m):
        new = SLOW_MODE
    else:
        return False, f"I only see two choices for the preferred network type: '{AUTO_MODE}' and '{SLOW_MODE}'."
    if (_dev(s, "network_mode") or AUTO_MODE) == new:
        return True, f"The preferred network type was already '{new}'."
    s.put("device", "network_mode", new)
    return True, f"I changed the preferred network type to '{new}'."


def t_check_apn_settings(s: Session) -> tuple[bool, str]:
    return True, f"Under Access Point Names the one selected is '{_dev(s, 'apn')}'."


def t_reset_apn_settings(s: Session) -> tuple[bool, str]:
    apn = _kv(s.conn, "config")["apn"]
    s.put("device", "apn", apn)
    return True, f"I tapped 'Reset to default'. The APN now says '{apn}'."


def t_set_apn(s: Session, name: str) -> tuple[bool, str]:
    name = (name or "").strip()
    if not name:
        return False, "which APN should I type in?"
    s.put("device", "apn", name)
    return True, f"I changed the APN to '{name}' and saved it."


def t_restart_phone(s: Session) -> tuple[bool, str]:
    if _dev(s, "airplane") != "1":
        _register(s)
    return True, "I restarted the phone; it's back on."


def t_run_speed_test(s: Session) -> tuple[bool, str]:
    st = phone_status(s.conn)
    if st["internet"]:
        down, up, ping = _dev(s, "speed").split("/")
        return True, f"The speed test worked: download {down} Mbps, upload {up} Mbps, ping {ping} ms."
    if not st["data_icon"]:
        return True, "The speed test fails straight away with 'No internet connection'."
    if not st["fast"] and st["apn_ok"] and st["has_data"]:
        return True, "The speed test is painfully slow: 0.1 Mbps down, and most pages time out."
    text = "The speed test says 'Can't reach the server' and web pages don't load."
    if not st["has_data"]:
        text += f" Oh, and I have a text from {_kv(s.conn, 'config')['carrier']} saying I've used 100% of my data."
    return True, text


def _pending(s: Session) -> list[sqlite3.Row]:
    s.conn.row_factory = sqlite3.Row
    return s.conn.execute("SELECT * FROM charges WHERE number = ? AND status = 'pending' ORDER BY id",
                          (_dev(s, "number"),)).fetchall()


def _money(s: Session, amount: float) -> str:
    return f"{amount:.2f} {_kv(s.conn, 'config')['currency']}"


def t_check_payment_requests(s: Session) -> tuple[bool, str]:
    rows = _pending(s)
    if not rows:
        return True, "I don't see any payment request on my phone."
    items = [f"{'bill ' + r['bill_id'] if r['kind'] == 'bill' else str(int(r['gb'])) + ' GB data refuel'} "
             f"({_money(s, r['amount'])})" for r in rows]
    return True, f"I see {len(rows)} payment request(s): {', '.join(items)}."


def t_approve_payment_requests(s: Session) -> tuple[bool, str]:
    rows = _pending(s)
    if not rows:
        return True, "There's no payment request on my phone to approve."
    wanted = float(s.facts.get("refuel_gb", 0))
    done, declined = [], []
    for r in rows:
        if r["kind"] == "refuel" and r["gb"] > wanted:
            s.conn.execute("UPDATE charges SET status = 'declined' WHERE id = ?", (r["id"],))
            declined.append(f"the {int(r['gb'])} GB refuel ({_money(s, r['amount'])}): I only want {int(wanted)} GB")
            continue
        s.conn.execute("UPDATE charges SET status = 'approved' WHERE id = ?", (r["id"],))
        if r["kind"] == "bill":
            s.conn.execute("UPDATE bills SET status = 'paid' WHERE id = ?", (r["bill_id"],))
            done.append(f"bill {r['bill_id']} ({_money(s, r['amount'])})")
        else:
            s.conn.execute("UPDATE lines SET refuel_gb = refuel_gb + ? WHERE number = ?", (r["gb"], r["number"]))
            done.append(f"the {int(r['gb'])} GB refuel ({_money(s, r['amount'])})")
    text = f"I approved {', '.join(done)}." if done else ""
    if declined:
        text += f" I declined {'; '.join(declined)}."
    return True, text.strip()


ON = {"on": ("boolean", "true to switch it on, false to switch it off")}

USER_TOOLS = {t.name: t for t in [
    UserTool("check_status_bar", t_check_status_bar, "Look at the status bar at the top of your phone's screen.",
             changes=False),
    UserTool("set_airplane_mode", t_set_airplane_mode, "Switch airplane mode on or off.", params(**ON)),
    UserTool("set_mobile_data", t_set_mobile_data, "Switch mobile data on or off.", params(**ON)),
    UserTool("set_data_roaming", t_set_data_roaming, "Switch data roaming on or off on your phone.", params(**ON)),
    UserTool("check_network_settings", t_check_network_settings,
             "Look at the network settings page (airplane mode, mobile data, data roaming).", changes=False),
    UserTool("set_network_mode", t_set_network_mode, "Change the preferred network type in the network settings.",
             params(mode=("string", f"the network type to pick: '{AUTO_MODE}' or '{SLOW_MODE}'"))),
    UserTool("check_apn_settings", t_check_apn_settings, "Look at the APN (Access Point Names) setting.",
             changes=False),
    UserTool("reset_apn_settings", t_reset_apn_settings, "Reset the APN settings to the default."),
    UserTool("set_apn", t_set_apn, "Type in a new APN name and save it.",
             params(name=("string", "the APN to enter, exactly as the agent gave it"))),
    UserTool("restart_phone", t_restart_phone, "Switch the phone off and on again."),
    UserTool("run_speed_test", t_run_speed_test, "Run a speed test app to see whether the internet works.",
             changes=False),
    UserTool("check_payment_requests", t_check_payment_requests,
             "Look at the payment requests waiting on your phone.", changes=False),
    UserTool("approve_payment_requests", t_approve_payment_requests,
             "Approve the payment requests waiting on your phone (you decline a refuel bigger than you want)."),
]}


# -- how the rule-based customer reads requests --------------------------------------------------

def _do(s: Session, tool: str, **args: Any) -> str:
    _ok, text = s.act(tool, **args)
    return text


def _toggle_intent(tool: str, key: str, label: str):
    def run(s: Session, hit: Hit) -> str | None:
        cur = _dev(s, key) == "1"
        if hit.request and hit.cycle:
            first = _do(s, tool, on=not cur)
            second = _do(s, tool, on=cur)
            return f"{first} Then {second[0].lower()}{second[1:]}"
        if hit.request and hit.state is not None:
            return _do(s, tool, on=hit.state)
        if hit.request:
            return f"Should I turn {label} on or off? Right now it's {'on' if cur else 'off'}."
        if "check_network_settings" in s.done or (key == "airplane" and "check_status_bar" in s.done):
            return None  # already read out the settings page (or the airplane icon) this turn
        s.act("check_network_settings")
        return f"{label[0].upper()}{label[1:]} is switched {'on' if cur else 'off'} on my phone."
    return run


APN_TOKEN = re.compile(r"\b(?![\w.+-]+@)[a-z0-9-]+(?:\.[a-z0-9-]+)+\b")


def _apn_variant(hit: Hit) -> str | None:
    sent = hit.sentence
    if re.search(r"\b(reset|restore|default|factory|revert)\b", sent):
        return "reset"
    if APN_TOKEN.search(sent) and re.search(r"\b(set|change|enter|type|update|edit|put|replace|correct|fix|switch)\b", sent):
        return "set"
    return "check" if hit.query or re.search(r"\b(open|go to)\b", sent) else None


def _apn(s: Session, hit: Hit) -> str:
    v = _apn_variant(hit)
    if v == "reset":
        return _do(s, "reset_apn_settings")
    if v == "set":
        return _do(s, "set_apn", name=APN_TOKEN.search(hit.sentence).group(0))
    return _do(s, "check_apn_settings")


def _mode_variant(hit: Hit) -> str | None:
    sent = hit.sentence
    if re.search(r"\b(set|change|switch|select|pick|choose|put|make)\b", sent) and \
            re.search(r"\b(auto|automatic|5g|4g|lte|recommended|default|fastest)\b", sent):
        return "set"
    return "check" if hit.query else None


def _mode(s: Session, hit: Hit) -> str | None:
    if _mode_variant(hit) == "set":
        return _do(s, "set_network_mode", mode="automatic")
    if "check_network_settings" in s.done:
        return None
    s.act("check_network_settings")
    return f"The preferred network type is '{_dev(s, 'network_mode') or AUTO_MODE}'."


def _settings_variant(hit: Hit) -> str | None:
    """"Go to Settings > Network and pick ..." names the page as the way to a change: only the
    change is asked for, unless they are also asked to read the page out."""
    sent = hit.sentence
    if re.search(r"\b(set|change|switch|turn|pick|select|choose|enable|disable|reset|toggle)\b", sent) and \
            not re.search(r"\b(tell me|read|what|let me know|describe|report)\b", sent):
        return None
    return "check"


def _pay_variant(hit: Hit) -> str | None:
    if re.search(r"\b(approve|accept|authori[sz]e|confirm|pay)\b", hit.sentence):
        return "approve"
    return "check" if hit.query or re.search(r"\b(open|go to)\b", hit.sentence) else None


def _payments(s: Session, hit: Hit) -> str:
    if _pay_variant(hit) == "approve":
        return _do(s, "approve_payment_requests")
    return _do(s, "check_payment_requests")


def _where(s: Session) -> str:
    f = s.facts
    if f["abroad"]:
        return f"Yes, I'm abroad right now: I'm in {f['location']}."
    return f"No, I'm at home in {f['location']}."


def _refuel_amount(s: Session, hit: Hit) -> str:
    n = int(s.facts["refuel_gb"])
    return f"If I need to buy extra data, {n} GB would be enough for me."


ASKING = (r"\?|\b(how (much|many)|would you like|do you want|want to|shall i|should i|prefer|interested|agree|"
          r"okay with|ok with|fine with)\b")


INTENTS = [
    Intent("number", r"\b(phone|mobile|cell|line|cellphone) number\b|\byour number\b|\b(which|what) number\b|"
                     r"\bnumber (of|on|for) (the|your)\b|\bthe number (you|that)\b", 
           lambda s, h: f"My number is {s.facts['number']}.", kind="info"),
    Intent("zip", r"\b(zip|zip code|postcode|post code|postal code|billing address)\b",
           lambda s, h: f"The ZIP code on my account is {s.facts['zip']}.", kind="info"),
    Intent("name", r"\b(your|the account holder's|account holder) (full )?name\b|\bwho am i (speaking|talking|chatting)\b|"
                   r"\bwhat's your name\b|\bwhat is your name\b|\bmay i have your name\b|"
                   r"\bname (on|of) (the|your) account\b",
           lambda s, h: f"I'm {s.name}.", kind="info"),
    Intent("where", r"\b(abroad|overseas|out of the country|travell?ing|on a trip|where are you|which country|"
                    r"what country|your location|located|currently in|at home)\b", lambda s, h: _where(s), kind="info"),
    Intent("model", r"\b(phone|device) (model|make|type)\b|\b(what|which) (phone|device|kind of phone)\b(?! number)|"
                    r"\b(make|model|brand) (and model )?of (your|the) (phone|device|handset)\b|"
                    r"\biphone or (an )?android\b|\bandroid or (an )?iphone\b",
           lambda s, h: f"It's a {s.facts['model']}.", kind="info"),
    Intent("refuel_amount", r"\bhow (much|many)\b.{0,40}\b(data|gb|gigabytes?)\b|\b(data )?refuel\b|\btop[- ]?up\b|"
                            r"\bextra data\b|\bdata (add-on|pack|boost)\b", _refuel_amount, kind="info", when=ASKING),
    Intent("airplane", r"\b(airplane|aeroplane|flight)[- ]?mode\b|\bairplane\b",
           _toggle_intent("set_airplane_mode", "airplane", "airplane mode"), kind="toggle"),
    Intent("mobile_data", r"\b(mobile|cellular|cell) data\b(?! (usage|plan|allowance|limit|used|roaming))|"
                          r"\bdata (toggle|switch)\b",
           _toggle_intent("set_mobile_data", "mobile_data", "mobile data"), kind="toggle"),
    Intent("data_roaming", r"\b(data )?roaming\b", _toggle_intent("set_data_roaming", "data_roaming", "data roaming"),
           kind="toggle"),
    Intent("restart", r"\b(restart|reboot|power[- ]cycle)(ing)?\b|"
                      r"\b(switch|turn|power) (it|your phone|the phone|your device|the device|your handset|the handset) "
                      r"off\b.{0,60}?\b(back )?on\b",
           lambda s, h: _do(s, "restart_phone")),
    Intent("network_mode", r"\b(preferred )?network (type|mode)\b|\bpreferred network\b|\b2g\b", _mode,
           variant=_mode_variant),
    Intent("apn", r"\bapns?\b|\baccess point( name)?s?\b", _apn, variant=_apn_variant),
    Intent("speed_test", r"\bspeed ?test\b|\b(load(ing)?|open(ing)?|visit(ing)?|brows(e|ing) to|try) (up )?"
                         r"(a |any |your |the )?(web ?page|website|site|browser)\b|"
                         r"\bcheck (if|whether|that) (the |your )?(internet|data|mobile data|connection) (is |now )?work|"
                         r"\b(is|does) (the |your )?(internet|data|mobile data|connection) (now )?work|"
                         r"\btest (your|the) (connection|internet|data)\b", lambda s, h: _do(s, "run_speed_test")),
    Intent("status_bar", r"\bstatus bar\b|\bsignal (bars?|strength|indicator|icons?)\b|\bbars\b|"
                         r"\btop of (your|the) screen\b|\bnetwork (name|indicator|icon)\b|\bwhat do you see\b|"
                         r"\bwhat (does|do) (it|the screen|your screen|your phone) (say|show)\b|"
                         r"\bdo you have (any )?(signal|service|coverage|reception|bars)\b|\breception\b",
           lambda s, h: _do(s, "check_status_bar")),
    Intent("settings", r"\b(network|mobile network|cellular|connection|connections) settings\b|"
                       r"\bsettings (screen|page|menu)\b|\bsettings,? (network|connections|mobile network)\b",
           lambda s, h: _do(s, "check_network_settings"), variant=_settings_variant),
    Intent("payments", r"\b(payment|charge|refuel|billing)s? (request|notification|prompt|pop-?up)s?\b|"
                       r"\b(approve|accept|authori[sz]e)\b|\bpay (the|your|that|this) (bill|charge|request)",
           _payments, variant=_pay_variant),
]


def opening(s: Session) -> str:
    trip = " since I arrived here" if s.facts["abroad"] else " since this morning"
    text = (f"Hi, this is {s.first_name}. My mobile data hasn't worked{trip}: nothing loads unless I'm on "
            "Wi-Fi. Can you help me?")
    if s.facts.get("asks_next_bill"):
        text += " And while I have you: how much is my next bill, and when is it due?"
    return text


def brief(s: Session) -> str:
    f = s.facts
    where = f"You are abroad, in {f['location']}." if f["abroad"] else f"You are at home in {f['location']}."
    return (
        f"You are chatting with your mobile carrier's support agent because mobile data on your phone "
        f"(a {f['model']}) stopped working: nothing loads unless you are on Wi-Fi. {where}\n"
        f"Your phone number is {f['number']}; the ZIP code on your account is {f['zip']}. If you must buy extra "
        f"data, you want {int(f['refuel_gb'])} GB, no more. You are not technical: you don't know why it broke and you change settings on your phone "
        f"only when the agent tells you what to change. Start by describing your problem"
        + (", and also ask how much your next bill is and when it is due." if f.get("asks_next_bill") else ".")
    )


# -- seeding -----------------------------------------------------------------------------------

def create(db_path, *, persona: dict, facts: dict, config: dict, customers: list[dict], lines: list[dict],
           bills: list[dict], device: dict, patience: int = 30, seed: int = 0, llm: dict | None = None):
    """Write a mobile-support World's user state. ``facts`` needs ``number, zip, location, abroad,
    model, refuel_gb``; ``config`` needs ``carrier, apn, home_country, currency, price_per_gb,
    max_refuel_gb``; ``device`` needs ``number, airplane, mobile_data, data_roaming, apn, country,
    registered, network, bars, rat, speed`` and optionally ``network_mode`` (flags as "1"/"0")."""
    from longhorizon.apps.user import state

    for key in ("number", "zip", "location", "abroad", "model", "refuel_gb"):
        if key not in facts:
            raise ValueError(f"facts needs {key!r}")
    return state.create(
        db_path, "mobile", persona=persona, facts=facts, patience=patience, seed=seed, llm=llm,
        tables={
            "config": [{"key": k, "value": str(v)} for k, v in config.items()],
            "customers": customers, "lines": lines, "bills": bills,
            "device": [{"key": k, "value": str(v)} for k, v in device.items()],
        },
    )
