"""The hasty policy is the oracle without its care: no stated steps, no read-back of what it
wrote; so it fails a task whose grader asks for that verification, where the oracle passes."""

from longhorizon.apps.kinds import is_read
from longhorizon.core.tool_kinds import entities
from longhorizon.evaluate.runs import run_episodes
from longhorizon.policies.scripted import HastyOraclePolicy, OraclePolicy
from longhorizon.rollout.runner import RunSpec
from longhorizon.rollout.store import read_jsonl
from longhorizon.tasks.registry import tasks_for

FAMILY = "inventory_sheet_cleanup"


async def _play(policy, out):
    tasks = tasks_for("train", 1, [FAMILY])
    spec = RunSpec(policy=policy.describe(), split="train", seeds=1, families=[FAMILY], samples=1)
    await run_episodes(tasks, policy, spec, out, progress=False)
    (row,) = read_jsonl(out / "trajectories.jsonl")
    return row


async def test_hasty_skips_notes_and_read_backs_and_fails_verification(tmp_path):
    hasty = await _play(HastyOraclePolicy(), tmp_path / "hasty")
    oracle = await _play(OraclePolicy(), tmp_path / "oracle")
    assert oracle["grade"]["passed"]
    failed = [c["id"] for c in hasty["grade"]["criteria"] if not c["passed"]]
    assert failed == ["verified"]
    assert all(m["content"] == "" for m in hasty["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
    written = set()
    for c in hasty["tool_calls"]:
        ents = set(entities(c["name"], c["arguments"]))
        if is_read(c["name"], c["arguments"]):
            assert not ents & written, f"read back {c['name']} {c['arguments']}"
        else:
            written |= ents
    assert len(hasty["tool_calls"]) < len(oracle["tool_calls"])
