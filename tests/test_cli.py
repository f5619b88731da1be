"""The command line: JSON listings, one-line errors with exit code 2 on bad input."""

import json
import shutil
import subprocess
import sys

import pytest

from longhorizon.cli import main


def lh(*args):
    return subprocess.run([sys.executable, "-m", "longhorizon.cli", *args], capture_output=True, text=True)


def test_tasks_list_json_has_required_fields(capsys):
    assert main(["tasks", "list", "--format", "json", "--seeds", "1", "--family", "downloads_cleanup"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["split"] for r in rows} == {"train", "holdout"}
    for r in rows:
        assert set(r) >= {"id", "category", "family", "split", "apps", "oracle_tool_calls"}
        assert r["oracle_tool_calls"] >= 20


def test_tasks_stats_diversity_reports_skeletons_overlap_and_trap_sets_per_family(capsys):
    assert main(["tasks", "stats", "--diversity", "--family", "support_triage", "--seeds", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seeds"] == 4 and [r["family"] for r in out["families"]] == ["support_triage"]
    row = out["families"][0]
    assert 1 <= row["skeletons"] <= 4 and 0 < row["overlap"] <= 1 and row["trap_sets"] >= 1


def test_tasks_stats_table_without_diversity_is_exit_2():
    r = lh("tasks", "stats", "--format", "table")
    assert r.returncode == 2 and "--diversity" in r.stderr
    r = lh("tasks", "stats", "--diversity", "--level", "1")
    assert r.returncode == 2 and "--level" in r.stderr
    r = lh("tasks", "stats", "--diversity", "--tokens")
    assert r.returncode == 2 and "--tokens" in r.stderr


def test_unknown_task_is_one_line_exit_2():
    r = lh("tasks", "show", "no_such_family-000001")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown task family" in r.stderr


def test_eval_of_missing_dir_is_exit_2(tmp_path):
    r = lh("eval", str(tmp_path / "nope"))
    assert r.returncode == 2 and "no such run folder" in r.stderr and r.stderr.count("\n") == 1


def test_bad_flag_is_exit_2():
    assert lh("run", "--policy", "telepathy", "--out", "x").returncode == 2


def test_run_eval_compare_roundtrip(tmp_path, capsys):
    a, b = tmp_path / "null", tmp_path / "oracle"
    base = ["run", "--family", "downloads_cleanup", "--seeds", "2", "--quiet"]
    assert main(base + ["--policy", "null", "--out", str(a)]) == 0
    assert main(base + ["--policy", "oracle", "--out", str(b)]) == 0
    capsys.readouterr()
    assert main(["eval", str(b), "--format", "json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["overall"]["pass@1"] == 1.0 and s["overall"]["episodes"] == 2
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["delta_pass@1"] == 1.0 and c["mcnemar"]["b_only_passed"] == 2


async def test_serve_app_over_stdio_through_the_cli(tmp_path):
    from mcp import Client, StdioServerParameters

    assert main(["world", "build", "downloads_cleanup-000001", "--out", str(tmp_path / "w")]) == 0
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "longhorizon.cli", "serve-app", "files", "--transport", "stdio", "--world", str(tmp_path / "w")])
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"read_file", "write_file", "list_dir"} <= names
        listing = await client.call_tool("list_dir", {"path": "Downloads"})
        assert not listing.is_error and "invoice_template.txt" in listing.content[0].text


def test_world_build_refuses_non_empty_dir(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("keep me")
    r = lh("world", "build", "downloads_cleanup-000001", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and (tmp_path / "x" / "f").read_text() == "keep me"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    for policy in ("null", "oracle"):
        assert main(["run", "--family", "downloads_cleanup", "--seeds", "3", "--quiet", "--policy", policy,
                     "--out", str(base / policy)]) == 0
    return base


def copies(two_runs, tmp_path):
    a, b = tmp_path / "null", tmp_path / "oracle"
    shutil.copytree(two_runs / "null", a)
    shutil.copytree(two_runs / "oracle", b)
    return a, b


def test_eval_and_compare_count_a_duplicated_episode_once_and_say_so(two_runs, tmp_path, capsys):
    a, b = copies(two_runs, tmp_path)
    log = b / "trajectories.jsonl"
    first, *_ = log.read_text().splitlines(keepends=True)
    with open(log, "a") as f:
        f.write(first * 3)
    capsys.readouterr()
    assert main(["eval", str(b), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    s = json.loads(out)
    assert s["duplicates_dropped"] == 3 and s["overall"]["episodes"] == 3 and s["complete"]
    assert err == f"{b}: dropped 3 duplicate episodes (each episode counted once, its first line kept)\n"
    assert main(["compare", str(a), str(b)]) == 0
    out, err = capsys.readouterr()
    assert "paired tasks: 3" in out and "dropped 3 duplicate episodes" in err and str(a) not in err
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["duplicates_dropped"] == {"a": 0, "b": 3} and c["mcnemar"]["b_only_passed"] == 3


def make_incomplete(run):
    """The run's last episode keeps failing as an infrastructure error."""
    log = run / "trajectories.jsonl"
    *kept, last = log.read_text().splitlines(keepends=True)
    log.write_text("".join(kept))
    episode = json.loads(last)
    (run / "infra_errors.jsonl").write_text(json.dumps(
        {"episode_id": episode["episode_id"], "task_id": episode["task_id"], "sample": 0,
         "error": "InfraError: connection refused"}) + "\n")
    return episode["task_id"]


def test_compare_refuses_an_incomplete_run(two_runs, tmp_path, capsys):
    a, b = copies(two_runs, tmp_path)
    make_incomplete(b)
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert f"{b}: 2 of 3 episodes finished, 1 missing (1 pending infrastructure error)" in err
    assert "--allow-incomplete" in err and f"{a}:" not in err


def test_compare_with_allow_incomplete_pairs_common_tasks_and_is_flagged(two_runs, tmp_path, capsys):
    a, b = copies(two_runs, tmp_path)
    gone = make_incomplete(b)
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--allow-incomplete"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == (f"INCOMPLETE: B ({b}): 2 of 3 episodes finished, 1 missing "
                                    "(1 pending infrastructure error); only tasks present in both runs are paired")
    assert "paired tasks: 2 (only in A: 1, only in B: 0)" in text
    assert main(["compare", str(a), str(b), "--allow-incomplete", "--format", "json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["incomplete"] == ["b"] and c["paired_tasks"] == 2 and c["only_a"] == 1
    assert c["runs"]["b"] == {"path": str(b), "expected": 3, "finished": 2, "missing": 1,
                              "pending_infra_errors": 1, "complete": False}
    assert c["runs"]["a"]["complete"] and gone not in json.dumps(c["mcnemar"])


def test_run_limit_plays_the_first_n_tasks_of_the_selection_and_resumes_them(tmp_path, capsys):
    import json as _json

    from longhorizon.tasks.registry import tasks_for

    out = tmp_path / "limited"
    args = ["run", "--family", "downloads_cleanup", "--seeds", "5", "--limit", "2", "--quiet", "--policy", "null",
            "--out", str(out)]
    assert main(args) == 0
    first_two = [t.id for t in tasks_for("train", 5, ["downloads_cleanup"])][:2]
    assert _json.loads((out / "run.json").read_text())["tasks"] == first_two
    played = [_json.loads(line)["task_id"] for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(played) == sorted(first_two)
    assert main(args) == 0  # the same run again: resumed (nothing left to play), not refused
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 2


def test_version_names_the_package_and_the_suite(capsys):
    from longhorizon import __version__
    from longhorizon.core.task import SUITE_VERSION

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert __version__ in out and f"suite {SUITE_VERSION}" in out


LEVELED = "invoice_followup"  # a family with levels (tests/tasks/test_levels.py covers them all)


def test_tasks_list_and_stats_at_a_level(capsys):
    assert main(["tasks", "list", "--format", "json", "--seeds", "1", "--family", LEVELED, "--level", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["level"]) for r in rows] == [(f"{LEVELED}-000000@L1", 1), (f"{LEVELED}-100000@L1", 1)]
    assert all(2 <= r["oracle_tool_calls"] <= 8 for r in rows)
    assert main(["tasks", "stats", "--seeds", "1", "--family", LEVELED, "--level", "1"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["level"] == 1 and stats["instances"] == 2
    low, _, high = stats["oracle_tool_calls_by_family"][LEVELED]
    assert 2 <= low <= high <= 8


def test_tasks_stats_tokens_per_family_grow_from_the_first_prompt_and_with_the_level(capsys):
    def tokens(*level):
        assert main(["tasks", "stats", "--seeds", "1", "--family", LEVELED, "--tokens", *level]) == 0
        stats = json.loads(capsys.readouterr().out)
        return stats["first_prompt_tokens_by_family"][LEVELED], stats["oracle_episode_tokens_by_family"][LEVELED]

    (first_lo, _, first_hi), (whole_lo, _, whole_hi) = tokens("--level", "1")
    assert 0 < first_lo <= first_hi < whole_lo <= whole_hi  # calls and results come after the first prompt
    _, (top_lo, _, _) = tokens()  # the default level: the same job, more of it
    assert top_lo > whole_hi


def test_run_at_a_level_plays_and_records_that_levels_tasks(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--family", LEVELED, "--seeds", "1", "--level", "1", "--quiet", "--policy", "oracle",
                 "--out", str(out)]) == 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["tasks"] == [f"{LEVELED}-000000@L1"]
    played = [json.loads(line)["task_id"] for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert played == [f"{LEVELED}-000000@L1"]


def test_run_level_with_task_is_refused():
    r = lh("run", "--policy", "null", "--task", f"{LEVELED}-000001@L1", "--level", "1", "--out", "x")
    assert r.returncode == 2 and "--level" in r.stderr


def test_run_user_model_options_let_a_model_play_the_simulated_person(tmp_path, monkeypatch, capsys):
    from longhorizon.apps.user.simulator import ENV_BASE_URL, ENV_MODEL, UserLLM

    monkeypatch.setenv(ENV_BASE_URL, "")  # restored after the test: the run sets them for its apps
    monkeypatch.setenv(ENV_MODEL, "")
    assert main(["run", "--family", "mobile_data_troubleshooting", "--limit", "1", "--quiet", "--policy", "null",
                 "--user-base-url", "http://127.0.0.1:9/v1", "--user-model", "user-sim",
                 "--out", str(tmp_path / "run")]) == 0
    assert UserLLM.from_env() == UserLLM("http://127.0.0.1:9/v1", "user-sim")


def test_run_user_model_needs_both_options():
    r = lh("run", "--policy", "null", "--family", "mobile_data_troubleshooting", "--user-model", "m", "--out", "x")
    assert r.returncode == 2 and "--user-base-url" in r.stderr
