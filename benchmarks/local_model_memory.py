"""Peak memory of the in-process policy's batched decoding on long prompts: one forward per turn
vs the prompt fed in slices of ``PREFILL_TOKENS``.

    .venv/bin/python benchmarks/local_model_memory.py [--rows 4] [--tokens 3000] [--more 1000]

Each variant runs in its own process (peak resident set is per process): the embedded SmolLM2 in
float32 is loaded and its weights paged in (a first forward: safetensors are memory-mapped, so
the first forward alone adds ~0.55 GB), then ``--rows`` prompts of ``--tokens`` random ids
decode 4 new tokens together (turn 1), then each grows by ``--more`` ids and decodes again on
its kept KV cache (turn 2: the caches merged into one padded batch). Printed: the peak resident
set above the warmed model after each turn, and the KV cache the rows keep (46 KB per token:
30 layers x keys and values x 3 heads x 64 x 4 bytes).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def child(rows: int, tokens: int, more: int, prefill: int) -> dict:
    import torch

    from longhorizon.policies import local_model
    from longhorizon.train.pretrained import embedded_model

    local_model.PREFILL_TOKENS = prefill
    policy = local_model.LocalModelPolicy(embedded_model(), max_batch=rows, max_new_tokens=4)
    policy.generate([1, 2, 3])  # page the weights in

    def rss_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    base, gen = rss_mb(), torch.Generator().manual_seed(0)
    prompts = [torch.randint(100, 40000, (tokens - 7 * r,), generator=gen).tolist() for r in range(rows)]
    states = [{} for _ in range(rows)]
    t = time.perf_counter()
    out = policy._decode_batch(prompts, states, [4] * rows)
    turn1, s1 = rss_mb() - base, time.perf_counter() - t
    prompts = [p + o[0] + torch.randint(100, 40000, (more,), generator=gen).tolist() for p, o in zip(prompts, out)]
    t = time.perf_counter()
    policy._decode_batch(prompts, states, [4] * rows)
    turn2, s2 = rss_mb() - base, time.perf_counter() - t
    kept = sum(len(p) for p in prompts) * 30 * 2 * 3 * 64 * 4 / 2**20
    return {"turn1_mb": round(turn1), "turn2_mb": round(turn2), "kv_kept_mb": round(kept),
            "turn1_s": round(s1, 1), "turn2_s": round(s2, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=3000)
    ap.add_argument("--more", type=int, default=1000)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.rows, args.tokens, args.more, args.child)))
        return
    print(f"{args.rows} rows x {args.tokens} tokens, then +{args.more} each; load average "
          f"{open('/proc/loadavg').read().split()[0]}")
    for name, prefill in (("one forward", 10**9), ("sliced (PREFILL_TOKENS=2048)", 2048)):
        res = subprocess.run([sys.executable, __file__, "--rows", str(args.rows), "--tokens", str(args.tokens),
                              "--more", str(args.more), "--child", str(prefill)],
                             capture_output=True, text=True, check=True)
        print(f"{name:30s} {res.stdout.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
