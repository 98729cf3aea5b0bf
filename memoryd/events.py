"""In-process publish/subscribe of activity (ingested, job started/finished, memory
changed), fanned out to server-sent-event clients. Publishing never blocks: a slow
subscriber loses its oldest events, never stalls the daemon."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

QUEUE_SIZE = 256


class EventBus:
    def __init__(self) -> None:
        self._subscribers: set[asyncio.Queue[dict[str, Any]]] = set()
        self.published = 0

    def publish(self, event_name: str, /, **data: Any) -> None:
        """`event_name` is positional-only, so any keyword (`kind=`, `job=`) is data: a
        keyword named like the parameter once raised TypeError in every job callback."""
        event = {"event": event_name, "ts": time.time(), **data}
        self.published += 1
        for q in list(self._subscribers):
            if q.full():
                q.get_nowait()
            q.put_nowait(event)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_SIZE)
        self._subscribers.add(q)
        try:
            yield q
        finally:
            self._subscribers.discard(q)

    def subscriber_count(self) -> int:
        return len(self._subscribers)
