"""The simulated person on the other side of ``user__send_message``.

Each message the agent sends runs one turn of the person, inside the tool call: the message
is recorded, the person decides what to do, uses their own tools over the shared state (each
use logged with actor ``user``) and answers in plain language. Two players:

- ``rule_reply`` (the default): deterministic. It recognises the requests its domain knows
  (synonyms and phrasings per intent; negations, "I've done X on my side" and sentences that
  ask nothing skipped; tests/apps/test_user_paraphrases.py), performs them in the order asked, reports what it sees, answers questions from
  what it knows, and says it does not understand anything else. It never acts unasked.
- ``llm_reply``: an OpenAI-compatible chat model plays the person, with the domain's user
  tools as its function tools (its calls run on the same tools, logged the same way) and its
  own chat history kept in the World (``llm_messages``), so it survives across calls.

Both have limited patience: after ``meta.patience`` agent messages the person gives up.
A model server that fails is an infrastructure failure: it is raised as an MCP protocol
error, so the episode stops as an infra error instead of showing the agent a tool error.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.shared.exceptions import MCPError

from longhorizon.apps.user import state
from longhorizon.apps.user.base import Session, find_hits, normalize

INTERNAL_ERROR = -32603

ENV_BASE_URL = "LONGHORIZON_USER_LLM_BASE_URL"
ENV_MODEL = "LONGHORIZON_USER_LLM_MODEL"
ENV_API_KEY = "LONGHORIZON_USER_LLM_API_KEY"

CLOSING = re.compile(r"\b(anything else|is there anything|have a (great|good|nice|lovely)|goodbye|bye|"
                     r"take care|you're all set|you are all set|all set now|glad (i|we) could help|"
                     r"enjoy your)\b")
WAIT = re.compile(r"\b(let me|one moment|give me a (moment|second|minute|sec)|bear with me|i'm checking|"
                  r"i am checking|i'll check|i will check|i'll look|i will look|i'll take a look|hold on|"
                  r"just a moment|please wait|i'll get back)\b")
ASKS = re.compile(r"\?|\b(please|could you|can you|would you|will you|need you to|i'd like you to|try|go to|"
                  r"open|tap|click|press|select|enter|type|check|tell me|let me know|make sure)\b")
ACK = re.compile(r"^(hi|hello|hey|thanks|thank you|great|ok|okay|perfect|good|excellent|understood|got it|"
                 r"sure|no problem|welcome|good morning|good afternoon)\b")


@dataclass(frozen=True)
class UserLLM:
    """An OpenAI-compatible chat model that plays the person instead of the rules."""

    base_url: str
    model: str
    api_key: str | None = None
    """None: ``OPENAI_API_KEY`` (as ``ChatClient``). Never put a key in a World's ``meta.llm``."""
    temperature: float | None = 0.0
    max_steps: int = 8
    """Chat completions per turn (each may call tools) before the turn is cut short."""
    max_retries: int = 5
    backoff_s: float = 1.0

    @classmethod
    def from_env(cls) -> "UserLLM | None":
        """From ``LONGHORIZON_USER_LLM_BASE_URL`` and ``LONGHORIZON_USER_LLM_MODEL`` (and
        ``LONGHORIZON_USER_LLM_API_KEY``); None unless both are set."""
        base, model = os.environ.get(ENV_BASE_URL), os.environ.get(ENV_MODEL)
        if not base or not model:
            return None
        return cls(base, model, api_key=os.environ.get(ENV_API_KEY))  # None: OPENAI_API_KEY, as ChatClient

    @classmethod
    def from_meta(cls, value: Any) -> "UserLLM | None":
        """From a World's ``meta.llm`` (``{"base_url", "model", ...}``), if it names one."""
        if not isinstance(value, dict) or not value.get("base_url") or not value.get("model"):
            return None
        keep = {k: value[k] for k in ("temperature", "max_steps", "max_retries", "backoff_s") if k in value}
        return cls(value["base_url"], value["model"], **keep)


def resolve_llm(explicit: UserLLM | None, meta_llm: Any) -> UserLLM | None:
    """Who plays the person: an explicit model, else the environment's, else the World's, else the rules."""
    return explicit or UserLLM.from_env() or UserLLM.from_meta(meta_llm)


async def converse(db_path: Path, text: str, domain, llm: UserLLM | None = None) -> str:
    """One turn: record the agent's message, let the person act and answer, record the answer."""
    conn = sqlite3.connect(db_path)
    conn.row_factory = sqlite3.Row
    try:
        with conn:
            conn.execute("INSERT INTO conversation (role, text) VALUES ('agent', ?)", (text,))
            meta = state.read_meta(conn)
            n = state.agent_messages(conn)
            name = meta["persona"]["name"]
            if meta.get("gave_up"):
                reply = f"({name} has left the chat and does not answer.)"
            elif n > meta["patience"]:
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('gave_up', ?)", (str(n),))
                reply = ("Sorry, I've spent far too long on this already and I have to go now. "
                         "I'll try again another day. Bye.")
            else:
                session = Session(conn, domain.USER_TOOLS)
                if llm is None:
                    reply = rule_reply(domain, session, text)
                else:
                    reply = await llm_reply(domain, session, text, llm)
            conn.execute("INSERT INTO conversation (role, text) VALUES ('user', ?)", (reply,))
        return reply
    finally:
        conn.close()


# -- the rule-based person -------------------------------------------------------------------

def rule_reply(domain, s: Session, text: str) -> str:
    first = state.agent_messages(s.conn) == 1
    parts: list[str] = []
    for hit in find_hits(domain.INTENTS, text):
        if hit.intent.kind == "action" and not hit.request:
            parts.append(s.pick("not-yet", ["No, I haven't done that yet. Should I?",
                                            "Not yet. Do you want me to?"]))
            continue
        out = hit.intent.run(s, hit)
        if out:
            parts.append(out)
    opening = domain.opening(s) if first else ""
    if parts:
        return " ".join(p for p in [opening, *parts] if p)
    if opening:
        return opening
    norm = normalize(text)
    if CLOSING.search(norm):
        if re.search(r"\b(anything else|is there anything)\b", norm):
            return s.pick("bye", ["No, that's everything. Thanks a lot for your help!",
                                  "That's all, thank you so much. Bye!"])
        return s.pick("bye", ["Great, thank you so much for your help!", "Perfect, thanks a lot. Bye!"])
    if WAIT.search(norm):
        return s.pick("wait", ["Okay, I'll wait.", "Sure, take your time."])
    if ACK.search(norm) and len(norm.split()) <= 8:
        return s.pick("ack", ["Okay.", "Alright."])
    if not ASKS.search(norm):  # information, not a request: acknowledge it
        return s.pick("noted", ["Okay, thanks for letting me know.", "Alright, good to know."])
    return s.pick("lost", [
        "I'm sorry, I don't understand what you want me to do. Could you tell me exactly what to do?",
        "Sorry, I don't understand what you want me to do. What exactly should I do or check?",
    ])


# -- the LLM-played person -------------------------------------------------------------------

RULES = (
    "How to behave:\n"
    "- You act only through your tools, and only to do what the agent asks you to do (or to look at "
    "something so you can answer a question). Never do anything nobody asked for.\n"
    "- After acting, tell the agent briefly what you did and what you see.\n"
    "- Share what you know when you are asked for it; never invent facts you were not given.\n"
    "- If you don't understand what the agent wants, say so.\n"
    "- Answer as the person, in plain text, one to three sentences. Never mention tools, prompts or "
    "that you are simulated."
)


def system_prompt(domain, s: Session) -> str:
    style = s.persona.get("style", "")
    return f"You are {s.name}. {style}\n\n{domain.brief(s)}\n\n{RULES}".strip()


def _history(conn: sqlite3.Connection) -> list[dict]:
    return [json.loads(r[0]) for r in conn.execute("SELECT message FROM llm_messages ORDER BY seq")]


def _remember(conn: sqlite3.Connection, message: dict) -> None:
    conn.execute("INSERT INTO llm_messages (message) VALUES (?)", (json.dumps(message, ensure_ascii=False),))


async def llm_reply(domain, s: Session, text: str, llm: UserLLM) -> str:
    """One turn played by a chat model; its tool calls run on the person's tools."""
    from longhorizon.core.chat_api import ChatClient, parse_response
    from longhorizon.core.errors import ContextLengthExceeded, InfraError

    history = _history(s.conn)
    if not history:
        history = [{"role": "system", "content": system_prompt(domain, s)}]
        _remember(s.conn, history[0])
    incoming = {"role": "user", "content": text}
    history.append(incoming)
    _remember(s.conn, incoming)
    tools = [t.openai() for t in domain.USER_TOOLS.values()]
    client = ChatClient(llm.base_url, llm.model, api_key=llm.api_key, temperature=llm.temperature,
                        max_retries=llm.max_retries, backoff_s=llm.backoff_s)
    try:
        async with client:
            for _step in range(llm.max_steps):
                data = await client.complete(client.request_body(history, tools))
                msg = parse_response(data)
                msg = {k: v for k, v in msg.items() if k in ("role", "content", "tool_calls")}
                history.append(msg)
                _remember(s.conn, msg)
                calls = msg.get("tool_calls") or []
                if not calls:
                    return (msg.get("content") or "").strip() or "..."
                for call in calls:
                    result = _run_tool(s, call)
                    tool_msg = {"role": "tool", "tool_call_id": call["id"], "content": result}
                    history.append(tool_msg)
                    _remember(s.conn, tool_msg)
    except (InfraError, ContextLengthExceeded) as exc:
        raise MCPError(INTERNAL_ERROR, f"the simulated user's model failed (infrastructure): {exc}") from exc
    return "Sorry, give me a moment, I'm a bit lost with all of this."


def _run_tool(s: Session, call: dict) -> str:
    fn = call.get("function") or {}
    name = fn.get("name", "")
    if name not in s.tools:
        return f"Error: no tool named {name!r}; you have: {', '.join(s.tools)}"
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except json.JSONDecodeError as exc:
        return f"Error: arguments are not valid JSON ({exc.msg})"
    if not isinstance(args, dict):
        return "Error: arguments must be a JSON object"
    ok, text = s.act(name, **args)
    return text if ok else f"Error: {text}"
