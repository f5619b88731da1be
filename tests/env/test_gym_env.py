"""A Task as a Gymnasium environment: oracle actions earn reward 1, doing nothing earns less."""

import asyncio

from longhorizon.core.policy import EpisodeContext
from longhorizon.env.gym_env import TaskEnv
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.registry import get_task

TASK = "downloads_cleanup-000002"


def test_oracle_through_gym_api_scores_one():
    task = get_task(TASK)
    env = TaskEnv(task)
    try:
        obs, info = env.reset(seed=0)
        assert env.observation_space.contains(obs) and obs[1]["content"] == task.instruction
        assert any(t["function"]["name"] == "files__read_file" for t in info["tools"])
        policy, ctx = OraclePolicy(), EpisodeContext(task)
        steps, terminated = 0, False
        while not terminated:
            action = asyncio.run(policy.act(obs, info["tools"], ctx))
            obs, reward, terminated, truncated, info = env.step(action)
            steps += 1
            assert not truncated
            if not terminated:
                assert reward == 0.0 and obs[-1]["role"] == "tool"
        assert reward == 1.0 and info["grade"]["passed"] and steps > 20
    finally:
        env.close()


def test_reset_gives_a_fresh_world_and_bad_actions_are_readable():
    env = TaskEnv(get_task(TASK))
    try:
        obs, info = env.reset()
        bad = {"role": "assistant", "content": "", "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "files__delete", "arguments": "{not json"}},
            {"id": "2", "type": "function", "function": {"name": "files__delete",
                                                         "arguments": '{"path": "Downloads", "recursive": true}'}},
        ]}
        obs, reward, terminated, truncated, info = env.step(bad)
        assert "not valid JSON" in obs[-2]["content"] and not terminated
        assert not (env.world.workspace / "Downloads").exists()
        obs, info = env.reset()
        assert (env.world.workspace / "Downloads").is_dir(), "reset must fork a fresh World"
        obs, reward, terminated, truncated, info = env.step({"role": "assistant", "content": "All done!"})
        assert terminated and reward < 1.0 and not info["grade"]["passed"]
    finally:
        env.close()


def test_registered_with_gymnasium():
    import gymnasium

    env = gymnasium.make("longhorizon/Task-v0", task_id=TASK)
    try:
        obs, info = env.reset()
        obs, reward, terminated, truncated, info = env.step({"role": "assistant", "content": "done"})
        assert terminated and reward == 0.0 and info["grade"]["passed"] is False
    finally:
        env.close()


def test_cut_actions_are_answered_and_three_in_a_row_truncate_the_episode():
    env = TaskEnv(get_task(TASK))
    try:
        env.reset()
        cut = {"role": "assistant", "content": "I will now list every fi", "finish_reason": "length"}
        for k in range(3):
            obs, reward, terminated, truncated, info = env.step(cut)
            assert not terminated and obs[-1]["role"] == "user" and "cut at the token limit" in obs[-1]["content"]
            assert truncated == (k == 2)
        assert info["trajectory"].status == "max_tokens" and "grade" in info
    finally:
        env.close()
