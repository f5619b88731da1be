"""The `travel` app: an MCP server over a company travel booking tool (``state/travel.sqlite``).

Like a real corporate booking tool it checks what the inventory can check (the traveller is
in the directory, the flight and cabin exist, a seat or room is free, dates make sense, the
same traveller is not booked twice on one route and day or into two hotels on one night)
and shows the travel policy, but judging policy compliance is left to the booker.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import date
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import ADD, READ, SET, AppServer, cap, server_builder, sqlite_connector
from longhorizon.apps.travel.state import (
    CABINS,
    booking_dicts,
    booking_id,
    flight_row,
    fmt_duration,
    hotel_row,
    nights,
    parse_email,
    rooms_left,
)

MAX_NIGHTS = 30

INSTRUCTIONS = (
    "The company's travel booking tool. Find flights with search_flights and hotels with "
    "search_hotels, book them for travellers in the directory (list_travelers), and review or "
    "cancel with list_bookings / cancel_booking. get_policy shows the company travel policy, "
    "which the tool does not enforce. Dates are YYYY-MM-DD; flight times are local YYYY-MM-DDTHH:MM. "
    f"Cabins: {', '.join(CABINS)}."
)


def _dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


def _day(value: str, name: str) -> str:
    text = str(value or "").strip()
    try:
        if len(text) != 10:
            raise ValueError(text)
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise ToolError(f"{name}={value!r} is not a date; use YYYY-MM-DD, e.g. 2026-03-02") from None


def _cabin(value: str | None) -> str | None:
    if value is None:
        return None
    c = str(value).strip().lower().replace("-", "_").replace(" ", "_")
    if c in ("premium", "premium_econ"):
        c = "premium_economy"
    if c not in CABINS:
        raise ToolError(f"cabin {value!r} is not one of: {', '.join(CABINS)}")
    return c


def make_app(world):
    db_path = world.db_path("travel")
    srv = AppServer("travel", instructions=INSTRUCTIONS)

    connect = sqlite_connector(db_path, "travel booking tool", "travel")

    def today(conn) -> str:
        return conn.execute("SELECT value FROM meta WHERE key = 'today'").fetchone()[0]

    def airports(conn, place: str, name: str) -> list[str]:
        """Airport codes for an IATA code or a city name (case-insensitive)."""
        p = (place or "").strip()
        rows = conn.execute("SELECT code, city FROM airports ORDER BY code").fetchall()
        hits = [r["code"] for r in rows if r["code"] == p.upper()] or \
               [r["code"] for r in rows if r["city"].lower() == p.lower()]
        if not hits:
            known = ", ".join(f"{r['code']} ({r['city']})" for r in rows)
            raise ToolError(f"{name}={place!r} is not a known airport code or city. Airports: {known}")
        return hits

    def find_traveler(conn, who: str) -> dict:
        email = parse_email(who)
        if email:
            row = conn.execute("SELECT * FROM travelers WHERE email = ?", (email,)).fetchone()
        else:
            rows = conn.execute("SELECT * FROM travelers WHERE lower(name) = ?",
                                (" ".join(str(who or "").split()).lower(),)).fetchall()
            if len(rows) > 1:
                raise ToolError(f"{len(rows)} travellers are named {who!r}; pass the email address instead")
            row = rows[0] if rows else None
        if row is None:
            raise ToolError(f"traveller {who!r} is not in the company directory; use list_travelers to find "
                            "their email address")
        return dict(row)

    def get_booking(conn, bid: str) -> sqlite3.Row:
        key = str(bid or "").strip().upper()
        if key.isdigit():
            key = f"BK-{key}"
        row = conn.execute("SELECT * FROM bookings WHERE booking_id = ?", (key,)).fetchone()
        if row is None:
            raise ToolError(f"no booking {bid!r}; booking ids look like BK-4101 (see list_bookings)")
        return row

    def next_seq(conn) -> int:
        return conn.execute("SELECT COALESCE(MAX(seq), 4100) + 1 FROM bookings").fetchone()[0]

    def flight_view(conn, f: dict, cabin: str | None) -> dict:
        sql = "SELECT cabin, price, seats_left FROM fares WHERE flight_id = ?"
        fares = [dict(r) for r in conn.execute(sql, (f["flight_id"],)).fetchall()
                 if cabin is None or r["cabin"] == cabin]
        fares.sort(key=lambda x: CABINS.index(x["cabin"]))
        return {
            "flight_id": f["flight_id"], "airline": f["airline"], "flight_no": f["flight_no"],
            "from": f["origin"], "to": f["destination"], "depart": f["depart"], "arrive": f["arrive"],
            "duration": fmt_duration(f["duration_minutes"]), "duration_minutes": f["duration_minutes"],
            "stops": f["stops"], "fares": fares,
        }

    @srv.tool(READ)
    def get_policy() -> str:
        """The company travel policy (cabin rules, booking rules, preferred airlines, hotel caps),
        as JSON. The booking tool does not enforce it."""
        with closing(connect()) as conn:
            text = conn.execute("SELECT value FROM meta WHERE key = 'policy'").fetchone()[0]
            return cap(f'{{"today": "{today(conn)}", "policy": {text}}}')

    @srv.tool(READ)
    def list_travelers(query: str | None = None) -> str:
        """Find people in the travel directory by name, email or department (case-insensitive
        substring); no query lists everyone.

        Returns JSON [{email, name, department, home_airport, home_city}]."""
        with closing(connect()) as conn:
            rows = conn.execute(
                "SELECT t.*, a.city FROM travelers t LEFT JOIN airports a ON a.code = t.home_airport "
                "ORDER BY t.name, t.email").fetchall()
        q = (query or "").strip().lower()
        return _dumps([
            {"email": r["email"], "name": r["name"], "department": r["department"],
             "home_airport": r["home_airport"], "home_city": r["city"] or ""}
            for r in rows if not q or q in r["name"].lower() or q in r["email"] or q in r["department"].lower()
        ])

    @srv.tool(READ)
    def search_flights(origin: str, destination: str, date: str, cabin: str | None = None) -> str:
        """Flights from origin to destination departing on one day, earliest first.

        Args:
            origin: IATA airport code ("JFK") or city name ("New York"; all its airports).
            destination: IATA airport code or city name.
            date: departure day, YYYY-MM-DD (local time at the origin).
            cabin: only show fares of this cabin (economy, premium_economy, business, first).

        Returns JSON {date, origin, destination, flights: [{flight_id, airline,
        flight_no, from, to, depart, arrive, duration, duration_minutes, stops,
        fares: [{cabin, price, seats_left}]}]}. Times are local; duration is the
        scheduled flight time. A fare with seats_left 0 is sold out."""
        day = _day(date, "date")
        want = _cabin(cabin)
        with closing(connect()) as conn:
            src, dst = airports(conn, origin, "origin"), airports(conn, destination, "destination")
            marks_s, marks_d = ",".join("?" * len(src)), ",".join("?" * len(dst))
            rows = conn.execute(
                f"SELECT * FROM flights WHERE origin IN ({marks_s}) AND destination IN ({marks_d}) "
                "AND substr(depart, 1, 10) = ? ORDER BY depart, flight_id", [*src, *dst, day]).fetchall()
            flights = [flight_view(conn, dict(r), want) for r in rows]
        flights = [f for f in flights if f["fares"]]
        return _dumps({"date": day, "origin": src, "destination": dst, "flights": flights})

    @srv.tool(READ)
    def search_hotels(city: str, check_in: str, check_out: str, max_rate: float | None = None) -> str:
        """Hotels in a city with their nightly rate and how many rooms are free for the whole stay,
        cheapest first.

        Args:
            city: city name, e.g. "Chicago".
            check_in: arrival day, YYYY-MM-DD.
            check_out: departure day, YYYY-MM-DD (after check_in).
            max_rate: only hotels whose nightly rate is at most this.

        Returns JSON {city, check_in, check_out, nights, hotels: [{hotel_id, name,
        district, address, rating, nightly_rate, total, rooms_left}]} (rooms_left 0
        means sold out for those dates)."""
        ci, co = _day(check_in, "check_in"), _day(check_out, "check_out")
        n = nights(ci, co)
        if n < 1:
            raise ToolError("check_out must be after check_in")
        if n > MAX_NIGHTS:
            raise ToolError(f"stays are limited to {MAX_NIGHTS} nights")
        with closing(connect()) as conn:
            rows = conn.execute("SELECT * FROM hotels WHERE lower(city) = lower(?) ORDER BY nightly_rate, name",
                                (city.strip(),)).fetchall()
            if not rows:
                cities = [r[0] for r in conn.execute("SELECT DISTINCT city FROM hotels ORDER BY city")]
                raise ToolError(f"no hotels in {city!r}; cities with hotels: {', '.join(cities)}")
            out = []
            for r in rows:
                if max_rate is not None and r["nightly_rate"] > max_rate:
                    continue
                out.append({"hotel_id": r["hotel_id"], "name": r["name"], "district": r["district"],
                            "address": r["address"], "rating": r["rating"], "nightly_rate": r["nightly_rate"],
                            "total": round(r["nightly_rate"] * n, 2),
                            "rooms_left": rooms_left(conn, r["hotel_id"], ci, co)})
        return _dumps({"city": rows[0]["city"], "check_in": ci, "check_out": co, "nights": n, "hotels": out})

    @srv.tool(ADD)
    def book_flight(flight_id: str, traveler: str, cabin: str) -> str:
        """Book one seat on a flight for a traveller.

        Args:
            flight_id: the flight's id from search_flights (e.g. "FL2231").
            traveler: the traveller's email address (or exact full name) from the directory.
            cabin: economy, premium_economy, business or first.

        Returns a confirmation with the new booking id (BK-....) and the fare charged."""
        c = _cabin(cabin)
        with closing(connect()) as conn, conn:
            f = flight_row(conn, str(flight_id).strip().upper())
            if f is None:
                raise ToolError(f"no flight {flight_id!r}; use the flight_id from search_flights")
            conn.row_factory = sqlite3.Row
            who = find_traveler(conn, traveler)
            if f["depart"][:10] < today(conn):
                raise ToolError(f"flight {f['flight_id']} departed on {f['depart'][:10]}; it cannot be booked")
            fare = conn.execute("SELECT price, seats_left FROM fares WHERE flight_id = ? AND cabin = ?",
                                (f["flight_id"], c)).fetchone()
            if fare is None:
                offered = [r[0] for r in conn.execute("SELECT cabin FROM fares WHERE flight_id = ?", (f["flight_id"],))]
                raise ToolError(f"flight {f['flight_id']} has no {c} cabin; it offers: {', '.join(offered)}")
            if fare["seats_left"] < 1:
                raise ToolError(f"{c} on flight {f['flight_id']} is sold out; pick another flight or cabin")
            for b in booking_dicts(conn, who["email"]):
                if b["kind"] != "flight" or b["status"] != "active":
                    continue
                same_trip = (b["from"], b["to"], b["depart"][:10]) == (f["origin"], f["destination"], f["depart"][:10])
                if b["flight_id"] == f["flight_id"] or same_trip:
                    raise ToolError(
                        f"{who['name']} already has {b['booking_id']} on {b['flight_no']} ({b['from']}->{b['to']} "
                        f"{b['depart']}); cancel it first if this flight replaces it")
            conn.execute("UPDATE fares SET seats_left = seats_left - 1 WHERE flight_id = ? AND cabin = ?",
                         (f["flight_id"], c))
            seq = next_seq(conn)
            conn.execute(
                "INSERT INTO bookings (booking_id, seq, kind, traveler, flight_id, cabin, price, status, booked_on)"
                " VALUES (?, ?, 'flight', ?, ?, ?, ?, 'active', ?)",
                (booking_id(seq), seq, who["email"], f["flight_id"], c, fare["price"], today(conn)))
        return (f"Booked {booking_id(seq)}: {who['name']} on {f['airline']} {f['flight_no']} ({f['flight_id']}) "
                f"{f['origin']}->{f['destination']} departing {f['depart']}, {c}, fare {fare['price']:.2f}.")

    @srv.tool(ADD)
    def book_hotel(hotel_id: str, traveler: str, check_in: str, check_out: str) -> str:
        """Book one hotel room for a traveller.

        Args:
            hotel_id: the hotel's id from search_hotels (e.g. "HT118").
            traveler: the traveller's email address (or exact full name) from the directory.
            check_in: arrival day, YYYY-MM-DD.
            check_out: departure day, YYYY-MM-DD (after check_in).

        Returns a confirmation with the new booking id (BK-....) and the total price."""
        ci, co = _day(check_in, "check_in"), _day(check_out, "check_out")
        n = nights(ci, co)
        if n < 1:
            raise ToolError("check_out must be after check_in")
        if n > MAX_NIGHTS:
            raise ToolError(f"stays are limited to {MAX_NIGHTS} nights")
        with closing(connect()) as conn, conn:
            h = hotel_row(conn, str(hotel_id).strip().upper())
            if h is None:
                raise ToolError(f"no hotel {hotel_id!r}; use the hotel_id from search_hotels")
            conn.row_factory = sqlite3.Row
            who = find_traveler(conn, traveler)
            if ci < today(conn):
                raise ToolError(f"check_in {ci} is in the past (today is {today(conn)})")
            for b in booking_dicts(conn, who["email"]):
                if b["kind"] == "hotel" and b["status"] == "active" and b["check_in"] < co and ci < b["check_out"]:
                    raise ToolError(
                        f"{who['name']} already has {b['booking_id']} at {b['hotel']} {b['check_in']} to "
                        f"{b['check_out']}, overlapping these nights; cancel it first if this stay replaces it")
            if rooms_left(conn, h["hotel_id"], ci, co) < 1:
                raise ToolError(f"{h['name']} has no room free for every night {ci} to {co}; pick another hotel")
            price = round(h["nightly_rate"] * n, 2)
            seq = next_seq(conn)
            conn.execute(
                "INSERT INTO bookings (booking_id, seq, kind, traveler, hotel_id, check_in, check_out, price, status,"
                " booked_on) VALUES (?, ?, 'hotel', ?, ?, ?, ?, ?, 'active', ?)",
                (booking_id(seq), seq, who["email"], h["hotel_id"], ci, co, price, today(conn)))
        return (f"Booked {booking_id(seq)}: {who['name']} at {h['name']} ({h['hotel_id']}, {h['district']}) "
                f"{ci} to {co}, {n} night(s) at {h['nightly_rate']:.2f}, total {price:.2f}.")

    @srv.tool(READ)
    def list_bookings(traveler: str | None = None) -> str:
        """Bookings (active and cancelled), oldest first; optionally one traveller's.

        Args:
            traveler: email address or exact full name; omit for everyone's bookings.

        Returns JSON [{booking_id, kind (flight|hotel), status (active|cancelled),
        traveler, traveler_name, price, booked_on, plus for flights flight_id, airline,
        flight_no, from, to, depart, arrive, cabin, and for hotels hotel_id, hotel,
        city, district, check_in, check_out, nights}]."""
        with closing(connect()) as conn:
            who = find_traveler(conn, traveler)["email"] if traveler else None
            return _dumps(booking_dicts(conn, who))

    @srv.tool(SET)
    def cancel_booking(booking_id: str) -> str:
        """Cancel an active booking (its seat or room is released). Cannot be undone.

        Args:
            booking_id: e.g. "BK-4102" (from list_bookings or a booking confirmation)."""
        with closing(connect()) as conn, conn:
            row = get_booking(conn, booking_id)
            if row["status"] == "cancelled":
                raise ToolError(f"{row['booking_id']} is already cancelled")
            start = row["check_in"] if row["kind"] == "hotel" else flight_row(conn, row["flight_id"])["depart"][:10]
            if start < today(conn):
                raise ToolError(f"{row['booking_id']} started on {start}; past travel cannot be cancelled")
            conn.execute("UPDATE bookings SET status = 'cancelled' WHERE booking_id = ?", (row["booking_id"],))
            if row["kind"] == "flight":
                conn.execute("UPDATE fares SET seats_left = seats_left + 1 WHERE flight_id = ? AND cabin = ?",
                             (row["flight_id"], row["cabin"]))
            b = next(x for x in booking_dicts(conn, row["traveler"]) if x["booking_id"] == row["booking_id"])
        what = (f"{b['airline']} {b['flight_no']} {b['from']}->{b['to']} {b['depart']}" if b["kind"] == "flight"
                else f"{b['hotel']} {b['check_in']} to {b['check_out']}")
        return f"Cancelled {b['booking_id']} ({b['traveler_name']}: {what})."

    return srv


build_server = server_builder(make_app)
