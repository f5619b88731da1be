"""How different a family's instances are from each other, beyond the values it draws.

A family whose every seed reads the same sentence with other names and numbers in it teaches
one task, not twenty: a model can learn its surface instead of its work. Three measures over
seeds 0..19 (train seeds: below ``HOLDOUT_SEED_BASE``; the suite trains on the first ~7 of
each family, and twenty shows whether a family draws from pools at all):

- **skeletons**: distinct instructions once the drawn values are masked (``skeletons``);
- **overlap**: mean pairwise Jaccard similarity of the skeletons' word sets (1.0: same words);
- **trap sets**: distinct (criterion ids, non-empty ``Task.data`` keys) pairs, the traps and
  checks an instance carries (``trap_set``).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from longhorizon.core.task import Task, TaskFamily

DIVERSITY_SEEDS = range(20)
"""Seeds measured per family: train seeds (all below ``HOLDOUT_SEED_BASE``)."""

_MONTHS = ("january february march april may june july august september october november december "
           "jan feb mar apr jun jul aug sep sept oct nov dec")
_DAYS = "monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun"
_MASKS: list[tuple[str, re.Pattern[str]]] = [
    ("email", re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    ("url", re.compile(r"https?://\S+")),
    ("quoted", re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|`[^`\n]*`|(?<![\w])'[^'\n]*'(?![\w])")),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b")),
    ("date", re.compile(r"\b(?:%s)\b\.?" % "|".join(w.title() for w in (_MONTHS + " " + _DAYS).split()))),
    ("num", re.compile(r"\b\d{1,2}:\d{2}(?:\s?[ap]\.?m\.?)?")),
    ("id", re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w]+(?:-[\w]+)*\b")),
    ("num", re.compile(r"[$€£]?\b\d[\d,]*(?:\.\d+)?%?")),
]
"""What an instruction's drawn values look like, masked in this order (month and day names only
capitalised: "may" and "sat" as words stay)."""
_CAPITALISED = re.compile(r"\b(?!I\b|I['’])[A-Z][\w'’-]*")
"""A capitalised word: a name (of a person, a product, a team, a status). Words that open a
sentence are masked too: sentence openers in these instructions are greetings and names as
often as plain words, and masking a plain opener only ever hides diversity, never invents it."""
_PLACEHOLDER = re.compile(r"⟨\w+⟩")
_JOINERS = frozenset({"and", "or"})
_WORDS = re.compile(r"⟨⟩|[a-z][a-z'’-]*")


def drawn_values(data: object) -> set[str]:
    """The short strings in a Task's ``data``: the values its generator drew (names, services,
    products), found wherever they sit in dicts, lists and tuples."""
    out: set[str] = set()
    stack = [data]
    while stack and len(out) < 2000:
        v = stack.pop()
        if isinstance(v, str):
            s = v.strip()
            if 3 <= len(s) <= 60 and "\n" not in s:
                out.add(s)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)
    return out


def mask_kinds(instruction: str, values: Iterable[str] = ()) -> str:
    """The instruction with its drawn values replaced by ⟨kind⟩ placeholders (for reading).

    Masked, in this order: ``values`` (drawn strings, longest first, any case, as ⟨value⟩),
    emails, URLs, quoted text, dates, month and weekday names, times, ids (words with a digit
    and a letter), numbers and amounts, and capitalised words but "I" (names)."""
    text = instruction
    low = text.lower()
    vals = sorted({v for v in values if v.strip() and v.lower() in low}, key=lambda v: (-len(v), v))
    if vals:
        alt = "|".join(re.escape(v) for v in vals)
        text = re.sub(rf"(?<![\w])(?:{alt})(?![\w])", "⟨value⟩", text, flags=re.IGNORECASE)
    for kind, pattern in _MASKS:
        text = pattern.sub(f"⟨{kind}⟩", text)
    return _CAPITALISED.sub("⟨name⟩", text)


def mask(instruction: str, values: Iterable[str] = ()) -> str:
    """The skeleton of an instruction: ``mask_kinds``, then its words (lower-cased, punctuation
    dropped) with every placeholder one ⟨⟩, and a run of them (``⟨⟩, ⟨⟩ and ⟨⟩``, ``(⟨⟩) ⟨⟩``)
    one ⟨⟩: how many values a seed drew, or whether a period reads "Q3 2025" or "March", is not
    a different phrasing."""
    out: list[str] = []
    for w in _WORDS.findall(_PLACEHOLDER.sub("⟨⟩", mask_kinds(instruction, values)).lower()):
        if w == "⟨⟩" and out and out[-1] == "⟨⟩":
            continue
        if w == "⟨⟩" and len(out) >= 2 and out[-1] in _JOINERS and out[-2] == "⟨⟩":
            out.pop()
            continue
        out.append(w)
    return " ".join(out)


def skeletons(tasks: list[Task]) -> list[str]:
    """Each instruction with the values drawn by any of ``tasks`` masked (``mask``). The values
    are pooled over the family's seeds, so a word that is drawn in one seed ("finance") is
    masked in all of them, and fixed text that happens to contain it reads the same in each."""
    values = set().union(*(drawn_values(t.data) for t in tasks))
    return [mask(t.instruction, values) for t in tasks]


def words(skel: str) -> frozenset[str]:
    return frozenset(_WORDS.findall(skel))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def trap_set(task: Task) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Which checks and traps an instance carries: its criterion ids, and the ``Task.data`` keys
    whose value is not empty (a family that sometimes draws no duplicates, say, differs here)."""
    present = tuple(sorted(k for k, v in task.data.items() if v not in (None, "", [], {}, (), set(), 0, False)))
    return tuple(sorted(c.id for c in task.criteria)), present


@dataclass(frozen=True)
class FamilyDiversity:
    family: str
    seeds: int
    skeletons: int
    """Distinct masked instructions among the seeds."""
    overlap: float
    """Mean pairwise Jaccard of the skeletons' word sets (1.0: every seed the same words)."""
    trap_sets: int
    """Distinct (criterion ids, non-empty data keys) among the seeds."""

    def row(self) -> dict:
        return {"family": self.family, "seeds": self.seeds, "skeletons": self.skeletons,
                "overlap": round(self.overlap, 3), "trap_sets": self.trap_sets}


def diversity_of(family: str, tasks: list[Task]) -> FamilyDiversity:
    skels = skeletons(tasks)
    sets = [words(s) for s in skels]
    pairs = [jaccard(a, b) for a, b in itertools.combinations(sets, 2)]
    return FamilyDiversity(family=family, seeds=len(tasks), skeletons=len(set(skels)),
                           overlap=statistics.fmean(pairs) if pairs else 1.0,
                           trap_sets=len({trap_set(t) for t in tasks}))


def family_diversity(family: TaskFamily, seeds: Iterable[int] = DIVERSITY_SEEDS) -> FamilyDiversity:
    """Generates ``family``'s instances at ``seeds`` (nothing is built or played) and measures them."""
    return diversity_of(family.name, [family.generate(s) for s in seeds])


def suite_diversity(fams: Iterable[TaskFamily], seeds: Iterable[int] = DIVERSITY_SEEDS) -> Iterator[FamilyDiversity]:
    seeds = list(seeds)
    for f in fams:
        yield family_diversity(f, seeds)
