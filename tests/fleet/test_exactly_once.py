"""Exactly-once ingest across machines (issue 14 item 3), against a real PostgreSQL:
two daemons (two homes, two roots, two machine names, one namespace) holding
identically named transcripts make two sessions and see each other's units; the store
keys cursors by (machine, path)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from memoryd.client import ApiError, DaemonNotRunning, MemorydClient
from memoryd.daemon.store_index import open_store
from memoryd.store.files import Cursor, get_cursor, live_cursors, save_cursor
from memoryd.store.sessions import session_pk
from memoryd.store_target import StoreTarget
from tests.fleet.daemons import fleet_daemons, msg
from tests.helpers import SLOWDOWN as SLOW
from tests.helpers import AsyncClient, short_dir, wait_for, write_jsonl


async def test_same_named_transcripts_on_two_machines_are_two_sessions(tmp_path, pg_url,
                                                                       memoryd_home):
    roots = {}
    for m, words in (("laptop", ["quokka plan on the laptop", "laptop reply"]),
                     ("server", ["wombat build on the server", "server reply"])):
        roots[m] = tmp_path / m / "src"
        write_jsonl(roots[m] / "chat.jsonl", [msg(i, w) for i, w in enumerate(words)])
    with short_dir() as d:
        async with fleet_daemons(tmp_path, roots, d, pg_url) as fleet:
            daemons = {m: c for m, (_, c) in fleet.items()}
            # each daemon reads the store: both machines' units, two sessions named "chat"
            for c in daemons.values():
                st = await wait_for(lambda c=c: _with_units(c, 4))
                assert st["sessions"] == 2
            with psycopg.connect(pg_url) as conn:
                rows = conn.execute(
                    "SELECT s.machine, s.session_id, count(u.id) FROM memoryd_team.sessions s "
                    "JOIN memoryd_team.units u ON u.session_pk = s.id "
                    "GROUP BY s.machine, s.session_id ORDER BY s.machine").fetchall()
                files = conn.execute("SELECT machine, path, \"offset\" > 0 FROM "
                                     "memoryd_team.files ORDER BY machine").fetchall()
            assert rows == [("laptop", "chat", 2), ("server", "chat", 2)]
            assert [(f[0], f[2]) for f in files] == [("laptop", True), ("server", True)]
            # an append on one machine reaches its own session only
            write_jsonl(roots["server"] / "chat.jsonl", [msg(2, "server appended kiwi")])
            await wait_for(lambda: _with_units(daemons["server"], 5))
            with psycopg.connect(pg_url) as conn:
                per = dict(conn.execute("SELECT machine, units FROM memoryd_team.sessions")
                           .fetchall())
            assert per == {"laptop": 2, "server": 3}


async def _with_units(c: AsyncClient, n: int):
    st = await c.status()
    return st if st["units"] >= n else None


async def test_cursors_are_keyed_by_machine_and_path(tmp_path, pg_url):
    """The same path on two machines: two cursor rows, each machine sees only its own."""
    stores = {m: await open_store(tmp_path / m / "memoryd.db",
                                  target=StoreTarget(url=pg_url, machine=m))
              for m in ("a", "b")}
    try:
        for m, s in stores.items():
            assert s.machine == m
            await s.write(lambda c, m=m: save_cursor(c, Cursor(
                "/home/me/chat.jsonl", "/home/me", "generic", offset=10 if m == "a" else 20,
                machine=m)))
        a = await stores["a"].read(lambda c: get_cursor(c, "/home/me/chat.jsonl", "a"))
        b = await stores["b"].read(lambda c: get_cursor(c, "/home/me/chat.jsonl", "b"))
        assert (a.offset, b.offset) == (10, 20) and a.id != b.id
        assert [c.machine for c in await stores["a"].read(lambda c: live_cursors(c, "a"))] \
            == ["a"]
        pks = [await s.write(lambda c, m=m: session_pk(c, "generic", "chat", machine=m))
               for m, s in stores.items()]
        assert pks[0] != pks[1]
    finally:
        for s in stores.values():
            await s.close()


async def test_sqlite_keeps_its_identities(tmp_path):
    """SQLite mode: the machine is '' (one machine owns the store), whatever is configured."""
    s = await open_store(tmp_path / "memoryd.db", target=StoreTarget(machine="laptop"))
    try:
        assert s.machine == ""
        pk = await s.write(lambda c: session_pk(c, "generic", "chat"))
        assert await s.write(lambda c: session_pk(c, "generic", "chat")) == pk
        row = await s.read(lambda c: c.execute("SELECT machine FROM sessions").fetchone())
        assert row[0] == ""
    finally:
        await s.close()


@pytest.mark.reliability
@pytest.mark.timeout(900)
def test_kill_9_mid_backfill_into_postgresql_loses_and_duplicates_nothing(tmp_path, pg_url):
    """A real daemon backfilling into PostgreSQL is killed -9 twice mid-way and
    restarted: every line is in the store once (counted by content in PostgreSQL)."""
    from tests.reliability.kill9 import write_corpus

    src, home = tmp_path / "src", tmp_path / "home"
    expected = write_corpus(src, files=12, lines=300)  # every line's content is unique
    env = {**os.environ, "MEMORYD_HOME": str(home), "MEMORYD_STORE__URL": pg_url,
           "MEMORYD_STORE__MACHINE": "killed", "MEMORYD_STORE__NAMESPACE": "team"}
    env.pop("MEMORYD_SOCKET", None)
    home.mkdir()

    def start(sock):
        with open(tmp_path / "memoryd.log", "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
                 f"generic={src}", "--socket", str(sock), "--port", "0", "--log-level",
                 "WARNING"], env=env, stdout=subprocess.DEVNULL, stderr=log)

    def stored() -> tuple[int, int]:
        try:
            with psycopg.connect(pg_url) as conn:
                return conn.execute("SELECT count(*), count(DISTINCT content) "
                                    "FROM memoryd_team.units").fetchone()
        except psycopg.Error:
            return 0, 0

    def until(pred, timeout: float):
        deadline = time.monotonic() + timeout * SLOW
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ConnectionError, ApiError, DaemonNotRunning):
                if v := pred():
                    return v
            time.sleep(0.05)
        raise AssertionError(f"timed out; log: {(tmp_path / 'memoryd.log').read_text()[-2000:]}")

    kills = []
    with short_dir() as d:
        client = MemorydClient(d / "m.sock", timeout=10)
        for _ in range(2):
            p = start(d / "m.sock")
            try:
                until(client.health, 120)
                until(lambda: stored()[0] > (kills[-1] if kills else 0), 120)
            finally:
                p.send_signal(signal.SIGKILL)
                p.wait(30)
            kills.append(stored()[0])
        p = start(d / "m.sock")
        try:
            until(lambda: client.status()["caught_up"], 300)
            until(lambda: stored()[0] >= expected, 120)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
    total, distinct = stored()
    assert kills[0] < expected  # the first kill landed mid-backfill
    assert (total, distinct) == (expected, expected)  # 0 lost, 0 duplicated
