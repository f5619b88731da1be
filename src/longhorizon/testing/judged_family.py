"""A test-only TaskFamily that mixes deterministic and judged criteria (core/judged.py).

Not registered (the registry reads ``longhorizon.tasks`` only), so it is in no split and no
count of the suite: the shipped suite uses judged criteria nowhere, since each of its criteria
has a deterministic check. Here the judged ones ask what no code can read: whether a note's
tone is warm (the note's text is the judge's evidence), and whether every step was sensible
(a step-level process rubric).

    thank_you_note-000001: read ``order.txt``, write a short thank-you note to ``note.txt``
    that names the customer.
"""

from __future__ import annotations

import random
from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.judged import Rubric, judged_criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall

NAMES = ("Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Dijkstra", "Barbara Liskov")
ITEMS = ("a desk lamp", "a standing desk", "two notebooks", "a monitor arm")

TONE = Rubric("Is the note in the evidence warm and polite, thanking the customer for their order?",
              evidence=lambda world: _note(world) or "(note.txt is missing)")
STEPS = Rubric("Is this step a sensible action towards writing the note (reading the order, or writing the "
               "note), not a useless or failing call?", scope="steps")


def _note(world) -> str:
    p = world.workspace / "note.txt"
    return p.read_text(encoding="utf-8", errors="replace") if p.is_file() else ""


class ThankYouNote(TaskFamily):
    name = "thank_you_note"
    category = "test"
    apps = ("files",)
    description = "Write a thank-you note for an order (test family: deterministic + judged criteria)."

    def generate(self, seed: int) -> Task:
        rng = random.Random(seed)
        customer, item = rng.choice(NAMES), rng.choice(ITEMS)

        def build(root: Path) -> None:
            (root / "workspace").mkdir(parents=True, exist_ok=True)
            (root / "workspace" / "order.txt").write_text(f"customer: {customer}\nitem: {item}\n")

        def oracle():
            yield ToolCall("files__read_file", {"path": "order.txt"}, "Read the order first.")
            yield ToolCall("files__write_file", {"path": "note.txt", "content":
                           f"Dear {customer},\n\nThank you so much for ordering {item}. We hope you enjoy it!\n"},
                           "Write the note.")
            return "I wrote a thank-you note to note.txt."

        def names_customer(world, traj):
            text = _note(world)
            return (customer in text, "" if text else "note.txt is missing")

        return Task(
            id=self.task_id(seed), family=self.name, category=self.category, split=self.split_of(seed), seed=seed,
            instruction="Read order.txt and write a short thank-you note to the customer in note.txt, "
                        "addressing them by name.",
            apps=self.apps, build=build, oracle=oracle, data={"customer": customer, "item": item},
            criteria=[
                Criterion("names_customer", "note.txt names the customer", "final_state", names_customer),
                judged_criterion("warm_tone", "the note is warm and polite (judged)", "final_state", TONE,
                                 requires=("names_customer",)),
                judged_criterion("sensible_steps", "every step is sensible (judged per step)", "process", STEPS,
                                 requires=("names_customer",)),
            ])
