"""RL on multi-turn MCP episodes: GSPO (or token-level GRPO) on TRL's GRPOTrainer.

How the pieces fit:

* The RL dataset is a list of task ids. TRL's sampler repeats each one ``group_size`` times in
  a row and hands a rollout batch to ``EpisodeRollout`` (GRPOTrainer's ``rollout_func``).
* ``EpisodeRollout`` plays the episodes of the batch concurrently (asyncio; in-process MCP
  sessions), whole groups at a time, each episode on its own fork of the task's World: the
  forks of a task are byte-identical (the first fork of each task per rollout is hashed and
  checked against the snapshot; ``verify_forks``). The policy is ``LocalModelPolicy`` over the very
  model being trained, sampling token-in/token-out.
* An episode becomes one sequence for TRL: the first turn's prompt, then every later token in
  order. ``env_mask`` is 1 on the ids the policy sampled and 0 on tool results and template
  tokens, so only the policy's own tokens carry loss; their sampled log-probs ride along
  (TRL keeps them as ``sampling_per_token_logps``; π_old in the ratio is TRL's own forward
  pass over the same ids, which the tests check equals them).
* Generation is batched: the turns of the episodes waiting for the model when it becomes free
  are decoded together (``max_batch`` at a time; each with its own KV cache, sampled ids and
  log-probs as one at a time would give). ``rl.sampler: vllm`` samples from a vLLM server
  instead, token in / token out, and pushes the weights to it after every optimizer step
  (``train.served_sampler``, docs/serving.md).
* The reward function hands TRL each episode's reward (the Grade's dense reward, or pass/fail,
  with an optional effort floor). TRL normalises it within the group and optimises the GSPO
  objective of ``longhorizon.train.gspo`` (sequence-level importance ratio, clip 3e-4/4e-4).
* An episode that fails for reasons outside the agent (an exception in our code or the
  policy, ``MAX_ATTEMPTS`` times; or token data that cannot be trained as sampled) never stops
  the step. It is left out of the update: its reward is None, which TRL treats as unscorable
  (out of the group's mean and std, advantage 0), and its sequence is one masked token. The
  group is kept with its survivors, whose advantages are relative to each other: the same
  estimator on a smaller group, rather than throwing the survivors' episodes away. A group
  with fewer than two survivors has no baseline left and is dropped whole (every reward
  None). Failures go to ``OUT/rollout_errors.jsonl``, each rollout logs how many
  (``episode/failed``, ``episode/dropped``) with a warning, and a rollout in which no group
  survives raises InfraError: with nothing to learn from, the run should stop.

    longhorizon train rl --model runs/sft --split train --group-size 8 --out runs/rl
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.task import Task
from longhorizon.core.tool_kinds import call_key
from longhorizon.core.trajectory import Trajectory, dumps
from longhorizon.core.world import WorldCache
from longhorizon.env.episode import Limits, new_trajectory
from longhorizon.rollout.runner import LocalEpisodes, play_groups
from longhorizon.train.config import RLConfig
from longhorizon.train.stage import (
    load_model, lora_config, prepare_out, train_and_save, trainer_args, warm_up_from_the_first_step,
)

MAX_ATTEMPTS = 3
"""An episode that fails for infrastructure reasons is played again (never graded as the agent's)."""

INFRA_STATUS = "infra_error"
"""The status of the stand-in for an episode that failed ``MAX_ATTEMPTS`` times (no agent outcome)."""

MIN_SURVIVORS = 2
"""A group with fewer surviving episodes is dropped from the update whole."""

log = logging.getLogger("longhorizon.train")


class TokenDriftError(RuntimeError):
    """A turn's prompt does not extend the ids sampled before it: the episode cannot be trained as sampled."""


def repeated_call_share(traj: Trajectory) -> float:
    """The share of an episode's tool calls that repeat an earlier call exactly (same tool, same
    arguments): re-reading what the context already holds, or looping on a failing call."""
    seen, repeats = set(), 0
    for c in traj.tool_calls:
        key = call_key(c.name, c.arguments)
        repeats += key in seen
        seen.add(key)
    return repeats / len(traj.tool_calls) if traj.tool_calls else 0.0


def shaped_reward(traj: Trajectory, mode: str = "dense", effort_floor: float = 0.0,
                  repetition_penalty: float = 0.0) -> float:
    """The RL reward of one episode.

    dense: the Grade's weighted fraction of criteria met. pass: 1.0 if every criterion is met.
    effort_floor (off at 0): an episode below the floor earns ``effort_floor x`` the share of its
    tool calls that succeeded, if that is more, so groups that all fail still rank effort.
    repetition_penalty (off at 0): minus ``repetition_penalty x`` the share of its calls that
    repeat an earlier one exactly (``repeated_call_share``), never below 0.
    """
    reward = float(traj.passed) if mode == "pass" else traj.reward
    if effort_floor > 0 and reward < effort_floor and traj.tool_calls:
        ok = sum(not c.is_error for c in traj.tool_calls) / len(traj.tool_calls)
        reward = max(reward, effort_floor * ok)
    if repetition_penalty > 0:
        reward = max(0.0, reward - repetition_penalty * repeated_call_share(traj))
    return reward


def episode_sequence(traj: Trajectory, eos_id: int) -> dict[str, list]:
    """One episode as TRL trains it: prompt ids, completion ids, env mask, sampled log-probs.

    The completion is everything after the first turn's prompt: each turn's sampled ids (mask 1,
    with their log-probs) and the env ids between turns (mask 0). Each turn's prompt must extend
    the previous prompt and sampled ids exactly (token-in/token-out), else TokenDriftError.
    """
    turns = [t for t in traj.turns if "prompt_ids" in t and "token_ids" in t]
    if not turns:  # the first prompt did not fit the context: nothing was sampled
        return {"prompt_ids": [eos_id], "completion_ids": [eos_id], "env_mask": [0], "logprobs": [0.0]}
    seq = list(turns[0]["prompt_ids"])
    start = len(seq)
    mask: list[int] = []
    logprobs: list[float] = []
    for k, t in enumerate(turns):
        prompt = t["prompt_ids"]
        if prompt[:len(seq)] != seq:
            raise TokenDriftError(f"{traj.episode_id}: turn {k}'s prompt does not extend the ids sampled before it")
        env = prompt[len(seq):]
        seq += env
        mask += [0] * len(env)
        logprobs += [0.0] * len(env)
        if len(t["logprobs"]) != len(t["token_ids"]):
            raise TokenDriftError(f"{traj.episode_id}: turn {k} has {len(t['token_ids'])} ids but "
                                  f"{len(t['logprobs'])} log-probs")
        seq += t["token_ids"]
        mask += [1] * len(t["token_ids"])
        logprobs += list(t["logprobs"])
    completion = seq[start:]
    if not completion:
        completion, mask, logprobs = [eos_id], [0], [0.0]
    return {"prompt_ids": seq[:start], "completion_ids": completion, "env_mask": mask, "logprobs": logprobs}


def _run(coro):
    from longhorizon.train.tiny import _run as run

    return run(coro)


class EpisodeRollout:
    """GRPOTrainer's ``rollout_func``: plays our episodes for a batch of task ids.

    ``policy_factory(model)`` makes the sampling policy over the trainer's current model (the
    default is ``LocalModelPolicy``; ``sampler``, a ``train.served_sampler.ServedSampler``, gives
    a vLLM server's token-level policy and is closed with the rollout).
    """

    def __init__(self, tasks: dict[str, Task], cfg: RLConfig, tokenizer, *, policy_factory=None,
                 record_dir: str | Path | None = None, sampler=None):
        self.sampler = sampler
        policy_factory = policy_factory or (sampler.policy if sampler is not None else None)
        self.tasks = tasks
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.limits = Limits(max_turns=cfg.max_turns, max_tool_calls=cfg.max_tool_calls, max_wall_s=cfg.max_wall_s)
        self.cache = WorldCache()
        self.policy_factory = policy_factory or self._local_policy
        self._policy = None
        self._policy_model = None
        self.record_dir = Path(record_dir) if record_dir else None
        self.last: list[Trajectory] = []
        """The last rollout's trajectories, in batch order (tests and logs read them)."""
        self.rollouts = 0
        self._next_spare = 0
        if cfg.ray and policy_factory is None:
            raise UsageError("rl.ray plays episodes on Ray workers, which need a policy served outside this process "
                             "(a policy_factory such as a vLLM server's); the in-process model cannot travel")
        self._workers = None
        self._workers_policy = None

    def workers(self, policy):
        """The Ray episode workers playing with ``policy`` (cfg.ray), made once per policy."""
        from longhorizon.rollout.ray_workers import RayEpisodes

        if self._workers is None or self._workers_policy is not policy:
            if self._workers is not None:
                _run(self._workers.aclose())
            self._workers = RayEpisodes(policy, self.limits, address=self.cfg.ray, workers=self.cfg.ray_workers)
            self._workers_policy = policy
        return self._workers

    def _local_policy(self, model):
        from longhorizon.policies.local_model import LocalModelPolicy

        c = self.cfg
        return LocalModelPolicy(model, self.tokenizer, temperature=c.temperature, top_p=c.top_p,
                                max_new_tokens=c.max_new_tokens, seed=c.seed + self.rollouts,
                                max_context=c.max_context, max_batch=c.max_batch)

    def policy(self, model):
        if self._policy is None or self._policy_model is not model:
            self._policy, self._policy_model = self.policy_factory(model), model
        return self._policy

    # -- playing ------------------------------------------------------------------------------
    async def play_batch(self, task_ids: list[str], policy) -> list[Trajectory]:
        """Play the batch (TRL's order: each task id ``group_size`` times), in batch order.

        Groups are admitted whole (``rollout.runner.play_groups``, the runner's own batch loop):
        ``concurrency`` episodes' worth of groups (at least one) are in flight at a time, all
        episodes of a group at once, so a group's wall is its longest episode and never waits on
        a wave boundary. Each task's first fork in the batch is hashed and must match its
        snapshot (``verify_forks="first"``; "every" hashes them all). An episode that fails
        ``MAX_ATTEMPTS`` times becomes an ``infra_error`` stand-in.
        """
        unknown = sorted(set(task_ids) - set(self.tasks))
        if unknown:
            raise UsageError(f"rollout got unknown task ids: {', '.join(unknown)}")
        groups: dict[str, list[tuple[Task, int]]] = {}
        for tid in task_ids:
            group = groups.setdefault(tid, [])
            group.append((self.tasks[tid], len(group)))
        if self.cfg.ray:  # on Ray workers (each its own fork; a lost worker is one more attempt)
            episodes = self.workers(policy)
        else:
            episodes = LocalEpisodes(policy, self.limits, cache=self.cache, verify_forks=self.cfg.verify_forks)
        played = await play_groups(list(groups.values()), episodes, attempts=MAX_ATTEMPTS,
                                   slots=self.cfg.concurrency // self.cfg.group_size)
        by_job = {}
        for jobs, results in zip(groups.values(), played):
            for (task, sample), out in zip(jobs, results):
                if isinstance(out, BaseException):
                    out = self._failed(task, sample, policy, f"failed {MAX_ATTEMPTS} times; the last time "
                                                             f"{type(out).__name__}: {out}")
                by_job[(task.id, sample)] = out
        return _in_batch_order(task_ids, by_job)

    def replace_flat_groups(self, trajs: list[Trajectory], policy) -> int:
        """Dynamic sampling: a group whose episodes all earned the same reward (all 0, all 1, ...)
        has advantage 0 everywhere and teaches nothing; play a whole group of another task in its
        place, up to ``resample_flat_groups`` times per group (the last one is kept whatever it
        scored). Groups are replaced whole, so the 8 episodes of a group always share one task.
        Returns how many groups were replaced (in place in ``trajs``)."""
        g, c = self.cfg.group_size, self.cfg
        in_batch = {t.task_id for t in trajs}
        spare = [tid for tid in self.tasks if tid not in in_batch]
        replaced = 0
        for k in range(0, len(trajs), g):
            for _ in range(c.resample_flat_groups):
                rewards = {shaped_reward(t, c.reward, c.effort_floor, c.repetition_penalty) for t in trajs[k:k + g]
                           if t.status != INFRA_STATUS}
                if len(rewards) > 1 or not spare:
                    break
                tid = spare[self._next_spare % len(spare)]
                self._next_spare += 1
                log.info("rollout %d: group of %s is flat (reward %s): playing %s instead",
                         self.rollouts + 1, trajs[k].task_id, sorted(rewards), tid)
                trajs[k:k + g] = _run(self.play_batch([tid] * g, policy))
                replaced += 1
        return replaced

    def _failed(self, task: Task, sample: int, policy, error: str) -> Trajectory:
        """The stand-in for an episode that could not be played: no turns, status ``infra_error``."""
        try:
            info = policy.describe()
        except Exception:
            info = {"policy": type(policy).__name__}
        traj = new_trajectory(task, info, None, sample, self.limits)
        traj.status = INFRA_STATUS
        traj.provenance["infra_error"] = error
        return traj

    def __call__(self, prompts: list, trainer) -> dict[str, Any]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        was_training = model.training
        t0 = time.perf_counter()
        try:
            policy = self.policy(model)
            trajs = _run(self.play_batch([str(p) for p in prompts], policy))
            replaced = self.replace_flat_groups(trajs, policy) if self.cfg.resample_flat_groups else 0
        finally:
            model.train(was_training)
        self.last = trajs
        self.rollouts += 1
        out = self.to_trl(trajs)
        out["flat_groups_replaced"] = [float(replaced)] * len(trajs)
        elapsed = time.perf_counter() - t0
        out["rollout_s"] = [elapsed] * len(trajs)
        if self.record_dir is not None:
            self._record(trajs, trainer.state.global_step, out["episode_dropped"])
        self._check_survivors(trajs, out["episode_failed"], out["episode_dropped"])
        return out

    def _check_survivors(self, trajs: list[Trajectory], failed: list[float], dropped: list[float]) -> None:
        """Warn about failed episodes and dropped groups; raise when no group is left to learn from."""
        if not any(failed) and not any(dropped):
            return
        groups = len(trajs) // self.cfg.group_size
        lost = sum(all(dropped[k:k + self.cfg.group_size]) for k in range(0, len(trajs), self.cfg.group_size))
        first = next((t for t, f in zip(trajs, failed) if f), trajs[0])
        message = (f"rollout {self.rollouts}: {int(sum(failed))} of {len(trajs)} episodes failed (not the agent's "
                   f"doing), {lost} of {groups} groups dropped from the update; first: {first.episode_id}: "
                   f"{first.provenance.get('infra_error', '')[:300]}")
        if lost == groups:
            raise InfraError(message + " -- no group is left to learn from")
        log.warning(message)

    def to_trl(self, trajs: list[Trajectory]) -> dict[str, Any]:
        """The batch as TRL's rollout output; failed episodes and dropped groups are left out of
        the update (reward None, no trained token) as the module docstring says."""
        eos = self.tokenizer.eos_token_id
        empty = {"prompt_ids": [eos], "completion_ids": [eos], "env_mask": [0], "logprobs": [0.0]}
        seqs, failed = [], []
        for t in trajs:
            if t.status == INFRA_STATUS:
                seqs.append(empty)
                failed.append(True)
                continue
            try:
                seqs.append(episode_sequence(t, eos))
                failed.append(False)
            except (TokenDriftError, TypeError, ValueError, KeyError) as exc:  # token data it cannot train on
                t.provenance["infra_error"] = f"its token data cannot be trained: {type(exc).__name__}: {exc}"
                seqs.append(empty)
                failed.append(True)
        dropped = dropped_episodes(failed, self.cfg.group_size)
        for k, d in enumerate(dropped):
            if d:
                seqs[k] = {**seqs[k], "env_mask": [0] * len(seqs[k]["env_mask"])}
        c = self.cfg
        return {
            "prompt_ids": [s["prompt_ids"] for s in seqs],
            "completion_ids": [s["completion_ids"] for s in seqs],
            "logprobs": [s["logprobs"] for s in seqs],
            "env_mask": [s["env_mask"] for s in seqs],
            "episode_reward": [None if d else shaped_reward(t, c.reward, c.effort_floor, c.repetition_penalty)
                               for t, d in zip(trajs, dropped)],
            "episode_failed": [float(f) for f in failed],
            "episode_dropped": [float(d) for d in dropped],
            "episode_dense_reward": [None if f else t.reward for t, f in zip(trajs, failed)],
            "episode_passed": [None if f else float(t.passed) for t, f in zip(trajs, failed)],
            "episode_turns": [len(t.turns) for t in trajs],
            "episode_tool_calls": [len(t.tool_calls) for t in trajs],
            "episode_sampled_tokens": [sum(s["env_mask"]) for s in seqs],
            "episode_context_tokens": [len(s["prompt_ids"]) + len(s["completion_ids"]) for s in seqs],
            "episode_id": [t.episode_id for t in trajs],
            "episode_status": [t.status for t in trajs],
            "world_hash": [t.provenance.get("world_hash") for t in trajs],
            "fork_hash": [t.provenance.get("fork_hash") for t in trajs],
        }

    def _record(self, trajs: list[Trajectory], step: int, dropped: list[float]) -> None:
        """Append the rollout's episodes (without token data) to ``record_dir/rollouts.jsonl``
        (``rl_dropped``: left out of the update), and those that could not be played or
        trained to ``record_dir/rollout_errors.jsonl``."""
        self.record_dir.mkdir(parents=True, exist_ok=True)
        errors = [dumps({"rl_step": step, "episode_id": t.episode_id, "task_id": t.task_id, "sample": t.sample,
                         "error": t.provenance["infra_error"], "time": time.time()})
                  for t in trajs if "infra_error" in t.provenance]
        if errors:
            with open(self.record_dir / "rollout_errors.jsonl", "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in errors))
        with open(self.record_dir / "rollouts.jsonl", "a", encoding="utf-8") as f:
            for t, d in zip(trajs, dropped):
                if t.status == INFRA_STATUS:
                    continue
                row = t.to_dict()
                row["turns"] = [{k: v for k, v in turn.items() if k not in ("prompt_ids", "token_ids", "logprobs")}
                                | {"sampled_tokens": _count(turn.get("token_ids"))} for turn in row["turns"]]
                row["rl_step"] = step
                row["rl_dropped"] = bool(d)
                f.write(dumps(row) + "\n")

    def close(self) -> None:
        self.cache.close()
        if self._workers is not None:
            _run(self._workers.aclose())
            self._workers = None
        if self.sampler is not None:
            self.sampler.close()


def _in_batch_order(task_ids: list[str], by_job: dict[tuple[str, int], Trajectory]) -> list[Trajectory]:
    seen: Counter = Counter()
    out = []
    for tid in task_ids:
        out.append(by_job[(tid, seen[tid])])
        seen[tid] += 1
    return out


def _count(ids) -> int:
    return len(ids) if isinstance(ids, list) else 0


def dropped_episodes(failed: list[bool], group_size: int, min_survivors: int = MIN_SURVIVORS) -> list[bool]:
    """Which episodes of a batch (groups of ``group_size`` in a row, as TRL orders them) the
    update leaves out: the failed ones, and all of a group left with fewer than ``min_survivors``."""
    out: list[bool] = []
    for k in range(0, len(failed), group_size):
        group = failed[k:k + group_size]
        out += [True] * len(group) if len(group) - sum(group) < min(min_survivors, len(group)) else list(group)
    return out


def episode_reward(prompts, completions, completion_ids, episode_reward, log_metric=None,
                   **kw) -> list[float | None]:
    """TRL reward function: the reward each episode earned (computed by the rollout from its Grade);
    None for an episode left out of the update (TRL gives it no advantage and no part in the baseline)."""
    if log_metric is not None:
        def mean(key):
            vals = [v for v in kw.get(key) or [] if v is not None]
            return sum(vals) / len(vals) if vals else 0.0

        log_metric("episode/reward", mean("episode_dense_reward"))
        log_metric("episode/pass_rate", mean("episode_passed"))
        log_metric("episode/turns", mean("episode_turns"))
        log_metric("episode/tool_calls", mean("episode_tool_calls"))
        log_metric("episode/sampled_tokens", mean("episode_sampled_tokens"))
        log_metric("episode/context_tokens", mean("episode_context_tokens"))
        log_metric("episode/rollout_s", mean("rollout_s"))
        log_metric("episode/failed", float(sum(kw.get("episode_failed") or [])))
        log_metric("episode/dropped", float(sum(kw.get("episode_dropped") or [])))
        log_metric("episode/flat_groups_replaced", max(kw.get("flat_groups_replaced") or [0.0]))
    return [None if r is None else float(r) for r in episode_reward]


episode_reward.__name__ = "episode"


def rl_tasks(cfg: RLConfig) -> list[Task]:
    from longhorizon.tasks.registry import tasks_for

    return tasks_for(cfg.split, cfg.seeds, cfg.families)


def grpo_args(cfg: RLConfig, *, progress: bool = True):
    """TRL's GRPOConfig for ``cfg``."""
    from trl import GRPOConfig

    from longhorizon.train.gspo import trl_settings

    episodes = cfg.group_size * cfg.tasks_per_rollout
    steps_per_generation = episodes // cfg.micro_batch_size
    eps_low, eps_high = cfg.clip_range()
    return GRPOConfig(
        **trainer_args(cfg, progress=progress),
        num_generations=cfg.group_size,
        per_device_train_batch_size=cfg.micro_batch_size,
        steps_per_generation=steps_per_generation,
        gradient_accumulation_steps=steps_per_generation // cfg.updates_per_rollout,
        max_grad_norm=cfg.max_grad_norm,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_completion_length=cfg.max_context or 8192,
        log_completions=False,
        **trl_settings(cfg.loss, eps_low, eps_high, cfg.beta, cfg.scale_rewards),
    )


def build_trainer(cfg: RLConfig, *, model=None, tokenizer=None, tasks: list[Task] | None = None,
                  progress: bool = True, callbacks=(), policy_factory=None):
    """A GRPOTrainer whose rollouts are our episodes, and its EpisodeRollout."""
    import os

    from datasets import Dataset
    from trl import GRPOTrainer

    cfg.validate()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tokenizer = load_model(cfg.model, model, tokenizer)
    tasks = tasks if tasks is not None else rl_tasks(cfg)
    if not tasks:
        raise UsageError("no RL tasks (check --split, --family, --seeds)")
    sampler = None
    if policy_factory is None and cfg.sampler == "vllm":  # served rollouts, weights synced each step
        from longhorizon.train.served_sampler import ServedSampler

        sampler = ServedSampler(cfg, tokenizer).start(model)
        callbacks = [sampler.callback(), *callbacks]
    rollout = EpisodeRollout({t.id: t for t in tasks}, cfg, tokenizer, policy_factory=policy_factory,
                             record_dir=cfg.out, sampler=sampler)
    dataset = Dataset.from_dict({"prompt": [t.id for t in tasks]})
    try:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[episode_reward],
            args=grpo_args(cfg, progress=progress),
            train_dataset=dataset,
            processing_class=tokenizer,
            rollout_func=rollout,
            peft_config=lora_config(cfg.lora, model),
            callbacks=list(callbacks),
        )
    except BaseException:
        rollout.close()
        raise
    warm_up_from_the_first_step(trainer)
    return trainer, rollout


def run_rl(cfg: RLConfig, *, resume: bool = False, progress: bool = True, console: bool = True) -> dict[str, Any]:
    """Train, save the final policy to ``cfg.out`` and return a summary."""
    from longhorizon.train.logs import StepLogger, quiet_progress

    out = prepare_out(cfg, "rl", resume=resume, logs=("log.jsonl", "rollouts.jsonl", "rollout_errors.jsonl"))
    logger = StepLogger(out / "log.jsonl", "rl", console=console, tensorboard_dir=out / "tensorboard")
    trainer, rollout = build_trainer(cfg, progress=progress, callbacks=[logger])
    quiet_progress(trainer)
    try:
        return train_and_save(trainer, out, cfg, "rl", resume=resume, loss=cfg.loss,
                              clip_range=list(cfg.clip_range()), group_size=cfg.group_size)
    finally:
        rollout.close()
