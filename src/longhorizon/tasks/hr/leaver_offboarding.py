"""HR offboarding: run the month's leavers list through calendar, IT tickets and manager mails.

HR's leavers workbook lists who leaves this month (one resignation was withdrawn; one leaver's
last day moved). The HR lead's checklist mail (a newer version replaces last year's) says what to
do for each confirmed leaver: meetings they host after their last day are handed over to the
handover person from the list (their 1:1s, and everything when nobody is named, are
cancelled); one IT access-removal ticket per leaver with set fields (an old ticket already
exists for the leaver whose date moved: fix it, don't open a second); and a handover mail to
the leaver's manager. All team meetings are booked from the HR scheduling calendar the agent
owns; the host is on each invite's "Host:" line, so every candidate meeting has to be opened.
Near-duplicate names (a colleague who shares a leaver's surname and almost their first name, a
namesake of each handover person) punish matching by name instead of by address.

The trap mix is drawn per seed (``Task.data`` records it, empty where a trap is absent): the
withdrawn resignation, the existing ticket of the leaver whose last day moved, the leaver with no
handover person, the termination (P1) and the leaver's near-namesake are each there or not (at
least one of them; level 1 always keeps the withdrawn leaver). Last year's checklist is always in
the inbox. ``checked_before_opening`` is a criterion only where a ticket already exists.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from pathlib import Path

from openpyxl import Workbook

from longhorizon.apps.calendar import state as cal
from longhorizon.apps.mail import state as mail
from longhorizon.apps.tickets import state as trk
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.calendar.slots import snapshot
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    MONTHS,
    Files,
    People,
    company,
    loads,
    long_date,
    mails_sent,
    mentions_code,
    mentions_date,
    norm,
    norm_path,
    rng_and_faker,
    slug,
    squash,
    writes_to,
)

NEAR_NAMES = [("Jon", "John"), ("Kristen", "Kirsten"), ("Catherine", "Katherine"), ("Steven", "Stephen"),
              ("Alan", "Allan"), ("Sara", "Sarah"), ("Eric", "Erik"), ("Mark", "Marc"), ("Brian", "Bryan"),
              ("Philip", "Phillip"), ("Rebecca", "Rebekah"), ("Megan", "Meghan"), ("Lindsay", "Lindsey"),
              ("Teresa", "Theresa"), ("Carl", "Karl"), ("Shawn", "Sean")]
DEPARTMENTS = {
    "Sales": ["Pipeline review", "Deal desk", "Sales forecast call", "Territory planning"],
    "Marketing": ["Campaign stand-up", "Content calendar review", "Brand council", "Launch readiness"],
    "Engineering": ["Sprint demo", "Architecture review", "Incident retro", "Backlog grooming"],
    "Finance": ["Month-end close check-in", "Budget review", "Forecast sync", "Audit prep"],
    "Customer Success": ["Escalations review", "Renewals forecast", "QBR prep", "Onboarding cohort sync"],
    "Operations": ["Vendor review", "Ops weekly", "Capacity planning", "Process council"],
}
QUALIFIERS = ["EMEA", "North America", "Q3", "team", "leads", "West", "APAC", "weekly"]
AGENDAS = ["status, risks, next steps", "open actions and decisions", "numbers first, then blockers",
           "review of last week, plan for this one", "walk-through and Q&A"]
SYSTEMS = ["Google Workspace", "Slack", "Salesforce", "GitHub", "Jira", "VPN", "NetSuite", "HubSpot", "Zendesk",
           "AWS console", "Figma", "Okta"]
OTHER_REASONS = ["Resignation", "Retirement", "End of contract", "Resignation"]
PROJECT, TEAM, LABEL = "ITS", "Identity & Access", "offboarding"
HEADER = ["Employee ID", "Name", "Email", "Department", "Manager", "Last day", "Leaving reason", "Status",
          "Handover to", "Asset tag", "Systems", "Notes"]
HOST = re.compile(r"^\s*Host:\s*(?P<name>[^<\n]+?)\s*<(?P<email>[^>\n]+)>", re.M)


def _business_days(lo: date, hi: date) -> list[date]:
    out, d = [], lo
    while d <= hi:
        if d.weekday() < 5:
            out.append(d)
        d += timedelta(days=1)
    return out


def _words(text: str, phrase: str) -> bool:
    return re.search(r"(?<![a-z0-9])" + re.escape(norm(phrase)) + r"(?![a-z0-9])", norm(text)) is not None


@register
class LeaverOffboarding(TaskFamily):
    name = "leaver_offboarding"
    category = "HR onboarding"
    apps = ("sheets", "calendar", "tickets", "mail")
    description = (
        "Offboard the month's confirmed leavers from HR's list: hand over or cancel the meetings they host "
        "after their last day, open (or fix) one IT access-removal ticket each with the checklist's fields, "
        "and mail each manager a handover checklist; the withdrawn leaver and look-alike names stay untouched."
    )

    levels = 2
    """1: one confirmed leaver (and the withdrawn one) on the list, the checklist's ticket and mail
    rules, the sheet's name and "no ticket exists yet" in the task, the calendar left as it is: read
    the list, open the access-removal ticket, mail the manager the handover checklist; 2 (default): three leavers from the HR lead's
    checklist mail, their meetings handed over or cancelled, an existing ticket to fix (where drawn).
    Level 1 always keeps the withdrawn leaver; every level keeps the termination rule and the ticket
    and mail fields."""
    toolsets = {1: (
        "calendar__list_people", "mail__send_message", "sheets__read_range", "tickets__create_ticket",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:  # noqa: C901 - one readable generator
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        company_name, domain = company(fake)
        year, month = 2026, rng.randint(2, 11)
        first = date(year, month, 1)
        month_end = date(year, month + 1, 1) - timedelta(days=1)
        today = first
        while today.weekday() >= 5:
            today += timedelta(days=1)
        month_name = f"{MONTHS[month - 1].capitalize()} {year}"
        ym = first.strftime("%Y-%m")
        prev_ym = (first - timedelta(days=1)).strftime("%Y-%m")

        me = people.make(domain)
        hr_lead = people.make(domain)
        it_staff = [people.make(domain) for _ in range(3)]
        pair = rng.choice([p for p in NEAR_NAMES if not set(p) & people.used_first])
        people.used_first.add(pair[1])  # kept for the look-alike
        depts = rng.sample(list(DEPARTMENTS), 4)

        # the trap mix: each there or not, at least one (level 1 keeps the withdrawn leaver)
        while True:
            has_withdrawn, has_existing, has_nohand, has_term, has_namesake = (
                rng.random() < 0.6 for _ in range(5))
            if any((has_withdrawn, has_existing, has_nohand, has_term, has_namesake)):
                break
        has_withdrawn = has_withdrawn or level == 1

        # the leavers: three confirmed, one withdrawn (where drawn) -----------------------------------
        leavers: list[dict] = []
        days = rng.sample(_business_days(today + timedelta(days=7), month_end), 4)
        existing_i = rng.randrange(3)
        nohand_i = rng.choice([i for i in range(3) if i != existing_i])
        term_i = rng.randrange(3)
        existing_i = existing_i if has_existing else None
        nohand_i = nohand_i if has_nohand else None
        term_i = term_i if has_term else None
        used_ids: set[str] = set()
        for i in range(4 if has_withdrawn else 3):
            person = people.make(domain, first=pair[0]) if i == 0 else people.make(domain)
            emp = f"E{rng.randint(10000, 99999)}"
            while emp in used_ids:
                emp = f"E{rng.randint(10000, 99999)}"
            used_ids.add(emp)
            active = i < 3
            reason = "Termination" if i == term_i else rng.choice(OTHER_REASONS)
            lv = {"person": person, "id": emp, "dept": depts[i], "manager": people.make(domain),
                  "last": days[i], "reason": reason, "status": "Confirmed" if active else "Withdrawn",
                  "successor": None if i == nohand_i else people.make(domain),
                  "asset": f"LT-{rng.randint(10000, 99999)}", "systems": sorted(rng.sample(SYSTEMS, rng.randint(3, 5))),
                  "old_last": None, "notes": ""}
            if i == existing_i:
                lv["old_last"] = rng.choice([d for d in _business_days(today + timedelta(days=3), month_end)
                                             if d != lv["last"]])
                lv["notes"] = (f"Last day moved from {lv['old_last'].isoformat()} to {lv['last'].isoformat()} "
                               f"(agreed with {lv['manager'].first}).")
            elif i == nohand_i:
                lv["notes"] = "Role is not being backfilled."
            elif not active:
                lv["notes"] = f"Resignation withdrawn on {(today - timedelta(days=2)).isoformat()}; staying."
            leavers.append(lv)
        active = leavers[:3]
        withdrawn = leavers[3] if has_withdrawn else None
        namesake = people.make(domain, first=pair[1], last=active[0]["person"].last) if has_namesake else None
        succ_lookalikes = [people.make(domain, first=lv["successor"].first) for lv in leavers if lv["successor"]]
        colleagues = [people.make(domain) for _ in range(8)]
        dir_people = [me, hr_lead, *it_staff, *([namesake] if namesake else []), *colleagues, *succ_lookalikes]
        for lv in leavers:
            dir_people += [lv["person"], lv["manager"]] + ([lv["successor"]] if lv["successor"] else [])
        dir_people.sort(key=lambda p: p.email)

        # the calendar ------------------------------------------------------------------------------------
        used_titles: set[str] = set()

        def title_for(dept: str) -> str:
            for _ in range(40):
                t = rng.choice(DEPARTMENTS[dept])
                if rng.random() < 0.5 or t in used_titles:
                    t = f"{t} - {rng.choice(QUALIFIERS)}"
                if t not in used_titles:
                    used_titles.add(t)
                    return t
            raise RuntimeError("ran out of meeting titles")  # pragma: no cover

        def slot(lo: date, hi: date, minutes: int) -> tuple[str, str]:
            d = rng.choice(_business_days(lo, hi))
            s = datetime(d.year, d.month, d.day, rng.randint(9, 15), rng.choice([0, 30]))
            return s.strftime(cal.TIME_FMT), (s + timedelta(minutes=minutes)).strftime(cal.TIME_FMT)

        events: list[dict] = []
        plan: dict[str, list] = {}  # tag per seeded event: ("transfer", leaver index) / ("cancel", i) / ("keep",)

        def hosted(host, guests: list, lo: date, hi: date, *, one_on_one: bool = False, dept: str = "",
                   tag=("keep",)) -> None:
            title = f"1:1 {host.first} / {guests[0].first}" if one_on_one else title_for(dept)
            used_titles.add(title)
            start, end = slot(lo, hi, 30 if one_on_one else rng.choice([30, 60]))
            events.append({"title": title, "start": start, "end": end, "organizer": me.email,
                           "attendees": [host.email, *(g.email for g in guests)],
                           "location": rng.choice(["Room Cedar", "Room Aurora", "Video call", "Room Orion"]),
                           "description": f"Host: {host.name} <{host.email}>\nAgenda: {rng.choice(AGENDAS)}",
                           "_tag": tag})

        for i, lv in enumerate(leavers):
            p, last, dept = lv["person"], lv["last"], lv["dept"]
            after = (last + timedelta(days=1), last + timedelta(days=28))
            is_active = i < 3
            # before the last day: stays as it is
            hosted(p, rng.sample(colleagues, 3), today + timedelta(days=1), last - timedelta(days=1), dept=dept)
            n_group = 1 if lv["successor"] is None else rng.randint(1, 2)
            for _ in range(n_group):
                tag = ("keep",) if not is_active else (("cancel", i) if lv["successor"] is None else ("transfer", i))
                hosted(p, rng.sample(colleagues, rng.randint(2, 4)), *after, dept=dept, tag=tag)
            hosted(p, [rng.choice(colleagues)], *after, one_on_one=True, tag=("cancel", i) if is_active else ("keep",))
            # they only attend this one (someone else hosts)
            other = rng.choice(colleagues)
            hosted(other, [p, *rng.sample([c for c in colleagues if c != other], 2)], *after, dept=dept)
            # organised by their manager, not by us
            start, end = slot(*after, 30)
            title = f"{dept} team lunch" if rng.random() < 0.5 else f"{lv['manager'].first}'s staff meeting"
            events.append({"title": title,
                           "start": start, "end": end, "organizer": lv["manager"].email,
                           "attendees": [p.email, *(c.email for c in rng.sample(colleagues, 2))], "_tag": ("keep",)})
        # the namesake hosts a meeting after the first leaver's last day: not theirs to touch
        if namesake:
            hosted(namesake, rng.sample(colleagues, 3), active[0]["last"] + timedelta(days=1),
                   active[0]["last"] + timedelta(days=20), dept=active[0]["dept"])
        for _ in range(4):
            h = rng.choice(colleagues)
            hosted(h, rng.sample([c for c in colleagues if c != h], 2), today, month_end + timedelta(days=14),
                   dept=rng.choice(depts))
        events.sort(key=lambda e: (e["start"], e["title"]))
        for k, e in enumerate(events, start=1):
            e["id"] = k
            plan[k] = e.pop("_tag")
        seeded = {e["id"]: snapshot(e, me.email) for e in events}
        last_seed_id = len(events)
        transfer = {k: t[1] for k, t in plan.items() if t[0] == "transfer"}
        cancel = {k: t[1] for k, t in plan.items() if t[0] == "cancel"}
        by_id = {e["id"]: e for e in events}

        # the tracker ---------------------------------------------------------------------------------------
        me_user = f"{slug(me.first)}.{slug(me.last)}"
        users = [{"username": me_user, "name": me.name, "email": me.email, "team": "People Ops"}]
        users += [{"username": f"{slug(p.first)}.{slug(p.last)}", "name": p.name, "email": p.email,
                   "team": team} for p, team in zip(it_staff, [TEAM, "IT Hardware", "Service Desk"])]
        teams = [{"name": TEAM, "description": "Accounts, SSO and access to every company system"},
                 {"name": "IT Hardware", "description": "Laptops, monitors, phones and their returns"},
                 {"name": "Service Desk", "description": "First-line IT support"},
                 {"name": "People Ops", "description": "HR operations"}]
        ex = active[existing_i] if existing_i is not None else None

        def priority(lv) -> str:
            return "P1" if lv["reason"] == "Termination" else "P2"

        def ticket_desc(lv, systems=None) -> str:
            systems = lv["systems"] if systems is None else systems
            return (f"Please remove all access for {lv['person'].name} ({lv['id']}, {lv['person'].email}) at the "
                    f"end of their last day, {lv['last'].isoformat()}.\nSystems: {', '.join(systems)}.")

        prev_leaver = people.make(domain)
        prev_id = f"E{rng.randint(10000, 99999)}"

        def withdrawn_ticket() -> ToolCall:
            """The slip the ``tickets_only_for_leavers`` perturbation makes (without a withdrawn leaver:
            last month's leaver, again)."""
            if withdrawn is None:
                return ToolCall("tickets__create_ticket", {
                    "project": PROJECT, "title": f"Access removal: {prev_leaver.name} ({prev_id})", "type": "task",
                    "priority": "P2", "team": TEAM, "labels": [LABEL], "due_date": today.isoformat(),
                    "description": f"Please remove all access for {prev_leaver.name} ({prev_leaver.email})."},
                    "Open last month's leaver's ticket again.")
            return ToolCall("tickets__create_ticket", {
                "project": PROJECT, "title": f"Access removal: {withdrawn['person'].name} ({withdrawn['id']})",
                "type": "task", "priority": "P2", "team": TEAM, "labels": [LABEL],
                "due_date": withdrawn["last"].isoformat(), "description": ticket_desc(withdrawn)},
                "Open the withdrawn leaver's ticket too.")

        vpn_user = namesake or colleagues[2]
        seeded_tickets = [
            {"project": PROJECT, "number": 201, "title": "Laptop battery swelling", "type": "incident",
             "priority": "P2", "team": "IT Hardware", "status": "In Progress", "reporter": me_user,
             "description": f"{colleagues[0].name}'s laptop battery is bulging; needs a replacement."},
            {"project": PROJECT, "number": 202, "title": f"Access removal: {prev_leaver.name} ({prev_id})",
             "type": "task", "priority": "P2", "team": TEAM, "labels": [LABEL], "status": "Closed",
             "resolution": "Done", "due_date": (first - timedelta(days=3)).isoformat(),
             "description": f"Leaver from the {prev_ym} list. Systems: Google Workspace, Slack."},
            {"project": PROJECT, "number": 203, "title": f"VPN drops every hour for {vpn_user.name}",
             "type": "incident", "priority": "P3", "team": "Service Desk", "status": "New",
             "description": f"{vpn_user.name} ({vpn_user.email}) loses the VPN connection hourly."},
            *([{"project": PROJECT, "number": 204, "title": f"Access removal: {ex['person'].name} ({ex['id']})",
                "type": "task", "priority": priority(ex), "team": TEAM, "labels": [LABEL], "status": "New",
                "due_date": ex["old_last"].isoformat(), "description": ticket_desc(ex).replace(
                    ex["last"].isoformat(), ex["old_last"].isoformat())}] if ex else []),
            {"project": PROJECT, "number": 205, "title": f"New starter accounts: {fake.name()}",
             "type": "task", "priority": "P3", "team": TEAM, "labels": ["onboarding"], "status": "Triaged",
             "description": "Accounts for a new joiner in Finance."},
            {"project": PROJECT, "number": 206, "title": "Monitor for hot desk 4B", "type": "task",
             "priority": "P4", "team": "IT Hardware", "status": "New", "description": "Second screen missing."},
        ]
        for n, t in enumerate(seeded_tickets, start=201):  # numbered in order, with or without the old ticket
            t["number"] = n
        ex_key = f"{PROJECT}-204" if ex else None
        seeded_keys = [f"{PROJECT}-{t['number']}" for t in seeded_tickets]
        tracker_now = f"{today.isoformat()}T09:00:00"

        # the leavers list and last month's (processed) ----------------------------------------------------
        list_path = f"hr/offboarding/leavers_{ym}.xlsx"
        prev_path = f"hr/offboarding/leavers_{prev_ym}.xlsx"
        rows = sorted(leavers, key=lambda lv: lv["id"])

        def make_books() -> dict:
            wb = Workbook()
            ws = wb.active
            ws.title = "Leavers"
            ws.append(HEADER)
            for lv in rows:
                ws.append([lv["id"], lv["person"].name, lv["person"].email, lv["dept"], lv["manager"].name,
                           lv["last"], lv["reason"], lv["status"], lv["successor"].name if lv["successor"] else "",
                           lv["asset"], "; ".join(lv["systems"]), lv["notes"] if level > 1 else None])
            old = Workbook()
            ws2 = old.active
            ws2.title = "Leavers"
            ws2.append(HEADER)
            ws2.append([prev_id, prev_leaver.name, prev_leaver.email, rng.choice(list(DEPARTMENTS)),
                        colleagues[5].name, first - timedelta(days=3), "Resignation", "Done", colleagues[6].name,
                        f"LT-{rng.randint(10000, 99999)}", "Google Workspace; Slack", "Processed."])
            return {list_path: wb, prev_path: old}

        books = Files(make_books)

        # the mailbox: this year's checklist replaces last year's -------------------------------------------
        checklist = (
            f"Hi {me.first},\n\nThis replaces last year's offboarding checklist. For every confirmed leaver on the "
            f"monthly list (ignore anyone whose status is not Confirmed):\n\n"
            f"1. Calendar: meetings the leaver hosts (the Host: line on the invite) that start after their last day:\n"
            f"   - group meetings go to the handover person on the list: take the leaver off the invite, add the "
            f"handover person and make them the host (update the Host: line);\n"
            f"   - their 1:1s are cancelled (the new owner sets up their own);\n"
            f"   - if no handover person is named, cancel all of them.\n"
            f"   Leave meetings on or before the last day, and meetings they only attend, as they are.\n"
            f"2. IT access removal: one ticket per leaver in the IT Service Desk project ({PROJECT}), type task, "
            f"team {TEAM}, label {LABEL}, title \"Access removal: <full name> (<employee ID>)\", due date = last "
            f"day, priority P2 (P1 for terminations). The description must give their work email and list every "
            f"system in the Systems column. If a ticket for that leaver already exists, don't open another one: "
            f"make sure it matches.\n"
            f"3. Mail the leaver's manager a handover checklist: last day, the access-removal ticket number, the "
            f"asset tag of the laptop to collect on the last day, and which of their meetings went to whom and "
            f"which were cancelled.\n\nPlease don't edit the list itself; it's our record.\n\nThanks,\n{hr_lead.first}"
        )
        stale = (
            f"Team,\n\nOffboarding checklist: raise a P3 ticket with label 'leaver' in the Service Desk queue for "
            f"each leaver and cancel all their meetings.\n\n{hr_lead.first}"
        )
        inbox = [
            {"folder": "Inbox", "sender": hr_lead.email, "sender_name": hr_lead.name, "to": [me.email],
             "subject": "Offboarding checklist", "body": stale, "date": f"{year - 1}-09-14T10:00:00", "is_read": True},
            {"folder": "Inbox", "sender": colleagues[1].email, "sender_name": colleagues[1].name, "to": [me.email],
             "subject": "Room bookings next week", "body": "Can we swap Cedar for Aurora on Tuesday?",
             "date": f"{(today - timedelta(days=3)).isoformat()}T15:20:00"},
            {"folder": "Inbox", "sender": hr_lead.email, "sender_name": hr_lead.name, "to": [me.email],
             "subject": f"Offboarding checklist ({year}) + {month_name} leavers", "body": checklist,
             "date": f"{(today - timedelta(days=1)).isoformat()}T16:45:00"},
            *([{"folder": "Inbox", "sender": withdrawn["manager"].email, "sender_name": withdrawn["manager"].name,
                "to": [me.email], "subject": f"{withdrawn['person'].first} is staying!",
                "body": f"Good news: {withdrawn['person'].name} has withdrawn their resignation. "
                        f"HR has updated the list.\n\n{withdrawn['manager'].first}",
                "date": f"{(today - timedelta(days=2)).isoformat()}T11:05:00"}] if withdrawn else []),
        ]
        checklist_id = 3
        if level == 1:  # the same draws as the default, then one confirmed leaver (not the one with a ticket)
            active = [next(lv for lv in active if lv is not ex)]
            leavers = [*active, withdrawn]  # level 1 always has the withdrawn leaver
            rows = sorted(leavers, key=lambda lv: lv["id"])
            transfer, cancel = {}, {}

        def build(root: Path) -> None:
            books.build(root)
            cal.create_calendar(root / "state" / "calendar.sqlite", me.email,
                                [{"email": p.email, "name": p.name} for p in dir_people], events,
                                today=today.isoformat())
            trk.create_tracker(root / "state" / "tickets.sqlite", me=me_user,
                               projects=[{"key": PROJECT, "name": "IT Service Desk", "kind": "support"}],
                               teams=teams, users=users, tickets=seeded_tickets, now=tracker_now)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox,
                                now=f"{today.isoformat()}T09:00:00")

        w = phrasing_rng(self.name, seed)
        lead_first = hr_lead.first
        list_at = say(w, f"The {month_name} leavers list is in {list_path}.",
                      f"{list_path} has the {month_name} leavers list.",
                      f"I've put the {month_name} leavers list in {list_path}.")
        ask = say(w, f"Could you run offboarding for it, following {lead_first}'s checklist from yesterday?",
                  f"Please run offboarding for the list, the way {lead_first}'s checklist from yesterday says.",
                  f"Can you work through offboarding for that list? Follow the checklist {lead_first} sent "
                  f"yesterday.")
        notes = in_some_order(w, [
            say(w, "Team meetings are booked from this HR scheduling calendar, so you can change them.",
                "You can change team meetings: they're booked from this HR scheduling calendar.",
                "This HR scheduling calendar is where team meetings get booked, so you're free to change them."),
            say(w, f"Today is {long_date(today)}.", f"For reference, today is {long_date(today)}.",
                f"It's {long_date(today)} today."),
        ])
        instruction = " ".join([say(w, "Morning!", "Good morning!", "Hi!", "Hello,"), list_at, ask, *notes])
        if level == 1:
            instruction = " ".join([say(w, "Morning!", "Good morning!", "Hi!", "Hello,"),
                                    list_at[:-1] + " (sheet Leavers).", say(
                w, "Could you do the IT and manager side of offboarding for its confirmed leavers (ignore any other "
                   "status)? Their meetings are being handled separately.",
                "Please do the IT and manager part of offboarding for the confirmed leavers on it (skip any other "
                "status); their meetings are being handled separately."),
                f"For each: one access-removal ticket in the {PROJECT} project (none exists yet), type task, "
                f"team {TEAM}, label {LABEL}, title \"Access removal: <full name> "
                f"(<employee ID>)\", due date = their last day, priority P2 (P1 for terminations), and a "
                f"description with their work email and every system in the Systems column. Then mail their "
                f"manager a handover checklist: the last day, the ticket number and the asset tag of the laptop "
                f"to collect."])

        # -- the reference solution ------------------------------------------------------------------------
        def solve_one():
            """Level 1: the rules are in the task; one leaver's ticket and their manager's mail."""
            lv = active[0]
            p, mgr = lv["person"], lv["manager"]
            yield ToolCall("sheets__read_range", {"path": list_path, "sheet": "Leavers"}, "Read every row.")
            res = yield ToolCall("tickets__create_ticket", {
                "project": PROJECT, "title": f"Access removal: {p.name} ({lv['id']})", "type": "task",
                "priority": priority(lv), "team": TEAM, "labels": [LABEL], "due_date": lv["last"].isoformat(),
                "description": ticket_desc(lv)}, f"Open {p.first}'s access-removal ticket.")
            key = re.search(r"Created (\S+-\d+)", res).group(1)
            yield ToolCall("calendar__list_people", {"query": mgr.name}, f"{mgr.name}'s address.")
            lines = [f"- Last day: {long_date(lv['last'])}.", f"- IT access removal: ticket {key}.",
                     f"- Laptop to collect on the last day: asset {lv['asset']}."]
            yield ToolCall("mail__send_message", {
                "to": [mgr.email], "subject": f"Offboarding: {p.name}",
                "body": (f"Hi {mgr.first},\n\nHere is the handover checklist for {p.name}:\n\n"
                         + "\n".join(lines) + f"\n\nThanks,\n{me.first}")},
                f"Send {mgr.first} the handover checklist.")
            return f"Offboarded {p.name}: ticket {key}, {mgr.first} mailed."

        def solve():
            yield ToolCall("mail__search_messages", {"query": "offboarding checklist"},
                           "Find the HR lead's checklist (the newest one).")
            yield ToolCall("mail__read_message", {"message_id": checklist_id}, "Read this year's checklist.")
            yield ToolCall("sheets__list_sheets", {"path": list_path}, "Size up the leavers list.")
            yield ToolCall("sheets__read_range", {"path": list_path, "sheet": "Leavers"}, "Read every row.")
            yield ToolCall("tickets__list_teams", {}, "Check the team name for access removals.")
            for i, lv in enumerate(active):
                p, succ, mgr = lv["person"], lv["successor"], lv["manager"]
                yield ToolCall("calendar__list_people", {"query": mgr.name}, f"{mgr.name}'s address.")
                if succ:
                    yield ToolCall("calendar__list_people", {"query": succ.name},
                                   f"The handover person {succ.name}'s exact address.")
                yield ToolCall("tickets__search_tickets", {"query": p.name, "project": PROJECT},
                               f"Is there already an access-removal ticket for {p.name}?")
                if i == existing_i:
                    key = ex_key
                    yield ToolCall("tickets__get_ticket", {"key": key}, "Compare the old ticket with the list.")
                    yield ToolCall("tickets__update_ticket", {"key": key, "due_date": lv["last"].isoformat()},
                                   "The last day moved: fix the due date.")
                else:
                    res = yield ToolCall("tickets__create_ticket", {
                        "project": PROJECT, "title": f"Access removal: {p.name} ({lv['id']})", "type": "task",
                        "priority": priority(lv), "team": TEAM, "labels": [LABEL],
                        "due_date": lv["last"].isoformat(), "description": ticket_desc(lv)},
                        f"Open {p.first}'s access-removal ticket.")
                    key = re.search(r"Created (\S+-\d+)", res).group(1)
                lo, hi = lv["last"] + timedelta(days=1), lv["last"] + timedelta(days=35)
                evs = loads((yield ToolCall("calendar__list_events", {
                    "start": lo.isoformat(), "end": hi.isoformat(), "attendee": p.email},
                    f"{p.first}'s meetings after their last day.")))
                moved, dropped = [], []
                for e in evs:
                    if e["organizer"] != me.email:
                        continue
                    full = loads((yield ToolCall("calendar__get_event", {"event_id": e["id"]},
                                                 f"Who hosts '{e['title']}'?")))
                    m = HOST.search(full["description"])
                    if not m or m.group("email").lower() != p.email:
                        continue
                    guests = [a["email"] for a in full["attendees"]]
                    if succ and len(guests) > 2:
                        keep = [g for g in guests if g != p.email]
                        new_guests = keep + ([succ.email] if succ.email not in keep else [])
                        desc = HOST.sub(f"Host: {succ.name} <{succ.email}>", full["description"], count=1)
                        yield ToolCall("calendar__update_event", {
                            "event_id": e["id"], "attendees": new_guests, "description": desc},
                            f"Hand '{e['title']}' over to {succ.first}.")
                        moved.append(e["title"])
                    else:
                        yield ToolCall("calendar__cancel_event", {"event_id": e["id"]}, f"Cancel '{e['title']}'.")
                        dropped.append(e["title"])
                lines = [f"- Last day: {long_date(lv['last'])}.",
                         f"- IT access removal: ticket {key} (due {lv['last'].isoformat()}).",
                         f"- Laptop to collect on the last day: asset {lv['asset']}."]
                if moved:
                    lines.append(f"- Handed over to {succ.name}: {'; '.join(moved)}.")
                if dropped:
                    lines.append(f"- Cancelled: {'; '.join(dropped)}.")
                body = (f"Hi {mgr.first},\n\nHere is the handover checklist for {p.name}, who leaves us on "
                        f"{long_date(lv['last'])}:\n\n" + "\n".join(lines) + f"\n\nThanks,\n{me.first}")
                yield ToolCall("mail__send_message", {"to": [mgr.email], "cc": [hr_lead.email],
                                                      "subject": f"Offboarding: {p.name}", "body": body},
                               f"Send {mgr.first} the handover checklist.")
            yield ToolCall("tickets__search_tickets", {"query": "", "project": PROJECT, "label": LABEL,
                                                       "open_only": True}, "Check one open ticket per leaver.")
            yield ToolCall("calendar__list_events", {
                "start": today.isoformat(), "end": (month_end + timedelta(days=30)).isoformat()},
                "Check the calendar after the changes.")
            return (f"Offboarded {len(active)} leavers: meetings handed over or cancelled, tickets in place, "
                    "managers mailed.")

        oracle = solve_one if level == 1 else solve
        opening = perturb.on("tickets__create_ticket")  # the first new ticket
        first_new = next(lv for lv in active if lv is not ex)
        first_mail = perturb.on("mail__send_message", subject=f"Offboarding: {active[0]['person'].name}")
        flawed = {
            "access_tickets": lambda: perturb.change(oracle, opening, labels=[]),
            "ticket_priority_due": lambda: (  # without a ticket to fix: the new one's due date is today
                perturb.change(oracle, opening, due_date=today.isoformat()) if ex not in active
                else perturb.drop(oracle, perturb.on("tickets__update_ticket", key=ex_key))),
            "ticket_description": lambda: perturb.change(
                oracle, opening, description=ticket_desc(first_new, first_new["systems"][:-1])),
            "meetings_handed_over": lambda: perturb.change(  # the leaver stays on the first one handed over
                oracle, perturb.on("calendar__update_event"),
                lambda a: {**a, "attendees": [active[transfer[a["event_id"]]]["person"].email, *a["attendees"]]}),
            "meetings_cancelled": lambda: perturb.drop(oracle, perturb.on(  # the no-handover leaver's, or a 1:1
                "calendar__cancel_event", where=lambda a: cancel.get(a["event_id"]) == (
                    nohand_i if nohand_i is not None else next(iter(cancel.values()))))),
            "other_meetings_untouched": lambda: perturb.insert(oracle, ToolCall("calendar__cancel_event", {
                "event_id": next(k for k, e in by_id.items() if plan[k] == ("keep",) and e["organizer"] == me.email
                                 and e["attendees"][0] == active[0]["person"].email
                                 and e["start"][:10] <= active[0]["last"].isoformat())},
                "Cancel this one too."), before=first_mail),
            "handover_mails": lambda: perturb.change(oracle, first_mail, lambda a: {**a, "body": a["body"].replace(
                f"\n- Laptop to collect on the last day: asset {active[0]['asset']}.", "")}),
            "handover_mail_meetings": lambda: perturb.change(
                oracle, first_mail, lambda a: {**a, "body": re.sub(r"\n- Cancelled: [^\n]*", "", a["body"])}),
            "tickets_only_for_leavers": lambda: perturb.insert(oracle, withdrawn_ticket()),
            "mail_only_managers": lambda: perturb.insert(oracle, ToolCall("mail__send_message", {
                "to": [(withdrawn["manager"] if withdrawn else colleagues[3]).email],
                "subject": f"Offboarding: {(withdrawn or active[0])['person'].name}",
                "body": "Handover checklist to follow."}, "Let the other manager know too.")),
            "checked_before_opening": lambda: perturb.drop(oracle, perturb.on(
                "tickets__search_tickets", where=lambda a: a["query"]), count=None),
            "list_untouched": lambda: perturb.insert(oracle, ToolCall("sheets__write_cells", {
                "path": list_path, "sheet": "Leavers", "cells": {"L1": "Notes (processed)"}}, "Mark as processed.")),
        }

        # -- grading --------------------------------------------------------------------------------------------
        def mentions_leaver(t: dict, lv: dict) -> bool:
            text = f"{t['title']}\n{t['description']}"
            return (lv["id"].lower() in text.lower() or lv["person"].email in text.lower()
                    or _words(t["title"], lv["person"].name))

        def leaver_tickets(world, lv) -> list[dict]:
            return [t for t in trk.tickets(world, PROJECT) if mentions_leaver(t, lv)]

        def check_tickets(world, traj):
            for lv in active:
                ts = leaver_tickets(world, lv)
                if len(ts) != 1:
                    return False, f"{len(ts)} tickets for {lv['person'].name}"
                t = ts[0]
                problems = []
                if not _words(t["title"], lv["person"].name):
                    problems.append("title lacks the name")
                if t["team"] != TEAM:
                    problems.append(f"team {t['team']}")
                if LABEL not in [x.lower() for x in t["labels"]]:
                    problems.append(f"labels {t['labels']}")
                if t["type"] != "task" or t["status"] in trk.DONE_STATUSES["support"]:
                    problems.append(f"{t['type']} / {t['status']}")
                if problems:
                    return False, f"{t['key']}: {'; '.join(problems)}"
            return True

        def check_fields(world, traj):
            bad = []
            for lv in active:
                ts = leaver_tickets(world, lv)
                if not ts:
                    bad.append(f"no ticket for {lv['person'].name}")
                for t in ts:
                    if t["priority"] != priority(lv) or t["due_date"] != lv["last"].isoformat():
                        bad.append(f"{t['key']}: {t['priority']} due {t['due_date']}")
            return not bad, "; ".join(bad)

        def check_description(world, traj):
            bad = []
            for lv in active:
                ts = leaver_tickets(world, lv)
                if not ts:
                    bad.append(f"no ticket for {lv['person'].name}")
                for t in ts:
                    d = norm(t["description"])
                    missing = [s for s in lv["systems"] if norm(s) not in d]
                    if lv["person"].email not in d or missing:
                        bad.append(f"{t['key']}: missing {missing or lv['person'].email}")
            return not bad, "; ".join(bad)

        seeded_state: dict[str, dict] = {}
        for t in seeded_tickets:
            seeded_state[f"{PROJECT}-{t['number']}"] = {
                "title": t["title"], "description": t.get("description", ""), "status": t["status"],
                "priority": t["priority"], "team": t.get("team"), "assignee": t.get("assignee"),
                "labels": t.get("labels", []), "due_date": t.get("due_date"), "type": t["type"]}

        def tickets_only(world, traj):
            keys = ("title", "description", "status", "priority", "team", "assignee", "labels", "due_date", "type")
            now = {t["key"]: t for t in trk.tickets(world)}
            for k in seeded_keys:
                if k == ex_key and ex in active:  # the existing ticket is fixed, not left alone
                    continue
                if k not in now or any(now[k][f] != seeded_state[k][f] for f in keys):
                    return False, f"{k} changed"
            for k, t in now.items():
                if k in seeded_keys:
                    continue
                hits = [lv for lv in active if mentions_leaver(t, lv)]
                if len(hits) != 1 or any(mentions_leaver(t, o) for o in (withdrawn,) if o):
                    return False, f"{k} ({t['title']!r}) is not one leaver's ticket"
            return True

        def check_handed_over(world, traj):
            for eid, i in transfer.items():
                lv, ev = active[i], cal.event(world, eid)
                orig = seeded[eid]
                succ = lv["successor"]
                want = ({a for a, _ in orig["attendees"]} - {lv["person"].email}) | {succ.email}
                got = {a["email"] for a in ev["attendees"]}
                if ev["status"] != "active" or (ev["title"], ev["start"], ev["end"]) != (
                        orig["title"], orig["start"], orig["end"]):
                    return False, f"event {eid} was cancelled, renamed or moved"
                if got != want:
                    return False, f"event {eid} attendees {sorted(got)}, expected {sorted(want)}"
                m = HOST.search(ev["description"])
                named = m and (m.group("email").strip().lower() == succ.email
                               or norm(m.group("name")) == norm(succ.name))
                if not named or lv["person"].email in m.group(0).lower():
                    return False, f"event {eid}: host line is {m.group(0) if m else None!r}"
            return True

        def check_cancelled(world, traj):
            live = [eid for eid in cancel if cal.event(world, eid)["status"] != "cancelled"]
            extra = [eid for eid in seeded if eid not in cancel  # cancelling everything is no handover
                     and cal.event(world, eid)["status"] == "cancelled"]
            return not live and not extra, f"still active: {live}; cancelled but not due: {extra}"

        def meetings_untouched(world, traj):
            now = {e["id"]: e for e in cal.events(world, include_cancelled=True)}
            extra = [k for k in now if k > last_seed_id]
            if extra:
                return False, f"new events {extra}"
            for eid, snap in seeded.items():
                if eid in transfer or eid in cancel:
                    continue
                if snapshot(now[eid], me.email) != snap:
                    return False, f"event {eid} ({snap['title']!r}) changed"
            return True

        def leaver_mails(world, lv) -> list[dict]:
            mgr = lv["manager"].email
            return [m for m in mail.sent_messages(world) if mgr in m["to"] + m["cc"]]

        def check_mails(world, traj):
            for lv in active:
                ms = leaver_mails(world, lv)
                if len(ms) != 1:
                    return False, f"{len(ms)} handover mails to {lv['manager'].email} about {lv['person'].name}"
                text = f"{ms[0]['subject']}\n{ms[0]['body']}"
                ts = leaver_tickets(world, lv)
                problems = []
                if len(ts) != 1 or not mentions_code(text, ts[0]["key"]):
                    problems.append("no ticket number")
                if not mentions_date(text, lv["last"]):
                    problems.append("no last day")
                if not mentions_code(text, lv["asset"]):
                    problems.append("no asset tag")
                others = [o for o in leavers if o is not lv]  # one leaver's checklist, not everyone's
                if any(mentions_code(text, o["asset"]) for o in others) or any(
                        mentions_code(text, t["key"]) for o in others for t in leaver_tickets(world, o)):
                    problems.append("another leaver's asset tag or ticket")
                if problems:
                    return False, f"mail about {lv['person'].name}: {', '.join(problems)}"
            return True

        def check_mail_meetings(world, traj):
            for i, lv in enumerate(active):
                ms = leaver_mails(world, lv)
                if len(ms) != 1:
                    return False, f"{len(ms)} handover mails about {lv['person'].name}"
                text = f"{ms[0]['subject']}\n{ms[0]['body']}"
                titles = [by_id[k]["title"] for k, j in {**transfer, **cancel}.items() if j == i]
                missing = [t for t in titles if squash(t) not in squash(text)]
                if any(j == i for j in transfer.values()) and lv["successor"].first.lower() not in text.lower():
                    missing.append(f"new host {lv['successor'].name}")
                if missing:
                    return False, f"mail about {lv['person'].name} does not mention {missing}"
                foreign = [by_id[k]["title"] for k, j in {**transfer, **cancel}.items()
                           if j != i and _words(text, by_id[k]["title"])]
                if foreign:
                    return False, f"mail about {lv['person'].name} names other leavers' meetings {foreign}"
            return True

        managers = {lv["manager"].email for lv in active}

        def mail_only_managers(world, traj):
            sends = mails_sent(traj)
            if len(sends) > len(active) + 1:
                return False, f"{len(sends)} mails sent"
            for m in mail.sent_messages(world):
                rcpts = set(m["to"] + m["cc"])
                if not rcpts <= managers | {hr_lead.email}:
                    return False, f"mail {m['id']} went to {sorted(rcpts - managers - {hr_lead.email})}"
            return True

        def searched_first(world, traj):
            creates = [i for i, c in enumerate(traj.tool_calls)
                       if c.name == "tickets__create_ticket" and not c.is_error]
            if not creates or not any(len(leaver_tickets(world, lv)) == 1 for lv in active if lv is not ex):
                return False, "no access-removal ticket was opened"
            needles = ["access", "offboard", "removal", *(w.lower() for lv in active for w in (
                lv["id"], lv["person"].last, lv["person"].email))]
            searches = [i for i, c in enumerate(traj.tool_calls)
                        if c.name == "tickets__search_tickets" and not c.is_error and isinstance(c.arguments, dict)
                        and any(n in " ".join(str(v) for v in c.arguments.values()).lower() for n in needles)]
            ok = bool(searches) and searches[0] < creates[0]
            return ok, "" if ok else "no search for existing tickets before the first new one"

        def list_untouched(world, traj):
            hits = writes_to(traj, [norm_path(list_path), norm_path(prev_path)])
            changed = books.changed(world)
            return not hits and not changed, f"wrote {hits}, changed {changed}"

        criteria = [
            Criterion("access_tickets", "exactly one open access-removal ticket per confirmed leaver (the existing one "
                      "reused), titled with their name, team Identity & Access, label offboarding, type task",
                      "final_state", check_tickets, 2.0),
            Criterion("ticket_priority_due", "each leaver's ticket has the checklist priority (P1 for terminations) "
                      "and their current last day as due date", "final_state", check_fields, 1.0),
            Criterion("ticket_description", "each ticket's description gives the work email and every listed system",
                      "final_state", check_description, 1.0),
            Criterion("meetings_handed_over", "group meetings hosted by a leaver after their last day now have the "
                      "handover person as host and guest, the leaver removed, nothing else changed", "final_state",
                      check_handed_over, 2.0),
            Criterion("meetings_cancelled", "leavers' 1:1s after their last day, and all meetings of the leaver with "
                      "no handover person, are cancelled, and no other meeting is", "final_state", check_cancelled, 2.0),
            Criterion("other_meetings_untouched", "every other meeting (before the last day, only attended, the "
                      "withdrawn leaver's, the look-alike's) is unchanged and nothing was added", "final_state",
                      meetings_untouched, 1.0, guard=True),
            Criterion("handover_mails", "one mail to each leaver's manager with the last day, ticket number and "
                      "asset tag (no other leaver's)", "final_state", check_mails, 2.0),
            Criterion("handover_mail_meetings", "each handover mail names the meetings handed over (and to whom) and "
                      "those cancelled, and no other leaver's", "final_state", check_mail_meetings, 1.0),
            Criterion("tickets_only_for_leavers", "no ticket for the withdrawn leaver or anyone else; other tickets "
                      "unchanged", "final_state", tickets_only, 1.0, guard=True),
            Criterion("mail_only_managers", "mail went only to the confirmed leavers' managers (HR lead may be "
                      "copied)", "process", mail_only_managers, 1.0, guard=True),
            Criterion("checked_before_opening", "the tracker was searched for existing tickets before opening new "
                      "ones", "process", searched_first, 1.0, requires=("access_tickets",)),
            Criterion("list_untouched", "the leavers workbooks were not written", "process", list_untouched, 1.0,
                      guard=True),
        ]
        if level == 1:  # no meetings to hand over, no tool that edits the calendar or the list, no ticket to find
            criteria = [c for c in criteria if c.id not in (
                "meetings_handed_over", "meetings_cancelled", "handover_mail_meetings", "other_meetings_untouched",
                "list_untouched", "checked_before_opening")]
        if ex is None:  # no ticket exists to be found before opening new ones
            criteria = [c for c in criteria if c.id != "checked_before_opening"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=oracle,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"leavers": [lv["id"] for lv in active], "withdrawn": withdrawn["id"] if withdrawn else "",
                  "existing_ticket": ex_key if ex in active else "",
                  "transfer": sorted(transfer), "cancel": sorted(cancel),
                  # the trap mix drawn (empty: not in this instance)
                  "no_handover": active[nohand_i]["id"] if nohand_i is not None and level > 1 else "",
                  "termination": next((lv["id"] for lv in active if lv["reason"] == "Termination"), ""),
                  "namesake": namesake.email if namesake and leavers[0] in active else ""},
        )
