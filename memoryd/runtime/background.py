"""Background CPU work, out of the way of queries (issue 11, item 6).

Summaries of old sessions, one-liners and upgrades are CPU work nobody waits for, while a
search or a context is what an agent waits for on every prompt. `run(fn)` runs such work
on one thread of its own, off the event loop, and before each piece it waits while
queries are in flight (`QUERIES`, counted by search and context). The pieces are small
(one summary step, one batch of one-liners): the wait between them is the yield.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

MAX_DEFER_S = 5.0  # a query storm does not starve background work for ever


class QueryGauge:
    """How many queries are running; background work waits for zero."""

    def __init__(self) -> None:
        self.running = 0
        self._lock = threading.Lock()
        self._idle: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    @contextlib.contextmanager
    def running_query(self):  # type: ignore[no-untyped-def]
        with self._lock:
            self.running += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1
                waiters = self._idle if self.running == 0 else []
                if waiters:
                    self._idle = []
            for loop, ev in waiters:
                with contextlib.suppress(RuntimeError):  # that loop is closed
                    loop.call_soon_threadsafe(ev.set)

    async def quiet(self, max_wait: float = MAX_DEFER_S) -> None:
        """Return once no query runs (or after `max_wait`)."""
        with self._lock:
            if self.running == 0:
                return
            ev = asyncio.Event()
            self._idle.append((asyncio.get_running_loop(), ev))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max_wait):
                await ev.wait()


QUERIES = QueryGauge()


_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(1, thread_name_prefix="memoryd-background"))
        return _POOL[0]


async def run(fn: Callable[[], T]) -> T:
    """`fn()` on the background thread, once no query is running."""
    await QUERIES.quiet()
    return await asyncio.get_running_loop().run_in_executor(_pool(), fn)
