"""Each Task as a Gymnasium environment.

observation = the chat messages so far (OpenAI format), action = one assistant message
(with or without tool calls), reward = the Grade's dense reward when the episode ends
(0 before). ``info`` carries the tool schemas, and at the end the Grade and the Trajectory.
A malformed action never raises: like in ``play``, each bad call comes back as a tool error
in the next observation and the episode goes on.

MCP sessions are async and must live in one asyncio task, so the Episode runs in a private
event loop on a background thread; ``reset``/``step`` hand it work and wait.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import gymnasium as gym

from longhorizon.core.task import Task
from longhorizon.core.world import WorldCache
from longhorizon.env.episode import Episode, Limits, new_trajectory, step


class MessagesSpace(gym.Space):
    """A list of chat messages, each a dict with a role."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(isinstance(m, dict) and "role" in m for m in x)


class AssistantMessageSpace(gym.Space):
    """One assistant message: content and optional OpenAI-format tool_calls. ``step`` takes
    any value: what is not such a message is recorded and answered with a tool error."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, dict) and isinstance(x.get("tool_calls", []), list)


class TaskEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, task: Task, limits: Limits = Limits()):
        self.task, self.limits = task, limits
        self.observation_space = MessagesSpace()
        self.action_space = AssistantMessageSpace()
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
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._stop_driver()
        if getattr(self, "world", None) is not None:  # the last episode's fork (and its mount)
            self._cache.release(self.world)
        self.world, digest = self._cache.fork(self.task)

        async def start():
            self._inbox = asyncio.Queue()
            ready = self._loop.create_future()
            self._driver = asyncio.ensure_future(self._drive(self._inbox, ready))
            return await ready

        tools = asyncio.run_coroutine_threadsafe(start(), self._loop).result()
        self.trajectory = new_trajectory(self.task, {"policy": "gymnasium"}, digest, 0, self.limits)
        self._tools = tools
        return list(self.trajectory.messages), {"tools": tools, "task_id": self.task.id, "world_hash": digest}

    def step(self, action: dict):
        if self.trajectory is None or self.trajectory.grade is not None:
            raise RuntimeError("call reset() before step()")
        # No check against action_space: an action that is not a well-formed message is the
        # agent's mistake, recorded and answered like any malformed call (env/episode.step).
        traj = self.trajectory
        status = self._submit(lambda ep: step(ep, traj, action))
        truncated = status == "max_tool_calls" or (status is None and len(traj.turns) >= self.limits.max_turns)
        terminated = status == "completed"
        info: dict[str, Any] = {"tools": self._tools}
        reward = 0.0
        if terminated or truncated:
            traj.status = status or "max_turns"
            removed = self.world.drop_links_and_specials()  # as play() does: see World
            if removed:
                traj.provenance["removed_before_grading"] = removed
            traj.grade = self.task.grade(self.world, traj)
            reward = traj.grade.reward
            info.update(grade=traj.grade.to_dict(), trajectory=traj)
            self._stop_driver()
        return list(traj.messages), reward, terminated, truncated, info

    def close(self):
        try:
            self._stop_driver()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._cache.close()


def make_env(task_id: str, **kwargs) -> TaskEnv:
    """``gymnasium.make``-free entry point: ``make_env("downloads_cleanup-000001")``."""
    from longhorizon.core.registry import get_task

    return TaskEnv(get_task(task_id), **kwargs)


gym.register(id="longhorizon/Task-v0", entry_point=make_env, disable_env_checker=True)
"""``gymnasium.make("longhorizon/Task-v0", task_id="downloads_cleanup-000001")`` after importing this module."""
