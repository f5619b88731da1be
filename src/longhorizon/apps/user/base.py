"""Building blocks the user domains share: the person's tools, a session over the shared state,
the back-office context the agent's tools use, and tolerant reading of the agent's messages.

A domain (``mobile``, ``identity``, ``onboarding``) is one module that defines:

- ``SCHEMA``: its tables; ``INSTRUCTIONS``: what the app is, for MCP clients;
- ``register_agent_tools(srv, desk)``: the agent's back-office tools (``@srv.tool(EFFECT)`` closures, EFFECT from apps.common);
- ``USER_TOOLS``: the person's own tools (``UserTool``), never exposed to the agent;
- ``INTENTS``: how the rule-based person recognises requests in the agent's messages;
- ``opening(session)``: what the person says first; ``brief(session)``: their situation,
  in the second person, for an LLM playing them.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import cap
from longhorizon.apps.user import state


def dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


# -- the person's tools ----------------------------------------------------------------------

@dataclass(frozen=True)
class UserTool:
    """One thing the simulated person can do on their side (tap a setting, read their mail).

    ``fn(session, **arguments) -> (ok, text)``: ``text`` is what they see, in their words.
    ``parameters`` is a JSON Schema object, for an LLM playing the person. Tools that only
    look (``changes=False``) are logged too, so graders can see what the person checked.
    """

    name: str
    fn: Callable[..., tuple[bool, str]]
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    changes: bool = True

    def openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": dict(self.parameters)}}


def params(**props: tuple[str, str]) -> dict[str, Any]:
    """A JSON Schema for a user tool: ``name=(json type, description)``; all required."""
    return {"type": "object",
            "properties": {k: {"type": t, "description": d} for k, (t, d) in props.items()},
            "required": list(props)}


class Session:
    """One turn of the person: the open connection, what they know, and their tools."""

    def __init__(self, conn: sqlite3.Connection, tools: Mapping[str, UserTool]):
        self.conn = conn
        self.tools = tools
        self.meta = state.read_meta(conn)
        self.done: list[str] = []
        """The tools used so far in this turn (so a reply does not repeat what it already said)."""
        self.facts: dict[str, Any] = self.meta["facts"]
        self.persona: dict[str, Any] = self.meta["persona"]

    @property
    def name(self) -> str:
        return self.persona["name"]

    @property
    def first_name(self) -> str:
        return self.persona["name"].split()[0]

    def act(self, tool: str, **arguments: Any) -> tuple[bool, str]:
        """Use one of the person's tools; the call and its outcome go into the action log."""
        t = self.tools.get(tool)
        if t is None:
            return False, f"unknown tool {tool!r}"
        try:
            ok, text = t.fn(self, **arguments)
        except (TypeError, ValueError, AttributeError) as exc:  # an LLM player's malformed call
            ok, text = False, f"bad arguments for {tool}: {exc}"
        state.log_action(self.conn, "user", tool, arguments, ok, text)
        self.done.append(tool)
        return ok, text

    def agent_texts(self) -> list[str]:
        """Everything the agent has said so far, oldest first."""
        return [r[0] for r in self.conn.execute(
            "SELECT text FROM conversation WHERE role = 'agent' ORDER BY seq")]

    def pick(self, key: str, options: list[str]) -> str:
        """A deterministic choice among phrasings, varying with the turn."""
        h = hashlib.sha256(f"{self.meta['seed']}:{state.agent_messages(self.conn)}:{key}".encode()).digest()
        return options[h[0] % len(options)]

    def get(self, table: str, key: str) -> str | None:
        """A value from a key/value table (``device``, ``screen``)."""
        row = self.conn.execute(f"SELECT value FROM {table} WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, table: str, key: str, value: Any) -> None:
        self.conn.execute(f"INSERT OR REPLACE INTO {table} (key, value) VALUES (?, ?)", (key, str(value)))


# -- the agent's back office -----------------------------------------------------------------

class Desk:
    """What the agent's back-office tools share: connections to the state and the action log."""

    def __init__(self, db_path: Path):
        self.db_path = Path(db_path)

    def connect(self) -> sqlite3.Connection:
        if not self.db_path.exists():
            raise ToolError("this world has no user state (state/user.sqlite is missing)")
        conn = sqlite3.connect(self.db_path)
        conn.row_factory = sqlite3.Row
        return conn

    @contextmanager
    def read(self):
        conn = self.connect()
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def write(self):
        """A connection whose changes commit together (or not at all, on an error)."""
        conn = self.connect()
        try:
            with conn:
                yield conn
        finally:
            conn.close()

    @staticmethod
    def log(conn: sqlite3.Connection, tool: str, arguments: Mapping[str, Any], result: str) -> str:
        """Log a successful agent action; returns ``result`` so tools can ``return desk.log(...)``."""
        state.log_action(conn, "agent", tool, arguments, True, result)
        return result


# -- reading the agent's messages ------------------------------------------------------------

def normalize(text: str) -> str:
    """Lower case, plain quotes and dashes, one space between words."""
    text = (text or "").lower()
    text = re.sub(r"[\u2010-\u2015\u2212]", "-", text)
    text = text.replace("\u2018", "'").replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    text = re.sub(r"[*_`#>]+", " ", text)  # markdown emphasis and bullets
    return re.sub(r"[ \t]+", " ", text).strip()


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|[;\n]+|\s+-\s+(?=[a-z])")
_CLAUSE_SPLIT = re.compile(r",\s*|\s+(?:and|then|but|so|or|once|after that|afterwards)\s+|:\s+")
NEGATION = re.compile(
    r"\b(don't|do not|dont|never|no need to|not yet|needn't|shouldn't|should not|avoid|without|"
    r"instead of|stop|no longer|not necessary|unnecessary|there's no need|not have to|don't have to|"
    r"won't|will not|wouldn't|can't|cannot|unable to)\b")
AGENT_SAYS = re.compile(
    r"\b(i|we)\s*('ve|'d already|have|has|'ll|will|just|already|'m going to|am going to|are going to|"
    r"'re going to|can see|see|noticed|notice|checked|found|can confirm|confirmed|did|made|'m|am)\b"
    r"(?!\s+(need|want|ask|like|have to ask|recommend|suggest|would like)\b)"
    r"|\b(on my end|on our end|on our side|on my side|our system|in our system|from our side|"
    r"from my side|it looks like|it seems|according to)\b")
ACTION_VERB = re.compile(
    r"\b(turn|switch|toggle|set|put|disable|enable|deactivate|activate|flip|make sure|ensure|change|"
    r"take|keep|leave|tap|slide|cycle|reset|restore|revert|go ahead and)\b")
QUERY = re.compile(r"\?|\b(check|see|look|tell me|what|which|whether|confirm|report|read|let me know)\b")
ON_WORD = re.compile(r"\b(on|enable|enabled|activate|activated|back on)\b")
OFF_WORD = re.compile(r"\b(off|disable|disabled|deactivate|deactivated|out of)\b")
REQUEST = re.compile(
    r"\?|\b(please|pls|kindly|could you|can you|would you|will you|would you mind|i need you to|i'd like you to|"
    r"i would like you to|you need to|you'll need to|you will need to|you'll have to|you will have to|you have to|"
    r"you must|go ahead|try|let me know|tell me|make sure|"
    r"let's|i need|we need|i'll need|we'll need|may i|can i|could i)\b")
"""A sentence that asks something: a question, a polite request, a need."""
IMPERATIVE = re.compile(
    r"^(?:(?:ok|okay|great|thanks|thank you|alright|now|next|first|then|also|and|so|finally|lastly|right|"
    r"perfect|good)\W*\s+)*"
    r"(open|go|tap|turn|switch|toggle|check|look|read|run|try|sign|log|set|make|scan|enter|type|select|pick|"
    r"choose|reset|restore|revert|enable|disable|activate|deactivate|update|change|approve|accept|authori[sz]e|"
    r"confirm|take|click|visit|load|test|power|reboot|restart|have|keep|leave|put|create|add|enrol|enroll|"
    r"register|complete|review|e-?sign|countersign|share|send|give|use|find|launch|hold|unlock|pay|install|head|"
    r"navigate|verify|flip|cycle|come up with|follow|state|provide|describe|tell|say)\b")
"""A clause that starts with a bare verb ("Restart your phone", "Now open the link")."""
PAST_QUESTION = re.compile(r"\b(did you|have you|had you|were you|did it)\b")
PRONOUN = re.compile(r"\b(it|that|this|them)\b")
CYCLE = re.compile(r"\b(on and (then )?(back )?off|off and (then )?(back )?on|toggle|cycle|power cycle)\b")


def sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) pairs of a normalised message."""
    out, pos = [], 0
    for m in _SENTENCE_END.finditer(text):
        if m.start() > pos:
            out.append((pos, text[pos:m.start()]))
        pos = m.end()
    if pos < len(text):
        out.append((pos, text[pos:]))
    return [(o, s) for o, s in out if s.strip()]


def clauses(sentence: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for m in _CLAUSE_SPLIT.finditer(sentence):
        out.append((pos, sentence[pos:m.start()]))
        pos = m.end()
    out.append((pos, sentence[pos:]))
    return out


def clause_at(sentence: str, index: int) -> tuple[int, int, list[tuple[int, str]]]:
    """(clause number, its offset, all clauses) for a character index in ``sentence``."""
    parts = clauses(sentence)
    for k, (off, text) in enumerate(parts):
        if off <= index <= off + len(text):
            return k, off, parts
    return len(parts) - 1, parts[-1][0], parts


def wanted_state(clause: str) -> bool | None:
    """On or off, read from a clause: the first on/off word after the action verb, else any."""
    v = ACTION_VERB.search(clause)
    words = []
    for m in ON_WORD.finditer(clause):
        words.append((m.start(), True))
    for m in OFF_WORD.finditer(clause):
        words.append((m.start(), False))
    words.sort()
    if not words:
        return None
    if v:
        for pos, value in words:
            if pos >= v.start():
                return value
    return words[-1][1]


@dataclass
class Hit:
    """One request (or question) about one intent, found in one message."""

    intent: "Intent"
    pos: int
    sentence: str
    clause: str
    request: bool
    query: bool
    state: bool | None = None
    cycle: bool = False
    match: re.Match | None = None


@dataclass
class Intent:
    """Something the person can be asked about.

    ``target`` finds it in a sentence. ``kind``:
    - ``toggle``: a switch; ``run`` gets the wanted state (``hit.state``) when asked to change
      it (``hit.request``), or reports it when asked about it (a question or "check"/"tell me");
    - ``action``: a thing to do (``target`` includes the verb: "restart", "sign the contract");
      skipped when negated, when the agent is describing its own work, or when the sentence
      asks nothing (``asks``: no question, polite form or imperative clause);
    - ``info``: a question the person answers from what they know (only when the sentence asks).
    ``when``: a pattern the sentence must also match (e.g. a question form).
    ``variant(hit)``: hits of one intent with different variants all run (check, then reset);
    a variant of None means the sentence mentions the intent without asking anything.
    ``run(session, hit)`` performs it and returns the reply fragment (None: say nothing).
    """

    name: str
    target: str
    run: Callable[[Session, Hit], str | None]
    kind: str = "action"
    when: str | None = None
    variant: Callable[[Hit], str | None] | None = None
    pattern: re.Pattern = field(init=False)
    when_pattern: re.Pattern | None = field(init=False)

    def __post_init__(self) -> None:
        if self.kind not in ("toggle", "action", "info"):
            raise ValueError(f"intent {self.name}: bad kind {self.kind!r}")
        self.pattern = re.compile(self.target)
        self.when_pattern = re.compile(self.when) if self.when else None


def asks(sentence: str, parts: list[tuple[int, str]] | None = None) -> bool:
    """Whether a sentence asks for something: a question, a polite request or need, or a clause
    in the imperative. "Your activation link expires tomorrow" names a thing and asks nothing."""
    if REQUEST.search(sentence):
        return True
    return any(IMPERATIVE.match(c.strip()) for _, c in (parts if parts is not None else clauses(sentence)))


def _hit_at(intent: Intent, m: re.Match, off: int, sent: str) -> Hit | None:
    k, c_off, parts = clause_at(sent, m.start())
    clause = parts[k][1]
    before = clause[: max(m.start() - c_off, 0)]
    agent_says = AGENT_SAYS.search(before) and not re.search(r"\b(you|your)\b", before)
    if intent.kind == "info":
        if not REQUEST.search(sent) or (agent_says and "?" not in sent):
            return None  # "I've found your account by your employee ID" asks nothing
    else:
        if NEGATION.search(before) or agent_says:
            return None
        if intent.kind == "action" and not asks(sent, parts):
            return None  # a mention ("the status bar can be confusing") is not a request
    hit = Hit(intent, off + m.start(), sent, clause, request=False, query=bool(QUERY.search(sent)), match=m)
    if intent.kind == "toggle":
        _read_toggle(hit, sent, k, parts)
        if not hit.request and not hit.query:
            return None  # a mere mention ("your mobile data isn't working") asks nothing
    elif intent.kind == "action":
        hit.request = not PAST_QUESTION.search(before)
    if intent.variant is not None and intent.variant(hit) is None:
        return None  # e.g. "that APN is wrong" names the APN but asks nothing about it
    return hit


def find_hits(intents: list[Intent], text: str) -> list[Hit]:
    """Every intent the message asks for, in the order it mentions them (per intent and
    variant one hit: a request winning over a mere question)."""
    norm = normalize(text)
    hits: list[Hit] = []
    toggles_seen: list[Hit] = []
    for off, sent in sentences(norm):
        found_in_sentence = []
        for intent in intents:
            if intent.when_pattern is not None and not intent.when_pattern.search(sent):
                continue
            best, pos = None, 0
            while (m := intent.pattern.search(sent, pos)) is not None:
                # overlapping: a skipped match ("I've sent a code ... could you read it back")
                # must not hide a later one that starts inside it
                pos = m.start() + 1
                hit = _hit_at(intent, m, off, sent)
                if hit is not None and (best is None or (hit.request and not best.request)):
                    best = hit
                if best is not None and best.request:
                    break
            if best is not None:
                found_in_sentence.append(best)
        if not found_in_sentence:
            # "Please turn it off." right after a sentence that named the switch
            if toggles_seen and ACTION_VERB.search(sent) and PRONOUN.search(sent) and not NEGATION.search(sent):
                prev = toggles_seen[-1]
                st = wanted_state(sent)
                if st is not None or CYCLE.search(sent):
                    hits.append(Hit(prev.intent, off, sent, sent, request=True, query=False, state=st,
                                    cycle=bool(CYCLE.search(sent)) and st is None))
            continue
        for h in found_in_sentence:
            hits.append(h)
            if h.intent.kind == "toggle":
                toggles_seen.append(h)
    chosen: dict[tuple[str, str], Hit] = {}
    for h in hits:
        key = (h.intent.name, h.intent.variant(h) if h.intent.variant else "")
        cur = chosen.get(key)
        if cur is None or (h.request and not cur.request):
            chosen[key] = h
    return sorted(chosen.values(), key=lambda h: h.pos)


def _read_toggle(hit: Hit, sent: str, k: int, parts: list[tuple[int, str]]) -> None:
    clause = parts[k][1]
    if NEGATION.search(clause) and not ACTION_VERB.search(clause):
        return
    if CYCLE.search(clause) and wanted_state(clause) is None or re.search(
            r"\b(on and (then )?(back )?off|off and (then )?(back )?on)\b", sent):
        hit.request, hit.cycle = True, True
        return
    if ACTION_VERB.search(clause):
        hit.request, hit.state = True, wanted_state(clause)
        return
    # "if airplane mode is on, turn it off": the verb is in the next clause, with a pronoun
    if k + 1 < len(parts) and ACTION_VERB.search(parts[k + 1][1]) and PRONOUN.search(parts[k + 1][1]):
        hit.request, hit.state = True, wanted_state(parts[k + 1][1])
        return
    # "turn airplane mode off and mobile data on": the verb came earlier in the sentence
    if any(ACTION_VERB.search(t) for _, t in parts[:k]):
        st = wanted_state(clause)
        if st is not None:
            hit.request, hit.state = True, st


def mentions(text: str, pattern: str) -> bool:
    return bool(re.search(pattern, normalize(text)))
