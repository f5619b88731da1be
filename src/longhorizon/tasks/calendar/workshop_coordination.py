"""Meeting coordination (mail + calendar): organise a half-day workshop.

The sponsor's mail sets the rules: a morning (09:00-12:00) or afternoon (13:30-16:30) block
in a two-week window, the must-have and nice-to-have people, the agenda, and the smallest
room that seats everyone attending. Replies to the owner's availability poll add
constraints the calendar does not show (a conference, mornings only, a day out that a later
mail corrects, a nice-to-have on holiday for a week, one who opts out), Facilities closes a
room for a few days, and a look-alike colleague writes about a different workshop. The
first block where every must-have and a big-enough room are free gets booked, with the
nice-to-haves who can come; the agenda goes to everyone attending and the nice-to-haves who
cannot come get a note.
"""

from __future__ import annotations

import json
import re
from datetime import date, timedelta
from pathlib import Path

from longhorizon.apps.calendar import state as cal
from longhorizon.apps.mail import state as mail
from longhorizon.apps.mail.state import parse_address
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.calendar.slots import at, blocks, iso, snapshot, unchanged_events
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.kit import mail as mail_kit
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    People,
    company,
    day_month,
    loads,
    long_date,
    mentions_date,
    mentions_time,
    monday_of,
    norm,
    parse_id,
    rng_and_faker,
)

BLOCKS = [("am", "09:00", "12:00"), ("pm", "13:30", "16:30")]
REQ_HOURS = [("08:00", "17:00"), ("08:30", "17:30"), ("09:00", "17:30"), ("08:00", "18:00")]
OPT_HOURS = REQ_HOURS + [("07:30", "15:30"), ("10:00", "18:00")]
MY_HOURS = ("08:30", "17:30")
TOPICS = ["customer journey mapping", "incident response tabletop", "pricing strategy", "data literacy",
          "onboarding redesign", "partner programme planning", "service design", "annual planning",
          "risk assessment", "accessibility review"]
AGENDA = ["Goals and success measures", "Current state walkthrough", "Customer feedback highlights",
          "Breakout on pain points", "Prioritisation exercise", "Risks and dependencies",
          "Lessons from last quarter", "Next steps and owners", "Quick wins brainstorm", "Budget guardrails"]
ROOM_NAMES = ["Harbor", "Maple", "Summit", "Cedar", "Atlas", "Lighthouse", "Orchard", "Granite"]
CAPACITIES = [4, 6, 8, 10, 12, 16, 20, 30]
EVENTS = ["Customer call", "Team sync", "Design review", "Training", "Interview", "Vendor demo",
          "Budget review", "Project standup", "Hiring panel", "Planning session"]
CONFERENCES = ["the regional sales conference", "a partner summit", "the analytics meetup", "a supplier visit"]
STOP = {"and", "on", "of", "the", "from", "a"}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", norm(text)) if w not in STOP}


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def evaluate(block: tuple[date, str, str, str], me: str, required: list[str], optional: list[str],
             busy: dict[str, list[tuple[str, str]]], hours: dict[str, tuple[str, str]],
             out: dict[str, set[tuple[date, str]]], rooms: list[tuple[str, int]],
             closed: set[tuple[str, date]]) -> tuple[list[str], str] | None:
    """(attending optional people, room) when ``block`` works for the owner, every required person
    and a big-enough room; None otherwise. ``rooms`` are (email, seats), smallest first."""
    d, part, s, e = block
    start, end = iso(at(d, s)), iso(at(d, e))

    def free(who: str) -> bool:
        ws, we = hours[who]
        if not (ws <= s and e <= we) or (d, part) in out.get(who, set()):
            return False
        return not any(cal.overlaps(start, end, b0, b1) for b0, b1 in busy.get(who, []))

    if not all(free(w) for w in [me, *required]):
        return None
    coming = [w for w in optional if free(w)]
    heads = 1 + len(required) + len(coming)
    for email, seats in rooms:
        if seats >= heads and (email, d) not in closed and free(email):
            return coming, email
    return None


@register
class WorkshopCoordination(TaskFamily):
    name = "workshop_coordination"
    category = "meeting coordination"
    apps = ("mail", "calendar")
    description = (
        "Organise a half-day workshop from the sponsor's brief and poll replies: first morning/afternoon "
        "block in the window where all must-haves are free (calendar and mailed constraints) and the smallest "
        "room that fits is free, invite the nice-to-haves who can come, send the agenda, and tell the "
        "nice-to-haves who cannot."
    )

    levels = 2
    """1: the brief in the task, two must-haves (the sponsor and one away at a conference, per mail)
    and one nice-to-have who opts out by mail, three rooms, one week where it fits: read the two
    replies, look up addresses and rooms, check free/busy, book, send the agenda and the note;
    2 (default): four or five must-haves, four nice-to-haves, six rooms, two weeks, a corrected
    reply, a holiday, a closed room and the brief in the mail. Every level keeps the mailed
    constraint the calendar does not show, the smallest free room and the look-alike's mail."""
    toolsets = {1: (
        "calendar__create_event", "calendar__free_busy", "calendar__list_people", "mail__list_messages",
        "mail__read_message", "mail__send_message",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        _, domain = company(fake)
        mon1 = monday_of(rng, weeks=42)
        today = mon1 - timedelta(days=rng.choice([3, 4]))
        days = [mon1 + timedelta(days=i) for i in range(5)] + [mon1 + timedelta(days=7 + i) for i in range(5)]
        week1, week2 = days[:5], days[5:]
        cands = [(d, part, s, e) for d in days for part, s, e in BLOCKS]
        topic = rng.choice(TOPICS)
        title_topic = f"{_cap(topic)} workshop"
        agenda = rng.sample(AGENDA, 4)

        me = people.make(domain)
        boss = people.make(domain)
        ra, rb, rc = (people.make(domain) for _ in range(3))
        rd = people.make(domain) if rng.random() < 0.5 else None
        required_p = [boss, ra, rb, rc] + ([rd] if rd else [])
        oa, ob, oc, od = (people.make(domain) for _ in range(4))
        optional_p = [oa, ob, oc, od]
        look = [people.make(domain, first=p.first) for p in rng.sample(required_p[1:] + optional_p, 2)]
        colleagues = [people.make(domain) for _ in range(5)]
        hours = {me.email: MY_HOURS}
        for p in required_p:
            hours[p.email] = rng.choice(REQ_HOURS)
        for p in optional_p:
            hours[p.email] = rng.choice(OPT_HOURS)
        caps = sorted(rng.sample(CAPACITIES, 6))
        names = rng.sample(ROOM_NAMES, 6)
        rooms = [(f"room.{n.lower()}@{domain}", c, f"{n} Room ({c} seats)") for n, c in zip(names, caps)]
        for r in rooms:
            hours[r[0]] = ("07:00", "20:00")
        room_list = [(r[0], r[1]) for r in rooms]
        room_name = {r[0]: r[2] for r in rooms}
        required = [p.email for p in required_p]
        optional = [p.email for p in optional_p]

        for _attempt in range(100):
            scen = self._scenario(rng, me, required, optional, ra, rb, rc, oa, ob, oc, hours, room_list, days,
                                  week1, week2, cands, colleagues)
            if scen is not None:
                break
        else:  # pragma: no cover - generation bug
            raise RuntimeError(f"{self.name}: no workable fortnight for seed {seed}")
        events, out, closed, T = scen["events"], scen["out"], scen["closed"], scen["T"]
        coming, room = scen["coming"], scen["room"]
        wrong_pick, wrong_room = scen["wrong_pick"], scen["wrong_room"]
        conf_days, rb_part, rc_stale, rc_real = scen["conf_days"], scen["rb_part"], scen["rc_stale"], scen["rc_real"]
        oa_week, closure = scen["oa_week"], scen["closure"]
        for i, e in enumerate(events, start=1):
            e["id"] = i
        last_seed_id = len(events)
        seeded = {e["id"]: snapshot(e, me.email) for e in events}
        my_event = next(e["id"] for e in events if e.get("organizer", me.email) == me.email)
        not_coming = [o for o in optional if o not in coming]
        attendees = required + coming
        t_day, t_part, t_start, t_end = T
        start_iso, end_iso = iso(at(t_day, t_start)), iso(at(t_day, t_end))

        directory = [{"email": me.email, "name": me.name, "work_start": MY_HOURS[0], "work_end": MY_HOURS[1]}]
        for p in required_p + optional_p:
            directory.append({"email": p.email, "name": p.name, "work_start": hours[p.email][0],
                              "work_end": hours[p.email][1]})
        for p in look + colleagues:
            directory.append({"email": p.email, "name": p.name})
        for email, _c, name in rooms:
            directory.append({"email": email, "name": name, "work_start": "07:00", "work_end": "20:00"})
        directory.sort(key=lambda p: p["email"])

        # -- mailbox --------------------------------------------------------------------------------
        def stamp(d: date, h: int, m: int) -> str:
            return f"{d.isoformat()}T{h:02d}:{m:02d}:00"

        window = f"{day_month(days[0])} and {day_month(days[-1])}"
        names_of = lambda ps: ", ".join(p.name for p in ps[:-1]) + f" and {ps[-1].name}"  # noqa: E731
        msgs = [
            {"folder": "Inbox", "sender": boss.email, "sender_name": boss.name,
             "subject": f"{title_topic} - can you organise?",
             "body": (f"Hi {me.first},\n\nCould you set up the {topic} workshop? It's a half day: either a "
                      f"morning (09:00-12:00) or an afternoon (13:30-16:30), some time in the two weeks from "
                      f"{day_month(days[0])} to {day_month(days[-1])}. Please take the earliest block where all the "
                      f"must-haves (me, {names_of(required_p[1:])}, and you of course) are free and a room "
                      f"big enough for everyone attending is free too. Nice to have: {names_of(optional_p)}; invite "
                      f"whichever of them can make the whole block (free, within their working hours, and "
                      f"nothing they told you rules it out). Book the smallest room that seats everyone "
                      f"attending, you included.\n\nAgenda:\n"
                      + "\n".join(f"{i}. {a}" for i, a in enumerate(agenda, start=1))
                      + f"\n\nPlease send the agenda to everyone who's coming, and drop a short note to the "
                        f"nice-to-haves who can't make it so they know when it is.\n\nThanks!\n{boss.first}"),
             "date": stamp(today - timedelta(days=3), 9, 10)},
            {"folder": "Sent", "sender": me.email, "sender_name": me.name,
             "to": [p.email for p in required_p[1:] + optional_p],
             "subject": f"Availability: {topic} workshop",
             "body": (f"Hi all,\n\nI'm planning a half-day {topic} workshop some time between {window}. "
                      f"Could you tell me about any days or times you can't do that aren't in your calendar?"
                      f"\n\nThanks,\n{me.first}"),
             "date": stamp(today - timedelta(days=3), 11, 0), "is_read": True},
        ]
        conf = rng.choice(CONFERENCES)
        replies = [
            (ra, f"I'll be at {conf} on {' and '.join(long_date(d) for d in sorted(conf_days))}, so I'm out "
                 f"{'that day' if len(conf_days) == 1 else 'those days'}. It's not in my calendar yet.", 2, 14),
            (rb, ("I can only do mornings in those two weeks; I'm covering the support desk every afternoon."
                  if rb_part == "am" else
                  "Afternoons only for me in those two weeks, please: I'm on the early support shift every "
                  "morning."), 2, 16),
            (rc, f"I'm out on {long_date(rc_stale)}, otherwise I'm flexible.", 2, 10),
            (oa, f"I'd love to join, but I'm on holiday the whole week of {day_month(oa_week[0])}.", 1, 9),
            (ob, "Count me out this time, I'm swamped. Could you send me the notes afterwards?", 1, 13),
        ]
        if rd:
            replies.append((rd, "Any time works for me.", 1, 15))
        for p, text, ago, h in replies:
            msgs.append({"folder": "Inbox", "sender": p.email, "sender_name": p.name,
                         "subject": f"Re: Availability: {topic} workshop", "in_reply_to": 2,
                         "body": f"Hi {me.first},\n\n{text}\n\n{p.first}",
                         "date": stamp(today - timedelta(days=ago), h, rng.randrange(60))})
        msgs.append({"folder": "Inbox", "sender": rc.email, "sender_name": rc.name,
                     "subject": f"Re: Availability: {topic} workshop", "in_reply_to": 2,
                     "body": (f"Hi {me.first},\n\nCorrection to my earlier note: I mixed up the dates. I'm out on "
                              f"{long_date(rc_real)}, not {long_date(rc_stale)}. Sorry!\n\n{rc.first}"),
                     "date": stamp(today, 8, rng.randrange(10, 50))})
        closed_room, c0, c1 = closure
        msgs.append({"folder": "Inbox", "sender": f"facilities@{domain}", "sender_name": "Facilities",
                     "to": [f"all@{domain}"], "subject": f"{room_name[closed_room].split(' (')[0]} closed for repairs",
                     "body": (f"Hi all,\n\nThe {room_name[closed_room].split(' (')[0]} is closed for repairs from "
                              f"{long_date(c0)} to {long_date(c1)}, both days included. Bookings in its calendar for "
                              f"those days won't be honoured; please pick another room.\n\nFacilities"),
                     "date": stamp(today - timedelta(days=1), 10, 5)})
        lk = look[0]
        msgs.append({"folder": "Inbox", "sender": lk.email, "sender_name": lk.name,
                     "subject": "Sales kickoff dry run",
                     "body": (f"Hi {me.first},\n\nFor the sales kickoff dry run: I can't do "
                              f"{long_date(rng.choice(days))}. Can we look at another day?\n\n{lk.first}"),
                     "date": stamp(today - timedelta(days=1), 14, 40)})
        msgs.append({"folder": "Inbox", "sender": "events@learnhub.example", "sender_name": "LearnHub",
                     "subject": "Facilitation masterclass: last seats", "body": "Run better workshops. Book now!",
                     "date": stamp(today - timedelta(days=2), 6, 0), "is_read": True})
        # ids in date order, so replies keep pointing at the poll
        msgs.sort(key=lambda m: m["date"])
        poll_pos = next(i for i, m in enumerate(msgs) if m["folder"] == "Sent")
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
        for m in msgs:
            if "in_reply_to" in m:
                m["in_reply_to"] = poll_pos + 1
        last_mail_id = len(msgs)
        brief_id = next(m["id"] for m in msgs if m["sender"] == boss.email)
        correction_id = next(m["id"] for m in msgs if m["sender"] == rc.email and "Correction" in m["body"])
        facilities_id = next(m["id"] for m in msgs if m["sender"].startswith("facilities@"))
        lookalike_id = next(m["id"] for m in msgs if m["sender"] == lk.email)
        constraint_ids = sorted(m["id"] for m in msgs if m["sender"] in {ra.email, rb.email, rc.email, oa.email,
                                                                           ob.email} or m["id"] == facilities_id)
        window_days = days
        if level == 1:  # the same draws as the default, then a smaller workshop worked out again
            got = self._level_one(me, boss, ra, ob, hours, room_list, events, days, week1, cands)
            required_p, optional_p, rooms = [boss, ra], [ob], rooms[:3]
            required, optional = [boss.email, ra.email], [ob.email]
            window_days, cands, out, T, room, wrong_pick, wrong_room, conf_days = got
            closed, coming = set(), []
            not_coming, attendees = [ob.email], list(required)
            t_day, t_part, t_start, t_end = T
            start_iso, end_iso = iso(at(t_day, t_start)), iso(at(t_day, t_end))
            keep = {ra.email, ob.email, lk.email, me.email}
            msgs = [dict(m) for m in msgs if m["sender"] in keep and "Correction" not in m["body"]]
            conf_text = (f"I'll be at {conf} on {long_date(min(conf_days))}, so I'm out that day. It's not in my "
                         f"calendar yet.")
            for m in msgs:
                if m["sender"] == ra.email:
                    m["body"] = f"Hi {me.first},\n\n{conf_text}\n\n{ra.first}"
            poll_pos = next(i for i, m in enumerate(msgs) if m["folder"] == "Sent")
            for i, m in enumerate(msgs, start=1):
                m["id"] = i
                if "in_reply_to" in m:
                    m["in_reply_to"] = poll_pos + 1
            last_mail_id, brief_id, facilities_id = len(msgs), None, None
            lookalike_id = next(m["id"] for m in msgs if m["sender"] == lk.email)
            constraint_ids = sorted(m["id"] for m in msgs if m["sender"] in {ra.email, ob.email})
            shown = {me.email, boss.email, ra.email, ob.email, lk.email, *(r[0] for r in rooms)}
            directory = [d for d in directory if d["email"] in shown]

        def build(root: Path) -> None:
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name,
                                folders=["Inbox", "Sent", "Archive"], messages=msgs, now=stamp(today, 9, 0))
            cal.create_calendar(root / "state" / "calendar.sqlite", me.email, directory, events,
                                today=today.isoformat())

        w = phrasing_rng(self.name, seed)
        sponsor = boss.first
        hello = say(w, f"Hi, it's {me.first}.", f"Hello, {me.first} here.", f"Hi! {me.first} here.")
        brief = say(w, f"{sponsor} asked me to organise the {topic} workshop; the brief is in my inbox, and "
                       f"people have answered my availability poll there too (read them all: a couple of them "
                       f"aren't in anyone's calendar; read anything else in there that affects the dates or rooms "
                       f"too).",
                    f"I've been asked by {sponsor} to organise the {topic} workshop. The brief is in my inbox, "
                    f"along with people's answers to my availability poll: read them all, since a couple of them "
                    f"aren't in anyone's calendar, and read anything else in there that affects the dates or "
                    f"rooms too.",
                    f"I'm organising the {topic} workshop for {sponsor}. My inbox holds the brief and the replies "
                    f"to my availability poll; please read them all (a couple of them aren't in anyone's calendar), "
                    f"plus anything else in there that affects the dates or rooms.")
        rooms_how = "rooms have their own calendars in the directory: add the room as a guest to book it"
        todo = say(w, f"Could you find the block {sponsor} wants, check that everyone {sponsor} needs is free "
                      f"that day, then book it on my calendar with the right people and room ({rooms_how}), send "
                      f"the agenda, and let the nice-to-haves who can't make it know?",
                   f"Please find the block {sponsor} wants and check that everyone {sponsor} needs is free that "
                   f"day. Then book it on my calendar with the right people and room ({rooms_how}), send the "
                   f"agenda, and tell the nice-to-haves who can't make it.",
                   f"What I need: the block {sponsor} wants, with a check that everyone {sponsor} needs is free "
                   f"that day; the booking on my calendar with the right people and room ({rooms_how}); the "
                   f"agenda sent; and a note to the nice-to-haves who can't make it.")
        called = say(w, f"Name the event \"{title_topic}\".", f"The event should be called \"{title_topic}\".",
                     f"Call the event \"{title_topic}\".")
        limits = in_some_order(w, [
            say(w, "Please don't email anyone else.", "Don't email anyone else, please.",
                "Nobody else should get an email."),
            say(w, "Leave the existing calendar entries as they are.",
                "The existing calendar entries stay as they are.",
                "Don't change the existing calendar entries."),
        ])
        instruction = " ".join([hello, brief, todo, called, *limits])
        if level == 1:
            items = "; ".join(agenda)
            instruction = " ".join([hello, say(
                w, f"{sponsor} asked me to organise a half-day {topic} workshop: a morning (09:00-12:00) or an "
                   f"afternoon (13:30-16:30) between {day_month(window_days[0])} and {day_month(window_days[-1])}, "
                   f"the earliest block where {sponsor}, {ra.name} and I are free and a room is free too.",
                f"I'm organising a half-day {topic} workshop for {sponsor}: the earliest morning (09:00-12:00) or "
                f"afternoon (13:30-16:30) from {day_month(window_days[0])} to {day_month(window_days[-1])} when "
                f"{sponsor}, {ra.name} and I are all free, with a free room."),
                f"Rooms have their own calendars in the directory: add the smallest free one that seats everyone "
                f"as a guest. {ob.name} is nice to have, if they can make it. Replies to my availability poll are "
                f"in my inbox (they say things the calendars don't).", called,
                f"Send the agenda ({items}) with the date, time and room to everyone coming, and a short note "
                f"with the date to a nice-to-have who can't make it.", *limits])
        window_args = {"start": window_days[0].isoformat(), "end": window_days[-1].isoformat()}
        first_of = {p.email: p.first for p in optional_p}

        def booking(blk, coming_: list[str], rm: str, items: list[str] = agenda,
                    must: list[str] = required) -> list[ToolCall]:
            """The booking, the agenda mail and the notes to those who can't come, for a pick: the
            oracle's, and a flawed run's from a wrong pick or a short agenda."""
            d, _part, s, e = blk
            agenda_text = "\n".join(f"{i}. {a}" for i, a in enumerate(items, start=1))
            if level == 1:
                told = f"is on {long_date(d)}, {s}-{e}, in the {room_name[rm]}.\n\nAgenda:\n{agenda_text}\n\n{me.first}"
            else:
                told = (f"is booked for {long_date(d)}, {s}-{e}, in the {room_name[rm]}. The invitation is in your "
                        f"calendar.\n\nAgenda:\n{agenda_text}\n\nSee you there,\n{me.first}")
            sorry = "; " if level == 1 else ". I understand you can't make it; "
            return [
                ToolCall("calendar__create_event", {
                    "title": title_topic, "start": iso(at(d, s)), "end": iso(at(d, e)),
                    "attendees": [*must, *coming_, rm], "location": room_name[rm],
                    "description": f"Agenda:\n{agenda_text}"},
                    note=f"Book {long_date(d)} {s}-{e} in {room_name[rm]}."),
                ToolCall("mail__send_message", {
                    "to": [w for w in must if w != me.email] + list(coming_),
                    "subject": f"{title_topic}: {day_month(d)}, {s}-{e}",
                    "body": f"Hi all,\n\nThe {topic} workshop {told}"},
                    note="Send the agenda to everyone attending."),
                *(ToolCall("mail__send_message", {
                    "to": [o], "subject": f"{title_topic} on {day_month(d)}",
                    "body": (f"Hi {first_of[o]},\n\nThe {topic} workshop will be on {long_date(d)}, {s}-{e}{sorry}"
                             f"we'll share the notes afterwards.\n\n{me.first}")},
                    note=f"Let {first_of[o]} know when it is.") for o in optional if o not in coming_),
            ]

        def solve_one():
            """Level 1: the brief is in the task; two replies to read, one free/busy for all."""
            listing = loads((yield ToolCall("mail__list_messages", {"folder": "Inbox"}, note="Find the poll replies.")))
            for m in sorted(listing["messages"], key=lambda m: m["id"]):
                if m["subject"].startswith("Re: Availability"):
                    yield ToolCall("mail__read_message", {"message_id": m["id"]},
                                   note=f"Read message {m['id']} for constraints.")
            yield ToolCall("calendar__list_people", {}, note="Exact addresses, and the rooms with their sizes.")
            yield ToolCall("calendar__free_busy", {"emails": [me.email, *required, *(r[0] for r in rooms)],
                                                   **window_args}, note="Busy times of the must-haves and the rooms.")
            for call in booking(T, coming, room):
                yield call
            return f"Booked the {topic} workshop for {long_date(t_day)} {t_start}-{t_end} in {room_name[room]}."

        def solve():
            if level == 1:
                return (yield from solve_one())
            listing = loads((yield ToolCall("mail__list_messages", {"folder": "Inbox"},
                                            note="See the brief and the poll replies.")))
            for m in sorted(listing["messages"], key=lambda m: m["id"]):
                if not m["from"].startswith("LearnHub"):
                    yield ToolCall("mail__read_message", {"message_id": m["id"]},
                                   note=f"Read message {m['id']} for constraints.")
            emails = {}
            for p in required_p + optional_p:
                found = loads((yield ToolCall("calendar__list_people", {"query": p.name},
                                              note=f"Find {p.name}'s exact address.")))
                emails[p.email] = next(x["email"] for x in found if x["name"] == p.name)
            found = loads((yield ToolCall("calendar__list_people", {"query": "room"},
                                          note="List the bookable rooms and their sizes.")))
            room_rows = sorted(((x["email"], int(re.search(r"\((\d+) seats\)", x["name"]).group(1)))
                                for x in found if x["email"].startswith("room.")), key=lambda r: r[1])
            busy: dict[str, list[tuple[str, str]]] = {}
            hrs: dict[str, tuple[str, str]] = {}
            for who, note in (([me.email, *required, *optional],
                               "Everyone's busy times and working hours over the two weeks."),
                              ([r[0] for r in room_rows], "When each room is booked.")):
                fb = loads((yield ToolCall("calendar__free_busy", {"emails": who, **window_args}, note=note)))
                for p in fb["people"]:
                    busy[p["email"]] = [(b["start"], b["end"]) for b in p["busy"]]
                    hrs[p["email"]] = (p["working_hours"]["start"], p["working_hours"]["end"])
            blk, guests_opt, rm = next((b, *got) for b in cands if (
                got := evaluate(b, me.email, required, optional, busy, hrs, out, room_rows, closed)))
            created, *mails = booking(blk, guests_opt, rm, must=[emails[w] for w in required])
            eid = parse_id((yield created))
            for call in mails:
                yield call
            yield ToolCall("calendar__get_event", {"event_id": eid}, note="Verify the booking: time, guests and room.")
            yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 10},
                           note="Verify the agenda and the notes went out.")
            d, _part, s, e = blk
            return (f"Booked the {topic} workshop for {long_date(d)} {s}-{e} in {room_name[rm]}, sent the "
                    f"agenda to {len(required) + len(guests_opt) - 1} people and notes to {len(mails) - 1} who "
                    f"can't come.")

        # -- perturbations: edits of the oracle's calls ------------------------------------------------
        create, send = perturb.on("calendar__create_event"), perturb.on("mail__send_message")

        def rebook(*pick, **how):
            """The oracle with its booking and the mails after it swapped for ``booking(*pick, **how)``'s."""
            wrong = booking(*pick, **how)
            kept = perturb.drop(perturb.replace(solve, create, lambda call: wrong[0]), send, skip=1, count=None)
            return perturb.replace(kept, send, lambda call: wrong[1:])

        def invite(add=(), without=()):
            """An edit of the booking's guests (the room stays last)."""
            return lambda a: {**a, "attendees": [x for x in a["attendees"][:-1] if x not in without]
                              + [*add, a["attendees"][-1]]}

        def assumed(call: ToolCall) -> str:
            """The free/busy a run that skips the check takes for granted: everyone's calendar as it stands."""
            return json.dumps({"people": [{
                "email": w,
                "busy": [{"start": ev["start"], "end": ev["end"]} for ev in events if blocks(ev, w, me.email)],
                "working_hours": {"start": hours[w][0], "end": hours[w][1]}} for w in call.arguments["emails"]]})

        early = (t_day, t_part, f"{int(t_start[:2]) - 1:02d}{t_start[2:]}", t_end)  # not a half-day block
        flawed = {
            "event_slot": lambda: rebook(*wrong_pick),  # the conference ignored
            "required_invited": lambda: perturb.change(solve, create, invite(without=required[-1:])),
            "optional_invited": lambda: perturb.change(solve, create, invite(add=[ob.email])),
            "room_booked": lambda: rebook(T, coming, wrong_room),
            "event_title": lambda: perturb.change(solve, create, title="Workshop"),
            "no_conflicts": lambda: (rebook(early, coming, room) if level == 1
                                     else perturb.change(solve, create, invite(add=[oc.email]))),
            "agenda_mail": lambda: rebook(T, coming, room, items=agenda[:-1]),
            "regrets": lambda: perturb.drop(solve, perturb.on("mail__send_message", to=not_coming[-1:])),
            "no_stray_mail": lambda: perturb.insert(solve, ToolCall("mail__send_message", {
                "to": [lk.email], "subject": "Sales kickoff dry run", "body": "Sure, let's find another day."},
                note="Answer this one too.")),
            "calendar_untouched": lambda: perturb.insert(solve, ToolCall(
                "calendar__update_event", {"event_id": my_event, "location": "Video call only"},
                note="Tidy up this meeting's location.")),
            "availability_checked": lambda: perturb.drop(solve, perturb.on("calendar__free_busy"), answer=assumed),
            "replies_read": lambda: perturb.drop(solve, perturb.on(
                "mail__read_message", message_id=constraint_ids[0] if level == 1 else correction_id)),
        }

        # -- graders ----------------------------------------------------------------------------------
        room_emails = {r[0] for r in rooms}
        allowed_rcpt = set(required + optional) - {me.email}

        def new_events(world) -> list[dict]:
            return [e for e in cal.events(world) if e["id"] > last_seed_id and e["organizer"] == me.email]

        def the_event(world) -> tuple[dict | None, str]:
            evs = new_events(world)
            if len(evs) != 1:
                return None, f"{len(evs)} new events (expected exactly one)"
            return evs[0], ""

        def guests(e: dict) -> set[str]:
            return {a["email"] for a in e["attendees"]} - {me.email}

        def new_mail(world) -> list[dict]:
            return [m for m in mail.sent_messages(world) if m["id"] > last_mail_id]

        def check_slot(world, traj):
            e, why = the_event(world)
            if e is None:
                return False, why
            ok = (e["start"], e["end"]) == (start_iso, end_iso)
            return ok, "" if ok else f"booked {e['start']}-{e['end']}, expected {start_iso}-{end_iso}"

        def check_required(world, traj):
            e, why = the_event(world)
            if e is None:
                return False, why
            missing = set(required) - {me.email} - guests(e)
            strangers = guests(e) - set(required) - set(optional) - room_emails
            if missing or strangers:
                return False, f"missing {sorted(missing)}, not expected {sorted(strangers)}"
            return True

        def check_optional(world, traj):
            e, why = the_event(world)
            if e is None:
                return False, why
            got = guests(e) & set(optional)
            return got == set(coming), f"optional guests {sorted(got)}, expected {sorted(coming)}"

        def check_room(world, traj):
            e, why = the_event(world)
            if e is None:
                return False, why
            got = guests(e) & room_emails
            return got == {room}, f"rooms {sorted(got)}, expected {room}"

        def check_title(world, traj):
            e, why = the_event(world)
            if e is None:
                return False, why
            return _words(topic) <= _words(e["title"]), f"title {e['title']!r}"

        block_spans = {(iso(at(d, bs)), iso(at(d, be))) for d, _p, bs, be in cands}

        def check_conflicts(world, traj):
            e, why = the_event(world)
            if e is None:
                return False, why
            if (e["start"], e["end"]) not in block_spans:
                return False, f"{e['start']}-{e['end']} is not a morning or afternoon block in the window"
            for who in [me.email, *sorted(guests(e))]:
                clash = [b["id"] for b in cal.busy(world, who, e["start"], e["end"]) if b["id"] != e["id"]]
                if clash:
                    return False, f"{who} is busy then (events {clash})"
            return True

        def check_agenda(world, traj):
            want = set(attendees) - {me.email}
            for m in new_mail(world):
                if set(m["to"] + m["cc"]) - room_emails - {me.email} != want:
                    continue
                text = m["subject"] + "\n" + m["body"]
                words = _words(text)
                missing = [a for a in agenda if not _words(a) <= words]
                if missing:
                    return False, f"agenda mail lacks {missing}"
                if not (mentions_date(text, t_day) and mentions_time(text, at(t_day, t_start))):
                    return False, "agenda mail does not give the date and start time"
                if not _words(room_name[room].split(" (")[0]) <= words:
                    return False, "agenda mail does not name the room"
                return True
            return False, f"no mail to exactly {sorted(want)}"

        def check_regrets(world, traj):
            sent = new_mail(world)
            for o in not_coming:
                notes = [m for m in sent if o in m["to"] + m["cc"]]
                if not any(mentions_date(m["subject"] + "\n" + m["body"], t_day) for m in notes):
                    return False, f"{o} got no note with the workshop date"
            return True

        def check_untouched(world, traj):
            return unchanged_events(world, seeded, me.email)

        def first_create(traj) -> int | None:
            return next((i for i, c in enumerate(traj.tool_calls)
                         if c.name == "calendar__create_event" and not c.is_error), None)

        def check_availability(world, traj):
            stop = first_create(traj)
            if stop is None:
                return False, "nothing was booked"
            need = set(required) - {me.email}
            seen: set[str] = set()  # whose availability on the workshop day was looked at
            for c in traj.tool_calls[:stop]:
                if c.is_error or not isinstance(c.arguments, dict):
                    continue
                if c.name == "calendar__free_busy":
                    got = {parse_address(str(x)) for x in c.arguments.get("emails") or []}
                elif c.name == "calendar__list_events" and c.arguments.get("attendee"):
                    got = {parse_address(str(c.arguments["attendee"]))}
                else:
                    continue
                s, e = str(c.arguments.get("start", ""))[:10], str(c.arguments.get("end", ""))[:10]
                if s <= t_day.isoformat() <= e:
                    seen |= got
            if need <= seen:
                return True
            return False, "the must-haves' availability on the workshop day was not checked before booking"

        def check_read(world, traj):
            stop = first_create(traj)
            if stop is None:
                return False, "nothing was booked"
            read = set()
            for c in traj.tool_calls[:stop]:
                if c.name == "mail__read_message" and not c.is_error and isinstance(c.arguments, dict):
                    try:
                        read.add(int(c.arguments.get("message_id")))
                    except (TypeError, ValueError):
                        continue
            missing = [m for m in constraint_ids if m not in read]
            return not missing, f"not read before booking: {missing}" if missing else ""

        criteria = [
            Criterion("event_slot", "Exactly one new event, in the first block that works for every must-have "
                      "(calendar and mailed constraints) with a room free.", "final_state", check_slot, 2.0),
            Criterion("required_invited", "Every must-have is invited by exact address; no one outside the "
                      "brief.", "final_state", check_required),
            Criterion("optional_invited", "Exactly the nice-to-haves who can make that block are invited.",
                      "final_state", check_optional),
            Criterion("room_booked", "The smallest open room that seats everyone attending is booked as a guest.",
                      "final_state", check_room),
            Criterion("event_title", f"The event is named after the {topic} workshop.", "final_state",
                      check_title, requires=("event_slot",)),
            Criterion("no_conflicts", "The workshop is a half-day block in the window and no guest (room "
                      "included) is busy during it.", "final_state",
                      check_conflicts, requires=("required_invited",)),
            Criterion("agenda_mail", "One mail to exactly the people attending gives the date, start time, room "
                      "and every agenda item.", "final_state", check_agenda, 2.0),
            Criterion("regrets", "Each nice-to-have who can't come got a note with the date.", "final_state",
                      check_regrets, requires=("event_slot",)),
            mail_kit.sends_only(allowed_rcpt | {me.email}, seeded=last_mail_id,
                                description="No mail to anyone outside the brief's people."),
            Criterion("calendar_untouched", "Existing events are unchanged.", "final_state", check_untouched,
                      guard=True),
            Criterion("availability_checked", "Every must-have's availability on the chosen day was checked "
                      "(free_busy or their calendar) before booking.", "process", check_availability,
                      requires=("event_slot",)),
            Criterion("replies_read", "Every constraint mail (poll replies, correction, room closure) was read "
                      "before booking.", "process", check_read, requires=("event_slot",)),
        ]
        if level == 1:  # the tools offered cannot change an existing event
            criteria = [c for c in criteria if c.id != "calendar_untouched"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"today": today.isoformat(), "topic": topic, "slot": [start_iso, end_iso], "room": room,
                  "coming": coming, "not_coming": not_coming, "required": required, "brief": brief_id},
        )

    @staticmethod
    def _level_one(me, boss, ra, ob, hours, rooms, events, days, week1, cands):
        """Level 1's workshop, worked out (no draws) from the default's World: the sponsor and ``ra``
        must come, ``ob`` opts out, the three smallest rooms; ``ra`` is away (per mail) on the day of
        the block the calendars alone suggest. One week when it fits there, else both."""
        rooms = rooms[:3]
        req, opt = [boss.email, ra.email], [ob.email]
        who = [me.email, *req, *opt, *(r[0] for r in rooms)]
        bm = {w: [(e["start"], e["end"]) for e in events if blocks(e, w, me.email)] for w in who}
        for window in (week1, days):
            cw = [b for b in cands if b[0] in window]
            out = {ob.email: {(d, p) for d in window for p in ("am", "pm")}}

            def first(out_):
                return next(((b, *got) for b in cw
                             if (got := evaluate(b, me.email, req, opt, bm, hours, out_, rooms, set()))), None)

            naive = first(out)
            if naive is None:
                continue
            conf_days = {naive[0][0]}
            out[ra.email] = {(naive[0][0], "am"), (naive[0][0], "pm")}
            got = first(out)
            if got is None:
                continue
            T, _coming, room = got
            others = [r for r, _c in rooms if r != room]
            return list(window), cw, out, T, room, naive, others[0], conf_days
        raise RuntimeError("level 1: no workable block")  # pragma: no cover - generation bug

    # -- the World ------------------------------------------------------------------------------
    @staticmethod
    def _scenario(rng, me, required, optional, ra, rb, rc, oa, ob, oc, hours, rooms, days, week1, week2,
                  cands, colleagues):
        events: list[dict] = []

        def rand_slot(d: date, who: str, minutes: int) -> tuple[str, str]:
            ws, we = hours[who]
            lo, hi = at(d, ws), at(d, we) - timedelta(minutes=minutes)
            steps = max(0, int((hi - lo).total_seconds() // 1800))
            s = lo + timedelta(minutes=30 * rng.randint(0, steps))
            return iso(s), iso(s + timedelta(minutes=minutes))

        for k in range(rng.randint(5, 8)):  # the owner's own week(s)
            d = rng.choice(days)
            s, e = rand_slot(d, me.email, rng.choice([30, 60, 90]))
            if k < 3:
                events.append({"title": rng.choice(EVENTS), "start": s, "end": e,
                               "attendees": [rng.choice(colleagues).email], "location": "Room 1A"})
            else:
                events.append({"title": rng.choice(EVENTS), "start": s, "end": e,
                               "organizer": rng.choice(colleagues).email,
                               "attendees": [{"email": me.email, "response": rng.choice(["accepted", "declined"])}]})
        for w in required[1:] + optional + [required[0]]:
            for _ in range(rng.randint(3, 6)):
                d = rng.choice(days)
                s, e = rand_slot(d, w, rng.choice([30, 60, 90, 120]))
                if rng.random() < 0.3:
                    events.append({"title": rng.choice(EVENTS), "start": s, "end": e, "organizer": w})
                else:
                    events.append({"title": rng.choice(EVENTS), "start": s, "end": e,
                                   "organizer": rng.choice(colleagues).email,
                                   "attendees": [{"email": w, "response": rng.choice(["accepted", "tentative",
                                                                                       "declined"])}]})
        for email, _seats in rooms:
            for _ in range(rng.randint(4, 9)):
                d = rng.choice(days)
                s, e = rand_slot(d, email, rng.choice([60, 120, 180, 240]))
                events.append({"title": rng.choice(EVENTS), "start": s, "end": e,
                               "organizer": rng.choice(colleagues).email,
                               "attendees": [{"email": email, "response": "accepted"}]})

        def busy_map() -> dict[str, list[tuple[str, str]]]:
            out = {}
            for w in [me.email, *required, *optional, *(r[0] for r in rooms)]:
                out[w] = [(e["start"], e["end"]) for e in events if blocks(e, w, me.email)]
            return out

        def first(out, closed):
            bm = busy_map()
            for b in cands:
                got = evaluate(b, me.email, required, optional, bm, hours, out, rooms, closed)
                if got:
                    return b, got[0], got[1]
            return None

        cal_first = first({}, set())
        if cal_first is None:
            return None
        conf_days = {cal_first[0][0]}
        if rng.random() < 0.5:
            conf_days.add(rng.choice(days))
        rb_part = rng.choice(["am", "pm"])
        oa_week = rng.choice([week1, week2])
        out: dict[str, set] = {
            ra.email: {(d, p) for d in conf_days for p in ("am", "pm")},
            rb.email: {(d, "pm" if rb_part == "am" else "am") for d in days},
            oa.email: {(d, p) for d in oa_week for p in ("am", "pm")},
            ob.email: {(d, p) for d in days for p in ("am", "pm")},
        }
        got = first(out, set())
        if got is None:
            return None
        T0 = got[0]
        if cands.index(T0) < 2:
            return None
        rc_stale = T0[0]
        rc_real = rng.choice([d for d in days if d != rc_stale])
        out[rc.email] = {(rc_real, p) for p in ("am", "pm")}
        # a nice-to-have who would come is busy for an hour in that block
        d, _part, s, _e = T0
        oc_s = at(d, s) + timedelta(minutes=rng.choice([0, 30, 60, 90]))
        events.append({"title": rng.choice(EVENTS), "start": iso(oc_s), "end": iso(oc_s + timedelta(minutes=60)),
                       "organizer": oc.email})
        got = first(out, set())
        if got is None or got[0] != T0:
            return None
        # Facilities closes the room the calendar alone would suggest (when another one fits), else a tiny one
        bm = busy_map()
        heads = 1 + len(required) + len(got[1])
        fitting = [r for r, c in rooms if c >= heads and not any(
            cal.overlaps(iso(at(d, T0[2])), iso(at(d, T0[3])), b0, b1) for b0, b1 in bm[r])]
        if len(fitting) >= 2 and rng.random() < 0.65:
            closed_room = fitting[0]
        else:
            small = [r for r, c in rooms if c < heads]
            if not small:
                return None
            closed_room = small[0]
        c0 = d - timedelta(days=rng.randint(0, min(2, d.weekday())))
        c1 = d + timedelta(days=rng.randint(0, 4 - d.weekday()))
        closed = set()
        x = c0
        while x <= c1:
            closed.add((closed_room, x))
            x += timedelta(days=1)
        got = first(out, closed)
        if got is None or got[0] != T0:
            return None
        T, coming, room = got
        if not coming or oc.email in coming or len(coming) == len(optional):
            return None
        # the perturbation's wrong picks
        no_conf = {k: v for k, v in out.items() if k != ra.email}
        wrong = first(no_conf, closed)
        if wrong is None or wrong[0] == T:
            return None
        others = [r for r in fitting if r != room]
        if not others:
            return None
        return {"events": events, "out": out, "closed": closed, "T": T, "coming": coming, "room": room,
                "wrong_pick": wrong, "wrong_room": others[-1] if closed_room != fitting[0] else fitting[0],
                "conf_days": conf_days, "rb_part": rb_part, "rc_stale": rc_stale, "rc_real": rc_real,
                "oa_week": oa_week, "closure": (closed_room, c0, c1)}
