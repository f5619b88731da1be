"""Episode workers on Ray: the runner's episodes fanned over Ray actors.

    longhorizon run --policy oracle --ray --out runs/o            # a contained Ray on this machine
    longhorizon run --policy openai --base-url http://llm:8000/v1 --model M \\
        --ray head-node:6379 --workers 64 --concurrency 512 --out runs/m   # an existing cluster

``RayEpisodes`` is an episode player for ``play_run`` (rollout/runner.py). Each worker, an
``EpisodeWorker`` actor, holds its own World cache, opens each episode's MCP sessions itself
and plays against the policy it was given: one served elsewhere (any OpenAI-compatible
endpoint) or a deterministic one (oracle, null, scripted). It returns the graded Trajectory.

What the local runner guarantees holds unchanged, because it stays the runner's: this process
alone writes the run folder (resume, exactly-once, infra errors apart). Tasks travel as ids
and are generated again on the worker (a Task is deterministic in family and seed), and every
worker shows its suite and package versions before it plays: a worker that differs from the
driver is refused, so provenance reads the same as a local run's and, for a deterministic
policy, so does everything else but timings.

A worker that dies mid-episode (killed, out of memory, its node gone) surfaces as
``WorkerLost``: the runner records it and plays the episode again, and the pool puts a new
actor in the dead one's place. Any other failure inside a worker comes back as
``EpisodeFailed`` with the worker's own error text and traceback.

Containment, for a local cluster: RAY_AUTH_MODE=disabled (no auth token written under the
home folder), RAY_USAGE_STATS_ENABLED=0, no dashboard, loopback addresses only, and Ray's
session files in a temporary folder removed at shutdown. Joining an existing cluster (ADDRESS) leaves its settings as they
are; each of its nodes needs this longhorizon installed (``pip install 'longhorizon[ray]'``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import tempfile
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from longhorizon import __version__
from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.task import SUITE_VERSION, Task
from longhorizon.core.trajectory import Trajectory
from longhorizon.env.episode import Limits
from longhorizon.rollout.runner import EpisodeFailed, LocalEpisodes, WorkerLost, describe_failure, episode_failure

log = logging.getLogger("longhorizon.rollout")

RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
"""Set before a local cluster starts (its processes inherit them). The last makes Ray's node
address the loopback one, as Ray does on a laptop, instead of the host's network address."""

READY_TIMEOUT_S = 300.0
"""How long the pool waits for its first workers to come up (scheduling, imports)."""


def _ray():
    try:
        import ray
    except ImportError:
        raise UsageError("Ray episode workers need the ray extra: pip install 'longhorizon[ray]'") from None
    return ray


def start_ray(address: str | None = "local", *, num_cpus: int | None = None) -> Callable[[], None]:
    """Start a contained local Ray (``address`` None or "local") or join the cluster at
    ``address``; returns the function that shuts down what was started. A Ray already
    initialised in this process is used as it is, and left running."""
    local = address in (None, "", "local")
    if local:
        os.environ.update(RAY_ENV)
    ray = _ray()
    if ray.is_initialized():
        return lambda: None
    if local:
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False  # read from the environment when ray was imported
        tmp = tempfile.mkdtemp(prefix="lh-ray-")  # short: Ray's socket paths must fit 107 bytes
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, _temp_dir=tmp, log_to_driver=False,
                     logging_level=logging.WARNING)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

        def stop() -> None:
            ray.shutdown()
            shutil.rmtree(tmp, ignore_errors=True)

        return stop
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise InfraError(f"cannot join the Ray cluster at {address}: {exc}") from exc
    return ray.shutdown


def worker_identity() -> dict[str, Any]:
    """What a worker is, as the driver checks it: versions (must equal the driver's), host, pid."""
    return {"suite_version": SUITE_VERSION, "longhorizon_version": __version__,
            "host": socket.gethostname(), "pid": os.getpid()}


class EpisodeWorker:
    """The Ray actor: one World cache and the policy, playing episodes by task id."""

    def __init__(self, policy, limits: dict[str, Any]):
        self.policy = policy
        self.episodes = LocalEpisodes(policy, Limits(**limits))

    def identity(self) -> dict[str, Any]:
        return worker_identity()

    async def play(self, task_id: str, sample: int) -> Trajectory | dict[str, str]:
        """The graded Trajectory, or ``{"error", "traceback"}`` when the episode failed here."""
        from longhorizon.tasks.registry import get_task

        try:
            return await self.episodes.play(get_task(task_id), sample)
        except BaseException as exc:
            if not episode_failure(exc):
                raise
            return {"error": describe_failure(exc), "traceback": "".join(traceback.format_exception(exc))}

    async def aclose(self) -> None:
        await self.episodes.aclose()
        if hasattr(self.policy, "aclose"):
            await self.policy.aclose()


@dataclass
class _Slot:
    name: str
    actor: Any
    load: int = 0
    played: int = 0
    """Episodes this slot's workers returned (played or failed there), for logs and tests."""


class RayEpisodes:
    """An episode player over ``workers`` Ray actors (default: one per CPU of the cluster).

    Each episode goes to the live worker with the fewest episodes in flight. Started on the
    first episode; ``aclose()`` ends the workers and the Ray it started.
    """

    def __init__(self, policy, limits: Limits, *, address: str | None = "local", workers: int | None = None,
                 num_cpus: int | None = None, max_replacements: int | None = None):
        if workers is not None and workers < 1:
            raise UsageError("--workers must be at least 1")
        self.policy, self.limits = policy, limits
        self.address, self.workers, self.num_cpus = address, workers, num_cpus
        self.max_replacements = max_replacements
        self.slots: list[_Slot] = []
        self.identities: list[dict[str, Any]] = []
        """What each first worker reported when it came up (host, pid, versions)."""
        self.replaced = 0
        self._stop: Callable[[], None] | None = None
        self._start_lock: tuple[Any, asyncio.Lock | None] = (None, None)
        self._actor_cls = None
        self._made = 0

    # -- the pool ----------------------------------------------------------------------------
    async def _started(self) -> None:
        loop = asyncio.get_running_loop()
        if self._start_lock[0] is not loop:  # a pool may serve several event loops in turn (RL rollouts)
            self._start_lock = (loop, asyncio.Lock())
        async with self._start_lock[1]:
            if self._stop is not None:
                return
            ray = _ray()
            self._stop = start_ray(self.address, num_cpus=self.num_cpus)  # on the main thread: Ray sets signal handlers
            cpus = float(ray.cluster_resources().get("CPU", 1.0))
            n = self.workers or max(1, int(cpus))
            self._cpus = min(1.0, cpus / n) if cpus else 0.0
            self._actor_cls = ray.remote(EpisodeWorker)
            if self.max_replacements is None:
                self.max_replacements = 3 * n + 3
            self.slots = [_Slot(f"worker-{i}", None) for i in range(n)]
            for s in self.slots:
                s.actor = self._new_actor()
            try:
                self.identities = await asyncio.wait_for(
                    asyncio.gather(*(s.actor.identity.remote() for s in self.slots)), READY_TIMEOUT_S)
            except Exception as exc:
                raise InfraError(f"Ray episode workers did not come up: {describe_failure(exc)}") from exc
            mine = worker_identity()
            for ident in self.identities:
                diff = [k for k in ("suite_version", "longhorizon_version") if ident[k] != mine[k]]
                if diff:
                    raise InfraError(f"the Ray worker on {ident['host']} runs {', '.join(f'{k} {ident[k]}' for k in diff)}"
                                     f"; this driver has {', '.join(f'{k} {mine[k]}' for k in diff)}: install the "
                                     "same longhorizon on every node")
            log.info("Ray episode workers up: %d (hosts %s)", n, sorted({i["host"] for i in self.identities}))

    def _new_actor(self):
        self._made += 1
        return self._actor_cls.options(num_cpus=self._cpus, max_restarts=0, max_task_retries=0,
                                       name=None).remote(self.policy, self.limits.to_dict())

    def _pick(self) -> _Slot:
        live = [s for s in self.slots if s.actor is not None]
        if not live:
            raise InfraError(f"every Ray episode worker died ({self.replaced} replaced, the limit is "
                             f"{self.max_replacements}); see the infra errors for why")
        return min(live, key=lambda s: s.load)

    def _replace(self, slot: _Slot, dead) -> None:
        """Put a new actor where ``dead`` was (once, however many episodes saw it die)."""
        if slot.actor is not dead:
            return
        try:
            _ray().kill(dead, no_restart=True)
        except Exception:
            pass
        if self.replaced >= self.max_replacements:
            slot.actor = None
            log.error("Ray worker %s died; no more replacements (%d made)", slot.name, self.replaced)
            return
        self.replaced += 1
        slot.actor = self._new_actor()
        log.warning("Ray worker %s died; replaced (%d so far)", slot.name, self.replaced)

    # -- EpisodePlayer -----------------------------------------------------------------------
    async def play(self, task: Task, sample: int) -> Trajectory:
        await self._started()
        ray = _ray()
        slot = self._pick()
        actor = slot.actor
        slot.load += 1
        try:
            out = await actor.play.remote(task.id, sample)
        except ray.exceptions.RayTaskError as exc:  # raised past the worker's own catch (e.g. Ctrl-C there)
            raise EpisodeFailed(describe_failure(exc.cause or exc), str(exc)) from None
        except ray.exceptions.RayError as exc:  # the actor (its process, its node) is gone
            self._replace(slot, actor)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise WorkerLost(f"Ray worker {slot.name} died while playing {task.id}#{sample} "
                             f"({type(exc).__name__}: {first})") from None
        finally:
            slot.load -= 1
        slot.played += 1
        if isinstance(out, dict):
            raise EpisodeFailed(out["error"], out["traceback"])
        return out

    async def aclose(self) -> None:
        if self._stop is None:
            return
        ray = _ray()
        live = [s.actor for s in self.slots if s.actor is not None]
        if live:
            try:
                await asyncio.wait_for(asyncio.gather(*(a.aclose.remote() for a in live), return_exceptions=True), 60)
            except TimeoutError:
                pass
        for a in live:
            try:
                ray.kill(a, no_restart=True)
            except Exception:
                pass
        for s in self.slots:
            s.actor = None
        stop, self._stop = self._stop, None
        stop()
