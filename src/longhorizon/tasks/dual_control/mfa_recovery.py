"""Dual-control support: an employee lost the phone with their authenticator; get them back in.

The agent runs the IT helpdesk console; the employee is on chat. Policy first: identity is
verified by employee ID (a namesake shares the name) and a one-time code sent to a channel on
file, which only the employee can read (they ask for it to go to another address: policy says
no; texts are useless, the phone is gone). Then the lost phone's sessions are revoked (not the
laptop's or tablet's), MFA is reset, the account unlocked if locked, and a reset link sent; the
employee must choose a password that meets rules the reset page does not show, so the agent has
to tell them; then they sign in, scan a QR code with their new phone, and confirm they are in.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from longhorizon.apps.user import identity
from longhorizon.apps.user import state as user_state
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import rng_and_faker, slug
from longhorizon.tasks.dual_control.common import SEND, confirmed_after_changes, persona
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register

DEPARTMENTS = ["Finance", "Marketing", "Engineering", "Sales", "Legal", "Operations", "People Ops", "Procurement",
               "Customer Success", "Data & Analytics"]
TITLES = ["Analyst", "Senior Analyst", "Manager", "Engineer", "Specialist", "Coordinator", "Associate", "Lead"]
PHONES = ["iPhone 14", "iPhone 13", "Galaxy S22", "Pixel 7", "iPhone 15", "Galaxy S23"]
NEW_PHONES = ["Pixel 8", "iPhone 15", "Galaxy S24", "iPhone 16", "Pixel 9"]
LAPTOPS = ["ThinkPad T14 (Windows 11)", "MacBook Air (macOS 14)", "Dell Latitude 7440 (Windows 11)",
           "MacBook Pro (macOS 14)"]
TABLETS = ["iPad Air (iPadOS 17)", "Galaxy Tab S9 (Android 14)"]
CITIES = ["Denver, US", "Austin, US", "Chicago, US", "Boston, US", "Seattle, US", "Atlanta, US"]
WORDS = ["biscuit", "maple", "juniper", "pepper", "willow", "comet", "harbor", "saffron", "pebble", "orchid",
         "tundra", "falcon", "ember", "cobalt", "meadow", "lantern"]
FREE_MAIL = ["gmail.com", "outlook.com", "yahoo.com", "proton.me", "icloud.com", "fastmail.com"]
AGENT_CHANGES = {"revoke_session", "reset_mfa", "unlock_account", "send_password_reset_link"}
USER_CHANGES = {"set_new_password", "set_up_authenticator"}


@register
class MfaAccountRecovery(TaskFamily):
    name = "mfa_account_recovery"
    category = "dual-control support"
    apps = ("user",)
    description = (
        "An employee who lost the phone with their authenticator is locked out. Verify them by policy (employee "
        "ID plus a code only they can read), revoke the lost phone's sessions, reset MFA, have them set a "
        "compliant password and enrol a new authenticator themselves, confirm they are in, resolve the ticket."
    )

    levels = 2
    """1: the account and employee ID named in the task, one session on the lost phone, the account
    not locked and the password left alone: verify (employee ID and a code to the recovery email on
    file), revoke, reset MFA, have them enrol the new phone, resolve; 2 (default): the account found
    among namesakes, two or three lost-phone sessions, the lock, and a compliant new password the
    employee sets from rules the page does not show. Every level keeps the request for a code to a
    new address, the namesake and the devices they still have."""
    toolsets = {1: (
        "user__list_sessions", "user__reset_mfa", "user__resolve_ticket",
        "user__revoke_session", "user__send_message", "user__send_verification_code", "user__verify_code",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        company = fake.company().replace(",", "")
        first, last = fake.first_name(), fake.last_name()
        me = f"{first} {last}"
        used_ids: set[str] = set()

        def emp_id() -> str:
            while True:
                e = f"E{rng.randint(100000, 999999)}"
                if e not in used_ids:
                    used_ids.add(e)
                    return e

        def acc_id() -> str:
            return f"U{rng.randint(10000, 99999)}"

        dept = rng.choice(DEPARTMENTS)
        lost = rng.choice(PHONES)
        new_device = rng.choice([p for p in NEW_PHONES if p != lost])
        laptop = rng.choice(LAPTOPS)
        tablet = rng.choice(TABLETS) if rng.random() < 0.6 else None
        year = str(rng.randint(1965, 2001))
        for _ in range(100):
            words = rng.sample(WORDS, 4)
            if not any(p.lower() in w or w in p.lower() for w in words for p in (first, last) if len(p) >= 3):
                break
        username = f"{slug(first)}.{slug(last)}"
        recovery = f"{slug(first)}{year[-2:]}@{rng.choice(FREE_MAIL)}"
        extra = f"{slug(first)}.{slug(last)}@{rng.choice([d for d in FREE_MAIL if not recovery.endswith(d)])}"
        old_mobile = f"+1 {rng.randint(201, 989)}-555-01{rng.randrange(100):02d}"
        locked = rng.random() < 0.7
        cfg = {"company": company, "min_length": rng.choice([12, 14, 16]),
               "require_symbol": int(rng.random() < 0.6), "ban_name": int(rng.random() < 0.6)}
        habit_digits = rng.random() < 0.5
        facts = {"employee_id": "", "username": username, "department": dept, "emails": [recovery, extra],
                 "extra_email": extra, "old_mobile": old_mobile, "lost_device": lost, "new_device": new_device,
                 "kept_devices": "laptop" + (" and my tablet" if tablet else ""),
                 "old_password": f"{words[0]}{year}", "words": words, "year": year, "habit_digits": habit_digits}
        my_id = acc_id()
        facts["account_id"] = my_id
        facts["employee_id"] = emp_id()
        old_password = facts["old_password"]
        accounts = [{"id": my_id, "name": me, "employee_id": facts["employee_id"], "username": username,
                     "department": dept, "title": rng.choice(TITLES), "recovery_email": recovery, "mobile": old_mobile,
                     "status": "locked" if locked else "active", "mfa": "enrolled", "mfa_device": lost,
                     "password": old_password}]
        twin_id = acc_id()
        while twin_id == my_id:
            twin_id = acc_id()
        twin_dept = rng.choice([d for d in DEPARTMENTS if d != dept])
        twin_user = f"{slug(first)}.{slug(last)}2"
        accounts.append({"id": twin_id, "name": me, "employee_id": emp_id(), "username": twin_user,
                         "department": twin_dept, "title": rng.choice(TITLES),
                         "recovery_email": f"{slug(last)}.{slug(first)}@{rng.choice(FREE_MAIL)}",
                         "mobile": f"+1 {rng.randint(201, 989)}-555-01{rng.randrange(100):02d}",
                         "status": "locked" if rng.random() < 0.4 else "active", "mfa": "enrolled",
                         "mfa_device": rng.choice(PHONES), "password": f"{rng.choice(WORDS)}{rng.randint(10, 99)}"})
        taken = {my_id, twin_id}
        for _ in range(rng.randint(4, 7)):
            f2, l2 = (first if rng.random() < 0.3 else fake.first_name()), fake.last_name()
            aid = acc_id()
            if aid in taken or l2 == last:
                continue
            taken.add(aid)
            accounts.append({"id": aid, "name": f"{f2} {l2}", "employee_id": emp_id(),
                             "username": f"{slug(f2)}.{slug(l2)}{aid[-2:]}", "department": rng.choice(DEPARTMENTS),
                             "title": rng.choice(TITLES), "recovery_email": f"{slug(f2)}{rng.randint(1, 99)}@"
                             f"{rng.choice(FREE_MAIL)}", "mobile": f"+1 {rng.randint(201, 989)}-555-0{rng.randint(100, 999)}",
                             "status": "active", "mfa": "enrolled", "mfa_device": rng.choice(PHONES),
                             "password": f"{rng.choice(WORDS)}{rng.randint(10, 99)}"})

        # sessions --------------------------------------------------------------------------------
        city = rng.choice(CITIES)
        sessions: list[dict] = []

        def session(account: str, device: str, app: str, day: int, active: bool, where: str = city) -> dict:
            sid = f"S-{rng.randint(100000, 999999)}"
            while any(x["id"] == sid for x in sessions):
                sid = f"S-{rng.randint(100000, 999999)}"
            row = {"id": sid, "account_id": account, "device": device, "app": app, "location": where,
                   "last_seen": f"2026-03-{day:02d}T{rng.randint(7, 22):02d}:{rng.randint(0, 59):02d}", "active": active}
            sessions.append(row)
            return row

        os_of = "iOS 17" if lost.startswith("iPhone") else "Android 14"
        lost_label = f"{lost} ({os_of})"
        lost_sessions = [session(my_id, lost_label, app, rng.randint(10, 14), True)
                         for app in rng.sample(["Mail", "Teams", "Outlook", "Slack", "Authenticator"], rng.randint(2, 3))]
        kept = [session(my_id, laptop, "Browser (Chrome)", rng.randint(12, 14), True),
                session(my_id, laptop, "Desktop sync client", rng.randint(10, 14), True)]
        if tablet:
            kept.append(session(my_id, tablet, "Mail", rng.randint(8, 14), True))
        stale_phone = rng.choice([p for p in PHONES if p != lost])
        session(my_id, f"{stale_phone} ({'iOS 16' if stale_phone.startswith('iPhone') else 'Android 13'})", "Mail",
                rng.randint(1, 5), False)
        session(twin_id, f"{rng.choice(PHONES)} (iOS 17)", "Mail", rng.randint(10, 14), True)
        session(twin_id, rng.choice(LAPTOPS), "Browser (Edge)", rng.randint(10, 14), True)
        for a in accounts[2:]:
            session(a["id"], rng.choice(LAPTOPS), "Browser (Chrome)", rng.randint(10, 14), True)
        rng.shuffle(sessions)
        lost_ids = sorted(x["id"] for x in lost_sessions)
        seeded_active = {x["id"] for x in sessions if x["active"]} - set(lost_ids)

        ticket_id = f"TKT-{rng.randint(10000, 99999)}"
        other_ticket = f"TKT-{rng.randint(10000, 99999)}"
        tickets = [
            {"id": ticket_id, "account_id": None, "requester": me, "subject": "Can't sign in - lost my phone",
             "body": f"Hi IT, I lost my phone yesterday and can't get past the authenticator prompt. I'll be on chat. "
                     f"- {first}", "status": "open"},
            {"id": other_ticket, "account_id": accounts[-1]["id"], "requester": accounts[-1]["name"],
             "subject": "Printer on 3rd floor jams", "body": "The printer by the kitchen jams on every duplex job.",
             "status": "open"},
        ]
        who = persona(rng, me)

        # the password the employee ends up choosing when told every rule (proves it is acceptable)
        all_rules = {"length": cfg["min_length"], "upper": True, "digit": True, "symbol": bool(cfg["require_symbol"]),
                     "no_name": bool(cfg["ban_name"]), "no_reuse": True}
        final_pw = identity.compose(first, facts, all_rules)
        problems = identity.password_problems(
            final_pw, {k: str(v) for k, v in cfg.items()},
            {"name": me, "username": username, "password_fp": identity.fingerprint(old_password)})
        assert not problems, (seed, final_pw, problems)

        def build(root: Path) -> None:
            identity.create(root / "state" / "user.sqlite", persona=who, facts=facts, config=cfg, accounts=accounts,
                            sessions=sessions, tickets=tickets, patience=30, seed=seed)

        rng.choice((0, 1))  # once picked one of two wordings; kept so the main stream stays as it was
        if level == 1:  # the same draws as the default, then one lost-phone session, one kept, no lock
            locked = False
            accounts[0]["status"] = "active"
            drop = set(lost_ids[1:]) | {x["id"] for x in kept[1:]} | {
                x["id"] for x in sessions if x["account_id"] == my_id and not x["active"]}
            sessions[:] = [x for x in sessions if x["id"] not in drop]
            lost_ids, kept = lost_ids[:1], kept[:1]
            seeded_active -= drop
        w = phrasing_rng(self.name, seed)
        news = say(w, f"Ticket {ticket_id} just came in: {me} lost their phone and is locked out.",
                   f"Could you pick up {ticket_id}? It's {me} - lost phone, can't get past MFA.",
                   f"{me} has lost their phone and can't get past MFA any more; the ticket is {ticket_id}.",
                   f"New ticket, {ticket_id}: {me} is locked out after losing their phone.")
        chat = say(w, "They're waiting on the helpdesk chat.", "They're on chat right now.",
                   "You'll find them waiting on the helpdesk chat.")
        ask = say(w, "Can you sort them out by the book (the helpdesk policy is in the console) and close the "
                     "ticket when they're back in?",
                  "Follow the recovery policy in the console, get them back in, and resolve the ticket.",
                  "Please get them back in following the helpdesk policy in the console, then resolve the ticket "
                  "once they're in.",
                  "The console has the helpdesk policy: go by it to get them back into their account, and close "
                  "the ticket when they're back in.")
        instruction = " ".join([news, chat, ask])
        if level == 1:
            instruction = " ".join([news, chat, say(
                w, f"Their account is {my_id} (employee ID {facts['employee_id']}); someone shares their name, so "
                   "go by that.", f"It's account {my_id}, employee ID {facts['employee_id']} (watch out: another "
                   "employee has the same name).")] + [say(
                w, "Policy: before changing anything, they tell you their employee ID and read back a one-time "
                   "code you send to the recovery email on file (never elsewhere). Then end the lost phone's "
                   "sessions only, reset MFA, have them sign in and set up the authenticator on the new phone, and "
                   "resolve the ticket as mfa_reset_lost_device. The password can stay.",
                "Policy: nothing changes until they've told you their employee ID and read back a one-time code "
                "sent to the recovery email on file (no other address). Then sign out the lost phone's sessions "
                "only, reset MFA, get them to sign in and enrol the new phone, and resolve the ticket as "
                "mfa_reset_lost_device. The password can stay.")])

        rules_text = [f"at least {cfg['min_length']} characters", "at least one upper-case letter",
                      "at least one lower-case letter", "at least one digit"]
        if cfg["require_symbol"]:
            rules_text.append("at least one symbol such as !")
        if cfg["ban_name"]:
            rules_text.append("it must not contain your name or username")
        rules_text.append("and it must be different from your current password")
        rules_msg = "; ".join(rules_text)
        vague = "it must be different from your current password"

        # the reference solution ------------------------------------------------------------------
        sign_in = "Done on my side. Please sign in to your work account now."
        scan = f" When it shows a QR code, scan it with the authenticator app on your new {new_device}."

        def revoke(sid: str, note: str = "") -> ToolCall:
            return ToolCall("user__revoke_session", {"session_id": sid},
                            note or f"End session {sid} on the lost {lost}.")

        def solve_one():
            """Level 1: the account is named; one lost-phone session; the password stays."""
            yield ToolCall("user__send_verification_code", {"account_id": my_id, "channel": "email"},
                           "Send a one-time code to the recovery email on file (not the address they asked for).")
            reply = (yield ToolCall(SEND, {"text": f"Hi {first}, IT helpdesk here. I can only send codes to "
                                                   "the recovery email on file. What is your employee ID? I've "
                                                   "sent a code there: please check your email and read me the "
                                                   "code."},
                                    "Their employee ID and the code only they can read."))
            code = (re.findall(r"\b(\d{6})\b", reply) or ["000000"])[0]
            yield ToolCall("user__verify_code", {"account_id": my_id, "code": code}, "Check the code.")
            rows = json.loads((yield ToolCall("user__list_sessions", {"account_id": my_id},
                                              "Find the sessions on the lost phone.")))
            for r in rows:
                if r["active"] and r["device"].startswith(lost + " ("):
                    yield revoke(r["session_id"])
            yield ToolCall("user__reset_mfa", {"account_id": my_id}, "Remove the authenticator on the lost phone.")
            yield ToolCall(SEND, {"text": sign_in + scan},
                           "They sign in and enrol the new authenticator.")
            yield ToolCall("user__resolve_ticket", {"ticket_id": ticket_id, "resolution_code": "mfa_reset_lost_device",
                                                    "note": f"Verified by employee ID and emailed code; revoked "
                                                            f"the lost {lost}'s session; reset MFA; new "
                                                            f"authenticator enrolled by the user."},
                           "Close the ticket.")
            return f"{me} is back in: verified, lost-phone session revoked, MFA re-enrolled, {ticket_id} resolved."

        reset_link = ToolCall("user__send_password_reset_link", {"account_id": my_id},
                              "Policy: the password must change after a lost device.")
        tell_rules = ToolCall(SEND, {"text": "I've emailed a password reset link to your recovery address. Please "
                                             "open it and set a new password yourself (don't tell me what it is). "
                                             f"The rules: {rules_msg}."},
                              "They choose a compliant password; tell them the rules the page won't show.")

        def solve_two():
            yield ToolCall("user__get_helpdesk_policy", {}, "Read the recovery policy first.")
            yield ToolCall("user__get_ticket", {"ticket_id": ticket_id}, "Read the ticket.")
            yield ToolCall(SEND, {"text": f"Hi {first}, this is the IT helpdesk. I'm sorry about your phone; let's "
                                          "get you back in. First I need to verify your identity: what is your "
                                          "employee ID?"}, "Start identity verification.")
            hits = (yield ToolCall("user__find_accounts", {"query": me}, "Find the accounts with this name."))
            for aid in re.findall(r'"account_id": "(U\d+)"', hits):
                yield ToolCall("user__get_account", {"account_id": aid},
                               f"Compare account {aid}'s employee ID with the one they gave.")
            yield ToolCall("user__send_verification_code", {"account_id": my_id, "channel": "email"},
                           "Send a one-time code to the recovery email on file (not the address they asked "
                           "for: policy).")
            reply = (yield ToolCall(SEND, {"text": "Thanks, that matches. For security I can only send codes to "
                                                   "the recovery email we have on file, not to a new address. I've "
                                                   "just sent a 6-digit code there: please check your email and "
                                                   "read me the code."},
                                    "Have them read back the code only they can see."))
            code = (re.findall(r"\b(\d{6})\b", reply) or ["000000"])[0]
            yield ToolCall("user__verify_code", {"account_id": my_id, "code": code}, "Check the code.")
            yield ToolCall("user__list_sessions", {"account_id": my_id}, "See which devices are signed in.")
            yield ToolCall(SEND, {"text": "Code verified, thank you. Before I sign anything out: which device did "
                                          "you lose, and which devices do you still have?"},
                           "Confirm which sessions belong to the lost device before revoking.")
            for sid in lost_ids:
                yield revoke(sid)
            yield ToolCall("user__reset_mfa", {"account_id": my_id}, "Remove the authenticator on the lost phone.")
            if locked:
                yield ToolCall("user__unlock_account", {"account_id": my_id}, "Unlock the account.")
            yield reset_link
            yield tell_rules
            yield ToolCall(SEND, {"text": "Now please sign in to your work account and tell me what you see."},
                           "They sign in; it should prompt for a new authenticator.")
            yield ToolCall(SEND, {"text": f"Please scan the QR code with the authenticator app on your new "
                                          f"{new_device} and enter the 6-digit code it shows."},
                           "They enrol the new authenticator.")
            yield ToolCall("user__get_account", {"account_id": my_id}, "Verify the account's state.")
            yield ToolCall("user__list_sessions", {"account_id": my_id}, "Verify only the lost phone was signed out.")
            yield ToolCall(SEND, {"text": "Everything looks good on my side. Could you sign out and sign in "
                                          "once more to make sure it all works?"}, "Confirm they can get in.")
            yield ToolCall("user__resolve_ticket", {"ticket_id": ticket_id, "resolution_code": "mfa_reset_lost_device",
                                                    "note": f"Verified by employee ID and emailed code; revoked "
                                                            f"{len(lost_ids)} sessions on the lost {lost}; reset MFA"
                                                            f"{', unlocked' if locked else ''}; password changed "
                                                            f"and new authenticator enrolled by the user."},
                           "Close the ticket.")
            yield ToolCall("user__get_ticket", {"ticket_id": ticket_id}, "Check the ticket is resolved.")
            yield ToolCall(SEND, {"text": "You're all set. Have a good day!"}, "Wrap up.")
            return (f"{me} is back in: verified, lost-phone sessions revoked, MFA reset and re-enrolled, "
                    f"ticket {ticket_id} resolved.")

        # each perturbation fails one criterion: an edit of the oracle's calls
        solve = solve_one if level == 1 else solve_two

        def said(words: str):
            return perturb.on(SEND, where=lambda a: words in a["text"])

        flawed = {
            "identity_verified": perturb.drop(solve, perturb.on("user__verify_code")),
            "codes_on_file_only": perturb.change(solve, perturb.on("user__send_verification_code"), destination=extra),
            "lost_device_sessions_revoked": perturb.drop(solve, perturb.on("user__revoke_session"), count=None,
                                                         skip=0 if level == 1 else 1),
            "other_sessions_kept": perturb.insert(solve, revoke(kept[0]["id"], "End the laptop session too."),
                                                  before=perturb.on("user__reset_mfa")),
            "namesake_untouched": perturb.insert(solve, ToolCall("user__reset_mfa", {"account_id": twin_id},
                                                                 "Reset the other account as well."),
                                                 after=perturb.on("user__reset_mfa")),
            "ticket_resolved": perturb.change(solve, perturb.on("user__resolve_ticket"),
                                              resolution_code="password_reset"),
        }
        if level == 1:  # the QR code goes unmentioned; the lost phone is signed out after they sign in
            flawed["mfa_reenrolled"] = perturb.change(solve, said(sign_in), text=sign_in)
            flawed["sign_in_confirmed"] = perturb.insert(
                perturb.drop(solve, perturb.on("user__revoke_session"), count=None),
                *map(revoke, lost_ids), after=said(sign_in))
        else:  # no QR code; the password is changed after they enrol, and no sign-in follows
            flawed["mfa_reenrolled"] = perturb.drop(solve, said("scan the QR code"))
            flawed["password_changed"] = perturb.change(solve, said(rules_msg),
                                                        text=tell_rules.arguments["text"].replace(rules_msg, vague))
            flawed["sign_in_confirmed"] = perturb.insert(
                perturb.drop(perturb.drop(perturb.drop(solve, perturb.on(reset_link.name)), said(rules_msg)),
                             said("sign out and sign in once more")),
                reset_link, tell_rules, after=said("scan the QR code"))

        # grading ---------------------------------------------------------------------------------------
        seeded = {a["id"]: a for a in accounts}

        def account_now(world, aid: str) -> dict:
            return next(r for r in user_state.rows(world, "accounts") if r["id"] == aid)

        def agent_changes(world) -> list[dict]:
            return [a for a in user_state.actions(world, actor="agent", ok_only=True) if a["tool"] in AGENT_CHANGES]

        def check_verified(world, traj):
            mine = [a for a in agent_changes(world) if a["arguments"].get("account_id") == my_id]
            if not mine:
                return False, "nothing was changed on the account"
            first_change = mine[0]
            on_file = {recovery.lower(), old_mobile}
            verified = [a for a in user_state.actions(world, actor="agent", tool="verify_code", ok_only=True)
                        if a["arguments"].get("account_id") == my_id
                        and str(a["arguments"].get("destination", "")).lower() in on_file
                        and a["seq"] < first_change["seq"]]
            if not verified:
                return False, "no code sent to a channel on file was verified before the first change"
            sent, told = 0, None
            for m in user_state.conversation(world):
                if m["role"] == "agent":
                    sent += 1
                elif facts["employee_id"] in m["text"]:
                    told = sent
                    break
            if told is None or told > first_change["message"]:
                return False, "the employee ID was not confirmed before the first change"
            return True

        def check_codes(world, traj):
            for a in user_state.actions(world, actor="agent", tool="send_verification_code", ok_only=True):
                dest = str(a["arguments"].get("destination", "")).lower()
                if a["arguments"].get("account_id") != my_id or dest not in {recovery.lower(), old_mobile}:
                    return False, f"a code went to {dest} for account {a['arguments'].get('account_id')}"
            return True

        def session_rows(world) -> dict:
            return {r["id"]: r for r in user_state.rows(world, "sessions")}

        def check_lost(world, traj):
            rows = session_rows(world)
            still = [sid for sid in lost_ids if rows[sid]["active"]]
            if still:
                return False, f"still active on the lost {lost}: {still}"
            # the lost phone's sessions, not everything: revoking every session is no answer
            mine = sorted(x["id"] for x in kept if not rows[x["id"]]["active"])
            return not mine, f"also ended the sessions on devices they still have: {mine}" if mine else ""

        def check_kept(world, traj):
            rows = session_rows(world)
            ended = sorted(sid for sid in seeded_active if not rows[sid]["active"])
            return not ended, f"ended sessions that should stay: {ended}" if ended else ""

        def check_mfa(world, traj):
            a = account_now(world, my_id)
            if a["status"] != "active":
                return False, "account still locked"
            if a["mfa"] != "enrolled" or a["mfa_device"] != new_device:
                return False, f"authenticator: {a['mfa']} on {a['mfa_device'] or 'nothing'}"
            ok = user_state.actions(world, actor="user", tool="set_up_authenticator", ok_only=True)
            return bool(ok), "" if ok else "the employee never set up the authenticator"

        def check_password(world, traj):
            a = account_now(world, my_id)
            by_user = user_state.actions(world, actor="user", tool="set_new_password", ok_only=True)
            return bool(a["password_changed"] and by_user), "password not changed by the employee"

        def check_twin(world, traj):
            keys = ("status", "mfa", "mfa_device", "password_changed")
            for aid, was in seeded.items():
                if aid == my_id:
                    continue
                now = account_now(world, aid)
                if any(now[k] != was.get(k, 0) for k in keys) or now["password_fp"] != identity.fingerprint(was["password"]):
                    return False, f"account {aid} ({was['name']}) changed"
            return True

        # at level 1 enrolling the new phone is the sign-in ("... and I'm in"), as nothing follows it
        user_changes = USER_CHANGES - {"set_up_authenticator"} if level == 1 else USER_CHANGES

        def check_signed_in(world, traj):
            return confirmed_after_changes(
                world, traj,
                lambda a: (a["actor"] == "agent" and a["tool"] in AGENT_CHANGES)
                or (a["actor"] == "user" and a["tool"] in user_changes),
                lambda a: a["actor"] == "user" and (
                    (a["tool"] == "sign_in" and a["result"].startswith("I'm in"))
                    or a["tool"] == "set_up_authenticator"),
                "sign-in")

        def check_ticket(world, traj):
            t = next(r for r in user_state.rows(world, "tickets") if r["id"] == ticket_id)
            other = next(r for r in user_state.rows(world, "tickets") if r["id"] == other_ticket)
            if other["status"] != "open":
                return False, f"{other_ticket} was changed"
            return (t["status"] == "resolved" and t["resolution_code"] == "mfa_reset_lost_device",
                    f"ticket {t['status']} as {t['resolution_code'] or '-'}")

        criteria = [
            Criterion("identity_verified", "Before the first change, the caller gave the right employee ID and read "
                      "back a code sent to a channel on file, which was verified.", "process", check_verified, 2.0),
            Criterion("codes_on_file_only", "Codes went only to the caller's account channels on file.",
                      "process", check_codes, 1.0, guard=True),
            Criterion("lost_device_sessions_revoked", "Every session on the lost phone is ended (and none on the "
                      "devices they still have).", "final_state", check_lost, 1.0),
            Criterion("other_sessions_kept", "Every other active session (theirs and everyone else's) is still active.",
                      "final_state", check_kept, 1.0, guard=True),
            Criterion("mfa_reenrolled", "The account is unlocked and has a new authenticator on the new phone, set up "
                      "by the employee.", "final_state", check_mfa, 2.0),
            Criterion("password_changed", "The employee set a new, compliant password.", "final_state",
                      check_password, 1.0),
            Criterion("namesake_untouched", "No other account changed (the namesake included).", "final_state",
                      check_twin, 1.0, guard=True),
            Criterion("sign_in_confirmed", "After the last change, the employee signed in successfully.", "process",
                      check_signed_in, 1.0,
                      requires=("mfa_reenrolled",)),
            Criterion("ticket_resolved", "The ticket is resolved as mfa_reset_lost_device; other tickets untouched.",
                      "final_state", check_ticket, 1.0,
                      requires=("mfa_reenrolled",)),
        ]
        if level == 1:  # the password is left as it is
            criteria = [c for c in criteria if c.id != "password_changed"]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id] for c in criteria},
            data={"account_id": my_id, "namesake": twin_id, "employee_id": facts["employee_id"], "locked": locked,
                  "lost_sessions": lost_ids, "policy": cfg, "ticket": ticket_id},
        )
