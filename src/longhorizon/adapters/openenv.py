"""The suite as an OpenEnv environment (``openenv-core``'s server interface).

    python -m longhorizon.adapters.openenv --split train --port 8000     # the server
    LonghorizonEnv(base_url="http://127.0.0.1:8000")                      # any OpenEnv client

Server: ``LonghorizonEnvironment`` implements OpenEnv's ``Environment`` (``reset``, ``step``,
``state``) over our Gymnasium env; ``build_app`` serves it with ``create_fastapi_app`` (HTTP and
the ``/ws`` WebSocket, one environment instance, hence one forked World, per session). Each
episode is one Task: ``reset(task_id=ID)`` picks it, else one is drawn from the split.

Action = one assistant message (``content`` and OpenAI-format ``tool_calls``; tool names are
``APP__TOOL``). Observation = the messages the step added (at reset the system prompt and the
instruction; after a step the assistant message as recorded and each tool result), the tool
schemas (at reset), and at the end ``reward`` = the Grade's dense reward, ``done``, and the
Grade itself. Only new messages travel, so a long episode does not resend its history.

Needs the ``openenv`` extra; openenv-core 0.3.0 itself requires gradio and fastmcp>=3 (whose mcp
pin conflicts with ours) for its web UI and MCP environments, which this adapter does not use:
install it with ``pip install --no-deps openenv-core==0.3.0`` (``make venv-openenv`` does).
"""

from __future__ import annotations

import argparse
import copy
from typing import Any, Optional

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server import Environment, create_fastapi_app
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

from longhorizon import __version__
from longhorizon.core.task import Task
from longhorizon.env.episode import Limits
from longhorizon.env.gym_env import TaskEnv


class LonghorizonAction(Action):
    """One assistant message: what it says and the tools it calls."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = copy.deepcopy(self.tool_calls)
        return msg


class LonghorizonObservation(Observation):
    """The messages this step added; tools at reset; the Grade at the end."""

    task_id: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    grade: Optional[dict[str, Any]] = None
    status: Optional[str] = None


class LonghorizonState(State):
    task_id: Optional[str] = None
    tool_calls: int = 0
    status: Optional[str] = None
    """How the episode ended (completed, max_turns, ...); None while it runs."""


class LonghorizonEnvironment(Environment[LonghorizonAction, LonghorizonObservation, LonghorizonState]):
    """OpenEnv's server-side interface over ``TaskEnv``; one instance per session."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # every instance forks its own World

    def __init__(self, split: str = "train", seeds: int | None = None, families: list[str] | None = None,
                 limits: Limits = Limits(), pool: list[Task] | None = None):
        super().__init__()
        self._env = TaskEnv(split=split, seeds=seeds, families=families, limits=limits, pool=pool)
        self._seen = 0
        self._state = LonghorizonState()

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, **kwargs: Any) -> LonghorizonObservation:
        messages, info = self._env.reset(seed=seed, options={"task_id": task_id} if task_id else None)
        self._seen = len(messages)
        self._state = LonghorizonState(episode_id=episode_id or f"{info['task_id']}#0", step_count=0,
                                       task_id=info["task_id"])
        return LonghorizonObservation(task_id=info["task_id"], messages=messages, tools=info["tools"],
                                      done=False, reward=0.0)

    def step(self, action: LonghorizonAction, timeout_s: Optional[float] = None,
             **kwargs: Any) -> LonghorizonObservation:
        messages, reward, terminated, truncated, info = self._env.step(action.message())
        new, self._seen = messages[self._seen:], len(messages)
        done = bool(terminated or truncated)
        traj = self._env.trajectory
        self._state.step_count += 1
        self._state.tool_calls = len(traj.tool_calls)
        self._state.status = traj.status if done else None
        return LonghorizonObservation(task_id=info["task_id"], messages=new, done=done, reward=float(reward),
                                      grade=info.get("grade"), status=self._state.status)

    @property
    def state(self) -> LonghorizonState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="longhorizon", version=__version__,
                                   description="Long-horizon office tasks over real MCP apps, graded by code")

    def close(self) -> None:
        self._env.close()


def build_app(split: str = "train", seeds: int | None = None, families: list[str] | None = None,
              limits: Limits = Limits(), max_sessions: int = 8):
    """The FastAPI app (OpenEnv's HTTP + WebSocket server) for ``split``'s tasks (generated
    once, shared by every session's environment)."""
    from longhorizon.tasks.registry import tasks_for

    pool = tasks_for(split, seeds, families)
    return create_fastapi_app(lambda: LonghorizonEnvironment(limits=limits, pool=pool),
                              LonghorizonAction, LonghorizonObservation, max_concurrent_envs=max_sessions)


class LonghorizonEnv(EnvClient[LonghorizonAction, LonghorizonObservation, LonghorizonState]):
    """An OpenEnv client for the server above (WebSocket session; ``.sync()`` for blocking use)."""

    def _step_payload(self, action: LonghorizonAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[LonghorizonObservation]:
        obs = LonghorizonObservation(**payload.get("observation", {}), reward=payload.get("reward"),
                                     done=bool(payload.get("done", False)))
        return StepResult(observation=obs, reward=payload.get("reward"), done=obs.done)

    def _parse_state(self, payload: dict[str, Any]) -> LonghorizonState:
        return LonghorizonState(**payload)


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    p = argparse.ArgumentParser(prog="python -m longhorizon.adapters.openenv",
                                description="Serve the suite as an OpenEnv environment (HTTP + /ws).")
    p.add_argument("--split", default="train")
    p.add_argument("--seeds", type=int)
    p.add_argument("--family", action="append")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-sessions", type=int, default=8)
    a = p.parse_args(argv)
    uvicorn.run(build_app(a.split, a.seeds, a.family, max_sessions=a.max_sessions), host=a.host, port=a.port,
                log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
