"""Slide decks: a post-incident review deck built from the incident's ticket and its chat channel.

An incident ticket on the ops board links its follow-up tickets (some still open, one already
done, one dropped) and the customer support tickets it caused. Its comments hold a working
theory that was ruled out and, later, the confirmed root cause. The incident's chat channel
carries the timeline: the first alert, the declaration, a hand-over of the incident commander
role, the mitigation, a "recovered at" time that a thread reply corrects, the resolution, and a
preliminary impact estimate whose final figures arrive in a thread. A second incident the same
day has its own channel, ticket, follow-ups and figures; last time's finished review deck sits
next to the template. The deck follows the template's five slides (title, timeline, impact,
root cause, action items), whose speaker notes say what goes where. Then the deck is read
back, the incident ticket gets a comment with the deck's path, and #incidents a note.

Which of the four conflicts an incident carries is drawn per seed (``TRAPS``): the corrected
recovery time, the preliminary estimate, the ruled-out theory, the commander's hand-over.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from functools import partial
from pathlib import Path

from longhorizon.apps.chat import state as chat
from longhorizon.apps.docs.state import norm
from longhorizon.apps.slides.state import build_presentation, presentation_bytes, read_deck
from longhorizon.apps.tickets import state as tickets
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import day_month_year, kebab, parse_json, rng_and_faker
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.kit import files as files_kit
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.documents import (
    Sources,
    find_dates,
    find_numbers,
    last_write_index,
    mentions,
)

SERVICES = [
    # (service, what failed, channel slug)
    ("Checkout", "failed checkouts", "checkout"),
    ("Payments API", "failed payment requests", "payments"),
    ("Search", "failed search queries", "search"),
    ("Login", "failed sign-ins", "login"),
    ("Notifications", "undelivered notifications", "notifications"),
    ("Order sync", "delayed order updates", "ordersync"),
    ("Mobile API", "failed app requests", "mobileapi"),
    ("Image service", "broken product images", "images"),
]
DEPENDENCIES = ["inventory", "pricing", "session", "ledger", "shipping", "profile"]
CAUSES = [
    {"cause": "An expired TLS certificate on the internal {dep} gateway made every call to it fail",
     "trigger": "The auto-renewal job had been failing silently since the gateway moved clusters",
     "mitigation": "deploying a renewed certificate by hand", "keys": [["certificate", "cert"], ["expired", "expiry"]]},
    {"cause": "A config change lowered the {dep} database connection pool from 200 to 20 connections, and the pool "
              "was exhausted at peak traffic",
     "trigger": "The change was merged without a load test", "mitigation": "reverting the config change",
     "keys": [["connection pool", "connections"], ["config"]]},
    {"cause": "A feature flag rollout switched the new {dep} client on for all traffic instead of 5%",
     "trigger": "The rollout percentage field was left empty, which the flag service reads as 100%",
     "mitigation": "switching the feature flag off", "keys": [["feature flag", "flag"]]},
    {"cause": "A {dep} cache node ran out of memory and evicted the session keys",
     "trigger": "A new batch job wrote large objects to the shared cache",
     "mitigation": "replacing and warming the cache node", "keys": [["cache"], ["memory", "evict"]]},
    {"cause": "A cleanup script deleted the DNS record of the {dep} backend",
     "trigger": "The script matched records by prefix and the backend's name shared it",
     "mitigation": "restoring the DNS record", "keys": [["dns"], ["cleanup", "deleted", "deletion"]]},
    {"cause": "A schema migration on the {dep} database held a table lock for the whole run",
     "trigger": "The migration ran outside the maintenance window",
     "mitigation": "killing the migration and rolling it back", "keys": [["migration"], ["lock"]]},
]
THEORIES = [
    ("a DDoS attack", ["ddos"]),
    ("an outage at our cloud provider", ["cloud provider", "provider outage"]),
    ("the CDN purge earlier that morning", ["cdn"]),
    ("a network partition between availability zones", ["partition"]),
    ("a bad load balancer config push", ["load balancer"]),
]
FOLLOW_UPS = [
    "Alert on certificate expiry 14 days ahead", "Add a load test to the release checklist",
    "Page the owning team directly for {svc} alerts", "Write a runbook for {svc} rollbacks",
    "Cap retries in the {svc} client", "Add a dashboard panel for {dep} latency",
    "Require review for production config changes", "Add a canary stage for {svc} deploys",
    "Document the {dep} failover steps", "Rate-limit the cleanup scripts", "Add synthetic checks for {svc}",
    "Split the shared {dep} cache by tenant",
]
CHATTER = [
    "Thanks all, nice teamwork today.", "I'll grab lunch for whoever is still on the bridge.",
    "Dashboard links are pinned in the channel topic.",
]
GENERAL = ["Anyone know if the coffee machine on 4 is fixed?", "Reminder: the ops review moved to Thursday.",
           "Lost a blue umbrella in meeting room 2, shout if you see it.", "Cake in the kitchen!"]
SLIDE_TITLES = ["Timeline", "Impact", "Root cause", "Action items"]
TRAPS = ("correction", "prelim", "theory", "handover")
"""The conflicts drawn per seed at levels 2-3, at least two of them (level 1 keeps all): a thread
reply corrects the "back to baseline" time (else the first time stands), a preliminary estimate
precedes the final figures (else only the final ones are posted), a working theory is ruled out
before the cause is confirmed (else none is raised), the commander hands over to a second one
(else the first one resolves it). The Won't Do and Done follow-ups and the second incident the
same day are in every instance."""
KEY_RE = re.compile(r"\b[A-Z]{2,6}-\d+\b")


def _hm(t: datetime) -> str:
    return t.strftime("%H:%M")


def _time_variants(t: datetime) -> list[str]:
    h12 = t.hour % 12 or 12
    ap = "am" if t.hour < 12 else "pm"
    return [f"{t.hour}:{t.minute:02d}", f"{t.hour:02d}:{t.minute:02d}", f"{t.hour}.{t.minute:02d}",
            f"{t.hour:02d}.{t.minute:02d}", f"{h12}:{t.minute:02d} {ap}",
            f"{h12}:{t.minute:02d}{ap}", f"{h12}:{t.minute:02d} {ap[0]}.m."]


def has_time(text: str, t: datetime) -> bool:
    """Whether ``text`` writes the clock time of ``t`` (14:05, 14.05, 1405, 2:05 pm ...)."""
    n = norm(text)
    return any(re.search(rf"(?<![\d:.]){re.escape(v)}(?![\d])", n) for v in _time_variants(t))


def duration_minutes(text: str) -> int | None:
    """Minutes written in a duration bullet: "95 minutes", "1 h 35 min", "1h35m", "1 hour 35 minutes"."""
    n = norm(text)
    mins = r"(?:minutes|minute|mins|min|m)(?![a-z])"
    hours = r"(?:hours|hour|hrs|hr|h)(?![a-z])"
    m = re.search(r"(\d+)\s*" + hours + r"\s*(?:and\s*)?(\d+)\s*" + mins, n)
    if m:
        return int(m.group(1)) * 60 + int(m.group(2))
    m = re.search(r"(?<![\d:.])(\d+)\s*" + mins, n)
    if m:
        return int(m.group(1))
    m = re.search(r"(?<![\d:.])(\d+)\s*" + hours, n)
    if m:
        return int(m.group(1)) * 60
    nums = find_numbers(n)
    return int(nums[0]) if nums and nums[0] == int(nums[0]) else None


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= max(0.5, 0.005 * abs(want))


def _staff(fake, n: int) -> list[str]:
    out: list[str] = []
    firsts: set[str] = set()
    lasts: set[str] = set()
    while len(out) < n:
        f, l_ = fake.first_name(), fake.last_name()
        if f in firsts or l_ in lasts:
            continue
        firsts.add(f)
        lasts.add(l_)
        out.append(f"{f} {l_}")
    return out


@register
class IncidentPostmortemDeck(TaskFamily):
    name = "incident_postmortem_deck"
    category = "slide decks"
    apps = ("slides", "tickets", "chat", "files")
    description = (
        "Build a post-incident review deck from the template: timeline from the incident channel (with its "
        "corrections), final impact figures, the confirmed root cause and the open follow-ups with owners from "
        "the incident ticket, ignoring a second incident the same day; then check it and report on the ticket "
        "and in chat."
    )

    levels = 3
    """1: a one-slide deck, the Timeline (the recovery time corrected in a thread, the second
    incident's channel next to it), checked and reported, the incident channel named in the
    request; 2: the template's first three slides
    (title with the commander after the hand-over, timeline, impact with the final figures);
    3 (default): all five, root cause and action items too. The World is the same at every level
    but the template, which has the level's slides, and the conflicts (``TRAPS``): levels 2-3 draw
    them, level 1 has them all."""
    level_apps = {1: ("slides", "tickets", "chat")}
    """Level 1 finds the template by its path in the instruction (no files tools)."""
    toolsets = {1: ("chat__post_message", "chat__read_channel", "chat__read_thread", "slides__add_slide",
                    "slides__create_deck", "slides__read_slide", "tickets__add_comment")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        day = date(2026, 1, 12) + timedelta(days=rng.randrange(300))
        svc, other_svc = rng.sample(SERVICES, 2)
        dep, other_dep = rng.sample(DEPENDENCIES, 2)
        cause_i, other_cause_i = rng.sample(range(len(CAUSES)), 2)
        cause, other_cause = CAUSES[cause_i], CAUSES[other_cause_i]
        theory, other_theory = rng.sample(THEORIES, 2)
        staff = _staff(fake, 16)
        me, requester, ic1, ic2, oncall, analyst, eng2, other_ic, *crew = staff
        users = {p: f"{p.split()[0].lower()}.{p.split()[1][0].lower()}" for p in staff}
        drawn = {t for t in TRAPS if rng.random() < 0.6}  # at every level, so that the draws after it agree
        while len(drawn) < 2:  # at least 2 of them
            drawn.add(rng.choice(TRAPS))
        traps = set(TRAPS) if level == 1 else drawn  # level 1 keeps all of its own
        ic = ic2 if "handover" in traps else ic1  # the commander at resolution
        first = {p: p.split()[0] for p in staff}

        # -- the incident and its timeline ----------------------------------------------------------
        t0 = datetime.combine(day, time(rng.randint(6, 18), rng.randrange(60)))
        t1 = t0 + timedelta(minutes=rng.randint(4, 11))
        handover = t1 + timedelta(minutes=rng.randint(6, 14))
        t2 = handover + timedelta(minutes=rng.randint(5, 25))
        t3_stale = t2 + timedelta(minutes=rng.randint(6, 20))
        t3 = t3_stale + timedelta(minutes=rng.randint(3, 9))
        t4 = t3 + timedelta(minutes=rng.randint(15, 45))
        duration = int((t4 - t0).total_seconds() // 60)
        severity = rng.choice(["SEV1", "SEV2"])
        final = rng.randint(2_000, 60_000)
        prelim = int(final * rng.uniform(0.55, 0.8) / 100) * 100
        customers = int(final * rng.uniform(0.15, 0.45))
        ver = f"{rng.randint(3, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        cause_text = cause["cause"].format(dep=dep)
        theory_text, theory_keys = theory
        inc_title = f"{svc[0]} outage: {svc[1]} after release {ver}"
        base = rng.randint(300, 800)
        key = f"OPS-{base}"
        other_key = f"OPS-{base + rng.randint(2, 4)}"
        chan = f"inc-{day:%m%d}-{svc[2]}"
        other_chan = f"inc-{day:%m%d}-{other_svc[2]}"

        # the other incident, the same day (its call is why the first commander handed over)
        o0 = handover - timedelta(minutes=rng.randint(4, 12))
        ours = {t0, t1, t2, t3, t3_stale, t4}
        o_times = [o0 + timedelta(minutes=m) for m in sorted(rng.sample(range(3, 120), 4))]
        while ours & {o0, o_times[-1]}:
            o0 -= timedelta(minutes=1)
            o_times = [t - timedelta(minutes=1) for t in o_times]
        o_final = rng.randint(800, 30_000)
        while any(abs(o_final - x) <= 0.02 * x for x in (final, prelim, customers)):
            o_final = rng.randint(800, 30_000)
        other_title = f"{other_svc[0]} degraded: {other_svc[1]}"

        # -- tickets ---------------------------------------------------------------------------------
        number = base + 6
        fu_titles = rng.sample(FOLLOW_UPS, 9)
        follow_ups = []  # (key, title, status, assignee person)
        statuses = ["To Do", "In Progress", "In Review", "To Do"][: rng.randint(3, 4)] + ["Done", "Won't Do"]
        rng.shuffle(statuses)
        for st in statuses:
            title = fu_titles.pop().format(svc=svc[0], dep=dep)
            follow_ups.append((f"OPS-{number}", title, st, rng.choice([ic1, ic2, oncall, eng2, *crew[:4]])))
            number += rng.randint(1, 3)
        open_fus = [f for f in follow_ups if f[2] not in ("Done", "Won't Do")]
        closed_fus = [f for f in follow_ups if f[2] in ("Done", "Won't Do")]
        other_fus = []
        for st in ["To Do", "In Progress"]:
            title = fu_titles.pop().format(svc=other_svc[0], dep=other_dep)
            other_fus.append((f"OPS-{number}", title, st, rng.choice(crew)))
            number += 1
        sup_linked = [f"SUP-{n}" for n in sorted(rng.sample(range(2100, 2400), rng.randint(3, 8)))]
        sup_other = [f"SUP-{n}" for n in sorted(rng.sample(range(2400, 2500), rng.randint(2, 4)))]
        sup_unlinked = [f"SUP-{n}" for n in sorted(rng.sample(range(1900, 2100), 3))]
        customers_names = [fake.company().split(",")[0] for _ in range(len(sup_linked) + len(sup_other) + 3)]

        stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731
        tk_users = [{"username": users[p], "name": p, "email": f"{users[p]}@example.com", "team": "SRE"}
                    for p in staff]
        tk = []
        tk.append({"project": "OPS", "number": base, "type": "incident", "title": inc_title, "status": "Done",
                   "resolution": "Done", "priority": "P1", "assignee": users[ic], "reporter": users[oncall],
                   "team": "SRE", "labels": ["incident", kebab(svc[0])], "created": stamp(t1),
                   "description": (f"{severity} incident on {svc[0]}: {svc[1]} from {_hm(t0)} UTC on {day.isoformat()}."
                                   f"\n\nIncident channel: #{chan}\nStarted after release {ver} of {svc[0]}.")})
        tk.append({"project": "OPS", "number": int(other_key.split("-")[1]), "type": "incident",
                   "title": other_title, "status": "Done", "resolution": "Done", "priority": "P2",
                   "assignee": users[other_ic], "reporter": users[crew[0]], "team": "SRE",
                   "labels": ["incident", kebab(other_svc[0])], "created": stamp(o0),
                   "description": (f"SEV3 incident on {other_svc[0]}: {other_svc[1]} from {_hm(o0)} UTC on "
                                   f"{day.isoformat()}.\n\nIncident channel: #{other_chan}")})
        for k, title, st, who in follow_ups + other_fus:
            tk.append({"project": "OPS", "number": int(k.split("-")[1]), "type": "task", "title": title,
                       "status": st, "priority": rng.choice(["P2", "P3"]), "assignee": users[who], "team": "SRE",
                       "labels": ["follow-up"], "created": stamp(t4 + timedelta(hours=rng.randint(1, 20))),
                       **({"resolution": st} if st in ("Done", "Won't Do") else {})})
        for i, k in enumerate(sup_linked + sup_other + sup_unlinked):
            mine = k in sup_linked
            s = svc if mine else other_svc
            when = t0 + timedelta(minutes=rng.randint(5, duration)) if k not in sup_unlinked else (
                t0 - timedelta(days=rng.randint(3, 30)))
            tk.append({"project": "SUP", "number": int(k.split("-")[1]), "type": "bug",
                       "title": rng.choice([f"{s[0]} not working", f"Errors in {s[0].lower()}",
                                            f"Customers report {s[1]}", f"{s[0]} down?"]),
                       "status": rng.choice(["Resolved", "Closed"]), "resolution": "Fixed",
                       "priority": rng.choice(["P2", "P3"]), "customer": customers_names[i], "component": s[0],
                       "reporter": users[crew[-1]], "created": stamp(when)})
        links = [{"source": k, "target": key, "kind": "relates to"} for k, *_ in follow_ups]
        links += [{"source": k, "target": key, "kind": "relates to"} for k in sup_linked]
        links += [{"source": k, "target": other_key, "kind": "relates to"} for k, *_ in other_fus]
        links += [{"source": k, "target": other_key, "kind": "relates to"} for k in sup_other]
        comments = [
            {"ticket": key, "author": users[oncall], "created": stamp(t1 + timedelta(minutes=3)),
             "body": f"Working theory: {theory_text}. Checking with the network team."},
            {"ticket": key, "author": users[eng2], "created": stamp(handover - timedelta(minutes=2)),
             "body": f"Ruled out {theory_text}: traffic and error patterns do not match. Keep digging."},
        ] if "theory" in traps else []
        comments += [
            {"ticket": key, "author": users[ic], "created": stamp(t4 + timedelta(hours=rng.randint(3, 20))),
             "body": f"Root cause confirmed: {cause_text}. Trigger: {cause['trigger'].lower()}. Mitigated by "
                     f"{cause['mitigation']}. Follow-ups are linked to this ticket."},
            {"ticket": other_key, "author": users[other_ic], "created": stamp(o_times[-1] + timedelta(hours=2)),
             "body": f"Root cause confirmed: {other_cause['cause'].format(dep=other_dep)}."},
            {"ticket": other_key, "author": users[crew[1]], "created": stamp(o_times[0]),
             "body": f"Working theory: {other_theory[0]}."},
        ]
        now = stamp(datetime.combine(day + timedelta(days=3), time(9, 0)))
        me_user = users[me]

        # -- chat ------------------------------------------------------------------------------------
        handles = {p: users[p] for p in staff}
        bot = "alertbot"
        chat_users = [{"handle": handles[p], "name": p, "title": "Engineer"} for p in staff]
        chat_users.append({"handle": bot, "name": "Alert bot", "title": "Bot"})
        raw: list[dict] = []

        def post(channel: str, who: str, when: datetime, text: str, tag: str | None = None,
                 reply_to: str | None = None) -> None:
            raw.append({"channel": channel, "user": who, "ts": stamp(when), "text": text, "tag": tag,
                        "reply_to": reply_to})

        H = handles
        post(chan, bot, t0, f"[FIRING] {svc[0]} error rate {rng.randint(6, 40)}.{rng.randint(0, 9)}% "
                            f"(threshold 5%). First alert at {_hm(t0)} UTC.")
        post(chan, H[oncall], t0 + timedelta(minutes=2), f"Looking. Lots of 5xx from {svc[0]}, started right "
                                                         f"after release {ver} went out.")
        post(chan, H[ic1], t1, f"Declaring {severity} for {svc[0]} at {_hm(t1)} UTC. I'm incident commander. "
                               f"Ticket: {key}.")
        if "theory" in traps:
            post(chan, H[oncall], t1 + timedelta(minutes=2), f"Could this be {theory_text}?")
            post(chan, H[eng2], handover - timedelta(minutes=2), f"Doesn't look like {theory_text}, traffic is "
                                                                 f"normal.")
        if "handover" in traps:
            post(chan, H[ic1], handover, f"Handing incident commander over to @{H[ic2]}, I have to join the "
                                         f"{other_svc[0]} call.")
            post(chan, H[ic2], handover + timedelta(minutes=1), "Got it, I'm IC now.")
        post(chan, H[ic], t2, f"Mitigation started at {_hm(t2)} UTC: {cause['mitigation']}.")
        if "prelim" in traps:
            post(chan, H[analyst], t2 + timedelta(minutes=3), f"Preliminary estimate so far: about {prelim:,} "
                                                              f"{svc[1]}.", tag="prelim")
        first_back = t3_stale if "correction" in traps else t3  # the time first posted
        post(chan, H[eng2], first_back, f"Error rate back to baseline at {_hm(first_back)} UTC, looks recovered.",
             tag="recovered")
        post(chan, H[ic], t4, f"Incident resolved at {_hm(t4)} UTC. Root cause write-up will go on {key}.")
        post(chan, H[crew[2]], t4 + timedelta(minutes=5), rng.choice(CHATTER))
        if "correction" in traps:
            post(chan, H[analyst], t4 + timedelta(hours=rng.randint(2, 5)),
                 f"Correction for the timeline: the dashboard had a gap. Errors were back to baseline at {_hm(t3)} "
                 f"UTC, not {_hm(t3_stale)}.", reply_to="recovered")
        post(chan, H[analyst], t4 + timedelta(hours=rng.randint(20, 30)),
             f"Final numbers from the data team: {final:,} {svc[1]}, {customers:,} customers affected.",
             reply_to="prelim" if "prelim" in traps else None)
        # the other incident
        post(other_chan, bot, o0, f"[FIRING] {other_svc[0]} latency above SLO. First alert at {_hm(o0)} UTC.")
        post(other_chan, H[other_ic], o_times[0], f"Declaring SEV3 for {other_svc[0]} at {_hm(o_times[0])} UTC, "
                                                  f"I'm IC. Ticket: {other_key}.")
        post(other_chan, H[crew[1]], o_times[1], f"Mitigation started at {_hm(o_times[1])} UTC: "
                                                 f"{other_cause['mitigation']}.")
        post(other_chan, H[crew[1]], o_times[2], f"Back to baseline at {_hm(o_times[2])} UTC.")
        post(other_chan, H[other_ic], o_times[3], f"Resolved at {_hm(o_times[3])} UTC.")
        post(other_chan, H[analyst], o_times[3] + timedelta(hours=3),
             f"Final numbers: {o_final:,} {other_svc[1]}.")
        # the team channel
        post("incidents", H[ic1], t1 + timedelta(minutes=1),
             f"{severity} declared: {svc[0]} ({svc[1]}). Updates in #{chan}, ticket {key}.")
        post("incidents", H[other_ic], o_times[0] + timedelta(minutes=1),
             f"SEV3 declared: {other_svc[0]} ({other_svc[1]}). Updates in #{other_chan}, ticket {other_key}.")
        post("incidents", H[requester], t4 + timedelta(hours=26),
             "Reminder: review decks go in decks/postmortems/ and follow the template in decks/templates/. Post "
             "here when yours is ready.")
        post("general", H[crew[3]], t0 - timedelta(hours=2), rng.choice(GENERAL))
        post("general", H[crew[0]], t4 + timedelta(hours=1), rng.choice(GENERAL))
        if level == 1:  # the incident channel's first 14 posts less the first look, the theory, the hand-over,
            drop = (1, 3, 4, 5, 6, 8, 11, 13)  # the estimates and the chatter: the timeline's moments, its correction
            raw = [m for i, m in enumerate(raw) if i not in drop]
        raw.sort(key=lambda m: m["ts"])
        ids = {m["tag"]: i for i, m in enumerate(raw, start=1) if m["tag"]}
        msgs = []
        for m in raw:
            msgs.append({"channel": m["channel"], "user": m["user"], "ts": m["ts"], "text": m["text"],
                         **({"thread_id": ids[m["reply_to"]]} if m["reply_to"] else {})})
        channels = [{"name": "incidents", "topic": "Incident announcements and reviews"},
                    {"name": chan, "topic": f"{severity} {svc[0]} {day.isoformat()} ({key})"},
                    {"name": other_chan, "topic": f"SEV3 {other_svc[0]} {day.isoformat()} ({other_key})"},
                    {"name": "general", "topic": "Everything else"}]

        # -- files -----------------------------------------------------------------------------------
        template = "decks/templates/post_incident_review_template.pptx"
        deck = f"decks/postmortems/{key}_post_incident_review.pptx"
        old_key = f"OPS-{base - rng.randint(30, 120)}"
        old_deck = f"decks/postmortems/{old_key}_post_incident_review.pptx"
        template_slides = [
            {"title": "<KEY>: <incident title>", "layout": "title",
             "bullets": ["<date of the incident, e.g. 3 March 2026>", "Severity: <SEV level>",
                         "Incident commander: <name>"],
             "notes": "Title slide. The title is the incident ticket's key and title. The incident commander is "
                      "whoever held the role when the incident was resolved (after any hand-over)."},
            {"title": "Timeline", "bullets": ["HH:MM UTC - <what happened>"],
             "notes": "One bullet per key moment, in time order: first alert, incident declared, mitigation "
                      "started, impact ended (errors back to baseline), incident resolved. If a time was "
                      "corrected later in the channel, use the corrected time."},
            {"title": "Impact", "bullets": ["Duration: <minutes> minutes", "<what failed>: <number>",
                                            "Customers affected: <number>", "Support tickets: <number>"],
             "notes": "Duration runs from the first alert to the resolution. Use the final numbers from the data "
                      "team, not preliminary estimates. Support tickets: how many support (SUP) tickets are "
                      "linked to the incident ticket."},
            {"title": "Root cause", "bullets": ["<the confirmed root cause>", "Trigger: <what set it off>"],
             "notes": "Only the confirmed root cause from the incident ticket. Leave out working theories that "
                      "were ruled out."},
            {"title": "Action items", "bullets": ["<KEY> <follow-up title> - owner: <name>"],
             "notes": "Every follow-up ticket linked to the incident that is still open (To Do, In Progress or In "
                      "Review), with its owner (the assignee). Leave out follow-ups that are done or won't be done."},
        ]
        if level < self.levels:  # the template has the level's slides only
            template_slides = template_slides[1:2] if level == 1 else template_slides[:3]
        o_old = CAUSES[(cause_i + 2) % len(CAUSES)]
        old_slides = [
            {"title": f"{old_key}: {other_svc[0]} outage", "layout": "title",
             "bullets": [day_month_year(day - timedelta(days=rng.randint(20, 60))), "Severity: SEV2",
                         f"Incident commander: {crew[4]}"]},
            {"title": "Timeline", "bullets": ["09:12 UTC - first alert", "09:20 UTC - incident declared",
                                              "09:41 UTC - mitigation started", "10:02 UTC - resolved"]},
            {"title": "Impact", "bullets": ["Duration: 50 minutes", f"{other_svc[1].capitalize()}: 4,210",
                                            "Customers affected: 880", "Support tickets: 4"]},
            {"title": "Root cause", "bullets": [o_old["cause"].format(dep=other_dep)]},
            {"title": "Action items", "bullets": [f"OPS-{base - 20} Add alerting - owner: {crew[5]}"]},
        ]

        def make() -> dict[str, bytes]:
            return {template: presentation_bytes(build_presentation(template_slides)),
                    old_deck: presentation_bytes(build_presentation(old_slides)),
                    "decks/README.md": (b"# Decks\n\nPost-incident review decks live in postmortems/, one per "
                                        b"incident, named <KEY>_post_incident_review.pptx.\n")}

        sources = Sources(make)

        def build(root: Path) -> None:
            sources.build(root)
            tickets.create_tracker(
                root / "state" / "tickets.sqlite", me=me_user,
                projects=[{"key": "OPS", "name": "Operations", "kind": "project"},
                          {"key": "SUP", "name": "Customer support", "kind": "support"}],
                teams=[{"name": "SRE", "description": "Site reliability"}], users=tk_users, tickets=tk,
                comments=comments, links=links, now=now)
            chat.create_chat(root / "state" / "chat.sqlite", H[me], chat_users, channels, msgs, now=now)

        w = phrasing_rng(self.name, seed)
        when = day_month_year(day)[:-5]
        ask = say(w, f"Hi {first[me]}, could you put together the post-incident review deck for {key} (the {svc[0]} "
                     f"incident on {when}) for Friday's review?",
                  f"Hi {first[me]}, for Friday's review we need the post-incident review deck for {key}, the "
                  f"{svc[0]} incident on {when}: could you put it together?",
                  f"{first[me]}, would you build the post-incident review deck for {key} ({svc[0]} incident, "
                  f"{when}) ahead of Friday's review?",
                  f"Hello {first[me]}, can you prepare the post-incident review deck for Friday's review? It's for "
                  f"{key}, the {svc[0]} incident on {when}.")
        template_ = say(w, f"Please follow the template in {template}, its slides and the speaker notes on each, and "
                           f"save the deck as {deck}.",
                        f"Follow the template in {template} (its slides and the speaker notes on each one) and save "
                        f"the deck as {deck}.",
                        f"The deck goes in {deck}; build it on the template in {template}, following its slides and "
                        f"the speaker notes on each.")
        sources_ = say(w, "Everything you need is on the ticket and in the incident's chat channel.",
                       "The ticket and the incident's chat channel have everything you need.",
                       "You'll find all you need on the ticket and in the incident's chat channel.")
        careful = say(w, "Careful: there was a second incident that day, keep its details out.",
                      "Watch out: a second incident happened the same day, and none of its details belong in the deck.",
                      "There was also a second incident that day; be careful to keep its details out.")
        after = say(w, f"Once it's done, check every slide, leave a comment on {key} with the deck's path and post a "
                       f"short note in #incidents.",
                    f"When it's finished, check every slide, then comment on {key} with the deck's path and post a "
                    f"short note in #incidents.",
                    f"When the deck is finished, check every slide; after that, leave a comment on {key} giving "
                    f"the deck's path, and post a short note in #incidents.")
        keep = say(w, "Please don't change any tickets, the template or the old decks.",
                   "Leave the tickets, the template and the old decks unchanged, please.",
                   "No changes to any tickets, the template or the old decks, please.")
        if level == 1:  # the channel named: no channel listing
            sources_ = f"Everything you need is in the incident's chat channel, #{chan}."
        instruction = " ".join([ask, *in_some_order(w, [template_, sources_]), careful, after, keep]) + (
            f"\n\n{say(w, 'Thanks,', 'Thank you,', 'Cheers,', 'Many thanks,')} {first[requester]}")
        data = {
            # the drawn conflicts: empty where this incident has none
            "key": key, "title": inc_title, "date": day.isoformat(), "severity": severity, "ic": ic,
            "former_ic": ic1 if "handover" in traps else "", "deck": deck, "template": template, "chan": chan,
            "times": [stamp(t) for t in (t0, t1, t2, t3, t4)], "stale": stamp(t3_stale) if "correction" in traps else "",
            "duration": duration, "final": final, "prelim": prelim if "prelim" in traps else 0, "customers": customers,
            "support_tickets": len(sup_linked), "cause": cause_text, "trigger": cause["trigger"],
            "cause_keys": cause["keys"], "theory_keys": theory_keys if "theory" in traps else [],
            "theory": theory_text if "theory" in traps else "",
            "open": [list(f[:2]) + [f[3]] for f in open_fus], "closed": [f[0] for f in closed_fus],
            "other_keys": [other_key] + [f[0] for f in other_fus] + sup_other,
            "follow_ups": [f[0] for f in follow_ups], "users": {users[p]: p for p in staff},
            "thread_recovered": ids["recovered"] if "correction" in traps else None,
            "thread_prelim": ids.get("prelim"), "metric": svc[1],
            "mitigation": cause["mitigation"], "other_times": [stamp(o0), stamp(o_times[-1])],
            "other_final": o_final, "other_ic": other_ic,
        }
        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps_at(level), build=build,
            oracle=partial(_oracle, data, level), criteria=_criteria(data, sources, level), data=data,
        )
        wont_do = next(f"{k} {title} - owner: {who}" for k, title, st, who in follow_ups if st == "Won't Do")
        flawed = _perturbations(data, level, wont_do)
        task.perturbations = {c.id: flawed[c.id] for c in task.criteria}
        return task


# -- grading -----------------------------------------------------------------------------------------


def _criteria(d: dict, sources: Sources, level: int = 3) -> list[Criterion]:
    body_titles = SLIDE_TITLES[:{1: 1, 2: 2}.get(level, 4)]
    deck = d["deck"]
    times = [datetime.fromisoformat(t) for t in d["times"]]
    stale = datetime.fromisoformat(d["stale"]) if d["stale"] else None
    other_times = [datetime.fromisoformat(t) for t in d["other_times"]]
    basename = deck.rsplit("/", 1)[-1]

    def slides(world):
        return read_deck(world.file(deck))

    def slide(world, title: str) -> dict | None:
        return next((s for s in slides(world) if norm(s["title"]) == norm(title)), None)

    def text_of(s: dict | None) -> str:
        return "\n".join(s["bullets"]) if s else ""

    def title_slide(world, traj):
        s = slides(world)
        if not s:
            return False, "the deck has no slides"
        first = s[0]
        sub = " ".join(first["bullets"])
        checks = {
            "title layout": first["layout"] == "title",
            "key and title": re.search(rf"\b{d['key']}\b", first["title"]) is not None
            and mentions(first["title"], d["title"]),
            "date": date.fromisoformat(d["date"]) in find_dates(sub, int(d["date"][:4])),
            "severity": norm(d["severity"]) in norm(sub).replace(" ", "").replace("-", ""),
            "commander": mentions(sub, d["ic"]) and not (d["former_ic"] and mentions(sub, d["former_ic"])),
        }
        bad = [k for k, ok in checks.items() if not ok]
        return not bad, f"wrong: {bad}; slide 0 is {first['title']!r} / {first['bullets']}"

    def slide_order(world, traj):
        s = slides(world)
        titles = [norm(x["title"]) for x in s[1:]]
        ok = len(s) == len(body_titles) + 1 and titles == [norm(t) for t in body_titles]
        return ok, f"titles after the first: {[x['title'] for x in s[1:]]}"

    def timeline(world, traj):
        s = slide(world, "Timeline")
        if s is None:
            return False, "no Timeline slide"
        pos = []
        for t in times:
            idx = next((i for i, b in enumerate(s["bullets"]) if has_time(b, t)), None)
            if idx is None:
                return False, f"{_hm(t)} is missing from {s['bullets']}"
            pos.append(idx)
        if pos != sorted(pos) or len(set(pos)) != len(pos):
            return False, f"the key moments are not one per bullet in time order: {s['bullets']}"
        if stale is not None and has_time(text_of(s), stale):
            return False, f"the uncorrected time {_hm(stale)} is still on the slide"
        mixed = [_hm(t) for t in other_times if has_time(text_of(s), t)]
        if mixed:
            return False, f"times from the other incident are on the slide: {mixed}"
        return True

    def impact(world, traj):
        s = slide(world, "Impact")
        if s is None:
            return False, "no Impact slide"
        bad = []
        dur = [b for b in s["bullets"] if "duration" in norm(b)]
        if not dur or duration_minutes(dur[0]) != d["duration"]:
            bad.append(f"duration {dur} (expected {d['duration']} minutes)")
        tick = [b for b in s["bullets"] if "ticket" in norm(b)]
        if not tick or not find_numbers(tick[0]) or find_numbers(tick[0])[0] != d["support_tickets"]:
            bad.append(f"support tickets {tick} (expected {d['support_tickets']})")
        cust = [b for b in s["bullets"] if "customer" in norm(b) and "ticket" not in norm(b)]
        if not cust or not any(_close(n, d["customers"]) for n in find_numbers(cust[0])):
            bad.append(f"customers {cust} (expected {d['customers']})")
        rest = [b for b in s["bullets"] if b not in dur + tick + cust]
        if not any(_close(n, d["final"]) for b in rest for n in find_numbers(b)):
            bad.append(f"no bullet gives the final {d['metric']} figure {d['final']}")
        if d["prelim"] and any(_close(n, d["prelim"]) for n in find_numbers(text_of(s))):
            bad.append("the preliminary estimate is on the slide")
        if any(_close(n, d["other_final"]) for n in find_numbers(text_of(s))):
            bad.append("the other incident's figure is on the slide")
        return not bad, "; ".join(bad)

    def root_cause(world, traj):
        s = slide(world, "Root cause")
        if s is None:
            return False, "no Root cause slide"
        text = norm(text_of(s))
        missing = [group for group in d["cause_keys"] if not any(k in text for k in group)]
        theory = [k for k in d["theory_keys"] if k in text]
        return not missing and not theory, f"missing {missing}; ruled-out theory named: {theory}; {s['bullets']}"

    def action_items(world, traj):
        s = slide(world, "Action items")
        if s is None:
            return False, "no Action items slide"
        bad = []
        for k, title, owner in d["open"]:
            hit = [b for b in s["bullets"] if re.search(rf"\b{k}\b", b)]
            if not hit or not mentions(hit[0], owner):
                bad.append(f"{k} with owner {owner}: {hit}")
        allowed = {k for k, _, _ in d["open"]} | {d["key"]}
        extra = sorted(set(KEY_RE.findall(text_of(s))) - allowed)
        if extra:
            bad.append(f"tickets that do not belong: {extra}")
        return not bad, "; ".join(bad)

    def checked_every_slide(world, traj):
        last = last_write_index(traj, deck)
        if last < 0:
            return False, "the deck was never written"
        n = len(slides(world))
        seen = {c.arguments.get("index") for c in traj.tool_calls[last + 1:]
                if not c.is_error and c.name == "slides__read_slide" and isinstance(c.arguments, dict)
                and str(c.arguments.get("path", "")).strip("/") == deck}
        missing = [i for i in range(n) if i not in seen]
        return not missing and n > 0, f"slides not read after the last edit: {missing}"

    def ticket_comment(world, traj):
        me = _tickets_me(world)
        mine = [c for c in tickets.comments(world, d["key"]) if c["author"] == me]
        ok = any(basename.lower() in c["body"].lower() for c in mine)
        elsewhere = sorted({c["ticket"] for c in tickets.comments(world)  # commenting on every ticket is noise
                            if c["author"] == me and c["ticket"] != d["key"]})
        return ok and not elsewhere, (f"{len(mine)} comments by you on {d['key']}, with {basename}: {ok}; "
                                      f"comments on other tickets: {elsewhere}")

    def channel_post(world, traj):
        posts = [m for m in chat.posts_by_me(world) if m["channel"] == "incidents"]
        ok = any(basename.lower() in m["text"].lower() for m in posts)
        return ok, f"{len(posts)} posts in #incidents, none naming {basename}"

    def tickets_untouched(world, traj):
        hist = tickets.history(world)
        return not hist, f"ticket changes: {[(h['ticket'], h['field']) for h in hist][:5]}"

    def chat_only_incidents(world, traj):
        bad = [(m["channel"], m["text"][:40]) for m in chat.posts_by_me(world) if m["channel"] != "incidents"]
        return not bad, f"posted elsewhere: {bad}"

    criteria = [
        Criterion("title_slide", "slide 0 is a title slide with the incident's key and title, its date, severity "
                  "and the incident commander at resolution", "final_state", title_slide),
        Criterion("slide_order", f"the deck has the template's {'five' if level == 3 else 'three'} slides in its order",
                  "final_state", slide_order,
                  requires=("timeline",)),
        Criterion("timeline", "the timeline gives the five key moments in order"
                  + (", with the corrected recovery time" if d["stale"] else ""), "final_state", timeline, 2.0),
        Criterion("impact", "duration, final failure count, customers affected and linked support tickets are right"
                  + (" (no preliminary estimate)" if d["prelim"] else ""), "final_state", impact, 2.0),
        Criterion("root_cause", "the root cause slide states the confirmed cause"
                  + (", not the ruled-out theory" if d["theory"] else ""), "final_state", root_cause),
        Criterion("action_items", "exactly the open follow-ups linked to the incident, each with its owner",
                  "final_state", action_items, 2.0),
        Criterion("checked_every_slide", "every slide was read back after the last edit (counts once the "
                  "timeline is right)", "process", checked_every_slide, requires=("timeline",)),
        Criterion("ticket_comment", f"{d['key']} has a comment from you with the deck's path, and no other ticket "
                  "got one", "final_state", ticket_comment, requires=("timeline",)),
        Criterion("channel_post", "a note in #incidents names the deck", "final_state", channel_post,
                  requires=("timeline",)),
        files_kit.untouched(sources, id="sources_unchanged",
                            description="the template and the old decks are unchanged and were never written"),
        files_kit.only_created(sources, allowed=[deck], id="only_deck_created"),
        Criterion("tickets_untouched", "no ticket was changed, linked or created (comments aside)", "final_state",
                  tickets_untouched, guard=True),
        Criterion("chat_only_incidents", "chat posts only in #incidents, no direct messages", "process",
                  chat_only_incidents, guard=True),
    ]
    if level < 3:  # the slides the level leaves out
        out = {"root_cause", "action_items"} | ({"title_slide", "slide_order", "impact"} if level == 1 else set())
        criteria = [c for c in criteria if c.id not in out]
    return criteria


def _tickets_me(world) -> str:
    from contextlib import closing

    with closing(world.db("tickets")) as conn:
        return conn.execute("SELECT value FROM meta WHERE key = 'me'").fetchone()[0]


# -- reference solution ------------------------------------------------------------------------------


def _announce(d: dict):
    """Both oracles' last calls: the deck linked on the ticket, and the team told in #incidents."""
    deck, key = d["deck"], d["key"]
    yield ToolCall("tickets__add_comment", {"key": key, "body": f"Post-incident review deck: {deck}"},
                   "Link the deck on the ticket.")
    yield ToolCall("chat__post_message", {"channel": "#incidents",
                                          "text": f"The review deck for {key} is ready: {deck}"}, "Tell the team.")


def _timeline(d: dict, times: list[str]) -> list[str]:
    """The Timeline slide's bullets: the five moments at ``times``."""
    labels = ["first alert", "incident declared", f"mitigation started ({d['mitigation']})",
              "errors back to baseline", "incident resolved"]
    return [f"{_hm(datetime.fromisoformat(t))} UTC - {lab}" for t, lab in zip(times, labels)]


def _oracle(d: dict, level: int = 3):
    """Read the template (slides and notes), the incident ticket, its follow-ups and the incident
    channel with its threads; build the deck slide by slide; read every slide back; then report."""
    if level == 1:
        return (yield from _oracle_timeline(d))
    deck, tpl, key = d["deck"], d["template"], d["key"]
    yield ToolCall("files__list_dir", {"path": "decks", "recursive": True}, "See the template and earlier decks.")
    listing = parse_json((yield ToolCall("slides__list_slides", {"path": tpl}, "The template's slides.")))
    for s in listing["slides"]:
        yield ToolCall("slides__read_slide", {"path": tpl, "index": s["index"]},
                       "Read the slide and its notes: what goes where.")
    inc = parse_json((yield ToolCall("tickets__get_ticket", {"key": key}, "The incident ticket, comments and links.")))
    yield ToolCall("chat__read_channel", {"channel": f"#{d['chan']}", "limit": 50}, "The incident channel.")
    if d["thread_recovered"]:
        yield ToolCall("chat__read_thread", {"thread_id": d["thread_recovered"]}, "A reply on the recovery time.")
    if d["thread_prelim"]:
        yield ToolCall("chat__read_thread", {"thread_id": d["thread_prelim"]}, "Final numbers for the estimate?")
    follow = [ln["key"] for ln in inc["links"] if ln["key"].startswith("OPS-")] if level == 3 else []
    owners = {}
    for k in follow:
        t = parse_json((yield ToolCall("tickets__get_ticket", {"key": k}, f"Status and owner of {k}.")))
        owners[k] = (t["title"], t["status"], t["assignee"])
    people = {u["username"]: u["name"] for u in parse_json((yield ToolCall(
        "tickets__list_users", {}, "Map usernames to names for the owners.")))} if level == 3 else {}
    n_sup = sum(1 for ln in inc["links"] if ln["key"].startswith("SUP-"))

    day = date.fromisoformat(d["date"])
    title = [{"title": f"{key}: {d['title']}", "layout": "title",
              "bullets": [day_month_year(day), f"Severity: {d['severity']}", f"Incident commander: {d['ic']}"]}]
    items = [f"{k} {t_title} - owner: {people[who]}" for k, (t_title, status, who) in owners.items()
             if status not in ("Done", "Won't Do")]
    body = [
        {"title": "Timeline", "bullets": _timeline(d, d["times"])},
        {"title": "Impact", "bullets": [f"Duration: {d['duration']} minutes",
                                        f"{d['metric'].capitalize()}: {d['final']:,}",
                                        f"Customers affected: {d['customers']:,}", f"Support tickets: {n_sup}"]},
        {"title": "Root cause", "bullets": [d["cause"], f"Trigger: {d['trigger']}"]},
        {"title": "Action items", "bullets": items},
    ]
    body = body[:2] if level == 2 else body
    yield ToolCall("slides__create_deck", {"path": deck}, "Create the deck.")
    for s in title + body:
        yield ToolCall("slides__add_slide", {"path": deck, "title": s["title"], "bullets": s["bullets"],
                                             "layout": s.get("layout", "title_and_content")}, f"Add '{s['title']}'.")
    listing = parse_json((yield ToolCall("slides__list_slides", {"path": deck}, "Check the running order.")))
    for i in [s["index"] for s in listing["slides"]]:
        yield ToolCall("slides__read_slide", {"path": deck, "index": i}, f"Check slide {i} against the sources.")
    yield from _announce(d)
    return (f"Built {deck} ({len(title + body)} slides), checked every slide, commented on {key} and posted in "
            f"#incidents.")


def _oracle_timeline(d: dict):
    """Level 1: the template's one slide and its notes, the incident channel and the thread that
    corrects the recovery time; the Timeline slide, read back; then report."""
    deck, tpl, key = d["deck"], d["template"], d["key"]
    yield ToolCall("slides__read_slide", {"path": tpl, "index": 0}, "The template's slide and its notes.")
    yield ToolCall("chat__read_channel", {"channel": f"#{d['chan']}", "limit": 50}, "The incident channel.")
    yield ToolCall("chat__read_thread", {"thread_id": d["thread_recovered"]}, "A reply on the recovery time.")
    yield ToolCall("slides__create_deck", {"path": deck}, "Create the deck.")
    yield ToolCall("slides__add_slide", {"path": deck, "title": "Timeline", "layout": "title_and_content",
                                         "bullets": _timeline(d, d["times"])}, "Add the Timeline slide.")
    yield ToolCall("slides__read_slide", {"path": deck, "index": 0}, "Check the slide against the channel.")
    yield from _announce(d)
    return "Built and checked the Timeline deck; commented on the ticket and posted in #incidents."


def _perturbations(d: dict, level: int, wont_do: str) -> dict:
    """One flawed oracle per criterion, as edits of the deck's slides (the stale recovery time, the
    former commander, the preliminary count, the ruled-out theory, the Won't Do follow-up
    ``wont_do`` listed, Impact before Timeline) and of the calls around them."""
    solve = partial(_oracle, d, level)
    deck, tpl, key = d["deck"], d["template"], d["key"]
    slide = partial(perturb.on, "slides__add_slide", path=deck)

    def bullet(title, i, text):  # slide ``title``'s bullet ``i`` reads ``text``
        return perturb.change(solve, slide(title=title), lambda a: {**a, "bullets": [
            text if k == i else b for k, b in enumerate(a["bullets"])]})

    check = perturb.on("slides__read_slide", path=deck) if level == 1 else perturb.on("slides__list_slides", path=deck)
    touch = (ToolCall("slides__add_slide", {"path": tpl, "title": f"Used for {key}"}, "Mark the template as used.")
             if level == 1 else
             ToolCall("slides__update_slide", {"path": tpl, "index": 0, "notes": f"Used for {key}."},
                      "Note on the template which incident used it."))
    comment = perturb.on("tickets__add_comment", key=key)
    return {
        # where this incident lacks a conflict, the slide is wrong another way: the other incident's
        # commander, its "back to baseline" time, its figure; the cause left open
        "title_slide": bullet(f"{key}: {d['title']}", 2, f"Incident commander: {d['former_ic'] or d['other_ic']}"),
        "slide_order": perturb.change(solve, slide(title="Impact"), position=1),
        "timeline": perturb.change(solve, slide(title="Timeline"), bullets=_timeline(
            d, [*d["times"][:3], d["stale"] or d["other_times"][-1], d["times"][4]])),
        "impact": bullet("Impact", 1, f"{d['metric'].capitalize()}: {d['prelim'] or d['other_final']:,}"),
        "root_cause": perturb.change(solve, slide(title="Root cause"), bullets=[
            f"Working theory: {d['theory']}" if d["theory"] else "Root cause: still under investigation"]),
        "action_items": perturb.change(solve, slide(title="Action items"),
                                       lambda a: {**a, "bullets": a["bullets"] + [wont_do]}),
        "checked_every_slide": perturb.drop(solve, perturb.on("slides__read_slide", path=deck,
                                                              index={1: 0, 2: 2}.get(level, 4))),
        "ticket_comment": perturb.drop(solve, comment),
        "channel_post": perturb.drop(solve, perturb.on("chat__post_message", channel="#incidents")),
        "sources_unchanged": perturb.insert(solve, touch, before=check),
        "only_deck_created": perturb.insert(solve, ToolCall(
            "slides__create_deck", {"path": "decks/postmortems/draft.pptx"}, "A scratch deck."), before=check),
        "tickets_untouched": perturb.insert(solve, ToolCall(
            "tickets__update_ticket", {"key": key, "add_labels": ["pir-ready"]}, "Label the incident."), after=comment),
        "chat_only_incidents": perturb.insert(solve, ToolCall(
            "chat__post_message", {"channel": f"#{d['chan']}", "text": f"Review deck: {deck}"},
            "Also in the incident channel.")),
    }
