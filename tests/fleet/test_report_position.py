"""The position a machine reports to the fleet (for pruning the change feed) is one its
local index has committed (issue 14): a change the live tail holds uncommitted is not
yet durable on this machine, and a crash would need it from the feed again."""

from __future__ import annotations

import json
import shutil

import psycopg

from memoryd.fleet import changefeed as cf
from memoryd.index import META
from memoryd.recall.retrieval import retrieve_sync
from memoryd.daemon.store_index import open_store_sync
from tests.fleet.test_follow_index import (
    SCHEMA,
    caught,
    indexed_ids,
    insert_units,
    open_store,
    session,
    store_ids,
    target,
    until,
)


def reported(url: str, machine: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT position::text FROM {SCHEMA}.change_positions"
                           " WHERE machine = %s", (machine,)).fetchone()
    return row[0] if row else None


def test_issue_14_a_crash_after_the_prune_resumes_without_a_rebuild(tmp_path, pg_url,
                                                                    monkeypatch):
    """Another machine's unit sits in this machine's live tail, uncommitted, while the
    follower reports often: the fleet still hears the position stored with the last
    commit. The hourly prune then runs and this machine crashes (its index as on disk):
    the restart applies the unit from the feed, with no rebuild."""
    monkeypatch.setenv("MEMORYD_TAIL_COMMIT_S", "3600")
    monkeypatch.setenv("MEMORYD_TAIL_COMMIT_DOCS", "1000000")
    store = open_store(tmp_path, pg_url, "b")
    try:
        ixr = store.index._indexer
        until(lambda: ixr.follower is not None and caught(store), 30, "following")
        ixr.follower.report_every_s = 0.0  # every poll reports
        with psycopg.connect(pg_url) as conn:
            pk = session(conn, "s", machine="a")
            [uid] = insert_units(conn, pk, ["a live puffin from machine a"])
            conn.commit()
        until(lambda: uid in store.index.tail.docs, 30, "the unit in b's tail")
        polls = ixr.follower.polls
        until(lambda: ixr.follower.polls >= polls + 2, 30, "two more polls")
        assert caught(store) and uid in store.index.tail.docs  # applied, not committed
        saved = cf.Position.from_json(
            json.loads((tmp_path / "b" / "index" / META).read_text())["feed"])
        assert reported(pg_url, "b") == saved.settled.done
        # the crash: the index as it is on disk now, the tail lost
        shutil.copytree(tmp_path / "b" / "index", tmp_path / "crashed" / "index")
    finally:
        store.close_sync()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cf.prune(conn, SCHEMA)  # the hourly job, with what b reported

    store = open_store_sync(tmp_path / "crashed" / "memoryd.db", target=target(pg_url, "b"))
    try:
        until(lambda: caught(store), 30, "the restart caught up")
        assert store.index._indexer.rebuilds == 0
        assert indexed_ids(store) == store_ids(pg_url) == {uid}
        found = store.read_sync(lambda c: retrieve_sync(c, store.index, "puffin", k=5,
                                                        count=True))
        assert found.total == 1
    finally:
        store.close_sync()
