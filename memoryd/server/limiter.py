"""Bounded concurrency for the query endpoints (search, context).

Defaults (3 running, 12 waiting) are set from bench/ingest_under_load.py on 2 cores:
more concurrent queries only took CPU from the ingest writer without answering faster.

At most `concurrency` queries run at once and at most `backlog` wait; beyond that a
query is answered at once with 503 and `Retry-After`, so latency stays bounded under
load instead of growing with the queue, and the store's reader threads never pile up
work that would make the ingest writer compete for the CPU even longer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

QUERY_PATHS = ("/v1/search", "/v1/context")


class QueryLimiter:
    def __init__(self, concurrency: int = 3, backlog: int = 12, retry_after_s: int = 1) -> None:
        self._slots = asyncio.Semaphore(concurrency)
        self.concurrency = concurrency
        self.backlog = backlog
        self.retry_after_s = retry_after_s
        self.waiting = 0
        self.rejected = 0

    def middleware(self) -> Callable[..., Any]:
        @web.middleware
        async def limit(request: web.Request,
                        handler: Callable[..., Any]) -> web.StreamResponse:
            if not request.path.startswith(QUERY_PATHS):
                return await handler(request)
            if self._slots.locked() and self.waiting >= self.backlog:
                self.rejected += 1
                return web.json_response(
                    {"error": {"code": "busy", "message":
                               f"{self.concurrency} queries running and {self.waiting} "
                               f"waiting; retry in {self.retry_after_s}s"}},
                    status=503, headers={"Retry-After": str(self.retry_after_s)})
            self.waiting += 1
            try:
                await self._slots.acquire()
            finally:
                self.waiting -= 1
            try:
                return await handler(request)
            finally:
                self._slots.release()

        return limit

    def as_dict(self) -> dict[str, int]:
        return {"concurrency": self.concurrency, "backlog": self.backlog,
                "waiting": self.waiting, "rejected": self.rejected}
