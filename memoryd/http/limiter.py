"""Bounded concurrency for the query endpoints (search, context).

At most `concurrency` queries run at once; up to `backlog` more wait, each for at most
`max_wait_s`. Beyond either bound a query is answered at once with 503 and `Retry-After`,
so a query's latency stays bounded under load (wait + its own run) instead of growing
with the queue, and the store's reader threads never pile up work that would make the
ingest writer compete for the CPU even longer.

Defaults ([server] query_concurrency / query_backlog / query_max_wait_s) are set from
bench/ingest_under_load.py on 2 cores: more running queries only took CPU from the
ingest writer without answering faster, and a long queue only added seconds of waiting
to every answer (Little's law: a queue of 12 ahead of 3 slots is 5 answers' time).

Slots are handed over in arrival order: a query that finishes gives its slot to the
oldest waiter, so a newcomer never overtakes the queue.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

QUERY_PATHS = ("/v1/search", "/v1/context")


class QueryLimiter:
    def __init__(self, concurrency: int = 3, backlog: int = 12, retry_after_s: int = 1,
                 max_wait_s: float = 1.0) -> None:
        self.concurrency = concurrency
        self.backlog = backlog
        self.max_wait_s = max_wait_s
        self.retry_after_s = retry_after_s
        self.running = 0
        self.admitted = 0
        self.rejected = 0  # turned away: backlog full, or waited max_wait_s
        self.rejected_waited = 0  # of those, the ones that waited max_wait_s
        self.wait_s_total = 0.0  # summed over admitted queries
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def _acquire(self) -> str | None:
        """None once a slot is ours; else why not ("full" or "waited")."""
        if self.running < self.concurrency and not self._waiters:
            self.running += 1
            return None
        if len(self._waiters) >= self.backlog:
            return "full"
        slot: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(slot)
        try:
            async with asyncio.timeout(self.max_wait_s):
                await slot
            return None
        except TimeoutError:
            if slot.done() and not slot.cancelled():  # handed over as time ran out: ours
                return None
            self._forget(slot)
            self.rejected_waited += 1
            return "waited"
        except asyncio.CancelledError:  # the client went away while waiting
            if slot.done() and not slot.cancelled():
                self._release()
            else:
                self._forget(slot)
            raise

    def _forget(self, slot: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(slot)
        except ValueError:
            pass

    def _release(self) -> None:
        while self._waiters:
            slot = self._waiters.popleft()
            if not slot.done():
                slot.set_result(None)  # the slot passes to it: `running` is unchanged
                return
        self.running -= 1

    def _busy(self, waited: bool) -> web.Response:
        self.rejected += 1
        why = (f"waited {self.max_wait_s:g}s for one of {self.concurrency} query slots"
               if waited else f"{self.running} queries running and {self.waiting} waiting")
        return web.json_response(
            {"error": {"code": "busy", "message": f"{why}; retry in {self.retry_after_s}s"}},
            status=503, headers={"Retry-After": str(self.retry_after_s)})

    async def run(self, handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                  request: web.Request) -> web.StreamResponse:
        """`handler(request)` once a slot is free; 503 when none comes in time."""
        t0 = time.perf_counter()
        refused = await self._acquire()
        if refused is not None:
            return self._busy(waited=refused == "waited")
        self.admitted += 1
        self.wait_s_total += time.perf_counter() - t0
        try:
            return await handler(request)
        finally:
            self._release()

    def middleware(self) -> Callable[..., Any]:
        """The limiter alone as a middleware (memoryd's app calls `run` from its one
        middleware, server.app.request_middleware)."""
        @web.middleware
        async def limit(request: web.Request,
                        handler: Callable[..., Any]) -> web.StreamResponse:
            if not request.path.startswith(QUERY_PATHS):
                return await handler(request)
            return await self.run(handler, request)

        return limit

    def as_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "backlog": self.backlog,
                "max_wait_s": self.max_wait_s, "running": self.running,
                "waiting": self.waiting, "admitted": self.admitted,
                "rejected": self.rejected, "rejected_after_waiting": self.rejected_waited,
                "mean_wait_ms": round(1000 * self.wait_s_total / self.admitted, 1)
                if self.admitted else 0.0}
