"""Project tracking: the readiness review before a release, from the tracker and the team chat.

The release manager's message in the release channel sets the rules: go through every ticket
of the product's project labelled for the release, bring statuses up to date from this
morning's stand-up thread, move what won't be Done to the next release (swap the label),
keep blockers (P1) in the release and flag them, then post a summary in the channel.
Distractors: the stand-up threads of the two previous days (one of them says a ticket went to
review, the next day it went back), a correction later in today's thread, an engineer who is
out today, the web project's tickets carrying a release label with the same number, the last
release's channel, and tickets of the previous and next releases.

The trap mix is drawn per seed (``Task.data`` records it, empty where a trap is absent): today's
correction either sends a ticket back from review to In Progress or says a ticket still "in
review" is Done after all (level 1 keeps the first); the ticket only older stand-ups mention, the
absent engineer's ticket, the web project's look-alike tickets and the blocker that is Done today
are each there or not. ``unmentioned_kept`` is a criterion only where a release ticket goes
unmentioned today (the stale one or the absent engineer's).
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.chat import state as chat
from longhorizon.apps.tickets import state as tix
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import People, company, day_month, norm, rng_and_faker, slug
from longhorizon.tasks import phrasing
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.tickets import mentions_key

WORK = ["Offline mode for drafts", "Faster cold start", "Redesigned settings screen", "In-app feedback form",
        "Push notification preferences", "Biometric unlock", "Crash on rotating the camera view",
        "Share sheet for invoices", "Dark mode for charts", "Accessibility labels on buttons",
        "Retry failed uploads", "Pagination in the activity feed", "Search history suggestions",
        "Deep links to tickets", "Localised date formats", "Remove the legacy login screen",
        "Upgrade the analytics SDK", "Memory leak in the image cache", "Sync conflicts on slow networks",
        "Empty state for new accounts", "Tablet split view", "Onboarding checklist", "Export to PDF",
        "Login loop after password change", "Badge count not clearing", "Attachment size limit message"]
WEB_WORK = ["Cookie banner copy", "New pricing page", "Blog RSS feed", "Footer links audit"]

DONE_SAYS = ["{k} is merged and verified on staging, so that one's done",
             "finished {k}, QA signed it off: done",
             "{k} is done, merged this morning"]
REVIEW_SAYS = ["{k}: PR is up and waiting for review", "{k} is in review now", "opened the PR for {k}, it's in review"]
PROGRESS_SAYS = ["started on {k}", "picked up {k} this morning, in progress now", "{k} is in progress"]
TODO_SAYS = ["haven't started {k} yet", "{k} still not started"]
STATUS_WORDS = {"Done": DONE_SAYS, "In Review": REVIEW_SAYS, "In Progress": PROGRESS_SAYS, "To Do": TODO_SAYS}
PATH = {("To Do", "In Progress"): ["In Progress"], ("To Do", "In Review"): ["In Progress", "In Review"],
        ("To Do", "Done"): ["In Progress", "Done"], ("In Progress", "In Review"): ["In Review"],
        ("In Progress", "Done"): ["Done"], ("In Review", "Done"): ["Done"],
        ("In Review", "In Progress"): ["In Progress"], ("In Progress", "To Do"): ["To Do"]}
BLOCKER_LABEL = "release-blocker"


def _numbers(text: str) -> set[int]:
    """Whole numbers in ``text`` that are not part of a ticket key, a version, a date or a time."""
    t = re.sub(r"[A-Za-z][A-Za-z0-9]*-\d+", " ", text or "")
    t = re.sub(r"\d+(?:[.:-]\d+)+", " ", t)
    return {int(n) for n in re.findall(r"(?<![\w.])\d+(?![\w.]\d)", t)}


@register
class ReleaseReadinessReview(TaskFamily):
    name = "release_readiness_review"
    category = "project tracking"
    apps = ("tickets", "chat")
    description = ("Run a release readiness review: update the release's tickets from today's stand-up thread, "
                   "move unfinished non-blockers to the next release, flag open blockers, and post a summary in "
                   "the release channel.")

    levels = 3
    """1: three release tickets (one goes Done today, one is corrected back to In Progress and
    moves on, one open P1 blocker not started yet), today's stand-up only; 2: six of the release's kinds (one Done already,
    two that change today, the corrected one, one only older stand-ups mention and the absent
    engineer's where drawn, and one to move at least) and every P1; 3 (default): ten to fourteen."""
    toolsets = {1: (  # level 1 is told both channels: no listing
        "chat__post_message", "chat__read_channel", "chat__read_thread", "tickets__search_tickets",
        "tickets__update_ticket",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        short = level == 1  # three tickets: the review needs only the rules, today's thread and the release
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        _, domain = company(fake)
        today = date(2026, 2, 3) + timedelta(days=rng.randrange(280))
        while today.weekday() in (0, 5, 6):  # Tuesday-Friday: the two previous stand-ups were workdays
            today += timedelta(days=1)
        days = [today - timedelta(days=2 if today.weekday() >= 2 else 4), today - timedelta(days=1)]
        if today.weekday() == 1:  # Tuesday: the previous stand-ups were Friday and Monday
            days = [today - timedelta(days=4), today - timedelta(days=1)]
        now = datetime.combine(today, time(11, 0))
        major, minor = rng.randint(3, 7), rng.randint(2, 8)
        cur, nxt, prev = f"{major}.{minor}", f"{major}.{minor + 1}", f"{major}.{minor - 1}"
        lab_cur, lab_nxt, lab_prev = f"release-{cur}", f"release-{nxt}", f"release-{prev}"
        chan_cur, chan_prev = f"release-{major}-{minor}", f"release-{major}-{minor - 1}"
        pkey = rng.choice([("APP", "Customer app"), ("MOB", "Mobile app")])

        def person(title):
            p = people.make(domain)
            return {"username": slug(p.first) + slug(p.last)[:1], "handle": f"{slug(p.first)}.{slug(p.last)[:1]}",
                    "name": p.name, "first": p.first, "email": p.email, "title": title}

        me, rm, pm = person("Engineering manager"), person("Release manager"), person("Product manager")
        engs = [person(rng.choice(["Mobile engineer", "Software engineer", "QA engineer"])) for _ in range(5)]
        web_dev = person("Web developer")
        # the trap mix: the correction's direction; each other trap there or not
        correction_done = rng.random() < 0.4 and not short  # "actually Done" rather than "back in progress"
        has_stale = rng.random() < 0.6  # only the older stand-ups mention it (in review, then back)
        has_absent = rng.random() < 0.6  # its engineer is out today: not in today's thread
        has_web = rng.random() < 0.6  # the web project's tickets carry a release label with the same number
        has_p1_done = rng.random() < 0.6  # a blocker (P1) that goes Done today: no flag, stays
        absent = engs[4]
        present = engs[:4] if has_absent else engs

        pool = rng.sample(WORK, len(WORK))
        tickets: list[dict] = []

        def ticket(status, *, project=None, labels=(), assignee=None, priority=None, title=None, **kw):
            t = {"project": project or pkey[0], "title": title or pool.pop(), "status": status,
                 "labels": list(labels), "assignee": (assignee or rng.choice(engs))["username"],
                 "priority": priority or rng.choice(["P2", "P3", "P3", "P4"]),
                 "type": rng.choice(["story", "bug", "task"]), **kw}
            tickets.append(t)
            return t

        # the release: (initial status, status after today's stand-up or None when not mentioned)
        plan = [("Done", None), ("Done", None), ("In Review", "Done"), ("In Review", "Done"),
                ("In Progress", "Done"), ("To Do", "In Progress"), ("In Progress", "In Review"),
                ("To Do", "In Review"), ("In Review", "correction") if correction_done else
                ("In Progress", "correction"), ("In Progress", "stale"),
                ("To Do", "To Do"), ("In Review", "absent")]
        if rng.random() < 0.5:
            plan.append(("To Do", "In Progress"))
        if rng.random() < 0.5:
            plan.append(("In Progress", "Done"))
        rel = []
        for row, (init, after) in enumerate(plan):
            if after == "stale" and not has_stale or after == "absent" and not has_absent:
                continue
            who = absent if after == "absent" else rng.choice(present)
            t = ticket(init, labels=[lab_cur, rng.choice(["ios", "android", "backend", "ux"])], assignee=who)
            t["after"], t["row"] = after, row
            rel.append(t)
        # blockers: one that finishes today (where drawn), one or two that will not
        finishing = [t for t in rel if t["after"] == "Done"]
        unfinished_cands = [t for t in rel if t["after"] in ("In Progress", "In Review", "stale", "To Do", "absent")
                            or t["after"] == "correction" and not correction_done]
        for t in [rng.choice(finishing)] * has_p1_done + rng.sample(unfinished_cands, rng.randint(1, 2)):
            t["priority"] = "P1"
        for t in rel:
            if t["priority"] == "P1":
                t["type"] = "bug"
        # final statuses
        for t in rel:
            a = t["after"]
            t["final"] = {None: t["status"], "correction": "Done" if correction_done else "In Progress",
                          "stale": t["status"], "absent": t["status"]}.get(a, a)
        at_row = {t["row"]: t for t in rel}
        if level < self.levels:  # the same draws, then fewer tickets (the default stays byte for byte)
            if level == 1:  # plan rows: In Review -> Done, the correction, To Do and still To Do
                kept = [at_row[2], at_row[8], at_row[10]]
                if at_row[8]["priority"] == "P1":
                    at_row[8]["priority"] = "P2"
                at_row[10]["priority"], at_row[10]["type"] = "P1", "bug"
            else:  # plan rows: Done, In Review -> Done, To Do -> In Progress, correction, stale, absent
                kept = [t for t in rel if t["row"] in (0, 2, 5, 8, 9, 11) or t["priority"] == "P1"]
                if all(t["final"] == "Done" or t["priority"] == "P1" for t in kept):  # one to move, at least
                    kept.append(next(t for t in rel if t["final"] != "Done" and t["priority"] != "P1"))
            tickets[:] = [t for t in tickets if t not in rel or any(t is k for k in kept)]
            rel = kept
        done_final = [t for t in rel if t["final"] == "Done"]
        moved = [t for t in rel if t["final"] != "Done" and t["priority"] != "P1"]
        blockers = [t for t in rel if t["final"] != "Done" and t["priority"] == "P1"]
        changed = [t for t in rel if t["final"] != t["status"]]

        # everything else
        others = []
        for _ in range(3):
            others.append(ticket("Done", labels=[lab_prev], resolution="Done"))
        for _ in range(2):
            others.append(ticket("To Do", labels=[lab_nxt]))
        for _ in range(2):
            others.append(ticket(rng.choice(["To Do", "In Progress"])))
        web_titles = rng.sample(WEB_WORK, 2) if has_web else []
        for title in web_titles:
            others.append(ticket(rng.choice(["In Progress", "In Review"]), project="WEB", labels=[lab_cur],
                                 assignee=web_dev, title=title))
        for t in tickets:
            if t["status"] == "Done":
                t["resolution"] = "Done"

        rng.shuffle(tickets)
        counters = {pkey[0]: rng.randint(100, 400), "WEB": rng.randint(20, 90)}
        base_day = datetime.combine(today, time(9)) - timedelta(days=60)
        for i, t in enumerate(tickets):
            t["number"] = counters[t["project"]]
            counters[t["project"]] += 1
            t["key"] = f"{t['project']}-{t['number']}"
            t["created"] = (base_day + timedelta(hours=7 * i + rng.randrange(5))).isoformat()
        rel.sort(key=lambda t: t["number"])

        # chat -----------------------------------------------------------------------------------------
        bot = {"handle": "standup-bot", "name": "Stand-up bot", "title": "Bot", "email": ""}
        chat_users = [bot] + [{k: u[k] for k in ("handle", "name", "title", "email")}
                              for u in [me, rm, pm, *engs, web_dev]]
        handle_of = {u["username"]: u["handle"] for u in [me, rm, pm, *engs, web_dev]}
        msgs: list[dict] = []

        def post(channel, user, text, at, thread=None):
            msgs.append({"channel": channel, "user": user, "text": text, "ts": at.isoformat(),
                         **({"thread_id": thread} if thread else {})})
            return len(msgs)

        def say(kind, key):
            return rng.choice(STATUS_WORDS[kind]).format(k=key)

        stale = next((t for t in rel if t["after"] == "stale"), None)
        correction = next(t for t in rel if t["after"] == "correction")
        # the previous release's channel: last time's instructions and summary
        prev_day = today - timedelta(days=rng.randint(25, 40))
        pt = datetime.combine(prev_day, time(9, 45))
        post(chan_prev, rm["handle"], f"Readiness review for {prev} today: usual drill, anything unfinished moves to "
             f"{cur}. @{me['handle']} can you run it?", pt)
        post(chan_prev, me["handle"], f"{prev} readiness: {rng.randint(8, 14)} tickets Done, "
             f"{rng.randint(1, 4)} moved to {cur}, no open blockers. Ready to ship.", pt + timedelta(hours=2))
        # the two earlier stand-ups
        for n, d in enumerate(days):
            root_at = datetime.combine(d, time(9, 30))
            root = post("standup", "standup-bot", f"Stand-up for {day_month(d)}: reply in this thread with what "
                        f"you did, what's next and anything blocking you.", root_at)
            at = root_at
            for e in engs:
                mine = [t for t in rel if t["assignee"] == e["username"] and t["status"] != "Done"]
                bits = []
                for t in mine:
                    if t is stale:
                        bits.append(say("In Review", t["key"]) if n == 0 else
                                    f"{t['key']} came back from review with comments, so it's back in progress")
                    elif rng.random() < 0.6:
                        bits.append(say(t["status"], t["key"]))
                if not bits:
                    bits = ["mostly reviews and meetings"]
                at += timedelta(minutes=rng.randint(2, 9))
                post("standup", e["handle"], "; ".join(bits) + ". No blockers.", at, root)
        # today
        root_at = datetime.combine(today, time(9, 30))
        root = post("standup", "standup-bot", f"Stand-up for {day_month(today)}: reply in this thread with what you "
                    "did, what's next and anything blocking you.", root_at)
        at = root_at
        corr_at = None
        for e in present:
            mine = [t for t in rel if t["assignee"] == e["username"] and t["after"] not in (None, "stale", "absent")]
            bits = []
            for t in mine:
                if t["after"] == "correction":
                    bits.append(say("In Review", t["key"]))
                else:
                    bits.append(say(t["after"], t["key"]))
            if not bits:
                bits = ["pairing with QA on regression tests"]
            rng.shuffle(bits)
            at += timedelta(minutes=rng.randint(2, 9))
            post("standup", e["handle"], "; ".join(bits) + ".", at, root)
            if e["username"] == correction["assignee"]:
                corr_at = at
        post("standup", handle_of[correction["assignee"]],
             f"Correction on {correction['key']}: QA signed it off and it's merged, so it's done, not in review."
             if correction_done else
             f"Correction on {correction['key']}: QA bounced it, so it's back in progress, not in review.",
             corr_at + timedelta(minutes=rng.randint(40, 70)), root)
        if has_absent:
            post("random", absent["handle"], "Out sick today, back tomorrow. Nothing urgent from me.",
                 datetime.combine(today, time(8, 5)))
        post("random", pm["handle"], "Cake in the kitchen for anyone who wants some.",
             datetime.combine(today, time(10, 2)))
        # the release channel
        y = datetime.combine(days[1], time(17, 10))
        post(chan_cur, rm["handle"], f"Reminder: readiness review for {cur} tomorrow, code freeze right after.", y)
        rules_at = datetime.combine(today, time(10, 20))
        rules = post(chan_cur, rm["handle"], (
            f"@{me['handle']} could you run the {cur} readiness review this morning? Everything labelled {lab_cur} in "
            f"{pkey[0]}" + (f" (the web team's {cur} is theirs, not ours)" if has_web else "") + ":\n"
            f"1. Bring each ticket's status up to date from today's stand-up thread.\n"
            f"2. Anything that still won't be Done moves to {nxt}: swap the label to {lab_nxt}.\n"
            f"3. Except blockers, i.e. any P1 in the release: those stay in {cur}, get the {BLOCKER_LABEL} label, "
            f"and go in the summary.\n"
            f"4. Then post the summary here: how many tickets are Done, which keys moved to {nxt}, and the open "
            f"blockers."), rules_at)
        post(chan_cur, pm["handle"], f"Thanks! If {cur} has open blockers I'll tell the customers it's late.",
             rules_at + timedelta(minutes=4), rules)
        post("eng", web_dev["handle"], f"Web {cur} is on track, deploying Thursday." if has_web else
             "Website deploys move to Thursdays from next week.", datetime.combine(days[1], time(15, 0)))
        chat_msgs = _with_ids(msgs)
        if short:  # only today's stand-up (no earlier ones, no filler) and no reminder in the release channel
            chat_msgs = _renumbered([m for m in chat_msgs if not (
                m["channel"] == "standup" and not m["ts"].startswith(today.isoformat())
                or m["text"] == "pairing with QA on regression tests."
                or m["channel"] == chan_cur and m["text"].startswith("Reminder:"))])
        seeded_msgs = len(chat_msgs)

        def build(root: Path) -> None:
            users = [{k: u[k] for k in ("username", "name", "email")} | {"team": "Engineering"}
                     for u in [me, rm, pm, *engs]] + [{k: web_dev[k] for k in ("username", "name", "email")}
                                                      | {"team": "Web"}]
            tix.create_tracker(
                root / "state" / "tickets.sqlite", me=me["username"], now=now.isoformat(),
                projects=[{"key": pkey[0], "name": pkey[1], "kind": "project"},
                          {"key": "WEB", "name": "Website", "kind": "project"}],
                teams=[{"name": "Engineering"}, {"name": "Web"}], users=users,
                tickets=[{k: v for k, v in t.items() if k not in ("key", "after", "final")} for t in tickets])
            chat.create_chat(root / "state" / "chat.sqlite", me["handle"], chat_users, [
                {"name": "standup", "topic": "Daily stand-up threads"},
                {"name": chan_cur, "topic": f"Release {cur} ({pkey[1]})"},
                {"name": chan_prev, "topic": f"Release {prev} ({pkey[1]}), shipped"},
                {"name": "eng", "topic": "Engineering chatter"},
                {"name": "random", "topic": "Anything goes"},
            ], chat_msgs, now=now.isoformat())

        w = phrasing.phrasing_rng(self.name, seed)
        r, ch = rm["first"], f"#{chan_cur}"
        asked = phrasing.say(
            w, f"{r} asked me to run the {cur} readiness review this morning; the details are in {ch}.",
            f"This morning {r} asked me to run the {cur} readiness review. The details are in {ch}.",
            f"The {cur} readiness review is on me today: {r} asked for it this morning, and the details are in {ch}.",
            f"{r} wants the {cur} readiness review run (asked this morning); you'll find the details in {ch}.")
        ask = phrasing.say(w, "Could you do it for me?", "Can you run the review for me?",
                           "Would you take care of it?", "Please could you do it?")
        standup = phrasing.say(w, "Today's stand-up is in #standup.", "#standup has today's stand-up.",
                               "You'll find today's stand-up in #standup.")
        instruction = " ".join([asked, ask, standup])

        # oracle ---------------------------------------------------------------------------------------
        def summary(listed: list[str]) -> str:
            return (f"{cur} readiness review: {len(done_final)} tickets Done. Moved to {nxt}: "
                    + ", ".join(listed) + ". Open blockers (P1, staying in " + cur + "): "
                    + ", ".join(f"{t['key']} (@{handle_of[t['assignee']]})" for t in blockers)
                    + ". Not ready to ship until the blockers are Done.")

        def solve():
            if not short:
                yield ToolCall("chat__list_channels", {}, "Find the release and stand-up channels.")
            yield ToolCall("chat__read_channel", {"channel": f"#{chan_cur}", "limit": 20},
                           f"Read {rm['first']}'s instructions.")
            page = json.loads((yield ToolCall("chat__read_channel", {"channel": "#standup", "limit": 10},
                                              "Find today's stand-up thread.")))
            roots = [m for m in page["messages"] if m["user"] == "standup-bot"]
            today_root = roots[-1]["id"]
            assert day_month(today) in roots[-1]["text"]
            if not short:
                yield ToolCall("chat__read_thread", {"thread_id": roots[-2]["id"]},
                               "Yesterday's stand-up, for context only.")
            yield ToolCall("chat__read_thread", {"thread_id": today_root}, "Today's updates, corrections included.")
            if not short:
                yield ToolCall("chat__search_messages", {"query": "today", "channel": "#random"},
                               "Is anyone out today?")
            found = json.loads((yield ToolCall("tickets__search_tickets",
                                               {"project": pkey[0], "label": lab_cur, "limit": 100},
                                               f"Every {pkey[0]} ticket labelled {lab_cur}.")))
            assert [t["key"] for t in found["tickets"]] == [t["key"] for t in rel]
            for t in changed:
                if not short:
                    yield ToolCall("tickets__get_ticket", {"key": t["key"]}, f"Check {t['key']}'s allowed moves.")
                for step in PATH[(t["status"], t["final"])]:
                    yield ToolCall("tickets__update_ticket", {"key": t["key"], "status": step},
                                   f"{t['key']}: {step} per today's stand-up.")
            for t in moved:
                yield ToolCall("tickets__update_ticket", {"key": t["key"], "remove_labels": [lab_cur],
                                                          "add_labels": [lab_nxt]},
                               f"{t['key']} won't be Done: move it to {nxt}.")
            for t in blockers:
                yield ToolCall("tickets__update_ticket", {"key": t["key"], "add_labels": [BLOCKER_LABEL]},
                               f"{t['key']} is a P1 and not Done: flag it as a blocker.")
            if not short:
                check = json.loads((yield ToolCall("tickets__search_tickets",
                                                   {"project": pkey[0], "label": lab_cur, "limit": 100},
                                                   f"Verify what is left in {cur}.")))
                n_done = sum(1 for t in check["tickets"] if t["status"] == "Done")
                assert n_done == len(done_final)
            yield ToolCall("chat__post_message", {"channel": f"#{chan_cur}", "text": summary([t["key"] for t in moved])},
                           "Post the readiness summary.")
            return (f"Ran the {cur} review: {len(changed)} statuses updated from today's stand-up, "
                    f"{len(moved)} tickets moved to {nxt}, {len(blockers)} open blocker(s) flagged, summary "
                    f"posted in #{chan_cur}.")

        post = perturb.on("chat__post_message", channel=f"#{chan_cur}")

        def update(key: str, note: str, **changes) -> ToolCall:
            return ToolCall("tickets__update_ticket", {"key": key, **changes}, note)

        # mistakes made after the oracle has checked the release, just before its summary; built
        # only for the criteria a level has (level 1 has no stale ticket, no correction, ...)
        unmentioned = stale or next((t for t in rel if t["after"] == "absent"), None)
        flawed = {
            "statuses": lambda: (  # the first message's "in review" kept, the correction missed
                perturb.insert(perturb.insert(solve, update(correction["key"], "Reopen it.", status="In Progress"),
                                              before=post), update(
                    correction["key"], "Its PR is in review (the first message).", status="In Review"), before=post)
                if correction_done else perturb.insert(solve, update(
                    correction["key"], "Its PR is up (the first message).", status="In Review"), before=post)),
            "unmentioned_kept": lambda: perturb.insert(solve, update(
                unmentioned["key"], "It was in review two days ago." if unmentioned is stale
                else "Probably done by now.", status="In Review" if unmentioned is stale else "Done"), before=post),
            "stay_in_release": lambda: perturb.insert(solve, update(
                done_final[0]["key"], "Move this one too.", remove_labels=[lab_cur], add_labels=[lab_nxt]), before=post),
            "others_untouched": lambda: perturb.insert(solve, update(
                next(t for t in others if t["project"] == "WEB")["key"], "Also labelled for the release.",
                remove_labels=[lab_cur], add_labels=[lab_nxt]) if web_titles else update(
                next(t for t in others if not t["labels"])["key"], "Belongs in the release too.",
                add_labels=[lab_cur]), before=post),
            "no_tickets_created": lambda: perturb.insert(solve, ToolCall("tickets__create_ticket", {
                "project": pkey[0], "title": f"{cur} readiness review", "type": "task"}, "Track the review."),
                before=post),
            "moved_to_next": lambda: perturb.drop(solve, perturb.on(
                "tickets__update_ticket", key=moved[0]["key"], add_labels=[lab_nxt])),
            "blockers_flagged": lambda: perturb.drop(solve, perturb.on(
                "tickets__update_ticket", key=blockers[0]["key"], add_labels=[BLOCKER_LABEL])),
            "summary_posted": lambda: perturb.change(solve, post, text=summary([t["key"] for t in moved][1:])),
            "one_summary": lambda: perturb.repeat(solve, post),
        }

        # graders --------------------------------------------------------------------------------------
        def labels_of(w, key):
            return {x.lower() for x in tix.ticket(w, key)["labels"]}

        mentioned = [t for t in rel if t["after"] not in (None, "stale", "absent")]

        def statuses(w, t):
            wrong = [(x["key"], tix.ticket(w, x["key"])["status"], x["final"]) for x in mentioned
                     if tix.ticket(w, x["key"])["status"] != x["final"]]
            return not wrong, f"(key, got, want): {wrong}" if wrong else ""

        def unmentioned_kept(w, t):
            wrong = [x["key"] for x in rel if x not in mentioned and tix.ticket(w, x["key"])["status"] != x["status"]]
            return not wrong, f"changed: {wrong}" if wrong else ""

        def moved_to_next(w, t):
            wrong = [x["key"] for x in moved
                     if lab_nxt not in labels_of(w, x["key"]) or lab_cur in labels_of(w, x["key"])]
            kept = [x["key"] for x in done_final + blockers  # moving the whole release is no review
                    if lab_cur not in labels_of(w, x["key"])]
            return not wrong and not kept, f"not moved to {nxt}: {wrong}; moved but should stay: {kept}"

        def stay_in_release(w, t):
            wrong = [x["key"] for x in done_final + blockers
                     if lab_cur not in labels_of(w, x["key"]) or lab_nxt in labels_of(w, x["key"])]
            return not wrong, f"should stay in {cur}: {wrong}" if wrong else ""

        blocker_keys = {x["key"] for x in blockers}

        def blockers_flagged(w, t):
            for x in tix.tickets(w):
                has = BLOCKER_LABEL in {lb.lower() for lb in x["labels"]}
                if has != (x["key"] in blocker_keys):
                    return False, f"{x['key']}: {BLOCKER_LABEL} {'set' if has else 'missing'}"
            return True

        def summary_posted(w, t):
            mine = [m for m in chat.messages(w, chan_cur) if m["id"] > seeded_msgs and m["user"] == me["handle"]]
            for m in mine:
                text = m["text"]
                if all(mentions_key(text, x["key"]) for x in moved + blockers) and len(done_final) in _numbers(text) \
                        and not any(mentions_key(text, x["key"]) for x in others):  # not every key seen
                    return True
            return False, (f"no message in #{chan_cur} with the moved keys, the open blockers and the Done count "
                           f"({len(done_final)}), and no ticket outside the release")

        def one_summary(w, t):
            posts = t.calls("chat__post_message", ok_only=True)
            chans = [norm(str((c.arguments or {}).get("channel", "") if isinstance(c.arguments, dict) else ""))
                     .lstrip("#") for c in posts]
            return chans == [chan_cur], f"posted in: {chans}"

        before = {x["key"]: (x["status"], sorted(lb.lower() for lb in x["labels"]), x["assignee"], x["priority"])
                  for x in others}

        def others_untouched(w, t):
            for key, was in before.items():
                x = tix.ticket(w, key)
                if (x["status"], sorted(lb.lower() for lb in x["labels"]), x["assignee"], x["priority"]) != was:
                    return False, f"{key} changed"
            for x in rel:
                now_ = tix.ticket(w, x["key"])
                if (now_["assignee"], now_["priority"]) != (x["assignee"], x["priority"]):
                    return False, f"{x['key']}: assignee or priority changed"
            return True

        def no_tickets_created(w, t):
            made = t.calls("tickets__create_ticket", ok_only=True)
            return not made, f"{len(made)} tickets created" if made else ""

        criteria = [
            Criterion("statuses", "Every release ticket mentioned in today's stand-up has the status stated there "
                      "(corrections applied).", "final_state", statuses, 2.0),
            Criterion("unmentioned_kept", "Release tickets not mentioned today keep their status (older stand-ups "
                      "don't count).", "final_state", unmentioned_kept, guard=True),
            Criterion("moved_to_next", f"Every unfinished non-blocker now carries {lab_nxt} instead of {lab_cur} "
                      "(and nothing else left the release).", "final_state", moved_to_next, 2.0),
            Criterion("stay_in_release", f"Done tickets and open blockers still carry {lab_cur} only.",
                      "final_state", stay_in_release, guard=True),
            Criterion("blockers_flagged", f"Exactly the open P1 tickets of the release carry {BLOCKER_LABEL}.",
                      "final_state", blockers_flagged),
            Criterion("summary_posted", f"A message in #{chan_cur} gives the Done count, every moved key and every "
                      "open blocker, and no ticket outside the release.", "final_state", summary_posted, 2.0),
            Criterion("one_summary", f"Exactly one message was posted, in #{chan_cur}.", "process", one_summary,
                      requires=("summary_posted",)),
            Criterion("others_untouched", f"Tickets outside the {pkey[0]} {cur} release (previous and next release, "
                      "backlog, the web project) are unchanged; no assignee or priority changed.", "final_state",
                      others_untouched, guard=True),
            Criterion("no_tickets_created", "No ticket was created.", "process", no_tickets_created, guard=True),
        ]
        if unmentioned is None:  # every release ticket not yet Done is mentioned today
            criteria = [c for c in criteria if c.id != "unmentioned_kept"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"release": cur, "statuses": {x["key"]: x["final"] for x in rel},
                  "moved": [x["key"] for x in moved], "blockers": sorted(blocker_keys), "done": len(done_final),
                  # the trap mix drawn (empty: not in this instance)
                  "correction_back": correction["key"] if correction["final"] != "Done" else "",
                  "correction_done": correction["key"] if correction["final"] == "Done" else "",
                  "stale": stale["key"] if stale else "",
                  "absent": next((x["key"] for x in rel if x["after"] == "absent"), ""),
                  "web_lookalikes": [x["key"] for x in others if x["project"] == "WEB"],
                  "blocker_done_today": next((x["key"] for x in done_final if x["priority"] == "P1"
                                              and x["status"] != "Done"), "")},
        )


def _renumbered(msgs: list[dict]) -> list[dict]:
    """``msgs`` (with ids, some left out) numbered 1, 2, ... again, thread references included."""
    new_id = {m["id"]: n for n, m in enumerate(msgs, start=1)}
    return [dict(m, id=new_id[m["id"]], **({"thread_id": new_id[m["thread_id"]]} if "thread_id" in m else {}))
            for m in msgs]


def _with_ids(msgs: list[dict]) -> list[dict]:
    """Messages in time order with ids 1, 2, ...; thread references, given as positions (from 1) in
    ``msgs`` as written, are rewritten to those ids."""
    order = sorted(range(len(msgs)), key=lambda i: (msgs[i]["ts"], i))
    new_id = {i + 1: n for n, i in enumerate(order, start=1)}
    out = []
    for n, i in enumerate(order, start=1):
        m = dict(msgs[i], id=n)
        if "thread_id" in m:
            m["thread_id"] = new_id[m["thread_id"]]
        out.append(m)
    return out
