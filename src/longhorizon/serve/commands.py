"""CLI subcommands for serving models and benchmarking them.

    longhorizon serve [--model PATH|NAME] [--port P] [--lora PATH] [--host H]   vLLM, until Ctrl-C
    longhorizon bench tau2 --domain mock --base-url URL --model NAME --out DIR  τ²-bench on a served model

cli.py only calls ``add_commands``; heavy work happens in the command functions.
"""

from __future__ import annotations

import argparse
import signal
import sys

from longhorizon.core.errors import InfraError


def cmd_serve(args) -> int:
    from longhorizon.serve.vllm import VLLMServer

    server = VLLMServer(args.model, host=args.host, port=args.port, lora=args.lora,
                        max_model_len=args.max_model_len, kv_cache_gib=args.kv_cache_gib,
                        log_path=args.log)
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
    s.add_argument("--port", type=int, default=8000, help="default 8000")
    s.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--lora", help="a PEFT LoRA adapter folder, served on top of --model under its folder name")
    s.add_argument("--max-model-len", type=int, default=8192, help="context length (default 8192)")
    s.add_argument("--kv-cache-gib", type=float, default=2.0,
                   help="KV cache size on CPU, GiB (VLLM_CPU_KVCACHE_SPACE; default 2)")
    s.add_argument("--log", help="server log file (default: a temporary folder's server.log)")
    s.set_defaults(func=cmd_serve)
