"""The noise floor of served evaluation: how often a verdict flips between two identical runs,
with and without ``--reproducible``, and what the flag costs in time.

    .venv/bin/python benchmarks/eval_noise.py --out runs/eval-noise [--model DIR] [--bfcl-limit 40]
                                              [--holdout-seeds 16] [--level N] [--family F ...]
                                              [--skip-bfcl] [--skip-suite]

For each setting, one vLLM server on the model (default: the embedded SmolLM2-135M-Instruct):

    default       `longhorizon serve --dtype bfloat16` (batching, prefix cache; bfloat16 was serve's
                  default until 2026-12-07, now `auto`: float32 on CPU); clients at their default
                  concurrency (bench bfcl --threads 4, run --concurrency 8); temperature 0, seed 0
    reproducible  `serve --reproducible` (float32, one sequence at a time, no prefix cache);
                  clients with --reproducible (one request in flight)

each evaluation is run twice against the same server, into OUT/SETTING/{bfcl,suite}-{1,2}:
BFCL (``--bfcl-limit`` entries of simple_python, multiple and live_simple) and the suite's holdout
(``--holdout-seeds`` instances of every family, or of ``--family`` at ``--level``). The table gives,
per setting and evaluation, the entries, the flips (entries whose pass verdict differs between the
two runs; ``noise_floor``), the floor (max |bound| of the self-Δ 95% interval: of pass@1, and of
mean reward as r.floor) and the wall time of each run, with the reproducible runs' time as a
ratio of the default's. Runs resume: rerun the command to finish; a run's time is summed over
the invocations that played it (OUT/SETTING/times.json), so a resumed run reports its whole cost.

The model must pass some entries for a verdict to flip: the untrained SmolLM2 scores 0 of 120 on
these BFCL categories (runs/eval-noise/default/bfcl-1, 2026-12-07), so its flips are 0 by
construction and only "outputs differ" (entries whose raw answer differs between the two runs)
measures its noise; give ``--model`` a trained model with headroom (e.g. the demo's
runs/demo/models/rl) for the verdict flips.

Measured on 2026-12-07 (docs/transfer.md): with the flag, 0 of 120 BFCL answers and 0 of 16
suite episodes moved between two runs, at 5.9x and 7.2x the time; without it, 38 and 2 moved (no
verdict flipped). What else runs on the machine changes the times; the flips are what the flag is for.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BFCL_CATEGORIES = ["simple_python", "multiple", "live_simple"]
SETTINGS = ("default", "reproducible")


def lh(*args: str) -> float:
    """Run ``longhorizon ARGS`` (this checkout's), raising on failure; its wall time in seconds."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "longhorizon.cli", *args], check=True, cwd=ROOT)
    return time.perf_counter() - t


def timed(folder: Path, run: str, play) -> float:
    """The run's wall time summed over every invocation that played part of it: each call's
    seconds are appended to FOLDER/times.json before the next starts, so a run stopped and
    resumed (here: across sessions) still reports its whole cost; a call that finds the run
    complete adds only its own few seconds."""
    path = folder / "times.json"
    log = json.loads(path.read_text()) if path.exists() else {}
    seconds = play()
    log.setdefault(run, []).append(round(seconds, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(log, indent=1) + "\n")
    return sum(log[run])


def bfcl_answers(path: Path) -> dict[str, str]:
    """Each entry's raw answer, from BFCL's result files under PATH/bfcl/result: two runs can
    differ in what the model said even where no verdict flips (a model that passes nothing has
    no verdict to flip)."""
    out = {}
    for f in (path / "bfcl" / "result").rglob("*_result.json"):
        for line in f.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out[r["id"]] = json.dumps(r.get("result"), sort_keys=True)
    return out


def suite_answers(path: Path) -> dict[str, str]:
    """Each episode's assistant turns (text and calls), by task: what the model said, which two runs
    can disagree on while every verdict stays the same."""
    out = {}
    for t in suite_rows(path):
        said = [(m.get("content"), [(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []])
                for m in t["messages"] if m["role"] == "assistant"]
        out[t["task_id"]] = json.dumps(said, sort_keys=True)
    return out


def bfcl_rows(path: Path) -> list[dict]:
    from longhorizon.evaluate.results import _as_rows, load_results

    return _as_rows(load_results(path)["entries"])


def suite_rows(path: Path) -> list[dict]:
    from longhorizon.rollout.store import open_existing

    return open_existing(path).trajectories()


def measure(setting: str, model: str | None, out: Path, args) -> list[dict]:
    from longhorizon.evaluate.noise_floor import noise_floor
    from longhorizon.serve.vllm import VLLMServer

    reproducible = setting == "reproducible"
    flag = ["--reproducible"] if reproducible else []
    rows = []
    with VLLMServer(model, dtype="float32" if reproducible else "bfloat16", reproducible=reproducible,
                    default_max_tokens=384, log_path=out / setting / "server.log") as server:
        print(f"{setting}: serving {server.model_name} at {server.base_url}", file=sys.stderr, flush=True)
        evaluations = []
        suite_picks = [*(["--level", str(args.level)] if args.level else []),
                       *[a for f in args.family for a in ("--family", f)]]
        if not args.skip_bfcl:
            evaluations.append(("bfcl", lambda d: ["bench", "bfcl", "--base-url", server.base_url, "--model",
                                                   server.model_name, "--categories", *BFCL_CATEGORIES, "--limit",
                                                   str(args.bfcl_limit), "--quiet", "--out", str(d), *flag],
                                bfcl_rows, bfcl_answers))
        if not args.skip_suite:
            evaluations.append(("suite", lambda d: ["run", "--policy", "openai", "--base-url", server.base_url,
                                                    "--model", server.model_name, "--split", "holdout", "--seeds",
                                                    str(args.holdout_seeds), "--max-turns", "12", "--max-tokens",
                                                    "384", "--quiet", "--out", str(d), *flag, *suite_picks],
                                 suite_rows, suite_answers))
        for name, command, read, answers in evaluations:
            dirs = [out / setting / f"{name}-{i}" for i in (1, 2)]
            times = [timed(out / setting, d.name, lambda d=d: lh(*command(d))) for d in dirs]
            f = noise_floor(read(dirs[0]), read(dirs[1]))
            a, b = answers(dirs[0]), answers(dirs[1])
            differ = sum(a[k] != b[k] for k in a.keys() & b.keys())
            rows.append({"setting": setting, "evaluation": name, "entries": f["paired_tasks"], "outputs_differ": differ,
                         "flips": f["disagreements"], "flip_rate": f["self_disagreement"],
                         "floor": f["floor"]["pass@1"], "reward_floor": f["floor"]["mean_reward"],
                         "seconds": times})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--model", help="a model folder (default: the embedded SmolLM2)")
    p.add_argument("--bfcl-limit", type=int, default=40, help="entries per BFCL category (default 40)")
    p.add_argument("--holdout-seeds", type=int, default=16, help="holdout instances per family (default 16)")
    p.add_argument("--level", type=int, help="the suite's families at this level (default: their default level; "
                   "families without it are left out)")
    p.add_argument("--family", action="append", default=[], help="only this family in the suite part (repeatable)")
    p.add_argument("--skip-bfcl", action="store_true")
    p.add_argument("--skip-suite", action="store_true")
    args = p.parse_args()
    out = Path(args.out)
    rows = [r for s in SETTINGS for r in measure(s, args.model, out, args)]
    (out / "eval_noise.json").write_text(json.dumps(rows, indent=1))
    base = {r["evaluation"]: sum(r["seconds"]) for r in rows if r["setting"] == "default"}
    print(f"{'setting':<13} {'evaluation':<10} {'entries':>7} {'outputs differ':>14} {'flips':>5} {'flip rate':>9} "
          f"{'floor':>6} {'r.floor':>7} {'run 1 s':>8} {'run 2 s':>8} {'time × default':>14}")
    for r in rows:
        ratio = sum(r["seconds"]) / base[r["evaluation"]] if base.get(r["evaluation"]) else float("nan")
        differ = str(r["outputs_differ"])
        print(f"{r['setting']:<13} {r['evaluation']:<10} {r['entries']:>7} {differ:>14} {r['flips']:>5} {r['flip_rate']:>9.3f} "
              f"{r['floor']:>6.3f} {r['reward_floor']:>7.3f} {r['seconds'][0]:>8.0f} {r['seconds'][1]:>8.0f} {ratio:>14.2f}")


if __name__ == "__main__":
    main()
