"""Mail triage: answer every past-due vendor invoice in a busy inbox and file it away.

The inbox mixes vendor invoices (some past due, some not yet, one vendor with both) with
look-alikes that mention invoices (payment receipts, a quote, a vendor newsletter, an
internal approval reminder) and ordinary chatter. Due dates are written several ways, so
the agent has to open each candidate and compare against today.

The traps are drawn per seed (``TRAP_ODDS``, at least one always): a vendor with both a past-due
and a not-yet-due invoice, an invoice due exactly today (not past due yet), and, from level 2, a
past-due invoice the vendor has since confirmed as paid (leave it alone). ``Task.data`` names each
drawn trap's vendor or invoice and is empty where it is absent; the paid invoice has its own
criterion (``paid_left_alone``) only where it is there.
"""

from __future__ import annotations

import random
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.mail import state as mail
from longhorizon.apps.mail.state import parse_address
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    MONTHS,
    People,
    company,
    faker_for,
    loads,
    long_date,
    mentions_code,
    mentions_date,
    norm,
)
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say

FOLDER = "Invoices/Processed"
TRAP_ODDS = (("shared_vendor", 0.6), ("due_today", 0.5), ("paid_since", 0.5))
"""Each trap in the inbox with this chance; one of them always (level 1 draws no paid one)."""
SERVICES = [
    "cloud hosting", "office cleaning", "printer leasing", "catering", "IT support retainer",
    "freight forwarding", "legal review", "payroll software licences", "security patrols",
    "translation services", "conference room AV", "courier deliveries", "marketing design work",
    "network maintenance", "recruitment fees", "office furniture",
]
NEWSLETTERS = [
    ("This week in logistics", "Five trends reshaping last-mile delivery, plus our webinar calendar."),
    ("Your monthly product digest", "New dashboards, faster exports and a sneak peek at what is next."),
    ("Last chance: early-bird tickets", "Early-bird pricing for the Operations Summit ends Sunday."),
    ("Monthly security bulletin", "Patch your VPN clients and review our phishing checklist."),
    ("Webinar recording: smarter procurement", "Thanks for registering! The recording is now available."),
    ("Industry salary survey results", "See how your team's pay compares with the market."),
    ("Tips for a tidier workspace", "Our favourite desk organisers, now 20% off."),
]
INTERNAL = [
    ("Lunch on Thursday?", "Anyone up for the new ramen place on Thursday? I can book a table for 12:30."),
    ("Updated org chart", "I've put the updated org chart on the intranet. Shout if your team looks wrong."),
    ("Q2 planning doc", "Comments on the Q2 planning doc are due by Wednesday. Please add yours inline."),
    ("Parking garage closed Friday", "Facilities say the garage is closed Friday for resurfacing."),
    ("Expense reports due", "Friendly reminder to submit last month's expense reports by the 10th."),
    ("Team offsite ideas", "Drop your offsite ideas in the shared doc; we'll vote next week."),
    ("Printer on the 3rd floor", "The 3rd floor printer is jammed again; use the one by reception for now."),
    ("Welcome aboard!", "Please give a warm welcome to our new analyst, starting Monday."),
    ("Fire drill at 11", "There will be a fire drill tomorrow at 11:00. Please leave by the east stairs."),
    ("Coffee machine", "The new coffee machine is in. Descaling instructions are taped to the side."),
    ("Holiday rota", "Please add your summer holiday dates to the rota before the end of the month."),
    ("Quarterly town hall", "Town hall is on the 20th at 16:00; questions can be submitted anonymously."),
]


def _due_phrase(rng: random.Random, due: date) -> str:
    month = MONTHS[due.month - 1].capitalize()
    return rng.choice([
        f"Due date: {due.isoformat()}",
        f"Payment due: {month} {due.day}, {due.year}",
        f"Please pay by {due.day} {month} {due.year}.",
        f"Payment is due on {due.strftime('%d/%m/%Y')} (DD/MM/YYYY).",
    ])


@register
class InvoiceFollowup(TaskFamily):
    name = "invoice_followup"
    category = "mail triage"
    apps = ("mail",)
    description = (
        "Reply to each past-due vendor invoice in a crowded inbox with the payment date and "
        "invoice number, file those invoices into a new folder, and leave everything else alone."
    )

    levels = 3
    """1: one past-due and one not-yet-due invoice, no look-alikes, a brief request, and the move
    confirms the filing (no final listing); 2: two or three past-due,
    one or two not yet due, plus payment receipts; 3 (default): four to six past-due among every
    look-alike, and the survey of the whole inbox first."""
    toolsets = {1: (  # level 1 searches at once and needs no listing
        "mail__create_folder", "mail__move_message", "mail__read_message", "mail__reply", "mail__search_messages",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng = random.Random(seed)
        fake = faker_for(seed)
        people = People(fake)
        our_company, domain = company(fake)
        me = people.make(domain)
        today = date(2026, 1, 5) + timedelta(days=rng.randrange(300))
        if today.weekday() >= 5:
            today += timedelta(days=7 - today.weekday())
        pay_date = today + timedelta(days=(4 - today.weekday()) % 7 or 7)
        if (pay_date - today).days < 2:
            pay_date += timedelta(days=7)
        now = datetime.combine(today, time(8, 45))

        def stamp(day: date) -> str:
            if day >= today:
                return datetime.combine(today, time(rng.randint(6, 7), rng.randrange(60))).isoformat()
            return datetime.combine(day, time(rng.randint(7, 18), rng.randrange(60))).isoformat()

        # vendors and their invoices -----------------------------------------------------
        vendors, domains = [], {domain}
        n_vendors = rng.randint(5, 7)
        while len(vendors) < n_vendors:
            vname, vdomain = company(fake)
            if vdomain in domains:
                continue
            domains.add(vdomain)
            contact = people.make(vdomain)
            box = rng.choice(["billing", "accounts", "invoices", "ar"])
            vendors.append({"name": vname, "domain": vdomain, "contact": contact,
                            "address": f"{box}@{vdomain}", "prefix": rng.choice(["INV", "IN", "BL", "INV"])})
        n_over, n_not = rng.randint(4, 6), rng.randint(2, 3)
        if level < self.levels:  # the same draws, then fewer invoices
            n_over, n_not = (1, 1) if level == 1 else (min(n_over, 2 + rng.randint(0, 1)), min(n_not, 1 + rng.randint(0, 1)))
        odds = TRAP_ODDS if level >= 2 else TRAP_ODDS[:2]  # level 1 has no receipts, so no paid invoice
        traps = {kind for kind, p in odds if rng.random() < p}
        if not traps:
            traps.add(rng.choice([kind for kind, _ in odds]))
        order = rng.sample(vendors, len(vendors))
        # with the shared-vendor trap one vendor has both a past-due and a not-yet-due invoice;
        # without it the not-yet-due invoices come from vendors with nothing past due
        over_pool = order if "shared_vendor" in traps else order[:len(order) - n_not]
        over_vendors = [over_pool[k % len(over_pool)] for k in range(n_over)]
        spare = [v for v in order if v not in over_vendors] or order
        not_vendors = [spare[k % len(spare)] for k in range(n_not)]
        if "shared_vendor" in traps:
            not_vendors[0] = over_vendors[0]
        paid_vendor = [rng.choice(order)] if "paid_since" in traps else []
        invoices = []
        used_numbers: set[str] = set()
        for k, vendor in enumerate(over_vendors + not_vendors + paid_vendor):
            overdue = k < n_over
            paid = k == n_over + n_not
            while True:
                number = f"{vendor['prefix']}-{rng.randint(10000, 99999)}"
                if number not in used_numbers:
                    used_numbers.add(number)
                    break
            if overdue or paid:
                due = today - timedelta(days=rng.randint(1, 40))
            elif k == n_over + n_not - 1 and "due_today" in traps:
                due = today  # due today is not past due yet
            else:
                due = today + timedelta(days=rng.randint(1, 30))
            terms = rng.choice([t for t in (7, 14, 30, 45, 60) if 2 <= (today - (due - timedelta(days=t))).days <= 60])
            sent = due - timedelta(days=terms)
            amount = f"${rng.randint(300, 25000):,}.{rng.randrange(100):02d}"
            service = rng.choice(SERVICES)
            contact = vendor["contact"]
            subject = rng.choice([
                f"Invoice {number}", f"{vendor['name']} invoice {number}",
                f"Your invoice {number} is ready", f"Invoice {number} for {service}",
            ])
            body = (
                f"Dear {me.first},\n\nPlease find attached invoice {number} for {service}.\n\n"
                f"Amount due: {amount}\n{_due_phrase(rng, due)}\n\n"
                f"Kind regards,\n{contact.name}" + ("" if level == 1 else f"\nAccounts Receivable, {vendor['name']}")
            )
            pdf = (f"%PDF-1.4\n% {vendor['name']}\nInvoice {number}\nAmount {amount}\n"
                   f"Due {due.isoformat()}\n%%EOF\n").encode()
            invoices.append({
                "number": number, "overdue": overdue, "paid": paid, "due": due.isoformat(), "amount": amount,
                "vendor": vendor["name"], "address": vendor["address"], "contact": contact.first,
                "msg": {"folder": "Inbox", "sender": vendor["address"], "sender_name": f"{vendor['name']} Billing",
                        "to": [me.email], "subject": subject, "body": body, "date": stamp(sent),
                        "attachments": [{"name": f"{number}.pdf", "content": pdf}]},
            })

        # distractors --------------------------------------------------------------------
        others = []
        for subj, text in rng.sample(NEWSLETTERS, rng.randint(4, 6)):
            _, ndomain = company(fake)
            others.append({"folder": "Inbox", "sender": f"news@{ndomain}", "sender_name": "Newsletter",
                           "subject": subj, "body": text + "\n\nUnsubscribe any time.",
                           "date": stamp(today - timedelta(days=rng.randint(1, 20)))})
        v = vendors[1]
        look_alikes = others if level >= 3 else []  # mail that mentions invoices but is none (search hits)
        receipts = others if level >= 2 else []
        look_alikes.append({"folder": "Inbox", "sender": f"news@{v['domain']}", "sender_name": v["name"],
                       "subject": f"{v['name']} news: our new billing portal",
                       "body": "Good news! From next month you can download every invoice and statement "
                               "from our self-service portal.\n\nThe team",
                       "date": stamp(today - timedelta(days=rng.randint(1, 15)))})
        for v in rng.sample(vendors, 2):
            old = f"{v['prefix']}-{rng.randint(10000, 99999)}"
            paid_due = today - timedelta(days=rng.randint(20, 60))
            receipts.append({"folder": "Inbox", "sender": v["address"], "sender_name": f"{v['name']} Billing",
                           "subject": f"Payment received - invoice {old}",
                           "body": f"Hello,\n\nWe have received your payment for invoice {old} "
                                   f"(due {paid_due.isoformat()}). Thank you, nothing further is needed.\n\n"
                                   f"{v['name']}",
                           "date": stamp(today - timedelta(days=rng.randint(2, 12)))})
        settled = [inv for inv in invoices if inv["paid"]]
        for inv in settled:  # a past-due invoice the vendor has since been paid for: settled, not overdue
            since = (today - date.fromisoformat(inv["msg"]["date"][:10])).days
            receipts.append({"folder": "Inbox", "sender": inv["address"], "sender_name": f"{inv['vendor']} Billing",
                             "subject": f"Payment received - invoice {inv['number']}",
                             "body": f"Hello,\n\nWe have received your payment for invoice {inv['number']} "
                                     f"(due {inv['due']}). Thank you, nothing further is needed.\n\n{inv['vendor']}",
                             "date": stamp(today - timedelta(days=rng.randint(1, max(1, min(since - 1, 6)))))})
        v = vendors[2]
        quote = f"Q-{rng.randint(1000, 9999)}"
        look_alikes.append({"folder": "Inbox", "sender": v["contact"].email, "sender_name": v["contact"].name,
                       "subject": f"Quote {quote} for {rng.choice(SERVICES)}",
                       "body": f"Hi {me.first},\n\nAs discussed, here is quote {quote}. It was valid until "
                               f"{(today - timedelta(days=3)).isoformat()} but we can extend it; no invoice "
                               f"will be issued until you confirm.\n\n{v['contact'].first}",
                       "date": stamp(today - timedelta(days=rng.randint(4, 14)))})
        colleagues = [people.make(domain) for _ in range(6)]
        controller = colleagues[0]
        look_alikes.append({"folder": "Inbox", "sender": controller.email, "sender_name": controller.name,
                       "subject": "Reminder: invoice approvals",
                       "body": f"Hi {me.first}, a reminder that any invoice above $10,000 needs my sign-off "
                               f"before it is paid. Thanks!\n{controller.first}",
                       "date": stamp(today - timedelta(days=rng.randint(1, 6)))})
        for subj, text in rng.sample(INTERNAL, rng.randint(8, 11)):
            c = rng.choice(colleagues)
            others.append({"folder": "Inbox", "sender": c.email, "sender_name": c.name, "subject": subj,
                           "body": f"{text}\n\n{c.first}", "date": stamp(today - timedelta(days=rng.randint(1, 14))),
                           "is_read": rng.random() < 0.4})
        old_v = vendors[-1]
        others.append({"folder": "Archive", "sender": old_v["address"], "sender_name": f"{old_v['name']} Billing",
                       "subject": f"Invoice {old_v['prefix']}-{rng.randint(10000, 99999)}",
                       "body": "Please find attached last year's final invoice. Payment due: 2025-12-01.",
                       "date": "2025-11-01T10:00:00", "is_read": True})
        others.append({"folder": "Sent", "sender": me.email, "sender_name": me.name, "to": [colleagues[1].email],
                       "subject": "Re: Team offsite ideas", "body": "Count me in for the cooking class!",
                       "date": stamp(today - timedelta(days=5)), "is_read": True})

        msgs = [inv["msg"] for inv in invoices] + others
        msgs.sort(key=lambda m: m["date"])
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
        for inv in invoices:
            inv["id"] = inv["msg"]["id"]
        original_folders = {m["id"]: m["folder"] for m in msgs}
        over = [inv for inv in invoices if inv["overdue"]]
        over.sort(key=lambda inv: inv["id"])
        not_due = [inv for inv in invoices if not inv["overdue"] and not inv["paid"]]
        over_ids = {inv["id"] for inv in over}
        over_addrs = {inv["address"] for inv in over}
        newsletter_id = next(m["id"] for m in msgs if m["sender"].startswith("news@"))

        def build(root: Path) -> None:
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name,
                                folders=["Inbox", "Sent", "Archive"], messages=msgs, now=now.isoformat())

        pay_text = long_date(pay_date)
        w = phrasing_rng(self.name, seed)
        hello = say(w, f"Hi, it's {me.first}. Accounts payable slipped while I was out and my inbox is a mess.",
                    f"{me.first} here. I was out and accounts payable slipped; my inbox is a mess.",
                    f"Hello, {me.first} here: while I was away the vendor invoices piled up in my inbox.")
        find = say(w, "Could you go through my inbox and find the vendor invoices whose due date has already passed "
                      "(anything due today or later is not overdue yet)?",
                   "Please find the vendor invoices in my inbox that are overdue, meaning their due date has "
                   "already passed (one due today or later isn't overdue yet).",
                   "Can you go through my inbox for vendor invoices past their due date? Anything due today or "
                   "later is not overdue yet.")
        reply = say(w, f"For each overdue one, reply to the vendor: apologise for the delay, say the payment is "
                       f"scheduled for {pay_text}, and quote the invoice number so their accounts team can match it.",
                    f"Reply to the vendor of each overdue invoice with an apology for the delay, the invoice number "
                    f"(so their accounts team can match it) and that payment is scheduled for {pay_text}.",
                    f"Each overdue vendor gets a reply: say sorry for the delay, quote the invoice number so their "
                    f"accounts team can match it, and tell them the payment is scheduled for {pay_text}.")
        file = say(w, f"Then file each of those invoices into a folder called \"{FOLDER}\" (it doesn't exist yet).",
                   f"Then move each of those invoices into a folder named \"{FOLDER}\"; you'll have to create it.",
                   f"After replying, file those invoices in a new folder called \"{FOLDER}\" (it doesn't exist "
                   f"yet).")
        leave = in_some_order(w, [
            say(w, "Invoices that aren't overdue stay where they are, and don't reply to them.",
                "Leave the invoices that aren't overdue where they are, without a reply."),
            say(w, "Please don't touch the rest of my mail and don't email anyone else.",
                "Don't email anyone else, and leave the rest of my mail as it is."),
            say(w, "An invoice the vendor has since confirmed as paid is settled, whatever its due date: no reply, "
                   "no filing.",
                "If a vendor has already confirmed receiving payment for an invoice, it's settled even if past due; "
                "leave that one alone.",
                "Anything a vendor has acknowledged as paid needs nothing from us, even past its due date, so "
                "leave it where it is."),
        ])
        today_is = f"Today is {long_date(today)}."
        instruction = " ".join([hello, today_is, find, reply, file, *leave])
        if level == 1:  # the same requests, said briefly
            hello = say(w, f"Hi, it's {me.first}.", f"{me.first} here.", f"Hello, {me.first} here.")
            find = say(w, "Find the vendor invoices in my inbox whose due date has passed (due today is not overdue).",
                       "Which vendor invoices in my inbox are overdue? One due today or later isn't yet.")
            reply = say(w, f"Reply to each overdue one: apologise, quote its invoice number and say payment is "
                           f"scheduled for {pay_text}.",
                        f"Reply to each overdue vendor with an apology, the invoice number and that payment is "
                        f"scheduled for {pay_text}.")
            file = say(w, f"Then move each to a new folder \"{FOLDER}\".",
                       f"Then file it in a new folder called \"{FOLDER}\".")
            leave = say(w, "Leave other mail where it is, unanswered, and email no one else.",
                        "Don't reply to or move anything else, and email no one else.")
            instruction = " ".join([hello, today_is, find, reply, file, leave])

        def reply_body(inv: dict, with_date: bool = True) -> str:
            ref = f" {inv['number']}"
            when = f" Payment is scheduled for {pay_text}." if with_date else " Payment will follow shortly."
            if level == 1:
                return f"Hello {inv['contact']},\n\nApologies for the delay on invoice{ref}.{when}\n\n{me.first}"
            return (f"Hello {inv['contact']},\n\nApologies for the delay on invoice{ref} ({inv['amount']})."
                    f"{when}\n\nBest regards,\n{me.name}\n{our_company}")

        survey = level == self.levels  # a crowded inbox is surveyed first; a small one is searched at once

        def solve():
            offset = 0 if survey else None
            if survey:
                yield ToolCall("mail__list_folders", {}, note="First, see which folders exist.")
            while offset is not None:
                page = loads((yield ToolCall(
                    "mail__list_messages", {"folder": "Inbox", "limit": 25, "offset": offset},
                    note="Skim the inbox to see what is there.")))
                offset = page["next_offset"]
            hits = loads((yield ToolCall(
                "mail__search_messages", {"query": "invoice", "folder": "Inbox", "limit": 100},
                note="Find every inbox message that mentions an invoice.")))
            for h in sorted(hits["messages"], key=lambda m: m["id"]):
                yield ToolCall("mail__read_message", {"message_id": h["id"]},
                               note=f"Open message {h['id']}: is it a vendor invoice, and when is it due?")
            yield ToolCall("mail__create_folder", {"name": FOLDER}, note=f"Create the {FOLDER} folder.")
            for inv in over:
                yield ToolCall("mail__reply", {"message_id": inv["id"], "body": reply_body(inv)},
                               note=f"{inv['number']} was due {inv['due']}, so it is overdue: reply to {inv['vendor']}.")
                yield ToolCall("mail__move_message", {"message_id": inv["id"], "folder": FOLDER},
                               note=f"File {inv['number']} as processed.")
            if level == 1:  # one invoice: the move's confirmation is the check
                filed = ", ".join(inv["number"] for inv in over)
                return f"Replied to {filed} (payment on {pay_text}) and filed it in {FOLDER}; nothing else touched."
            done = loads((yield ToolCall("mail__list_messages", {"folder": FOLDER, "limit": 25},
                                         note="Verify the processed folder holds exactly the overdue invoices.")))
            if survey:
                yield ToolCall("mail__list_messages", {"folder": "Sent", "limit": 10},
                               note="Verify the replies went out.")
            filed = ", ".join(inv["number"] for inv in over)
            return (f"Replied to {len(over)} overdue invoices ({filed}) with the payment date {pay_text} "
                    f"and filed {done['total']} of them in {FOLDER}; invoices not yet due and other mail "
                    f"were left alone.")

        last, spare = over[-1], not_due[0]
        verify = perturb.on("mail__list_messages", folder=FOLDER)
        if level == 1:  # no final listing: the stray action goes before the last move
            verify = perturb.on("mail__move_message", message_id=last["id"])
        perturbations = {
            **({"paid_left_alone": perturb.insert(solve,  # treat the settled invoice as overdue
                ToolCall("mail__reply", {"message_id": settled[0]["id"], "body": reply_body(settled[0])},
                         note=f"{settled[0]['number']} is past due too: reply."),
                ToolCall("mail__move_message", {"message_id": settled[0]["id"], "folder": FOLDER},
                         note=f"File {settled[0]['number']}."), before=verify)} if settled else {}),
            "overdue_replied": perturb.repeat(solve, perturb.on("mail__reply", message_id=last["id"])),
            "reply_content": perturb.change(solve, perturb.on("mail__reply", message_id=last["id"]),
                                            body=reply_body(last, with_date=False)),
            "processed_folder": perturb.drop(solve, perturb.on("mail__move_message", message_id=last["id"])),
            "no_other_mail": perturb.insert(solve, ToolCall(
                "mail__reply", {"message_id": spare["id"], "body": reply_body(spare)},
                note=f"Reply to {spare['number']} as well."), before=verify),
            "rest_untouched": perturb.insert(solve, ToolCall(
                "mail__move_message", {"message_id": newsletter_id, "folder": "Archive"},
                note="Archive a newsletter while I'm here."), before=verify),
        }

        def replies_to(world, mid: int) -> list[dict]:
            return [m for m in mail.sent_messages(world) if m["in_reply_to"] == mid]

        def check_replied(world, traj):
            for inv in over:
                rs = replies_to(world, inv["id"])
                if len(rs) != 1:
                    return False, f"{inv['number']}: {len(rs)} replies (expected exactly 1)"
                if inv["address"] not in rs[0]["to"]:
                    return False, f"{inv['number']}: reply not addressed to {inv['address']}"
            extra = sorted({m["in_reply_to"] for m in mail.sent_messages(world)  # replying to everything is no triage
                            if m["in_reply_to"] is not None and m["in_reply_to"] not in over_ids})
            return not extra, f"also replied to messages {extra}, which are not past-due invoices"

        def check_content(world, traj):
            for inv in over:
                rs = replies_to(world, inv["id"])
                if not rs:
                    return False, f"{inv['number']}: no reply"
                for r in rs:
                    if not mentions_code(r["body"], inv["number"]):
                        return False, f"reply {r['id']} does not quote {inv['number']}"
                    if not mentions_date(r["body"], pay_date):
                        return False, f"reply {r['id']} does not give the payment date {pay_date}"
                    others = [o["number"] for o in invoices if o is not inv and mentions_code(r["body"], o["number"])]
                    if others:
                        return False, f"reply {r['id']} about {inv['number']} also quotes {others}"
            return True

        def check_folder(world, traj):
            names = [f for f in mail.folders(world) if norm(f) == norm(FOLDER)]
            if not names:
                return False, f"no folder {FOLDER}"
            inside = {m["id"] for f in names for m in mail.messages(world, f)}
            if inside != over_ids:
                return False, f"folder holds {sorted(inside)}, expected {sorted(over_ids)}"
            return True

        def check_rest(world, traj):
            moved = [mid for mid, folder in original_folders.items()
                     if mid not in over_ids and mail.message(world, mid)["folder"] != folder]
            return (not moved, f"moved: {moved}" if moved else "")

        def check_no_other_mail(world, traj):
            replies = traj.calls("mail__reply", ok_only=True)
            if not replies:
                return False, "no replies were sent"
            for c in replies:
                try:
                    mid = int(c.arguments.get("message_id"))
                except (TypeError, ValueError, AttributeError):
                    return False, f"unreadable reply call {c.arguments!r}"
                if mid not in over_ids:
                    return False, f"replied to message {mid}, which is not an overdue invoice"
            for name in ("mail__send_message", "mail__forward"):
                for c in traj.calls(name, ok_only=True):
                    args = c.arguments if isinstance(c.arguments, dict) else {}
                    rcpts = [parse_address(a) for a in [*args.get("to", []), *args.get("cc", [])]]
                    if not rcpts or any(a not in over_addrs for a in rcpts):
                        return False, f"{name} to {rcpts}"
            return True

        def check_paid(world, traj):
            names = [f for f in mail.folders(world) if norm(f) == norm(FOLDER)]
            inside = {m["id"] for f in names for m in mail.messages(world, f)}
            if not over_ids & inside:  # leaving it alone counts only alongside filing the overdue ones
                return False, f"no past-due invoice filed in {FOLDER}"
            for inv in settled:
                if replies_to(world, inv["id"]):
                    return False, f"{inv['number']} was already paid but got a reply"
                if mail.message(world, inv["id"])["folder"] != "Inbox":
                    return False, f"{inv['number']} was already paid but was moved"
            return True

        criteria = [
            Criterion("overdue_replied", "Each past-due invoice got exactly one reply, addressed to its vendor; "
                      "no other message got one.",
                      "final_state", check_replied, 2.0),
            Criterion("reply_content", "Every reply quotes its invoice number (no other) and the payment date.",
                      "final_state", check_content, 2.0),
            Criterion("processed_folder", f"{FOLDER} exists and holds exactly the past-due invoices.",
                      "final_state", check_folder, 1.0),
            *([Criterion("paid_left_alone", "The past-due invoice the vendor has confirmed as paid got no reply "
                         "and stayed in the inbox, while the overdue ones were filed.",
                         "final_state", check_paid, 1.0)] if settled else []),
            Criterion("rest_untouched", "Every other message is still in the folder it started in.",
                      "final_state", check_rest, 1.0, guard=True),
            Criterion("no_other_mail", "Mail went only to past-due invoices' vendors, as replies.",
                      "process", check_no_other_mail, 1.0, guard=True),
        ]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"today": today.isoformat(), "pay_date": pay_date.isoformat(),
                  "overdue": [{k: inv[k] for k in ("id", "number", "due", "address")} for inv in over],
                  "not_due": [{k: inv[k] for k in ("id", "number", "due", "address")} for inv in not_due],
                  # the drawn traps: each empty where it is absent
                  "vendor_with_both": sorted({inv["vendor"] for inv in over} & {inv["vendor"] for inv in not_due}),
                  "due_today": [inv["number"] for inv in not_due if inv["due"] == today.isoformat()],
                  "paid_since": [{k: inv[k] for k in ("id", "number", "due", "address")} for inv in settled]},
        )
