"""Document review: bring an internal policy up to date from the committee's approved change notes.

The travel and expense policy (a real .docx) is out of date. The committee secretary's mail lists
the approved changes (an earlier "proposal" mail in the thread has other figures): a new meal
allowance (the old figure also appears, correctly, as the taxi limit), a new hotel cap for major
cities only, a renamed booking portal, a new policy owner (whose predecessor shares a surname
with the travel-desk contact, who stays), a withdrawn section (a similar optional section stays),
and a new version line. The agent saves a new version, edits only those paragraphs, adds a
"Change log" section at the end, reads it back and mails it to the Legal reviewer. Everything
else must come through word for word, and the current file must stay as it is.

Traps beside the proposal mail, each drawn per seed (``TRAP_ODDS``, at least one; level 1 keeps
the taxi limit): the taxi limit carrying the old meal figure (else a figure of its own), the
travel-desk contact sharing the old owner's surname (level 3), and a later mail from the
secretary correcting one approved figure (meal or hotel, levels 2-3). ``Task.data`` names each
(``taxi_shares_meal``, ``desk_namesake``, ``corrected``; empty when absent).
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from longhorizon.apps.docs.state import build_document, document_bytes, norm, read_blocks
from longhorizon.apps.mail import state as mail
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.kit import files as files_kit, perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    People,
    company,
    long_date,
    mails_sent,
    parse_json,
    rng_and_faker,
    slug,
)
from longhorizon.tasks.documents import Sources, find_dates, find_numbers, last_write_index
from longhorizon.tasks.phrasing import phrasing_rng, say

PORTALS = ["TripDesk", "GoTravel", "Navigo", "JetSet Pro", "Wayfare"]
NEW_PORTALS = ["Voyagr", "TravelHub", "Skyway", "Roamly", "Tripwise"]
OWNER_ROLES = ["Head of Finance Operations", "Director of People Operations", "Chief Financial Officer",
               "Head of Procurement", "VP Finance"]
APPROVERS = ["Finance Director", "department head", "Chief Operating Officer"]
OPTIONAL = {
    "loyalty": ("Loyalty programmes", [
        "Employees may keep frequent-flyer miles and hotel points earned on business travel.",
        "Points may not be used for upgrades charged to {company}.",
    ]),
    "personal": ("Combining personal travel", [
        "Employees may add personal days to a business trip if the fare does not increase.",
        "Any extra cost of personal days, including hotel nights, is paid by the employee.",
    ]),
}
EXTRA_TAGS = {"adv": "p:booking:1", "submit": "p:approvals:2", "trip": "p:approvals:1"}
EXTRA_NOTES = {"adv": "Book travel at least {new} days before departure (was {old}).",
               "submit": "Expense reports are due within {new} days of returning (was {old}).",
               "trip": "Trips costing more than ${new:,} need approval before booking (was ${old:,})."}
EXTRA_PHRASES = {"adv": "at least {} days", "submit": "within {} days", "trip": "more than ${:,}"}
EXTRA_LOG = {"adv": "Booking lead time: {old} to {new} days.",
             "submit": "Expense report deadline: {old} to {new} days.",
             "trip": "Trip approval threshold: ${old:,} to ${new:,}."}


TRAP_ODDS = (("taxi", 0.6), ("namesake", 0.6), ("correction", 0.45))
"""Each trap in the instance with this chance (one drawn when none is)."""
TAXI_OWN = [30, 35, 40, 45]
"""The taxi limit when it is not the old meal figure (below every meal figure)."""
CORRECTION = ("Sorry, one correction to my notes from this morning: I mistyped the {what}. The committee "
              "approved {right}, not {wrong}. Everything else stands.")

ASKED = {1: {"meal", "version"}, 2: {"meal", "hotel", "portal", "version", "log"}}
"""The approved changes below the top level (the default has them all, the owner, a withdrawn
section, the odd extra figure and the change log too)."""
ALL = {"meal", "hotel", "portal", "owner", "withdrawn", "extra", "version", "log"}
NEEDS = {"portal_renamed": "portal", "owner_updated": "owner", "section_withdrawn": "withdrawn", "change_log": "log"}
"""The change a criterion grades (the others grade every level)."""


def _long(d: dt.date) -> str:
    return f"{d.day} {d.strftime('%B %Y')}"


def _anchor(text: str) -> str:
    """The longest literal stretch of a template paragraph: finds the paragraph whatever its values."""
    parts = re.split(r"\{[a-z_]+(?::[^}]*)?\}", text)
    return max(parts, key=len).strip()


def _count(text: str, phrase: str) -> int:
    return len(re.findall(r"(?<![\w])" + re.escape(phrase) + r"(?![\w])", text))


@register
class PolicyRedline(TaskFamily):
    name = "policy_document_redline"
    category = "document review"
    apps = ("docs", "mail")
    description = (
        "Apply the committee's approved change notes to an internal policy .docx in a new version: figures, "
        "portal and owner names, version line, a withdrawn section, and a change log, leaving every other "
        "paragraph word for word; then mail it to the Legal reviewer."
    )

    levels = 3
    """1: the meal allowance (the taxi limit has the same figure) and the version line, read back,
    mailed, in a short policy (its header, Purpose and Allowances only); 2: also the major-city hotel cap, the renamed portal and a change log; 3 (default):
    also the new owner (the travel desk shares the old one's surname), a withdrawn section (a
    similar one stays) and any other changed figures."""
    toolsets = {1: (
        "docs__copy_document", "docs__read_document", "docs__replace_text", "docs__set_paragraph",
        "mail__read_message", "mail__search_messages", "mail__send_message",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        asked = ALL if level == self.levels else ASKED[level]
        rng, fake = rng_and_faker(seed, self.name)
        traps = {k for k, odds in TRAP_ODDS if rng.random() < odds}
        traps = traps or {rng.choice([k for k, _ in TRAP_ODDS])}
        if level == 1:  # the meal allowance next to the taxi limit with the same figure
            traps = {"taxi"}
        if "owner" not in asked:
            traps.discard("namesake")
        people = People(fake)
        company_name, domain = company(fake)
        short = company_name.split()[0].strip(",")
        me, secretary, reviewer = people.make(domain), people.make(domain), people.make(domain)
        old_owner, new_owner = people.make(domain), people.make(domain)
        desk = people.make(domain, last=old_owner.last if "namesake" in traps else None)
        while "namesake" not in traps and desk.last == old_owner.last:
            desk = people.make(domain)
        old_role, new_role = rng.sample(OWNER_ROLES, 2)
        approver = rng.choice(APPROVERS)
        old_portal, new_portal = rng.choice(PORTALS), rng.choice(NEW_PORTALS)
        major, minor = rng.randint(2, 4), rng.randint(0, 3)
        old_ver, new_ver = f"{major}.{minor}", f"{major}.{minor + 1}"
        old_eff = dt.date(2025, rng.randint(1, 12), 1)
        new_eff = dt.date(2026, rng.randint(3, 12), 1)
        approved_on = new_eff - dt.timedelta(days=rng.randint(20, 45))
        old_meal = rng.choice([50, 55, 60, 65])
        new_meal = old_meal + rng.choice([10, 15, 20])
        old_hotel = rng.choice([220, 240, 250, 260])
        new_hotel = old_hotel + rng.choice([20, 25, 30, 40])
        hotel_other = rng.choice([150, 160, 170, 180])
        withdrawn, kept_opt = rng.sample(sorted(OPTIONAL), 2)
        values = {
            "company": short, "approver": approver, "hours": rng.choice([6, 8]), "hotel_other": hotel_other,
            "taxi": old_meal if "taxi" in traps else rng.choice(TAXI_OWN), "desk": desk.name, "desk_email": desk.email,
        }
        old_vals = {"portal": old_portal, "meal": old_meal, "hotel": old_hotel, "owner": old_owner.name,
                    "owner_role": old_role, "owner_email": old_owner.email, "version": old_ver, "eff": _long(old_eff)}
        new_vals = {"portal": new_portal, "meal": new_meal, "hotel": new_hotel, "owner": new_owner.name,
                    "owner_role": new_role, "owner_email": new_owner.email, "version": new_ver, "eff": _long(new_eff)}
        # some approved changes only some years: booking lead time, report deadline, approval threshold
        extra = {"adv": (rng.choice([7, 10, 14]), 7), "submit": (rng.choice([30, 45, 60]), -15),
                 "trip": (rng.choice([1500, 2000, 2500]), 500)}
        extra_changes = sorted(rng.sample(sorted(extra), rng.randint(0, 2)))
        if level < self.levels:  # the same draws as the default, then fewer changes
            extra_changes = []
            new_vals.update({k: old_vals[k] for k in ("hotel", "portal") if k not in asked})
            new_vals.update({k: old_vals[k] for k in ("owner", "owner_role", "owner_email")})
        for key, (value, step) in extra.items():
            old_vals[key] = value
            new_vals[key] = value + step if key in extra_changes else value

        # the policy: (style, template, tag); optional sections in a fixed order
        template = [
            ("Title", "{company} Travel and Expense Policy", "title"),
            ("Normal", "Version {version} - effective {eff}", "version"),
            ("Normal", "Policy owner: {owner}, {owner_role}", "owner"),
            ("Heading 1", "Purpose", "h:purpose"),
            ("Normal", "This policy explains how employees of {company} book business travel and claim expenses.",
             "p:purpose:1"),
            ("Normal", "It applies to all employees and contractors travelling on company business.", "p:purpose:2"),
            ("Heading 1", "Booking travel", "h:booking"),
            ("Normal", "Book all flights and hotels through the {portal} portal at least {adv} days before departure.",
             "p:booking:1"),
            ("Normal", "Bookings made outside {portal} are reimbursed only with written approval from the "
             "{approver}.", "p:booking:2"),
            ("Normal", "Flights under {hours} hours are booked in economy class.", "p:booking:3"),
            ("Heading 1", "Allowances", "h:allow"),
            ("Normal", "The daily meal allowance while travelling is ${meal}.", "p:allow:meal"),
            ("Normal", "Hotel rooms may cost up to ${hotel} per night in major cities and ${hotel_other} per night "
             "elsewhere.", "p:allow:hotel"),
            ("Normal", "Taxis and rideshares are reimbursed up to ${taxi} per trip.", "p:allow:taxi"),
        ]
        for key in sorted(OPTIONAL):
            title, paras = OPTIONAL[key]
            template.append(("Heading 1", title, f"h:{key}"))
            template += [("Normal", p, f"p:{key}:{j}") for j, p in enumerate(paras, start=1)]
        template += [
            ("Heading 1", "Approvals", "h:approvals"),
            ("Normal", "Trips costing more than ${trip:,} need the {approver}'s approval before booking.",
             "p:approvals:1"),
            ("Normal", "Submit expense reports within {submit} days of returning.", "p:approvals:2"),
            ("Heading 1", "Contacts", "h:contacts"),
            ("Normal", "Questions about this policy go to {owner} ({owner_email}).", "p:contacts:1"),
            ("Normal", "The travel desk is run by {desk} ({desk_email}); call them for urgent changes while "
             "travelling.", "p:contacts:2"),
        ]
        if level == 1:  # the header, Purpose and Allowances: the meal allowance next to the taxi limit
            template = [x for x in template if x[2].split(":")[1:2] in ([], ["purpose"], ["allow"])]

        def render(vals: dict, drop: str | None) -> list[tuple[str, str, str]]:
            out = []
            for style, t, tag in template:
                if drop and tag.split(":")[1:2] == [drop]:
                    continue
                out.append((style, t.format(**values, **vals), tag))
            return out

        source_blocks = render(old_vals, None)
        final_blocks = render(new_vals, withdrawn if "withdrawn" in asked else None)
        changed_tags = {"version", "owner", "p:booking:1", "p:booking:2", "p:allow:meal", "p:allow:hotel",
                        "p:contacts:1", *(EXTRA_TAGS[k] for k in extra_changes)}
        if level < self.levels:
            was = {tag: t for _, t, tag in source_blocks}
            changed_tags = {tag for _, t, tag in final_blocks if was[tag] != t}
        anchors = {tag: _anchor(t) for _, t, tag in template if not tag.startswith("h:") and tag != "title"}
        gone_tags = {tag for _, _, tag in source_blocks if tag.split(":")[1:2] == [withdrawn] and "withdrawn" in asked}

        folder = "policies"
        src = f"{folder}/travel_expense_policy_v{old_ver}.docx"
        dst = f"{folder}/travel_expense_policy_v{new_ver}.docx"
        old_copy = f"{folder}/archive/travel_expense_policy_v{major}.{minor - 1 if minor else 0}_old.docx"
        remote = f"{folder}/remote_work_policy_v2.docx"
        stipend_old, stipend_new = rng.choice([(400, 500), (500, 650), (300, 450)])

        def make() -> dict[str, bytes]:
            older = render({**old_vals, "meal": old_meal - 5, "hotel": old_hotel - 20,
                            "eff": _long(old_eff.replace(year=2024))}, None)
            return {
                src: document_bytes(build_document([(s, t) for s, t, _ in source_blocks],
                                                   title=f"{short} Travel and Expense Policy")),
                old_copy: document_bytes(build_document([(s, t) for s, t, _ in older], title="Superseded")),
                remote: document_bytes(build_document([
                    ("Title", f"{short} Remote Work Policy"), "Version 2.0 - effective 1 January 2025",
                    ("Heading 1", "Home office"), f"Employees receive a one-off home office stipend of ${stipend_old}.",
                    ("Heading 1", "Working hours"), "Core hours are 10:00 to 15:00 in the employee's time zone."],
                    title=f"{short} Remote Work Policy")),
            }

        sources = Sources(make)

        wd_title = OPTIONAL[withdrawn][0]
        # a later mail corrects one figure the notes mistyped (the notes show ``typo``)
        corrected = rng.choice(["meal", "hotel"]) if "correction" in traps else ""
        typo = {"meal": new_meal - 5, "hotel": new_hotel + 10}
        shown = {k: typo[k] if k == corrected else v for k, v in (("meal", new_meal), ("hotel", new_hotel))}
        changes = [
            ("meal", f"Daily meal allowance: ${old_meal} -> ${shown['meal']}. (The taxi limit stays at "
                     f"${values['taxi']}.)"),
            ("hotel", f"Hotel cap in major cities: ${old_hotel} -> ${shown['hotel']} per night. The cap elsewhere "
                      f"does not change."),
            ("portal", f"The booking portal is now called {new_portal} (it was {old_portal})."),
            ("owner", f"Policy owner: {new_owner.name}, {new_role} ({new_owner.email}) takes over from "
                      f"{old_owner.name}, including as the contact for questions."),
            ("withdrawn", f"The \"{wd_title}\" section is withdrawn: delete it, heading and text."),
            *(("extra", EXTRA_NOTES[k].format(old=old_vals[k], new=new_vals[k])) for k in extra_changes),
            ("version", f"Version {new_ver}, effective {_long(new_eff)}."),
        ]
        changes = [text for key, text in changes if key in asked]
        notes = (
            f"Hi {me.first},\n\nThe policy committee approved the following changes to the travel and expense "
            f"policy on {long_date(approved_on)}. Please make them in a new version: start from {src} (which must "
            f"stay as it is) and save it as {dst}.\n\n"
            + "".join(f"{n}. {text}\n" for n, text in enumerate(changes, start=1)) + "\n"
            + (f"Please add a \"Change log\" section at the end listing these changes, one line each, and leave "
               if "log" in asked else "Please leave ")
            + f"everything else word for word. When it's ready, send the new version to {reviewer.name} in Legal "
            f"({reviewer.email}) for review.\n\nThanks,\n{secretary.first}\nPolicy committee secretary"
        )
        proposal = (
            f"Hi all,\n\nFor discussion at the next committee meeting (draft, nothing approved yet):\n"
            f"- meal allowance ${new_meal + 10}\n- hotel cap ${new_hotel + 30} in major cities and "
            f"${hotel_other + 20} elsewhere\n- move to {new_portal}\n- drop both the \"{OPTIONAL['loyalty'][0]}\" "
            f"and \"{OPTIONAL['personal'][0]}\" sections\n\n{secretary.first}"
        )
        day0 = approved_on + dt.timedelta(days=rng.randint(1, 4))
        inbox = [
            {"folder": "Inbox", "sender": secretary.email, "sender_name": secretary.name, "to": [me.email],
             "subject": "Travel & expense policy - proposed changes", "body": proposal,
             "date": f"{(approved_on - dt.timedelta(days=12)).isoformat()}T10:30:00", "is_read": True},
            {"folder": "Inbox", "sender": secretary.email, "sender_name": secretary.name, "to": [me.email],
             "subject": f"Remote work policy - stipend ${stipend_new}",
             "body": f"FYI the home office stipend goes from ${stipend_old} to ${stipend_new}. I'll update "
                     f"{remote} myself next week, no action needed.\n\n{secretary.first}",
             "date": f"{(approved_on - dt.timedelta(days=3)).isoformat()}T16:05:00", "is_read": True},
            {"folder": "Inbox", "sender": secretary.email, "sender_name": secretary.name, "to": [me.email],
             "subject": f"Travel & expense policy v{new_ver} - approved changes", "body": notes,
             "date": f"{day0.isoformat()}T09:12:00"},
            {"folder": "Inbox", "sender": f"events@{slug(fake.company())}.example", "sender_name": "Travel Weekly",
             "to": [me.email], "subject": "10 ways to cut travel costs", "body": "Read our latest tips.",
             "date": f"{day0.isoformat()}T07:00:00"},
        ]
        notes_id = 3
        if corrected:
            what = {"meal": "daily meal allowance", "hotel": "major-city hotel cap"}[corrected]
            right, wrong = (f"${new_vals[corrected]}", f"${typo[corrected]}")
            inbox.append({
                "folder": "Inbox", "sender": secretary.email, "sender_name": secretary.name, "to": [me.email],
                "subject": f"Re: Travel & expense policy v{new_ver} - approved changes",
                "body": CORRECTION.format(what=what, right=right, wrong=wrong) + f"\n\n{secretary.first}",
                "date": f"{day0.isoformat()}T09:41:00"})

        def build(root: Path) -> None:
            sources.build(root)
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=inbox,
                                now=f"{day0.isoformat()}T10:00:00")

        w = phrasing_rng(self.name, seed)
        sent = say(w, f"{secretary.first} sent over the approved changes to the travel and expense policy.",
                   f"The approved changes to the travel and expense policy have come in from {secretary.first}.",
                   f"I've had the committee's approved changes to the travel and expense policy from "
                   f"{secretary.first}; they're in my inbox.",
                   f"{secretary.first}'s mail with the approved travel and expense policy changes just arrived.")
        ask = say(w, "Could you prepare the new version, give it a read-through once it's saved, and send it for "
                     "review as the mail asks?",
                  "Can you make the new version? Once it's saved, give it a read-through, then send it for review "
                  "the way the mail asks.",
                  "Please prepare the new version and, after saving it, give it a read-through before you send it "
                  "for review as the mail describes.",
                  "Would you put the new version together, read it through once it's saved, and then send it off "
                  "for review as requested in the mail?")
        instruction = " ".join([*([say(w, "Hi,", "Hello!", "Morning,")] if w.random() < 0.6 else []), sent, ask,
                                say(w, "Thanks!", "Thank you!", "Much appreciated.", "Cheers!")])
        d = {"src": src, "dst": dst, "old": old_vals, "new": new_vals, "withdrawn": withdrawn, "wd_title": wd_title,
             "extra_changes": extra_changes,
             "reviewer": reviewer.email, "secretary": secretary.email, "new_owner_email": new_owner.email,
             "notes_id": notes_id, "taxi": values["taxi"],
             "taxi_shares_meal": f"${old_meal}" if "taxi" in traps else "",
             "desk_namesake": desk.name if "namesake" in traps else "",
             "corrected": corrected, "typo": typo[corrected] if corrected else 0,
             "correction_id": len(inbox) if corrected else 0}
        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=_solver(d, asked, level == 1),
            criteria=[], data=d,
        )
        task.criteria = [c for c in _criteria(d, sources, source_blocks, final_blocks, changed_tags, anchors,
                                              gone_tags, kept_opt, asked) if NEEDS.get(c.id, "meal") in asked]
        flawed = _perturbations(d, asked, level == 1)
        task.perturbations = {c.id: flawed[c.id] for c in task.criteria}
        return task


# -- grading -----------------------------------------------------------------------------------------------


def _criteria(d, sources: Sources, source_blocks, final_blocks, changed_tags, anchors, gone_tags, kept_opt,
              asked=ALL):
    dst, old, new = d["dst"], d["old"], d["new"]
    untouched = [(s, t) for s, t, tag in final_blocks if tag not in changed_tags]
    final_by_tag = {tag: t for _, t, tag in final_blocks}
    headings = {norm(t) for s, t, _ in source_blocks if s.startswith("Heading")}
    new_eff = dt.datetime.strptime(new["eff"], "%d %B %Y").date()

    def split(world):
        """(body paragraphs, change-log blocks) of the new version; the log starts at its heading."""
        blocks = read_blocks(world.file(dst))
        at = [i for i, b in enumerate(blocks) if b["type"] == "paragraph" and b["style"].startswith("Heading")
              and "change log" in norm(b["text"])]
        cut = at[-1] if at else len(blocks)
        return [b for b in blocks[:cut] if b["type"] == "paragraph"], blocks[cut:], blocks

    def para(world, tag) -> list[str]:
        body, _, _ = split(world)
        return [b["text"] for b in body if anchors[tag] in b["text"]]

    def allowances(world, traj):
        meal, hotel = para(world, "p:allow:meal"), para(world, "p:allow:hotel")
        if len(meal) != 1 or len(hotel) != 1:
            return False, f"{len(meal)} meal / {len(hotel)} hotel paragraphs"
        m, h = find_numbers(meal[0]), find_numbers(hotel[0])
        ok = (m == [new["meal"]] and new["hotel"] in h and (old["hotel"] == new["hotel"] or old["hotel"] not in h)
              and len(h) == 2)
        if not ok:
            return False, f"meal {m}, hotel {h}"
        for key in d["extra_changes"]:
            got = para(world, EXTRA_TAGS[key])
            nums = find_numbers(got[0]) if len(got) == 1 else []
            if new[key] not in nums or old[key] in nums:
                return False, f"{key}: {got}"
        return True

    def portal(world, traj):
        _, _, blocks = split(world)
        text = "\n".join(b.get("text", "") for b in blocks)
        body, _, _ = split(world)
        body_text = "\n".join(b["text"] for b in body)
        o, n = _count(body_text, old["portal"]), _count(body_text, new["portal"])
        return o == 0 and n == 2 and _count(text, old["portal"]) <= 1, f"{old['portal']} {o}x, {new['portal']} {n}x"

    def owner(world, traj):
        line, contact = para(world, "owner"), para(world, "p:contacts:1")
        if len(line) != 1 or len(contact) != 1:
            return False, "owner line or contact paragraph missing"
        problems = []
        for text in (line[0], contact[0]):
            if new["owner"] not in text or old["owner"] in text:
                problems.append(f"{text!r}")
        if norm(new["owner_role"]) not in norm(line[0]):
            problems.append(f"role in {line[0]!r}")
        if new["owner_email"] not in contact[0] or old["owner_email"] in contact[0]:
            problems.append(f"email in {contact[0]!r}")
        return not problems, "; ".join(problems)

    def version(world, traj):
        body, _, _ = split(world)
        lines = [b["text"] for b in body if re.match(r"\s*version\b", b["text"], re.I)]
        if len(lines) != 1:
            return False, f"{len(lines)} version lines"
        t = lines[0]
        ok = (re.search(rf"(?<![\d.]){re.escape(new['version'])}(?![\d])", t) is not None
              and find_dates(t) == [new_eff])
        return ok, f"version line {t!r}"

    def section_gone(world, traj):
        body, _, _ = split(world)
        left = [b["text"] for b in body if norm(b["text"]) == norm(d["wd_title"])
                or any(anchors[tag] in b["text"] for tag in gone_tags if tag in anchors)]
        kept = [b for b in body if norm(b["text"]) == norm(final_by_tag[f"h:{kept_opt}"])]
        return not left and len(kept) == 1, f"still there: {left}; other optional section kept: {bool(kept)}"

    def change_log(world, traj):
        body, log, blocks = split(world)
        if not log:
            return False, "no Change log heading"
        if any(b["type"] == "paragraph" and b["style"].startswith("Heading") for b in log[1:]):
            return False, "the Change log is not the last section"
        entries = [b for b in log[1:] if (b["type"] == "paragraph" and b["text"].strip()) or b["type"] == "table"]
        text = "\n".join(b["text"] if b["type"] == "paragraph" else "\n".join(" | ".join(r) for r in b["rows"])
                         for b in log[1:])
        nums = find_numbers(text)
        missing = []
        if new["meal"] not in nums:
            missing.append("meal allowance")
        if new["hotel"] not in nums:
            missing.append("hotel cap")
        if new["portal"].lower() not in text.lower():
            missing.append("portal")
        if "owner" in asked and new["owner"].split()[-1].lower() not in text.lower():
            missing.append("owner")
        if "withdrawn" in asked and norm(d["wd_title"]).split()[0] not in norm(text):
            missing.append("withdrawn section")
        if new["version"] not in text:
            missing.append("version")
        missing += [key for key in d["extra_changes"] if new[key] not in nums]
        if len(entries) < 3 or missing:
            return False, f"{len(entries)} entries; not mentioned: {missing}"
        return True

    known = headings | {norm(t) for _, t, _ in source_blocks} | {norm(t) for _, t, _ in final_blocks}

    def accounted(text: str) -> bool:
        return any(a in text for a in anchors.values()) or norm(text) in known

    def rest_intact(world, traj):
        body, _, _ = split(world)
        stray = [b["text"] for b in body if b["text"].strip() and not accounted(b["text"])]
        if stray:
            return False, f"paragraphs that are not part of the policy: {stray}"
        it = iter(body)
        for style, text in untouched:
            for b in it:
                if b["style"] == style and norm(b["text"]) == norm(text):
                    break
            else:
                return False, f"changed or missing: {text!r}"
        return True

    kept, no_stray = files_kit.untouched(sources).check, files_kit.only_created(sources, allowed=[dst]).check

    def files_ok(world, traj):
        for ok, note in (kept(world, traj), no_stray(world, traj)):
            if not ok:
                return False, note
        return True, ""

    def reviewer_mail(world, traj):
        sent = [m for m in mail.sent_messages(world) if d["reviewer"] in m["to"]]
        if len(sent) != 1:
            return False, f"{len(sent)} mails to {d['reviewer']}"
        m = sent[0]
        docs = [a["name"] for a in m["attachments"] if a["name"].lower().endswith(".docx")]
        if not docs:
            return False, "no document attached"
        blocks = read_blocks(mail.attachment_path(world, m["id"], docs[0]))
        text = "\n".join(b.get("text", "") for b in blocks)
        ok = (f"${new['meal']}" in text and ("log" not in asked or any(
            b["type"] == "paragraph" and b["style"].startswith("Heading") and "change log" in norm(b["text"])
            for b in blocks)))
        return ok, "the attached document is not the updated version (new meal allowance, change log)"

    def mail_only_reviewer(world, traj):
        sends = mails_sent(traj)
        if len(sends) > 2:  # the review mail, and perhaps a note back to the secretary
            return False, f"{len(sends)} mails sent"
        for m in mail.sent_messages(world):
            extra = set(m["to"] + m["cc"]) - {d["reviewer"], d["secretary"]}
            if extra:
                return False, f"mail went to {sorted(extra)}"
        return True

    def read_back(world, traj):
        last = last_write_index(traj, dst)
        if last < 0:
            return False, "the new version was never written"
        reads = [c for c in traj.tool_calls[last + 1:] if not c.is_error and c.name == "docs__read_document"
                 and isinstance(c.arguments, dict) and str(c.arguments.get("path", "")).strip("/") == dst]
        return bool(reads), "no read of the new version after the last edit"

    return [
        Criterion("figures_updated", "the meal allowance, the major-city hotel cap (the cap elsewhere kept) and any "
                  "other figure the notes change carry the approved values", "final_state", allowances, 2.0),
        Criterion("portal_renamed", "the booking portal has its new name wherever the policy names it",
                  "final_state", portal, 1.0),
        Criterion("owner_updated", "the owner line and the contact paragraph name the new owner, role and address",
                  "final_state", owner, 1.0),
        Criterion("version_line", "the version line shows the new version and effective date", "final_state",
                  version, 1.0),
        Criterion("section_withdrawn", "the withdrawn section is gone, heading and text; the other optional "
                  "section stays", "final_state", section_gone, 1.0),
        Criterion("change_log", "a Change log section at the end lists every approved change", "final_state",
                  change_log, 1.0,
                  requires=("figures_updated",)),
        Criterion("reviewer_mail", "the reviewer got one mail with the updated version attached", "final_state",
                  reviewer_mail, 1.0,
                  requires=("figures_updated",)),
        Criterion("rest_intact", "every paragraph the notes don't touch (taxi limit, travel desk contact ...) is "
                  "word for word the same, in order, and nothing else was added", "final_state", rest_intact,
                  2.0, guard=True),
        Criterion("files_as_expected", "the current version and other documents are unchanged and were not "
                  "written; the new version is the only new file", "final_state", files_ok, 1.0, guard=True),
        Criterion("mail_only_reviewer", "mail only to the reviewer (and perhaps the secretary)", "process",
                  mail_only_reviewer, 1.0, guard=True),
        Criterion("final_read_through", "the new version was read back after the last edit", "process",
                  read_back, 1.0, guard=True),
    ]


# -- reference solution ------------------------------------------------------------------------------------


def _log_entries(d: dict, asked=ALL) -> list[str]:
    """The change log's entries, one per approved change (the solver appends them in this order)."""
    old, new = d["old"], d["new"]
    return [text for key, text in [
        ("version", f"Version {new['version']}, effective {new['eff']} (was {old['version']}, {old['eff']})."),
        ("meal", f"Daily meal allowance: ${old['meal']} to ${new['meal']}."),
        ("hotel", f"Hotel cap in major cities: ${old['hotel']} to ${new['hotel']} per night."),
        ("portal", f"Booking portal renamed from {old['portal']} to {new['portal']}."),
        ("owner", f"Policy owner: {new['owner']}, {new['owner_role']} (was {old['owner']})."),
        ("withdrawn", f"Section \"{d['wd_title']}\" withdrawn."),
        *(("extra", EXTRA_LOG[key].format(old=old[key], new=new[key])) for key in d["extra_changes"]),
    ] if key in asked]


def _solver(d: dict, asked=ALL, brief: bool = False):
    """Find and read the approved notes, read the policy, copy it, make each change (checking the
    shared figures and names with find_text), rewrite the version line, drop the withdrawn
    section, append the change log, check, read back and mail it to Legal. ``asked`` names the
    changes the notes make; ``brief`` (level 1) works from the one read of the policy, with no
    survey and no checks by search."""
    def run():
        src, dst, old, new = d["src"], d["dst"], d["old"], d["new"]
        yield ToolCall("mail__search_messages", {"query": "travel expense policy"}, "Find the change notes.")
        yield ToolCall("mail__read_message", {"message_id": d["notes_id"]}, "Read the approved changes.")
        if d["correction_id"]:
            yield ToolCall("mail__read_message", {"message_id": d["correction_id"]},
                           "The secretary's follow-up corrects one figure.")
        if not brief:
            yield ToolCall("docs__list_documents", {"folder": "policies"}, "See the policy documents.")
        doc = parse_json((yield ToolCall("docs__read_document", {"path": src}, "Read the current version in full.")))
        yield ToolCall("docs__copy_document", {"source": src, "path": dst},
                       "Start the new version; the current one stays as it is.")
        # 1. meal allowance, not the taxi limit with the same figure
        if brief:  # the paragraphs that carry the figure, from the read above
            hits = [b for b in doc["blocks"] if f"${old['meal']}" in b.get("text", "")]
        else:
            hits = parse_json((yield ToolCall("docs__find_text", {"path": dst, "query": f"${old['meal']}",
                                                                   "match_case": True},
                                              "Where does the old meal figure appear?")))["hits"]
        k = 1 + sum(h["text"].count(f"${old['meal']}") for h in hits[:next(
            i for i, h in enumerate(hits) if "meal allowance" in h["text"])])
        yield ToolCall("docs__replace_text", {"path": dst, "old": f"${old['meal']}", "new": f"${new['meal']}",
                                              "occurrence": k}, "Only the meal allowance, not the taxi limit.")
        # 2. hotel cap in major cities
        if "hotel" in asked:
            yield ToolCall("docs__replace_text", {"path": dst, "old": f"${old['hotel']} per night in major cities",
                                                  "new": f"${new['hotel']} per night in major cities"},
                           "Major-city hotel cap only.")
        for key in d["extra_changes"]:
            yield ToolCall("docs__replace_text", {"path": dst, "old": EXTRA_PHRASES[key].format(old[key]),
                                                  "new": EXTRA_PHRASES[key].format(new[key])}, f"Update {key}.")
        # 3. portal
        if "portal" in asked:
            yield ToolCall("docs__find_text", {"path": dst, "query": old["portal"]}, "Every mention of the old portal.")
            yield ToolCall("docs__replace_text", {"path": dst, "old": old["portal"], "new": new["portal"]},
                           "Rename the portal.")
        # 4. owner: name (owner line and contacts), role, address
        if "owner" in asked:
            yield ToolCall("docs__find_text", {"path": dst, "query": old["owner"]}, "Where the old owner is named.")
            yield ToolCall("docs__replace_text", {"path": dst, "old": old["owner"], "new": new["owner"]},
                           "New owner's name (full name only: the travel desk contact shares the surname).")
            yield ToolCall("docs__replace_text", {"path": dst, "old": old["owner_role"], "new": new["owner_role"]},
                           "New owner's role.")
            yield ToolCall("docs__replace_text", {"path": dst, "old": old["owner_email"],
                                                  "new": new["owner_email"]}, "New owner's address.")
        # 6. version line (block indexes are the source's until a section is deleted)
        if not brief:
            doc = parse_json((yield ToolCall("docs__read_document", {"path": dst}, "Find the version line and the "
                                             "withdrawn section.")))
        vline = next(b for b in doc["blocks"] if b.get("text", "").startswith("Version"))
        yield ToolCall("docs__set_paragraph", {"path": dst, "index": vline["index"],
                                               "text": f"Version {new['version']} - effective {new['eff']}"},
                       "New version and effective date.")
        # 5. withdrawn section: heading and its paragraphs
        if "withdrawn" in asked:
            at = next(b["index"] for b in doc["blocks"] if b.get("style") == "Heading 1" and b["text"] == d["wd_title"])
            n = 1
            for b in doc["blocks"][at + 1:]:
                if b.get("style", "").startswith("Heading"):
                    break
                n += 1
            for _ in range(n):
                yield ToolCall("docs__delete_paragraph", {"path": dst, "index": at}, f"Delete '{d['wd_title']}'.")
        # change log
        if "log" in asked:
            yield ToolCall("docs__append_paragraph", {"path": dst, "text": "Change log", "style": "Heading 1"},
                           "Start the change log.")
            for e in _log_entries(d, asked):
                yield ToolCall("docs__append_paragraph", {"path": dst, "text": e, "style": "List Bullet"},
                               "Log the change.")
        # verify
        checks = {"portal": old["portal"], "owner": old["owner"], "withdrawn": d["wd_title"]}
        for q in [] if brief else [q for key, q in checks.items() if key in asked]:
            yield ToolCall("docs__find_text", {"path": dst, "query": q}, f"Check no {q!r} is left.")
        yield ToolCall("docs__read_document", {"path": dst}, READ_THROUGH)
        yield ToolCall("mail__send_message", {
            "to": [d["reviewer"]], "cc": [d["secretary"]],
            "subject": f"Travel and expense policy v{new['version']} for review",
            "body": "Hi,\n\nAttached is the new version of the travel and expense policy with the committee's "
                    "approved changes; the change log at the end lists them. Could you review it?\n\nThanks",
            "attachments": [dst]}, "Send the new version to Legal.")
        return f"Saved {dst} with the approved changes and a change log, and sent it to Legal for review."
    return run


READ_THROUGH = "Final read-through of the new version."


def _perturbations(d: dict, asked=ALL, brief: bool = False) -> dict:
    """Each criterion's flawed solver: the solver with one small mistake in its calls."""
    solve, dst, old, new = _solver(d, asked, brief), d["dst"], d["old"], d["new"]

    def replace(what: str):
        return perturb.on("docs__replace_text", path=dst, old=what)

    read_through = perturb.noted("docs__read_document", READ_THROUGH)

    review = perturb.on("mail__send_message", to=[d["reviewer"]])
    late = set(_log_entries(d, asked)[3:])
    hotel_phrase = f"${old['hotel']} per night in major cities"
    if d["corrected"]:  # the figure as the notes mistyped it, not as the correction says
        figures = perturb.change(solve, replace(f"${old['meal']}" if d["corrected"] == "meal" else hotel_phrase),
                                 new=f"${d['typo']}" + ("" if d["corrected"] == "meal" else " per night in major cities"))
    else:  # the one figure left as it was (the hotel cap, where the notes change it)
        figures = perturb.drop(solve, replace(hotel_phrase) if "hotel" in asked else replace(f"${old['meal']}"))
    taxi_too = (perturb.change(solve, replace(f"${old['meal']}"), occurrence=None) if d["taxi_shares_meal"] else
                perturb.insert(solve, ToolCall("docs__replace_text", {
                    "path": dst, "old": f"${d['taxi']} per trip", "new": f"${new['meal']} per trip"},
                    "Taxis in line with meals."), before=read_through))
    return {
        "figures_updated": figures,
        "portal_renamed": perturb.change(solve, replace(old["portal"]), occurrence=1),
        "owner_updated": perturb.drop(solve, replace(old["owner_email"])),
        "version_line": perturb.change(solve, perturb.on("docs__set_paragraph", path=dst),
                                       text=f"Version {new['version']} - effective {old['eff']}"),
        "section_withdrawn": perturb.drop(solve, perturb.on("docs__delete_paragraph", path=dst), count=None),
        "change_log": perturb.drop(solve, lambda c: c.name == "docs__append_paragraph"
                                   and c.arguments["text"] in late, count=None),
        # sent for review straight after the copy, before any change
        "reviewer_mail": perturb.insert(perturb.drop(solve, review), ToolCall("mail__send_message", {
            "to": [d["reviewer"]], "subject": f"Travel and expense policy v{new['version']} for review",
            "body": "Please review the attached new version.", "attachments": [dst]}, "Send it for review."),
            after=perturb.on("docs__copy_document", path=dst)),
        "rest_intact": taxi_too,  # the taxi limit changed too
        "files_as_expected": perturb.insert(solve, ToolCall(
            "docs__copy_document", {"source": dst, "path": f"policies/archive/{dst.split('/')[-1]}"},
            "Keep a backup."), before=read_through),
        "mail_only_reviewer": perturb.insert(solve, ToolCall(
            "mail__send_message", {"to": [d["new_owner_email"]], "subject": "You own the travel policy",
                                   "body": "FYI, the new version names you as owner."}, "FYI."), after=review),
        "final_read_through": perturb.drop(solve, read_through),
    }
