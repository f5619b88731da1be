"""Tasks as a Gymnasium environment.

observation = the chat messages so far (OpenAI format), action = one assistant message
(with or without tool calls), reward = the Grade's dense reward when the episode ends
(0 before). ``info`` carries the task id and tool schemas, and at the end the Grade and the
Trajectory. A malformed action never raises: like in ``play``, each bad call comes back as a
tool error in the next observation and the episode goes on.

One Task, or a pool to sample from: ``TaskEnv(split="train")`` draws a task per ``reset`` with
the env's seeded generator, and ``reset(options={"task_id": ID})`` plays that one instead.
It passes ``gymnasium.utils.env_checker.check_env``: seeded resets are reproducible (same
task, byte-identical World), every call returns fresh objects, ``action_space.sample()`` is a
harmless well-formed message, and ``close`` is idempotent.

MCP sessions are async and must live in one asyncio task, so the Episode runs in a private
event loop on a background thread; ``reset``/``step`` hand it work and wait.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from typing import Any

import gymnasium as gym

from longhorizon.core.errors import UsageError
from longhorizon.core.task import Task
from longhorizon.core.world import WorldCache
from longhorizon.env.episode import Episode, Limits, new_trajectory, step


class MessagesSpace(gym.Space):
    """A list of chat messages, each a dict with a role."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(isinstance(m, dict) and "role" in m for m in x)


class AssistantMessageSpace(gym.Space):
    """One assistant message: content and optional OpenAI-format tool_calls. ``step`` takes
    any value: what is not such a message is recorded and answered with a tool error.

    ``sample()`` is a well-formed message that changes nothing: a final answer, or a call to
    one of the current task's tools with an argument no tool takes (the app refuses it and
    says so), so random actions probe the loop without touching the World."""

    def __init__(self, seed: int | None = None):
        super().__init__(seed=seed)
        self.tool_names: list[str] = []

    def contains(self, x: Any) -> bool:
        return isinstance(x, dict) and isinstance(x.get("tool_calls", []), list)

    def sample(self, mask: Any = None, probability: Any = None) -> dict:
        n = int(self.np_random.integers(0, 1_000_000))
        if not self.tool_names or n % 2 == 0:
            return {"role": "assistant", "content": f"Done (sample {n})."}
        name = self.tool_names[n % len(self.tool_names)]
        return {"role": "assistant", "content": "", "tool_calls": [
            {"id": f"sample_{n}", "type": "function",
             "function": {"name": name, "arguments": f'{{"sampled_argument_{n}": true}}'}}]}


class TaskEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, task: Task | None = None, limits: Limits = Limits(), *, split: str = "train",
                 seeds: int | None = None, families: list[str] | None = None, pool: list[Task] | None = None):
        """``task``: always this one; else ``pool``, or the pool of ``split``'s instances
        (``seeds`` per family, only ``families``), sampled at each reset."""
        from longhorizon.tasks.registry import tasks_for

        if task is not None:
            self.pool = [task]
        else:
            self.pool = list(pool) if pool is not None else tasks_for(split, seeds, families)
        if not self.pool:
            raise UsageError(f"split {split} has no instances of the chosen families")
        self.task, self.limits = self.pool[0], limits
        self._by_id = {t.id: t for t in self.pool}
        self.observation_space = MessagesSpace()
        self.action_space = AssistantMessageSpace()
        self._closed = False
        self._cache = WorldCache()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._inbox: asyncio.Queue | None = None
        self._driver = None
        self.trajectory = None
        self.world = None

    # -- the driver: one asyncio task that owns the Episode's MCP sessions -----------------
    async def _drive(self, inbox: asyncio.Queue, ready: asyncio.Future) -> None:
        try:
            async with Episode(self.task, self.world, self.limits) as ep:
                ready.set_result(ep.tools)
                while (job := await inbox.get()) is not None:
                    fn, fut = job
                    try:
                        fut.set_result(await fn(ep))
                    except Exception as exc:
                        fut.set_exception(exc)
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)

    def _submit(self, fn):
        async def go():
            fut = self._loop.create_future()
            await self._inbox.put((fn, fut))
            return await fut
        return asyncio.run_coroutine_threadsafe(go(), self._loop).result()

    def _stop_driver(self) -> None:
        if self._driver is not None:
            asyncio.run_coroutine_threadsafe(self._inbox.put(None), self._loop).result()
            asyncio.run_coroutine_threadsafe(asyncio.wait_for(asyncio.shield(self._driver), 30), self._loop).result()
            self._driver = None

    # -- Gymnasium API ---------------------------------------------------------------------
    def _choose(self, options: dict | None) -> Task:
        options = dict(options or {})
        task_id = options.pop("task_id", None)
        if options:
            raise ValueError(f"unknown reset option(s) {sorted(options)}: only 'task_id' is taken")
        if task_id is not None:
            if task_id not in self._by_id:
                from longhorizon.tasks.registry import get_task

                self._by_id[task_id] = get_task(task_id)
            return self._by_id[task_id]
        if len(self.pool) == 1:
            return self.pool[0]
        return self.pool[int(self.np_random.integers(0, len(self.pool)))]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if self._closed:
            raise RuntimeError("the environment is closed")
        self.task = self._choose(options)
        self._stop_driver()
        if getattr(self, "world", None) is not None:  # the last episode's fork (and its mount)
            self._cache.release(self.world)
            self.world = None
        self.world, digest = self._cache.fork(self.task)

        async def start():
            self._inbox = asyncio.Queue()
            ready = self._loop.create_future()
            self._driver = asyncio.ensure_future(self._drive(self._inbox, ready))
            return await ready

        tools = asyncio.run_coroutine_threadsafe(start(), self._loop).result()
        self.trajectory = new_trajectory(self.task, {"policy": "gymnasium"}, digest, 0, self.limits)
        self.trajectory.tools = copy.deepcopy(tools)
        self._tools = tools
        self.action_space.tool_names = [t["function"]["name"] for t in tools]
        info = {"tools": copy.deepcopy(tools), "task_id": self.task.id, "world_hash": digest}
        return copy.deepcopy(self.trajectory.messages), info

    def step(self, action: dict):
        if self.trajectory is None or self.trajectory.grade is not None:
            raise RuntimeError("call reset() before step()")
        # No check against action_space: an action that is not a well-formed message is the
        # agent's mistake, recorded and answered like any malformed call (env/episode.step).
        traj = self.trajectory
        status = self._submit(lambda ep: step(ep, traj, action))
        truncated = status in ("max_tool_calls", "max_tokens") or (
            status is None and len(traj.turns) >= self.limits.max_turns)
        terminated = status == "completed"
        info: dict[str, Any] = {"tools": copy.deepcopy(self._tools), "task_id": self.task.id}
        reward = 0.0
        if terminated or truncated:
            traj.status = status or "max_turns"
            removed = self.world.drop_links_and_specials()  # as play() does: see World
            if removed:
                traj.provenance["removed_before_grading"] = removed
            traj.grade = self.task.grade(self.world, traj)
            reward = traj.grade.reward
            info.update(grade=traj.grade.to_dict(), trajectory=copy.deepcopy(traj))
            self._stop_driver()
        return copy.deepcopy(traj.messages), float(reward), terminated, truncated, info

    def close(self):
        """End the episode, remove its World, stop the event loop; calling it again is a no-op."""
        if self._closed:
            return
        self._closed = True
        try:
            self._stop_driver()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                self._loop.close()
            self._cache.close()  # removes every fork it made, the current World included
            self.world = None


def make_env(task_id: str | None = None, **kwargs) -> TaskEnv:
    """``gymnasium.make``-free entry point: ``make_env("downloads_cleanup-000001")``, or
    ``make_env(split="train", families=[...])`` for a pool sampled at each reset."""
    from longhorizon.tasks.registry import get_task

    return TaskEnv(get_task(task_id) if task_id else None, **kwargs)


gym.register(id="longhorizon/Task-v0", entry_point=make_env)
"""``gymnasium.make("longhorizon/Task-v0", task_id="downloads_cleanup-000001")`` (or
``split="train"``) after importing this module; Gymnasium's passive env checker stays on."""
