"""The control-plane routes through the daemon's real Unix socket."""

from __future__ import annotations

import asyncio
import io
import json

import aiohttp
import pytest

from memoryd.client import ApiError
from tests.helpers import AsyncClient, running_daemon, wait_for, write_jsonl


def msgs(prefix: str, n: int, ts0: int = 1_700_000_000) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{prefix} message {i}",
             "id": f"{prefix}{i}", "timestamp": ts0 + i} for i in range(n)]


async def caught_up(c):
    st = await c.status()
    return st if st["caught_up"] else None


async def api_error(coro) -> ApiError:
    with pytest.raises(ApiError) as e:
        await coro
    return e.value


@pytest.fixture
async def daemon(memoryd_home, sock, src):
    write_jsonl(src / "alpha.jsonl", msgs("alpha", 6, 1_700_000_000))
    write_jsonl(src / "beta" / "x.jsonl", msgs("beta", 4, 1_700_100_000))
    write_jsonl(src / "gamma.jsonl", msgs("gamma", 2, 1_700_200_000))
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        c = AsyncClient(sock)
        await wait_for(lambda: caught_up(c))
        yield d, c


async def test_sessions_list_filters_and_paging(daemon):
    _, c = daemon
    page = await c.request("GET", "/v1/sessions", query={"limit": 2})
    assert [s["session_id"] for s in page["sessions"]] == ["gamma", "beta/x"]
    page2 = await c.request("GET", "/v1/sessions", query={"limit": 2,
                                                          "cursor": page["next_cursor"]})
    assert [s["session_id"] for s in page2["sessions"]] == ["alpha"]
    assert page2["next_cursor"] is None
    since = await c.request("GET", "/v1/sessions", query={"since": "2023-11-15T00:00:00+00:00"})
    assert {s["session_id"] for s in since["sessions"]} == {"beta/x", "gamma"}
    until = await c.request("GET", "/v1/sessions", query={"until": 1_700_050_000})
    assert [s["session_id"] for s in until["sessions"]] == ["alpha"]


async def test_session_show_and_messages(daemon, src):
    _, c = daemon
    s = await c.request("GET", "/v1/sessions/beta/x")
    assert s["roles"] == {"user": 2, "assistant": 2}
    assert s["files"] == [str(src / "beta" / "x.jsonl")]
    m = await c.request("GET", "/v1/sessions/alpha/messages", query={"after_seq": 2, "limit": 3})
    assert [x["seq"] for x in m["messages"]] == [3, 4, 5]
    assert m["next_after_seq"] == 5
    m = await c.request("GET", "/v1/sessions/alpha/messages", query={"after_seq": 5})
    assert [x["record_id"] for x in m["messages"]] == ["alpha5"] and m["next_after_seq"] is None
    e = await api_error(c.request("GET", "/v1/sessions/nope"))
    assert (e.status, e.code) == (404, "not_found")


async def test_forget_deletes_everywhere_and_stays_forgotten(daemon, src):
    d, c = daemon
    assert (await c.search(query="alpha"))["total"] == 6
    await c.request("POST", "/v1/sessions/alpha/summarize", query={"wait": "true"})
    assert (await c.request("GET", "/v1/sessions/alpha/summary"))["summary"]
    pk = await d.store.read(lambda conn: conn.execute(
        "SELECT id FROM sessions WHERE session_id = 'alpha'").fetchone()[0])
    await d.store.write(lambda conn: conn.execute(
        "INSERT INTO jobs (kind, target, next_run_at, created_at, updated_at) "
        "VALUES ('one_liners', ?, 9e12, 0, 0)", (f"session:{pk}",)))
    out = await c.request("DELETE", "/v1/sessions/alpha")
    assert out["units_deleted"] == 6
    left = await d.store.read(lambda conn: conn.execute(
        "SELECT (SELECT count(*) FROM summaries), (SELECT count(*) FROM jobs "
        "WHERE target = ? AND state = 'pending')", (f"session:{pk}",)).fetchone())
    assert tuple(left) == (0, 0)
    assert (await c.search(query="alpha"))["total"] == 0
    await api_error(c.request("GET", "/v1/sessions/alpha"))
    await d.store.indexed()
    units = await d.store.read(lambda conn: conn.execute(
        "SELECT count(*) FROM units").fetchone()[0])
    assert units == d.store.index.docs() == 6  # beta + gamma only, the index consistent
    await c.request("POST", "/v1/jobs/reconcile/run", {})
    (src / "alpha.jsonl").touch()
    await c.request("POST", "/v1/jobs/reconcile/run", {})
    await wait_for(lambda: caught_up(c))
    assert (await c.search(query="alpha"))["total"] == 0  # not re-ingested
    write_jsonl(src / "alpha.jsonl", [{"role": "user", "content": "alpha grows again",
                                       "id": "alpha99"}])
    r = await wait_for(lambda: _hits(c, "grows"))
    assert r["total"] == 1 and (await c.search(query="alpha"))["total"] == 1


async def _hits(c, q):
    r = await c.search(query=q)
    return r if r["total"] else None


async def test_ingest_on_demand_and_its_errors(daemon, tmp_path, memoryd_home):
    _, c = daemon
    other = tmp_path / "elsewhere"
    write_jsonl(other / "late.jsonl", [{"role": "user", "content": "ingested on demand kiwi",
                                        "id": "k1"}])
    r = await c.request("POST", "/v1/ingest", {"path": str(other), "wait": True})
    assert r == {"path": str(other), "files": 1, "new_units": 1, "ignored": []}
    assert (await c.search(query="kiwi"))["total"] == 1
    for body, field in [({"path": "relative/path"}, "path"),
                        ({"path": str(tmp_path / "missing")}, "path"),
                        ({"path": str(memoryd_home)}, "path"),
                        ({"path": str(other) + "/../../" + memoryd_home.name}, "path"),
                        ({"path": "/tmp/x\u0000y"}, "path"),
                        ({"path": str(other), "agent": "vim"}, "agent"),
                        ({"path": 3}, "path"), ({}, "path")]:
        e = await api_error(c.request("POST", "/v1/ingest", body))
        assert (e.status, e.field) == (400, field), body


async def test_jobs(daemon):
    _, c = daemon
    assert "reconcile" in (await c.request("GET", "/v1/jobs"))["jobs"]
    r = await c.request("POST", "/v1/jobs/reconcile/run")
    assert r["job"] == "reconcile" and "queued" in r["result"]
    e = await api_error(c.request("POST", "/v1/jobs/nope/run", {}))
    assert e.status == 404 and "reconcile" in e.message


async def test_bad_requests_name_the_field(daemon):
    _, c = daemon
    cases = [
        ("GET", "/v1/sessions", {"limit": "lots"}, "limit"),
        ("GET", "/v1/sessions", {"limit": 100000}, "limit"),
        ("GET", "/v1/sessions", {"since": "yesterday-ish"}, "since"),
        ("GET", "/v1/sessions", {"cursor": "'; DROP TABLE units"}, "cursor"),
        ("GET", "/v1/sessions", {"colour": "red"}, "colour"),
        ("GET", "/v1/sessions/alpha/messages", {"after_seq": -1}, "after_seq"),
    ]
    for method, path, query, field in cases:
        e = await api_error(c.request(method, path, query=query))
        assert (e.status, e.field) == (400, field), (path, query)


async def test_malformed_and_oversized_bodies(daemon, sock):
    conn = aiohttp.UnixConnector(path=str(sock))
    async with aiohttp.ClientSession(connector=conn) as http:
        async with http.post("http://localhost/v1/search", data=b"{not json",
                             headers={"Content-Type": "application/json"}) as r:
            body = await r.json()
            assert r.status == 400 and body["error"]["field"] == "body"
        big = json.dumps({"query": "x" * (2 << 20)})
        async with http.post("http://localhost/v1/search", data=io.BytesIO(big.encode())) as r:
            assert r.status in (400, 413)
            assert "error" in await r.json()
        async with http.post("http://localhost/v1/search", data=b"\xff\xfe") as r:
            assert r.status == 400
        async with http.get("http://localhost/v1/nowhere") as r:
            assert r.status == 404 and (await r.json())["error"]["code"] == "not_found"
        async with http.put("http://localhost/v1/search") as r:
            assert r.status == 405 and "error" in await r.json()


async def test_events_stream(daemon, sock, src):
    conn = aiohttp.UnixConnector(path=str(sock))
    async with aiohttp.ClientSession(connector=conn) as http:
        async with http.get("http://localhost/v1/events") as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            assert await r.content.readline() == b": connected\n"
            write_jsonl(src / "gamma.jsonl", [{"role": "user", "content": "new", "id": "g9"}])
            line = await asyncio.wait_for(_next_event(r, "ingested"), 10)
            assert line["units"] == 1


async def _next_event(r, kind):
    """The next event of `kind`: the stream carries every event, and the daemon's own
    work may come first (the fixture's sessions' jobs ending, `job_done`, on a busy
    machine; issue 28)."""
    while True:
        line = await r.content.readline()
        if line.startswith(b"data: ") and (event := json.loads(line[6:]))["event"] == kind:
            return event


async def test_metrics_and_openapi(daemon, sock):
    _, c = daemon
    text = await c.request("GET", "/metrics")
    assert "memoryd_units 12.0" in text
    assert "memoryd_request_seconds_bucket" in text
    assert "memoryd_ingest_queue_depth" in text
    doc = await c.request("GET", "/v1/openapi.json")
    assert doc["openapi"].startswith("3.")
    assert "/v1/search" in doc["paths"] and "SearchRequest" in doc["components"]["schemas"]
    body = doc["paths"]["/v1/search"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["$ref"].endswith("SearchRequest")


async def test_one_liners_come_back_with_search_results(daemon, src):
    _, c = daemon
    output = "\n".join(f"line {i}: compiled module quasar_{i}" for i in range(60))
    write_jsonl(src / "tools.jsonl", [
        {"role": "user", "content": "build the project", "id": "t0"},
        {"role": "assistant", "content": "", "id": "t1", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "exec_command", "arguments": '{"cmd": "make"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "exec_command", "content": output,
         "id": "t2"}])
    await wait_for(lambda: _hits(c, "quasar_7"))
    r = await c.run_job("one_liners", {"session_id": "tools"})
    assert r["result"]["state"] == "done"
    hit = (await c.search(query="quasar_7"))["results"][0]
    assert hit["tool_name"] == "exec_command" and hit["one_liner"]
    assert hit["one_liner"] != output  # a line, not the whole output
