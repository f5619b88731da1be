"""Mail triage: route a shared support inbox by the team's written rules.

The rules live in the workspace (an ordered list: first match wins) next to a key-accounts
file; only mail that arrived since the last run is routed. Key accounts go to a priority
folder and are forwarded to their account manager, even when they talk about invoices or
errors; automatic replies are filed first even when they quote an invoice; billing words
count in the subject or body, technical words only in the body, both as whole words ("debug"
is not "bug"); a look-alike domain is not a key account; one target folder already exists.
The run ends with a summary to the team lead.

Besides the auto-reply that quotes an invoice or an error (always there), the traps are drawn per
seed (``TRAP_ODDS``): a key account writing about an invoice, one reporting an error, the
look-alike domain, billing words in the body only, and "debug" (not "bug"). ``Task.data`` lists
the messages of each (the look-alike's domain), empty where it is absent; the look-alike has its
own criterion (``lookalike_not_priority``) only where it is there. Level 1 keeps the key-account
invoice, level 2 both key-account precedences.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.mail import state as mail
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import People, recipients, rng_and_faker, slug
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register

RULES = "support/routing-rules.md"
ACCOUNTS = "support/key-accounts.csv"
F_AUTO, F_PRIO, F_BILL, F_TECH = "Support/Auto-replies", "Support/Priority", "Support/Billing", "Support/Technical"
AUTO_PREFIXES = ("Automatic reply:", "Auto-Reply:", "Out of Office", "Undeliverable:")
BILLING_WORDS = ["invoice", "invoices", "refund", "billing", "charged", "payment"]
TECH_WORDS = ["error", "errors", "crash", "crashes", "bug", "bugs", "broken"]
INBOX = "Inbox"
TRAP_ODDS = (("key_invoice", 0.6), ("key_error", 0.6), ("lookalike", 0.6), ("body_billing", 0.6), ("debug", 0.6))
"""Each trap among the new mail with this chance (the auto-reply quoting an invoice or an error always)."""

BILLING = [
    ("Refund for order {n}", "Hi,\n\nI returned order {n} two weeks ago and still haven't received my refund. Can you check?\n\n{name}"),
    ("Question about my invoice", "Hello,\n\nInvoice {n} lists three seats but we only have two users. Could you correct it?\n\n{name}"),
    ("Charged twice this month", "Hi team,\n\nIt looks like I was charged twice for the March plan. Please help.\n\n{name}"),
    ("Update our card", "Hi,\n\nOur company card changed. How do I update the payment method on file?\n\n{name}"),
    ("VAT number on receipts", "Hello,\n\nCould you add our VAT number to the billing details? It is missing on the receipts.\n\n{name}"),
]
TECH = [
    ("App closes on startup", "Hi,\n\nSince yesterday's update the desktop app crashes as soon as I open it. Windows 11.\n\n{name}"),
    ("Login problem", "Hello,\n\nThe login page shows an error 'session expired' every time, even right after signing in.\n\n{name}"),
    ("Sync stopped", "Hi,\n\nCalendar sync is broken since Tuesday; nothing new shows up on my phone.\n\n{name}"),
    ("CSV export", "Hi,\n\nI think I found a bug: the CSV export drops every row after the 1000th.\n\n{name}"),
    ("Reports page", "Hello,\n\nThe reports page throws errors for any date range longer than a month.\n\n{name}"),
]
MIXED = [  # billing and technical words: billing comes first
    ("Payment page", "Hi,\n\nI get an error on the payment page when I try to upgrade. Card is fine elsewhere.\n\n{name}"),
]
OTHER = [
    ("Feature request: dark mode", "Hi,\n\nAny plans for a dark mode? My team works late and would love it.\n\n{name}"),
    ("Thanks!", "Just wanted to say thanks to Sam for the quick help yesterday.\n\n{name}"),
    ("Partnership enquiry", "Hello,\n\nWe run a small consultancy and would like to resell your product. Who can I talk to?\n\n{name}"),
    ("Adding a user", "Hi,\n\nHow do I add a new colleague to our workspace? I can't find the button.\n\n{name}"),
    ("Debug settings guide?", "Hi,\n\nIs there a guide for the debug settings in the admin panel? I'd like to turn on verbose logs.\n\n{name}"),
    ("Training session", "Hello,\n\nCould we book an onboarding session for five new starters next month?\n\n{name}"),
]
KEY_TOPICS = [
    ("Licence renewal for next year", "Hi,\n\nWe'd like to renew all {k} licences and add ten more. Can you send a quote?\n\n{name}"),
    ("Invoice {n} looks wrong", "Hello,\n\nInvoice {n} is billed in EUR but our contract is in USD. Please reissue it.\n\n{name}"),
    ("Export keeps failing", "Hi,\n\nOur nightly export fails with an error since the weekend. This blocks our finance close.\n\n{name}"),
    ("Quarterly review", "Hi,\n\nCan we set up our quarterly business review for next month?\n\n{name}"),
    ("SSO setup", "Hello,\n\nWe're rolling out SSO; who on your side can help us configure it?\n\n{name}"),
]
AUTO = [
    ("Automatic reply: Re: Your request {n}", "I'm out of the office until Monday with limited access to email. "
     "For invoice questions please contact our accounts team."),
    ("Out of Office: Re: Ticket {n}", "Thank you for your message. I am on leave and will reply when I'm back."),
    ("Undeliverable: Your invoice copy", "Delivery has failed to these recipients or groups: the address could "
     "not be found. Original subject: Your invoice copy"),
    ("Auto-Reply: Re: Order {n} update", "This mailbox is not monitored. For errors in your order, please use "
     "the customer portal."),
]


def _has(words: list[str], text: str) -> bool:
    low = text.lower()
    return any(re.search(rf"\b{re.escape(w)}\b", low) for w in words)


def route(msg: dict, key_domains: set[str], *, substring: bool = False, suffix_domains: bool = False,
          subject_only_billing: bool = False, skip_auto: bool = False) -> str:
    """The folder a message belongs in under the rules (the flags are the mistakes perturbations make)."""
    subject, body = msg["subject"], msg["body"]
    if not skip_auto and subject.startswith(AUTO_PREFIXES):
        return F_AUTO
    domain = msg["sender"].rsplit("@", 1)[1].lower()
    if domain in key_domains or (suffix_domains and any(domain.startswith(d.split(".")[0]) for d in key_domains)):
        return F_PRIO

    def has(words, text):
        return any(w in text.lower() for w in words) if substring else _has(words, text)

    if has(BILLING_WORDS, subject) or (not subject_only_billing and has(BILLING_WORDS, body)):
        return F_BILL
    if has(TECH_WORDS, body):
        return F_TECH
    return INBOX


@register
class SharedInboxRouting(TaskFamily):
    name = "shared_inbox_routing"
    category = "mail triage"
    apps = ("mail", "files")
    description = ("Route a shared support inbox by ordered written rules (auto-replies, key accounts forwarded to "
                   "their managers, billing, technical, rest), only mail since the last run, then report counts.")

    levels = 3
    """1: one new message, a key account writing about an invoice (priority before billing,
    forwarded to its manager; its folder exists, and the sender alone decides), next to one from
    before the last run, with the rules said briefly; 2: six or seven new ones,
    one per trap (the auto-reply quoting an invoice, both key-account precedences, the
    look-alike domain, body-only billing words, "debug" is not "bug"), all older mail kept;
    3 (default): twenty-odd. Every level ends with the summary to the team lead."""
    toolsets = {1: (  # level 1 routes its one key-account message by the sender alone (nothing to open)
        "files__read_file", "mail__forward", "mail__list_messages", "mail__move_message",  # into a folder there
        "mail__send_message",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        people = People(fake)
        brand = fake.last_name()
        domain = f"{slug(brand)}{rng.choice(['app', 'hq', 'soft'])}.com"
        lead = people.make(domain)
        today = date(2026, 1, 7) + timedelta(days=rng.randrange(320))
        if today.weekday() >= 5:
            today += timedelta(days=7 - today.weekday())
        last_run = datetime.combine(today - timedelta(days=rng.randint(2, 4)), time(8, 0))
        now = datetime.combine(today, time(9, 15))

        # key accounts, each with a manager; one has a look-alike domain out there
        accounts = []
        used = {domain}
        for _ in range(rng.randint(3, 4)):
            while True:
                name = fake.company().replace(",", "")
                d = f"{slug(name.split()[0])}.com"
                if d not in used and len(slug(name.split()[0])) > 3:
                    used.add(d)
                    break
            am = people.make(domain)
            accounts.append({"company": name, "domain": d, "am": am, "tier": rng.choice(["Gold", "Platinum"])})
        key_domains = {a["domain"] for a in accounts}
        lookalike_acc = rng.choice(accounts)
        lookalike = lookalike_acc["domain"].replace(".com", rng.choice(["-group.com", ".co", "-online.com"]))
        traps = {kind for kind, p in TRAP_ODDS if rng.random() < p}
        if level < self.levels:  # the lower levels keep the key-account precedence (level 1 the invoice)
            traps |= {"key_invoice"} if level == 1 else {"key_invoice", "key_error"}
        key_topics = [t for t, kind in zip(KEY_TOPICS, ["", "key_invoice", "key_error", "", ""]) if kind in traps | {""}]
        billing_pool = BILLING if "body_billing" in traps else [b for b in BILLING if _has(BILLING_WORDS, b[0])]
        other_pool = OTHER if "debug" in traps else [o for o in OTHER if not o[0].startswith("Debug")]

        def when_new() -> str:
            span = int((now - last_run).total_seconds() // 60) - 10
            return (last_run + timedelta(minutes=rng.randint(5, span))).isoformat()

        def when_old() -> str:
            return (last_run - timedelta(minutes=rng.randint(30, 60 * 24 * 6))).isoformat()

        def customer(dom: str | None = None):
            p = people.make(dom or f"{slug(fake.last_name())}{rng.choice(['', 'co', 'ltd'])}.{rng.choice(['com', 'net', 'io'])}")
            return p

        def fill(text: str, name: str) -> str:
            return text.format(n=rng.randint(10000, 99999), name=name, k=rng.randint(20, 400))

        msgs: list[dict] = []

        def add(subject: str, body: str, sender: str, sender_name: str, date_: str, kind: str = "") -> None:
            msgs.append({"folder": INBOX, "sender": sender, "sender_name": sender_name, "subject": subject,
                         "body": body, "date": date_, "to": [f"support@{domain}"], "kind": kind})

        for subj, body in rng.sample(AUTO, 3):
            if subj.startswith("Undeliverable"):
                add(subj, body, f"mailer-daemon@{slug(fake.last_name())}.net", "Mail Delivery System", when_new())
            else:
                p = customer()
                add(fill(subj, p.name), body, p.email, p.name, when_new())
        for acc in accounts:
            for subj, body in rng.sample(key_topics, 1 if rng.random() < 0.6 else 2):
                p = customer(acc["domain"])
                add(fill(subj, p.name), fill(body, p.first), p.email, p.name, when_new())
        # make sure a key account writes about an invoice and one about an error (precedence)
        for (subj, body), kind in ((KEY_TOPICS[1], "key_invoice"), (KEY_TOPICS[2], "key_error")):
            if kind not in traps:
                continue
            acc = rng.choice(accounts)
            p = customer(acc["domain"])
            add(fill(subj, p.name), fill(body, p.first), p.email, p.name, when_new(), kind)
        if "lookalike" in traps:
            p = customer(lookalike)
            add("Invoice copy please", f"Hi,\n\nCould you resend last month's invoice? Our accounts team lost it.\n\n"
                f"{p.first}", p.email, p.name, when_new(), "lookalike")
        for pool, k in ((billing_pool, rng.randint(3, 4)), (TECH, rng.randint(3, 4)), (MIXED, 1),
                        (other_pool, rng.randint(3, 4))):
            picked = rng.sample(pool, min(k, len(pool)))
            if pool is billing_pool and "body_billing" in traps and all(_has(BILLING_WORDS, b[0]) for b in picked):
                picked[-1] = rng.choice([b for b in BILLING if not _has(BILLING_WORDS, b[0])])
            for subj, body in picked:
                p = customer()
                add(fill(subj, p.name), fill(body, p.first), p.email, p.name, when_new(),
                    {id(billing_pool): "billing", id(TECH): "tech", id(MIXED): "mixed", id(other_pool): "other"}[id(pool)])
        if "debug" in traps and not any(m["subject"].startswith("Debug") for m in msgs):
            p = customer()
            add(OTHER[4][0], fill(OTHER[4][1], p.first), p.email, p.name, when_new(), "other")
        # already handled last time: stays where it is, whatever it says
        for pool in (BILLING, TECH, other_pool, KEY_TOPICS):
            subj, body = rng.choice(pool)
            dom = rng.choice(accounts)["domain"] if pool is KEY_TOPICS else None
            p = customer(dom)
            add(fill(subj, p.name), fill(body, p.first), p.email, p.name, when_old(),
                "old_key" if pool is KEY_TOPICS else "old")
        old_auto = rng.choice(AUTO[:2])
        p = customer()
        add(fill(old_auto[0], p.name), old_auto[1], p.email, p.name, when_old())
        msgs.sort(key=lambda m: m["date"])
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
            m["is_read"] = m["date"] < last_run.isoformat() or rng.random() < 0.15
            m["new"] = m["date"] > last_run.isoformat()
        existing = rng.choice([F_BILL, F_TECH])
        if level == 1:  # the folder its one message goes to is the one already there
            existing = F_PRIO
        folders = ["Inbox", "Sent", "Archive", existing]
        am_of = {a["domain"]: a["am"] for a in accounts}
        expected = {m["id"]: (route(m, key_domains) if m["new"] else INBOX) for m in msgs}
        # the traps must be live in this world
        assert any(expected[m["id"]] == F_AUTO and _has(BILLING_WORDS + TECH_WORDS, m["body"]) for m in msgs)
        if level < self.levels:  # the same draws as the default, then fewer messages
            msgs = _fewer(msgs, level, key_domains)
            expected = {m["id"]: (route(m, key_domains) if m["new"] else INBOX) for m in msgs}
        prio = [i for i, f in expected.items() if f == F_PRIO]
        new_msgs = [m for m in msgs if m["new"]]
        drawn = {  # the drawn traps, as the new messages that carry them (empty where absent)
            "key_invoice": [m["id"] for m in new_msgs if expected[m["id"]] == F_PRIO
                            and _has(BILLING_WORDS, m["subject"] + "\n" + m["body"])],
            "key_error": [m["id"] for m in new_msgs if expected[m["id"]] == F_PRIO and _has(TECH_WORDS, m["body"])],
            "lookalike_msgs": [m["id"] for m in new_msgs if m["kind"] == "lookalike"],
            "body_billing": [m["id"] for m in new_msgs if expected[m["id"]] == F_BILL
                             and not _has(BILLING_WORDS, m["subject"])],
            "debug": [m["id"] for m in new_msgs if m["subject"].startswith("Debug")],
        }
        look_ids = drawn["lookalike_msgs"]
        counts = {f: sum(1 for v in expected.values() if v == f) for f in (F_PRIO, F_BILL, F_TECH, F_AUTO)}
        new_inbox = sum(1 for m in msgs if m["new"] and expected[m["id"]] == INBOX)

        rules_text = _rules_brief(lead, last_run) if level == 1 else _rules(lead, last_run)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        listed = accounts
        if level == 1:  # only the accounts its two messages come from, without the tier
            senders = {m["sender"].rsplit("@", 1)[1] for m in msgs}
            listed = [a for a in accounts if a["domain"] in senders]
            w.writerow(["company", "domain", "account_manager", "manager_email"])
        else:
            w.writerow(["company", "domain", "account_manager", "manager_email", "tier"])
        for a in sorted(listed, key=lambda a: a["company"]):
            w.writerow([a["company"], a["domain"], a["am"].name, a["am"].email, a["tier"]][:5 if level > 1 else 4])
        accounts_csv = buf.getvalue()

        def build(root: Path) -> None:
            ws = root / "workspace" / "support"
            ws.mkdir(parents=True)
            (ws / "routing-rules.md").write_text(rules_text, encoding="utf-8")
            (ws / "key-accounts.csv").write_text(accounts_csv, encoding="utf-8")
            mail.create_mailbox(root / "state" / "mail.sqlite", f"support@{domain}", f"{brand} Support",
                                folders=folders, messages=[{k: v for k, v in m.items() if k not in ("new", "kind")}
                                                           for m in msgs],
                                now=now.isoformat())

        wording = phrasing_rng(self.name, seed)
        ask = say(wording, "Morning! Could you do the routing run on the support inbox?",
                  "Hi! Please do the routing run on the support inbox this morning.",
                  "Good morning. The support inbox needs its routing run; could you do it?",
                  "Morning, can you take care of the routing run on the support inbox?")
        rules = say(wording, f"The rules are in {RULES} and the key accounts in {ACCOUNTS}; follow them to the "
                             f"letter, including the summary for {lead.first} at the end.",
                    f"Follow the rules in {RULES} and the key accounts list in {ACCOUNTS} to the letter, down to "
                    f"the summary for {lead.first} at the end.",
                    f"Everything you need is in {RULES} (the rules) and {ACCOUNTS} (the key accounts): stick to "
                    f"them to the letter, and that includes the summary for {lead.first} at the end.")
        quiet = say(wording, "Don't answer any customers yourself today.",
                    "Please don't reply to any customers yourself today.",
                    "No answering customers yourself today, please.")
        thanks = say(wording, "Thanks!", "Thank you!", "Cheers!")
        instruction = " ".join([ask, *in_some_order(wording, [rules, quiet]), thanks])

        # -- oracle ------------------------------------------------------------------------------
        def move(i: int, folder: str) -> ToolCall:
            return ToolCall("mail__move_message", {"message_id": i, "folder": folder},
                            f"Route message {i} to {folder}.")

        def forward(i: int, am) -> ToolCall:
            return ToolCall("mail__forward", {"message_id": i, "to": [am.email],
                                              "body": f"Hi {am.first}, a message from one of your key accounts "
                                                      f"came into the support inbox; over to you."},
                            "Forward it to the account manager.")

        def summary(c: dict[str, int]) -> ToolCall:
            body = (f"Hi {lead.first},\n\nRouting run since {last_run:%Y-%m-%d %H:%M}:\n"
                    + "".join(f"- {f.split('/')[-1]}: {n}\n" for f, n in c.items())
                    + f"- left in Inbox: {new_inbox}\n") if level == 1 else (f"Hi {lead.first},\n\nRouting run done for mail since {last_run:%Y-%m-%d %H:%M}:\n"
                    + "".join(f"- {f}: {n}\n" for f, n in c.items())
                    + f"- left in Inbox: {new_inbox}\n\nKey-account messages were forwarded to their managers.\n")
            return ToolCall("mail__send_message", {"to": [lead.email],
                                                   "subject": f"Support routing {today.isoformat()}", "body": body},
                            "Send the summary to the team lead.")

        def solve():
            yield ToolCall("files__read_file", {"path": RULES}, "Read the routing rules.")
            yield ToolCall("files__read_file", {"path": ACCOUNTS}, "Read the key accounts and their managers.")
            if level > 1:
                yield ToolCall("mail__list_folders", {}, "See which folders exist already.")
            for off in range(0, len(msgs), 25):
                yield ToolCall("mail__list_messages", {"folder": INBOX, "limit": 25, "offset": off},
                               "List the inbox (newest first).")
            for m in sorted(msgs, key=lambda x: x["date"], reverse=True):
                if m["new"] and level > 1:  # level 1's one new message is a key account's: its sender decides
                    yield ToolCall("mail__read_message", {"message_id": m["id"]}, f"Read message {m['id']}.")
            for f in (F_AUTO, F_PRIO, F_BILL, F_TECH):
                if f != existing and f in expected.values():
                    yield ToolCall("mail__create_folder", {"name": f}, f"Create {f}.")
            for m in msgs:
                if expected[m["id"]] != INBOX:
                    yield move(m["id"], expected[m["id"]])
                if expected[m["id"]] == F_PRIO:
                    yield forward(m["id"], am_of[m["sender"].rsplit("@", 1)[1]])
            yield summary(counts)
            if level > 1:
                yield ToolCall("mail__list_folders", {}, "Check the folder counts.")
            return (f"Routed {sum(v != INBOX for v in expected.values())} new messages ("
                    + ", ".join(f"{f.split('/')[-1]} {n}" for f, n in counts.items())
                    + f"); {new_inbox} stay in the inbox. Key-account mail was forwarded to the managers.")

        def moving(i: int):
            return perturb.on("mail__move_message", message_id=i)

        to_lead = perturb.on("mail__send_message", to=[lead.email])

        def misrouted(folder: str, **mistake):
            """The first new message that ``route`` with ``mistake`` sends into or out of ``folder``
            goes where the mistake says (a level without one leaves the folder's first in the Inbox)."""
            m = next((m for m in msgs if m["new"] and route(m, key_domains, **mistake) != expected[m["id"]]
                      and folder in (expected[m["id"]], route(m, key_domains, **mistake))), None)
            if m is None:
                return perturb.drop(solve, moving(min(i for i, f in expected.items() if f == folder)))
            i, to = m["id"], route(m, key_domains, **mistake)
            dom = m["sender"].rsplit("@", 1)[1]
            calls = ([move(i, to)] if to != INBOX else []) + ([forward(i, next(
                a["am"] for a in accounts if dom.startswith(a["domain"].split(".")[0])))] if to == F_PRIO else [])
            if expected[i] == INBOX:
                return perturb.insert(solve, *calls, before=to_lead)
            return perturb.replace(solve, moving(i), lambda call: calls)

        old_key = next(m for m in msgs if m["kind"] == "old_key")
        customer_msg = next((x for x in msgs if x["new"] and expected[x["id"]] == F_BILL), None) or next(
            x for x in msgs if x["new"])
        flawed = {
            "auto_replies": lambda: misrouted(F_AUTO, skip_auto=True),
            "lookalike_not_priority": lambda: misrouted(F_PRIO, suffix_domains=True),
            "priority": lambda: misrouted(F_PRIO, suffix_domains=True),
            "billing": lambda: misrouted(F_BILL, subject_only_billing=True),
            "technical": lambda: misrouted(F_TECH, substring=True),
            "inbox_rest": lambda: perturb.insert(solve, move(old_key["id"], F_PRIO), before=to_lead),
            "forwards": lambda: perturb.change(solve, perturb.on("mail__forward", message_id=prio[0]), to=[lead.email]),
            "summary": lambda: perturb.change(solve, to_lead, body=summary(counts | {F_TECH: counts[F_TECH] + 1})
                                              .arguments["body"]),
            "no_customer_mail": lambda: perturb.insert(solve, ToolCall(
                "mail__reply", {"message_id": customer_msg["id"], "body": "Thanks, we're looking into it."},
                "Let the customer know."), before=to_lead),
            "summary_last": lambda: perturb.insert(perturb.drop(solve, to_lead), summary(counts),
                                                   after=perturb.on("mail__list_messages",
                                                                    offset=(len(msgs) - 1) // 25 * 25)),
        }

        # -- grading -----------------------------------------------------------------------------
        def in_folder(w, folder: str) -> set[int]:
            return {m["id"] for m in mail.messages(w) if m["folder"].lower() == folder.lower()
                    and m["sender"] != f"support@{domain}"}

        def folder_ok(folder: str):
            def check(w, t):
                want = {i for i, f in expected.items() if f == folder}
                got = in_folder(w, folder)
                return got == want, f"{folder}: missing {sorted(want - got)}, extra {sorted(got - want)}"
            return check

        def rest_ok(w, t):
            want = {i for i, f in expected.items() if f == INBOX}
            moved = sorted(i for i in want if i not in in_folder(w, INBOX))
            return not moved, f"moved out of the inbox: {moved}" if moved else ""

        def forwards_ok(w, t):
            """Each key-account message forwarded to its manager (copying the lead is fine); nothing else forwarded."""
            fwd = [m for m in mail.sent_messages(w) if m["forwarded_from"] is not None]
            manager = {i: am_of[next(m for m in msgs if m["id"] == i)["sender"].rsplit("@", 1)[1]].email for i in prio}
            bad = [(m["forwarded_from"], m["to"] + m["cc"]) for m in fwd
                   if m["forwarded_from"] not in manager or manager[m["forwarded_from"]] not in m["to"] + m["cc"]
                   or set(m["to"] + m["cc"]) - {manager[m["forwarded_from"]], lead.email}]
            missing = sorted(set(manager) - {m["forwarded_from"] for m in fwd})
            return not bad and not missing, f"not forwarded: {missing}; wrong forwards: {bad[:3]}"

        def lookalike_ok(w, t):
            """The look-alike domain's mail went where its words send it (Billing), not to Priority, and
            no manager got it."""
            fwd = {m["forwarded_from"] for m in mail.sent_messages(w) if m["forwarded_from"] is not None}
            bad = [i for i in look_ids if i not in in_folder(w, expected[i]) or i in fwd]
            return not bad, f"look-alike mail misrouted or forwarded: {bad}" if bad else ""

        def summary_ok(w, t):
            sent = [m for m in mail.sent_messages(w) if lead.email in m["to"] + m["cc"] and m["forwarded_from"] is None]
            if not sent:
                return False, "no summary to the team lead"
            found = counts_in(sent[-1]["body"])
            bad = [f"{label}={n}" for label, n in [*((f.split("/")[-1].lower(), n) for f, n in counts.items()),
                                                   ("inbox", new_inbox)] if found.get(label) != {n}]  # one count each
            return not bad, f"counts missing or wrong: {bad}" if bad else ""

        def no_customer_mail(w, t):
            allowed = {lead.email} | {a["am"].email for a in accounts}
            bad = [m["to"] for m in mail.sent_messages(w) if set(m["to"] + m["cc"]) - allowed]
            return not bad, f"mail to {bad}" if bad else ""

        def summary_last(w, t):
            moves = [i for i, c in enumerate(t.tool_calls) if c.name == "mail__move_message" and not c.is_error]
            sends = [i for i, c in enumerate(t.tool_calls) if c.name == "mail__send_message" and not c.is_error
                     and isinstance(c.arguments, dict) and lead.email.lower() in recipients(c)
                     and len(counts_in(str(c.arguments.get("body", "")))) >= 2]
            if not moves or not sends:
                return False, "no moves or no summary"
            return max(sends) > max(moves) and min(sends) > max(moves), "the summary was sent before the routing ended"

        criteria = [
            Criterion("auto_replies", f"{F_AUTO} holds exactly the new automatic replies (checked first)", "final_state",
                      folder_ok(F_AUTO)),
            Criterion("priority", f"{F_PRIO} holds exactly the new mail from key-account domains"
                      + (" (not look-alikes)" if look_ids else ""), "final_state", folder_ok(F_PRIO), 2.0),
            *([Criterion("lookalike_not_priority", "mail from the look-alike of a key-account domain went to "
                         f"{F_BILL} by its words, not to {F_PRIO}, and was not forwarded", "final_state",
                         lookalike_ok)] if look_ids else []),
            Criterion("billing", f"{F_BILL} holds exactly the new billing mail (subject or body, whole words)",
                      "final_state", folder_ok(F_BILL), 2.0),
            Criterion("technical", f"{F_TECH} holds exactly the new technical mail (body, whole words)", "final_state",
                      folder_ok(F_TECH), 2.0),
            Criterion("inbox_rest", "everything else, and all mail from before the last run, is still in the Inbox",
                      "final_state", rest_ok, guard=True),
            Criterion("forwards", "each key-account message was forwarded to its account manager, and nothing else was "
                      "forwarded", "final_state", forwards_ok, 2.0),
            Criterion("summary", "the team lead got a summary with the count per folder and the number left in the Inbox "
                      "(one count each)",
                      "final_state", summary_ok),
            Criterion("no_customer_mail", "no mail went to customers (only forwards to managers and the summary)",
                      "final_state", no_customer_mail, guard=True),
            Criterion("summary_last", "the summary (counts per folder) was sent once the routing was done", "process",
                      summary_last, requires=("summary",)),
        ]
        if level < self.levels:  # a folder this level leaves empty proves nothing
            criteria = [c for c in criteria if c.id not in {"auto_replies": F_AUTO, "priority": F_PRIO,
                                                            "billing": F_BILL, "technical": F_TECH}
                        or {"auto_replies": F_AUTO, "priority": F_PRIO, "billing": F_BILL,
                            "technical": F_TECH}[c.id] in expected.values()]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"expected": {str(k): v for k, v in expected.items()}, "counts": counts, "new_in_inbox": new_inbox,
                  "key_domains": sorted(key_domains), "lookalike": lookalike if look_ids else "",
                  "last_run": last_run.isoformat(), "lead": lead.email, **drawn},
        )


def _fewer(msgs: list[dict], level: int, key_domains: set[str]) -> list[dict]:
    """The messages a lower level keeps, renumbered in date order: at level 1 the new key-account
    invoice and the old key-account message; at level 2 one new message per trap and all the old."""
    new = [m for m in msgs if m["new"]]
    if level == 1:
        keep = [next(m for m in new if m["kind"] == "key_invoice"), next(m for m in msgs if m["kind"] == "old_key")]
    else:
        auto = next(m for m in new if m["subject"].startswith(AUTO_PREFIXES) and _has(BILLING_WORDS + TECH_WORDS,
                                                                                      m["body"]))
        body_bill = [m for m in new if m["kind"] == "billing" and not _has(BILLING_WORDS, m["subject"])]
        tech = [m for m in new if m["kind"] == "tech"]
        debug = [m for m in new if m["subject"].startswith("Debug")]
        keep = [auto, *(m for m in new if m["kind"] in ("key_invoice", "key_error", "lookalike")),
                *body_bill[:1], *tech[:1], *debug[:1], *(m for m in msgs if not m["new"])]
    out = sorted(({**m} for m in keep), key=lambda m: m["date"])
    for i, m in enumerate(out, start=1):
        m["id"] = i
    return out


SUMMARY_LABELS = {  # patterns; "from the inbox" and "the support inbox" name where mail came from, not a count
    "priority": ("priority",), "billing": ("billing",), "technical": ("technical",),
    "auto-replies": ("auto-replies", "auto replies", "autoreplies", "automatic replies", "auto-reply"),
    "inbox": (r"(?<!from )(?<!from the )(?<!support )(?<!shared )inbox",),
}


NUMBER = re.compile(r"(?<![\w.:/-])\d+(?![\w:/-]|\.\d)")  # a count, not a time, date or id


def _labels(text: str) -> list[tuple[str, int, int]]:
    """(label, start, end) of each folder name in ``text`` (lower case)."""
    out = []
    for key, names in SUMMARY_LABELS.items():
        for name in names:
            out += [(key, m.start(), m.end()) for m in re.finditer(name, text)]
    return out


def _nearest(text: str, start: int, end: int) -> int | None:
    """The number closest to the span [start, end) of ``text``; on a tie, the one after it."""
    best = None
    for m in NUMBER.finditer(text):
        gap = start - m.end() if m.end() <= start else m.start() - end
        if gap >= 0 and (best is None or (gap, m.start() < start) < best[0]):
            best = ((gap, m.start() < start), int(m.group()))
    return best[1] if best else None


def _prose_counts(text: str, found: dict[str, set[int]]) -> None:
    """Clauses (split at line ends, commas, semicolons, brackets, full stops, "and") that name one
    folder give the number nearest the name: "Priority: 4", "4 to Priority", "Routed 22 new
    messages: 4 to Priority" (4). A clause naming several folders is read in its parts around
    colons and dashes ("22 new in the inbox: 4 to Priority"), never guessed at as a whole."""
    for clause in re.split(r"[,;\n()]|\.(?:\s|$)|\band\b", text):
        parts = [clause] if len({k for k, _, _ in _labels(clause)}) <= 1 else re.split(r":|\s[-\u2013\u2014]\s", clause)
        for part in parts:
            labels = _labels(part)
            if len({k for k, _, _ in labels}) != 1:
                continue
            key, start, end = labels[0]
            n = _nearest(part, start, end)
            if n is not None:
                found.setdefault(key, set()).add(n)


def _table_counts(rows: list[list[str]], found: dict[str, set[int]]) -> None:
    """A Markdown table: a row naming one folder gives the number in the cell nearest the name
    ("| Priority | 4 |"); a row naming several folders and no numbers is a header, and each row
    below it gives the number under each name."""
    header: dict[int, str] = {}
    for cells in rows:
        if all(set(c) <= set("-: ") for c in cells):
            continue
        named = {i: {k for k, _, _ in _labels(c)} for i, c in enumerate(cells)}
        nums = {i: int(m.group()) for i, c in enumerate(cells) if (m := NUMBER.search(c))}
        keys = set().union(*named.values())
        if len(keys) >= 2 and not nums:
            header = {i: ks.pop() for i, ks in named.items() if len(ks) == 1}
        elif len(keys) == 1:
            at = next(i for i, ks in named.items() if ks)
            if at in nums:  # "| Priority: 4 |"
                _prose_counts(cells[at], found)
            elif nums:
                i = min(nums, key=lambda i: (abs(i - at), i < at))
                found.setdefault(keys.pop(), set()).add(nums[i])
        elif not keys:
            for i, key in header.items():
                if i in nums:
                    found.setdefault(key, set()).add(nums[i])


def counts_in(body: str) -> dict[str, set[int]]:
    """Numbers the summary gives per folder, each bound to its folder's name, from prose and
    from Markdown tables alike (every value found is kept, so a label given two numbers
    shows up as such)."""
    found: dict[str, set[int]] = {}
    prose: list[str] = []
    table: list[list[str]] = []
    for line in body.lower().splitlines() + [""]:
        if line.strip().startswith("|"):
            table.append(line.strip().strip("|").split("|"))
            continue
        if table:
            _table_counts(table, found)
            table = []
        prose.append(line)
    _prose_counts("\n".join(prose), found)
    return found


def _rules_brief(lead, last_run: datetime) -> str:
    """The same rules, said briefly (level 1)."""
    return f"""# Support inbox routing rules

Team lead: {lead.name} <{lead.email}>

Route the Inbox mail that arrived after the last run; the first rule that matches decides:

1. Subject starts with "Automatic reply:", "Auto-Reply:", "Out of Office" or "Undeliverable:" -> {F_AUTO}.
2. Sender at a domain in key-accounts.csv (exactly) -> {F_PRIO}; forward it to that account's manager.
3. Subject or body has one of {", ".join(BILLING_WORDS)} -> {F_BILL}.
4. Body has one of {", ".join(TECH_WORDS)} -> {F_TECH}.
5. Anything else stays in the Inbox.

Keywords are whole words, any case. Create missing folders. Never reply to customers. Then mail the
team lead how many went to each of the four folders and how many new ones stayed in the Inbox.

Last run: {last_run:%Y-%m-%d %H:%M}. Leave older mail where it is.
"""


def _rules(lead, last_run: datetime) -> str:
    return f"""# Support inbox routing rules

Team lead: {lead.name} <{lead.email}>

Route every message that arrived in the Inbox after the last run (see the bottom). Check the
rules in order; the first one that matches decides where the message goes:

1. **Automatic replies**: the subject starts with "Automatic reply:", "Auto-Reply:",
   "Out of Office" or "Undeliverable:" -> {F_AUTO}.
2. **Key accounts**: the sender's address is at one of the domains in key-accounts.csv
   (exactly that domain) -> {F_PRIO}, and forward the message to that account's manager
   (also in key-accounts.csv).
3. **Billing**: the subject or the body contains one of {", ".join(BILLING_WORDS)} -> {F_BILL}.
4. **Technical**: the body contains one of {", ".join(TECH_WORDS)} -> {F_TECH}.
5. Anything else stays in the Inbox for the duty agent.

Keywords count as whole words, in any letter case. Create a folder if it doesn't exist yet.
Nobody replies to customers during the routing run. When you're done, send the team lead a
short summary: how many messages went to each of the four folders and how many new ones
stayed in the Inbox.

Last run: {last_run:%Y-%m-%d %H:%M}. Everything that arrived before that was handled then;
leave it where it is.
"""
