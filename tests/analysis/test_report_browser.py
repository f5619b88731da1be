"""The report renders in a real browser (headless Chromium, installed by `make setup`): its
DOM, after rendering, holds a plot per metric, the fail→pass table with the right pair, and
a side-by-side viewer of that pair with the first differing call marked. The screenshot is
kept at test-artifacts/analysis/report.png (git-ignored) for a person to look at."""

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from analysis_synth import call, traj, write_run

from longhorizon.analysis.behaviours import METRICS
from longhorizon.cli import main

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "analysis"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text inside each <table id=...>."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.table_text: dict[str, str] = {}
        self._table: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "table" and attrs.get("id"):
            self._table = attrs["id"]
            self.table_text[self._table] = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._table:
            self.table_text[self._table] += data

    def having(self, tag: str, cls: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag and cls in (a.get("class") or "").split()]


def chromium(*args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--disable-gpu", "--hide-scrollbars"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make setup installs it: apt-get install chromium)")
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
