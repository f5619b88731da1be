"""Aggregate generation speed: vLLM serving the default model vs in-process transformers, same run.

    .venv/bin/python benchmarks/serving_speed.py [--model DIR] [--concurrency 1 8 32 64] [--new 64]
                                                 [--base-url URL --served-name NAME] [--format json]

For each concurrency C, C first-turn conversations (prompts of different lengths, as in
``batched_generation.py``) are generated at once, greedy, each running exactly ``--new`` tokens:

* vLLM: C concurrent chat-completion requests to ``longhorizon serve``'s server (started here
  unless ``--base-url`` is given; ``ignore_eos`` so every request runs all tokens); tokens/s =
  the completion tokens the server reports / wall time of the C requests.
* transformers: ``LocalModelPolicy`` (the in-process policy) with ``max_batch`` = C and end
  tokens disabled, C concurrent ``act`` calls; tokens/s = C x new / wall time.

A warm-up per vLLM cell (and one for the in-process model), then the median of ``--steps``
timed repeats. ``--torch-threads`` sets the in-process model's threads (torch's default: one
per core, which busy cores punish hard). The vLLM server is stopped
before the transformers half runs, so the two never share the cores. The machine's other load
is not ours to stop: the load average before and after each half is printed with the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from types import SimpleNamespace

from batched_generation import questions  # same prompts as the in-process benchmark

from longhorizon.core.policy import EpisodeContext
from longhorizon.policies.openai_client import OpenAIPolicy


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


async def _served_once(policy: OpenAIPolicy, convs: list[list[dict]]) -> tuple[int, float]:
    t = time.perf_counter()
    replies = await asyncio.gather(*(policy.complete(policy.request_body(m, [])) for m in convs))
    wall = time.perf_counter() - t
    return sum(r["usage"]["completion_tokens"] for r in replies), wall


def measure_served(base_url: str, name: str, levels: list[int], new: int, steps: int) -> dict[int, float]:
    policy = OpenAIPolicy(base_url, name, max_tokens=new, extra_body={"ignore_eos": True, "min_tokens": new},
                          timeout_s=3600)
    out = {}

    async def run():
        async with policy:
            for c in levels:
                convs = questions(c)
                await _served_once(policy, convs)  # warm-up
                rates = []
                for _ in range(steps):
                    tokens, wall = await _served_once(policy, convs)
                    rates.append(tokens / wall)
                out[c] = statistics.median(rates)
                print(f"  vLLM         C={c:<3} {out[c]:8.1f} tok/s", flush=True)

    asyncio.run(run())
    return out


def measure_local(path: str, levels: list[int], new: int, steps: int) -> dict[int, float]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from longhorizon.policies.local_model import LocalModelPolicy

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    out = {}
    for i, c in enumerate(levels):
        convs = questions(c)
        policy = LocalModelPolicy(model, tok, max_new_tokens=new, max_batch=c)
        policy.eos_ids = frozenset()  # run all `new` tokens

        async def play():
            return await asyncio.gather(*(policy.act(m, [], EpisodeContext(SimpleNamespace(id="bench"), sample=i))
                                          for i, m in enumerate(convs)))

        if i == 0:
            asyncio.run(play())  # warm-up (once: eager torch compiles nothing per batch size)
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            asyncio.run(play())
            times.append(time.perf_counter() - t)
        out[c] = c * new / statistics.median(times)
        print(f"  transformers C={c:<3} {out[c]:8.1f} tok/s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="model folder (default: the embedded SmolLM2 of `longhorizon model init`)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument("--new", type=int, default=64, help="tokens generated per request (64)")
    ap.add_argument("--steps", type=int, default=1, help="timed repeats per cell, median (1)")
    ap.add_argument("--base-url", help="an already running server (e.g. `longhorizon serve`) instead of starting one")
    ap.add_argument("--served-name", help="the model name that server serves (with --base-url)")
    ap.add_argument("--torch-threads", type=int, help="torch threads for the in-process model (default: torch's)")
    ap.add_argument("--format", choices=["table", "json"], default="table")
    args = ap.parse_args()
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)

    from longhorizon.serve.vllm import VLLMServer, resolve_model
    from longhorizon.train.pretrained import default_model_dir, init_pretrained

    if args.model is None:
        init_pretrained(default_model_dir())
    path, name = resolve_model(args.model)
    loads = {"vLLM before": load()}
    if args.base_url:
        served = measure_served(args.base_url, args.served_name or name, args.concurrency, args.new, args.steps)
    else:
        with VLLMServer(args.model) as server:
            print(f"vLLM serving {server.model_name} at {server.base_url}", flush=True)
            served = measure_served(server.base_url, server.model_name, args.concurrency, args.new, args.steps)
    loads["vLLM after"] = loads["transformers before"] = load()
    local = measure_local(path, args.concurrency, args.new, args.steps)
    loads["transformers after"] = load()

    rows = [{"concurrency": c, "vllm_tok_s": round(served[c], 1), "transformers_tok_s": round(local[c], 1),
             "ratio": round(served[c] / local[c], 2)} for c in args.concurrency]
    if args.format == "json":
        print(json.dumps({"model": path, "new_tokens": args.new, "rows": rows, "load_average": loads,
                          "cpus": os.cpu_count()}, indent=2))
        return
    import torch

    print(f"\nmodel {path}, {args.new} new tokens per request, greedy, {os.cpu_count()} CPUs, "
          f"{torch.get_num_threads()} torch threads in-process")
    print("| concurrency | vLLM tok/s | transformers tok/s | vLLM / transformers |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['concurrency']} | {r['vllm_tok_s']} | {r['transformers_tok_s']} | {r['ratio']}x |")
    print("load average (1/5/15 min): " + "; ".join(f"{k} {v}" for k, v in loads.items()))


if __name__ == "__main__":
    main()
