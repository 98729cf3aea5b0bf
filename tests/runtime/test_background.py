"""Background work at low priority (issue 11, item 6): it runs on a thread whose OS
priority is lowered, and waits while a search or a context is running."""

import asyncio
import os
import threading

from memoryd.runtime import background
from memoryd.runtime.background import QueryGauge


async def test_runs_on_a_thread_of_lower_priority():
    here = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    got = await background.run(lambda: (
        threading.current_thread().name,
        os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    assert got[0].startswith("memoryd-background")
    assert got[1] >= min(19, here + background.NICE) or got[1] == 19
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == here


async def test_waits_while_a_query_runs():
    g = QueryGauge()
    order = []

    async def query():
        with g.running_query():
            order.append("query start")
            await asyncio.sleep(0.3)
            order.append("query end")

    async def work():
        await asyncio.sleep(0.05)  # the query is running by now
        await g.quiet(max_wait=10)
        order.append("background")

    await asyncio.gather(query(), work())
    assert order == ["query start", "query end", "background"]


async def test_a_query_storm_does_not_starve_it_for_ever():
    g = QueryGauge()
    with g.running_query():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await g.quiet(max_wait=0.2)
        assert 0.15 <= loop.time() - t0 < 5
