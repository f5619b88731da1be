"""The report renders in a real browser (headless Chromium, installed by `make setup`): its
DOM, after rendering, holds a plot per metric, the fail→pass table with the right pair, and
a side-by-side viewer of that pair with the first differing call marked. The screenshot is
kept at test-artifacts/analysis/report.png (git-ignored) for a person to look at."""

import pytest
from analysis_browser import ARTIFACTS, CHROMIUM, NO_CHROMIUM, Elements, chromium
from analysis_synth import call, traj, write_run

from longhorizon.analysis.behaviours import METRICS
from longhorizon.cli import main


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_report_renders_plots_fail_pass_table_and_pair_viewer(tmp_path):
    write_ = call("files__write_file", {"path": "out.txt", "content": "<script>alert(1)</script>"})
    verify = call("files__read_file", {"path": "out.txt"}, "x" * 3000)  # long: folded
    broken = call("files__write_file", {"path": "out.txt"}, "error: content is required", error=True)
    a = [traj([("", [broken]), ("Done.", [])], task="fixme", passed=False, final=[False]),
         traj([("", [write_]), ("Done.", [])], task="same")]
    b = [traj([("Write the file.", [write_]), ("Check it.", [verify]), ("Done.", [])], task="fixme"),
         traj([("", [write_]), ("Done.", [])], task="same")]
    write_run(tmp_path / "a", a)
    write_run(tmp_path / "b", b)
    assert main(["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "report.html").resolve()

    dom = chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    el = Elements()
    el.feed(dom.stdout)
    plots = el.having("svg", "metric-plot")
    assert {p["data-metric"] for p in plots} == set(METRICS)
    assert el.having("svg", "forest-plot")
    assert "fixme#0" in el.table_text["fail-pass"] and "same#0" not in el.table_text["fail-pass"]
    views = el.having("section", "pair-view")
    assert [v["id"] for v in views] == ["pair-fixme-s0"]
    assert {"href": "#pair-fixme-s0"} in [a for t, a in el.tags if t == "a"]  # the table links to the view
    assert el.having("div", "side-a") and el.having("div", "side-b")
    assert len(el.having("div", "diverge")) == 2  # call #0 differs: marked on both sides
    assert el.having("div", "error")  # A's failed call is highlighted
    assert not [t for t, _ in el.tags if t == "script"]  # the agent's text stays text

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    done = chromium(f"--screenshot={shot}", "--window-size=1400,2000", page.as_uri())
    assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr[-2000:]
