"""How a store thread's answer reaches the event loop (`memoryd.store.db.DBThread`): each
awaiting coroutine gets its own answer or error, a cancelled wait or a closed loop does
not stop the thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memoryd.store.db import DBThread, SqliteRunner


@pytest.fixture
def thread(tmp_path):
    t = DBThread(lambda: SqliteRunner(tmp_path / "db.sqlite", True), name="test-db")
    t.start()
    yield t
    t.stop()


async def test_answers_and_errors_reach_the_awaiting_coroutines(thread):
    def fails(conn):
        raise ValueError("bad row")

    got = await asyncio.gather(*(thread.submit(lambda c, i=i: c.execute(
        "SELECT ?", (i,)).fetchone()[0]) for i in range(50)))
    assert got == list(range(50))
    with pytest.raises(ValueError, match="bad row"):
        await thread.submit(fails)
    assert await thread.submit(lambda c: 7) == 7  # the thread goes on


async def test_a_cancelled_wait_leaves_the_thread_answering(thread):
    release = threading.Event()
    fut = thread.submit(lambda c: release.wait(5))
    fut.cancel()
    release.set()
    assert await asyncio.wait_for(thread.submit(lambda c: "next"), 5) == "next"


async def test_a_store_thread_outlives_a_loop_closed_before_its_answer(thread):
    """An answer for a loop closed meanwhile (a tool's, another thread's) is dropped,
    and the thread answers the next loop: `call_soon_threadsafe` on the closed loop
    raised in the store's thread and ended it."""
    release = threading.Event()
    asked: list[asyncio.Future] = []

    def other_loop() -> None:  # a loop of its own, in its own thread
        loop = asyncio.new_event_loop()

        async def ask() -> None:
            asked.append(thread.submit(lambda c: release.wait(5)))

        loop.run_until_complete(ask())
        loop.close()

    t = threading.Thread(target=other_loop)
    t.start()
    t.join(5)
    release.set()
    assert await asyncio.wait_for(thread.submit(lambda c: "still here"), 5) == "still here"
    assert not asked[0].done()

