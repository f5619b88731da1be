"""Travel booking: book a team offsite's trips under the company travel policy.

The team lead's mail says the offsite moved to new dates and asks for everyone's travel;
the calendar invite says who is coming (one declined, the lead and maybe another attendee
are local) and when the last day ends. Drawn per seed (``EXTENSION_KINDS``, ``OLD_KINDS``,
``TAGALONG_ODDS``; recorded in ``Task.data``, empty when absent): one traveller asks to stay an
extra night and the lead approves it or says no, or nobody asks; travel already booked for the
old dates is a whole trip, a hotel stay or both (someone else's); a colleague from another team
asks to tag along, not yet cleared with the lead, or not. The travel app's policy decides
each booking: preferred airlines first, the cheapest compliant fare, the cabin by scheduled
flight length, arrival by 21:00 the day before, return at least two hours after the end,
and one hotel for the group in the venue's district under the nightly cap. Every route
carries decoys: a cheaper non-preferred flight, a cheaper preferred one that lands too late
or leaves too early, a cheaper preferred one sold out in the needed cabin, cheap hotels in
other districts, a nearer hotel without rooms for everyone. The itinerary (with booking
references) goes in a file and to the lead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from longhorizon.apps.calendar import state as cal
from longhorizon.apps.mail import state as mail
from longhorizon.apps.travel import state as travel
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    MONTHS,
    People,
    company,
    long_date,
    norm,
    output_text,
    parse_json,
    rng_and_faker,
    squash,
)
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.travel import AIRLINES, HOTEL_WORDS, base_minutes, km

# name, code, airport, lat, lon, utc offset (hours)
CITIES = [
    ("New York", "JFK", "John F. Kennedy International", 40.64, -73.78, -5),
    ("Boston", "BOS", "Logan International", 42.36, -71.01, -5),
    ("Atlanta", "ATL", "Hartsfield-Jackson International", 33.64, -84.43, -5),
    ("Miami", "MIA", "Miami International", 25.79, -80.29, -5),
    ("Chicago", "ORD", "O'Hare International", 41.97, -87.91, -6),
    ("Austin", "AUS", "Austin-Bergstrom International", 30.19, -97.67, -6),
    ("Denver", "DEN", "Denver International", 39.86, -104.67, -7),
    ("Phoenix", "PHX", "Sky Harbor International", 33.43, -112.01, -7),
    ("Seattle", "SEA", "Seattle-Tacoma International", 47.45, -122.31, -8),
    ("San Francisco", "SFO", "San Francisco International", 37.62, -122.38, -8),
    ("Los Angeles", "LAX", "Los Angeles International", 33.94, -118.41, -8),
]
DISTRICTS = {
    "Chicago": ["The Loop", "River North", "West Loop", "Lincoln Park", "O'Hare"],
    "Denver": ["LoDo", "Union Station", "Cherry Creek", "Capitol Hill", "Airport"],
    "Seattle": ["Downtown", "South Lake Union", "Capitol Hill", "Ballard", "SeaTac"],
    "Austin": ["Downtown", "South Congress", "East Austin", "The Domain", "Airport"],
    "Boston": ["Back Bay", "Seaport", "Downtown Crossing", "Cambridge", "East Boston"],
    "San Francisco": ["SoMa", "Union Square", "Fisherman's Wharf", "Mission", "Millbrae"],
    "Atlanta": ["Midtown", "Downtown", "Buckhead", "Old Fourth Ward", "Airport"],
}
LONG_HAUL = 270
"""Flights scheduled this many minutes (4h30) or longer fly premium economy under the policy."""
ARRIVE_BY = time(21, 0)
RETURN_GAP = timedelta(hours=2)
ITINERARY = "travel/offsite_itinerary.md"
EXTENSION_KINDS = ("approved", "refused", "")
"""One traveller asks to fly home a day later: the lead approves it, says no, or nobody asks."""
EXTENSION_ODDS = (0.45, 0.3, 0.25)
OLD_KINDS = ("both", "trip", "stay")
"""Booked for the old dates: one traveller's whole trip and another's hotel stay, the trip only,
or the stay only."""
OLD_ODDS = (0.4, 0.3, 0.3)
TAGALONG_ODDS = 0.6
"""How often a colleague from another team asks to tag along (not cleared with the lead)."""
TEAMS = ["Platform", "Growth", "Customer Success", "Data", "Design", "Partnerships", "Security"]


def required_cabin(minutes: int) -> str:
    return "premium_economy" if minutes >= LONG_HAUL else "economy"


@dataclass
class Leg:
    """One search the bookings need: a route on a day, with its timing rule."""

    origin: tuple
    dest: tuple
    day: date
    kind: str  # "out" (arrive by 21:00), "back" (leave >= end + 2h) or "free" (any time)
    not_before: datetime | None = None
    needed: int = 0
    flights: list[dict] = field(default_factory=list)
    choice: str = ""

    def timing_ok(self, f: dict) -> bool:
        dep = datetime.strptime(f["depart"], travel.TIME_FMT)
        arr = datetime.strptime(f["arrive"], travel.TIME_FMT)
        if self.kind == "out":
            return arr.date() == self.day and arr.time() <= ARRIVE_BY
        if self.kind == "back":
            return dep >= self.not_before
        return True


def policy_choice(leg: Leg, preferred: list[str], seats: dict[tuple[str, str], int]) -> str | None:
    """The flight the policy picks: compliant (timing, cabin by length, a seat in that cabin),
    preferred airlines first, then the cheapest fare in the required cabin."""
    options = []
    for f in leg.flights:
        cabin = required_cabin(f["duration_minutes"])
        if cabin not in f["fares"] or seats[(f["flight_id"], cabin)] < 1 or not leg.timing_ok(f):
            continue
        options.append((f["airline"] not in preferred, f["fares"][cabin][0], f["flight_id"]))
    options.sort()
    if not options:
        return None
    if len(options) > 1 and options[0][:2] == options[1][:2]:
        raise ValueError(f"tie between {options[0][2]} and {options[1][2]}")
    return options[0][2]


@register
class OffsiteTravelBooking(TaskFamily):
    name = "offsite_travel_booking"
    category = "travel booking"
    apps = ("mail", "calendar", "travel", "files")
    description = (
        "Book flights and one group hotel for a team offsite that moved dates: read who is coming and "
        "when from mail and the calendar invite, follow the travel policy (preferred airlines, cheapest "
        "compliant fare, cabin by flight length, arrival/return windows, hotel cap near the venue), "
        "cancel bookings for the old dates, and send an itinerary with booking references."
    )

    levels = 2
    """1: one traveller (the longest flight among those with no old booking or extension), the
    offsite's dates and end time in the task: read the policy, find their home airport, book
    both flights and a hotel; 2 (default): four or five travellers from the lead's mail and the
    invite, an extension asked for (approved or not) or none, old bookings to cancel, the group
    hotel, the itinerary file and mail.
    Every level keeps the flight decoys (non-preferred, sold out, wrong time) and the hotel ones;
    level 1 leaves out the compliant but dearer flight of each leg."""
    level_apps = {1: ("travel",)}
    """Level 1 names the traveller and the dates: no mail, calendar or itinerary file."""
    toolsets = {1: (
        "travel__book_flight", "travel__book_hotel", "travel__get_policy", "travel__list_travelers",
        "travel__search_flights", "travel__search_hotels",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        our_company, domain = company(fake)
        team = rng.choice(TEAMS)

        city_name = rng.choice(sorted(DISTRICTS))
        city = next(c for c in CITIES if c[0] == city_name)
        districts = DISTRICTS[city[0]][:]
        venue_district = rng.choice(districts[:4])
        other_districts = [d for d in districts if d != venue_district]
        venue = f"{fake.last_name()} {rng.choice(['Conference Center', 'Loft', 'Studios', 'Hall'])}"
        venue_address = f"{rng.randint(10, 990)} {fake.street_name()} {fake.street_suffix()}"

        today = date(2026, 1, 12) + timedelta(days=rng.randrange(250))
        while today.weekday() >= 5:
            today += timedelta(days=1)
        start = today + timedelta(days=rng.randint(22, 36))
        while start.weekday() not in (1, 2):
            start += timedelta(days=1)
        length = rng.choice([2, 3])
        end = start + timedelta(days=length - 1)
        old_start = start - timedelta(days=7)
        old_end = old_start + timedelta(days=length - 1)
        day_start, day_end = time(9, 0), rng.choice([time(15, 0), time(15, 30), time(16, 0)])
        end_dt = datetime.combine(end, day_end)

        # people --------------------------------------------------------------------------
        me = people.make(domain)
        lead = people.make(domain)
        homes = [c for c in CITIES if c[0] != city[0]]
        n_trav = rng.randint(4, 5)
        far = [c for c in homes if base_minutes(c, city) >= LONG_HAUL]
        trav_homes = [rng.choice(far)]  # at least one long flight, where the cabin rule bites
        trav_homes += rng.sample([c for c in homes if c not in trav_homes], n_trav - 2)
        rng.shuffle(trav_homes)
        trav_homes.insert(rng.randrange(n_trav), rng.choice(trav_homes))  # two share an airport
        travellers = [people.make(domain) for _ in range(n_trav)]
        home_of = {p.email: h for p, h in zip(travellers, trav_homes)}
        local2 = people.make(domain) if rng.random() < 0.5 else None
        declined = people.make(domain)
        home_of[lead.email] = city
        if local2:
            home_of[local2.email] = city
        home_of[declined.email] = rng.choice(homes)
        tagalong = people.make(domain)
        outsiders = [people.make(domain) for _ in range(rng.randint(3, 4))]
        for p in [tagalong, *outsiders]:
            home_of[p.email] = rng.choice(CITIES)
        home_of[me.email] = city  # the user works from the venue's city: no travel of their own
        depts = {p.email: team for p in [lead, *travellers, declined] + ([local2] if local2 else [])}
        for p in [tagalong, *outsiders, me]:
            depts[p.email] = rng.choice(["Finance", "Sales", "Operations", "Legal", "Marketing"])
        depts[me.email] = "Operations"

        roles = rng.sample(range(n_trav), 4)
        ext, old1, old2, unrel = (travellers[i] for i in roles)
        # the trap mix (module docstring)
        ext_kind = rng.choices(EXTENSION_KINDS, weights=EXTENSION_ODDS)[0]
        old_kind = rng.choices(OLD_KINDS, weights=OLD_ODDS)[0]
        tagalong_asks = rng.random() < TAGALONG_ODDS
        extended = ext_kind == "approved"
        preferred = [a[0] for a in rng.sample(AIRLINES, 2)]
        others_air = [a for a in AIRLINES if a[0] not in preferred]
        codes = dict(AIRLINES)

        # flights ---------------------------------------------------------------------------
        fid = iter(range(rng.randrange(2000, 7000), 10_000))
        used_numbers: set[str] = set()

        def number(airline: str) -> str:
            while True:
                n = f"{codes[airline]} {rng.randint(100, 2999)}"
                if n not in used_numbers:
                    used_numbers.add(n)
                    return n

        def flight(o, d, day: date, dep: time, airline: str, minutes: int, price: float, seats: int,
                   stops: int = 0) -> dict:
            dep_dt = datetime.combine(day, dep)
            arr = dep_dt + timedelta(minutes=minutes) + timedelta(hours=d[5] - o[5])
            cabin = required_cabin(minutes)
            price = round(price, 0)
            if cabin == "economy":
                fares = {"economy": (price, seats), "premium_economy": (round(price * 1.55, 0), rng.randint(0, 6)),
                         "business": (round(price * 2.8, 0), rng.randint(1, 8))}
            else:
                fares = {"economy": (round(price / 1.6, 0), rng.randint(2, 20)), "premium_economy": (price, seats),
                         "business": (round(price * 1.9, 0), rng.randint(1, 8))}
            return {"flight_id": f"FL{next(fid)}", "airline": airline, "flight_no": number(airline),
                    "origin": o[1], "destination": d[1], "depart": dep_dt.strftime(travel.TIME_FMT),
                    "arrive": arr.strftime(travel.TIME_FMT), "duration_minutes": minutes, "stops": stops,
                    "fares": fares}

        def clock(minutes_of_day: int) -> time:
            minutes_of_day = max(5 * 60 + 30, min(23 * 60, minutes_of_day))
            minutes_of_day -= minutes_of_day % 5
            return time(minutes_of_day // 60, minutes_of_day % 60)

        def make_leg(leg: Leg) -> None:
            o, d = leg.origin, leg.dest
            base = base_minutes(o, d)
            tz = d[5] - o[5]

            def dur(extra: int = 0) -> int:
                return base + rng.choice([-10, -5, 0, 5, 10, 15]) + extra

            # departure windows (minutes of the day, local at the origin)
            if leg.kind == "out":
                def ok_dep(m):  # latest departure that still lands by 21:00
                    return (21 * 60) - m - tz * 60
                lo, hi = 6 * 60, None
            elif leg.kind == "back":
                lo = leg.not_before.hour * 60 + leg.not_before.minute
                hi = 22 * 60 + 30
            else:
                lo, hi = 6 * 60, 21 * 60
            price = 0.09 * km(o, d) + rng.uniform(110, 170)
            pref = lambda: rng.choice(preferred)  # noqa: E731
            nonpref = lambda: rng.choice(others_air)[0]  # noqa: E731

            def window(minutes: int) -> tuple[int, int]:
                if leg.kind == "out":
                    return lo, ok_dep(minutes) - 10
                return lo + 5, hi

            def dep_in(minutes: int) -> time:
                a, b = window(minutes)
                if b < a:
                    raise ValueError("no compliant departure window")
                return clock(rng.randint(a, b))

            m_ok = dur()
            correct = flight(o, d, leg.day, dep_in(m_ok), pref(), m_ok, price, leg.needed + rng.randint(0, 4))
            flights = [correct]
            m = dur()
            flights.append(flight(o, d, leg.day, dep_in(m), pref(), m, price - rng.randint(12, 60), 0))  # sold out
            m = dur()
            flights.append(flight(o, d, leg.day, dep_in(m), nonpref(), m, price - rng.randint(25, 90),
                                  rng.randint(2, 9)))  # cheaper, but not a preferred airline
            m = dur(rng.choice([0, 0, 95, 120]))
            flights.append(flight(o, d, leg.day, dep_in(m), pref(), m, price + rng.randint(20, 120),
                                  rng.randint(2, 9), stops=int(m > base + 30)))  # compliant, dearer
            dearer.add(flights[-1]["flight_id"])
            if leg.kind in ("out", "back"):  # cheaper preferred flight at the wrong time
                m = dur()
                if leg.kind == "out":
                    late = ok_dep(m) + rng.randint(20, 150)
                    bad = clock(late) if late <= 23 * 60 else clock(23 * 60)
                else:
                    bad = clock(lo - rng.randint(30, 240))
                flights.append(flight(o, d, leg.day, bad, pref(), m, price - rng.randint(15, 80), rng.randint(2, 9)))
            decoys.update(f["flight_id"] for f in flights)
            for _ in range(rng.randint(1, 3)):
                m = dur(rng.choice([0, 0, 110]))
                flights.append(flight(o, d, leg.day, clock(rng.randint(6 * 60, 22 * 60)), nonpref(), m,
                                      price + rng.randint(-40, 150), rng.randint(0, 9), stops=int(m > base + 30)))
            flights.sort(key=lambda f: (f["depart"], f["flight_id"]))
            leg.flights = flights
            leg.choice = correct["flight_id"]

        legs: dict[tuple, Leg] = {}
        decoys: set[str] = set()  # each leg's policy pick and the decoys made for it (not the noise)
        dearer: set[str] = set()  # the compliant but dearer decoys (level 1 leaves them out)

        def need(o, d, day, kind, not_before=None) -> Leg:
            key = (o[1], d[1], day)
            if key not in legs:
                legs[key] = Leg(o, d, day, kind, not_before)
            legs[key].needed += 1
            return legs[key]

        plan: dict[str, dict[str, Any]] = {}
        for p in travellers:
            h = home_of[p.email]
            stays_on = p is ext and extended
            back_day = end + timedelta(days=1) if stays_on else end
            plan[p.email] = {
                "out": need(h, city, start - timedelta(days=1), "out"),
                "back": need(city, h, back_day, "free" if stays_on else "back",
                             None if stays_on else end_dt + RETURN_GAP),
                "check_in": (start - timedelta(days=1)).isoformat(),
                "check_out": back_day.isoformat(),
            }
        for leg in legs.values():
            for _ in range(20):
                try:
                    make_leg(leg)
                    seats = {(f["flight_id"], c): v[1] for f in leg.flights for c, v in f["fares"].items()}
                    if policy_choice(leg, preferred, seats) == leg.choice:
                        break
                except ValueError:
                    pass
            else:  # pragma: no cover - construction makes this unreachable in practice
                raise RuntimeError(f"{self.name}: could not build leg {leg.origin[1]}-{leg.dest[1]} for seed {seed}")

        all_flights = [f for leg in legs.values() for f in leg.flights]
        # old-plan flights (already booked) and a few same-route flights on the event day
        old_out = flight(home_of[old1.email], city, old_start - timedelta(days=1), clock(rng.randint(420, 660)),
                         rng.choice(preferred), base_minutes(home_of[old1.email], city), 260, 5)
        old_back = flight(city, home_of[old1.email], old_end, clock(rng.randint(1080, 1260)), rng.choice(preferred),
                          base_minutes(home_of[old1.email], city), 250, 5)
        unrel_city = rng.choice([c for c in CITIES if c not in (city, home_of[unrel.email])])
        unrel_day = end + timedelta(days=rng.randint(5, 12))
        unrel_flight = flight(home_of[unrel.email], unrel_city, unrel_day, clock(rng.randint(420, 900)),
                              rng.choice(AIRLINES)[0], base_minutes(home_of[unrel.email], unrel_city), 300, 6)
        extra = []
        for leg in list(legs.values())[:3]:
            if leg.kind == "out":
                m = base_minutes(leg.origin, leg.dest)
                extra.append(flight(leg.origin, leg.dest, start, clock(rng.randint(360, 480)), rng.choice(preferred),
                                    m, 0.09 * km(leg.origin, leg.dest) + 90, 9))
        all_flights += [old_out, old_back, unrel_flight, *extra]
        all_flights.sort(key=lambda f: f["flight_id"])

        # hotels ----------------------------------------------------------------------------
        cap = rng.choice([190, 210, 230, 250, 275])
        caps = {c: rng.choice([170, 190, 210, 230, 250, 275]) for c in sorted(DISTRICTS) if c != city[0]}
        caps[city[0]] = cap
        group = len(travellers)
        hid = iter(range(rng.randrange(100, 500), 1000))
        names: set[str] = set()

        def hotel(district: str, rate: int, rooms: int) -> dict:
            while True:
                name = f"{fake.last_name()} {rng.choice(HOTEL_WORDS)}"
                if name not in names:
                    names.add(name)
                    break
            return {"hotel_id": f"HT{next(hid)}", "name": name, "city": city[0], "district": district,
                    "address": f"{rng.randint(1, 900)} {fake.street_name()} {fake.street_suffix()}",
                    "nightly_rate": float(rate), "rooms": rooms, "rating": round(rng.uniform(3.4, 4.8), 1)}

        h_ok = hotel(venue_district, cap - rng.randint(15, 55), group + rng.randint(3, 8))
        h_small = hotel(venue_district, h_ok["nightly_rate"] - rng.randint(8, 30), 2)
        h_dear = hotel(venue_district, h_ok["nightly_rate"] + rng.randint(4, 12), group + 5)
        if h_dear["nightly_rate"] > cap:
            h_dear["nightly_rate"] = float(cap)
        h_over = hotel(venue_district, cap + rng.randint(20, 140), 20)
        far = [hotel(d, cap - rng.randint(60, 110), 15) for d in rng.sample(other_districts, 3)]
        hotels = sorted([h_ok, h_small, h_dear, h_over, *far], key=lambda h: h["hotel_id"])

        # bookings already in the system --------------------------------------------------------
        outsider = outsiders[0]
        seeded = [  # (what, booking); the old dates' ones as drawn
            {"kind": "flight", "traveler": old1.email, "flight_id": old_out["flight_id"], "cabin": "economy",
             "booked_on": (today - timedelta(days=rng.randint(10, 20))).isoformat()},
            {"kind": "flight", "traveler": old1.email, "flight_id": old_back["flight_id"], "cabin": "economy",
             "booked_on": (today - timedelta(days=rng.randint(10, 20))).isoformat()},
            {"kind": "hotel", "traveler": old1.email, "hotel_id": far[0]["hotel_id"],
             "check_in": (old_start - timedelta(days=1)).isoformat(), "check_out": old_end.isoformat(),
             "booked_on": (today - timedelta(days=rng.randint(10, 20))).isoformat()},
            {"kind": "hotel", "traveler": old2.email, "hotel_id": h_ok["hotel_id"],
             "check_in": (old_start - timedelta(days=1)).isoformat(), "check_out": old_end.isoformat(),
             "booked_on": (today - timedelta(days=rng.randint(5, 9))).isoformat()},
            {"kind": "flight", "traveler": unrel.email, "flight_id": unrel_flight["flight_id"], "cabin": "economy",
             "booked_on": (today - timedelta(days=rng.randint(2, 6))).isoformat()},
            {"kind": "hotel", "traveler": outsider.email, "hotel_id": h_small["hotel_id"],
             "check_in": (start - timedelta(days=2)).isoformat(), "check_out": (end + timedelta(days=1)).isoformat(),
             "booked_on": (today - timedelta(days=rng.randint(3, 30))).isoformat()},
        ]
        kept = {"both": (0, 1, 2, 3), "trip": (0, 1, 2), "stay": (3,)}[old_kind] + (4, 5)
        order = list(kept)
        rng.shuffle(order)
        outsider_stay = seeded[5]
        seeded = [seeded[i] for i in order]
        ids = {i: travel.booking_id(travel.FIRST_BOOKING + pos) for pos, i in enumerate(order)}
        superseded = sorted(ids[i] for i in (0, 1, 2, 3) if i in ids)
        unrelated = [ids[4], ids[5]]  # the unrelated trip, an outsider's stay
        unrelated_spec = {ids[4]: (unrel.email, unrel_flight["flight_id"], "economy"),
                          ids[5]: (outsider.email, h_small["hotel_id"], outsider_stay["check_in"],
                                   outsider_stay["check_out"])}
        preexisting = set(superseded) | set(unrelated)

        policy = {
            "title": f"{our_company} travel policy",
            "advance_booking": "Book flights at least 14 days before departure.",
            "flights": {
                "preferred_airlines": preferred,
                "airline_rule": ("Book the cheapest compliant fare on a preferred airline. Another airline may be "
                                 "used only when no preferred airline has a compliant flight with a seat."),
                "cabin": ("Economy on flights scheduled under 4h30; premium economy on flights scheduled 4h30 or "
                          "longer (the listed duration). Business and first class are not permitted."),
                "events": ("Fly in the day before the event starts, landing by 21:00 local time. Fly home on the "
                           "event's last day, departing at least 2 hours after it ends. A manager-approved "
                           "extension moves the return to the approved day (any departure time that day)."),
            },
            "hotels": {
                "nightly_cap_usd": caps,
                "rule": ("Stay in the venue's district. A group attending the same event stays together: book the "
                         "cheapest hotel in the venue's district, within the nightly cap, that has a room for every "
                         "member of the group for the whole stay. Nights run from the arrival day to the day you "
                         "fly home."),
            },
        }

        airports = [{"code": c[1], "city": c[0], "name": c[2]} for c in CITIES]
        directory_people = sorted({p.email: p for p in [me, lead, *travellers, declined, tagalong, *outsiders]
                                   + ([local2] if local2 else [])}.values(), key=lambda p: p.email)
        directory = [{"email": p.email, "name": p.name, "department": depts[p.email],
                      "home_airport": home_of[p.email][1]} for p in directory_people]

        # calendar ---------------------------------------------------------------------------
        attendees = [lead, *travellers, declined] + ([local2] if local2 else [])
        invitees = [a for a in attendees if a is not lead]
        rng.shuffle(invitees)
        responses = {p.email: "accepted" for p in invitees}
        responses[declined.email] = "declined"
        fmt = lambda d, t: datetime.combine(d, t).strftime(cal.TIME_FMT)  # noqa: E731
        event_title = f"{team} team offsite"
        events = [
            {"title": event_title, "start": fmt(old_start, day_start), "end": fmt(old_end, day_end),
             "organizer": lead.email, "attendees": [{"email": p.email, "response": "needs_action"} for p in invitees],
             "location": f"{venue}, {city[0]}", "status": "cancelled",
             "description": "Original dates - moved, see the new invite."},
            {"title": event_title, "start": fmt(start, day_start), "end": fmt(end, day_end),
             "organizer": lead.email,
             "attendees": [{"email": me.email, "response": "accepted"}] +
                          [{"email": p.email, "response": responses[p.email]} for p in invitees],
             "location": f"{venue}, {venue_address}, {venue_district}, {city[0]}",
             "description": (f"{team} offsite at {venue} ({venue_district}, {city[0]}). Days run "
                             f"{day_start.strftime('%H:%M')}-{day_end.strftime('%H:%M')}; we wrap up at "
                             f"{day_end.strftime('%H:%M')} on the last day. Travel is booked centrally by "
                             f"{me.first}.")},
            {"title": "Weekly ops sync", "start": fmt(today + timedelta(days=1), time(10, 0)),
             "end": fmt(today + timedelta(days=1), time(10, 30)), "attendees": [lead.email]},
        ]
        cal_people = [{"email": p.email, "name": p.name} for p in directory_people]

        # mail -------------------------------------------------------------------------------
        at = lambda d, h, m: datetime.combine(d, time(h, m)).isoformat()  # noqa: E731
        dates_text = f"{long_date(start)} to {long_date(end)}"
        old_text = f"{MONTHS[old_start.month - 1].capitalize()} {old_start.day}-{old_end.day}" \
            if old_start.month == old_end.month else f"{old_start.isoformat()} to {old_end.isoformat()}"
        request = (
            f"Hi {me.first},\n\n"
            f"As you probably saw, the {team} offsite has moved: it's now {dates_text} at {venue} "
            f"({venue_address}, {venue_district}, {city[0]}). The updated invite is on the calendar.\n\n"
            f"Could you book travel for everyone on the invite who's coming? Please follow the travel policy "
            f"to the letter (it's in the booking tool) - finance has been strict lately. People who live in "
            f"{city[0]}, like you and me, don't need flights or a hotel. Anything already booked for the original "
            f"dates ({old_text}) should be cancelled: those bookings, nothing else.\n\n"
            f"When you're done, put the itinerary in {ITINERARY} - one line per traveller with their flights, "
            f"hotel and booking references - and mail it to me.\n\nThanks a lot!\n{lead.first}"
        )
        inbox = [
            {"folder": "Inbox", "sender": f"news@{rng.choice(['flyaway', 'tripdeals', 'jetsetter'])}.example",
             "sender_name": "Travel Deals", "subject": f"Weekend fares to {city[0]} from $89",
             "body": "Limited seats! Book by Sunday.", "date": at(today - timedelta(days=3), 6, 0)},
            {"folder": "Inbox", "sender": lead.email, "sender_name": lead.name, "to": [me.email],
             "subject": f"Offsite travel - new dates ({city[0]})", "body": request,
             "date": at(today - timedelta(days=1), 16, 45)},
            {"folder": "Inbox", "sender": declined.email, "sender_name": declined.name, "to": [me.email],
             "subject": "Can't make the offsite",
             "body": (f"Hi {me.first}, unfortunately I'm on leave that week, so I've declined the invite. "
                      f"No travel needed for me.\n\n{declined.first}"),
             "date": at(today, 7, 50)},
        ]
        if ext_kind:  # the same request either way: only the lead's reply decides
            inbox.append({
                "folder": "Inbox", "sender": ext.email, "sender_name": ext.name, "to": [me.email], "cc": [lead.email],
                "subject": "Offsite - staying one extra night",
                "body": (f"Hi {me.first},\n\nI have a customer visit in {city[0]} the morning after the offsite, so "
                         f"I'd like to stay one more night and fly home on {long_date(end + timedelta(days=1))}. "
                         f"{lead.first}, is that OK with you? (cc'd)\n\nThanks,\n{ext.first}"),
                "date": at(today - timedelta(days=1), 17, 30)})
            inbox.append({
                "folder": "Inbox", "sender": lead.email, "sender_name": lead.name, "to": [me.email, ext.email],
                "subject": "Re: Offsite - staying one extra night",
                "body": (f"Approved - thanks {ext.first}.\n\n{lead.first}" if extended else
                         f"Sorry {ext.first}, not this time: the offsite budget is tight, so please fly home on "
                         f"{long_date(end)} with everyone else and plan the customer visit for another week."
                         f"\n\n{lead.first}"),
                "date": at(today - timedelta(days=1), 18, 2)})
        if tagalong_asks:
            inbox.append({
                "folder": "Inbox", "sender": tagalong.email, "sender_name": tagalong.name, "to": [me.email],
                "subject": "Offsite",
                "body": (f"Hey {me.first}, I heard the {team} team is heading to {city[0]}. Any chance I could tag "
                         f"along? I haven't asked {lead.first} yet.\n\n{tagalong.first}"),
                "date": at(today, 8, 15)})
        inbox.sort(key=lambda m: m["date"])
        for i, m in enumerate(inbox, start=1):
            m["id"] = i
            if m["subject"].startswith("Re: "):
                m["in_reply_to"] = next(x["id"] for x in inbox if x["subject"] == m["subject"][4:])
        to_read = [m["id"] for m in inbox if m["sender_name"] != "Travel Deals"]

        def build(root: Path) -> None:
            travel.create_travel(root / "state" / "travel.sqlite", today=today.isoformat(), policy=policy,
                                 airports=airports, travelers=directory, flights=all_flights, hotels=hotels,
                                 bookings=seeded)
            if level == 1:
                return
            cal.create_calendar(root / "state" / "calendar.sqlite", me.email, cal_people, events,
                                today=today.isoformat())
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox,
                                now=at(today, 9, 0))

        w = phrasing_rng(self.name, seed)
        ask = say(w, f"Could you sort out the travel for the {team} offsite?",
                  f"Please sort out the travel for the {team} offsite.",
                  f"The {team} offsite needs its travel sorted out: could you take care of that?",
                  f"I need the travel for the {team} offsite sorted out.")
        sources = in_some_order(w, [
            say(w, f"{lead.first}'s mail has the details.", f"The details are in {lead.first}'s mail.",
                f"You'll find the details in the mail from {lead.first}."),
            say(w, "The invite is on my calendar.", "My calendar has the invite.",
                "The invite sits on my calendar."),
        ])
        book = say(w, "Book everything through the travel tool, by the policy.",
                   "Everything should be booked through the travel tool, following the policy.",
                   "Make all the bookings in the travel tool, by the policy.",
                   "Do all the booking through the travel tool, by the policy.")
        instruction = " ".join(x for x in [say(w, "Hi!", "Hello!", ""), ask, *sources, book,
                                           say(w, "Thanks!", "Thank you.", "")] if x)

        expected = {
            p.email: {"name": p.name, "first": p.first, "out": plan[p.email]["out"].choice,
                      "back": plan[p.email]["back"].choice,
                      "out_cabin": None, "back_cabin": None,
                      "check_in": plan[p.email]["check_in"], "check_out": plan[p.email]["check_out"]}
            for p in travellers
        }
        by_id = {f["flight_id"]: f for f in all_flights}
        for e in expected.values():
            e["out_cabin"] = required_cabin(by_id[e["out"]]["duration_minutes"])
            e["back_cabin"] = required_cabin(by_id[e["back"]]["duration_minutes"])
        trav_by_email = {p.email: p for p in travellers}
        h_want = h_ok
        if level == 1:  # the same draws as the default, then one traveller with nothing booked yet
            solo = max((p for p in travellers if p not in (ext, old1, old2)),
                       key=lambda p: (base_minutes(home_of[p.email], city), p.email))
            expected = {solo.email: expected[solo.email]}
            booked = {b["flight_id"] for b in seeded if b["kind"] == "flight"}
            all_flights = [f for f in all_flights if f["flight_id"] in (decoys - dearer) | booked]  # fewer rows
            ci, co = expected[solo.email]["check_in"], expected[solo.email]["check_out"]

            def rooms_left(h: dict) -> int:
                return h["rooms"] - sum(1 for b in seeded if b["kind"] == "hotel" and b["hotel_id"] == h["hotel_id"]
                                        and b["check_in"] < co and b["check_out"] > ci)

            h_want = min((h for h in hotels if h["district"] == venue_district and h["nightly_rate"] <= cap
                          and rooms_left(h) >= 1), key=lambda h: h["nightly_rate"])
            instruction = " ".join(x for x in [say(w, "Hi!", "Hello!", ""), say(
                w, f"{solo.name} is the only one who needs travel for the {team} offsite",
                f"For the {team} offsite, only {solo.name} needs travel"),
                f"({dates_text} at {venue}, {venue_address}, {venue_district}, {city[0]}; the last day wraps up "
                f"at {day_end.strftime('%H:%M')}).", say(
                w, "Could you book their flights and hotel through the travel tool, by the policy there?",
                "Please book their flights and hotel in the travel tool, following its policy."),
                say(w, "Thanks!", "Thank you.", "")] if x)

        # ---- oracle ------------------------------------------------------------------------
        def ranked(flights: list[dict], leg: Leg) -> list[tuple]:
            """The compliant flights with a seat in their cabin, the policy's pick first: (not a
            preferred airline, price, flight id, cabin)."""
            options = []
            for f in flights:
                cabin = required_cabin(f["duration_minutes"])
                fare = next((x for x in f["fares"] if x["cabin"] == cabin), None)
                if fare is not None and fare["seats_left"] >= 1 and leg.timing_ok(f):
                    options.append((f["airline"] not in preferred, fare["price"], f["flight_id"], cabin))
            return sorted(options)

        def solve_one():
            """Level 1: one named traveller; the dates are in the task."""
            email = solo.email
            yield ToolCall("travel__get_policy", {}, "Read the travel policy.")
            people_ = parse_json((yield ToolCall("travel__list_travelers", {"query": solo.name},
                                                 "Look up their home airport.")))
            home = next(p["home_airport"] for p in people_ if p["email"] == email)
            assert home == home_of[email][1]
            for leg_kind in ("out", "back"):
                leg = plan[email][leg_kind]
                res = parse_json((yield ToolCall("travel__search_flights", {
                    "origin": leg.origin[1], "destination": leg.dest[1], "date": leg.day.isoformat()},
                    f"{'Outbound' if leg_kind == 'out' else 'Return'} options {leg.origin[1]}->{leg.dest[1]}.")))
                _, _, pick, cabin = ranked(res["flights"], leg)[0]
                yield ToolCall("travel__book_flight", {"flight_id": pick, "traveler": email, "cabin": cabin},
                               f"Book the policy flight {pick} ({cabin}).")
            found = parse_json((yield ToolCall("travel__search_hotels", {
                "city": city[0], "check_in": ci, "check_out": co, "max_rate": cap},
                f"Hotels under the {cap} cap for the nights.")))
            chosen = min((h for h in found["hotels"] if h["district"] == venue_district and h["rooms_left"] >= 1),
                         key=lambda h: h["nightly_rate"])["hotel_id"]
            yield ToolCall("travel__book_hotel", {"hotel_id": chosen, "traveler": email, "check_in": ci,
                                                  "check_out": co}, "Book the policy hotel.")
            return f"Booked {solo.name}'s flights and hotel by the policy."

        def solve_all():
            yield ToolCall("mail__list_messages", {"folder": "Inbox", "limit": 25}, "See what came in.")
            for mid in to_read:
                yield ToolCall("mail__read_message", {"message_id": mid}, f"Read message {mid}.")
            evs = parse_json((yield ToolCall("calendar__list_events", {
                "start": (start - timedelta(days=1)).isoformat(), "end": end.isoformat()},
                "Find the offsite invite on the calendar.")))
            ev = next(e for e in evs if e["title"] == event_title)
            ev = parse_json((yield ToolCall("calendar__get_event", {"event_id": ev["id"]},
                                            "Read the invite: attendees, responses and end time.")))
            yield ToolCall("travel__get_policy", {}, "Read the travel policy.")
            people_ = parse_json((yield ToolCall("travel__list_travelers", {}, "Look up home airports.")))
            home = {p["email"]: p["home_airport"] for p in people_}
            coming = [a["email"] for a in ev["attendees"] if a["response"] != "declined"] + [ev["organizer"]]
            flying = sorted(e for e in coming if home[e] != city[1])
            books = parse_json((yield ToolCall("travel__list_bookings", {}, "Check what is already booked.")))
            old_days = {(old_start - timedelta(days=1)).isoformat(), old_end.isoformat()}
            to_cancel = [b["booking_id"] for b in books if b["status"] == "active" and b["traveler"] in coming and (
                (b["kind"] == "flight" and b["depart"][:10] in old_days and city[1] in (b["from"], b["to"]))
                or (b["kind"] == "hotel" and b["city"] == city[0] and b["check_in"] < start.isoformat()))]
            for bid in to_cancel:
                yield ToolCall("travel__cancel_booking", {"booking_id": bid}, f"Cancel {bid} (old dates).")
            made: dict[str, dict[str, str]] = {}
            for email in flying:
                made[email] = {}
                for leg_kind in ("out", "back"):
                    leg = plan[email][leg_kind]
                    res = parse_json((yield ToolCall("travel__search_flights", {
                        "origin": leg.origin[1], "destination": leg.dest[1], "date": leg.day.isoformat()},
                        f"{trav_by_email[email].first}: {'outbound' if leg_kind == 'out' else 'return'} "
                        f"options {leg.origin[1]}->{leg.dest[1]} on {leg.day}.")))
                    _, _, pick, cabin = ranked(res["flights"], leg)[0]
                    text = yield ToolCall("travel__book_flight", {"flight_id": pick, "traveler": email,
                                                                  "cabin": cabin},
                                          f"Book the policy flight {pick} ({cabin}).")
                    made[email][leg_kind] = text.split()[1].rstrip(":")
            ins = (start - timedelta(days=1)).isoformat()
            hotels_found = parse_json((yield ToolCall("travel__search_hotels", {
                "city": city[0], "check_in": ins, "check_out": end.isoformat(), "max_rate": cap},
                f"Hotels under the {cap} cap for the group's nights.")))
            fits = [h for h in hotels_found["hotels"] if h["district"] == venue_district
                    and h["rooms_left"] >= len(flying)]
            chosen = min(fits, key=lambda h: h["nightly_rate"])
            if extended:
                yield ToolCall("travel__search_hotels", {
                    "city": city[0], "check_in": ins, "check_out": plan[ext.email]["check_out"], "max_rate": cap},
                    f"Check {chosen['name']} also has a room for {ext.first}'s extra night.")
            for email in flying:
                text = yield ToolCall("travel__book_hotel", {
                    "hotel_id": chosen["hotel_id"], "traveler": email, "check_in": plan[email]["check_in"],
                    "check_out": plan[email]["check_out"]}, f"Room for {trav_by_email[email].first}.")
                made[email]["hotel"] = text.split()[1].rstrip(":")
            final = parse_json((yield ToolCall("travel__list_bookings", {}, "Verify every booking.")))
            info = {b["booking_id"]: b for b in final}
            lines = [f"# {team} offsite, {city[0]} - {dates_text}", "",
                     f"Venue: {venue}, {venue_address} ({venue_district})", ""]
            for email in sorted(made):
                b = made[email]
                o, r, h = info[b["out"]], info[b["back"]], info[b["hotel"]]
                lines.append(
                    f"- {o['traveler_name']}: out {o['flight_no']} {o['from']}->{o['to']} {o['depart']} "
                    f"({o['cabin']}, {b['out']}); back {r['flight_no']} {r['from']}->{r['to']} {r['depart']} "
                    f"({r['cabin']}, {b['back']}); hotel {h['hotel']} {h['check_in']} to {h['check_out']} "
                    f"({b['hotel']})")
            lines += ["", f"Cancelled for the old dates: {', '.join(to_cancel)}."]
            text = "\n".join(lines) + "\n"
            yield ToolCall("files__write_file", {"path": ITINERARY, "content": text}, "Write the itinerary.")
            yield ToolCall("mail__send_message", {
                "to": [lead.email], "subject": f"Offsite travel booked ({city[0]})",
                "body": f"Hi {lead.first},\n\nEverything is booked; itinerary below and attached.\n\n{text}\n"
                        f"{me.first}", "attachments": [ITINERARY]}, "Send the itinerary to the lead.")
            return f"Booked {len(made)} travellers, cancelled {len(to_cancel)} old bookings, itinerary sent."

        # each perturbation fails one criterion: an edit of the oracle's calls. The first traveller
        # (the only one at level 1) takes the wrong flight or hotel, worked out from the flights a
        # search lists (every flight of the leg at this level, no seat taken yet)
        solve = solve_one if level == 1 else solve_all
        first = min(expected)
        listed = {f["flight_id"] for f in all_flights}

        def searched(leg: Leg) -> list[dict]:
            """The leg's flights as a search lists them."""
            return [{**f, "fares": [{"cabin": c, "price": p, "seats_left": s} for c, (p, s) in f["fares"].items()]}
                    for f in leg.flights if f["flight_id"] in listed]

        def rebook(kind: str, f: dict):
            """Book flight ``f`` for the first traveller in place of the policy's pick."""
            return perturb.change(solve, perturb.on("travel__book_flight", flight_id=plan[first][kind].choice,
                                                    traveler=first),
                                  flight_id=f["flight_id"], cabin=required_cabin(f["duration_minutes"]))

        def seated(f: dict) -> bool:
            return any(x["cabin"] == required_cabin(f["duration_minutes"]) and x["seats_left"] >= 1 for x in f["fares"])

        out, back = plan[first]["out"], plan[first]["back"]
        early = min((f for f in searched(back) if not back.timing_ok(f) and seated(f)), key=lambda f: f["depart"],
                    default=None)  # the earliest return that leaves too soon and has a seat
        room = perturb.on("travel__book_hotel", traveler=first)
        flawed = {
            "policy_checked": lambda: perturb.drop(solve, perturb.on("travel__get_policy")),
            "flights_out": lambda: rebook("out", by_id[next(o[2] for o in ranked(searched(out), out) if o[0])]),
            "flights_back": lambda: rebook("back", early or by_id[ranked(searched(back), back)[-1][2]]),
            "hotel": lambda: perturb.change(solve, room, hotel_id=(h_ok if h_want is h_dear else h_dear)["hotel_id"]),
            "itinerary_file": lambda: perturb.change(solve, perturb.on("files__write_file"), lambda a: {
                **a, "content": re.sub(r"; hotel [^\n]*", "", a["content"], count=1)}),
            "itinerary_mail": lambda: perturb.drop(solve, perturb.on("mail__send_message")),
        }
        if level == 1:
            flawed["no_extra_bookings"] = lambda: perturb.insert(solve, ToolCall("travel__book_hotel", {
                "hotel_id": h_over["hotel_id"], "traveler": declined.email, "check_in": ci, "check_out": co},
                "A room for them too."), after=room)
        else:
            flights_booked = perturb.on("travel__search_flights")  # the first search comes after the cancellations
            flawed |= {
                "no_extra_bookings": lambda: perturb.insert(solve, ToolCall("travel__book_hotel", {
                    "hotel_id": h_ok["hotel_id"], "traveler": declined.email,
                    "check_in": (start - timedelta(days=1)).isoformat(), "check_out": end.isoformat()},
                    "Book a room too."), before=perturb.on("travel__search_hotels")),
                "superseded_cancelled": lambda: perturb.drop(solve, perturb.on("travel__cancel_booking"),
                                                             skip=len(superseded) - 1),
                "unrelated_kept": lambda: perturb.insert(solve, ToolCall(
                    "travel__cancel_booking", {"booking_id": unrelated[0]}, f"Cancel {unrelated[0]} (old dates)."),
                    before=flights_booked),
                "only_superseded_cancelled": lambda: perturb.insert(solve, ToolCall(
                    "travel__cancel_booking", {"booking_id": unrelated[1]}, f"Cancel {unrelated[1]} (old dates)."),
                    ToolCall("travel__book_hotel", {  # put the outsider's stay back as it was
                        "hotel_id": h_small["hotel_id"], "traveler": outsider.email,
                        "check_in": (start - timedelta(days=2)).isoformat(),
                        "check_out": (end + timedelta(days=1)).isoformat()}, "Rebook the stay I cancelled."),
                    before=flights_booked),
            }

        # ---- grading -----------------------------------------------------------------------
        def active_new(world) -> list[dict]:
            return [b for b in travel.bookings(world, "active") if b["booking_id"] not in preexisting]

        def slots(world, email: str) -> dict[str, list[dict]]:
            mine = [b for b in active_new(world) if b["traveler"] == email]
            return {
                "out": [b for b in mine if b["kind"] == "flight" and b["to"] == city[1]],
                "back": [b for b in mine if b["kind"] == "flight" and b["from"] == city[1]],
                "hotel": [b for b in mine if b["kind"] == "hotel"],
            }

        def check_flights(kind: str):
            def check(world, traj):
                bad = []
                for email, e in expected.items():
                    got = slots(world, email)[kind]
                    if len(got) != 1 or got[0]["flight_id"] != e[kind] or got[0]["cabin"] != e[f"{kind}_cabin"]:
                        bad.append(f"{e['name']}: {[(b['flight_id'], b['cabin']) for b in got]} "
                                   f"(expected {e[kind]} {e[f'{kind}_cabin']})")
                return not bad, "; ".join(bad)
            return check

        def check_hotel(world, traj):
            bad = []
            for email, e in expected.items():
                got = slots(world, email)["hotel"]
                if len(got) != 1 or (got[0]["hotel_id"], got[0]["check_in"], got[0]["check_out"]) != (
                        h_want["hotel_id"], e["check_in"], e["check_out"]):
                    bad.append(f"{e['name']}: {[(b['hotel_id'], b['check_in'], b['check_out']) for b in got]}")
            return not bad, "; ".join(bad)

        def check_superseded(world, traj):
            status = {b["booking_id"]: b["status"] for b in travel.bookings(world)}
            left = [bid for bid in superseded if status.get(bid) != "cancelled"]
            if left:
                return False, f"still active: {left}"
            kept, why = check_unrelated(world, traj)  # cancelling everything is not the job
            return kept, why

        def check_unrelated(world, traj):
            """Each unrelated booking (or an identical rebooking of it) is still active."""
            held = set()
            for b in travel.bookings(world, "active"):
                held.add((b["traveler"], b["flight_id"], b["cabin"]) if b["kind"] == "flight"
                         else (b["traveler"], b["hotel_id"], b["check_in"], b["check_out"]))
            gone = [bid for bid in unrelated if unrelated_spec[bid] not in held]
            return not gone, f"no longer held: {gone}" if gone else ""

        def check_no_extra(world, traj):
            extra = []
            for b in active_new(world):
                same = ((b["traveler"], b["flight_id"], b["cabin"]) if b["kind"] == "flight"
                        else (b["traveler"], b["hotel_id"], b["check_in"], b["check_out"]))
                if same in unrelated_spec.values():
                    continue  # an unrelated booking put back as it was
                if b["traveler"] not in expected:
                    extra.append(f"{b['booking_id']} for {b['traveler']}")
            for email in expected:
                for kind, got in slots(world, email).items():
                    if len(got) > 1:
                        extra.append(f"{email}: {len(got)} {kind} bookings")
            return not extra, "; ".join(extra)

        def booking_refs(world) -> dict[str, list[str]]:
            return {email: [b["booking_id"] for kind in ("out", "back", "hotel") for b in slots(world, email)[kind]]
                    for email in expected}

        def covers(text: str, world) -> tuple[bool, str]:
            flat = squash(text)
            missing = []
            refs = booking_refs(world)
            for email, e in expected.items():
                if e["first"].lower() not in norm(text) and e["name"].lower() not in norm(text):
                    missing.append(e["name"])
                if len(refs[email]) < 3:
                    missing.append(f"{e['name']}'s bookings")
                missing += [r for r in refs[email] if squash(r) not in flat]
            if squash(h_ok["name"]) not in flat:
                missing.append(h_ok["name"])
            return not missing, f"missing: {missing}" if missing else ""

        def check_file(world, traj):
            p = world.file(ITINERARY)
            if not p.is_file():
                return False, f"{ITINERARY} missing"
            return covers(output_text(p, encoding="utf-8", errors="replace"), world)

        def check_mail(world, traj):
            sent = [m for m in mail.sent_messages(world) if lead.email in m["to"] + m["cc"]]
            if not sent:
                return False, f"nothing sent to {lead.email}"
            m = sent[-1]
            text = m["body"]
            for a in m["attachments"]:
                try:
                    text += "\n" + output_text(mail.attachment_path(world, m["id"], a["name"]))
                except (OSError, UnicodeDecodeError):
                    continue
            return covers(text, world)

        def check_policy_read(world, traj):
            calls = [c.name for c in traj.tool_calls if not c.is_error]
            first_book = next((i for i, n in enumerate(calls) if n in ("travel__book_flight", "travel__book_hotel")),
                              None)
            if first_book is None:
                return True
            read = "travel__get_policy" in calls[:first_book]
            return read, "" if read else "booked before reading the travel policy"

        def check_cancels(world, traj):
            mine: set[str] = set()
            for c in traj.tool_calls:
                if c.is_error:
                    continue
                if c.name in ("travel__book_flight", "travel__book_hotel"):
                    ref = c.result.split()[1].rstrip(":") if c.result.startswith("Booked ") else ""
                    mine.add(ref)
                if c.name == "travel__cancel_booking":
                    args = c.arguments if isinstance(c.arguments, dict) else {}
                    ref = str(args.get("booking_id", "")).strip().upper()
                    ref = f"BK-{ref}" if ref.isdigit() else ref
                    if ref not in superseded and ref not in mine:
                        return False, f"cancelled {ref}, which was neither for the old dates nor booked this session"
            return True

        criteria = [
            Criterion("flights_out", "each traveller holds exactly the policy outbound flight in the right cabin",
                      "final_state", check_flights("out"), 2.0),
            Criterion("flights_back", "each traveller holds exactly the policy return flight (extension honoured)",
                      "final_state", check_flights("back"), 2.0),
            Criterion("hotel", "everyone is in the policy hotel (venue district, under cap, fits the group) "
                      "for the right nights", "final_state", check_hotel, 2.0),
            Criterion("superseded_cancelled", "every booking for the old dates is cancelled (and only those)",
                      "final_state", check_superseded, 1.0),
            # reporting whatever was booked pays only once the bookings are the policy's
            Criterion("itinerary_file", f"{ITINERARY} names every traveller with their booking references and "
                      "the hotel", "final_state", check_file, 1.0, requires=("flights_out",)),
            Criterion("itinerary_mail", "the lead got the itinerary (booking references included)", "final_state",
                      check_mail, 1.0, requires=("flights_out",)),
            Criterion("policy_checked", "no booking was made before the travel policy was read", "process",
                      check_policy_read, 1.0, guard=True),
            Criterion("unrelated_kept", "bookings unrelated to the offsite are still active", "final_state",
                      check_unrelated, 1.0, guard=True),
            Criterion("no_extra_bookings", "nothing booked for people not travelling, no double bookings",
                      "final_state", check_no_extra, 1.0, guard=True),
            Criterion("only_superseded_cancelled", "only old-date bookings (or the session's own) were cancelled",
                      "process", check_cancels, 1.0, guard=True),
        ]
        if level == 1:  # nothing to cancel or report, and no tool that cancels
            criteria = [c for c in criteria if c.id not in (
                "superseded_cancelled", "itinerary_file", "itinerary_mail", "unrelated_kept",
                "only_superseded_cancelled")]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps_at(level), build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"city": city[0], "start": start.isoformat(), "end": end.isoformat(), "hotel": h_want["hotel_id"],
                  "expected": expected, "superseded": superseded, "unrelated": unrelated,
                  "preferred": preferred,
                  # the drawn traps, empty when absent (level 1 has no mail: nobody writes there)
                  "extension": ext.email if extended and level > 1 else "",
                  "extension_refused": ext.email if ext_kind == "refused" and level > 1 else "",
                  "old_trip": old1.email if old_kind in ("both", "trip") else "",
                  "old_stay": old2.email if old_kind in ("both", "stay") else "",
                  "tagalong": tagalong.email if tagalong_asks and level > 1 else ""},
        )
