"""Mail guards: where the episode's mail went."""

from __future__ import annotations

from collections.abc import Iterable

from longhorizon.apps.mail import state as mail_state
from longhorizon.core.grade import Criterion
from longhorizon.tasks.common import MAIL_SENDS, recipients


def sends_only(allowed: Iterable[str], *, seeded: int, replies: bool = True, id: str = "no_stray_mail",
               description: str = "mail went only to the people the task names") -> Criterion:
    """A guard: every mail the episode sent went only to ``allowed`` (to and cc, case ignored).

    Read twice, so neither side can hide a stray: the World's sent mail newer than the
    ``seeded`` messages the World was built with (a reply's recipient is only there), and each
    successful sending call's ``to``/``cc`` (every sending tool: send, forward, reply). With
    ``replies=False`` any reply is stray (the task asks for new mail only)."""
    allowed = frozenset(a.lower() for a in allowed)

    def check(world, traj):
        for m in mail_state.sent_messages(world):
            if m["id"] > seeded and any(a.lower() not in allowed for a in m["to"] + m["cc"]):
                return False, f"mail {m['id']} to {m['to'] + m['cc']}"
        for name in MAIL_SENDS:
            for call in traj.calls(name, ok_only=True):
                rcpts = recipients(call)
                if (name == "mail__reply" and not replies) or not rcpts <= allowed:
                    return False, f"{name} to {sorted(rcpts) or 'a sender'}"
        return True

    return Criterion(id, description, "process", check, guard=True)
