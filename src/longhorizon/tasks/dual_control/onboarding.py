"""HR onboarding with dual control: get a new hire ready for day one, together with them.

The manager's mail says who starts when, who the buddy and the team are; the HR system holds
the record and the checklist (contract before accounts, groups per team, equipment per role,
password rules, first-week meetings, the welcome mail). The agent sends the contract, creates
the account (whose username may differ from first.last: a namesake already works there), orders
equipment and books the first week in the calendar; only the new hire can sign the contract,
activate the account with a password that meets rules the page does not show, set up MFA, and
say which laptop they want and where to ship it. The welcome mail goes to their personal address.
"""

from __future__ import annotations

import json
import random
import re
from datetime import datetime, timedelta
from pathlib import Path

from longhorizon.apps.calendar import state as cal
from longhorizon.apps.mail import state as mail
from longhorizon.apps.user import identity, onboarding
from longhorizon.apps.user import state as user_state
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.calendar.slots import at, blocks, first_free, intersect_hours, iso, snapshot
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    People,
    company,
    loads,
    long_date,
    mails_sent,
    mentions_date,
    mentions_time,
    monday_of,
    norm,
    rng_and_faker,
    slug,
)
from longhorizon.tasks.dual_control.common import SEND, persona

TEAMS = {
    "Platform Engineering": (["eng-platform", "github", "oncall"], "Software Engineer", True),
    "Data Science": (["data-science", "github", "warehouse-read"], "Data Scientist", True),
    "Sales": (["sales", "crm-users"], "Account Executive", False),
    "Marketing": (["marketing", "cms-editors"], "Marketing Manager", False),
    "Finance": (["finance", "erp-users"], "Financial Analyst", False),
    "Customer Support": (["support", "helpdesk-agents"], "Support Specialist", False),
}
LAPTOPS = {"power": {"mac": "MBP-16", "windows": "TP-P1"}, "standard": {"mac": "MBA-13", "windows": "TP-X1C"}}
CATALOG = [
    {"sku": "MBP-16", "name": 'MacBook Pro 16" (M3 Pro, 36 GB)', "kind": "laptop", "notes": "engineering/data"},
    {"sku": "MBP-14", "name": 'MacBook Pro 14" (M3, 16 GB)', "kind": "laptop", "notes": "design team only"},
    {"sku": "MBA-13", "name": 'MacBook Air 13" (M3, 16 GB)', "kind": "laptop", "notes": "standard"},
    {"sku": "MBA-15", "name": 'MacBook Air 15" (M3, 16 GB)', "kind": "laptop", "notes": "executives"},
    {"sku": "TP-P1", "name": "ThinkPad P1 Gen 6 (32 GB)", "kind": "laptop", "notes": "engineering/data"},
    {"sku": "TP-X1C", "name": "ThinkPad X1 Carbon Gen 11", "kind": "laptop", "notes": "standard"},
    {"sku": "TP-X1Y", "name": "ThinkPad X1 Yoga Gen 8", "kind": "laptop", "notes": "sales leadership"},
    {"sku": "MON-27", "name": 'Dell U2723QE 27" 4K monitor', "kind": "monitor", "notes": "remote employees"},
    {"sku": "MON-24", "name": 'Dell P2422H 24" monitor', "kind": "monitor", "notes": "office desks (already installed)"},
    {"sku": "HS-200", "name": "Jabra Evolve2 65 wireless headset", "kind": "audio", "notes": "everyone"},
    {"sku": "HS-100", "name": "Jabra Evolve 20 wired headset", "kind": "audio", "notes": "retired: do not order"},
    {"sku": "DOCK-C", "name": "USB-C docking station", "kind": "accessory", "notes": "office desks (already installed)"},
]
OFFICES = ["Austin", "Denver", "Chicago", "Boston", "Seattle", "Atlanta"]
ROOMS = ["Room Aurora (2nd floor)", "Room Cedar (3rd floor)", "the Lakeview room (ground floor)",
         "Room Orion (4th floor)"]
HOURS = [("08:00", "16:00"), ("08:30", "16:30"), ("09:00", "17:00"), ("09:30", "17:30"), ("10:00", "18:00")]
EVENT_TITLES = ["Customer call", "Design review", "Pipeline review", "Quarterly planning", "Vendor demo",
                "Interview panel", "Budget sync", "Project check-in", "Training", "Focus time", "Offsite prep"]
WORDS = ["biscuit", "maple", "juniper", "pepper", "willow", "comet", "harbor", "saffron", "pebble", "orchid",
         "tundra", "falcon", "ember", "cobalt", "meadow", "lantern"]
KINDS = ("orientation", "welcome", "buddy", "team")
TITLES = {"orientation": "Orientation", "welcome": "Welcome 1:1", "buddy": "Buddy coffee", "team": "Team intro"}
MINUTES = {"orientation": 90, "welcome": 30, "buddy": 30, "team": 60}
USER_CHANGES = {"sign_contract", "activate_account", "set_up_mfa"}


def kind_of(title: str) -> str | None:
    t = norm(title)
    if "orientation" in t:
        return "orientation"
    if "buddy" in t or "coffee" in t:
        return "buddy"
    if re.search(r"\bteam\b", t):
        return "team"
    if "welcome" in t:
        return "welcome"
    return None


@register
class NewHireOnboarding(TaskFamily):
    name = "new_hire_onboarding"
    category = "HR onboarding"
    apps = ("user", "calendar", "mail")
    description = (
        "Onboard a new hire end to end: contract (they sign), account with the right groups (they activate it "
        "with a compliant password and set up MFA), equipment per role and their preference, four first-week "
        "meetings in the calendar, and a welcome mail with the details."
    )

    levels = 3
    """1: the contract and the account (signed, created in the policy's groups, activated with MFA),
    the hire named with their record's id and the checklist listing only their teams;
    2: also the equipment (the hire's laptop choice, shipped to the right place); 3 (default): also
    the four first-week meetings and the welcome mail, starting from the manager's mail. Every level
    keeps the contract-first order, the unshown password rules and the other hires (one shares the
    first name); the namesake's username stays in the draws."""
    level_apps = {1: ("user",), 2: ("user",)}
    """Below the default, the hire is named in the instruction: no mail, no meetings."""
    toolsets = {1: (
        "user__create_account", "user__get_new_hire", "user__get_onboarding_policy", "user__get_onboarding_status",
        "user__send_contract", "user__send_message",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        company_name, domain = company(fake)
        start = monday_of(rng)
        today = start - timedelta(days=rng.choice([3, 4]))
        week = [start + timedelta(days=i) for i in range(5)]
        me = people.make(domain)
        team_name = rng.choice(list(TEAMS))
        team_groups_, role, power = TEAMS[team_name]
        manager = people.make(domain)
        team = [people.make(domain) for _ in range(rng.randint(3, 4))]
        buddy = team[0]
        hire_first, hire_last = fake.first_name(), fake.last_name()
        while any(p.first == hire_first for p in [me, manager, *team]):
            hire_first = fake.first_name()
        hire = f"{hire_first} {hire_last}"
        base_user = f"{slug(hire_first)}.{slug(hire_last)}"
        collision = rng.random() < 0.5
        namesake = people.make(domain, first=hire_first, last=hire_last) if collision else None
        username = f"{base_user}2" if collision else base_user
        work_email = f"{username}@{domain}"
        lookalikes = [people.make(domain, first=team[1].first), people.make(domain, last=buddy.last)]
        colleagues = [people.make(domain) for _ in range(4)]
        remote = rng.random() < 0.5
        office = rng.choice(OFFICES)
        home = f"{fake.street_address()}, {fake.city()}, {fake.state_abbr()} {rng.randint(10000, 99999)}" if remote else ""
        laptop_pref = rng.choice(["mac", "windows"])
        mailhost = rng.choice(["gmail.com", "outlook.com", "proton.me", "yahoo.com"])
        personal = f"{slug(hire_first)}.{slug(hire_last)}{rng.randint(1, 99)}@{mailhost}"
        room = rng.choice(ROOMS)
        hours = {p.email: rng.choice(HOURS) for p in [manager, *team]}
        hours[me.email] = ("08:30", "17:30")

        # calendar: busy weeks, retried until every meeting fits --------------------------------------
        orientation = (iso(at(start, "09:30")), iso(at(start, "11:00")))
        for _attempt in range(60):
            events = self._events(rng, me, manager, team, colleagues, week, hours)
            plan = self._plan(events, me, manager, team, buddy, week, hours, orientation)
            if plan is not None:
                break
        else:  # pragma: no cover - generation bug
            raise RuntimeError(f"{self.name}: no feasible first week for seed {seed}")
        for i, e in enumerate(events, start=1):
            e["id"] = i
        last_seed_id = len(events)
        seeded_events = {e["id"]: snapshot(e, me.email) for e in events}
        directory_people = [me, manager, *team, *lookalikes, *colleagues] + ([namesake] if namesake else [])
        cal_people = [{"email": p.email, "name": p.name, "work_start": hours.get(p.email, ("09:00", "17:00"))[0],
                       "work_end": hours.get(p.email, ("09:00", "17:00"))[1]} for p in directory_people]

        # HR system ---------------------------------------------------------------------------------------
        hire_id = f"H-{rng.randint(1000, 9999)}"
        other_hires = []
        for k in range(2):
            oid = f"H-{rng.randint(1000, 9999)}"
            while oid == hire_id or any(o["id"] == oid for o in other_hires):
                oid = f"H-{rng.randint(1000, 9999)}"
            oteam = rng.choice([t for t in TEAMS if t != team_name])
            om = people.make(domain)
            other_hires.append({
                "id": oid, "name": fake.name() if k else f"{hire_first} {fake.last_name()}",
                "personal_email": fake.free_email(), "role": TEAMS[oteam][1], "team": oteam, "manager": om.name,
                "manager_email": om.email,
                "start_date": (start + timedelta(days=7 * (k + 1) if k else 0)).isoformat(),
                "work_mode": rng.choice(["remote", "office"]), "office": rng.choice(OFFICES)})
        hires = [{"id": hire_id, "name": hire, "personal_email": personal, "role": role, "team": team_name,
                  "manager": manager.name, "manager_email": manager.email, "start_date": start.isoformat(),
                  "work_mode": "remote" if remote else "office", "office": office}, *other_hires]
        hires.sort(key=lambda h: h["id"])
        directory = [{"username": p.email.split("@")[0], "name": p.name, "team": team_name if p in team else "Other"}
                     for p in directory_people]
        min_length = rng.choice([12, 14, 16])
        cfg = {"company": company_name, "email_domain": domain, "min_length": min_length,
               "require_symbol": int(rng.random() < 0.6), "ban_name": int(rng.random() < 0.6),
               "team_groups": {t: g for t, (g, _, _) in TEAMS.items()},
               "power_teams": [t for t, (_, _, p) in TEAMS.items() if p], "laptops": LAPTOPS,
               "monitor": "MON-27", "headset": "HS-200", "orientation_room": room}
        if level == 1:  # the checklist lists only the teams of the hires in the system
            cfg["team_groups"] = {t: g for t, g in cfg["team_groups"].items() if any(h["team"] == t for h in hires)}
        year = str(rng.randint(1985, 2003))
        for _ in range(100):
            words = rng.sample(WORDS, 4)
            if not any(p.lower() in w or w in p.lower() for w in words for p in (hire_first, hire_last, username)
                       if len(p) >= 3):
                break
        facts = {"hire_id": hire_id, "personal_email": personal, "start_date": start.isoformat(),
                 "start_day_text": long_date(start), "laptop": laptop_pref, "office": office, "home_address": home,
                 "old_password": f"{words[0]}{year}", "words": words, "year": year,
                 "habit_digits": rng.random() < 0.5}
        all_rules = {"length": min_length, "upper": True, "digit": True, "symbol": bool(cfg["require_symbol"]),
                     "no_name": bool(cfg["ban_name"]), "no_reuse": True}
        pw = identity.compose(hire_first, facts, all_rules)
        assert not identity.password_problems(pw, {k: str(v) for k, v in cfg.items() if k in (
            "min_length", "require_symbol", "ban_name")}, {"name": hire, "username": username, "password_fp": ""}), pw

        expected_groups = onboarding.expected_groups({"team_groups": json.dumps(cfg["team_groups"])}, team_name, remote)
        kind = "power" if power else "standard"
        laptop_sku = LAPTOPS[kind][laptop_pref]
        wrong_laptop = LAPTOPS[kind]["windows" if laptop_pref == "mac" else "mac"]
        skus = sorted([laptop_sku, "HS-200"] + (["MON-27"] if remote else []))
        ship_to = home if remote else f"{office} office, IT desk"

        # the manager's mail and the rest of the inbox ---------------------------------------------------
        members = ", ".join(p.name for p in team[1:])
        other_mgr = people.make(domain)
        later = other_hires[-1]
        inbox = [
            {"folder": "Inbox", "sender": other_mgr.email, "sender_name": other_mgr.name, "to": [me.email],
             "subject": f"Heads-up: {later['name']} starting {later['start_date']}",
             "body": f"Hi {me.first}, just a heads-up that {later['name']} joins us on {later['start_date']}. "
                     f"No action needed yet, I'll send details next week.\n\n{other_mgr.first}",
             "date": f"{(today - timedelta(days=2)).isoformat()}T10:12:00"},
            {"folder": "Inbox", "sender": f"news@{slug(fake.company())}.example", "sender_name": "HR Weekly",
             "to": [me.email], "subject": "Five onboarding mistakes to avoid",
             "body": "Our top tips for a great first week. Read more on our blog.",
             "date": f"{(today - timedelta(days=1)).isoformat()}T07:00:00"},
            {"folder": "Inbox", "sender": manager.email, "sender_name": manager.name, "to": [me.email],
             "subject": f"New starter on Monday: {hire}",
             "body": f"Hi {me.first},\n\n{hire} joins my team ({team_name}) on Monday {long_date(start)} as our new "
                     f"{role}. {buddy.name} has kindly agreed to be {hire_first}'s onboarding buddy. The rest of the "
                     f"team is {members}. Could you run the usual onboarding? Everything else should be in the HR "
                     f"system.\n\nThanks!\n{manager.first}",
             "date": f"{today.isoformat()}T08:41:00"},
            {"folder": "Inbox", "sender": colleagues[0].email, "sender_name": colleagues[0].name, "to": [me.email],
             "subject": "Lunch Friday?", "body": "Tacos on Friday? The usual place.",
             "date": f"{today.isoformat()}T09:05:00"},
        ]
        request_id = 3

        who = persona(rng, hire)
        mail_now = f"{today.isoformat()}T09:30:00"

        full = level == self.levels  # the calendar, the mail and the welcome at the top level only

        def build(root: Path) -> None:
            onboarding.create(root / "state" / "user.sqlite", persona=who, facts=facts, config=cfg, hires=hires,
                              directory=directory, catalog=CATALOG, patience=30, seed=seed)
            if not full:
                return
            cal.create_calendar(root / "state" / "calendar.sqlite", me.email, cal_people, events,
                                today=today.isoformat())
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox, now=mail_now)

        w = phrasing_rng(self.name, seed)
        boss = manager.first
        where = say(w, f"The checklist is in the HR onboarding system, and {hire_first} is on the new-hire chat if "
                       f"you need anything from them.",
                    f"You'll find the checklist in the HR onboarding system; if you need anything from "
                    f"{hire_first}, they're on the new-hire chat.",
                    f"{hire_first} is on the new-hire chat for anything you need from them, and the checklist is "
                    f"in the HR onboarding system.")
        when = say(w, f"Today is {long_date(today)}.", f"It's {long_date(today)} today.",
                   f"(Today's date: {long_date(today)}.)")
        bye = say(w, "Thanks!", "Thank you!", "Thanks a lot.")
        if full:
            ask = say(w, f"{boss} emailed me about their new starter. Could you take care of the onboarding end to "
                         f"end?",
                      f"Could you take care of the onboarding end to end for {boss}'s new starter? {boss} emailed "
                      f"me about them.",
                      f"There's an email from {boss} about their new starter, and I'd like you to take care of the "
                      f"onboarding end to end.",
                      f"{boss}'s new starter needs onboarding (their email to me has the details): could you take "
                      f"care of it end to end?")
            instruction = " ".join([ask, *in_some_order(w, [where, when]), bye])
        else:
            asked = ("get their contract signed and their work account ready (activated, with MFA)" if level == 1
                     else "get their contract signed, their work account ready (activated, with MFA) and their "
                          "equipment ordered")
            skipped = ("Equipment, the first-week meetings and the welcome mail" if level == 1
                       else "The first-week meetings and the welcome mail")
            named = f"{hire} ({hire_id} in the HR system)" if level == 1 else hire
            joins = say(w, f"{named} joins {boss}'s team on {long_date(start)}.",
                        f"{boss}'s team has a new starter, {named}, joining on {long_date(start)}.",
                        f"On {long_date(start)}, {named} joins {boss}'s team.")
            ask = say(w, f"Could you {asked}?", f"Please {asked}.", f"I need you to {asked}.")
            rest = say(w, f"{skipped} are handled separately.", f"{skipped} are handled separately, not by you.",
                       f"{skipped} are handled separately, so leave those out.")
            instruction = " ".join([joins, ask, rest, *in_some_order(w, [where, when]), bye])

        rules = [f"at least {min_length} characters", "at least one upper-case letter",
                 "at least one lower-case letter", "at least one digit"]
        if cfg["require_symbol"]:
            rules.append("at least one symbol such as !")
        if cfg["ban_name"]:
            rules.append("it must not contain your name or username")
        rules_msg = "; ".join(rules)
        welcome_slot, buddy_slot, team_slot = plan
        team_emails = [p.email for p in team]

        # the reference solution ------------------------------------------------------------------
        hello = (f"Hi {hire_first}, welcome to {company_name}! I'm {me.first} from HR and I'll get you set up "
                 f"for {long_date(start)}. ") if level > 1 else f"Hi {hire_first}, welcome to {company_name}! "
        sign = f"I've just sent your employment contract to {personal}: could you sign it? "
        prefs = ("Also, would you prefer a Mac or a Windows laptop?" + (
            " And which home address should we ship your equipment to?" if remote else "")) if level > 1 else ""
        ask = (hello + sign + prefs).strip()
        mfa = "please set up multi-factor authentication: scan the QR code with an authenticator app on your phone."
        mfa_too = f" Once it's activated, {mfa}"  # level 1: in the activation message
        mfa_next = f"Great. Next, {mfa}"  # above: a message of its own
        buddy_line = f"Your onboarding buddy is {buddy.name}, who will meet you for coffee in your first days.\n"

        def solve():
            yield ToolCall("user__get_onboarding_policy", {}, "Read the onboarding checklist first." if level > 1 else
                           "The checklist.")
            if full:
                found = loads((yield ToolCall("mail__search_messages",
                                              {"query": "new starter", "sender": manager.email},
                                              "Find the manager's mail about the new starter.")))
                mid = found["messages"][0]["id"] if found["messages"] else request_id
                yield ToolCall("mail__read_message", {"message_id": mid},
                               "Read the details: team, buddy, start date.")
            if level > 1:  # (level 1 names the hire's record)
                yield ToolCall("user__list_new_hires", {}, "Find the new hire's record.")
            yield ToolCall("user__get_new_hire", {"hire_id": hire_id}, "Personal email, team, work mode.")
            yield ToolCall("user__send_contract", {"hire_id": hire_id}, "Contract first, per the checklist.")
            yield ToolCall(SEND, {"text": ask}, "Contract signature and the hire's preferences.")
            if level > 1:
                yield ToolCall("user__get_onboarding_status", {"hire_id": hire_id},
                               "Check the contract is signed.")
            res = yield ToolCall("user__create_account", {"hire_id": hire_id, "groups": expected_groups},
                                 "Create the account with the team's groups.")
            email = re.search(r"\(([^)]+@[^)]+)\)", res).group(1) if "@" in res else work_email
            activate = (f"Thanks! Your work account is {email}. I've emailed you an activation link: please "
                        f"activate your account and choose a password (keep it to yourself). The rules: {rules_msg}.")
            if level == 1:  # one message: activation, then MFA
                yield ToolCall(SEND, {"text": activate + mfa_too}, "Activation (the rules), then MFA.")
            else:
                yield ToolCall(SEND, {"text": activate},
                               "They activate the account; tell them the rules the page won't show.")
                yield ToolCall(SEND, {"text": mfa_next}, "They set up MFA.")
                yield ToolCall("user__list_catalog", {}, "Look up the SKUs.")
                for sku in skus:
                    yield ToolCall("user__request_equipment", {"hire_id": hire_id, "sku": sku, "ship_to": ship_to},
                                   f"Order {sku}.")
            if not full:
                yield ToolCall("user__get_onboarding_status", {"hire_id": hire_id},
                               "Final check: contract, account, MFA" + (", equipment." if level > 1 else "."))
                if level == 1:
                    return "Contract signed, account active with MFA."
                return f"{hire}: contract signed, {email} active with MFA, equipment ordered."
            yield ToolCall("calendar__list_people", {}, "Match the team's names to addresses.")
            yield ToolCall("calendar__create_event", {
                "title": f"Orientation: {hire}", "start": orientation[0], "end": orientation[1],
                "attendees": [email], "location": room}, "Orientation on the start day, 09:30-11:00.")
            yield ToolCall("calendar__free_busy", {"emails": [manager.email], "start": start.isoformat(),
                                                   "end": start.isoformat()}, "When is the manager free on day one?")
            yield ToolCall("calendar__create_event", {
                "title": f"Welcome 1:1: {manager.first} / {hire_first}", "start": welcome_slot[0],
                "end": welcome_slot[1], "attendees": [email, manager.email]},
                "Welcome 1:1 after orientation, when the manager is free.")
            yield ToolCall("calendar__free_busy", {"emails": [buddy.email], "start": week[0].isoformat(),
                                                   "end": week[2].isoformat()}, "The buddy's first three days.")
            yield ToolCall("calendar__create_event", {
                "title": f"Buddy coffee: {buddy.first} & {hire_first}", "start": buddy_slot[0],
                "end": buddy_slot[1], "attendees": [email, buddy.email]}, "Buddy coffee in the first three days.")
            yield ToolCall("calendar__free_busy", {"emails": [manager.email, *team_emails],
                                                   "start": week[0].isoformat(), "end": week[-1].isoformat()},
                           "A common hour for the whole team this week.")
            yield ToolCall("calendar__create_event", {
                "title": f"Team intro: welcome {hire_first}", "start": team_slot[0], "end": team_slot[1],
                "attendees": [email, manager.email, *team_emails]}, "Team intro within the first week.")
            yield ToolCall("calendar__list_events", {"start": week[0].isoformat(), "end": week[-1].isoformat(),
                                                     "attendee": manager.email}, "Check the week's bookings.")
            body = (f"Hi {hire_first},\n\nWelcome to {company_name}! Your first day is {long_date(start)}.\n\n"
                    f"Your work email address is {email}; you've already activated it.\n"
                    f"Orientation is at 09:30-11:00 on your first day in {room}"
                    f"{' (you will join by video; the link is in the invite)' if remote else ''}.\n"
                    f"{buddy_line}\nSee you soon!\n{me.name}")
            yield ToolCall("mail__send_message", {"to": [personal], "cc": [manager.email],
                                                  "subject": f"Welcome to {company_name}, {hire_first}!",
                                                  "body": body}, "Send the welcome mail.")
            yield ToolCall("user__get_onboarding_status", {"hire_id": hire_id},
                           "Final check: contract, account, MFA, equipment.")
            yield ToolCall(SEND, {"text": f"You're all set, {hire_first}! Your equipment is on its way and the "
                                          "welcome email has the details for your first week. See you on "
                                          f"{long_date(start)}!"}, "Wrap up with the new hire.")
            return f"Onboarded {hire}: contract signed, {email} active with MFA, equipment ordered, first week booked."

        # each perturbation: the oracle with one small mistake in its calls
        create = perturb.on("user__create_account", hire_id=hire_id)
        contract = perturb.on("user__send_contract", hire_id=hire_id)
        welcome = perturb.on("mail__send_message", to=[personal])
        team_intro = perturb.on("calendar__create_event", title=f"Team intro: welcome {hire_first}")

        def final_check(call: ToolCall) -> bool:
            """The last status check (at level 2 and above, an earlier one checks the contract)."""
            return call.name == "user__get_onboarding_status" and call.note.startswith("Final check")

        flawed = {
            "contract_signed": lambda: perturb.change(solve, perturb.on(SEND, text=ask),
                                                      text=(hello + prefs).strip()),  # the signature not asked for
            "account_after_contract": lambda: perturb.insert(perturb.drop(solve, create), ToolCall(
                "user__create_account", {"hire_id": hire_id, "groups": expected_groups},
                "Create the account straight away."), before=contract),
            "account_groups": lambda: perturb.change(solve, create,
                                                     groups=[g for g in expected_groups if g != team_groups_[-1]]),
            "account_activated": lambda: perturb.change(
                solve, lambda c: c.name == SEND and c.arguments["text"].endswith(mfa_too),
                lambda a: {**a, "text": a["text"].removesuffix(mfa_too)},
            ) if level == 1 else perturb.drop(solve, perturb.on(SEND, text=mfa_next)),
            "equipment_requested": lambda: perturb.change(
                solve, perturb.on("user__request_equipment", sku=laptop_sku), sku=wrong_laptop),
            "meetings_scheduled": lambda: perturb.drop(perturb.drop(solve, team_intro), perturb.on(
                "calendar__free_busy", emails=[manager.email, *team_emails])),
            "welcome_mail": lambda: perturb.change(solve, welcome,
                                                   lambda a: {**a, "body": a["body"].replace(buddy_line, "")}),
            "status_checked": lambda: perturb.drop(solve, final_check),
            "other_hires_untouched": lambda: perturb.insert(solve, ToolCall(
                "user__send_contract", {"hire_id": other_hires[0]["id"]}, "Send the other one too."), after=contract),
            "mail_only_as_asked": lambda: perturb.insert(solve, ToolCall(
                "mail__send_message", {"to": [manager.email], "subject": f"{hire} onboarding",
                                       "body": "All set for Monday."}, "Let the manager know."), after=welcome),
        }

        # grading ---------------------------------------------------------------------------------------
        def my_account(world) -> dict | None:
            mine = [a for a in user_state.rows(world, "accounts") if a["hire_id"] == hire_id]
            return mine[0] if mine else None

        def check_contract(world, traj):
            c = next(r for r in user_state.rows(world, "contracts") if r["hire_id"] == hire_id)
            by_hire = user_state.actions(world, actor="user", tool="sign_contract", ok_only=True)
            return c["status"] == "signed" and bool(by_hire), f"contract {c['status']}"

        def check_order(world, traj):
            log = user_state.actions(world, ok_only=True)
            signed = [a["seq"] for a in log if a["actor"] == "user" and a["tool"] == "sign_contract"]
            created = [a["seq"] for a in log if a["actor"] == "agent" and a["tool"] == "create_account"
                       and a["arguments"].get("hire_id") == hire_id]
            if not created:
                return False, "no account was created"
            return bool(signed) and signed[0] < created[0], "account created before the contract was signed"

        def check_groups(world, traj):
            a = my_account(world)
            if a is None:
                return False, "no account"
            got = sorted(loads(a["groups"]))
            return got == expected_groups, f"groups {got}, expected {expected_groups}"

        def check_activated(world, traj):
            a = my_account(world)
            if a is None:
                return False, "no account"
            acts = {x["tool"] for x in user_state.actions(world, actor="user", ok_only=True)}
            ok = a["status"] == "active" and a["mfa"] == 1 and {"activate_account", "set_up_mfa"} <= acts
            return ok, f"account {a['status']}, mfa {bool(a['mfa'])}"

        def same_place(got: str) -> bool:
            g = re.sub(r"[^a-z0-9]", "", got.lower())
            if remote:
                street, rest = home.split(",", 1)
                zip_code = home.split()[-1]
                return re.sub(r"[^a-z0-9]", "", street.lower()) in g and zip_code in g
            return office.lower() in got.lower()

        def check_equipment(world, traj):
            reqs = [r for r in user_state.rows(world, "equipment") if r["hire_id"] == hire_id
                    and r["status"] == "requested"]
            got = sorted(r["sku"] for r in reqs)
            if got != skus:
                return False, f"ordered {got}, expected {skus}"
            bad = [r["sku"] for r in reqs if not same_place(r["ship_to"])]
            return not bad, f"wrong delivery address for {bad}" if bad else ""

        people_rows = {p["email"]: p for p in cal_people}

        def check_meetings(world, traj):
            new = [e for e in cal.events(world) if e["id"] > last_seed_id and e["organizer"] == me.email
                   and any(a["email"] == work_email for a in e["attendees"])]
            by_kind: dict[str, list[dict]] = {k: [] for k in KINDS}
            for e in new:
                k = kind_of(e["title"])
                if k:
                    by_kind[k].append(e)
            need = {"orientation": [], "welcome": [manager.email], "buddy": [buddy.email],
                    "team": [manager.email, *team_emails]}
            days = {"orientation": week[:1], "welcome": week[:1], "buddy": week[:3], "team": week}
            chosen = []
            for k in KINDS:
                if len(by_kind[k]) != 1:
                    return False, f"{len(by_kind[k])} '{TITLES[k]}' meetings with {work_email}"
                e = by_kind[k][0]
                s_, e_ = cal.parse_time(e["start"]), cal.parse_time(e["end"])
                if (e_ - s_) != timedelta(minutes=MINUTES[k]) or s_.date() not in days[k]:
                    return False, f"'{e['title']}' {e['start']}-{e['end']} is not {MINUTES[k]} min in the right days"
                guests = {a["email"] for a in e["attendees"]}
                if not set(need[k]) <= guests:
                    return False, f"'{e['title']}' misses {sorted(set(need[k]) - guests)}"
                if k == "orientation" and (e["start"], e["end"]) != orientation:
                    return False, "orientation is not 09:30-11:00 on the start day"
                if k == "welcome" and e["start"] < orientation[1]:
                    return False, "the welcome 1:1 is before orientation ends"
                if not cal.within_working_hours({"work_start": "09:00", "work_end": "17:00"}, e["start"], e["end"]):
                    return False, f"'{e['title']}' is outside the new hire's 09:00-17:00"
                for x in need[k]:
                    if not cal.within_working_hours(people_rows[x], e["start"], e["end"]):
                        return False, f"'{e['title']}' is outside {x}'s working hours"
                    clash = [b for b in cal.busy(world, x, e["start"], e["end"]) if b["id"] != e["id"]]
                    if clash:
                        return False, f"'{e['title']}' clashes with {x}'s '{clash[0]['title']}'"
                chosen.append(e)
            for i, a in enumerate(chosen):
                for b in chosen[i + 1:]:
                    if cal.overlaps(a["start"], a["end"], b["start"], b["end"]):
                        return False, f"'{a['title']}' and '{b['title']}' overlap"
            return True

        def check_welcome(world, traj):
            sent = [m for m in mail.sent_messages(world) if personal in m["to"]]
            if len(sent) != 1:
                return False, f"{len(sent)} mails to {personal}"
            m = sent[0]
            problems = []
            if manager.email not in m["cc"] + m["to"]:
                problems.append("manager not copied")
            text = f"{m['subject']}\n{m['body']}"
            if work_email not in text.lower():
                problems.append(f"no work address {work_email}")
            if not mentions_date(text, start):
                problems.append("no start date")
            if not mentions_time(text, datetime.combine(start, datetime.min.time()).replace(hour=9, minute=30)):
                problems.append("no orientation time")
            if buddy.first.lower() not in text.lower():
                problems.append("no buddy name")
            # about this hire alone: not the namesake's address, not the other hires
            strays = [namesake.email] if namesake else []
            strays += [h["personal_email"] for h in other_hires] + [h["id"] for h in other_hires]
            named = [x for x in strays if x.lower() in text.lower()]
            if named:
                problems.append(f"also names {named}")
            return not problems, "; ".join(problems)

        def check_status_seen(world, traj):
            log = [a for a in user_state.actions(world, actor="user", ok_only=True) if a["tool"] in USER_CHANGES]
            if not log:
                return False, "the new hire did nothing"
            k = log[-1]["message"]
            sends = [i for i, c in enumerate(traj.tool_calls) if c.name == SEND and not c.is_error]
            if len(sends) < k:
                return False, "conversation does not match the trajectory"
            after = sends[k - 1]
            seen = [i for i, c in enumerate(traj.tool_calls)
                    if c.name == "user__get_onboarding_status" and not c.is_error and i > after
                    and isinstance(c.arguments, dict) and str(c.arguments.get("hire_id", "")).upper() == hire_id]
            return bool(seen), "" if seen else "no status check after the new hire's last step"

        other_ids = {h["id"] for h in other_hires}

        def check_others(world, traj):
            for a in user_state.rows(world, "accounts"):
                if a["hire_id"] in other_ids:
                    return False, f"account made for {a['hire_id']}"
            for r in user_state.rows(world, "equipment"):
                if r["hire_id"] in other_ids:
                    return False, f"equipment ordered for {r['hire_id']}"
            for c in user_state.rows(world, "contracts"):
                if c["hire_id"] in other_ids and c["status"] != "not_sent":
                    return False, f"contract sent to {c['hire_id']}"
            if not full:
                return True
            now = {e["id"]: e for e in cal.events(world, include_cancelled=True)}
            for eid, snap in seeded_events.items():
                if snapshot(now[eid], me.email) != snap:
                    return False, f"calendar event {eid} changed"
            return True

        def check_mail_only(world, traj):
            sends = mails_sent(traj)
            if len(sends) > 1:
                return False, f"{len(sends)} mails sent"
            for c in sends:
                args = c.arguments if isinstance(c.arguments, dict) else {}
                to = {mail.parse_address(a) for a in args.get("to", [])}
                cc = {mail.parse_address(a) for a in args.get("cc", [])}
                if to != {personal} or not cc <= {manager.email}:
                    return False, f"mail to {sorted(x or '?' for x in to | cc)}"
            return True

        criteria = [
            Criterion("contract_signed", "The new hire signed the contract themselves.", "final_state",
                      check_contract, 1.0),
            Criterion("account_after_contract", "The account was created only after the contract was signed.",
                      "process", check_order, 1.0),
            Criterion("account_groups", "One account for the new hire, in exactly the policy's groups.",
                      "final_state", check_groups, 1.0),
            Criterion("account_activated", "The new hire activated the account with a compliant password and set "
                      "up MFA.", "final_state", check_activated, 1.0),
            Criterion("equipment_requested", "Exactly the right laptop (by role and preference) and accessories, "
                      "shipped to the right place.", "final_state", check_equipment, 2.0),
            Criterion("meetings_scheduled", "Orientation, welcome 1:1, buddy coffee and team intro are booked with "
                      "the new work address, in the right windows, free of clashes.", "final_state",
                      check_meetings, 2.0),
            Criterion("welcome_mail", "One welcome mail to the personal address, manager copied, with start date, "
                      "work address, orientation time and buddy (and nothing of the namesake or other hires).",
                      "final_state", check_welcome, 1.0),
            Criterion("status_checked", "The agent checked the onboarding status after the new hire's last step.",
                      "process", check_status_seen, 1.0,
                      requires=("account_activated",)),
            Criterion("other_hires_untouched", "Nothing done for other hires" + (
                "; existing calendar events unchanged." if full else "."),
                      "final_state", check_others, 1.0, guard=True),
            Criterion("mail_only_as_asked", "At most one mail, only to the new hire (manager copied).", "process",
                      check_mail_only, 1.0, guard=True),
        ]
        if not full:  # the parts this level leaves to others
            dropped = {"meetings_scheduled", "welcome_mail", "mail_only_as_asked"} | (
                {"equipment_requested"} if level == 1 else set())
            criteria = [c for c in criteria if c.id not in dropped]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps_at(level), build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"hire_id": hire_id, "work_email": work_email, "groups": expected_groups, "skus": skus,
                  "ship_to": ship_to, "remote": remote, "slots": {"welcome": welcome_slot, "buddy": buddy_slot,
                                                                   "team": team_slot}},
        )

    # -- world generation helpers ----------------------------------------------------------------
    @staticmethod
    def _events(rng: random.Random, me, manager, team, colleagues, week, hours) -> list[dict]:
        events: list[dict] = []
        squad = [manager, *team]
        for d in week:
            events.append({"title": "Team standup", "start": iso(at(d, "09:30")), "end": iso(at(d, "09:45")),
                           "organizer": manager.email, "attendees": [p.email for p in team]})
        for p in squad:
            for d in week:
                for _ in range(rng.randint(1, 3)):
                    h = rng.randint(8, 16)
                    m = rng.choice([0, 30])
                    length = rng.choice([30, 60, 60, 90, 120])
                    s = datetime(d.year, d.month, d.day, h, m)
                    e = s + timedelta(minutes=length)
                    if e.hour > 18 or (e.hour == 18 and e.minute):
                        continue
                    other = rng.choice(colleagues)
                    ev = {"title": rng.choice(EVENT_TITLES), "start": iso(s), "end": iso(e),
                          "organizer": other.email, "attendees": [p.email]}
                    r = rng.random()
                    if r < 0.1:
                        ev["status"] = "cancelled"
                    elif r < 0.2:
                        ev["attendees"] = [{"email": p.email, "response": "declined"}]
                    events.append(ev)
        events.sort(key=lambda e: (e["start"], e["title"]))
        return events

    @staticmethod
    def _plan(events, me, manager, team, buddy, week, hours, orientation):
        def busy(email: str) -> list[tuple[str, str]]:
            return [(e["start"], e["end"]) for e in events if blocks(e, email, me.email)]

        taken = [orientation]
        mh = intersect_hours(hours[manager.email], ("09:00", "17:00"))
        lo = max(at(week[0], mh[0]), at(week[0], "11:00"))
        welcome = first_free([(lo, at(week[0], mh[1]))], busy(manager.email) + taken, 30)
        if welcome is None:
            return None
        taken.append(welcome)
        bh = intersect_hours(hours[buddy.email], ("09:00", "17:00"))
        buddy_slot = first_free([(at(d, bh[0]), at(d, bh[1])) for d in week[:3]], busy(buddy.email) + taken, 30)
        if buddy_slot is None:
            return None
        taken.append(buddy_slot)
        squad = [manager, *team]
        th = intersect_hours(*(hours[p.email] for p in squad), ("09:00", "17:00"))
        if th[0] >= th[1]:
            return None
        team_busy = [b for p in squad for b in busy(p.email)] + taken
        team_slot = first_free([(at(d, th[0]), at(d, th[1])) for d in week], team_busy, 60)
        if team_slot is None:
            return None
        return welcome, buddy_slot, team_slot
