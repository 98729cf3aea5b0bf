"""How a store thread's answer reaches the event loop (`memoryd.store.db.LoopWake`): a
byte on a pipe the loop watches, written with the GIL released."""

from __future__ import annotations

import asyncio
import gc
import os
import threading

import pytest

from memoryd.store.db import DBThread, LoopWake, SqliteRunner


@pytest.fixture
def thread(tmp_path):
    t = DBThread(lambda: SqliteRunner(tmp_path / "db.sqlite", True), name="test-db")
    t.start()
    yield t
    t.stop()


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"))


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


def test_one_pipe_per_loop_closed_with_the_loop(thread):
    """No file descriptor outlives its loop (a test suite makes a loop per test)."""
    thread.call(lambda c: c.execute("SELECT 1"))  # the database's own files open
    before = _open_fds()
    loop = asyncio.new_event_loop()
    try:
        for _ in range(3):
            assert loop.run_until_complete(_ask(thread)) == 1
        wake = LoopWake.of(loop)
        assert LoopWake.of(loop) is wake  # one per loop, whatever the threads
        assert len(_open_fds() - before) >= 2  # the pipe (and the loop's own fds)
    finally:
        loop.close()
    del loop, wake
    gc.collect()
    left = _open_fds() - before
    assert not left, [os.readlink(f"/proc/self/fd/{fd}") for fd in left]


async def _ask(thread: DBThread) -> int:
    return await thread.submit(lambda c: 1)
