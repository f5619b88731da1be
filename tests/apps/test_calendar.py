"""The calendar app through a real in-process MCP session over a real SQLite calendar."""

import json

import mcp
import pytest

from longhorizon.apps.calendar import state
from longhorizon.apps.calendar.server import build_server
from longhorizon.core.world import World

OWNER = "dana@northwind.example"
SAM = "sam@northwind.example"
LEE = "lee@northwind.example"


def seed(root):
    state.create_calendar(
        root / "state" / "calendar.sqlite", OWNER,
        people=[
            {"email": OWNER, "name": "Dana Whitfield"},
            {"email": SAM, "name": "Sam Ortiz", "work_start": "08:00", "work_end": "16:00", "timezone": "Europe/Lisbon"},
            {"email": LEE, "name": "Lee Samuels", "work_start": "10:00", "work_end": "18:00"},
        ],
        events=[
            {"title": "Standup", "start": "2026-03-02T09:00", "end": "2026-03-02T09:15", "attendees": [SAM, LEE]},
            {"title": "Sam's dentist", "start": "2026-03-02T13:00", "end": "2026-03-02T14:00", "organizer": SAM},
            {"title": "Old sync", "start": "2026-03-02T15:00", "end": "2026-03-02T16:00", "attendees": [SAM],
             "status": "cancelled"},
            {"title": "Vendor demo", "start": "2026-03-02T10:00", "end": "2026-03-02T11:00", "organizer": LEE,
             "attendees": [{"email": SAM, "response": "declined"}, {"email": OWNER, "response": "accepted"}]},
        ],
        today="2026-02-27",
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


def new_id(text: str) -> int:
    return int(text.split()[2])


def test_create_calendar_is_byte_identical(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("calendar").read_bytes() == b.db_path("calendar").read_bytes()


def test_readers_respect_status_and_declines(cworld):
    assert [e["title"] for e in state.events(cworld)] == ["Standup", "Vendor demo", "Sam's dentist"]
    assert len(state.events(cworld, include_cancelled=True)) == 4
    busy = state.busy(cworld, SAM, "2026-03-02T00:00", "2026-03-03T00:00")
    assert [e["title"] for e in busy] == ["Standup", "Sam's dentist"]


async def test_list_events_owner_default_and_attendee(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        mine = json.loads(await call(c, "list_events", start="2026-03-02", end="2026-03-02"))
        assert [e["title"] for e in mine] == ["Standup", "Vendor demo"]
        sams = json.loads(await call(c, "list_events", start="2026-03-02T00:00", end="2026-03-03T00:00", attendee=SAM))
        assert [e["title"] for e in sams] == ["Standup", "Vendor demo", "Sam's dentist"]
        assert json.loads(await call(c, "list_events", start="2026-03-03", end="2026-03-04")) == []


async def test_list_events_rejects_bad_ranges(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        assert "YYYY-MM-DDTHH:MM" in await error(c, "list_events", start="Monday", end="2026-03-02")
        assert "after start" in await error(c, "list_events", start="2026-03-03", end="2026-03-01")
        assert "at most" in await error(c, "list_events", start="2026-01-01", end="2026-12-31")
        assert "valid email" in await error(c, "list_events", start="2026-03-02", end="2026-03-02", attendee="sam")


async def test_get_event_and_unknown_id(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        ev = json.loads(await call(c, "get_event", event_id=3))
        assert ev["status"] == "cancelled" and ev["attendees"] == [{"email": SAM, "response": "needs_action"}]
        assert "list_events" in await error(c, "get_event", event_id=99)
        assert "valid integer" in await error(c, "get_event", event_id="three")


async def test_create_event_reports_conflicts_but_books(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "create_event", title="Plan", start="2026-03-02T13:30", end="2026-03-02T14:00",
                          attendees=["Sam Ortiz <SAM@northwind.example>", OWNER], location="Room 2")
        assert f"conflict: {SAM} is busy 2026-03-02T13:00–14:00" in text
        ev = state.event(cworld, new_id(text))
        assert ev["organizer"] == OWNER and ev["attendees"] == [{"email": SAM, "response": "needs_action"}]
        assert ev["location"] == "Room 2"


async def test_create_event_notes_working_hours_and_externals(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "create_event", title="Late", start="2026-03-02T16:30", end="2026-03-02T17:00",
                          attendees=[SAM, "guest@partner.example"])
        assert f"outside {SAM}'s working hours (08:00-16:00" in text
        assert "guest@partner.example is not in the company directory" in text
        text = await call(c, "create_event", title="Free", start="2026-03-02T15:00", end="2026-03-02T15:30",
                          attendees=[SAM])
        assert "conflict" not in text and "note" not in text  # the cancelled event does not block


async def test_create_event_validates_input(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        assert "YYYY-MM-DDTHH:MM" in await error(c, "create_event", title="x", start="2026-03-02 9am", end="2026-03-02T10:00")
        assert "time of day" in await error(c, "create_event", title="x", start="2026-03-02", end="2026-03-02T10:00")
        assert "zone" in await error(c, "create_event", title="x", start="2026-03-02T09:00+01:00", end="2026-03-02T10:00")
        assert "after start" in await error(c, "create_event", title="x", start="2026-03-02T10:00", end="2026-03-02T10:00")
        assert "title" in await error(c, "create_event", title=" ", start="2026-03-02T09:00", end="2026-03-02T10:00")
        assert "valid email" in await error(c, "create_event", title="x", start="2026-03-02T09:00",
                                            end="2026-03-02T10:00", attendees=["bob"])
        assert "valid list" in await error(c, "create_event", title="x", start="2026-03-02T09:00",
                                           end="2026-03-02T10:00", attendees=SAM)
    assert len(state.events(cworld, include_cancelled=True)) == 4


async def test_update_event_changes_fields_and_keeps_responses(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        text = await call(c, "update_event", event_id=1, start="2026-03-02T09:30", end="2026-03-02T09:45",
                          attendees=[LEE, "kim@northwind.example"], title="Daily standup")
        assert "changed title, start, end, attendees" in text
        ev = state.event(cworld, 1)
        assert (ev["title"], ev["start"], ev["end"]) == ("Daily standup", "2026-03-02T09:30", "2026-03-02T09:45")
        assert [a["email"] for a in ev["attendees"]] == [LEE, "kim@northwind.example"]
        assert "after start" in await error(c, "update_event", event_id=1, end="2026-03-02T09:00")
    assert state.event(cworld, 1)["end"] == "2026-03-02T09:45"  # the rejected update changed nothing


async def test_update_and_cancel_only_own_active_events(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        assert "organised by" in await error(c, "update_event", event_id=2, title="Mine now")
        assert "organised by" in await error(c, "cancel_event", event_id=4)
        assert "cancelled" in await error(c, "update_event", event_id=3, title="Revive")
        assert "no event" in await error(c, "cancel_event", event_id=50)
        await call(c, "cancel_event", event_id=1)
        assert "cancelled" in await error(c, "cancel_event", event_id=1)
    assert state.event(cworld, 1)["status"] == "cancelled"
    assert state.event(cworld, 2)["title"] == "Sam's dentist"


async def test_free_busy_merges_and_skips_cancelled_and_declined(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        fb = json.loads(await call(c, "free_busy", emails=[SAM, OWNER], start="2026-03-02", end="2026-03-02"))
        sam, dana = fb["people"]
        assert sam["busy"] == [{"start": "2026-03-02T09:00", "end": "2026-03-02T09:15"},
                               {"start": "2026-03-02T13:00", "end": "2026-03-02T14:00"}]
        assert sam["working_hours"] == {"start": "08:00", "end": "16:00", "days": "Mon-Fri"}
        assert dana["busy"][1] == {"start": "2026-03-02T10:00", "end": "2026-03-02T11:00"}
        assert "list_people" in await error(c, "free_busy", emails=["ghost@northwind.example"],
                                            start="2026-03-02", end="2026-03-02")
        assert "at least one" in await error(c, "free_busy", emails=[], start="2026-03-02", end="2026-03-02")


async def test_list_people_query(cworld):
    async with mcp.Client(build_server(cworld)) as c:
        everyone = json.loads(await call(c, "list_people"))
        assert [p["name"] for p in everyone] == ["Dana Whitfield", "Lee Samuels", "Sam Ortiz"]
        hits = json.loads(await call(c, "list_people", query="sam"))
        assert [p["email"] for p in hits] == [LEE, SAM]
        assert hits[1]["timezone"] == "Europe/Lisbon"


async def test_missing_calendar_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no calendar" in await error(c, "list_people")
