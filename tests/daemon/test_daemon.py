"""The daemon through its real sockets: lifecycle, watching, live ingest."""

from __future__ import annotations

import asyncio
import shutil
import socket

import pytest

from memoryd.errors import AlreadyRunningError
from tests.helpers import AsyncClient, running_daemon, wait_for, write_jsonl


def msg(i: int, text: str) -> dict:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": text, "id": f"m{i}"}


async def test_health_status_and_socket_mode(memoryd_home, sock, src):
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        c = AsyncClient(sock)
        assert (await c.health())["status"] == "ok"
        assert oct(sock.stat().st_mode & 0o777) == "0o600"
        assert oct(sock.parent.stat().st_mode & 0o777) == "0o700"
        st = await wait_for(lambda: _caught_up(c))
        for key in ("sources", "files", "sessions", "units", "bad_lines", "unread_bytes",
                    "backfill_done", "caught_up", "ingest_lag_ms"):
            assert key in st
        assert d.tcp_port and d.tcp_port > 0
    assert not sock.exists()


async def _caught_up(c):
    st = await c.status()
    return st if st["caught_up"] else None


async def test_backfill_then_live_append_is_searchable(memoryd_home, sock, src):
    write_jsonl(src / "proj" / "s1.jsonl", [msg(0, "the quokka migration plan"),
                                            msg(1, "noted")])
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        r = await c.search(query="quokka")
        assert r["total"] == 1 and r["results"][0]["record_id"] == "m0"
        assert r["results"][0]["session_id"] == "proj/s1"
        assert r["results"][0]["project"] == str(src / "proj")
        write_jsonl(src / "proj" / "s1.jsonl", [msg(2, "appended wombat line")])
        r = await wait_for(lambda: _search_total(c, "wombat"), timeout=5)
        st = await c.status()
        assert st["units"] == 3 and st["ingest_lag_ms"] is not None


async def _search_total(c, q):
    r = await c.search(query=q)
    return r if r["total"] else None


async def test_partial_line_waits_for_its_newline(memoryd_home, sock, src):
    f = src / "s.jsonl"
    write_jsonl(f, [msg(0, "first complete")])
    with open(f, "a") as fh:
        fh.write('{"role": "user", "content": "half written platypus", "id": "m9"')
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        assert (await c.search(query="platypus"))["total"] == 0
        with open(f, "a") as fh:
            fh.write("}\n")
        await wait_for(lambda: _search_total(c, "platypus"), timeout=5)


async def test_file_created_in_new_nested_directory(memoryd_home, sock, src):
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        write_jsonl(src / "a" / "b" / "c" / "deep.jsonl", [msg(0, "nested axolotl")])
        await wait_for(lambda: _search_total(c, "axolotl"), timeout=5)


async def test_source_root_appears_later_and_is_recreated(memoryd_home, sock, tmp_path):
    root = tmp_path / "later"
    async with running_daemon(memoryd_home, [("generic", root)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        write_jsonl(root / "s.jsonl", [msg(0, "appeared narwhal")])
        await wait_for(lambda: _search_total(c, "narwhal"), timeout=5)
        shutil.rmtree(root)
        write_jsonl(root / "t.jsonl", [msg(0, "recreated ocelot")])
        await wait_for(lambda: _search_total(c, "ocelot"), timeout=5)
        assert (await c.status())["units"] == 2


async def test_second_instance_is_refused(memoryd_home, sock, src):
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        with pytest.raises(AlreadyRunningError):
            async with running_daemon(memoryd_home, [("generic", src)], sock):
                pass
        assert (await AsyncClient(sock).health())["status"] == "ok"


async def test_stale_socket_is_replaced(memoryd_home, sock, src):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()  # bound, never listening: a crashed daemon's leftover
    assert sock.exists()
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        assert (await AsyncClient(sock).health())["status"] == "ok"


async def test_path_that_is_not_a_socket_is_refused(memoryd_home, sock, src):
    sock.write_text("not a socket")
    with pytest.raises(AlreadyRunningError, match="not a socket"):
        async with running_daemon(memoryd_home, [("generic", src)], sock):
            pass
    assert sock.read_text() == "not a socket"


async def test_tcp_rejects_foreign_host_header(memoryd_home, sock, src):
    import aiohttp

    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        url = f"http://127.0.0.1:{d.tcp_port}/v1/health"
        token = d.paths.token_file.read_text().strip()
        assert oct(d.paths.token_file.stat().st_mode & 0o777) == "0o600"
        auth = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession() as http:
            async with http.get(url, headers=auth) as r:
                assert r.status == 200
                assert "Access-Control-Allow-Origin" not in r.headers
            async with http.get(url) as r:
                assert r.status == 401
                assert (await r.json())["error"]["code"] == "unauthorized"
            async with http.get(url, headers={"Authorization": "Bearer wrong"}) as r:
                assert r.status == 401
            async with http.get(url, headers={**auth, "Host": "evil.example:80"}) as r:
                assert r.status == 403
                assert (await r.json())["error"]["code"] == "forbidden_host"
            async with http.options(url, headers={**auth, "Origin": "http://evil.example",
                                                  "Access-Control-Request-Method": "GET"}) as r:
                assert "Access-Control-Allow-Origin" not in r.headers


async def test_search_bad_requests_are_400_with_field(memoryd_home, sock, src):
    from memoryd.client import ApiError

    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        cases = [({"query": ""}, "query"), ({"query": "x", "mode": "xor"}, "mode"),
                 ({"query": "x", "max_results": 0}, "max_results"),
                 ({"query": "x", "max_results": "many"}, "max_results"),
                 ({"query": "x", "colour": 1}, "colour"), ({}, "query")]
        for body, field in cases:
            with pytest.raises(ApiError) as e:
                await c.request("POST", "/v1/search", body)
            assert (e.value.status, e.value.field) == (400, field), body
        with pytest.raises(ApiError) as e:
            await c.request("POST", "/v1/search", [1, 2])
        assert e.value.status == 400 and e.value.field == "body"
        with pytest.raises(ApiError) as e:
            await c.request("GET", "/v1/sessions", query={"limit": "-1"})
        assert e.value.status == 400 and e.value.field == "limit"


async def test_search_filters_and_no_match(memoryd_home, sock, src):
    write_jsonl(src / "a.jsonl", [msg(0, "shared keyword alpha")])
    write_jsonl(src / "b.jsonl", [msg(0, "shared keyword beta")])
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        r = await c.search(query="shared keyword", mode="and")
        assert r["total"] == 2 and r["message"] == "2 matches, showing 2"
        r = await c.search(query="shared", session_id="a")
        assert [x["session_id"] for x in r["results"]] == ["a"]
        r = await c.search(query="shared", max_results=1)
        assert r["total"] == 2 and r["shown"] == 1
        r = await c.search(query="zzzznothing")
        assert r["total"] == 0 and r["results"] == []
        sessions = (await c.sessions())["sessions"]
        assert {s["session_id"] for s in sessions} == {"a", "b"}


async def test_stop_is_idempotent(memoryd_home, sock, src):
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        pass
    await d.stop()
    assert not sock.exists()


async def test_non_loopback_bind_needs_explicit_setting(memoryd_home, sock, src):
    from memoryd.config import ConfigError, load_settings
    from memoryd.daemon import Daemon
    from memoryd.paths import resolve_paths

    settings = load_settings(None, environ={}, overrides={
        "embed": {"enabled": False},  # lexical: no model paid for here
        "watch": {"default_sources": False},
        "server": {"socket": sock, "tcp_port": 0, "tcp_host": "0.0.0.0"}})
    d = Daemon(settings, resolve_paths(memoryd_home), environ={})
    with pytest.raises(ConfigError, match="allow_non_loopback"):
        await d.start()
    assert not sock.exists()


async def test_sd_notify_ready_and_watchdog(memoryd_home, sock, src, monkeypatch):
    import asyncio
    import socket as so

    notify = sock.parent / "notify.sock"
    rx = so.socket(so.AF_UNIX, so.SOCK_DGRAM)
    rx.bind(str(notify))
    rx.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", str(notify))
    monkeypatch.setenv("WATCHDOG_USEC", "100000")  # ping every 50 ms
    got: list[bytes] = []
    try:
        async with running_daemon(memoryd_home, [("generic", src)], sock):
            loop = asyncio.get_running_loop()
            while len(got) < 3:
                got.append(await asyncio.wait_for(loop.sock_recv(rx, 64), 5))
    finally:
        rx.close()
    assert got[0] == b"READY=1" and b"WATCHDOG=1" in got[1:]


async def test_default_agent_location_appearing_later_is_watched(memoryd_home, sock, tmp_path):
    from memoryd.config import load_settings
    from memoryd.daemon import Daemon
    from memoryd.paths import resolve_paths

    home = tmp_path / "agenthome"
    home.mkdir()
    settings = load_settings(None, environ={}, overrides={
        "embed": {"enabled": False},  # lexical: no model paid for here
        "watch": {"default_sources": True, "reconcile_seconds": 0.2},
        "server": {"socket": sock, "tcp_port": 0}})
    d = Daemon(settings, resolve_paths(memoryd_home), environ={"HOME": str(home)})
    await d.start()
    try:
        c = AsyncClient(sock)
        st = await wait_for(lambda: _caught_up(c))
        assert not any(s["exists"] for s in st["sources"])
        session = home / ".codex" / "sessions" / "2026" / "03" / "01"
        rollout = session / "rollout-2026-03-01T10-00-00-0195aaaa-bbbb-7ccc-8ddd-eeeeffff0000.jsonl"
        write_jsonl(rollout, [
            {"timestamp": "2026-03-01T09:00:00.000Z", "type": "session_meta",
             "payload": {"id": "0195aaaa-bbbb-7ccc-8ddd-eeeeffff0000", "cwd": "/p",
                         "timestamp": "2026-03-01T09:00:00.000Z"}},
            {"timestamp": "2026-03-01T09:00:01.000Z", "type": "event_msg",
             "payload": {"type": "user_message", "message": "late arriving pangolin"}}])
        r = await wait_for(lambda: _search_total(c, "pangolin"), timeout=10)
        assert r["results"][0]["agent"] == "codex"
    finally:
        await d.stop()


async def test_a_user_edit_to_memory_md_is_noticed_through_the_watch(memoryd_home, sock,
                                                                      src):
    """The watcher covers MEMORY.md's folder, so an edit made outside memoryd is reloaded
    (and announced) at once, not at the next poll (60 s, a safety net)."""
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        await d.memory.add("the deploy script lives in ops/deploy.sh")
        path = d.paths.memory_dir / "MEMORY.md"
        async with d.events.subscribe() as q:
            await asyncio.sleep(0.3)  # a second in mtime: the edit differs in size too
            path.write_text(path.read_text() + "- a line the user typed\n")
            ev = await asyncio.wait_for(_next_memory_event(q), timeout=10)
        assert ev["origin"] == "external"
        assert d.memory.poll_interval >= 60


async def test_a_memory_md_the_user_writes_first_is_noticed_through_the_watch(memoryd_home,
                                                                              sock, src):
    """MEMORY.md's folder exists from the start, so the watch covers it at once: a file the
    user writes before memoryd ever wrote one is reloaded then, not at a later reconciliation
    or poll (it was a race on a loaded machine)."""
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        path = d.paths.memory_dir / "MEMORY.md"
        assert not path.exists()
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        async with d.events.subscribe() as q:
            await asyncio.to_thread(path.parent.mkdir, exist_ok=True)  # (as a user would)
            await asyncio.to_thread(path.write_text, "- the user's own first line\n")
            ev = await asyncio.wait_for(_next_memory_event(q), timeout=10)
        assert ev["origin"] == "external"


async def _next_memory_event(q):
    while True:
        ev = await q.get()
        if ev["event"] == "memory_changed":
            return ev
