"""Flat memory after writing (issue 11 item 3): a daemon that backfilled a history itself
and got no query lets go of what the backfill left once it rests (the idle release runs,
armed by the index writer's end of work), the index writer is closed at rest, and a line
appended later is still searchable (the writer opens again). A real daemon on a real
socket, real transcripts in a watched directory."""

from __future__ import annotations

import asyncio
import time

import pytest

from memoryd.cli.output import render_status
from memoryd.runtime.idle_release import RELEASE, IdleRelease
from memoryd.index import indexer
from tests.helpers import AsyncClient, running_daemon, short_dir, wait_for, write_jsonl


def lines(prefix: str, n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "id": f"{prefix}:{i}",
             "content": f"{prefix} line {i} about the rollout of {prefix}tok{i} 部署 {i}"}
            for i in range(n)]


@pytest.fixture
def quick_rest(monkeypatch):
    """The writer let go 0.2 s after its last work, the release 0.5 s after that."""
    monkeypatch.setattr(indexer, "WRITER_IDLE_S", 0.2)
    monkeypatch.setattr(RELEASE, "after_s", 0.5)
    RELEASE.cancel()
    yield
    RELEASE.cancel()


async def _released_since(c, runs: int):
    st = await c.status()
    mem = st["memory"]
    return st if mem["idle_releases"] > runs and not mem["armed"] and st["caught_up"] else None


async def _closed(dm):
    return not dm.store.index.has_writer()


async def _found(c, q: str):
    r = await c.search(query=q)
    return r if r["total"] else None


async def test_a_backfill_with_no_query_is_released_at_rest_and_appends_still_searchable(
        tmp_path, quick_rest):
    src = tmp_path / "src"
    for f in range(3):
        write_jsonl(src / "p" / f"s{f}.jsonl", lines(f"old{f}", 400))
    runs = RELEASE.runs
    with short_dir() as d:
        sock = d / "m.sock"
        async with running_daemon(tmp_path / "home", [("generic", src)], sock) as dm:
            c = AsyncClient(sock)
            st = await wait_for(lambda: _released_since(c, runs), 60)
            assert st["units"] == 1200
            assert not dm.store.index.has_writer()  # closed at rest
            mem = st["memory"]
            assert mem["rss_mb"] > 0 and mem["last_release"] is not None
            assert mem["last_freed_mb"] is not None
            assert "idle releases" in render_status(st)
            metrics = await c.request("GET", "/metrics")
            assert "memoryd_idle_releases_total" in metrics
            assert "memoryd_resident_memory_bytes" in metrics
            # nothing more runs at rest: the timer is one-shot
            runs = st["memory"]["idle_releases"]
            await asyncio.sleep(1.0)
            assert (await c.status())["memory"]["idle_releases"] == runs
            # a later append opens the writer again and is found; its end re-arms
            write_jsonl(src / "p" / "s9.jsonl", lines("fresh", 3))
            r = await wait_for(lambda: _found(c, "freshtok1"), 60)
            assert r["total"] == 1
            await wait_for(lambda: _closed(dm), 60)  # the writer goes once idle
            runs = (await c.status())["memory"]["idle_releases"]
            await wait_for(lambda: _released_since(c, runs), 60)  # and that arms one
            assert (await c.search(query="old1tok7"))["total"] == 1


def test_settle_arms_the_one_shot_release_like_a_query():
    fired = []
    r = IdleRelease(after_s=0.2)
    r.register(lambda: fired.append(1))
    r.settle()
    assert r.status()["armed"] and r.settles == 1
    deadline = time.monotonic() + 5
    while r.runs < 1 and time.monotonic() < deadline:  # counted after the heap trim
        time.sleep(0.05)
    assert fired == [1] and r.runs == 1
    st = r.status()
    assert not st["armed"] and st["idle_releases"] == 1 and st["last_release"] > 0
    assert st["rss_mb"] > 0 and st["last_freed_mb"] is not None
    time.sleep(0.4)
    assert fired == [1]  # not re-armed by itself


async def test_the_stores_page_caches_are_released_on_their_threads_and_reads_go_on(tmp_path):
    from memoryd.models import Record
    from memoryd.daemon.store_index import open_store
    from memoryd.store.sessions import session_pk
    from memoryd.store.units import store_record

    s = await open_store(tmp_path / "m.db")
    try:
        def put(c):
            pk = session_pk(c, "generic", "s", project="/p")
            for i in range(500):
                store_record(c, pk, Record("user", f"note {i} 数据 " * 20), f"r{i}", None, 0)

        await s.write(put)
        n = await s.read(lambda c: c.execute("SELECT count(*) FROM units").fetchone()[0])
        t0 = time.monotonic()
        await asyncio.to_thread(s.release_caches)  # as the idle release's timer thread
        assert time.monotonic() - t0 < 5
        assert await s.read(lambda c: c.execute("SELECT count(*) FROM units")
                            .fetchone()[0]) == n == 500
    finally:
        await s.close()
    t0 = time.monotonic()
    await asyncio.to_thread(s.release_caches)  # a closed store: no thread runs it
    assert time.monotonic() - t0 < 30


def test_malloc_is_tuned_unless_the_operator_tuned_it_himself():
    import json
    import os
    import subprocess
    import sys

    code = ("import json; from memoryd.runtime.idle_release import tune_malloc; "
            "print(json.dumps(tune_malloc()))")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == {"arena_max": 2}
    out = subprocess.run([sys.executable, "-c", code], env={**env, "MALLOC_ARENA_MAX": "8"},
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {}
