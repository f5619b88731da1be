"""CRM updates: the quarter-start pipeline clean-up a sales manager asks for by mail.

The rules live in the manager's mail (last quarter's version, with another date, is still in
the inbox): open deals past their close date are pushed when someone worked them in the last
30 days and closed lost otherwise; signed order forms (one corrected by a later mail, one
deal already overdue, an unsigned quote that only looks like one) close deals won; and
duplicate contacts at the same account are merged into the older record (a namesake at
another company is not a duplicate). The agent then replies with the deals it closed lost.

The default level draws its traps per seed (``TRAP_ODDS``, at least one; levels 1-2 keep their
fixed mix): the later mail correcting a signed form's amount, a signed form for a deal already
overdue (rule 2 beats rule 1), a signed deal next to a sibling deal with a similar name, a rep's
unsigned quote, a namesake contact at another account, and deals worked exactly 30 and 31 days
ago (the edge of the activity window). Last quarter's rules mail is always in the inbox.
``Task.data`` names what each trap touches, empty where it is absent.
"""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.apps.crm import state as crm
from longhorizon.apps.mail import state as mail
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import MONTHS, People, company, mails_sent, names_word, norm, rng_and_faker, slug
from longhorizon.tasks.crm import INDUSTRIES, TITLES, new_phone
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register

PRODUCTS = ["Fleet Tracker", "Analytics Suite", "Inventory Module", "Service Desk", "Payroll Cloud",
            "Field App", "Data Platform", "Security Pack"]
KINDS = ["renewal", "expansion", "pilot", "upgrade", "new business"]
CHATTER = [
    ("Forecast call moved", "The forecast call is now Thursday at 15:00, same link."),
    ("New pricing sheet", "Finance published the new pricing sheet on the intranet; old quotes stay valid."),
    ("Team lunch", "Lunch on Friday to celebrate the quarter? Reply if you're in."),
    ("CRM training", "Reminder: optional CRM refresher session next Tuesday at 10:00."),
    ("Expense policy", "Please file last month's expenses by the 10th."),
]
TRAP_ODDS = (("correction", 0.7), ("overdue_order", 0.6), ("sibling", 0.55), ("quote", 0.6), ("namesake", 0.6),
             ("edge", 0.5))
"""The default level's traps, each in the instance with this chance (at least one)."""


def _money(rng, amount: float) -> str:
    return rng.choice([f"${amount:,.2f}", f"USD {amount:,.2f}", f"${amount:,.2f} (USD)"])


def _date_text(rng, d: date) -> str:
    return rng.choice([d.isoformat(), f"{MONTHS[d.month - 1].capitalize()} {d.day}, {d.year}",
                       f"{d.day} {MONTHS[d.month - 1].capitalize()} {d.year}"])


@register
class PipelineHygiene(TaskFamily):
    name = "pipeline_hygiene"
    category = "CRM updates"
    apps = ("crm", "mail")
    description = ("Apply a manager's quarter-start pipeline rules: push or close overdue deals by recent "
                   "activity, close won the deals with signed order forms (using corrections), merge duplicate "
                   "contacts into the older record, and reply with the deals closed lost.")

    levels = 3
    """1: one overdue idle deal to close lost, and no signed order or duplicate contact (the agent
    still looks for both) among a few contacts (those on the deals, and the namesakes); 2: one deal to push, one to close lost, one signed order (the corrected,
    overdue one) and one duplicate contact; 3 (default): three or four of each kind of deal, three
    orders and three duplicates."""
    toolsets = {1: (
        "crm__get_deal", "crm__search_contacts", "crm__search_deals", "crm__update_deal", "mail__read_message",
        "mail__reply", "mail__search_messages",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        short = level == 1  # nothing signed: only the order desk's mail would need opening
        rng, fake = rng_and_faker(seed, self.name)
        traps = {k for k, p in TRAP_ODDS if rng.random() < p}
        if not traps:
            traps.add(rng.choice([k for k, _ in TRAP_ODDS]))
        if level < self.levels:  # levels 1-2 keep their mix (level 2: the corrected, overdue order)
            traps = {"correction", "overdue_order", "sibling", "quote", "namesake"}
        people = People(fake)
        _, our_domain = company(fake)
        me, manager, *reps = (people.make(our_domain) for _ in range(5))
        users = [{"email": me.email, "name": me.name, "role": "Sales Operations"},
                 {"email": manager.email, "name": manager.name, "role": "Sales Director"}]
        users += [{"email": r.email, "name": r.name, "role": "Account Executive"} for r in reps]
        q_start = rng.choice([date(2026, 4, 1), date(2026, 7, 1), date(2026, 10, 1)])
        today = q_start + timedelta(days=rng.randint(2, 9))
        if today.weekday() >= 5:
            today += timedelta(days=7 - today.weekday())
        push_date = date(q_start.year, q_start.month + 2, 30 if q_start.month + 2 in (6, 9) else 31)
        old_push = q_start - timedelta(days=1)
        cutoff = today - timedelta(days=30)
        phones: set[str] = set()

        # accounts and contacts ----------------------------------------------------------------
        accounts, domains = [], {our_domain}
        while len(accounts) < rng.randint(10, 12):
            name, dom = company(fake)
            if dom in domains:
                continue
            domains.add(dom)
            accounts.append({"id": len(accounts) + 1, "name": name, "domain": dom,
                             "industry": rng.choice(INDUSTRIES), "tier": rng.choice(["Enterprise", "Mid-Market", "SMB"]),
                             "owner": rng.choice(reps).email})
        contacts = []

        def stamp(days_ago: int) -> str:
            return datetime.combine(today - timedelta(days=days_ago), time(10)).isoformat()

        def add_contact(acc, first=None, last=None, email=None, title=None, phone=True, days_ago=None):
            if email is None:
                p = people.make(acc["domain"], first=first, last=last)
                first, last, email = p.first, p.last, p.email
            d = new_phone(rng, phones)
            c = {"id": len(contacts) + 1, "account_id": acc["id"], "first_name": first, "last_name": last,
                 "email": email, "phone": f"+1 {d[:3]}-{d[3:6]}-{d[6:]}" if phone else "",
                 "title": rng.choice(TITLES) if title is None else title,
                 "created": stamp(days_ago if days_ago is not None else rng.randint(200, 700))}
            contacts.append(c)
            return c

        for acc in accounts:
            for _ in range(rng.randint(2, 3)):
                add_contact(acc, phone=rng.random() < 0.8)
        originals = rng.sample(contacts, 3)
        pairs = []  # (kept, duplicate)
        for c in originals:
            acc = accounts[c["account_id"] - 1]
            dup = add_contact(acc, c["first_name"], c["last_name"],
                              email=f"{slug(c['first_name'])[0]}{slug(c['last_name'])}@{acc['domain']}",
                              title=rng.choice(["", c["title"]]), phone=rng.random() < 0.5,
                              days_ago=rng.randint(10, 150))
            pairs.append((c, dup))
        twin_of, twin = originals[0], None
        if "namesake" in traps:
            twin_acc = rng.choice([a for a in accounts if a["id"] != twin_of["account_id"]])
            twin = add_contact(twin_acc, twin_of["first_name"], twin_of["last_name"],
                               email=f"{slug(twin_of['first_name'])}.{slug(twin_of['last_name'])}@{twin_acc['domain']}",
                               days_ago=rng.randint(10, 150))
        by_acc: dict[int, list] = {}
        for c in contacts:
            by_acc.setdefault(c["account_id"], []).append(c)

        # deals ------------------------------------------------------------------------------
        deals, names = [], set()
        activities = []

        def add_deal(role, close: date, stage: str | None = None, acc=None, product=None, kind=None):
            acc = acc or rng.choice(accounts)
            short = acc["name"].split()[0].strip(",")
            while True:
                pr, kd = product or rng.choice(PRODUCTS), kind or rng.choice(KINDS)
                nm = f"{short} {pr} {kd}"
                if nm not in names:
                    names.add(nm)
                    break
                product = kind = None
            d = {"name": nm, "account_id": acc["id"], "contact_id": rng.choice(by_acc[acc["id"]])["id"],
                 "stage": stage or rng.choice(crm.OPEN_STAGES), "amount": float(rng.randint(16, 400) * 250),
                 "close_date": close.isoformat(), "owner": acc["owner"], "role": role, "product": pr, "kind": kd,
                 "created": stamp(rng.randint(90, 300))}
            deals.append(d)
            return d

        def log(d, days_ago: int):
            day = today - timedelta(days=days_ago)
            activities.append({"kind": rng.choice(["call", "email", "meeting", "note"]),
                               "subject": rng.choice(["Check-in call", "Sent revised proposal", "Demo with their team",
                                                      "Pricing questions", "Security review", "Champion left?"]),
                               "body": fake.sentence(), "date": day.isoformat(), "deal": d,
                               "contact_id": d["contact_id"], "account_id": d["account_id"]})

        edge = "edge" in traps  # the window's edges: last worked exactly 30 days ago (push), 31 (lost)
        edges = []
        for i in range(rng.randint(3, 4)):  # overdue but worked recently: push
            d = add_deal("push", today - timedelta(days=rng.randint(2, 60)))
            log(d, rng.randint(40, 120))
            log(d, 30 if edge and i == 1 else rng.randint(1, 26))
            if edge and i == 1:
                edges.append(d)
        for i in range(rng.randint(3, 4)):  # overdue and idle: closed lost
            d = add_deal("lost", today - timedelta(days=rng.randint(2, 60)))
            for _ in range(rng.randint(0, 2) if i else 0):
                log(d, rng.randint(34, 150))
            if edge and i == 1:
                log(d, 31)
                edges.append(d)
        for _ in range(rng.randint(6, 8)):  # open and not yet due
            d = add_deal("future", today + timedelta(days=rng.randint(5, 150)))
            if rng.random() < 0.6:
                log(d, rng.randint(1, 120))
        for _ in range(rng.randint(4, 5)):  # already closed
            add_deal("closed", today - timedelta(days=rng.randint(5, 120)), stage=rng.choice(crm.CLOSED_STAGES))
        # signed orders: one for an overdue idle deal, one next to a similarly named sibling deal (each or not)
        if "overdue_order" in traps:
            orders = [add_deal("order", today - timedelta(days=rng.randint(3, 40)))]
            log(orders[0], rng.randint(45, 100))
        else:
            orders = [add_deal("order", today + timedelta(days=rng.randint(5, 60)))]
        od = add_deal("order", today + timedelta(days=rng.randint(10, 60)))
        orders.append(od)
        sibling = None
        if "sibling" in traps:
            sibling = add_deal("future", today + timedelta(days=rng.randint(10, 90)), acc=accounts[od["account_id"] - 1],
                               product=od["product"], kind=rng.choice([k for k in KINDS if k != od["kind"]]))
        orders.append(add_deal("order", today + timedelta(days=rng.randint(10, 90))))
        quote_deal = add_deal("future", today + timedelta(days=rng.randint(15, 60))) if "quote" in traps else None
        if level < self.levels:  # the same draws, then less to clean up (the default stays byte for byte)
            keep_n = level - 1  # pushes, orders and duplicates kept; one deal to close lost at every level
            gone = ([d for d in deals if d["role"] == "push"][keep_n:] + [d for d in deals if d["role"] == "lost"][1:]
                    + orders[keep_n:])
            orders = orders[:keep_n]
            deals[:] = [d for d in deals if all(d is not g for g in gone)]
            activities[:] = [a for a in activities if all(a["deal"] is not g for g in gone)]
            # a dropped duplicate's deals and activities go to its original
            stay = {dup["id"]: keep["id"] for keep, dup in pairs[keep_n:]}
            pairs = pairs[:keep_n]
            contacts[:] = [c for c in contacts if c["id"] not in stay]
            for x in deals + activities:
                x["contact_id"] = stay.get(x["contact_id"], x["contact_id"])
            if level == 1:  # fewer contacts to look through: those on a deal or an activity, and the namesakes
                used = {x.get("contact_id") for x in deals + activities} | ({twin["id"], twin_of["id"]} if twin else set())
                contacts[:] = [c for c in contacts if c["id"] in used]
        rng.shuffle(deals)
        for i, d in enumerate(deals, start=1):
            d["id"] = i
        for a in activities:
            a["deal_id"] = a.pop("deal")["id"]
        activities.sort(key=lambda a: (a["date"], a["deal_id"]))

        # the signed order forms ---------------------------------------------------------------
        for o in orders:
            o["signed"] = today - timedelta(days=rng.randint(1, 6))
            o["final"] = float(round(o["amount"] * rng.uniform(0.8, 1.25) / 50) * 50 + rng.choice([0, 25, 75]))
        corrected = orders[rng.randrange(3)] if level == self.levels else (orders[0] if orders else None)
        if "correction" not in traps:
            corrected = None
        if corrected is not None:
            corrected["first"] = corrected["final"]
            corrected["final"] = corrected["first"] + rng.choice([-1, 1]) * rng.randint(5, 40) * 100
        acc_name = {a["id"]: a["name"] for a in accounts}
        order_desk = f"orders@{our_domain}"
        msgs = []

        def msg(sender, sender_name, subject, body, when, **kw):
            msgs.append({"folder": "Inbox", "sender": sender, "sender_name": sender_name, "to": [me.email],
                         "subject": subject, "body": body, "date": when.isoformat(), **kw})
            return msgs[-1]

        for o in orders:
            when = datetime.combine(o["signed"], time(rng.randint(9, 16), rng.randrange(60)))
            value = o.get("first", o["final"])
            msg(order_desk, "Order Desk", f"Signed order form: {acc_name[o['account_id']]} / {o['name']}",
                f"Hi {me.first},\n\nThe signed order form for {o['name']} ({acc_name[o['account_id']]}) is back.\n\n"
                f"Signed on: {_date_text(rng, o['signed'])}\nTotal contract value: {_money(rng, value)}\n"
                f"PO number: PO-{rng.randint(10000, 99999)}\n\nPlease update the CRM.\nOrder Desk", when,
                attachments=[{"name": f"order_form_{o['id']}.pdf", "content": f"%PDF-1.4 signed {o['name']}\n"}])
            if "first" in o:
                msg(order_desk, "Order Desk", f"CORRECTION - signed order form: {o['name']}",
                    f"Hi {me.first},\n\nSorry, the customer signed the revised order form, not the draft I sent "
                    f"earlier. The correct total contract value for {o['name']} is {_money(rng, o['final'])}; "
                    f"the signing date is unchanged.\n\nOrder Desk",
                    when + timedelta(hours=rng.randint(1, 3), minutes=rng.randrange(60)))
        if quote_deal is not None:
            rep_q = next(r for r in reps if r.email == quote_deal["owner"])
            msg(rep_q.email, rep_q.name, f"Quote out for {quote_deal['name']}",
                f"Hi {me.first},\n\nFYI I sent {acc_name[quote_deal['account_id']]} the quote for {quote_deal['name']} "
                f"({_money(rng, quote_deal['amount'] + 2500)}). They expect to return the signed order form in a "
                f"couple of weeks, so nothing to change in the CRM yet.\n\n{rep_q.first}",
                datetime.combine(today - timedelta(days=rng.randint(1, 4)), time(14, 5)))
        rules = (
            f"Hi {me.first},\n\nBefore Thursday's forecast call, could you clean up the pipeline in the CRM?\n\n"
            f"1. Open deals whose close date has already passed:\n"
            f"   - if somebody logged an activity on the deal in the last 30 days (on or after "
            f"{cutoff.isoformat()}), push the close date to {push_date.isoformat()} and leave the stage as it is;\n"
            f"   - otherwise mark the deal Closed Lost. Leave the amount and date of those alone.\n"
            f"2. The order desk sent you the signed order forms. Those deals are Closed Won, with the amount from "
            f"the signed form and the close date set to the day it was signed. This beats rule 1. Quotes that "
            f"haven't been signed don't count.\n"
            f"3. Merge the duplicate contacts: the same person entered twice at the same account. Keep the older "
            f"record (the lower ID).\n\n"
            f"Please don't change anything else. When you're done, reply to this mail with the names of the deals "
            f"you marked Closed Lost so I can let the reps know.\n\nThanks,\n{manager.first}"
        )
        rules_msg = msg(manager.email, manager.name, "Quarter-start pipeline clean-up", rules,
                        datetime.combine(today, time(8, 2)))
        msg(manager.email, manager.name, "Quarter-start pipeline clean-up",
            rules.replace(push_date.isoformat(), old_push.isoformat()).replace(
                cutoff.isoformat(), (cutoff - timedelta(days=91)).isoformat()),
            datetime.combine(q_start - timedelta(days=91 - rng.randint(2, 6)), time(8, 10)), is_read=True)
        colleagues = [people.make(our_domain) for _ in range(3)]
        for subj, text in rng.sample(CHATTER, 3):
            c = rng.choice(colleagues)
            msg(c.email, c.name, subj, f"{text}\n\n{c.first}",
                datetime.combine(today - timedelta(days=rng.randint(0, 6)), time(rng.randint(7, 17), 30)))
        msgs.sort(key=lambda m: m["date"])
        for i, m in enumerate(msgs, start=1):
            m["id"] = i
        rules_id = rules_msg["id"]

        crm_deals = [{k: v for k, v in d.items() if k not in ("role", "signed", "final", "first", "product", "kind")}
                     for d in deals]

        def build(root: Path) -> None:
            crm.create_crm(root / "state" / "crm.sqlite", user=me.email, users=users, accounts=accounts,
                           contacts=contacts, deals=crm_deals, activities=activities, today=today.isoformat())
            mail.create_mailbox(root / "state" / "mail.sqlite", me.email, me.name, messages=msgs,
                                now=datetime.combine(today, time(9, 0)).isoformat())

        # ground truth ----------------------------------------------------------------------------
        order_ids = {o["id"] for o in orders}
        push = [d for d in deals if d["role"] == "push"]
        lost = [d for d in deals if d["role"] == "lost"]
        overdue_order = [o for o in orders if o["close_date"] < today.isoformat()]
        in_scope = {d["id"] for d in push + lost} | order_ids
        seeded_deals = {d["id"]: {k: d[k] for k in ("name", "stage", "amount", "close_date", "owner")} for d in deals}
        pair_ids = {c["id"] for pair in pairs for c in pair}
        seeded_contacts = {c["id"]: c for c in contacts}

        w = phrasing_rng(self.name, seed)
        m = manager.first
        rules_said = say(w, f"{m} sent me the quarter-start pipeline clean-up rules this morning.",
                         f"This morning {m} mailed me the rules for the quarter-start pipeline clean-up.",
                         f"The quarter-start pipeline clean-up rules came in from {m} this morning.",
                         f"I got {m}'s rules for the quarter-start pipeline clean-up this morning.")
        ask = say(w, f"Can you do it in the CRM for me and reply to {m} when it's done?",
                  f"Could you carry them out in the CRM and then reply to {m} once it's done?",
                  f"Please work through them in the CRM for me, and when it's finished, reply to {m}.",
                  f"Would you do the clean-up in the CRM and reply to {m} when you're through?")
        forms = say(w, "The order forms should be in my inbox too.",
                    "You should find the order forms in my inbox as well.",
                    "The order forms ought to be in my inbox too.")
        instruction = " ".join([rules_said, ask, forms])

        def report_body(named: list[str]) -> str:
            return (f"Hi {manager.first},\n\nThe pipeline is cleaned up. I marked these deals Closed Lost:\n"
                    + "\n".join(f"- {n}" for n in named)
                    + f"\n\n{len(push)} overdue deals with recent activity now close on {push_date.isoformat()}, "
                    f"{len(orders)} signed orders are Closed Won and {len(pairs)} duplicate contacts are merged."
                    f"\n\n{me.first}")

        def solve():
            yield ToolCall("mail__search_messages", {"query": "pipeline clean-up", "sender": manager.email},
                           "Find the manager's rules.")
            yield ToolCall("mail__read_message", {"message_id": rules_id}, "Read this quarter's rules (the newest).")
            hits = json.loads((yield ToolCall("mail__search_messages", {"query": "order form"},
                                              "Find the signed order forms.")))
            for h in sorted(hits["messages"], key=lambda m: m["id"]):
                if short and order_desk not in h["from"]:  # the rules and a rep's quote are no signed forms
                    continue
                yield ToolCall("mail__read_message", {"message_id": h["id"]}, f"Open {h['subject']!r}.")
            stale = json.loads((yield ToolCall("crm__search_deals", {
                "open_only": True, "close_to": (today - timedelta(days=1)).isoformat(), "limit": 100},
                "List open deals whose close date has passed.")))
            for d in stale["deals"]:
                yield ToolCall("crm__get_deal", {"deal_id": d["id"]},
                               f"When was {d['name']} last worked on?")
            for o in orders:
                found = json.loads((yield ToolCall("crm__search_deals", {"query": o["name"]},
                                                   f"Find the deal {o['name']}.")))
                did = next(d["id"] for d in found["deals"] if d["name"] == o["name"])
                yield ToolCall("crm__update_deal", {"deal_id": did, "stage": "Closed Won", "amount": o["final"],
                                                    "close_date": o["signed"].isoformat()},
                               f"{o['name']} is signed: Closed Won.")
            for d in push:
                yield ToolCall("crm__update_deal", {"deal_id": d["id"], "close_date": push_date.isoformat()},
                               f"{d['name']} was worked on recently: push it.")
            for d in lost:
                yield ToolCall("crm__update_deal", {"deal_id": d["id"], "stage": "Closed Lost"},
                               f"{d['name']} has had no activity for 30 days: Closed Lost.")
            everyone = json.loads((yield ToolCall("crm__search_contacts", {"limit": 100},
                                                  "List every contact to spot duplicates.")))
            assert everyone["next_offset"] is None
            for keep, dup in pairs:
                yield ToolCall("crm__merge_contacts", {"keep_id": keep["id"], "duplicate_id": dup["id"]},
                               f"{keep['first_name']} {keep['last_name']} is in twice: keep the older record.")
            if not short:
                yield ToolCall("crm__search_deals", {"open_only": True,
                                                     "close_to": (today - timedelta(days=1)).isoformat()},
                               "Verify no open deal is still overdue.")
            yield ToolCall("mail__reply", {"message_id": rules_id, "body": report_body([d["name"] for d in lost])},
                           "Report back to the manager.")
            return (f"Pushed {len(push)} deals to {push_date}, closed {len(lost)} lost, closed {len(orders)} won "
                    f"from signed orders, merged {len(pairs)} duplicate contacts, and replied to {manager.first}.")

        reply = perturb.on("mail__reply", message_id=rules_id)
        # where the quote or the namesake is absent, their guards' perturbations touch another deal or contact
        untouched = quote_deal or next(d for d in deals if d["role"] == "future")
        if twin is not None:
            wrong_merge = (twin_of["id"], twin["id"])
        else:  # two other people at one account
            wrong_merge = next((a[0]["id"], a[1]["id"]) for a in (
                [c for c in contacts if c["account_id"] == acc["id"] and c["id"] not in pair_ids] for acc in accounts)
                if len(a) >= 2)
        perturbations = {
            "stale_closed_lost": perturb.drop(solve, perturb.on("crm__update_deal", deal_id=lost[0]["id"])),
            "other_deals_untouched": perturb.insert(solve, ToolCall(
                "crm__update_deal", {"deal_id": untouched["id"], "stage": "Closed Won"}, "Close the quoted deal too."),
                before=perturb.on("crm__search_contacts")),
            "no_wrong_merges": perturb.insert(solve, ToolCall(
                "crm__merge_contacts", {"keep_id": wrong_merge[0], "duplicate_id": wrong_merge[1]},
                "Merge these two as well."), before=reply),
            "lost_reported": perturb.change(solve, reply, body=report_body([d["name"] for d in lost][1:])),
            "one_reply": perturb.insert(solve, ToolCall("mail__send_message", {
                "to": [r.email for r in reps], "subject": "Pipeline", "body": "I closed some of your deals."},
                "Tell the reps too.")),
        }
        if not short:  # level 1 has nothing to push, no signed order, no duplicate
            won_first = solve
            for o in orders:  # each order with a first version closed at its superseded amount
                if "first" in o:
                    won_first = perturb.change(won_first, perturb.on(
                        "crm__update_deal", stage="Closed Won", amount=o["final"], close_date=o["signed"].isoformat()),
                        amount=o["first"])
            if corrected is None:  # no correction: the first order closed on today's date, not the signing date
                won_first = perturb.change(solve, perturb.on("crm__update_deal", stage="Closed Won"),
                                           close_date=today.isoformat())
            keep0, dup0 = pairs[0]
            perturbations |= {
                "orders_won": won_first,
                "stale_pushed": perturb.change(solve, perturb.on("crm__update_deal", deal_id=push[0]["id"]),
                                               close_date=old_push.isoformat()),
                "duplicates_merged": perturb.change(solve, perturb.on("crm__merge_contacts", keep_id=keep0["id"]),
                                                    keep_id=dup0["id"], duplicate_id=keep0["id"]),
            }
        if overdue_order:  # closed lost by rule 1, as if the signed form did not beat it
            perturbations["overdue_order_won"] = perturb.change(solve, perturb.on(
                "crm__update_deal", deal_id=overdue_order[0]["id"]),
                lambda a: {"deal_id": a["deal_id"], "stage": "Closed Lost"})
        if edges:  # the deal last worked 31 days ago pushed as if it were inside the window
            perturbations["window_edges"] = perturb.change(solve, perturb.on(
                "crm__update_deal", deal_id=edges[1]["id"]),
                lambda a: {"deal_id": a["deal_id"], "close_date": push_date.isoformat()})

        # graders ---------------------------------------------------------------------------------
        def stale_pushed(w, t):
            for d in push:
                now = crm.deal(w, d["id"])
                if now["close_date"] != push_date.isoformat() or now["stage"] != d["stage"] or now["amount"] != d["amount"]:
                    return False, f"{d['name']}: {now['stage']} {now['amount']} {now['close_date']}"
            return True

        def stale_closed_lost(w, t):
            for d in lost:
                now = crm.deal(w, d["id"])
                if now["stage"] != "Closed Lost" or now["amount"] != d["amount"] or now["close_date"] != d["close_date"]:
                    return False, f"{d['name']}: {now['stage']} {now['amount']} {now['close_date']}"
            return True

        def won(signed):
            """Every deal of ``signed`` is Closed Won at its final amount on the date it was signed."""
            def check(w, t):
                for o in signed:
                    now = crm.deal(w, o["id"])
                    if now["stage"] != "Closed Won" or abs(now["amount"] - o["final"]) > 0.01 \
                            or now["close_date"] != o["signed"].isoformat():
                        return False, f"{o['name']}: {now['stage']} {now['amount']} {now['close_date']}"
                return True
            return check

        orders_won = won(orders)

        def duplicates_merged(w, t):
            for keep, dup in pairs:
                k, d = crm.contact(w, keep["id"]), crm.contact(w, dup["id"])
                if k["status"] != "active" or d["status"] != "merged" or d["merged_into"] != keep["id"]:
                    return False, f"{dup['id']} not merged into {keep['id']}"
            return True

        def no_wrong_merges(w, t):
            for c in crm.contacts(w):
                if c["id"] in pair_ids:
                    continue
                s = seeded_contacts.get(c["id"])
                if s is None:
                    return False, f"new contact {c['id']}"
                if c["status"] != "active" or c["email"] != s["email"] or c["account_id"] != s["account_id"]:
                    return False, f"contact {c['id']} merged or changed"
            return True

        def other_deals_untouched(w, t):
            for did, before in seeded_deals.items():
                if did in in_scope:
                    continue
                now = crm.deal(w, did)
                if {k: now[k] for k in before} != before:
                    return False, f"deal {before['name']} changed"
            if len(crm.deals(w)) != len(seeded_deals):
                return False, "deals were created"
            return True

        def lost_reported(w, t):
            sent = [m for m in mail.sent_messages(w) if manager.email in m["to"] + m["cc"]]
            if not sent:
                return False, "no mail to the manager"
            body = norm(" ".join(m["body"] for m in sent))
            missing = [d["name"] for d in lost if norm(d["name"]) not in body]
            # deals the rules leave alone have no place in the report (a mail naming every deal fails)
            outside = [v["name"] for did, v in seeded_deals.items()
                       if did not in in_scope and names_word(body, v["name"])]
            return not missing and not outside, "; ".join(
                ([f"not named: {missing}"] if missing else []) + ([f"names deals outside the rules: {outside}"]
                                                                   if outside else []))

        overdue_order_won = won(overdue_order)

        def window_edges(w, t):
            pushed, closed = (crm.deal(w, d["id"]) for d in edges)
            ok = (pushed["close_date"] == push_date.isoformat() and pushed["stage"] == edges[0]["stage"]
                  and closed["stage"] == "Closed Lost" and closed["close_date"] == edges[1]["close_date"])
            return ok, (f"{edges[0]['name']}: {pushed['stage']} {pushed['close_date']}; "
                        f"{edges[1]['name']}: {closed['stage']} {closed['close_date']}")

        def one_reply(w, t):
            sends = mails_sent(t)
            if len(sends) != 1:
                return False, f"{len(sends)} mails sent"
            args = sends[0].arguments if isinstance(sends[0].arguments, dict) else {}
            if sends[0].name == "mail__reply":
                return args.get("message_id") == rules_id, "replied to another message"
            to = [mail.parse_address(a) for a in args.get("to", [])]
            return to == [manager.email], f"sent to {to}"

        criteria = [
            Criterion("stale_pushed", f"Overdue deals worked on in the last 30 days close on {push_date}, stage and "
                      "amount unchanged.", "final_state", stale_pushed, 2.0),
            Criterion("stale_closed_lost", "Overdue deals without recent activity are Closed Lost, amount and date "
                      "unchanged.", "final_state", stale_closed_lost, 2.0),
            Criterion("orders_won", "Deals with signed order forms are Closed Won with the signed (corrected) amount "
                      "and the signing date.", "final_state", orders_won, 2.0),
            Criterion("duplicates_merged", "Each duplicate contact is merged into the older record at its account.",
                      "final_state", duplicates_merged, 2.0),
            Criterion("lost_reported", "The manager got a mail naming every deal marked Closed Lost (and none the "
                      "rules leave alone).", "final_state", lost_reported),
            Criterion("one_reply", "Exactly one mail was sent: the reply to the manager.", "process", one_reply,
                      requires=("lost_reported",)),
            Criterion("other_deals_untouched", "Deals outside the rules (not due, closed, quoted only) are unchanged "
                      "and none were created.", "final_state", other_deals_untouched, guard=True),
            Criterion("no_wrong_merges", "No other contact was merged, moved or created (a namesake at another "
                      "account stays).", "final_state", no_wrong_merges, guard=True),
        ]
        if overdue_order:
            criteria.append(Criterion(
                "overdue_order_won", "The signed order on a deal already past its close date is Closed Won (the "
                "signed form beats the overdue rule) with the signed amount and date.", "final_state",
                overdue_order_won))
        if edges:
            criteria.append(Criterion(
                "window_edges", f"The deal last worked exactly 30 days ago (on {cutoff}) is pushed; the one last "
                "worked 31 days ago is Closed Lost.", "final_state", window_edges))
        if short:  # level 1: nothing to push, no signed order, no duplicate
            criteria = [c for c in criteria if c.id not in ("stale_pushed", "orders_won", "duplicates_merged")]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"today": today.isoformat(), "push_date": push_date.isoformat(),
                  "push": [d["id"] for d in push], "lost": [d["id"] for d in lost],
                  "orders": {o["id"]: [o["final"], o["signed"].isoformat()] for o in orders},
                  "merges": [[k["id"], d["id"]] for k, d in pairs], "overdue_order": [o["id"] for o in overdue_order],
                  "corrected": corrected["id"] if corrected else "", "sibling": sibling["id"] if sibling else "",
                  "quoted": quote_deal["id"] if quote_deal else "", "namesake": twin["id"] if twin else "",
                  "edges": [d["id"] for d in edges]},
        )
