"""The run viewer's parts without a browser: its header counts a run as `eval` does, episode
pages get plain file names whatever a file puts in the ids, and the rows' JSON cannot close
the element that holds it."""

import json
import re

from analysis_synth import traj, write_run

from longhorizon.analysis.run_view import episode_page, episode_row, json_for_script, summarize_rows, write_run_view
from longhorizon.evaluate.metrics import summarize
from longhorizon.rollout.store import open_existing


def test_the_header_counts_pass_at_1_and_reward_as_eval_does(tmp_path):
    trajs = [traj([("Done.", [])], task="a", sample=0), traj([("Done.", [])], task="a", sample=1, final=[False]),
             traj([("Done.", [])], task="b", final=[True, False, False]),
             traj([("Done.", [])], task="c", status="max_tokens")]
    write_run(tmp_path / "run", trajs)
    rows, _ = open_existing(tmp_path / "run").episodes()
    s, expected = summarize_rows([episode_row(t) for t in trajs]), summarize(rows)
    assert s["pass@1"] == expected["overall"]["pass@1"] == 0.5  # (1/2 + 0 + 1) / 3 tasks, not 2/4 episodes
    assert s["mean_reward"] == expected["overall"]["mean_reward"]
    assert s["endings"] == expected["statuses"] == {"completed": 3, "max_tokens": 1}


def test_episode_pages_have_plain_distinct_file_names_whatever_the_ids():
    assert episode_page("sheet_totals-000123", 2) == "sheet_totals-000123-s2.html"
    odd = [("../../etc/passwd", 0), ("a/b", 0), ("javascript:alert(1)", 0), ("<x>", 0), ("A", 0), ("a", "0"),
           ("a", True), ("a", -1), (5, 0), (None, None), ("x" * 500, 0), ("a-s0", 0)]
    names = [episode_page(t, s) for t, s in odd]
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9_.-]*\.html", n) for n in names), names
    assert len(set(names)) == len(names) and names[-1] == "a-s0-s0.html"


def test_two_records_of_one_task_and_sample_get_a_page_each(tmp_path):
    twins = [traj([("Done.", [])], task="t", episode=f"t-{i}") for i in range(2)]
    write_run_view(tmp_path / "v", "run", [t.to_dict() for t in twins])
    assert len(list((tmp_path / "v" / "episodes").iterdir())) == 2


def test_the_rows_json_cannot_close_its_script_element_and_reads_back():
    value = {"rows": [["</script><script>alert(1)</script>", "<!-- x", "a & b > c", "\u2028"]]}
    text = json_for_script(value)
    assert not set("<>&") & set(text)
    assert json.loads(text) == value
