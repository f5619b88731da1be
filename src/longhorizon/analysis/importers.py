"""Other benchmarks' own result files as Trajectories, written into a run folder, so the
behaviour metrics, ``analyze`` and ``view`` work on them unchanged.

τ²-bench (``tau2 run ... --save-to``; the ``Results`` JSON of ``tau2.data_model.simulation``):
    ``info`` (domain in ``environment_info.domain_name``), ``tasks``, and ``simulations``: each
    with ``id``, ``task_id``, ``trial``, ``termination_reason``, ``duration``, ``reward_info``
    (``reward``, ``reward_basis``, ``db_check``, ``env_assertions``, ``action_checks``,
    ``nl_assertions``, ``communicate_checks``) and ``messages`` (roles system / user / assistant
    / tool; assistant and user ``tool_calls`` with ``id``, ``name``, ``arguments`` dict,
    ``requestor``; tool messages with ``id``, ``content``, ``requestor``, ``error``).
    An episode passes when τ² counts it a success (reward within 1e-6 of 1). Its criteria are
    that success plus each check of the reward basis. Only the agent's calls (requestor
    ``assistant``) become tool calls; what the simulated user does with its own tools is kept
    out (it is the user's behaviour, not the agent's).

BFCL-V4 multi-turn (``bfcl generate`` then ``bfcl evaluate``):
    the result file (``BFCL_v4_multi_turn_*_result.json``, one JSON object a line: ``id``,
    ``result``, ``inference_log``, token counts, latency) and the score file
    (``BFCL_v4_multi_turn_*_score.json``: a header line with ``accuracy``, ``correct_count``,
    ``total_count``, then one line per *failed* entry with ``id`` and ``error``). The
    ``inference_log`` holds, per user turn, ``begin_of_turn_query`` (the user messages) and
    ``step_N`` lists of ``assistant`` / ``handler_log`` (``model_response_decoded``: calls as
    Python call strings) / ``tool`` entries (one result per decoded call, in order); lists of
    ``state_info`` entries between turns are skipped. An entry passes when it is not in the
    score file's failures.

Both files are untrusted input: a file that cannot be read, is not JSON, or holds an entry of
the wrong shape is one ``UsageError`` naming the file and the entry (never a traceback), and
an id given twice is kept once (``write_run`` counts the duplicates it drops).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.core.grade import CriterionResult, Grade
from longhorizon.core.json_files import SHAPE_ERRORS, malformed, read_json, read_json_lines
from longhorizon.core.trajectory import ToolCallRecord, Trajectory, json_safe
from longhorizon.rollout.store import RunStore

EXTERNAL_SPLIT = "external"


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _name(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a tool name must be a string, not {type(value).__name__}")
    return value


def _call(call_id: str, name: str, arguments: Any) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


# -- τ²-bench ----------------------------------------------------------------------------------
TAU2_STATUS = {"max_steps": "max_turns"}


def _tau2_criteria(info: dict | None) -> list[CriterionResult]:
    if not info:
        return [CriterionResult("tau2_success", "final_state", 1.0, False, "no reward info")]
    reward = float(info.get("reward") or 0.0)
    out = [CriterionResult("tau2_success", "final_state", 1.0, abs(reward - 1.0) <= 1e-6, f"reward {reward:g}")]
    basis = info.get("reward_basis") or ["DB"]
    if "DB" in basis and info.get("db_check"):
        out.append(CriterionResult("db_match", "final_state", 1.0, bool(info["db_check"].get("db_match"))))
    for key, kind, cid, flag, note in (("ENV_ASSERTION", "final_state", "env_assertion", "met", "env_assertion"),
                                       ("ACTION", "process", "action", "action_match", "action"),
                                       ("NL_ASSERTION", "final_state", "nl_assertion", "met", "nl_assertion"),
                                       ("COMMUNICATE", "process", "communicate", "met", "info")):
        if key not in basis:
            continue
        field = {"ENV_ASSERTION": "env_assertions", "ACTION": "action_checks", "NL_ASSERTION": "nl_assertions",
                 "COMMUNICATE": "communicate_checks"}[key]
        for i, check in enumerate(info.get(field) or []):
            detail = check.get(note)
            label = detail.get("name") or detail.get("func_name") if isinstance(detail, dict) else detail
            out.append(CriterionResult(f"{cid}_{i}", kind, 1.0, bool(check.get(flag)), _text(label)[:200]))
    return out


def tau2_trajectories(path: Path | str) -> list[Trajectory]:
    """Every simulation of a τ²-bench results file as a Trajectory (see the module docstring)."""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        raise UsageError(f"{path} is not a τ²-bench results file (no 'simulations' list)")
    try:
        info = data.get("info") or {}
        domain = str(((info.get("environment_info") or {}).get("domain_name")) or "unknown")
        agent = info.get("agent_info") or {}
        agent.get("llm")
    except SHAPE_ERRORS as exc:
        raise malformed(path, "'info'", exc) from None
    out = []
    for i, sim in enumerate(data["simulations"]):
        try:
            out.append(_tau2_trajectory(sim, path, domain, agent))
        except SHAPE_ERRORS as exc:
            raise malformed(path, f"simulation {i}", exc) from None
    return out


def _tau2_trajectory(sim: dict, path: Path | str, domain: str, agent: dict) -> Trajectory:
    """One simulation (the caller turns a value of the wrong shape into one line naming it)."""
    messages: list[dict] = []
    calls: list[ToolCallRecord] = []
    pending: dict[str, ToolCallRecord] = {}
    turn = 0
    tool_msgs = []
    for m in sim.get("messages") or []:
        tool_msgs = m.get("tool_messages") if m.get("tool_messages") is not None else [m]
        role = m.get("role")
        if role == "assistant":
            tcs = [tc for tc in (m.get("tool_calls") or []) if tc.get("requestor", "assistant") == "assistant"]
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("content") or ""}
            if tcs:
                msg["tool_calls"] = [_call(tc.get("id") or f"call_{turn}_{k}", _name(tc["name"]), tc.get("arguments"))
                                     for k, tc in enumerate(tcs)]
                for k, tc in enumerate(tcs):
                    rec = ToolCallRecord(turn, tc.get("id") or f"call_{turn}_{k}", tc["name"],
                                         json_safe(tc.get("arguments")), "", False, 0.0)
                    calls.append(rec)
                    pending[rec.id] = rec
            messages.append(msg)
            turn += 1
        elif role in ("system", "user"):
            if m.get("content"):
                messages.append({"role": role, "content": m["content"]})
        elif role == "tool":
            for t in tool_msgs:
                if t.get("requestor", "assistant") != "assistant" or t.get("id") not in pending:
                    continue
                rec = pending.pop(t["id"])
                rec.result, rec.is_error = _text(t.get("content")), bool(t.get("error"))
                messages.append({"role": "tool", "tool_call_id": rec.id, "content": rec.result})
    reason = str(sim.get("termination_reason") or "")
    return Trajectory(
        episode_id=str(sim.get("id")), task_id=f"tau2-{domain}-{sim.get('task_id')}", family=f"tau2-{domain}",
        category=f"tau2 {domain}", split=EXTERNAL_SPLIT, seed=int(sim.get("seed") or 0),
        sample=int(sim.get("trial") or 0),
        provenance={"source": "tau2-bench", "file": str(path), "domain": domain, "policy": {
            "policy": "import", "model": agent.get("llm"), "agent": agent.get("implementation")},
            "termination_reason": reason, "external_reward": (sim.get("reward_info") or {}).get("reward")},
        messages=messages, tool_calls=calls, status=TAU2_STATUS.get(reason, "completed"),
        grade=Grade(tuple(_tau2_criteria(sim.get("reward_info")))), wall_s=float(sim.get("duration") or 0.0))


# -- BFCL multi-turn ---------------------------------------------------------------------------
def parse_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """``"mv(source='a', destination='b')"`` -> ``("mv", {...})``; None when it is not one
    call with literal arguments (positional ones are kept as ``arg0``, ``arg1``...)."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # also a NUL byte, or nesting too deep
        return None
    if not isinstance(node, ast.Call):
        return None
    name = ast.unparse(node.func)
    try:
        args = {f"arg{i}": ast.literal_eval(a) for i, a in enumerate(node.args)}
        args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return name, args


def _bfcl_error(result: str) -> bool:
    if result.startswith("Error during execution"):
        return True
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(result)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return isinstance(value, dict) and "error" in value
    return False


def _bfcl_messages(log: list) -> tuple[list[dict], list[ToolCallRecord]]:
    messages: list[dict] = []
    calls: list[ToolCallRecord] = []
    turn = 0
    for entry in log:
        if not isinstance(entry, dict):  # state_info snapshots between turns
            continue
        for q in entry.get("begin_of_turn_query") or []:
            if isinstance(q, dict) and q.get("content"):
                messages.append({"role": q.get("role", "user"), "content": _text(q["content"])})
        steps = sorted((k for k in entry if k.startswith("step_")), key=lambda k: int(k.split("_")[1]))
        for step in steps:
            assistant, decoded, results = None, [], []
            for item in entry[step]:
                role = item.get("role")
                if role == "assistant":
                    assistant = item.get("content")
                elif role == "handler_log" and "model_response_decoded" in item:
                    decoded = item.get("model_response_decoded") or []
                elif role == "tool":
                    results.append(_text(item.get("content")))
            if assistant is None:
                continue
            parsed = [p for p in (parse_call(d) for d in decoded if isinstance(d, str)) if p]
            msg: dict[str, Any] = {"role": "assistant", "content": "" if parsed or not isinstance(assistant, str)
                                   else assistant}
            if parsed:
                ids = [f"call_{turn}_{k}" for k in range(len(parsed))]
                msg["tool_calls"] = [_call(i, n, a) for i, (n, a) in zip(ids, parsed)]
                messages.append(msg)
                for k, (i, (n, a)) in enumerate(zip(ids, parsed)):
                    res = results[k] if k < len(results) else ""
                    calls.append(ToolCallRecord(turn, i, n, json_safe(a), res, _bfcl_error(res), 0.0))
                    messages.append({"role": "tool", "tool_call_id": i, "content": res})
            else:
                messages.append(msg)
            turn += 1
    return messages, calls


def bfcl_trajectories(result_path: Path | str, score_path: Path | str) -> list[Trajectory]:
    """Every entry of a BFCL multi-turn result file as a Trajectory, graded by its score file."""
    results = read_json_lines(result_path)
    scores = read_json_lines(score_path)
    if not scores or "accuracy" not in scores[0]:
        raise UsageError(f"{score_path} is not a BFCL score file (no accuracy header line)")
    failed = {}
    for i, s in enumerate(scores[1:], 1):
        if "id" in s:
            if not isinstance(s["id"], (str, int)) or isinstance(s["id"], bool):
                raise UsageError(f"{score_path}: failure {i} has an id that is not a string or number")
            failed.setdefault(str(s["id"]), s)
    out = []
    for i, r in enumerate(results):
        if "id" not in r or not isinstance(r.get("inference_log"), list):
            raise UsageError(f"{result_path}: an entry without 'id' and 'inference_log' (not a multi-turn result file)")
        if not isinstance(r["id"], (str, int)) or isinstance(r["id"], bool):
            raise UsageError(f"{result_path}: entry {i} has an id that is not a string or number")
        try:
            out.append(_bfcl_trajectory(r, failed.get(str(r["id"])), result_path, score_path))
        except SHAPE_ERRORS as exc:
            raise malformed(result_path, f"entry {i} ({str(r['id'])[:60]})", exc) from None
    return out


def _bfcl_trajectory(r: dict, fail: dict | None, result_path: Path | str, score_path: Path | str) -> Trajectory:
    """One result entry, failed when its id is among the score file's failures."""
    entry_id = str(r["id"])
    category = entry_id.rsplit("_", 1)[0]
    messages, calls = _bfcl_messages(r["inference_log"])
    error = (fail or {}).get("error") or {}
    note = "" if not fail else f"{error.get('error_type', '')}: {_text(error.get('error_message'))}"[:300]
    out_tokens = [t for turn in (r.get("output_token_count") or []) for t in (turn if isinstance(turn, list) else [turn])]
    return Trajectory(
        episode_id=f"bfcl-{entry_id}", task_id=f"bfcl-{entry_id}", family=category, category=f"bfcl {category}",
        split=EXTERNAL_SPLIT, seed=0, sample=0,
        provenance={"source": "bfcl-v4", "file": str(result_path), "score_file": str(score_path),
                    "policy": {"policy": "import", "model": (fail or {}).get("model_name")},
                    "output_tokens": sum(t for t in out_tokens
                                         if isinstance(t, (int, float)) and not isinstance(t, bool))},
        messages=messages, tool_calls=calls, status="completed",
        grade=Grade((CriterionResult("bfcl_valid", "final_state", 1.0, fail is None, note),)))


def unique(trajs: list[Trajectory]) -> tuple[list[Trajectory], int]:
    """Each episode id once (the first kept) and how many later ones were dropped: a file that
    names one simulation or entry twice would otherwise be written, and counted, twice."""
    seen: set[str] = set()
    kept = []
    for t in trajs:
        if t.episode_id not in seen:
            seen.add(t.episode_id)
            kept.append(t)
    return kept, len(trajs) - len(kept)


def write_run(out: Path | str, trajs: list[Trajectory], source: dict[str, Any]) -> dict[str, int]:
    """Write imported Trajectories as a run folder (re-importing the same file adds nothing;
    an id given twice is written once: ``duplicates`` counts those dropped)."""
    trajs, duplicates = unique(trajs)
    manifest = {"suite_version": None, "policy": {"policy": "import", **source}, "split": EXTERNAL_SPLIT,
                "seeds": None, "families": None, "samples": None, "episodes": len(trajs)}
    with RunStore(out) as store:
        done = store.open(manifest)
        new = [t for t in trajs if t.episode_id not in done]
        for t in new:
            store.add_trajectory(t)
    return {"episodes": len(trajs), "written": len(new), "passed": sum(t.passed for t in trajs),
            "duplicates": duplicates}
