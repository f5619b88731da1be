"""Meeting coordination (mail + calendar): turn meeting requests in the inbox into events.

Requests name an exact time or a window ("any 45 minutes Thursday afternoon"); some ask
for an extra invitee. Every booked request gets a reply confirming the day and time. The
trap mix is drawn per seed, at least one of the two there: a request that lands on the
owner's protected Focus time (declined by reply instead), and a request that gives no time
and no window (not booked: the reply asks when suits them). The window whose first slot the
requester is busy for is always there.
"""

from __future__ import annotations

import random
import re
from datetime import date, timedelta
from pathlib import Path

from longhorizon.apps.calendar import state as cal
from longhorizon.apps.mail import state as mail
from longhorizon.apps.mail.state import parse_address
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.calendar.slots import (
    at,
    blocks,
    first_free,
    intersect_hours,
    iso,
    snapshot,
    unchanged_events,
)
from longhorizon.tasks.common import (
    People,
    company,
    day_month,
    faker_for,
    loads,
    long_date,
    mentions_day,
    mentions_time,
    monday_of,
    norm,
)

HOURS = [("08:00", "16:30"), ("08:30", "17:00"), ("09:00", "17:30"), ("09:00", "18:00")]
FOCUS = ("09:00", "12:00")
TOPICS = [
    "Q3 vendor shortlist", "onboarding checklist", "travel policy update", "warehouse lease renewal",
    "customer churn review", "pricing page copy", "support hiring plan", "security audit findings",
    "budget reforecast", "partner newsletter", "intern programme", "data retention policy",
    "trade show booth", "CRM migration", "office move logistics", "annual report layout",
]
STOP = {"the", "and", "for", "of", "on", "a", "to", "our"}
COLLEAGUE_EVENTS = ["Customer call", "Team sync", "Design review", "Training", "Interview", "Vendor demo"]
OWNER_EVENTS = ["Leadership sync", "Budget review", "Finance check-in", "Hiring panel", "Recruiter call"]
FYI = [
    ("All-hands moved to Thursday 15:00", "Quick FYI: this quarter's all-hands moves to Thursday at 15:00 in the "
     "atrium. No need to reply."),
    ("Room booking etiquette", "Reminder: please release meeting rooms you no longer need so others can use them."),
    ("Can you review the draft?", "When you get a moment, could you look over the draft proposal in the shared "
     "drive? No rush, end of next week is fine."),
    ("Lunch order", "Sandwich order for Friday's training goes in at 10:00. Reply to me directly if you want one."),
]
NEWS = [("Your weekly productivity digest", "Ten ways to run shorter meetings."),
        ("Webinar: hybrid work in 2026", "Join us live next month. Seats are limited!"),
        ("Industry roundup", "The stories that mattered this week, in five minutes.")]


def _stamp(rng: random.Random, day: date) -> str:
    """An early-morning arrival time on ``day`` (before the mailbox clock's 09:00)."""
    return f"{day.isoformat()}T{rng.randint(7, 8):02d}:{rng.randrange(60):02d}:00"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _topic_words(topic: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", topic.lower()) if len(w) >= 2 and w not in STOP]


@register
class MeetingRequests(TaskFamily):
    name = "meeting_requests"
    category = "meeting coordination"
    apps = ("mail", "calendar")
    description = (
        "Book meeting requests that arrived by email (exact times or windows, extra invitees) on the "
        "calendar, confirm each by reply, and decline the one that falls on protected focus time."
    )

    levels = 3
    """1: one request with a window (no extra invitee) and the one on Focus time, no FYI mail;
    2: two requests (a window, an extra invitee) and the drawn traps (the one on Focus time, the
    one with no time), as the default; 3 (default): three or four and the drawn traps."""
    toolsets = {1: (
        "calendar__create_event", "calendar__free_busy", "calendar__list_events", "mail__list_messages",
        "mail__read_message", "mail__reply",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        short = level == 1  # two requests: no need to re-check the week and the Sent folder at the end
        rng = random.Random(seed)
        fake = faker_for(seed)
        people = People(fake)
        _, domain = company(fake)
        monday = monday_of(rng)
        today = monday - timedelta(days=rng.choice([3, 4]))
        week = [monday + timedelta(days=i) for i in range(5)]
        me = people.make(domain)
        my_hours = ("08:30", "17:30")
        staff = [people.make(domain) for _ in range(9)]
        hours = {p.email: rng.choice(HOURS) for p in staff}
        hours[me.email] = my_hours
        # the trap mix: the request on Focus time, the request with no time and no window (each
        # there or not, at least one; level 1 keeps the first alone), and a fixed-time request its
        # sender moves by a later mail (where a fixed-time request is kept)
        with_conflict, with_vague, with_moved = rng.random() < 0.65, rng.random() < 0.5, rng.random() < 0.5
        if level == 1 or not (with_conflict or with_vague):
            with_conflict = True
        with_vague = with_vague and level > 1
        asker = people.make(domain)  # who asks without saying when
        staff_all = [*staff, asker]
        hours[asker.email] = rng.choice(HOURS)
        lookalikes = [people.make(domain, first=p.first) for p in rng.sample(staff, 2)]
        directory = [{"email": me.email, "name": me.name, "work_start": my_hours[0], "work_end": my_hours[1]},
                     *({"email": p.email, "name": p.name, "work_start": hours[p.email][0],
                        "work_end": hours[p.email][1]} for p in staff_all),
                     *({"email": p.email, "name": p.name} for p in lookalikes)]
        focus_days = sorted(rng.sample(week, 2))

        for _attempt in range(50):
            events, requests = self._scenario(rng, me, staff, hours, week, focus_days)
            if requests is not None:
                break
        else:  # pragma: no cover - generation bug
            raise RuntimeError(f"{self.name}: no solvable scenario for seed {seed}")
        if level < self.levels:  # the same draws, then fewer requests (the default stays byte for byte)
            ok = [r for r in requests if r["kind"] != "conflict"]
            window = next(r for r in ok if r["kind"] == "window")
            if level == 1:
                window["extras"] = []  # fewer guests only frees the window up: its slot stays bookable
                kept = [window]
            else:
                extra = next(r for r in ok if r["extras"])
                kept = [window, extra if extra is not window else next(r for r in ok if r is not window)]
            requests = [r for r in requests if r["kind"] == "conflict" or any(r is k for k in kept)]
        if not with_conflict:
            requests = [r for r in requests if r["kind"] != "conflict"]
        if with_vague:
            used = {r["topic"] for r in requests}
            requests.append({"kind": "vague", "requester": asker, "extras": [], "slot": None, "start": None,
                             "topic": rng.choice([t for t in TOPICS if t not in used]),
                             "minutes": rng.choice([30, 45, 60]), "day": None})
        moved = None
        if with_moved:  # the sender writes again: another time the same day, free for everyone
            for r in rng.sample([r for r in requests if r["kind"] == "fixed"], k=sum(
                    r["kind"] == "fixed" for r in requests)):
                whos = [me.email, r["requester"].email, *(x.email for x in r["extras"])]
                wh = intersect_hours(*(hours[x] for x in whos))
                length = timedelta(minutes=r["minutes"])
                t, starts = at(r["day"], wh[0]), []
                while t + length <= at(r["day"], wh[1]):
                    if t.strftime("%H:%M") != r["start"] and not any(
                            cal.overlaps(iso(t), iso(t + length), e["start"], e["end"])
                            for e in events if any(blocks(e, x, me.email) for x in whos)):
                        starts.append(t)
                    t += timedelta(minutes=30)
                if starts:
                    new = rng.choice(starts)
                    r["first_start"], r["start"] = r["start"], new.strftime("%H:%M")
                    r["slot"] = (iso(new), iso(new + length))
                    moved = r
                    break
        for i, e in enumerate(events, start=1):
            e["id"] = i
        last_seed_id = len(events)
        seeded = {e["id"]: snapshot(e, me.email) for e in events}
        focus_spans = [(iso(at(d, FOCUS[0])), iso(at(d, FOCUS[1]))) for d in focus_days]
        tweakable = next(e["id"] for e in events if e["title"] in OWNER_EVENTS)

        # -- mailbox ----------------------------------------------------------------------
        msgs = []
        for r in requests:
            msgs.append(self._request_mail(rng, r, me, today))
        if moved is not None:
            sent = moved["mail"]["date"]
            later = min(f"{today.isoformat()}T08:59:30", sent[:11] + f"{rng.randint(int(sent[11:13]) + 1, 16):02d}"
                        f":{rng.randrange(60):02d}:00")
            moved["followup"] = {
                "folder": "Inbox", "sender": moved["requester"].email, "sender_name": moved["requester"].name,
                "subject": f"Re: {moved['mail']['subject']}",
                "body": rng.choice([
                    f"Hi {me.first},\n\nSmall change, sorry: could we make it {moved['start']} instead of "
                    f"{moved['first_start']}, same day? Something came up.\n\nThanks,\n{moved['requester'].first}",
                    f"Hi {me.first},\n\nOne correction to my earlier mail: {moved['start']} works better for me "
                    f"than {moved['first_start']} on that day. Same length.\n\n{moved['requester'].first}"]),
                "date": later}
            msgs.append(moved["followup"])
        fyi_sender = people.make(domain)
        others = []
        for subj, body in rng.sample(FYI, 3):
            s = rng.choice(staff + [fyi_sender])
            others.append({"folder": "Inbox", "sender": s.email, "sender_name": s.name, "subject": subj,
                           "body": f"Hi {me.first},\n\n{body}\n\n{s.first}",
                           "date": _stamp(rng, today - timedelta(days=rng.randint(0, 3)))})
        for subj, body in rng.sample(NEWS, 2):
            _, nd = company(fake)
            others.append({"folder": "Inbox", "sender": f"news@{nd}", "sender_name": "Newsletter", "subject": subj,
                           "body": body, "date": f"{(today - timedelta(days=rng.randint(1, 6))).isoformat()}T06:30:00",
                           "is_read": True})
        if short:  # only the requests wait unread; the newsletters (read already) stay
            others = [m for m in others if m["sender"].startswith("news@")]
        msgs += others
        msgs.sort(key=lambda m: m["date"])
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
        for r in requests:
            r["mail_id"] = r["mail"]["id"]
            r["mail_ids"] = [r["mail_id"], *([r["followup"]["id"]] if "followup" in r else [])]
        fyi_id = others[0]["id"]
        accepted = [r for r in requests if r["kind"] not in ("conflict", "vague")]
        conflict = next((r for r in requests if r["kind"] == "conflict"), None)
        vague = next((r for r in requests if r["kind"] == "vague"), None)
        requests.sort(key=lambda r: r["mail_id"])
        request_ids = {m for r in requests for m in r["mail_ids"]}
        requester_addrs = {r["requester"].email for r in requests}

        def build(root: Path) -> None:
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name,
                                folders=["Inbox", "Sent", "Archive"], messages=msgs,
                                now=f"{today.isoformat()}T09:00:00")
            cal.create_calendar(root / "state" / "calendar.sqlite", me.email, directory, events,
                                today=today.isoformat())

        w = phrasing_rng(self.name, seed)
        span = f"Monday {monday.isoformat()} to Friday {week[-1].isoformat()}"
        hello = say(w, f"Hi, it's {me.first}. Today is {long_date(today)}.",
                    f"Hello, {me.first} here. It's {long_date(today)} today.",
                    f"Hi! {me.first} here; today is {long_date(today)}.")
        ask = say(w, f"A few people have emailed me asking for meetings next week ({span}); could you handle them?",
                  f"Could you deal with the meeting requests people have emailed me for next week ({span})?",
                  f"Some people have written asking to meet next week ({span}), and I'd like you to take care "
                  f"of those requests.")
        book = say(w, "For each request in my inbox, book it on my calendar at the time they asked for; if they "
                      "gave a window instead of a time, pick a slot inside it when everyone invited is free.",
                   "Each request in my inbox goes on my calendar at the time the person asked for. Where they "
                   "gave a window rather than a time, choose a slot inside that window when everyone invited "
                   "is free.",
                   "Book every request from my inbox on my calendar: at the requested time, or, when they only "
                   "gave a window, at a slot inside it where everyone invited is free.")
        shape = say(w, "Use the length they asked for, name the event after the topic they want to discuss, and "
                       "invite the person who asked plus anyone they asked me to include.",
                    "The event should have the length they asked for and be named after the topic they want to "
                    "discuss; invite the person who asked and anyone they asked me to include.",
                    "Give each event the requested length and the topic they want to discuss as its name, and "
                    "invite whoever asked plus anyone they asked me to include.")
        reply = say(w, "Then reply to their email confirming the day and time.",
                    "After booking, reply to their email with the day and time to confirm it.",
                    "Once it's booked, answer their email confirming the day and time.")
        unsure = say(w, "If someone gives neither a time nor a window, don't guess one: reply asking when "
                        "suits them.",
                     "Where a request says neither when nor in what window, book nothing for it and reply "
                     "asking them for a time.",
                     "Don't invent a time for a request that names none (no time, no window); ask them by "
                     "reply instead.")
        focus = say(w, "One exception: my Focus time blocks are protected. If a request falls on one, don't book "
                       "it; reply to decline and ask them to suggest another time.",
                    "The exception is my Focus time: those blocks are protected, so a request that falls on one "
                    "doesn't get booked. Reply declining it instead and ask them to suggest another time.",
                    "My Focus time blocks are protected, though: if a request lands on one, reply to decline it "
                    "and ask for another time to be suggested, and don't book it.")
        limits = in_some_order(w, [
            say(w, "Please don't send any other emails.", "No other emails, please.",
                "Don't send any emails beyond those replies."),
            say(w, "Leave my existing calendar entries as they are.",
                "My existing calendar entries stay as they are.",
                "Don't change anything already on my calendar."),
        ])
        instruction = " ".join([hello, ask, book, shape, reply, unsure, focus, *limits])
        if short:  # the same requests, said briefly
            book = say(w, "Book each request from my inbox on my calendar at the asked time (or, for a window, a slot "
                          "in it when everyone invited is free), with the asked length, the topic as its name, and "
                          "the person who asked (plus anyone they name) invited.",
                       "Put each request from my inbox on my calendar: the asked time, or a slot inside their window "
                       "when everyone invited is free; the asked length; the topic as the name; the requester and "
                       "anyone they name invited.")
            reply = say(w, "Reply to confirm the day and time.", "Then confirm the day and time by reply.")
            focus = say(w, "But a request on my Focus time gets no booking: reply declining and ask for another "
                           "time.",
                        "My Focus time is protected: decline a request on it by reply and ask for another time.")
            limits = [say(w, "No other emails, and leave my existing entries alone.",
                          "Send nothing else and change nothing already on my calendar.")]
            instruction = " ".join([hello, book, reply, focus, *limits])

        def booked_for(r) -> str:
            return f"Requested by {r['requester'].name} by email."

        def solve():
            unread = loads((yield ToolCall("mail__list_messages", {"folder": "Inbox", "unread_only": True},
                                           note="See what is waiting in the inbox.")))
            for m in sorted(unread["messages"], key=lambda m: m["id"]):
                yield ToolCall("mail__read_message", {"message_id": m["id"]},
                               note=f"Read message {m['id']} to see whether it is a meeting request.")
            if not short:
                yield ToolCall("calendar__list_events", {"start": monday.isoformat(), "end": week[-1].isoformat()},
                               note="Look at my week, including the protected Focus time blocks.")
            else:  # the window's day is checked by free/busy; a fixed time needs my own calendar that day
                for d in sorted({r["day"] for r in requests if r["kind"] in ("fixed", "conflict")}):
                    yield ToolCall("calendar__list_events", {"start": d.isoformat(), "end": d.isoformat()},
                                   note=f"What is on my calendar on {d.isoformat()}, the day of a fixed-time request?")
            for r in requests:
                if r["kind"] == "conflict":
                    yield ToolCall("mail__reply", {"message_id": r["mail_id"], "body": (
                        f"Hi {r['requester'].first},\n\nSorry, {day_month(r['day'])} at {r['start']} falls in my "
                        f"protected focus time, so I can't take it. Could you suggest another time?"
                        f"\n\n{me.first}")},
                        note="This request lands on protected Focus time: decline it by reply.")
                    continue
                if r["kind"] == "vague":
                    yield ToolCall("mail__reply", {"message_id": r["mail_id"], "body": (
                        f"Hi {r['requester'].first},\n\nHappy to talk about the {r['topic']}. Your mail doesn't "
                        f"say when, though: which day and time next week would suit you?\n\n{me.first}")},
                        note="This request names no time and no window: ask when suits them instead of guessing.")
                    continue
                invite = [r["requester"].email]
                for x in r["extras"]:
                    found = loads((yield ToolCall("calendar__list_people", {"query": x.name},
                                                  note=f"Look up {x.name}'s address.")))
                    invite.append(next(p["email"] for p in found if p["name"] == x.name))
                day = r["day"].isoformat()
                fb = loads((yield ToolCall("calendar__free_busy",
                                           {"emails": [*invite, me.email], "start": day, "end": day},
                                           note=f"Check everyone's availability on {day}.")))
                busy = [(b["start"], b["end"]) for p in fb["people"] for b in p["busy"]]
                if r["kind"] == "window":
                    slot = first_free([(at(r["day"], r["window"][0]), at(r["day"], r["window"][1]))],
                                      busy, r["minutes"])
                else:
                    slot = (iso(at(r["day"], r["start"])),
                            iso(at(r["day"], r["start"]) + timedelta(minutes=r["minutes"])))
                yield ToolCall("calendar__create_event", {
                    "title": _cap(r["topic"]), "start": slot[0], "end": slot[1], "attendees": invite,
                    "description": booked_for(r)},
                    note=f"Book {r['topic']} for {slot[0]}.")
                start = at(r["day"], slot[0][11:])
                confirm = (f"Hi {r['requester'].first},\n\nDone: {r['topic']} is booked for "
                           f"{day_month(r['day'])} at {start.strftime('%H:%M')} ({r['minutes']} minutes); "
                           f"the invitation is on its way.\n\n{me.first}")
                yield ToolCall("mail__reply", {"message_id": r["mail_id"], "body": confirm},
                               note=f"Confirm the time to {r['requester'].first}.")
            if not short:
                yield ToolCall("calendar__list_events", {"start": monday.isoformat(),
                                                         "end": week[-1].isoformat()},
                               note="Verify the new events sit where they should, with nothing on Focus time.")
                yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 10},
                               note="Verify every requester got a reply.")
            return (f"Booked {len(accepted)} meetings and confirmed each by reply"
                    + (f"; declined {conflict['requester'].name}'s request because it fell on protected Focus "
                       f"time" if conflict else "")
                    + (f"; asked {vague['requester'].name} when suits them" if vague else "") + ".")

        def event_of(r):
            return perturb.on("calendar__create_event", title=_cap(r["topic"]), description=booked_for(r))

        def at_trap(args: dict) -> dict:
            """The windowed request booked where the window overlaps a busy time."""
            r = next(x for x in accepted if x["kind"] == "window")
            trap = at(r["day"], r["trap"][0][11:])
            return {**args, "start": iso(trap), "end": iso(trap + timedelta(minutes=r["minutes"]))}

        def events_booked():
            with_extra = next((r for r in accepted if r["extras"]), None)
            if with_extra is not None:  # the extra invitees left out
                return perturb.change(solve, event_of(with_extra), attendees=[with_extra["requester"].email])
            return perturb.change(solve, perturb.on("calendar__create_event"), count=None,  # every one too long
                                  edit=lambda a: {**a, "end": iso(cal.parse_time(a["end"]) + timedelta(minutes=15))})

        flawed = {  # built only for the criteria a level has
            "conflict_declined": lambda: perturb.drop(solve, perturb.on("mail__reply", message_id=conflict["mail_id"])),
            "vague_asked": lambda: perturb.drop(solve, perturb.on("mail__reply", message_id=vague["mail_id"])),
            "events_booked": events_booked,
            "no_conflicts": lambda: perturb.change(
                solve, event_of(next(x for x in accepted if x["kind"] == "window")), edit=at_trap),
            "event_titles": lambda: perturb.change(solve, event_of(accepted[0]), title="Meeting"),
            "confirmations": lambda: perturb.change(
                solve, perturb.on("mail__reply", message_id=accepted[-1]["mail_id"]),
                body=f"Hi {accepted[-1]['requester'].first},\n\nBooked, see you then!\n\n{me.first}"),
            "no_other_mail": lambda: perturb.insert(solve, ToolCall(
                "mail__reply", {"message_id": fyi_id, "body": "Thanks, noted!"}, note="Acknowledge the FYI.")),
            "calendar_untouched": lambda: perturb.insert(solve, ToolCall(
                "calendar__update_event", {"event_id": tweakable, "location": "Room 4B"},
                note="Give this meeting a room.")),
        }

        # -- graders --------------------------------------------------------------------
        def new_events(world) -> list[dict]:
            return [e for e in cal.events(world) if e["id"] > last_seed_id]

        def guests(e: dict) -> set[str]:
            return {a["email"] for a in e["attendees"]} - {me.email}

        def events_for(world, r) -> list[dict]:
            return [e for e in new_events(world) if r["requester"].email in guests(e)]

        def replies_to(world, mid: int) -> list[dict]:
            return [m for m in mail.sent_messages(world) if m["in_reply_to"] == mid]

        def answers(world, r) -> list[dict]:
            """Replies to request ``r``'s mail or to its sender's follow-up."""
            return [m for mid in r["mail_ids"] for m in replies_to(world, mid)]

        def other_topics(r) -> list[str]:
            """Topics of the other requests a reply about ``r`` must not name (no kitchen-sink replies)."""
            return [norm(x["topic"]) for x in requests if x is not r]

        def check_booked(world, traj):
            for r in accepted:
                evs = events_for(world, r)
                if len(evs) != 1:
                    return False, f"{r['topic']}: {len(evs)} events"
                e = evs[0]
                want = {r["requester"].email, *(x.email for x in r["extras"])}
                if guests(e) != want:
                    return False, f"{r['topic']}: invited {sorted(guests(e))}, expected {sorted(want)}"
                length = cal.parse_time(e["end"]) - cal.parse_time(e["start"])
                if length != timedelta(minutes=r["minutes"]):
                    return False, f"{r['topic']}: {length} long, expected {r['minutes']} minutes"
                if r["kind"] == "fixed" and e["start"] != iso(at(r["day"], r["start"])):
                    return False, f"{r['topic']}: starts {e['start']}, asked for {r['day']} {r['start']}"
                if r["kind"] == "window":
                    lo, hi = (iso(at(r["day"], w)) for w in r["window"])
                    if not (lo <= e["start"] and e["end"] <= hi):
                        return False, f"{r['topic']}: {e['start']} is outside the window {r['window']} on {r['day']}"
            return True

        def check_conflicts(world, traj):
            for r in accepted:
                evs = events_for(world, r)
                if not evs:
                    return False, f"{r['topic']}: not booked"
                for e in evs:
                    for who in [me.email, *guests(e)]:
                        clash = [b["id"] for b in cal.busy(world, who, e["start"], e["end"]) if b["id"] != e["id"]]
                        if clash:
                            return False, f"{r['topic']}: {who} is busy then (events {clash})"
            return True

        def check_titles(world, traj):
            for r in accepted:
                evs = events_for(world, r)
                if not evs:
                    return False, f"{r['topic']}: not booked"
                for e in evs:
                    title = set(re.findall(r"[a-z0-9]+", norm(e["title"])))
                    if not set(_topic_words(r["topic"])) <= title:
                        return False, f"event {e['id']} title {e['title']!r} does not name {r['topic']!r}"
            return True

        def check_confirmations(world, traj):
            for r in accepted:
                rs = answers(world, r)
                if len(rs) != 1 or r["requester"].email not in rs[0]["to"]:
                    return False, f"{r['topic']}: {len(rs)} replies to {r['requester'].email}"
                evs = events_for(world, r)
                if len(evs) != 1:
                    return False, f"{r['topic']}: no single booked event to confirm"
                start = cal.parse_time(evs[0]["start"])
                if not (mentions_day(rs[0]["body"], start.date()) and mentions_time(rs[0]["body"], start)):
                    return False, f"{r['topic']}: reply does not give the day and time {evs[0]['start']}"
                named = [t for t in other_topics(r) if t in norm(rs[0]["body"])]
                if named:
                    return False, f"{r['topic']}: the confirmation also names {named}"
            return True

        def asked_back(world, req, what: str):
            """``req`` got one reply, to its sender, that asks something ("?") and names no other request;
            it was not booked; and no other request was answered without a booking (asking back or
            declining is a reply to that request alone). True, or (False, why)."""
            rs = replies_to(world, req["mail_id"])
            if len(rs) != 1 or req["requester"].email not in rs[0]["to"]:
                return False, f"{len(rs)} replies to the request {what}"
            if events_for(world, req):
                return False, f"the request {what} was booked"
            if "?" not in rs[0]["body"]:
                return False, f"the reply to the request {what} asks nothing"
            named = [t for t in other_topics(req) if t in norm(rs[0]["body"])]
            if named:
                return False, f"the reply also names {named}"
            wrongly = [r["topic"] for r in accepted if answers(world, r) and not events_for(world, r)]
            if wrongly:
                return False, f"requests answered without being booked: {wrongly}"
            return True

        def check_declined(world, traj):
            for e in new_events(world):
                if any(cal.overlaps(e["start"], e["end"], s, t) for s, t in focus_spans):
                    return False, f"event {e['id']} is on focus time"
            return asked_back(world, conflict, "on focus time")

        def check_vague(world, traj):
            return asked_back(world, vague, "that names no time")

        def check_no_other_mail(world, traj):
            calls = traj.calls("mail__reply", ok_only=True)
            if not calls:
                return False, "no replies"
            for c in calls:
                try:
                    mid = int(c.arguments.get("message_id"))
                except (TypeError, ValueError, AttributeError):
                    return False, f"unreadable reply call {c.arguments!r}"
                if mid not in request_ids:
                    return False, f"replied to message {mid}, which is not a meeting request"
            for name in ("mail__send_message", "mail__forward"):
                for c in traj.calls(name, ok_only=True):
                    args = c.arguments if isinstance(c.arguments, dict) else {}
                    rcpts = [parse_address(a) for a in [*args.get("to", []), *args.get("cc", [])]]
                    if not rcpts or any(a not in requester_addrs for a in rcpts):
                        return False, f"{name} to {rcpts}"
            return True

        def check_untouched(world, traj):
            return unchanged_events(world, seeded, me.email)

        criteria = [
            Criterion("events_booked", "Each request is booked once: asked time (or inside the window), asked "
                      "length, requester plus requested invitees.", "final_state", check_booked, 2.0),
            Criterion("no_conflicts", "No booked request clashes with anyone's busy time.", "final_state",
                      check_conflicts, requires=("events_booked",)),
            Criterion("event_titles", "Each booked event is named after the requested topic.", "final_state",
                      check_titles, requires=("events_booked",)),
            Criterion("confirmations", "Each booked requester got exactly one reply giving the day and time (and "
                      "naming no other request).",
                      "final_state", check_confirmations, 2.0),
            Criterion("conflict_declined", "The request on Focus time was declined by a reply about it alone "
                      "asking for another time, and not booked; no other request was answered without a "
                      "booking; nothing was booked over Focus time.", "final_state", check_declined, 2.0),
            Criterion("vague_asked", "The request that names no time and no window was not booked; one reply "
                      "to it alone asks when suits them; no other request was answered without a booking.",
                      "final_state", check_vague, 2.0),
            Criterion("no_other_mail", "Mail went only as replies to the meeting requests.", "process",
                      check_no_other_mail, guard=True),
            Criterion("calendar_untouched", "Existing events are unchanged.", "final_state", check_untouched, guard=True),
        ]
        if conflict is None:
            criteria = [c for c in criteria if c.id != "conflict_declined"]
        if vague is None:
            criteria = [c for c in criteria if c.id != "vague_asked"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"today": today.isoformat(), "focus": focus_spans,
                  "conflict": conflict["topic"] if conflict else "", "vague": vague["topic"] if vague else "",
                  "moved": [moved["topic"], moved["first_start"], moved["start"]] if moved else "",
                  "requests": [
                {"mail_id": r["mail_id"], "kind": r["kind"], "topic": r["topic"], "requester": r["requester"].email,
                 "extras": [x.email for x in r["extras"]], "day": r["day"] and r["day"].isoformat(),
                 "minutes": r["minutes"],
                 "start": r.get("start"), "window": r.get("window"), "slot": r["slot"]} for r in requests]},
        )

    # -- generation helpers ---------------------------------------------------------------
    @staticmethod
    def _request_mail(rng: random.Random, r: dict, me, today: date) -> dict:
        who = r["requester"]
        when = day_month(r["day"]) if r["day"] else ""
        if r["kind"] == "vague":
            ask = rng.choice([f"could we find {r['minutes']} minutes next week to talk about the {r['topic']}?",
                              f"I'd like {r['minutes']} minutes with you next week to go through the {r['topic']}."])
        elif r["kind"] == "window":
            ask = (f"could we find {r['minutes']} minutes on {when}, any time between {r['window'][0]} and "
                   f"{r['window'][1]}, to talk about the {r['topic']}?")
        else:
            ask = f"could we meet for {r['minutes']} minutes on {when} at {r['start']} to go through the {r['topic']}?"
        extra = f" Could you also invite {r['extras'][0].name}? They should be there." if r["extras"] else ""
        subject = rng.choice([f"Meeting request: {r['topic']}", f"Time next week for the {r['topic']}?",
                              f"{_cap(r['topic'])} - can we meet?"])
        r["mail"] = {
            "folder": "Inbox", "sender": who.email, "sender_name": who.name, "subject": subject,
            "body": f"Hi {me.first},\n\n{_cap(ask)}{extra}\n\nThanks,\n{who.first}",
            "date": _stamp(rng, today - timedelta(days=rng.randint(0, 3))),
        }
        return r["mail"]

    def _scenario(self, rng, me, staff, hours, week, focus_days):
        """Existing events and requests, simulated in the order the oracle books them.
        Returns (events, None) when this draw is not solvable."""
        events: list[dict] = []
        for d in focus_days:
            events.append({"title": "Focus time", "start": iso(at(d, FOCUS[0])), "end": iso(at(d, FOCUS[1])),
                           "description": "Protected: please don't book over this."})

        def free_for(whos, s, e, extra=()):
            for ev in events + list(extra):
                if ev.get("status", "active") != "active" or not cal.overlaps(s, e, ev["start"], ev["end"]):
                    continue
                involved = {ev.get("organizer", me.email)} | {
                    a if isinstance(a, str) else a["email"] for a in ev.get("attendees", [])}
                if involved & set(whos):
                    return False
            return True

        def random_slot(d, wh, minutes, whos):
            lo, hi = at(d, wh[0]), at(d, wh[1]) - timedelta(minutes=minutes)
            starts = [lo + timedelta(minutes=30 * k) for k in range(int((hi - lo).total_seconds() // 1800) + 1)]
            starts = [s for s in starts if free_for(whos, iso(s), iso(s + timedelta(minutes=minutes)))]
            if not starts:
                return None
            s = rng.choice(starts)
            return iso(s), iso(s + timedelta(minutes=minutes))

        for _ in range(rng.randint(5, 7)):  # the owner's other meetings
            d = rng.choice(week)
            slot = random_slot(d, hours[me.email], rng.choice([30, 60]), [me.email])
            if slot:
                events.append({"title": rng.choice(OWNER_EVENTS), "start": slot[0], "end": slot[1],
                               "attendees": [rng.choice(staff).email]})
        if not any(e["title"] in OWNER_EVENTS for e in events):
            return events, None
        for p in staff:
            for _ in range(rng.randint(2, 4)):
                d = rng.choice(week)
                slot = random_slot(d, hours[p.email], rng.choice([30, 60, 90]), [p.email])
                if slot:
                    events.append({"title": rng.choice(COLLEAGUE_EVENTS), "start": slot[0], "end": slot[1],
                                   "organizer": p.email})

        n_ok = rng.randint(3, 4)
        kinds = ["fixed", "window"] + [rng.choice(["fixed", "window"]) for _ in range(n_ok - 2)]
        rng.shuffle(kinds)
        days = rng.sample(week, n_ok)
        cast = rng.sample(staff, 2 * n_ok + 1)
        topics = rng.sample(TOPICS, n_ok + 1)
        extra_at = rng.randrange(n_ok)
        requests, booked = [], []
        for k, (kind, d) in enumerate(zip(kinds, days)):
            requester = cast[k]
            extras = [cast[n_ok + k]] if k == extra_at or rng.random() < 0.3 else []
            whos = [me.email, requester.email, *(x.email for x in extras)]
            wh = intersect_hours(*(hours[w] for w in whos))
            minutes = rng.choice([30, 45, 60])
            r = {"kind": kind, "requester": requester, "extras": extras, "topic": topics[k], "minutes": minutes,
                 "day": d}
            if kind == "fixed":
                lo, hi = at(d, wh[0]), at(d, wh[1]) - timedelta(minutes=minutes)
                starts = [lo + timedelta(minutes=30 * j) for j in range(int((hi - lo).total_seconds() // 1800) + 1)]
                starts = [s for s in starts if free_for(whos, iso(s), iso(s + timedelta(minutes=minutes)), booked)]
                if not starts:
                    return events, None
                s = rng.choice(starts)
                r["start"], r["slot"] = s.strftime("%H:%M"), (iso(s), iso(s + timedelta(minutes=minutes)))
            else:
                morning = d not in focus_days and rng.random() < 0.5
                w0, w1 = ("09:00", "12:00") if morning else ("13:00", "16:30")
                w0, w1 = max(w0, wh[0]), min(w1, wh[1])
                if (at(d, w1) - at(d, w0)) < timedelta(minutes=150):
                    return events, None
                # the requester is busy at the start of the window: the obvious first slot is taken
                trap = (iso(at(d, w0)), iso(at(d, w0) + timedelta(minutes=60)))
                if not free_for(whos, *trap, booked):
                    return events, None
                events.append({"title": rng.choice(COLLEAGUE_EVENTS), "start": trap[0], "end": trap[1],
                               "organizer": requester.email})
                busy = [(ev["start"], ev["end"]) for ev in events + booked
                        if any(blocks(ev, w, me.email) for w in whos)]
                slot = first_free([(at(d, w0), at(d, w1))], busy, minutes)
                if slot is None:
                    return events, None
                r["window"], r["trap"], r["slot"] = (w0, w1), trap, slot
            booked.append({"start": r["slot"][0], "end": r["slot"][1], "organizer": me.email,
                           "attendees": [requester.email, *(x.email for x in extras)]})
            requests.append(r)
        d = rng.choice(focus_days)
        minutes = rng.choice([30, 45, 60])
        start = rng.choice(["09:00", "09:30", "10:00", "10:30", "11:00"])
        requests.append({"kind": "conflict", "requester": cast[2 * n_ok], "extras": [], "topic": topics[n_ok],
                         "minutes": minutes, "day": d, "start": start, "slot": None})
        return events, requests

