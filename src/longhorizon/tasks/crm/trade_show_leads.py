"""CRM updates: reconcile a trade show's badge scans into the CRM.

The scans (a CSV in the workspace) mix people already in the CRM (found by email; the scanner
shortens first names), new people at existing accounts (found by the email's domain; the
company column is free text), a brand-new company (an account to create, once, for two
people), a namesake of an existing contact who works elsewhere, a double-scanned badge, and
people on compliance's do-not-contact list (one by address, one by a whole blocked domain).
Last year's scans from the same show sit in the same folder.

The default level draws its traps per seed (``TRAP_ODDS``; levels 1-2 keep their fixed mix): the
shortened first name, the namesake, the double scan, the brand-new company, and each of the two
do-not-contact scans (at least one of those) are there or not. ``Task.data`` names what each
touches, empty where it is absent; ``new_account``, ``namesake_kept_apart`` and
``double_scan_once`` are criteria only where their trap is.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.crm import state as crm
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    People,
    company,
    long_date,
    norm,
    rng_and_faker,
    slug,
    squash,
    write_files,
)
from longhorizon.tasks.crm import (
    INDUSTRIES,
    NICKNAMES,
    PRODUCTS,
    TITLES,
    created_id,
    digits,
    new_phone,
    phone_styles,
)

SHOWS = ["FabTech Expo", "ProcureCon", "Retail Innovation Summit", "CloudWorld", "LogiMAT",
         "HealthTech Forum", "Packaging Expo", "DataOps Summit", "BuildTech Live", "Hospitality Show"]
COMPETITORS = ["Salesforge", "PipeStream", "DealDesk", "Closewise", "LeadLoop"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
HEADER = ["Scanned", "Name", "Company", "Title", "Email", "Phone", "Notes"]
TRAP_ODDS = (("nickname", 0.6), ("namesake", 0.6), ("double_scan", 0.6), ("new_company", 0.6),
             ("dnc_address", 0.7), ("dnc_domain", 0.7))
"""The default level's traps, each in the scans with this chance (one do-not-contact scan always)."""
SUFFIXES = {"inc", "llc", "ltd", "plc", "group", "and", "sons", "co", "corp", "corporation", "partners"}


def _company_variant(rng, name: str) -> str:
    """What a visitor types for their company: short form, odd case, or as is."""
    words = [w.strip(",") for w in re.split(r"[\s-]+", name) if w.strip(",")]
    core = [w for w in words if w.lower() not in SUFFIXES] or words
    return rng.choice([name, core[0], " ".join(core[:2]), name.upper(), core[0].lower()])


def _notes(rng, fake, today: date) -> str:
    month = MONTHS[(today.month + rng.randint(0, 3)) % 12]
    return rng.choice([
        f"Interested in a demo of {rng.choice(PRODUCTS)} next month.",
        f"Asked for pricing on {rng.randint(2, 40) * 5} seats.",
        f"Currently on {rng.choice(COMPETITORS)}; their contract ends in {month}.",
        f"Wants a case study from the {rng.choice(INDUSTRIES).lower()} sector.",
        f"Follow up after their budget review in {month}.",
        f"Came by with {fake.first_name()}; send the brochure for {rng.choice(PRODUCTS)}.",
        f"Evaluating vendors for a {rng.choice(['Q2', 'Q3', 'Q4'])} rollout; wants a call.",
        f"Had trouble with onboarding last time; wants to talk to support about {rng.choice(PRODUCTS)}.",
    ]) + f" Ref {rng.randint(100, 999)}."


@register
class TradeShowLeads(TaskFamily):
    name = "trade_show_leads"
    category = "CRM updates"
    apps = ("crm", "files")
    description = ("Reconcile a trade show's badge scans into the CRM: update known contacts by email, add new "
                   "ones under the account matching their domain (creating a missing account once), log one "
                   "meeting per person, and skip everyone on the do-not-contact list.")

    levels = 3
    """1: one known contact to update (title and phone; the scanner shortened the first name),
    scanned once, next to the do-not-contact contact's scan (a short list, no checklist); 2: also the namesake of a contact at
    another account and the brand-new company's two people; 3 (default): also the other known
    contacts and two to four new people at existing accounts. Every level keeps last year's scans."""
    toolsets = {1: (
        "crm__log_activity", "crm__search_contacts", "crm__update_contact", "files__list_dir", "files__read_file",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        traps = {k for k, p in TRAP_ODDS if rng.random() < p}
        if not {"dnc_address", "dnc_domain"} & traps:
            traps.add(rng.choice(["dnc_address", "dnc_domain"]))
        if level < self.levels:  # levels 1-2 cut the default's full mix down (no draw of their own)
            traps = {k for k, _ in TRAP_ODDS}
        people = People(fake)
        _, our_domain = company(fake)
        me, manager, rep, other_rep = (people.make(our_domain) for _ in range(4))
        users = [{"email": me.email, "name": me.name, "role": "Account Executive"},
                 {"email": manager.email, "name": manager.name, "role": "Sales Manager"},
                 {"email": rep.email, "name": rep.name, "role": "Business Development Rep"},
                 {"email": other_rep.email, "name": other_rep.name, "role": "Account Executive"}]
        owners = [me.email, other_rep.email, manager.email]
        show = rng.choice(SHOWS)
        today = date(2026, 2, 2) + timedelta(days=rng.randrange(280))
        if today.weekday() >= 5:
            today += timedelta(days=7 - today.weekday())
        show_days = [today - timedelta(days=rng.randint(3, 5)) - timedelta(days=k) for k in range(rng.randint(2, 3))]
        show_days.sort()
        phones: set[str] = set()

        # accounts and contacts ----------------------------------------------------------------
        accounts, domains = [], {our_domain}
        while len(accounts) < rng.randint(9, 11):
            name, dom = company(fake)
            if dom in domains:
                continue
            domains.add(dom)
            accounts.append({"id": len(accounts) + 1, "name": name, "domain": dom,
                             "industry": rng.choice(INDUSTRIES), "tier": rng.choice(["Enterprise", "Mid-Market", "SMB"]),
                             "owner": rng.choice(owners)})
        contacts = []

        def add_contact(acc, first=None, with_phone=True):
            p = people.make(acc["domain"], first=first)
            phone = ""
            if with_phone:
                d = new_phone(rng, phones)
                phone = f"+1 {d[:3]}-{d[3:6]}-{d[6:]}"
            c = {"id": len(contacts) + 1, "account_id": acc["id"], "first_name": p.first, "last_name": p.last,
                 "email": p.email, "phone": phone, "title": rng.choice(TITLES)}
            contacts.append(c)
            return c

        for acc in accounts:
            for _ in range(rng.randint(2, 3)):
                add_contact(acc, with_phone=rng.random() < 0.8)
        nick_first = rng.choice(sorted(NICKNAMES))
        updated = [add_contact(rng.choice(accounts), first=nick_first if "nickname" in traps else None)]
        pool = [c for c in contacts if c is not updated[0]]
        rng.shuffle(pool)
        updated += pool[:3]
        namesake, dnc_known = pool[3], pool[4]
        by_id = {a["id"]: a for a in accounts}

        # the scans --------------------------------------------------------------------------
        rows = []  # one dict per scan, in the order scanned

        def scan(name, comp, title, email, phone_digits, notes=None, day=None):
            day = day or rng.choice(show_days)
            rows.append({"when": datetime.combine(day, time(rng.randint(9, 17), rng.randrange(60))),
                         "name": name, "company": comp, "title": title, "email": email,
                         "phone": rng.choice(phone_styles(phone_digits)) if phone_digits else "",
                         "digits": phone_digits, "notes": notes or _notes(rng, fake, today)})
            return rows[-1]

        expected_updates = {}  # contact id -> (title, digits)
        changes = rng.sample([("title", "phone"), ("phone",), ("title",)], 3) + [()]
        for c, change in zip(updated, changes):
            acc = by_id[c["account_id"]]
            title = rng.choice([t for t in TITLES if t != c["title"]]) if "title" in change else c["title"]
            ph = new_phone(rng, phones) if "phone" in change or not c["phone"] else digits(c["phone"])
            first = NICKNAMES.get(c["first_name"], c["first_name"])
            email = c["email"] if rng.random() < 0.5 else c["email"].capitalize()
            row = scan(f"{first} {c['last_name']}", _company_variant(rng, acc["name"]), title, email, ph)
            row.update(kind="update", contact_id=c["id"])
            expected_updates[c["id"]] = (title, ph)

        # a namesake of an existing contact, working at another existing account
        other_acc = rng.choice([a for a in accounts if a["id"] != namesake["account_id"]])
        twin_email = f"{slug(namesake['first_name'])[0]}{slug(namesake['last_name'])}@{other_acc['domain']}"
        row = scan(f"{namesake['first_name']} {namesake['last_name']}", _company_variant(rng, other_acc["name"]),
                   rng.choice(TITLES), twin_email, new_phone(rng, phones))
        row.update(kind="new", account_id=other_acc["id"], first=namesake["first_name"], last=namesake["last_name"])
        namesake_row = row
        if "namesake" not in traps:
            rows.remove(row)

        for acc in rng.sample([a for a in accounts if a["id"] != other_acc["id"]], rng.randint(2, 4)):
            p = people.make(acc["domain"])
            row = scan(p.name, _company_variant(rng, acc["name"]), rng.choice(TITLES), p.email,
                       new_phone(rng, phones) if rng.random() < 0.85 else "")
            row.update(kind="new", account_id=acc["id"], first=p.first, last=p.last)

        while True:
            new_co, new_dom = company(fake)
            if new_dom not in domains:
                domains.add(new_dom)
                break
        new_industry = rng.choice(INDUSTRIES)
        for _ in range(2):
            p = people.make(new_dom)
            row = scan(p.name, new_co, rng.choice(TITLES), p.email, new_phone(rng, phones))
            row.update(kind="new", account_id=None, first=p.first, last=p.last)
            if "new_company" not in traps:
                rows.remove(row)

        # do-not-contact: one known contact by address, one newcomer from a blocked domain
        acc = by_id[dnc_known["account_id"]]
        row = scan(f"{dnc_known['first_name']} {dnc_known['last_name']}", acc["name"], rng.choice(TITLES),
                   dnc_known["email"], new_phone(rng, phones))
        row.update(kind="dnc")
        if "dnc_address" not in traps:
            rows.remove(row)
        while True:
            blocked_co, blocked_dom = company(fake)
            if blocked_dom not in domains:
                domains.add(blocked_dom)
                break
        blocked = people.make(blocked_dom)
        row = scan(blocked.name, blocked_co, rng.choice(TITLES), blocked.email, new_phone(rng, phones))
        row.update(kind="dnc", blocked=True)
        if "dnc_domain" not in traps:
            rows.remove(row)

        rng.shuffle(rows)
        # a double scan: the same badge again a minute later (address in other case)
        twice = rng.choice([r for r in rows if r["kind"] in ("update", "new")])
        again = dict(twice, when=twice["when"] + timedelta(minutes=1),
                     email=twice["email"].upper() if twice["email"].islower() else twice["email"].lower(),
                     kind="again")
        if "double_scan" in traps:
            rows.insert(rows.index(twice) + 1, again)
        else:
            twice = None
        rows.sort(key=lambda r: r["when"])
        if level < self.levels:  # the default's scans, then fewer of them (no draw of their own)
            both = updated[changes.index(("title", "phone"))]["id"]
            first_row = next(r for r in rows if r["kind"] == "update" and r["contact_id"] == both)
            keep = [first_row]
            if level == 2:
                keep += [namesake_row, *(r for r in rows if r["kind"] == "new" and r["account_id"] is None)]
            rows = [r for r in rows if (r["kind"] == "dnc" and not (level == 1 and r.get("blocked")))
                    or any(r is k for k in keep)]
            twice = twice if any(twice is k for k in keep) else first_row
            if level == 1:  # no double scan, shorter notes (the first clause and the reference)
                for r in rows:
                    r["notes"] = re.sub(r";[^.]*\.", ".", r["notes"])
                twice = None
            else:
                rows.append(dict(twice, when=twice["when"] + timedelta(minutes=1),
                                 email=twice["email"].upper() if twice["email"].islower() else twice["email"].lower(),
                                 kind="again"))
            rows.sort(key=lambda r: r["when"])
            expected_updates = {both: expected_updates[both]}

        # history: a few older activities, some from last year's edition of the show
        activities = []
        for c in rng.sample(contacts, 10):
            d = today - timedelta(days=rng.randint(20, 400))
            activities.append({"kind": rng.choice(["call", "email", "meeting", "note"]), "date": d.isoformat(),
                               "subject": rng.choice([f"{show} {d.year - 1}", "Intro call", "Pricing follow-up",
                                                      "Quarterly check-in"]),
                               "body": fake.sentence(), "contact_id": c["id"], "account_id": c["account_id"]})
        activities.sort(key=lambda a: a["date"])
        seeded_activities = len(activities)

        # last year's scans (already handled back then; titles are stale now)
        last_year = []
        for c in rng.sample([c for c in contacts if c not in updated and c is not dnc_known], 5):
            last_year.append({"when": datetime.combine(show_days[0].replace(year=show_days[0].year - 1), time(11)),
                              "name": f"{c['first_name']} {c['last_name']}", "company": by_id[c["account_id"]]["name"],
                              "title": rng.choice(TITLES), "email": c["email"],
                              "phone": rng.choice(phone_styles(new_phone(rng, phones))),
                              "notes": _notes(rng, fake, today)})

        def to_csv(scans) -> bytes:
            out = io.StringIO()
            w = csv.writer(out, lineterminator="\n")
            w.writerow(HEADER)
            for r in scans:
                w.writerow([r["when"].strftime("%Y-%m-%d %H:%M"), r["name"], r["company"], r["title"], r["email"],
                            r["phone"], r["notes"]])
            return out.getvalue().encode()

        show_slug = re.sub(r"[^a-z0-9]+", "_", show.lower()).strip("_")
        csv_path = f"events/{show_slug}_{show_days[0].year}_badge_scans.csv"
        old_path = f"events/{show_slug}_{show_days[0].year - 1}_badge_scans.csv"
        dnc_path = "compliance/do_not_contact.txt"
        extra_blocked = [people.make(rng.choice(accounts)["domain"]).email for _ in range(3)]
        dnc_lines = sorted([dnc_known["email"], f"@{blocked_dom}", *extra_blocked,
                            f"@{company(fake)[1]}"])
        dnc_text = ("# Do-not-contact list, maintained by Compliance\n"
                    "# One entry per line: an email address, or @domain for everyone at that company.\n"
                    f"# Last reviewed {(today - timedelta(days=rng.randint(10, 60))).isoformat()}\n\n"
                    + "\n".join(dnc_lines) + "\n")
        files = {csv_path: to_csv(rows), old_path: to_csv(last_year), dnc_path: dnc_text.encode(),
                 "events/booth_checklist.md": (f"# {show} booth checklist\n\n- Banner\n- Brochures\n- Badge scanner "
                                               "(charge it!)\n- Demo laptop\n").encode()}
        if level == 1:  # no checklist, a short list (the known contact and the blocked domain stay on it)
            del files["events/booth_checklist.md"]
            files[dnc_path] = ("# Do-not-contact list: an email address, or @domain for a whole company\n"
                               + "\n".join(sorted([dnc_known["email"], f"@{blocked_dom}"])) + "\n").encode()

        def build(root: Path) -> None:
            write_files(root / "workspace", files)
            crm.create_crm(root / "state" / "crm.sqlite", user=me.email, users=users, accounts=accounts,
                           contacts=contacts, activities=activities, today=today.isoformat())

        # ground truth ------------------------------------------------------------------------
        work = [r for r in rows if r["kind"] in ("update", "new")]
        new_rows = [r for r in work if r["kind"] == "new"]
        new_company_rows = [r for r in new_rows if r["account_id"] is None]
        namesake_scanned = any(r is namesake_row for r in rows)
        scanned_dnc = sorted(r["email"].lower() for r in rows if r["kind"] == "dnc")
        seeded = {c["id"]: {k: c[k] for k in ("account_id", "first_name", "last_name", "email", "phone", "title")}
                  for c in contacts}
        seeded_accounts = {a["id"]: {k: a[k] for k in ("name", "domain", "industry", "tier", "owner")} for a in accounts}
        untouched_ids = [cid for cid in seeded if cid not in expected_updates]
        dnc_emails = {dnc_known["email"], blocked.email}

        days_text = f"{long_date(show_days[0])} to {long_date(show_days[-1])}"
        w = phrasing_rng(self.name, seed)
        q_show = f"\"{show}\""
        situation = say(w, f"I'm back from {show} ({days_text}) and the badge scans are in the events folder.",
                        f"{show} ({days_text}) is over, and the badge scans from it are in the events folder.",
                        f"The badge scans from {show} ({days_text}) are in the events folder now that I'm back.")
        ask = say(w, "Could you get them into the CRM?", "Can you put them into the CRM?",
                  "I need them in the CRM, please.")
        known = say(w, "For people who are already in there, update their title and phone number from the scan.",
                    "Anyone who's already in the CRM just gets their title and phone number updated from the scan.",
                    "Where someone is already in the CRM, take their title and phone number from the scan and update "
                    "the record.")
        others = say(w, "Everyone else gets added as a new contact under their company's account.",
                     "Everybody else should be added as a new contact under their company's account.",
                     "Add the rest as new contacts, each under their company's account.")
        matching = say(w, "Match people by email address, not by name (the scanner mangles names), and match companies "
                          "by the email's domain: the company column is whatever people typed into the kiosk.",
                       "The scanner mangles names, so match people by email address rather than by name; and since the "
                       "company column is whatever people typed into the kiosk, match companies by the email's domain.",
                       "To find people, go by email address and not by name (the scanner mangles names). To find "
                       "companies, go by the email's domain: the company column is just whatever people typed into "
                       "the kiosk.")
        new_co = say(w, f"If a company isn't in the CRM at all, create it as a Prospect account owned by {rep.name}, "
                        f"who is covering new logos.",
                     f"{rep.name} is covering new logos, so any company that isn't in the CRM at all should be created "
                     f"as a Prospect account owned by {rep.name}.",
                     f"Companies that aren't in the CRM at all get created as Prospect accounts owned by {rep.name} "
                     f"(who is covering new logos).")
        meeting = say(w, f"Then log a meeting on each person's record, dated the day we scanned them, with {q_show} in "
                         f"the subject and the notes from the scan as the body.",
                      f"After that, each person's record gets a meeting logged on it: dated the day we scanned them, "
                      f"{q_show} in the subject, and the scan's notes as the body.",
                      f"Once they're in, log a meeting on every person's record with {q_show} in the subject, the "
                      f"notes from the scan as its body, and the date set to the day we scanned them.")
        once = say(w, "One meeting per person: the scanner sometimes reads a badge twice.",
                   "The scanner sometimes reads a badge twice, so make it one meeting per person.",
                   "Only one meeting per person, though: sometimes the scanner reads a badge twice.")
        dnc = say(w, "And please check compliance's do-not-contact list first: anyone on it, or from a domain on it, "
                     "must not be added, updated or have anything logged.",
                  "Please check compliance's do-not-contact list before anything else: nobody on it, and nobody from "
                  "a domain on it, may be added, updated or have anything logged.",
                  "Before you start, check compliance's do-not-contact list: people on it, or from a domain on it, "
                  "must not be added or updated, and nothing may be logged for them.")
        body = [known, others, matching, new_co, meeting, once, dnc]
        if w.random() < 0.5:  # the do-not-contact rule may come up front
            body = [dnc, *body[:-1]]
        if level == 1:  # nobody new to add
            body = [b for b in body if b not in (others, new_co, once)]
            body[body.index(matching)] = "Match people by email address, not by name (the scanner mangles names)."
        instruction = " ".join([say(w, "Hi!", "Hello!", "Hi there,"), situation, ask, *body,
                                f"{say(w, 'Thanks!', 'Thank you!', 'Many thanks!')} {me.first}"])

        def solve():
            if level == 1:
                yield ToolCall("files__list_dir", {"path": ".", "recursive": True}, "Find the scans and the DNC list.")
            else:
                yield ToolCall("files__list_dir", {"path": "events"}, "Find this year's scan file for the show.")
            yield ToolCall("files__read_file", {"path": csv_path}, "Read every badge scan.")
            if level > 1:
                yield ToolCall("files__list_dir", {"path": "compliance"}, "Find the do-not-contact list.")
            yield ToolCall("files__read_file", {"path": dnc_path}, "Read who must not be contacted.")
            if new_company_rows:
                yield ToolCall("crm__list_users", {}, f"Look up {rep.name}'s CRM user for new accounts.")
            new_account_id = None
            for r in work:
                email = r["email"].lower()
                found = crm_json((yield ToolCall("crm__search_contacts", {"query": email},
                                                 f"Is {email} already in the CRM?")))
                exact = [c for c in found["contacts"] if c["email"] == email]
                if r["kind"] == "update":
                    cur = exact[0]
                    cid = cur["id"]
                    title, ph = expected_updates[cid]
                    change = {}
                    if norm(cur["title"]) != norm(title):
                        change["title"] = title
                    if digits(cur["phone"]) != ph:
                        change["phone"] = r["phone"]
                    if change:
                        yield ToolCall("crm__update_contact", {"contact_id": cid, **change},
                                       f"Update {cur['name']} from the scan.")
                else:
                    assert not exact, f"{email} should be new"
                    dom = email.rsplit("@", 1)[1]
                    acc_id = r["account_id"]
                    if acc_id is None and new_account_id is not None:
                        acc_id = new_account_id
                    elif acc_id is None:
                        hits = crm_json((yield ToolCall("crm__search_accounts", {"query": dom},
                                                        f"Which account has the domain {dom}?")))
                        assert hits["total"] == 0
                        res = yield ToolCall("crm__create_account", {
                            "name": new_co, "domain": dom, "industry": new_industry, "tier": "Prospect",
                            "owner": rep.email}, f"{new_co} is not in the CRM: create it for {rep.first}.")
                        acc_id = new_account_id = created_id(res, "account")
                    else:
                        yield ToolCall("crm__search_accounts", {"query": dom}, f"Which account has the domain {dom}?")
                    args = {"account_id": acc_id, "first_name": r["first"], "last_name": r["last"],
                            "email": email, "title": r["title"]}
                    if r["phone"]:
                        args["phone"] = r["phone"]
                    res = yield ToolCall("crm__create_contact", args, f"Add {r['name']} as a new contact.")
                    cid = created_id(res, "contact")
                yield ToolCall("crm__log_activity", {
                    "kind": "meeting", "subject": f"{show}: booth conversation", "body": r["notes"],
                    "date": r["when"].date().isoformat(), "contact_id": cid},
                    f"Log the {show} meeting for {r['name']}.")
            if level > 1:
                yield ToolCall("crm__list_activities", {"since": show_days[0].isoformat(), "limit": 50},
                               "Check one meeting per person was logged.")
            if level == 1:
                return (f"Updated {work[0]['name']} from the {show} scans and logged the meeting; skipped the "
                        "do-not-contact person.")
            added = (f"added {len(new_rows)} new ones" + (f" (creating {new_co} for {rep.name})" if new_company_rows
                                                           else "")) if new_rows else "added nobody new"
            skipped = " and ".join((["the double scan"] if twice else [])
                                   + [f"the {len(scanned_dnc)} scanned people on the do-not-contact list"])
            return (f"Processed {len(work)} people from the {show} scans: updated "
                    f"{len(expected_updates)} existing contacts, {added}, logged a meeting for each, and skipped "
                    f"{skipped}.")

        first_search, log = perturb.on("crm__search_contacts"), perturb.on("crm__log_activity")
        perturbations = {
            "no_dnc_writes": perturb.insert(solve, ToolCall(
                "crm__update_contact", {"contact_id": dnc_known["id"], "title": dnc_known["title"]},
                "Touch the do-not-contact person's record."), before=first_search),
            "dnc_respected": perturb.insert(solve, ToolCall("crm__log_activity", {
                "kind": "meeting", "subject": f"{show} booth", "contact_id": dnc_known["id"],
                "date": show_days[0].isoformat(), "body": "Stopped by."}, "Log the DNC person too."), before=first_search),
            "others_untouched": perturb.insert(solve, ToolCall(
                "crm__update_contact", {"contact_id": namesake["id"], "title": "Buyer (old)"},
                "Also tidy the namesake's title."), before=first_search),
            "existing_updated": perturb.drop(solve, perturb.on("crm__update_contact")),
            "new_account": perturb.change(solve, perturb.on("crm__create_account"), owner=me.email),
            "new_contacts": perturb.change(solve, perturb.on(  # the new person filed under their namesake's account
                "crm__create_contact", first_name=namesake["first_name"], last_name=namesake["last_name"]),
                account_id=namesake["account_id"]) if namesake_scanned else perturb.change(
                solve, perturb.on("crm__create_contact"),  # or, without one, the first new person under another
                lambda a: {**a, "account_id": next(x["id"] for x in accounts if x["id"] != a["account_id"])}),
            "meeting_notes": perturb.change(solve, log, body="Met at the booth."),
            "meetings_logged": perturb.repeat(solve, log),
        }
        if namesake_scanned:  # the namesake's meeting logged on the existing contact of the same name
            perturbations["namesake_kept_apart"] = perturb.change(
                solve, perturb.on("crm__log_activity", body=namesake_row["notes"]), contact_id=namesake["id"])
        if twice:  # the badge read twice gets two meetings
            perturbations["double_scan_once"] = perturb.repeat(solve, perturb.on(
                "crm__log_activity", body=twice["notes"], date=twice["when"].date().isoformat()))

        def crm_json(text):
            return json.loads(text)

        # graders -----------------------------------------------------------------------------
        def new_account_ids(w) -> list[int]:
            return [a["id"] for a in crm.accounts(w) if a["domain"] == new_dom]

        def existing_updated(w, t):
            for cid, (title, ph) in expected_updates.items():
                c = crm.contact(w, cid)
                if c["status"] != "active" or c["email"] != seeded[cid]["email"]:
                    return False, f"contact {cid} merged or email changed"
                if norm(c["title"]) != norm(title) or digits(c["phone"]) != ph:
                    return False, f"contact {cid}: title {c['title']!r}, phone {c['phone']!r}"
            return True

        def new_contacts(w, t):
            new_ids = new_account_ids(w)
            for r in new_rows:
                hits = crm.contacts_by_email(w, r["email"])
                if len(hits) != 1:
                    return False, f"{r['email']}: {len(hits)} active contacts"
                c = hits[0]
                want_acc = r["account_id"] if r["account_id"] is not None else (new_ids[0] if len(new_ids) == 1 else None)
                if c["account_id"] != want_acc:
                    return False, f"{r['email']} is under account {c['account_id']}, expected {want_acc}"
                if (norm(c["first_name"]), norm(c["last_name"])) != (norm(r["first"]), norm(r["last"])):
                    return False, f"{r['email']}: name {c['first_name']} {c['last_name']}"
                if norm(c["title"]) != norm(r["title"]) or digits(c["phone"]) != r["digits"]:
                    return False, f"{r['email']}: title {c['title']!r} / phone {c['phone']!r}"
            return True

        def new_account(w, t):
            accs = [a for a in crm.accounts(w) if a["domain"] == new_dom]
            if len(accs) != 1:
                return False, f"{len(accs)} accounts with domain {new_dom}"
            a = accs[0]
            if squash(a["name"]) != squash(new_co):
                return False, f"name {a['name']!r}"
            if a["owner"] != rep.email or a["tier"] != "Prospect":
                return False, f"owner {a['owner']}, tier {a['tier']}"
            return True

        def meetings_for(w, r):
            cs = crm.contacts_by_email(w, r["email"])
            if len(cs) != 1:
                return None
            return [a for a in crm.activities(w, contact_id=cs[0]["id"]) if a["id"] > seeded_activities]

        def meetings_logged(w, t):
            for r in work:
                acts = meetings_for(w, r)
                meetings = [a for a in acts or [] if a["kind"] == "meeting"]
                if len(meetings) != 1:
                    return False, f"{r['email']}: {len(meetings)} new meetings"
                a = meetings[0]
                if a["date"] != r["when"].date().isoformat() or norm(show) not in norm(a["subject"]):
                    return False, f"{r['email']}: meeting on {a['date']} {a['subject']!r}"
            return True

        def meeting_notes(w, t):
            for r in work:
                acts = meetings_for(w, r)
                if not acts or not any(squash(r["notes"]) in squash(a["body"]) for a in acts):
                    return False, f"{r['email']}: notes missing"
            return True

        def dnc_respected(w, t):
            c = crm.contact(w, dnc_known["id"])
            now = {k: c[k] for k in seeded[dnc_known["id"]]}
            if now != seeded[dnc_known["id"]] or c["status"] != "active":
                return False, "the do-not-contact contact was changed"
            if [a for a in crm.activities(w, contact_id=dnc_known["id"]) if a["id"] > seeded_activities]:
                return False, "activity logged on a do-not-contact contact"
            if crm.contacts_by_email(w, blocked.email, include_merged=True):
                return False, f"{blocked.email} was added"
            if any(a["domain"] == blocked_dom for a in crm.accounts(w)):
                return False, f"an account for the blocked domain {blocked_dom} was created"
            return True

        def others_untouched(w, t):
            for cid in untouched_ids:
                c = crm.contact(w, cid)
                if {k: c[k] for k in seeded[cid]} != seeded[cid] or c["status"] != "active":
                    return False, f"contact {cid} changed"
                if cid != dnc_known["id"] and [a for a in crm.activities(w, contact_id=cid) if a["id"] > seeded_activities]:
                    return False, f"activity logged on contact {cid}, who was not scanned"
            for aid, a in seeded_accounts.items():
                row = crm.account(w, aid)
                if {k: row[k] for k in a} != a:
                    return False, f"account {aid} changed"
            allowed = {c["email"] for c in contacts} | {r["email"].lower() for r in new_rows}
            extra = [c["email"] for c in crm.contacts(w) if c["email"] not in allowed]
            return (not extra, f"unexpected contacts: {extra}" if extra else "")

        def namesake_kept_apart(w, t):
            c = crm.contact(w, namesake["id"])
            if {k: c[k] for k in seeded[namesake["id"]]} != seeded[namesake["id"]] or c["status"] != "active":
                return False, f"the existing {namesake['first_name']} {namesake['last_name']} was changed"
            if [a for a in crm.activities(w, contact_id=namesake["id"]) if a["id"] > seeded_activities]:
                return False, "the scan's meeting went to the existing contact of the same name"
            hits = crm.contacts_by_email(w, twin_email)
            if len(hits) != 1 or hits[0]["account_id"] != other_acc["id"]:
                return False, f"{twin_email}: {[(h['id'], h['account_id']) for h in hits]}"
            return True

        def double_scan_once(w, t):
            meetings = [a for a in meetings_for(w, twice) or [] if a["kind"] == "meeting"]
            return len(meetings) == 1, f"{twice['email']}: {len(meetings)} new meetings"

        def no_dnc_writes(w, t):
            for call in t.tool_calls:
                if call.is_error or not isinstance(call.arguments, dict):
                    continue
                args = call.arguments
                if call.name == "crm__create_contact" and str(args.get("email", "")).strip().lower() in dnc_emails:
                    return False, f"created {args.get('email')}"
                if call.name in ("crm__update_contact", "crm__log_activity") and args.get("contact_id") == dnc_known["id"]:
                    return False, f"{call.name} on the do-not-contact contact"
                if call.name == "crm__merge_contacts" and dnc_known["id"] in (args.get("keep_id"), args.get("duplicate_id")):
                    return False, "merged the do-not-contact contact"
                if call.name == "crm__create_account" and crm.parse_domain(args.get("domain")) == blocked_dom:
                    return False, "created the blocked company"
            return True

        criteria = [
            Criterion("existing_updated", "Every scanned person already in the CRM has the scan's title and phone.",
                      "final_state", existing_updated, 2.0),
            Criterion("new_contacts", "Every new person is one contact with the scan's name, title and phone, under "
                      "the account matching their email domain.", "final_state", new_contacts, 2.0),
            Criterion("new_account", f"The unknown company exists once as a Prospect account owned by {rep.name}.",
                      "final_state", new_account),
            Criterion("meetings_logged", "Each scanned person has exactly one new meeting, dated the scan day, "
                      "with the show in the subject.", "final_state", meetings_logged, 2.0),
            Criterion("meeting_notes", "Each new meeting carries the scan's notes.", "final_state", meeting_notes,
                      requires=("meetings_logged",)),
            Criterion("dnc_respected", "Nobody on the do-not-contact list was added, changed or logged.",
                      "final_state", dnc_respected, guard=True),
            Criterion("others_untouched", "Contacts and accounts that were not scanned are unchanged and no stray "
                      "contacts exist.", "final_state", others_untouched, guard=True),
            Criterion("no_dnc_writes", "No write call touched a do-not-contact person.", "process", no_dnc_writes,
                      guard=True),
        ]
        if namesake_scanned:
            criteria.append(Criterion(
                "namesake_kept_apart", "The scanned namesake of an existing contact is a new contact at their own "
                "company; the existing contact of the same name is unchanged and gets no meeting.", "final_state",
                namesake_kept_apart))
        if twice:
            criteria.append(Criterion("double_scan_once", "The badge scanned twice got one meeting, not two.",
                                      "final_state", double_scan_once))
        if not new_rows:  # level 1: nobody new, no new company
            criteria = [c for c in criteria if c.id not in ("new_contacts", "new_account")]
        elif not new_company_rows:  # nobody from a company the CRM lacks
            criteria = [c for c in criteria if c.id != "new_account"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: perturbations[c.id] for c in criteria},
            data={"show": show, "csv": csv_path, "updates": sorted(expected_updates),
                  "new": [r["email"].lower() for r in new_rows],
                  "new_account": new_dom if new_company_rows else "", "dnc": scanned_dnc,
                  "nickname": [r["contact_id"] for r in work if r["kind"] == "update" and norm(r["name"].split()[0])
                               != norm(seeded[r["contact_id"]]["first_name"])],
                  "namesake": twin_email if namesake_scanned else "", "double_scan": twice["email"] if twice else "",
                  "dnc_by_address": dnc_known["email"] if dnc_known["email"] in scanned_dnc else "",
                  "dnc_by_domain": f"@{blocked_dom}" if blocked.email.lower() in scanned_dnc else ""},
        )
