"""Greedy that is greedy, a seed in every request, and the reproducible flag in provenance:
what the served evaluation paths send (to a loopback stand-in OpenAI server) and record."""

from __future__ import annotations

import contextlib
import json

import pytest

import longhorizon.evaluate.runs as runs
from longhorizon.cli import main
from longhorizon.tasks.registry import tasks_for
from longhorizon.testing.standin_llm import OracleBrain, StandinLLM

FAMILY = "downloads_cleanup"


@pytest.fixture
def played(monkeypatch):
    """Records the concurrency each run is played at (the runner's own bound on episodes in flight)."""
    seen = []
    real = runs.run_episodes

    async def spy(*args, concurrency=8, **kw):
        seen.append(concurrency)
        return await real(*args, concurrency=concurrency, **kw)

    monkeypatch.setattr(runs, "run_episodes", spy)
    return seen


def _run(srv, out, *extra):
    return main(["run", "--policy", "openai", "--base-url", srv.base_url, "--model", srv.model, "--family", FAMILY,
                 "--seeds", "2", "--split", "holdout", "--quiet", "--out", str(out), *extra])


def test_run_reproducible_plays_one_episode_at_a_time_greedy_and_seeded_and_records_it(tmp_path, played, capsys):
    with StandinLLM(OracleBrain(tasks_for("holdout", 2, [FAMILY]))) as srv:
        assert _run(srv, tmp_path / "r", "--reproducible") == 0
    assert played == [1]
    assert srv.requests and {(r["temperature"], r["seed"]) for r in srv.requests} == {(0.0, 0)}
    manifest = json.loads((tmp_path / "r" / "run.json").read_text())
    assert manifest["reproducible"] is True


def test_a_run_without_the_flag_records_it_off_and_keeps_its_concurrency(tmp_path, played, capsys):
    with StandinLLM(OracleBrain(tasks_for("holdout", 2, [FAMILY]))) as srv:
        assert _run(srv, tmp_path / "r") == 0
        assert played == [8]
        assert json.loads((tmp_path / "r" / "run.json").read_text())["reproducible"] is False
        capsys.readouterr()
        assert _run(srv, tmp_path / "r", "--reproducible") == 2  # a different run: not resumed as this one
    assert "reproducible differ" in capsys.readouterr().err


def test_run_reproducible_refuses_more_than_one_episode_in_flight(tmp_path, capsys):
    assert main(["run", "--policy", "null", "--family", FAMILY, "--seeds", "1", "--reproducible",
                 "--concurrency", "4", "--out", str(tmp_path / "r")]) == 2
    assert "one episode at a time" in capsys.readouterr().err


def test_a_run_folder_written_before_the_flag_existed_resumes_as_not_reproducible(tmp_path, capsys):
    out = tmp_path / "r"
    args = ["run", "--policy", "null", "--family", FAMILY, "--seeds", "1", "--quiet", "--out", str(out)]
    assert main(args) == 0
    manifest = json.loads((out / "run.json").read_text())
    del manifest["reproducible"]
    (out / "run.json").write_text(json.dumps(manifest))
    assert main(args) == 0


def test_the_pipelines_served_evaluation_is_greedy_seeded_and_records_reproducible(tmp_path, monkeypatch):
    import longhorizon.serve.vllm as vllm
    from longhorizon.train.config import EvalConfig
    from longhorizon.train.pipeline import evaluate_model, served_policy

    tasks = tasks_for("holdout", 2, [FAMILY])
    started = {}

    @contextlib.contextmanager
    def server(path, **kw):  # the stand-in answers in place of vLLM
        started.update(kw)
        with StandinLLM(OracleBrain(tasks)) as srv:
            started["srv"] = srv
            yield type("S", (), {"base_url": srv.base_url, "model_name": srv.model})()

    monkeypatch.setattr(vllm, "VLLMServer", server)
    cfg = EvalConfig(split="holdout", families=[FAMILY], seeds=2, max_context=None, max_turns=150,
                     max_tool_calls=300, reproducible=True)
    with served_policy(tmp_path, cfg, tmp_path / "log") as policy:
        summary = evaluate_model(tmp_path, tmp_path / "run", cfg, progress=False, policy=policy)
    assert summary["overall"]["pass@1"] == 1.0
    assert started["reproducible"] is True
    assert {(r["temperature"], r["seed"]) for r in started["srv"].requests} == {(0.0, 0)}
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["reproducible"] is True and manifest["policy"]["base_url"].endswith(":reproducible")
