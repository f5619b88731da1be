"""The run viewer works in a real browser (headless Chromium): from the DOM after its script
ran, the header counts the run as `eval` does, filters and search given in the URL's hash show
exactly the matching rows a page at a time, and agent-written text stays text. A screenshot of
a filtered view is kept at test-artifacts/analysis/viewer.png (git-ignored)."""

import pytest
from analysis_browser import ARTIFACTS, CHROMIUM, NO_CHROMIUM, chromium, dom
from analysis_synth import traj, write_run

from longhorizon.analysis import run_view
from longhorizon.cli import main
from longhorizon.evaluate.metrics import summarize
from longhorizon.rollout.store import open_existing

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)


def episode(task, family, sample=0, passed=True, status="completed", instruction="Do the task."):
    t = traj([("Done.", [])], task=task, sample=sample, passed=None if passed else False,
             final=[True] if passed else [True, False], status=status, instruction=instruction)
    t.family = family
    return t


def make_run(path):
    """Four tasks in two families: a1 (pass, fail), a2 (fail, cut by the token limit), b1 (fail), b2 (pass)."""
    write_run(path, [episode("a1", "fam-a", 0), episode("a1", "fam-a", 1, passed=False),
                     episode("a2", "fam-a", passed=False, status="max_tokens", instruction="Reconcile the ledger."),
                     episode("b1", "fam-b", passed=False), episode("b2", "fam-b", instruction="Reconcile the invoices.")])
    assert main(["view", str(path), "--out", str(path / "view")]) == 0
    return (path / "view" / "index.html").resolve().as_uri()


def shown(el):
    """(task, sample) of each row the table shows."""
    return [(cells[0], cells[1]) for attrs, cells in el.rows if "ep" in attrs.get("class", "").split()]


def test_header_counts_the_run_and_a_filter_shows_only_its_rows(tmp_path, capsys):
    index = make_run(tmp_path / "run")
    el = dom(index + "#failed=1&family=fam-a")
    rows, _ = open_existing(tmp_path / "run").episodes()
    expected = summarize(rows)
    assert el.text["s-pass1"] == f"{expected['overall']['pass@1']:.3f}" == "0.375"
    assert el.text["s-reward"] == f"{expected['overall']['mean_reward']:.3f}"
    assert (el.text["s-episodes"], el.text["s-tasks"]) == ("5", "4")
    assert el.text["s-endings"] == "completed 4, max_tokens 1"
    assert shown(el) == [("a1", "1"), ("a2", "0")]
    assert (el.text["n-shown"], el.text["n-shown-passed"]) == ("2", "0")
    links = [a["href"] for t, a in el.tags if t == "a" and a.get("href", "").startswith("episodes/")]
    assert links == ["episodes/a1-s1.html", "episodes/a2-s0.html"]
    assert shown(dom(index + "#ending=max_tokens")) == [("a2", "0")]

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "viewer.png"
    shot.unlink(missing_ok=True)
    done = chromium(f"--screenshot={shot}", "--window-size=1200,700", index + "#failed=1")
    assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr[-2000:]


def test_search_matches_the_instruction_and_pages_hold_page_size_rows(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_view, "PAGE_SIZE", 2)
    index = make_run(tmp_path / "run")
    assert shown(dom(index + "#q=RECONCILE")) == [("a2", "0"), ("b2", "0")]
    first, last = dom(index), dom(index + "#page=3")
    assert shown(first) == [("a1", "0"), ("a1", "1")] and shown(last) == [("b2", "0")]
    assert last.text["page-of"] == "page 3 of 3" and last.text["n-shown"] == "5"


HOSTILE = "<img src=x onerror=\"document.title='pwned'\"></script><script>document.title='pwned'</script>"


def test_agent_text_stays_text_in_the_rendered_page(tmp_path, capsys):
    t = episode(HOSTILE, HOSTILE, passed=False, status=HOSTILE, instruction=HOSTILE)
    t.category = HOSTILE
    write_run(tmp_path / "run", [t])
    assert main(["view", str(tmp_path / "run"), "--out", str(tmp_path / "view")]) == 0
    el = dom((tmp_path / "view" / "index.html").resolve().as_uri() + "#q=onerror")
    assert el.text["s-endings"] == f"{HOSTILE} 1"
    assert shown(el) == [(HOSTILE, "0")]  # found by search, shown as text
    assert not [t for t, _ in el.tags if t == "img"]
    assert len([t for t, _ in el.tags if t == "script"]) == 2  # the data and the viewer's own script
    assert el.title == f"run {tmp_path / 'run'}"  # no handler ran
