"""Dual-control support: a customer's mobile data is down; fix it together with them.

The faults are seeded on both sides: on the phone (airplane mode, mobile data, data roaming
abroad, a wrong APN) only the customer can see and change anything; on the account (a line
suspended for an unpaid bill, roaming not enabled abroad, the data allowance used up) the
agent fixes what the policy allows, but payments and refuels apply only once the customer
approves them on their phone, and the phone must restart to pick up a changed line. The
customer's account holds other lines (one sometimes suspended on its own) and bills that are
not due yet; a look-alike customer shares the name. Done means: data works (a speed test
after the last change), the account is right, nothing else changed, the causes are recorded.
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

from longhorizon.apps.user import mobile
from longhorizon.apps.user import state as user_state
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import long_date, mentions_date, rng_and_faker
from longhorizon.tasks.dual_control.common import SEND, confirmed_after_changes, mentions_amount, persona
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register

CARRIERS = ["Telvio", "Nexcell", "Aurora Mobile", "Bluewave", "Kestrel Wireless", "Orbit Telecom", "Lumen Mobile"]
PLANS = [("Start 5GB", 5.0, 25.0), ("Smart 10GB", 10.0, 35.0), ("Plus 15GB", 15.0, 42.0),
         ("Max 25GB", 25.0, 55.0), ("Family Share 20GB", 20.0, 48.0)]
ABROAD = [("Lisbon, Portugal", "PT", "Vodafone PT"), ("Madrid, Spain", "ES", "Movistar"),
          ("Berlin, Germany", "DE", "Telekom.de"), ("Rome, Italy", "IT", "TIM"),
          ("Paris, France", "FR", "Orange F"), ("Amsterdam, Netherlands", "NL", "KPN"),
          ("Dublin, Ireland", "IE", "Three IE"), ("Toronto, Canada", "CA", "Rogers")]
MODELS = ["Pixel 8", "Galaxy S23", "iPhone 14", "iPhone 15", "Moto G Power", "Galaxy A54", "Pixel 7a"]
AREAS = ["206", "303", "312", "415", "512", "617", "702", "919", "503", "404"]
DEVICE_FAULTS = ["airplane_mode_on", "mobile_data_off", "apn_misconfigured", "network_mode_2g_only",
                 "device_roaming_off"]
ACCOUNT_FAULTS = ["line_suspended_unpaid", "roaming_not_enabled", "data_exhausted"]
PROVISIONING = {"line_suspended_unpaid", "roaming_not_enabled"}
DEVICE_CHANGES = {"set_airplane_mode", "set_mobile_data", "set_data_roaming", "reset_apn_settings", "set_apn",
                  "restart_phone", "approve_payment_requests", "set_network_mode"}


def _ask_payment(bill_ids):
    """The oracle's payment requests for ``bill_ids``, then the message asking the customer to
    approve them on the phone."""
    for bid in bill_ids:
        yield ToolCall("user__send_payment_request", {"bill_id": bid}, f"Request payment of overdue bill {bid}.")
    yield ToolCall(SEND, {"text": "Your line was suspended because of an overdue bill. I've sent a "
                                  "payment request to your phone: please approve it."},
                   "The customer must approve the payment on their phone.")


def _slug(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


@register
class MobileDataTroubleshooting(TaskFamily):
    name = "mobile_data_troubleshooting"
    category = "dual-control support"
    apps = ("user",)
    description = (
        "A customer's mobile data is down. Diagnose it with them over chat (only they can see and change "
        "their phone, approve charges and restart it), fix the account side by the carrier's policy, "
        "confirm with a speed test, and record the root causes."
    )

    levels = 3
    """1: one fault on the account (roaming not enabled abroad, or the allowance used up: a suspended
    line's fault becomes a used-up allowance), no question about the bill, the customer named with
    their number; 2: that fault and one on the phone, found from the chat; 3 (default): two or three
    on the phone and one or two on the account, found from the chat. Every level keeps the caller
    check before the first account change, the charges only the customer approves, the restart after
    a provisioning change and the other lines."""
    toolsets = {1: ("user__add_data_refuel", "user__get_line", "user__get_support_policy", "user__record_resolution",
                    "user__send_message", "user__set_line_roaming")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        carrier = rng.choice(CARRIERS)
        apn = f"internet.{_slug(carrier)}.net"
        wrong_apn = rng.choice([f"wap.{_slug(carrier)}.net", f"internet.{_slug(carrier)}.com",
                                f"web.{_slug(rng.choice([c for c in CARRIERS if c != carrier]))}.com",
                                f"{_slug(carrier)}.mms"])
        today = date(2026, 2, 2) + timedelta(days=rng.randrange(280))

        abroad = rng.random() < 0.5
        dev_pool = DEVICE_FAULTS if abroad else DEVICE_FAULTS[:4]
        acc_pool = ACCOUNT_FAULTS if abroad else [f for f in ACCOUNT_FAULTS if f != "roaming_not_enabled"]
        dev_faults = set(rng.sample(dev_pool, rng.choice([2, 2, 3])))
        acc_faults = set(rng.sample(acc_pool, rng.choice([1, 1, 2])))
        if level < self.levels:  # the same draws as the default, then fewer faults
            order = ["roaming_not_enabled", "data_exhausted", "line_suspended_unpaid"]  # the shortest fix first
            acc_faults = {min(acc_faults, key=order.index)}
            if level == 1 and acc_faults == {"line_suspended_unpaid"}:  # level 1 has no bills to pay
                acc_faults = {"data_exhausted"}
            dev_faults = {sorted(dev_faults)[0]} if level == 2 else set()
        faults = sorted(dev_faults | acc_faults)

        # people, lines, bills ------------------------------------------------------------------
        used_numbers: set[str] = set()

        def phone() -> str:
            while True:
                n = f"+1 {rng.choice(AREAS)}-555-01{rng.randrange(100):02d}"
                if n not in used_numbers:
                    used_numbers.add(n)
                    return n

        used_ids: set[str] = set()

        def customer_id() -> str:
            while True:
                cid = f"C-{rng.randint(100000, 999999)}"
                if cid not in used_ids:
                    used_ids.add(cid)
                    return cid

        def since() -> str:
            return f"{rng.randint(2012, 2024)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"

        first, last = fake.first_name(), fake.last_name()
        me = f"{first} {last}"
        number = phone()
        cust_id = customer_id()
        zip_code = f"{rng.randint(10000, 99999)}"
        street = fake.street_address()
        home_city, home_state = fake.city(), fake.state_abbr()
        customers = [{"id": cust_id, "name": me, "email": f"{_slug(first)}.{_slug(last)}@{fake.free_email_domain()}",
                      "address": f"{street}, {home_city}, {home_state} {zip_code}", "since": since()}]
        namesake = f"{first} {last}-{fake.last_name()}" if rng.random() < 0.5 else f"{first} {last}"
        customers.append({"id": customer_id(), "name": namesake,
                          "email": f"{_slug(namesake)}@{fake.free_email_domain()}",
                          "address": fake.address().replace("\n", ", "), "since": since()})
        for _ in range(rng.randint(2, 4)):
            customers.append({"id": customer_id(), "name": fake.name(), "email": fake.free_email(),
                              "address": fake.address().replace("\n", ", "), "since": since()})
        plan, limit, fee = rng.choice(PLANS)
        exhausted = "data_exhausted" in faults
        suspended = "line_suspended_unpaid" in faults
        roaming_on_line = abroad and "roaming_not_enabled" not in faults
        location, country, network = rng.choice(ABROAD) if abroad else (f"{home_city}, {home_state}", "US", "")
        lines = [{
            "number": number, "customer_id": cust_id, "label": f"{first}'s phone", "plan": plan,
            "status": "suspended" if suspended else "active", "suspend_reason": "unpaid bill" if suspended else "",
            "roaming": roaming_on_line, "data_used_gb": limit if exhausted else round(limit * rng.uniform(0.15, 0.8), 1),
            "data_limit_gb": limit, "last_network": network or carrier,
        }]
        other_labels = rng.sample([f"{fake.first_name()}'s phone", "Tablet", "Car hotspot",
                                   f"{fake.first_name()}'s phone", "Work phone"], rng.randint(1, 2))
        other_suspended = rng.random() < 0.4
        for k, label in enumerate(other_labels):
            p2, l2, _ = rng.choice(PLANS)
            sus = other_suspended and k == 0
            lines.append({"number": phone(), "customer_id": cust_id, "label": label, "plan": p2,
                          "status": "suspended" if sus else "active", "suspend_reason": "unpaid bill" if sus else "",
                          "roaming": rng.random() < 0.3, "data_used_gb": round(l2 * rng.uniform(0.1, 0.9), 1),
                          "data_limit_gb": l2, "last_network": carrier})
        for c in customers[1:]:
            p2, l2, _ = rng.choice(PLANS)
            lines.append({"number": phone(), "customer_id": c["id"], "label": "Phone", "plan": p2,
                          "status": "active", "roaming": False, "data_used_gb": round(l2 * 0.5, 1),
                          "data_limit_gb": l2, "last_network": carrier})

        def month(k: int) -> date:  # the bill period k months before this month
            y, m = today.year, today.month - k
            while m <= 0:
                y, m = y - 1, m + 12
            return date(y, m, 1)

        bills: list[dict] = []
        n_overdue = rng.choice([1, 1, 2]) if suspended else 0
        if level == 1:
            n_overdue = min(n_overdue, 1)

        def add_bills(line: dict, overdue: int) -> None:
            for k in range(4, 0, -1):
                period = month(k)
                due = period + timedelta(days=40)
                status = "overdue" if k <= overdue else "paid"
                amount = round(rng.choice([fee, fee, fee + rng.uniform(2, 30)]), 2)
                bills.append({"id": f"B-{rng.randint(1000000, 9999999)}", "number": line["number"],
                              "period": period.strftime("%Y-%m"), "amount": amount,
                              "due": due.isoformat() if due < today else (today - timedelta(days=3)).isoformat(),
                              "status": status})
            bills.append({"id": f"B-{rng.randint(1000000, 9999999)}", "number": line["number"],
                          "period": month(0).strftime("%Y-%m"), "amount": round(fee, 2),
                          "due": (today + timedelta(days=rng.randint(5, 20))).isoformat(), "status": "open"})

        add_bills(lines[0], n_overdue)
        for k, line in enumerate(lines[1:1 + len(other_labels)]):
            add_bills(line, 1 if (other_suspended and k == 0) else 0)
        seen_ids: set[str] = set()
        for b in bills:  # ids must be unique
            while b["id"] in seen_ids:
                b["id"] = f"B-{rng.randint(1000000, 9999999)}"
            seen_ids.add(b["id"])
        overdue_ids = [b["id"] for b in bills if b["number"] == number and b["status"] == "overdue"]
        open_bill = next(b for b in bills if b["number"] == number and b["status"] == "open")
        others = [ln["number"] for ln in lines[1:]]

        refuel_gb = rng.choice([1, 2, 2, 3])
        device = {
            "number": number, "airplane": int("airplane_mode_on" in faults),
            "mobile_data": int("mobile_data_off" not in faults),
            "data_roaming": int(abroad and "device_roaming_off" not in faults),
            "apn": wrong_apn if "apn_misconfigured" in faults else apn,
            "network_mode": mobile.SLOW_MODE if "network_mode_2g_only" in faults else mobile.AUTO_MODE,
            "country": country, "registered": 0, "network": network or carrier, "bars": rng.randint(2, 4),
            "rat": rng.choice(["LTE", "5G", "4G"]),
            "speed": f"{rng.uniform(20, 180):.1f}/{rng.uniform(5, 40):.1f}/{rng.randint(14, 60)}",
        }
        config = {"carrier": carrier, "apn": apn, "home_country": "US", "currency": "USD",
                  "price_per_gb": rng.choice([5, 6, 8, 10]), "max_refuel_gb": 5}
        facts = {"number": number, "zip": zip_code, "location": location, "abroad": abroad,
                 "model": rng.choice(MODELS), "refuel_gb": refuel_gb, "asks_next_bill": level > 1}
        who = persona(rng, me)

        def build(root: Path) -> None:
            mobile.create(root / "state" / "user.sqlite", persona=who, facts=facts, config=config,
                          customers=customers, lines=lines, bills=bills, device=device, patience=30, seed=seed)

        rng.choice(["Hey", "Hi", "Morning"])  # once picked the greeting; kept so the main stream stays as it was
        w = phrasing_rng(self.name, seed)
        caller = f"{me} (customer {cust_id}, line {number})" if level == 1 else me
        greet = say(w, "Hey", "Hi", "Morning", "Hello")
        take = say(w, f"{greet}, could you take the chat that just came in? {caller} says mobile data on their "
                      f"phone stopped working.",
                   f"{greet}! A chat just came in from {caller}: mobile data on their phone stopped working. Could "
                   f"you take it?",
                   f"{greet}, there's a new chat for you: {caller} says their phone's mobile data stopped working.")
        desk = say(w, f"You're on the {carrier} customer desk today, and the support policy is in the back office.",
                   f"Today you're covering the {carrier} customer desk; the support policy is in the back office.",
                   f"The support policy is in the back office, and you're on the {carrier} customer desk today.")
        fix = say(w, "Get them back online (they're waiting in the chat, so you'll have to walk them through "
                     "anything on the phone), and record the resolution on their line before you wrap up.",
                  "They're waiting in the chat, so you'll have to walk them through anything on the phone. Get "
                  "them back online, and before you wrap up, record the resolution on their line.",
                  "Please get them back online; anything on the phone you'll have to walk them through, since "
                  "they're waiting in the chat. Record the resolution on their line before you wrap up.")
        bye = say(w, "Thanks!", "Thank you!", "Cheers!")
        if level == 1:  # nothing to find on the phone
            fix = "Get them back online (only they can touch their phone) and record the resolution on their line."
        instruction = " ".join([take, desk, fix, bye])

        # the reference solution ------------------------------------------------------------------
        def solve_one():
            """Level 1: one fault on the account, the customer and line named in the instruction."""
            (fault,) = acc_faults
            yield ToolCall("user__get_support_policy", {}, "The rules first.")
            yield ToolCall("user__get_line", {"number": number}, "The line's status, roaming and data.")
            ask = (f"Hi {first}, {carrier} support here. Before I change anything, please confirm the account "
                   "holder's full name and the billing ZIP code.")
            if fault == "data_exhausted":  # (an offer changes nothing yet)
                ask += (f" You've used all this month's data: a refuel is {config['price_per_gb']} USD per GB. How "
                        "many GB would you like?")
            yield ToolCall(SEND, {"text": ask}, "Verify the caller first, as the policy requires.")
            last = ""
            if fault == "roaming_not_enabled":
                yield ToolCall("user__set_line_roaming", {"number": number, "enabled": True},
                               "They are abroad: enable roaming.")
            if fault == "data_exhausted":
                yield ToolCall("user__add_data_refuel", {"number": number, "gb": refuel_gb},
                               f"The {refuel_gb} GB they asked for.")
                last = "I've sent the refuel charge to your phone: please approve it. "
            last += "Then please restart your phone so it reconnects to the network"
            last += ", run a speed test and tell me the result."
            yield ToolCall(SEND, {"text": last}, "Approve, restart, test.")
            yield ToolCall("user__record_resolution", {
                "number": number, "causes": faults,
                "note": "Fixed on the account; speed test OK."}, "Record the cause.")
            return f"Data works again; cause recorded: {fault}."

        bill_answer = (f"About your other question: your next bill is {open_bill['amount']:.2f} USD, due on "
                       f"{long_date(date.fromisoformat(open_bill['due']))}.")

        def solve():
            if level == 1:
                return (yield from solve_one())
            yield ToolCall("user__get_support_policy", {}, "Read the support policy before touching anything.")
            yield ToolCall(SEND, {"text": f"Hi {first}, this is {carrier} support. Sorry to hear your mobile "
                                          "data isn't working. What's the phone number of the affected line?"},
                           "Greet the customer and ask which line is affected.")
            hits = json.loads((yield ToolCall("user__find_customer", {"query": number},
                                              "Look the customer up by the number they gave.")))
            cid = hits[0]["customer_id"]
            yield ToolCall("user__get_customer", {"customer_id": cid}, "See the customer's lines.")
            yield ToolCall(SEND, {"text": "Before I make any changes on the account, could you confirm the "
                                          "account holder's full name and the ZIP code of the billing address?"},
                           "Verify the caller against the account, as the policy requires.")
            yield ToolCall("user__get_line", {"number": number}, "Check the affected line's status, roaming and data.")
            yield ToolCall("user__list_bills", {"customer_id": cid}, "Check for overdue bills on the line.")
            yield ToolCall(SEND, {"text": "Thanks. Are you abroad at the moment? And what does the status bar at "
                                          "the top of your screen show?"},
                           "Ask where they are and what the phone shows.")
            yield ToolCall(SEND, {"text": "Could you also run a speed test (any speed test app) and tell me exactly "
                                          "what it says?"}, "Reproduce the problem before changing anything.")
            if "airplane_mode_on" in faults:
                yield ToolCall(SEND, {"text": "That airplane icon means airplane mode is on. Please turn airplane "
                                              "mode off and tell me what the status bar shows now."},
                               "Airplane mode is on: have them switch it off.")
            yield ToolCall(SEND, {"text": "Please open your network settings and tell me whether mobile data and "
                                          "data roaming are on, and which preferred network type is selected."},
                           "Check the phone's data switches.")
            if "mobile_data_off" in faults:
                yield ToolCall(SEND, {"text": "Mobile data is off: please switch mobile data on."},
                               "Mobile data is off on the phone.")
            if "device_roaming_off" in faults:
                yield ToolCall(SEND, {"text": "Since you're abroad, please switch data roaming on in the same "
                                              "settings page."}, "Data roaming is off on the phone while abroad.")
            if "network_mode_2g_only" in faults:
                yield ToolCall(SEND, {"text": "2G only is far too slow for data. Please set the preferred network "
                                              f"type to {mobile.AUTO_MODE}."}, "Fix the network type.")
            if dev_faults - {"airplane_mode_on", "apn_misconfigured"}:
                yield ToolCall(SEND, {"text": "Thanks. What does the status bar at the top show now?"},
                               "See what changed on the phone.")
            yield ToolCall(SEND, {"text": "Next, please open the Access Point Names (APN) settings and tell me "
                                          "which APN is selected."}, "Check the APN.")
            if "apn_misconfigured" in faults:
                yield ToolCall(SEND, {"text": f"That APN is wrong; it should be {apn}. Please reset the APN "
                                              "settings to default."}, "Fix the APN.")
            yield ToolCall(SEND, {"text": "Let's see whether the phone side is sorted: please run a speed test "
                                          "and tell me the result."}, "Test before touching the account.")
            if suspended:
                yield from _ask_payment(overdue_ids)
                yield ToolCall("user__list_charges", {"number": number}, "Check the payment went through.")
                yield ToolCall("user__resume_line", {"number": number}, "Resume the line now the bills are paid.")
            if "roaming_not_enabled" in faults:
                yield ToolCall("user__set_line_roaming", {"number": number, "enabled": True},
                               "They confirmed they are abroad: enable roaming on the line.")
            if exhausted:
                yield ToolCall(SEND, {"text": f"You've used all of this month's data. I can add a data refuel at "
                                              f"{config['price_per_gb']} USD per GB. How many GB would you like?"},
                               "Agree the refuel amount with the customer.")
                yield ToolCall("user__add_data_refuel", {"number": number, "gb": refuel_gb},
                               f"Add the {refuel_gb} GB they asked for.")
                yield ToolCall(SEND, {"text": "I've sent the refuel charge to your phone. Please approve it."},
                               "They approve the refuel charge.")
                yield ToolCall("user__list_charges", {"number": number}, "Check the refuel charge was approved.")
            yield ToolCall("user__get_line", {"number": number}, "Verify the line is in order now.")
            yield ToolCall(SEND, {"text": "Please restart your phone so it reconnects to the network, then tell me "
                                          "what the status bar shows."}, "Restart so the phone re-registers.")
            yield ToolCall(SEND, {"text": "Now please run a speed test and tell me the result."},
                           "Confirm data works end to end.")
            yield ToolCall(SEND, {"text": bill_answer}, "Answer the billing question from the start of the chat.")
            yield ToolCall("user__record_resolution", {
                "number": number, "causes": faults,
                "note": "Walked the customer through the phone settings, fixed the account side and confirmed "
                        "with a speed test."}, "Record the root causes on the line.")
            yield ToolCall(SEND, {"text": "You're all set. Is there anything else I can help with?"},
                           "Close the chat politely.")
            return f"{me}'s data works again on {number}; causes recorded: {', '.join(faults)}."

        # perturbations: the oracle with one mistake each -------------------------------------------
        def says(fragment: str):
            """Messages to the customer that hold ``fragment``."""
            return lambda call: call.name == SEND and fragment in str(call.arguments.get("text", ""))

        fix_on_phone = {"airplane_mode_on": "turn airplane mode off", "mobile_data_off": "switch mobile data on",
                        "device_roaming_off": "switch data roaming on", "apn_misconfigured": "reset the APN settings",
                        "network_mode_2g_only": "set the preferred network type"}
        fix_on_account = {"line_suspended_unpaid": "user__resume_line", "data_exhausted": "user__add_data_refuel",
                          "roaming_not_enabled": "user__set_line_roaming"}
        restart = says("restart your phone")

        def restart_only(args: dict) -> dict:  # level 1 asks for the restart and the speed test in one message
            return {**args, "text": args["text"].replace(", run a speed test and tell me the result.", ".")}

        # the first account fault's fix left out (level 1 has no fault on the phone: its data stays down too)
        unfixed = perturb.drop(solve, perturb.on(fix_on_account[sorted(acc_faults)[0]], number=number))
        flawed = {
            "data_working": lambda: unfixed if level == 1 else
            perturb.drop(solve, says(fix_on_phone[sorted(dev_faults)[0]])),
            "account_fixed": lambda: unfixed,
            "other_lines_untouched": lambda: perturb.insert(solve, ToolCall(
                "user__set_line_roaming", {"number": lines[1]["number"], "enabled": not lines[1]["roaming"]},
                "Adjust roaming on the family line too."), before=restart),
            "causes_recorded": lambda: perturb.change(solve, perturb.on("user__record_resolution"),
                                                      causes=["apn_misconfigured"] if level == 1 else faults[:-1]),
            "caller_verified": lambda: perturb.drop(solve, says("ZIP code")),
            "verified_after_fix": lambda: perturb.change(solve, restart, restart_only) if level == 1 else
            perturb.drop(solve, perturb.on(SEND, text="Now please run a speed test and tell me the result.")),
            "bill_question_answered": lambda: perturb.drop(solve, perturb.on(SEND, text=bill_answer)),
            "charges_by_policy": lambda: perturb.insert(solve, ToolCall(
                "user__send_payment_request", {"bill_id": open_bill["id"]}, "Collect this month's bill too."),
                ToolCall(SEND, {"text": "Please approve the payment request on your phone."}, "Have them approve it."),
                before=restart),
        }

        # grading ---------------------------------------------------------------------------------------
        seeded_lines = {ln["number"]: ln for ln in lines}
        seeded_bills = {b["id"]: b for b in bills}

        def line_now(world, num: str) -> dict:
            return next(r for r in user_state.rows(world, "lines") if r["number"] == num)

        def check_working(world, traj):
            st = mobile.status(world)
            return st["internet"], "" if st["internet"] else f"phone status: {st}"

        def check_account(world, traj):
            ln = line_now(world, number)
            problems = []
            if ln["status"] != "active":
                problems.append("line still suspended")
            if bool(ln["roaming"]) != abroad:
                problems.append(f"roaming is {'on' if ln['roaming'] else 'off'} (customer abroad: {abroad})")
            want = refuel_gb if exhausted else 0
            if ln["refuel_gb"] != want:
                problems.append(f"refuel {ln['refuel_gb']} GB, expected {want}")
            bills_now = {b["id"]: b for b in user_state.rows(world, "bills")}
            unpaid = [bid for bid in overdue_ids if bills_now[bid]["status"] != "paid"]
            if unpaid:
                problems.append(f"overdue bills unpaid: {unpaid}")
            return not problems, "; ".join(problems)

        def line_key(ln: dict) -> tuple:
            return (ln["status"], ln.get("suspend_reason") or "", int(bool(ln.get("roaming"))),
                    float(ln.get("refuel_gb") or 0), int(ln.get("provision") or 0), float(ln["data_limit_gb"]))

        def check_others(world, traj):
            for num in others:
                if line_key(line_now(world, num)) != line_key(seeded_lines[num]):
                    return False, f"line {num} changed"
            for b in user_state.rows(world, "bills"):
                if b["number"] != number and b["status"] != seeded_bills[b["id"]]["status"]:
                    return False, f"bill {b['id']} of line {b['number']} changed"
            return True

        def check_causes(world, traj):
            recs = [r for r in user_state.rows(world, "resolutions", "id") if r["number"] == number]
            if not recs:
                return False, "no resolution recorded on the line"
            got = sorted(json.loads(recs[-1]["causes"]))
            return got == faults, f"recorded {got}, expected {faults}"

        def check_verified(world, traj):
            return confirmed_after_changes(
                world, traj,
                lambda a: (a["actor"] == "agent" and a["tool"] in ("resume_line", "set_line_roaming"))
                or (a["actor"] == "user" and a["tool"] in DEVICE_CHANGES),
                lambda a: a["actor"] == "user" and a["tool"] == "run_speed_test"
                and a["result"].startswith("The speed test worked"),
                "speed test")

        def check_caller(world, traj):
            convo = user_state.conversation(world)
            sent, told = 0, None
            for m in convo:
                if m["role"] == "agent":
                    sent += 1
                elif zip_code in m["text"]:
                    told = sent
                    break
            changes = [a["message"] for a in user_state.actions(world, actor="agent")]
            if not changes:
                return False, "no change was made on the account"
            if told is None:
                return False, "the caller never confirmed the billing ZIP code"
            return told <= min(changes), f"ZIP confirmed after message {told}, first change after {min(changes)}"

        def check_bill_answer(world, traj):
            due = date.fromisoformat(open_bill["due"])
            # the customer's own next bill: a message reciting every bill on the account answers nothing
            mine = {b["amount"] for b in bills if b["number"] == number}
            foreign = {b["amount"] for b in bills if b["number"] != number} - mine
            for c in traj.calls(SEND, ok_only=True):
                text = str(c.arguments.get("text", "")) if isinstance(c.arguments, dict) else ""
                if mentions_amount(text, open_bill["amount"]) and mentions_date(text, due) \
                        and not any(mentions_amount(text, a) for a in foreign):
                    return True
            return False, f"no message gave the next bill ({open_bill['amount']:.2f}, due {due})"

        def check_charges(world, traj):
            for c in traj.calls("user__send_payment_request", ok_only=True):
                bid = str(c.arguments.get("bill_id", "")).strip() if isinstance(c.arguments, dict) else None
                if bid not in overdue_ids:
                    return False, f"payment requested for bill {bid}, which is not an overdue bill of the line"
            refuels = [r for r in user_state.rows(world, "charges", "id")
                       if r["kind"] == "refuel" and r["status"] == "approved"]
            if len(refuels) > (1 if exhausted else 0):
                return False, f"{len(refuels)} refuels charged"
            for r in refuels:
                if r["number"] != number or r["gb"] != refuel_gb:
                    return False, f"refuel of {r['gb']} GB on {r['number']}, not {refuel_gb} GB on {number}"
            return True

        criteria = [
            Criterion("data_working", "The customer's phone has working mobile internet at the end.",
                      "final_state", check_working, 2.0),
            Criterion("account_fixed", "The affected line is active, roaming matches where the customer is, "
                      "overdue bills are paid and the agreed refuel (only if needed) is on it.",
                      "final_state", check_account, 2.0),
            Criterion("other_lines_untouched", "No other line or its bills changed.",
                      "final_state", check_others, 1.0, guard=True),
            Criterion("causes_recorded", "A resolution on the line records exactly the root causes.",
                      "final_state", check_causes, 1.0),
            Criterion("caller_verified", "The caller confirmed the billing ZIP code before the first change "
                      "on the account.", "process", check_caller, 1.0,
                      requires=("account_fixed",)),
            Criterion("verified_after_fix", "After the last change, the customer ran a speed test that succeeded.",
                      "process", check_verified, 1.0,
                      requires=("data_working",)),
            Criterion("bill_question_answered", "The agent told the customer the next bill's amount and due date.",
                      "process", check_bill_answer, 1.0),
            Criterion("charges_by_policy", "Payment requests only for the line's overdue bills; at most one refuel "
                      "charged, only if needed, of the amount the customer wanted.",
                      "process", check_charges, 1.0, guard=True),
        ]
        if level == 1:  # the customer asks nothing about the bill
            criteria = [c for c in criteria if c.id != "bill_question_answered"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"number": number, "faults": faults, "abroad": abroad, "overdue_bills": overdue_ids,
                  "refuel_gb": refuel_gb if exhausted else 0, "other_lines": others},
        )
