"""What the commands print: bars only on a terminal, the cause of infrastructure errors, a
per-family table from `eval`, n/a for a rate with nothing graded."""

import json

from longhorizon.cli import main
from longhorizon.core.errors import InfraError
from longhorizon.evaluate.runs import run_episodes
from longhorizon.rollout.runner import RunSpec
from longhorizon.tasks.registry import get_task

TASK = "downloads_cleanup-000001"
DOWN = '''
from longhorizon.core.errors import InfraError

class Down:
    name = "down"
    def describe(self):
        return {"policy": self.name}
    async def act(self, messages, tools, ctx):
        raise InfraError("connection refused by model server")

def make(**options):
    return Down()
'''


class Down:
    name = "down"

    def describe(self):
        return {"policy": self.name}

    async def act(self, messages, tools, ctx):
        raise InfraError("connection refused by model server")


def test_run_draws_no_bar_when_stderr_is_not_a_terminal(tmp_path, capsys):
    assert main(["run", "--policy", "null", "--task", TASK, "--out", str(tmp_path / "r")]) == 0
    assert capsys.readouterr().err == ""


def test_run_says_the_first_infrastructure_error_and_where_the_rest_are(tmp_path, monkeypatch, capsys):
    (tmp_path / "down_agent_under_test.py").write_text(DOWN)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r"
    assert main(["run", "--policy", "down_agent_under_test:make", "--task", TASK, "--out", str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == [f"1 episode failed as infrastructure errors (not graded; rerun to retry); first: {TASK}#0: "
                          "InfraError: connection refused by model server",
                          f"all causes: {out / 'infra_errors.jsonl'}"]


async def test_the_bar_says_n_a_while_nothing_is_graded(tmp_path, capsys):
    spec = RunSpec(policy=Down().describe(), split="train", seeds=None, families=None, samples=1, tasks=[TASK])
    await run_episodes([get_task(TASK)], Down(), spec, tmp_path, progress=True)
    err = capsys.readouterr().err
    assert "pass_rate=n/a" in err and "pass_rate=0" not in err


def test_eval_prints_a_row_per_family(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "--policy", "oracle", "--family", "downloads_cleanup", "--family", "log_first_error",
                 "--seeds", "1", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["eval", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    fams = lines[lines.index("per family") + 1:][:2]
    assert [line.split()[:3] for line in fams] == [["downloads_cleanup", "1", "1.000"], ["log_first_error", "1", "1.000"]]
    assert main(["eval", str(out), "--format", "json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["families"]) == {"downloads_cleanup", "log_first_error"}
