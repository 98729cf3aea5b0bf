"""Issue 8 item 7: queries degrade gracefully. Past the concurrency and backlog bounds a
search/context request gets 503 with Retry-After at once instead of waiting unboundedly;
other routes are never limited."""

from __future__ import annotations

import asyncio
import socket
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from memoryd.client import ApiError, MemorydClient
from memoryd.config import load_settings
from memoryd.daemon import Daemon
from memoryd.http.limiter import QueryLimiter
from memoryd.paths import resolve_paths
from tests.helpers import AsyncClient, caught_up, ctl, wait_for, write_jsonl


async def gated(aiohttp_client, limiter: QueryLimiter, *routes: tuple[str, str]):
    """A test client whose query routes hold until `release` is set; /v1/status answers at
    once (it is never limited)."""
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({"ok": True})

    async def status(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application(middlewares=[limiter.middleware()])
    for method, path in routes:
        app.router.add_route(method, path, slow)
    app.router.add_get("/v1/status", status)
    return await aiohttp_client(app), release



async def test_issue_8_saturated_queries_get_503_with_retry_after(aiohttp_client):
    limiter = QueryLimiter(concurrency=2, backlog=1, retry_after_s=3)
    client, release = await gated(
        aiohttp_client, limiter, ("POST", "/v1/search"), ("GET", "/v1/context"))
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


async def test_issue_8_a_query_waits_at_most_max_wait_then_503(aiohttp_client):
    """Under sustained load a queue only adds waiting to every answer: a query that
    cannot get a slot within max_wait_s is turned away (503 + Retry-After) instead."""
    limiter = QueryLimiter(concurrency=1, backlog=5, retry_after_s=2, max_wait_s=0.2)
    client, release = await gated(aiohttp_client, limiter, ("POST", "/v1/context"))
    held = asyncio.create_task(client.post("/v1/context"))
    while limiter.running < 1:
        await asyncio.sleep(0.01)
    r = await client.post("/v1/context")  # waits 0.2 s in the backlog, then gives up
    assert r.status == 503 and r.headers["Retry-After"] == "2"
    assert "waited 0.2s" in (await r.json())["error"]["message"]
    st = limiter.as_dict()
    assert (st["running"], st["waiting"], st["rejected"], st["rejected_after_waiting"]) == (
        1, 0, 1, 1)
    release.set()
    assert (await held).status == 200
    assert limiter.as_dict()["running"] == 0


async def test_issue_8_a_freed_slot_goes_to_the_oldest_waiter(aiohttp_client):
    limiter = QueryLimiter(concurrency=1, backlog=3, max_wait_s=30)
    gates = {name: asyncio.Event() for name in ("a", "b", "c")}
    order: list[str] = []

    async def run(request: web.Request) -> web.Response:
        name = request.query["n"]
        order.append(name)
        await gates[name].wait()
        return web.json_response({"ok": True})

    app = web.Application(middlewares=[limiter.middleware()])
    app.router.add_post("/v1/search", run)
    client = await aiohttp_client(app)
    a = asyncio.create_task(client.post("/v1/search?n=a"))
    while order != ["a"]:
        await asyncio.sleep(0.01)
    b = asyncio.create_task(client.post("/v1/search?n=b"))
    while limiter.waiting < 1:
        await asyncio.sleep(0.01)
    c = asyncio.create_task(client.post("/v1/search?n=c"))
    while limiter.waiting < 2:
        await asyncio.sleep(0.01)
    gates["a"].set()
    while order != ["a", "b"]:
        await asyncio.sleep(0.01)
    assert limiter.as_dict()["running"] == 1 and limiter.waiting == 1
    gates["b"].set()
    gates["c"].set()
    assert [x.status for x in await asyncio.gather(a, b, c)] == [200, 200, 200]
    assert order == ["a", "b", "c"]
    assert limiter.as_dict()["running"] == 0 and limiter.as_dict()["admitted"] == 3


async def test_issue_8_a_client_gone_while_waiting_frees_its_place(aiohttp_client):
    limiter = QueryLimiter(concurrency=1, backlog=2, max_wait_s=30)
    client, release = await gated(aiohttp_client, limiter, ("POST", "/v1/search"))
    held = asyncio.create_task(client.post("/v1/search"))
    while limiter.running < 1:
        await asyncio.sleep(0.01)
    gone = asyncio.create_task(client.post("/v1/search"))
    while limiter.waiting < 1:
        await asyncio.sleep(0.01)
    gone.cancel()  # the client hangs up while it waits
    while limiter.waiting:
        await asyncio.sleep(0.01)
    release.set()
    assert (await held).status == 200
    assert (await client.post("/v1/search")).status == 200
    assert limiter.as_dict()["running"] == 0


async def test_issue_8_limiter_settings_show_in_status_memoryctl_and_metrics(
        memoryd_home, sock, src, capsys):
    """[server] query_concurrency / query_backlog / query_max_wait_s (env names as the
    README gives them) configure the daemon's limiter; /v1/status, `memoryctl status` and
    /metrics show it running, waiting and what it turned away."""
    write_jsonl(src / "a.jsonl", [{"role": "user", "content": f"quokka note {i}",
                                   "id": str(i)} for i in range(20)])
    settings = load_settings(None, environ={
        "MEMORYD_SERVER__QUERY_CONCURRENCY": "1", "MEMORYD_SERVER__QUERY_BACKLOG": "0",
        "MEMORYD_SERVER__QUERY_MAX_WAIT_S": "0.5"}, overrides={
        "embed": {"enabled": False},  # lexical: no model paid for here
        "watch": {"sources": [{"agent": "generic", "path": src}], "default_sources": False},
        "server": {"socket": sock, "tcp_port": 0}})
    d = Daemon(settings, resolve_paths(memoryd_home), environ={})
    await d.start()
    try:
        c = AsyncClient(sock)
        st = await wait_for(lambda: caught_up(c))
        assert st["queries"] == {"concurrency": 1, "backlog": 0, "max_wait_s": 0.5,
                                 "running": 0, "waiting": 0, "admitted": 0, "rejected": 0,
                                 "rejected_after_waiting": 0, "mean_wait_ms": 0.0}

        def burst() -> int:  # 16 at once against one slot and no backlog: some are 503
            def one(_: int) -> int:
                try:
                    MemorydClient(sock).request("POST", "/v1/context", {"query": "quokka"})
                    return 200
                except ApiError as e:
                    assert e.status == 503 and e.code == "busy", e
                    return 503

            with ThreadPoolExecutor(16) as pool:
                return list(pool.map(one, range(16))).count(503)

        async def turned_away() -> bool:
            return await asyncio.to_thread(burst) > 0

        # a context request whose body never finishes arriving does not hold the slot
        half = socket.socket(socket.AF_UNIX)
        half.connect(str(sock))
        half.sendall(b"POST /v1/context HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 100\r\n\r\n{\"query\": ")
        try:
            await asyncio.sleep(0.3)
            r = await c.request("POST", "/v1/context", {"query": "quokka"})
            assert r["recalled"], r
        finally:
            half.close()
        await wait_for(turned_away)
        st = await c.status()
        q = st["queries"]
        assert q["rejected"] >= 1 and q["admitted"] >= 1 and q["running"] == 0
        code, out, _ = await ctl(capsys, sock, "status")
        assert code == 0
        assert (f"queries  0/1 running, 0/0 waiting (at most 0.5s); {q['rejected']} turned "
                "away busy (503) since start") in out
        metrics = await c.request("GET", "/metrics")
        assert "memoryd_queries_running 0.0" in metrics
        assert "memoryd_queries_waiting 0.0" in metrics
        rejected = [ln for ln in metrics.splitlines()
                    if ln.startswith("memoryd_queries_rejected_total ")]
        assert rejected and float(rejected[0].split()[1]) >= q["rejected"]
    finally:
        await d.stop()
