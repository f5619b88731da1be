"""Project tracking: set up next sprint from the product manager's planning mail.

The mail (last sprint's version is still in the inbox) lists new work with estimates,
labels and dependencies, who has how many points, and the assignment rule: carried-over
work counts first, then each new item, in order, goes to the person with the matching skill
who has the most points left. The agent moves unfinished tickets over (not Done or Won't
Do), reuses the backlog ticket one item already has instead of creating a duplicate, leaves
deferred items alone, links the dependencies, and posts a summary on the epic. A second
project has sprints with the same names.

The default level draws its trap mix per seed (``TRAPS``, each there with ``TRAP_ODDS``, at
least one always; levels 1-2 keep every kind): last sprint's planning mail still in the inbox,
the backlog ticket to reuse, the deferred backlog ticket, the deferred new item, and an item
that needs a carried-over ticket. ``Task.data`` names each (empty when absent); the mail, the
tracker and the graders carry only the ones drawn.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.mail import state as mail
from longhorizon.apps.tickets import state as tix
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import People, company, long_date, norm, rng_and_faker, slug
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.tickets import created_key, mentions_key

WORK = {
    "backend": ["Add retries to webhook delivery", "Rate-limit the public search endpoint",
                "Move invoice PDFs to object storage", "Audit log for permission changes",
                "Paginate the orders export", "Cache exchange rates for an hour",
                "Idempotency keys for payment requests", "Purge expired sessions nightly",
                "Index customer emails for search", "Split the notification worker queue",
                "Retry failed card captures", "Archive closed accounts after 90 days",
                "Nightly backup of tenant settings", "Batch the email digest job", "Validate VAT numbers on save",
                "Expose usage metrics endpoint", "Deduplicate inbound webhooks", "Rotate signing keys monthly",
                "Timeouts for third-party tax lookups", "Soft-delete for projects"],
    "frontend": ["Empty state for the reports page", "Keyboard shortcuts for the ticket list",
                 "Dark mode for the settings pages", "Inline validation on the signup form",
                 "Accessible labels on chart legends", "Skeleton loaders on the dashboard",
                 "Bulk select in the invoice table", "Remember table column widths",
                 "Show sync status in the header", "Date picker presets for reports",
                 "Responsive layout for the billing page", "Toast notifications for saved changes",
                 "Drag-and-drop file upload", "Sticky filters on the orders list", "Print view for invoices",
                 "Avatar upload with cropping", "Search-as-you-type in the customer picker",
                 "Confirm dialog before deleting a report"],
}
OTHER_WORK = ["Offline sync for field notes", "Push notification settings", "Biometric login",
              "App store screenshots", "Crash reporting upgrade", "Deep links for invoices", "Tablet layout",
              "Localise the onboarding flow"]
AREAS = ["payments", "search", "reports", "auth", "notifications", "onboarding", "exports"]
THEMES = ["Self-serve billing", "Faster search", "Reliable notifications", "Enterprise readiness",
          "Reporting refresh", "Onboarding revamp"]
PROJECTS = [("WEB", "Web platform"), ("CORE", "Core services"), ("PAY", "Payments"), ("APP", "Customer app"),
            ("DATA", "Data platform")]
POINTS = [1, 2, 3, 5, 8]
TRAPS = ("old_plan", "reuse", "deferred_ticket", "deferred_item", "needs_carried")
TRAP_ODDS = 0.6


@register
class SprintPlanning(TaskFamily):
    name = "sprint_planning"
    category = "project tracking"
    apps = ("tickets", "mail")
    description = ("Prepare the next sprint from a planning mail: carry over unfinished work, create the new "
                   "items (reusing an existing backlog ticket) with estimates, labels and the epic, assign by "
                   "remaining capacity, link dependencies, and post a summary on the epic.")

    levels = 3
    """1: one ticket to carry over (next to one Done and one Won't Do) and one new item, no reuse
    and no dependencies; 2: two to carry
    over and the new items that the reused backlog ticket and both dependencies involve (two to
    four); 3 (default): three or four to carry over, five or six new items."""
    toolsets = {1: (
        "mail__read_message", "mail__search_messages", "tickets__add_comment", "tickets__create_ticket",
        "tickets__list_users", "tickets__search_tickets", "tickets__update_ticket",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        short = level == 1  # the plan fits in one read: no need to look around the tracker first
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        _, domain = company(fake)
        (pkey, pname), (okey, oname) = rng.sample(PROJECTS, 2)
        today = date(2026, 1, 12) + timedelta(days=rng.randrange(40) * 7)  # a Monday
        n = rng.randint(8, 30)
        cur, nxt = f"Sprint {n}", f"Sprint {n + 1}"

        def user(p, team):
            return {"username": slug(p.first) + slug(p.last)[:1], "name": p.name, "email": p.email, "team": team}

        me, pm = people.make(domain), people.make(domain)
        backend = [people.make(domain) for _ in range(3)]
        frontend = [people.make(domain) for _ in range(2)]
        others = [people.make(domain) for _ in range(2)]
        users = [user(me, "Engineering Management"), user(pm, "Product")]
        users += [user(p, "Backend") for p in backend] + [user(p, "Frontend") for p in frontend]
        users += [user(p, "Mobile") for p in others]
        uname = {u["name"]: u["username"] for u in users}
        skill_of = {uname[p.name]: "backend" for p in backend} | {uname[p.name]: "frontend" for p in frontend}
        engineers = [uname[p.name] for p in backend + frontend]
        first_of = {uname[p.name]: p.first for p in backend + frontend}

        pools = {k: rng.sample(v, len(v)) for k, v in WORK.items()}

        def take(skill: str) -> str:
            return pools[skill].pop()

        sprints = [
            {"project": pkey, "name": f"Sprint {n - 1}", "start": (today - timedelta(days=28)).isoformat(),
             "end": (today - timedelta(days=17)).isoformat(), "state": "closed"},
            {"project": pkey, "name": cur, "start": (today - timedelta(days=14)).isoformat(),
             "end": (today - timedelta(days=3)).isoformat(), "state": "active"},
            {"project": pkey, "name": nxt, "start": today.isoformat(),
             "end": (today + timedelta(days=11)).isoformat(), "state": "planned"},
            {"project": okey, "name": cur, "start": (today - timedelta(days=14)).isoformat(),
             "end": (today - timedelta(days=3)).isoformat(), "state": "active"},
            {"project": okey, "name": nxt, "start": today.isoformat(),
             "end": (today + timedelta(days=11)).isoformat(), "state": "planned"},
        ]
        theme, other_theme = rng.sample(THEMES, 2)
        tickets = []

        def ticket(title, **kw):
            t = {"project": pkey, "title": title, "created": (datetime.combine(today, time(9)) - timedelta(
                days=rng.randint(5, 60), minutes=rng.randrange(600))).isoformat(), **kw}
            tickets.append(t)
            return t

        epic = ticket(theme, type="epic", status="In Progress", description=f"Everything for {theme.lower()}.")
        ticket(other_theme, type="epic", status="To Do", description="Next quarter.")
        for e in tickets:
            e["created"] = (datetime.combine(today, time(9)) - timedelta(days=rng.randint(70, 120))).isoformat()
        # the current sprint: finished and unfinished work
        sprint_work = []
        for status in ["Done"] * rng.randint(3, 5) + ["Won't Do"] + ["To Do", "In Progress", "In Review"] \
                + rng.sample(["To Do", "In Progress"], rng.randint(0, 1)):
            skill = rng.choice(["backend", "frontend"])
            who = rng.choice([e for e in engineers if skill_of[e] == skill])
            sprint_work.append(ticket(take(skill), type=rng.choice(["story", "task", "bug"]), status=status,
                                      estimate=rng.choice(POINTS), labels=[skill, rng.choice(AREAS)], assignee=who,
                                      sprint=cur, parent="EPIC",
                                      resolution=status if status in ("Done", "Won't Do") else None))
        rng.shuffle(sprint_work)
        carry = [t for t in sprint_work if t["status"] not in ("Done", "Won't Do")]
        traps = {k for k in TRAPS if rng.random() < TRAP_ODDS}
        if not traps:
            traps.add(rng.choice(TRAPS))
        if level < self.levels:  # levels 1-2 keep every kind (then show fewer of them)
            traps = set(TRAPS)
        finished = [t for t in sprint_work if t["status"] in ("Done", "Won't Do")]
        # new items; one already sits in the backlog
        items = []
        for _ in range(rng.randint(5, 6)):
            skill = rng.choice(["backend", "backend", "frontend"])
            items.append({"title": take(skill), "skill": skill, "type": rng.choice(["story", "story", "task", "bug"]),
                          "estimate": rng.choice(POINTS), "area": rng.choice(AREAS), "needs": []})
        if not any(i["skill"] == "frontend" for i in items):
            items[-1]["skill"] = "frontend"
            items[-1]["title"] = take("frontend")
        reused = rng.choice(items[1:]) if "reuse" in traps else None
        reused_ticket = ticket(reused["title"], type="task", status="To Do",
                               description="Came up in the last retro; not estimated yet.") if reused else None
        deferred_existing = ticket(take("backend"), type="story", status="To Do", labels=["backend"]) \
            if "deferred_ticket" in traps else None
        deferred_new = take("frontend") if "deferred_item" in traps else None
        for _ in range(rng.randint(2, 3)):
            skill = rng.choice(["backend", "frontend"])
            backlog_other = ticket(take(skill), type=rng.choice(["story", "task", "bug"]), status="To Do",
                   labels=[skill], estimate=rng.choice([None, 3, 5]))
        # dependencies: an item on an earlier item, another on a carried-over ticket
        j = rng.randrange(1, len(items))
        i = rng.randrange(0, j)
        items[j]["needs"].append(("item", i))
        k = rng.choice([x for x in range(len(items)) if x != j])
        c = rng.choice(carry)
        if "needs_carried" in traps:
            items[k]["needs"].append(("carry", c))

        # the other project, with sprints of the same names
        for title in rng.sample(OTHER_WORK, 4):
            tickets.append({"project": okey, "title": title, "type": "story",
                            "created": (datetime.combine(today, time(9)) - timedelta(days=rng.randint(5, 40))).isoformat(),
                            "status": rng.choice(["To Do", "In Progress", "Done"]), "sprint": cur,
                            "estimate": rng.choice(POINTS), "assignee": uname[rng.choice(others).name]})
        if level < self.levels:  # the same draws, then less work (the default stays byte for byte)
            if level == 1:
                kept, carry = [0], carry[:1]
            else:
                kept, carry = sorted({i, j, k, items.index(reused)}), [c] + [x for x in carry if x is not c][:1]
            renum = {old: new for new, old in enumerate(kept)}
            items = [items[x] for x in kept]
            for it in items:
                it["needs"] = [] if level == 1 else [(kind, renum[ref] if kind == "item" else ref)
                                                     for kind, ref in it["needs"] if kind != "item" or ref in renum]
            gone = [t for t in sprint_work if t["status"] not in ("Done", "Won't Do") and t not in carry]
            if level == 1:  # one Done ticket is enough next to the Won't Do one
                gone += [t for t in sprint_work if t["status"] == "Done"][1:]
                finished = [t for t in finished if all(t is not g for g in gone)]
            if reused not in items:
                gone.append(reused_ticket)
                reused = reused_ticket = None
            tickets[:] = [t for t in tickets if all(t is not g for g in gone)]
            sprint_work = [t for t in sprint_work if all(t is not g for g in gone)]

        # numbering: creation order within each project
        tickets.sort(key=lambda t: (t["project"], t["created"]))
        counters = {pkey: rng.randint(30, 200), okey: rng.randint(30, 200)}
        for t in tickets:
            t["number"] = counters[t["project"]]
            counters[t["project"]] += 1
            t["key"] = f"{t['project']}-{t['number']}"
        for t in tickets:
            if t.get("parent") == "EPIC":
                t["parent"] = epic["key"]
            if t["status"] == "Done" and "resolution" not in t:
                t["resolution"] = "Done"

        # capacity and the assignment rule ------------------------------------------------------------
        order = engineers[:]  # as listed in the mail
        load = {e: sum(t["estimate"] for t in carry if t["assignee"] == e) for e in order}
        capacity = {e: load[e] + rng.choice([3, 5, 6, 8, 10]) for e in order}
        left = {e: capacity[e] - load[e] for e in order}
        for it in items:
            cands = [e for e in order if skill_of[e] == it["skill"]]
            best = max(cands, key=lambda e: (left[e], -order.index(e)))
            it["assignee"] = best
            left[best] -= it["estimate"]
            it["runner_up"] = next((e for e in sorted(cands, key=lambda e: (-left[e], order.index(e))) if e != best),
                                   best)
        total = sum(t["estimate"] for t in carry) + sum(it["estimate"] for it in items)

        def item_line(idx, it) -> str:
            needs = []
            for kind, ref in it["needs"]:
                needs.append(f"#{ref + 1}" if kind == "item" else f"{ref['key']} to be finished")
            extra = f" (needs {' and '.join(needs)})" if needs else ""
            pts = f"{it['estimate']} point{'s' if it['estimate'] != 1 else ''}"
            return f"{idx + 1}. {it['title']}: {it['type']}, {pts}, labels {it['skill']} + {it['area']}{extra}"

        deferred = [x for x in (deferred_existing and deferred_existing["title"], deferred_new) if x]
        deferred_text = (f"Not this sprint: {' and '.join(f'{chr(34)}{x}{chr(34)}' for x in deferred)}. Leave "
                         f"{'those' if len(deferred) > 1 else 'it'} in the backlog (no new "
                         f"{'tickets for them' if len(deferred) > 1 else 'ticket for it'}).\n\n") if deferred else ""
        cap_lines = "\n".join(f"- {first_of[e]} ({skill_of[e]}): {capacity[e]}" for e in order)
        plan = (
            f"Hi {me.first},\n\nHere's the plan for {nxt} ({long_date(today)} to "
            f"{long_date(today + timedelta(days=11))}). Could you set it up in the tracker ({pkey})?\n\n"
            f"Carry-over: everything in {cur} that isn't Done (Won't Do counts as done) moves to {nxt} and keeps "
            f"its assignee.\n\n"
            f"New work, all under the epic {epic['key']} ({theme}):\n"
            + "\n".join(item_line(x, it) for x, it in enumerate(items)) +
            f"\n\nIf one of these already has a ticket in the backlog, use that ticket rather than opening a "
            f"second one.\n\nCapacity for {nxt}, in story points:\n{cap_lines}\n\n"
            f"Assignment: carried-over tickets count against their assignee's capacity at their full estimate. "
            f"Then go through the new items in the order above and give each one to the person with the "
            f"matching skill (the backend/frontend label) who has the most points left; on a tie, whoever is "
            f"listed first above.\n\n"
            f"Dependencies: where I wrote \"needs X\", link the tickets so that X blocks the item.\n\n"
            + deferred_text +
            f"When it's all in, post one comment on {epic['key']} listing the keys of the new items and the total "
            f"story points committed to {nxt}.\n\nThanks!\n{pm.first}"
        )
        old_plan = (
            f"Hi {me.first},\n\nPlan for {cur}: carry over what's unfinished from Sprint {n - 1}, and add "
            + ", ".join(f"\"{t['title']}\"" for t in sprint_work[:3]) + f" under {epic['key']}. Capacity as "
            f"usual.\n\n{pm.first}"
        )
        msgs = [
            *([{"folder": "Inbox", "sender": pm.email, "sender_name": pm.name, "subject": f"{cur} planning",
                "body": old_plan, "date": datetime.combine(today - timedelta(days=15), time(16, 40)).isoformat(),
                "is_read": True}] if "old_plan" in traps else []),
            {"folder": "Inbox", "sender": users[5]["email"], "sender_name": users[5]["name"],
             "subject": "Out on Friday", "body": "Heads-up: I'm out this Friday, back Monday.",
             "date": datetime.combine(today - timedelta(days=4), time(11, 5)).isoformat()},
            {"folder": "Inbox", "sender": f"noreply@{domain}", "sender_name": "Tracker", "subject":
             f"{cur} ends soon", "body": f"{cur} in {pkey} ends on {(today - timedelta(days=3)).isoformat()}.",
             "date": datetime.combine(today - timedelta(days=4), time(7)).isoformat()},
            {"folder": "Inbox", "sender": pm.email, "sender_name": pm.name, "subject": f"{nxt} planning",
             "body": plan, "date": datetime.combine(today - timedelta(days=1), time(17, 20)).isoformat()},
        ]
        plan_id = len(msgs)  # the newest, last

        def build(root: Path) -> None:
            tix.create_tracker(
                root / "state" / "tickets.sqlite", me=uname[me.name],
                now=datetime.combine(today, time(9)).isoformat(),
                projects=[{"key": pkey, "name": pname, "kind": "project"}, {"key": okey, "name": oname, "kind": "project"}],
                teams=[{"name": t} for t in ("Backend", "Engineering Management", "Frontend", "Mobile", "Product")],
                users=users, sprints=sprints,
                tickets=[{k: v for k, v in t.items() if k != "key"} for t in tickets])
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=msgs,
                                now=datetime.combine(today, time(9)).isoformat())

        # ground truth -----------------------------------------------------------------------------------
        seeded = {t["key"]: {"status": t["status"], "sprint": t.get("sprint"), "assignee": t.get("assignee"),
                             "estimate": t.get("estimate")} for t in tickets}
        touched = {t["key"] for t in carry} | ({reused_ticket["key"]} if reused_ticket else set())

        w = phrasing_rng(self.name, seed)
        plan = say(w, f"{pm.first} mailed me the plan for {nxt} last night.",
                   f"Last night {pm.first} sent me the plan for {nxt} by mail.",
                   f"The plan for {nxt} came in from {pm.first} last night, by mail.",
                   f"I got {pm.first}'s mail with the plan for {nxt} last night.")
        ask = say(w, "Could you set the sprint up in the tracker exactly as the mail says?",
                  "Can you set up the sprint in the tracker exactly the way the mail says?",
                  "Please set the sprint up in the tracker, exactly as the mail describes it.",
                  "Would you get the sprint set up in the tracker exactly as that mail says?")
        away = say(w, "I'm in workshops all morning.", "I'll be in workshops all morning.",
                   "Workshops keep me busy all morning.")
        instruction = " ".join([plan, ask, away, say(w, "Thanks!", "Thank you!", "Cheers!")])

        def fields(it) -> dict:
            return {"estimate": it["estimate"], "labels": [it["skill"], it["area"]], "sprint": nxt,
                    "parent": epic["key"]}

        def create(it) -> ToolCall:
            return ToolCall("tickets__create_ticket", {"project": pkey, "title": it["title"], "type": it["type"],
                                                       "assignee": it["assignee"], **fields(it)},
                            f"Create {it['title']!r} for {first_of[it['assignee']]}.")

        def solve():
            yield ToolCall("mail__search_messages", {"query": "planning", "sender": pm.email},
                           "Find the planning mail.")
            yield ToolCall("mail__read_message", {"message_id": plan_id}, f"Read the {nxt} plan.")
            if not short:
                yield ToolCall("tickets__list_sprints", {"project": pkey}, f"Find {cur} and {nxt} in {pkey}.")
            yield ToolCall("tickets__list_users", {}, "Map first names to usernames and skills.")
            cur_page = json.loads((yield ToolCall("tickets__search_tickets",
                                                  {"project": pkey, "sprint": cur, "limit": 50},
                                                  f"What is in {cur}?")))
            todo = [t for t in cur_page["tickets"] if t["status"] not in ("Done", "Won't Do")]
            assert {t["key"] for t in todo} == {t["key"] for t in carry}
            for t in todo:
                if not short:
                    yield ToolCall("tickets__get_ticket", {"key": t["key"]}, f"Check {t['key']} before moving it.")
                yield ToolCall("tickets__update_ticket", {"key": t["key"], "sprint": nxt},
                               f"{t['key']} is unfinished: carry it over.")
            if not short:
                yield ToolCall("tickets__get_ticket", {"key": epic["key"]}, "Check the epic.")
                yield ToolCall("tickets__search_tickets", {"project": pkey, "sprint": "backlog", "limit": 50},
                               "See what is already in the backlog.")
            keys = {}
            for x, it in enumerate(items):
                hits = json.loads((yield ToolCall("tickets__search_tickets",
                                                  {"project": pkey, "query": it["title"]},
                                                  f"Does {it['title']!r} exist already?")))
                same = [h for h in hits["tickets"] if norm(h["title"]) == norm(it["title"])]
                if same:
                    key = same[0]["key"]
                    yield ToolCall("tickets__update_ticket", {"key": key, "type": it["type"], **fields(it)},
                                   f"{key} is already in the backlog: pull it in.")
                    yield ToolCall("tickets__assign_ticket", {"key": key, "assignee": it["assignee"]},
                                   f"{first_of[it['assignee']]} has the most {it['skill']} points left.")
                else:
                    key = created_key((yield create(it)))
                keys[x] = key
            for x, it in enumerate(items):
                for kind, ref in it["needs"]:
                    blocker = keys[ref] if kind == "item" else ref["key"]
                    yield ToolCall("tickets__link_tickets", {"key": blocker, "kind": "blocks", "other": keys[x]},
                                   f"{blocker} blocks {keys[x]}.")
            if short:  # the carried-over estimates were in the sprint listing, the new ones in the mail
                points = sum(t["estimate"] or 0 for t in todo) + sum(it["estimate"] for it in items)
            else:
                check = json.loads((yield ToolCall("tickets__search_tickets", {"project": pkey, "sprint": nxt,
                                                                               "limit": 50},
                                                   f"Verify {nxt} and add up the points.")))
                points = sum(t["estimate"] or 0 for t in check["tickets"])
            body = (f"{nxt} is planned. New items: " + ", ".join(keys[x] for x in range(len(items)))
                    + f". Total committed to {nxt}: {points} story points (including carried-over work).")
            yield ToolCall("tickets__add_comment", {"key": epic["key"], "body": body}, "Post the summary on the epic.")
            return (f"{nxt} is set up: {len(carry)} tickets carried over, {len(items)} new items "
                    f"({', '.join(keys.values())}) assigned by capacity, dependencies linked, {total} points "
                    f"committed; summary posted on {epic['key']}.")

        # graders ------------------------------------------------------------------------------------------
        def sprint_of(w, key):
            t = tix.ticket(w, key)
            names = {s["id"]: (s["project"], s["name"]) for s in tix.sprints(w)}
            return names.get(t["sprint_id"], (None, None))[1] if t["sprint_id"] else None

        def item_tickets(w) -> dict[int, list[dict]]:
            found = {}
            for x, it in enumerate(items):
                found[x] = [t for t in tix.tickets(w, pkey) if norm(t["title"]) == norm(it["title"])]
            return found

        def one_each(w):
            found = item_tickets(w)
            bad = [items[x]["title"] for x, ts in found.items() if len(ts) != 1]
            return {x: ts[0] for x, ts in found.items() if len(ts) == 1}, bad

        def carried_over(w, t):
            for c in carry:
                now_ = tix.ticket(w, c["key"])
                if sprint_of(w, c["key"]) != nxt or now_["status"] != c["status"] or now_["assignee"] != c["assignee"]:
                    return False, f"{c['key']}: {sprint_of(w, c['key'])}, {now_['status']}, {now_['assignee']}"
            moved = [f["key"] for f in finished if sprint_of(w, f["key"]) != cur]  # moving the whole sprint is no plan
            return not moved, f"finished tickets moved too: {moved}"

        def finished_stay(w, t):
            wrong = [f["key"] for f in finished if sprint_of(w, f["key"]) != cur]
            return not wrong, f"moved: {wrong}" if wrong else ""

        def new_items(w, t):
            got, bad = one_each(w)
            if bad:
                return False, f"not exactly one ticket for: {bad}"
            for x, it in enumerate(items):
                tk = got[x]
                if sprint_of(w, tk["key"]) != nxt or tk["estimate"] != it["estimate"] or tk["type"] != it["type"]:
                    return False, f"{tk['key']}: sprint {sprint_of(w, tk['key'])}, {tk['estimate']} pts, {tk['type']}"
            if reused is not None and got[items.index(reused)]["key"] != reused_ticket["key"]:
                return False, "the backlog ticket was not reused"
            return True

        def labels(w, t):
            got, _ = one_each(w)
            for x, it in enumerate(items):
                have = {lb.lower() for lb in got[x]["labels"]} if x in got else set()
                if not {it["skill"], it["area"]} <= have:
                    return False, f"{it['title']}: labels {sorted(have)}"
            return True

        def assignees(w, t):
            got, _ = one_each(w)
            wrong = [(it["title"], got[x]["assignee"] if x in got else None, it["assignee"])
                     for x, it in enumerate(items) if x not in got or got[x]["assignee"] != it["assignee"]]
            return not wrong, f"(item, got, want): {wrong}" if wrong else ""

        def under_epic(w, t):
            got, _ = one_each(w)
            wrong = [it["title"] for x, it in enumerate(items) if x not in got or got[x]["parent"] != epic["key"]]
            return not wrong, f"not under {epic['key']}: {wrong}" if wrong else ""

        def dependencies(w, t):
            got, _ = one_each(w)
            for x, it in enumerate(items):
                for kind, ref in it["needs"]:
                    blocker = (got[ref]["key"] if ref in got else None) if kind == "item" else ref["key"]
                    if x not in got or blocker is None or not tix.has_link(w, blocker, got[x]["key"], "blocks"):
                        return False, f"{it['title']} is not blocked by {blocker}"
            return True

        def epic_summary(w, t):
            got, _ = one_each(w)
            if len(got) != len(items):
                return False, "items missing"
            for c in [c for c in tix.comments(w, epic["key"])]:
                text = c["body"]
                if not all(mentions_key(text, got[x]["key"]) for x in got):
                    continue
                nums = {int(v) for v in re.findall(r"\d+", re.sub(r"[A-Za-z][A-Za-z0-9]*-\d+", " ", text))}
                if total in nums:
                    return True
            return False, f"no comment on {epic['key']} with every new key and the total {total}"

        def deferred_untouched(w, t):
            if deferred_existing and sprint_of(w, deferred_existing["key"]) is not None:
                return False, "the deferred backlog ticket was put in a sprint"
            if deferred_new and any(norm(x["title"]) == norm(deferred_new) for x in tix.tickets(w)):
                return False, "a ticket was created for the deferred item"
            for key, before in seeded.items():
                if key in touched:
                    continue
                now_ = tix.ticket(w, key)
                sp = sprint_of(w, key)
                if (now_["status"], sp, now_["assignee"], now_["estimate"]) != (
                        before["status"], before["sprint"], before["assignee"], before["estimate"]):
                    return False, f"{key} changed"
            return True

        def one_summary(w, t):
            on_epic = [c for c in t.calls("tickets__add_comment", ok_only=True)
                       if isinstance(c.arguments, dict) and tix.parse_key(c.arguments.get("key")) == epic["key"]]
            return len(on_epic) == 1, f"{len(on_epic)} comments posted on {epic['key']}"

        criteria = [
            Criterion("carried_over", f"Unfinished {cur} tickets (and only they) are in {nxt} with their status and "
                      "assignee.",
                      "final_state", carried_over, 2.0),
            Criterion("finished_stay", f"Done and Won't Do tickets stay in {cur}.", "final_state", finished_stay,
                      guard=True),
            Criterion("new_items", f"Each planned item is exactly one ticket in {nxt} with its type and estimate; "
                      "the existing backlog ticket is reused.", "final_state", new_items, 2.0),
            Criterion("labels", "Each item carries its skill and area labels.", "final_state", labels),
            Criterion("assignees", "Each item is assigned by the capacity rule.", "final_state", assignees, 2.0),
            Criterion("under_epic", f"Each item's parent is {epic['key']}.", "final_state", under_epic),
            Criterion("dependencies", "Every 'needs X' is linked as X blocks the item.", "final_state",
                      dependencies),
            Criterion("epic_summary", f"A comment on {epic['key']} lists every new item's key and the total "
                      f"points ({total}).", "final_state", epic_summary),
            Criterion("deferred_untouched", "Deferred items stay out of the sprint (none created) and no other "
                      "ticket changed.", "final_state", deferred_untouched, guard=True),
            Criterion("one_summary", "Exactly one comment was posted on the epic.", "process", one_summary,
                      requires=("epic_summary",)),
        ]
        # perturbations: the first item (or the backlog ticket) is the one done wrong
        reuse = reused_ticket["key"] if reused_ticket else None

        def writes(it) -> perturb.Match:
            """The call that files item ``it``: its creation, or the update that pulls the backlog ticket in."""
            if it is reused:
                return perturb.on("tickets__update_ticket", key=reuse)
            return perturb.on("tickets__create_ticket", title=it["title"])

        first = items[0]
        assigns = perturb.on("tickets__assign_ticket", key=reuse) if first is reused else writes(first)
        summary = perturb.on("tickets__add_comment", key=epic["key"])
        new_only = sum(it["estimate"] for it in items)
        if reused is None:  # nothing to reuse: a duplicate ticket
            duplicate = perturb.repeat(solve, writes(first))
        else:  # a new ticket instead of the backlog one
            duplicate = perturb.drop(perturb.drop(perturb.insert(solve, create(reused), before=writes(reused)),
                                                  writes(reused)), perturb.on("tickets__assign_ticket", key=reuse))
        perturbations = {
            "carried_over": perturb.drop(solve, perturb.on("tickets__update_ticket", key=carry[0]["key"],
                                                           sprint=nxt)),
            "finished_stay": perturb.insert(solve, ToolCall("tickets__update_ticket", {
                "key": finished[0]["key"], "sprint": nxt}, "Move this one too."),
                before=perturb.on("tickets__search_tickets", query=first["title"])),
            "new_items": duplicate,
            "labels": perturb.change(solve, writes(first), labels=[first["skill"]]),
            "assignees": perturb.change(solve, assigns, assignee=first["runner_up"]),
            "under_epic": perturb.change(solve, writes(first), parent=None),
            "dependencies": perturb.drop(solve, perturb.on("tickets__link_tickets")),
            "epic_summary": perturb.change(solve, summary, lambda a: {  # only the new work counted
                **a, "body": a["body"].replace(f": {total} story points", f": {new_only} story points")}),
            "deferred_untouched": perturb.insert(solve, ToolCall("tickets__create_ticket", {
                "project": pkey, "title": deferred_new, "type": "story"}, "Create the deferred item anyway.")
                if deferred_new else ToolCall("tickets__update_ticket", {
                    "key": (deferred_existing or backlog_other)["key"], "sprint": nxt}, "Pull this one in too."),
                before=summary),
            "one_summary": perturb.repeat(solve, summary),
        }
        if not any(it["needs"] for it in items):  # level 1: no item needs another, so nothing to link
            criteria = [c for c in criteria if c.id != "dependencies"]
            del perturbations["dependencies"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"project": pkey, "sprint": nxt, "epic": epic["key"], "carry": [c["key"] for c in carry],
                  "items": [{"title": it["title"], "assignee": it["assignee"], "estimate": it["estimate"]}
                            for it in items],
                  "reused": reused_ticket["key"] if reused_ticket else None, "total": total,
                  "old_plan_mail": f"{cur} planning" if "old_plan" in traps else "",
                  "deferred_ticket": deferred_existing["key"] if deferred_existing else "",
                  "deferred_item": deferred_new or "",
                  "needs_carried": next((ref["key"] for it in items for kind, ref in it["needs"] if kind == "carry"),
                                        "")},
        )
