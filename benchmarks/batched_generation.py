"""Aggregate generation speed of concurrent episodes on the in-process policy: batched vs one at a time.

    .venv/bin/python benchmarks/batched_generation.py [--model DIR] [--episodes 8] [--new 64] [--steps 2]

``--episodes`` concurrent ``LocalModelPolicy.act`` calls (one ``asyncio.gather``, each its own
episode, prompts of different lengths), greedy, every call running all ``--new`` tokens (end
tokens disabled), for ``max_batch`` 1 (the old behaviour: one request at a time) and
``max_batch`` = ``--episodes`` (decoded together). Aggregate new tokens per second = episodes x
new / wall time of the gather, the median of ``--steps`` repeats after one warm-up; the ratio is
against max_batch 1 in the same run. Each model also checks that the batched run gave the same
tokens and (within float rounding) the same log-probs as one at a time.

Models: the tiny random Qwen3 (built in a temporary folder) and the embedded SmolLM2-135M
(converted on first use). Other processes on the cores slow torch a lot: the load average before
and after is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from types import SimpleNamespace

import torch

from longhorizon.core.policy import EpisodeContext
from longhorizon.env.episode import SYSTEM_PROMPT

WORDS = "report invoice meeting budget review draft schedule summary client quarter".split()


def questions(n: int) -> list[list[dict]]:
    """n first-turn conversations whose prompts differ in length (the rows are padded differently)."""
    out = []
    for i in range(n):
        text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(8 + 12 * i))
        out.append([{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}])
    return out


async def play(policy, convs):
    return await asyncio.gather(*(policy.act(m, [], EpisodeContext(SimpleNamespace(id="bench"), sample=i))
                                  for i, m in enumerate(convs)))


def measure(path: str, episodes: int, new: int, steps: int) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from longhorizon.policies.local_model import LocalModelPolicy

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    convs = questions(episodes)
    out, msgs = {}, {}
    for batch in (1, episodes):
        policy = LocalModelPolicy(model, tok, max_new_tokens=new, max_batch=batch)
        policy.eos_ids = frozenset()  # run all `new` tokens
        msgs[batch] = asyncio.run(play(policy, convs))  # warm-up
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            asyncio.run(play(policy, convs))
            times.append(time.perf_counter() - t)
        out[batch] = episodes * new / statistics.median(times)
        out[f"batches {batch}"] = policy.batch_sizes[:4]
    a, b = msgs[1], msgs[episodes]
    out["same tokens"] = all(x["token_ids"] == y["token_ids"] for x, y in zip(a, b))
    out["max |dlogprob|"] = max(abs(p - q) for x, y in zip(a, b) for p, q in zip(x["logprobs"], y["logprobs"]))
    out["prompt tokens"] = (len(a[0]["prompt_ids"]), len(a[-1]["prompt_ids"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="model folder (default: the embedded SmolLM2, converted on first use)")
    ap.add_argument("--episodes", type=int, default=8, help="concurrent act() calls (8)")
    ap.add_argument("--new", type=int, default=64, help="new tokens per call (64)")
    ap.add_argument("--steps", type=int, default=2, help="timed repeats, after one warm-up (2)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from transformers.utils import logging as hf_logging

    from longhorizon.train.pretrained import resolve
    from longhorizon.train.tiny import build_tiny_model, default_corpus

    hf_logging.disable_progress_bar()
    smol = resolve(args.model)
    load0 = os.getloadavg()
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="lh-batch-") as tmp:
        tiny = str(build_tiny_model(f"{tmp}/tiny", default_corpus(families=[])))
        results = {name: measure(path, args.episodes, args.new, args.steps)
                   for name, path in {"tiny (4M)": tiny, "SmolLM2-135M": smol}.items()}
    load1 = os.getloadavg()
    n = args.episodes
    print(f"\nbatched generation on {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, torch "
          f"{torch.__version__}; load average {load0[0]:.1f} before, {load1[0]:.1f} after; {time.time() - t0:.0f} s")
    print(f"{n} concurrent act() calls, greedy, {args.new} new tokens each; aggregate new tokens/s "
          f"(median of {args.steps})")
    print(f"{'':<14} {'prompt toks':>12} {'max_batch 1':>12} {f'max_batch {n}':>12} {'ratio':>7} "
          f"{'same tokens':>12} {'max |dlogp|':>12}  batches (first 4)")
    for name, r in results.items():
        print(f"{name:<14} {'%d-%d' % r['prompt tokens']:>12} {r[1]:>12,.1f} {r[n]:>12,.1f} {r[n] / r[1]:>6.1f}x "
              f"{'yes' if r['same tokens'] else 'NO':>12} {r['max |dlogprob|']:>12.1e}  {r[f'batches {n}']}")


if __name__ == "__main__":
    main()
