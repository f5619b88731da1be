"""Adversarial policies the suite's graders must defeat (none may pass a task).

- ``ClaimsDonePolicy``: says the work is done without doing any.
- ``RandomToolPolicy``: calls random tools with arguments drawn from their JSON schemas.
- ``ShotgunPolicy``: reads everything it can, then writes plausible junk with every
  mutating tool, using names, paths, ids and addresses it saw in the results.

The junk adversaries first survey the World the way a diligent agent would (every file,
mailbox folder, message, channel, ticket, page), note the output paths the texts name
that do not exist yet, then game one kind of criterion:

- ``ReadOnlyPolicy``: reads everything and writes nothing (pays "read the inputs").
- ``EmptyArtefactPolicy``: creates every requested output empty, with only the layout the
  texts describe (header row, sheet names), no content.
- ``InstructionEchoPolicy``: pastes the instruction into every output, every reply and mail.
- ``ReplyToEverythingPolicy``: answers every message, thread and ticket with a reply that
  mentions everything it saw (pays naive "mentions X" checks).
- ``CopyInputsPolicy``: copies the most similar input (last period's file) to each output.

They are deterministic in (task, sample, seed) so a failing test can be replayed.
"""

from __future__ import annotations

import random
import re
from types import SimpleNamespace
from typing import Any

from longhorizon.core.policy import EpisodeContext, assistant, tool_call
from longhorizon.core.task import dumps_canonical

READ_PREFIXES = ("list", "read", "get", "search", "find", "describe", "query", "free_busy", "lookup", "check")
PATH_RE = re.compile(r"[\w./-]+\.(?:txt|md|csv|json|xlsx|docx|pptx|log|gz|sh|py|yaml|tsv)\b")
EMAIL_RE = re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+")
ID_RE = re.compile(r'"(?:id|message_id|event_id|ticket_id|order_id|doc_id|key|slug|sku)"\s*:\s*"?([\w-]+)"?')


class _Memory:
    """What an adversary has seen in tool results: candidate paths, addresses and ids."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.emails: list[str] = []
        self.ids: list[str] = []

    def absorb(self, text: str) -> None:
        for bag, found in ((self.paths, PATH_RE.findall(text)), (self.emails, EMAIL_RE.findall(text)),
                           (self.ids, ID_RE.findall(text))):
            for item in found:
                if item not in bag and len(bag) < 200:
                    bag.append(item)


def _plausible(name: str, schema: dict, rng: random.Random, mem: _Memory) -> Any:
    """A value that looks right for a parameter called ``name`` with this JSON schema."""
    kind = schema.get("type")
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"] or schema["anyOf"]
        return _plausible(name, rng.choice(options), rng, mem)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    n = name.lower()
    if kind == "array":
        return [_plausible(n.rstrip("s"), schema.get("items", {"type": "string"}), rng, mem)]
    if kind == "object":
        if n == "cells":
            return {"A1": "Total", "B2": rng.choice([0, 1, 100, 1234.5])}
        return {}
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("integer", "number"):
        if "id" in n and mem.ids:
            ids = [int(i) for i in mem.ids if i.isdigit()]
            if ids:
                return rng.choice(ids)
        return rng.choice([0, 1, 2, 3, 5, 10, 100]) if kind == "integer" else rng.choice([0.0, 1.0, 99.99, 1000.0])
    # strings
    if any(k in n for k in ("path", "file", "src", "dst", "dest", "folder")):
        return rng.choice(mem.paths) if mem.paths and rng.random() < 0.7 else rng.choice(
            ["report.xlsx", "notes.txt", "output.csv", "summary.docx", "Downloads", "."])
    if any(k in n for k in ("email", "to", "cc", "user", "attendee", "assignee", "traveler", "sender")):
        return rng.choice(mem.emails) if mem.emails else "someone@example.com"
    if n.endswith("id") or n in ("key", "slug", "sku", "channel"):
        return rng.choice(mem.ids) if mem.ids else "1"
    if any(k in n for k in ("start", "end", "date", "since", "until", "check_in", "check_out", "due")):
        return rng.choice(["2026-03-02T10:00", "2026-03-03", "2026-04-01T09:30"])
    if n in ("sheet", "old", "new", "name"):
        return rng.choice(["Sheet1", "Summary", "Data", "Report"])
    if n in ("range", "start_cell"):
        return rng.choice(["A1", "A1:D20", "B2"])
    if n in ("command", "sql", "query"):
        return rng.choice(["ls -la", "cat *.txt | head", "SELECT 1", "report", "invoice"])
    return rng.choice(["Done", "Updated as requested", "Total", "Approved", "See attached", "N/A"])


def _arguments(tool: dict, rng: random.Random, mem: _Memory, *, all_params: bool) -> dict:
    params = tool["function"].get("parameters") or {}
    props = params.get("properties") or {}
    required = set(params.get("required") or [])
    return {k: _plausible(k, s, rng, mem) for k, s in props.items() if all_params or k in required}


def _is_read(tool: dict) -> bool:
    name = tool["function"]["name"].split("__", 1)[-1]
    return name.startswith(READ_PREFIXES)


class _Base:
    name = "adversary"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "model": None, "sampling": {"seed": self.seed}}

    def _state(self, ctx: EpisodeContext) -> dict:
        if "adv" not in ctx.scratch:
            ctx.scratch["adv"] = {"rng": random.Random(f"{self.name}:{ctx.task.id}:{ctx.sample}:{self.seed}"),
                                  "mem": _Memory(), "n": 0, "queue": None}
        return ctx.scratch["adv"]

    @staticmethod
    def _observe(st: dict, messages: list[dict]) -> None:
        for m in messages[st.get("seen", 0):]:
            if m.get("role") in ("tool", "user"):
                st["mem"].absorb(str(m.get("content") or ""))
        st["seen"] = len(messages)

    @staticmethod
    def _call(st: dict, tool: dict, args: dict) -> dict:
        st["n"] += 1
        return assistant("", [tool_call(f"adv_{st['n']}", tool["function"]["name"], dumps_canonical(args))])


class ClaimsDonePolicy(_Base):
    """Claims success at once; graders must not take its word for it."""

    name = "claims_done"

    async def act(self, messages, tools, ctx) -> dict:
        return assistant("I have completed everything you asked: all items are processed, the files are "
                         "updated, the messages are sent and the results were verified. Done!")


class RandomToolPolicy(_Base):
    """Random tools, schema-shaped random arguments, a fixed number of calls."""

    name = "random_tools"

    def __init__(self, seed: int = 0, calls: int = 40):
        super().__init__(seed)
        self.calls = calls

    async def act(self, messages, tools, ctx) -> dict:
        st = self._state(ctx)
        self._observe(st, messages)
        if st["n"] >= self.calls or not tools:
            return assistant("Done.")
        rng = st["rng"]
        tool = rng.choice(tools)
        return self._call(st, tool, _arguments(tool, rng, st["mem"], all_params=rng.random() < 0.5))


class ShotgunPolicy(_Base):
    """Reads with every read tool (twice, to learn names), then fires every write tool with
    plausible junk built from what it read, several times over."""

    name = "shotgun"

    def __init__(self, seed: int = 0, rounds: int = 3, max_calls: int = 150):
        super().__init__(seed)
        self.rounds, self.max_calls = rounds, max_calls

    async def act(self, messages, tools, ctx) -> dict:
        st = self._state(ctx)
        self._observe(st, messages)
        if st["queue"] is None:
            reads = [t for t in tools if _is_read(t)]
            writes = [t for t in tools if not _is_read(t)]
            st["queue"] = [("r", t) for t in reads] * 2 + [("w", t) for t in writes] * self.rounds
        while st["queue"] and st["n"] < self.max_calls:
            kind, tool = st["queue"].pop(0)
            args = _arguments(tool, st["rng"], st["mem"], all_params=True)
            return self._call(st, tool, args)
        return assistant("All done: everything has been read, updated and sent.")


TEXT_EXTS = (".txt", ".md", ".csv", ".json", ".log", ".sh", ".py", ".yaml", ".tsv")
MAX_SURVEY_READS = 120
COLUMNS_RE = re.compile(r"columns?\s*(?:\(|:)?\s*([\w %/.-]+(?:\s*,\s*[\w %/.-]+)+)", re.I)
SHEET_RE = re.compile(r"sheet (?:named|called) [\"'“]([^\"'”]+)[\"'”]", re.I)


def _listed_paths(text: str) -> list[str]:
    """Files in a ``files__list_dir(recursive=True)`` result ("path  (N bytes)" lines)."""
    return [line.split("  (", 1)[0] for line in text.splitlines() if line.endswith(" bytes)")]


class _Survey(_Base):
    """Surveys the World (files, mail, chat, tickets, wiki, every no-argument read tool), then
    runs ``junk``: a generator of (tool, arguments) that games one kind of criterion.

    Written as a generator that receives each tool result, like the oracles.
    """

    final = "Done: I went through everything and completed the request."

    async def act(self, messages, tools, ctx) -> dict:
        st = self._state(ctx)
        if "gen" not in st:
            st["gen"] = self._script(ctx, {t["function"]["name"]: t for t in tools})
            st["names"] = {t["function"]["name"]: t for t in tools}
            result = None
        else:
            last = messages[-1] if messages else {}
            result = str(last.get("content") or "") if last.get("role") == "tool" else ""
        try:
            name, args = st["gen"].send(result)
        except StopIteration as stop:
            return assistant(stop.value or self.final)
        # a name the task does not offer (a level with fewer tools) is sent as it is: the episode
        # answers it with an error, as it would any agent's
        return self._call(st, st["names"].get(name) or {"function": {"name": name}}, args)

    def _script(self, ctx, tools: dict):
        sv = SimpleNamespace()  # this episode's findings (one policy plays many episodes at once)
        seen: list[str] = [ctx.task.instruction]
        have = lambda n: n in tools  # noqa: E731
        existing: list[str] = []

        def read(name, args):
            text = yield name, args
            seen.append(text or "")
            return text or ""

        if have("files__list_dir"):
            existing = _listed_paths((yield from read("files__list_dir", {"path": ".", "recursive": True})))
        for path in existing[:40]:
            ext = path[path.rfind("."):].lower() if "." in path else ""
            if ext in TEXT_EXTS and have("files__read_file"):
                yield from read("files__read_file", {"path": path})
            elif ext == ".xlsx" and have("sheets__read_range"):
                sheets = (yield from read("sheets__list_sheets", {"path": path}))
                for sheet in re.findall(r'"name":\s*"([^"]+)"', sheets)[:4]:
                    yield from read("sheets__read_range", {"path": path, "sheet": sheet})
            elif ext == ".docx" and have("docs__read_document"):
                yield from read("docs__read_document", {"path": path})
            elif ext == ".pptx" and have("slides__list_slides"):
                yield from read("slides__list_slides", {"path": path})
        sv.mail_ids: list[int] = []
        if have("mail__list_folders"):
            folders = re.findall(r'"name":\s*"([^"]+)"', (yield from read("mail__list_folders", {})))
            for folder in folders:
                listing = yield from read("mail__list_messages", {"folder": folder, "limit": 100})
                sv.mail_ids += [int(i) for i in re.findall(r'"id":\s*(\d+)', listing)]
            for mid in sv.mail_ids[:40]:
                yield from read("mail__read_message", {"message_id": mid})
        sv.channels: list[str] = []
        sv.threads: list[int] = []
        if have("chat__list_channels"):
            sv.channels = re.findall(r'"name":\s*"([^"]+)"', (yield from read("chat__list_channels", {})))
            for ch in sv.channels:
                text = yield from read("chat__read_channel", {"channel": ch, "limit": 100})
                sv.threads += [int(i) for i in re.findall(r'"id":\s*(\d+)', text)]
        sv.tickets: list[str] = []
        if have("tickets__search_tickets"):
            text = yield from read("tickets__search_tickets", {})
            sv.tickets = list(dict.fromkeys(re.findall(r'"key":\s*"([^"]+)"', text)))
            for key in sv.tickets[:30]:
                yield from read("tickets__get_ticket", {"key": key})
        if have("wiki__list_pages"):
            for slug in re.findall(r'"slug":\s*"([^"]+)"', (yield from read("wiki__list_pages", {})))[:30]:
                yield from read("wiki__get_page", {"slug": slug})
        for name, tool in tools.items():
            params = tool["function"].get("parameters") or {}
            if _is_read(tool) and not params.get("required") and len(seen) < MAX_SURVEY_READS \
                    and name not in ("files__list_dir", "mail__list_folders", "chat__list_channels",
                                     "tickets__search_tickets", "wiki__list_pages"):
                yield from read(name, {})
        text = "\n".join(seen)
        have_set = {p.strip("./") for p in existing}
        outputs = [p for p in dict.fromkeys(PATH_RE.findall(text))
                   if p.strip("./") not in have_set and not p.startswith(("http", "/"))]
        sv.seen_text, sv.existing, sv.outputs = text, existing, outputs[:12]
        sv.emails = list(dict.fromkeys(EMAIL_RE.findall(text)))[:30]
        return (yield from self.junk(sv, ctx, tools))

    def junk(self, sv, ctx, tools):  # pragma: no cover - overridden
        return self.final
        yield

    # helpers for the junk writers
    @staticmethod
    def layout(sv, path: str) -> tuple[list[str], list[str]]:
        """(header columns, sheet names) that the texts give near a mention of ``path``."""
        text = sv.seen_text
        i = text.find(path)
        near = text[i: i + 600] if i >= 0 else ""
        cols = COLUMNS_RE.search(near)
        header = [c.strip().strip(".") for c in re.split(r",|\band\b", cols.group(1))] if cols else []
        return [h for h in header if h][:12], SHEET_RE.findall(near)[:3]

    def write(self, tools, path: str, lines: list[str], header: list[str], sheets: list[str]):
        """Create ``path`` holding ``header`` then ``lines``, whatever its format."""
        ext = path[path.rfind("."):].lower()
        if ext == ".xlsx" and "sheets__create_workbook" in tools:
            sheets = sheets or ["Sheet1"]
            yield "sheets__create_workbook", {"path": path, "sheets": sheets}
            rows = ([header] if header else []) + [[x] for x in lines]
            if rows:
                yield "sheets__write_rows", {"path": path, "sheet": sheets[0], "start_cell": "A1", "rows": rows}
        elif ext == ".docx" and "docs__create_document" in tools:
            yield "docs__create_document", {"path": path}
            for x in ([", ".join(header)] if header else []) + lines[:20]:
                yield "docs__append_paragraph", {"path": path, "text": x}
        elif ext == ".pptx" and "slides__create_deck" in tools:
            yield "slides__create_deck", {"path": path}
            if lines or header:
                yield "slides__add_slide", {"path": path, "title": (lines or header)[0][:80],
                                            "bullets": (header + lines)[:10]}
        elif "files__write_file" in tools:
            sep = "," if ext == ".csv" else "\t" if ext == ".tsv" else " "
            body = ([sep.join(header)] if header else []) + lines
            yield "files__write_file", {"path": path, "content": "\n".join(body) + ("\n" if body else "")}
        elif "shell__run" in tools:
            yield "shell__run", {"command": f"mkdir -p \"$(dirname '{path}')\" && : > '{path}'"}


class ReadOnlyPolicy(_Survey):
    """Reads every input and changes nothing: "read the inputs" must not pay on its own."""

    name = "read_only"

    def junk(self, sv, ctx, tools):
        return "I have read all the inputs, checked them carefully and verified the results."
        yield


class EmptyArtefactPolicy(_Survey):
    """Every requested output exists, with the right name and layout but no content."""

    name = "empty_artefact"

    def junk(self, sv, ctx, tools):
        for path in sv.outputs:
            header, sheets = self.layout(sv, path)
            yield from self.write(tools, path, [], header, sheets)
        return "The requested files are in place."


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()][:30]


class InstructionEchoPolicy(_Survey):
    """Pastes the instruction into every output, answers every mail with it and sends it on."""

    name = "instruction_echo"

    def junk(self, sv, ctx, tools):
        instruction = ctx.task.instruction
        for path in sv.outputs:
            header, sheets = self.layout(sv, path)
            yield from self.write(tools, path, _sentences(instruction), header, sheets)
        if "mail__reply" in tools:
            for mid in sv.mail_ids[:25]:
                yield "mail__reply", {"message_id": mid, "body": instruction}
        if "mail__send_message" in tools and sv.emails:
            yield "mail__send_message", {"to": sv.emails[:10], "subject": instruction[:60], "body": instruction}
        if "chat__post_message" in tools:
            for ch in sv.channels[:10]:
                yield "chat__post_message", {"channel": ch, "text": instruction}
        if "tickets__add_comment" in tools:
            for key in sv.tickets[:25]:
                yield "tickets__add_comment", {"key": key, "body": instruction}
        return instruction


class ReplyToEverythingPolicy(_Survey):
    """Answers every message, thread and ticket with a reply that mentions everything seen."""

    name = "reply_to_everything"

    @staticmethod
    def kitchen_sink(sv) -> str:
        words = list(dict.fromkeys(re.findall(r"\b(?:[A-Z][\w'-]+|[\w-]*\d[\w.:/-]*)\b", sv.seen_text)))
        return ("Thanks, this is handled. For the record: " + ", ".join(words))[:4000]

    def junk(self, sv, ctx, tools):
        body = self.kitchen_sink(sv)
        if "mail__reply" in tools:
            for mid in sv.mail_ids[:40]:
                yield "mail__reply", {"message_id": mid, "body": body, "reply_all": True}
        if "chat__post_message" in tools:
            for ch in sv.channels[:10]:
                yield "chat__post_message", {"channel": ch, "text": body}
            for tid in sv.threads[:30]:
                yield "chat__post_message", {"channel": sv.channels[0], "text": body, "thread_id": tid}
        if "tickets__add_comment" in tools:
            for key in sv.tickets[:40]:
                yield "tickets__add_comment", {"key": key, "body": body}
        if "user__send_message" in tools:
            yield "user__send_message", {"text": body}
        return body


class CopyInputsPolicy(_Survey):
    """Each requested output is a copy of the most similar existing input (last period's)."""

    name = "copy_inputs"

    def junk(self, sv, ctx, tools):
        import difflib

        for path in sv.outputs:
            ext = path[path.rfind("."):].lower()
            same = [p for p in sv.existing if p.lower().endswith(ext)] or sv.existing
            if not same:
                continue
            src = max(same, key=lambda p: difflib.SequenceMatcher(None, p, path).ratio())
            if "files__copy" in tools:
                yield "files__copy", {"src": src, "dst": path}
            elif ext == ".docx" and "docs__copy_document" in tools:
                yield "docs__copy_document", {"source": src, "path": path}
            elif "shell__run" in tools:
                yield "shell__run", {"command": f"mkdir -p \"$(dirname '{path}')\" && cp '{src}' '{path}'"}
        return "I prepared the outputs from the existing files."


ADVERSARIES = {
    "claims_done": ClaimsDonePolicy,
    "random_tools": RandomToolPolicy,
    "shotgun": ShotgunPolicy,
    "read_only": ReadOnlyPolicy,
    "empty_artefact": EmptyArtefactPolicy,
    "instruction_echo": InstructionEchoPolicy,
    "reply_to_everything": ReplyToEverythingPolicy,
    "copy_inputs": CopyInputsPolicy,
}
