"""Document drafting: a new-joiner FAQ assembled from policy documents and a leadership thread.

The request arrives by mail: a list of questions, a title and a path. Answers live in four
current policy documents (next to an archive of superseded versions and an unapproved draft),
except where a leadership mail thread agreed changes the documents do not show yet: one
proposal accepted as proposed, one accepted at a counter-offer, one rejected. The FAQ takes
one heading per question with the answer under it, ends with the sources, and the requester
gets a reply when it is ready.

Traps beside the thread, each drawn per seed at levels 2-3 (``TRAP_ODDS``; level 1 keeps the stale
sources all): superseded copies in the archive (``archived_docs``), an unapproved draft
(``draft_doc``), an old mail with outdated figures (``old_note_id``), at least one of these three;
and a follow-up mail from the requester adding one more question at the end
(``added_question``, graded by ``added_question`` where there is one). Empty when absent.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import partial

from longhorizon.apps.docs.state import build_document, document_bytes, norm, read_blocks
from longhorizon.apps.mail import state as mail
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import at_most_one_mail, rng_and_faker
from longhorizon.tasks.documents import Sources, find_numbers, mentions, person, strip_dates
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.kit import files as files_kit, perturb
from longhorizon.tasks.registry import register


@dataclass(frozen=True)
class Fact:
    key: str
    doc: str
    question: str
    doc_sentence: str
    answer: str
    label: str
    unit: str
    values: tuple[int, ...]

    def amount(self, v: int) -> str:
        return self.unit.format(v=v)


FACTS = [
    Fact("remote_days", "remote", "How many days a week can I work from home?",
         "Employees may work remotely for up to {v} days in any working week, subject to business needs.",
         "You can work remotely up to {v} days per week.", "the number of remote days", "{v} days a week",
         (2, 3, 4, 5)),
    Fact("remote_notice", "remote", "How much notice do I need to give before working remotely?",
         "Remote days must be agreed with the line manager at least {v} working days in advance.",
         "Agree remote days with your manager at least {v} working days in advance.",
         "the notice for remote days", "{v} working days", (2, 3, 5, 10)),
    Fact("abroad_days", "remote", "Can I work from abroad for a while?",
         "Working from another country is permitted for up to {v} working days per calendar year, with HR approval.",
         "Yes, for up to {v} working days per calendar year, with HR approval.",
         "the working-from-abroad limit", "{v} days a year", (10, 15, 20, 25, 30)),
    Fact("allowance", "expenses", "Is there a home-office allowance?",
         "New employees may claim a one-off home-office allowance of ${v} against receipts.",
         "Yes: new employees can claim a one-off home-office allowance of ${v}.",
         "the home-office allowance", "${v}", (300, 400, 450, 500, 600, 750)),
    Fact("internet", "expenses", "Can I claim my internet costs?",
         "Home internet costs are reimbursed up to ${v} per month.",
         "Yes, internet costs are reimbursed up to ${v} per month.",
         "the internet reimbursement", "${v} a month", (20, 25, 30, 40, 50)),
    Fact("claim_deadline", "expenses", "How long do I have to submit an expense claim?",
         "Expense claims must be submitted within {v} days of the date the cost was incurred.",
         "Expense claims must be submitted within {v} days of the expense.",
         "the expense claim deadline", "{v} days", (30, 45, 60, 90, 120)),
    Fact("meal", "expenses", "What is the daily meal allowance when travelling?",
         "When travelling on company business, meals are covered up to ${v} per day.",
         "Up to ${v} per day for meals when you travel on business.",
         "the daily meal allowance", "${v} a day", (35, 40, 50, 60, 75)),
    Fact("laptop_report", "it", "What should I do if my laptop is lost or stolen?",
         "A lost or stolen device must be reported to the IT service desk within {v} hours.",
         "Report it to the IT service desk within {v} hours.",
         "the deadline for reporting a lost laptop", "{v} hours", (2, 4, 12, 24)),
    Fact("refresh", "it", "How often is my laptop replaced?",
         "Laptops are replaced on a {v}-year refresh cycle.",
         "Laptops are refreshed every {v} years.", "the laptop refresh cycle", "{v} years", (2, 3, 4, 5, 6)),
    Fact("return_days", "it", "When do I have to return my equipment if I leave?",
         "Leavers must return all company equipment within {v} days of their last working day.",
         "Return all equipment within {v} days of your last working day.",
         "the equipment return window", "{v} days", (3, 5, 7, 10, 14)),
    Fact("annual_leave", "leave", "How many days of annual leave do I get?",
         "Full-time employees are entitled to {v} days of paid annual leave per year, plus public holidays.",
         "Full-time employees get {v} days of paid annual leave a year, plus public holidays.",
         "annual leave", "{v} days", (20, 22, 25, 26, 28, 30)),
    Fact("carry_over", "leave", "Can I carry over unused holiday?",
         "Up to {v} days of unused leave may be carried over into the next leave year.",
         "Yes, up to {v} unused days can be carried over into the next year.",
         "the carry-over limit", "{v} days", (3, 5, 8, 10, 12)),
    Fact("sick_note", "leave", "When do I need a doctor's note for sick leave?",
         "A medical certificate is required after {v} consecutive calendar days of absence.",
         "You need a doctor's note after {v} consecutive calendar days off sick.",
         "the doctor's note threshold", "{v} days", (3, 4, 5, 7, 8)),
    Fact("volunteering", "leave", "Do we get paid volunteering days?",
         "Every employee may take {v} paid volunteering days per year.",
         "Yes, everyone gets {v} paid volunteering days per year.", "volunteering days", "{v} days a year",
         (2, 3, 4, 5)),
]
DOCS = {
    "remote": ("remote_work_policy", "Remote Work Policy", ["1. Scope", "2. Scheduling remote work", "3. Working abroad",
                                                            "4. Security at home"]),
    "expenses": ("expenses_policy", "Expenses Policy", ["1. Scope", "2. Home working costs", "3. Travel",
                                                       "4. Submitting claims"]),
    "it": ("it_equipment_policy", "IT Equipment Policy", ["1. Scope", "2. Your devices", "3. Incidents",
                                                          "4. Leaving the company"]),
    "leave": ("leave_policy", "Leave Policy", ["1. Scope", "2. Annual leave", "3. Sickness", "4. Other leave"]),
}
SECTION_OF = {  # which numbered section of its document each fact sits in
    "remote_days": 1, "remote_notice": 1, "abroad_days": 2, "allowance": 1, "internet": 1, "meal": 2,
    "claim_deadline": 3, "refresh": 1, "laptop_report": 2, "return_days": 3, "annual_leave": 1,
    "carry_over": 1, "sick_note": 2, "volunteering": 3,
}
TRAP_ODDS = (("archive", 0.6), ("draft", 0.6), ("old_note", 0.6), ("followup", 0.45))
"""Levels 2-3: each trap in the World with this chance (one of the stale sources drawn when none is)."""
COMPANIES = ["Northwind", "Contoso", "Fabrikam", "Tailspin", "Woodgrove", "Litware", "Adatum", "Proseware",
             "Lucerne", "Wingtip", "Alpine", "Coho"]
FILLER = [
    "This policy applies to all permanent and fixed-term employees.",
    "Managers are responsible for applying this policy fairly and consistently.",
    "Questions about this policy should be raised with the People team.",
    "Exceptions require written approval from the relevant director.",
    "This policy is reviewed at least once a year.",
    "Breaches of this policy may be handled under the disciplinary procedure.",
    "Records are kept in line with the data retention schedule.",
    "Local law takes precedence where it gives employees more favourable terms.",
]


@register
class NewJoinerFaq(TaskFamily):
    name = "new_joiner_faq"
    category = "document drafting"
    apps = ("mail", "docs", "files")
    description = (
        "Assemble an FAQ document from current policy documents and the changes agreed in a leadership "
        "mail thread (accepted, counter-offered, rejected), then reply to the requester."
    )

    levels = 3
    """1: one question the policies answer (the archive, the draft and an old note in the mail
    give stale figures), no leadership thread and no Sources section, and a smaller World: the one
    current policy it needs among the stale copies, without boilerplate, and no newsletter; 2: the three questions the
    leadership thread changed (accepted, counter-offered, rejected) and one more, with Sources;
    3 (default): four to six more questions."""
    level_apps = {1: ("mail", "docs")}
    """Level 1 writes the FAQ with the docs tools only (no files tools)."""
    toolsets = {1: (
        "docs__append_paragraph", "docs__create_document", "docs__list_documents", "docs__read_document",
        "mail__list_messages", "mail__read_message", "mail__reply",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        company = rng.choice(COMPANIES)
        domain = f"{company.lower()}-group.com"

        def who():
            name = person(fake)
            first, last = name.split(" ", 1)
            return name, f"{first.lower()}.{last.lower().replace(' ', '')}@{domain}"

        me, requester, hr_dir, cfo, coo = who(), who(), who(), who(), who()
        today = dt.date(2026, 2, 2) + dt.timedelta(days=rng.randint(0, 250))
        traps = {k for k, odds in TRAP_ODDS if rng.random() < odds}
        if not traps & {"archive", "draft", "old_note"}:
            traps.add(rng.choice(["archive", "draft", "old_note"]))
        if level == 1:  # the archive, the draft and the old note; no thread to follow up
            traps = {"archive", "draft", "old_note"}

        # -- which facts, their values, and what the thread does to three of them ---------------------
        changed = rng.sample(FACTS, 3)
        accepted, countered, rejected = changed
        others = [f for f in FACTS if f not in changed]
        asked = changed + rng.sample(others, rng.randint(4, 6))
        rng.shuffle(asked)
        added = rng.choice([f for f in others if f not in asked]) if "followup" in traps else None
        if level < self.levels:  # the default's draws, then fewer questions (no draw of their own)
            plain_one = next(f for f in asked if f not in changed)
            asked = [f for f in asked if f in changed or f is plain_one] if level == 2 else [plain_one]
        value: dict[str, int] = {}      # what the current document says
        current: dict[str, int] = {}    # the right answer today
        stale: dict[str, set[int]] = {}  # values that would be wrong
        proposed: dict[str, int] = {}
        for f in FACTS:
            vals = list(f.values)
            rng.shuffle(vals)
            value[f.key] = vals[0]
            current[f.key] = vals[0]
            stale[f.key] = set()
            if f is accepted:
                proposed[f.key] = current[f.key] = vals[1]
                stale[f.key].add(vals[0])
            elif f is countered:
                proposed[f.key], current[f.key] = vals[1], vals[2]
                stale[f.key] |= {vals[0], vals[1]}
            elif f is rejected:
                proposed[f.key] = vals[1]
                stale[f.key].add(vals[1])
            archive_value = next(v for v in vals if v != current[f.key] and v != value[f.key])
            stale[f.key].add(archive_value)
            value[f.key + ":archive"] = archive_value

        # -- policy documents ---------------------------------------------------------------------------
        folder = "hr/policies"
        version = {k: rng.randint(2, 5) for k in DOCS}
        draft_doc = rng.choice(sorted(DOCS))
        archived = sorted(rng.sample(sorted(DOCS), 2))

        def policy_blocks(doc_key: str, facts_value, status: str) -> list:
            stem, title, heads = DOCS[doc_key]
            fill = rng.sample(FILLER, len(FILLER))
            blocks: list = [("Title", title), status]
            for i, h in enumerate(heads):
                blocks.append(("Heading 1", h))
                sentences = [f.doc_sentence.format(v=facts_value(f)) for f in FACTS
                             if f.doc == doc_key and SECTION_OF[f.key] == i]
                if i == 0:
                    sentences = [fill[0], fill[1]] if level > 1 else [fill[0]]
                elif level > 1:  # level 1: no boilerplate after the facts
                    sentences.append(fill[(i + 1) % len(fill)])
                blocks += sentences
            return blocks

        approved_on = today - dt.timedelta(days=rng.randint(120, 300))
        files: dict[str, bytes] = {}
        current_docs: dict[str, str] = {}
        for k, (stem, title, _) in DOCS.items():
            path = f"{folder}/{stem}.docx"
            current_docs[k] = path
            status = f"Version {version[k]}.0 {chr(8212)} approved {approved_on.strftime('%-d %B %Y')}"
            files[path] = document_bytes(build_document(policy_blocks(k, lambda f: value[f.key], status), title=title))
        stale_docs: list[str] = []
        for k in archived if "archive" in traps else []:
            stem, title, _ = DOCS[k]
            path = f"{folder}/archive/{stem}_v{version[k] - 1}.docx"
            stale_docs.append(path)
            status = f"Version {version[k] - 1}.0 {chr(8212)} SUPERSEDED by version {version[k]}.0"
            files[path] = document_bytes(build_document(
                policy_blocks(k, lambda f: value[f.key + ":archive"], status), title=f"{title} (superseded)"))
        stem, title, _ = DOCS[draft_doc]
        draft_path = f"{folder}/drafts/{stem}_draft.docx" if "draft" in traps else ""
        if draft_path:
            stale_docs.append(draft_path)
            files[draft_path] = document_bytes(build_document(
                policy_blocks(draft_doc, lambda f: value[f.key + ":archive"],
                              f"DRAFT {chr(8212)} not approved, do not circulate"), title=f"{title} (draft)"))
        questions = asked + ([added] if added else [])  # the follow-up's question goes last
        used_docs = sorted({current_docs[f.doc] for f in questions})
        if level == 1:  # the current policy it needs, among the archive and the draft
            files = {p: b for p, b in files.items() if p in used_docs or p in stale_docs}
            current_docs = {k: p for k, p in current_docs.items() if p in used_docs}
        sources = Sources(lambda: files)

        # -- mail ---------------------------------------------------------------------------------------
        faq_title = f"{company} New Joiner FAQ"
        faq_path = f"hr/faq/new_joiner_faq_{today.year}.docx"
        thread_subject = f"Policy changes for {today.year} - leadership meeting"
        t0 = today - dt.timedelta(days=rng.randint(18, 40))
        stamp = lambda d, hm: f"{d.isoformat()}T{hm}:00"  # noqa: E731
        first = lambda p: p[0].split()[0]  # noqa: E731
        leaders = [hr_dir[1], cfo[1], coo[1]]
        prop_lines = [f"- {f.label}: from {f.amount(value[f.key])} to {f.amount(proposed[f.key])}" for f in changed]
        rng.shuffle(prop_lines)
        m1 = ("Hi all,\n\nAhead of Thursday's leadership meeting, these are the policy changes I'd like us to "
              "agree:\n\n" + "\n".join(prop_lines) + f"\n\nThanks,\n{first(hr_dir)}")
        m2 = (f"{first(hr_dir)},\n\n{countered.label[0].upper() + countered.label[1:]}: I can live with "
              f"{countered.amount(current[countered.key])}, but not {countered.amount(proposed[countered.key])}.\n"
              f"{rejected.label[0].upper() + rejected.label[1:]}: no, let's keep it at "
              f"{rejected.amount(value[rejected.key])} for now.\n\n{first(cfo)}")
        m3 = (f"Agree with {first(cfo)} on both points. The change to {accepted.label} is fine as proposed.\n\n"
              f"{first(coo)}")
        thread = [
            {"folder": "Inbox", "sender": hr_dir[1], "sender_name": hr_dir[0], "to": leaders[1:], "cc": [me[1]],
             "subject": thread_subject, "date": stamp(t0, "09:12"), "body": m1, "is_read": True},
            {"folder": "Inbox", "sender": cfo[1], "sender_name": cfo[0], "to": [hr_dir[1], coo[1]], "cc": [me[1]],
             "subject": f"Re: {thread_subject}", "date": stamp(t0 + dt.timedelta(days=1), "17:40"), "body": m2,
             "in_reply_to": 2, "is_read": True},
            {"folder": "Inbox", "sender": coo[1], "sender_name": coo[0], "to": [hr_dir[1], cfo[1]], "cc": [me[1]],
             "subject": f"Re: {thread_subject}", "date": stamp(t0 + dt.timedelta(days=2), "08:05"), "body": m3,
             "in_reply_to": 3, "is_read": True},
        ]
        if rng.random() < 0.5:
            thread.append({
                "folder": "Inbox", "sender": hr_dir[1], "sender_name": hr_dir[0], "to": leaders[1:], "cc": [me[1]],
                "subject": f"Re: {thread_subject}", "date": stamp(t0 + dt.timedelta(days=2), "11:30"),
                "in_reply_to": 4, "is_read": True,
                "body": (f"Thanks both. I'll update the policy documents next quarter; until then, please treat "
                         f"this thread as the record of what was decided.\n\n{first(hr_dir)}")})
        numbered = "\n".join(f"{i}. {f.question}" for i, f in enumerate(asked, start=1))
        request_body = (
            f"Hi {first(me)},\n\nNew joiners keep asking us the same question, so could you put together an FAQ "
            f"document? Save it as {faq_path} with the title \"{faq_title}\". Please put this question as a "
            f"heading (Heading 2) with the answer as a normal paragraph underneath:\n\n{asked[0].question}\n\n"
            f"The answer should come from the current policy documents in {folder}/ (not the archive or the "
            f"drafts!).\n\nJust reply to this mail when it's ready.\n\nThanks!\n{first(requester)}"
        ) if level == 1 else (
            f"Hi {first(me)},\n\nNew joiners keep asking us the same questions, so could you put together an FAQ "
            f"document? Save it as {faq_path} with the title \"{faq_title}\". Please use these questions, in this "
            f"order, each as a heading (Heading 2) with the answer as a normal paragraph underneath:\n\n{numbered}\n\n"
            f"Answers should come from the current policy documents in {folder}/ (not the archive or the "
            f"drafts!), except where leadership agreed changes in the \"{thread_subject}\" thread: those apply "
            f"already, even though the documents haven't been updated yet. Finish with a \"Sources\" heading "
            f"that lists the policy documents you took answers from, one bullet each.\n\nJust reply to this mail "
            f"when it's ready.\n\nThanks!\n{first(requester)}"
        )
        noise = [
            {"folder": "Inbox", "sender": f"events@{fake.domain_name()}", "sender_name": "HR Events Weekly",
             "to": [me[1]], "subject": "Five onboarding ideas your new joiners will love",
             "date": stamp(today - dt.timedelta(days=3), "06:00"),
             "body": "Buddy schemes, welcome lunches and more. Read the full article on our site."},
            {"folder": "Inbox", "sender": hr_dir[1], "sender_name": hr_dir[0], "to": [me[1]],
             "subject": "Old FAQ draft", "date": stamp(t0 - dt.timedelta(days=60), "14:20"), "is_read": True,
             "body": (f"Found this old note: {FACTS[3].label} used to be {FACTS[3].amount(value['allowance:archive'])} "
                      f"and {FACTS[10].label} {FACTS[10].amount(value['annual_leave:archive'])}. Probably outdated.")},
        ]
        messages = [*(noise[1:] if "old_note" in traps else []), *(thread if level > 1 else []),
                    *(noise[:1] if level > 1 else [])]
        request = {"folder": "Inbox", "sender": requester[1], "sender_name": requester[0], "to": [me[1]],
                   "subject": "New joiner FAQ", "date": stamp(today, "08:45"), "body": request_body}
        messages.append(request)
        followup = None
        if added:
            followup = {"folder": "Inbox", "sender": requester[1], "sender_name": requester[0], "to": [me[1]],
                        "subject": "Re: New joiner FAQ", "date": stamp(today, "08:57"),
                        "body": (f"Sorry, one more: could you also add \"{added.question}\" at the end, after the "
                                 f"others? Same format.\n\n{first(requester)}")}
            messages.append(followup)
        # ids are positions from 1; fix the thread's reply links accordingly
        for i, m in enumerate(messages, start=1):
            m["id"] = i
        thread_ids = [m["id"] for m in thread] if level > 1 else []
        for k, m in enumerate(thread[1:] if level > 1 else [], start=1):
            m["in_reply_to"] = thread_ids[k - 1]
        request_id = request["id"]
        if followup:
            followup["in_reply_to"] = request_id

        def build(root):
            sources.build(root)
            mail.create_mailbox(root / "state" / "mail.sqlite", me[1], me[0], messages=messages,
                                now=stamp(today, "09:00"))

        w = phrasing_rng(self.name, seed)
        asker = first(requester)
        situation = say(w, f"{asker} from People Ops mailed me this morning asking for a new joiner FAQ.",
                        f"This morning I got a mail from {asker} in People Ops: they'd like a new joiner FAQ.",
                        f"People Ops ({asker}) wrote to me first thing today asking for an FAQ for new joiners.",
                        f"I had a request this morning from {asker} (People Ops) for a new joiner FAQ.")
        ask = say(w, "Could you put it together and let them know when it's done?",
                  f"Can you put it together, then tell {asker} once it's done?",
                  f"Please put the FAQ together and let {asker} know when it's ready.",
                  "Would you write it up and let them know when it's done?")
        where = in_some_order(w, [
            say(w, "The details are in the mail.", "Their mail has all the details.",
                "Everything they want is spelled out in the mail."),
            say(w, f"The policies are in {folder}/.", f"You'll find the policies in {folder}/.",
                f"The policy documents live in {folder}/."),
        ])
        hands_off = say(w, "Please don't edit any of the policy documents.",
                        "Leave the policy documents themselves unedited.",
                        "None of the policy documents should be edited, please.")
        instruction = " ".join([situation, ask, *where, hands_off])
        data = {
            "faq": faq_path, "title": faq_title, "questions": [f.key for f in questions],
            "current": {f.key: current[f.key] for f in questions},
            "doc_value": {f.key: value[f.key] for f in questions},
            "stale": {f.key: sorted(stale[f.key]) for f in questions},
            "accepted": accepted.key, "countered": countered.key, "rejected": rejected.key,
            "used_docs": used_docs, "stale_docs": stale_docs, "current_docs": sorted(current_docs.values()),
            "request_id": request_id, "thread_ids": thread_ids, "requester": requester[1],
            "archived_docs": [p for p in stale_docs if "/archive/" in p], "draft_doc": draft_path,
            "old_note_id": noise[1]["id"] if "old_note" in traps else 0,
            "added_question": added.key if added else "", "followup_id": followup["id"] if followup else 0,
        }
        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps_at(level), build=build,
            oracle=partial(_oracle, data, level), criteria=_criteria(data, sources, level), data=data,
        )
        task.perturbations = _perturbations(data, level, task.criteria)
        return task


FACT = {f.key: f for f in FACTS}


def _is_heading(b: dict) -> bool:
    return b["type"] == "paragraph" and (norm(b["style"]).startswith("heading") or norm(b["style"]) == "title")


def _same_question(text: str, question: str) -> bool:
    a, b = norm(text).rstrip("?.! "), norm(question).rstrip("?.! ")
    return a == b or a.lstrip("0123456789.) ") == b


def answer_ok(text: str, want: int, wrong: list[int]) -> tuple[bool, str]:
    """The answer states ``want``; a wrong value may appear only after it ("$500, up from $400")."""
    nums = find_numbers(strip_dates(text))
    if want not in nums:
        return False, f"{want} not stated (numbers {nums})"
    bad = [n for n in nums if n in wrong]
    if bad and nums.index(bad[0]) < nums.index(want):
        return False, f"states {bad[0]} first"
    return True, ""


# -- grading -----------------------------------------------------------------------------------------


def _criteria(d: dict, sources: Sources, level: int) -> list[Criterion]:
    faq, questions = d["faq"], d["questions"]

    def doc(world):
        return read_blocks(world.file(faq))

    def headed(world) -> list[tuple[str, list[dict]]]:
        """(heading text, blocks up to the next heading) for every heading."""
        out: list[tuple[str, list[dict]]] = []
        for b in doc(world):
            if _is_heading(b):
                out.append((b["text"], []))
            elif out:
                out[-1][1].append(b)
        return out

    def answers(world) -> dict[str, str | None]:
        found: dict[str, str | None] = {q: None for q in questions}
        for head, body in headed(world):
            for q in questions:
                if found[q] is None and _same_question(head, FACT[q].question):
                    found[q] = " ".join(b["text"] for b in body if b["type"] == "paragraph")
        return found

    def faq_title(world, traj):
        blocks = [b for b in doc(world) if b["type"] == "paragraph" and b["text"].strip()]
        ok = bool(blocks) and norm(blocks[0]["text"]) == norm(d["title"]) and norm(blocks[0]["style"]) == "title"
        return ok, f"first paragraph {blocks[0] if blocks else None}"

    def questions_as_headings(world, traj):
        heads = [h for h, _ in headed(world)]
        missing = [FACT[q].question for q in questions if not any(_same_question(h, FACT[q].question) for h in heads)]
        extra = [h for h in heads if norm(h) not in (norm(d["title"]), "sources")
                 and not any(_same_question(h, FACT[q].question) for q in questions)]
        return not missing and not extra, f"missing: {missing}; other headings: {extra}"

    def question_order(world, traj):
        seen = []
        for h, _ in headed(world):
            for q in questions:
                if _same_question(h, FACT[q].question) and q not in seen:
                    seen.append(q)
        return seen == questions, f"order {seen}"

    def check_answers(keys: list[str]):
        def check(world, traj):
            got = answers(world)
            bad = []
            for q in keys:
                text = got.get(q)
                ok, why = answer_ok(text or "", d["current"][q], d["stale"][q]) if text else (False, "no answer")
                if not ok:
                    bad.append(f"{q}: {why}")
            return not bad, "; ".join(bad)
        return check

    plain = [q for q in questions if q not in (d["accepted"], d["countered"], d["rejected"], d["added_question"])]

    def added_question(world, traj):
        ok, why = check_answers([d["added_question"]])(world, traj)
        heads = [q for h, _ in headed(world) for q in questions if _same_question(h, FACT[q].question)]
        last = bool(heads) and heads[-1] == d["added_question"]
        return ok and last, f"{why}; questions in order {heads}, the follow-up's last: {last}"

    def sources_section(world, traj):
        body = next((b for h, b in headed(world) if norm(h) == "sources"), None)
        if body is None:
            return False, "no Sources heading"
        text = " ".join(b["text"] for b in body if b["type"] == "paragraph")
        stems = lambda p: p.rsplit("/", 1)[-1].removesuffix(".docx")  # noqa: E731
        titles = {p: next(t for s, t, _ in DOCS.values() if p.endswith(f"/{s}.docx")) for p in d["current_docs"]}

        def named(p: str) -> bool:
            return mentions(text, stems(p)) or mentions(text.replace("_", " "), stems(p).replace("_", " ")) \
                or mentions(text, titles[p])
        missing = [p for p in d["used_docs"] if not named(p)]
        stale = [p for p in d["stale_docs"] if mentions(text, stems(p))]
        return not missing and not stale, f"missing: {missing}; outdated listed: {stale}"

    def replied(world, traj):
        sent = [m for m in mail.sent_messages(world) if d["requester"] in m["to"]]
        if not sent:
            return False, "no mail to the requester"
        for m in sent:
            threaded = m["in_reply_to"] == d["request_id"] or norm(m["subject"]).startswith("re:")
            if threaded and (mentions(m["body"], faq.rsplit("/", 1)[-1]) or mentions(m["body"], faq)):
                return True
        return False, "no reply in the request's thread names the FAQ file"

    criteria = [
        Criterion("faq_title", f"{faq} opens with the title {d['title']!r}", "final_state", faq_title,
                  requires=("answers_from_policies",)),
        Criterion("questions_as_headings", "every requested question is a heading, and no others besides Sources",
                  "final_state", questions_as_headings,
                  requires=("answers_from_policies",)),
        Criterion("question_order", "the questions are in the requested order", "final_state", question_order,
                  requires=("answers_from_policies",)),
        Criterion("answers_from_policies", "answers the thread did not change match the current policy documents",
                  "final_state", check_answers(plain), 2.0),
        Criterion("accepted_change", "the change agreed as proposed is applied", "final_state",
                  check_answers([d["accepted"]])),
        Criterion("counter_offer", "the counter-offered change uses the agreed value, not the proposal",
                  "final_state", check_answers([d["countered"]])),
        Criterion("rejected_proposal", "the rejected proposal is not applied", "final_state",
                  check_answers([d["rejected"]])),
        Criterion("added_question", "the question the follow-up mail added is answered from the policies, after "
                  "the others", "final_state", added_question),
        Criterion("sources_listed", "a Sources section names every policy document used and no outdated one",
                  "final_state", sources_section,
                  requires=("answers_from_policies",)),
        Criterion("replied_to_requester", "the request was answered in its thread, naming the FAQ file",
                  "final_state", replied,
                  requires=("answers_from_policies",)),
        Criterion("at_most_one_mail", "no more than one mail was sent", "process", at_most_one_mail, guard=True),
        files_kit.unchanged(sources, description="every policy document is byte-identical"),
        files_kit.not_written(sources, description="no tool call wrote to a policy document"),
        files_kit.only_created(sources, allowed=[faq], id="only_faq_created"),
    ]
    if level == 1:  # one question from the policies: no order, no thread, no Sources section
        left_out = {"question_order", "accepted_change", "counter_offer", "rejected_proposal", "sources_listed"}
        criteria = [c for c in criteria if c.id not in left_out]
    if not d["added_question"]:
        criteria = [c for c in criteria if c.id != "added_question"]
    return criteria


# -- reference solution ------------------------------------------------------------------------------


def _answer(q: str, v: int) -> str:
    return FACT[q].answer.format(v=v)


def _oracle(d: dict, level: int = 3):
    """Read the request and the whole leadership thread, read the current policies, write the FAQ
    question by question, read it back, then reply in the request's thread. Level 1 (one
    question, no thread, no Sources) skips the thread, the Sources and the checks after writing."""
    faq, full = d["faq"], level > 1
    yield ToolCall("mail__list_messages", {"folder": "Inbox"}, "Look at the inbox.")
    yield ToolCall("mail__read_message", {"message_id": d["request_id"]}, "Read the FAQ request in full.")
    if d["followup_id"]:
        yield ToolCall("mail__read_message", {"message_id": d["followup_id"]}, "The requester's follow-up.")
    if full:
        yield ToolCall("mail__search_messages", {"query": "policy changes leadership"}, "Find the leadership thread.")
    for mid in d["thread_ids"]:
        yield ToolCall("mail__read_message", {"message_id": mid}, f"Read thread message {mid}.")
    yield ToolCall("docs__list_documents", {"folder": "hr/policies"}, "See which policy documents exist.")
    for path in d["used_docs"]:
        yield ToolCall("docs__read_document", {"path": path}, f"Read {path}.")

    yield ToolCall("docs__create_document", {"path": faq, "title": d["title"]}, "Create the FAQ with its title.")
    questions = d["questions"]
    for k, q in enumerate(questions):
        yield ToolCall("docs__append_paragraph", {"path": faq, "text": FACT[q].question, "style": "Heading 2"},
                       f"Question {k + 1}.")
        yield ToolCall("docs__append_paragraph", {"path": faq, "text": _answer(q, d["current"][q])}, "Its answer.")
    if full:
        yield ToolCall("docs__append_paragraph", {"path": faq, "text": "Sources", "style": "Heading 2"},
                       "Sources section.")
        for p in d["used_docs"]:
            yield ToolCall("docs__append_paragraph", {"path": faq, "text": p, "style": "List Bullet"}, f"Cite {p}.")
        yield ToolCall("docs__read_document", {"path": faq}, "Read the FAQ back to check it.")
    name = faq.rsplit("/", 1)[-1]
    body = f"Hi,\n\nThe new joiner FAQ is ready: {faq}. It covers all {len(questions)} questions and lists its sources."
    yield ToolCall("mail__reply", {"message_id": d["request_id"], "body": body}, f"Tell the requester {name} is ready.")
    if full:
        yield ToolCall("mail__list_messages", {"folder": "Sent"}, "Check the reply went out.")
    return f"Wrote {faq} ({len(questions)} questions) and replied to the request."


def _perturbations(d: dict, level: int, criteria: list[Criterion]) -> dict:
    """One flawed oracle per criterion, each an edit of the oracle's calls: a wrong figure, or the
    first two questions swapped, rewrites the paragraphs' texts."""
    solve, full, questions = partial(_oracle, d, level), level > 1, d["questions"]

    def retext(texts: dict[str, str]):
        return perturb.change(solve, perturb.on("docs__append_paragraph", where=lambda a: a["text"] in texts),
                              lambda a: {**a, "text": texts[a["text"]]}, count=None)

    def answers(values: dict[str, int]) -> dict[str, str]:
        """Each question's answer to the same answer stating ``values[question]``."""
        return {_answer(q, d["current"][q]): _answer(q, v) for q, v in values.items()}

    def swapped(a: str, b: str) -> dict[str, str]:
        """Question ``a``'s heading and answer in ``b``'s place, and ``b``'s in ``a``'s."""
        one = {FACT[a].question: FACT[b].question, _answer(a, d["current"][a]): _answer(b, d["current"][b])}
        return one | {v: k for k, v in one.items()}

    def before_reply(call: ToolCall):
        return perturb.insert(solve, call, before=perturb.on("mail__reply"))

    changed = acc, cnt, rej = d["accepted"], d["countered"], d["rejected"]
    policy = before_reply(
        ToolCall("docs__replace_text", {"path": d["used_docs"][0], "old": "Scope", "new": "Scope and purpose"},
                 "Tidy a heading in a policy.") if full else
        ToolCall("docs__append_paragraph", {"path": d["used_docs"][0], "text": "See also the FAQ."},
                 "Point the policy to the FAQ."))
    flawed = {
        "faq_title": lambda: perturb.change(solve, perturb.on("docs__create_document"), title="FAQ"),
        "questions_as_headings": lambda: perturb.change(
            solve, perturb.on("docs__append_paragraph", text=FACT[questions[-1]].question), style="Normal"),
        "question_order": lambda: retext(swapped(*questions[:2])),
        "answers_from_policies": lambda: retext(answers({q: d["stale"][q][0] for q in questions if q not in changed})),
        "accepted_change": lambda: retext(answers({acc: d["doc_value"][acc]})),
        "counter_offer": lambda: retext(answers({cnt: max(x for x in d["stale"][cnt] if x != d["doc_value"][cnt])})),
        "rejected_proposal": lambda: retext(answers({rej: min(d["stale"][rej])})),
        "sources_listed": lambda: perturb.change(  # an outdated copy cited, else one source left out
            solve, perturb.on("docs__append_paragraph", text=d["used_docs"][0], style="List Bullet"),
            text=d["stale_docs"][0]) if d["stale_docs"] else perturb.drop(
            solve, perturb.on("docs__append_paragraph", text=d["used_docs"][0], style="List Bullet")),
        "added_question": lambda: perturb.drop(  # the follow-up's question left out
            solve, perturb.on("docs__append_paragraph", where=lambda a: a["text"] in (
                FACT[d["added_question"]].question, _answer(d["added_question"], d["current"][d["added_question"]]))),
            count=None),
        "replied_to_requester": lambda: perturb.change(solve, perturb.on("mail__reply"),
                                                       body="Hi,\n\nThe FAQ is ready in the shared drive."),
        "at_most_one_mail": lambda: perturb.insert(
            solve, ToolCall("mail__reply", {"message_id": d["request_id"], "body": "PS: shout if anything is missing."},
                            "Add a PS."), after=perturb.on("mail__reply")),
        "sources_unchanged": lambda: policy,
        "no_source_writes": lambda: policy,
        "only_faq_created": lambda: before_reply(
            ToolCall("files__write_file", {"path": "hr/faq/notes.txt", "content": "draft answers"}, "Keep notes.")
            if full else
            ToolCall("docs__create_document", {"path": "hr/faq/notes.docx", "title": "Draft answers"}, "Keep notes.")),
    }
    return {c.id: flawed[c.id]() for c in criteria}
