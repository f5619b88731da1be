"""The analysis commands: bad input is a one-line error with exit code 2; `view` writes a
folder and prints its index's path (and says so where no browser can open it); `analyze`
links each pair to both runs' viewers; no agent-written text becomes markup."""

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from analysis_synth import call, traj, write_run

import longhorizon
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
    assert {p.name for p in (tmp_path / "r").iterdir()} == {"report.html", "report.md", "metrics.json",
                                                             "view-a", "view-b"}


def test_no_views_writes_the_report_alone_and_links_no_episode(tmp_path, capsys):
    write_run(tmp_path / "a", [traj([("", [WRITE]), ("Done.", [])], passed=False, final=[False])])
    write_run(tmp_path / "b", [traj([("", [WRITE]), ("Done.", [])])])
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r"), "--no-views"]) == 0
    assert {p.name for p in (tmp_path / "r").iterdir()} == {"report.html", "report.md", "metrics.json"}
    assert "/episodes/" not in (tmp_path / "r" / "report.html").read_text()


def test_the_report_links_each_pair_to_both_episodes_pages(tmp_path, capsys):
    write_run(tmp_path / "a", [traj([("", [WRITE]), ("Done.", [])], task=t, passed=False, final=[False])
                               for t in ("x", "y")])
    write_run(tmp_path / "b", [traj([("", [WRITE]), ("Done.", [])], task=t) for t in ("x", "y")])
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r")]) == 0
    links = Links()
    links.feed((tmp_path / "r" / "report.html").read_text())
    episodes = [href for href in links.hrefs if "/episodes/" in href]
    # each fail→pass pair: A and B in its table row, and again in its side-by-side view
    assert sorted(episodes) == sorted(2 * [f"view-{s}/episodes/{t}-s0.html" for s in "ab" for t in "xy"])
    assert all((tmp_path / "r" / href).is_file() for href in links.hrefs if not href.startswith("#"))


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs.append(dict(attrs)["href"])


def test_view_writes_an_index_and_one_page_per_episode(tmp_path, capsys):
    long_result = "row " * 5000
    write_run(tmp_path / "a", [traj([("Write it.", [call("files__read_file", {}, long_result)]), ("Done.", [])],
                                    task="x"), traj([("Done.", [])], task="y")])
    assert main(["view", str(tmp_path / "a"), "--out", str(tmp_path / "v")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "v" / "index.html")
    assert sorted(p.name for p in (tmp_path / "v" / "episodes").iterdir()) == ["x-s0.html", "y-s0.html"]
    index = (tmp_path / "v" / "index.html").read_text()
    assert 'href="episodes/x-s0.html"' not in index  # rows are data: the script makes the links
    assert long_result not in index and "files__read_file" not in index  # no transcript in the index
    assert long_result in (tmp_path / "v" / "episodes" / "x-s0.html").read_text()
    assert main(["view", str(tmp_path / "a"), "--task", "zzz"]) == 2


def test_view_open_without_a_browser_prints_the_path_and_says_so(tmp_path):
    write_run(tmp_path / "a", [traj([("Done.", [])])])
    env = {"PATH": str(tmp_path / "no-programs"), "HOME": str(tmp_path),  # no browser, no display, no BROWSER
           "PYTHONPATH": str(Path(longhorizon.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", "import sys; from longhorizon.cli import main; sys.exit(main())",
                           "view", str(tmp_path / "a"), "--open"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "a" / "view" / "index.html")
    assert "no browser found" in done.stderr and str(tmp_path / "a" / "view" / "index.html") in done.stderr


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


class Scripts(HTMLParser):
    """Each <script> element: its attributes and its text."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[dict, str]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.found.append((dict(attrs), ""))

    def handle_data(self, data):
        if self.found and self.lasttag == "script":
            self.found[-1] = (self.found[-1][0], self.found[-1][1] + data)


def test_view_and_analyze_escape_every_field_of_the_file(tmp_path, capsys):
    write_run(tmp_path / "a", [hostile(X)])
    write_run(tmp_path / "b", [hostile(X)])
    assert main(["view", str(tmp_path / "a"), "--out", str(tmp_path / "v")]) == 0
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "r"),
                 "--name-a", X, "--name-b", X]) == 0
    pages = [tmp_path / "r" / "report.html", *(tmp_path / "v" / "episodes").iterdir(),
             *(tmp_path / "r" / "view-a" / "episodes").iterdir()]
    for page in pages:  # episode pages and the report: no script at all
        html = page.read_text()
        assert "alert(1)" in html and "<script" not in html.lower(), page
    for index in (tmp_path / "v" / "index.html", tmp_path / "r" / "view-a" / "index.html"):
        scripts = Scripts()
        scripts.feed(index.read_text())
        (data_attrs, data), (code_attrs, code) = scripts.found  # the rows, as JSON, and the viewer's own script
        assert data_attrs == {"type": "application/json", "id": "episodes-data"} and code_attrs == {}
        assert "<" not in data and json.loads(data)["rows"][0][0] == X  # nothing can close the element
        assert X not in code
