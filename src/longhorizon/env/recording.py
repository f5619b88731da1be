"""`serve-app --record FILE`: every call an outside MCP client makes, kept as a Trajectory.

An outside agent's harness rarely writes a log that ``grade --trajectory`` can read; the
servers it talks to see every call anyway. With ``--record FILE`` each served call (its
``APP__TOOL`` name, arguments, result text and error flag, in the order served) is added to
FILE, a longhorizon Trajectory (core/trajectory.py) of the World's task: one assistant turn per
call. The servers of one World (``world build``'s mcp.json starts one per app) may share FILE:
each adds its calls under a lock on FILE's folder and rewrites FILE whole (never half written).
FILE is created, empty of calls, when the server starts, so an agent that called nothing is
graded too. An existing FILE of another task is refused; one of the same task is added to
(give a new FILE per attempt).
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.core.task import SUITE_VERSION
from longhorizon.core.trajectory import ToolCallRecord, Trajectory, json_safe
from longhorizon.tasks.registry import get_task

TASK_CARD = "task.json"  # env/handoff.py writes it; read here without importing the hand-off


class CallRecorder:
    """Adds each served call of app ``app`` to the Trajectory at ``path``."""

    def __init__(self, path: Path | str, world_dir: Path | str, app: str):
        self.path, self.app = Path(path), app
        card = Path(world_dir) / TASK_CARD
        try:
            self.task_id = json.loads(card.read_text(encoding="utf-8"))["task_id"]
        except (OSError, ValueError, KeyError, TypeError):
            raise UsageError(f"--record needs a World built by `longhorizon world build` ({card} names its task)") \
                from None
        if self.path.is_dir():
            raise UsageError(f"--record {self.path} is a folder; give a file")
        with self._locked():
            recorded = self._read()
            if recorded.task_id != self.task_id:
                raise UsageError(f"--record {self.path} records task {recorded.task_id}, not {self.task_id}: "
                                 "give a new file")
            self._write(recorded)

    def add(self, tool: str, arguments: Any, text: str, is_error: bool, duration_ms: float) -> None:
        with self._locked():
            traj = self._read()
            n = len(traj.tool_calls)
            call_id, name = f"call_{n + 1}", f"{self.app}__{tool}"
            args = json_safe(arguments)
            traj.messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
            traj.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
            traj.tool_calls.append(ToolCallRecord(turn=n, id=call_id, name=name, arguments=args, result=text,
                                                  is_error=is_error, duration_ms=duration_ms))
            self._write(traj)

    @contextmanager
    def _locked(self):
        folder = self.path.parent if str(self.path.parent) else Path(".")
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise UsageError(f"--record {self.path}: cannot use folder {folder} ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self) -> Trajectory:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return self._empty()
        except (OSError, ValueError) as exc:
            raise UsageError(f"--record {self.path} is not a recording ({exc})") from None
        try:
            return Trajectory.from_dict({**data, "grade": None})
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--record {self.path} is not a recording ({exc})") from None

    def _empty(self) -> Trajectory:
        task = get_task(self.task_id)  # its family module only: no World is built
        return Trajectory(episode_id=f"{task.id}#recorded", task_id=task.id, family=task.family,
                          category=task.category, split=task.split, seed=task.seed, sample=0,
                          provenance={"suite_version": SUITE_VERSION, "task_id": task.id,
                                      "policy": {"policy": "outside", "source": "serve-app --record"}},
                          messages=[{"role": "user", "content": task.instruction}])

    def _write(self, traj: Trajectory) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(traj.to_dict(), ensure_ascii=False) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise UsageError(f"--record {self.path}: cannot write it ({exc.strerror or exc})") from None
