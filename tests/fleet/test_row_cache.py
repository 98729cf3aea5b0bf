"""A fleet member's row cache (memoryd.fleet.row_cache) against a real PostgreSQL: the
rows search and context read are kept in a local SQLite file by the same change feed that
keeps the index, so a machine finds another's unit with its text without a round trip,
a forget and a session's new project reach it the same way, it answers in full (marked
stale) while the database is stopped, and a cache lost while it was stopped is rebuilt
with the index at start."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from memoryd.api import SearchRequest
from memoryd.fleet.row_cache import FILE
from memoryd.recall.search import search
from memoryd.store import Store
from memoryd.store.sessions import forget_session
from tests.fleet.test_follow_index import (
    SCHEMA,
    caught,
    indexed_ids,
    insert_units,
    open_store,
    session,
    store_ids,
    until,
)


def cached(store: Store, sql: str, args: tuple = ()) -> list[tuple]:
    return store.index.rows.read_sync(lambda c: [tuple(r) for r in c.execute(sql, args)])


def cached_ids(store: Store) -> set[int]:
    return {r[0] for r in cached(store, "SELECT id FROM units")}


async def test_another_machines_unit_is_found_with_its_text_and_a_forget_removes_it(
        tmp_path, pg_url):
    a, b = open_store(tmp_path, pg_url, "a"), open_store(tmp_path, pg_url, "b")
    try:
        with psycopg.connect(pg_url) as conn:
            pk = session(conn, "s1", machine="a")
            keep = session(conn, "s2", machine="a")
            insert_units(conn, pk, ["the axolotl terrarium needs 18 degrees", "蝾螈 水温"])
            insert_units(conn, keep, ["an axolotl in another session"])
        until(lambda: caught(b) and len(indexed_ids(b)) == 3, 30, "b follows a's units")
        assert cached_ids(b) == indexed_ids(b) == store_ids(pg_url)
        assert b.index.rows.status()["units"] == 3  # kept by the applies, not counted
        r = await search(b, SearchRequest(query="terrarium"))
        assert r.total == 1 and r.stale is False
        hit = r.results[0]
        assert "terrarium needs 18 degrees" in hit.snippet and hit.session_id == "s1"
        assert (await search(b, SearchRequest(query="蝾螈"))).total == 1
        # the rows came from b's cache: the same text, session and agent as the store's
        assert cached(b, "SELECT content FROM units WHERE id = ?", (hit.unit_id,)) == [
            ("the axolotl terrarium needs 18 degrees",)]

        # a forget on machine a: gone from b's answers, b's cache and b's index
        n = await a.write(lambda c: forget_session(c, pk))
        assert n == 2
        until(lambda: len(cached_ids(b)) == 1 and len(indexed_ids(b)) == 1, 30,
              "the forget reaches b")
        r = await search(b, SearchRequest(query="axolotl"))
        assert r.total == 1 and r.results[0].session_id == "s2"
        assert (await search(b, SearchRequest(query="terrarium"))).total == 0
        assert cached(b, "SELECT id FROM sessions WHERE id = ?", (pk,)) == []
        assert b.index.rows.status()["units"] == 1
    finally:
        a.close_sync()
        b.close_sync()


async def test_a_sessions_new_project_reaches_the_other_machines_filters(tmp_path, pg_url):
    b = open_store(tmp_path, pg_url, "b")
    try:
        with psycopg.connect(pg_url) as conn:
            pk = session(conn, "s1", machine="a")
            conn.execute(f"UPDATE {SCHEMA}.sessions SET project = '/src/old' WHERE id = %s",
                         (pk,))
            insert_units(conn, pk, ["the narwhal deploy plan"])
        until(lambda: caught(b) and len(indexed_ids(b)) == 1, 30, "b follows")
        in_old = SearchRequest(query="narwhal", project="/src/old")
        in_new = SearchRequest(query="narwhal", project="/src/new")
        assert (await search(b, in_old)).total == 1
        assert (await search(b, in_new)).total == 0

        # the session alone changes (no unit): the feed carries it as a session change
        with psycopg.connect(pg_url) as conn:
            conn.execute(f"UPDATE {SCHEMA}.sessions SET project = '/src/new', "
                         "summary = 'moved', summary_upto = 1 WHERE id = %s", (pk,))
        until(lambda: cached(b, "SELECT project, summary_upto FROM sessions") == [
            ("/src/new", 1)], 30, "the session change reaches b's cache")
        assert (await search(b, in_new)).total == 1
        assert (await search(b, in_old)).total == 0
        with psycopg.connect(pg_url) as conn:  # as a change of a real unit: any follower
            # version applies it (re-indexing that unit)
            assert conn.execute(f"SELECT min(unit_id) FROM {SCHEMA}.changes").fetchone()[0] > 0
        r = await search(b, in_new)
        assert r.results[0].project == "/src/new"
    finally:
        b.close_sync()


async def test_with_the_database_stopped_answers_are_complete_and_stale(
        tmp_path, own_pg_server):
    url = own_pg_server.url()
    b = open_store(tmp_path, url, "b")
    try:
        with psycopg.connect(url) as conn:
            pk = session(conn, "s1", machine="a")
            # units no search has served before the outage
            insert_units(conn, pk, [f"ledger {i} reconciled by the pangolin job"
                                    for i in range(30)])
        until(lambda: caught(b) and len(indexed_ids(b)) == 30, 30, "b follows")
        assert len(b.index.recent) == 0  # nothing served yet: RecentHits cannot answer
        own_pg_server.stop("fast")
        until(lambda: not b.health.reachable, 30, "b notices the database is away")
        r = await search(b, SearchRequest(query="pangolin ledger", max_results=5))
        assert r.stale is True and r.store == "unreachable"
        assert r.total == 30 and r.shown == 5
        assert "unreachable" in r.message and "row cache" in r.message
        assert all("reconciled by the pangolin job" in h.snippet for h in r.results)
        filtered = await search(b, SearchRequest(query="pangolin", session_id="s1"))
        assert filtered.total == 30 and filtered.stale is True
    finally:
        own_pg_server.start()
        b.close_sync()


def test_a_cache_deleted_while_stopped_is_rebuilt_at_start(tmp_path, pg_url):
    b = open_store(tmp_path, pg_url, "b")
    with psycopg.connect(pg_url) as conn:
        pk = session(conn, "s1", machine="a")
        insert_units(conn, pk, [f"heron {i} at the weir" for i in range(40)])
    until(lambda: caught(b) and len(indexed_ids(b)) == 40, 30, "b follows")
    b.close_sync()
    path = Path(tmp_path / "b" / "index" / FILE)
    for p in path.parent.glob(FILE + "*"):
        p.unlink()
    with psycopg.connect(pg_url) as conn:  # written while b was stopped
        insert_units(conn, pk, ["a late egret"], first_seq=100)
    b = open_store(tmp_path, pg_url, "b")
    try:
        deadline = time.monotonic() + 60
        while not (caught(b) and b.index.state == "ready") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b.index.state == "ready"
        assert cached_ids(b) == indexed_ids(b) == store_ids(pg_url)
        assert len(cached_ids(b)) == 41 == b.index.rows.status()["units"]
        assert b.index._indexer.rebuilds >= 1
    finally:
        b.close_sync()


def test_an_older_cache_is_made_anew(tmp_path):
    from memoryd.fleet.row_cache import RowCache

    root = tmp_path / "index"
    cache = RowCache(root)
    assert cache.open() is True  # new
    cache.close()
    assert RowCache(root).open() is False  # kept
    import sqlite3

    conn = sqlite3.connect(root / FILE)
    conn.execute("UPDATE meta SET value = '0' WHERE key = 'version'")
    conn.commit()
    conn.close()
    again = RowCache(root)
    assert again.open() is True
    assert again.units() == 0
    again.close()
    (root / FILE).write_bytes(b"not a database at all" * 100)
    torn = RowCache(root)
    assert torn.open() is True
    torn.close()


def _feed_row(unit_id: int, session_pk: int, content: str) -> dict:
    return {"unit_id": unit_id, "session_pk": session_pk, "seq": unit_id, "ts": 1.0,
            "role": "user", "kind": "message", "content": content, "one_liner": None,
            "file_id": 1, "record_id": f"r{unit_id}", "turn": 0, "tool_name": None,
            "chars": len(content), "offset": 0, "agent": "generic", "session_id": "s",
            "project": None, "summary": None, "summary_upto": 0, "summary_by": None,
            "next_seq": unit_id + 1, "last_ts": 1.0, "state": None, "path": "/t/a.jsonl",
            "vec": None}


def test_an_apply_with_vectors_tells_the_embedder(tmp_path):
    """The model's process keeps a copy of the cache's vectors (issue 31): an apply that
    wrote one says so (`on_vectors`: the daemon's `Embedder.changed`), one without
    does not."""
    from memoryd.fleet.row_cache import RowCache

    cache = RowCache(tmp_path / "index")
    cache.open()
    told = []
    cache.on_vectors = lambda: told.append(1)
    cache.apply([_feed_row(1, 1, "no vector yet")])
    assert told == []
    cache.apply([{**_feed_row(1, 1, "no vector yet"), "vec": bytes(384)}])
    assert told == [1]
    assert cache.read_sync(lambda c: c.execute("SELECT count(*) FROM unit_vectors")
                           .fetchone()[0]) == 1
    cache.close()


def test_the_units_count_follows_adds_replaces_and_deletes_and_a_reopen(tmp_path):
    """`status()` (shown by `memoryctl status` and /metrics) is kept by the applies, not
    counted per call; a reopened file counts once."""
    from memoryd.fleet.row_cache import RowCache

    cache = RowCache(tmp_path / "index")
    cache.open()
    cache.apply([_feed_row(i, 1, f"unit {i}") for i in range(1, 6)])
    assert cache.status()["units"] == 5 == cache.units()
    cache.apply([_feed_row(i, 1, f"unit {i} again") for i in range(4, 9)], [1, 2, 99])
    assert cache.status()["units"] == 6 == cache.units()  # 3..8: 4, 5 replaced, 99 unknown
    assert cache.status()["bytes"] >= cache.path.stat().st_size > 0
    cache.close()
    again = RowCache(tmp_path / "index")
    assert again.open() is False and again.status()["units"] == 6
    again.clear()
    assert again.status()["units"] == 0
    again.close()


async def test_context_from_the_cache_leaves_the_loops_thread_pool_to_the_files(
        tmp_path, pg_url):
    """A context read waits in its thread for MEMORY.md and the daily notes, which the
    loop reads on its default executor. Read on that same executor, busy requests took
    all of its threads with waiters and the files were never read (each request then
    waited out its bound): here the executor has one thread."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from memoryd.api import ContextRequest
    from memoryd.recall.context import ContextBuilder
    from memoryd.memory import MemoryFile

    b = open_store(tmp_path, pg_url, "b")
    memory_dir = tmp_path / "memory"
    memory_dir.mkdir()
    (memory_dir / "MEMORY.md").write_text("# Memory\n\n- the narwhal deploy goes out on fridays\n")
    pool = ThreadPoolExecutor(1)
    try:
        with psycopg.connect(pg_url) as conn:
            pk = session(conn, "s1", machine="a")
            insert_units(conn, pk, ["the narwhal deploy plan is written down"])
        until(lambda: caught(b) and len(indexed_ids(b)) == 1, 30, "b follows")
        asyncio.get_running_loop().set_default_executor(pool)
        builder = ContextBuilder(b, b.index,
                                 MemoryFile(memory_dir / "MEMORY.md", poll_interval=0),
                                 memory_dir)
        req = ContextRequest(query="narwhal deploy",
                             include=["long_term", "recalled", "daily"])
        packs = await asyncio.wait_for(asyncio.gather(*(builder.build(req)
                                                        for _ in range(3))), 30)
        for pack in packs:  # all three answered (MEMORY.md's and the notes' reads done)
            assert "narwhal deploy plan" in pack["rendered"]
    finally:
        b.close_sync()
        pool.shutdown(wait=False)
