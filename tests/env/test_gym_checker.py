"""The Gymnasium env meets Gymnasium's own checker, samples tasks from a split, and closes cleanly."""

import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import longhorizon.env.gym_env  # noqa: F401  (registers longhorizon/Task-v0)
from longhorizon.env.gym_env import TaskEnv

FAMILIES = ["downloads_cleanup", "expense_claim_audit"]


def test_check_env_passes_with_the_checker_on_and_no_warning():
    env = gymnasium.make("longhorizon/Task-v0", split="train", families=FAMILIES, seeds=2)
    try:
        assert "PassiveEnvChecker" in str(env)  # registered without disable_env_checker
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # any checker warning fails the test
            check_env(env.unwrapped)
    finally:
        env.close()


def test_reset_takes_a_task_id_and_samples_the_split_reproducibly():
    env = TaskEnv(split="train", families=FAMILIES, seeds=3)
    try:
        assert len(env.pool) == 6
        obs, info = env.reset(options={"task_id": "expense_claim_audit-000001"})
        assert info["task_id"] == "expense_claim_audit-000001" and obs[1]["content"] == env.task.instruction
        assert any(t["function"]["name"].startswith("wiki__") for t in info["tools"])  # that task's apps
        drawn = [env.reset(seed=s)[1]["task_id"] for s in range(12)]
        again = [env.reset(seed=s)[1]["task_id"] for s in range(12)]
        assert drawn == again and len(set(drawn)) > 1 and set(drawn) <= {t.id for t in env.pool}
        with pytest.raises(ValueError, match="only 'task_id'"):
            env.reset(options={"taskid": "x"})
    finally:
        env.close()


def test_close_removes_the_world_and_stops_the_loop_and_is_idempotent():
    env = TaskEnv(split="train", families=["downloads_cleanup"], seeds=1)
    env.reset(seed=0)
    world = env.world.root
    assert world.is_dir()
    env.close()
    assert not world.exists() and not env._thread.is_alive() and env._loop.is_closed()
    env.close()  # a second close does nothing
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()
