"""The loop's share of a request (one middleware, not six): what was cut from it keeps the
API's bytes, its errors and its access rules. Real daemon, real sockets."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest
from aiohttp import web

from memoryd.api import SearchResponse
from memoryd.server.app import make_app
from memoryd.http.services import Services
from memoryd.server.sites import GuardedRunner, start_tcp, start_unix
from memoryd.daemon.store_index import open_store
from tests.helpers import AsyncClient, running_daemon, short_dir, wait_for, write_jsonl


async def raw_post(sock: Path, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request as a client writes it, and the answer's status, headers and bytes (in
    a thread: the daemon runs on this loop)."""
    return await asyncio.to_thread(_raw_post, sock, path, body)


def _raw_post(sock: Path, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock))
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    s.close()
    head, _, payload = got.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(ln.split(": ", 1) for ln in lines[1:])
    return int(lines[0].split()[1]), headers, payload


@pytest.fixture
async def daemon(memoryd_home, sock, src):
    write_jsonl(src / "a.jsonl", [
        {"role": "user", "content": f"kettle descaling note {i} 水壶除垢", "id": f"a{i}",
         "timestamp": 1_700_000_000 + i} for i in range(5)])
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        c = AsyncClient(sock)
        await wait_for(lambda: found(c))
        yield d


async def found(c: AsyncClient) -> dict | None:
    r = await c.search(query="kettle")
    return r if r["total"] == 5 else None


async def test_a_search_answer_is_its_models_json_byte_for_byte(daemon, sock):
    query = json.dumps({"query": "kettle 水壶"}, ensure_ascii=False).encode()
    status, headers, body = await raw_post(sock, "/v1/search", query)
    assert status == 200
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert int(headers["Content-Length"]) == len(body)
    model = SearchResponse.model_validate_json(body)
    assert model.shown == 5
    assert body == model.model_dump_json().encode()  # what the handler sent before
    assert "水壶".encode() in body  # not \u-escaped


@pytest.mark.parametrize(("body", "status", "field", "context"), [
    (b'{"query": "nothing", "query": "kettle"}', 200, None, 200),  # the last key wins
    (b'{"query": "kettle", "max_results": "2"}', 200, None, 400),  # lax ints; context has
    (b'{"query": "kettle", "max_results": 2.0}', 200, None, 400),  # no max_results
    (b'\xef\xbb\xbf{"query": "kettle"}', 200, None, 200),  # json.loads takes a BOM
    (b"", 400, "query", 200),  # an empty body is {}
    (b"   ", 400, "query", 200),
    (b"[]", 400, "body", 400),
    (b"{not json", 400, "body", 400),
    (b'{"query": "kettle", "colour": "red"}', 400, "colour", 400),
    (b'{"query": "kettle", "max_results": 0}', 400, "max_results", 400),
])
async def test_a_body_parsed_in_one_pass_answers_as_the_long_way(daemon, sock, body, status,
                                                                  field, context):
    got, _, payload = await raw_post(sock, "/v1/search", body)
    answer = json.loads(payload)
    assert got == status, answer
    if field is None:
        assert answer["shown"] == (2 if b"max_results" in body else 5), answer
    else:
        assert answer["error"]["field"] == field
    got, _, payload = await raw_post(sock, "/v1/context", body)
    assert got == context, payload


@pytest.fixture
async def served(tmp_path):
    """The real app behind the real runner, with a token, on TCP and Unix; one route
    answers whether the server's end of the connection has SO_KEEPALIVE set."""
    store = await open_store(tmp_path / "m.db")

    async def status():
        return {}

    async def keepalive(request: web.Request) -> web.Response:
        sock = request.transport.get_extra_info("socket")
        return web.json_response(
            {"keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)})

    app = make_app(Services(store=store, status=status, version="t", token="sekrit"))
    app.router.add_get("/t/keepalive", keepalive)  # a test's own route, before the freeze
    runner = GuardedRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    with short_dir() as d:
        await start_unix(runner, d / "g.sock")
        _, port = await start_tcp(runner, "127.0.0.1", 0, allow_non_loopback=False)
        try:
            yield port, d / "g.sock"
        finally:
            await runner.cleanup()
            await store.close()


async def test_tcp_asks_for_the_token_and_sets_no_keepalive(served):
    import aiohttp

    port, path = served
    url = f"http://127.0.0.1:{port}/t/keepalive"
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as r:
            assert r.status == 401
        async with http.get(url, headers={"Authorization": "Bearer sekrit"}) as r:
            assert (r.status, await r.json()) == (200, {"keepalive": 0})
    async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path))) as http:
        async with http.get("http://localhost/t/keepalive") as r:  # the socket's mode is
            assert r.status == 200  # its access control: no token asked
