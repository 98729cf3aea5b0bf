"""The live tail through a real daemon (issue 11): a line appended to a watched
transcript is found by search over the socket while the index writer has made no commit
since (its counter in status proves it; commits are held by the tail's policy), and a
forget reaches it. Then kill -9 of a daemon holding an uncommitted tail: after a restart
every line is searchable exactly once (nothing lost, nothing doubled)."""

from __future__ import annotations

import signal
import sqlite3

import pytest

from memoryd.client import MemorydClient
from tests.helpers import AsyncClient, running_daemon, short_dir, wait_for, write_jsonl
from tests.reliability.kill9 import _wait, start

HELD = {"MEMORYD_INDEX__TAIL_COMMIT_S": "3600", "MEMORYD_INDEX__TAIL_COMMIT_DOCS": "1000000"}


def lines(prefix, n, sid):
    return [{"role": "user" if i % 2 == 0 else "assistant", "id": f"{prefix}:{i}",
             "content": f"{prefix} line {i} about the deploy {prefix}tok{i}"}
            for i in range(n)]


async def test_an_append_is_found_over_the_socket_before_any_commit(tmp_path, monkeypatch):
    for k, v in HELD.items():
        monkeypatch.setenv(k, v)
    src = tmp_path / "src"
    write_jsonl(src / "p" / "a.jsonl", lines("old", 30, "a"))
    with short_dir() as d:
        sock = d / "m.sock"
        async with running_daemon(tmp_path / "home", [("generic", src)], sock):
            c = AsyncClient(sock)
            st = await wait_for(lambda: _caught(c, 30), 60)
            commits = st["index"]["commits"]
            write_jsonl(src / "p" / "b.jsonl", lines("fresh", 3, "b"))
            r = await wait_for(lambda: _found(c, "freshtok1"), 60)
            assert r["total"] == 1
            st = await c.status()
            assert st["index"]["commits"] == commits, st["index"]  # found in the tail
            assert st["index"]["tail"] >= 3
            # a forget of the appended session: gone from search, still no commit
            sid = r["results"][0]["session_id"]
            await c.forget(sid)
            await wait_for(lambda: _gone(c, "freshtok1"), 60)
            assert (await c.status())["index"]["commits"] == commits


async def _caught(c, n):
    st = await c.status()
    return st if st["caught_up"] and st["units"] >= n else None


async def _found(c, q):
    r = await c.search(query=q)
    return r if r["total"] else None


async def _gone(c, q):
    return (await c.search(query=q))["total"] == 0


@pytest.mark.reliability
@pytest.mark.timeout(900)
def test_kill_9_with_an_uncommitted_tail_loses_and_doubles_nothing(tmp_path, monkeypatch):
    for k, v in HELD.items():
        monkeypatch.setenv(k, v)
    src, home = tmp_path / "src", tmp_path / "home"
    home.mkdir()
    write_jsonl(src / "p" / "a.jsonl", lines("old", 250, "a"))  # a bulk pass: committed
    with short_dir() as d:
        sock = d / "m.sock"
        client = MemorydClient(sock, timeout=10)
        p = start(home, src, sock)
        try:
            st = _wait(lambda: (s := client.status())["caught_up"] and s["units"] >= 250
                       and s, 300)
            commits = st["index"]["commits"]
            for k in range(4):  # live appends, each its own small pass
                write_jsonl(src / "p" / "b.jsonl", lines(f"tail{k}", 5, "b"))
                _wait(lambda k=k: client.search(query=f"tail{k}tok4")["total"], 120)
            st = client.status()
            assert st["index"]["commits"] == commits and st["index"]["tail"] >= 20
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait(30)
        p = start(home, src, sock)
        try:
            _wait(lambda: client.status()["caught_up"], 300)
            for k in range(4):
                for i in range(5):
                    r = client.search(query=f"tail{k}tok{i}")
                    assert r["total"] == 1, (k, i, r)
            old = client.search(query="oldtok7")
            assert old["total"] == 1
            st = client.status()
            assert st["units"] == 270 and st["index"]["units"] == 270, st["index"]
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
    db = sqlite3.connect(home / "data" / "memoryd.db")
    try:
        assert db.execute("SELECT count(*) FROM units").fetchone()[0] == 270
    finally:
        db.close()
