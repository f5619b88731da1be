"""One GSPO step of the demo, in-process sampling vs a vLLM server, split into rollout / weight sync / update.

    python benchmarks/rl_step.py [--model runs/demo/sft] [--episodes 16] [--cases local,vllm]

Each case runs in its own child process (a fresh interpreter, nothing cached between them): the
demo's RL settings (configs/demo.yaml, family log_first_error), one rollout of ``--episodes``
episodes (groups of 8, no flat-group replays, so every case plays the same number of
episodes) and one optimizer step over them (``updates_per_rollout: 1``), then, for the served
case, the weight sync that would precede the next rollout (write + reload). Rollout seconds are
the rollout's own clock (``episode/rollout_s``); update = the step's wall time minus the rollout.
The vLLM server's start is reported apart: it happens once per run. The model samples
differently in each case (different random streams, different engines), so episodes differ in
length: sampled tokens per second is the comparable rate. Time with perf_counter; the machine is
shared, so the numbers are noisy (say what else ran). Peak memory is not measured here (the
server is a separate process tree).

The update's floor: a dense update costs about 6 FLOPs per parameter per trained token (forward
2, backward 4), 8 with gradient checkpointing (the forward again); each case measures this
machine's float32 matmul rate in its own process just before the step (a (2048x576)@(576x1536)
product, SmolLM2's MLP shape), and prints the update's floor (its FLOPs at that rate) next to
the update it measured, so a target can be judged against what the cores can do.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def matmul_gflops(seconds: float = 3.0) -> float:
    """float32 matmul throughput of this process on this machine, GFLOP/s (SmolLM2's MLP shape)."""
    import torch

    a, b = torch.randn(2048, 576), torch.randn(576, 1536)
    a @ b  # warm-up
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        n += 1
    return 2 * 2048 * 576 * 1536 * n / (time.perf_counter() - t0) / 1e9


def one_case(args) -> dict:
    from longhorizon.train.config import load_pipeline
    from longhorizon.train.rl import build_trainer

    cfg = load_pipeline(ROOT / "configs" / "demo.yaml").rl
    out = tempfile.mkdtemp(prefix=f"rl-step-{args.case}-")
    cfg.out, cfg.model, cfg.max_steps, cfg.save_steps = out, args.model, 1, 0
    cfg.tasks_per_step = args.episodes // cfg.group_size
    cfg.updates_per_rollout, cfg.resample_flat_groups = 1, 0
    cfg.concurrency = args.episodes
    cfg.sampler, cfg.sampler_dtype = args.case, args.dtype
    from longhorizon.serve.vllm import auto_dtype

    dtype = auto_dtype(args.dtype) if args.case == "vllm" else "float32"  # the in-process sampler is the trainer
    t0 = time.perf_counter()
    trainer, rollout = build_trainer(cfg, progress=False)
    built = time.perf_counter() - t0
    gflops = matmul_gflops()
    params = sum(p.numel() for p in trainer.model.parameters())
    try:
        t0 = time.perf_counter()
        trainer.train()
        step = time.perf_counter() - t0
        logs = next(row for row in trainer.state.log_history if "episode/rollout_s" in row)
        sync = rollout.sampler.sync(trainer.model) if rollout.sampler is not None else 0.0
    finally:
        rollout.close()
    tokens = logs["episode/sampled_tokens"] * args.episodes
    trained = logs["episode/context_tokens"] * args.episodes  # the update's forward and backward cover every token
    update_flop = (8 if cfg.gradient_checkpointing else 6) * params * trained
    return {"gflops": gflops, "trained_tokens": trained, "update_floor_s": update_flop / (gflops * 1e9),
            "case": args.case, "dtype": dtype, "build_s": built, "rollout_s": logs["episode/rollout_s"], "sync_s": sync,
            "update_s": step - logs["episode/rollout_s"], "step_s": step + sync, "sampled_tokens": tokens,
            "episodes": args.episodes, "pass_rate": logs.get("episode/pass_rate"), "turns": logs.get("episode/turns")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="model to train (default: the embedded SmolLM2)")
    p.add_argument("--episodes", type=int, default=16, help="episodes per step, a multiple of 8 (default 16)")
    p.add_argument("--cases", default="local,vllm")
    p.add_argument("--dtype", default="auto", help="the vLLM server's dtype (default auto: float32 on CPU, bfloat16 on CUDA)")
    p.add_argument("--case", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.case:
        print("RESULT " + json.dumps(one_case(args)), flush=True)
        return
    rows = []
    for case in args.cases.split(","):
        cmd = [sys.executable, __file__, "--case", case, "--episodes", str(args.episodes), "--dtype", args.dtype]
        cmd += ["--model", args.model] if args.model else []
        print(f"running {case} ...", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"{case} failed:\n{proc.stderr[-3000:]}")
        rows.append(json.loads(line[len("RESULT "):]))
    print(f"One GSPO step of {args.episodes} episodes (demo family log_first_error), seconds")
    print(f"{'sampler':<10} {'rollout':>8} {'sync':>6} {'update':>8} {'step':>8} {'rollout %':>9} "
          f"{'tok/s':>7} {'pass':>5} {'set-up':>7}")
    for r in rows:
        rate = r["sampled_tokens"] / r["rollout_s"] if r["rollout_s"] else 0.0
        print(f"{r['case'] + ' ' + r.get('dtype', '')[:4]:<10} {r['rollout_s']:>8.1f} {r['sync_s']:>6.2f} {r['update_s']:>8.1f} {r['step_s']:>8.1f} "
              f"{100 * r['rollout_s'] / r['step_s']:>8.0f}% {rate:>7.1f} {r['pass_rate'] or 0:>5.2f} "
              f"{r['build_s']:>7.1f}")
    base = next((r for r in rows if r["case"] == "local"), None)
    for r in rows:
        if base is not None and r is not base:
            print(f"{r['case']} / local: step {r['step_s'] / base['step_s']:.2f}x, rollout "
                  f"{r['rollout_s'] / base['rollout_s']:.2f}x, sampled tok/s "
                  f"{(r['sampled_tokens'] / r['rollout_s']) / (base['sampled_tokens'] / base['rollout_s']):.2f}x")
    print("set-up: loading the model and building the trainer (and, for vllm, starting its server once per run)")
    print(f"{'sampler':<10} {'trained tok':>11} {'matmul GFLOP/s':>14} {'update floor s':>14} {'update / floor':>14}")
    for r in rows:
        print(f"{r['case']:<10} {r['trained_tokens']:>11.0f} {r['gflops']:>14.1f} {r['update_floor_s']:>14.1f} "
              f"{r['update_s'] / r['update_floor_s']:>13.1f}x")
    print("update floor: (8 with gradient checkpointing, else 6) x parameters x trained tokens at the measured "
          "matmul rate: no update of these tokens runs faster on these cores")


if __name__ == "__main__":
    main()
