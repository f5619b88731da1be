"""A World handed to an outside agent, and graded when it comes back.

``world build`` writes, next to the World's ``workspace/`` and ``state/``:

    instruction.md   the task's instruction, what the agent is asked to do
    mcp.json         an MCP client config (the ``mcpServers`` shape Claude Desktop, Claude Code,
                     Cursor, VS Code and the MCP SDKs read): one stdio server per app of the task,
                     each ``longhorizon serve-app APP --world DIR`` over this World
    task.json        which task this World is (id, apps, the World's hash as built)

Any agent in any harness can then play the World through those servers; ``grade`` judges the
World it leaves with the task's own criteria. Process criteria judge how the agent worked
(which tools it called, what it read): they need the agent's record, given as ``--trajectory``
in one of these forms (``load_trajectory``):

    a longhorizon Trajectory      one JSON object (a line of a run's trajectories.jsonl)
    OpenAI chat messages          a JSON list of messages, or an object with "messages": assistant
                                  ``tool_calls`` and the ``tool`` messages that answer them

``world build --record FILE`` writes an mcp.json whose servers keep every call they serve in FILE
(a Trajectory: env/recording.py), so any client's work can be graded with ``--trajectory FILE``.

Tool names may be ``APP__TOOL`` (the episode's own names), ``mcp__APP__TOOL`` (Claude Code's) or
``APP.TOOL`` / ``APP/TOOL``. Without a trajectory the process criteria are reported as not
checked, and the reward shown covers the final-state criteria only.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from longhorizon import __version__
from longhorizon.core.errors import UsageError
from longhorizon.core.grade import CriterionResult, Grade
from longhorizon.core.task import SUITE_VERSION, Task
from longhorizon.core.trajectory import ToolCallRecord, Trajectory
from longhorizon.core.world import World

INSTRUCTION = "instruction.md"
MCP_CONFIG = "mcp.json"
TASK_CARD = "task.json"
SEP = "__"


def mcp_config(task: Task, world_dir: Path | str, record: Path | str | None = None) -> dict[str, Any]:
    """The ``mcpServers`` config: one stdio entry per app, serving the World at ``world_dir``
    with the Python (and, when set, the PYTHONPATH) that wrote it; with ``record``, every server
    keeps the calls it serves in that one file (``serve-app --record``, env/recording.py)."""
    world = str(Path(world_dir).resolve())
    keep = ["--record", str(Path(record).resolve())] if record else []
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    servers = {}
    for app in task.apps:
        offered = task.offered(app)
        only = ["--tools", ",".join(sorted(offered))] if offered is not None else []
        entry: dict[str, Any] = {"type": "stdio", "command": sys.executable,
                                 "args": ["-m", "longhorizon.cli", "serve-app", app, "--world", world, *keep, *only]}
        if env:
            entry["env"] = dict(env)
        servers[app] = entry
    return {"mcpServers": servers}


def write_handoff(task: Task, world_dir: Path | str, world_hash: str,
                  record: Path | str | None = None) -> dict[str, str]:
    """Write instruction.md, mcp.json and task.json into ``world_dir``; returns their paths."""
    root = Path(world_dir)
    (root / INSTRUCTION).write_text(task.instruction.rstrip() + "\n", encoding="utf-8")
    (root / MCP_CONFIG).write_text(json.dumps(mcp_config(task, root, record), indent=2) + "\n", encoding="utf-8")
    card = {"task_id": task.id, "apps": list(task.apps), "tools": list(task.tools) if task.tools else None,
            "world_hash": world_hash,
            "suite_version": SUITE_VERSION, "longhorizon_version": __version__,
            "tool_names": "each server's own tool names; a trajectory may call them APP__TOOL"}
    (root / TASK_CARD).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    return {"instruction": str(root / INSTRUCTION), "mcp_config": str(root / MCP_CONFIG),
            "task_card": str(root / TASK_CARD)}


MAX_STATE_ENTRIES = 10_000
"""A World's ``state/`` holds one database per app; a folder with more entries is not one."""


def _kind(mode: int) -> str | None:
    """What a non-regular, non-folder entry is (None for a regular file or a folder)."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return ("a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a device")


def check_world_folder(root: Path) -> None:
    """Refuse, with one line, a folder that graders could not read safely: ``workspace`` or
    ``state`` that is a link (graders would follow it to wherever it points, and the links
    inside a linked workspace would not be dropped), and anything but regular files and
    folders in ``state/`` or at ``task.json`` (a FIFO there blocks the open forever, a device
    or a link reads the host). Only ``lstat`` is used: nothing here opens or follows an entry.
    Links and special files inside ``workspace/`` are the agent's doing and are dropped
    before grading instead (``World.drop_links_and_specials``)."""
    for name in ("workspace", "state"):
        try:
            mode = os.lstat(root / name).st_mode
        except OSError:
            raise UsageError(f"{root} is not a World folder (no {name}/; see `longhorizon world build`)") from None
        if stat.S_ISLNK(mode):
            raise UsageError(f"{root}: {name} is a symbolic link; a World's {name}/ must be a real folder")
        if not stat.S_ISDIR(mode):
            raise UsageError(f"{root}: {name} is {_kind(mode) or 'a file'}, not a folder")
    try:
        mode = os.lstat(root / TASK_CARD).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"{root}: {TASK_CARD} is {_kind(mode) or 'a folder'}, not a regular file")
    seen = 0
    stack = [root / "state"]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            raise UsageError(f"{root}: cannot read {folder.relative_to(root)}/ ({exc.strerror})") from None
        for e in entries:
            seen += 1
            if seen > MAX_STATE_ENTRIES:
                raise UsageError(f"{root}: state/ holds more than {MAX_STATE_ENTRIES} entries; not a World's state")
            mode = e.stat(follow_symlinks=False).st_mode
            rel = Path(e.path).relative_to(root).as_posix()
            if stat.S_ISDIR(mode):
                stack.append(Path(e.path))
            elif kind := _kind(mode):
                raise UsageError(f"{root}: {rel} is {kind}; a World's state holds only regular files")


def open_world(task: Task, world_dir: Path | str) -> World:
    """The World at ``world_dir``, checked to be one (and, when it says, this task's), and
    safe to grade (``check_world_folder``)."""
    root = Path(world_dir)
    if not root.is_dir():
        raise UsageError(f"--world {root} is not a folder" if root.exists() else f"--world {root}: no such folder")
    check_world_folder(root)
    card = root / TASK_CARD
    if card.is_file():
        try:
            built = json.loads(card.read_text(encoding="utf-8")).get("task_id")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            built = None
        if built and built != task.id:
            raise UsageError(f"{root} is the World of task {built}, not {task.id}")
    return World(root)


def _tool_name(name: Any) -> str:
    if not isinstance(name, str):
        return ""
    if name.startswith("mcp" + SEP):
        name = name[len("mcp" + SEP):]
    if SEP not in name:
        for mark in (".", "/"):
            if mark in name:
                app, _, tool = name.partition(mark)
                return f"{app}{SEP}{tool}"
    return name


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
    return raw if raw is not None else {}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ("" if content is None else json.dumps(content))


def from_messages(task: Task, messages: list[dict]) -> Trajectory:
    """A Trajectory of ``task`` from OpenAI chat messages: each assistant tool call paired
    with the tool message that answers it (a call never answered counts with an empty result)."""
    traj = _empty(task, {"policy": "outside", "source": "openai messages"})
    traj.messages = [m for m in messages if isinstance(m, dict)]
    pending: dict[str, ToolCallRecord] = {}
    turn = -1
    for m in traj.messages:
        if m.get("role") == "assistant":
            turn += 1
            for i, call in enumerate(m.get("tool_calls") or []):
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") if isinstance(call.get("function"), dict) else call
                rec = ToolCallRecord(turn=turn, id=str(call.get("id") or f"call_{turn}_{i}"),
                                     name=_tool_name(fn.get("name")), arguments=_arguments(fn.get("arguments")),
                                     result="", is_error=False, duration_ms=0.0)
                traj.tool_calls.append(rec)
                pending[rec.id] = rec
        elif m.get("role") == "tool":
            rec = pending.pop(str(m.get("tool_call_id")), None)
            if rec is not None:
                rec.result = _text(m.get("content"))
                rec.is_error = bool(m.get("is_error", rec.result.startswith("Error")))
    return traj


def _empty(task: Task, policy: dict[str, Any]) -> Trajectory:
    return Trajectory(episode_id=f"{task.id}#outside", task_id=task.id, family=task.family,
                      category=task.category, split=task.split, seed=task.seed, sample=0,
                      provenance={"suite_version": SUITE_VERSION, "task_id": task.id, "policy": policy},
                      messages=[{"role": "user", "content": task.instruction}])


def load_trajectory(task: Task, path: Path | str) -> Trajectory:
    """Read an outside agent's record of ``task`` (see the module docstring for the forms)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--trajectory {p}: no such file")
    text = p.read_text(encoding="utf-8", errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    raise UsageError(f"--trajectory {p}: line {n} is not valid JSON") from None
        mine = [r for r in rows if isinstance(r, dict) and r.get("task_id") == task.id]
        if len(mine) != 1:
            raise UsageError(f"--trajectory {p}: expected one JSON document, or JSONL with exactly one line "
                             f"for task {task.id} (found {len(mine)})")
        data = mine[0]
    if isinstance(data, dict) and "schema_version" in data and "tool_calls" in data:
        if data.get("task_id") not in (None, task.id):
            raise UsageError(f"--trajectory {p} records task {data.get('task_id')}, not {task.id}")
        try:
            traj = Trajectory.from_dict({**data, "grade": None})
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--trajectory {p} is not a readable longhorizon trajectory ({exc})") from None
        return traj
    messages = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(messages, list):
        raise UsageError(f"--trajectory {p}: expected a Trajectory or a list of chat messages")
    return from_messages(task, messages)


def grade_world(task: Task, world_dir: Path | str, trajectory: Trajectory | None = None) -> dict[str, Any]:
    """Judge the World at ``world_dir`` with ``task``'s criteria. Without a trajectory, process
    criteria are ``None`` (not checked) and ``reward``/``passed`` are ``None``;
    ``final_state_reward`` is the reward over the final-state criteria alone."""
    world = open_world(task, world_dir)
    removed = world.drop_links_and_specials()  # as every episode is graded: see World
    grade = task.grade(world, trajectory or _empty(task, {"policy": "outside", "source": "none"}))
    checked = trajectory is not None
    kinds = {c.id: c.kind for c in task.criteria}
    descriptions = {c.id: c.description for c in task.criteria}
    final = [r for r in grade.results if r.kind == "final_state"]
    final_ids = {r.id for r in final}
    final_grade = Grade(tuple(CriterionResult(r.id, r.kind, r.weight, r.passed, r.note, r.guard,
                                              tuple(q for q in r.requires if q in final_ids), r.grader_error)
                              for r in final))
    earned = grade.earned()
    criteria = []
    for r in grade.results:
        known = checked or kinds[r.id] == "final_state"
        criteria.append({"id": r.id, "kind": r.kind, "weight": r.weight, "description": descriptions[r.id],
                         "passed": r.passed if known else None,
                         "earned": earned[r.id] if checked else None,
                         "note": r.note if known else "not checked: needs --trajectory"})
    return {"task_id": task.id, "world": str(world.root), "trajectory": checked,
            "reward": grade.reward if checked else None, "passed": grade.passed if checked else None,
            "final_state_reward": final_grade.reward if final else None,
            "criteria": criteria, "removed_before_grading": removed}


def format_grade(report: dict[str, Any]) -> str:
    lines = [f"{report['task_id']}  World {report['world']}"]
    for c in report["criteria"]:
        mark = {True: "PASS", False: "FAIL", None: "----"}[c["passed"]]
        note = f"  ({c['note']})" if c["note"] else ""
        lines.append(f"  {mark} [{c['kind']}] {c['id']}: {c['description']}{note}")
    if report["trajectory"]:
        lines.append(f"reward {report['reward']:.3f}  passed {'yes' if report['passed'] else 'no'}")
    else:
        fs = report["final_state_reward"]
        lines.append(f"reward over the final-state criteria only: {'n/a' if fs is None else f'{fs:.3f}'} "
                     "(process criteria need --trajectory)")
    return "\n".join(lines)
