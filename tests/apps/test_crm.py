"""The crm app through a real in-process MCP session over a real SQLite CRM."""

import json

import mcp
import pytest

from longhorizon.apps.crm import state
from longhorizon.apps.crm.server import build_server
from longhorizon.core.world import World

ME = "dana@northwind.example"


def seed(root):
    state.create_crm(
        root / "state" / "crm.sqlite", user=ME, today="2026-03-16",
        users=[{"email": ME, "name": "Dana Whitfield", "role": "Account Executive"},
               {"email": "sam@northwind.example", "name": "Sam Ortiz", "role": "Sales Manager"}],
        accounts=[
            {"name": "Acme Holdings", "domain": "acme.example", "industry": "Manufacturing", "tier": "Enterprise",
             "owner": ME},
            {"name": "Globex", "domain": "globex.example", "industry": "Retail", "tier": "SMB",
             "owner": "sam@northwind.example"},
        ],
        contacts=[
            {"account_id": 1, "first_name": "Maria", "last_name": "Lopez", "email": "maria.lopez@acme.example",
             "title": "CFO"},
            {"account_id": 2, "first_name": "Maria", "last_name": "Lopez", "email": "mlopez@globex.example",
             "phone": "415-555-0100"},
            {"account_id": 1, "first_name": "Maria", "last_name": "Lopez", "email": "m.lopez@acme.example",
             "phone": "415-555-0199", "title": "Chief Financial Officer"},
        ],
        deals=[
            {"name": "Acme renewal", "account_id": 1, "contact_id": 3, "stage": "Negotiation", "amount": 48000,
             "close_date": "2026-03-01", "owner": ME},
            {"name": "Globex pilot", "account_id": 2, "stage": "Closed Won", "amount": 5000,
             "close_date": "2026-02-01", "owner": "sam@northwind.example"},
        ],
        activities=[
            {"kind": "call", "subject": "Pricing call", "date": "2026-03-10", "deal_id": 1, "account_id": 1},
            {"kind": "note", "subject": "Met at fair", "date": "2026-02-01", "contact_id": 3, "account_id": 1},
        ],
    )


@pytest.fixture
def cworld(tmp_path):
    return World.build(tmp_path / "w", seed)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


def test_create_crm_is_byte_identical(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("crm").read_bytes() == b.db_path("crm").read_bytes()


def test_create_crm_rejects_bad_seed_data(tmp_path):
    with pytest.raises(ValueError):
        state.create_crm(tmp_path / "x.sqlite", user=ME, today="2026-01-01", users=[{"email": ME, "name": "D"}],
                         accounts=[{"name": "A", "domain": "a.example", "tier": "Gold", "owner": ME}])


async def test_list_users_marks_you(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        users = json.loads(await call(c, "list_users"))
        assert [u["name"] for u in users] == ["Dana Whitfield", "Sam Ortiz"]
        assert users[0]["you"] and "you" not in users[1]


async def test_search_accounts_by_domain_tier_and_owner(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        hits = json.loads(await call(c, "search_accounts", query="acme.example"))
        assert [a["id"] for a in hits["accounts"]] == [1]
        assert json.loads(await call(c, "search_accounts", tier="smb"))["accounts"][0]["name"] == "Globex"
        assert json.loads(await call(c, "search_accounts", owner="Sam"))["total"] == 1
        assert "not one of" in await error(c, "search_accounts", tier="Gold")
        assert "not a CRM user" in await error(c, "search_accounts", owner="nobody")


async def test_get_account_lists_active_contacts_and_deals(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        acc = json.loads(await call(c, "get_account", account_id=1))
        assert [x["id"] for x in acc["contacts"]] == [1, 3] and [d["id"] for d in acc["deals"]] == [1]
        assert "search_accounts" in await error(c, "get_account", account_id=99)


async def test_create_account_validates_and_refuses_duplicates(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "create_account", name="Initech", domain="https://www.Initech.example/",
                          industry="Software", owner="sam@northwind.example")
        assert "Created account 3" in text
        acc = state.account(cworld, 3)
        assert acc["domain"] == "initech.example" and acc["tier"] == "Prospect"
        assert acc["owner"] == "sam@northwind.example"
        assert "already has this name or domain" in await error(c, "create_account", name="Other",
                                                                domain="initech.example")
        assert "web domain" in await error(c, "create_account", name="X", domain="not a domain")
        assert "tier" in await error(c, "create_account", name="X", domain="x.example", tier="Gold")


async def test_update_account_reports_changes(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "update_account", account_id=2, tier="Mid-Market", owner="Dana")
        assert "tier" in text and state.account(cworld, 2)["owner"] == ME
        assert "nothing" in await call(c, "update_account", account_id=2, tier="mid market")


async def test_search_contacts_matches_words_and_hides_merged(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        hits = json.loads(await call(c, "search_contacts", query="maria lopez"))
        assert hits["total"] == 3
        hits = json.loads(await call(c, "search_contacts", query="MLOPEZ@globex.example"))
        assert [h["id"] for h in hits["contacts"]] == [2] and hits["contacts"][0]["account"] == "Globex"
        hits = json.loads(await call(c, "search_contacts", account_id=1, limit=1))
        assert hits["next_offset"] == 1
        await call(c, "merge_contacts", keep_id=1, duplicate_id=3)
        assert json.loads(await call(c, "search_contacts", query="lopez"))["total"] == 2
        merged = json.loads(await call(c, "search_contacts", query="lopez", include_merged=True))
        assert merged["contacts"][2]["status"] == "merged" and merged["contacts"][2]["merged_into"] == 1


async def test_get_contact_has_activities_and_deals(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        got = json.loads(await call(c, "get_contact", contact_id=3))
        assert got["activities"][0]["subject"] == "Met at fair" and got["deals"][0]["id"] == 1


async def test_create_contact_validates_and_refuses_taken_email(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "create_contact", account_id=2, first_name=" Lee ", last_name="Park",
                          email="Lee.Park@Globex.example", title="Buyer", phone="+1 (415) 555-0123")
        assert "Created contact 4" in text
        got = state.contact(cworld, 4)
        assert got["email"] == "lee.park@globex.example" and got["first_name"] == "Lee"
        assert "contact 4" in await error(c, "create_contact", account_id=2, first_name="L", last_name="P",
                                          email="lee.park@globex.example")
        assert "valid email" in await error(c, "create_contact", account_id=2, first_name="L", last_name="P",
                                            email="nope")
        assert "phone" in await error(c, "create_contact", account_id=2, first_name="L", last_name="P",
                                      email="l@globex.example", phone="call me")
        assert "empty" in await error(c, "create_contact", account_id=2, first_name=" ", last_name="P",
                                      email="l@globex.example")
        assert "no account" in await error(c, "create_contact", account_id=9, first_name="L", last_name="P",
                                           email="l@globex.example")


async def test_update_contact_changes_fields_and_checks_email(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "update_contact", contact_id=1, title="VP Finance", phone="415 555 0111")
        assert "title" in text and state.contact(cworld, 1)["phone"] == "415 555 0111"
        assert "merge_contacts" in await error(c, "update_contact", contact_id=1, email="m.lopez@acme.example")
        assert "nothing" in await call(c, "update_contact", contact_id=1, title="VP Finance")


async def test_merge_moves_activities_and_deals_and_fills_blanks(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "merge_contacts", keep_id=1, duplicate_id=3)
        assert "moved 1 activities and 1 deals" in text and "phone" in text
        keep, dup = state.contact(cworld, 1), state.contact(cworld, 3)
        assert keep["phone"] == "415-555-0199" and keep["title"] == "CFO"
        assert dup["status"] == "merged" and dup["merged_into"] == 1
        assert state.deal(cworld, 1)["contact_id"] == 1
        assert [a["id"] for a in state.activities(cworld, contact_id=1)] == [2]
        assert "merged into contact 1" in await error(c, "merge_contacts", keep_id=2, duplicate_id=3)
        assert "same" in await error(c, "merge_contacts", keep_id=2, duplicate_id=2)
        assert "merged into" in await error(c, "update_contact", contact_id=3, title="x")


async def test_search_deals_filters(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        assert json.loads(await call(c, "search_deals", open_only=True))["deals"][0]["id"] == 1
        hits = json.loads(await call(c, "search_deals", close_to="2026-02-15"))
        assert [d["id"] for d in hits["deals"]] == [2]
        assert json.loads(await call(c, "search_deals", stage="closed-won"))["total"] == 1
        assert json.loads(await call(c, "search_deals", query="acme"))["total"] == 1
        assert "pipeline stage" in await error(c, "search_deals", stage="Won")
        assert "YYYY-MM-DD" in await error(c, "search_deals", close_from="March")


async def test_get_deal_has_activities(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        d = json.loads(await call(c, "get_deal", deal_id=1))
        assert d["account"] == "Acme Holdings" and d["activities"][0]["subject"] == "Pricing call"
        assert "search_deals" in await error(c, "get_deal", deal_id=42)


async def test_update_deal_validates_stage_amount_and_date(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "update_deal", deal_id=1, stage="closed won", amount=51250.5, close_date="2026-03-12")
        assert "now closed" in text
        d = state.deal(cworld, 1)
        assert (d["stage"], d["amount"], d["close_date"]) == ("Closed Won", 51250.5, "2026-03-12")
        assert "pipeline stage" in await error(c, "update_deal", deal_id=1, stage="Won")
        assert ">= 0" in await error(c, "update_deal", deal_id=1, amount=-5)
        assert "YYYY-MM-DD" in await error(c, "update_deal", deal_id=1, close_date="12/03/2026")
        assert "valid number" in await error(c, "update_deal", deal_id=1, amount="lots")


async def test_create_deal(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "create_deal", name="Globex expansion", account_id=2, amount=12000,
                          close_date="2026-06-30", stage="Qualification")
        assert "Created deal 3" in text and state.deal(cworld, 3)["owner"] == ME


async def test_log_and_list_activities(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "log_activity", kind="Meeting", subject="Expo booth", body="Wants a demo",
                          contact_id=2, date="2026-03-14")
        assert "account 2" in text
        a = state.activities(cworld, contact_id=2)[0]
        assert (a["kind"], a["date"], a["account_id"], a["author"]) == ("meeting", "2026-03-14", 2, ME)
        await call(c, "log_activity", kind="note", subject="Follow up", deal_id=1)
        assert state.activities(cworld, deal_id=1)[-1]["date"] == "2026-03-16"
        listed = json.loads(await call(c, "list_activities", since="2026-03-11"))
        assert [x["subject"] for x in listed["activities"]] == ["Follow up", "Expo booth"]
        assert "kind" in await error(c, "log_activity", kind="lunch", subject="x", contact_id=1)
        assert "at least one" in await error(c, "log_activity", kind="note", subject="x")
        assert "empty" in await error(c, "log_activity", kind="note", subject=" ", contact_id=1)


async def test_writes_advance_the_clock(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        await call(c, "update_contact", contact_id=1, title="A")
        await call(c, "update_contact", contact_id=2, title="B")
    assert state.contact(cworld, 1)["updated"] == "2026-03-16T09:00:00"
    assert state.contact(cworld, 2)["updated"] == "2026-03-16T09:01:00"


async def test_missing_crm_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no CRM" in await error(c, "list_users")
