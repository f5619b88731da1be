"""Every bad input is one line on stderr and exit code 2, never a traceback."""

import json
import socket
import subprocess
import sys

import pytest

from longhorizon.tasks.registry import get_task
from longhorizon.testing.standin_llm import OracleBrain, StandinLLM

TASK = "downloads_cleanup-000001"


def lh(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "longhorizon.cli", *map(str, args)], capture_output=True,
                          text=True, stdin=stdin)


def refused(r, *phrases):
    """Exit 2, exactly one line on stderr naming the problem, nothing else."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1 and r.stderr.endswith("\n"), r.stderr
    for p in phrases:
        assert p in r.stderr, r.stderr
    return r.stderr


@pytest.fixture
def a_file(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("not a folder")
    return f


def test_run_out_that_is_a_file(a_file):
    refused(lh("run", "--policy", "null", "--task", TASK, "--out", a_file, "--quiet"), "is not a folder")
    assert a_file.read_text() == "not a folder"


def test_run_out_under_a_file(a_file):
    refused(lh("run", "--policy", "null", "--task", TASK, "--out", a_file / "run", "--quiet"),
            f"--out {a_file / 'run'}: {a_file} is a file, not a folder")


@pytest.mark.parametrize("command", [["run", "--policy", "null", "--task", TASK, "--quiet"], ["world", "build", TASK]])
def test_out_where_nothing_can_be_written(command):
    refused(lh(*command, "--out", "/proc/longhorizon-out"), "--out /proc/longhorizon-out: cannot write in /proc")


def test_run_out_that_is_a_folder_of_something_else(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep")
    refused(lh("run", "--policy", "null", "--task", TASK, "--out", tmp_path / "mine", "--quiet"),
            "is not a run folder")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["thesis.tex"]


def test_eval_of_a_file(a_file):
    refused(lh("eval", a_file), "is a file, not a run folder")


def test_world_build_out_that_is_a_file(a_file):
    refused(lh("world", "build", TASK, "--out", a_file), "not a folder")


def test_serve_app_world_that_is_a_file(a_file):
    refused(lh("serve-app", "files", "--world", a_file), "is not a folder")


@pytest.mark.parametrize("value", ["70000", "-1", "http"])
def test_serve_app_port_out_of_range(tmp_path, value):
    refused(lh("serve-app", "files", "--world", tmp_path, "--transport", "http", "--port", value), "--port")


def test_serve_app_unknown_app(tmp_path):
    refused(lh("serve-app", "typewriter", "--world", tmp_path), "invalid choice", "files")


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"episodes": "many"}'])
def test_eval_of_an_invalid_run_json(tmp_path, text):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text(text)
    refused(lh("eval", tmp_path / "run"), "run.json")


def test_run_into_a_folder_with_an_invalid_run_json(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{half")
    refused(lh("run", "--policy", "null", "--task", TASK, "--out", tmp_path / "run", "--quiet"), "not valid JSON")


def test_eval_of_a_log_line_that_is_no_episode(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text('{"episodes": 1}')
    (tmp_path / "run" / "trajectories.jsonl").write_text('["not", "an", "episode"]\n')
    refused(lh("eval", tmp_path / "run"), "line 1 is not an episode record")


@pytest.mark.parametrize("flag, value", [("--max-turns", "-1"), ("--samples", "0"), ("--concurrency", "0"),
                                         ("--seeds", "0"), ("--max-tool-calls", "0"), ("--max-wall-s", "-5"),
                                         ("--top-p", "1.5"), ("--samples", "two")])
def test_impossible_values_are_refused(tmp_path, flag, value):
    refused(lh("run", "--policy", "null", "--out", tmp_path / "r", flag, value), flag)
    assert not (tmp_path / "r").exists()


def test_a_closed_pipe_is_quiet():
    # `longhorizon tasks list | head -1`: the reader is gone before the listing is written
    args = ["tasks", "list", "--seeds", "1", "--family", "downloads_cleanup"]
    assert lh(*args).returncode == 0  # the listing's cache made first: its "counting" note is not the point here
    p = subprocess.Popen([sys.executable, "-m", "longhorizon.cli", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait()
    assert err == "" and p.returncode == 141


def test_extra_body_must_be_a_json_object(tmp_path):
    refused(lh("run", "--policy", "openai", "--base-url", "http://127.0.0.1:1/v1", "--model", "m",
               "--extra-body", "{oops", "--out", tmp_path / "r"), "--extra-body", "not valid JSON")
    refused(lh("run", "--policy", "openai", "--base-url", "http://127.0.0.1:1/v1", "--model", "m",
               "--extra-body", "[1]", "--out", tmp_path / "r"), "JSON object")


def test_openai_options_without_the_openai_policy(tmp_path):
    refused(lh("run", "--policy", "null", "--task", TASK, "--api-key", "k", "--out", tmp_path / "r"),
            "--api-key only apply to --policy openai")


def test_task_and_split_together(tmp_path):
    refused(lh("run", "--policy", "null", "--task", TASK, "--split", "holdout", "--out", tmp_path / "r"),
            "drop --split")


def test_unknown_task_for_run(tmp_path):
    refused(lh("run", "--policy", "null", "--task", "nope-000001", "--out", tmp_path / "r"), "unknown task family")
    assert not (tmp_path / "r").exists()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openai_server_down_is_said_before_any_episode(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    refused(lh("run", "--policy", "openai", "--base-url", url, "--model", "m", "--task", TASK,
               "--out", tmp_path / "r", "--quiet"), f"cannot reach the model server at {url}")
    assert not (tmp_path / "r").exists()


@pytest.fixture(scope="module")
def server():
    with StandinLLM(OracleBrain([get_task(TASK)]), api_key="sekret") as srv:
        yield srv


def test_openai_wrong_key_wrong_model_wrong_path(server, tmp_path):
    base = ["run", "--policy", "openai", "--task", TASK, "--out", tmp_path / "r", "--quiet"]
    refused(lh(*base, "--base-url", server.base_url, "--model", "standin"), "refused the API key", "--api-key")
    refused(lh(*base, "--base-url", server.base_url, "--model", "gpt-9", "--api-key", "sekret"),
            "does not serve model 'gpt-9' (it serves: standin)")
    refused(lh(*base, "--base-url", server.base_url.removesuffix("/v1"), "--model", "standin", "--api-key",
               "sekret"), "--base-url should be the API root")
    assert not server.requests, "no chat request may be sent before the server checks out"


def test_openai_run_by_task_with_key_and_extra_body_shows_no_library_logs(server, tmp_path):
    body = {"chat_template_kwargs": {"enable_thinking": False}}
    r = lh("run", "--policy", "openai", "--base-url", server.base_url, "--model", "standin", "--api-key", "sekret",
           "--extra-body", json.dumps(body), "--task", TASK, "--out", tmp_path / "r", "--quiet")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert server.requests and all(req["chat_template_kwargs"] == body["chat_template_kwargs"]
                                   for req in server.requests)
    manifest = json.loads((tmp_path / "r" / "run.json").read_text())
    assert manifest["tasks"] == [TASK] and manifest["episodes"] == 1 and "sekret" not in json.dumps(manifest)
    row = json.loads((tmp_path / "r" / "trajectories.jsonl").read_text())
    assert row["task_id"] == TASK and row["grade"]["passed"]


def test_verbose_shows_the_library_logs(server, tmp_path):
    r = lh("-v", "run", "--policy", "openai", "--base-url", server.base_url, "--model", "standin", "--api-key",
           "sekret", "--task", TASK, "--out", tmp_path / "r", "--quiet", "--max-turns", "2")
    assert r.returncode == 0 and "HTTP Request: GET" in r.stderr and "/v1/models" in r.stderr


def test_grammar_of_counts():
    r = lh("tasks", "list", "--seeds", "1", "--family", "downloads_cleanup", "--split", "train")
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "1 task, 1 family, 1 category"


def test_serve_app_help_lists_every_app():
    from longhorizon.apps import APPS

    r = lh("serve-app", "--help")
    listed = " ".join(r.stdout.split())
    assert r.returncode == 0 and "Apps: " + ", ".join(APPS) + "." in listed


@pytest.mark.parametrize("args, phrase", [
    (["serve", "--port", "70000"], "--port"),
    (["serve", "--default-max-tokens", "0"], "--default-max-tokens"),
    (["bench", "tau2", "--domain", "mock", "--base-url", "http://127.0.0.1:1/v1", "--model", "m",
      "--trials", "0", "--out", "x"], "--trials"),
    (["bench", "bfcl", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--limit", "-3", "--out", "x"],
     "--limit"),
])
def test_serve_and_bench_impossible_numbers(args, phrase):
    refused(lh(*args), phrase)
