"""The log_error_summary family: solvable through the real shell, unsolvable by doing nothing,
every criterion able to fail, and deterministic in its seed."""

import gzip

import pytest

from longhorizon.core.task import HOLDOUT_SEED_BASE, ToolCall
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import NullPolicy, OraclePolicy
from longhorizon.tasks.registry import get_family

SEEDS = [0, 1, HOLDOUT_SEED_BASE]
FAMILY = get_family("log_error_summary")


def test_family_is_registered_as_log_analysis():
    assert FAMILY.category == "log analysis" and FAMILY.apps == ("shell", "files")
    assert FAMILY.generate(HOLDOUT_SEED_BASE).split == "holdout" and FAMILY.generate(0).split == "train"


@pytest.mark.parametrize("seed", SEEDS)
async def test_oracle_passes_through_the_shell(seed):
    task = FAMILY.generate(seed)
    traj = await play_task(task, OraclePolicy())
    assert traj.passed and traj.grade.reward == 1.0, [r for r in traj.grade.results if not r.passed]
    assert not any(c.is_error for c in traj.tool_calls)
    assert {c.app for c in traj.tool_calls} == {"shell", "files"}


@pytest.mark.parametrize("seed", SEEDS)
async def test_null_policy_fails(seed):
    traj = await play_task(FAMILY.generate(seed), NullPolicy())
    assert not traj.passed and traj.grade.reward < 0.5


@pytest.mark.parametrize("seed", SEEDS)
async def test_each_criterion_fails_on_its_perturbation(seed):
    task = FAMILY.generate(seed)
    assert {c.kind for c in task.criteria} == {"final_state", "process"}
    assert set(task.perturbations) == {c.id for c in task.criteria}
    for crit in task.criteria:
        traj = await play_task(task, OraclePolicy(perturb=crit.id))
        result = next(r for r in traj.grade.results if r.id == crit.id)
        assert not result.passed, f"{crit.id} passed on the solution built to break it"


@pytest.mark.parametrize("seed", SEEDS)
def test_same_seed_same_task_and_world(seed, tmp_path):
    a, b = FAMILY.generate(seed), FAMILY.generate(seed)
    assert a.instruction == b.instruction and a.data == b.data
    assert World.build(tmp_path / "a", a.build).hash() == World.build(tmp_path / "b", b.build).hash()


def test_world_holds_the_traps_the_instruction_warns_about(tmp_path):
    task = FAMILY.generate(1)
    world = World.build(tmp_path / "w", task.build)
    day = task.data["date"]
    rotated = gzip.decompress(world.file(f"logs/{task.data['rotated']}.log.1.gz").read_bytes()).decode()
    assert f"\n{day} " in rotated and " ERROR " in rotated  # part of the day is only in the .gz
    archive = list((world.workspace / "logs" / "archive").glob("*.gz"))
    assert archive and all(day[4:] in gzip.decompress(p.read_bytes()).decode() for p in archive)
    assert any(line.startswith("    at ") or line.startswith("Traceback")
               for p in world.workspace.glob("logs/*.log") for line in p.read_text().splitlines())


async def test_a_sloppy_grep_count_is_graded_wrong():
    """Counting every line that says ERROR (trace lines, INFO lines quoting upstream errors,
    other days) must not pass, even with the right top messages."""
    task = FAMILY.generate(0)

    def sloppy():
        lines = ["service,error_count,top_error"]
        for svc in task.data["services"]:
            out = yield ToolCall("shell__run", {"command": f"zcat -f logs/{svc}.log* | grep -c ERROR"})
            n = out.split("--- stdout ---\n", 1)[1].split()[0]
            lines.append(f"{svc},{n},{task.data['top_errors'][svc]}")
        yield ToolCall("files__write_file", {"path": "reports/error_summary.csv", "content": "\n".join(lines)})
        return "done"

    task.perturbations["sloppy"] = sloppy
    traj = await play_task(task, OraclePolicy(perturb="sloppy"))
    grade = {r.id: r.passed for r in traj.grade.results}
    assert grade["top_errors"] and grade["summary_services"] and not grade["error_counts"]


async def test_planted_fifo_or_host_symlink_fails_instead_of_hanging_or_leaking():
    """The shell can make a FIFO (opening it would block the grader) or a link to a host path."""
    task = FAMILY.generate(1)

    def plant():
        yield ToolCall("shell__run", {"command": "mkdir -p reports && mkfifo reports/error_summary.csv "
                                                 "&& ln -s /etc/hostname reports/repeat_failures.txt"})
        return "done"

    task.perturbations["plant"] = plant
    traj = await play_task(task, OraclePolicy(perturb="plant"))
    results = {r.id: r for r in traj.grade.results}
    assert not results["summary_csv"].passed and not results["repeat_request_ids"].passed
    assert "not a regular file" in results["repeat_request_ids"].note
