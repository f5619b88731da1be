"""Running a coroutine from synchronous code."""

from __future__ import annotations

import asyncio
import concurrent.futures


def run_sync(coro):
    """Run ``coro`` to completion from sync code, whether or not an event loop is already running
    in this thread (then it runs on a loop of its own in a worker thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
