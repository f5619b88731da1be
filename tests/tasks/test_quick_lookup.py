"""The short log-lookup families: the traps the instruction warns about are really in the World,
naive answers are graded wrong, and a partly right line earns partial credit."""

import pytest

from longhorizon.core.task import HOLDOUT_SEED_BASE, ToolCall
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.registry import get_family

FIRST, LAST = get_family("log_first_error"), get_family("log_last_warning")


def test_splits_both_are_train_split_families_and_neither_is_a_holdout_family():
    """log_last_warning subclasses log_first_error's generator, so it cannot be a holdout family;
    the demo leaves it out of training and plays its held-out seeds for transfer instead."""
    for fam in (FIRST, LAST):
        assert not fam.holdout_family
        assert fam.generate(0).split == "train" and fam.generate(HOLDOUT_SEED_BASE).split == "holdout"
    assert FIRST.category == LAST.category == "log analysis" and FIRST.apps == ("shell",)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_file_starts_and_ends_on_other_days(seed, tmp_path):
    """The first ERROR in the file is the evening before; the last WARN is the small hours after."""
    for fam, level, edge in ((FIRST, "ERROR", 0), (LAST, "WARN", -1)):
        task = fam.generate(seed)
        world = World.build(tmp_path / f"{fam.name}-{seed}", task.build)
        lines = world.file(f"logs/{task.data['service']}.log").read_text().splitlines()
        at_level = [ln for ln in lines if ln[:4].isdigit() and ln.split()[2] == level]
        assert not at_level[edge].startswith(task.data["date"]), "the naive head/tail answer must be wrong"
        assert task.data["line"] in lines and task.data["line"].startswith(task.data["date"])


def _report(task) -> str:
    return "reports/first_error.txt" if task.family == "log_first_error" else "reports/last_warning.txt"


async def _grade(task, *commands: str) -> dict:
    """Grade a play that runs ``commands`` and then reads the report back."""
    def play():
        for command in commands:
            yield ToolCall("shell__run", {"command": command})
        yield ToolCall("shell__run", {"command": f"cat {_report(task)}"})
        return "done"

    task.perturbations["custom"] = play
    traj = await play_task(task, OraclePolicy(perturb="custom"))
    return {r.id: r.passed for r in traj.grade.results} | {"reward": traj.grade.reward}


def _write(task, text: str) -> str:
    return f"mkdir -p reports && cat > {_report(task)} <<'EOF'\n{text}\nEOF"


async def test_the_whole_log_copied_earns_nothing():
    task = FIRST.generate(4)
    grade = await _grade(task, f"mkdir -p reports && cp logs/{task.data['service']}.log {_report(task)}")
    assert grade["reward"] == 0.0


async def test_the_first_error_of_the_file_is_graded_wrong():
    task = FIRST.generate(7)
    grade = await _grade(task, f"mkdir -p reports && grep -m1 ' ERROR ' logs/{task.data['service']}.log > {_report(task)}")
    assert not grade["timestamp"] and grade["reward"] == 0.0


async def test_right_entry_with_a_wrong_message_earns_partial_credit():
    task = FIRST.generate(5)
    head = task.data["line"].split(" req=")[0]
    req = task.data["line"].split(" req=")[1].split()[0]
    grade = await _grade(task, _write(task, f"{head} req={req} Something else went wrong"))
    assert grade["timestamp"] and grade["request_id"] and not grade["message"]
    assert 0 < grade["reward"] < 1 and grade["verified_report"]


async def test_the_exact_line_with_other_spacing_passes():
    task = LAST.generate(6)
    grade = await _grade(task, _write(task, "  " + " ".join(task.data["line"].split()) + "  "))
    assert grade["reward"] == 1.0
