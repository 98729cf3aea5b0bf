"""Binding: the TCP port memoryd reports is the one that answers, learned through
aiohttp's public API."""

import re
from pathlib import Path

from aiohttp import ClientSession, web

import memoryd
from memoryd.server.sites import start_tcp, start_unix


async def test_port_zero_reports_the_bound_port_beside_a_unix_site(sock):
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hi")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await start_unix(runner, sock)
        _, port = await start_tcp(runner, "127.0.0.1", 0, allow_non_loopback=False)
        assert port != 0
        async with ClientSession() as http, http.get(f"http://127.0.0.1:{port}/") as r:
            assert await r.text() == "hi"
    finally:
        await runner.cleanup()


def test_no_private_aiohttp_attributes():
    root = Path(memoryd.__file__).parent
    private = re.compile(r"\b(?:site|runner|server)\._[a-z]\w*")
    found = [f"{p.relative_to(root)}: {m.group(0)}" for p in root.rglob("*.py")
             for m in private.finditer(p.read_text())]
    assert found == []
