"""`--policy MODULE:FACTORY`: any importable Policy plays, and every way it can be wrong is one line, exit 2."""

import json
import sys
from pathlib import Path

import pytest

from longhorizon.cli import main

ROOT = Path(__file__).resolve().parents[2]
TASK = "downloads_cleanup-000001"
AGENTS = "own_agents_under_test"
SOURCE = '''
class Agent:
    name = "mine"
    def describe(self):
        return {"policy": self.name}
    async def act(self, messages, tools, ctx):
        return {"role": "assistant", "content": "done"}

def make(**options):
    return Agent()

def not_a_policy(**options):
    return 42

def no_options():
    return Agent()

def raises(**options):
    raise RuntimeError("no key for my model")

not_callable = 3
'''


def run(out, policy):
    return main(["run", "--policy", policy, "--task", TASK, "--out", str(out), "--quiet"])


def test_run_plays_the_example_agent_from_the_current_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert run(tmp_path / "run", "examples.first_agent:make") == 0
    traj = json.loads((tmp_path / "run" / "trajectories.jsonl").read_text())
    assert traj["provenance"]["policy"]["policy"] == "look-around"
    assert [c["name"] for c in traj["tool_calls"]] == ["files__list_dir"] and not traj["tool_calls"][0]["is_error"]


@pytest.fixture
def agents(tmp_path, monkeypatch):
    """A folder (the current one) holding a module of good and bad factories, imported afresh."""
    (tmp_path / f"{AGENTS}.py").write_text(SOURCE)
    (tmp_path / "broken_agent_under_test.py").write_text("import json\n1 / 0\n")
    (tmp_path / "needs_missing_under_test.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in (AGENTS, "broken_agent_under_test", "needs_missing_under_test"):
        sys.modules.pop(name, None)


def test_a_factory_in_the_current_folder_plays(agents, capsys):
    assert run(agents / "run", f"{AGENTS}:make") == 0
    traj = json.loads((agents / "run" / "trajectories.jsonl").read_text())
    assert traj["provenance"]["policy"] == {"policy": "mine"} and traj["status"] == "completed"


@pytest.mark.parametrize("spec, says", [
    ("no_such_module_xyz:make", "no module named 'no_such_module_xyz'"),
    ("needs_missing_under_test:make", "importing needs_missing_under_test failed: ModuleNotFoundError"),
    ("broken_agent_under_test:make", "importing broken_agent_under_test failed: ZeroDivisionError"),
    (f"{AGENTS}:missing", f"module {AGENTS} has no 'missing'"),
    (f"{AGENTS}:not_callable", "not_callable = 3 is not a callable factory"),
    (f"{AGENTS}:not_a_policy", "returned int, not a Policy"),
    (f"{AGENTS}:no_options", "must accept the keyword arguments model, base_url"),
    (f"{AGENTS}:raises", "raises(...) failed: RuntimeError: no key for my model"),
])
def test_a_wrong_factory_is_one_line_exit_2(agents, capsys, spec, says):
    assert run(agents / "run", spec) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"longhorizon: error: --policy {spec}: ") and says in err, err
    assert not (agents / "run" / "trajectories.jsonl").exists()


@pytest.mark.parametrize("spec", ["telepathy", "a:b:c", "my agent:make", "mod:"])
def test_a_malformed_spec_is_a_usage_error(capsys, spec):
    with pytest.raises(SystemExit) as exc:
        run("unused", spec)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "MODULE:FACTORY" in err, err
