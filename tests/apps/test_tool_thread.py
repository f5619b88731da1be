"""A slow tool call never stalls the event loop other episodes share, and every call has a deadline."""

import asyncio
import threading

import pytest

from longhorizon.apps.common import READ, AppServer


def slow_app(release: threading.Event, started: threading.Event, name: str = "slowapp") -> AppServer:
    srv = AppServer(name, template_key=f"{name}-{id(release)}")

    @srv.tool(READ)
    def wait_for_release() -> str:
        """Blocks until the test releases it (at most 30 s, so a broken build fails, not hangs)."""
        started.set()
        release.wait(30)
        return "released"

    @srv.tool(READ)
    def quick(n: int = 1) -> str:
        """Answers at once."""
        return f"quick {n}"

    return srv


def text(result) -> str:
    return "".join(c.text for c in result.content)


async def test_a_blocked_call_does_not_stop_another_session_on_the_same_loop():
    release, started = threading.Event(), threading.Event()
    a = slow_app(release, started).session(call_limit_s=None)
    b = slow_app(release, threading.Event()).session(call_limit_s=None)
    try:
        slow = asyncio.create_task(a.call_tool("wait_for_release", {}))
        await asyncio.to_thread(started.wait, 30)
        assert started.is_set()
        other = await b.call_tool("quick", {"n": 7})  # runs while the first call is still blocked
        assert text(other) == "quick 7"
        assert not slow.done()
        release.set()
        assert text(await slow) == "released"
    finally:
        release.set()
        a.close()
        b.close()


async def test_a_call_past_its_deadline_is_an_error_the_agent_can_read():
    release, started = threading.Event(), threading.Event()
    s = slow_app(release, started).session(call_limit_s=0.2)
    try:
        result = await s.call_tool("wait_for_release", {})
        assert result.is_error
        assert "did not finish within 0.2 s" in text(result)
        assert "wait_for_release" in text(result)
    finally:
        release.set()
        s.close()


async def test_calls_stay_in_order_behind_a_call_that_ran_past_its_deadline():
    release, order = threading.Event(), []
    srv = AppServer("ordered", template_key="ordered-test")

    @srv.tool(READ)
    def slow_write() -> str:
        """Blocks until released, then records that it wrote."""
        release.wait(30)
        order.append("slow")
        return "written"

    @srv.tool(READ)
    def next_write() -> str:
        """Records that it wrote."""
        order.append("next")
        return "written"

    s = srv.session(call_limit_s=0.2)
    try:
        assert (await s.call_tool("slow_write", {})).is_error
        s._thread.limit_s = 30  # the next call may wait as long as it needs: only the order is checked
        # the abandoned body still runs: the next call waits behind it (never two writers at once)
        waiting = asyncio.create_task(s.call_tool("next_write", {}))
        await asyncio.sleep(0.05)
        assert order == []
        release.set()
        s_result = await waiting
        assert order == ["slow", "next"]
        assert not s_result.is_error
    finally:
        release.set()
        s.close()


async def test_sync_tools_of_one_session_run_on_one_thread_off_the_loop():
    srv = AppServer("where", template_key="where-test")
    seen = []

    @srv.tool(READ)
    def which() -> str:
        """Records the thread it runs on."""
        seen.append(threading.get_ident())
        return "ok"

    s = srv.session()
    try:
        for _ in range(3):
            await s.call_tool("which", {})
    finally:
        s.close()
    assert len(set(seen)) == 1
    assert seen[0] != threading.get_ident()


@pytest.mark.parametrize("limit", [0.2])
async def test_the_sdk_server_path_has_the_same_deadline(limit):
    from mcp import Client

    release, started = threading.Event(), threading.Event()
    server = slow_app(release, started).build(call_limit_s=limit)
    try:
        async with Client(server) as client:
            result = await client.call_tool("wait_for_release", {})
            assert result.is_error
            assert "did not finish within" in text(result)
    finally:
        release.set()
