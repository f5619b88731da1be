"""The travel app through a real in-process MCP session over a real SQLite booking tool."""

import json

import mcp
import pytest

from longhorizon.apps.travel import state
from longhorizon.apps.travel.server import build_server
from longhorizon.core.world import World

ANA = "ana.ruiz@northwind.example"
BO = "bo.chen@northwind.example"
POLICY = {"cabins": "economy under 6 hours", "hotel_cap": {"Chicago": 220}}


def seed(root):
    state.create_travel(
        root / "state" / "travel.sqlite", today="2026-03-02", policy=POLICY,
        airports=[{"code": "JFK", "city": "New York", "name": "Kennedy"},
                  {"code": "LGA", "city": "New York", "name": "LaGuardia"},
                  {"code": "ORD", "city": "Chicago", "name": "O'Hare"}],
        travelers=[{"email": ANA, "name": "Ana Ruiz", "department": "Sales", "home_airport": "JFK"},
                   {"email": BO, "name": "Bo Chen", "department": "Engineering", "home_airport": "LGA"}],
        flights=[
            {"flight_id": "FL100", "airline": "Blue Air", "flight_no": "BA 12", "origin": "JFK", "destination": "ORD",
             "depart": "2026-03-20T08:00", "duration_minutes": 150,
             "fares": {"economy": (210.0, 1), "business": (640.0, 4)}},
            {"flight_id": "FL101", "airline": "Red Jet", "flight_no": "RJ 7", "origin": "LGA", "destination": "ORD",
             "depart": "2026-03-20T17:30", "duration_minutes": 145, "fares": {"economy": (189.0, 0)}},
            {"flight_id": "FL102", "airline": "Blue Air", "flight_no": "BA 30", "origin": "ORD", "destination": "JFK",
             "depart": "2026-03-22T18:00", "arrive": "2026-03-22T21:10", "duration_minutes": 130,
             "fares": {"economy": (199.0, 5)}},
            {"flight_id": "FL050", "airline": "Blue Air", "flight_no": "BA 2", "origin": "JFK", "destination": "ORD",
             "depart": "2026-02-20T08:00", "duration_minutes": 150, "fares": {"economy": (150.0, 5)}},
        ],
        hotels=[
            {"hotel_id": "HT1", "name": "Lakeside Inn", "city": "Chicago", "district": "Loop", "address": "1 Lake St",
             "nightly_rate": 180.0, "rooms": 1, "rating": 4.1},
            {"hotel_id": "HT2", "name": "Grand Tower", "city": "Chicago", "district": "River North",
             "address": "9 Tower Rd", "nightly_rate": 260.0, "rooms": 10, "rating": 4.6},
        ],
        bookings=[
            {"kind": "flight", "traveler": BO, "flight_id": "FL100", "cabin": "business", "booked_on": "2026-02-10"},
            {"kind": "hotel", "traveler": BO, "hotel_id": "HT1", "check_in": "2026-03-21", "check_out": "2026-03-22"},
            {"kind": "flight", "traveler": ANA, "flight_id": "FL050", "cabin": "economy", "booked_on": "2026-02-01"},
        ],
    )


@pytest.fixture
def tworld(tmp_path):
    return World.build(tmp_path / "w", seed)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


def test_create_travel_is_byte_identical_and_seeds_take_seats(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("travel").read_bytes() == b.db_path("travel").read_bytes()
    assert state.seats_left(a, "FL100", "business") == 3
    assert [x["booking_id"] for x in state.bookings(a)] == ["BK-4101", "BK-4102", "BK-4103"]


async def test_get_policy_and_directory(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        pol = json.loads(await call(c, "get_policy"))
        assert pol == {"today": "2026-03-02", "policy": POLICY}
        people = json.loads(await call(c, "list_travelers", query="engineering"))
        assert people == [{"email": BO, "name": "Bo Chen", "department": "Engineering", "home_airport": "LGA",
                           "home_city": "New York"}]
        assert len(json.loads(await call(c, "list_travelers"))) == 2


async def test_search_flights_by_city_and_cabin(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        out = json.loads(await call(c, "search_flights", origin="new york", destination="ORD", date="2026-03-20"))
        assert out["origin"] == ["JFK", "LGA"]
        assert [f["flight_id"] for f in out["flights"]] == ["FL100", "FL101"]
        assert out["flights"][0]["duration"] == "2h30m" and out["flights"][0]["arrive"] == "2026-03-20T10:30"
        assert out["flights"][1]["fares"] == [{"cabin": "economy", "price": 189.0, "seats_left": 0}]
        biz = json.loads(await call(c, "search_flights", origin="JFK", destination="Chicago", date="2026-03-20",
                                    cabin="Business"))
        assert [f["fares"][0]["cabin"] for f in biz["flights"]] == ["business"]


async def test_search_flights_errors(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        assert "ORD (Chicago)" in await error(c, "search_flights", origin="Boston", destination="ORD",
                                              date="2026-03-20")
        assert "YYYY-MM-DD" in await error(c, "search_flights", origin="JFK", destination="ORD", date="March 20")
        assert "premium_economy" in await error(c, "search_flights", origin="JFK", destination="ORD",
                                                date="2026-03-20", cabin="coach")


async def test_search_hotels_rooms_left_and_cap(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        out = json.loads(await call(c, "search_hotels", city="chicago", check_in="2026-03-20", check_out="2026-03-22"))
        assert out["nights"] == 2
        assert [(h["hotel_id"], h["rooms_left"], h["total"]) for h in out["hotels"]] == [("HT1", 0, 360.0),
                                                                                        ("HT2", 10, 520.0)]
        free = json.loads(await call(c, "search_hotels", city="Chicago", check_in="2026-03-19", check_out="2026-03-21"))
        assert free["hotels"][0]["rooms_left"] == 1
        capped = json.loads(await call(c, "search_hotels", city="Chicago", check_in="2026-03-20",
                                       check_out="2026-03-22", max_rate=200))
        assert [h["hotel_id"] for h in capped["hotels"]] == ["HT1"]
        assert "after check_in" in await error(c, "search_hotels", city="Chicago", check_in="2026-03-22",
                                               check_out="2026-03-20")
        assert "Chicago" in await error(c, "search_hotels", city="Paris", check_in="2026-03-20", check_out="2026-03-22")


async def test_book_flight_takes_a_seat_and_lists(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        text = await call(c, "book_flight", flight_id="fl100", traveler="Ana Ruiz <ANA.RUIZ@northwind.example>",
                          cabin="economy")
        assert text.startswith("Booked BK-4104") and "210.00" in text
        assert state.seats_left(tworld, "FL100", "economy") == 0
        mine = json.loads(await call(c, "list_bookings", traveler=ANA))
        assert [(b["booking_id"], b["status"]) for b in mine] == [("BK-4103", "active"), ("BK-4104", "active")]
        assert mine[1]["flight_no"] == "BA 12" and mine[1]["cabin"] == "economy"
        assert mine[1]["booked_on"] == "2026-03-02"


async def test_book_flight_validations(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        assert "list_travelers" in await error(c, "book_flight", flight_id="FL100", traveler="zed@x.example",
                                               cabin="economy")
        assert "no flight" in await error(c, "book_flight", flight_id="FL999", traveler=ANA, cabin="economy")
        assert "sold out" in await error(c, "book_flight", flight_id="FL101", traveler=ANA, cabin="economy")
        assert "offers: economy" in await error(c, "book_flight", flight_id="FL102", traveler=ANA, cabin="first")
        assert "departed" in await error(c, "book_flight", flight_id="FL050", traveler=BO, cabin="economy")
        assert "cancel it first" in await error(c, "book_flight", flight_id="FL100", traveler=BO, cabin="economy")
        assert len(state.bookings(tworld)) == 3


async def test_book_hotel_and_overlap_rules(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        text = await call(c, "book_hotel", hotel_id="HT2", traveler=ANA, check_in="2026-03-20", check_out="2026-03-22")
        assert "BK-4104" in text and "520.00" in text
        assert "cancel it first" in await error(c, "book_hotel", hotel_id="HT2", traveler=ANA,
                                                check_in="2026-03-21", check_out="2026-03-23")
        assert "in the past" in await error(c, "book_hotel", hotel_id="HT2", traveler=BO,
                                            check_in="2026-02-20", check_out="2026-02-21")
        assert "no hotel" in await error(c, "book_hotel", hotel_id="HT9", traveler=BO,
                                         check_in="2026-03-20", check_out="2026-03-21")


async def test_sold_out_hotel_is_refused(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        assert "no room free" in await error(c, "book_hotel", hotel_id="HT1", traveler=ANA,
                                             check_in="2026-03-20", check_out="2026-03-22")


async def test_cancel_releases_seat_and_allows_rebooking(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        assert "Cancelled BK-4101" in await call(c, "cancel_booking", booking_id="bk-4101")
        assert state.seats_left(tworld, "FL100", "business") == 4
        assert "already cancelled" in await error(c, "cancel_booking", booking_id="BK-4101")
        await call(c, "book_flight", flight_id="FL100", traveler=BO, cabin="economy")
        assert "past travel" in await error(c, "cancel_booking", booking_id="4103")
        assert "no booking" in await error(c, "cancel_booking", booking_id="BK-1")
        await call(c, "cancel_booking", booking_id="BK-4102")
        out = json.loads(await call(c, "search_hotels", city="Chicago", check_in="2026-03-20", check_out="2026-03-22"))
        assert out["hotels"][0]["rooms_left"] == 1
    assert [b["status"] for b in state.bookings(tworld)] == ["cancelled", "cancelled", "active", "active"]


async def test_missing_database_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no travel booking tool" in await error(c, "get_policy")
