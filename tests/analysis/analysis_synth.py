"""Synthetic Trajectories for the analysis tests: built call by call, so each one has (or
lacks) exactly the behaviour a test is about."""

from __future__ import annotations

import json

from longhorizon.core.grade import CriterionResult, Grade
from longhorizon.core.trajectory import ToolCallRecord, Trajectory
from longhorizon.rollout.store import RunStore


def call(name: str, args: dict | None = None, result: str = "ok", error: bool = False) -> tuple:
    return (name, args or {}, result, error)


def traj(turns: list[tuple[str, list[tuple]]], *, task: str = "t", sample: int = 0, category: str = "cat",
         passed: bool | None = None, final: list[bool] | None = None, instruction: str = "Do the task.",
         episode: str | None = None, token_ids: list[list[int]] | None = None, status: str = "completed") -> Trajectory:
    """``turns``: (assistant text, [call(...), ...]) per assistant turn; a last turn with no
    calls is the final answer. ``final``: the final-state criteria's results (a process
    criterion ``ok`` is added, met unless ``passed`` is False)."""
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": instruction}]
    records, turn_records = [], []
    for t, (text, calls) in enumerate(turns):
        msg = {"role": "assistant", "content": text}
        if calls:
            msg["tool_calls"] = []
        ids = []
        for name, args, result, error in calls:
            cid = f"c{len(records)}"
            ids.append(cid)
            msg["tool_calls"].append({"id": cid, "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}})
            records.append(ToolCallRecord(t, cid, name, args, result, error, 1.0))
        messages.append(msg)
        for cid, (_, _, result, _) in zip(ids, calls):
            messages.append({"role": "tool", "tool_call_id": cid, "content": result})
        rec = {"turn": t, "latency_s": 0.0}
        if token_ids:
            rec["token_ids"] = token_ids[t]
        turn_records.append(rec)
    final = final if final is not None else [True]
    results = [CriterionResult(f"f{i}", "final_state", 1.0, ok) for i, ok in enumerate(final)]
    results.append(CriterionResult("ok", "process", 1.0, passed is not False and all(final)))
    return Trajectory(episode_id=episode or f"{task}-{sample}", task_id=task, family=task, category=category,
                      split="holdout", seed=0, sample=sample, provenance={"policy": {"policy": "synthetic"}},
                      messages=messages, tool_calls=records, turns=turn_records, status=status,
                      grade=Grade(tuple(results)))


def write_run(path, trajs: list[Trajectory], policy: str = "synthetic", expected: int | None = None) -> None:
    with RunStore(path) as store:
        store.open({"suite_version": "test", "policy": {"policy": policy}, "split": "holdout", "seeds": None,
                    "families": None, "samples": 1, "episodes": len(trajs) if expected is None else expected})
        for t in trajs:
            store.add_trajectory(t)
