"""File organisation: a shared-drive clean-up by the company's retention policy.

Every document on the drive starts with a metadata header (Doc-ID, Type, Date, sometimes
Expires). The policy says, per type, when a document is deleted, when it moves to the archive
(keeping its path), and what is never touched; a legal-hold list overrides everything. The
traps: file names that lie about the content (``invoice_2014_scan.txt`` is a recent draft),
documents exactly at an age limit, contracts whose clock starts at their expiry date, old HR
records that are out of scope, held documents that are long expired, files without a header,
and type names written in other cases. Every action goes into a CSV log.

Which of these a drive carries is drawn per seed (``TRAPS``); the legal holds are on every drive.
"""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import norm_path, output_text, rng_and_faker, same_bytes, write_files
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import phrasing_rng, say
from longhorizon.tasks.registry import register

ADMIN = "shared/_admin"
POLICY = f"{ADMIN}/retention-policy.md"
HOLDS = f"{ADMIN}/legal-hold.txt"
RULES = {  # type -> (action, years); contracts count from their Expires date
    "invoice": ("delete", 7),
    "purchase-order": ("delete", 7),
    "meeting-notes": ("archive", 2),
    "draft": ("delete", 1),
    "contract": ("archive", 1),
    "hr-record": (None, 0),
    "policy": (None, 0),
}
TYPE_SPELLINGS = {
    "invoice": ["invoice", "Invoice", "INVOICE"],
    "purchase-order": ["purchase-order", "Purchase-Order"],
    "meeting-notes": ["meeting-notes", "Meeting-Notes"],
    "draft": ["draft", "Draft"],
    "contract": ["contract", "Contract"],
    "hr-record": ["hr-record", "HR-Record"],
    "policy": ["policy", "Policy"],
}
TRAPS = ("at_limit", "contract_edges", "out_of_scope_record", "decoy_name", "bland_name", "dated_scratch",
         "mixed_case")
"""The traps drawn per seed at levels 2-3 (level 1 keeps all of its own), at least three of them:
documents exactly at their age limit, a contract whose archive date is today and one without an
Expires line, an old HR record in the finance folders, a recent draft named like an old invoice,
an old invoice with a bland name, a scratch list with an old Date line but no header, type names
in other letter cases. Every drive has legal holds on documents that would otherwise go."""
DEPTS = {
    "finance": [("invoices", "invoice", "INV"), ("purchase-orders", "purchase-order", "PO")],
    "sales": [("meeting-notes", "meeting-notes", "MTG"), ("contracts", "contract", "CTR")],
    "legal": [("contracts", "contract", "CTR"), ("drafts", "draft", "DRF")],
    "people": [("records", "hr-record", "HR"), ("handbook", "policy", "POL")],
    "ops": [("meeting-notes", "meeting-notes", "MTG"), ("drafts", "draft", "DRF"),
            ("purchase-orders", "purchase-order", "PO")],
}


def years_before(d: date, n: int) -> date:
    try:
        return d.replace(year=d.year - n)
    except ValueError:  # 29 February
        return d.replace(year=d.year - n, day=28)


def years_after(d: date, n: int) -> date:
    try:
        return d.replace(year=d.year + n)
    except ValueError:
        return d.replace(year=d.year + n, day=28)


def action_for(doc: dict, today: date, holds: set[str]) -> str | None:
    """'delete', 'archive' or None under the policy."""
    if doc.get("doc_id") is None or doc["doc_id"] in holds:
        return None
    act, years = RULES[doc["type"]]
    if act is None:
        return None
    if doc["type"] == "contract":
        exp = doc.get("expires")
        return act if exp is not None and years_after(exp, years) < today else None
    return act if doc["date"] < years_before(today, years) else None


def _body(fake, rng, kind: str) -> str:
    if kind == "invoice":
        lines = [f"  {fake.bs().capitalize():<44} {rng.randint(2, 80) * 25:>7}.00" for _ in range(rng.randint(2, 4))]
        return f"Vendor: {fake.company()}\nAmount due:\n" + "\n".join(lines) + "\n"
    if kind == "purchase-order":
        return f"Supplier: {fake.company()}\nItems: {rng.randint(1, 40)} x {fake.word()}\nApproved by: {fake.name()}\n"
    if kind == "meeting-notes":
        acts = "\n".join(f"- {fake.sentence(nb_words=8)}" for _ in range(rng.randint(2, 4)))
        return f"Attendees: {', '.join(fake.first_name() for _ in range(3))}\n\n## Actions\n{acts}\n"
    if kind == "contract":
        return (f"Agreement between {fake.company()} and {fake.company()}.\n"
                f"{fake.paragraph(nb_sentences=3)}\n")
    if kind == "draft":
        return f"DRAFT - not for circulation\n\n{fake.paragraph(nb_sentences=4)}\n"
    if kind == "hr-record":
        return f"Employee: {fake.name()}\nEvent: {rng.choice(['hire', 'promotion', 'transfer', 'leave'])}\n"
    return f"{fake.catch_phrase()}\n\n{fake.paragraph(nb_sentences=4)}\n"


@register
class SharedDriveRetention(TaskFamily):
    name = "shared_drive_retention"
    category = "file organisation"
    apps = ("files",)
    description = ("Apply a retention policy to a shared drive: read each document's header, delete or archive "
                   "by type and age (contracts from expiry), honour legal holds, log every action in a CSV.")

    levels = 3
    """1: four documents (an expired draft, old meeting notes, a held document, an invoice exactly
    at its limit) and a brief policy; no read-back; 2: the first two departments' folders
    and every special case drawn; 3 (default): four departments. Levels 2-3 draw their traps
    (``TRAPS``), level 1 keeps its own."""
    toolsets = {1: ("files__delete", "files__move", "files__read_file", "files__search", "files__write_file")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        today = date(2026, 1, 12) + timedelta(days=rng.randrange(330))
        log_path = f"{ADMIN}/retention-log-{today.isoformat()}.csv"
        depts = sorted(rng.sample(sorted(DEPTS), 4))
        if "finance" not in depts:
            depts[0] = "finance"
            depts.sort()
        docs: list[dict] = []
        used_ids: set[str] = set()
        drawn = {t for t in TRAPS if rng.random() < 0.6}  # at every level, so that the draws after it agree
        while len(drawn) < 3:  # at least 3 of them
            drawn.add(rng.choice(TRAPS))
        traps = set(TRAPS) if level == 1 else drawn  # level 1 keeps all of its own

        def doc_id(prefix: str) -> str:
            while True:
                i = f"{prefix}-{rng.randint(1000, 9999)}"
                if i not in used_ids:
                    used_ids.add(i)
                    return i

        def age_date(kind: str, band: str) -> date:
            """A Date for a document of ``kind`` that is past its limit, at it, or within it."""
            _, years = RULES[kind]
            limit = years_before(today, years or 3)
            if band == "old":
                return limit - timedelta(days=rng.randint(1, 900))
            if band == "edge":
                return limit
            return limit + timedelta(days=rng.randint(1, max(2, (today - limit).days - 1)))

        for dept in depts:
            for sub, kind, prefix in DEPTS[dept]:
                n = rng.randint(3, 5)
                bands = ["old", "old", "new"] + [rng.choice(["old", "new"]) for _ in range(n - 3)]
                for band in bands:
                    d = age_date(kind, band)
                    doc = {"kind": kind, "type": kind, "doc_id": doc_id(prefix), "date": d,
                           "dir": f"shared/{dept}/{sub}", "expires": None}
                    if kind == "contract":
                        start = today - timedelta(days=rng.randint(800, 3600))
                        doc["date"] = start
                        doc["expires"] = (years_before(today, 1) - timedelta(days=rng.randint(1, 700))
                                          if band == "old" else years_before(today, 1) + timedelta(days=rng.randint(1, 900)))
                    docs.append(doc)
        finance_inv = "shared/finance/invoices"
        # exactly at the limit: kept
        for kind, where in (("invoice", finance_inv), ("meeting-notes", None), ("draft", None)):
            place = where or next((d["dir"] for d in docs if d["kind"] == kind), finance_inv)
            if not any(d["kind"] == kind for d in docs) or "at_limit" not in traps:
                continue
            docs.append({"kind": kind, "type": kind, "doc_id": doc_id({"invoice": "INV", "meeting-notes": "MTG",
                                                                         "draft": "DRF"}[kind]),
                         "date": age_date(kind, "edge"), "dir": place, "expires": None, "trap": "at_limit"})
        contracts = [d for d in docs if d["kind"] == "contract"]
        if contracts and "contract_edges" in traps:  # a contract whose archive date is today: kept
            c = dict(contracts[0], doc_id=doc_id("CTR"), expires=years_before(today, 1), trap="contract_edges")
            docs.append(c)
            docs.append(dict(contracts[0], doc_id=doc_id("CTR"), expires=None, trap="contract_edges"))  # open-ended
        if "out_of_scope_record" in traps:  # old records that are out of scope, wherever they are
            docs.append({"kind": "hr-record", "type": "hr-record", "doc_id": doc_id("HR"),
                         "date": today - timedelta(days=rng.randint(3000, 5000)), "dir": "shared/finance/payroll",
                         "expires": None, "trap": "out_of_scope_record"})
        # misleading names: a recent draft called like an old invoice, an old invoice with a bland name
        if "decoy_name" in traps:
            docs.append({"kind": "draft", "type": "draft", "doc_id": doc_id("DRF"),
                         "date": today - timedelta(days=rng.randint(20, 200)), "dir": finance_inv,
                         "expires": None, "name": f"invoice_{today.year - 9}_scan.txt", "trap": "decoy_name"})
        if "bland_name" in traps:
            docs.append({"kind": "invoice", "type": "invoice", "doc_id": doc_id("INV"),
                         "date": years_before(today, 7) - timedelta(days=rng.randint(30, 600)),
                         "dir": "shared/finance/misc", "expires": None, "name": f"scan_{rng.randint(100, 999)}.txt",
                         "trap": "bland_name"})

        # names, spellings, bodies
        for i, d in enumerate(docs):
            d["spelled"] = rng.choice(TYPE_SPELLINGS[d["type"]]) if "mixed_case" in traps else d["type"]
            if "name" not in d:
                stem = {"invoice": "invoice", "purchase-order": "po", "meeting-notes": "notes", "contract": "contract",
                        "draft": "draft", "hr-record": "record", "policy": "policy"}[d["kind"]]
                ext = ".md" if d["kind"] in ("meeting-notes", "policy", "draft") else ".txt"
                d["name"] = f"{stem}_{d['date'].isoformat()}_{d['doc_id'].split('-')[1]}{ext}"
            d["path"] = f"{d['dir']}/{d['name']}"
        # legal holds: documents that would otherwise go
        candidates = [d for d in docs if action_for(d, today, set())]
        held = {d["doc_id"] for d in rng.sample(candidates, max(1, min(3, len(candidates) - 4)))}
        hold_noise = [doc_id(rng.choice(["INV", "CTR", "MTG"])) for _ in range(3)]
        for d in docs:
            d["action"] = action_for(d, today, held)

        files: dict[str, str] = {}
        for d in docs:
            head = [f"Doc-ID: {d['doc_id']}", f"Type: {d['spelled']}", f"Date: {d['date'].isoformat()}"]
            extra = [f"Owner: {fake.name()}"]
            if d["kind"] == "contract" and d["expires"] is not None:
                extra.append(f"Expires: {d['expires'].isoformat()}")
            if rng.random() < 0.4:
                extra.append(f"Title: {fake.catch_phrase()}")
            rng.shuffle(extra)
            files[d["path"]] = "\n".join(head[:2] + extra[:1] + head[2:] + extra[1:]) + "\n\n" + _body(fake, rng, d["kind"])
        if level < self.levels:  # the same draws as the default, then fewer documents
            docs = _fewer_docs(level, docs, held, depts, years_before(today, 7))
            files = {d["path"]: files[d["path"]] for d in docs}
        no_header = {
            "shared/README.md": "# Shared drive\n\nDepartment folders live here. Retention rules: see _admin/.\n",
            f"shared/{depts[1]}/todo.txt": f"Date: {years_before(today, 9).isoformat()}\n- {fake.sentence()}\n"
                                            "(scratch list, no document header)\n",
            f"shared/{depts[2]}/links.md": "\n".join(f"- https://{fake.domain_name()}/" for _ in range(3)) + "\n",
        }
        if level == 1 or "dated_scratch" not in traps:  # (at level 1 its Date line would cost a search hit)
            del no_header[f"shared/{depts[1]}/todo.txt"]
        archived_before = {
            f"archive/sales/meeting-notes/notes_{years_before(today, 4).isoformat()}_0001.md":
                f"Doc-ID: MTG-0001\nType: meeting-notes\nDate: {years_before(today, 4).isoformat()}\n\nArchived last year.\n",
        }
        policy_text = _policy(today) if level > 1 else _brief_policy({d["type"] for d in docs})
        listed = held | set(hold_noise)
        if level == 1:  # the held document on the drive and one other id
            listed = {d["doc_id"] for d in docs if d["doc_id"] in held} | set(hold_noise[:1])
        holds_text = (f"# Legal holds - do not delete, move or edit these documents (Doc-ID per line)\n"
                      + (f"# maintained by {fake.name()}, Legal\n" if level > 1 else "")
                      + "".join(f"{i}\n" for i in sorted(listed)))
        all_files = {**files, **no_header, **archived_before, POLICY: policy_text, HOLDS: holds_text}
        order = sorted(all_files)

        def build(root: Path) -> None:
            write_files(root / "workspace", {rel: all_files[rel] for rel in order})

        trap_docs = {t: sorted(d["path"] for d in docs if d.get("trap") == t) for t in TRAPS}
        """The traps on this drive (empty: not drawn, or cut with the lower level's documents)."""
        trap_docs["dated_scratch"] = [p for p in no_header if p.endswith("/todo.txt")]
        trap_docs["mixed_case"] = sorted(d["path"] for d in docs if d["spelled"] != d["type"])
        deletes = sorted(d["path"] for d in docs if d["action"] == "delete")
        archives = sorted(d["path"] for d in docs if d["action"] == "archive")
        by_path = {d["path"]: d for d in docs}
        untouched = sorted(set(all_files) - set(deletes) - set(archives))
        owner = fake.first_name()
        wording = phrasing_rng(self.name, seed)
        review = today.isoformat()
        hello = say(wording, f"Hi, it's {owner} from IT.", f"Hello, {owner} from IT here.", f"{owner} from IT here.")
        ask = say(wording, "Could you run this year's retention clean-up on the shared drive?",
                  "The shared drive is due its retention clean-up for this year; could you run it?",
                  "Please run this year's retention clean-up on the shared drive.")
        sources = say(wording, f"The policy is in {POLICY} and the legal holds are in {HOLDS}; today ({review}) is "
                               f"the review date.",
                      f"Today ({review}) is the review date. You'll find the policy in {POLICY} and the legal holds "
                      f"in {HOLDS}.",
                      f"Use {POLICY} for the policy and {HOLDS} for the legal holds, with today ({review}) as the "
                      f"review date.")
        apply = say(wording, f"Apply it to everything under shared/: delete what has expired, move what should be "
                             f"archived into archive/ (same folder structure), leave everything else exactly as it "
                             f"is, and log every deletion and move in {log_path} as the policy describes.",
                    f"It applies to everything under shared/. What has expired gets deleted; what should be archived "
                    f"moves into archive/, keeping the same folder structure; everything else stays exactly as it "
                    f"is. Log every deletion and move in {log_path} the way the policy describes.",
                    f"Go through everything under shared/ and delete what has expired, move what should be archived "
                    f"into archive/ with the same folder structure, and leave everything else exactly as it is; "
                    f"every deletion and move goes in the log at {log_path}, as the policy describes.")
        headers = say(wording, "Please check each document's header rather than trusting file names.",
                      "Don't trust the file names: check each document's header.",
                      "File names can mislead, so check each document's header instead of going by them.")
        thanks = say(wording, "Thanks!", "Thank you!", "Many thanks!")
        if level == 1:
            sources = f"Policy: {POLICY}; legal holds: {HOLDS}; the review date is today ({review})."
            headers = "Go by each document's header."
            apply = (f"Delete what has expired, move what should be archived into archive/ (same folder structure), "
                     f"leave the rest as it is, and log each deletion and move in {log_path}.")
        instruction = " ".join([hello, ask, sources, apply, headers, thanks])

        # -- oracle ------------------------------------------------------------------------------
        def log_text(entries: list[tuple[str, str, str]], with_id: bool = True) -> str:
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(["path", "doc_id", "action"] if with_id else ["path", "action"])
            for p, i, a in entries:
                w.writerow([p, i, a] if with_id else [p, a])
            return buf.getvalue()

        brief = level == 1  # five documents: their headers from two searches, none opened one by one

        def planned(holds) -> list[tuple[dict, str | None]]:
            """Each document (by path) with what the policy does to it given ``holds``."""
            return [(d, action_for(d, today, holds)) for d in sorted(docs, key=lambda x: x["path"])]

        def act_on(d: dict, act: str) -> ToolCall:
            if act == "delete":
                return ToolCall("files__delete", {"path": d["path"]}, f"{d['doc_id']} has expired: delete it.")
            return ToolCall("files__move", {"src": d["path"], "dst": "archive/" + d["path"].removeprefix("shared/")},
                            f"Archive {d['doc_id']}.")

        entries = [(d["path"], d["doc_id"], "deleted" if act == "delete" else "archived")
                   for d, act in planned(held) if act]

        def solve():
            if not brief:
                yield ToolCall("files__list_dir", {"path": "shared", "recursive": True}, "See the whole drive.")
            yield ToolCall("files__read_file", {"path": POLICY}, "Read the retention policy.")
            yield ToolCall("files__read_file", {"path": HOLDS}, "Read the legal-hold list.")
            if not brief:
                yield ToolCall("files__list_dir", {"path": "archive", "recursive": True},
                               "See how the archive is laid out.")
                yield ToolCall("files__search", {"query": "Doc-ID:", "path": "shared"},
                               "Find every document that has a metadata header.")
            yield ToolCall("files__search", {"query": "Type:", "path": "shared"}, "Get each document's type.")
            yield ToolCall("files__search", {"query": "Date:", "path": "shared"}, "Get each document's date.")
            if not brief:
                yield ToolCall("files__search", {"query": "Expires:", "path": "shared"},
                               "Get the contracts' expiry dates.")
            # open every document that may have to go, to confirm its header before acting
            plan = planned(held)
            for d, act in plan:
                maybe = RULES[d["type"]][0] and (d["type"] == "contract" or d["date"] <= years_before(today, RULES[d["type"]][1]))
                if (act or maybe or d["doc_id"] in held) and not brief:
                    yield ToolCall("files__read_file", {"path": d["path"]}, f"Check the header of {d['name']}.")
            for d, act in plan:
                if act:
                    yield act_on(d, act)
            yield ToolCall("files__write_file", {"path": log_path, "content": log_text(entries)}, "Write the log.")
            if brief:
                return f"Done: {len(entries)} documents deleted or archived, held ones kept; see the log."
            yield ToolCall("files__read_file", {"path": log_path}, "Read the log back.")
            yield ToolCall("files__list_dir", {"path": "archive", "recursive": True}, "Check the archive.")
            return (f"Retention run for {today.isoformat()}: deleted {sum(e[2] == 'deleted' for e in entries)} "
                    f"expired documents, archived {sum(e[2] == 'archived' for e in entries)}, left {len(held)} "
                    f"held documents alone; every action is in {log_path}.")

        write_log = perturb.on("files__write_file", path=log_path)
        held_but_due = [act_on(d, act) for d, act in planned(set()) if act and d["doc_id"] in held]
        at_the_limit = [act_on(d, "delete") for d, act in planned(held)  # 'at the limit' counted as expired
                        if act is None and d["doc_id"] not in held and d["type"] in ("invoice", "purchase-order", "draft")
                        and d["date"] <= years_before(today, RULES[d["type"]][1])]
        if not at_the_limit:  # a drive with nothing at a limit: a document within its limit deleted
            at_the_limit = [act_on(next(d for d, act in planned(held) if act is None and d["doc_id"] not in held
                                        and d["type"] in ("invoice", "purchase-order", "draft")), "delete")]
        # the expired drafts kept (where the drive has none: the expired invoices)
        kept_expired = next(s for s in ({d["path"] for d, act in planned(held) if act == "delete" and d["type"] == t}
                                        for t in ("draft", "invoice", "purchase-order")) if s)
        perturbations = {
            "expired_deleted": perturb.drop(
                solve, lambda c: c.name == "files__delete" and c.arguments["path"] in kept_expired, count=None),
            "archived_moved": perturb.change(solve, perturb.on("files__move"), count=None,
                                             edit=lambda a: {**a, "dst": "archive/" + a["src"].split("/")[-1]}),
            "holds_respected": perturb.insert(solve, *held_but_due, before=write_log),
            "others_untouched": perturb.insert(solve, *at_the_limit, before=write_log),
            "log_csv": perturb.change(solve, write_log, content=log_text([e for e in entries if e[2] == "deleted"])),
            "read_before_acting": perturb.drop(perturb.drop(solve, perturb.on("files__read_file", path=POLICY)),
                                               perturb.on("files__read_file", path=HOLDS)),
        }

        # -- grading -----------------------------------------------------------------------------
        def exists(w, rel: str) -> bool:
            return w.file(rel).exists() or w.file(rel).is_symlink()

        def same(w, rel: str, text: str) -> bool:
            p = w.file(rel)
            return same_bytes(p, text.encode())

        def expired_deleted(w, t):
            left = [p for p in deletes if exists(w, p)]
            moved = [p for p in deletes if exists(w, "archive/" + p.removeprefix("shared/"))]
            lost = [p for p in untouched + archives  # deleting everything is no retention run
                    if not exists(w, p) and not exists(w, "archive/" + p.removeprefix("shared/"))]
            if left or moved or lost:
                return False, (f"still there: {left[:4]}; archived instead: {moved[:4]}; "
                               f"not due but gone: {lost[:4]}")
            return True, ""

        def archived(w, t):
            bad = [p for p in archives if exists(w, p) or not same(w, "archive/" + p.removeprefix("shared/"), all_files[p])]
            extra = [p for p in untouched if p.startswith("shared/")  # archiving everything is no retention run
                     and exists(w, "archive/" + p.removeprefix("shared/"))]
            return not bad and not extra, (f"not archived at archive/<same path>: {bad[:4]}; "
                                           f"archived but not due: {extra[:4]}")

        def holds_ok(w, t):
            bad = [d["path"] for d in docs if d["doc_id"] in held and not same(w, d["path"], all_files[d["path"]])]
            return not bad, f"held documents touched: {bad}" if bad else ""

        def others_ok(w, t):
            bad = [p for p in untouched if not same(w, p, all_files[p])]
            return not bad, f"changed or missing: {bad[:5]}" if bad else ""

        def log_ok(w, t):
            p = w.file(log_path)
            if p.is_symlink() or not p.is_file():
                return False, f"{log_path} is missing"
            text = output_text(p, encoding="utf-8-sig")
            rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
            if not rows:
                return False, "the log is empty"
            head = [h.strip().lower().replace(" ", "_") for h in rows[0]]
            if not {"path", "doc_id", "action"} <= set(head):
                return False, f"header {rows[0]}"
            ix = {h: head.index(h) for h in ("path", "doc_id", "action")}
            got = set()
            for r in rows[1:]:
                r = r + [""] * (len(head) - len(r))
                path = norm_path(r[ix["path"]])
                path = path if path.startswith("shared/") else f"shared/{path}"
                act = r[ix["action"]].strip().lower()
                act = "deleted" if act.startswith("delet") else "archived" if act.startswith("archiv") else act
                got.add((path, r[ix["doc_id"]].strip().upper(), act))
            want = {(p, by_path[p]["doc_id"], "deleted") for p in deletes} | \
                   {(p, by_path[p]["doc_id"], "archived") for p in archives}
            if got != want:
                return False, f"log misses {sorted(want - got)[:3]}, has extra {sorted(got - want)[:3]}"
            return True, ""

        def read_first(w, t):
            first_act = next((i for i, c in enumerate(t.tool_calls) if not c.is_error
                              and c.name in ("files__delete", "files__move")), None)
            if first_act is None:
                return False, "nothing was deleted or moved"
            before = {norm_path(c.arguments.get("path")) for c in t.tool_calls[:first_act]
                      if c.name == "files__read_file" and not c.is_error and isinstance(c.arguments, dict)}
            missing = [p for p in (POLICY, HOLDS) if p not in before]
            if missing:
                return False, f"not read before acting: {missing}"
            due = set(deletes) | set(archives)
            wrong = [norm_path(c.arguments.get("path") or c.arguments.get("src")) for c in t.tool_calls
                     if not c.is_error and c.name in ("files__delete", "files__move") and isinstance(c.arguments, dict)
                     and norm_path(c.arguments.get("path") or c.arguments.get("src")) not in due]
            return not wrong, f"deleted or moved documents the policy keeps: {wrong[:4]}" if wrong else ""

        criteria = [
            Criterion("expired_deleted", "every expired invoice, purchase order and draft (not on hold) is deleted, "
                      "not archived, and nothing else is gone", "final_state", expired_deleted, 2.0),
            Criterion("archived_moved", "old meeting notes and long-expired contracts are in archive/ under their "
                      "original folder path, unchanged, and gone from shared/; nothing else was archived",
                      "final_state", archived, 2.0),
            Criterion("holds_respected", "documents on legal hold are untouched", "final_state", holds_ok, guard=True),
            Criterion("others_untouched", "everything else (documents within their limits"
                      + (" or exactly at them" if trap_docs["at_limit"] else "")
                      + (", HR records" if trap_docs["out_of_scope_record"] else "")
                      + ", policies, files without a header, the admin files) is unchanged in place",
                      "final_state", others_ok, guard=True),
            Criterion("log_csv", f"{log_path} lists each deletion and move (path, doc_id, action)", "final_state",
                      log_ok, 2.0),
            Criterion("read_before_acting", "the policy and the legal-hold list were read before the first "
                      "deletion or move, and only documents due under the policy were deleted or moved", "process",
                      read_first, requires=("expired_deleted", "archived_moved")),
        ]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"today": today.isoformat(), "delete": deletes, "archive": archives, "held": sorted(held),
                  "log": log_path, **trap_docs},
        )


def _fewer_docs(level: int, docs: list[dict], held: set[str], depts: list[str], invoice_limit: date) -> list[dict]:
    """Level 1: an expired draft, old meeting notes (no contract: its header needs one more
    search), a held document and the invoice exactly at its limit. Level 2: those, the recent
    draft named like an old invoice, the first two departments' folders, and every special case
    (the old HR record, the bland-named old invoice, every held document)."""
    free = [d for d in docs if d["doc_id"] not in held]

    def pick(pool: list[dict], *tests) -> dict | None:
        """The first document of ``pool`` that passes the first test any of them passes (where a
        seed's drive lacks the preferred kind, e.g. every expired draft is on hold)."""
        return next((d for test in tests for d in pool if test(d)), None)

    first = [
        pick(free, lambda d: d["type"] == "draft" and d["action"] == "delete", lambda d: d["action"] == "delete"),
        pick(free, lambda d: d["type"] == "meeting-notes" and d["action"] == "archive",
             lambda d: d["action"] == "archive"),
        pick(docs, lambda d: d["doc_id"] in held),
        pick(docs, lambda d: d["type"] == "invoice" and d["date"] == invoice_limit),
        pick(docs, lambda d: d["name"].startswith("invoice_") and d["type"] == "draft"),
    ]
    keep = {id(d) for d in (first[:4] if level == 1 else first) if d is not None}
    if level == 2:
        keep |= {id(d) for d in docs if d["doc_id"] in held or d["dir"].split("/")[1] in depts[:2]
                 or d["dir"] in ("shared/finance/payroll", "shared/finance/misc")}
    return [d for d in docs if id(d) in keep]


def _brief_policy(kinds: set[str]) -> str:
    """Level 1's policy: the same rules, for the types on its drive, in fewer words (and no sample
    header that a search for 'Type:' would find)."""
    rules = {"invoice": "delete once older than 7 years", "purchase-order": "delete once older than 7 years",
             "draft": "delete once older than 1 year", "meeting-notes": "archive once older than 2 years",
             "contract": "archive once more than 1 year has passed since its `Expires:` date (none: it stays)",
             "hr-record": "kept", "policy": "kept"}
    rows = "".join(f"| {k} | {rules[k]} |\n" for k in RULES if k in kinds and RULES[k][0])
    return f"""# Shared drive retention policy (rev. 4)

Applies to documents under shared/ with a header of Doc-ID, Type and Date lines (any order, the type
in any letter case); files without a Doc-ID header are out of scope.

| Type | What happens |
|---|---|
{rows}| any other type | kept |

"Older than N years": the Date is before the review date minus N years; a document dated exactly N
years before it is kept. Archiving moves a document unedited to archive/ with the path it had below
shared/. A document whose Doc-ID is in {HOLDS} is never deleted or moved.

Log: {ADMIN}/retention-log-<review date>.csv with the header `path,doc_id,action`, one line per
deleted or archived document: its path before the run (shared/...), its Doc-ID, `deleted` or `archived`.
"""


def _policy(today: date) -> str:
    return f"""# Shared drive retention policy (rev. 4)

Applies to every document under shared/ that starts with a metadata header such as

    Doc-ID: FIN-1234
    Type: invoice
    Date: 2019-04-12

(the header lines may come in any order, the type in any letter case). Files without a
Doc-ID header are out of scope: leave them alone.

## Rules by type

| Type | What happens |
|---|---|
| invoice | delete once older than 7 years |
| purchase-order | delete once older than 7 years |
| draft | delete once older than 1 year |
| meeting-notes | archive once older than 2 years |
| contract | archive once more than 1 year has passed since its `Expires:` date; a contract without an Expires line stays |
| hr-record | never deleted or archived by this process |
| policy | kept |

"Older than N years" means the Date is before the review date minus N years (same day and
month): a document dated exactly N years before the review date is kept. Contracts are
never deleted by this process.

## Archiving

Archived documents move to archive/ with the same path below it that they had below shared/,
e.g. shared/sales/meeting-notes/x.md goes to archive/sales/meeting-notes/x.md. Documents are
never edited or renamed.

## Legal hold

A document whose Doc-ID is in {HOLDS} is not deleted, moved or edited, whatever its age.

## Log

Each run writes {ADMIN}/retention-log-<review date>.csv with the header `path,doc_id,action`:
one line per deleted or archived document, with its path before the run (as shared/...), its
Doc-ID and `deleted` or `archived`.
"""
