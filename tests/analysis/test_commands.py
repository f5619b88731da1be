"""The analysis commands: bad input is a one-line error with exit code 2; `view` writes a
file and prints its path."""

from analysis_synth import call, traj, write_run

from longhorizon.cli import main

WRITE = call("files__write_file", {"path": "out.txt", "content": "x"})


def test_analyze_refuses_runs_with_nothing_in_common(tmp_path, capsys):
    write_run(tmp_path / "a", [traj([("Done.", [])], task="one")])
    write_run(tmp_path / "b", [traj([("Done.", [])], task="two")])
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "nothing to pair" in err and len(err.strip().splitlines()) == 1
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "nope"), "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()


def test_judge_needs_both_url_and_model(tmp_path, capsys):
    write_run(tmp_path / "a", [traj([("Done.", [])])])
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "a"), "--out", str(tmp_path / "r"),
                 "--judge-model", "m"]) == 2
    assert "--judge-base-url" in capsys.readouterr().err


def test_analyze_writes_the_three_files(tmp_path, capsys):
    write_run(tmp_path / "a", [traj([("", [WRITE]), ("Done.", [])], passed=False, final=[False])])
    write_run(tmp_path / "b", [traj([("", [WRITE]), ("Done.", [])])])
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r")]) == 0
    assert "fail→pass 1" in capsys.readouterr().out
    assert "| t#0 | cat | 0.000 | 1.000 | – |" in (tmp_path / "r" / "report.md").read_text()
    assert {p.name for p in (tmp_path / "r").iterdir()} == {"report.html", "report.md", "metrics.json"}


def test_view_writes_html_and_prints_its_path(tmp_path, capsys):
    write_run(tmp_path / "a", [traj([("Write it.", [WRITE]), ("Done.", [])], task="x"),
                               traj([("Done.", [])], task="y")])
    assert main(["view", str(tmp_path / "a"), "--out", str(tmp_path / "v.html")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "v.html")
    html = (tmp_path / "v.html").read_text()
    assert "files__write_file" in html and 'href="#ep-1"' in html
    assert main(["view", str(tmp_path / "a"), "--task", "zzz"]) == 2


def test_an_incomplete_run_is_refused_unless_allowed(tmp_path, capsys):
    write_run(tmp_path / "a", [traj([("Done.", [])], task="x")], expected=2)
    write_run(tmp_path / "b", [traj([("Done.", [])], task="x")])
    args = ["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r")]
    assert main(args) == 2
    assert "1 of 2 episodes finished" in capsys.readouterr().err
    assert main(args + ["--allow-incomplete"]) == 0
    assert "INCOMPLETE" in capsys.readouterr().err


def test_a_record_of_another_schema_is_a_one_line_error(tmp_path, capsys):
    t = traj([("Done.", [])])
    t.schema_version = 99
    write_run(tmp_path / "a", [t])
    assert main(["view", str(tmp_path / "a")]) == 2
    assert "schema version 99" in capsys.readouterr().err
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "a"), "--out", str(tmp_path / "r")]) == 2


X = "<script>alert(1)</script>"


def hostile(sample):
    """A Trajectory whose every string a file could set (and ``sample``, which should be a
    number) is markup."""
    t = traj([(X, [call(X, {X: X}, result=X, error=True)]), (X, [])], task=X, category=X, instruction=X,
             status=X, final=[False])
    t.sample = sample
    t.episode_id = f"{X}-{sample}"
    t.messages.append({"role": X, "content": X})
    t.messages[2]["tool_calls"].append({"id": X, "function": {"name": X}})  # a call never run
    t.provenance = {"policy": {"policy": X}}
    t.grade = type(t.grade)(tuple(type(r)(X + r.id, X, r.weight, r.passed, X) for r in t.grade.results))
    return t


def test_view_and_analyze_escape_every_field_of_the_file(tmp_path, capsys):
    write_run(tmp_path / "a", [hostile(X)])
    write_run(tmp_path / "b", [hostile(X)])
    assert main(["view", str(tmp_path / "a"), "--out", str(tmp_path / "v.html")]) == 0
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r"),
                 "--name-a", X, "--name-b", X]) == 0
    for page in (tmp_path / "v.html", tmp_path / "r" / "report.html"):
        html = page.read_text()
        assert "alert(1)" in html and "<script" not in html.lower(), page
