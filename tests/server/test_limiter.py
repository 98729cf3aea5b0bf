"""Issue 8 item 7: queries degrade gracefully. Past the concurrency and backlog bounds a
search/context request gets 503 with Retry-After at once instead of waiting unboundedly;
other routes are never limited."""

from __future__ import annotations

import asyncio

from aiohttp import web

from memoryd.server.limiter import QueryLimiter


async def test_issue_8_saturated_queries_get_503_with_retry_after(aiohttp_client):
    limiter = QueryLimiter(concurrency=2, backlog=1, retry_after_s=3)
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({"ok": True})

    async def status(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application(middlewares=[limiter.middleware()])
    app.router.add_post("/v1/search", slow)
    app.router.add_get("/v1/context", slow)
    app.router.add_get("/v1/status", status)
    client = await aiohttp_client(app)
    held = [asyncio.create_task(client.post("/v1/search")) for _ in range(2)]
    held.append(asyncio.create_task(client.get("/v1/context")))  # waits in the backlog
    while limiter.waiting < 1:
        await asyncio.sleep(0.01)
    r = await client.post("/v1/search")
    assert r.status == 503 and r.headers["Retry-After"] == "3"
    assert (await r.json())["error"]["code"] == "busy"
    assert (await client.get("/v1/status")).status == 200  # not a query: never limited
    release.set()
    assert [x.status for x in await asyncio.gather(*held)] == [200, 200, 200]
    assert (await client.post("/v1/search")).status == 200
    assert limiter.as_dict()["rejected"] == 1
