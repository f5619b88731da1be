"""RL rollouts sampled by a vLLM server, with the trainer's weights pushed to it after every step.

``rl.build_trainer`` uses a ``ServedSampler`` when ``rl.sampler`` is ``vllm``; the in-process
``LocalModelPolicy`` stays the default (and the fallback, and what the fast tests use):

* **The server starts once per run.** With no ``sampler_url``, ``start`` writes the model being
  trained into a servable folder (its config untied, its tokenizer and chat template, its current
  weights; ``serve.weight_sync.servable_folder``) and starts ``VLLMServer(weight_sync=True)`` on it,
  in ``sampler_dtype``, with ``max_model_len`` = ``max_context``. With ``sampler_url`` it uses a
  server already running (``longhorizon serve --model M --weight-sync``) on this machine (the
  server reads the weights folder from the shared file system).
* **Rollouts are token in / token out**: the policy is ``ServedTokensPolicy`` over that server
  (the exact prompt ids of each turn go out, the sampled ids and log-probs come back).
* **After every optimizer step** (a TrainerCallback's ``on_step_end``; the last step needs none)
  the trainer's weights are written to the weights folder (LoRA merged, untied, in the server's
  dtype) and the server reloads them (``serve.weight_sync.push_weights``) before the next rollout
  is sampled. The seconds each sync took are logged as ``sampler/sync_s`` and kept in
  ``sync_seconds``; each sync also moves the sampling seed on, so a task that comes back is
  not a replay of its earlier draws.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from longhorizon.core.errors import UsageError
from longhorizon.train.config import RLConfig

log = logging.getLogger("longhorizon.train")

GPU_MEMORY_SHARE = 0.3
"""On a CUDA machine, the share of the GPU's memory the server takes (weights + KV cache); the
rest is the trainer's. Not tried on a GPU yet (none was lent to this work)."""

SCRATCH_PREFIX = "longhorizon-sampler-"
OWNER_FILE = "owner"
"""In each scratch folder: the pid and start time of the run that made it (``sweep_stale_scratch``)."""


def _started(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22): with the pid, a
    name no later process can take. None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def sweep_stale_scratch(parent: Path) -> list[Path]:
    """Remove the scratch folders under ``parent`` whose run is gone. A run killed outright (the
    OOM killer, SIGKILL) cannot clean up, and in /dev/shm its 1-2 weight copies stay in memory
    until reboot; the next run sweeps them. Folders without an owner file are left alone."""
    removed = []
    for d in parent.glob(SCRATCH_PREFIX + "*"):
        try:
            pid, started = (d / OWNER_FILE).read_text().split()
        except (OSError, ValueError):
            continue
        if _started(int(pid)) != started:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def scratch_dir(needed_bytes: int = 0) -> Path:
    """Where weights are written for the server to read: memory (/dev/shm) when it has room
    (containers often give it 64 MB), else the temporary folder. Stale folders of runs that died
    are swept first, and this one is marked with its owner."""
    shm = Path("/dev/shm")
    for parent in (shm, Path(tempfile.gettempdir())):
        if parent.is_dir():
            for d in sweep_stale_scratch(parent):
                log.warning("removed %s, left behind by an RL run that no longer runs", d)
    roomy = shm.is_dir() and shutil.disk_usage(shm).free > needed_bytes + (1 << 28)
    work = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=shm if roomy else None))
    (work / OWNER_FILE).write_text(f"{os.getpid()} {_started(os.getpid()) or 0}\n")
    return work


class ServedSampler:
    """The rollout policy of an RL run served by vLLM, and the weight sync that keeps it current."""

    def __init__(self, cfg: RLConfig, tokenizer, *, log_path: str | Path | None = None):
        if cfg.sampler != "vllm":
            raise UsageError(f"ServedSampler serves rl.sampler vllm, not {cfg.sampler!r}")
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.log_path = Path(log_path) if log_path else (Path(cfg.out) / "vllm.log" if cfg.out else None)
        self.server = None
        self.base_url = cfg.sampler_url
        self.model_name: str | None = None
        self.work: Path | None = None
        """The servable folder (``model``) and the weights pushed after each step (``weights``)."""
        from longhorizon.serve.vllm import auto_dtype

        self.dtype = auto_dtype(cfg.sampler_dtype)
        """The served weights' dtype (``rl.sampler_dtype``, ``auto`` resolved for this machine)."""
        self.max_context = cfg.max_context or 8192
        """The server's context (its max_model_len), which each turn's budget respects."""
        self._policy = None
        self.resuming = False
        """Set by ``run_rl`` when the run resumes from a checkpoint: the weights are pushed once more
        when training begins (the trainer loads the checkpoint's after the server started)."""
        self.syncs = 0
        self.sync_seconds: list[float] = []
        """Seconds of each weight sync (writing the weights and the server's reload), in order."""

    # -- life cycle ------------------------------------------------------------------------------
    def start(self, model) -> "ServedSampler":
        """Start the server on ``model``'s current weights (or attach to ``sampler_url``)."""
        from longhorizon.policies.server_check import model_card
        from longhorizon.core.aio import run_sync

        c = self.cfg
        size = 2 if self.dtype in ("bfloat16", "float16") else 4
        self.work = scratch_dir(2 * size * sum(p.numel() for p in model.parameters()))
        try:
            if self.base_url:
                self.model_name, card = run_sync(model_card(self.base_url))
                if isinstance(card.get("max_model_len"), int):
                    self.max_context = min(self.max_context, card["max_model_len"])
                self.sync(model)  # the server may hold other weights than the ones this run starts from
            else:
                from longhorizon.serve.vllm import VLLMServer, kv_cache_gib_for
                from longhorizon.serve.weight_sync import servable_folder

                folder = servable_folder(model, self.tokenizer, self.work / "model", self.dtype)
                kv = kv_cache_gib_for(folder, self.dtype, c.concurrency, self.max_context)  # no preemption
                self.server = VLLMServer(str(folder), dtype=self.dtype, max_model_len=self.max_context,
                                         kv_cache_gib=kv, weight_sync=True, enforce_eager=c.sampler_eager,
                                         log_path=self.log_path)
                if self.server.cuda:  # the trainer shares the GPU: vLLM takes 90% of it by default
                    self.server.extra_args += ["--gpu-memory-utilization", str(GPU_MEMORY_SHARE)]
                self.server.start()
                self.base_url, self.model_name = self.server.base_url, self.server.model_name
        except BaseException:
            self.close()
            raise
        log.info("rollouts sampled by the vLLM server at %s (%s)", self.base_url, self.model_name)
        return self

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)

    # -- what the RL loop calls ------------------------------------------------------------------
    def policy(self, model=None):
        """The rollout policy (one for the run; ``model`` is the trainer's, whose weights the server holds)."""
        from longhorizon.policies.served_tokens import ServedTokensPolicy

        if self._policy is None:
            c = self.cfg
            self._policy = ServedTokensPolicy(self.base_url, self.model_name, self.tokenizer,
                                              temperature=c.temperature, top_p=c.top_p,
                                              max_new_tokens=c.max_new_tokens, seed=c.seed + self.syncs,
                                              max_context=self.max_context)
        return self._policy

    def sync(self, model) -> float:
        """Write ``model``'s weights and make the server load them; the seconds it took."""
        import time

        from longhorizon.serve.weight_sync import push_weights, write_weights

        t0 = time.perf_counter()
        write_weights(getattr(model, "module", model), self.work / "weights", self.dtype)
        push_weights(self.base_url, self.work / "weights")
        seconds = time.perf_counter() - t0
        self.syncs += 1
        self.sync_seconds.append(seconds)
        if self._policy is not None:
            self._policy.seed = self.cfg.seed + self.syncs
        return seconds

    def callback(self):
        """A TrainerCallback that syncs after every optimizer step but the last, and logs how long it took."""
        from transformers import TrainerCallback

        sampler = self

        class SyncWeights(TrainerCallback):
            unlogged = None

            def on_train_begin(self, args, state, control, model=None, **kw):
                if sampler.resuming:  # the server holds the weights the run was built on, not the checkpoint's
                    self.unlogged = sampler.sync(model)

            def on_step_end(self, args, state, control, model=None, **kw):
                if state.global_step < state.max_steps:
                    self.unlogged = sampler.sync(model)

            def on_log(self, args, state, control, logs=None, **kw):
                if logs is not None and self.unlogged is not None:
                    logs["sampler/sync_s"], self.unlogged = self.unlogged, None

        return SyncWeights()
