"""Supervised warm-up on teacher trajectories with TRL's SFTTrainer.

    longhorizon train sft --data data/sft --model runs/tiny --out runs/sft

Every example is rendered by ``ChatRenderer.episode`` (the renderer RL samples through), giving
``input_ids`` and ``assistant_masks``; TRL turns the mask into labels, so the loss covers the
assistant's tokens only (its notes, tool calls and end-of-turn tokens) and never the system
prompt, the user's request or tool results (``loss_on: all`` is the exception: a language-model
warm-up on whole episodes for a random-init model). Real models get LoRA (rank 32, alpha 32, on the
attention and MLP projections) and the merged model is saved; the tiny model is fully
fine-tuned. The final model and tokenizer land in OUT, checkpoints in OUT/checkpoint-N.

Nothing is dropped silently. Examples longer than ``max_length`` are cut at the end (the start
of the episode is kept); one left with no assistant token in its first ``max_length`` tokens
(its prompt alone fills them) teaches nothing and is dropped. ``prepare_examples`` counts both,
and the run prints one line saying so and keeps the counts in its summary (``data``). With a
context policy (``context_policy: elide-oldest``, ``max_context`` prompt tokens;
policies/context.py) an episode becomes one example per stretch of turns that share their
view (what is elided): each assistant turn trained once, in the view the acting policy reads.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.core.words import plural
from longhorizon.train.config import SFTConfig
from longhorizon.train.stage import (
    load_model, lora_config, prepare_out, train_and_save, trainer_args, warm_up_from_the_first_step,
)


def prepare_examples(dataset, tokenizer, loss_on: str = "assistant", *, max_length: int | None = None,
                     context_policy: str = "none", max_context: int | None = None):
    """``(examples, report)``: ``input_ids`` and ``assistant_masks`` rendered turn by turn
    (``loss_on="all"``: the mask covers every token), cut to ``max_length``, and what that cost.

    The report counts the episodes, the examples made of them (more than one each with a context
    policy), those kept, those cut at ``max_length`` and those dropped, by reason; the tokens
    kept; and the assistant tokens trained out of all (each assistant turn is in one example).
    """
    from datasets import Dataset

    from longhorizon.policies.context import make_context_policy
    from longhorizon.policies.render import ChatRenderer
    from longhorizon.train.data import example_messages

    renderer = ChatRenderer(tokenizer)
    try:
        context = make_context_policy(context_policy, max_context, renderer)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    rows, dropped, truncated, made = [], Counter(), 0, 0
    assistant = trained = 0
    for row in dataset:
        messages, tools = example_messages(row)
        pieces = context.sft_examples(messages, tools) if context else [renderer.episode(messages, tools)]
        for ids, mask in pieces:
            made += 1
            assistant += sum(mask)
            trained += sum(mask[:max_length])
            if loss_on != "assistant":
                mask = [1] * len(ids)
            if max_length is not None and len(ids) > max_length:
                ids, mask = ids[:max_length], mask[:max_length]
                if 1 not in mask:
                    dropped[f"no assistant token within max_length {max_length}"] += 1
                    continue
                truncated += 1
            rows.append({"input_ids": ids, "assistant_masks": mask})
    report = {"episodes": len(dataset), "examples": made, "kept": len(rows), "truncated": truncated,
              "dropped": dict(dropped), "max_length": max_length, "tokens": sum(len(r["input_ids"]) for r in rows),
              "assistant_tokens": {"trained": trained, "all": assistant},
              "context_policy": context.describe() if context else None}
    report["summary"] = describe_examples(report)
    if not rows:
        raise UsageError(f"no SFT example left to train on: {report['summary']}")
    return Dataset.from_list(rows), report


def describe_examples(report: dict[str, Any]) -> str:
    """One line: what became of the episodes (kept, cut, dropped and why), e.g. ``SFT data: 308 of
    364 examples kept (120 cut at max_length 8192); 56 dropped: no assistant token within ...``."""
    made = report["examples"]
    head = f"SFT data: {report['kept']} of {plural(made, 'example')} kept"
    if made != report["episodes"]:
        head += f" (from {plural(report['episodes'], 'episode')}, context policy {report['context_policy']['policy']} " \
                f"at {report['context_policy']['max_context']} prompt tokens)"
    if report["truncated"]:
        head += f"; {report['truncated']} cut at max_length {report['max_length']} (their later turns not trained)"
    if report["dropped"]:
        why = ", ".join(f"{n} {reason}" for reason, n in report["dropped"].items())
        head += (f"; {sum(report['dropped'].values())} dropped ({why}): raise --max-length, or use "
                 "--context-policy elide-oldest --max-context N")
    share = report["assistant_tokens"]
    if share["trained"] < share["all"]:
        head += f"; {share['trained'] / share['all']:.1%} of the assistant tokens trained"
    return head


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
    model, tokenizer = load_model(cfg.model, model, tokenizer, cfg.attn_implementation)
    if len(dataset) == 0:
        raise UsageError("the SFT dataset is empty")
    tokenized, report = prepare_examples(dataset, tokenizer, cfg.loss_on, max_length=cfg.max_length,
                                         context_policy=cfg.context_policy, max_context=cfg.max_context)
    trainer = SFTTrainer(model=model, args=sft_args(cfg, progress=progress), train_dataset=tokenized,
                         processing_class=tokenizer, peft_config=lora_config(cfg.lora, model),
                         callbacks=list(callbacks))
    warm_up_from_the_first_step(trainer)
    trainer.longhorizon_data = report  # what became of the episodes: run_sft prints and records it
    return trainer


def run_sft(cfg: SFTConfig, *, resume: bool = False, progress: bool = True, console: bool = True) -> dict[str, Any]:
    from peft import PeftModel

    from longhorizon.core.progress import no_library_bars
    from longhorizon.train.logs import StepLogger, StepModels, quiet_progress

    no_library_bars()
    out = prepare_out(cfg, "sft", resume=resume, logs=("log.jsonl",))
    logger = StepLogger(out / "log.jsonl", "sft", console=console, tensorboard_dir=out / "tensorboard")
    trainer = build_trainer(cfg, progress=progress, callbacks=[logger])
    if cfg.keep_steps:
        trainer.add_callback(StepModels(out / "steps", trainer.processing_class))
    quiet_progress(trainer)
    data = trainer.longhorizon_data
    if trainer.accelerator.is_main_process:
        print(data["summary"], file=sys.stderr, flush=True)
    lora_used = isinstance(trainer.accelerator.unwrap_model(trainer.model), PeftModel)
    return train_and_save(trainer, out, cfg, "sft", resume=resume, examples=len(trainer.train_dataset),
                          lora=lora_used, data=data)
