"""Document review: work a legal review checklist through a draft services agreement.

The draft (a real .docx: numbered clauses with numbered sub-clauses, a rate-card schedule with
a table, signature lines) carries the faults the checklist names: the supplier's name is
misspelled two different ways; striking a clause means renumbering every later clause, its
sub-clauses and the cross-references to it, while references to earlier clauses must stay. The
corrected contract is saved as a new version; every paragraph the checklist does not touch must
come through unchanged. Traps, each drawn per seed at levels 2-3 (``TRAP_ODDS``, at least one;
level 1 keeps the affiliate): an affiliate with a name like the supplier's (``affiliate_kept``),
the old effective date also appearing, correctly, as the rate-card date (``rate_card_kept``),
and a later checklist item that contradicts the liability-cap item: the cap stays as drafted
and the clause gets a review comment for Legal (``cap_conflict_flagged`` in place of
``liability_cap``). ``Task.data`` names each (empty when absent).
"""

from __future__ import annotations

import datetime as dt
import re
from functools import partial

from longhorizon.apps.docs.state import build_document, document_bytes, norm, read_blocks, read_comments
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import day_month_year, parse_json, rng_and_faker
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.kit import files as files_kit, perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.documents import (
    Sources,
    find_dates,
    find_numbers,
    last_write_index,
    person,
    strip_dates,
)

# key, title, body templates. Tokens: {vendor} {client} {affiliate} {eff} {term} {cap} {ref=KEY};
# the word "Customer" is the defined term the checklist renames.
CLAUSES = {
    "definitions": ("Definitions", [
        'In this Agreement, "Services" means the services described in Schedule 1 and "Customer Data" means all '
        "data supplied by the Customer to the Supplier.",
        '"Business Day" means a day other than a Saturday, Sunday or public holiday.',
    ]),
    "services": ("Services", [
        "The Supplier shall provide the Services to the Customer with reasonable skill and care.",
        "The Customer shall give the Supplier timely access to the information it reasonably needs.",
    ]),
    "term": ("Term", [
        "This Agreement commences on the Effective Date ({eff}) and continues for an initial term of {term} months.",
        "Thereafter it renews for successive periods of twelve months unless terminated under Clause {ref=termination}.",
    ]),
    "fees": ("Fees and Payment", [
        "The Customer shall pay the fees set out in Schedule 1 within thirty days of a valid invoice.",
        "If the Customer fails to pay an undisputed amount, the Supplier may suspend the Services on written notice, "
        "without prejudice to Clause {ref=termination}.",
    ]),
    "exclusivity": ("Exclusivity", [
        "During the term the Customer shall not engage any other provider for services similar to the Services.",
        "The Supplier shall have a right of first refusal on related work commissioned by the Customer.",
    ]),
    "warranties": ("Warranties", [
        "The Supplier warrants that the Services will conform in all material respects to Clause {ref=services} "
        "and Schedule 1.",
        "Except as set out in this Clause {ref=warranties}, all warranties are excluded to the extent permitted by law.",
    ]),
    "subcontracting": ("Subcontracting", [
        "The Supplier may subcontract hosting to {affiliate}, an affiliate of {vendor}, and remains responsible "
        "for the acts of its subcontractors.",
    ]),
    "confidentiality": ("Confidentiality", [
        "Each party shall keep the other party's confidential information secret and use it only to perform "
        "this Agreement.",
        "This Clause {ref=confidentiality} does not apply to information that is or becomes public other than "
        "through a breach of it.",
    ]),
    "data_protection": ("Data Protection", [
        "The Supplier shall process Customer Data only on the documented instructions of the Customer.",
        "The Supplier shall notify the Customer without undue delay after becoming aware of a breach affecting "
        "Customer Data.",
    ]),
    "insurance": ("Insurance", [
        "{vendor} shall maintain professional indemnity insurance of not less than five million dollars.",
    ]),
    "liability": ("Limitation of Liability", [
        "Subject to Clause {ref=data_protection}, each party's total liability in any contract year is limited to "
        "the fees paid in the preceding {cap} months.",
        "Nothing in this Agreement limits liability for fraud, or for death or personal injury caused by negligence.",
    ]),
    "termination": ("Termination", [
        "Either party may terminate this Agreement on ninety days' written notice after the initial term.",
        "Clause {ref=confidentiality} and Clause {ref=liability} survive termination or expiry of this Agreement.",
    ]),
    "force_majeure": ("Force Majeure", [
        "Neither party is liable for delay caused by events beyond its reasonable control.",
    ]),
    "notices": ("Notices", [
        "Notices to the Supplier shall be sent to {vendor} at its registered office, for the attention of the "
        "General Counsel.",
        "Notices to the Customer shall be sent to {client} at the address given above, on a Business Day as "
        "defined in Clause {ref=definitions}.",
    ]),
    "governing_law": ("Governing Law", [
        "This Agreement is governed by the laws of England and Wales.",
        "The courts of England have exclusive jurisdiction over any dispute arising out of it.",
    ]),
    "entire": ("Entire Agreement", [
        "This Agreement is the entire agreement between the parties about its subject matter.",
    ]),
}
ORDER = ["definitions", "services", "term", "fees", "warranties", "subcontracting", "confidentiality",
         "data_protection", "insurance", "liability", "termination", "force_majeure", "notices", "governing_law",
         "entire"]
OPTIONAL = {"warranties", "insurance", "force_majeure", "entire"}
VENDOR_WORDS = ["Data Systems", "Cloud Services", "Digital", "Analytics", "Software", "Networks"]
AFFILIATE_WORDS = ["Data Services", "Hosting", "Infrastructure", "Cloud Operations"]
CLIENT_WORDS = ["Logistics", "Retail", "Foods", "Health", "Energy", "Freight", "Media"]
SUBCONTRACT_ALONE = ("The Supplier may subcontract hosting only with the Customer's prior written consent, and "
                     "remains responsible for the acts of its subcontractors.")
"""The subcontracting clause of a draft without an affiliate."""
TRAP_ODDS = (("affiliate", 0.6), ("rate_card", 0.6), ("cap_conflict", 0.45))
"""Levels 2-3: each trap in the draft with this chance (one drawn when none is)."""
CAP_CONFLICT = (
    "Limitation of Liability: the Supplier's mark-up keeping the cap at the fees paid in the preceding {old} "
    "months was accepted on the last negotiation call.",
    "Limitation of Liability: the commercial team agreed to leave the cap at {old} months of fees, as drafted.",
    "Liability cap: per the signed term sheet the cap is the fees paid in the preceding {old} months.",
)
"""A later checklist item that contradicts the cap item (``{old}``: the draft's months)."""
CONFLICT_RULE = ("Where two items disagree, don't choose between them: leave that wording as drafted and add a "
                 "review comment on the clause asking Legal to resolve it.")
CAP_NOTE = "Legal: two checklist items disagree on the liability cap; left as drafted, please confirm which applies."
ROLES = ["Project manager", "Solution architect", "Senior engineer", "Engineer", "Test analyst", "Trainer"]
FIXES = ("name", "eff", "term", "cap", "delete", "headings", "subclauses", "xrefs", "rename")
TOKEN = re.compile(r"\{([a-z_=]+)\}")
REF = re.compile(r"\bClause\s+(\d+)")
HEAD = re.compile(r"^\s*(\d+)\s*[.)]?\s+(.*)$")
SUB = re.compile(r"^\s*(\d+)\.(\d+)\s+")
ASKED = {1: {"name", "term"}, 2: {"name", "eff", "term", "cap", "rename", "comment"}}
"""The checklist's items below the top level (the default asks for all of them)."""
SHORT_DRAFT = {"services", "term", "subcontracting", "confidentiality", "governing_law"}
"""Level 1's clauses, each with its first sub-clause only (no cross-references), and no rate card:
the term, the affiliate's clause and a few the checklist leaves alone."""


NEEDS = {"effective_date": "eff", "rate_card_kept": "eff", "initial_term": "term", "liability_cap": "cap",
         "cap_conflict_flagged": "cap", "clause_deleted": "delete", "headings_renumbered": "delete", "subclauses_renumbered": "delete",
         "cross_references": "delete", "term_renamed": "rename", "governing_law_comment": "comment"}
"""The checklist item a criterion grades (the others grade every level)."""


def _anchor(template: str) -> str:
    """The longest literal stretch of a template: survives every fix, finds the paragraph."""
    parts = re.split(r"\{[a-z_=]+\}|Customer|Supplier", template)
    return max(parts, key=len).strip()


@register
class ContractReview(TaskFamily):
    name = "contract_checklist_review"
    category = "document review"
    apps = ("docs", "files")
    description = (
        "Apply a legal review checklist to a draft agreement: party names, dates, term, liability cap, "
        "strike a clause and renumber clauses, sub-clauses and cross-references, rename a defined term, "
        "add a review comment, and leave everything else intact in a new version."
    )

    levels = 3
    """1: fix the supplier's name (not the affiliate's) and the term in a short draft (five
    one-paragraph clauses, no rate card); 2: also the
    effective date (not the rate card's), the cap, the renamed defined term and the Governing Law
    comment; 3 (default): also strike a clause and renumber clauses, sub-clauses and references."""
    toolsets = {1: (
        "docs__read_document", "docs__replace_text", "files__copy", "files__read_file",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        asked = set(FIXES) | {"comment"} if level == self.levels else ASKED[level]
        rng, fake = rng_and_faker(seed, self.name)
        stem = fake.last_name()
        base = f"{stem} {rng.choice(VENDOR_WORDS)}"
        vendor = f"{base} Ltd"
        wrong_names = [f"{base} Inc.", f"{base} Limited"]
        affiliate = f"{stem} {rng.choice(AFFILIATE_WORDS)} GmbH"
        client = f"{fake.last_name()} {rng.choice(CLIENT_WORDS)} {rng.choice(['LLC', 'Inc.', 'Corp.'])}"
        counsel, me = person(fake), fake.first_name()
        old_eff = dt.date(2025, rng.randint(1, 12), 1)
        new_eff = dt.date(2026, rng.randint(1, 12), 1)
        old_term, new_term = rng.sample([12, 18, 24, 36, 48], 2)
        old_cap, new_cap = rng.sample([3, 6, 9, 12, 18], 2)
        traps = {k for k, odds in TRAP_ODDS if rng.random() < odds}
        traps = traps or {rng.choice([k for k, _ in TRAP_ODDS])}
        if level == 1:  # the short draft: the affiliate's clause, no rate card, no cap
            traps = {"affiliate"}
        elif "cap" not in asked:
            traps.discard("cap_conflict")
        if "affiliate" not in traps:
            affiliate = ""
        rate_date = old_eff if "rate_card" in traps else dt.date(
            2025, rng.choice([m for m in range(1, 13) if m != old_eff.month]), 1)
        clauses = dict(CLAUSES)
        if not affiliate:
            clauses["subcontracting"] = (CLAUSES["subcontracting"][0], [SUBCONTRACT_ALONE])

        keys = [k for k in ORDER if k not in OPTIONAL or rng.random() < 0.6]
        keys.insert(rng.randint(3, 5), "exclusivity")
        deleted_at = keys.index("exclusivity") + 1  # clause numbers start at 1
        if level == 1:  # the same draws as the default, then a shorter draft
            keys = [k for k in keys if k in SHORT_DRAFT]

        # which {vendor} slots carry a wrong spelling (at least one of each wrong spelling)
        short = level == 1  # each clause's first sub-clause only, no rate card
        vendor_slots = sum(t.count("{vendor}") for k in keys
                           for t in clauses[k][1][:1 if short else None]) + 2  # + preamble, signature
        wrong_at = rng.sample(range(vendor_slots), min(vendor_slots, rng.randint(2, 3)))
        slot_name = {i: wrong_names[j % 2] for j, i in enumerate(wrong_at)}
        rates = [[role, f"${rng.randint(6, 18) * 100:,}"] for role in rng.sample(ROLES, rng.randint(3, 5))]

        def render(fixes: set[str]) -> list:
            """The whole contract as build_document blocks, with the given checklist fixes applied.
            Each paragraph is (style, text, tag); tag says what it is, for graders."""
            kept = [k for k in keys if not ("delete" in fixes and k == "exclusivity")]
            old_num = {k: i for i, k in enumerate(keys, start=1)}
            new_num = {k: i for i, k in enumerate(kept, start=1)}
            slot = iter(range(vendor_slots))

            def num(k: str, which: str) -> int:
                return new_num[k] if which in fixes and "delete" in fixes else old_num[k]

            def fill(t: str, clause: str | None = None) -> str:
                def sub(m):
                    tok = m.group(1)
                    if tok == "vendor":
                        i = next(slot)
                        return vendor if "name" in fixes or i not in slot_name else slot_name[i]
                    if tok == "client":
                        return client
                    if tok == "affiliate":
                        return affiliate
                    if tok == "eff":
                        return day_month_year(new_eff if "eff" in fixes else old_eff)
                    if tok == "term":
                        return str(new_term if "term" in fixes else old_term)
                    if tok == "cap":
                        return str(new_cap if "cap" in fixes else old_cap)
                    if tok.startswith("ref="):
                        return str(num(tok[4:], "xrefs"))
                    raise KeyError(tok)
                out = TOKEN.sub(sub, t)
                return re.sub(r"\bCustomer\b", "Client", out) if "rename" in fixes else out

            blocks: list = [
                ("Title", "Master Services Agreement", "title"),
                ("Normal", fill("This Agreement is dated {eff}."), "dated"),
                ("Normal", fill('It is made between {client} (the "Customer") and {vendor} (the "Supplier").'), "parties"),
            ]
            for k in kept:
                title, bodies = clauses[k]
                blocks.append(("Heading 1", f"{num(k, 'headings')}. {title}", f"head:{k}"))
                for j, body in enumerate(bodies[:1] if short else bodies, start=1):
                    blocks.append(("Normal", f"{num(k, 'subclauses')}.{j} {fill(body, k)}", f"body:{k}:{j}"))
            blocks += [] if short else [
                ("Heading 1", "Schedule 1 - Rate card", "schedule"),
                ("Normal", f"Day rates below are as at {day_month_year(rate_date)} and exclude VAT.", "ratecard"),
                {"table": [["Role", "Day rate"]] + rates},
            ]
            blocks += [
                ("Heading 1", "Signatures", "signatures"),
                ("Normal", fill("Signed for and on behalf of {client}: ____________ Date: {eff}"), "sign:client"),
                ("Normal", fill("Signed for and on behalf of {vendor}: ____________ Date: {eff}"), "sign:vendor"),
            ]
            return blocks

        def plain(blocks: list) -> list:
            return [b if isinstance(b, dict) else (b[0], b[1]) for b in blocks]

        cap_conflict = rng.choice(CAP_CONFLICT).format(old=old_cap) if "cap_conflict" in traps else ""
        fixes = asked - {"cap"} if cap_conflict else asked  # a contradicted item: the wording stays
        draft_blocks = render(set())
        final_blocks = render(fixes)
        folder = "legal"
        slug = re.sub(r"[^a-z0-9]+", "_", client.lower()).strip("_")
        draft = f"{folder}/contracts/{slug}_msa_draft.docx"
        v2 = f"{folder}/contracts/{slug}_msa_v2.docx"
        checklist = f"{folder}/review/{slug}_msa_checklist.md"
        other = f"{fake.last_name()} {rng.choice(CLIENT_WORDS)} Inc."
        other_slug = re.sub(r"[^a-z0-9]+", "_", other.lower()).strip("_")
        other_doc = f"{folder}/contracts/{other_slug}_nda_signed.docx"
        other_list = f"{folder}/review/{other_slug}_nda_checklist.md"
        excl_title = CLAUSES["exclusivity"][0]
        gl_new = [k for k in keys if k != "exclusivity"].index("governing_law") + 1
        items = {
            "name": f"The supplier's legal name is \"{vendor}\", exactly as on the company register. Correct every "
            f"other spelling of it." + (f" {affiliate} is a separate company (an affiliate): leave it as it is."
                                        if affiliate else ""),
            "eff": f"The Effective Date is {day_month_year(new_eff)}. The draft still shows last year's date wherever "
            f"the effective date is stated (including the signature lines). The rate card date in Schedule 1 is "
            f"correct and stays.",
            "term": f"The initial term is {new_term} months.",
            "cap": f"Liability cap: the fees paid in the preceding {new_cap} months.",
            "delete": f"Clause {deleted_at} ({excl_title}) was struck in negotiation: delete it entirely, heading "
            f"and sub-clauses.",
            "headings": "Renumber the clauses after it, and their sub-clauses, so the numbering is continuous, and "
            "update every cross-reference (\"Clause 9\") to match. References to earlier clauses don't change.",
            "rename": "The defined term \"Customer\" becomes \"Client\" throughout (so \"Customer Data\" becomes "
            "\"Client Data\").",
            "cap_conflict": cap_conflict,
            "comment": "Governing Law: do not change the wording, but add a review comment on that clause asking "
            "Legal to confirm the jurisdiction.",
        }
        checklist_text = "\n".join([
            f"# Review checklist: Master Services Agreement, {client} / {vendor}",
            f"Prepared by {counsel} (Legal), {day_month_year(new_eff - dt.timedelta(days=rng.randint(10, 40)))}",
            "",
            *(f"{i}. {text}" for i, text in enumerate(
                (t for k, t in items.items() if k in asked or k == "cap_conflict" and t), start=1)),
            "",
            "Nothing else should change. " + CONFLICT_RULE,
        ]) + "\n"
        other_text = (f"# Review checklist: NDA, {other}\nPrepared by {person(fake)} (Legal)\n\n"
                      f"1. Term of confidentiality is 5 years.\n2. Governing law: New York.\n\nStatus: signed, closed.\n")
        other_blocks = [("Title", "Mutual Non-Disclosure Agreement"),
                        f"This Agreement is dated {day_month_year(old_eff)}.",
                        f'It is made between {other} and {vendor} (the "Supplier").',
                        ("Heading 1", "1. Confidentiality"),
                        "1.1 Each party shall keep the other party's confidential information secret.",
                        ("Heading 1", "2. Term"), "2.1 The obligations last five years."]

        def make() -> dict[str, bytes]:
            return {
                draft: document_bytes(build_document(plain(draft_blocks), title="Master Services Agreement")),
                other_doc: document_bytes(build_document(other_blocks, title="Mutual NDA")),
                checklist: checklist_text.encode(),
                other_list: other_text.encode(),
            }

        sources = Sources(make)
        gl_tags = {"head:governing_law", "body:governing_law:1", "body:governing_law:2"}
        data = {
            "draft": draft, "v2": v2, "checklist": checklist, "vendor": vendor, "wrong_names": wrong_names,
            "affiliate": affiliate, "client": client, "old_eff": day_month_year(old_eff), "new_eff": day_month_year(new_eff),
            "old_term": old_term, "new_term": new_term, "old_cap": old_cap, "new_cap": new_cap,
            "deleted": deleted_at, "keys": keys, "gl_number": gl_new, "gl_tags": sorted(gl_tags),
            "rate_card_old_date": day_month_year(old_eff) if "rate_card" in traps else "",
            "cap_conflict": cap_conflict,
        }
        w = phrasing_rng(self.name, seed)
        back = say(w, f"Legal has sent back their review checklist for the {client} services agreement ({checklist}).",
                   f"the review checklist for the {client} services agreement is back from Legal: it's {checklist}.",
                   f"Legal's review of the {client} services agreement came back as a checklist, saved at {checklist}.",
                   f"we've had Legal's checklist back on the {client} services agreement (see {checklist}).")
        work = say(w, f"Could you work through it on the draft ({draft})?",
                   f"Can you apply each item on it to the draft, {draft}?",
                   f"Please go through it item by item against the draft at {draft}.",
                   f"Would you take the draft ({draft}) and work the checklist through it?")
        save = say(w, f"Save the corrected contract as {v2} and keep the draft exactly as it is.",
                   f"The corrected contract goes in a new file, {v2}; the draft itself stays exactly as it is.",
                   f"Leave the draft exactly as it is and save your corrected version as {v2}.")
        only = say(w, "Please change only what the checklist asks for.",
                   "Nothing beyond what the checklist asks for should change.",
                   "Only the changes the checklist asks for, please: everything else stays as written.")
        check = say(w, "Give the new version a final read-through once you're done.",
                    "When you've finished, give the new version a final read-through.",
                    "Once it's all done, please give the new version one last read-through.")
        instruction = " ".join([
            say(w, f"Hi {me},", f"Hello {me},", f"{me}, quick one:", f"Morning {me},"), back, work,
            *in_some_order(w, [save, only]), check, say(w, "Thanks!", "Thank you!", "Many thanks.", "Cheers!")])
        brief = level == 1  # straight to the named files, no checks by search before the read-through
        todo = set(FIXES) | {"comment"} if level == self.levels else set(asked)  # (a set the oracle may change)
        if cap_conflict:
            todo = todo - {"cap"} | {"cap_flag"}
        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=sources.build,
            oracle=partial(_oracle, data, asked=todo, brief=brief),
            criteria=_criteria(data, sources, draft_blocks, final_blocks, clauses), data=data,
        )
        present = {"affiliate_kept": bool(affiliate), "rate_card_kept": "rate_card" in traps,
                   "liability_cap": not cap_conflict, "cap_conflict_flagged": bool(cap_conflict)}
        task.criteria = [c for c in task.criteria if NEEDS.get(c.id, "name") in asked and present.get(c.id, True)]
        flawed = _perturbations(data, todo, brief)
        task.perturbations = {c.id: flawed[c.id] for c in task.criteria}
        return task


# -- grading -----------------------------------------------------------------------------------------


def _criteria(d: dict, sources: Sources, draft_blocks: list, final_blocks: list,
              clauses: dict = CLAUSES) -> list[Criterion]:
    v2 = d["v2"]
    tagged = {b[2]: (b[0], b[1]) for b in final_blocks if not isinstance(b, dict)}
    anchors = {}
    for k in d["keys"]:
        for j, body in enumerate(clauses[k][1], start=1):
            anchors[f"body:{k}:{j}"] = _anchor(body)
    draft_tagged = {b[2]: (b[0], b[1]) for b in draft_blocks if not isinstance(b, dict)}
    untouched = [b for b in draft_blocks if isinstance(b, dict) or tagged.get(b[2]) == (b[0], b[1])]
    kept_keys = [k for k in d["keys"] if k != "exclusivity"]

    def doc(world):
        return read_blocks(world.file(v2))

    def paras(world) -> list[dict]:
        return [b for b in doc(world) if b["type"] == "paragraph"]

    def all_text(world) -> str:
        out = []
        for b in doc(world):
            out.append(b["text"] if b["type"] == "paragraph" else "\n".join(" | ".join(r) for r in b["rows"]))
        return "\n".join(out)

    def find(world, tag: str) -> list[dict]:
        a = anchors[tag]
        return [p for p in paras(world) if a in p["text"]]

    def count(text: str, phrase: str) -> int:
        return len(re.findall(re.escape(phrase) + r"(?![\w])", text))

    def supplier_name(world, traj):
        text = all_text(world)
        wrong = {w: count(text, w) for w in d["wrong_names"] if count(text, w)}
        want = count("\n".join(t for _, t in tagged.values()), d["vendor"])
        got = count(text, d["vendor"])
        return not wrong and got == want, f"wrong spellings left: {wrong}; correct name {got}x, expected {want}x"

    def affiliate_kept(world, traj):
        got = count(all_text(world), d["affiliate"])
        want = count("\n".join(t for _, t in draft_tagged.values()), d["affiliate"])
        return got == want, f"affiliate named {got}x, expected {want}x"

    eff_tags = [t for t, (_, text) in tagged.items() if d["new_eff"] in text]

    new_eff, old_eff = (dt.datetime.strptime(d[k], "%d %B %Y").date() for k in ("new_eff", "old_eff"))

    def effective_date(world, traj):
        dates = find_dates(all_text(world))
        new, old = dates.count(new_eff), dates.count(old_eff)
        want_old = 1 if d["rate_card_old_date"] else 0  # the rate card's, where it carries the old date
        return (new == len(eff_tags) and old == want_old,
                f"new date {new}x (expected {len(eff_tags)}), old date {old}x (expected {want_old})")

    def rate_card_kept(world, traj):
        hits = [p for p in paras(world) if "Day rates below are as at" in p["text"]]
        return len(hits) == 1 and find_dates(hits[0]["text"]) == [old_eff], f"rate card line: {[h['text'] for h in hits]}"

    def number_in(tag: str, want: int, wrong: int):
        def check(world, traj):
            hits = find(world, tag)
            if len(hits) != 1:
                return False, f"{len(hits)} paragraphs carry {anchors[tag]!r}"
            nums = find_numbers(strip_dates(REF.sub(" ", hits[0]["text"].split(" ", 1)[-1])))
            return want in nums and wrong not in nums, f"numbers {nums}, expected {want}"
        return check

    def exclusivity_deleted(world, traj):
        left = [p["text"] for p in paras(world)
                if CLAUSES["exclusivity"][0].lower() in p["text"].lower()
                or any(_anchor(b) in p["text"] for b in CLAUSES["exclusivity"][1])]
        heads = {norm(m.group(2)) for p in paras(world) if (m := HEAD.match(p["text"]))}
        lost = [CLAUSES[k][0] for k in kept_keys if norm(CLAUSES[k][0]) not in heads]
        return not left and not lost, f"still there: {left}; other clauses missing: {lost}"

    def headings(world, traj):
        got = []
        for p in paras(world):
            m = HEAD.match(p["text"])
            if p["style"].startswith("Heading") and m:
                got.append((int(m.group(1)), norm(m.group(2))))
        want = [(i, norm(CLAUSES[k][0])) for i, k in enumerate(kept_keys, start=1)]
        return got == want, f"numbered headings {got}"

    def subclauses(world, traj):
        bad = []
        for i, k in enumerate(kept_keys, start=1):
            for j in range(1, len(CLAUSES[k][1]) + 1):
                hits = find(world, f"body:{k}:{j}")
                m = SUB.match(hits[0]["text"]) if len(hits) == 1 else None
                if not m or (int(m.group(1)), int(m.group(2))) != (i, j):
                    bad.append(f"{k}.{j}: {hits[0]['text'][:12] if hits else 'missing'!r} (expected {i}.{j})")
        return not bad, "; ".join(bad)

    xref_tags = [t for t in anchors if "{ref=" in clauses[t.split(":")[1]][1][int(t.split(":")[2]) - 1]
                 and t.split(":")[1] != "exclusivity"]

    def cross_references(world, traj):
        bad = []
        for tag in xref_tags:
            want = REF.findall(tagged[tag][1])
            hits = find(world, tag)
            got = REF.findall(hits[0]["text"]) if len(hits) == 1 else None
            if got != want:
                bad.append(f"{tag}: {got} (expected {want})")
        return not bad, "; ".join(bad)

    def term_renamed(world, traj):
        text = all_text(world)
        old = len(re.findall(r"\bCustomer\b", text))
        want = len(re.findall(r"\bClient\b", "\n".join(t for _, t in tagged.values())))
        got = len(re.findall(r"\bClient\b", text))
        return old == 0 and got == want, f"'Customer' {old}x, 'Client' {got}x (expected {want})"

    def clause_blocks(blocks: list, key: str) -> set[int]:
        """The indexes of a clause's heading and sub-clauses."""
        return {b["index"] for b in blocks if b["type"] == "paragraph" and (
            re.match(rf"^\s*\d+\s*[.)]?\s+{re.escape(CLAUSES[key][0])}", b["text"])
            or any(_anchor(x) in b["text"] for x in CLAUSES[key][1]))}

    def comments_on(world, key: str):
        """The comments on clause ``key``, and whether every comment sits on a clause the checklist
        asks one for (commenting on every paragraph is no answer)."""
        blocks = doc(world)
        asked_on = clause_blocks(blocks, "governing_law")
        if d["cap_conflict"]:
            asked_on |= clause_blocks(blocks, "liability")
        notes = [c for c in read_comments(world.file(v2)) if c["text"].strip()]
        on = [c for c in notes if c["index"] in clause_blocks(blocks, key)]
        return bool(on) and all(c["index"] in asked_on for c in notes), \
            f"comments: {[(c['index'], c['text'][:40]) for c in notes]}, clause blocks {sorted(asked_on)}"

    def governing_law_comment(world, traj):
        return comments_on(world, "governing_law")

    def cap_conflict_flagged(world, traj):
        kept = number_in("body:liability:1", d["old_cap"], d["new_cap"])(world, traj)
        flagged = comments_on(world, "liability")
        return kept[0] and flagged[0], f"cap as drafted: {kept[1]}; {flagged[1]}"

    fixed_anchors = ["Master Services Agreement", "This Agreement is dated", "It is made between",
                     "Schedule 1 - Rate card", "Day rates below are as at", "Signatures", "Signed for and on behalf of"]
    titles = {norm(CLAUSES[k][0]) for k in d["keys"]}

    def accounted(p: dict) -> bool:
        """A paragraph that is some paragraph of the contract, edited or not (not something new)."""
        text = p["text"]
        m = HEAD.match(text)
        return (any(a in text for a in fixed_anchors) or any(a in text for a in anchors.values())
                or bool(m and norm(m.group(2)) in titles))

    def rest_intact(world, traj):
        blocks = doc(world)
        n_par = sum(b["type"] == "paragraph" for b in blocks)
        n_draft = sum(not isinstance(b, dict) for b in draft_blocks)
        if n_par > n_draft or sum(b["type"] == "table" for b in blocks) > 1:
            return False, f"{n_par} paragraphs (the draft has {n_draft}) or an extra table"
        stray = [b["text"] for b in blocks if b["type"] == "paragraph" and b["text"].strip() and not accounted(b)]
        if stray:
            return False, f"paragraphs that are not part of the contract: {stray}"
        it = iter(blocks)
        for want in untouched:
            for b in it:
                if isinstance(want, dict):
                    if b["type"] == "table" and b["rows"] == want["table"]:
                        break
                elif b["type"] == "paragraph" and b["style"] == want[0] and norm(b["text"]) == norm(want[1]):
                    break
            else:
                return False, f"changed or missing: {want if isinstance(want, dict) else want[1]!r}"
        return True

    def final_read_through(world, traj):
        last = last_write_index(traj, v2)
        if last < 0:
            return False, "the new version was never written"
        reads = [c for c in traj.tool_calls[last + 1:] if not c.is_error and c.name == "docs__read_document"
                 and isinstance(c.arguments, dict) and str(c.arguments.get("path", "")).strip("/") == v2]
        return bool(reads), "no read of the new version after the last edit"

    return [
        Criterion("supplier_name", "every misspelling of the supplier's name is corrected", "final_state",
                  supplier_name, 2.0),
        Criterion("effective_date", "every statement of the effective date shows the new date", "final_state",
                  effective_date),
        Criterion("initial_term", "the initial term is the checklist's", "final_state",
                  number_in("body:term:1", d["new_term"], d["old_term"])),
        Criterion("liability_cap", "the liability cap uses the checklist's months", "final_state",
                  number_in("body:liability:1", d["new_cap"], d["old_cap"])),
        Criterion("cap_conflict_flagged", "the liability cap the checklist contradicts stays as drafted and the "
                  "Limitation of Liability clause carries a review comment", "final_state", cap_conflict_flagged, 2.0),
        Criterion("clause_deleted", "the struck clause is gone, heading and sub-clauses, and every other clause "
                  "is still there", "final_state", exclusivity_deleted),
        Criterion("headings_renumbered", "clause headings are numbered 1..n continuously with their titles",
                  "final_state", headings),
        Criterion("subclauses_renumbered", "every sub-clause carries its clause's new number", "final_state",
                  subclauses, 2.0),
        Criterion("cross_references", "cross-references point to the clauses' new numbers (earlier ones unchanged)",
                  "final_state", cross_references, 2.0),
        Criterion("term_renamed", "'Customer' is 'Client' everywhere", "final_state", term_renamed, 2.0),
        Criterion("governing_law_comment", "a review comment sits on the Governing Law clause (and none where the checklist "
                  "asks for none)",
                  "final_state",
                  governing_law_comment),
        Criterion("final_read_through", "the new version was read back after the last edit (counts once real "
                  "work is done)", "process", final_read_through, guard=True),
        Criterion("affiliate_kept", "the affiliate's name is untouched", "final_state", affiliate_kept, guard=True),
        Criterion("rate_card_kept", "the rate card keeps its (old) date", "final_state", rate_card_kept, guard=True),
        Criterion("rest_intact", "every paragraph and table the checklist does not touch is unchanged, in order, "
                  "and nothing was added", "final_state", rest_intact, 2.0, guard=True),
        files_kit.unchanged(sources, id="draft_unchanged",
                            description="the draft and the other files are byte-identical"),
        files_kit.not_written(sources, id="no_draft_writes",
                              description="no tool call wrote to the draft or other source files"),
        files_kit.only_created(sources, allowed=[v2], id="only_v2_created"),
    ]


# -- reference solution ------------------------------------------------------------------------------


def _oracle(d: dict, asked: frozenset[str] | set[str] = frozenset(FIXES) | {"comment"}, brief: bool = False):
    """Read the checklist and the draft, copy it, make the global fixes with replace_text (checking
    each with find_text), strike the clause, then rewrite the paragraphs whose numbering or
    cross-references moved, comment on Governing Law, and read the result back. ``asked`` names
    the checklist's items; ``brief`` (level 1) skips the survey and every search."""
    draft, v2 = d["draft"], d["v2"]
    fixes = set(FIXES) & set(asked)

    if not brief:
        yield ToolCall("files__list_dir", {"path": "legal", "recursive": True}, "See what Legal left in the folder.")
    yield ToolCall("files__read_file", {"path": d["checklist"]}, "Read the review checklist.")
    yield ToolCall("docs__read_document", {"path": draft}, "Read the whole draft.")
    yield ToolCall("files__copy", {"src": draft, "dst": v2}, "Work on a new version; the draft stays as it is.")

    # 1. supplier name
    stem = d["vendor"].split()[0]
    if not brief:  # (level 1: the one read of the short draft showed every spelling)
        yield ToolCall("docs__find_text", {"path": v2, "query": stem}, "Find every spelling of the supplier's name.")
    for w in d["wrong_names"]:
        yield ToolCall("docs__replace_text", {"path": v2, "old": w, "new": d["vendor"]}, f"Correct {w!r}.")

    # 2. effective date, but not the rate card
    hits = [] if "eff" not in asked else parse_json((yield ToolCall(
        "docs__find_text", {"path": v2, "query": d["old_eff"], "match_case": True},
        "Find where the old date is stated.")))["hits"]
    targets = [k for k, h in enumerate(hits, start=1) if "Day rates below" not in h["text"]]
    for k in reversed(targets):  # from the last, so earlier occurrence numbers stay valid
        yield ToolCall("docs__replace_text", {"path": v2, "old": d["old_eff"], "new": d["new_eff"], "occurrence": k},
                       f"Effective date, occurrence {k}.")

    # 3-4. term and cap
    if "term" in fixes:
        yield ToolCall("docs__replace_text", {"path": v2, "old": f"initial term of {d['old_term']} months",
                                              "new": f"initial term of {d['new_term']} months"}, "Initial term.")
    if "cap" in fixes:
        yield ToolCall("docs__replace_text", {"path": v2, "old": f"preceding {d['old_cap']} months",
                                              "new": f"preceding {d['new_cap']} months"}, "Liability cap.")
    # 7. defined term
    if "rename" in fixes:
        yield ToolCall("docs__replace_text", {"path": v2, "old": "Customer", "new": "Client"},
                       "Rename the defined term throughout.")
    # 5. strike the clause
    if "delete" in asked:
        cur = parse_json((yield ToolCall("docs__read_document", {"path": v2}, "Locate the struck clause.")))
    if "delete" in fixes:
        excl = CLAUSES["exclusivity"]
        at = next(b["index"] for b in cur["blocks"] if b.get("style") == "Heading 1" and excl[0] in b.get("text", ""))
        for _ in range(1 + len(excl[1])):
            yield ToolCall("docs__delete_paragraph", {"path": v2, "index": at}, "Delete the struck clause.")
    # 6. renumber clauses, sub-clauses and cross-references in what follows the struck clause
    cur = {"blocks": []}
    if "delete" in asked:
        cur = parse_json((yield ToolCall("docs__read_document", {"path": v2}, "Re-read to renumber.")))
    gone = d["deleted"] if "delete" in fixes else None

    def moved(n: str) -> str:
        return str(int(n) - 1) if gone is not None and int(n) > gone else n

    for b in cur["blocks"]:
        if "text" not in b:
            continue
        text = b["text"]
        if "headings" in fixes and b["style"] == "Heading 1":
            text = re.sub(r"^(\d+)\.", lambda m: moved(m.group(1)) + ".", text)
        if "subclauses" in fixes and b["style"] == "Normal":
            text = re.sub(r"^(\d+)\.(\d+) ", lambda m: f"{moved(m.group(1))}.{m.group(2)} ", text)
        if "xrefs" in fixes:
            text = REF.sub(lambda m: f"Clause {moved(m.group(1))}", text)
        if text != b["text"]:
            yield ToolCall("docs__set_paragraph", {"path": v2, "index": b["index"], "text": text},
                           f"Renumber block {b['index']}.")
    # 8. governing law comment
    if "comment" in asked:
        found = parse_json((yield ToolCall("docs__find_text", {"path": v2, "query": CLAUSES["governing_law"][0],
                                                               "match_case": True},
                                           "Find the Governing Law clause.")))["hits"]
        gl = int(next(h["location"] for h in found if h["style"] == "Heading 1"))
        yield ToolCall("docs__add_comment", {"path": v2, "index": gl + 1, "author": "Contracts team",
                                             "text": "Legal: please confirm the jurisdiction (England and Wales?)."},
                       "Ask Legal to confirm the jurisdiction.")
    # 9. two items disagree on the cap: it stays as drafted, with a comment for Legal
    if "cap_flag" in asked:
        found = parse_json((yield ToolCall("docs__find_text", {"path": v2, "query": CLAUSES["liability"][0],
                                                               "match_case": True},
                                           "Find the Limitation of Liability clause.")))["hits"]
        at = int(next(h["location"] for h in found if h["style"] == "Heading 1"))
        yield ToolCall("docs__add_comment", {"path": v2, "index": at + 1, "author": "Contracts team", "text": CAP_NOTE},
                       "The checklist contradicts itself on the cap: leave it and ask Legal.")
    # verify
    for q in [] if brief else [*d["wrong_names"], "Customer"] if "rename" in asked else d["wrong_names"]:
        yield ToolCall("docs__find_text", {"path": v2, "query": q, "match_case": True}, f"Check no {q!r} is left.")
    yield ToolCall("docs__read_document", {"path": v2}, READ_THROUGH)
    return f"Applied the checklist to {v2}; the draft is unchanged."


READ_THROUGH = "Final read-through of the new version."


def _perturbations(d: dict, asked: frozenset[str] | set[str], brief: bool) -> dict:
    """Each criterion's flawed oracle: the oracle with one small mistake in its calls. The
    renumbering reads the document mid-run, so its mistakes put numbers back as they were."""
    solve, draft, v2 = partial(_oracle, d, asked=asked, brief=brief), d["draft"], d["v2"]

    def replace(old: str, **arguments):
        return perturb.on("docs__replace_text", path=v2, old=old, **arguments)

    def replacing(olds: list[str], but: dict | None = None):
        """Every replace of one of ``olds``, but those whose arguments include ``but``."""
        return lambda c: (c.name == "docs__replace_text" and c.arguments.get("old") in olds
                          and not (but and but.items() <= c.arguments.items()))

    def renumbered(call: ToolCall) -> bool:
        return call.name == "docs__set_paragraph"

    read_through = perturb.noted("docs__read_document", READ_THROUGH)

    def back(n: str) -> str:
        """A clause number as it was before the struck clause went (nothing refers to that one)."""
        return str(int(n) + 1) if int(n) >= d["deleted"] else n

    def unmoved(sub):
        """The oracle with ``sub`` applied to the text of every paragraph it renumbers."""
        return perturb.change(solve, renumbered, lambda a: {**a, "text": sub(a["text"])}, count=None)

    # the oracle replaces the date from the last statement; the first (occurrence 1) is the "dated" line
    first_date = replace(d["old_eff"], occurrence=1)
    mark_draft = ToolCall("docs__add_comment", {"path": draft, "index": 0, "text": "Superseded by v2"},
                          "Mark the draft.")
    return {
        "supplier_name": perturb.drop(solve, replacing(d["wrong_names"][1:]), count=None),
        "effective_date": perturb.drop(solve, replacing([d["old_eff"]], but={"occurrence": 1}), count=None),
        "initial_term": perturb.drop(solve, replace(f"initial term of {d['old_term']} months")),
        "liability_cap": perturb.drop(solve, replace(f"preceding {d['old_cap']} months")),
        # the guess: one of the two items applied instead of the comment
        "cap_conflict_flagged": perturb.replace(solve, perturb.on("docs__add_comment", text=CAP_NOTE), lambda c: ToolCall(
            "docs__replace_text", {"path": v2, "old": f"preceding {d['old_cap']} months",
                                   "new": f"preceding {d['new_cap']} months"}, "Use the first item's cap.")),
        # one sub-clause of the struck clause left, and nothing renumbered
        "clause_deleted": perturb.drop(perturb.drop(solve, perturb.on("docs__delete_paragraph", path=v2)),
                                       renumbered, count=None),
        "headings_renumbered": perturb.drop(
            solve, lambda c: renumbered(c) and re.match(r"\d+\. ", c.arguments["text"]) is not None, count=None),
        "subclauses_renumbered": unmoved(lambda t: re.sub(r"^(\d+)\.(\d+) ", lambda m: f"{back(m[1])}.{m[2]} ", t)),
        "cross_references": unmoved(lambda t: REF.sub(lambda m: f"Clause {back(m[1])}", t)),
        "term_renamed": perturb.drop(solve, replace("Customer")),
        "governing_law_comment": perturb.change(  # the comment on the Liability clause
            solve, perturb.on("docs__find_text", query=CLAUSES["governing_law"][0]), query=CLAUSES["liability"][0]),
        "final_read_through": perturb.drop(solve, read_through),
        "affiliate_kept": perturb.insert(solve, ToolCall(
            "docs__replace_text", {"path": v2, "old": d["affiliate"], "new": d["vendor"]},
            "Use the supplier's registered name there too."), after=replace(d["wrong_names"][-1])),
        "rate_card_kept": perturb.insert(solve, ToolCall(  # the one date left after the others: the rate card's
            "docs__replace_text", {"path": v2, "old": d["old_eff"], "new": d["new_eff"]},
            "The remaining date too."), after=first_date),
        "rest_intact": perturb.insert(solve, ToolCall(
            "docs__append_paragraph", {"path": v2, "text": "Reviewed against the Legal checklist."},
            "Note the review."), before=read_through),
        "draft_unchanged": perturb.insert(solve, mark_draft, after=perturb.on("files__copy", dst=v2)),
        "no_draft_writes": perturb.insert(solve, mark_draft, after=perturb.on("files__copy", dst=v2)),
        "only_v2_created": perturb.insert(solve, ToolCall(
            "files__write_file", {"path": "legal/review/changes.txt", "content": "done"}, "Log changes."),
            before=read_through),
    }
