"""Reporting by mail: Friday's backlog digest, one mail per team lead, from the ticket tracker.

The head of support asks (by mail) for each product team's figures from the support queue:
open tickets by priority, the oldest open ticket, how many the team resolved or closed since
Monday, and who holds the most open tickets. The leads come from a January roster mail, with
one change since (the old lead moved on) and one announced for next week (not in force yet);
one team is left out this week. Distractors: the engineering board holds tickets of the same
teams and people, unrouted New tickets, tickets closed before Monday, and one closed earlier
that only got a comment this week (its "updated" stamp is recent, its history is not). Last
week's digests sit in Sent, addressed to last week's leads.

At the default level the lead change since January, the cover announced for next week and the
tickets closed before Monday but commented on this week are each drawn per seed (``TRAP_ODDS``);
the team left out this week is always there. ``Task.data`` names each drawn one (the former lead,
the cover, the late-commented keys), empty where it is absent. Levels 1-2 keep them all.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.mail import state as mail
from longhorizon.apps.tickets import state as tix
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    People,
    company,
    long_date,
    mails_sent,
    monday_of,
    norm,
    rng_and_faker,
    slug,
)
from longhorizon.tasks.tickets import mentions_key

TEAMS = {
    "Billing Ops": "Invoices, payments and plans", "Mobile": "iOS and Android apps",
    "Platform API": "The public REST API", "Analytics": "Reports and dashboards",
    "Integrations": "Connectors and webhooks", "Identity": "Sign-in, SSO and permissions",
}
TOPICS = {
    "Billing Ops": ["Invoice PDF shows the wrong VAT", "Card payment declined twice", "Plan downgrade not applied",
                    "Refund missing from statement", "Billing contact cannot be changed", "Duplicate invoice numbers",
                    "Proration looks wrong after upgrade", "Payment receipt not emailed", "Credit note rounding",
                    "Annual plan renewal failed", "Currency shown as USD instead of EUR", "Tax ID rejected"],
    "Mobile": ["App crashes on launch (Android 14)", "Push notifications arrive late", "Offline mode loses drafts",
               "Login loop on iOS", "Dark mode text unreadable", "Camera upload fails", "App logs users out hourly",
               "Widget shows stale data", "Deep link opens the wrong screen", "Biometric login disabled",
               "Slow sync on large accounts", "Badge count never clears"],
    "Platform API": ["503s on the orders endpoint", "Pagination skips records", "Rate limit too aggressive",
                     "Webhook signature mismatch", "API key rotation fails", "Timeouts on bulk import",
                     "Wrong time zone in API responses", "OAuth token refresh error", "Sandbox returns prod data",
                     "Filter by date ignored", "Null fields missing from JSON", "Search endpoint returns 500"],
    "Analytics": ["Monthly revenue report totals off", "Dashboard charts time out", "Export to CSV truncated",
                  "Scheduled report not delivered", "Cohort chart empty", "Wrong fiscal year start",
                  "Shared report link broken", "Filters reset on reload", "Funnel counts differ from raw data",
                  "Report builder freezes", "Missing data for last Sunday", "Custom metric cannot be saved"],
    "Integrations": ["CRM contact sync drops records", "ERP sync stuck", "Slack alerts stopped",
                     "Custom field mapping lost", "Calendar sync duplicates events", "Zapier trigger fires twice",
                     "SFTP import rejects file", "Webhook retries never stop", "HubSpot owner not synced",
                     "Connector status shows error", "Sync ignores archived items", "Import maps dates wrongly"],
    "Identity": ["SAML sign-in fails", "Removed users can still sign in", "MFA codes rejected",
                 "SCIM provisioning errors", "Password reset mail not sent", "Session timeout too short",
                 "Role change not applied", "SSO redirect loop", "Audit log missing logins",
                 "Second identity provider", "Invite link expired", "Guest access too broad"],
}
ENG_WORK = ["Refactor retry logic", "Upgrade the SDK", "Add metrics to the worker", "Remove the legacy endpoint",
            "Write the migration script", "Load test the new cluster", "Clean up feature flags",
            "Move config to the vault", "Fix flaky integration tests", "Document the runbook",
            "Drop the unused tables", "Tune the alert thresholds", "Split the monolith config",
            "Automate the release notes", "Add tracing to the gateway"]
QUALIFIERS = ["(again)", "for EU accounts", "after the last release", "on large accounts", "for some users",
              "since the update"]
PRIORITY_WEIGHTS = (("P1", 1), ("P2", 3), ("P3", 4), ("P4", 2))
OPEN_STATUSES = ("Triaged", "In Progress", "Waiting on Customer")
PRIOS = ("P1", "P2", "P3", "P4")
TRAP_ODDS = (("lead_changed", 0.6), ("cover_next_week", 0.6), ("late_comment", 0.7))
"""Each trap there with this chance at the default level (the skipped team always); levels 1-2 keep all."""


# -- reading a digest mail -------------------------------------------------------------------

_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*-\d+")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?")
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DAYMONTH = re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b", re.I)
_NUMWORDS = {"none": 0, "no": 0, "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
             "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_NUM = r"(\d+|none|zero|no|one|two|three|four|five|six|seven|eight|nine|ten)\b"


def _segments(text: str) -> list[str]:
    """Lines, split further at semicolons and sentence ends."""
    out = []
    for line in (text or "").splitlines():
        out.extend(s for s in re.split(r";|(?<=[\w)\]])\.\s+", line) if s.strip())
    return out


def _scrub(text: str) -> str:
    """Blank out ticket keys, times and dates so their digits are not read as counts."""
    for rx in (_KEY, _ISO, _DAYMONTH, re.compile(r"\b\d{1,2}[:.]\d{2}\b")):
        text = rx.sub(lambda m: " " * len(m.group(0)), text)
    return text


def _as_int(word: str) -> int:
    w = word.lower()
    return int(w) if w.isdigit() else _NUMWORDS[w]


def priority_count(text: str, prio: str) -> int | None:
    """The count stated for ``prio``: 'P1: 2', 'P1 (Critical) - 2', '| P1 | 2 |', or '2 P1 tickets'."""
    t = _scrub(norm(text))
    p = prio.lower()
    after = re.search(rf"\b{p}\b[^\d\n,;.]{{0,25}}?\b{_NUM}(?!\s*(?:x|×|\*)?\s*(?:open\s+)?p[1-4]\b)", t)
    if after:
        return _as_int(after.group(1))
    before = re.search(rf"(?<![\w-]){_NUM}\s*(?:x|×|\*)?\s*(?:open\s+)?{p}\b", t)
    return _as_int(before.group(1)) if before else None


def closed_count(text: str) -> int | None:
    """The number nearest to 'closed'/'resolved' in the passage that names them (one about this
    week or since Monday first, then one not about open tickets, then any)."""
    segs = [s for s in _segments(norm(text)) if re.search(r"\b(closed|resolved|closures|done)\b", s)]
    ranked = ([s for s in segs if re.search(r"\b(week|since|monday)\b", s)]
              + [s for s in segs if not re.search(r"\bopen\b", s)] + segs)
    for seg in ranked:
        s = _scrub(seg)
        words = [m.start() for m in re.finditer(r"\b(closed|resolved|closures|done)\b", s)]
        nums = [(m.start(), m.end(), _as_int(m.group(1))) for m in re.finditer(rf"(?<![\w-]){_NUM}", s)]
        if not nums:
            continue
        best = min(nums, key=lambda n: min(abs(n[0] - w) if n[0] >= w else abs(w - n[1]) for w in words))
        return best[2]
    return None


def oldest_mentioned(text: str, key: str) -> bool:
    segs = [s for s in _segments(text) if re.search(r"oldest|longest", s, re.I)]
    return any(mentions_key(s, key) for s in segs)


def first_person(text: str, people: dict[str, list[str]]) -> str | None:
    """In the passages about who has the most tickets, the person named first (by any of their names)."""
    best = None
    for seg in _segments(text):
        if not re.search(r"\b(most|top|busiest|heaviest|largest|biggest|highest)\b", seg, re.I):
            continue
        for who, names in people.items():
            for n in names:
                m = re.search(rf"(?<![\w.@]){re.escape(n)}(?![\w])", seg, re.I)
                if m and (best is None or m.start() < best[0]):
                    best = (m.start(), who)
        if best:
            return best[1]
    return None


@register
class TeamBacklogDigest(TaskFamily):
    name = "team_backlog_digest"
    category = "reporting by mail"
    apps = ("tickets", "mail")
    description = ("Mail each team lead their team's support-queue figures (open by priority, oldest open "
                   "ticket, resolved or closed this week, who holds the most), with the leads taken from a "
                   "roster and the changes since, and the figures computed from the tracker and its history.")

    levels = 3
    """1: one team's digest (the team whose lead did not change) with one ticket closed this
    week, the top holder's open tickets and one more, and two finished before Monday (the team's
    first, and one commented on this week); 2: the two teams whose leads changed (one now, one next week); 3 (default): three
    teams."""
    toolsets = {1: (
        "mail__read_message", "mail__search_messages", "mail__send_message", "tickets__get_history",
        "tickets__search_tickets",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        short = level == 1  # one team: its tickets fit one search, and only the roster names its lead
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        _, domain = company(fake)
        monday = monday_of(rng, 40) + timedelta(weeks=2)
        today = monday + timedelta(days=4)
        now = datetime.combine(today, time(15, 30))
        week_start = datetime.combine(monday, time(0, 0))
        names = rng.sample(sorted(TEAMS), 4)
        digest_teams, skipped = names[:3], names[3]
        absorbing = rng.choice(digest_teams)
        traps = {kind for kind, p in TRAP_ODDS if rng.random() < p}
        if level < self.levels:  # the lower levels are built around the two lead changes
            traps = {kind for kind, _ in TRAP_ODDS}

        me, boss, people_ops = people.make(domain), people.make(domain), people.make(domain)

        def user(p, team):
            return {"username": slug(p.first) + slug(p.last)[:1], "name": p.name, "email": p.email, "team": team,
                    "first": p.first}

        users = [user(me, "Support"), user(boss, "Support")]
        members: dict[str, list[dict]] = {}
        for team in names:
            members[team] = [user(people.make(domain), team) for _ in range(rng.randint(3, 4))]
            users += members[team]
        lead_jan = {team: members[team][0] for team in names}
        # change A: a digest team got a new lead (the old one moved to Architecture)
        team_a, team_b = rng.sample(digest_teams, 2)
        lead_now = dict(lead_jan)
        old_lead = None
        if "lead_changed" in traps:
            old_lead = lead_jan[team_a]
            old_lead["team"] = "Architecture"
            members[team_a] = members[team_a][1:]
            lead_now[team_a] = members[team_a][0]
            if len(members[team_a]) < 3:
                extra = user(people.make(domain), team_a)
                members[team_a].append(extra)
                users.append(extra)
        # change B: a cover for team B's lead starts next Monday (not yet in force)
        cover_b = members[team_b][1]
        change_a_day = monday - timedelta(days=rng.choice([0, 0, 3, 7]))
        next_monday = monday + timedelta(days=7)
        by_user = {u["username"]: u for u in users}

        # tickets -------------------------------------------------------------------------------------
        tickets: list[dict] = []
        history: list[dict] = []
        comments: list[dict] = []
        used_times: set[datetime] = set()

        def stamp(dt: datetime) -> datetime:
            dt = dt.replace(second=0, microsecond=0)
            while dt in used_times:
                dt += timedelta(minutes=1)
            used_times.add(dt)
            return dt

        def prio() -> str:
            return rng.choices([p for p, _ in PRIORITY_WEIGHTS], [w for _, w in PRIORITY_WEIGHTS])[0]

        topics = {t: rng.sample(TOPICS[t], len(TOPICS[t])) for t in names}

        def title_for(team) -> str:
            if not topics[team]:
                topics[team] = [f"{x} {rng.choice(QUALIFIERS)}" for x in rng.sample(TOPICS[team], len(TOPICS[team]))]
            return topics[team].pop()

        def sup(team, status, created, *, assignee=None, priority=None, title=None):
            t = {"project": "SUP", "team": team, "status": status, "priority": priority or prio(),
                 "assignee": assignee, "created": stamp(created), "customer": company(fake)[0],
                 "title": title or title_for(team), "type": "bug",
                 "resolution": None, "updated": None}
            t["description"] = f"Reported by {t['customer']}: {t['title'].lower()}."
            tickets.append(t)
            return t

        def open_history(t):
            tri = stamp(t["created"] + timedelta(minutes=rng.randint(20, 90)))
            history.append({"ticket": t, "field": "status", "old": "New", "new": "Triaged",
                            "author": users[0]["username"], "at": tri})
            last = tri
            if t["status"] in ("In Progress", "Waiting on Customer"):
                span = max(1, int((now - tri).total_seconds() // 60) - 10)
                start = stamp(tri + timedelta(minutes=rng.randint(1, span)))
                history.append({"ticket": t, "field": "status", "old": "Triaged", "new": "In Progress",
                                "author": t["assignee"] or users[0]["username"], "at": start})
                last = start
                if t["status"] == "Waiting on Customer":
                    span = max(1, int((now - start).total_seconds() // 60) - 5)
                    wait = stamp(start + timedelta(minutes=rng.randint(1, span)))
                    history.append({"ticket": t, "field": "status", "old": "In Progress",
                                    "new": "Waiting on Customer", "author": t["assignee"] or users[0]["username"],
                                    "at": wait})
                    last = wait
            t["updated"] = last

        def done_history(t, closed_at):
            tri = stamp(t["created"] + timedelta(minutes=rng.randint(20, 90)))
            mid = stamp(tri + (closed_at - tri) / 3)
            who = t["assignee"] or users[0]["username"]
            history.extend([
                {"ticket": t, "field": "status", "old": "New", "new": "Triaged", "author": users[0]["username"],
                 "at": tri},
                {"ticket": t, "field": "status", "old": "Triaged", "new": "In Progress", "author": who, "at": mid},
                {"ticket": t, "field": "status", "old": "In Progress", "new": t["status"], "author": who,
                 "at": closed_at},
                {"ticket": t, "field": "resolution", "old": None, "new": t["resolution"], "author": who,
                 "at": closed_at},
            ])
            t["updated"] = closed_at
            t["closed_at"] = closed_at

        truth: dict[str, dict] = {}
        for team in names:
            crew = [u["username"] for u in members[team]]
            opened = []
            for _ in range(rng.randint(6, 9)):
                created = now - timedelta(minutes=rng.randint(240, 50 * 1440))
                who = rng.choice(crew) if rng.random() < 0.85 else None
                status = rng.choice(OPEN_STATUSES) if who else "Triaged"
                opened.append(sup(team, status, created, assignee=who))
            # a unique top assignee
            while True:
                counts = {c: sum(1 for t in opened if t["assignee"] == c) for c in crew}
                top = max(counts.values())
                tied = [c for c in crew if counts[c] == top]
                if len(tied) == 1:
                    break
                other = next((t for t in opened if t["assignee"] not in tied), None)
                if other is None:
                    created = now - timedelta(minutes=rng.randint(240, 50 * 1440))
                    opened.append(sup(team, "In Progress", created, assignee=tied[0]))
                else:
                    other["assignee"] = tied[0]
                    if other["status"] == "Triaged" and rng.random() < 0.5:
                        other["status"] = "In Progress"
            for t in opened:
                open_history(t)
            # finished work: long ago (the team's very first ticket among them), before Monday, this week
            done = []
            ancient = sup(team, "Closed", now - timedelta(days=rng.randint(95, 120), minutes=rng.randrange(600)),
                          assignee=rng.choice(crew))
            ancient["resolution"] = "Fixed"
            done_history(ancient, stamp(ancient["created"] + timedelta(days=rng.randint(2, 9))))
            done.append(ancient)
            for _ in range(rng.randint(2, 3)):
                closed_at = stamp(week_start - timedelta(minutes=rng.randint(60, 18 * 1440)))
                t = sup(team, rng.choice(["Resolved", "Closed"]), closed_at - timedelta(
                    minutes=rng.randint(1440, 30 * 1440)), assignee=rng.choice(crew))
                t["resolution"] = rng.choice(["Fixed", "Fixed", "Answered"])
                done_history(t, closed_at)
                done.append(t)
            this_week = []
            for _ in range(rng.randint(1, 4)):
                closed_at = stamp(week_start + timedelta(minutes=rng.randint(8 * 60, int((now - week_start)
                                                                                      .total_seconds() // 60) - 30)))
                t = sup(team, rng.choice(["Resolved", "Closed"]), closed_at - timedelta(
                    minutes=rng.randint(600, 25 * 1440)), assignee=rng.choice(crew))
                t["resolution"] = rng.choice(["Fixed", "Fixed", "Answered"])
                done_history(t, closed_at)
                this_week.append(t)
            # closed before Monday, but commented on this week
            if "late_comment" in traps and (team == min(digest_teams) or rng.random() < 0.6):
                closed_at = stamp(week_start - timedelta(minutes=rng.randint(6 * 60, 9 * 1440)))
                t = sup(team, "Resolved", closed_at - timedelta(minutes=rng.randint(1440, 20 * 1440)),
                        assignee=rng.choice(crew))
                t["resolution"] = "Fixed"
                done_history(t, closed_at)
                said = stamp(week_start + timedelta(minutes=rng.randint(9 * 60, 3 * 1440)))
                comments.append({"ticket": t, "author": t["assignee"], "created": said,
                                 "body": rng.choice(["Customer confirmed the fix is holding, thanks all.",
                                                     "Follow-up: the customer says all good now.",
                                                     "Linked the release notes for the customer."])})
                t["updated"] = said
                t["late_comment"] = True
                done.append(t)
            truth[team] = {"open": opened, "this_week": this_week, "done": done + this_week, "crew": crew}
        if level < self.levels:  # the same draws, then fewer teams (the default stays byte for byte)
            if level == 1:
                digest_teams = [t for t in digest_teams if t not in (team_a, team_b)]
                tr = truth[digest_teams[0]]
                gone = tr["this_week"][1:]
                tr["this_week"] = tr["this_week"][:1]
                # fewer tickets to read: the top holder's open ones, one more open ticket, and of the
                # finished ones only the team's first and the one commented on this week
                counts = {c: sum(1 for t in tr["open"] if t["assignee"] == c) for c in tr["crew"]}
                top = max(tr["crew"], key=lambda c: counts[c])
                spare = next((t for t in tr["open"] if t["assignee"] != top), None) if counts[top] > 1 else None
                keep_open = [t for t in tr["open"] if t["assignee"] == top or t is spare]
                old = [t for t in tr["done"] if all(t is not x for x in tr["this_week"] + gone)]
                keep_old = [t for k, t in enumerate(old) if k == 0 or t.get("late_comment")]
                gone += [t for t in tr["open"] + old if all(t is not k for k in keep_open + keep_old)]
                tr["open"] = keep_open
                tr["done"] = [t for t in tr["done"] if all(t is not g for g in gone)]
                tickets[:] = [t for t in tickets if all(t is not g for g in gone)]
                history[:] = [h for h in history if all(h["ticket"] is not g for g in gone)]
                comments[:] = [c for c in comments if all(c["ticket"] is not g for g in gone)]
            else:
                digest_teams = sorted([team_a, team_b])

        # unrouted New tickets and the engineering board --------------------------------------------
        for _ in range(3):
            team = rng.choice(names)
            t = sup(None, "New", now - timedelta(minutes=rng.randint(20, 2 * 1440)), priority="P3",
                    title=title_for(team))
            t["updated"] = t["created"]
        eng: list[dict] = []
        eng_titles = rng.sample(ENG_WORK, len(ENG_WORK))
        for team in names:
            crew = truth[team]["crew"]
            for _ in range(rng.randint(2, 3)):
                eng.append({"project": "ENG", "team": team, "title": eng_titles.pop(),
                            "type": "task", "status": rng.choice(["To Do", "In Progress"]), "priority": prio(),
                            "assignee": rng.choice(crew),
                            "created": stamp(now - timedelta(minutes=rng.randint(3 * 1440, 130 * 1440)))})

        # numbering in creation order, per project
        tickets.sort(key=lambda t: t["created"])
        first = rng.randint(300, 700)
        for i, t in enumerate(tickets):
            t["number"], t["key"] = first + i, f"SUP-{first + i}"
        eng.sort(key=lambda t: t["created"])
        for i, t in enumerate(eng, start=rng.randint(40, 90)):
            t["number"], t["key"] = i, f"ENG-{i}"

        figures: dict[str, dict] = {}
        for team in digest_teams + [skipped]:
            tr = truth[team]
            opened = sorted(tr["open"], key=lambda t: t["created"])
            counts = {c: sum(1 for t in opened if t["assignee"] == c) for c in tr["crew"]}
            ranked = sorted(tr["crew"], key=lambda c: -counts[c])
            eng_team = [t for t in eng if t["team"] == team]
            figures[team] = {
                "by_priority": {p: sum(1 for t in opened if t["priority"] == p) for p in PRIOS},
                "open_total": len(opened),
                "oldest": opened[0]["key"], "oldest_title": opened[0]["title"],
                "oldest_any": min(tr["done"] + opened, key=lambda t: t["created"])["key"],
                "closed": len(tr["this_week"]),
                "closed_by_updated": sum(1 for t in tr["done"] if t["updated"] >= week_start),
                "top": ranked[0], "runner_up": ranked[1],
                "with_eng": {p: sum(1 for t in opened + eng_team if t["priority"] == p) for p in PRIOS},
            }
        leads = {team: lead_now[team] for team in digest_teams}
        wrong_people = {lead_now[skipped]["email"]} | ({old_lead["email"]} if old_lead else set()) | (
            {cover_b["email"]} if "cover_next_week" in traps else set())

        def as_seed(t):
            keep = ("project", "number", "type", "title", "status", "resolution", "priority", "assignee", "team",
                    "customer")
            d = {k: t.get(k) for k in keep if t.get(k) is not None}
            d["description"] = t.get("description", "")
            d["created"] = t["created"].isoformat()
            if t.get("updated"):
                d["updated"] = t["updated"].isoformat()
            return d

        seed_tickets = [as_seed(t) for t in eng + tickets]
        seed_history = sorted(({**h, "ticket": h["ticket"]["key"], "at": h["at"].isoformat()} for h in history),
                              key=lambda h: (h["at"], h["ticket"]))
        seed_comments = sorted(({**c, "ticket": c["ticket"]["key"], "created": c["created"].isoformat()}
                                for c in comments), key=lambda c: c["created"])
        tracker_users = [{k: u[k] for k in ("username", "name", "email", "team")} for u in users]
        team_rows = [{"name": t, "description": TEAMS[t]} for t in sorted(names)] + [
            {"name": "Architecture", "description": "Cross-team technical direction"},
            {"name": "Support", "description": "Front-line support"}]

        # mail ---------------------------------------------------------------------------------------
        def at(d, hm):
            return f"{d.isoformat()}T{hm}:00"

        roster_lines = "\n".join(f"- {t}: {lead_jan[t]['name']} ({lead_jan[t]['email']})" for t in sorted(names))
        jan = monday - timedelta(days=rng.randint(50, 80))
        inbox = [
            {"folder": "Inbox", "sender": people_ops.email, "sender_name": people_ops.name,
             "subject": "Team leads for 2026", "date": at(jan, "10:12"), "is_read": True,
             "body": (f"Hi all,\n\nFor reference, here are the product team leads for this year:\n\n{roster_lines}\n"
                      f"- Support: {boss.name} ({boss.email})\n\nI'll send an update whenever this changes.\n\n"
                      f"{people_ops.name}\nPeople Ops")},
            *([{"folder": "Inbox", "sender": people_ops.email, "sender_name": people_ops.name,
                "subject": f"{team_a}: new team lead", "date": at(change_a_day - timedelta(days=4), "11:40"),
                "is_read": True,
                "body": (f"Hi all,\n\n{old_lead['name']} is moving to the Architecture group. From "
                         f"{long_date(change_a_day)}, {lead_now[team_a]['name']} leads {team_a}; please send "
                         f"anything for the {team_a} lead to {lead_now[team_a]['first']} from then on.\n\n"
                         f"{people_ops.name}")}] if old_lead else []),
            {"folder": "Inbox", "sender": f"digest@{slug(fake.company())[:12]}.example", "sender_name": "SaaS Weekly",
             "subject": "10 support metrics that matter", "date": at(monday - timedelta(days=2), "07:00"),
             "body": "First response time, backlog age, and eight more. Read on our site."},
            *([{"folder": "Inbox", "sender": people_ops.email, "sender_name": people_ops.name,
                "subject": f"Cover for the {team_b} lead", "date": at(monday + timedelta(days=2), "16:05"),
                "body": (f"Hi all,\n\n{lead_jan[team_b]['name']} starts parental leave next week. From "
                         f"{long_date(next_monday)}, {cover_b['name']} covers as {team_b} lead until they are "
                         f"back. Until then nothing changes.\n\n{people_ops.name}")}]
              if "cover_next_week" in traps else []),
            {"folder": "Inbox", "sender": lead_now[absorbing]["email"], "sender_name": lead_now[absorbing]["name"],
             "subject": f"{skipped} joining us", "date": at(monday + timedelta(days=1), "09:30"),
             "body": (f"Hi {me.first},\n\nAs you probably heard, {skipped} is being folded into {absorbing} over the "
                      f"next few weeks. I'll sort out the ticket routing with you once it's settled.\n\n"
                      f"{lead_now[absorbing]['first']}")},
        ]
        request_body = (
            f"Hi {me.first},\n\nCould you send out the backlog digests today? One mail per team lead, covering "
            f"only their team's tickets in the support queue (SUP); the engineering board (ENG) doesn't count. "
            f"For each team:\n\n"
            f"- open tickets (anything not Resolved or Closed) by priority, P1 to P4\n"
            f"- the oldest open ticket (its key)\n"
            f"- how many tickets the team resolved or closed this week, i.e. since Monday morning\n"
            f"- who on the team holds the most open tickets\n\n"
            f"Subject \"Backlog digest: <team>\", as usual. This week it's {', '.join(sorted(digest_teams))}; leave "
            f"{skipped} out, they're being folded into {absorbing}. Leads are on the People Ops list; check for any "
            f"changes since it went out.\n\nThanks!\n{boss.first}"
        )
        inbox.append({"folder": "Inbox", "sender": boss.email, "sender_name": boss.name,
                      "subject": "Backlog digests this week", "date": at(today, "09:05"), "body": request_body})
        request_id = len(inbox)
        # last week's digests, to last week's leads (all four teams then)
        last_friday = today - timedelta(days=7)
        for team in sorted(names):
            rcpt = lead_jan[team] if team == team_a and change_a_day > last_friday else lead_now[team]
            nums = [rng.randint(0, 4) for _ in PRIOS]
            body = (f"Hi {rcpt['first']},\n\nThis week's backlog digest for {team} (SUP):\n\n"
                    + "Open tickets by priority: " + ", ".join(f"{p}: {n}" for p, n in zip(PRIOS, nums))
                    + f"\nOldest open ticket: {rng.choice(truth[team]['done'])['key']}\n"
                    f"Resolved or closed this week: {rng.randint(1, 5)}\n"
                    f"Most open tickets: {rng.choice(members[team])['name']}\n\nBest,\n{me.first}")
            inbox.append({"folder": "Sent", "sender": me.email, "sender_name": me.name, "to": [rcpt["email"]],
                          "subject": f"Backlog digest: {team}", "date": at(last_friday, "16:10"), "is_read": True,
                          "body": body})
        seeded_mails = len(inbox)

        def build(root: Path) -> None:
            tix.create_tracker(
                root / "state" / "tickets.sqlite", me=users[0]["username"], now=now.isoformat(),
                projects=[{"key": "SUP", "name": "Customer Support", "kind": "support"},
                          {"key": "ENG", "name": "Engineering", "kind": "project"}],
                teams=team_rows, users=tracker_users, tickets=seed_tickets, comments=seed_comments,
                history=seed_history)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox,
                                now=now.isoformat())

        w = phrasing_rng(self.name, seed)
        wants = say(w, f"{boss.first} wants the weekly backlog digests out before the end of the day; the request is "
                       "in my inbox.",
                    f"The weekly backlog digests need to go out before the end of the day: {boss.first}'s request is "
                    "in my inbox.",
                    f"There's a request from {boss.first} in my inbox: the weekly backlog digests have to be out "
                    "before the end of the day.")
        ask = say(w, "Can you put the figures together from the tracker and send them to the leads?",
                  "Could you put the figures together from the tracker and send the digests to the leads?",
                  "Please pull the figures together from the tracker and send them to the leads.",
                  "Would you gather the figures from the tracker and send them to the leads?")
        keep = say(w, "Please don't change anything in the tracker itself.",
                   "Don't change anything in the tracker itself, please.",
                   "The tracker itself should stay exactly as it is: please don't change anything in it.")
        instruction = " ".join([say(w, "", "Hi!", "Hello!", "Hey!"), wants, ask, keep]).strip()

        # oracle -------------------------------------------------------------------------------------
        def digest_body(team, fig, *, oldest=None, closed=None, top=None, by_priority=None) -> str:
            lead = leads[team]
            bp = by_priority or fig["by_priority"]
            top_user = by_user[top or fig["top"]]
            n_top = sum(1 for t in truth[team]["open"] if t["assignee"] == top_user["username"])
            return (f"Hi {lead['first']},\n\nHere is this week's backlog digest for {team} (support queue SUP, as of "
                    f"{long_date(today)}):\n\n"
                    f"Open tickets by priority: " + ", ".join(f"{p}: {bp[p]}" for p in PRIOS)
                    + f" ({sum(bp.values())} open)\n"
                    f"Oldest open ticket: {oldest or fig['oldest']}\n"
                    f"Resolved or closed this week: {fig['closed'] if closed is None else closed}\n"
                    f"Most open tickets: {top_user['name']} ({n_top})\n\nBest,\n{me.first}")

        def solve():
            yield ToolCall("mail__search_messages", {"query": "backlog digest", "folder": "Inbox"},
                           "Find the request for this week's digests.")
            yield ToolCall("mail__read_message", {"message_id": request_id}, "Read what is asked.")
            found = json.loads((yield ToolCall("mail__search_messages",
                                               {"query": "lead", "sender": people_ops.email},
                                               "Find the People Ops roster and any lead changes.")))
            for m in sorted(found["messages"], key=lambda m: m["date"]):
                if short and not (m["subject"] == "Team leads for 2026"
                                  or any(norm(t) in norm(m["subject"]) for t in digest_teams)):
                    continue  # a change for another team's lead
                yield ToolCall("mail__read_message", {"message_id": m["id"]}, f"Read {m['subject']!r}.")
            if not short:
                yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 10},
                               "See how last week's digests looked.")
                yield ToolCall("tickets__list_teams", {}, "Check the teams and who is in each.")
                yield ToolCall("tickets__list_users", {}, "Usernames, names and addresses.")
            def open_figures(opened):
                """By priority, the assignee holding the most, the oldest key: of open tickets."""
                counts: dict[str, int] = {}
                for t in opened:
                    if t["assignee"]:
                        counts[t["assignee"]] = counts.get(t["assignee"], 0) + 1
                return ({p: sum(1 for t in opened if t["priority"] == p) for p in PRIOS},
                        max(sorted(counts), key=lambda c: counts[c]),
                        min(opened, key=lambda t: int(t["key"].split("-")[1]))["key"])

            def closed_this_week(t):
                """1 when the ticket's first move to Resolved/Closed is this week (one history call)."""
                h = json.loads((yield ToolCall("tickets__get_history", {"key": t["key"], "field": "status"},
                                               f"When was {t['key']} resolved?")))
                done_at = [c["at"] for c in h["changes"] if c["new"] in ("Resolved", "Closed")]
                return int(bool(done_at and done_at[0] >= week_start.isoformat()))

            def checked(team, by_p, oldest, closed, top):
                fig = figures[team]
                assert (by_p, oldest, closed, top) == (fig["by_priority"], fig["oldest"], fig["closed"],
                                                       fig["top"]), (team, by_p, oldest, closed, top, fig)
                return fig

            got: dict[str, dict] = {}
            for team in sorted(digest_teams) if short else ():
                page = json.loads((yield ToolCall("tickets__search_tickets", {
                    "project": "SUP", "team": team, "limit": 100},
                    f"{team}: every ticket in the support queue, open and finished.")))
                by_p, top, oldest = open_figures(
                    [t for t in page["tickets"] if t["status"] not in ("Resolved", "Closed")])
                closed = 0
                for t in page["tickets"]:
                    if t["status"] in ("Resolved", "Closed") and t["updated"] >= week_start.isoformat():
                        closed += yield from closed_this_week(t)
                got[team] = checked(team, by_p, oldest, closed, top)
            for team in () if short else sorted(digest_teams):
                page = json.loads((yield ToolCall("tickets__search_tickets", {
                    "project": "SUP", "team": team, "open_only": True, "limit": 100},
                    f"{team}: open tickets in the support queue.")))
                by_p, top, oldest = open_figures(page["tickets"])
                info = json.loads((yield ToolCall("tickets__get_ticket", {"key": oldest},
                                                  f"Confirm {oldest} is the oldest open one.")))
                assert info["status"] in OPEN_STATUSES
                closed = 0
                for status in ("Resolved", "Closed"):
                    page = json.loads((yield ToolCall("tickets__search_tickets", {
                        "project": "SUP", "team": team, "status": status, "limit": 100},
                        f"{team}: {status} tickets; which changed since Monday?")))
                    for t in page["tickets"]:
                        if t["updated"] >= week_start.isoformat():
                            closed += yield from closed_this_week(t)
                got[team] = checked(team, by_p, oldest, closed, top)
            for team in sorted(digest_teams):
                yield ToolCall("mail__send_message", {
                    "to": [leads[team]["email"]], "subject": f"Backlog digest: {team}",
                    "body": digest_body(team, got[team])}, f"Send {team}'s digest to {leads[team]['name']}.")
            if not short:
                yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 5},
                               "Check the digests went out.")
            return ("Sent the backlog digests: " + "; ".join(
                f"{t} to {leads[t]['name']} ({figures[t]['open_total']} open, oldest {figures[t]['oldest']}, "
                f"{figures[t]['closed']} closed this week)" for t in sorted(digest_teams))
                + f". {skipped} left out as asked.")

        team0, last_team = sorted(digest_teams)[0], sorted(digest_teams)[-1]
        fig0 = figures[team0]

        def to_lead(team: str):
            return perturb.on("mail__send_message", to=[leads[team]["email"]])

        def digest0(**kw):
            """The first team's digest with one figure wrong."""
            return perturb.change(solve, to_lead(team0), body=digest_body(team0, fig0, **kw))

        cc_team = team_a if team_a in digest_teams else team0  # the team whose lead changed, when it has a digest
        perturbations = {
            "open_by_priority": digest0(by_priority=fig0["with_eng"]),
            "oldest_open": digest0(oldest=fig0["oldest_any"]),
            # (one more, if the team has no late comment)
            "closed_this_week": digest0(closed=fig0["closed_by_updated"] if fig0["closed_by_updated"] != fig0["closed"]
                                        else fig0["closed"] + 1),
            "top_assignee": digest0(top=fig0["runner_up"]),
            "digests_to_leads": perturb.change(solve, to_lead(team0), subject="Weekly backlog digest"),
            "right_recipients": perturb.change(solve, to_lead(cc_team),
                                               cc=[(old_lead or lead_now[skipped])["email"]]),
            "one_mail_per_lead": perturb.repeat(solve, to_lead(team0)),
            "tracker_untouched": perturb.insert(solve, ToolCall(
                "tickets__add_comment", {"key": fig0["oldest"], "body": "Any update on this one?", "internal": True},
                "Nudge the oldest ticket."), after=to_lead(last_team)),
        }

        # graders ------------------------------------------------------------------------------------
        def new_mails(w):
            return [m for m in mail.messages(w) if m["id"] > seeded_mails and m["sender"] == me.email.lower()]

        def mail_to(w, team):
            hits = [m for m in new_mails(w) if leads[team]["email"].lower() in m["to"]]
            return hits[-1] if hits else None

        def digests_to_leads(w, t):
            for team in digest_teams:
                hits = [m for m in new_mails(w) if leads[team]["email"].lower() in m["to"]
                        and norm(team) in norm(m["subject"])]
                if not hits:
                    return False, f"no mail to {leads[team]['email']} with {team!r} in the subject"
            stray = [m["id"] for m in new_mails(w)  # a digest sprayed at everyone is no routing
                     if set(m["to"] + m["cc"]) & {a.lower() for a in wrong_people}]
            return not stray, f"digest mails {stray} also went to former, future or skipped leads"

        def each(check):
            def run(w, t):
                for team in digest_teams:
                    m = mail_to(w, team)
                    if m is None:
                        return False, f"no mail to the {team} lead"
                    ok, why = check(team, m["body"])
                    if not ok:
                        return False, f"{team}: {why}"
                return True
            return run

        def priorities_ok(team, body):
            want = figures[team]["by_priority"]
            got = {p: priority_count(body, p) for p in PRIOS}
            return got == want, f"got {got}, want {want}"

        sup_keys = [t["key"] for t in tickets]

        def oldest_ok(team, body):
            want = figures[team]["oldest"]
            segs = [s for s in _segments(body) if re.search(r"oldest|longest", s, re.I)]
            others = [k for k in sup_keys if k != want and any(mentions_key(s, k) for s in segs)]
            return oldest_mentioned(body, want) and not others, f"oldest should be {want} (and only it): {others}"

        def closed_ok(team, body):
            got = closed_count(body)
            return got == figures[team]["closed"], f"closed this week: got {got}, want {figures[team]['closed']}"

        def top_ok(team, body):
            who = {}
            for c in truth[team]["crew"]:
                u = by_user[c]
                who[c] = [u["name"], u["first"], c]
            got = first_person(body, who)
            return got == figures[team]["top"], f"top assignee: got {got}, want {figures[team]['top']}"

        allowed = {leads[t]["email"].lower() for t in digest_teams} | {boss.email.lower()}

        def right_recipients(w, t):
            for m in new_mails(w):
                stray = [a for a in m["to"] + m["cc"] if a not in allowed]
                if stray:
                    return False, f"mail {m['id']} went to {stray}"
            return True

        def one_mail_per_lead(w, t):
            sends = mails_sent(t)
            if len(sends) != len(digest_teams):
                return False, f"{len(sends)} mails sent, want {len(digest_teams)}"
            firsts = []
            for c in sends:
                args = c.arguments if isinstance(c.arguments, dict) else {}
                to = args.get("to") or []
                to = [mail.parse_address(a) for a in (to if isinstance(to, list) else [to])]
                firsts.append(tuple(sorted(a for a in to if a)))
            want = sorted((leads[t]["email"].lower(),) for t in digest_teams)
            return sorted(firsts) == want, f"recipients {sorted(firsts)}"

        writes = ("tickets__create_ticket", "tickets__update_ticket", "tickets__assign_ticket",
                  "tickets__add_comment", "tickets__link_tickets", "tickets__unlink_tickets")

        def tracker_untouched(w, t):
            hits = [c.name for c in t.tool_calls if c.name in writes and not c.is_error]
            return not hits, f"tracker writes: {hits}" if hits else ""

        criteria = [
            Criterion("digests_to_leads", f"Each current lead of {', '.join(sorted(digest_teams))} got a mail whose "
                      "subject names their team (and no digest went to a former, future or skipped lead).",
                      "final_state", digests_to_leads, 2.0),
            Criterion("open_by_priority", "Each digest gives the team's open SUP tickets per priority P1-P4.",
                      "final_state", each(priorities_ok), 2.0),
            Criterion("oldest_open", "Each digest names the team's oldest open SUP ticket (no other as oldest).",
                      "final_state", each(oldest_ok)),
            Criterion("closed_this_week", "Each digest gives how many of the team's tickets were resolved or closed "
                      "since Monday (by the status history, not the last update).", "final_state",
                      each(closed_ok), 2.0),
            Criterion("top_assignee", "Each digest names the team member holding the most open SUP tickets.",
                      "final_state", each(top_ok)),
            Criterion("right_recipients", f"No mail went to anyone but the current leads (and {boss.first}): not "
                      + (f"the former {team_a} lead, " if old_lead else "")
                      + (f"not next week's {team_b} cover, " if "cover_next_week" in traps else "")
                      + f"not the {skipped} lead.",
                      "final_state", right_recipients, guard=True),
            Criterion("one_mail_per_lead", "Exactly one mail was sent to each lead, and no other mail.", "process",
                      one_mail_per_lead),
            Criterion("tracker_untouched", "Nothing in the tracker was changed.", "process", tracker_untouched,
                      guard=True),
        ]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: perturbations[c.id] for c in criteria},
            data={"leads": {t: leads[t]["email"] for t in digest_teams}, "skipped": skipped,
                  "figures": {t: {k: figures[t][k] for k in ("by_priority", "oldest", "closed", "top")}
                              for t in digest_teams},
                  "not_recipients": sorted(wrong_people),
                  # the drawn traps: each empty where it is absent
                  "former_lead": old_lead["email"] if old_lead else "",
                  "cover_next_week": cover_b["email"] if "cover_next_week" in traps else "",
                  "late_comment": sorted(t["key"] for team in digest_teams for t in truth[team]["done"]
                                         if t.get("late_comment"))},
        )
