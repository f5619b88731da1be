"""One answer to "does this call read or write?", from the apps' annotations, shared by the
graders (which paths a trajectory wrote), the behaviour analysis and RL's repetition penalty."""

import pytest

from longhorizon.analysis.behaviours import metrics
from longhorizon.apps.common import EFFECTS
from longhorizon.apps.kinds import is_read, repeats, tool_effects
from longhorizon.core.trajectory import ToolCallRecord, Trajectory
from longhorizon.tasks.common import WORKSPACE_APPS, written_paths
from longhorizon.train.rl import repeated_call_share

EVERY_TOOL = sorted(tool_effects())


def _traj(*calls) -> Trajectory:
    t = Trajectory(episode_id="t#0", task_id="t", family="f", category="c", split="train", seed=0, sample=0,
                   provenance={})
    t.tool_calls = [ToolCallRecord(turn=i, id=str(i), name=n, arguments=a, result="ok", is_error=False,
                                   duration_ms=0.0) for i, (n, a) in enumerate(calls)]
    return t


def test_every_tool_of_every_app_has_an_effect_and_reads_are_read_and_open():
    assert len(EVERY_TOOL) > 150 and set(tool_effects().values()) <= set(EFFECTS)
    assert all(is_read(n) == (tool_effects()[n] in ("read", "open")) for n in EVERY_TOOL)
    # the cases the name rule got wrong: annotated reads without a reading verb, and a read that marks
    assert all(is_read(n) for n in ("files__file_info", "store__stock_history", "sql__query", "sql__explain"))
    assert is_read("mail__read_message") and EFFECTS[tool_effects()["mail__read_message"]].read_only_hint is False
    assert not is_read("files__make_dir") and not is_read("mail__send_message")


@pytest.mark.parametrize("tool", EVERY_TOOL)
def test_graders_analysis_and_rl_agree_on_whether_a_call_reads(tool):
    """read x, TOOL on x, read x again: after a write the second read verifies it (no repeat for
    the analysis or RL); after a read it repeats the first. A workspace app's writer wrote x."""
    read = ("files__read_file", {"path": "x.txt"})
    t = _traj(read, (tool, {"path": "x.txt", "src": "x.txt", "dst": "x.txt"}), read)
    reads = is_read(tool)
    assert repeats(t.tool_calls)[2] is reads
    assert repeated_call_share(t) == pytest.approx(1 / 3 if reads else 0.0)
    assert metrics(t)["repeated_read_share"] == pytest.approx(1 / 3 if reads else 0.0)
    if tool.split("__")[0] in WORKSPACE_APPS:
        assert set(written_paths(t.tool_calls[1])) == (set() if reads else {"x.txt"})


def test_reading_back_what_was_written_is_not_a_repeat_but_reading_twice_is():
    read, write = ("files__read_file", {"path": "a.txt"}), ("files__write_file", {"path": "a.txt", "content": "x"})
    assert repeats(_traj(read, write, read, read).tool_calls) == [False, False, False, True]
    # a write that names no entity (a mail sent) may change what a listing of that app shows
    listing, send = ("mail__list_messages", {"folder": "Sent"}), ("mail__send_message", {"to": ["a@b.c"]})
    assert repeats(_traj(listing, send, listing).tool_calls) == [False, False, False]
    assert repeats(_traj(listing, read, listing).tool_calls) == [False, False, True]
