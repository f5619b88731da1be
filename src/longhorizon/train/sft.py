"""Supervised warm-up on teacher trajectories with TRL's SFTTrainer.

    longhorizon train sft --data data/sft --model runs/tiny --out runs/sft

Every example is rendered by ``ChatRenderer.episode`` (the renderer RL samples through), giving
``input_ids`` and ``assistant_masks``; TRL turns the mask into labels, so the loss covers the
assistant's tokens only (its notes, tool calls and end-of-turn tokens) and never the system
prompt, the user's request or tool results (``loss_on: all`` is the exception: a language-model
warm-up on whole episodes for a random-init model). Real models get LoRA (rank 32, alpha 32, on the
attention and MLP projections) and the merged model is saved; the tiny model is fully
fine-tuned. The final model and tokenizer land in OUT, checkpoints in OUT/checkpoint-N.
"""

from __future__ import annotations

from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.train.config import SFTConfig
from longhorizon.train.stage import (
    load_model, lora_config, prepare_out, train_and_save, trainer_args, warm_up_from_the_first_step,
)


def tokenize_dataset(dataset, tokenizer, loss_on: str = "assistant"):
    """``input_ids`` and ``assistant_masks`` for every row, rendered turn by turn (``loss_on="all"``:
    the mask covers every token)."""
    from longhorizon.policies.render import ChatRenderer
    from longhorizon.train.data import example_messages

    renderer = ChatRenderer(tokenizer)

    def encode(row):
        messages, tools = example_messages(row)
        ids, mask = renderer.episode(messages, tools)
        return {"input_ids": ids, "assistant_masks": mask if loss_on == "assistant" else [1] * len(ids)}

    return dataset.map(encode, remove_columns=dataset.column_names, desc="Rendering episodes")


def sft_args(cfg: SFTConfig, *, progress: bool = True):
    from trl import SFTConfig as TRLSFTConfig

    return TRLSFTConfig(
        **trainer_args(cfg, progress=progress),
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        max_length=cfg.max_length,
        truncation_mode="keep_start",
        packing=False,
    )


def build_trainer(cfg: SFTConfig, *, model=None, tokenizer=None, dataset=None, progress: bool = True, callbacks=()):
    from trl import SFTTrainer

    from longhorizon.train.data import load_sft_dataset

    cfg.validate()
    if dataset is None:
        if not cfg.data:
            raise UsageError("give the SFT data (--data, written by `longhorizon data sft`)")
        dataset = load_sft_dataset(cfg.data)
    model, tokenizer = load_model(cfg.model, model, tokenizer)
    if len(dataset) == 0:
        raise UsageError("the SFT dataset is empty")
    tokenized = tokenize_dataset(dataset, tokenizer, cfg.loss_on)
    trainer = SFTTrainer(model=model, args=sft_args(cfg, progress=progress), train_dataset=tokenized,
                         processing_class=tokenizer, peft_config=lora_config(cfg.lora, model),
                         callbacks=list(callbacks))
    warm_up_from_the_first_step(trainer)
    return trainer


def run_sft(cfg: SFTConfig, *, resume: bool = False, progress: bool = True, console: bool = True) -> dict[str, Any]:
    from peft import PeftModel

    from longhorizon.train.logs import StepLogger, quiet_progress

    out = prepare_out(cfg, "sft", resume=resume, logs=("log.jsonl",))
    logger = StepLogger(out / "log.jsonl", "sft", console=console, tensorboard_dir=out / "tensorboard")
    trainer = build_trainer(cfg, progress=progress, callbacks=[logger])
    quiet_progress(trainer)
    lora_used = isinstance(trainer.accelerator.unwrap_model(trainer.model), PeftModel)
    return train_and_save(trainer, out, cfg, "sft", resume=resume, examples=len(trainer.train_dataset),
                          lora=lora_used)
