"""Support tickets: triage the morning's New queue by the SLA policy in the workspace.

Each new ticket needs its impact read from the description (outage, degraded, question,
security), the customer's tier looked up in a CSV (two customers share a first word), a
priority from the policy's matrix, the owning team from the routing table (by component, or
by the product named in the text when the component is empty), an acknowledgement stating
the right first-response target, and status Triaged. Tickets repeating an error code that the
same customer already has open are duplicates: closed, linked, and told where we track it.
Look-alikes (same code at another customer, or an earlier ticket already closed) are not.
Last year's policy, with other targets and another matrix, sits in an archive folder.

The trap mix is drawn per seed (``Task.data`` records it, empty where a trap is absent): each
look-alike, the twin customers, tickets mailed in without a component, a security report, and a
customer with two open tickets on the duplicate's code (the duplicate goes to the oldest) are each
there or not; the archived policy and the duplicates always are. ``no_false_duplicates`` is a
criterion only where a look-alike is in the queue.
"""

from __future__ import annotations

import csv
import io
import json
import random
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.tickets import state as tix
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import People, company, rng_and_faker, slug, write_files
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.tickets import OLD_TARGETS, TARGETS, mentions_key, promises

PRODUCTS = {
    "Billing": ("Billing Ops", "download invoices or pay anything", "the invoice totals", "come out wrong",
                "change the billing contact on our invoices", "one of our users could open another company's invoices"),
    "Mobile App": ("Mobile", "log in to the mobile app", "push notifications", "arrive hours late",
                   "turn on offline mode", "the app still shows the previous user's account after logging out"),
    "Public API": ("Platform API", "make any API call (every request returns 503)", "pagination on the orders endpoint",
                   "skips records", "rotate our API keys", "an API key from another tenant works against our data"),
    "Reports": ("Analytics", "open any report", "the monthly revenue report", "shows totals that don't add up",
                "schedule a weekly export", "a shared report link opens without any login"),
    "Integrations": ("Integrations", "sync anything with our ERP", "the contact sync with our CRM",
                     "drops some records", "map custom fields", "the webhook payloads include other customers' records"),
    "Single Sign-On": ("Identity", "sign in at all through SSO", "SAML sign-in", "keeps failing",
                       "add a second identity provider", "people removed from our identity provider can still sign in"),
    "Web Dashboard": ("Analytics", "load the dashboard", "the charts on the overview page", "time out",
                      "change the default date range", "the dashboard showed another company's name and figures"),
}
TEAM_DESCRIPTIONS = {
    "Billing Ops": "Invoices, payments and plans", "Mobile": "iOS and Android apps",
    "Platform API": "The public REST API", "Analytics": "Reports and dashboards",
    "Integrations": "Connectors and webhooks", "Identity": "Sign-in, SSO and permissions",
    "Support": "Front-line support (triage only)",
}
TIERS = ("Enterprise", "Business", "Standard")
MATRIX = {
    "outage": {"Enterprise": "P1", "Business": "P2", "Standard": "P2"},
    "degraded": {"Enterprise": "P2", "Business": "P3", "Standard": "P3"},
    "question": {"Enterprise": "P3", "Business": "P4", "Standard": "P4"},
    "security": {"Enterprise": "P1", "Business": "P1", "Standard": "P1"},
}
OLD_MATRIX = {"outage": "P1", "degraded": "P2", "question": "P4", "security": "P1"}

POLICY = """# Customer Support SLA Policy

Version 3, effective 2026-01-01. Owner: Head of Support.

## 1. Impact

- **Outage**: the product is down or unusable for everyone at the customer.
- **Degraded**: something is broken or wrong, but people can keep working.
- **Question**: how-to questions and feature requests; nothing is broken.
- **Security**: any report of data visible to the wrong people, or access that should not exist.

## 2. Priority

Look up the customer's tier in customers.csv, then:

| Impact   | Enterprise | Business | Standard |
|----------|------------|----------|----------|
| Outage   | P1         | P2       | P2       |
| Degraded | P2         | P3       | P3       |
| Question | P3         | P4       | P4       |

Security reports are always P1, whatever the tier.

## 3. First response

Every triaged ticket gets a public comment that acknowledges it and tells the customer when to
expect our first response:

| Priority | First response within |
|----------|-----------------------|
| P1       | 1 hour                |
| P2       | 4 hours               |
| P3       | 1 business day        |
| P4       | 3 business days       |

Then route the ticket (see routing.md) and set it to Triaged.

## 4. Duplicates

A new ticket is a duplicate when the same customer already has an unresolved ticket (anything
but Resolved or Closed) with the same error code. Close the new ticket with resolution
Duplicate, link it as a duplicate of the oldest such ticket, and tell the customer in a public
comment which ticket we are tracking the issue in. Duplicates get no priority, team or SLA
comment. If the customer's earlier ticket is already Resolved or Closed, the new one is a new
issue: triage it normally.
"""

BRIEF_POLICY = """# SLA policy v3

Impact: Outage = down for everyone at the customer; Degraded = broken or wrong, but they can work;
Question = how-to or feature request; Security = data or access open to the wrong people.

Priority by the customer's tier in customers.csv (Enterprise / Business / Standard):
- Outage: P1 / P2 / P2
- Degraded: P2 / P3 / P3
- Question: P3 / P4 / P4
- Security: always P1

Acknowledge it in a public comment with the first-response time: P1 1 hour, P2 4 hours, P3 1
business day, P4 3 business days. Route it (below) and set it to Triaged.
"""
"""The current policy said briefly, for level 1 (one question, no duplicates)."""

OLD_POLICY = """# Customer Support SLA Policy

Version 2, effective 2024-03-01. SUPERSEDED by version 3 on 2026-01-01; kept for reference.

## Priority

- Outage: P1
- Degraded service: P2
- Questions: P4
- Security: P1

## First response

| Priority | First response within |
|----------|-----------------------|
| P1       | 30 minutes            |
| P2       | 2 hours               |
| P3       | 8 hours               |
| P4       | 2 business days       |
"""


def _routing(products: list[str]) -> str:
    rows = "\n".join(f"| {p:<15} | {PRODUCTS[p][0]:<13} |" for p in products)
    return ("# Support routing\n\nSend every triaged ticket to the team that owns its product area (the ticket's "
            "component). If the component is empty, use the product the customer describes.\n\n"
            f"| Component       | Team          |\n|-----------------|---------------|\n{rows}\n\n"
            "Front-line Support only triages: always hand the ticket to the owning team and leave the assignee "
            "empty; the team lead picks someone.\n")


def _brief_routing(products: list[str]) -> str:
    """Level 1's routing: a section of its brief policy."""
    rows = "\n".join(f"- {p}: {PRODUCTS[p][0]}" for p in products)
    return ("\n## Routing\n\nTo the team owning the component (if empty, the product described), unassigned.\n\n"
            f"{rows}\n")


def _text(rng, impact: str, product: str, code: str | None, customer: str) -> tuple[str, str]:
    _, action, feature, problem, howto, leak = PRODUCTS[product]
    if impact == "outage":
        title = rng.choice([f"{product} down ({code})", f"URGENT: cannot {action.split(' (')[0]}",
                            f"{product} completely unavailable"])
        body = (f"Since this morning {product} has been completely down for us: nobody at {customer} can {action}. "
                f"Every attempt fails with error {code}. This is blocking our whole team.")
    elif impact == "degraded":
        title = rng.choice([f"{feature[0].upper() + feature[1:]} {problem}", f"Problem with {feature} ({code})"])
        body = (f"In {product}, {feature} {problem} for some of our users. We can keep working, but it's "
                f"getting annoying. The logs show error {code}.")
    elif impact == "question":
        title = rng.choice([f"How do I {howto}?", f"Question: {howto}"])
        body = (f"Quick question about {product}: how do I {howto}? Nothing is broken, we just couldn't find "
                f"it in the docs.")
    else:
        title = rng.choice([f"Security concern in {product}", "Possible data exposure"])
        body = f"Possible security problem in {product}: {leak}. We noticed it today and stopped using that part."
    return title, body


REPEAT_OPENERS = (
    "Hi, a colleague of mine may have reported this already.",
    "Apologies if someone on our side already raised this.",
    "This may be a repeat of an earlier report, sorry if so.",
    "We might have mentioned this to you before.",
)
"""How a customer says "maybe reported already": it is what customers say, not a label. Only the
error code and the other ticket's customer and status tell a duplicate."""


def _repeat_cues(rng: random.Random, dups: list[dict], lookalikes: list[dict], queue: list[dict],
                 again: dict | None) -> None:
    """Puts the "reported already?" cues on New tickets so that they do not give the label away:
    most duplicates, the look-alikes there are (a customer whose closed ticket had the same error
    says "again" truthfully: ``again``), topped up with regular tickets to at least two, and a few
    more regular tickets open with a ``REPEAT_OPENERS`` line; duplicates' titles ("... again") are
    matched by ``again``'s (or, without it, a regular one's) and some others'. One duplicate always
    goes without an opener, so its absence proves nothing either."""
    quiet = rng.randrange(len(dups))
    for i, d in enumerate(dups):
        if i != quiet and rng.random() < 0.75:
            d["description"] = f"{rng.choice(REPEAT_OPENERS)} {d['description']}"
    others = [t for t in queue if not any(t is x for x in lookalikes)]
    decoys = list(lookalikes) + rng.sample(others, max(0, 2 - len(lookalikes)))
    if again is None:
        again = rng.choice([t for t in decoys if t["code"]] or [t for t in others if t["code"]])
    for t in queue:
        if any(t is x for x in decoys) or rng.random() < 0.25:
            t["description"] = f"{rng.choice(REPEAT_OPENERS)} {t['description']}"
        if t["code"] and (t is again or rng.random() < 0.15):
            t["title"] = rng.choice([f"{t['code']} again", f"Still getting {t['code']}", t["title"] + " (again)"])


@register
class SupportTriage(TaskFamily):
    name = "support_triage"
    category = "support tickets"
    apps = ("tickets", "files")
    description = ("Triage a New support queue by the workspace SLA policy: priority from impact and customer "
                   "tier, routing to the owning team, an acknowledgement with the response target, status "
                   "Triaged; close duplicates by error code with a link and a pointer to the original.")

    levels = 3
    """1: one New ticket, named in the request (a question, so no error code to check), no
    duplicates, the policy said briefly with (four rows of) the routing in it, and only the tiers of the asker and
    one more customer; 2: four to five
    New tickets (the first two, the twin customers where drawn, the look-alikes drawn, the original
    of a duplicate, topped up to four) and two duplicates; 3 (default): seven to nine New tickets
    and three duplicates."""
    toolsets = {1: (  # level 1 names its one ticket: no listing, no search
        "files__read_file", "tickets__add_comment", "tickets__assign_ticket", "tickets__get_ticket",
        "tickets__update_ticket",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        short = level == 1  # one question: the policy, the routing, the tiers, and the ticket itself
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        _, our_domain = company(fake)
        today = date(2026, 1, 12) + timedelta(days=rng.randrange(300))
        if today.weekday() >= 5:
            today += timedelta(days=7 - today.weekday())
        now = datetime.combine(today, time(8, 30))
        products = sorted(rng.sample(sorted(PRODUCTS), rng.randint(5, 6)))
        # the trap mix: each independent trap there or not (the archived policy and the duplicates always)
        has_twins = rng.random() < 0.6  # two customers share a first word, with different tiers
        has_look_other = rng.random() < 0.6  # the same code as another customer's open ticket
        has_look_closed = rng.random() < 0.6  # the same customer and code as a ticket closed last month
        n_mailed = rng.choice((0, 1, 2))  # arrived by mail: no component, route by the product described
        has_security = rng.random() < 0.6
        has_second_open = rng.random() < 0.5  # the duplicate's customer has two open tickets on its code
        teams = sorted({PRODUCTS[p][0] for p in products}) + ["Support"]

        users = []
        me = people.make(our_domain)
        users.append({"username": slug(me.first) + slug(me.last)[:1], "name": me.name, "email": me.email,
                      "team": "Support"})
        for team in teams:
            for _ in range(2 if team != "Support" else 1):
                p = people.make(our_domain)
                users.append({"username": slug(p.first) + slug(p.last)[:1], "name": p.name, "email": p.email,
                              "team": team})
        my_name = users[0]["username"]

        # customers: one pair shares its first word, with different tiers
        customers: dict[str, str] = {}
        while len(customers) < rng.randint(8, 10):
            name, _ = company(fake)
            if name.split()[0].strip(",") not in [c.split()[0].strip(",") for c in customers]:
                customers[name] = rng.choice(TIERS)
        base = rng.choice(sorted(customers))
        twin = f"{base.split()[0].strip(',')} {rng.choice(['Labs', 'Digital', 'Logistics', 'Health'])}"
        if has_twins:
            customers[twin] = next(t for t in TIERS if t != customers[base])
        else:
            twin = None
        names = sorted(customers)
        codes: set[str] = set()

        def code() -> str:
            while True:
                c = f"ERR-{rng.randint(1000, 9999)}"
                if c not in codes:
                    codes.add(c)
                    return c

        def issue(impact, customer=None, product=None, err=None, status="New", when=None):
            product = product or rng.choice(products)
            customer = customer or rng.choice(names)
            err = err if err is not None else (code() if impact in ("outage", "degraded") else None)
            title, body = _text(rng, impact, product, err, customer)
            return {"impact": impact, "customer": customer, "product": product, "code": err, "title": title,
                    "description": body, "status": status, "component": product,
                    "when": when or now - timedelta(minutes=rng.randint(20, 900))}

        # the queue ----------------------------------------------------------------------------------
        queue = []
        impacts = ["outage", "degraded", "degraded", "question", "question", rng.choice(["outage", "degraded"])]
        impacts.append("security" if has_security else rng.choice(["outage", "degraded"]))
        for i, imp in enumerate(impacts):
            queue.append(issue(imp, customer=[base, twin][i] if i < 2 and twin else None))
        for t in rng.sample(queue, n_mailed):  # arrived by mail: no component set
            t["component"] = ""
        backlog = []  # tickets already past triage
        # look-alike 1: same code as an open ticket of another customer
        look1 = look2 = None
        lookalike_of: list[tuple[dict, dict]] = []  # (look-alike, the backlog ticket it looks like a duplicate of)
        if has_look_other:
            look1 = issue(rng.choice(["outage", "degraded"]))
            queue.append(look1)
            other_cust = rng.choice([c for c in names if c != look1["customer"]])
            backlog.append(issue(look1["impact"], customer=other_cust, product=look1["product"], err=look1["code"],
                                 status="In Progress", when=now - timedelta(days=rng.randint(2, 6))))
            lookalike_of.append((look1, backlog[-1]))
        # look-alike 2: same customer and code as a ticket closed last month
        if has_look_closed:
            look2 = issue(rng.choice(["outage", "degraded"]))
            queue.append(look2)
            backlog.append(issue(look2["impact"], customer=look2["customer"], product=look2["product"],
                                 err=look2["code"], status="Closed", when=now - timedelta(days=rng.randint(20, 40))))
            lookalike_of.append((look2, backlog[-1]))
        # duplicates: one of a queue ticket, two of tickets being worked on
        dups = []
        qorig = rng.choice([t for t in queue if t["code"] and t is not look1 and t is not look2])
        d = issue(qorig["impact"], customer=qorig["customer"], product=qorig["product"], err=qorig["code"],
                  when=qorig["when"] + timedelta(minutes=rng.randint(5, 40)))
        d["original"] = qorig
        dups.append(d)
        second_open = None
        for status in ("In Progress", "Waiting on Customer"):
            o = issue(rng.choice(["outage", "degraded"]), status=status, when=now - timedelta(days=rng.randint(1, 9)))
            backlog.append(o)
            d = issue(o["impact"], customer=o["customer"], product=o["product"], err=o["code"])
            d["original"] = o
            dups.append(d)
            if has_second_open and second_open is None:  # a later open report of the same code: not the oldest
                second_open = issue(o["impact"], customer=o["customer"], product=o["product"], err=o["code"],
                                    status="Triaged", when=o["when"] + timedelta(hours=rng.randint(3, 20)))
                backlog.append(second_open)
                d["when"] = max(d["when"], second_open["when"] + timedelta(minutes=rng.randint(10, 50)))
        for d in dups:
            d["title"] = rng.choice([f"{d['code']} again", f"Still getting {d['code']}", d["title"] + " (again)"])
        _repeat_cues(random.Random(f"{self.name}:{seed}:cues"), dups, [x for x, _ in lookalike_of], queue, look2)
        for status in ("In Progress", "Triaged", "Resolved", "Closed", "Waiting on Customer"):
            backlog.append(issue(rng.choice(["outage", "degraded", "question"]), status=status,
                                 when=now - timedelta(days=rng.randint(1, 30))))
        if level < self.levels:  # the same draws, then fewer New tickets (the default stays byte for byte)
            if level == 1:
                # impacts[3] and [4] are questions; one from an Enterprise customer would keep the
                # form's default priority (P3), which doing nothing meets, so the asker is another tier
                q = next((t for t in queue[3:5] if customers[t["customer"]] != "Enterprise"), queue[3])
                if customers[q["customer"]] == "Enterprise":
                    q["customer"] = next(c for c in names if customers[c] != "Enterprise")
                    q["title"], q["description"] = _text(rng, "question", q["product"], None, q["customer"])
                for opener in REPEAT_OPENERS:  # brief: no "reported already?" line
                    q["description"] = q["description"].removeprefix(opener + " ")
                queue, dups = [q], []
            else:  # the first two (the twins, where drawn), the duplicated one, the look-alikes; at least four
                keep = [t for t in queue if any(t is k for k in (queue[0], queue[1], qorig, look1, look2))]
                keep += [t for t in queue if not any(t is k for k in keep)][:max(0, 4 - len(keep))]
                queue, dups = [t for t in queue if any(t is k for k in keep)], dups[:2]  # dups[1]: second_open's

        everything = queue + dups + backlog
        everything.sort(key=lambda t: t["when"])
        first = rng.randint(120, 480)
        for i, t in enumerate(everything):
            t["key"] = f"SUP-{first + i}"
        for t in backlog:
            t["priority"] = MATRIX[t["impact"]][customers[t["customer"]]]
            t["team"] = PRODUCTS[t["product"]][0]
            members = [u["username"] for u in users if u["team"] == t["team"]]
            t["assignee"] = rng.choice(members) if t["status"] != "Triaged" else None
            t["resolution"] = "Fixed" if t["status"] in ("Resolved", "Closed") else None
        for t in queue + dups:
            t["priority"] = "P3"  # the form's default
            t["team"] = t["assignee"] = t["resolution"] = None
        regular = sorted(queue, key=lambda t: t["key"])
        for t in regular:
            t["want_priority"] = MATRIX[t["impact"]][customers[t["customer"]]]
            t["want_team"] = PRODUCTS[t["product"]][0]
        dups.sort(key=lambda t: t["key"])
        queue_keys = {t["key"] for t in queue + dups}

        seed_tickets = []
        comments = []
        for t in everything:
            seed_tickets.append({
                "project": "SUP", "number": int(t["key"].split("-")[1]), "type": "question" if t["impact"] == "question"
                else "incident" if t["impact"] == "outage" else "bug", "title": t["title"],
                "description": t["description"], "status": t["status"], "resolution": t["resolution"],
                "priority": t["priority"], "assignee": t["assignee"], "team": t["team"], "customer": t["customer"],
                "component": t["component"], "reporter": my_name, "created": t["when"].isoformat(),
            })
            if t["key"] not in queue_keys:
                comments.append({"ticket": t["key"], "author": t["assignee"] or my_name,
                                 "body": rng.choice(["Looking into this now.", "Reproduced on our side.",
                                                     "Asked the customer for a screenshot.", "Fix deployed."]),
                                 "created": (t["when"] + timedelta(hours=2)).isoformat()})
        comments.sort(key=lambda c: c["created"])

        def customers_csv() -> bytes:
            out = io.StringIO()
            w = csv.writer(out, lineterminator="\n")
            w.writerow(["Customer", "Tier", "Account manager", "Renewal"][:2 if short else 4])
            listed = {t["customer"] for t in regular} | {base}  # level 1: the asker and one more, tiers only
            for n in names:
                row = [n, customers[n], fake.name(), (today + timedelta(days=rng.randint(30, 360))).isoformat()]
                if not short or n in listed:
                    w.writerow(row[:2 if short else 4])
            return out.getvalue().encode()

        files = {
            "support/sla_policy.md": (BRIEF_POLICY + _brief_routing(sorted(set(products[:3]) | {regular[0]["product"]})) if short else POLICY).encode(),
            "support/routing.md": _routing(products).encode(),
            "support/customers.csv": customers_csv(),
            "support/archive/sla_policy_2024.md": OLD_POLICY.encode(),
            "support/archive/routing_2024.md": _routing(sorted(PRODUCTS))
            .replace("| Analytics     |", "| Web           |").encode(),
        }

        def build(root: Path) -> None:
            write_files(root / "workspace", files)
            tix.create_tracker(
                root / "state" / "tickets.sqlite", me=my_name, now=now.isoformat(),
                projects=[{"key": "SUP", "name": "Customer Support", "kind": "support"}],
                teams=[{"name": t, "description": TEAM_DESCRIPTIONS[t]} for t in teams], users=users,
                tickets=seed_tickets, comments=comments)

        # ground truth -------------------------------------------------------------------------------
        seeded = {t["key"]: {k: t[k] for k in ("status", "priority", "team", "assignee")} for t in backlog}
        seeded_comments = len(comments)

        w = phrasing_rng(self.name, seed)
        ask = say(w, "Could you triage the New tickets in the support queue?",
                  "The support queue has a batch of New tickets waiting; can you triage them?",
                  "Please work through the New tickets in the support queue and triage each one.",
                  "I need the New tickets in our support queue triaged today.")
        how = say(w, "Go by our SLA policy and the routing table in the support folder: priority, owning team, an "
                     "acknowledgement to the customer with the right response time, then Triaged.",
                  "Each one gets a priority, its owning team and an acknowledgement to the customer with the right "
                  "response time, then the status Triaged; the SLA policy and the routing table are in the support "
                  "folder.",
                  "Our SLA policy and routing table (both in the support folder) say how: set the priority and the "
                  "owning team, acknowledge the customer with the response time that priority gets, and move the "
                  "ticket to Triaged.")
        rest = in_some_order(w, [
            say(w, "Handle duplicates the way the policy says.", "Some may be duplicates: the policy says how to "
                "handle those.", "For duplicates, do what the policy says."),
            say(w, "Tickets that are already being worked on aren't part of this, so leave them alone.",
                "Don't touch tickets that someone is already working on.",
                "Only the New ones are part of this: leave tickets that are already being worked on alone."),
        ])
        hello = say(w, "Morning!", "Hi,", "Hello!", "Good morning,")
        bye = say(w, "Thanks,", "Cheers,", "Thank you!", "Many thanks,")
        instruction = " ".join([hello, ask, how, *rest, f"{bye} {me.first}"])
        if short:  # one ticket, named; no duplicates to handle
            key = regular[0]["key"]
            ask = say(w, f"Could you triage {key}, the new support ticket?",
                      f"A new support ticket, {key}, needs triage.", f"Please triage the New ticket {key}.")
            how = say(w, "Per support/sla_policy.md: priority, team, an acknowledgement with the response time, "
                         "then Triaged.",
                      "support/sla_policy.md says how: priority, team, acknowledgement with the response time, "
                      "status Triaged.")
            instruction = " ".join([hello, ask, how, "Leave other tickets alone.", f"{bye} {me.first}"])

        def ack(t, target=None) -> str:
            target = target or TARGETS[t["want_priority"]]
            if short:
                return f"Logged as {t['want_priority']} for {t['want_team']}; first response within {target}."
            return (f"Hello, thanks for reporting this. We've logged it as {t['want_priority']} and passed it to our "
                    f"{t['want_team']} team; you can expect our first response within {target}.")

        def solve():
            if not short:
                yield ToolCall("files__list_dir", {"path": "support"},
                               "Find the policy, routing table and customers.")
            yield ToolCall("files__read_file", {"path": "support/sla_policy.md"}, "Read the current SLA policy.")
            if not short:  # level 1's policy holds its routing
                yield ToolCall("files__read_file", {"path": "support/routing.md"}, "Read the routing table.")
            yield ToolCall("files__read_file", {"path": "support/customers.csv"}, "Read the customers' tiers.")
            if not short:
                yield ToolCall("tickets__list_teams", {}, "Check the team names.")
                page = json.loads((yield ToolCall("tickets__search_tickets",
                                                  {"project": "SUP", "status": "New", "limit": 50},
                                                  "List the New queue.")))
                assert {t["key"] for t in page["tickets"]} == queue_keys
            else:  # the one ticket the request names
                page = {"tickets": [{"key": t["key"]} for t in regular]}
            for t in page["tickets"]:
                yield ToolCall("tickets__get_ticket", {"key": t["key"]}, f"Read {t['key']} in full.")
            for c in sorted({t["code"] for t in queue + dups if t["code"]}):
                yield ToolCall("tickets__search_tickets", {"project": "SUP", "query": c},
                               f"Who else reported {c}, and is it still open?")
            for t in regular:
                prio = t["want_priority"]
                yield ToolCall("tickets__add_comment", {"key": t["key"], "body": ack(t)},
                               f"Acknowledge {t['key']} with the {prio} response target.")
                yield ToolCall("tickets__assign_ticket", {"key": t["key"], "team": t["want_team"]},
                               f"{t['product']} belongs to {t['want_team']}.")
                yield ToolCall("tickets__update_ticket", {"key": t["key"], "priority": prio, "status": "Triaged"},
                               f"{t['impact']} for a {customers[t['customer']]} customer: {prio}, Triaged.")
            for d in dups:
                orig = d["original"]["key"]
                note = (f"Hello, this is the same problem ({d['code']}) that we're already tracking in {orig}, so "
                        f"we're closing this ticket as a duplicate. Updates will follow on {orig}.")
                yield ToolCall("tickets__add_comment", {"key": d["key"], "body": note},
                               f"Tell the customer {d['key']} is tracked in {orig}.")
                yield ToolCall("tickets__link_tickets", {"key": d["key"], "kind": "duplicates", "other": orig},
                               f"Link {d['key']} to the original {orig}.")
                yield ToolCall("tickets__update_ticket", {"key": d["key"], "status": "Closed",
                                                          "resolution": "Duplicate"},
                               f"Close {d['key']} as a duplicate.")
            if not short:
                yield ToolCall("tickets__search_tickets", {"project": "SUP", "status": "New"},
                               "Check nothing is left in New.")
            if short:
                t = regular[0]
                return f"Triaged {t['key']}: {t['want_priority']}, {t['want_team']}."
            return (f"Triaged {len(regular)} new tickets (priority, team, acknowledgement with the response "
                    f"target) and closed {len(dups)} duplicates: "
                    + ", ".join(f"{d['key']} -> {d['original']['key']}" for d in dups) + ".")

        def on_ticket(tool: str, key: str, **arguments):
            return perturb.on(f"tickets__{tool}", key=key, **arguments)

        def old_priority(t) -> str:
            """Last year's matrix, or another priority where both agree."""
            prio = t["want_priority"]
            return OLD_MATRIX[t["impact"]] if OLD_MATRIX[t["impact"]] != prio else ("P4" if prio != "P4" else "P3")

        last, first = (regular[-1], regular[0]) if regular else (None, None)
        lookalikes = [(x, match) for x, match in lookalike_of if any(x is q for q in queue)]
        # built only for the criteria a level has
        flawed = {
            "priorities": lambda: perturb.change(solve, on_ticket("update_ticket", last["key"], status="Triaged"),
                                                 priority=old_priority(last)),
            "teams": lambda: perturb.change(solve, on_ticket("assign_ticket", last["key"]), team="Support"),
            "acknowledged": lambda: perturb.change(solve, on_ticket("add_comment", last["key"]),
                                                   body=ack(last, OLD_TARGETS[last["want_priority"]])),
            "triaged": lambda: perturb.change(solve, on_ticket("update_ticket", last["key"], status="Triaged"),
                                              status=None),
            "no_wrong_closures": lambda: perturb.insert(solve, ToolCall(
                "tickets__update_ticket", {"key": first["key"], "status": "Closed", "resolution": "Duplicate"},
                "Close it (by mistake)."), before=on_ticket("update_ticket", first["key"], status="Triaged")),
            "duplicate_notice": lambda: perturb.change(solve, on_ticket("add_comment", dups[0]["key"]), body=(
                "Hello, we're already tracking this problem in another ticket, so we're closing this one.")),
            "duplicates_closed": lambda: perturb.drop(solve, on_ticket("link_tickets", dups[0]["key"])),
            "no_false_duplicates": lambda: perturb.insert(solve, ToolCall("tickets__link_tickets", {
                "key": lookalikes[0][0]["key"], "kind": "duplicates", "other": lookalikes[0][1]["key"]},
                "Same error code: link it.")),
            "others_untouched": lambda: perturb.insert(solve, ToolCall(
                "tickets__add_comment", {"key": backlog[0]["key"], "body": "Any update?"}, "Chase the engineer.")),
        }

        # graders ------------------------------------------------------------------------------------
        def new_public_comments(w, key):
            return [c for c in tix.comments(w, key) if c["id"] > seeded_comments and not c["internal"]]

        def priorities(w, t):
            wrong = [(x["key"], tix.ticket(w, x["key"])["priority"], x["want_priority"]) for x in regular
                     if tix.ticket(w, x["key"])["priority"] != x["want_priority"]]
            return not wrong, f"wrong (key, got, want): {wrong}" if wrong else ""

        def routed(w, t):
            wrong = [(x["key"], tix.ticket(w, x["key"])["team"], x["want_team"]) for x in regular
                     if tix.ticket(w, x["key"])["team"] != x["want_team"]]
            return not wrong, f"wrong (key, got, want): {wrong}" if wrong else ""

        def triaged(w, t):
            wrong = [x["key"] for x in regular if tix.ticket(w, x["key"])["status"] != "Triaged"]
            return not wrong, f"not Triaged: {wrong}" if wrong else ""

        def acknowledged(w, t):
            for x in regular:
                cs = new_public_comments(w, x["key"])
                if not any(promises(c["body"], x["want_priority"]) for c in cs):
                    return False, f"{x['key']}: no public comment promising {TARGETS[x['want_priority']]}"
                others = [p for p in TARGETS if p != x["want_priority"]]
                if any(promises(c["body"], p) for c in cs for p in others):
                    return False, f"{x['key']}: a comment promises another response time"
            return True

        def duplicates_closed(w, t):
            for d in dups:
                now_ = tix.ticket(w, d["key"])
                if now_["status"] != "Closed" or now_["resolution"] != "Duplicate":
                    return False, f"{d['key']} is {now_['status']} / {now_['resolution']}"
                if not tix.has_link(w, d["key"], d["original"]["key"], "duplicates"):
                    return False, f"{d['key']} is not linked as a duplicate of {d['original']['key']}"
            return True

        all_keys = sorted({x["key"] for x in queue + dups + backlog})

        def duplicate_notice(w, t):
            for d in dups:
                own = {d["key"], d["original"]["key"]}
                named = [c for c in new_public_comments(w, d["key"]) if mentions_key(c["body"], d["original"]["key"])
                         and not any(mentions_key(c["body"], k) for k in all_keys if k not in own)]  # not every key
                if not named:
                    return False, f"{d['key']}: no public comment naming {d['original']['key']} (and no other ticket)"
            return True

        dup_pairs = {(d["key"], d["original"]["key"]) for d in dups}

        def no_false_duplicates(w, t):
            for ln in tix.links(w):
                if ln["kind"] == "duplicates" and (ln["source"], ln["target"]) not in dup_pairs:
                    return False, f"{ln['source']} linked as a duplicate of {ln['target']}"
            dup_keys = {d["key"] for d in dups}
            wrong = [x["key"] for x in tix.tickets(w, "SUP") if x["resolution"] == "Duplicate" and x["key"] not in dup_keys]
            return not wrong, f"closed as duplicates: {wrong}" if wrong else ""

        def others_untouched(w, t):
            for key, before in seeded.items():
                now_ = tix.ticket(w, key)
                if {k: now_[k] for k in before} != before:
                    return False, f"{key} changed"
                if [c for c in tix.comments(w, key) if c["id"] > seeded_comments]:
                    return False, f"{key} got a comment"
            return True

        def no_wrong_closures(w, t):
            dup_keys = {d["key"] for d in dups}
            for c in t.calls("tickets__update_ticket", ok_only=True):
                args = c.arguments if isinstance(c.arguments, dict) else {}
                key = tix.parse_key(args.get("key"))
                status = str(args.get("status") or "").strip().lower()
                if status in ("closed", "resolved") and key not in dup_keys:
                    return False, f"{key} was set to {status}"
            return True

        criteria = [
            Criterion("priorities", "Every non-duplicate new ticket has the policy's priority for its impact and "
                      "the customer's tier.", "final_state", priorities, 2.0),
            Criterion("teams", "Every non-duplicate new ticket is routed to the team owning its product.",
                      "final_state", routed, 2.0),
            Criterion("triaged", "Every non-duplicate new ticket is Triaged.", "final_state", triaged,
                      requires=("priorities",)),  # a bulk status flip pays only with the triage itself
            Criterion("acknowledged", "Every non-duplicate new ticket has a public comment stating its priority's "
                      "first-response target (and no other target).", "final_state", acknowledged, 2.0),
            Criterion("duplicates_closed", "Each duplicate is Closed as Duplicate and linked to the customer's "
                      "oldest open ticket with that error code.", "final_state", duplicates_closed, 2.0),
            Criterion("duplicate_notice", "Each duplicate has a public comment naming the ticket it is tracked in "
                      "(and no other ticket).",
                      "final_state", duplicate_notice),
            Criterion("no_false_duplicates", "No other ticket was closed or linked as a duplicate ("
                      + " or ".join(kind for x, kind in (
                          (look1, "same code at another customer"), (look2, "an earlier ticket already closed"))
                          if any(x is y for y, _ in lookalikes)) + ").", "final_state", no_false_duplicates,
                      guard=True),
            Criterion("others_untouched", "Tickets outside the New queue kept their status, priority, team and "
                      "assignee and got no comments.", "final_state", others_untouched, guard=True),
            Criterion("no_wrong_closures", "No ticket other than the duplicates was ever closed or resolved.",
                      "process", no_wrong_closures, guard=True),
        ]
        if not dups:  # level 1: no duplicates and no look-alikes to tell apart
            criteria = [c for c in criteria if c.id not in ("duplicates_closed", "duplicate_notice")]
        if not lookalikes:  # nothing in the queue looks like a duplicate without being one
            criteria = [c for c in criteria if c.id != "no_false_duplicates"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"regular": {t["key"]: [t["want_priority"], t["want_team"]] for t in regular},
                  "duplicates": {d["key"]: d["original"]["key"] for d in dups},
                  "lookalikes": [x["key"] for x, _ in lookalikes],
                  # the trap mix drawn (empty: not in this instance)
                  "lookalike_other_customer": look1["key"] if any(look1 is x for x, _ in lookalikes) else "",
                  "lookalike_closed": look2["key"] if any(look2 is x for x, _ in lookalikes) else "",
                  "twin_customers": sorted([base, twin]) if twin and any(
                      t["customer"] in (base, twin) for t in regular + dups) else [],
                  "no_component": [t["key"] for t in regular if not t["component"]],
                  "security": [t["key"] for t in regular if t["impact"] == "security"],
                  "second_open": {d["key"]: second_open["key"] for d in dups if second_open is not None
                                  and d["original"]["customer"] == second_open["customer"]
                                  and d["code"] == second_open["code"]}},
        )
