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
* Which tasks a step plays: TRL's prompts (the task list, shuffled), or with ``curriculum`` the
  ``train.curriculum`` draw, which prefers tasks whose pass rate so far is strictly between 0
  and 1. RL's task seeds start ``seed_offset`` (50,000) into the split, so RL never plays the
  instances the SFT teacher played (seed 0 onwards).
* Dynamic sampling (``resample_flat_groups`` rounds): a group whose rewards are all equal has
  advantage 0 everywhere and teaches nothing; it is dropped and fresh tasks are played in its
  place until the step has its quota of groups with signal, or the rounds run out (then flat
  groups fill the quota; the step log says how many groups were played, dropped and missing).
* Each step's rollout samples with its own seed (``cfg.seed`` and the step): a task that comes
  back is not replayed with the same random draws.
* The reward function hands TRL each episode's reward (the Grade's dense reward, or pass/fail,
  with an optional effort floor, and optional step-level judged credit: ``step_judge``). TRL normalises it within the group and optimises the GSPO
  objective of ``longhorizon.train.gspo`` (sequence-level importance ratio, clip 3e-4/4e-4).
  ``train.rl_trainer.RLTrainer`` adds the sampler/trainer importance correction, skips steps
  whose gradient is zero, and logs the mismatch and how far each step moved the weights.
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
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from longhorizon.apps.kinds import repeats
from longhorizon.core.aio import run_sync
from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.judged import configure_judge, require_judge
from longhorizon.core.task import Task
from longhorizon.core.trajectory import Trajectory, dumps
from longhorizon.core.world import WorldCache
from longhorizon.env.episode import Limits, new_trajectory
from longhorizon.rollout.runner import LocalEpisodes, play_groups
from longhorizon.train.config import RLConfig
from longhorizon.train.curriculum import Curriculum, stream_name
from longhorizon.train.gspo import STD_EPS
from longhorizon.train.stage import (
    load_model, lora_config, prepare_out, train_and_save, trainer_args, warm_up_from_the_first_step,
)

MAX_ATTEMPTS = 3
"""An episode that fails for infrastructure reasons is played again (never graded as the agent's)."""

INFRA_STATUS = "infra_error"
"""The status of the stand-in for an episode that failed ``MAX_ATTEMPTS`` times (no agent outcome)."""

STEP_JUDGE_KEY = "step_judge_share"
"""Provenance key: the share of an episode's steps the step judge called sensible (``rl.step_judge``)."""

MIN_SURVIVORS = 2
"""A group with fewer surviving episodes is dropped from the update whole."""

log = logging.getLogger("longhorizon.train")


class TokenDriftError(RuntimeError):
    """A turn's prompt does not extend the ids sampled before it: the episode cannot be trained as sampled."""


def repeated_call_share(traj: Trajectory) -> float:
    """The share of an episode's tool calls that repeat an earlier call exactly (same tool, same
    arguments) with nothing written in between that they could see (``apps.kinds.repeats``, the
    analysis' definition too): re-reading what the context already holds, or looping on a
    failing call. Reading back what was just written is verification, never penalised."""
    calls = traj.tool_calls
    return sum(repeats(calls)) / len(calls) if calls else 0.0


def shaped_reward(traj: Trajectory, mode: str = "dense", effort_floor: float = 0.0,
                  repetition_penalty: float = 0.0, step_judge: float = 0.0) -> float:
    """The RL reward of one episode.

    dense: the Grade's weighted fraction of criteria met. pass: 1.0 if every criterion is met.
    effort_floor (off at 0): an episode below the floor earns ``effort_floor x`` the share of its
    tool calls that succeeded, if that is more, so groups that all fail still rank effort. (In a
    group where every episode is below the floor, the rollout keeps the advantages at that
    scale rather than letting the group normalisation blow them up to ±1: ``advantage_scales``.)
    repetition_penalty (off at 0): minus ``repetition_penalty x`` the share of its calls that
    repeat an earlier one with nothing written in between (``repeated_call_share``), never below 0.
    step_judge (off at 0): plus ``step_judge x`` the share of its steps the judge called sensible
    (``STEP_JUDGE_KEY`` in its provenance, set by the rollout: ``EpisodeRollout.judge_steps``).
    """
    reward = float(traj.passed) if mode == "pass" else traj.reward
    if effort_floor > 0 and reward < effort_floor and traj.tool_calls:
        ok = sum(not c.is_error for c in traj.tool_calls) / len(traj.tool_calls)
        reward = max(reward, effort_floor * ok)
    if step_judge > 0:
        reward += step_judge * traj.provenance.get(STEP_JUDGE_KEY, 0.0)
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
        if t.get("elided") and prompt[:len(seq)] != seq:
            raise TokenDriftError(f"{traj.episode_id}: turn {k}'s prompt was re-rendered by a context policy "
                                  f"({t['elided']} tool results elided); it does not extend the ids sampled before it")
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


class EpisodeRollout:
    """GRPOTrainer's ``rollout_func``: plays our episodes for a batch of task ids.

    ``policy_factory(model)`` makes the sampling policy over the trainer's current model (the
    default is ``LocalModelPolicy``; ``sampler``, a ``train.served_sampler.ServedSampler``, gives
    a vLLM server's token-level policy and is closed with the rollout). A policy with a
    ``reseed(seed)`` method is given each step's sampling seed before the step plays.
    ``curriculum``: draws each step's tasks (and refills) instead of TRL's prompts.
    """

    def __init__(self, tasks: dict[str, Task], cfg: RLConfig, tokenizer, *, policy_factory=None,
                 record_dir: str | Path | None = None, curriculum: Curriculum | None = None, sampler=None):
        self.sampler = sampler
        policy_factory = policy_factory or (sampler.policy if sampler is not None else None)
        self.tasks = dict(tasks)
        self.curriculum = curriculum
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
        self.stats: dict[str, float] = {}
        """The last step's sampling: groups played, dropped as flat, short of signal, pass rate of all played."""
        self.advantage_scale: list[float] = []
        """Per episode of the last rollout: what its TRL advantage is multiplied by (``advantage_scales``)."""
        self._next_spare = 0
        if cfg.ray and policy_factory is None:
            raise UsageError("rl.ray plays episodes on Ray workers, which need a policy served outside this process "
                             "(a policy_factory such as a vLLM server's); the in-process model cannot travel")
        self._workers = None
        self._workers_policy = None
        self.judge = None
        if cfg.step_judge > 0:  # step-level judged credit (core/judged.py), verdicts cached with the run
            from longhorizon.core.judged import judge_from

            cache = self.record_dir / "judge_cache" if self.record_dir else None
            self.judge = judge_from(cfg.judge_base_url, cfg.judge_model, cache)
            if self.judge is None:
                raise UsageError("rl.step_judge needs a judge: judge_base_url and judge_model (or "
                                 "$LONGHORIZON_JUDGE_BASE_URL and $LONGHORIZON_JUDGE_MODEL)")

    def workers(self, policy):
        """The Ray episode workers playing with ``policy`` (cfg.ray), made once per policy."""
        from longhorizon.rollout.ray_workers import RayEpisodes

        if self._workers is None or self._workers_policy is not policy:
            if self._workers is not None:
                run_sync(self._workers.aclose())
            self._workers = RayEpisodes(policy, self.limits, address=self.cfg.ray, workers=self.cfg.ray_workers)
            self._workers_policy = policy
        return self._workers

    def _local_policy(self, model):
        from longhorizon.policies.local_model import LocalModelPolicy

        c = self.cfg
        return LocalModelPolicy(model, self.tokenizer, temperature=c.temperature, top_p=c.top_p,
                                max_new_tokens=c.max_new_tokens, seed=c.seed,
                                max_context=c.max_context, max_batch=c.max_batch)

    def policy(self, model):
        if self._policy is None or self._policy_model is not model:
            policy = self.policy_factory(model)
            if getattr(policy, "context", None) is not None:
                raise UsageError("RL trains each episode as the one token sequence its policy sampled; a context "
                                 "policy re-renders prompts when it elides tool results, so the sampling policy "
                                 "must have none (policies/context.py)")
            self._policy, self._policy_model = policy, model
        return self._policy

    def reseed(self, policy, step: int) -> None:
        """Give the policy the sampling seed of ``step`` (``rollout_seed``), if it takes one: the
        policy is made once and kept, so without this every step would replay the same draws."""
        reseed = getattr(policy, "reseed", None)
        if reseed is not None:
            reseed(rollout_seed(self.cfg.seed, step))

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
        if self.judge is not None:
            await self.judge_steps(by_job, policy)
        return _in_batch_order(task_ids, by_job)

    async def judge_steps(self, by_job: dict[tuple[str, int], Trajectory], policy) -> None:
        """Give each played episode its step judge's share of sensible steps (``STEP_JUDGE_KEY``);
        an episode the judge cannot score becomes an ``infra_error`` stand-in, never a zero."""
        import asyncio

        from longhorizon.core.judged import JudgeError, step_credit

        gate = asyncio.Semaphore(max(1, self.cfg.group_size))

        async def one(key, traj):
            async with gate:
                try:
                    traj.provenance[STEP_JUDGE_KEY] = await step_credit(self.judge, traj)
                except JudgeError as exc:
                    by_job[key] = self._failed(self.tasks[key[0]], key[1], policy, f"the step judge failed: {exc}")

        await asyncio.gather(*(one(k, t) for k, t in list(by_job.items()) if t.status != INFRA_STATUS))

    # -- choosing and refilling the step's groups ----------------------------------------------------
    def has_signal(self, group: list[Trajectory]) -> bool:
        """Whether a group can teach: at least ``MIN_SURVIVORS`` episodes played, not all with the same reward."""
        c = self.cfg
        rewards = [shaped_reward(t, c.reward, c.effort_floor, c.repetition_penalty, c.step_judge) for t in group
                   if t.status != INFRA_STATUS]
        return len(rewards) >= MIN_SURVIVORS and len(set(rewards)) > 1

    def fresh_tasks(self, n: int, exclude: set[str]) -> list[str]:
        """Up to ``n`` task ids not in ``exclude``: the curriculum's draw, or else the task list's in turn."""
        if self.curriculum is not None:
            picked = self.curriculum.pick(n, exclude)
            for t in picked:
                self.tasks.setdefault(t.id, t)
            return [t.id for t in picked]
        spare = [tid for tid in self.tasks if tid not in exclude]
        out = []
        while spare and len(out) < n:
            out.append(spare.pop(self._next_spare % len(spare)))
            self._next_spare += 1
        return out

    def first_tasks(self, prompts: list) -> list[str]:
        """One task id per group of the step: TRL's prompts (each repeated ``group_size`` times in a
        row), or the curriculum's draw (which repeats its tasks if it has fewer than the step needs)."""
        tids = [str(p) for p in prompts[::self.cfg.group_size]]
        if self.curriculum is None:
            return tids
        drawn = self.fresh_tasks(len(tids), set())
        while drawn and len(drawn) < len(tids):
            drawn += drawn[:len(tids) - len(drawn)]
        return drawn or tids

    def play_step(self, first: list[str], policy) -> tuple[list[Trajectory], list[Trajectory]]:
        """Play a group of each task in ``first``; with dynamic sampling, play groups of fresh tasks
        in place of flat ones (``has_signal``), in rounds, up to ``resample_flat_groups`` rounds.

        Returns (kept, dropped): ``len(first)`` whole groups in the order played, those with signal
        first in choice and flat ones only to make up the number, and the flat groups left out.
        Groups are replaced whole, so the episodes of a group always share one task."""
        g, c = self.cfg.group_size, self.cfg
        quota = len(first)
        groups: list[tuple[list[Trajectory], bool]] = []
        played: set[str] = set()
        batch, rounds = list(first), 0
        while batch:
            rounds += 1
            played.update(batch)
            trajs = run_sync(self.play_batch([tid for tid in batch for _ in range(g)], policy))
            for k, tid in enumerate(batch):
                group = trajs[k * g:(k + 1) * g]
                if self.curriculum is not None:
                    self.curriculum.observe(self.tasks[tid], [t.passed for t in group if t.status != INFRA_STATUS])
                groups.append((group, self.has_signal(group)))
            missing = quota - sum(signal for _, signal in groups)
            if missing <= 0 or rounds > c.resample_flat_groups:
                break
            batch = self.fresh_tasks(missing, played)
            if batch:
                log.info("rollout %d: %d group(s) short of signal; playing %s in place of flat ones",
                         self.rollouts + 1, missing, ", ".join(batch))
        n_signal = min(quota, sum(signal for _, signal in groups))
        fill = quota - n_signal  # groups short of signal: flat ones make up the number (no gradient)
        kept, dropped, want = [], [], {True: n_signal, False: fill}
        for group, signal in groups:
            if want[signal] > 0:
                kept += group
                want[signal] -= 1
            else:
                dropped += group
        played_eps = [t for group, _ in groups for t in group if t.status != INFRA_STATUS]
        self.stats = {
            "groups_played": float(len(groups)),
            "sampling_rounds": float(rounds),
            "flat_groups_dropped": float(len(dropped) // g),
            "signal_groups_short": float(fill),
            "pass_rate_played": sum(t.passed for t in played_eps) / len(played_eps) if played_eps else 0.0,
            "reward_played": sum(t.reward for t in played_eps) / len(played_eps) if played_eps else 0.0,
        }
        return kept, dropped

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
        step = trainer.state.global_step
        was_training = model.training
        t0 = time.perf_counter()
        try:
            policy = self.policy(model)
            self.reseed(policy, step)
            trajs, flat = self.play_step(self.first_tasks(prompts), policy)
        finally:
            model.train(was_training)
        self.last = trajs
        self.rollouts += 1
        out = self.to_trl(trajs)
        elapsed = time.perf_counter() - t0
        out["rollout_s"] = [elapsed] * len(trajs)
        if self.record_dir is not None:
            self._record(trajs, step, out["episode_dropped"], flat)
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
        self.advantage_scale = advantage_scales(trajs, dropped, c)
        rewards = [None if d else shaped_reward(t, c.reward, c.effort_floor, c.repetition_penalty, c.step_judge)
                   for t, d in zip(trajs, dropped)]
        if c.permute_rewards:
            rewards = permuted_within_groups(rewards, c.group_size, random.Random(rollout_seed(c.seed, self.rollouts)))
        return {
            "prompt_ids": [s["prompt_ids"] for s in seqs],
            "completion_ids": [s["completion_ids"] for s in seqs],
            "logprobs": [s["logprobs"] for s in seqs],
            "env_mask": [s["env_mask"] for s in seqs],
            "episode_reward": rewards,
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

    def _record(self, trajs: list[Trajectory], step: int, dropped: list[float],
                flat: list[Trajectory] = ()) -> None:
        """Append the rollout's episodes (without token data) to ``record_dir/rollouts.jsonl``
        (``rl_dropped``: left out of the update; ``rl_flat``: also, a flat group dynamic sampling
        replaced), and those that could not be played or trained to ``record_dir/rollout_errors.jsonl``."""
        self.record_dir.mkdir(parents=True, exist_ok=True)
        flat = list(flat)
        trajs, dropped = list(trajs) + flat, list(dropped) + [True] * len(flat)
        is_flat = [False] * (len(trajs) - len(flat)) + [True] * len(flat)
        errors = [dumps({"rl_step": step, "episode_id": t.episode_id, "task_id": t.task_id, "sample": t.sample,
                         "error": t.provenance["infra_error"], "time": time.time()})
                  for t in trajs if "infra_error" in t.provenance]
        if errors:
            with open(self.record_dir / "rollout_errors.jsonl", "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in errors))
        with open(self.record_dir / "rollouts.jsonl", "a", encoding="utf-8") as f:
            for t, d, f_ in zip(trajs, dropped, is_flat):
                if t.status == INFRA_STATUS:
                    continue
                row = t.to_dict()
                row["turns"] = [{k: v for k, v in turn.items() if k not in ("prompt_ids", "token_ids", "logprobs")}
                                | {"sampled_tokens": _count(turn.get("token_ids"))} for turn in row["turns"]]
                row["rl_step"] = step
                row["rl_dropped"] = bool(d)
                row["rl_flat"] = f_
                f.write(dumps(row) + "\n")

    def close(self) -> None:
        self.cache.close()
        if self._workers is not None:
            run_sync(self._workers.aclose())
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


ROLLOUT_SEED_STRIDE = 1_000_000
"""``rollout_seed``: steps per run seed (a run of fewer steps never reuses a seed of another run seed)."""


def rollout_seed(seed: int, step: int) -> int:
    """The sampling seed of the rollout played at optimizer step ``step`` of a run seeded ``seed``:
    a new one every step (and the same after a resume, which restarts at the step it stopped at)."""
    return seed * ROLLOUT_SEED_STRIDE + step


def permuted_within_groups(rewards: list, group_size: int, rng: random.Random) -> list:
    """``rewards`` with each group's values (None stays where it is: left out of the update)
    shuffled among that group's episodes: the ``permute_rewards`` control."""
    out = list(rewards)
    for k in range(0, len(out), group_size):
        slots = [i for i in range(k, min(k + group_size, len(out))) if out[i] is not None]
        values = [out[i] for i in slots]
        rng.shuffle(values)
        for i, v in zip(slots, values):
            out[i] = v
    return out


def advantage_scales(trajs: list[Trajectory], dropped: list[bool], cfg: RLConfig) -> list[float]:
    """What each episode's TRL advantage is multiplied by: 1, except in a group where every
    surviving episode scored below the effort floor (all failed; only the floor ranks them).

    TRL divides a group's centred rewards by the group's std, so the floor's small differences
    (at most ``effort_floor``) would become advantages of ±1, as large as a real success's. There
    the scale is the group's std + ``STD_EPS``, which undoes the division: the advantage is the
    centred shaped reward, at most ``effort_floor`` in size. Only with ``scale_rewards: group``.
    """
    import statistics

    g, c = cfg.group_size, cfg
    scales = [1.0] * len(trajs)
    if c.effort_floor <= 0 or c.scale_rewards != "group":
        return scales
    for k in range(0, len(trajs), g):
        idx = [i for i in range(k, min(k + g, len(trajs))) if not dropped[i]]
        base = [float(trajs[i].passed) if c.reward == "pass" else trajs[i].reward for i in idx]
        if len(idx) < 2 or any(b >= c.effort_floor for b in base):
            continue
        shaped = [shaped_reward(trajs[i], c.reward, c.effort_floor, c.repetition_penalty, c.step_judge) for i in idx]
        scale = statistics.stdev(shaped) + STD_EPS
        for i in idx:
            scales[i] = scale
    return scales


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
    return [None if r is None else float(r) for r in episode_reward]


episode_reward.__name__ = "episode"


def rl_families(cfg: RLConfig) -> list:
    """The task families RL draws from: ``cfg.families`` (default all) that have seeds in the split
    and at least one of ``cfg.levels`` (a named family without one is refused)."""
    from longhorizon.tasks.registry import families, get_family, suite_seeds

    fams = [get_family(n) for n in cfg.families] if cfg.families else families()
    if cfg.families and cfg.levels:
        for f in fams:
            if not rl_levels(cfg, f):
                raise UsageError(f"task family {f.name!r} has levels 1-{f.levels}, none of {cfg.levels}")
    return [f for f in fams if suite_seeds(cfg.split, f) and rl_levels(cfg, f)]


def rl_levels(cfg: RLConfig, family) -> list[int]:
    """The levels of ``family`` RL plays: those of ``cfg.levels`` it has (default: its top level)."""
    if not cfg.levels:
        return [family.levels]
    return [lv for lv in cfg.levels if lv <= family.levels]


def rl_seeds(cfg: RLConfig, family) -> range:
    """The seeds of ``family`` RL plays: ``cfg.seeds`` of them from ``cfg.seed_offset`` past the
    split's first seed. The SFT teacher plays the split from its first seed, so on the train split
    (seeds 0-99,999) RL's tasks (50,000 on) are never the instances SFT imitated."""
    from longhorizon.tasks.registry import suite_seeds

    if cfg.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    start = suite_seeds(cfg.split, family)[0] + cfg.seed_offset
    seeds = range(start, start + cfg.seeds)
    for s in (seeds[0], seeds[-1]):
        if family.split_of(s) != cfg.split:
            raise UsageError(f"RL seeds {seeds[0]}-{seeds[-1]} of {family.name} leave the {cfg.split} split "
                             f"(seed {s} is {family.split_of(s)}): lower seed_offset or seeds")
    return seeds


def rl_tasks(cfg: RLConfig) -> list[Task]:
    """Every (family, level, seed) of ``cfg``; seeds, and so splits, are the same at every level."""
    return [f.instance(s, lv) for f in rl_families(cfg) for lv in rl_levels(cfg, f) for s in rl_seeds(cfg, f)]


def rl_curriculum(cfg: RLConfig, tasks: list[Task] | None = None) -> Curriculum:
    """The curriculum over ``tasks``, or over the families, levels and seeds of ``cfg`` (each task
    generated only when first drawn); one stream of fresh seeds per family and level."""
    if tasks is not None:
        return Curriculum.of_tasks(tasks, seed=cfg.seed)
    def fresh(family, level):  # a function, so each stream's generator keeps its own family and level
        return (family.instance(s, level) for s in rl_seeds(cfg, family))

    return Curriculum({stream_name(f.name, lv): fresh(f, lv) for f in rl_families(cfg) for lv in rl_levels(cfg, f)},
                      seed=cfg.seed)


def grpo_args(cfg: RLConfig, *, progress: bool = True):
    """TRL's GRPOConfig for ``cfg``."""
    from trl import GRPOConfig

    from longhorizon.train.gspo import trl_settings

    episodes = cfg.group_size * cfg.tasks_per_step  # per optimizer step
    accumulation = episodes // cfg.micro_batch_size
    eps_low, eps_high = cfg.clip_range()
    return GRPOConfig(
        **trainer_args(cfg, progress=progress),
        num_generations=cfg.group_size,
        per_device_train_batch_size=cfg.micro_batch_size,
        steps_per_generation=accumulation * cfg.updates_per_rollout,
        gradient_accumulation_steps=accumulation,
        max_grad_norm=cfg.max_grad_norm,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_completion_length=cfg.max_context or 8192,
        log_completions=False,
        **trl_settings(cfg.loss, eps_low, eps_high, cfg.beta, cfg.scale_rewards),
    )


def build_trainer(cfg: RLConfig, *, model=None, tokenizer=None, tasks: list[Task] | None = None,
                  progress: bool = True, callbacks=(), policy_factory=None):
    """An RLTrainer (TRL's GRPOTrainer) whose rollouts are our episodes, and its EpisodeRollout.

    With ``cfg.curriculum`` the rollout draws each step's tasks itself; TRL's dataset then only
    sets how many groups a rollout plays (the task ids, or numbered slots when the tasks are
    generated as they are drawn)."""
    import os

    from datasets import Dataset

    from longhorizon.train.rl_trainer import RLTrainer

    cfg.validate()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    no_tasks = UsageError("no RL tasks (check --split, --family, --seeds)")
    if tasks is None and cfg.curriculum:  # tasks are generated as the curriculum draws them
        if not rl_families(cfg):
            raise no_tasks
        curriculum, tasks = rl_curriculum(cfg), []
        prompts = [f"slot-{k}" for k in range(cfg.tasks_per_step * cfg.updates_per_rollout)]
    else:
        tasks = tasks if tasks is not None else rl_tasks(cfg)
        if not tasks:
            raise no_tasks
        curriculum = rl_curriculum(cfg, tasks) if cfg.curriculum else None
        prompts = [t.id for t in tasks]
    if cfg.judge_base_url:  # also the judge of judged criteria, if a family has them (core/judged.py)
        configure_judge(cfg.judge_base_url, cfg.judge_model, Path(cfg.out) / "judge_cache" if cfg.out else None)
    require_judge(tasks)
    model, tokenizer = load_model(cfg.model, model, tokenizer, cfg.attn_implementation)
    opd = None
    if cfg.opd.enabled:  # Direct-OPD: the teacher pair, frozen, checked against the student's tokenizer
        from longhorizon.train.opd import PolicyShift

        o = cfg.opd
        opd = PolicyShift.load(o.pre, o.post, tokenizer, scale=o.scale, clip=o.clip, task_reward_weight=o.task_reward_weight)
    skills = None
    if cfg.seed_skills.enabled:  # SEED: the analyzer (this policy or a server), skills logged under OUT
        from longhorizon.train.seed import SkillAnalyzer, SkillDistillation

        k = cfg.seed_skills
        analyzer = SkillAnalyzer(tokenizer, base_url=k.analyzer_base_url, model=k.analyzer_model,
                                 max_new_tokens=k.max_new_tokens,
                                 cache_path=Path(cfg.out) / "skills.jsonl" if cfg.out else None)
        skills = SkillDistillation(analyzer, k.weight, k.clip, cfg.group_size)
    sampler = None
    if policy_factory is None and cfg.sampler == "vllm":  # served rollouts, weights synced each step
        from longhorizon.train.served_sampler import ServedSampler

        sampler = ServedSampler(cfg, tokenizer).start(model)
        callbacks = [sampler.callback(), *callbacks]
    rollout = EpisodeRollout({t.id: t for t in tasks}, cfg, tokenizer, policy_factory=policy_factory,
                             record_dir=cfg.out, curriculum=curriculum, sampler=sampler)
    dataset = Dataset.from_dict({"prompt": prompts})
    try:
        trainer = RLTrainer(
            model=model,
            reward_funcs=[episode_reward],
            args=grpo_args(cfg, progress=progress),
            train_dataset=dataset,
            processing_class=tokenizer,
            rollout_func=rollout,
            peft_config=lora_config(cfg.lora, model),
            callbacks=list(callbacks),
            is_correction=cfg.is_correction,
            is_cap=cfg.is_cap,
            opd=opd,
            skills=skills,
        )
    except BaseException:
        rollout.close()
        raise
    warm_up_from_the_first_step(trainer)
    return trainer, rollout


def run_rl(cfg: RLConfig, *, resume: bool = False, progress: bool = True, console: bool = True) -> dict[str, Any]:
    """Train, save the final policy to ``cfg.out`` and return a summary."""
    from longhorizon.core.progress import no_library_bars
    from longhorizon.train.logs import StepLogger, quiet_progress

    no_library_bars()
    out = prepare_out(cfg, "rl", resume=resume, logs=("log.jsonl", "rollouts.jsonl", "rollout_errors.jsonl"))
    logger = StepLogger(out / "log.jsonl", "rl", console=console, tensorboard_dir=out / "tensorboard")
    trainer, rollout = build_trainer(cfg, progress=progress, callbacks=[logger])
    if rollout.sampler is not None:
        rollout.sampler.resuming = resume
    quiet_progress(trainer)
    try:
        return train_and_save(trainer, out, cfg, "rl", resume=resume, loss=cfg.loss,
                              clip_range=list(cfg.clip_range()), group_size=cfg.group_size)
    finally:
        rollout.close()
