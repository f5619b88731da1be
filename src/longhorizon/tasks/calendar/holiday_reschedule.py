"""Calendar scheduling: move the owner's meetings out of an office-closure week.

Facilities confirmed the closure days (in some seeds after a provisional mail that named
other days); every meeting the owner organises on a confirmed closure day moves to the
following week: the same weekday and time when everyone is free, else the nearest half-hour
slot that day (earlier on a tie), else the next working day. Rules live in the inbox too:
Friday afternoons become meeting-free from that week or only from the week after (drawn),
and in some seeds a team member mentions a day they are out that is not on the calendar.
The trap mix (provisional mail, person out, Friday rule now or later) is drawn per seed;
the hold a moved meeting needs and the attendee busy at the old time are always there.
The owner's "Hold" blocks do not count as busy (cancel one when a moved meeting needs its
time, leave the others), the weekly recurring meeting is skipped (cancelled) rather than
moved, meetings other people organise and the owner's
meetings outside the closure stay as they are. One summary mail goes to everyone affected.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from pathlib import Path

from longhorizon.apps.calendar import state as cal
from longhorizon.apps.mail import state as mail
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.calendar.slots import at, blocks, iso, snapshot, unchanged_events
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    People,
    company,
    day_month,
    loads,
    long_date,
    mentions_day,
    mentions_time,
    monday_of,
    norm,
    rng_and_faker,
)

HOURS = [("08:00", "16:00"), ("08:30", "16:30"), ("09:00", "17:00"), ("09:30", "17:30"),
         ("10:00", "18:00"), ("07:30", "15:30"), ("09:00", "18:00")]
MY_HOURS = [("08:30", "17:30"), ("08:00", "17:00"), ("09:00", "18:00"), ("08:00", "18:00")]
MEETINGS = [
    "Roadmap review", "Budget check-in", "Hiring sync", "Vendor update", "Design critique",
    "Customer escalation review", "Analytics deep dive", "Pricing workshop", "Release readiness",
    "Partner pipeline review", "Security findings walkthrough", "Onboarding plan review",
    "Quarterly goals check", "Support backlog triage", "Content calendar planning", "Data migration sync",
    "Infrastructure cost review", "Launch retrospective", "Office move planning", "Procurement review",
]
WEEKLIES = ["Ops weekly", "Team weekly sync", "Leads weekly", "Weekly metrics review"]
OTHER_EVENTS = ["Customer call", "Interview panel", "Training session", "Sprint planning", "Vendor demo",
                "Pairing session", "Design review", "Lunch & learn", "Architecture forum", "1:1 with manager"]
HOLDS = ["Hold: deep work", "Hold: board deck prep", "Hold: inbox zero", "Hold: planning time",
         "Hold: reading & reviews", "Hold: admin"]
ROOMS = ["Room 2A", "Room 3C", "Harbor room", "Maple room", "Video call", "Room 4B", "Boardroom"]
RANGES = [(0, 4), (1, 4), (0, 3)]
FRIDAY_CUTOFF = "12:00"
OUT_REASONS = ["I'm moving house", "I have a family thing", "I'm taking a personal day", "I'm at a course"]


def _ranges_text(days: list[date]) -> str:
    return f"{day_month(days[0])} to {day_month(days[-1])}"


def _is_hold(ev: dict) -> bool:
    return ev["title"].lower().startswith("hold")


def nearest_slot(day: date, orig: str, minutes: int, lo: str, hi: str,
                 busy: list[tuple[str, str]], far: bool = False) -> tuple[str, str] | None:
    """The ``minutes``-long half-hour-aligned slot on ``day`` inside [lo, hi) that clashes with
    none of ``busy`` and starts closest to ``orig`` (earlier on a tie); ``far`` picks the farthest."""
    length = timedelta(minutes=minutes)
    target = at(day, orig)
    best = None
    t = at(day, lo)
    while t + length <= at(day, hi):
        s, e = iso(t), iso(t + length)
        if not any(cal.overlaps(s, e, b0, b1) for b0, b1 in busy):
            key = (abs((t - target).total_seconds()), t)
            if far:
                key = (-key[0], t)
            if best is None or key < best[0]:
                best = (key, (s, e))
        t += timedelta(minutes=30)
    return best[1] if best else None


@register
class HolidayWeekReschedule(TaskFamily):
    name = "holiday_week_reschedule"
    category = "calendar scheduling"
    apps = ("calendar", "mail")
    description = (
        "Move every meeting the owner organises on the confirmed office-closure days to the next week "
        "(same time if possible, else the nearest free slot within working hours, Friday-afternoon rule, "
        "people out per mail), release clashing Hold blocks, skip the recurring weekly, leave everything "
        "else alone, and mail one summary to everyone affected."
    )

    levels = 3
    """1: one meeting to move (an attendee is busy at its old time next week), found from the
    confirmed closure mail alone; 2: three (also one that needs a hold's time and one whose
    attendee is out per mail, where someone is), all rule mails read; 3 (default): seven to nine.
    Every level keeps the drawn trap mix, the weekly to cancel and the meetings others organise."""
    toolsets = {1: (
        "calendar__cancel_event", "calendar__free_busy", "calendar__list_events", "calendar__update_event",
        "mail__read_message", "mail__search_messages", "mail__send_message",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        our_company, domain = company(fake)
        wmon = monday_of(rng, weeks=40)
        today = wmon - timedelta(days=rng.choice([3, 4, 10, 11]))
        wk = [wmon + timedelta(days=i) for i in range(5)]
        nxt = [wmon + timedelta(days=7 + i) for i in range(5)]
        prev = [wmon - timedelta(days=7 - i) for i in range(5)]
        later = [wmon + timedelta(days=14 + i) for i in range(5)]
        first, last = rng.choice(RANGES)
        closure = wk[first:last + 1]
        prov = rng.choice([r for r in RANGES if r != (first, last)])
        prov_days = wk[prov[0]:prov[1] + 1]
        # the trap mix: the earlier provisional closure mail (other days), the team member out per
        # mail and whether the Friday-afternoon rule is in force next week or only from the week
        # after (the mail is there either way); each there or not, the hold and the busy attendee
        # always
        traps = {"provisional": rng.random() < 0.6, "ooo": rng.random() < 0.65,
                 "friday_now": rng.random() < 0.6}
        cutoff = FRIDAY_CUTOFF if traps["friday_now"] else None
        rule_week = nxt if traps["friday_now"] else later

        me = people.make(domain)
        my_hours = rng.choice(MY_HOURS)
        team = [people.make(domain) for _ in range(rng.randint(8, 10))]
        hours = {p.email: rng.choice(HOURS) for p in team}
        hours[me.email] = my_hours
        lookalikes = [people.make(domain, first=p.first) for p in rng.sample(team, 2)]
        colleagues = [people.make(domain) for _ in range(5)]
        boss = people.make(domain)
        directory = [
            {"email": me.email, "name": me.name, "work_start": my_hours[0], "work_end": my_hours[1]},
            *({"email": p.email, "name": p.name, "work_start": hours[p.email][0],
               "work_end": hours[p.email][1]} for p in team),
            *({"email": p.email, "name": p.name} for p in lookalikes + colleagues + [boss]),
        ]
        directory.sort(key=lambda p: p["email"])

        for _attempt in range(80):
            scen = self._scenario(rng, me, team, hours, colleagues, lookalikes, wk, nxt, prev, later, closure,
                                  traps["ooo"], cutoff)
            if scen is not None:
                break
        else:  # pragma: no cover - generation bug
            raise RuntimeError(f"{self.name}: no solvable closure week for seed {seed}")
        events, movable, weekly, ooo = scen["events"], scen["movable"], scen["weekly"], scen["ooo"]
        plan, cancel_holds = scen["plan"], scen["cancel_holds"]
        shifted, spare_hold, other_mine = scen["shifted"], scen["spare_hold"], scen["other_mine"]
        last_seed_id = len(events)
        if level < self.levels:  # the same draws as the default, then fewer meetings to move
            kept = {1: [shifted], 2: [shifted, scen["k2"], scen["k3"]]}[level]
            events = [e for e in events if e not in movable or e["id"] in kept]
            movable = [m for m in movable if m["id"] in kept]
            plan = self._simulate(events, movable, me.email, hours, nxt, scen["ooo"], cutoff)
            holds_ = [e["id"] for e in events if e.get("organizer", me.email) == me.email and _is_hold(e)]
            by_id_ = {e["id"]: e for e in events}
            cancel_holds = {h for h in holds_ if any(cal.overlaps(by_id_[h]["start"], by_id_[h]["end"], *sl)
                                                     for sl in plan.values())}
            spare_hold = next((h for h in holds_ if h not in cancel_holds), None)
        seeded = {e["id"]: snapshot(e, me.email) for e in events}
        hold_ids = {e["id"] for e in events if e.get("organizer", me.email) == me.email and _is_hold(e)}
        movable_ids = [m["id"] for m in movable]
        by_id = {e["id"]: e for e in events}
        weekly_w = weekly["w_id"]
        watched = [eid for eid in seeded if eid not in hold_ids and eid not in movable_ids and eid != weekly_w]
        affected_people = sorted({a["email"] for m in movable for a in m["attendees"]} | set(weekly["attendees"]))
        ooo_person, ooo_day = ooo  # ("", None) when no one is out

        # -- mailbox ----------------------------------------------------------------------------
        facilities = f"facilities@{domain}"
        stamp = lambda d, h, m: f"{d.isoformat()}T{h:02d}:{m:02d}:00"  # noqa: E731
        closed_set = set(closure)
        open_days = [d for d in wk if d not in closed_set]
        ooo_p = next((p for p in team if p.email == ooo_person), None)
        decoy_out = rng.choice([p for p in team if p.email != ooo_person])
        decoy_day = rng.choice(later)
        other_org = rng.choice(colleagues)
        msgs = [
            *([{"folder": "Inbox", "sender": facilities, "sender_name": "Facilities Team",
             "to": [f"all@{domain}"], "subject": f"Heads-up: office closure week of {day_month(wk[0])}",
             "body": (f"Hi all,\n\nBecause of the electrical works in the building we expect to close the office "
                      f"from {_ranges_text(prov_days)}. These dates are provisional; we'll confirm them as soon "
                      f"as the contractor does.\n\nFacilities"),
             "date": stamp(today - timedelta(days=12), 8, 5), "is_read": True}] if traps["provisional"] else []),
            {"folder": "Inbox", "sender": facilities, "sender_name": "Facilities Team",
             "to": [f"all@{domain}"], "subject": "Confirmed: office closure dates",
             "body": (f"Hi all,\n\nThe contractor has confirmed: the office will be closed from "
                      f"{long_date(closure[0])} to {long_date(closure[-1])}, both days included. "
                      + (f"The office is open as normal on {', '.join(long_date(d) for d in open_days)}. "
                         if open_days else "")
                      + "Everyone is off on the closure days, so please move any meetings you organise on "
                        "those days.\n\nThanks for your patience,\nFacilities"),
             "date": stamp(today - timedelta(days=1), 16, 20)},
            {"folder": "Inbox", "sender": boss.email, "sender_name": boss.name, "to": [f"managers@{domain}"],
             "subject": "Meeting-free Friday afternoons",
             "body": (f"Hi everyone,\n\nStarting the week of {day_month(rule_week[0])}, Friday afternoons are "
                      f"meeting-free: please don't schedule anything that runs past {FRIDAY_CUTOFF} on a "
                      f"Friday.\n\nThanks,\n{boss.first}"),
             "date": stamp(today - timedelta(days=3), 9, 40)},
            *([{"folder": "Inbox", "sender": ooo_p.email, "sender_name": ooo_p.name,
               "subject": f"Out on {day_month(ooo_day)}",
               "body": (f"Hi {me.first},\n\nHeads-up: I'm off all day on {long_date(ooo_day)} "
                        f"({rng.choice(OUT_REASONS).lower()}). It isn't in the calendar yet, so please don't "
                        f"put anything with me on that day.\n\nThanks,\n{ooo_p.first}"),
               "date": stamp(today - timedelta(days=2), 11, 15)}] if ooo_p else []),
            {"folder": "Inbox", "sender": decoy_out.email, "sender_name": decoy_out.name,
             "subject": "Day off later this month",
             "body": (f"Hi {me.first},\n\nJust so you know, I'll take {long_date(decoy_day)} off. Nothing to "
                      f"change for now.\n\n{decoy_out.first}"),
             "date": stamp(today - timedelta(days=4), 15, 2)},
            {"folder": "Inbox", "sender": other_org.email, "sender_name": other_org.name,
             "subject": "Moving my review out of the closure",
             "body": (f"Hi {me.first},\n\nI'll move the meetings I organise during the closure myself, "
                      f"you'll get updated invites from me. No action needed on your side.\n\n{other_org.first}"),
             "date": stamp(today, 7, 55)},
            {"folder": "Inbox", "sender": "digest@worktips.example", "sender_name": "Work Tips",
             "subject": "5 ways to reclaim your calendar", "body": "Block focus time, decline more, batch meetings.",
             "date": stamp(today - timedelta(days=5), 6, 30), "is_read": True},
        ]
        msgs.sort(key=lambda m: m["date"])
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
        mid = {m["subject"]: m["id"] for m in msgs}
        confirm_id = mid["Confirmed: office closure dates"]
        friday_id = mid["Meeting-free Friday afternoons"]
        ooo_id = mid[f"Out on {day_month(ooo_day)}"] if ooo_p else None
        must_read = [x for x in (confirm_id, friday_id, ooo_id) if x] if level > 1 else [confirm_id]
        to_read = [m["id"] for m in msgs if m["sender"] != "digest@worktips.example"]

        def build(root: Path) -> None:
            cal.create_calendar(root / "state" / "calendar.sqlite", me.email, directory, events,
                                today=today.isoformat())
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name,
                                folders=["Inbox", "Sent", "Archive"], messages=msgs,
                                now=stamp(today, 9, 0))

        wt = weekly["title"]
        w = phrasing_rng(self.name, seed)
        hello = say(w, f"Hi, {me.first} here.", f"Hello, it's {me.first}.", f"Hi! {me.first} here.")
        news = say(w, "Facilities have confirmed the office closure (it's in my inbox).",
                   "The office closure is now confirmed by Facilities: the mail is in my inbox.",
                   "There's a mail in my inbox from Facilities confirming the office closure.")
        ask = say(w, "Could you move every meeting I organise that falls on a closure day to the following week?",
                  "Please move each meeting I organise on a closure day to the following week.",
                  "I need every meeting I organise on a closure day moved to the following week.")
        slot = say(w, "Try the same weekday and time first. If that doesn't work for everyone, take the free slot "
                      "closest in time on that same day (starting on the hour or half past; if two are equally "
                      "close, the earlier one), and if nothing fits that day, go to the next working day, again "
                      "as close to the original time as possible.",
                   "First choice is the same weekday and time. When that doesn't suit everyone, use the free slot "
                   "on that same day that is closest in time (starting on the hour or half past, and the earlier "
                   "one if two are equally close); when that day has nothing, move on to the next working day, "
                   "again as close to the original time as possible.",
                   "Aim for the same weekday and time; failing that, the free slot nearest in time on that same "
                   "day (slots start on the hour or half past, and of two equally close ones take the earlier); "
                   "and if that day has no room at all, the next working day, once more as close to the "
                   "original time as possible.")
        free = say(w, "Everyone has to be within their working hours and free; check my inbox for people who are "
                      "out and for new rules about meeting times.",
                   "Each new slot must be inside everyone's working hours with everyone free, and please check my "
                   "inbox for people who are out and for new rules on meeting times.",
                   "All attendees must be free and within their working hours. My inbox has mails about people "
                   "being out and new rules about meeting times, so check it.")
        rules = in_some_order(w, [
            say(w, "Keep each meeting's title, length, attendees and room.",
                "Each meeting keeps its title, length, attendees and room.",
                "Don't change a meeting's title, length, attendees or room."),
            say(w, "My \"Hold\" blocks don't count as busy: if a moved meeting needs that time, cancel the hold, "
                   "but leave the other holds alone.",
                "My \"Hold\" blocks aren't real busy time. Cancel a hold only when a moved meeting needs its "
                "time, and leave the other holds alone.",
                "Treat my \"Hold\" blocks as free: when a moved meeting needs a hold's time, cancel that hold; "
                "the other holds stay."),
            say(w, f"The {wt} happens every week anyway, so just cancel it for the closure week instead of "
                   f"moving it.",
                f"Don't move the {wt}: it happens every week anyway, so just cancel it for the closure week.",
                f"As the {wt} happens every week, cancel it for the closure week rather than moving it."),
            say(w, "Don't touch meetings other people organise, or mine outside the closure.",
                "Meetings other people organise, and mine outside the closure, stay as they are.",
                "Leave alone the meetings other people organise and my meetings outside the closure."),
        ])
        order = say(w, "Please work through the meetings in date order.",
                    "Work through the meetings in date order, please.",
                    "Please go through the meetings in date order.")
        mail_ = say(w, f"Then send one email to everyone affected (the attendees of the meetings you moved or "
                       f"cancelled) listing each moved meeting with its new day and time, and mentioning that "
                       f"this {wt} is skipped.",
                    f"When that's done, send a single email to everyone affected (the attendees of the meetings "
                    f"you moved or cancelled): list each moved meeting with its new day and time, and mention "
                    f"that this {wt} is skipped.",
                    f"Finally, send one email to everyone affected, meaning the attendees of the meetings you "
                    f"moved or cancelled; it should list every moved meeting with its new day and time and say "
                    f"that this {wt} is skipped.")
        instruction = " ".join([hello, news, ask, slot, free, *rules, order, mail_])
        if level == 1:  # the same rules, said briefly (one meeting to move)
            slot = say(w, "Same weekday and time if everyone can; else the free slot nearest in time that day "
                          "(on the hour or half past; the earlier of two equally close); else the next working "
                          "day, as close to the original time as possible.",
                       "First the same weekday and time; if that doesn't suit everyone, the closest free slot that "
                       "day (on the hour or half past, the earlier on a tie); if that day is full, the next "
                       "working day, again as close in time as possible.")
            free = say(w, "Everyone must be free and within working hours.",
                       "All attendees must be free and inside their working hours.")
            rules = [say(w, "Keep title, length, attendees and room.", "Change only the time."),
                     say(w, "Treat my \"Hold\" blocks as free: cancel one only if a moved meeting needs its time.",
                         "My \"Hold\" blocks count as free; cancel a hold only when a moved meeting needs it."),
                     say(w, f"Cancel the {wt} for the closure week instead of moving it (it's weekly).",
                         f"The {wt} is weekly: cancel it for the closure week, don't move it."),
                     say(w, "Leave other people's meetings and mine outside the closure alone.",
                         "Don't touch others' meetings or mine outside the closure.")]
            mail_ = say(w, f"Then email everyone affected (attendees of what you moved or cancelled) once, with "
                           f"each moved meeting's new day and time and that this {wt} is skipped.",
                        f"Then send one email to the attendees of what you moved or cancelled: each moved "
                        f"meeting's new day and time, and that this {wt} is skipped.")
            instruction = " ".join([hello, news, ask, slot, free, *rules, mail_])

        my_list_range = {"start": nxt[0].isoformat(), "end": nxt[-1].isoformat()}

        order = sorted(movable, key=lambda e: (e["start"], e["id"]))  # the order the oracle moves them in

        def line(e: dict, slot: tuple[str, str], time: bool = True) -> str:
            """The summary's line for meeting ``e`` moved to ``slot`` (``time=False``: the day only)."""
            s = datetime.strptime(slot[0], cal.TIME_FMT)
            return f"- {e['title']}: now {day_month(s.date())}" + (f" at {s.strftime('%H:%M')}" if time else "")

        def solve_one():
            """Level 1: one meeting; the confirmed mail tells the days, free/busy the new slot."""
            (m,) = movable
            yield ToolCall("mail__search_messages", {"query": "closure"}, note="Find the closure mails.")
            yield ToolCall("mail__read_message", {"message_id": confirm_id},
                           note="Read the confirmed closure dates (not the provisional ones).")
            yield ToolCall("calendar__list_events", {"start": closure[0].isoformat(), "end": closure[-1].isoformat()},
                           note="List everything on the confirmed closure days.")
            yield ToolCall("calendar__cancel_event", {"event_id": weekly_w},
                           note=f"The {weekly['title']} recurs weekly: cancel this week's occurrence.")
            guests_ = [a["email"] for a in m["attendees"]]
            slot = plan[m["id"]]
            same_day = (datetime.strptime(m["start"], cal.TIME_FMT).date() + timedelta(days=7)).isoformat()
            yield ToolCall("calendar__free_busy", {"emails": [me.email, *guests_], "start": same_day,
                                                   "end": max(same_day, slot[0][:10])},
                           note=f"Check who is free on the same weekday the week after for {m['title']!r}.")
            for hid in sorted(cancel_holds):
                yield ToolCall("calendar__cancel_event", {"event_id": hid},
                               note=f"Hold {hid} sits where {m['title']!r} has to go: release it.")
            yield ToolCall("calendar__update_event", {"event_id": m["id"], "start": slot[0], "end": slot[1]},
                           note=f"Move {m['title']!r} to {slot[0]}.")
            body = (f"Hi all,\n\nThe office is closed from {day_month(closure[0])} to {day_month(closure[-1])}, "
                    f"so I've moved my meeting from those days to the following week:\n\n{line(m, slot)}\n\n"
                    f"The {weekly['title']} is skipped for the closure week; we'll pick it up again "
                    f"as usual the week after.\n\n{me.first}")
            yield ToolCall("mail__send_message", {
                "to": list(affected_people), "subject": "Meetings moved out of the office closure", "body": body},
                note="Tell everyone affected where the meeting went.")
            return f"Moved {m['title']} out of the closure and cancelled this week's {weekly['title']}."

        def solve():
            listing = loads((yield ToolCall("mail__list_messages", {"folder": "Inbox"},
                                            note="See what came in about the closure.")))
            for m in sorted(listing["messages"], key=lambda m: m["id"]):
                if m["id"] in to_read:
                    yield ToolCall("mail__read_message", {"message_id": m["id"]},
                                   note=f"Read message {m['id']}: closure dates, rules, people out.")
            closure_evs = loads((yield ToolCall("calendar__list_events", {
                "start": closure[0].isoformat(), "end": closure[-1].isoformat()},
                note="List everything on the confirmed closure days.")))
            mine = [e for e in closure_evs if e["organizer"] == me.email]
            target = loads((yield ToolCall("calendar__list_events", dict(my_list_range),
                                           note="See my calendar for the week after, holds included.")))
            my_busy, holds = [], {}
            for e in target:
                if e["organizer"] == me.email and _is_hold(e):
                    holds[e["id"]] = (e["start"], e["end"])
                elif e["organizer"] == me.email or any(
                        a["email"] == me.email and a["response"] != "declined" for a in e["attendees"]):
                    my_busy.append((e["start"], e["end"]))
            weekly_ev = next(e for e in mine if norm(e["title"]) == norm(weekly["title"]))
            to_move = sorted((e for e in mine if e["id"] != weekly_ev["id"]), key=lambda e: (e["start"], e["id"]))
            yield ToolCall("calendar__cancel_event", {"event_id": weekly_ev["id"]},
                           note=f"The {weekly['title']} recurs weekly: cancel this week's occurrence.")
            cancelled: set[int] = set()
            moved: dict[int, tuple[str, str]] = {}
            for e in to_move:
                guests = [a["email"] for a in e["attendees"]]
                fb = loads((yield ToolCall("calendar__free_busy", {
                    "emails": [me.email, *guests], **my_list_range},
                    note=f"Check who is free the week after for {e['title']!r}.")))
                mine_fb, others = fb["people"][0], fb["people"][1:]
                my_hours_now = mine_fb["working_hours"]
                att_busy = [(b["start"], b["end"]) for p in others for b in p["busy"]]
                wh = [(p["working_hours"]["start"], p["working_hours"]["end"]) for p in others]
                slot = self._place(e, guests, my_busy, att_busy, (my_hours_now["start"], my_hours_now["end"]),
                                   wh, nxt, ooo, None, cutoff)
                for hid, (hs, he) in sorted(holds.items()):
                    if hid in cancelled or not cal.overlaps(slot[0], slot[1], hs, he):
                        continue
                    yield ToolCall("calendar__cancel_event", {"event_id": hid},
                                   note=f"Hold {hid} sits where {e['title']!r} has to go: release it.")
                    cancelled.add(hid)
                yield ToolCall("calendar__update_event", {"event_id": e["id"], "start": slot[0], "end": slot[1]},
                               note=f"Move {e['title']!r} to {slot[0]}.")
                my_busy.append(slot)
                moved[e["id"]] = slot
            yield ToolCall("calendar__list_events", dict(my_list_range),
                           note="Verify the week after: every moved meeting in place, no clashes.")
            yield ToolCall("calendar__list_events", {"start": closure[0].isoformat(),
                                                     "end": closure[-1].isoformat()},
                           note="Verify nothing of mine is left on the closure days.")
            body = (f"Hi all,\n\nThe office is closed from {day_month(closure[0])} to {day_month(closure[-1])}, "
                    f"so I've moved my meetings from those days to the following week:\n\n"
                    + "\n".join(line(e, moved[e["id"]]) for e in to_move)
                    + f"\n\nThe {weekly['title']} is skipped for the closure week; we'll pick it up again "
                      f"as usual the week after. The updated invites are on your calendars.\n\n{me.first}")
            yield ToolCall("mail__send_message", {
                "to": list(affected_people), "subject": "Meetings moved out of the office closure", "body": body},
                note="Tell everyone affected where their meetings went.")
            return (f"Moved {len(to_move)} meetings out of the closure ({day_month(closure[0])} to "
                    f"{day_month(closure[-1])}), cancelled this week's {weekly['title']} and sent a summary.")

        oracle = solve_one if level == 1 else solve

        def place(e: dict, mistake: str | None = None, seen: list[str] | None = None) -> tuple[str, str]:
            """Where the oracle puts meeting ``e`` in its turn (the ones before it at their planned
            slots) from free/busy on ``seen`` (default: every attendee), with ``mistake``."""
            g = [a["email"] for a in e["attendees"]]
            seen = g if seen is None else seen
            before = {x["id"]: plan[x["id"]] for x in order[:order.index(e)]}
            return self._place(e, g, self._my_busy(events, me.email, nxt) + list(before.values()),
                               scen["busy_now"](seen, before), my_hours, [hours[x] for x in seen], nxt, ooo, mistake,
                               cutoff)

        summary_mail = perturb.on("mail__send_message")

        def misplaced(mistake: str):
            """The oracle with the last meeting that ``mistake`` moves elsewhere moved there (the
            last, so no later move hinges on it), the holds released to match, and its summary
            saying so."""
            e = next((e for e in reversed(order) if place(e, mistake) != plan[e["id"]]), by_id[shifted])
            slot = place(e, mistake)
            freed = {h for h in hold_ids if any(cal.overlaps(by_id[h]["start"], by_id[h]["end"], *sl)
                                                for sl in {**plan, e["id"]: slot}.values())}
            flawed_ = perturb.replace(oracle, perturb.on("calendar__update_event", event_id=e["id"]), lambda c: [
                *(ToolCall("calendar__cancel_event", {"event_id": h},
                           note=f"Hold {h} sits where {e['title']!r} has to go: release it.")
                  for h in sorted(freed - cancel_holds)),
                ToolCall(c.name, {**c.arguments, "start": slot[0], "end": slot[1]},
                         f"Move {e['title']!r} to {slot[0]}.")])
            if cancel_holds - freed:
                flawed_ = perturb.drop(flawed_, perturb.on(
                    "calendar__cancel_event", where=lambda a: a["event_id"] in cancel_holds - freed), count=None)
            return perturb.change(flawed_, summary_mail, lambda a: {
                **a, "body": a["body"].replace(line(e, plan[e["id"]]), line(e, slot))})

        def unchecked():
            """Free/busy for one meeting leaves out an attendee whom no earlier free/busy covered and
            whose slot does not hinge on them, where there is one (level 1's oracle reads no free/busy
            answer: it skips the call)."""
            if level == 1:
                return perturb.drop(oracle, perturb.on("calendar__free_busy"))

            def without(e: dict, x: str) -> list[str]:
                return [a["email"] for a in e["attendees"] if a["email"] != x]
            e, x = next(((e, a["email"]) for k, e in enumerate(order) for a in e["attendees"]
                         if place(e, seen=without(e, a["email"])) == plan[e["id"]]
                         and not any(a["email"] == b["email"] for o in order[:k] for b in o["attendees"])),
                        (order[0], order[0]["attendees"][0]["email"]))
            return perturb.change(oracle, perturb.noted(
                "calendar__free_busy", f"Check who is free the week after for {e['title']!r}."),
                emails=[me.email, *without(e, x)])

        def uncleared():
            """The last meeting stays where it is (and so do the holds only it needed)."""
            flawed_ = perturb.drop(oracle, perturb.on("calendar__update_event", event_id=order[-1]["id"]))
            own = {h for h in cancel_holds if not any(cal.overlaps(by_id[h]["start"], by_id[h]["end"], *plan[x["id"]])
                                                      for x in order[:-1])}
            return perturb.drop(flawed_, perturb.on("calendar__cancel_event", where=lambda a: a["event_id"] in own),
                                count=None) if own else flawed_

        flawed = {
            "closure_cleared": uncleared,
            "new_slots": lambda: misplaced("new_slots"),
            "details_kept": lambda: perturb.change(oracle, perturb.on("calendar__update_event"),
                                                   title=f"{order[0]['title']} (moved)"),
            "working_rules": lambda: misplaced("working_rules"),
            "holds_released": lambda: perturb.drop(oracle, perturb.on(
                "calendar__cancel_event", where=lambda a: a["event_id"] in cancel_holds), count=None),
            "holds_kept": lambda: perturb.insert(oracle, ToolCall(
                "calendar__cancel_event", {"event_id": spare_hold}, note="This hold looks stale; clear it too."),
                before=summary_mail),
            "others_untouched": lambda: perturb.insert(oracle, ToolCall(
                "calendar__update_event", {"event_id": other_mine, "location": "Cafe downstairs"},
                note="Make this one a video call while I'm at it."), before=summary_mail),
            "weekly_skipped": lambda: perturb.drop(oracle, perturb.on("calendar__cancel_event", event_id=weekly_w)),
            "summary_mail": lambda: perturb.change(oracle, summary_mail, lambda a: {**a, "body": a["body"].replace(
                line(order[0], plan[order[0]["id"]]), line(order[0], plan[order[0]["id"]], time=False))}),
            "summary_recipients": lambda: perturb.change(oracle, summary_mail, to=list(affected_people)[:-1]),
            "no_other_mail": lambda: perturb.insert(oracle, ToolCall(
                "mail__reply", {"message_id": confirm_id, "body": "Thanks, all moved!"}, note="Let Facilities know.")),
            "checked_availability": unchecked,
            "mails_read": lambda: perturb.drop(oracle, perturb.on(
                "mail__read_message", message_id=confirm_id if level == 1 else (ooo_id or friday_id))),
        }

        # -- graders ------------------------------------------------------------------------------
        closure_iso = {d.isoformat() for d in closure}
        next_iso = {d.isoformat() for d in nxt}
        hours_of = {p["email"]: (p.get("work_start", "09:00"), p.get("work_end", "17:00")) for p in directory}

        def copy_of(world, eid: int) -> dict | None:
            ev = cal.event(world, eid)
            if ev and ev["status"] == "active" and ev["organizer"] == me.email:
                return ev
            title = norm(by_id[eid]["title"])
            for e in cal.events(world):
                if e["id"] > last_seed_id and e["organizer"] == me.email and norm(e["title"]) == title:
                    return e
            return None

        def copies(world) -> tuple[dict[int, dict], str]:
            out = {}
            for eid in movable_ids:
                c = copy_of(world, eid)
                if c is None or c["start"][:10] not in next_iso:
                    return out, f"{by_id[eid]['title']!r} is not in the week after"
                out[eid] = c
            return out, ""

        def guests(e: dict) -> set[str]:
            return {a["email"] for a in e["attendees"]} - {me.email}

        def check_cleared(world, traj):
            left = [e["id"] for e in cal.events(world) if e["organizer"] == me.email
                    and e["start"][:10] in closure_iso]
            if left:
                return False, f"still on closure days: {left}"
            got, why = copies(world)
            return (not why, why)

        def check_slots(world, traj):
            bad = []
            for eid in movable_ids:
                c = copy_of(world, eid)
                if c is None or (c["start"], c["end"]) != plan[eid]:
                    bad.append(f"{by_id[eid]['title']!r}: {None if c is None else (c['start'], c['end'])} "
                               f"(expected {plan[eid]})")
            return not bad, "; ".join(bad)

        def check_details(world, traj):
            got, why = copies(world)
            if why:
                return False, why
            for eid, c in got.items():
                o = by_id[eid]
                want = {a if isinstance(a, str) else a["email"] for a in o.get("attendees", [])}
                length = cal.parse_time(c["end"]) - cal.parse_time(c["start"])
                if norm(c["title"]) != norm(o["title"]):
                    return False, f"title {c['title']!r} (was {o['title']!r})"
                if guests(c) != want:
                    return False, f"{o['title']!r}: attendees {sorted(guests(c))}, expected {sorted(want)}"
                if norm(c["location"]) != norm(o.get("location", "")):
                    return False, f"{o['title']!r}: location {c['location']!r}"
                if length != cal.parse_time(o["end"]) - cal.parse_time(o["start"]):
                    return False, f"{o['title']!r}: length changed to {length}"
            return True

        def check_rules(world, traj):
            got, why = copies(world)
            if why:
                return False, why
            for eid, c in got.items():
                who = [me.email, *sorted(guests(c))]
                for x in who:
                    ws, we = hours_of.get(x, ("09:00", "17:00"))
                    if not cal.within_working_hours({"work_start": ws, "work_end": we}, c["start"], c["end"]):
                        return False, f"{c['title']!r} at {c['start']} is outside {x}'s working hours"
                    clash = [b["id"] for b in cal.busy(world, x, c["start"], c["end"])
                             if b["id"] != c["id"] and b["id"] not in hold_ids]
                    if clash:
                        return False, f"{c['title']!r} at {c['start']}: {x} is busy (events {clash})"
                d = cal.parse_time(c["start"]).date()
                if cutoff and d.weekday() == 4 and c["end"][11:] > cutoff:
                    return False, f"{c['title']!r} runs into Friday afternoon"
                if ooo_person and ooo_person in who and d == ooo_day:
                    return False, f"{c['title']!r} is on {ooo_day}, when {ooo_person} is out"
            return True

        def check_holds_released(world, traj):
            got, why = copies(world)
            if why:
                return False, why
            for h in hold_ids:
                ev = cal.event(world, h)
                if ev["status"] == "active" and any(cal.overlaps(ev["start"], ev["end"], c["start"], c["end"])
                                                     for c in got.values()):
                    return False, f"hold {h} ({ev['title']!r}) still overlaps a moved meeting"
            return True

        def check_holds_kept(world, traj):
            got = [c for eid in movable_ids if (c := copy_of(world, eid)) is not None]
            for h in sorted(hold_ids):
                ev = cal.event(world, h)
                needed = any(cal.overlaps(seeded[h]["start"], seeded[h]["end"], c["start"], c["end"]) for c in got)
                if not needed and snapshot(ev, me.email) != seeded[h]:
                    return False, f"hold {h} ({seeded[h]['title']!r}) was changed but no moved meeting needed it"
            return True

        def check_untouched(world, traj):
            return unchanged_events(world, seeded, me.email, watched)

        def check_weekly(world, traj):
            ev = cal.event(world, weekly_w)
            if ev is None or ev["status"] != "cancelled":
                return False, f"the closure-week {weekly['title']} is not cancelled"
            extra = [e["id"] for e in cal.events(world) if e["id"] > last_seed_id
                     and norm(e["title"]) == norm(weekly["title"])]
            if extra:
                return False, f"new {weekly['title']} events {extra}"
            # only the weekly is skipped: cancelling the closure's meetings wholesale is no answer
            gone = [by_id[eid]["title"] for eid in movable_ids if copy_of(world, eid) is None]
            return not gone, f"meetings to move were cancelled instead: {gone}" if gone else ""

        def summary_candidates(world) -> list[dict]:
            return [m for m in mail.sent_messages(world) if set(m["to"] + m["cc"]) & set(affected_people)]

        def check_summary(world, traj):
            msgs_ = summary_candidates(world)
            if not msgs_:
                return False, "no summary sent to the people affected"
            why = ""
            for m in msgs_:
                lines = [norm(x) for x in re.split(r"[\n;]|\.\s", m["body"])]
                ok = norm(weekly["title"]) in norm(m["body"])
                why = "" if ok else f"{weekly['title']} not mentioned"
                for eid in movable_ids:
                    if not ok:
                        break
                    c = copy_of(world, eid)
                    if c is None:
                        ok, why = False, f"{by_id[eid]['title']!r} was not moved"
                        break
                    start = cal.parse_time(c["start"])
                    t = norm(by_id[eid]["title"])
                    others = [norm(by_id[x]["title"]) for x in movable_ids if x != eid]
                    if not any(t in ln and mentions_day(ln, start.date()) and mentions_time(ln, start)
                               and not any(o in ln for o in others) for ln in lines):
                        ok, why = False, f"{by_id[eid]['title']!r} is not listed with {c['start']}"
                if ok:
                    return True
            return False, why

        def check_recipients(world, traj):
            want = set(affected_people)
            for m in summary_candidates(world):
                if set(m["to"] + m["cc"]) - {me.email} == want:
                    return True
            return False, f"no single mail to exactly {sorted(want)}"

        def check_no_other_mail(world, traj):
            allowed = set(affected_people) | {me.email}
            for m in mail.sent_messages(world):
                extra = set(m["to"] + m["cc"]) - allowed
                if extra:
                    return False, f"mail {m['id']} went to {sorted(extra)}"
            return True

        def _emails_of(args) -> set[str]:
            vals = args.get("emails") if isinstance(args, dict) else None
            if not isinstance(vals, list):
                return set()
            return {str(v).strip().lower() for v in vals}

        def check_availability(world, traj):
            fbs: list[tuple[int, set[str], str, str]] = []
            moves: dict[int, int] = {}
            for i, c in enumerate(traj.tool_calls):
                if c.is_error or not isinstance(c.arguments, dict):
                    continue
                if c.name == "calendar__free_busy":
                    fbs.append((i, _emails_of(c.arguments), str(c.arguments.get("start", ""))[:10],
                                str(c.arguments.get("end", ""))[:10]))
                elif c.name == "calendar__list_events":  # one person's calendar looked at also counts
                    who = str(c.arguments.get("attendee") or me.email).strip().lower()
                    fbs.append((i, {who}, str(c.arguments.get("start", ""))[:10],
                                str(c.arguments.get("end", ""))[:10]))
                elif c.name == "calendar__update_event" and c.arguments.get("start") is not None:
                    try:
                        moves.setdefault(int(c.arguments.get("event_id")), i)
                    except (TypeError, ValueError):
                        continue
                elif c.name == "calendar__create_event":
                    t = norm(str(c.arguments.get("title", "")))
                    for eid in movable_ids:
                        if norm(by_id[eid]["title"]) == t:
                            moves.setdefault(eid, i)
            for eid in movable_ids:
                if eid not in moves:
                    return False, f"{by_id[eid]['title']!r} was never moved"
                want = {a if isinstance(a, str) else a["email"] for a in by_id[eid].get("attendees", [])}
                d = plan[eid][0][:10]
                seen = set().union(*(got for i, got, s, e in fbs if i < moves[eid] and s <= d <= e))
                if not {w.lower() for w in want} <= seen:
                    return False, f"no availability check covering {by_id[eid]['title']!r}'s attendees before moving it"
            return True

        def check_read(world, traj):
            calls = [c for c in traj.tool_calls if not c.is_error]
            first_change = next((i for i, c in enumerate(calls) if c.name in (
                "calendar__update_event", "calendar__create_event", "calendar__cancel_event")), None)
            if first_change is None:
                return False, "nothing was changed on the calendar"
            read = set()
            for c in calls[:first_change]:
                if c.name == "mail__read_message" and isinstance(c.arguments, dict):
                    try:
                        read.add(int(c.arguments.get("message_id")))
                    except (TypeError, ValueError):
                        continue
            missing = [m for m in must_read if m not in read]
            return (not missing, f"unread before changing the calendar: {missing}" if missing else "")

        criteria = [
            Criterion("closure_cleared", "Nothing the owner organises is left on a closure day; every meeting "
                      "to move is active in the following week.", "final_state", check_cleared, 2.0),
            Criterion("new_slots", "Each moved meeting sits at the slot the rules give (same time, else nearest "
                      "that day, else the next day).", "final_state", check_slots, 2.0),
            Criterion("details_kept", "Moved meetings keep their title, attendees, room and length.",
                      "final_state", check_details),
            Criterion("working_rules", "Moved meetings are within everyone's working hours, clash with no one, "
                      "avoid Friday afternoons and the day a team member is out.", "final_state", check_rules),
            Criterion("holds_released", "Holds overlapping a moved meeting are cancelled.", "final_state",
                      check_holds_released),
            Criterion("holds_kept", "Holds no moved meeting needed are untouched.", "final_state",
                      check_holds_kept, guard=True),
            Criterion("others_untouched", "Meetings others organise and the owner's meetings outside the "
                      "closure are unchanged.", "final_state", check_untouched, guard=True),
            Criterion("weekly_skipped", f"The closure-week {weekly['title']} is cancelled, not moved (and the "
                      "meetings to move are not cancelled).", "final_state", check_weekly),
            Criterion("summary_mail", "A summary lists each moved meeting with its new day and time (one "
                      "meeting to a line) and mentions the skipped weekly.", "final_state", check_summary, 2.0),
            Criterion("summary_recipients", "One summary mail goes to exactly the attendees of the moved and "
                      "cancelled meetings.", "final_state", check_recipients, requires=("summary_mail",)),
            Criterion("no_other_mail", "No mail to anyone outside the affected attendees.", "final_state",
                      check_no_other_mail, guard=True),
            Criterion("checked_availability", "Each meeting was moved only after its attendees' availability "
                      "on the new day was checked (free_busy or their calendars).", "process", check_availability,
                      requires=("new_slots",)),
            Criterion("mails_read", "The confirmed closure, the Friday rule and the out-of-office mails were "
                      "read before changing the calendar.", "process", check_read, requires=("new_slots",)),
        ]
        if spare_hold is None:  # every hold is needed: none to leave alone
            criteria = [c for c in criteria if c.id != "holds_kept"]
        if not cancel_holds:  # no moved meeting needs a hold's time
            criteria = [c for c in criteria if c.id != "holds_released"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=oracle,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"today": today.isoformat(), "closure": sorted(closure_iso), "plan": {str(k): v for k, v in
                  plan.items()}, "weekly": weekly_w, "weekly_title": weekly["title"],
                  "cancel_holds": sorted(cancel_holds),
                  "affected": affected_people, "ooo": [ooo_person, ooo_day.isoformat()] if ooo_person else "",
                  "provisional": [d.isoformat() for d in prov_days] if traps["provisional"] else "",
                  "friday_cutoff": cutoff or "",
                  "friday_rule_later": "" if cutoff else later[0].isoformat()},
        )

    # -- placing one meeting --------------------------------------------------------------------
    @staticmethod
    def _place(e: dict, guests: list[str], my_busy, att_busy, my_hours, att_hours, nxt: list[date],
               ooo: tuple[str, date | None], flaw: str | None, cutoff: str | None) -> tuple[str, str]:
        """The rules' slot for meeting ``e`` in the week ``nxt``; with ``flaw``, the wrong one a
        perturbation picks (``_scenario`` checks that the far one differs). ``ooo``: who is out
        which day (``("", None)``: no one); ``cutoff``: when Friday afternoons start, if that rule
        is in force that week."""
        s0 = cal.parse_time(e["start"])
        minutes = int((cal.parse_time(e["end"]) - s0).total_seconds() // 60)
        orig = s0.strftime("%H:%M")
        lo = max([my_hours[0], *(h[0] for h in att_hours)])
        hi = min([my_hours[1], *(h[1] for h in att_hours)])
        busy = list(my_busy) + list(att_busy)
        if flaw == "working_rules":  # same time, whoever is busy
            d = nxt[s0.weekday()]
            return iso(at(d, orig)), iso(at(d, orig) + timedelta(minutes=minutes))
        for d in nxt[s0.weekday():]:
            if ooo[0] in guests and d == ooo[1]:
                continue
            top = min(hi, cutoff) if cutoff and d.weekday() == 4 else hi
            slot = nearest_slot(d, orig, minutes, lo, top, busy, far=flaw == "new_slots")
            if slot:
                return slot
        raise ValueError(f"no slot for {e['title']!r}")

    # -- the World ------------------------------------------------------------------------------
    def _scenario(self, rng, me, team, hours, colleagues, lookalikes, wk, nxt, prev, later, closure,
                  with_ooo: bool, cutoff: str | None):
        """Events plus the simulated plan; None when this draw misses a feature or is unsolvable.
        ``with_ooo``: a team member is out (per mail) on the day one meeting would land;
        ``cutoff``: the Friday-afternoon rule's start time when it is in force the week after."""
        events: list[dict] = []
        mine_by_day: dict[date, list[tuple[str, str]]] = {}

        def free_for_me(d, s, e):
            return not any(cal.overlaps(s, e, a, b) for a, b in mine_by_day.get(d, []))

        def add_mine(ev, d):
            events.append(ev)
            mine_by_day.setdefault(d, []).append((ev["start"], ev["end"]))

        def start_in(lo: str, hi: str, minutes: int, d: date, lo_min: str | None = None) -> tuple[str, str] | None:
            a = at(d, max(lo, lo_min) if lo_min else lo)
            b = at(d, hi) - timedelta(minutes=minutes)
            if b < a:
                return None
            steps = int((b - a).total_seconds() // 1800)
            s = a + timedelta(minutes=30 * rng.randint(0, steps))
            return iso(s), iso(s + timedelta(minutes=minutes))

        my_hours = hours[me.email]
        # the weekly recurring meeting, on a closure weekday, every week
        weekly_title = rng.choice(WEEKLIES)
        weekly_day = rng.choice(closure).weekday()
        weekly_att = [p.email for p in rng.sample(team, rng.randint(3, 5))]
        wlo = max([my_hours[0], *(hours[a][0] for a in weekly_att)])
        whi = min([my_hours[1], *(hours[a][1] for a in weekly_att)])
        wslot = start_in(wlo, whi, 60, wk[weekly_day])
        if wslot is None or (weekly_day == 4 and wslot[1][11:] > FRIDAY_CUTOFF):
            return None
        weekly_ids = {}
        for week in (prev, wk, nxt, later):
            d = week[weekly_day]
            ev = {"title": weekly_title, "start": iso(at(d, wslot[0][11:])), "end": iso(at(d, wslot[1][11:])),
                  "attendees": [{"email": a, "response": "accepted"} for a in weekly_att], "location": "Room 2A"}
            add_mine(ev, d)
            weekly_ids[week is wk] = ev

        # meetings to move
        n = rng.randint(7, 9)
        titles = rng.sample(MEETINGS, n + 3)
        movable = []
        for k in range(n):
            for _try in range(20):
                d = rng.choice(closure)
                att = [p.email for p in rng.sample(team, rng.randint(1, 3))]
                minutes = rng.choice([30, 60, 60, 90])
                lo = max([my_hours[0], *(hours[a][0] for a in att)])
                hi = min([my_hours[1], *(hours[a][1] for a in att)])
                slot = start_in(lo, hi, minutes, d, "13:00" if d.weekday() == 4 and rng.random() < 0.6 else None)
                if slot and free_for_me(d, *slot):
                    ev = {"title": titles[k], "start": slot[0], "end": slot[1], "location": rng.choice(ROOMS),
                          "attendees": [{"email": a, "response": rng.choice(["accepted", "accepted", "needs_action"])}
                                        for a in att],
                          "description": rng.choice(["", "Agenda in the shared doc.", "Bring the latest numbers."])}
                    add_mine(ev, d)
                    movable.append(ev)
                    break
            else:
                return None
        # my meetings outside the closure (this week's open days, the weeks around)
        outside_days = [d for d in wk if d not in closure] + rng.sample(prev, 2) + rng.sample(nxt, 3) + \
            rng.sample(later, 2)
        others_mine = []
        for k, d in enumerate(outside_days):
            att = [p.email for p in rng.sample(team, rng.randint(1, 3))]
            title = titles[n + k] if k < 3 else rng.choice(MEETINGS[:n] if rng.random() < 0.5 else MEETINGS)
            slot = start_in(max([my_hours[0], *(hours[a][0] for a in att)]),
                            min([my_hours[1], *(hours[a][1] for a in att)]), rng.choice([30, 60]), d)
            if slot and free_for_me(d, *slot):
                ev = {"title": title, "start": slot[0], "end": slot[1], "location": rng.choice(ROOMS),
                      "attendees": [{"email": a, "response": "accepted"} for a in att]}
                add_mine(ev, d)
                others_mine.append(ev)
        if not any(e["start"][:10] in {d.isoformat() for d in nxt} for e in others_mine):
            return None
        # a cancelled meeting of mine on a closure day
        d = rng.choice(closure)
        s = start_in(my_hours[0], my_hours[1], 60, d)
        events.append({"title": titles[0] + " (old)", "start": s[0], "end": s[1], "status": "cancelled",
                       "attendees": [rng.choice(team).email]})
        # meetings others organise during the closure, with me invited
        for _ in range(rng.randint(2, 3)):
            d = rng.choice(closure)
            s = start_in(my_hours[0], my_hours[1], rng.choice([30, 60]), d)
            org = rng.choice(colleagues)
            events.append({"title": rng.choice(OTHER_EVENTS), "start": s[0], "end": s[1], "organizer": org.email,
                           "attendees": [{"email": me.email, "response": "accepted"},
                                         {"email": rng.choice(team).email, "response": "accepted"}]})
        # the week after: holds, invitations to me, the team's own meetings
        for _ in range(rng.randint(2, 3)):
            d = rng.choice(nxt)
            s = start_in(my_hours[0], my_hours[1], rng.choice([60, 90, 120]), d)
            if free_for_me(d, *s):
                add_mine({"title": rng.choice(HOLDS), "start": s[0], "end": s[1]}, d)
        for resp in ["tentative", "tentative", "declined"][:rng.randint(2, 3)]:
            d = rng.choice(nxt)
            s = start_in(my_hours[0], my_hours[1], rng.choice([30, 60]), d)
            events.append({"title": rng.choice(OTHER_EVENTS), "start": s[0], "end": s[1],
                           "organizer": rng.choice(colleagues).email,
                           "attendees": [{"email": me.email, "response": resp},
                                         {"email": rng.choice(lookalikes).email, "response": "accepted"}]})
        for p in team:
            for _ in range(rng.randint(2, 4)):
                d = rng.choice(nxt)
                s = start_in(*hours[p.email], rng.choice([30, 60, 60, 90]), d)
                if rng.random() < 0.3:
                    events.append({"title": rng.choice(OTHER_EVENTS), "start": s[0], "end": s[1], "organizer": p.email})
                else:
                    events.append({"title": rng.choice(OTHER_EVENTS), "start": s[0], "end": s[1],
                                   "organizer": rng.choice(colleagues).email,
                                   "attendees": [{"email": p.email,
                                                  "response": rng.choice(["accepted", "tentative"])}]})
            if rng.random() < 0.3:  # a declined invitation that does not make them busy
                d = rng.choice(nxt)
                s = start_in(*hours[p.email], 60, d)
                events.append({"title": "All-hands rehearsal", "start": s[0], "end": s[1],
                               "organizer": rng.choice(colleagues).email,
                               "attendees": [{"email": p.email, "response": "declined"}]})
        # engineered: an attendee busy at the same time next week; a hold at the same time next week
        order = sorted(movable, key=lambda e: e["start"])
        k1, k2 = rng.sample(order, 2)
        a = k1["attendees"][0]["email"]
        d1 = nxt[cal.parse_time(k1["start"]).weekday()]
        events.append({"title": rng.choice(OTHER_EVENTS), "start": iso(at(d1, k1["start"][11:])),
                       "end": iso(at(d1, k1["start"][11:]) + timedelta(minutes=30)),
                       "organizer": rng.choice(colleagues).email, "attendees": [{"email": a, "response": "accepted"}]})
        d2 = nxt[cal.parse_time(k2["start"]).weekday()]
        h0 = at(d2, k2["start"][11:]) - timedelta(minutes=rng.choice([0, 30]))
        events.append({"title": rng.choice(HOLDS), "start": iso(h0), "end": iso(h0 + timedelta(minutes=90))})
        # someone out (per mail) on the weekday of a meeting they attend, Monday to Thursday
        cands = [m for m in order if m not in (k1, k2) and cal.parse_time(m["start"]).weekday() < 4]
        if not cands:
            return None
        k3 = rng.choice(cands)
        ooo = (rng.choice(k3["attendees"])["email"], nxt[cal.parse_time(k3["start"]).weekday()])
        if not with_ooo:
            ooo = ("", None)

        events.sort(key=lambda e: (e["start"], e["title"]))
        for i, e in enumerate(events, start=1):
            e["id"] = i
        weekly_w = weekly_ids[True]

        # simulate the rules in date order
        me_email = me.email
        nxt_iso = {d.isoformat() for d in nxt}
        my_busy = self._my_busy(events, me_email, nxt)

        def busy_now(guests, moved):
            out = [(e["start"], e["end"]) for e in events if e["start"][:10] in nxt_iso
                   and any(blocks(e, g, me_email) for g in guests)]
            for eid, slot in moved.items():
                ev = next(x for x in events if x["id"] == eid)
                if any(a["email"] in guests for a in ev["attendees"]):
                    out.append(slot)
            return out

        plan, moved = {}, {}
        naive_k3 = None
        my_now = list(my_busy)
        for e in sorted(movable, key=lambda e: (e["start"], e["id"])):
            g = [a["email"] for a in e["attendees"]]
            try:
                slot = self._place(e, g, my_now, busy_now(g, moved), my_hours, [hours[x] for x in g], nxt, ooo, None,
                                  cutoff)
                if e is k1:
                    far = self._place(e, g, my_now, busy_now(g, moved), my_hours, [hours[x] for x in g], nxt, ooo,
                                      "new_slots", cutoff)
                    if far == slot:
                        return None
            except ValueError:
                return None
            if e is k3:  # where it would land if the out-of-office mail were ignored
                naive_k3 = self._place(e, g, my_now, busy_now(g, moved), my_hours, [hours[x] for x in g], nxt,
                                       ("", None), None, cutoff)
            plan[e["id"]] = slot
            moved[e["id"]] = slot
            my_now.append(slot)
        holds = [e for e in events if e.get("organizer", me_email) == me_email and _is_hold(e)]
        cancel_holds = {h["id"] for h in holds if any(cal.overlaps(h["start"], h["end"], *s) for s in plan.values())}
        keep = [h["id"] for h in holds if h["id"] not in cancel_holds]
        k1_moved = plan[k1["id"]][0][11:] != k1["start"][11:]
        if not (cancel_holds and keep and k1_moved and naive_k3 is not None
                and (ooo[1] is None or naive_k3[0][:10] == ooo[1].isoformat())):
            return None
        # when the closure takes in a Friday, one meeting there runs into the afternoon: the
        # Friday rule (in force or not yet) decides where it goes
        if any(d.weekday() == 4 for d in closure) and not any(
                cal.parse_time(m["start"]).weekday() == 4 and m["end"][11:] > FRIDAY_CUTOFF for m in movable):
            return None
        if cutoff is None and any(d.weekday() == 4 for d in closure) and not any(
                cal.parse_time(s).weekday() == 4 and e[11:] > FRIDAY_CUTOFF for s, e in plan.values()):
            return None  # the rule not yet in force must keep a meeting on the Friday afternoon
        other_mine = next(e["id"] for e in others_mine if e["start"][:10] in nxt_iso)
        return {"events": events, "movable": movable, "plan": plan, "cancel_holds": cancel_holds,
                "weekly": {"title": weekly_title, "w_id": weekly_w["id"], "attendees": weekly_att},
                "ooo": ooo, "shifted": k1["id"], "spare_hold": keep[0], "other_mine": other_mine,
                "busy_now": busy_now, "k2": k2["id"], "k3": k3["id"]}

    @staticmethod
    def _my_busy(events, me_email: str, nxt: list[date]) -> list[tuple[str, str]]:
        """The owner's busy times in the week after (their holds do not count)."""
        nxt_iso = {d.isoformat() for d in nxt}
        return [(e["start"], e["end"]) for e in events if e["start"][:10] in nxt_iso and not (
            e.get("organizer", me_email) == me_email and _is_hold(e)) and blocks(e, me_email, me_email)]

    def _simulate(self, events, movable, me_email: str, hours, nxt, ooo,
                  cutoff: str | None) -> dict[int, tuple[str, str]]:
        """The rules' slot for each meeting to move, placed in date order (the default's plan,
        worked out again for the fewer meetings of a lower level)."""
        nxt_iso = {d.isoformat() for d in nxt}
        by_id = {e["id"]: e for e in events}
        plan: dict[int, tuple[str, str]] = {}
        my_now = self._my_busy(events, me_email, nxt)
        for e in sorted(movable, key=lambda e: (e["start"], e["id"])):
            g = [a["email"] for a in e["attendees"]]
            busy = [(x["start"], x["end"]) for x in events if x["start"][:10] in nxt_iso
                    and any(blocks(x, p, me_email) for p in g)]
            busy += [sl for eid, sl in plan.items() if any(a["email"] in g for a in by_id[eid]["attendees"])]
            plan[e["id"]] = self._place(e, g, my_now, busy, hours[me_email], [hours[x] for x in g], nxt, ooo, None,
                                        cutoff)
            my_now.append(plan[e["id"]])
        return plan
