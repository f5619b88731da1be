"""Travel booking: the airline cancelled the flight a team was taking to a summit; rebook them.

The airline's notice names the flight and the passengers; the booking tool's policy says how
to rebook (same cabin as the cancelled booking; the same airline first, then another
preferred airline, then anyone; the cheapest fare under the rebooking cap; leave on the
original day or the next one and land at least two hours before the event starts, which
only the calendar invite says). The event lead's mail names the presenters, who get the
scarce seats first. Whoever now lands a day later needs their hotel stay shortened; the
flight holds on the owner's calendar move to the new flights, and each traveller gets their
own new itinerary. Decoys: a same-airline flight over the cap, one that lands too late, a
cheaper flight the day before, a cheaper non-preferred airline.

Drawn per seed (``DROPOUT_KINDS``, ``LATER_ODDS``, ``TERMINAL_ODDS``; recorded in ``Task.data``,
empty when absent): one traveller on the flight writes that they drop out (cancel the whole
trip: ``dropout_cancelled``), or that they drive instead (cancel both flights, keep the hotel:
``driver_flights_cancelled``), or nobody writes; the same flight number a week later is booked
for someone else or not; another airline's harmless terminal-change notice is in the inbox or not.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, time, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from longhorizon.apps.calendar import state as cal
from longhorizon.apps.mail import state as mail
from longhorizon.apps.travel import state as travel
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.calendar.slots import snapshot
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    People,
    company,
    day_month,
    loads,
    long_date,
    mentions_date,
    mentions_time,
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
    ("Dallas", "DFW", "Dallas/Fort Worth International", 32.90, -97.04, -6),
    ("Denver", "DEN", "Denver International", 39.86, -104.67, -7),
    ("Phoenix", "PHX", "Sky Harbor International", 33.43, -112.01, -7),
    ("Seattle", "SEA", "Seattle-Tacoma International", 47.45, -122.31, -8),
    ("San Francisco", "SFO", "San Francisco International", 37.62, -122.38, -8),
    ("Los Angeles", "LAX", "Los Angeles International", 33.94, -118.41, -8),
]
EVENTS = ["Customer Summit", "Partner Forum", "Product Summit", "Sales Kickoff", "User Conference"]
REASONS = ["crew availability", "an aircraft technical issue", "operational constraints"]
KICKOFFS = [time(10, 0), time(10, 30), time(11, 0), time(12, 0), time(13, 0)]
FMT = travel.TIME_FMT
DROPOUT_KINDS = ("cancel", "drive", "")
"""Who writes that they are not flying: one who drops out (cancel the whole trip), one who drives
instead (cancel both flights, keep the hotel stay), or nobody."""
DROPOUT_ODDS = (0.4, 0.3, 0.3)
LATER_ODDS = 0.65
"""How often the same flight number a week later is booked for someone else."""
TERMINAL_ODDS = 0.6
"""How often another airline's harmless terminal-change notice is in the inbox."""


def _tier(airline: str, orig: str, preferred: list[str]) -> int:
    return 0 if airline == orig else 1 if airline in preferred else 2


def options(flights: list[dict], cabin: str, orig: str, preferred: list[str], caps: dict[str, float],
            deadline: str, days: set[str], seats: dict[tuple[str, str], int],
            ignore_tier: bool = False) -> list[tuple[int, float, str]]:
    """Policy-compliant flights for ``cabin``, best first: (tier, fare, flight_id). ``flights`` are
    search_flights entries (fares as a list of {cabin, price, seats_left}); ``seats`` overrides
    the seats left (what this session already booked)."""
    out = []
    for f in flights:
        if f["depart"][:10] not in days or f["arrive"] > deadline:
            continue
        fare = next((x for x in f["fares"] if x["cabin"] == cabin), None)
        if fare is None or seats.get((f["flight_id"], cabin), fare["seats_left"]) < 1 or fare["price"] > caps[cabin]:
            continue
        out.append((0 if ignore_tier else _tier(f["airline"], orig, preferred), fare["price"], f["flight_id"]))
    return sorted(out)


@register
class CancelledFlightRebooking(TaskFamily):
    name = "cancelled_flight_rebooking"
    category = "travel booking"
    apps = ("travel", "calendar", "mail")
    description = (
        "An airline cancelled the flight a team was taking to a summit: rebook each traveller by the "
        "disruption policy (same cabin, same airline first, cheapest fare under the cap, land two hours "
        "before kickoff, presenters get scarce seats first), cancel what one who drops out or drives instead "
        "asks, shorten hotel stays whose arrival day moves, update the calendar holds and mail each traveller "
        "their itinerary."
    )

    levels = 2
    """1: one traveller off the cancelled flight (the kickoff time in the task; the others are left
    to a colleague), preferably one whose arrival day moves: read the policy (without the seat
    order and cancelled trips) and their bookings, search both days, cancel and rebook (and move
    the hotel stay); 2 (default): five or six travellers from the airline's notice, presenters
    first on scarce seats, one who may drop out or drive instead (drawn), the calendar holds and an
    itinerary mail each. Every level keeps the policy decoys (over the cap, too late, the day
    before, a non-preferred airline); the same flight a week later is booked for someone else or
    not (drawn)."""
    level_apps = {1: ("travel",)}
    """Level 1 names the traveller and the kickoff: no mail or calendar."""
    toolsets = {1: (
        "travel__book_flight", "travel__book_hotel", "travel__cancel_booking", "travel__get_policy",
        "travel__list_bookings", "travel__search_flights",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        for _attempt in range(200):
            scen = self._scenario(rng, fake)
            if scen is not None:
                break
        else:  # pragma: no cover - generation bug
            raise RuntimeError(f"{self.name}: no workable disruption for seed {seed}")
        s = scen
        me, lead, dropout = s["me"], s["lead"], s["dropout"]
        rebook, presenters, cabin_of = s["rebook"], s["presenters"], s["cabin_of"]
        A, B, D, kickoff, deadline = s["A"], s["B"], s["D"], s["kickoff"], s["deadline"]
        expected, flights, hotels, bookings = s["expected"], s["flights"], s["hotels"], s["bookings"]
        H, today, event_title = s["H"], s["today"], s["event_title"]
        X = s["X"]
        orig_airline, preferred, caps = s["orig_airline"], s["preferred"], s["caps"]
        by_email = {p.email: p for p in s["everyone"]}
        D1, D2 = D + timedelta(days=1), D + timedelta(days=2)
        dk, flyers = s["dropout_kind"], s["flyers"]  # dk: "cancel", "drive" or "" (nobody writes)

        # booking ids: BK-4101... in the seeded order
        bid = {key: travel.booking_id(travel.FIRST_BOOKING + i) for i, (key, _b) in enumerate(bookings)}
        x_refs = {t: bid[("out", t)] for t in flyers}
        hotel_refs = {t: bid[("hotel", t)] for t in flyers}
        return_refs = {t: bid[("back", t)] for t in flyers}
        # what the one who writes wants cancelled: everything, or (driving) both flights
        dropout_refs = ([] if not dk else [x_refs[dropout.email], return_refs[dropout.email]] +
                        ([hotel_refs[dropout.email]] if dk == "cancel" else []))
        keep_refs = sorted(r for k, r in bid.items() if k[1] not in flyers) + \
            sorted(return_refs[t] for t in rebook)
        seeded_refs = set(bid.values())
        stranger = s["stranger"]

        # -- calendar ------------------------------------------------------------------------------
        fl = {f["flight_id"]: f for f in flights}

        def hold(t_email: str, f: dict, ref: str) -> dict:
            return {"title": f"Flight {f['flight_no']} {f['origin']}\u2192{f['destination']}",
                    "start": f["depart"], "end": f["arrive"], "attendees": [t_email],
                    "description": f"{by_email[t_email].name}, booking {ref}"}

        travellers_all = [*flyers, *s["others"]]
        events = [{"title": f"{event_title}", "start": datetime.combine(D1, kickoff).strftime(FMT),
                   "end": datetime.combine(D2, time(16, 0)).strftime(FMT), "organizer": lead.email,
                   "location": f"{s['venue']}, {B[0]}",
                   "description": (f"Two days at {s['venue']}. Doors open 30 minutes before the kickoff; "
                                   f"day two wraps up at 16:00."),
                   "attendees": [{"email": me.email, "response": "accepted"}] +
                                [{"email": t, "response": "accepted"} for t in travellers_all]}]
        hold_ids: dict[str, int] = {}
        for t in travellers_all:
            f = fl[s["out_flight"][t]]
            events.append(hold(t, f, bid[("out", t)]))
        events.append({"title": "Weekly travel desk sync", "start": datetime.combine(today + timedelta(days=1),
                                                                                       time(9, 30)).strftime(FMT),
                       "end": datetime.combine(today + timedelta(days=1), time(10, 0)).strftime(FMT),
                       "attendees": [lead.email]})
        events.sort(key=lambda e: (e["start"], e["title"]))
        for i, e in enumerate(events, start=1):
            e["id"] = i
            if e["title"].startswith("Flight "):
                hold_ids[e["attendees"][0]] = i
        summit_id = next(e["id"] for e in events if e["title"] == event_title)
        last_event_id = len(events)
        seeded_events = {e["id"]: snapshot(e, me.email) for e in events}
        watched_events = [eid for eid in seeded_events
                          if eid not in (hold_ids[t] for t in flyers)]
        cal_people = [{"email": p.email, "name": p.name} for p in sorted(s["everyone"], key=lambda p: p.email)]

        # -- mail ------------------------------------------------------------------------------------
        def stamp(d: date, h: int, m: int) -> str:
            return f"{d.isoformat()}T{h:02d}:{m:02d}:00"

        airline_dom = squash(orig_airline) + ".example"
        pax = [by_email[t].name for t in sorted(flyers, key=lambda e: by_email[e].last)]
        pres_names = [by_email[t].name for t in presenters]
        other_f = fl[s["out_flight"][s["others"][0]]]
        msgs = [
            {"folder": "Inbox", "sender": f"alerts@{airline_dom}", "sender_name": f"{orig_airline} Alerts",
             "subject": f"Cancelled: {X['flight_no']} on {day_month(D)}",
             "body": (f"Dear customer,\n\nWe regret to inform you that flight {X['flight_no']} from {A[0]} "
                      f"({A[1]}) to {B[0]} ({B[1]}), scheduled to depart on {long_date(D)} at "
                      f"{X['depart'][11:]}, has been cancelled due to {rng.choice(REASONS)}.\n\n"
                      f"Passengers booked by {s['company']}:\n" + "\n".join(f"- {n}" for n in pax)
                      + "\n\nPlease rebook through your corporate travel tool. Original bookings remain on file "
                        f"until you cancel them.\n\n{orig_airline} Customer Care"),
             "date": stamp(today, 7, 12)},
            {"folder": "Inbox", "sender": lead.email, "sender_name": lead.name,
             "subject": f"{event_title}: presenters",
             "body": (f"Hi {me.first},\n\nSaw the cancellation, ugh. {pres_names[0]} and {pres_names[1]} present in "
                      f"the opening session, so if the flight the policy picks hasn't got seats for everyone, they "
                      f"get those seats first; the same rebooking rules apply to them as to everyone else. "
                      f"Everyone just needs to be there for the kickoff (the time is in the invite).\n\n"
                      f"Thanks for sorting it out,\n{lead.first}"),
             "date": stamp(today, 8, 3)},
            {"folder": "Inbox", "sender": "deals@farewatch.example", "sender_name": "FareWatch",
             "subject": f"Fares to {B[0]} from $79", "body": "Grab them before they're gone!",
             "date": stamp(today - timedelta(days=2), 6, 0), "is_read": True},
        ]
        if dk:  # the same subject either way: only the body says what to cancel
            msgs.append({"folder": "Inbox", "sender": dropout.email, "sender_name": dropout.name,
                         "subject": "Not flying to the summit",
                         "body": (f"Hi {me.first},\n\nWith the flight cancelled I'll join the {event_title} remotely "
                                  f"instead. Please cancel my whole trip (flights and hotel).\n\nThanks,\n"
                                  f"{dropout.first}") if dk == "cancel" else
                                 (f"Hi {me.first},\n\nWith the flight cancelled I'll drive to the {event_title} on "
                                  f"{long_date(D)} and back after it instead. Please cancel my flights, both ways, "
                                  f"but keep my hotel booking as it is. The flight hold can go too.\n\nThanks,\n"
                                  f"{dropout.first}"),
                         "date": stamp(today, 8, 20)})
        if s["terminal_notice"]:
            msgs.append({"folder": "Inbox", "sender": f"alerts@{squash(other_f['airline'])}.example",
                         "sender_name": f"{other_f['airline']} Alerts",
                         "subject": f"Terminal change: {other_f['flight_no']} on {day_month(D)}",
                         "body": (f"Dear customer,\n\nFlight {other_f['flight_no']} on {long_date(D)} now departs "
                                  f"from Terminal 2. The schedule is unchanged and no action is needed.\n\n"
                                  f"{other_f['airline']}"),
                         "date": stamp(today - timedelta(days=1), 18, 30)})
        msgs.sort(key=lambda m: m["date"])
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
        notice_id = next(m["id"] for m in msgs if m["subject"].startswith("Cancelled:"))
        lead_id = next(m["id"] for m in msgs if m["sender"] == lead.email)
        dropout_id = next((m["id"] for m in msgs if m["sender"] == dropout.email), None)
        terminal_id = next((m["id"] for m in msgs if m["subject"].startswith("Terminal change")), None)
        last_mail_id = len(msgs)

        policy = {
            "title": f"{s['company']} travel policy",
            "preferred_airlines": preferred,
            "flights": "Economy unless your manager approved premium economy. Business and first are not permitted.",
            "disruptions": {
                "rebooking": ("When an airline cancels a flight, rebook the traveller in the cabin of the cancelled "
                              "booking. Stay with the same airline when it has a suitable flight (rebooking is free); "
                              "otherwise use another preferred airline; any other airline only when no preferred "
                              "airline has one. Among the flights allowed, book the cheapest fare."),
                "suitable_flight": ("Departs on the original travel day or the day after, lands at least 2 hours "
                                    "before the traveller's event starts (local time), has a seat in the cabin, and "
                                    "the fare is within the rebooking cap for that cabin."),
                "rebooking_fare_cap_usd": caps,
                "seats": ("When the flight these rules pick has not enough seats for everyone, presenters at the "
                          "event get its seats first; the others take the next flight the rules allow."),
                "hotels": ("A hotel stay runs from the night you arrive to the day you fly home. If a rebooked flight "
                           "changes your arrival day, change the stay in the same hotel to match."),
                "cancelled_trips": "If a traveller no longer travels, cancel all of their flights and hotel stays.",
            },
        }
        airports = [{"code": c[1], "city": c[0], "name": c[2]} for c in CITIES]
        directory = [{"email": p.email, "name": p.name, "department": s["dept"].get(p.email, "Operations"),
                      "home_airport": s["home"].get(p.email, B)[1]}
                     for p in sorted(s["everyone"], key=lambda p: p.email)]

        def build(root: Path) -> None:
            travel.create_travel(root / "state" / "travel.sqlite", today=today.isoformat(), policy=policy,
                                 airports=airports, travelers=directory, flights=flights, hotels=hotels,
                                 bookings=[b for _k, b in bookings])
            if level == 1:
                return
            cal.create_calendar(root / "state" / "calendar.sqlite", me.email, cal_people, events,
                                today=today.isoformat())
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=msgs,
                                now=stamp(today, 9, 0))

        w = phrasing_rng(self.name, seed)
        where = f"the {event_title} in {B[0]}"
        situation = say(w, f"{orig_airline} cancelled the flight our people were taking to {where}; the notice is in "
                           f"my inbox.",
                        f"The flight our people were taking to {where} has been cancelled by {orig_airline} (the "
                        f"notice is in my inbox).",
                        f"Bad news from {orig_airline}: they cancelled the flight our people had to {where}. Their "
                        f"notice is in my inbox.")
        ask = say(w, "Could you rebook everyone affected through the travel tool, by the policy there?",
                  "Please rebook everyone affected through the travel tool, following the policy there.",
                  "Can you rebook all the affected travellers in the travel tool, by its policy?")
        fixes = in_some_order(w, [
            say(w, "If someone's arrival day changes, fix their hotel nights.",
                "Where a traveller's arrival day changes, their hotel nights need fixing too.",
                "Anyone whose arrival day moves needs their hotel nights fixed."),
            say(w, "Move the travellers' flight holds on my calendar to the new flights.",
                "The flight holds on my calendar should move to the new flights.",
                "On my calendar, move each traveller's flight hold to their new flight."),
            say(w, "Email each traveller their own new itinerary (flight number, departure date and time, booking "
                   "reference, and the new hotel dates and reference if those changed).",
                "Each traveller should get an email with their own new itinerary: flight number, departure date "
                "and time, booking reference, and the new hotel dates and reference if those changed.",
                "Send every traveller their own new itinerary by email, with the flight number, the departure date "
                "and time, the booking reference, and (if they changed) the new hotel dates and reference."),
        ])
        dropouts = say(w, "If anyone has told me they're no longer going, just cancel their trip and drop their hold.",
                       "Anyone who has told me they're no longer going just gets their trip cancelled and their hold "
                       "dropped.",
                       "Someone who has told me they're not going any more? Just cancel their trip and drop their "
                       "hold.")
        instruction = " ".join([situation, ask, *fixes, dropouts, say(w, "Thanks!", "Thank you.", "Thanks a lot.")])

        deadline_s = deadline.strftime(FMT)
        days_ok = {D.isoformat(), D1.isoformat()}
        order = sorted(presenters, key=lambda t: by_email[t].name) + \
            sorted((t for t in rebook if t not in presenters), key=lambda t: by_email[t].name)
        if level == 1:  # the same draws as the default, then one traveller, worked out again on their own
            taken: dict[tuple[str, str], int] = {}
            for _k, b in bookings:
                if b["kind"] == "flight":
                    taken[(b["flight_id"], b["cabin"])] = taken.get((b["flight_id"], b["cabin"]), 0) + 1
            flights = [f for f in flights if f["flight_id"] not in s["noise"]]  # fewer rows to read at level 1
            policy["disruptions"] = {k: v for k, v in policy["disruptions"].items()  # one traveller, still going
                                     if k not in ("seats", "cancelled_trips")}
            view = [{"flight_id": f["flight_id"], "airline": f["airline"], "depart": f["depart"], "arrive": f["arrive"],
                     "fares": [{"cabin": c, "price": float(v[0]),
                                "seats_left": v[1] - taken.get((f["flight_id"], c), 0)} for c, v in f["fares"].items()]}
                    for f in flights if f["origin"] == A[1] and f["destination"] == B[1]]
            fits = []
            for n, t in enumerate(order):
                opts = options(view, cabin_of[t], orig_airline, preferred, caps, deadline_s, days_ok, {})
                if not opts or (len(opts) > 1 and opts[0][:2] == opts[1][:2]):
                    continue
                f = fl[opts[0][2]]
                fits.append((f["arrive"][:10] == D.isoformat(), n, t, f))
            _stays, _n, solo, f = min(fits)
            rebook, order = [solo], [solo]
            expected = {solo: {"flight": f["flight_id"], "cabin": cabin_of[solo], "day": f["arrive"][:10],
                               "flight_no": f["flight_no"]}}
            blind = [o[2] for o in options(view, cabin_of[solo], orig_airline, preferred, caps, deadline_s, days_ok,
                                           {}, ignore_tier=True) if o[2] != f["flight_id"]]
            moves = expected[solo]["day"] != D.isoformat()
            keep_refs = sorted(seeded_refs - {x_refs[solo], hotel_refs[solo]})
            x_refs = {solo: x_refs[solo]}
            instruction = " ".join([say(
                w, f"{orig_airline} cancelled {X['flight_no']} ({A[1]} to {B[1]}, {long_date(D)}), which "
                   f"{by_email[solo].name} was taking to the {event_title} in {B[0]}.",
                f"{by_email[solo].name} was booked on {orig_airline} {X['flight_no']} from {A[1]} to {B[1]} on "
                f"{long_date(D)} for the {event_title} in {B[0]}, and the airline has cancelled it."),
                f"The event kicks off on {long_date(D1)} at {kickoff.strftime('%H:%M')} (local time).", say(
                w, "Could you rebook them through the travel tool, by the policy there? If their arrival day "
                   "changes, fix their hotel nights too. A colleague is looking after the other travellers.",
                "Please rebook them in the travel tool, following its policy, and fix their hotel nights if they "
                "now arrive on another day. The other travellers are being handled by a colleague.")])

        # -- oracle ----------------------------------------------------------------------------------
        def solve_one():
            """Level 1: one named traveller; the kickoff is in the task."""
            t = solo
            yield ToolCall("travel__get_policy", {}, note="Read the disruption rules before rebooking.")
            books = loads((yield ToolCall("travel__list_bookings", {"traveler": by_email[t].name},
                                          note=f"{by_email[t].name}'s bookings.")))
            old = next(b for b in books if b["status"] == "active" and b["kind"] == "flight"
                       and squash(b["flight_no"]) == squash(X["flight_no"]))
            stay = next(b for b in books if b["status"] == "active" and b["kind"] == "hotel")
            cabin = old["cabin"]
            found = []
            for day in (D, D1):
                res = loads((yield ToolCall("travel__search_flights", {
                    "origin": A[1], "destination": B[1], "date": day.isoformat(), "cabin": cabin},
                    note=f"Options {A[1]}->{B[1]} on {day.isoformat()}.")))
                found += res["flights"]
            cutoff = (datetime.combine(D1, kickoff) - timedelta(hours=2)).strftime(FMT)
            pick = options(found, cabin, orig_airline, preferred, caps, cutoff, days_ok, {})[0][2]
            yield ToolCall("travel__cancel_booking", {"booking_id": old["booking_id"]},
                           note=f"Cancel the dead booking on {X['flight_no']}.")
            yield ToolCall("travel__book_flight", {"flight_id": pick, "traveler": t, "cabin": cabin},
                           note="Book the policy pick.")
            arrive_day = next(f for f in found if f["flight_id"] == pick)["arrive"][:10]
            if arrive_day != stay["check_in"]:
                yield ToolCall("travel__cancel_booking", {"booking_id": stay["booking_id"]},
                               note=f"They now arrive {arrive_day}: drop the old stay.")
                yield ToolCall("travel__book_hotel", {"hotel_id": stay["hotel_id"], "traveler": t,
                                                      "check_in": arrive_day, "check_out": stay["check_out"]},
                               note=f"Rebook {stay['hotel']} from {arrive_day}.")
            return f"Rebooked {by_email[t].name} off {X['flight_no']}."

        def solve_all(served: list[str] = order):
            """``served``: the order travellers get seats in (the policy's: presenters first)."""
            yield ToolCall("mail__list_messages", {"folder": "Inbox"}, note="Find the cancellation notice.")
            for mid in sorted(m for m in (notice_id, lead_id, dropout_id, terminal_id) if m is not None):
                yield ToolCall("mail__read_message", {"message_id": mid},
                               note=f"Read message {mid}: what changed and who it affects.")
            yield ToolCall("travel__get_policy", {}, note="Read the disruption rules before rebooking.")
            books = loads((yield ToolCall("travel__list_bookings", {},
                                          note="Find every booking on the cancelled flight.")))
            hit = [b for b in books if b["status"] == "active" and b["kind"] == "flight"
                   and squash(b["flight_no"]) == squash(X["flight_no"]) and b["depart"][:10] == D.isoformat()]
            names = {b["traveler"]: b["traveler_name"] for b in hit}
            old_cabin = {b["traveler"]: b["cabin"] for b in hit}
            old_ref = {b["traveler"]: b["booking_id"] for b in hit}
            stays = {b["traveler"]: b for b in books if b["status"] == "active" and b["kind"] == "hotel"
                     and b["traveler"] in names}
            backs = {b["traveler"]: b for b in books if b["status"] == "active" and b["kind"] == "flight"
                     and b["traveler"] in names and b["from"] == B[1]}
            evs = loads((yield ToolCall("calendar__list_events", {
                "start": D.isoformat(), "end": D2.isoformat()}, note="Find the summit invite and the holds.")))
            summit = loads((yield ToolCall("calendar__get_event", {"event_id": summit_id},
                                           note="Read the invite: when the summit kicks off.")))
            cutoff = (datetime.strptime(summit["start"], FMT) - timedelta(hours=2)).strftime(FMT)
            holds = {e["attendees"][0]["email"]: e for e in evs
                     if e["title"].startswith("Flight ") and e["organizer"] == me.email and e["attendees"]}
            found = []
            for day in (D, D1):
                res = loads((yield ToolCall("travel__search_flights", {
                    "origin": A[1], "destination": B[1], "date": day.isoformat()},
                    note=f"Options {A[1]}->{B[1]} on {day.isoformat()}.")))
                found += res["flights"]
            yield ToolCall("travel__search_hotels", {"city": B[0], "check_in": D1.isoformat(),
                                                     "check_out": D2.isoformat()},
                           note=f"Check {H['name']} has rooms for late arrivals.")
            seats: dict[tuple[str, str], int] = {}
            for f in found:
                for x in f["fares"]:
                    seats[(f["flight_id"], x["cabin"])] = x["seats_left"]
            fid_info = {f["flight_id"]: f for f in found}
            for t in served:
                cabin = old_cabin[t]
                yield ToolCall("travel__cancel_booking", {"booking_id": old_ref[t]},
                               note=f"Cancel {names[t]}'s dead booking on {X['flight_no']}.")
                pick = options(found, cabin, orig_airline, preferred, caps, cutoff, days_ok, seats)[0][2]
                f = fid_info[pick]
                seats[(pick, cabin)] -= 1
                booked = yield ToolCall("travel__book_flight", {"flight_id": pick, "traveler": t, "cabin": cabin},
                                        note=f"Book {names[t]} on {f['flight_no']} ({cabin}), the policy pick.")
                ref = booked.split()[1].rstrip(":")
                hotel_line = ""
                stay = stays[t]
                arrive_day = f["arrive"][:10]
                if arrive_day != stay["check_in"]:
                    yield ToolCall("travel__cancel_booking", {"booking_id": stay["booking_id"]},
                                   note=f"{names[t]} now arrives {arrive_day}: drop the old stay.")
                    made = yield ToolCall("travel__book_hotel", {
                        "hotel_id": stay["hotel_id"], "traveler": t, "check_in": arrive_day,
                        "check_out": stay["check_out"]}, note=f"Rebook {stay['hotel']} from {arrive_day}.")
                    href = made.split()[1].rstrip(":")
                    hotel_line = (f"\nHotel: {stay['hotel']}, now {day_month(date.fromisoformat(arrive_day))} to "
                                  f"{day_month(date.fromisoformat(stay['check_out']))} (booking {href})")
                yield ToolCall("calendar__update_event", {
                    "event_id": holds[t]["id"], "title": f"Flight {f['flight_no']} {A[1]}\u2192{B[1]}",
                    "start": f["depart"], "end": f["arrive"],
                    "description": f"{names[t]}, booking {ref}"},
                    note=f"Move {names[t]}'s hold to {f['flight_no']}.")
                dep = datetime.strptime(f["depart"], FMT)
                yield ToolCall("mail__send_message", {
                    "to": [t], "subject": f"New flight to the {event_title}",
                    "body": (f"Hi {names[t].split()[0]},\n\n{X['flight_no']} was cancelled, so I've rebooked you:"
                             f"\nFlight: {f['airline']} {f['flight_no']} {A[1]}->{B[1]}, departs "
                             f"{day_month(dep.date())} at {dep.strftime('%H:%M')}, lands {f['arrive'][11:]} "
                             f"({cabin.replace('_', ' ')}) (booking {ref}){hotel_line}\n\nYour return flight "
                             f"{backs[t]['flight_no']} is unchanged.\n\n{me.first}")},
                    note=f"Send {names[t]} their new itinerary.")
            if dk:
                d = dropout.email
                for r in dropout_refs:
                    yield ToolCall("travel__cancel_booking", {"booking_id": r},
                                   note=f"{dropout.first} is not flying: cancel {r}." if dk == "cancel" else
                                   f"{dropout.first} drives instead: cancel the flight {r} (the hotel stays).")
                yield ToolCall("calendar__cancel_event", {"event_id": holds[d]["id"]},
                               note=f"{dropout.first}'s flight hold is no longer needed.")
            yield ToolCall("travel__list_bookings", {}, note="Verify: new flights, stays, cancellations.")
            yield ToolCall("calendar__list_events", {"start": D.isoformat(), "end": D2.isoformat()},
                           note="Verify the holds match the new flights.")
            gone = {"cancel": f", cancelled {dropout.name}'s trip",
                    "drive": f", cancelled {dropout.name}'s flights (driving, hotel kept)", "": ""}[dk]
            return (f"Rebooked {len(rebook)} travellers off {X['flight_no']}, adjusted hotel stays for late "
                    f"arrivals{gone}, updated the holds and mailed itineraries.")

        # each perturbation fails one criterion: an edit of the oracle's calls
        solve = solve_one if level == 1 else solve_all
        cancel = "travel__cancel_booking"

        def at_the_end(call: ToolCall) -> perturb.Oracle:
            """``call`` after the work, before the checks (level 1 has none)."""
            return perturb.insert(solve, call, before=None if level == 1 else perturb.noted(
                "travel__list_bookings", "Verify: new flights, stays, cancellations."))

        first = order[0]
        flawed = {
            "notice_read": lambda: perturb.drop(solve, perturb.on("mail__read_message", message_id=notice_id)),
            "policy_read": lambda: perturb.drop(solve, perturb.on("travel__get_policy")),
            "old_cancelled": lambda: perturb.drop(solve, perturb.on(cancel, booking_id=x_refs[next(
                (t for t in order if expected[t]["day"] != D.isoformat()), first)])),  # one whose day moves
            "flights_rebooked": lambda: (  # the cheapest fare whatever the airline; presenters served last
                perturb.change(solve, perturb.on("travel__book_flight"), flight_id=blind[0]) if level == 1 else
                partial(solve_all, sorted(rebook, key=lambda t: (t in presenters, by_email[t].name)))),
            "hotels_adjusted": lambda: perturb.change(  # the new stay keeps the old arrival day
                solve, perturb.on("travel__book_hotel"), check_in=D.isoformat(), count=None),
            "dropout_cancelled": lambda: perturb.drop(  # the flight on the cancelled plane only
                solve, perturb.on(cancel, where=lambda a: a["booking_id"] in (
                    return_refs[dropout.email], hotel_refs[dropout.email])), count=None),
            "driver_flights_cancelled": lambda: at_the_end(ToolCall(  # the whole trip, as for one who drops out
                cancel, {"booking_id": hotel_refs[dropout.email]},
                note=f"{dropout.first} is not flying: cancel the hotel stay too.")),
            "calendar_updated": lambda: perturb.drop(solve, perturb.on("calendar__update_event",
                                                                       event_id=hold_ids[first])),
            "itineraries_mailed": lambda: perturb.change(  # no booking reference for the flight
                solve, perturb.on("mail__send_message", to=[first]),
                lambda a: {**a, "body": re.sub(r" \(booking [^)]*\)", "", a["body"], count=1)}),
            "itineraries_private": lambda: perturb.change(  # a colleague copied in on someone's itinerary
                solve, perturb.on("mail__send_message", to=[first]), to=[first, order[1]]),
            "unrelated_untouched": lambda: at_the_end(ToolCall(
                cancel, {"booking_id": bid[("later", stranger.email)]},
                note=f"This booking is on {X['flight_no']} too; cancel it.") if s["later_booked"] else ToolCall(
                cancel, {"booking_id": return_refs[first]},
                note=f"The return is on {orig_airline} too; cancel it.")),
            "no_extra_bookings": lambda: at_the_end(ToolCall("travel__book_hotel", {
                "hotel_id": H["hotel_id"], "traveler": s["others"][0], "check_in": D2.isoformat(),
                "check_out": (D2 + timedelta(days=1)).isoformat()},
                note="Add a spare night in case the return is disrupted too.")),
        }

        # -- graders -----------------------------------------------------------------------------------
        def all_bookings(world) -> list[dict]:
            return travel.bookings(world)

        def new_active(world) -> list[dict]:
            return [b for b in all_bookings(world) if b["status"] == "active" and b["booking_id"] not in seeded_refs]

        def new_flights(world, t: str) -> list[dict]:
            return [b for b in new_active(world) if b["traveler"] == t and b["kind"] == "flight"
                    and b["from"] == A[1] and b["to"] == B[1]]

        def active_stays(world, t: str) -> list[dict]:
            return [b for b in all_bookings(world) if b["status"] == "active" and b["traveler"] == t
                    and b["kind"] == "hotel"]

        def check_notice(world, traj):
            calls = [c for c in traj.tool_calls if not c.is_error]
            first = next((i for i, c in enumerate(calls) if c.name in (
                "travel__book_flight", "travel__book_hotel", "travel__cancel_booking")), None)
            if first is None:
                return False, "nothing was rebooked or cancelled"
            for c in calls[:first]:
                if c.name == "mail__read_message" and isinstance(c.arguments, dict):
                    try:
                        if int(c.arguments.get("message_id")) == notice_id:
                            return True
                    except (TypeError, ValueError):
                        continue
            return False, "the cancellation notice was not read before changing bookings"

        def check_policy(world, traj):
            calls = [c.name for c in traj.tool_calls if not c.is_error]
            first = next((i for i, n in enumerate(calls) if n in ("travel__book_flight", "travel__book_hotel")), None)
            if first is None:
                return True
            ok = "travel__get_policy" in calls[:first]
            return ok, "" if ok else "booked before reading the travel policy"

        def check_old(world, traj):
            status = {b["booking_id"]: b["status"] for b in all_bookings(world)}
            left = [r for r in x_refs.values() if status.get(r) != "cancelled"]
            gone = [r for r in keep_refs if status.get(r) != "active"]  # cancelling everything is no rebooking
            return not left and not gone, f"still active on {X['flight_no']}: {left}; cancelled too: {gone}"

        def check_flights(world, traj):
            bad = []
            for t in rebook:
                got = new_flights(world, t)
                e = expected[t]
                if len(got) != 1 or (got[0]["flight_id"], got[0]["cabin"]) != (e["flight"], e["cabin"]):
                    bad.append(f"{by_email[t].name}: {[(b['flight_id'], b['cabin']) for b in got]} "
                               f"(expected {e['flight']} {e['cabin']})")
            return not bad, "; ".join(bad)

        def check_hotels(world, traj):
            bad = []
            for t in rebook:
                got = active_stays(world, t)
                want = (H["hotel_id"], expected[t]["day"], D2.isoformat())
                if len(got) != 1 or (got[0]["hotel_id"], got[0]["check_in"], got[0]["check_out"]) != want:
                    bad.append(f"{by_email[t].name}: {[(b['hotel_id'], b['check_in'], b['check_out']) for b in got]}"
                               f" (expected {want})")
            return not bad, "; ".join(bad)

        def check_dropout(world, traj):
            status = {b["booking_id"]: b["status"] for b in all_bookings(world)}
            left = [r for r in dropout_refs if status.get(r) != "cancelled"]
            if left:
                return False, f"{dropout.name} still holds {left}"
            if dk == "drive" and status.get(hotel_refs[dropout.email]) != "active":
                return False, f"{dropout.name} drives and keeps the hotel, but {hotel_refs[dropout.email]} was cancelled"
            gone = [r for r in keep_refs if status.get(r) != "active"]  # cancelling everything is no rebooking
            if gone:
                return False, f"other bookings cancelled too: {gone}"
            extra = [b["booking_id"] for b in new_active(world) if b["traveler"] == dropout.email]
            if extra:
                return False, f"new bookings for {dropout.name}: {extra}"
            ev = cal.event(world, hold_ids[dropout.email])
            return ev["status"] == "cancelled", f"{dropout.name}'s hold is still on the calendar"

        def hold_of(world, t: str) -> dict | None:
            ev = cal.event(world, hold_ids[t])
            if ev and ev["status"] == "active":
                return ev
            mine = [e for e in cal.events(world) if e["id"] > last_event_id and e["organizer"] == me.email
                    and t in {a["email"] for a in e["attendees"]}]
            return mine[0] if len(mine) == 1 else None

        def check_calendar(world, traj):
            for t in rebook:
                got = new_flights(world, t)
                if len(got) != 1:
                    return False, f"{by_email[t].name} has {len(got)} new flights"
                b = got[0]
                ev = hold_of(world, t)
                if ev is None:
                    return False, f"no flight hold for {by_email[t].name}"
                if (ev["start"], ev["end"]) != (b["depart"], b["arrive"]):
                    return False, f"{by_email[t].name}'s hold is {ev['start']}-{ev['end']}, flight {b['depart']}-" \
                                  f"{b['arrive']}"
                if squash(b["flight_no"]) not in squash(ev["title"]):
                    return False, f"{by_email[t].name}'s hold is titled {ev['title']!r}"
            return True

        def new_mail(world) -> list[dict]:
            return [m for m in mail.sent_messages(world) if m["id"] > last_mail_id]

        def check_itineraries(world, traj):
            sent = new_mail(world)
            for t in rebook:
                got = new_flights(world, t)
                if len(got) != 1:
                    return False, f"{by_email[t].name} has {len(got)} new flights"
                b = got[0]
                dep = datetime.strptime(b["depart"], FMT)
                need = [b["flight_no"], b["booking_id"]]
                moved = b["arrive"][:10] != D.isoformat()
                stay = None
                if moved:
                    stays = [x for x in active_stays(world, t) if x["booking_id"] not in seeded_refs]
                    if len(stays) != 1:
                        return False, f"{by_email[t].name} arrives {b['arrive'][:10]} but has no new stay"
                    stay = stays[0]
                    need.append(stay["booking_id"])
                ok = False
                for m in sent:
                    if t not in m["to"]:
                        continue
                    text = m["subject"] + "\n" + m["body"]
                    if all(squash(x) in squash(text) for x in need) and mentions_date(text, dep.date()) \
                            and mentions_time(text, dep) \
                            and (stay is None or mentions_date(text, date.fromisoformat(stay["check_in"]))):
                        ok = True
                        break
                if not ok:
                    return False, f"{by_email[t].name} got no mail with {need}, the departure date and time"
            return True

        allowed = set(rebook) | {dropout.email, lead.email}

        def check_private(world, traj):
            refs = {t: {b["booking_id"] for b in new_active(world) if b["traveler"] == t} for t in rebook}
            for m in new_mail(world):
                rcpt = set(m["to"] + m["cc"])
                if rcpt - allowed:
                    return False, f"mail {m['id']} went to {sorted(rcpt - allowed)}"
                text = squash(m["subject"] + m["body"])
                for t in rcpt & set(rebook):
                    for other in rebook:
                        if other != t and any(squash(r) in text for r in refs[other]):
                            return False, f"mail {m['id']} to {t} shows {by_email[other].name}'s booking"
            return True

        def check_unrelated(world, traj):
            status = {b["booking_id"]: b["status"] for b in all_bookings(world)}
            gone = [r for r in keep_refs if status.get(r) != "active"]
            if gone:
                return False, f"no longer active: {gone}"
            if level == 1:  # no calendar at this level
                return True
            current = {e["id"]: e for e in cal.events(world, include_cancelled=True)}
            for eid in watched_events:
                if snapshot(current[eid], me.email) != seeded_events[eid]:
                    return False, f"event {eid} ({seeded_events[eid]['title']!r}) was changed"
            return True

        def check_extra(world, traj):
            per: dict[tuple[str, str], int] = {}
            for b in new_active(world):
                if b["traveler"] not in rebook:
                    return False, f"{b['booking_id']} booked for {b['traveler']}"
                per[(b["traveler"], b["kind"])] = per.get((b["traveler"], b["kind"]), 0) + 1
            many = [k for k, v in per.items() if v > 1]
            if many:
                return False, f"double bookings: {many}"
            for t in rebook:
                if len(active_stays(world, t)) > 1:
                    return False, f"{by_email[t].name} holds two hotel stays"
            return True

        criteria = [
            Criterion("notice_read", "The airline's cancellation notice was read before bookings were changed.",
                      "process", check_notice, requires=("old_cancelled",)),
            Criterion("policy_read", "The travel policy was read before booking.", "process", check_policy,
                      guard=True),
            Criterion("old_cancelled", f"Every booking on the cancelled {X['flight_no']} is cancelled (and no "
                      "unrelated one).", "final_state", check_old),
            Criterion("flights_rebooked", "Each traveller holds exactly the policy flight in their original cabin "
                      "(same airline first, cap, arrival before kickoff, presenters first).", "final_state",
                      check_flights, 2.0),
            Criterion("hotels_adjusted", "Each traveller has one stay in the same hotel, from their new arrival day.",
                      "final_state", check_hotels, 2.0),
            *([Criterion("dropout_cancelled", "The traveller who dropped out has all bookings and the hold "
                         "cancelled, and nothing new (no unrelated booking cancelled).", "final_state",
                         check_dropout)] if dk == "cancel" else []),
            *([Criterion("driver_flights_cancelled", "The traveller who drives instead has both flights and the "
                         "hold cancelled, keeps the hotel stay as booked, and nothing new (no unrelated booking "
                         "cancelled).", "final_state", check_dropout)] if dk == "drive" else []),
            # reporting whatever was booked pays only once the flights are the policy's
            Criterion("calendar_updated", "Each traveller's flight hold shows the new flight number and times.",
                      "final_state", check_calendar, requires=("flights_rebooked",)),
            Criterion("itineraries_mailed", "Each traveller got a mail with their flight number, booking reference, "
                      "departure date and time (and new hotel dates and reference).", "final_state",
                      check_itineraries, 2.0, requires=("flights_rebooked",)),
            Criterion("itineraries_private", "Mail went only to the people involved, and nobody got someone else's "
                      "booking references.", "final_state", check_private, guard=True),
            Criterion("unrelated_untouched", "Other bookings (return flights, other travellers, the same flight "
                      "number another day) and calendar entries are unchanged.", "final_state", check_unrelated,
                      guard=True),
            Criterion("no_extra_bookings", "No bookings for anyone else and no double bookings.", "final_state",
                      check_extra, guard=True),
        ]
        if level == 1:  # the task names the flight; the rest is the colleague's (or needs no change)
            dropped = {"notice_read", "dropout_cancelled", "driver_flights_cancelled", "calendar_updated",
                       "itineraries_mailed",
                       "itineraries_private"} | (set() if moves else {"hotels_adjusted"})
            criteria = [c for c in criteria if c.id not in dropped]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps_at(level), build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"today": today.isoformat(), "cancelled": X["flight_id"], "deadline": deadline_s,
                  "expected": expected, "presenters": presenters, "cabins": cabin_of,
                  # the drawn traps, empty when absent
                  # (level 1 has no mail: nobody writes there)
                  "dropout": dropout.email if dk == "cancel" and level > 1 else "",
                  "driving": dropout.email if dk == "drive" and level > 1 else "",
                  "same_number_later": bid.get(("later", stranger.email), ""),
                  "terminal_notice": other_f["flight_no"] if s["terminal_notice"] and level > 1 else ""},
        )

    # -- the World ---------------------------------------------------------------------------------
    def _scenario(self, rng, fake) -> dict[str, Any] | None:
        people = People(fake)
        our_company, domain = company(fake)
        A, B = rng.sample(CITIES, 2)
        base = base_minutes(A, B)
        tz = B[5] - A[5]
        if base < 90:
            return None
        today = date(2026, 1, 12) + timedelta(days=rng.randrange(300))
        while today.weekday() >= 5:
            today += timedelta(days=1)
        D = today + timedelta(days=rng.choice([2, 3, 4]))
        while D.weekday() not in (0, 1, 2):
            D += timedelta(days=1)
        D1 = D + timedelta(days=1)
        D2 = D + timedelta(days=2)
        kickoff = rng.choice(KICKOFFS)
        deadline = datetime.combine(D1, kickoff) - timedelta(hours=2)

        def dep_window(day: date, minutes: int, compliant: bool) -> tuple[int, int]:
            """Departure minutes-of-day range at the origin for a flight on ``day``."""
            if day == D1:
                latest_ok = deadline.hour * 60 + deadline.minute - minutes - tz * 60
                if compliant:
                    return 5 * 60 + 30, latest_ok - 10
                return latest_ok + 20, min(20 * 60, latest_ok + 300)
            return 6 * 60, min(21 * 60, 23 * 60 + 30 - minutes - tz * 60)

        if dep_window(D1, base + 15, True)[1] < 6 * 60:
            return None

        airlines = AIRLINES[:]
        rng.shuffle(airlines)
        preferred = [a[0] for a in airlines[:3]]
        orig_airline = preferred[0]
        others_air = [a[0] for a in airlines[3:]]
        codes = dict(AIRLINES)
        fid = iter(range(rng.randrange(1000, 7000), 10_000))
        used_no: set[str] = set()

        def number(airline: str) -> str:
            while True:
                n = f"{codes[airline]} {rng.randint(100, 2999)}"
                if n not in used_no:
                    used_no.add(n)
                    return n

        def flight(airline, day, dep_min, minutes, econ, prem, o=A, d=B, flight_no=None) -> dict:
            dep_min -= dep_min % 5
            dep = datetime.combine(day, time(dep_min // 60, dep_min % 60))
            arr = dep + timedelta(minutes=minutes + (d[5] - o[5]) * 60)
            return {"flight_id": f"FL{next(fid)}", "airline": airline, "flight_no": flight_no or number(airline),
                    "origin": o[1], "destination": d[1], "depart": dep.strftime(FMT), "arrive": arr.strftime(FMT),
                    "duration_minutes": minutes, "stops": 0,
                    "fares": {"economy": econ, "premium_economy": prem}}

        def dur() -> int:
            return base + rng.choice([-10, -5, 0, 5, 10, 15])

        def at_window(day, minutes, compliant=True) -> int:
            lo, hi = dep_window(day, minutes, compliant)
            if hi < lo:
                raise ValueError("empty window")
            return rng.randint(lo, hi)

        # people -----------------------------------------------------------------------------------
        me = people.make(domain)
        lead = people.make(domain)
        n_rebook = rng.randint(5, 6)
        rebook_p = [people.make(domain) for _ in range(n_rebook)]
        dropout = people.make(domain)
        others_p = [people.make(domain) for _ in range(2)]
        stranger = people.make(domain)
        look = people.make(domain, first=rng.choice(rebook_p).first)
        rebook = [p.email for p in rebook_p]
        prem = set(rng.sample(rebook, rng.randint(1, 2)))
        econ_people = [t for t in rebook if t not in prem]
        presenters = [rng.choice(econ_people)]
        presenters.append(rng.choice([t for t in rebook if t not in presenters]))
        cabin_of = {t: ("premium_economy" if t in prem else "economy") for t in rebook}
        cabin_of[dropout.email] = "economy"
        econ_pres = [t for t in presenters if cabin_of[t] == "economy"]
        econ_rest = [t for t in econ_people if t not in presenters]
        if not econ_rest:
            return None

        # flights A->B ------------------------------------------------------------------------------
        p_e = round(0.09 * km(A, B) + rng.uniform(110, 170))
        e1 = p_e - rng.randint(0, 30)
        e2 = e1 + rng.randint(15, 50)
        cap_e = int(math.ceil((e2 + rng.randint(10, 40)) / 10) * 10)
        cap_p = int(math.ceil(cap_e * 1.7 / 10) * 10)
        caps = {"economy": float(cap_e), "premium_economy": float(cap_p)}
        pp = lambda e: round(e * rng.uniform(1.5, 1.65))  # noqa: E731
        day1, day2 = rng.sample([D, D1], 2)
        e1_air = orig_airline if rng.random() < 0.6 else preferred[1]
        if e1_air == orig_airline:
            e2_air = orig_airline if rng.random() < 0.5 else rng.choice(preferred[1:])
        else:
            e2_air = rng.choice(preferred[1:])
        try:
            m = dur()
            E1 = flight(e1_air, day1, at_window(day1, m), m, (e1, len(econ_pres)), (pp(e1), rng.randint(0, 2)))
            m = dur()
            E2 = flight(e2_air, day2, at_window(day2, m), m, (e2, len(econ_rest) + rng.randint(0, 3)),
                        (pp(e2), rng.randint(1, 3)))
            fl = [E1, E2]
            # the cancelled flight: evening of D, nothing left to sell
            m = dur()
            X = flight(orig_airline, D, rng.randint(15 * 60, dep_window(D, m, True)[1]), m, (e1 - 10, 0),
                       (pp(e1), 0))
            fl.append(X)
            m = dur()  # same airline, fine times, over the cap
            fl.append(flight(orig_airline, D, at_window(D, m), m, (cap_e + rng.randint(15, 90), 9),
                             (cap_p + rng.randint(20, 120), 4)))
            m = dur()  # same airline, cheap, lands too late on D+1
            fl.append(flight(orig_airline, D1, at_window(D1, m, False), m, (e1 - rng.randint(20, 60), 9),
                             (pp(e1) - 30, 4)))
            m, d_ = dur(), rng.choice([D, D1])  # a cheaper airline nobody prefers
            fl.append(flight(rng.choice(others_air), d_, at_window(d_, m), m, (e1 - rng.randint(30, 80), 9),
                             (pp(e1) - rng.randint(40, 90), 4)))
            # another preferred airline: cheaper than E1 when the same airline covers everyone, else dearer
            price = e1 - rng.randint(10, 40) if E2["airline"] == orig_airline else e2 + rng.randint(15, 40)
            m, d_ = dur(), rng.choice([D, D1])
            fl.append(flight(rng.choice(preferred[1:]), d_, at_window(d_, m), m, (price, 6), (pp(price), 3)))
            m = dur()  # same airline, economy sold out, premium open
            fl.append(flight(orig_airline, D, at_window(D, m), m, (e1 - rng.randint(5, 25), 0),
                             (pp(e1) - rng.randint(5, 30), rng.randint(2, 4))))
            m = dur()  # cheap, the day before (not allowed)
            fl.append(flight(orig_airline, D - timedelta(days=1), at_window(D, m), m, (e1 - rng.randint(30, 70), 9),
                             (pp(e1) - 60, 4)))
            noise = []
            for _ in range(rng.randint(1, 2)):  # noise
                m = dur() + rng.choice([0, 0, 90])
                d_ = rng.choice([D, D1])
                noise.append(flight(rng.choice(others_air), d_, at_window(d_, m, rng.random() < 0.5), m,
                                    (e1 + rng.randint(-20, 120), rng.randint(0, 9)),
                                    (pp(e1) + rng.randint(-20, 150), rng.randint(0, 4))))
                fl.append(noise[-1])
        except ValueError:
            return None
        if any(f["arrive"] <= f["depart"] for f in fl):
            return None
        view = [{"flight_id": f["flight_id"], "airline": f["airline"], "depart": f["depart"], "arrive": f["arrive"],
                 "fares": [{"cabin": c, "price": float(v[0]), "seats_left": v[1]} for c, v in f["fares"].items()]}
                for f in fl]
        days_ok = {D.isoformat(), D1.isoformat()}
        dl = deadline.strftime(FMT)
        seats: dict[tuple[str, str], int] = {}
        # premium travellers must all fit on their pick
        pc = options(view, "premium_economy", orig_airline, preferred, caps, dl, days_ok, seats)
        if not pc:
            return None
        pbest = next(f for f in fl if f["flight_id"] == pc[0][2])
        price, left = pbest["fares"]["premium_economy"]
        pbest["fares"]["premium_economy"] = (price, max(left, len(prem) + rng.randint(0, 2)))
        for v in view:
            if v["flight_id"] == pbest["flight_id"]:
                v["fares"] = [{"cabin": c, "price": float(x[0]), "seats_left": x[1]}
                              for c, x in pbest["fares"].items()]
        order = sorted(presenters) + sorted(t for t in rebook if t not in presenters)
        expected = {}
        for t in order:
            c = cabin_of[t]
            opts = options(view, c, orig_airline, preferred, caps, dl, days_ok, seats)
            if not opts or (len(opts) > 1 and opts[0][:2] == opts[1][:2]):
                return None
            pick = opts[0][2]
            f = next(x for x in fl if x["flight_id"] == pick)
            seats[(pick, c)] = seats.get((pick, c), f["fares"][c][1]) - 1
            expected[t] = {"flight": pick, "cabin": c, "day": f["arrive"][:10], "flight_no": f["flight_no"]}
        if any(expected[t]["flight"] != E1["flight_id"] for t in econ_pres) or \
                any(expected[t]["flight"] != E2["flight_id"] for t in econ_rest):
            return None
        # the tier-blind perturbation must pick something else for the first economy presenter
        blind = options(view, "economy", orig_airline, preferred, caps, dl, days_ok, {}, ignore_tier=True)
        if blind[0][2] == E1["flight_id"]:
            return None
        if len({e["day"] for e in expected.values()}) < 2:
            return None
        # everything else in the world ---------------------------------------------------------------
        homes = [c for c in CITIES if c not in (A, B)]
        others = []
        for p in others_p:
            home = rng.choice(homes)
            m = base_minutes(home, B)
            dep = rng.randint(7 * 60, 14 * 60)
            f = flight(rng.choice(preferred), D, dep, m, (200.0 + rng.randint(0, 150), 5), (420.0, 2), o=home)
            if f["arrive"] <= f["depart"]:
                return None
            fl.append(f)
            others.append((p, home, f))
        later = flight(orig_airline, D + timedelta(days=7), int(X["depart"][11:13]) * 60 + int(X["depart"][14:16]),
                       X["duration_minutes"], (e1 + 20, 9), (pp(e1), 3), flight_no=X["flight_no"])
        fl.append(later)
        back_dep = rng.randint(17 * 60 + 30, 19 * 60 + 30)
        back = flight(orig_airline, D2, back_dep, base, (e1, 20), (pp(e1), 6), o=B, d=A)
        fl.append(back)
        backs_other = []
        for p, home, _f in others:
            bf = flight(rng.choice(preferred), D2, rng.randint(17 * 60 + 30, 20 * 60), base_minutes(home, B),
                        (210.0, 6), (430.0, 2), o=B, d=home)
            fl.append(bf)
            backs_other.append(bf)
        fl.sort(key=lambda f: f["flight_id"])

        venue_district = rng.choice(["Downtown", "Convention District", "Waterfront", "Midtown"])
        hid = iter(range(rng.randrange(100, 500), 1000))

        def hotel(rate, rooms, district):
            return {"hotel_id": f"HT{next(hid)}", "name": f"{fake.last_name()} {rng.choice(HOTEL_WORDS)}",
                    "city": B[0], "district": district,
                    "address": f"{rng.randint(1, 900)} {fake.street_name()} {fake.street_suffix()}",
                    "nightly_rate": float(rate), "rooms": rooms, "rating": round(rng.uniform(3.5, 4.7), 1)}

        H = hotel(rng.randint(170, 260), 12 + rng.randint(0, 6), venue_district)
        hotels = [H, hotel(rng.randint(120, 160), 20, "Airport"), hotel(rng.randint(270, 380), 8, venue_district)]
        hotels.sort(key=lambda h: h["hotel_id"])

        # the trap mix: who writes about not flying (drops out: cancel everything; drives: cancel the
        # flights, keep the hotel; nobody), whether the same flight number a week later is booked for
        # someone else, whether another airline's harmless terminal-change notice is in the inbox
        dropout_kind = rng.choices(DROPOUT_KINDS, weights=DROPOUT_ODDS)[0]
        later_booked = rng.random() < LATER_ODDS
        terminal_notice = rng.random() < TERMINAL_ODDS
        flyers = [*rebook, dropout.email] if dropout_kind else list(rebook)
        everyone = [me, lead, *rebook_p, dropout, *others_p, stranger, look]
        home = {p.email: A for p in [*rebook_p, dropout, stranger]}
        home[look.email] = rng.choice(homes)
        for p, h, _f in others:
            home[p.email] = h
        dept = {p.email: rng.choice(["Sales", "Customer Success", "Solutions", "Marketing"]) for p in everyone}
        booked_on = (today - timedelta(days=rng.randint(10, 30))).isoformat()
        bookings: list[tuple[tuple[str, str], dict]] = []
        out_flight = {}
        for t in flyers:
            bookings.append((("out", t), {"kind": "flight", "traveler": t, "flight_id": X["flight_id"],
                                          "cabin": cabin_of[t], "booked_on": booked_on}))
            bookings.append((("back", t), {"kind": "flight", "traveler": t, "flight_id": back["flight_id"],
                                           "cabin": cabin_of[t], "booked_on": booked_on}))
            bookings.append((("hotel", t), {"kind": "hotel", "traveler": t, "hotel_id": H["hotel_id"],
                                            "check_in": D.isoformat(), "check_out": D2.isoformat(),
                                            "booked_on": booked_on}))
            out_flight[t] = X["flight_id"]
        for (p, _h, f), bf in zip(others, backs_other):
            bookings.append((("out", p.email), {"kind": "flight", "traveler": p.email, "flight_id": f["flight_id"],
                                                "cabin": "economy", "booked_on": booked_on}))
            bookings.append((("back", p.email), {"kind": "flight", "traveler": p.email, "flight_id": bf["flight_id"],
                                                 "cabin": "economy", "booked_on": booked_on}))
            bookings.append((("hotel", p.email), {"kind": "hotel", "traveler": p.email, "hotel_id": H["hotel_id"],
                                                  "check_in": D.isoformat(), "check_out": D2.isoformat(),
                                                  "booked_on": booked_on}))
            out_flight[p.email] = f["flight_id"]
        if later_booked:
            bookings.append((("later", stranger.email), {"kind": "flight", "traveler": stranger.email,
                                                         "flight_id": later["flight_id"], "cabin": "economy",
                                                         "booked_on": (today - timedelta(days=2)).isoformat()}))
        rng.shuffle(bookings)
        # seats taken by the seeded bookings come out of the fares (create_travel does it): give room
        need = {}
        for _k, b in bookings:
            if b["kind"] == "flight":
                need[(b["flight_id"], b["cabin"])] = need.get((b["flight_id"], b["cabin"]), 0) + 1
        for f in fl:
            for c, (price, left) in list(f["fares"].items()):
                if f["flight_id"] == X["flight_id"]:
                    f["fares"][c] = (price, left + need.get((f["flight_id"], c), 0))
                elif (f["flight_id"], c) in need:
                    f["fares"][c] = (price, left + need[(f["flight_id"], c)])
        return {"me": me, "lead": lead, "dropout": dropout, "rebook": rebook, "presenters": sorted(presenters),
                "cabin_of": cabin_of, "A": A, "B": B, "D": D, "kickoff": kickoff, "deadline": deadline,
                "expected": expected, "flights": fl, "hotels": hotels, "bookings": bookings, "H": H, "today": today,
                "event_title": f"{our_company.split()[0]} {rng.choice(EVENTS)}", "X": X,
                "orig_airline": orig_airline, "preferred": preferred, "caps": caps, "everyone": everyone,
                "others": [p.email for p, _h, _f in others], "stranger": stranger, "out_flight": out_flight,
                "venue": f"{fake.last_name()} Convention Center", "company": our_company, "dept": dept,
                "home": home, "noise": {f["flight_id"] for f in noise}, "dropout_kind": dropout_kind,
                "flyers": flyers, "later_booked": later_booked, "terminal_notice": terminal_notice}
