"""Background CPU work, out of the way of queries (issue 11, item 6).

Summaries of old sessions, one-liners and upgrades are CPU work nobody waits for, while a
search or a context is what an agent waits for on every prompt. `run(fn)` runs such work
on one thread of its own, off the event loop, a piece at a time (one summary step, one
batch of one-liners).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(1, thread_name_prefix="memoryd-background"))
        return _POOL[0]


async def run(fn: Callable[[], T]) -> T:
    """`fn()` on the background thread."""
    return await asyncio.get_running_loop().run_in_executor(_pool(), fn)
