"""Does GSPO improve on SFT here? SFT to a checkpoint with headroom, GSPO from it, a permuted-reward
control, and a paired greedy evaluation of the three on the holdout.

    .venv/bin/python benchmarks/rl_gain.py --out runs/rl-gain      # resumable: rerun to finish

The demo's family and settings (configs/demo.yaml: log_first_error, the embedded SmolLM2, full
fine-tune), in stages that each persist under OUT and are skipped when done:

1. teacher + data: the oracle plays train seeds 0..N-1; episodes at reward >= 0.9 are the SFT data.
2. sft: the demo's SFT (``--sft-batch-size``, ``--sft-lr`` change its step), keeping the model
   after every step.
3. dev: greedy on a *train-split* dev set (seeds from 90,000: neither the teacher's nor RL's, never
   the holdout), the steps searched by bisection for the earliest that passes >= 0.25
   (``train.headroom.search``, as the pipeline's start stage); the checkpoint is the earliest
   played one whose dev pass rate lies in [0.25, 0.60] (else, when SFT jumped past the band, the
   played one closest to 0.425 strictly between 0 and 1).
4. temperature: the chosen checkpoint samples the dev set at 1.0, 0.7, 0.5 in turn; RL uses the first
   whose pass rate lies in [0.3, 0.7] (else the one whose dense rewards vary most: GSPO's signal).
5. rl, then control: GSPO from the checkpoint (``--steps`` on-policy steps of ``--groups`` groups of 8,
   rollouts from vLLM in float32, the weights pushed after each step); the control is the same run
   with each group's rewards shuffled among its episodes (``rl.permute_rewards``).
   ``--repetition-penalty`` sets ``rl.repetition_penalty`` for every arm.
6. holdout (after each of them): the checkpoint, the RL model and the control, greedy in float32 on ``--holdout`` holdout
   instances, paired: Δ pass@1 and Δ mean reward with paired-bootstrap intervals, McNemar's p;
   then the checkpoint a second time (``holdout/sft-repeat``): the noise floor of every Δ
   (``evaluate.noise_floor``: 32 episodes in flight need not repeat exactly).
7. variants (``--variants seed,opd``, after the rest; issue 24's methods against plain GSPO): ``seed``
   is the RL run with SEED's hindsight-skill distillation (``rl.seed_skills``, the policy itself as
   analyzer); ``opd`` is Direct-OPD with the checkpoint as student and the pair (checkpoint, RL
   model) as teacher: every sampled token is rewarded by log π_rl − log π_checkpoint, loss grpo
   (``rl.opd``). Each runs as many steps as ``rl`` from the same checkpoint, seeds and temperature,
   and is evaluated on the same holdout, paired against the checkpoint and against ``rl``.

Every evaluation runs on one vLLM server (float32, ``weight_sync``) whose weights are replaced
for each model, so no model costs a server start. The report (OUT/report.md) has the dev curve,
the calibration, the per-step training reward and pass rate of both RL runs, and the paired
comparisons, whatever they show. Nothing here reads the holdout before stage 6.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FAMILY = "log_first_error"
DEV_BAND = (0.25, 0.60)
TEMP_BAND = (0.3, 0.7)
TEMPERATURES = (1.0, 0.7, 0.5)
VARIANTS = ("seed", "opd")
"""Issue 24's methods, run as extra arms against plain GSPO (``--variants``)."""
CONCURRENCY = 32
"""Episodes in flight in an evaluation (the server gets KV room for all of them)."""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_json(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def save_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")


class Evaluator:
    """One vLLM server (float32, weight_sync) on the base model; each model's weights pushed in turn."""

    def __init__(self, base: Path, eval_cfg, out: Path):
        self.base, self.e, self.out = base, eval_cfg, out
        self.server, self.loaded = None, None
        self.stack = contextlib.ExitStack()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stack.close()

    def load(self, model_dir: Path) -> None:
        from longhorizon.serve.vllm import VLLMServer, kv_cache_gib_for
        from longhorizon.serve.weight_sync import write_weights

        if self.server is None:
            log(f"starting vLLM (float32) on {self.base}")
            self.server = self.stack.enter_context(
                VLLMServer(str(self.base), dtype="float32", max_model_len=self.e.max_context, weight_sync=True,
                           kv_cache_gib=kv_cache_gib_for(self.base, "float32", CONCURRENCY, self.e.max_context),
                           log_path=self.out / "vllm.log"))
        if self.loaded == model_dir:
            return
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        folder = write_weights(model, self.out / "weights", "float32").parent
        self.server.push_weights(folder)
        self.loaded = model_dir

    def run(self, model_dir: Path, tasks, out: Path, *, temperature: float = 0.0, label: str) -> dict:
        from longhorizon.env.episode import Limits
        from longhorizon.policies.openai_client import OpenAIPolicy
        from longhorizon.train.pipeline import _run_policy

        summary = load_json(out / "summary.json")
        if summary and summary.get("complete"):
            return summary
        self.load(model_dir)
        policy = OpenAIPolicy(self.server.base_url, self.server.model_name, temperature=temperature,
                              max_tokens=self.e.max_new_tokens, seed=0 if temperature else None,
                              endpoint_label=f"vllm:{label}:float32:T{temperature:g}")
        # no wall-clock limit (EvalConfig's default): 32 episodes share a CPU server, and a 600 s cut
        # would grade the machine's load (the first holdout runs, runs/rl-gain/holdout-wall600)
        limits = Limits(max_turns=self.e.max_turns, max_tool_calls=self.e.max_tool_calls, max_wall_s=self.e.max_wall_s)
        t0 = time.time()
        summary = _run_policy(tasks, policy, out, split=tasks[0].split, seeds=len(tasks), families=[FAMILY],
                              limits=limits, concurrency=CONCURRENCY, progress=False)
        o = summary["overall"]
        log(f"  {out.relative_to(self.out.parent)}: pass@1 {o['pass@1']:.3f}, reward {o['mean_reward']:.3f} "
            f"({o['episodes']} episodes, {time.time() - t0:.0f} s)")
        return summary


def dev_tasks(n: int):
    from longhorizon.train.headroom import dev_tasks as tasks

    return tasks([FAMILY], n)


def choose_checkpoint(dev: dict[int, float]) -> tuple[int, str]:
    from longhorizon.train.headroom import choose_checkpoint as choose

    k, why = choose(dev, DEV_BAND)
    if k is None:
        raise SystemExit(why)
    return k, why


def choose_temperature(rates: dict[float, float], spread: dict[float, float]) -> tuple[float, str]:
    """The first temperature whose sampled pass rate is in the band; else the one whose dense
    rewards vary most (``spread``: their variance over the dev episodes), since GSPO's advantages
    are made of reward differences within a group: with no pass anywhere, a temperature whose
    episodes all earn alike (all 0, or all the same partial credit) teaches nothing."""
    lo, hi = TEMP_BAND
    for t in TEMPERATURES:
        if t in rates and lo <= rates[t] <= hi:
            return t, f"the first of {TEMPERATURES} whose dev pass lies in [{lo}, {hi}]"
    t = max(spread, key=lambda t: (spread[t], -abs(rates[t] - 0.5)))
    return t, f"none in [{lo}, {hi}]: the largest variance of the dense reward"


def reward_variance(run: Path) -> float:
    from longhorizon.train.report import _load_run

    rewards = [r["grade"]["reward"] for r in _load_run(run)[1]]
    mean = sum(rewards) / max(len(rewards), 1)
    return sum((x - mean) ** 2 for x in rewards) / max(len(rewards), 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/rl-gain")
    ap.add_argument("--teacher-seeds", type=int, default=16, help="oracle episodes for SFT (default 16)")
    ap.add_argument("--dev-seeds", type=int, default=32, help="train-split dev instances (default 32)")
    ap.add_argument("--steps", type=int, default=6, help="GSPO optimizer steps (default 6)")
    ap.add_argument("--groups", type=int, default=2, help="groups of 8 per step (default 2)")
    ap.add_argument("--holdout", type=int, default=100, help="holdout instances per model (default 100)")
    ap.add_argument("--sft-batch-size", type=int, default=None,
                    help="SFT episodes per step (default: configs/demo.yaml's, 2): 1 doubles the checkpoints "
                         "the dev search can choose among")
    ap.add_argument("--sft-lr", type=float, default=None, help="SFT learning rate (default: configs/demo.yaml's, 2e-4)")
    ap.add_argument("--repetition-penalty", type=float, default=None,
                    help="rl.repetition_penalty for every RL arm (default: configs/demo.yaml's, 0): the reward "
                         "loses this x the share of calls that repeat an earlier one")
    ap.add_argument("--skip-control", action="store_true", help="no permuted-reward run (not a finished experiment)")
    ap.add_argument("--variants", default="", help="comma-separated extra arms run last: seed, opd (default none)")
    args = ap.parse_args(argv)
    if args.sft_batch_size is not None and args.sft_batch_size < 1:
        ap.error("--sft-batch-size must be at least 1")
    if args.sft_lr is not None and not args.sft_lr > 0:
        ap.error("--sft-lr must be above 0")
    if args.repetition_penalty is not None and not 0 <= args.repetition_penalty <= 1:
        ap.error("--repetition-penalty must be in [0, 1]")
    variants = [v for v in args.variants.split(",") if v]
    if unknown := sorted(set(variants) - set(VARIANTS)):
        ap.error(f"unknown variants {unknown}: choose from {', '.join(VARIANTS)}")

    from longhorizon.tasks.registry import tasks_for
    from longhorizon.train.config import load_pipeline
    from longhorizon.train.data import build_sft_dataset
    from longhorizon.train.pipeline import _run_policy
    from longhorizon.train.pretrained import resolve
    from longhorizon.train.rl import run_rl
    from longhorizon.train.sft import run_sft
    from longhorizon.train.stage import local_path
    from longhorizon.policies.scripted import OraclePolicy
    from longhorizon.env.episode import Limits

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    from longhorizon.train.headroom import DEV_OFFSET, search, step_models

    settings = {k: v for k, v in vars(args).items() if k != "variants"} | {"family": FAMILY, "dev_offset": DEV_OFFSET}
    if (old := load_json(out / "settings.json")) is not None and old != settings:
        print(f"{out} was started with other settings ({out / 'settings.json'}); use another --out", file=sys.stderr)
        return 2
    save_json(out / "settings.json", settings)
    cfg = load_pipeline(ROOT / "configs" / "demo.yaml")
    base = Path(local_path(resolve(cfg.model.name)))
    times = load_json(out / "times.json") or {}

    def timed(name, fn):
        t0 = time.time()
        result = fn()
        times[name] = times.get(name, 0) + round(time.time() - t0, 1)
        save_json(out / "times.json", times)
        return result

    # 1 teacher + data
    if not (out / "sft_data" / "summary.json").exists():
        log(f"teacher: the oracle plays {args.teacher_seeds} train seeds of {FAMILY}")
        timed("teacher", lambda: _run_policy(tasks_for("train", args.teacher_seeds, [FAMILY]), OraclePolicy(),
                                             out / "teacher", split="train", seeds=args.teacher_seeds,
                                             families=[FAMILY], limits=Limits(), concurrency=8, progress=False))
        build_sft_dataset([out / "teacher"], out / "sft_data", min_reward=cfg.teacher.min_reward, overwrite=True)

    # 2 SFT, a checkpoint per step
    s = cfg.sft
    s.data, s.model, s.out = str(out / "sft_data"), str(base), str(out / "sft")
    s.batch_size = args.sft_batch_size or s.batch_size
    s.learning_rate = args.sft_lr or s.learning_rate
    # the model after every step (OUT/sft/steps/step-N, no optimizer state), and the last checkpoint to resume from
    s.keep_steps, s.save_steps, s.save_total_limit = True, 1, 1
    if not (out / "sft" / "summary.json").exists():
        log(f"sft: the demo's SFT (batch {s.batch_size}, lr {s.learning_rate:g}), the model kept after every step")
        timed("sft", lambda: run_sft(s, resume=any((out / "sft").glob("checkpoint-*")), progress=False))
    ckpts = step_models(out / "sft")

    e = cfg.eval
    with Evaluator(base, e, out) as ev:
        # 3 dev pass of every checkpoint
        dev = dev_tasks(args.dev_seeds)

        def pass_rate(k: int) -> float:
            summary = timed("dev", lambda: ev.run(ckpts[k], dev, out / "dev" / f"checkpoint-{k}", label=f"sft-{k}"))
            return summary["overall"]["pass@1"]

        # bisection for the earliest step at or past the band's low end (train.headroom.search, as the pipeline)
        rates = search(sorted(ckpts), pass_rate, DEV_BAND)
        chosen, why = choose_checkpoint(rates)
        save_json(out / "chosen.json", {"dev_pass": rates, "checkpoint": chosen, "why": why})
        log(f"dev pass per checkpoint {rates}: checkpoint-{chosen} ({why})")

        # 4 temperature for RL
        temps, spread = {}, {}
        for t in TEMPERATURES:
            run = out / "dev" / f"temperature-{t:g}"
            summary = timed("temperature", lambda: ev.run(ckpts[chosen], dev, run, temperature=t, label=f"sft-{chosen}"))
            temps[t], spread[t] = summary["overall"]["pass@1"], reward_variance(run)
            if TEMP_BAND[0] <= temps[t] <= TEMP_BAND[1]:
                break
        temperature, twhy = choose_temperature(temps, spread)
        save_json(out / "chosen.json", {"dev_pass": rates, "checkpoint": chosen, "why": why,
                                        "temperature_pass": temps, "temperature_reward_variance": spread,
                                        "temperature": temperature, "temperature_why": twhy})
        log(f"sampled dev pass per temperature {temps}, reward variance {spread}: T = {temperature} ({twhy})")

    # 5 and 6: GSPO, the holdout for the checkpoint and GSPO, then the control and its holdout (so a
    # run stopped after GSPO already answers the main question; rerun to finish)
    holdout = tasks_for("holdout", args.holdout, [FAMILY])
    models = {"sft": ckpts[chosen]}
    arms = [("rl", False), ("control", True)] + [(v, False) for v in variants]
    for name, permute in arms:
        if permute and args.skip_control:
            continue
        r = load_pipeline(ROOT / "configs" / "demo.yaml").rl
        r.model, r.out = str(ckpts[chosen]), str(out / name)
        r.max_steps, r.tasks_per_step, r.seeds = args.steps, args.groups, 8 * args.steps * args.groups
        r.temperature, r.permute_rewards = temperature, permute
        if args.repetition_penalty is not None:
            r.repetition_penalty = args.repetition_penalty
        r.sampler, r.sampler_dtype = "vllm", "float32"
        r.resample_flat_groups, r.concurrency = 2, 8 * args.groups
        r.save_steps, r.save_total_limit = 1, 1  # a stopped run resumes at its last step
        if name == "seed":
            r.seed_skills.enabled = True
        elif name == "opd":  # the student is the checkpoint; the teacher pair is (checkpoint, GSPO)
            r.opd.pre, r.opd.post, r.loss = str(ckpts[chosen]), str(out / "rl"), "grpo"
        if not (out / name / "summary.json").exists():
            log(f"{name}: GSPO from checkpoint-{chosen}, {args.steps} steps of {args.groups} groups of 8, "
                f"T = {temperature}{', rewards permuted within groups' if permute else ''}"
                f"{f', variant {name}' if name in VARIANTS else ''}")
            timed(name, lambda: run_rl(r, resume=any((out / name).glob("checkpoint-*")), progress=False))
        models[name] = out / name
        with Evaluator(base, e, out) as ev:
            for m, path in models.items():
                timed("holdout", lambda: ev.run(path, holdout, out / "holdout" / m, label=m))
        write_report(out, list(models), times)
        if name == ("rl" if args.skip_control else "control"):  # the checkpoint again: the noise floor of every Δ
            with Evaluator(base, e, out) as ev:
                timed("holdout", lambda: ev.run(ckpts[chosen], holdout, out / "holdout" / "sft-repeat",
                                                label="sft-repeat"))
    report = write_report(out, list(models), times)
    print(report)
    return 0


def step_rows(folder: Path) -> list[dict]:
    rows = []
    path = folder / "log.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        if "reward" in row and "pass_rate" in row:
            rows.append(row)
    return rows


def write_report(out: Path, names: list[str], times: dict) -> str:
    from longhorizon.evaluate.metrics import compare
    from longhorizon.evaluate.noise_floor import inside, noise_floor
    from longhorizon.train.report import _load_run

    chosen = load_json(out / "chosen.json")
    lines = ["# GSPO vs SFT from a headroom checkpoint (benchmarks/rl_gain.py)", "",
             f"Family `{FAMILY}`, the embedded SmolLM2-135M-Instruct, configs/demo.yaml's settings but "
             f"these (null: the config's): {json.dumps(load_json(out / 'settings.json'))}. "
             f"Stage seconds: {json.dumps(times)}.", "",
             "## Dev pass rate of each SFT checkpoint (train split, greedy, float32)", "",
             "| checkpoint | dev pass@1 |", "|---:|---:|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in sorted(chosen["dev_pass"].items(), key=lambda kv: int(kv[0]))]
    lines += ["", f"Chosen: checkpoint-{chosen['checkpoint']} ({chosen['why']}). Sampled dev pass per temperature: "
              + ", ".join(f"T {t}: {v:.3f} (reward variance {chosen.get('temperature_reward_variance', {}).get(t, float('nan')):.3f})"
                          for t, v in chosen["temperature_pass"].items())
              + f"; RL samples at T = {chosen['temperature']} ({chosen['temperature_why']}).", ""]
    for name in names[1:]:
        rows = step_rows(out / name)
        lines += [f"## {name}: per step", "", "| step | reward | pass rate | flat groups dropped | grad norm | "
                  "weights moved | clip fraction | sampler \\|Δ log p\\| | rollout s |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        nan = float("nan")
        for row in rows:
            lines.append(f"| {row['step']} | {row['reward']:.3f} | {row['pass_rate']:.3f} | "
                         f"{row.get('flat_groups_dropped', 0):g} | {row.get('grad_norm', nan):.3g} | "
                         f"{row.get('weight_change', nan):.2e} | {row.get('clip_fraction', nan):.3f} | "
                         f"{row.get('sampler_logp_diff', nan):.2g} | {row.get('rollout_s', 0):.0f} |")
        lines.append("")
    runs = {n: _load_run(out / "holdout" / n)[1] for n in names}
    repeat = _load_run(out / "holdout" / "sft-repeat")[1]
    lines += ["## Holdout (greedy, float32)", "", "| model | episodes | pass@1 | mean reward |", "|---|---:|---:|---:|"]
    for n, rows in runs.items():
        k = len(rows)
        lines.append(f"| {n} | {k} | {sum(r['grade']['passed'] for r in rows) / max(k, 1):.3f} | "
                     f"{sum(r['grade']['reward'] for r in rows) / max(k, 1):.3f} |")
    floor = noise_floor(runs["sft"], repeat) if repeat and runs.get("sft") else None
    if floor and floor["paired_tasks"]:
        lines += ["", f"Noise floor: the checkpoint evaluated twice (`holdout/sft-repeat`) disagrees with itself on "
                  f"{floor['disagreements']} of {floor['paired_tasks']} verdicts; floor ±{floor['floor']['pass@1']:.3f} "
                  f"pass@1, ±{floor['floor']['mean_reward']:.3f} reward (`evaluate.noise_floor`)."]
    lines += ["", "| comparison (B − A) | paired | Δ pass@1 [95%] | Δ mean reward [95%] | McNemar p | noise floor |",
              "|---|---:|---:|---:|---:|---|"]
    pairs = [("sft", n) for n in names[1:]] + ([("control", "rl")] if "control" in names else [])
    pairs += [("rl", n) for n in names if n in VARIANTS]
    for a, b in pairs:
        c = compare(runs[a], runs[b])
        where = inside(c, floor)["pass@1"] if floor else None
        lines.append(f"| {b} − {a} | {c['paired_tasks']} | {c['delta_pass@1']:+.3f} "
                     f"[{c['delta_pass@1_ci95'][0]:+.3f}, {c['delta_pass@1_ci95'][1]:+.3f}] | "
                     f"{c['delta_mean_reward']:+.3f} [{c['delta_mean_reward_ci95'][0]:+.3f}, "
                     f"{c['delta_mean_reward_ci95'][1]:+.3f}] | {c['mcnemar']['p_value']:.3g} | "
                     f"{'-' if where is None else ('inside' if where else 'outside')} |")
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    return text


if __name__ == "__main__":
    sys.exit(main())
