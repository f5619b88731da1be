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
    t0 = time.perf_counter()
    trainer, rollout = build_trainer(cfg, progress=False)
    built = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        trainer.train()
        step = time.perf_counter() - t0
        logs = next(row for row in trainer.state.log_history if "episode/rollout_s" in row)
        sync = rollout.sampler.sync(trainer.model) if rollout.sampler is not None else 0.0
    finally:
        rollout.close()
    tokens = logs["episode/sampled_tokens"] * args.episodes
    return {"case": args.case, "build_s": built, "rollout_s": logs["episode/rollout_s"], "sync_s": sync,
            "update_s": step - logs["episode/rollout_s"], "step_s": step + sync, "sampled_tokens": tokens,
            "episodes": args.episodes, "pass_rate": logs.get("episode/pass_rate"), "turns": logs.get("episode/turns")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="model to train (default: the embedded SmolLM2)")
    p.add_argument("--episodes", type=int, default=16, help="episodes per step, a multiple of 8 (default 16)")
    p.add_argument("--cases", default="local,vllm")
    p.add_argument("--dtype", default="bfloat16", help="the vLLM server's dtype (default bfloat16)")
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
        print(f"{r['case']:<10} {r['rollout_s']:>8.1f} {r['sync_s']:>6.2f} {r['update_s']:>8.1f} {r['step_s']:>8.1f} "
              f"{100 * r['rollout_s'] / r['step_s']:>8.0f}% {rate:>7.1f} {r['pass_rate'] or 0:>5.2f} "
              f"{r['build_s']:>7.1f}")
    base = next((r for r in rows if r["case"] == "local"), None)
    for r in rows:
        if base is not None and r is not base:
            print(f"{r['case']} / local: step {r['step_s'] / base['step_s']:.2f}x, rollout "
                  f"{r['rollout_s'] / base['rollout_s']:.2f}x, sampled tok/s "
                  f"{(r['sampled_tokens'] / r['rollout_s']) / (base['sampled_tokens'] / base['rollout_s']):.2f}x")
    print("set-up: loading the model and building the trainer (and, for vllm, starting its server once per run)")


if __name__ == "__main__":
    main()
