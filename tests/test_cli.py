"""The command line: JSON listings, one-line errors with exit code 2 on bad input."""

import json
import subprocess
import sys

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
