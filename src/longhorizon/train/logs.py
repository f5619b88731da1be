"""Per-step training logs: one JSON object per step in ``OUT/log.jsonl``, a line on the console,
and TensorBoard (``OUT/tensorboard``) when it is installed.

TRL's metric names are mapped to the pipeline's own, so SFT and RL logs read alike:

    RL   mean reward, pass rate, zero-variance groups (no learning signal), tokens, episode
         length (turns and sampled tokens), clip fraction, loss; dynamic sampling (groups played,
         flat ones dropped, signal short of the quota, pass rate of every episode played); the
         sampler/trainer mismatch (mean |Δ log p|, KL) and the importance correction; whether
         the optimizer stepped and how far it moved the weights (relative L2)
    SFT  loss, token accuracy on assistant tokens, tokens
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

RL_KEYS = {
    "rewards/episode/mean": "reward",
    "episode/reward": "dense_reward",
    "episode/pass_rate": "pass_rate",
    "frac_reward_zero_std": "zero_variance_groups",
    "reward_std": "reward_std",
    "num_tokens": "tokens_seen",
    "episode/sampled_tokens": "sampled_tokens",
    "episode/turns": "episode_turns",
    "episode/tool_calls": "episode_tool_calls",
    "episode/context_tokens": "episode_tokens",
    "clip_ratio/region_mean": "clip_fraction",
    "clip_ratio/low_mean": "clip_low",
    "clip_ratio/high_mean": "clip_high",
    "entropy": "entropy",
    "loss": "loss",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "step_time": "step_time_s",
    "episode/rollout_s": "rollout_s",
    "sampling/groups_played": "groups_played",
    "sampling/sampling_rounds": "sampling_rounds",
    "sampling/flat_groups_dropped": "flat_groups_dropped",
    "sampling/signal_groups_short": "signal_groups_short",
    "sampling/pass_rate_played": "pass_rate_played",
    "sampling/reward_played": "reward_played",
    "sampler/logp_diff": "sampler_logp_diff",
    "sampler/logp_diff_max": "sampler_logp_diff_max",
    "sampler/kl": "sampler_kl",
    "sampler/is_weight_mean": "is_weight_mean",
    "sampler/is_corrected": "is_corrected",
    "optimizer/stepped": "stepped",
    "optimizer/weight_change": "weight_change",
}
SFT_KEYS = {
    "loss": "loss",
    "mean_token_accuracy": "token_accuracy",
    "num_tokens": "tokens_seen",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "epoch": "epoch",
    "entropy": "entropy",
}
CONSOLE = {
    "rl": [("reward", "reward {:.3f}"), ("pass_rate", "pass {:.2f}"), ("zero_variance_groups", "flat {:.2f}"),
           ("episode_turns", "turns {:.1f}"), ("sampled_tokens", "tok {:.0f}"), ("clip_fraction", "clip {:.3f}"),
           ("loss", "loss {:+.4f}"), ("grad_norm", "grad {:.2e}"), ("stepped", "stepped {:.0f}"),
           ("weight_change", "moved {:.2e}"), ("sampler_logp_diff", "|dlogp| {:.1e}")],
    "sft": [("loss", "loss {:.4f}"), ("token_accuracy", "acc {:.3f}"), ("tokens_seen", "tokens {:.0f}")],
}


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


class StepModels(TrainerCallback):
    """Saves the model after every optimizer step into ``folder/step-N`` (weights and tokenizer,
    no optimizer state: about the model's size each), for ``SFTConfig.keep_steps``."""

    def __init__(self, folder: str | Path, tokenizer):
        self.folder, self.tokenizer = Path(folder), tokenizer

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if not state.is_world_process_zero or model is None:
            return
        from longhorizon.train.template import save_tokenizer

        out = self.folder / f"step-{state.global_step}"
        model.save_pretrained(out)
        save_tokenizer(self.tokenizer, out)


class StepLogger(TrainerCallback):
    """Writes each logged step to ``path`` (appending, so a resumed run continues its log)."""

    def __init__(self, path: str | Path, stage: str, *, console: bool = True, tensorboard_dir: str | Path | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stage = stage
        self.keys = RL_KEYS if stage == "rl" else SFT_KEYS
        self.console = console
        self.t0 = time.time()
        self.tb = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(tensorboard_dir))
            except ImportError:  # tensorboard not installed: JSONL and console only
                self.tb = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "train_runtime" in logs or not state.is_world_process_zero:
            return  # the trainer's closing summary is not a step; one process writes the log
        row: dict[str, Any] = {"stage": self.stage, "step": state.global_step, "max_steps": state.max_steps,
                               "elapsed_s": round(time.time() - self.t0, 2)}
        for src, dst in self.keys.items():
            if src in logs and logs[src] is not None:
                row[dst] = _clean(float(logs[src]))
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        if self.tb is not None:
            for k, v in row.items():
                if isinstance(v, (int, float)) and v is not None and k not in ("step", "max_steps"):
                    self.tb.add_scalar(f"{self.stage}/{k}", v, state.global_step)
            self.tb.flush()
        if self.console:
            parts = [fmt.format(row[k]) for k, fmt in CONSOLE[self.stage] if row.get(k) is not None]
            print(f"[{self.stage} step {state.global_step}/{state.max_steps}] " + "  ".join(parts), flush=True)

    def on_train_end(self, args, state, control, **kwargs):
        if self.tb is not None:
            self.tb.close()


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The steps of a log (a resumed run's repeated steps: the last one wins)."""
    from longhorizon.rollout.store import read_jsonl

    rows = {}
    for r in read_jsonl(Path(path)):
        rows[r["step"]] = r
    return [rows[k] for k in sorted(rows)]


def quiet_progress(trainer) -> None:
    """Keep the trainer's progress bar but drop its raw dict print per log (StepLogger prints a
    line): transformers prints each log dict from its ProgressCallback, or, with the bar off
    (``--quiet``, or no terminal), from a PrinterCallback, which goes."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class _Bar(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            return None

    callbacks = trainer.callback_handler.callbacks
    if any(isinstance(cb, PrinterCallback) for cb in callbacks):
        trainer.remove_callback(PrinterCallback)
    if any(isinstance(cb, ProgressCallback) for cb in callbacks):
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(_Bar())
