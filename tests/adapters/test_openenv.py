"""An OpenEnv client plays one task to a graded end over openenv-core's real server (WebSocket)."""

import socket
import threading

import pytest

pytest.importorskip("openenv.core", reason="needs openenv-core: runs in .venvs/openenv (`make venv-openenv`; "
                                            "`make test` runs it there)")

import uvicorn  # noqa: E402

from longhorizon.adapters.openenv import LonghorizonAction, LonghorizonEnv, build_app  # noqa: E402
from longhorizon.core.policy import EpisodeContext  # noqa: E402
from longhorizon.policies.scripted import OraclePolicy  # noqa: E402
from longhorizon.tasks.registry import get_task  # noqa: E402

TASK = "downloads_cleanup-000001"


@pytest.fixture(scope="module")
def server():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # connections queue from here on, before uvicorn starts accepting
    app = build_app("train", seeds=2, families=["downloads_cleanup"])
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    srv.should_exit = True
    thread.join(timeout=30)


async def test_openenv_client_plays_the_oracle_to_reward_one(server):
    task = get_task(TASK)
    policy, ctx = OraclePolicy(), EpisodeContext(task)
    async with LonghorizonEnv(base_url=server) as env:
        result = await env.reset(task_id=TASK)
        obs = result.observation
        assert obs.task_id == TASK and obs.messages[-1]["content"] == task.instruction and not result.done
        messages, tools = list(obs.messages), obs.tools
        assert any(t["function"]["name"] == "files__list_dir" for t in tools)
        steps = 0
        while not result.done:
            msg = await policy.act(messages, tools, ctx)
            result = await env.step(LonghorizonAction(content=msg["content"], tool_calls=msg.get("tool_calls", [])))
            messages += result.observation.messages  # only the new messages travel
            steps += 1
        state = await env.state()
    assert result.reward == 1.0 and result.observation.grade["passed"] and result.observation.status == "completed"
    assert steps > 20 and state.tool_calls == steps - 1 and state.status == "completed" and state.task_id == TASK


async def test_doing_nothing_over_openenv_scores_zero(server):
    async with LonghorizonEnv(base_url=server) as env:
        first = await env.reset(seed=3)
        assert first.observation.task_id.startswith("downloads_cleanup-")
        result = await env.step(LonghorizonAction(content="All done."))
    assert result.done and result.reward == 0.0 and result.observation.grade["passed"] is False
