"""The trajectory viewer shows how an episode ended and marks replies the token limit cut."""

from longhorizon.analysis.viewer import trajectory_html
from longhorizon.core.trajectory import Trajectory


def test_a_cut_reply_is_marked_and_the_ending_shown():
    traj = Trajectory(
        episode_id="t-000000#0", task_id="t-000000", family="t", category="c", split="train", seed=0, sample=0,
        provenance={"policy": {"policy": "openai"}}, status="max_tokens",
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "do it"},
                  {"role": "assistant", "content": "Here is the whole fi"},
                  {"role": "user", "content": "Error: your reply was cut at 1,024 tokens"},
                  {"role": "assistant", "content": "Done."}],
        turns=[{"turn": 0, "finish_reason": "length", "completion_tokens": 1024}, {"turn": 1}],
    )
    html = trajectory_html(traj)
    assert "ended: max_tokens" in html
    assert html.count("cut at 1024 tokens</b>") == 1
    assert html.index("cut at 1024 tokens</b>") < html.index("Here is the whole fi") < html.index("Done.")
