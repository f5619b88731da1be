"""Does training help? The tiny model before and after training, greedy, on holdout instances.

    .venv/bin/python benchmarks/trained_vs_untrained.py                # ~70 min on 2 idle cores
    .venv/bin/python benchmarks/trained_vs_untrained.py --out runs/b   # resumable: rerun to finish

A random-init 4M-parameter model has everything to learn, so the schedule is longer than the
demo's and uses many fresh teacher episodes (the oracle, no recovery examples) of one family,
the suite's shortest (log_error_summary), on train seeds only:

    sft1    SFT, assistant tokens,  96 episodes (seeds 0-95) x 5 epochs, lr 5e-3
    sft2    SFT, assistant tokens, 300 fresh episodes (seeds 96-395) x 1 epoch, lr 3e-3
    warmup  loss on every token,   300 fresh episodes (seeds 396-695) x 1 epoch, lr 3e-3

(the last is a language-model warm-up: tool results are learned too, which is where copying
from context is learned). Then base and each stage's model play the family's holdout seeds
greedily, and the table shows mean dense reward and pass@1 against the untrained model
measured in the same run. Not a test: it reports what it finds, including no gain.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

FAMILY = "log_error_summary"


@dataclass(frozen=True)
class Stage:
    name: str
    seeds: tuple[int, int]
    """Teacher seeds [lo, hi) of the family (train split: all below the holdout's 100000)."""
    epochs: float
    lr: float
    loss_on: str = "assistant"
    warmup: float = 0.03


SCHEDULE = (
    Stage("sft1", (0, 96), 5, 5e-3, warmup=0.05),
    Stage("sft2", (96, 396), 1, 3e-3),
    Stage("warmup", (396, 696), 1, 3e-3, loss_on="all"),
)


def teacher_data(out: Path, family: str, seeds: tuple[int, int]) -> Path:
    """Oracle episodes on seeds [lo, hi), rejection-sampled into an SFT dataset (resumable)."""
    from longhorizon.core.registry import get_family
    from longhorizon.env.episode import Limits
    from longhorizon.policies.scripted import OraclePolicy
    from longhorizon.train.data import build_sft_dataset
    from longhorizon.train.pipeline import _run_policy

    data = out / "sft_data"
    if not (data / "summary.json").exists():
        tasks = [get_family(family).generate(s) for s in range(*seeds)]
        _run_policy(tasks, OraclePolicy(), out / "teacher", split="train", seeds=seeds[1] - seeds[0],
                    families=[family], limits=Limits(), concurrency=4, progress=True)
        build_sft_dataset([out / "teacher"], data, min_reward=0.9, overwrite=True)
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/bench-trained-vs-untrained")
    ap.add_argument("--eval-seeds", type=int, default=4, help="holdout instances to evaluate on")
    ap.add_argument("--vocab-size", type=int, default=4096, help="tokenizer vocabulary of the tiny model")
    args = ap.parse_args(argv)

    import datasets

    from longhorizon.train.config import ModelConfig, SFTConfig
    from longhorizon.train.pipeline import demo_config, evaluate_model
    from longhorizon.train.sft import run_sft
    from longhorizon.train.tiny import init_model

    datasets.disable_progress_bars()
    out = Path(args.out)
    base = out / "models" / "base"
    if not (base / "config.json").exists():
        init_model(base, ModelConfig(vocab_size=args.vocab_size))
    models = {"base": base}
    prev = base
    for st in SCHEDULE:
        model = out / "models" / st.name
        if not (model / "summary.json").exists():
            print(f"[{st.name}] teacher seeds {st.seeds[0]}-{st.seeds[1] - 1}, {st.epochs:g} epoch(s), "
                  f"lr {st.lr:g}, loss on {st.loss_on} tokens")
            data = teacher_data(out / "teacher" / st.name, FAMILY, st.seeds)
            cfg = SFTConfig(data=str(data), model=str(prev), out=str(model), epochs=st.epochs, learning_rate=st.lr,
                            warmup_ratio=st.warmup,
                            batch_size=1, grad_accum=1, max_length=8192, loss_on=st.loss_on, save_steps=100)
            run_sft(cfg, resume=any(model.glob("checkpoint-*")))
        models[st.name] = prev = model

    ecfg = demo_config().eval
    ecfg.families, ecfg.seeds = [FAMILY], args.eval_seeds
    results = {}
    for name, path in models.items():
        print(f"[eval] {name}: greedy on {args.eval_seeds} holdout instances of {FAMILY}")
        results[name] = evaluate_model(path, out / "eval" / name, ecfg)["overall"]

    b = results["base"]
    print(f"\n{FAMILY}, holdout seeds 100000-{100000 + args.eval_seeds - 1}, greedy; "
          f"baseline = the untrained model in this run ({out})\n")
    print(f"{'model':<10} {'reward':>7} {'Δ base':>7} {'pass@1':>7} {'calls':>6}")
    for name, o in results.items():
        print(f"{name:<10} {o['mean_reward']:>7.3f} {o['mean_reward'] - b['mean_reward']:>+7.3f} "
              f"{o['pass@1']:>7.3f} {o['mean_tool_calls']:>6.1f}")
    best = max(results, key=lambda k: results[k]["mean_reward"])
    gain = results[best]["mean_reward"] - b["mean_reward"]
    print(f"\nbest: {best}, {'beats' if gain > 0 else 'does not beat'} the untrained model on mean reward "
          f"({gain:+.3f})")
    (out / "bench_result.json").write_text(json.dumps({"family": FAMILY, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
