"""Helpers the dual-control families share: personas and checks over the shared action log."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from longhorizon.apps.user import state as user_state

STYLES = [
    "You are friendly and polite, a little impatient, and write short messages.",
    "You are anxious about being cut off and apologise a lot, but you follow instructions carefully.",
    "You are brisk and to the point; you dislike long explanations.",
    "You are cheerful and chatty, and not very technical.",
    "You are calm and methodical, and you describe exactly what you see.",
]

SEND = "user__send_message"


def persona(rng: random.Random, name: str) -> dict[str, str]:
    return {"name": name, "style": rng.choice(STYLES)}


def messages_sent(traj) -> int:
    """How many messages reached the person (successful ``user__send_message`` calls)."""
    return len(traj.calls(SEND, ok_only=True))


def confirmed_after_changes(world, traj, is_change: Callable[[dict], bool], is_success: Callable[[dict], bool],
                            what: str) -> tuple[bool, str]:
    """The person reported a success (``is_success`` on a logged action) after the last
    change (``is_change``), during a message the agent actually sent in this episode."""
    log = user_state.actions(world)
    changes = [a["seq"] for a in log if a["ok"] and is_change(a)]
    if not changes:
        return False, "nothing was changed"
    last = max(changes)
    wins = [a for a in log if a["seq"] > last and a["ok"] and is_success(a)]
    if not wins:
        return False, f"no successful {what} after the last change (action {last})"
    if wins[-1]["message"] > messages_sent(traj):
        return False, "the confirmation does not match a message sent in this episode"
    return True, ""


def mentions_amount(text: str, amount: float) -> bool:
    """``amount`` appears as a number in ``text`` ("35", "35.00", "$1,035.50"), to the cent."""
    for m in re.findall(r"\d[\d,]*(?:\.\d+)?", text or ""):
        try:
            if abs(float(m.replace(",", "")) - amount) < 0.005:
                return True
        except ValueError:
            continue
    return False
