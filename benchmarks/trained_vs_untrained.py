"""Does training help? SmolLM2 before SFT, after SFT and after SFT+GSPO, greedy, on >= 100 holdout episodes.

    .venv/bin/python benchmarks/trained_vs_untrained.py                # ~1 hour on 2 idle cores
    .venv/bin/python benchmarks/trained_vs_untrained.py --out runs/b   # resumable: rerun to finish

The demo's pipeline (configs/demo.yaml: oracle teacher data -> full-FT SFT -> GSPO with
groups of 8) at a larger scale: more teacher episodes, more GSPO steps, and evaluation on
``--eval-seeds`` holdout instances of the training family plus ``--transfer-seeds`` held-out
instances of its never-trained sibling family (``pipeline.transfer_eval``). The report (OUT/report.md) pairs the models episode by episode: Δ pass@1
and Δ mean reward with paired-bootstrap intervals and McNemar's p. Not a test: it reports what
it finds, including no gain.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/bench-trained-vs-untrained")
    ap.add_argument("--config", default=str(CONFIG), help="the pipeline config to scale up")
    ap.add_argument("--teacher-seeds", type=int, default=32, help="oracle episodes for SFT")
    ap.add_argument("--rl-steps", type=int, default=6, help="GSPO optimizer steps")
    ap.add_argument("--eval-seeds", type=int, default=100, help="holdout instances per model")
    ap.add_argument("--transfer-seeds", type=int, default=32, help="held-out instances of the never-trained sibling per model")
    ap.add_argument("--engine", choices=["vllm", "local"], default="vllm",
                    help="what generates in the evaluation: vllm (a server started on each model in turn; "
                         "~400 episodes in minutes) or local (the in-process model: hours here)")
    args = ap.parse_args(argv)

    from longhorizon.train.pipeline import run_pipeline

    raw = yaml.safe_load(Path(args.config).read_text())
    raw["teacher"]["seeds"] = args.teacher_seeds
    raw["rl"]["max_steps"] = args.rl_steps
    raw["rl"]["seeds"] = max(raw["rl"].get("seeds", 1), args.rl_steps)
    raw["eval"]["seeds"] = args.eval_seeds
    raw["eval"]["transfer_seeds"] = args.transfer_seeds
    raw["eval"]["engine"] = args.engine
    raw["eval"]["concurrency"] = max(raw["eval"].get("concurrency", 1), 32 if args.engine == "vllm" else 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = out / "benchmark_config.yaml"
    if config.exists() and yaml.safe_load(config.read_text()) != raw:
        print(f"{out} was started with other settings ({config}); use another --out", file=sys.stderr)
        return 2
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    result = run_pipeline(out, config=config)
    return 0 if result["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
