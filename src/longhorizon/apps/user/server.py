"""The `user` app: talk to the person you are helping, and the back office over their account.

``send_message`` is how the agent reaches the person: the simulated person runs inside the
call (see ``simulator``), acts with their own tools over the shared state and replies. Their
tools are never exposed here: only they can reboot their phone, read their own mail or sign
their contract. The other tools are the agent's back office for the World's domain (a mobile
carrier's customer desk, an IT helpdesk console, an HR onboarding system); which ones exist
depends on the domain written in ``state/user.sqlite``.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import ACT, AppServer, server_builder
from longhorizon.apps.user import state
from longhorizon.apps.user.base import Desk
from longhorizon.apps.user.simulator import UserLLM, converse, resolve_llm

MAX_MESSAGE_CHARS = 4000

INSTRUCTIONS = (
    "The person you are helping, and the systems over their account. Talk to them with "
    "send_message: they answer, and can do things only they can do (on their device, in their "
    "own mail or portal) when you ask clearly. The other tools are your back office."
)


def _domain_of(db_path) -> tuple[str | None, dict]:
    if not db_path.exists():
        return None, {}
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as conn:
        meta = state.read_meta(conn)
    return meta.get("domain"), meta


def make_app(world, *, llm: UserLLM | None = None):
    """The `user` app over ``world``. ``llm`` plays the person instead of the rules (else the
    environment's ``LONGHORIZON_USER_LLM_*`` settings, else the World's ``meta.llm``)."""
    db_path = world.db_path("user")
    domain_name, meta = _domain_of(db_path)
    domain = state.domain_module(domain_name) if domain_name else None
    player = resolve_llm(llm, meta.get("llm"))
    srv = AppServer("user", INSTRUCTIONS + (f" {domain.INSTRUCTIONS}" if domain else ""),
                    template_key=f"user/{domain_name or 'none'}")  # each domain has its own tools
    desk = Desk(db_path)

    @srv.tool(ACT)
    async def send_message(text: str) -> str:
        """Send a chat message to the person you are helping and get their reply.

        They can only do what you ask of them clearly (e.g. "Please restart your phone and tell
        me what the top of the screen shows"), and they report what they did and see. Ask one
        or a few things at a time. They have limited patience, so don't waste their time.

        Args:
            text: your message, in plain language.

        Returns their reply (plain text)."""
        if domain is None:
            raise ToolError("there is no one to talk to in this world (state/user.sqlite is missing)")
        if not isinstance(text, str) or not text.strip():
            raise ToolError("text must not be empty: write the message you want to send")
        if len(text) > MAX_MESSAGE_CHARS:
            raise ToolError(f"the message is too long ({len(text)} characters); keep it under {MAX_MESSAGE_CHARS}")
        return await converse(db_path, text.strip(), domain, player)

    if domain is not None:
        domain.register_agent_tools(srv, desk)
    return srv


build_server = server_builder(make_app)
