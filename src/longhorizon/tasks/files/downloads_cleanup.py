"""File organisation: sort a messy Downloads folder by what each file *is*, not what it is called.

Long because the work is: every ambiguous file has to be opened to classify it (scans named
``scan_0042.txt`` that are invoices, a template named like an invoice), and every ``(1)``
copy compared with its original before it may be deleted.
"""

from __future__ import annotations

from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import norm_path, rng_and_faker, same_bytes
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register

PROJECTS = ["Atlas", "Beacon", "Cobalt", "Delta", "Ember", "Falcon"]


def _invoice(fake, rng, year: int) -> str:
    lines = [f"  {fake.bs().capitalize():<48} {rng.randint(2, 90) * 25:>8}.00" for _ in range(rng.randint(2, 4))]
    return (f"INVOICE\nVendor: {fake.company()}\nInvoice no: {rng.randint(10000, 99999)}\n"
            f"Invoice date: {year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}\n"
            f"Bill to: {fake.name()}\n\n" + "\n".join(lines) + "\n")


def _notes(fake, rng, project: str) -> str:
    people = ", ".join(fake.first_name() for _ in range(rng.randint(2, 5)))
    items = "\n".join(f"- {fake.sentence(nb_words=8)}" for _ in range(rng.randint(2, 5)))
    return f"# Meeting notes\nProject: {project}\nAttendees: {people}\n\n## Actions\n{items}\n"


def _fewer_files(level: int, files: dict[str, bytes], invoices: dict, notes: dict, others: dict, dups: dict,
                 near: str, edit: bytes):
    """The first invoices and notes (level 1: one each; 2: three and two), exact copies of kept
    files only (made from kept originals when the default's are gone), the edited copy (level 2,
    of a kept file) and the template (level 1) or every other file (level 2)."""
    invoices = dict(list(invoices.items())[:{1: 1, 2: 3}[level]])
    notes = dict(list(notes.items())[:{1: 1, 2: 2}[level]])
    kept = {**invoices, **notes, **{n: "" for n in others if level == 2 or n == "invoice_template.txt"}}

    def copy_of(n: str) -> str:
        stem, ext = n.rsplit(".", 1)
        return f"{stem} (1).{ext}"

    near_src = next((src for src in [near.replace(" (1)", ""), *kept] if src in kept and src.endswith((".txt", ".md"))
                     and copy_of(src) not in dups), None) if level == 2 else None
    sources = [src for src in dups.values() if src in kept] + [n for n in kept if n not in dups.values()
                                                                and n != near_src and n.endswith((".txt", ".md"))]
    dups = {copy_of(src): src for src in sources[:level]}
    out = {n: files[n] for n in sorted(kept)} | {d: files[src] for d, src in dups.items()}
    if near_src:
        near = copy_of(near_src)
        out[near] = files[near_src] + edit
    return out, invoices, notes, dups, (near if near_src else None)


@register
class DownloadsCleanup(TaskFamily):
    name = "downloads_cleanup"
    category = "file organisation"
    apps = ("files",)
    description = "Classify and file invoices and meeting notes by content; delete only exact duplicates."

    levels = 3
    """1: one invoice (a scan with a meaningless name), one set of notes, one exact copy and the
    template; 2: three invoices, two sets of notes, two exact copies, the edited copy and every
    other file; 3 (default): five to seven invoices, four to six notes, three exact copies."""
    toolsets = {1: ("files__delete", "files__list_dir", "files__move", "files__read_file")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        owner = fake.first_name()
        projects = rng.sample(PROJECTS, rng.randint(2, 3))
        files: dict[str, bytes] = {}
        invoices: dict[str, str] = {}  # name -> year
        notes: dict[str, str] = {}  # name -> project
        for i in range(rng.randint(5, 7)):
            year = rng.choice([2025, 2026])
            name = (f"INV-{rng.randint(1000, 9999)}_{fake.last_name().lower()}.txt" if i % 3
                    else f"scan_{rng.randint(1, 999):04d}.txt")
            files[name] = _invoice(fake, rng, year).encode()
            invoices[name] = str(year)
        for i in range(rng.randint(4, 6)):
            project = projects[i % len(projects)]
            name = f"notes_2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}_{i}.md" if i % 2 else f"untitled_{i}.md"
            files[name] = _notes(fake, rng, project).encode()
            notes[name] = project
        others = {
            "invoice_template.txt": b"TEMPLATE - do not file\nVendor: <name>\nInvoice date: <YYYY-MM-DD>\n",
            f"IMG_{rng.randint(1000, 9999)}.jpg": bytes(rng.randrange(256) for _ in range(600)),
            "setup_notes.txt": f"Wifi: {fake.word()}-{rng.randint(10, 99)}\nPrinter: {fake.word()}\n".encode(),
            f"{fake.word()}_presentation.pptx": bytes(rng.randrange(256) for _ in range(400)),
            "reading_list.md": "\n".join(f"- {fake.catch_phrase()}" for _ in range(4)).encode(),
        }
        files.update(others)
        # exact copies the browser made, and one "copy" that was edited afterwards
        originals = rng.sample(sorted(n for n in files if n.endswith((".txt", ".md"))), 4)
        dups = {}
        for n in originals[:3]:
            stem, ext = n.rsplit(".", 1)
            dups[f"{stem} (1).{ext}"] = n
        near_src = originals[3]
        stem, ext = near_src.rsplit(".", 1)
        near = f"{stem} (1).{ext}"
        near_bytes = files[near_src] + f"\nEdited by {owner}: {fake.sentence()}\n".encode()
        for d, src in dups.items():
            files[d] = files[src]
        files[near] = near_bytes
        if level < self.levels:  # the same draws as the default, then fewer files
            files, invoices, notes, dups, near = _fewer_files(level, files, invoices, notes, others, dups, near,
                                                              near_bytes[len(files[near_src]):])
        others = {n: b for n, b in files.items() if n in others or n == near}
        brief = level == 1  # a handful of files: no survey of Finance, no folders made ahead, no template opened
        # the near-duplicate stays where it is: it is an "other" whatever it resembles
        order = sorted(files)

        def build(root: Path) -> None:
            dl = root / "workspace" / "Downloads"
            dl.mkdir(parents=True)
            for n in order:
                (dl / n).write_bytes(files[n])
            (root / "workspace" / "Finance").mkdir()
            (root / "workspace" / "Finance" / "README.txt").write_text("Finance shared folder.\n")

        def inv_dest(n: str) -> str:
            return f"Finance/Invoices/{invoices[n]}/{n}"

        def note_dest(n: str) -> str:
            return f"Notes/{notes[n]}/{n}"

        w = phrasing_rng(self.name, seed)
        why = say(w, "My Downloads folder has become a mess and I need it sorted before the audit.",
                  "Before the audit I need my Downloads folder sorted out; it has become a mess.",
                  "The audit is coming up and my Downloads folder is a mess: could you sort it?")
        filing = say(w, "Please file every invoice under Finance/Invoices/<year of the invoice date>/ and every set "
                        "of meeting notes under Notes/<project>/ (the project is written inside the notes).",
                     "Every invoice goes under Finance/Invoices/<year of the invoice date>/, and every set of "
                     "meeting notes under Notes/<project>/ (each set of notes says its project inside).",
                     "File the invoices by the year of their invoice date, under Finance/Invoices/<year>/, and the "
                     "meeting notes by project, under Notes/<project>/ (the project is written inside the notes).")
        careful = say(w, "Careful: some scans have meaningless names, so open a file if you're not sure what it is, "
                         "and the invoice template is not an invoice.",
                      "Some scans have names that say nothing, so open a file when you're unsure what it is; the "
                      "invoice template doesn't count as an invoice.",
                      "Watch out: the invoice template is not an invoice, and some scans have meaningless names (open "
                      "a file if you can't tell what it is).")
        copies = say(w, "My browser also left copies named like 'report (1).txt': delete a copy only if it's exactly "
                        "identical to the original, otherwise leave it where it is.",
                     "There are also browser copies named like 'report (1).txt': a copy that is exactly identical to "
                     "its original can be deleted; one that differs stays where it is.",
                     "The browser left copies too ('report (1).txt' and the like). Delete a copy only when it matches "
                     "the original exactly; if it differs at all, leave it where it is.")
        keep = say(w, "Keep file names as they are, don't edit any file, and leave everything else in Downloads.",
                   "Don't rename or edit any file, and whatever isn't an invoice or meeting notes stays in Downloads.",
                   "Leave everything else in Downloads, and keep every file's name and contents as they are.")
        hello = say(w, "Hi!", "Hello,", "Hey,")
        bye = say(w, "Thanks,", "Cheers,", "Thank you,")
        instruction = " ".join([hello, why, filing, *in_some_order(w, [careful, copies]), keep, f"{bye} {owner}"])

        def moves(skip: str | None = None, wrong_note: bool = False):
            """The expert's walk: look, open what is ambiguous, file, de-duplicate, check."""
            yield ToolCall("files__list_dir", {"path": "Downloads"}, "First, see what is in Downloads.")
            if not brief:
                yield ToolCall("files__list_dir", {"path": "Finance"}, "Check what Finance already holds.")
            for n in order:
                if n.endswith((".txt", ".md")) and n not in dups and n != near and not (brief and n in others):
                    yield ToolCall("files__read_file", {"path": f"Downloads/{n}"}, f"Open {n} to see what it is.")
            for d, src in dups.items():
                yield ToolCall("files__read_file", {"path": f"Downloads/{d}"}, f"Compare {d} with {src}.")
            if near is not None:
                yield ToolCall("files__read_file", {"path": f"Downloads/{near}"}, f"Compare {near} with its original.")
            for d in [] if brief else [f"Finance/Invoices/{y}" for y in sorted(set(invoices.values()))] + \
                     [f"Notes/{p}" for p in sorted(set(notes.values()))]:
                yield ToolCall("files__make_dir", {"path": d}, f"Create {d}.")
            for i, n in enumerate(sorted(invoices)):
                if not (skip == "invoice" and i == 0):
                    yield ToolCall("files__move", {"src": f"Downloads/{n}", "dst": inv_dest(n)}, f"File invoice {n}.")
            for i, n in enumerate(sorted(notes)):
                dest = note_dest(n)
                if wrong_note and i == 0:
                    other = next(p for p in projects if p != notes[n])
                    dest = f"Notes/{other}/{n}"
                yield ToolCall("files__move", {"src": f"Downloads/{n}", "dst": dest}, f"File notes {n}.")
            for i, d in enumerate(sorted(dups)):
                if skip == "dup" and i == 0:
                    continue
                yield ToolCall("files__delete", {"path": f"Downloads/{d}"}, f"{d} is an exact copy; delete it.")
            yield ToolCall("files__list_dir", {"path": ".", "recursive": True}, "Verify the final layout.")

        def oracle():
            yield from moves()
            return (f"Done: filed {len(invoices)} invoices and {len(notes)} meeting notes, deleted "
                    f"{len(dups)} exact copies" + (f", and left {near} in Downloads because it differs from its "
                                                   "original." if near else "."))

        def with_extra(*extra: ToolCall, **kw):
            def gen():
                yield from moves(**kw)
                for call in extra:
                    yield call
                return "Done."
            return gen

        ws = lambda w: w.workspace  # noqa: E731

        def invoices_filed(w, t):
            bad = [n for n in invoices if not same_bytes(ws(w) / inv_dest(n), files[n])]
            return not bad, f"not filed: {bad}" if bad else ""

        def notes_filed(w, t):
            bad = [n for n in notes if not same_bytes(ws(w) / note_dest(n), files[n])]
            return not bad, f"not filed: {bad}" if bad else ""

        def kept(w, n: str) -> bool:
            """``n`` is still somewhere it may be: in Downloads, or filed where it belongs."""
            spots = ["Downloads/" + n] + ([inv_dest(n)] if n in invoices else []) + \
                    ([note_dest(n)] if n in notes else [])
            return any(same_bytes(ws(w) / p, files[n]) for p in spots)

        def dups_removed(w, t):
            left = [d for d in dups if (ws(w) / "Downloads" / d).exists()]
            lost = [src for src in dups.values() if not kept(w, src)]  # deleting everything is no de-duplication
            return not left and not lost, f"copies left: {left}; originals lost: {lost}"

        def others_in_place(w, t):
            bad = [n for n, b in others.items()
                   if not same_bytes(ws(w) / "Downloads" / n, b)]
            return not bad, f"moved or changed: {bad}" if bad else ""

        def no_edits(w, t):
            writes = t.calls("files__write_file", ok_only=True)
            return not writes, f"{len(writes)} file writes" if writes else ""

        def only_copies_deleted(w, t):
            allowed = {f"Downloads/{d}" for d in dups}
            bad = [c.arguments.get("path") for c in t.calls("files__delete", ok_only=True)
                   if norm_path(c.arguments.get("path")) not in allowed]
            return not bad, f"deleted: {bad}" if bad else ""

        criteria = [
            Criterion("invoices_filed", "every invoice is in Finance/Invoices/<year>/ with its name and content",
                      "final_state", invoices_filed, 2.0),
            Criterion("notes_filed", "every meeting note is in Notes/<project>/ unchanged", "final_state", notes_filed, 2.0),
            Criterion("exact_copies_deleted", "every exact ' (1)' copy is gone and its original kept",
                      "final_state", dups_removed),
            Criterion("others_left_in_place", "non-invoice, non-notes files (incl. the edited copy and the "
                      "template) are still in Downloads, unchanged", "final_state", others_in_place, guard=True),
            Criterion("no_file_edits", "no file was written or rewritten", "process", no_edits, guard=True),
            Criterion("only_copies_deleted", "nothing but exact copies was deleted", "process", only_copies_deleted, guard=True),
        ]
        first_other = sorted(n for n in others if n != near)[0]
        perturbations = {
            "invoices_filed": with_extra(skip="invoice"),
            "notes_filed": with_extra(wrong_note=True),
            "exact_copies_deleted": with_extra(skip="dup"),
            "others_left_in_place": with_extra(ToolCall("files__move", {"src": f"Downloads/{first_other}",
                                                                        "dst": f"Finance/{first_other}"})),
            "no_file_edits": with_extra(ToolCall("files__write_file", {"path": "Downloads/summary.txt",
                                                                       "content": "sorted"})),
            "only_copies_deleted": with_extra(ToolCall("files__delete", {"path": f"Downloads/{near or first_other}"})),
        }
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=oracle,
            criteria=criteria, perturbations=perturbations,
            data={"invoices": invoices, "notes": notes, "duplicates": dups, "near_duplicate": near},
        )
