"""The `user` app: a simulated person over shared state, through real in-process MCP sessions.

Covers the common machinery (conversation and action logs, patience, worlds without a person),
each domain's back-office tools (happy and error paths), how the rule-based person reads
requests (tolerant phrasing, negation, the agent describing its own work, "it" across
sentences), and the optional LLM-played person against the OpenAI-compatible stand-in.
"""

import json

import mcp
import pytest
from mcp.shared.exceptions import MCPError

from longhorizon.apps import build_server as build_app
from longhorizon.apps.user import identity, mobile, onboarding, state
from longhorizon.apps.user.base import find_hits
from longhorizon.apps.user.server import build_server
from longhorizon.apps.user.simulator import ENV_BASE_URL, ENV_MODEL, UserLLM
from longhorizon.core.world import World
from longhorizon.testing.standin_llm import BrainError, ScriptedBrain, StandinLLM

NUMBER = "+1 415-555-0142"
KID = "+1 415-555-0177"


def seed_mobile(root, *, airplane=1, mobile_data=1, apn="internet.telvio.net", suspended=True, abroad=False,
                roaming=False, exhausted=False, patience=30, llm=None, network_mode=mobile.AUTO_MODE):
    mobile.create(
        root / "state" / "user.sqlite",
        persona={"name": "Dana Reyes", "style": "Friendly."},
        facts={"number": NUMBER, "zip": "94110", "location": "Lisbon, Portugal" if abroad else "Oakland, CA",
               "abroad": abroad, "model": "Pixel 8", "refuel_gb": 2},
        config={"carrier": "Telvio", "apn": "internet.telvio.net", "home_country": "US", "currency": "USD",
                "price_per_gb": 5, "max_refuel_gb": 5},
        customers=[{"id": "C-1", "name": "Dana Reyes", "email": "dana@example.com",
                    "address": "1 Main St, Oakland, CA 94110", "since": "2019-04-01"},
                   {"id": "C-2", "name": "Dana Reyes-Ortiz", "email": "dro@example.com",
                    "address": "9 Elm St, Reno, NV 89501", "since": "2020-01-01"}],
        lines=[{"number": NUMBER, "customer_id": "C-1", "label": "Dana's phone", "plan": "Smart 10GB",
                "status": "suspended" if suspended else "active", "suspend_reason": "unpaid bill" if suspended else "",
                "roaming": roaming, "data_used_gb": 10.0 if exhausted else 3.0, "data_limit_gb": 10.0},
               {"number": KID, "customer_id": "C-1", "label": "Tablet", "plan": "Start 5GB", "status": "active",
                "roaming": False, "data_used_gb": 1.0, "data_limit_gb": 5.0},
               {"number": "+1 775-555-0100", "customer_id": "C-2", "label": "Phone", "plan": "Start 5GB",
                "status": "active", "roaming": False, "data_used_gb": 1.0, "data_limit_gb": 5.0}],
        bills=[{"id": "B-1", "number": NUMBER, "period": "2026-01", "amount": 35.0, "due": "2026-02-10",
                "status": "overdue" if suspended else "paid"},
               {"id": "B-2", "number": NUMBER, "period": "2026-02", "amount": 35.0, "due": "2026-03-20",
                "status": "open"},
               {"id": "B-3", "number": KID, "period": "2026-01", "amount": 25.0, "due": "2026-02-10",
                "status": "paid"}],
        device={"number": NUMBER, "airplane": airplane, "mobile_data": mobile_data, "data_roaming": 0, "apn": apn,
                "country": "PT" if abroad else "US", "registered": 0, "network": "Vodafone PT" if abroad else "Telvio",
                "bars": 3, "rat": "LTE", "speed": "84.2/11.6/27", "network_mode": network_mode},
        patience=patience, seed=7, llm=llm,
    )


@pytest.fixture
def mworld(tmp_path):
    return World.build(tmp_path / "m", seed_mobile)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


async def say(c, text):
    return await call(c, "send_message", text=text)


def device(world):
    with state_conn(world) as conn:
        return dict(conn.execute("SELECT key, value FROM device").fetchall())


class state_conn:
    def __init__(self, world):
        self.world = world

    def __enter__(self):
        self.conn = self.world.db("user")
        return self.conn

    def __exit__(self, *exc):
        self.conn.close()


def user_tools(world):
    return [a["tool"] for a in state.actions(world, actor="user")]


# -- common machinery ---------------------------------------------------------------------------

def test_create_is_byte_identical(tmp_path):
    a = World.build(tmp_path / "a", seed_mobile)
    b = World.build(tmp_path / "b", seed_mobile)
    assert a.db_path("user").read_bytes() == b.db_path("user").read_bytes()


def test_create_refuses_unknown_domain_and_existing_file(tmp_path):
    with pytest.raises(ValueError, match="unknown user domain"):
        state.create(tmp_path / "x.sqlite", "bank", persona={"name": "A B"}, facts={})
    seed_mobile(tmp_path)
    with pytest.raises(FileExistsError):
        seed_mobile(tmp_path)


async def test_tools_depend_on_the_domain_and_hide_the_persons_own_tools(mworld, tmp_path):
    async with mcp.Client(build_server(mworld)) as c:
        names = [t.name for t in (await c.list_tools()).tools]
    assert names[0] == "send_message" and "resume_line" in names
    assert not set(names) & set(mobile.USER_TOOLS), "the customer's own tools must not reach the agent"
    iworld = World.build(tmp_path / "i", seed_identity)
    async with mcp.Client(build_server(iworld)) as c:
        inames = [t.name for t in (await c.list_tools()).tools]
    assert "reset_mfa" in inames and "resume_line" not in inames


async def test_world_without_a_person_has_only_an_erroring_send_message(world):
    async with mcp.Client(build_app("user", world)) as c:
        names = [t.name for t in (await c.list_tools()).tools]
        assert names == ["send_message"]
        assert "no one to talk to" in await error(c, "send_message", text="hello?")


async def test_send_message_validates_text(mworld):
    async with mcp.Client(build_server(mworld)) as c:
        assert "must not be empty" in await error(c, "send_message", text="   ")
        assert "too long" in await error(c, "send_message", text="x" * 5000)
    assert state.conversation(mworld) == []


async def test_conversation_and_actions_are_logged_with_who_and_when(mworld):
    async with mcp.Client(build_server(mworld)) as c:
        first = await say(c, "Hi! What's the phone number of the line that isn't working?")
        assert "mobile data hasn't worked" in first and NUMBER in first
        await call(c, "send_payment_request", bill_id="B-1")
        await say(c, "Please turn off airplane mode.")
    convo = state.conversation(mworld)
    assert [m["role"] for m in convo] == ["agent", "user", "agent", "user"]
    log = state.actions(mworld)
    assert [(a["actor"], a["tool"], a["message"]) for a in log] == [
        ("agent", "send_payment_request", 1), ("user", "set_airplane_mode", 2)]
    assert log[1]["arguments"] == {"on": False} and log[1]["ok"]


async def test_patience_runs_out_and_then_nothing_happens(tmp_path):
    w = World.build(tmp_path / "p", lambda r: seed_mobile(r, patience=2))
    async with mcp.Client(build_server(w)) as c:
        await say(c, "Hello")
        await say(c, "What's your number?")
        gone = await say(c, "Please turn off airplane mode.")
        assert "have to go" in gone
        assert "left the chat" in await say(c, "Please turn off airplane mode.")
    assert user_tools(w) == []
    assert device(w)["airplane"] == "1"


# -- how the rule-based person reads requests ----------------------------------------------------

def hits(text):
    return [(h.intent.name, h.request, h.state, h.cycle) for h in find_hits(mobile.INTENTS, text)]


@pytest.mark.parametrize("text, expected", [
    ("Please turn off airplane mode.", [("airplane", True, False, False)]),
    ("Could you switch Airplane Mode OFF on your phone?", [("airplane", True, False, False)]),
    ("Disable flight mode please", [("airplane", True, False, False)]),
    ("Is airplane mode on? If so, please turn it off.", [("airplane", True, False, False)]),
    ("If airplane mode is on, turn it off", [("airplane", True, False, False)]),
    ("Turn airplane mode off and mobile data on.", [("airplane", True, False, False), ("mobile_data", True, True, False)]),
    ("Toggle airplane mode", [("airplane", True, None, True)]),
    ("Please turn airplane mode on and then off again.", [("airplane", True, None, True)]),
    ("Make sure mobile data is turned on.", [("mobile_data", True, True, False)]),
    ("Mobile data is off: please switch mobile data on.", [("mobile_data", True, True, False)]),
])
def test_toggle_phrasings(text, expected):
    assert hits(text) == expected


@pytest.mark.parametrize("text", [
    "Don't turn on airplane mode.",
    "I've enabled roaming on your line.",
    "Sorry to hear your mobile data isn't working.",
    "That airplane icon means airplane mode is on.",
    "There is no need to restart your phone.",
])
def test_mentions_that_ask_nothing_do_nothing(text):
    assert [h for h in hits(text) if h[1]] == []


def test_a_statement_and_a_request_in_one_message():
    assert hits("I have resumed your line, so please restart your phone now.") == [("restart", True, None, False)]


def test_did_you_question_is_not_a_request():
    assert hits("Did you restart your phone?") == [("restart", False, None, False)]


async def test_unclear_messages_get_a_clear_answer_and_no_action(mworld):
    async with mcp.Client(build_server(mworld)) as c:
        await say(c, "Hello")
        assert "don't understand" in await say(c, "Could you do the thing with the settings thingy?")
        assert "good to know" in await say(c, "Your next bill is 35.00 USD.")
        assert "wait" in await say(c, "Let me check your account, one moment.")
    assert user_tools(mworld) == []


async def test_negated_request_is_not_performed(mworld):
    async with mcp.Client(build_server(mworld)) as c:
        await say(c, "Hello")
        await say(c, "Please don't restart your phone yet, just tell me what the status bar shows.")
    assert user_tools(mworld) == ["check_status_bar"]


# -- mobile: the customer desk ----------------------------------------------------------------------

async def test_find_customer_by_number_or_name(mworld):
    async with mcp.Client(build_server(mworld)) as c:
        by_number = json.loads(await call(c, "find_customer", query="(415) 555 0142"))
        assert by_number == [{"customer_id": "C-1", "name": "Dana Reyes", "lines": [NUMBER, KID]}]
        assert len(json.loads(await call(c, "find_customer", query="dana reyes"))) == 2
        assert "must not be empty" in await error(c, "find_customer", query=" ")
        assert "no customer" in await error(c, "get_customer", customer_id="C-9")
        assert "no line" in await error(c, "get_line", number="555")
        line = json.loads(await call(c, "get_line", number="4155550142"))
        assert line["status"] == "suspended" and line["data_remaining_gb"] == 7.0
        bills = json.loads(await call(c, "list_bills", customer_id="C-1"))
        assert {b["bill_id"] for b in bills} == {"B-1", "B-2", "B-3"}
        assert "no customer" in await error(c, "list_bills", customer_id="nope")
        assert "Identify the line" in await call(c, "get_support_policy")


async def test_suspended_line_needs_the_customer_to_pay_then_a_restart(mworld):
    async with mcp.Client(build_server(mworld)) as c:
        await say(c, "Hello")
        await say(c, "Please turn off airplane mode.")
        assert "SOS only" in await say(c, "What does the status bar show?")
        assert "overdue bills (B-1)" in await error(c, "resume_line", number=NUMBER)
        assert "already paid" in await error(c, "send_payment_request", bill_id="B-3")
        assert "no bill" in await error(c, "send_payment_request", bill_id="B-9")
        await call(c, "send_payment_request", bill_id="B-1")
        assert "already waiting" in await error(c, "send_payment_request", bill_id="B-1")
        assert "approved bill B-1" in await say(c, "I've sent a payment request to your phone, please approve it.")
        assert json.loads(await call(c, "list_charges", number=NUMBER))[0]["status"] == "approved"
        await call(c, "resume_line", number=NUMBER)
        assert "is not suspended" in await error(c, "resume_line", number=NUMBER)
        assert mobile.status(mworld)["service"] == "none", "the phone must re-register first"
        await say(c, "Please restart your phone.")
        assert "speed test worked" in await say(c, "Now please run a speed test.")
    assert mobile.status(mworld)["internet"]


async def test_roaming_refuel_apn_and_network_mode(tmp_path):
    w = World.build(tmp_path / "r", lambda r: seed_mobile(r, airplane=0, suspended=False, abroad=True,
                                                          exhausted=True, apn="wap.telvio.net",
                                                          network_mode=mobile.SLOW_MODE))
    async with mcp.Client(build_server(w)) as c:
        await say(c, "Hello")
        assert "abroad" in await say(c, "Are you travelling at the moment?")
        await call(c, "set_line_roaming", number=NUMBER, enabled=True)
        assert "already enabled" in await call(c, "set_line_roaming", number=NUMBER, enabled=True)
        assert "whole number from 1 to 5" in await error(c, "add_data_refuel", number=NUMBER, gb=9)
        await call(c, "add_data_refuel", number=NUMBER, gb=3)
        assert "already waiting" in await error(c, "add_data_refuel", number=NUMBER, gb=2)
        assert "declined the 3 GB refuel" in await say(c, "Please approve the refuel on your phone.")
        assert "2 GB" in await say(c, "How much extra data would you like?")
        await call(c, "add_data_refuel", number=NUMBER, gb=2)
        await say(c, "Please approve it on your phone.")
        assert "wap.telvio.net" in await say(c, "Which APN is selected in your APN settings?")
        await say(c, "Please reset the APN settings to default.")
        await say(c, "Please switch data roaming on.")
        assert "2G only" in await say(c, "Which preferred network type is selected?")
        await say(c, "Please set the preferred network type to automatic.")
        await say(c, "Please restart your phone.")
        assert "speed test worked" in await say(c, "Run a speed test please.")
        assert "unknown cause codes" in await error(c, "record_resolution", number=NUMBER, causes=["gremlins"], note="x")
        assert "at least one" in await error(c, "record_resolution", number=NUMBER, causes=[], note="x")
        assert "note must not be empty" in await error(c, "record_resolution", number=NUMBER,
                                                       causes=["data_exhausted"], note=" ")
        await call(c, "record_resolution", number=NUMBER, causes=["data_exhausted", "roaming_not_enabled"], note="ok")
    assert json.loads(state.rows(w, "resolutions")[0]["causes"]) == ["data_exhausted", "roaming_not_enabled"]
    line = next(r for r in state.rows(w, "lines") if r["number"] == NUMBER)
    assert line["refuel_gb"] == 2 and line["roaming"] == 1


# -- identity: the helpdesk console -----------------------------------------------------------------

IFACTS = {"account_id": "U1", "employee_id": "E100200", "username": "ana.lima", "department": "Finance",
          "emails": ["ana88@gmail.com", "ana.lima@proton.me"], "extra_email": "ana.lima@proton.me",
          "old_mobile": "+1 212-555-0199", "lost_device": "iPhone 14", "new_device": "Pixel 8",
          "kept_devices": "laptop", "old_password": "maple1988", "words": ["maple", "comet", "ember", "willow"],
          "year": "1988", "habit_digits": False}


def seed_identity(root):
    identity.create(
        root / "state" / "user.sqlite", persona={"name": "Ana Lima"}, facts=IFACTS,
        config={"company": "Acme", "min_length": 14, "require_symbol": 1, "ban_name": 1},
        accounts=[{"id": "U1", "name": "Ana Lima", "employee_id": "E100200", "username": "ana.lima",
                   "department": "Finance", "title": "Analyst", "recovery_email": "ana88@gmail.com",
                   "mobile": "+1 212-555-0199", "status": "locked", "mfa": "enrolled", "mfa_device": "iPhone 14",
                   "password": "maple1988"},
                  {"id": "U2", "name": "Ana Lima", "employee_id": "E999000", "username": "ana.lima2",
                   "department": "Legal", "title": "Lead", "recovery_email": "lima.a@yahoo.com",
                   "mobile": "+1 212-555-0111", "status": "active", "mfa": "enrolled", "mfa_device": "Pixel 7",
                   "password": "x"}],
        sessions=[{"id": "S-1", "account_id": "U1", "device": "iPhone 14 (iOS 17)", "app": "Mail", "location": "NY",
                   "last_seen": "2026-03-10T10:00", "active": 1},
                  {"id": "S-2", "account_id": "U1", "device": "ThinkPad T14", "app": "Browser", "location": "NY",
                   "last_seen": "2026-03-10T11:00", "active": 1}],
        tickets=[{"id": "TKT-1", "requester": "Ana Lima", "subject": "Lost phone", "body": "help", "status": "open"}],
        seed=3,
    )


async def test_identity_console_and_the_employees_steps(tmp_path):
    w = World.build(tmp_path / "i", seed_identity)
    async with mcp.Client(build_server(w)) as c:
        assert "ON FILE" in await call(c, "get_helpdesk_policy")
        assert "TKT-" in await error(c, "get_ticket", ticket_id="nope")
        assert len(json.loads(await call(c, "find_accounts", query="ana lima"))) == 2
        assert json.loads(await call(c, "get_account", account_id="U1"))["status"] == "locked"
        assert "no account" in await error(c, "get_account", account_id="U9")
        opening = await say(c, "Hi Ana, what is your employee ID?")
        assert "E100200" in opening and "ana.lima@proton.me" in opening
        assert 'must be "email" or "sms"' in await error(c, "send_verification_code", account_id="U1", channel="fax")
        assert "no code is waiting" in await error(c, "verify_code", account_id="U1", code="1")
        await call(c, "send_verification_code", account_id="U1", channel="sms")
        assert "iPhone 14 I lost" in await say(c, "Please check your text messages and read me the code.")
        await call(c, "send_verification_code", account_id="U1", channel="email")
        reply = await say(c, "I've sent a code to your recovery email. Please check your email and read me the code.")
        code = reply.split("it's ")[1][:6]
        assert "does not match" in await call(c, "verify_code", account_id="U1", code="000000")
        assert "Code verified" in await call(c, "verify_code", account_id="U1", code=code)
        assert "locked" in await say(c, "Please try to sign in.")
        await call(c, "revoke_session", session_id="S-1")
        assert "already ended" in await error(c, "revoke_session", session_id="S-1")
        await call(c, "reset_mfa", account_id="U1")
        assert "no authenticator" in await error(c, "reset_mfa", account_id="U1")
        await call(c, "unlock_account", account_id="U1")
        assert "not locked" in await error(c, "unlock_account", account_id="U1")
        assert "don't see anything" in await say(c, "Please scan the QR code with your authenticator app.")
        await call(c, "send_password_reset_link", account_id="U1")
        refused = await say(c, "Please open the reset link and set a new password. It must be at least 14 characters.")
        assert "doesn't meet" in refused
        ok = await say(c, "Please set a new password again: at least 14 characters, at least one upper-case letter, "
                          "a lower-case letter, a digit and a symbol, and it must not contain your name or username.")
        assert "has been changed" in ok
        assert "QR code" in await say(c, "Now please sign in.")
        assert "Authenticator app added" in await say(c, "Please scan the QR code with the authenticator app.")
        assert "I'm in" in await say(c, "Please sign in once more.")
        assert "resolution_code must be one of" in await error(c, "resolve_ticket", ticket_id="TKT-1",
                                                               resolution_code="done", note="x")
        await call(c, "resolve_ticket", ticket_id="tkt-1", resolution_code="mfa_reset_lost_device", note="done")
    acct = next(a for a in state.rows(w, "accounts") if a["id"] == "U1")
    assert acct["mfa"] == "enrolled" and acct["mfa_device"] == "Pixel 8" and acct["password_changed"] == 1
    assert [a["ok"] for a in state.actions(w, actor="user", tool="set_new_password")] == [False, True]


def test_password_rules_are_read_from_what_the_agent_said():
    rules = identity.known_rules(["Choose a new password: at least 16 characters, with upper-case letters, a "
                                  "number and a symbol; it must not contain your name."])
    assert rules == {"length": 16, "upper": True, "digit": True, "symbol": True, "no_name": True, "no_reuse": False}
    assert identity.known_rules(["Please enter the 6-digit code."])["digit"] is False
    pw = identity.compose("Ana", IFACTS, rules)
    assert len(pw) >= 16 and "ana" not in pw.lower()
    assert identity.compose("Ana", IFACTS, identity.known_rules([])) == "maple1988"


# -- onboarding: the HR system ----------------------------------------------------------------------

OFACTS = {"hire_id": "H-1", "personal_email": "sam.ortiz7@gmail.com", "start_date": "2026-03-09",
          "start_day_text": "Monday, March 9, 2026", "laptop": "mac", "office": "Austin",
          "home_address": "12 Oak St, Reno, NV 89501", "old_password": "pepper1999",
          "words": ["pepper", "comet", "ember", "willow"], "year": "1999", "habit_digits": True}


def seed_onboarding(root):
    onboarding.create(
        root / "state" / "user.sqlite", persona={"name": "Sam Ortiz"}, facts=OFACTS,
        config={"company": "Acme", "email_domain": "acme.example", "min_length": 12, "require_symbol": 0,
                "ban_name": 0, "team_groups": {"Sales": ["sales", "crm-users"]}, "power_teams": [],
                "laptops": {"power": {"mac": "MBP-16", "windows": "TP-P1"},
                            "standard": {"mac": "MBA-13", "windows": "TP-X1C"}},
                "monitor": "MON-27", "headset": "HS-200", "orientation_room": "Room A"},
        hires=[{"id": "H-1", "name": "Sam Ortiz", "personal_email": "sam.ortiz7@gmail.com", "role": "AE",
                "team": "Sales", "manager": "Lee Park", "manager_email": "lee.park@acme.example",
                "start_date": "2026-03-09", "work_mode": "remote", "office": "Austin"},
               {"id": "H-2", "name": "Sam Chu", "personal_email": "sc@gmail.com", "role": "AE", "team": "Sales",
                "manager": "Lee Park", "manager_email": "lee.park@acme.example", "start_date": "2026-03-16",
                "work_mode": "office", "office": "Austin"}],
        directory=[{"username": "sam.ortiz", "name": "Sam Ortiz", "team": "Finance"}],
        catalog=[{"sku": "MBA-13", "name": "MacBook Air", "kind": "laptop", "notes": ""},
                 {"sku": "HS-200", "name": "Headset", "kind": "audio", "notes": ""}],
        seed=5,
    )


async def test_onboarding_system_and_the_new_hires_steps(tmp_path):
    w = World.build(tmp_path / "o", seed_onboarding)
    async with mcp.Client(build_server(w)) as c:
        assert "Contract first" in await call(c, "get_onboarding_policy")
        assert [h["hire_id"] for h in json.loads(await call(c, "list_new_hires"))] == ["H-1", "H-2"]
        assert "no new hire" in await error(c, "get_new_hire", hire_id="H-9")
        assert "haven't received" in await say(c, "Hi Sam! Could you sign your contract?")
        await call(c, "send_contract", hire_id="H-1")
        prefs = await say(c, "I've sent your contract, please sign it. Would you prefer a Mac or Windows? "
                             "Where should we ship your equipment?")
        assert "signed it as Sam Ortiz" in prefs and "Mac" in prefs and "12 Oak St" in prefs
        assert "already signed" in await error(c, "send_contract", hire_id="H-1")
        assert "unknown groups" in await error(c, "create_account", hire_id="H-1", groups=["admins"])
        made = await call(c, "create_account", hire_id="H-1", groups=["all-staff", "Sales", "crm-users", "vpn-users"])
        assert "sam.ortiz2@acme.example" in made, "sam.ortiz is taken, so the system adds a number"
        assert "already has an account" in await error(c, "create_account", hire_id="H-1", groups=["all-staff"])
        assert "isn't activated" in await say(c, "Please set up MFA with your authenticator app.")
        assert "Account activated" in await say(c, "Please activate your account: choose a password of at least 12 "
                                                   "characters with an upper-case letter and a digit.")
        assert "MFA enabled" in await say(c, "Please set up MFA by scanning the QR code.")
        assert "no catalog item" in await error(c, "request_equipment", hire_id="H-1", sku="XYZ", ship_to="home")
        assert "must not be empty" in await error(c, "request_equipment", hire_id="H-1", sku="HS-200", ship_to=" ")
        await call(c, "request_equipment", hire_id="H-1", sku="HS-200", ship_to="12 Oak St, Reno, NV 89501")
        await call(c, "cancel_equipment_request", request_id=1)
        assert "no open equipment request" in await error(c, "cancel_equipment_request", request_id=1)
        await call(c, "set_account_groups", username="sam.ortiz2", groups=["all-staff", "sales"])
        assert "no account" in await error(c, "set_account_groups", username="sam.ortiz", groups=["sales"])
        status = json.loads(await call(c, "get_onboarding_status", hire_id="h-1"))
    assert status["contract"] == "signed" and status["account"]["mfa_enrolled"]
    assert status["account"]["groups"] == ["all-staff", "sales"]
    assert status["equipment"][0]["status"] == "cancelled"


# -- the LLM-played person (against the OpenAI-compatible stand-in) ---------------------------------

def _tool_call(name, args):
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": f"u_{name}", "type": "function", "function": {"name": name, "arguments": args}}]}


def _last_tool_result(request):
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "tool")


async def test_llm_user_calls_its_tools_and_keeps_its_history(mworld):
    brain = ScriptedBrain([
        _tool_call("set_airplane_mode", {"on": False}),
        "Done, airplane mode is off now.",
        _tool_call("check_status_bar", {}),
        lambda req: f"Here's what I see: {_last_tool_result(req)}",
    ])
    with StandinLLM(brain) as srv:
        llm = UserLLM(srv.base_url, srv.model, api_key="", max_retries=0)
        async with mcp.Client(build_server(mworld, llm=llm)) as c:
            assert await say(c, "Please turn off airplane mode.") == "Done, airplane mode is off now."
            assert "SOS only" in await say(c, "What does your status bar show?")
        first, last = srv.requests[0], srv.requests[-1]
    assert device(mworld)["airplane"] == "0"
    assert [(a["actor"], a["tool"]) for a in state.actions(mworld)] == [("user", "set_airplane_mode"),
                                                                        ("user", "check_status_bar")]
    tools = {t["function"]["name"] for t in first["tools"]}
    assert tools == set(mobile.USER_TOOLS)
    assert first["messages"][0]["role"] == "system" and "Dana Reyes" in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "user", "content": "Please turn off airplane mode."}
    contents = [m.get("content") for m in last["messages"]]
    assert "Done, airplane mode is off now." in contents, "the second turn sees the first"
    assert len(state.rows(mworld, "llm_messages", "seq")) == 9


async def test_llm_user_from_environment_and_from_the_world(tmp_path, monkeypatch):
    with StandinLLM(ScriptedBrain(["Hi! My data is down."])) as srv:
        monkeypatch.setenv(ENV_BASE_URL, srv.base_url)
        monkeypatch.setenv(ENV_MODEL, srv.model)
        w = World.build(tmp_path / "env", seed_mobile)
        async with mcp.Client(build_app("user", w)) as c:
            assert await say(c, "Hello") == "Hi! My data is down."
        monkeypatch.delenv(ENV_BASE_URL)
        monkeypatch.delenv(ENV_MODEL)
        w2 = World.build(tmp_path / "meta", lambda r: seed_mobile(r, llm={"base_url": srv.base_url,
                                                                           "model": srv.model}))
        async with mcp.Client(build_app("user", w2)) as c:
            assert await say(c, "Hello") == "Done."
        assert len(srv.requests) == 2


async def test_llm_user_failure_is_an_infrastructure_error_not_a_tool_error(mworld):
    def broken(request):
        raise BrainError("model exploded", status=400)

    with StandinLLM(broken) as srv:
        llm = UserLLM(srv.base_url, srv.model, api_key="", max_retries=0)
        async with mcp.Client(build_server(mworld, llm=llm)) as c:
            with pytest.raises(MCPError, match="infrastructure"):
                await c.call_tool("send_message", {"text": "Hello"})
    assert state.conversation(mworld) == [], "nothing is recorded for a turn the infrastructure lost"


async def test_llm_user_bad_tool_calls_come_back_as_errors_to_the_model(mworld):
    brain = ScriptedBrain([_tool_call("hack_the_network", {}), _tool_call("set_apn", {"name": 5}),
                           lambda req: _last_tool_result(req)])
    with StandinLLM(brain) as srv:
        llm = UserLLM(srv.base_url, srv.model, api_key="", max_retries=0)
        async with mcp.Client(build_server(mworld, llm=llm)) as c:
            reply = await say(c, "Please set your APN.")
        assert "no tool named 'hack_the_network'" in srv.requests[1]["messages"][-1]["content"]
    assert reply.startswith("Error: bad arguments for set_apn")
    assert device(mworld)["apn"] == "internet.telvio.net"
