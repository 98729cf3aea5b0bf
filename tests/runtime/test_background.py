"""Background work (issue 11, item 6): it runs on a thread of its own, off the event loop,
and waits while a search or a context is running."""

import asyncio
import threading

from memoryd.runtime import background
from memoryd.runtime.background import QueryGauge


async def test_runs_on_a_thread_of_its_own():
    loop_thread = threading.get_ident()
    name, ident = await background.run(lambda: (threading.current_thread().name,
                                                threading.get_ident()))
    assert name.startswith("memoryd-background") and ident != loop_thread


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
