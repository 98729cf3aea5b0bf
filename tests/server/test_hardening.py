"""Issue 8 (items 5 and 8): bad input is a 4xx naming the field, a full disk is a 507,
half-sent requests are closed, backups are private and go only to the user's folders,
and the files memoryd makes are the user's alone. Real daemon, real sockets, a real
tmpfs for the full disk."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from memoryd.client import ApiError, quote
from memoryd.server.app import make_app
from memoryd.http.services import Services
from memoryd.server.sites import GuardedRunner, start_tcp, start_unix
from memoryd.daemon.store_index import open_store
from tests.helpers import AsyncClient, fill, running_daemon, short_dir, tmpfs, wait_for, write_jsonl


def msgs(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} 你好",
             "id": f"m{i}", "timestamp": 1_700_000_000 + i} for i in range(n)]


async def caught_up(c):
    st = await c.status()
    return st if st["caught_up"] else None


async def api_error(coro) -> ApiError:
    with pytest.raises(ApiError) as e:
        await coro
    return e.value


@pytest.fixture
async def daemon(memoryd_home, sock, src):
    write_jsonl(src / "alpha.jsonl", msgs(6))
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        c = AsyncClient(sock)
        await wait_for(lambda: caught_up(c))
        yield d, c


# -- item 5: every bad input is a 4xx naming the field ----------------------------------

@pytest.mark.parametrize("query,field", [
    ({"cursor": ".:8"}, "cursor"),  # was a 500: could not convert string to float
    ({"cursor": "1.2.3:8"}, "cursor"),
    ({"cursor": "1:99999999999999999999999"}, "cursor"),  # over SQLite's INTEGER
    ({"cursor": "..:"}, "cursor"),
    ({"since": "0001-01-01T00:00:00"}, "since"),
    ({"until": "not a date"}, "until"),
    ({"limit": "many"}, "limit"),
])
async def test_issue_8_bad_sessions_query_is_400_naming_the_field(daemon, query, field):
    _, c = daemon
    e = await api_error(c.request("GET", "/v1/sessions", query=query))
    assert (e.status, e.field) == (400, field), e.message


async def test_issue_8_huge_after_seq_is_400(daemon):
    _, c = daemon
    e = await api_error(c.request("GET", "/v1/sessions/alpha/messages",
                                  query={"after_seq": 1 << 64}))
    assert (e.status, e.field) == (400, "after_seq")


async def test_issue_8_memory_write_on_full_disk_is_507_and_recovers(memoryd_home, sock, src):
    memory_dir = memoryd_home / "data" / "memory"  # MEMORY.md on a small filesystem
    memory_dir.parent.mkdir(parents=True)
    with tmpfs(memory_dir):
        async with running_daemon(memoryd_home, [("generic", src)], sock):
            c = AsyncClient(sock)
            first = await c.request("POST", "/v1/memory/entries", {"content": "keep this"})
            assert first["total"] == 1
            junk = await asyncio.to_thread(fill, memory_dir)
            e = await api_error(c.request("POST", "/v1/memory/entries",
                                          {"content": "a second fact " + "x" * 1900}))
            assert e.status == 507 and e.code == "disk_full", e.message  # was a 500
            assert "disk is full" in e.message
            e = await api_error(c.request("PUT", "/v1/memory", {"content": "y" * 100_000}))
            assert e.status == 507
            mem = await c.request("GET", "/v1/memory")
            assert [x["items"] for x in mem["entries"]] == [["keep this"]]  # nothing lost
            junk.unlink()
            again = await c.request("POST", "/v1/memory/entries", {"content": "second fact"})
            assert again["total"] == 2


async def test_issue_8_backup_on_full_disk_is_507(daemon):
    _, c = daemon
    with tmpfs(Path.home() / "full") as folder:
        await asyncio.to_thread(fill, folder)
        e = await api_error(c.request("POST", "/v1/backup", {"path": str(folder / "b.db")}))
        assert e.status == 507 and "disk is full" in e.message
        assert not (folder / "b.db").exists()  # the partial copy is removed


# -- item 8: backups ---------------------------------------------------------------------

async def test_issue_8_backup_is_0600_and_only_in_the_users_folders(daemon, tmp_path):
    d, c = daemon
    dest = Path.home() / "backups" / "m.db"
    dest.parent.mkdir(mode=0o700)
    r = await c.request("POST", "/v1/backup", {"path": str(dest)})
    assert r["bytes"] > 0 and oct(dest.stat().st_mode & 0o777) == "0o600"
    assert sqlite3.connect(dest).execute("SELECT count(*) FROM units").fetchone()[0] == 6
    into_data = d.paths.data_dir / "copy.db"
    assert (await c.request("POST", "/v1/backup", {"path": str(into_data)}))["bytes"] > 0

    shared = Path.home() / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    link = Path.home() / "link.db"
    link.symlink_to(tmp_path / "elsewhere.db")
    refused = {
        str(dest): 409,  # exists
        "/tmp/m.db": 400,  # outside the home and the data dir
        str(tmp_path / "m.db"): 400,
        str(shared / "m.db"): 400,  # writable by others
        str(link): 409,  # a symlink is never followed
        str(Path.home() / "nope" / "m.db"): 400,
        "relative.db": 400,
        str(Path.home() / ".."): 400,
    }
    for path, status in refused.items():
        e = await api_error(c.request("POST", "/v1/backup", {"path": path}))
        assert (e.status, e.field) == (status, "path"), (path, e.message)
    assert not (tmp_path / "elsewhere.db").exists()
    assert not Path("/tmp/m.db").exists() or Path("/tmp/m.db").stat().st_uid != os.getuid()


# -- item 8: permissions -----------------------------------------------------------------

async def test_issue_8_home_is_0700_and_db_files_0600(tmp_path, sock, src):
    home = tmp_path / "new" / "home"  # neither exists yet
    write_jsonl(src / "a.jsonl", msgs(2))
    async with running_daemon(home, [("generic", src)], sock) as d:
        await wait_for(lambda: caught_up(AsyncClient(sock)))
        files = [d.paths.db, Path(f"{d.paths.db}-wal"), Path(f"{d.paths.db}-shm"),
                 d.paths.token_file, d.paths.lock]
        for f in files:
            assert oct(f.stat().st_mode & 0o777) == "0o600", f
        for dd in (tmp_path / "new", home, *d.paths.owned_dirs()):
            assert oct(dd.stat().st_mode & 0o777) == "0o700", dd


async def test_issue_8_loose_modes_left_by_an_old_version_are_tightened(memoryd_home, sock,
                                                                        src):
    data = memoryd_home / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    db = data / "memoryd.db"
    sqlite3.connect(db).close()
    db.chmod(0o644)
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        assert oct(db.stat().st_mode & 0o777) == "0o600"
        assert oct(data.stat().st_mode & 0o777) == "0o700"


async def test_a_shared_socket_directory_keeps_its_mode(memoryd_home, src):
    """A socket placed in a sticky, world-writable directory (/tmp's kind) must not take the
    directory from everyone else: the socket itself is 0600, the directory stays 1777."""
    with short_dir() as d:
        shared = d / "shared"
        shared.mkdir()
        shared.chmod(0o1777)
        sock = shared / "m.sock"
        async with running_daemon(memoryd_home, [("generic", src)], sock):
            assert (await AsyncClient(sock).health())["status"] == "ok"
            assert oct(sock.stat().st_mode & 0o777) == "0o600"
            assert oct(shared.stat().st_mode & 0o7777) == "0o1777"
        assert oct(shared.stat().st_mode & 0o7777) == "0o1777"


# -- item 8: slowloris -------------------------------------------------------------------

@pytest.fixture
async def guarded(tmp_path):
    """The real app behind the real runner, with short timeouts, on TCP and Unix."""
    store = await open_store(tmp_path / "m.db")

    async def status():
        return {}

    app = make_app(Services(store=store, status=status, version="t"), body_timeout=0.5)
    runner = GuardedRunner(app, header_timeout=0.5, idle_timeout=1.0, shutdown_timeout=0.5)
    await runner.setup()
    with short_dir() as d:
        await start_unix(runner, d / "g.sock")
        _, port = await start_tcp(runner, "127.0.0.1", 0, allow_non_loopback=False)
        try:
            yield runner, port, d / "g.sock"
        finally:
            await runner.cleanup()
            await store.close()


def closed_within(s: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing, or None if it is still open after `seconds`."""
    s.settimeout(seconds)
    got = b""
    try:
        while chunk := s.recv(65536):
            got += chunk
    except TimeoutError:
        return None
    return got


def connect(kind: str, port: int, path: Path) -> socket.socket:
    if kind == "tcp":
        return socket.create_connection(("127.0.0.1", port))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    return s


@pytest.mark.parametrize("kind", ["tcp", "unix"])
async def test_issue_8_half_sent_headers_are_closed(guarded, kind):
    runner, port, path = guarded

    def attack() -> list[bytes | None]:
        socks = [connect(kind, port, path) for _ in range(50)]
        socks[0].sendall(b"")  # sends nothing at all
        for s in socks[1:]:
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        t0 = time.monotonic()
        out = [closed_within(s, 10) for s in socks]
        for s in socks:
            s.close()
        assert time.monotonic() - t0 < 10
        return out

    results = await asyncio.to_thread(attack)
    assert all(r is not None for r in results), "a half-sent request was left open"
    assert runner.timed_out >= 50


async def test_issue_8_half_sent_second_request_and_body_are_closed(guarded):
    runner, port, path = guarded

    def attack() -> tuple[bytes | None, bytes | None]:
        a = connect("tcp", port, path)  # one full request, then half of the next
        a.sendall(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        a.settimeout(5)
        first = a.recv(65536)
        assert b"200 OK" in first
        a.sendall(b"GET /v1/health HTTP/1.1\r\nHost: loc")
        second = closed_within(a, 10)
        b = connect("unix", port, path)  # headers, then a body that never comes
        b.sendall(b"POST /v1/search HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"qu")
        body = closed_within(b, 10)
        a.close()
        b.close()
        return second, body

    second, body = await asyncio.to_thread(attack)
    assert second is not None
    assert body is not None and b" 408 " in body and b"body" in body


async def test_slow_but_complete_requests_still_work(guarded):
    _, port, path = guarded

    def slow() -> bytes:
        with connect("tcp", port, path) as s:
            for part in (b"GET /v1/health HTTP/1.1\r\n", b"Host: localhost\r\n", b"\r\n"):
                s.sendall(part)
                time.sleep(0.1)
            s.settimeout(5)
            return s.recv(65536)

    assert b"200 OK" in await asyncio.to_thread(slow)


# -- issue 28 ----------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["²", "¹", "①", "٣", "1²", "0", "9" * 5000])
async def test_issue_28_why_with_a_non_ascii_digit_is_400_naming_the_line(daemon, line):
    _, c = daemon
    e = await api_error(c.request("GET", f"/v1/memory/why/{quote(line)}"))
    assert (e.status, e.field) == (400, "line"), e.message


async def test_issue_28_backup_into_memoryd_home_itself_is_allowed(daemon, memoryd_home):
    d, c = daemon
    assert d.paths.home == memoryd_home and not memoryd_home.is_relative_to(Path.home())
    assert memoryd_home.stat().st_mode & 0o077 == 0  # the folder is the user's alone
    dest = memoryd_home / "before-upgrade.db"
    r = await c.request("POST", "/v1/backup", {"path": str(dest)})
    assert r["bytes"] > 0 and oct(dest.stat().st_mode & 0o777) == "0o600"
    assert sqlite3.connect(dest).execute("SELECT count(*) FROM units").fetchone()[0] == 6
    shared = memoryd_home / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    for path in (shared / "m.db", memoryd_home.parent / "m.db", Path("/tmp/m28.db")):
        e = await api_error(c.request("POST", "/v1/backup", {"path": str(path)}))
        assert (e.status, e.field) == (400, "path"), (path, e.message)
        assert not path.exists()
