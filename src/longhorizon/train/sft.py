"""Supervised warm-up on teacher trajectories with TRL's SFTTrainer.

    longhorizon train sft --data data/sft --model runs/tiny --out runs/sft

Every example is rendered by ``ChatRenderer.episode`` (the renderer RL samples through), giving
``input_ids`` and ``assistant_masks``; TRL turns the mask into labels, so the loss covers the
assistant's tokens only (its notes, tool calls and end-of-turn tokens) and never the system
prompt, the user's request or tool results. Real models get LoRA (rank 32, alpha 32, on the
attention and MLP projections) and the merged model is saved; the tiny model is fully
fine-tuned. The final model and tokenizer land in OUT, checkpoints in OUT/checkpoint-N.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.train.config import LoraSettings, SFTConfig


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


def save_final(trainer, out: Path, lora: LoraSettings) -> None:
    """Save a plain transformers model folder (LoRA merged in; the adapter kept in OUT/adapter)."""
    from peft import PeftModel

    model = trainer.accelerator.unwrap_model(trainer.model)
    tok = trainer.processing_class
    if isinstance(model, PeftModel):
        model.save_pretrained(out / "adapter")
        model = model.merge_and_unload()
    model.save_pretrained(out)
    tok.save_pretrained(out)


def tokenize_dataset(dataset, tokenizer):
    """``input_ids`` and ``assistant_masks`` for every row, rendered turn by turn."""
    from longhorizon.policies.render import ChatRenderer
    from longhorizon.train.data import example_messages

    renderer = ChatRenderer(tokenizer)

    def encode(row):
        messages, tools = example_messages(row)
        ids, mask = renderer.episode(messages, tools)
        return {"input_ids": ids, "assistant_masks": mask}

    return dataset.map(encode, remove_columns=dataset.column_names, desc="Rendering episodes")


def sft_args(cfg: SFTConfig, *, progress: bool = True):
    import torch
    from trl import SFTConfig as TRLSFTConfig

    return TRLSFTConfig(
        output_dir=cfg.out,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler,
        warmup_steps=cfg.warmup_ratio,
        weight_decay=cfg.weight_decay,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        max_length=cfg.max_length,
        truncation_mode="keep_start",
        packing=False,
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


def build_trainer(cfg: SFTConfig, *, model=None, tokenizer=None, dataset=None, progress: bool = True, callbacks=()):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    from longhorizon.train.data import load_sft_dataset

    if dataset is None:
        if not cfg.data:
            raise UsageError("give the SFT data (--data, written by `longhorizon data sft`)")
        dataset = load_sft_dataset(cfg.data)
    if model is None:
        if not cfg.model:
            raise UsageError("give the model to fine-tune (--model, or model: in the config)")
        model = AutoModelForCausalLM.from_pretrained(_local(cfg.model), local_files_only=True)
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(_local(cfg.model) if cfg.model else model.name_or_path,
                                                  local_files_only=True)
    if len(dataset) == 0:
        raise UsageError("the SFT dataset is empty")
    tokenized = tokenize_dataset(dataset, tokenizer)
    return SFTTrainer(model=model, args=sft_args(cfg, progress=progress), train_dataset=tokenized,
                      processing_class=tokenizer, peft_config=lora_config(cfg.lora, model),
                      callbacks=list(callbacks))


def run_sft(cfg: SFTConfig, *, resume: bool = False, progress: bool = True, console: bool = True) -> dict[str, Any]:
    import torch

    from longhorizon.train.logs import StepLogger, quiet_progress, read_log

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
        (out / "log.jsonl").unlink(missing_ok=True)
    (out / "sft_config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")
    logger = StepLogger(out / "log.jsonl", "sft", console=console, tensorboard_dir=out / "tensorboard")
    trainer = build_trainer(cfg, progress=progress, callbacks=[logger])
    quiet_progress(trainer)
    from peft import PeftModel

    lora_used = isinstance(trainer.accelerator.unwrap_model(trainer.model), PeftModel)
    t0 = time.time()
    trainer.train(resume_from_checkpoint=resume and any(out.glob("checkpoint-*")) or None)
    save_final(trainer, out, cfg.lora)
    log = read_log(out / "log.jsonl")
    summary = {"stage": "sft", "out": str(out), "steps": trainer.state.global_step, "wall_s": time.time() - t0,
               "examples": len(trainer.train_dataset), "lora": lora_used,
               "first": log[0] if log else None, "last": log[-1] if log else None}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _local(name: str) -> str:
    from longhorizon.policies.render import resolve_model

    try:
        return resolve_model(name)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
