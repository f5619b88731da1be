"""Calendar scheduling: book a 30-minute 1:1 with every member of a team next week.

Each slot must sit inside both people's working hours, clash with nobody's busy time
(cancelled events and declined invitations don't count), avoid a day the manager keeps
free, and carry the requested title. The directory holds look-alike names, so addresses
have to be looked up with care. The trap mix is drawn per seed: the day kept free, the
look-alikes sharing a member's first name, the cancelled sync and the declined invitation
are each there or not (the look-alike sharing a member's surname always is).
"""

from __future__ import annotations

import random
import re
from datetime import date, timedelta
from pathlib import Path

from longhorizon.apps.calendar import state as cal
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.calendar.slots import at, blocks, first_free, intersect_hours, iso, snapshot
from longhorizon.tasks.common import People, company, faker_for, loads, long_date, monday_of, norm, weekday
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register

HOURS = [("08:00", "16:00"), ("08:30", "16:30"), ("09:00", "17:00"), ("09:30", "17:30"),
         ("10:00", "18:00"), ("07:30", "15:30")]
MANAGER_HOURS = [("08:30", "17:30"), ("08:00", "17:00"), ("09:00", "18:00")]
TITLES = [
    ("1:1 {me} / {them}", 'call each one "1:1 {me} / <their first name>", e.g. "1:1 {me} / {ex}"'),
    ("{them} <> {me} 1:1", 'title each one "<their first name> <> {me} 1:1", e.g. "{ex} <> {me} 1:1"'),
    ("Check-in: {me} & {them}", 'name each one "Check-in: {me} & <their first name>", e.g. "Check-in: {me} & {ex}"'),
]
MEMBER_EVENTS = ["Customer call", "Design review", "Training session", "Sprint planning", "Doctor's appointment",
                 "Interview panel", "Vendor demo", "Pairing session", "Quarterly review prep", "Lunch & learn"]
MANAGER_EVENTS = ["Budget review", "Leadership sync", "Hiring panel", "Board deck prep", "Vendor negotiation",
                  "Skip-level with director", "Finance check-in", "Recruiter call"]


def _title_key(text: str) -> str:
    return re.sub(r"\s*([/&:<>])\s*", r"\1", norm(text))


@register
class TeamOneOnOnes(TaskFamily):
    name = "team_one_on_ones"
    category = "calendar scheduling"
    apps = ("calendar",)
    description = (
        "Schedule a 30-minute 1:1 with each of 6-9 team members next week: within both people's "
        "working hours, clear of everyone's busy time and of a day kept free, with a set title pattern."
    )

    levels = 4
    """The team's size: 1 (one new report), 2-3, 4-5, and 6-9 (the default). Level 1 skips the
    surveys (the whole directory, my week before and after) and checks free/busy a day at a time."""
    toolsets = {1: ("calendar__create_event", "calendar__free_busy", "calendar__list_people")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng = random.Random(seed)
        fake = faker_for(seed)
        people = People(fake)
        _, domain = company(fake)
        monday = monday_of(rng)
        today = monday - timedelta(days=rng.choice([3, 4, 5, 6]))
        week = [monday + timedelta(days=i) for i in range(5)]
        blocked = rng.choice(week)
        # the trap mix, the same at every level: the day kept free, look-alikes sharing a member's
        # first name, a cancelled sync and a declined invitation that look busy (each there or not)
        traps = {"blocked": rng.random() < 0.7, "first_names": rng.random() < 0.6,
                 "cancelled": rng.random() < 0.6, "declined": rng.random() < 0.6}
        if not traps["blocked"]:
            blocked = None
        allowed = [d for d in week if d != blocked]
        me = people.make(domain)
        my_hours = rng.choice(MANAGER_HOURS)
        size = rng.randint(6, 9)
        if level < self.levels:  # drawn after the default's draw, so the default stays byte for byte
            size = 1 if level == 1 else rng.randint(2, 3) if level == 2 else rng.randint(4, 5)
        team = [people.make(domain) for _ in range(size)]
        hours = {p.email: rng.choice(HOURS) for p in team}
        namesakes = [people.make(domain, first=p.first) for p in rng.sample(team, min(2, len(team)))]
        lookalikes = [*(namesakes if traps["first_names"] else []), people.make(domain, last=team[0].last)]
        colleagues = [people.make(domain) for _ in range(5)]
        directory = [
            {"email": me.email, "name": me.name, "work_start": my_hours[0], "work_end": my_hours[1]},
            *({"email": p.email, "name": p.name, "work_start": hours[p.email][0], "work_end": hours[p.email][1],
               "timezone": rng.choice(["", "America/New_York", "Europe/London"])} for p in team),
            *({"email": p.email, "name": p.name} for p in lookalikes + colleagues),
        ]
        pattern, phrasing = rng.choice(TITLES)
        titles = {p.email: pattern.format(me=me.first, them=p.first) for p in team}

        # existing events: retry until every member can be fitted (and every flaw is playable)
        for _attempt in range(50):
            events = self._events(rng, me, team, hours, my_hours, week, allowed, colleagues, lookalikes, today,
                                  traps["cancelled"], traps["declined"])
            simulated = self._simulate(events, me, team, hours, my_hours, allowed, blocked)
            if simulated is not None:
                plan, wrong = simulated
                break
        else:  # pragma: no cover - generation bug
            raise RuntimeError(f"{self.name}: could not generate a solvable week for seed {seed}")
        for i, e in enumerate(events, start=1):
            e["id"] = i
        seeded = {e["id"]: snapshot(e, me.email) for e in events}
        last_seed_id = len(events)
        standup = next(e["id"] for e in events
                       if e["title"] == "Team standup" and e["start"].startswith(week[-1].isoformat()))

        def build(root: Path) -> None:
            cal.create_calendar(root / "state" / "calendar.sqlite", me.email, directory, events,
                                today=today.isoformat())

        roster = ", ".join(p.name for p in team[:-1]) + f" and {team[-1].name}" if len(team) > 1 else team[0].name
        everyone = "everyone on my team" if len(team) > 1 else "the one person on my team so far"
        w = phrasing_rng(self.name, seed)  # the wording's own generator: no drawn value of the World moves
        span = f"Monday {monday.isoformat()} to Friday {week[-1].isoformat()}"
        hello = say(w, f"Hi, {me.first} here. Today is {long_date(today)}.",
                    f"Hello, it's {me.first}. It's {long_date(today)} today.",
                    f"{me.first} here. Today is {long_date(today)}.")
        want = say(w, f"I'd like a 30-minute 1:1 with {everyone} next week ({span}): {roster}.",
                   f"Next week ({span}) I want a 30-minute 1:1 with {everyone}: {roster}.",
                   f"Could you set up 30-minute 1:1s next week ({span}) with {everyone}? That's {roster}.")
        book = say(w, "Please put one on the calendar for each of them, inviting just that person.",
                   "Each of them gets one on the calendar, with only that person invited.",
                   "Book one per person on the calendar and invite only that person to it.")
        rules = in_some_order(w, [
            say(w, "Each slot has to be inside their working hours and mine, and must not clash with anything "
                   "already on their calendar or mine.",
                "Every slot must fall within both their working hours and mine, and can't overlap anything already "
                "on either calendar.",
                "Slots need to be inside their working hours and mine, without clashing with anything that's "
                "already on their calendar or mine."),
            *([say(w, f"Keep {weekday(blocked)} completely free of 1:1s, I'm saving that day for planning.",
                   f"No 1:1s at all on {weekday(blocked)}: I'm keeping that day for planning.",
                   f"I'm saving {weekday(blocked)} for planning, so leave it completely free of 1:1s.")]
              if blocked else []),
            say(w, f"For the titles, {phrasing.format(me=me.first, ex=team[0].first)}.",
                f"As for the titles: {phrasing.format(me=me.first, ex=team[0].first)}.",
                f"Titles: {phrasing.format(me=me.first, ex=team[0].first)}."),
        ])
        keep = say(w, "Please don't move or cancel anything that's already booked.",
                   "Don't move or cancel anything already booked, please.",
                   "Anything that's already booked stays where it is: don't move or cancel it.")
        instruction = " ".join([hello, want, book, *rules, keep])
        week_args = {"start": monday.isoformat(), "end": week[-1].isoformat()}

        survey = level > 1  # one person: look them up, check free/busy, book

        def solve():
            if survey:
                yield ToolCall("calendar__list_people", {}, note="Look at the directory to match names to addresses.")
                yield ToolCall("calendar__list_events", dict(week_args),
                               note="See what my own week looks like before booking anything.")
            for p in team:
                found = loads((yield ToolCall("calendar__list_people", {"query": p.name},
                                              note=f"Find {p.name}'s exact address.")))
                email = next(x["email"] for x in found if x["name"] == p.name)
                if survey:
                    fb = loads((yield ToolCall("calendar__free_busy", {"emails": [email, me.email], **week_args},
                                               note=f"Check {p.first}'s and my busy times and working hours.")))
                    slot = self._choose(fb, allowed, blocked)
                else:  # one person: try the allowed days one at a time
                    for d in allowed:
                        fb = loads((yield ToolCall(
                            "calendar__free_busy", {"emails": [email, me.email], "start": d.isoformat(),
                                                    "end": d.isoformat()},
                            note=f"Is there a free half hour for {p.first} and me on {weekday(d)}?")))
                        if slot := self._choose(fb, [d], blocked):
                            break
                yield ToolCall("calendar__create_event",
                               {"title": titles[p.email], "start": slot[0], "end": slot[1], "attendees": [email]},
                               note=f"Book {p.first}'s 1:1 at {slot[0]}, a time free for both of us.")
            if survey:
                yield ToolCall("calendar__list_events", dict(week_args),
                               note="Verify every 1:1 is booked once, with no clashes.")
            return (f"Booked {len(team)} 30-minute 1:1s next week"
                    + (f" (none on {weekday(blocked)})" if blocked else "")
                    + ", each inside working hours and clear of existing meetings.")

        # the last member's 1:1 goes wrong; its wrong slots are the ones _simulate proved exist
        last = team[-1]
        book_last = perturb.on("calendar__create_event", attendees=[last.email])

        def booked_at(slot, note=None):
            return lambda call: ToolCall(call.name, {**call.arguments, "start": slot[0], "end": slot[1]},
                                         note or f"Book {last.first}'s 1:1 at {slot[0]}, a time free for both of us.")

        flawed = {flaw: perturb.replace(solve, book_last, booked_at(wrong[flaw]))
                  for flaw in ("timing", "blocked_day", "working_hours", "no_conflicts") if flaw in wrong}
        flawed["one_each"] = perturb.replace(solve, book_last, lambda call: [call, ToolCall(
            "calendar__free_busy", {"emails": [last.email, me.email], **week_args}, note="Find another free slot."),
            booked_at(wrong["one_each"], f"Book another 1:1 with {last.first}.")(call)])
        flawed["titles"] = perturb.change(solve, book_last, title="1:1")
        flawed["existing_untouched"] = perturb.insert(solve, ToolCall(
            "calendar__cancel_event", {"event_id": standup}, note="Friday's standup looks optional; cancel it."),
            before=perturb.noted("calendar__list_events", "Verify every 1:1 is booked once, with no clashes.")
            if survey else book_last)

        # -- graders ------------------------------------------------------------------
        team_emails = [p.email for p in team]

        def new_events(world) -> list[dict]:
            return [e for e in cal.events(world) if e["id"] > last_seed_id and e["organizer"] == me.email]

        def guests(e: dict) -> set[str]:
            return {a["email"] for a in e["attendees"]} - {me.email}

        def per_member(world, prop, what: str):
            evs = new_events(world)
            for email in team_emails:
                mine = [e for e in evs if email in guests(e)]
                if not mine:
                    return False, f"no 1:1 for {email}"
                for e in mine:
                    if not prop(e, email):
                        return False, f"event {e['id']} ({e['title']!r} {e['start']}) {what}"
            return True

        def check_one_each(world, traj):
            evs = new_events(world)
            for email in team_emails:
                n = sum(1 for e in evs if guests(e) == {email})
                if n != 1:
                    return False, f"{email} has {n} 1:1s"
            extra = [e["id"] for e in evs if len(guests(e)) != 1 or not guests(e) <= set(team_emails)]
            return (not extra, f"unexpected events {extra}" if extra else "")

        def check_timing(world, traj):
            days = {d.isoformat() for d in week}
            return per_member(world, lambda e, _: e["start"][:10] in days and e["end"][:10] == e["start"][:10]
                              and cal.parse_time(e["end"]) - cal.parse_time(e["start"]) == timedelta(minutes=30),
                              "is not 30 minutes on a weekday next week")

        def check_blocked(world, traj):
            return per_member(world, lambda e, _: e["start"][:10] != blocked.isoformat(),
                              f"is on {weekday(blocked)}")

        people_rows = {p["email"]: p for p in directory}

        def within(e, email):
            return all(cal.within_working_hours({"work_start": people_rows[x].get("work_start", "09:00"),
                                                 "work_end": people_rows[x].get("work_end", "17:00")},
                                                e["start"], e["end"]) for x in (email, me.email))

        def check_hours(world, traj):
            return per_member(world, within, "is outside working hours")

        def check_conflicts(world, traj):
            def free(e, email):
                return not any(b["id"] != e["id"] for x in (email, me.email)
                               for b in cal.busy(world, x, e["start"], e["end"]))
            return per_member(world, free, "clashes with another event")

        def check_titles(world, traj):
            return per_member(world, lambda e, email: _title_key(e["title"]) == _title_key(titles[email]),
                              "has the wrong title")

        def check_untouched(world, traj):
            for name in ("calendar__update_event", "calendar__cancel_event"):
                for c in traj.calls(name, ok_only=True):
                    try:
                        eid = int(c.arguments.get("event_id"))
                    except (TypeError, ValueError, AttributeError):
                        return False, f"unreadable {name} call {c.arguments!r}"
                    if eid in seeded:
                        return False, f"{name} on existing event {eid} ({seeded[eid]['title']!r})"
            return True

        # the 1:1s' properties pay only when the set of 1:1s is right: booking everyone in the
        # directory (look-alikes included) at some free half hour earns nothing
        criteria = [
            Criterion("one_each", "Every team member has exactly one new 1:1 that invites only them.",
                      "final_state", check_one_each, 2.0),
            Criterion("timing", "Each 1:1 is 30 minutes on a weekday of next week.", "final_state", check_timing,
                      requires=("one_each",)),
            *([Criterion("blocked_day", f"No 1:1 on {weekday(blocked)} {blocked.isoformat()}.", "final_state",
                         check_blocked, requires=("one_each",))] if blocked else []),
            Criterion("working_hours", "Each 1:1 is inside both the member's and the manager's working hours.",
                      "final_state", check_hours, requires=("one_each",)),
            Criterion("no_conflicts", "No 1:1 overlaps any busy time of the member or the manager.",
                      "final_state", check_conflicts, 2.0, requires=("one_each",)),
            Criterion("titles", f"Titles follow the pattern {pattern!r}.", "final_state", check_titles,
                      requires=("one_each",)),
            Criterion("existing_untouched", "No event that was already booked was changed or cancelled.",
                      "process", check_untouched, guard=True),
        ]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=flawed,
            data={"today": today.isoformat(), "week": [d.isoformat() for d in week],
                  "blocked": blocked.isoformat() if blocked else "",
                  "team": team_emails, "titles": titles, "plan": plan, "last_seed_id": last_seed_id,
                  "first_name_lookalikes": [p.email for p in namesakes] if traps["first_names"] else "",
                  "cancelled_sync": next((e["id"] for e in events if e.get("status") == "cancelled"), ""),
                  "declined_invite": next((e["id"] for e in events if any(
                      isinstance(a, dict) and a["response"] == "declined" for a in e.get("attendees", []))), "")},
        )

    # -- generation helpers -----------------------------------------------------------------
    @staticmethod
    def _choose(fb: dict, allowed: list[date], blocked: date, flaw: str | None = None) -> tuple[str, str] | None:
        """The oracle's pick from a free_busy answer for [member, manager]; with ``flaw``, the wrong
        pick that perturbation makes (``_simulate`` proves it exists in every draw)."""
        member, mgr = fb["people"]
        busy = [(b["start"], b["end"]) for p in (member, mgr) for b in p["busy"]]
        lo, hi = intersect_hours((member["working_hours"]["start"], member["working_hours"]["end"]),
                                 (mgr["working_hours"]["start"], mgr["working_hours"]["end"]))
        days, minutes = allowed, 30
        if flaw == "blocked_day":
            days = [blocked]
        if flaw == "timing":
            minutes = 45
        if flaw == "working_hours":  # right after the member's day ends
            end = member["working_hours"]["end"]
            return first_free([(at(d, end), at(d, end) + timedelta(minutes=60)) for d in days], busy, 30)
        if flaw == "no_conflicts":  # on top of one of the member's meetings
            for b in member["busy"]:
                s = b["start"]
                d = date.fromisoformat(s[:10])
                e = iso(at(d, s[11:]) + timedelta(minutes=30))
                if d in allowed and lo <= s[11:] and e[11:] <= hi and e[:10] == s[:10]:
                    return s, e
            return None
        return first_free([(at(d, lo), at(d, hi)) for d in days], busy, minutes)

    def _simulate(self, events, me, team, hours, my_hours, allowed, blocked):
        """Play the oracle's choices on ground truth: (plan, the last member's wrong slot per flaw), or
        None if any member (or flaw) can't be placed."""
        def fb(email, extra):
            spans = []
            for who, wh in ((email, hours[email]), (me.email, my_hours)):
                busy = [(e["start"], e["end"]) for e in events + extra if blocks(e, who, me.email)]
                spans.append({"working_hours": {"start": wh[0], "end": wh[1]},
                              "busy": [{"start": s, "end": e} for s, e in sorted(busy)]})
            return {"people": spans}
        booked: list[dict] = []
        plan, wrong = {}, {}
        for n, p in enumerate(team):
            slot = self._choose(fb(p.email, booked), allowed, blocked, None)
            if slot is None:
                return None
            booked.append({"start": slot[0], "end": slot[1], "organizer": me.email,
                           "attendees": [p.email], "status": "active"})
            plan[p.email] = slot
            if n == len(team) - 1:
                for flaw in ("blocked_day", "timing", "working_hours", "no_conflicts", "one_each"):
                    if flaw == "blocked_day" and blocked is None:
                        continue
                    extra = booked if flaw == "one_each" else booked[:-1]
                    wrong[flaw] = self._choose(fb(p.email, extra), allowed, blocked,
                                               None if flaw == "one_each" else flaw)
                    if wrong[flaw] is None:
                        return None
        return plan, wrong

    @staticmethod
    def _events(rng, me, team, hours, my_hours, week, allowed, colleagues, lookalikes, today,
                cancelled: bool, declined: bool) -> list[dict]:
        evs: list[dict] = []
        last_week = today - timedelta(days=today.weekday())
        for i in range(3):  # a little history from this week
            d = last_week + timedelta(days=min(i, today.weekday()))
            evs.append({"title": rng.choice(MANAGER_EVENTS), "start": iso(at(d, "14:00")), "end": iso(at(d, "15:00")),
                        "attendees": [rng.choice(team).email]})
        for d in week:
            evs.append({"title": "Team standup", "start": iso(at(d, "09:30")), "end": iso(at(d, "09:45")),
                        "attendees": [p.email for p in team], "location": "Team room"})

        def slot_in(wh, d, minutes):
            lo, hi = at(d, wh[0]), at(d, wh[1]) - timedelta(minutes=minutes)
            steps = int((hi - lo).total_seconds() // 1800)
            s = lo + timedelta(minutes=30 * rng.randint(0, max(steps, 0)))
            return iso(s), iso(s + timedelta(minutes=minutes))

        for _ in range(rng.randint(7, 10)):  # the manager's week
            d = rng.choice(week)
            s, e = slot_in(my_hours, d, rng.choice([30, 60, 60, 90]))
            evs.append({"title": rng.choice(MANAGER_EVENTS), "start": s, "end": e,
                        "attendees": [c.email for c in rng.sample(colleagues, rng.randint(1, 3))]})
        for p in team:  # each member's week; the first one always on a bookable day
            both = intersect_hours(hours[p.email], my_hours)
            for k in range(rng.randint(3, 6)):
                d = rng.choice(allowed) if k == 0 else rng.choice(week)
                s, e = slot_in(both if k == 0 else hours[p.email], d, rng.choice([30, 60, 60, 90, 120]))
                title = rng.choice(MEMBER_EVENTS)
                if title == "Doctor's appointment":
                    evs.append({"title": title, "start": s, "end": e, "organizer": p.email})
                else:
                    evs.append({"title": title, "start": s, "end": e, "organizer": rng.choice(colleagues).email,
                                "attendees": [{"email": p.email, "response": rng.choice(["accepted", "tentative"])}]})
        # traps that look busy but are not: a cancelled 1:1-ish meeting and a declined invitation
        if cancelled:
            p = rng.choice(team)
            d = rng.choice(allowed)
            s, e = slot_in(intersect_hours(hours[p.email], my_hours), d, 60)
            evs.append({"title": f"Project sync with {p.first}", "start": s, "end": e, "attendees": [p.email],
                        "status": "cancelled"})
        if declined:
            p = rng.choice(team)
            s, e = slot_in(hours[p.email], rng.choice(allowed), 60)
            evs.append({"title": "All-hands rehearsal", "start": s, "end": e,
                        "organizer": rng.choice(colleagues).email,
                        "attendees": [{"email": p.email, "response": "declined"},
                                      {"email": lookalikes[0].email, "response": "accepted"}]})
        return evs
