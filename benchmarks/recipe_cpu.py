"""The recipe's shape on one CPU box (issue 23): train on the suite, then ask where the gain goes.

    .venv/bin/python benchmarks/recipe_cpu.py --out runs/recipe-cpu     # resumable: rerun to finish
        [--config configs/recipe_cpu.yaml] [--bfcl-limit 10] [--tau2-limit 5] [--no-repeat]
        [--skip-bench]

Stages, each kept under OUT and skipped when done (times in OUT/times.json):

1. pipeline   ``longhorizon demo --config CONFIG --out OUT/pipeline``: oracle teacher data at level 1
              over every train family -> SFT -> RL's start (the earliest SFT step with headroom on a
              train-split dev set) -> GSPO with served rollouts -> greedy float32 evaluation of base,
              SFT, RL's start and SFT+GSPO on (a) held-out seeds at the trained level, (b) the holdout
              families, (c) the trained families at longer levels (OUT/pipeline/eval/...).
2. audit      ``longhorizon audit`` with the SFT data: the firewall's overlap check (OUT/audit).
3. bench      for base, SFT+GSPO (and the base again, unless --no-repeat: the noise floor), one
              vLLM server per model (float32, greedy, seed 0): ``bench bfcl`` on every offline
              category, the first --bfcl-limit entries of each, and ``bench tau2`` on mock (all
              tasks) and airline (the first --tau2-limit), the model playing its own user
              (OUT/bench/MODEL/{bfcl,tau2-mock,tau2-airline}).
4. import     BFCL's multi-turn answers and τ²'s simulations as run folders of Trajectories
              (``longhorizon import``; OUT/imported/MODEL/...).
5. analyze    ``longhorizon analyze`` on the real pairs: base vs SFT+GSPO and RL's start vs SFT+GSPO
              on (a)-(c), and base vs SFT+GSPO on BFCL multi-turn and τ² (OUT/analysis/PAIR-SET).
6. report     ``longhorizon report transfer``: (a)-(d) in one table, the provenance and the audit
              (the firewall line), the base's repeat as each row's noise floor (OUT/transfer).

Nothing of BFCL or τ² informs any choice in stages 1-2 (the firewall): they run after the
models exist, and only the report reads them. Not run for the issue that added it; the sizes of
configs/recipe_cpu.yaml are its estimate (~2.5 h for stage 1 on 2 idle cores; stage 3 ~20 min a
model at the defaults). Results are reported as they come out, a null included.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "recipe_cpu.yaml"
TAU2_DOMAINS = ("mock", "airline")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def lh(*args: str) -> None:
    """``longhorizon ARGS`` of this checkout, raising when it fails."""
    subprocess.run([sys.executable, "-m", "longhorizon.cli", *map(str, args)], check=True, cwd=ROOT)


def done(path: Path) -> bool:
    """A finished results.json (bench) or run folder summary."""
    for name in ("results.json", "summary.json"):
        p = path / name
        if p.exists():
            data = json.loads(p.read_text())
            return bool(data.get("complete", (data.get("meta") or {}).get("complete", True)))
    return False


class Timer:
    def __init__(self, path: Path):
        self.path = path
        self.times = json.loads(path.read_text()) if path.exists() else {}

    @contextlib.contextmanager
    def stage(self, name: str):
        t0 = time.time()
        yield
        self.times[name] = round(self.times.get(name, 0) + time.time() - t0, 1)
        self.path.write_text(json.dumps(self.times, indent=2) + "\n")


def bench(model_dir: Path, out: Path, args) -> None:
    """BFCL and τ² for one model behind one vLLM server (started only when something is missing)."""
    from longhorizon.serve.vllm import VLLMServer

    todo = [d for d in ("bfcl", *(f"tau2-{d}" for d in TAU2_DOMAINS)) if not done(out / d)]
    if not todo:
        return
    with VLLMServer(str(model_dir), dtype="float32", max_model_len=8192, log_path=out / "vllm.log") as server:
        url, name = server.base_url, server.model_name
        if "bfcl" in todo:
            lh("bench", "bfcl", "--base-url", url, "--model", name, "--limit", args.bfcl_limit, "--quiet",
               "--out", out / "bfcl")
        for domain in TAU2_DOMAINS:
            if f"tau2-{domain}" in todo:
                limit = ["--limit", args.tau2_limit] if domain != "mock" else []
                lh("bench", "tau2", "--domain", domain, "--base-url", url, "--model", name, *limit,
                   "--out", out / f"tau2-{domain}")


def imports(bench_dir: Path, out: Path) -> list[Path]:
    """BFCL multi-turn answers and τ² simulations of one model as run folders; the folders."""
    runs = []
    for result in sorted((bench_dir / "bfcl" / "bfcl" / "result").rglob("*multi_turn*_result.json")):
        score = next((bench_dir / "bfcl" / "bfcl" / "score").rglob(result.name.replace("_result", "_score")), None)
        if score is None:
            continue
        run = out / f"bfcl-{result.name.removeprefix('BFCL_v4_').removesuffix('_result.json')}"
        if not (run / "trajectories.jsonl").exists():
            lh("import", "bfcl", result, "--score", score, "--out", run)
        runs.append(run)
    for domain in TAU2_DOMAINS:
        raw = bench_dir / f"tau2-{domain}" / "tau2_simulations.json"
        run = out / f"tau2-{domain}"
        if raw.exists():
            if not (run / "trajectories.jsonl").exists():
                lh("import", "tau2", raw, "--out", run)
            runs.append(run)
    return runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/recipe-cpu")
    ap.add_argument("--config", default=str(CONFIG), help="the pipeline config (default configs/recipe_cpu.yaml)")
    ap.add_argument("--bfcl-limit", type=int, default=10, help="first N entries of each offline BFCL category")
    ap.add_argument("--tau2-limit", type=int, default=5, help="first N airline tasks (mock: all)")
    ap.add_argument("--no-repeat", action="store_true", help="no second base run of the benchmarks (no noise floor)")
    ap.add_argument("--skip-bench", action="store_true", help="stages 1-2 and the suite's rows only")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    if (old := out / "settings.json").exists() and json.loads(old.read_text()) != settings:
        print(f"{out} was started with other settings ({old}); use another --out", file=sys.stderr)
        return 2
    (out / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    timer = Timer(out / "times.json")
    pipe = out / "pipeline"

    log(f"1 pipeline ({args.config}) -> {pipe}")
    with timer.stage("pipeline"):
        lh("demo", "--config", args.config, "--out", pipe, "--quiet")
    start = json.loads((pipe / "start.json").read_text())
    name = json.loads((pipe / "pipeline_config.json").read_text())["model"]["name"]
    if name == "tiny":
        base = pipe / "models" / "base"
    else:
        from longhorizon.train.pretrained import resolve
        from longhorizon.train.stage import local_path

        base = Path(local_path(resolve(name)))
    models = {"base": base, "rl": pipe / "models" / "rl"}
    a_of_rl = "start" if start.get("checkpoint") is not None else "sft"

    log("2 audit (the firewall)")
    if not (out / "audit" / "audit.json").exists():
        with timer.stage("audit"):
            try:
                lh("audit", "--out", out / "audit", "--sft-data", pipe / "sft_data", "--quiet")
            except subprocess.CalledProcessError as e:  # exit 1: something flagged; the report says so
                if e.returncode != 1:
                    raise

    imported: dict[str, list[Path]] = {}
    if not args.skip_bench:
        arms = [("base", models["base"]), ("rl", models["rl"])] + ([] if args.no_repeat else
                                                                   [("base-repeat", models["base"])])
        for arm, model in arms:
            log(f"3 bench: {arm} ({model})")
            with timer.stage("bench"):
                bench(model, out / "bench" / arm, args)
            log(f"4 import: {arm}'s BFCL multi-turn and τ² episodes as runs")
            with timer.stage("import"):
                imported[arm] = imports(out / "bench" / arm, out / "imported" / arm)

    log("5 analyze")
    eval_dir = pipe / "eval"
    sets = sorted({p.name.removeprefix("rl") for p in eval_dir.glob("rl*") if p.is_dir()})  # "", -transfer, -levelN
    pairs = [("base", "rl", s) for s in sets] + [(a_of_rl, "rl", s) for s in sets]
    with timer.stage("analyze"):
        for a, b, s in pairs:
            dest = out / "analysis" / f"{a}-vs-{b}{s or '-holdout'}"
            if not (dest / "metrics.json").exists():
                lh("analyze", eval_dir / f"{a}{s}", eval_dir / f"{b}{s}", "--out", dest, "--name-a", a,
                   "--name-b", b, "--allow-incomplete", "--quiet")
        for run_a in imported.get("base", []):
            run_b = out / "imported" / "rl" / run_a.name
            dest = out / "analysis" / f"base-vs-rl-{run_a.name}"
            if run_b.exists() and not (dest / "metrics.json").exists():
                lh("analyze", run_a, run_b, "--out", dest, "--name-a", "base", "--name-b", "rl", "--allow-incomplete",
                   "--quiet")

    log("6 report transfer")
    base_inputs = [eval_dir / f"base{s}" for s in sets]
    rl_inputs = [eval_dir / f"rl{s}" for s in sets]
    repeat_inputs = [eval_dir / f"base-repeat{s}" for s in sets]
    if not args.skip_bench:
        for arm, inputs in (("base", base_inputs), ("rl", rl_inputs), ("base-repeat", repeat_inputs)):
            inputs += [out / "bench" / arm / d / "results.json" for d in ("bfcl", *(f"tau2-{x}" for x in TAU2_DOMAINS))]
    repeat = [p for p in repeat_inputs if p.exists()]  # the pipeline's base-repeat runs only with eval.repeat_base
    repeat = ["--repeat", *repeat] if repeat else []
    with timer.stage("report"):
        lh("report", "transfer", "--base", *base_inputs, "--trained", *rl_inputs, *repeat,
           "--trained-model", models["rl"], "--audit", out / "audit" / "audit.json", "--out", out / "transfer")
    log(f"done: {out / 'transfer' / 'report.md'}, {out / 'analysis'}; stage times {timer.times}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
