"""Support tickets: escalate first-response SLA breaches, as of a stated time, by the wiki's rules.

The wiki holds the SLA (response limits per priority and customer tier, in calendar hours),
the escalation procedure, the customer tiers and the on-call rota with its swaps. The agent
reads every open ticket's age and comments, and works out which have no public reply yet and
have passed their deadline (breached) or will pass it within two hours (at risk). Breached
tickets get one priority step up, the team's on-call engineer, an internal note with the
missed deadline and an apology to the customer naming the engineer; at-risk ones get the
engineer and an internal note only. Traps: internal notes are not replies, a late public
reply still counts as answered, Waiting on Customer is out of scope, two customers share a
first word but not a tier, last year's SLA page has other limits, a rota swap covers today,
and one deadline falls just outside the two-hour window.

The trap mix is drawn per seed (``Task.data`` records it, empty where a trap is absent): the
internal-note-only breach, the late reply, the tickets waiting on the customer, the twin
customers and the deadline just outside the window are each there or not, and the rota's swap
for the breached team either covers today (its cover is on call) or ended yesterday (the rota's
engineer is back: the swap is the trap). Last year's SLA page is always there.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.tickets import state as tix
from longhorizon.apps.wiki import state as wiki
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import People, company, long_date, mentions_time, norm, rng_and_faker, slug
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.registry import register

TEAMS = {
    "Billing Ops": ["Invoice totals are wrong", "Card payment keeps failing", "Refund not received",
                    "Cannot download invoices", "Charged twice this month", "VAT missing on invoice",
                    "Plan change not applied", "Payment page times out"],
    "Mobile": ["App crashes when opening reports", "Push notifications stopped", "Cannot log in on Android",
               "Offline edits lost", "iPad layout broken", "App stuck on the splash screen",
               "Photos fail to upload", "Biometric login greyed out"],
    "Platform API": ["API returns 503 for every call", "Webhook deliveries delayed", "Rate limit hit at low volume",
                     "Pagination skips records", "API key rejected", "Bulk import times out",
                     "Sandbox credentials stopped working", "Orders endpoint very slow"],
    "Identity": ["SSO sign-in fails for all users", "MFA codes not accepted", "New users not provisioned",
                 "Password reset mail never arrives", "Removed user can still log in", "SAML certificate expired",
                 "Sessions expire after minutes", "Role changes not applied"],
    "Analytics": ["Dashboard shows no data", "Monthly report totals off", "Scheduled export not delivered",
                  "Charts time out", "CSV export truncated", "Wrong currency in reports",
                  "Shared dashboard link broken", "Filters reset on reload"],
}
TIERS = ("Enterprise", "Business", "Standard")
LIMITS = {  # hours to first public reply
    "P1": {"Enterprise": 1, "Business": 2, "Standard": 4},
    "P2": {"Enterprise": 4, "Business": 8, "Standard": 12},
    "P3": {"Enterprise": 8, "Business": 24, "Standard": 48},
    "P4": {"Enterprise": 24, "Business": 48, "Standard": 72},
}
OLD_LIMITS = {"P1": 0.5, "P2": 2, "P3": 8, "P4": 24}
STEP_UP = {"P1": "P1", "P2": "P1", "P3": "P2", "P4": "P3"}
AT_RISK = timedelta(hours=2)
SUFFIXES = ["Labs", "Digital", "Logistics", "Health", "Systems"]

SLA_PAGE = """# Support SLA: first response

Version 4, in force since {since}. Owner: {owner}. Replaces [[support-sla-2025]].

Every open customer ticket in the support queue (SUP) must get its **first public reply** from us
within the limit for its priority and the customer's tier (tiers: [[customer-tiers]]). Limits are
in calendar hours (nights and weekends count) from the moment the ticket was created.

| Priority | Enterprise | Business | Standard |
|----------|------------|----------|----------|
| P1       | 1 hour     | 2 hours  | 4 hours  |
| P2       | 4 hours    | 8 hours  | 12 hours |
| P3       | 8 hours    | 24 hours | 48 hours |
| P4       | 24 hours   | 48 hours | 72 hours |

- The clock stops at our first **public** comment on the ticket. Internal notes do not count: the
  customer never sees them.
- A ticket that already has a public reply has met or missed its SLA for good; it is not escalated
  again, even if that reply came late.
- Tickets **Waiting on Customer**, Resolved or Closed are out of scope.

A ticket with no public reply is **breached** once its deadline (created + limit) has passed, and
**at risk** when its deadline falls within the next 2 hours. Both are escalated: see
[[sla-escalation]].
"""

BRIEF_SLA_PAGE = """# Support SLA: first response

Version 4, since {since}. Replaces [[support-sla-2025]].

Every open SUP ticket needs our first **public** reply within the limit for its priority and the
customer's tier ([[customer-tiers]]), in calendar hours from creation (Enterprise / Business / Standard):

- P1: 1 / 2 / 4 hours
- P2: 4 / 8 / 12 hours
- P3: 8 / 24 / 48 hours
- P4: 24 / 48 / 72 hours

Internal notes don't stop the clock; a ticket with a public reply is done for good (even a late
one); Waiting on Customer, Resolved and Closed are out of scope. No public reply and the deadline
(created + limit) passed: **breached**; deadline within the next 2 hours: **at risk**. Escalate
both: [[sla-escalation]].
"""
"""The current SLA said briefly (level 1)."""

BRIEF_ESCALATION_PAGE = """# SLA escalation procedure

The owning team is the ticket's team; its on-call engineer for the day is on the [[on-call-rota]]
(mind the swaps).

- Breached: raise the priority one step (P1 stays P1); assign it to the on-call engineer; add an
  **internal** note starting "SLA breach" with when the first response was due; reply publicly with
  an apology naming the engineer (first name) now on it.
- At risk: assign it to the on-call engineer; add an **internal** note starting "SLA at risk" with
  when the first response is due. No priority change, no reply.

Never change a status, and leave every other ticket as it is.
"""

OLD_SLA_PAGE = """# Support SLA (2025)

**Superseded** by [[support-sla]] on {since}; kept for the record.

First response targets, all customers:

| Priority | First response |
|----------|----------------|
| P1       | 30 minutes     |
| P2       | 2 hours        |
| P3       | 8 hours        |
| P4       | 24 hours       |

Breached tickets were escalated to the team lead by mail.
"""

ESCALATION_PAGE = """# SLA escalation procedure

Run this whenever you check the queue against the [[support-sla]]. The owning team is the ticket's
team; its on-call engineer for the day is on the [[on-call-rota]] (mind the swaps).

## Breached tickets

1. Raise the priority one step: P4 to P3, P3 to P2, P2 to P1 (P1 stays P1).
2. Assign the ticket to the owning team's on-call engineer.
3. Add an **internal** note that starts with "SLA breach" and states when the first response was due.
4. Reply to the customer (a **public** comment): apologise for the wait and tell them which engineer
   (by first name) is now on it.

## At-risk tickets

1. Assign the ticket to the owning team's on-call engineer.
2. Add an **internal** note that starts with "SLA at risk" and states when the first response is due.

Do not change the priority of at-risk tickets and do not reply to the customer: the engineer
will. Never change a ticket's status as part of an escalation, and leave every other ticket as it is.
"""


def _rota_page(teams: list[str], weeks: list[date], rota: dict, swaps: list[tuple]) -> str:
    head = "| Week of    | " + " | ".join(teams) + " |\n|" + "---|" * (len(teams) + 1) + "\n"
    rows = "".join(f"| {w.isoformat()} | " + " | ".join(rota[(w, t)] for t in teams) + " |\n" for w in weeks)
    swap_lines = "".join(f"- {a.isoformat()}{'' if a == b else ' to ' + b.isoformat()}: {who} covers {team} for "
                         f"{whom}.\n" for a, b, team, who, whom in swaps)
    return ("# On-call rota\n\nOne on-call engineer per product team and week (Monday 09:00 to the next Monday "
            "09:00). SLA escalations go to them.\n\n" + head + rows +
            "\n## Swaps\n\nA swap replaces the rota for the days given (both days included).\n\n" + swap_lines)


@register
class SlaBreachEscalation(TaskFamily):
    name = "sla_breach_escalation"
    category = "support tickets"
    apps = ("tickets", "wiki")
    description = ("Check every open support ticket against the wiki's first-response SLA as of a given time; "
                   "escalate breached tickets (priority up, on-call engineer from the rota, internal note, "
                   "apology) and at-risk ones (on-call engineer, internal note), leaving the rest alone.")

    levels = 3
    """1: one at-risk ticket (in the swapped team) and nothing else open; 2: two breached tickets
    (one with only an internal note, where drawn), one at risk, and one of each look-alike drawn (the
    twin customer, just outside the window, a late reply, waiting on the customer); 3 (default):
    four or five breached, one to three at risk, among every look-alike drawn."""
    toolsets = {1: (  # level 1 reads the four pages the request names: no wiki search
        "tickets__add_comment", "tickets__assign_ticket", "tickets__get_ticket", "tickets__search_tickets",
        "wiki__get_page",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        top = level == self.levels
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        _, domain = company(fake)
        today = date(2026, 2, 3) + timedelta(days=rng.randrange(280))
        while today.weekday() in (0, 5, 6):  # Tuesday to Friday: the rota week started days ago
            today += timedelta(days=1)
        now = datetime.combine(today, time(14, 0))
        monday = today - timedelta(days=today.weekday())
        teams = sorted(rng.sample(sorted(TEAMS), 3))
        # the trap mix: each look-alike there or not; the swap covers today or ended yesterday
        has_note_only = rng.random() < 0.6  # a breached ticket with only an internal note
        has_late = rng.random() < 0.6  # a public reply after the deadline: answered for good
        n_waiting = rng.choice((0, 1, 2))  # past the deadline, but Waiting on Customer
        has_twins = rng.random() < 0.6  # an Enterprise customer at risk, its Standard near-namesake safe
        has_edge = rng.random() < 0.6  # a deadline just outside the two-hour window
        swap_ended = rng.random() < 0.35  # the swap for the breached team ended yesterday

        def user(p, team):
            return {"username": slug(p.first) + slug(p.last)[:1], "name": p.name, "email": p.email, "team": team,
                    "first": p.first}

        me = user(people.make(domain), "Support")
        support = [me] + [user(people.make(domain), "Support") for _ in range(2)]
        engineers = {t: [user(people.make(domain), t) for _ in range(3)] for t in teams}
        users = support + [u for t in teams for u in engineers[t]]
        by_name = {u["name"]: u for u in users}

        # rota: last week, this week, next week; a swap today for one team, another some other week
        weeks = [monday - timedelta(days=7), monday, monday + timedelta(days=7)]
        rota = {}
        for t in teams:
            order = rng.sample(engineers[t], 3)
            for i, w in enumerate(weeks):
                rota[(w, t)] = order[i]["name"]
        swap_team = rng.choice(teams)
        rostered = rota[(monday, swap_team)]
        cover = next(u["name"] for u in engineers[swap_team] if u["name"] != rostered)
        if swap_ended:  # Monday up to yesterday (today is Tuesday to Friday): the rota's engineer is back
            end = today - timedelta(days=1)
            swaps = [(max(monday, end - timedelta(days=rng.randint(0, 1))), end, swap_team, cover, rostered)]
        else:
            start = max(monday, today - timedelta(days=rng.randint(0, 1)))
            swaps = [(start, today + timedelta(days=rng.randint(0, 1)), swap_team, cover, rostered)]
        other_team = rng.choice([t for t in teams if t != swap_team])
        nxt = monday + timedelta(days=7 + rng.randint(1, 3))
        other_whom = rota[(weeks[2], other_team)]
        swaps.append((nxt, nxt, other_team, next(u["name"] for u in engineers[other_team] if u["name"] != other_whom),
                      other_whom))
        swaps.sort()
        on_call = {t: by_name[rota[(monday, t)]] for t in teams}
        if not swap_ended:
            on_call[swap_team] = by_name[cover]
        swap_wrong = by_name[rostered if not swap_ended else cover]  # who the swap misleads to

        # customers: one pair shares its first word, with different tiers
        customers: dict[str, str] = {}
        while len(customers) < 8:
            name, _ = company(fake)
            first = name.split()[0].strip(",")
            if first not in [c.split()[0].strip(",") for c in customers]:
                customers[name] = rng.choice(TIERS)
        ent = [c for c in customers if customers[c] == "Enterprise"]
        base = ent[0] if ent else sorted(customers)[0]
        customers[base] = "Enterprise"
        twin = f"{base.split()[0].strip(',')} {rng.choice(SUFFIXES)}"
        if has_twins:
            customers[twin] = "Standard"
        names = sorted(customers)
        others = [c for c in names if c not in (base, twin)] if has_twins else names

        titles = {t: rng.sample(TEAMS[t], len(TEAMS[t])) for t in teams}

        def title_for(team) -> str:
            if not titles[team]:
                titles[team] = [f"{x} ({rng.choice(['again', 'some users', 'since the update', 'EU region'])})"
                                for x in rng.sample(TEAMS[team], len(TEAMS[team]))]
            return titles[team].pop()
        tickets: list[dict] = []

        def make(kind, team=None, customer=None, priority=None, *, deadline=None, created=None):
            team = team or rng.choice(teams)
            customer = customer or rng.choice(others)
            priority = priority or rng.choice(["P1", "P2", "P2", "P3", "P3", "P4"])
            limit = timedelta(hours=LIMITS[priority][customers[customer]])
            if created is None:
                created = deadline - limit
            t = {"kind": kind, "team": team, "customer": customer, "priority": priority, "limit": limit,
                 "created": created.replace(second=0, microsecond=0), "status": rng.choice(["Triaged", "In Progress"]),
                 "assignee": rng.choice([None] + [u["username"] for u in engineers[team]]),
                 "title": title_for(team), "comments": []}
            t["deadline"] = t["created"] + limit
            if t["status"] == "In Progress" and t["assignee"] is None:
                t["assignee"] = engineers[team][0]["username"]
            tickets.append(t)
            return t

        def mins(a, b):
            return timedelta(minutes=rng.randint(a, b))

        breached, at_risk = [], []
        # breached: the first in the swap team; one of them only has an internal note
        for i in range(rng.randint(4, 5)):
            team = swap_team if i == 0 else None
            prio = "P1" if i == 1 and rng.random() < 0.4 else rng.choice(["P2", "P3", "P4"])
            t = make("breached", team, priority=prio, deadline=now - mins(15, 20 * 60))
            breached.append(t)
        note_only = breached[-1] if has_note_only else None
        if note_only:
            note_only["comments"].append({
                "author": note_only["assignee"] or engineers[note_only["team"]][1]["username"],
                "body": "Checked the logs, looks like the same root cause as last week.",
                "internal": True, "at": min(now, note_only["deadline"]) - mins(5, 60)})
        # the twin customer's look-alike ticket, breached under the Enterprise limit of its twin
        if has_twins:
            at_risk.append(make("at_risk", customer=base, priority=rng.choice(["P2", "P3"]),
                                deadline=now + mins(10, 110)))
        for _ in range(rng.randint(1, 2)):
            at_risk.append(make("at_risk", deadline=now + mins(10, 110)))
        safe = [make("safe", customer=twin, priority="P2", created=now - mins(4 * 60, 9 * 60))] if has_twins else []
        edge = None
        if has_edge:  # just outside the window
            edge = make("safe", priority=rng.choice(["P2", "P3"]), customer=rng.choice(
                [c for c in others if customers[c] != "Enterprise"] or others), deadline=now + AT_RISK + mins(5, 30))
            safe.append(edge)
        for _ in range(rng.randint(1, 2)):
            prio = rng.choice(["P3", "P4"])
            cust = rng.choice(others)
            limit_h = LIMITS[prio][customers[cust]]
            safe.append(make("safe", customer=cust, priority=prio,
                             deadline=now + AT_RISK + mins(40, max(41, int(limit_h * 60) - 160))))
        answered = []
        for _ in range(rng.randint(3, 4)):
            t = make("answered", created=now - mins(90, 50 * 60))
            room = min(int(t["limit"].total_seconds() // 60), int((now - t["created"]).total_seconds() // 60) - 10)
            reply_at = t["created"] + mins(5, max(6, room - 5))
            t["comments"].append({"author": rng.choice(support[1:])["username"], "internal": False, "at": reply_at,
                                  "body": rng.choice(["Hi, thanks for reporting this. We're looking into it now.",
                                                      "Thanks, we can reproduce this and are working on a fix.",
                                                      "Hello, could you tell us roughly when this started?"])})
            answered.append(t)
        late = make("answered", deadline=now - mins(3 * 60, 20 * 60)) if has_late else None
        if late:
            late["comments"].append({"author": support[1]["username"], "internal": False,
                                     "at": late["deadline"] + mins(20, 90),
                                     "body": "Sorry for the slow reply; we're on it now."})
            answered.append(late)
        waiting = []
        for _ in range(n_waiting):
            t = make("waiting", deadline=now - mins(60, 30 * 60))
            t["status"] = "Waiting on Customer"
            t["assignee"] = t["assignee"] or engineers[t["team"]][0]["username"]
            waiting.append(t)
        done = []
        for _ in range(3):
            t = make("done", created=now - mins(3 * 1440, 12 * 1440))
            t["status"], t["resolution"] = rng.choice(["Resolved", "Closed"]), "Fixed"
            t["assignee"] = t["assignee"] or engineers[t["team"]][0]["username"]
            t["comments"].append({"author": rng.choice(support[1:])["username"], "internal": False,
                                  "at": t["created"] + mins(20, 50), "body": "Thanks, we're on it."})
            done.append(t)
        if not top:  # the same draws, then fewer tickets (the default stays byte for byte)
            if level == 1:  # the one ticket is in the swapped team, so the rota's swap still matters
                t = at_risk[0]
                t.update(team=swap_team, assignee=None, status="Triaged", title=title_for(swap_team))
                breached, at_risk, safe, answered, waiting = [], at_risk[:1], [], [], []
                late = None
            else:
                breached, at_risk, safe, waiting = [breached[0], note_only or breached[1]], at_risk[:1], safe[:2], \
                    waiting[:1]
                answered = [late] if late else answered[:1]
            kept = {id(x) for x in breached + at_risk + safe + answered + waiting + done}
            tickets[:] = [x for x in tickets if id(x) in kept]
        for t in breached + at_risk:  # the swap must matter: no ticket of its team starts with today's on-call
            if t["team"] == swap_team and t["assignee"] == on_call[swap_team]["username"]:
                t["assignee"] = rng.choice([u["username"] for u in engineers[swap_team] if u is not on_call[swap_team]])

        tickets.sort(key=lambda t: t["created"])
        first = rng.randint(200, 900)
        for i, t in enumerate(tickets):
            t["key"] = f"SUP-{first + i}"
            who = rng.choice(["our whole team", "several users", "our month-end", "one of our admins"])
            t["description"] = f"{t['customer']} writes: {t['title'].lower()}. Please help, this is affecting {who}."
        breached.sort(key=lambda t: t["key"])
        at_risk.sort(key=lambda t: t["key"])
        escalated = breached + at_risk
        esc_keys = {t["key"] for t in escalated}

        seed_tickets, seed_comments = [], []
        for t in tickets:
            last = max([t["created"]] + [c["at"] for c in t["comments"]])
            seed_tickets.append({"project": "SUP", "number": int(t["key"].split("-")[1]), "type": "incident" if
                                 t["priority"] == "P1" else "bug", "title": t["title"], "description": t["description"],
                                 "status": t["status"], "resolution": t.get("resolution"), "priority": t["priority"],
                                 "assignee": t["assignee"], "team": t["team"], "customer": t["customer"],
                                 "component": t["team"], "reporter": support[1]["username"],
                                 "created": t["created"].isoformat(), "updated": last.isoformat()})
            for c in t["comments"]:
                seed_comments.append({"ticket": t["key"], "author": c["author"], "body": c["body"],
                                      "internal": c["internal"], "created": c["at"].isoformat()})
        seed_comments.sort(key=lambda c: c["created"])
        seeded_comments = len(seed_comments)

        # wiki -----------------------------------------------------------------------------------------
        since = date(2026, 1, 1) + timedelta(days=rng.randint(0, 20))
        head = support[2]

        def stamp(d, hm="10:00"):
            return f"{d.isoformat()}T{hm}:00"

        listed = {t["customer"] for t in tickets}  # level 1: only the customers with tickets
        tier_rows = [f"| {c} | {customers[c]} | {fake.name()} |" for c in names]
        tier_rows = "\n".join(r for r, c in zip(tier_rows, names) if level > 1 or c in listed)
        misc = [
            ("support-macros", "Support reply macros", "Greeting, apology and closing lines we reuse.\n\n- Hello, "
             "thanks for getting in touch.\n- Sorry for the wait.\n", ["support"]),
            ("holiday-calendar", "Holiday calendar", "Public holidays and office closures for the year.\n", ["office"]),
            ("incident-process", "Incident process", "For outages affecting many customers, open an incident in "
             "#incidents first; SLA escalation still applies to each ticket.\n", ["support", "runbook"]),
        ]
        pages = [
            {"slug": "support-sla", "title": "Support SLA: first response", "author": head["username"],
             "updated": stamp(since), "tags": ["support", "policy"],
             "body": (SLA_PAGE if level > 1 else BRIEF_SLA_PAGE).format(since=since.isoformat(), owner=head["name"]),
             "history": [{"body": "# Support SLA: first response\n\nDraft.", "author": head["username"],
                          "date": stamp(since - timedelta(days=20))}]},
            {"slug": "support-sla-2025", "title": "Support SLA (2025)", "author": head["username"],
             "updated": stamp(since), "tags": ["support", "archive"],
             "body": OLD_SLA_PAGE.format(since=since.isoformat())},
            {"slug": "sla-escalation", "title": "SLA escalation procedure", "author": head["username"],
             "updated": stamp(since + timedelta(days=2)), "tags": ["support", "runbook"],
             "body": ESCALATION_PAGE if level > 1 else BRIEF_ESCALATION_PAGE},
            {"slug": "customer-tiers", "title": "Customer tiers", "author": support[1]["username"],
             "updated": stamp(today - timedelta(days=rng.randint(5, 30))), "tags": ["support", "customers"],
             "body": ("# Customer tiers\n\nTier per customer account, from the contracts. Ask the account "
                      "manager if a customer is missing.\n\n| Customer | Tier | Account manager |\n"
                      "|---|---|---|\n" + tier_rows + "\n")},
            {"slug": "on-call-rota", "title": "On-call rota", "author": support[2]["username"],
             "updated": stamp(today - timedelta(days=1), "17:30"), "tags": ["on-call", "engineering"],
             "body": _rota_page(teams, weeks, {k: v for k, v in rota.items()}, swaps)},
        ]
        for s, title, body, tags in misc:
            pages.append({"slug": s, "title": title, "author": support[1]["username"], "tags": tags,
                          "updated": stamp(since - timedelta(days=rng.randint(10, 90))),
                          "body": f"# {title}\n\n{body}"})
        pages.sort(key=lambda p: p["slug"])

        def build(root: Path) -> None:
            tix.create_tracker(
                root / "state" / "tickets.sqlite", me=me["username"], now=now.isoformat(),
                projects=[{"key": "SUP", "name": "Customer Support", "kind": "support"}],
                teams=[{"name": t} for t in teams] + [{"name": "Support", "description": "Front-line support"}],
                users=[{k: u[k] for k in ("username", "name", "email", "team")} for u in users],
                tickets=seed_tickets, comments=seed_comments)
            wiki.create_wiki(root / "state" / "wiki.sqlite", pages, user=me["username"], now=now.isoformat())

        w = phrasing_rng(self.name, seed)
        day = long_date(today)
        ask = say(w, f"Can you do the SLA sweep of the support queue? Take it as of 14:00 today ({day}).",
                  f"Could you run the SLA sweep of the support queue, as of 14:00 today ({day})?",
                  f"The support queue needs its SLA sweep, taken as of 14:00 today ({day}). Can you do it?",
                  f"Please do the SLA sweep of the support queue for me. Take it as of 14:00 today ({day}).")
        wiki_said = say(w, "Everything is on the wiki: the SLA, the escalation steps, the customer tiers and the "
                           "on-call rota.",
                        "The SLA, the escalation steps, the customer tiers and the on-call rota are all on the wiki.",
                        "You'll find everything on the wiki: the SLA, the escalation steps, the customer tiers and "
                        "the on-call rota.")
        rule = say(w, "Escalate what's breached or at risk exactly as the procedure says and don't touch anything "
                      "else.",
                   "Whatever is breached or at risk gets escalated exactly as the procedure says; don't touch anything "
                   "else.",
                   "Follow the procedure exactly to escalate everything that's breached or at risk, and leave "
                   "everything else untouched.")
        instruction = " ".join([ask, wiki_said, rule,
                                f"{say(w, 'Thanks,', 'Thank you,', 'Cheers,')} {head['first']}"])

        # oracle ---------------------------------------------------------------------------------------
        def fmt(dt: datetime) -> str:
            return dt.strftime("%Y-%m-%d %H:%M")

        def apology(t, who: str | None = None) -> str:
            who = who or on_call[t["team"]]["first"]
            return (f"Hello, we're sorry it has taken us this long to get back to you. {who} from our "
                    f"{t['team']} team is now handling your ticket and will be in touch shortly.")

        def risk_note(t, due: str | None = None) -> str:
            return (f"SLA at risk: first response due {due or fmt(t['deadline'])}. Assigned to "
                    f"{on_call[t['team']]['name']} (on call).")

        def solve():
            if top:
                yield ToolCall("wiki__search_pages", {"query": "SLA"}, "Find the SLA pages.")
            yield ToolCall("wiki__get_page", {"slug": "support-sla"}, "Read the current SLA (version 4).")
            yield ToolCall("wiki__get_page", {"slug": "sla-escalation"}, "Read the escalation steps.")
            yield ToolCall("wiki__get_page", {"slug": "customer-tiers"}, "Look up the customers' tiers.")
            yield ToolCall("wiki__get_page", {"slug": "on-call-rota"}, "Who is on call today, with swaps.")
            candidates = []
            if top:
                yield ToolCall("tickets__list_users", {}, "Map the on-call names to usernames.")
                for status in ("Triaged", "In Progress"):
                    page = json.loads((yield ToolCall("tickets__search_tickets",
                                                      {"project": "SUP", "status": status, "limit": 100},
                                                      f"List the {status} tickets (Waiting on Customer is "
                                                      "out of scope).")))
                    candidates += page["tickets"]
            else:  # a short queue: one search, and the status it shows rules out the waiting ones
                page = json.loads((yield ToolCall("tickets__search_tickets",
                                                  {"project": "SUP", "open_only": True, "limit": 100},
                                                  "List the open tickets (Waiting on Customer is out of "
                                                  "scope).")))
                candidates = [x for x in page["tickets"] if x["status"] in ("Triaged", "In Progress")]
            found_b, found_r = [], []
            for s in sorted(candidates, key=lambda x: x["key"]):
                t = json.loads((yield ToolCall("tickets__get_ticket", {"key": s["key"]},
                                               f"When was {s['key']} created, and has it had a public reply?")))
                if any(not c["internal"] for c in t["comments"]):
                    continue
                created = datetime.fromisoformat(t["created"])
                deadline = created + timedelta(hours=LIMITS[t["priority"]][customers[t["customer"]]])
                if deadline <= now:
                    found_b.append(t["key"])
                elif deadline <= now + AT_RISK:
                    found_r.append(t["key"])
            assert found_b == [t["key"] for t in breached] and found_r == [t["key"] for t in at_risk], \
                (found_b, found_r, [t["key"] for t in breached], [t["key"] for t in at_risk])
            for t in breached:
                eng = on_call[t["team"]]
                new_prio = STEP_UP[t["priority"]]
                if new_prio != t["priority"]:
                    yield ToolCall("tickets__update_ticket", {"key": t["key"], "priority": new_prio},
                                   f"{t['key']} breached at {fmt(t['deadline'])}: {t['priority']} -> {new_prio}.")
                yield ToolCall("tickets__assign_ticket", {"key": t["key"], "assignee": eng["username"]},
                               f"{eng['name']} is on call for {t['team']} today.")
                yield ToolCall("tickets__add_comment", {
                    "key": t["key"], "internal": True,
                    "body": (f"SLA breach: first response was due {fmt(t['deadline'])} "
                             f"({customers[t['customer']]} customer, {t['priority']}, "
                             f"{int(t['limit'].total_seconds() // 3600)} h limit). Escalated to {eng['name']} "
                             f"(on call) and raised to {STEP_UP[t['priority']]}.")},
                    "Internal note with the missed deadline.")
                yield ToolCall("tickets__add_comment", {"key": t["key"], "body": apology(t)},
                               "Apologise to the customer and say who is on it.")
            for t in at_risk:
                eng = on_call[t["team"]]
                yield ToolCall("tickets__assign_ticket", {"key": t["key"], "assignee": eng["username"]},
                               f"{t['key']} is due at {fmt(t['deadline'])}: hand it to {eng['name']}.")
                yield ToolCall("tickets__add_comment", {"key": t["key"], "internal": True, "body": risk_note(t)},
                               "Internal note with the deadline.")
            if level > 1:
                yield ToolCall("tickets__search_tickets", {"project": "SUP", "open_only": True, "limit": 100},
                               "Check the queue after the sweep.")
            return (f"SLA sweep as of 14:00: {len(breached)} breached ("
                    + ", ".join(t["key"] for t in breached) + ") escalated with priority, on-call, note and "
                    f"apology; {len(at_risk)} at risk (" + ", ".join(t["key"] for t in at_risk)
                    + ") handed to on-call with a note. Everything else left alone.")

        def comment(t, **arguments):
            return perturb.on("tickets__add_comment", key=t["key"], **arguments)

        def moved_along(t) -> ToolCall:
            return ToolCall("tickets__update_ticket", {"key": t["key"], "status": "In Progress" if
                                                       t["status"] == "Triaged" else "Triaged"},
                            "Move it along (not part of the procedure).")

        first = (breached or at_risk)[0]
        flawed = {  # built only for the criteria a level has
            "on_call_assigned": lambda: perturb.change(  # the rota's name for today's swap, or the ended swap's
                solve, perturb.on("tickets__assign_ticket", assignee=on_call[swap_team]["username"]), count=None,
                assignee=swap_wrong["username"]),
            "breached_priority": lambda: perturb.drop(solve, perturb.on(
                "tickets__update_ticket", key=next(x["key"] for x in breached if x["priority"] != "P1"))),
            "no_status_changes": lambda: perturb.insert(solve, moved_along(first), before=perturb.on(
                "tickets__assign_ticket", key=first["key"])),
            "customer_replies": lambda: perturb.change(solve, comment(breached[0], body=apology(breached[0])),
                                                       body=apology(breached[0], "our engineer")),
            "one_reply_each": lambda: perturb.repeat(solve, comment(breached[0], body=apology(breached[0]))),
            "internal_notes": lambda: perturb.change(solve, comment(at_risk[0], internal=True),
                                                     body=risk_note(at_risk[0], "soon")),
            "at_risk_quiet": lambda: perturb.insert(solve, ToolCall("tickets__update_ticket", {
                "key": at_risk[0]["key"], "priority": STEP_UP[at_risk[0]["priority"]]
                if at_risk[0]["priority"] != "P1" else "P2"}, "Bump it too."),
                after=comment(at_risk[0], internal=True)),
            "others_untouched": lambda: perturb.insert(solve, ToolCall("tickets__add_comment", {
                "key": (late or done[0])["key"], "internal": True, "body": "SLA breach: this one was answered late too."},
                "Note the late reply as well.")),
        }

        # graders --------------------------------------------------------------------------------------
        breached_keys = {x["key"] for x in breached}

        def new_comments(w, key, internal):
            return [c for c in tix.comments(w, key) if c["id"] > seeded_comments and bool(c["internal"]) == internal]

        # each escalation step also checks it was not done to every ticket: the sweep is the selection
        def untouched_but(w, keys, field):
            return [x["key"] for x in tickets if x["key"] not in keys and tix.ticket(w, x["key"])[field] != x[field]]

        def breached_priority(w, t):
            wrong = [(x["key"], tix.ticket(w, x["key"])["priority"], STEP_UP[x["priority"]]) for x in breached
                     if tix.ticket(w, x["key"])["priority"] != STEP_UP[x["priority"]]]
            extra = untouched_but(w, breached_keys, "priority")
            return not wrong and not extra, f"(key, got, want): {wrong}; other priorities changed: {extra}"

        def on_call_assigned(w, t):
            wrong = [(x["key"], tix.ticket(w, x["key"])["assignee"], on_call[x["team"]]["username"]) for x in escalated
                     if tix.ticket(w, x["key"])["assignee"] != on_call[x["team"]]["username"]
                     or tix.ticket(w, x["key"])["team"] != x["team"]]
            extra = untouched_but(w, esc_keys, "assignee")
            return not wrong and not extra, f"(key, got, want): {wrong}; other tickets reassigned: {extra}"

        def internal_notes(w, t):
            for x in escalated:
                word = "breach" if x in breached else "risk"
                notes = [c["body"] for c in new_comments(w, x["key"], True)]
                if not any(word in norm(b) and mentions_time(b, x["deadline"]) for b in notes):
                    return False, f"{x['key']}: no internal note saying '{word}' with the deadline {fmt(x['deadline'])}"
            extra = [x["key"] for x in tickets if x["key"] not in esc_keys and new_comments(w, x["key"], True)]
            return not extra, f"internal notes on tickets that are not escalated: {extra}"

        engineer_firsts = {u["first"] for t_ in teams for u in engineers[t_]}

        def customer_replies(w, t):
            for x in breached:
                eng = on_call[x["team"]]
                bodies = [c["body"] for c in new_comments(w, x["key"], False)]
                if not any(eng["first"].lower() in norm(b) for b in bodies):
                    return False, f"{x['key']}: no public reply naming {eng['first']}"
                others = sorted(f for f in engineer_firsts - {eng["first"]}  # not every engineer seen
                                if any(re.search(rf"\b{re.escape(f)}\b", b) for b in bodies))
                if others:
                    return False, f"{x['key']}: the reply also names {others}"
            extra = [x["key"] for x in tickets if x["key"] not in breached_keys and new_comments(w, x["key"], False)]
            return not extra, f"public replies on tickets that needed none: {extra}"

        def at_risk_quiet(w, t):
            for x in at_risk:
                if tix.ticket(w, x["key"])["priority"] != x["priority"]:
                    return False, f"{x['key']}: priority changed"
                if new_comments(w, x["key"], False):
                    return False, f"{x['key']}: got a public comment"
            return True

        def others_untouched(w, t):
            for x in tickets:
                if x["key"] in esc_keys:
                    continue
                now_ = tix.ticket(w, x["key"])
                if (now_["status"], now_["priority"], now_["assignee"], now_["team"]) != (
                        x["status"], x["priority"], x["assignee"], x["team"]):
                    return False, f"{x['key']} changed"
                if [c for c in tix.comments(w, x["key"]) if c["id"] > seeded_comments]:
                    return False, f"{x['key']} got a comment"
            return True

        def one_reply_each(w, t):
            counts: dict[str, int] = {}
            for c in t.calls("tickets__add_comment", ok_only=True):
                args = c.arguments if isinstance(c.arguments, dict) else {}
                if args.get("internal") in (True, "true", "True", 1):
                    continue
                key = tix.parse_key(args.get("key"))
                counts[key] = counts.get(key, 0) + 1
            want = {k: 1 for k in breached_keys}
            return counts == want, f"public comments per ticket: {counts}"

        seeded_status = {x["key"]: x["status"] for x in tickets}

        def no_status_changes(w, t):
            for c in t.calls("tickets__update_ticket", ok_only=True):
                args = c.arguments if isinstance(c.arguments, dict) else {}
                key = tix.parse_key(args.get("key"))
                st = str(args.get("status") or "").strip()
                if st and norm(st) != norm(seeded_status.get(key, "")):
                    return False, f"{key} was moved to {st}"
            return True

        criteria = [
            Criterion("breached_priority", "Every breached ticket is one priority step up (P1 stays P1); no other "
                      "ticket's priority changed.", "final_state", breached_priority, 2.0),
            Criterion("on_call_assigned", "Every breached or at-risk ticket is assigned to its team's on-call "
                      "engineer for today (swaps applied); no other ticket was reassigned.", "final_state",
                      on_call_assigned, 2.0),
            Criterion("internal_notes", "Every breached ticket has a new internal 'SLA breach' note and every "
                      "at-risk one an 'SLA at risk' note, each stating the deadline; no other ticket got a note.",
                      "final_state", internal_notes, 2.0),
            Criterion("customer_replies", "Every breached ticket has a new public reply naming the on-call "
                      "engineer (and no other); no other ticket got one.", "final_state", customer_replies, 2.0),
            Criterion("at_risk_quiet", "At-risk tickets keep their priority and get no public reply.", "final_state",
                      at_risk_quiet, guard=True),
            Criterion("others_untouched", "Tickets neither breached nor at risk (answered, not yet due, waiting on "
                      "the customer, finished) are unchanged and got no comments.", "final_state", others_untouched,
                      guard=True),
            Criterion("one_reply_each", "Exactly one public comment was posted on each breached ticket, and none "
                      "anywhere else.", "process", one_reply_each, requires=("customer_replies",)),
            Criterion("no_status_changes", "No ticket's status was changed.", "process", no_status_changes,
                      guard=True),
        ]
        if not breached:  # level 1: nothing breached, so nothing to raise, apologise for or reply to
            criteria = [c for c in criteria
                        if c.id not in ("breached_priority", "customer_replies", "one_reply_each")]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"breached": {x["key"]: [STEP_UP[x["priority"]], on_call[x["team"]]["username"]] for x in breached},
                  "at_risk": {x["key"]: on_call[x["team"]]["username"] for x in at_risk},
                  "swap": [swap_team, on_call[swap_team]["name"]], "now": now.isoformat(),
                  # the trap mix drawn (empty: not in this instance)
                  "swap_today": [swap_team, cover] if not swap_ended else [],
                  "swap_ended": [swap_team, cover] if swap_ended else [],
                  "internal_note_only": note_only["key"] if note_only and any(x is note_only for x in breached) else "",
                  "late_reply": late["key"] if late and any(x is late for x in answered) else "",
                  "waiting": [x["key"] for x in waiting],
                  "twin_customers": sorted([base, twin]) if has_twins and any(
                      x["customer"] in (base, twin) for x in tickets) else [],
                  "just_outside": edge["key"] if edge and any(x is edge for x in safe) else ""},
        )
