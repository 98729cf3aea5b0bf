"""A backlog's index writing in a process of its own (issue 11 item 5): a backfill's bulk
passes run in `python -m memoryd.index.bulk`, which reads the unit rows from the database
itself and commits; the daemon's searchers see its commits, it has the index's one writer
while it runs, and it ends once the writer rests, on stop and when it dies (the backlog
then goes on in process and loses nothing). A real store, a real tantivy index, a real
child process."""

import asyncio
import json
import logging
import os
import signal
import time

import pytest

from memoryd.index import indexer as indexer_mod
from memoryd.store.sessions import forget_units
from tests.index.test_indexer import ids_of, put


@pytest.fixture
async def store(tmp_path, monkeypatch):
    from memoryd.daemon.store_index import open_store

    # small batches and a commit after each: many passes, commits, segments and merges
    monkeypatch.setattr(indexer_mod, "BATCH", 100)
    monkeypatch.setattr(indexer_mod, "LIVE_UNITS", 20)
    monkeypatch.setattr(indexer_mod, "COMMIT_EVERY_S", 0.0)
    s = await open_store(tmp_path / "m.db")
    await s.indexed()
    yield s
    await s.close()


async def until(pred, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stray_files(tdir):
    """Segment files in the index directory that its meta.json does not hold (what a
    merge or commit cut short leaves)."""
    meta = json.loads((tdir / "meta.json").read_text())
    held = {seg["segment_id"].replace("-", "") for seg in meta["segments"]}
    return {p.name for p in tdir.iterdir()
            if not p.name.startswith(".") and p.name != "meta.json"
            and p.name.split(".")[0] not in held}


async def test_a_backfill_is_indexed_by_a_writer_process_then_it_goes(store, monkeypatch):
    """Every unit once, searchable from the child's commits (the daemon's reload sees
    them, through the child's merges); a running child counts as the writer (no pages
    released under it); when the writer rests the child exits and the daemon takes the
    writer back: a later append goes into the live tail as before."""
    monkeypatch.setattr(indexer_mod, "WRITER_IDLE_S", 600.0)
    ix, ixr = store.index, store.index._indexer
    ids = await store.write(put([f"history line {i} quartz" for i in range(1500)]))
    gone = ids[100:120]
    await store.write(lambda c: forget_units(c, gone))
    more = await store.write(put([f"later line {i} quartz" for i in range(300)], sid="t"))
    await store.indexed()
    child = ixr.child
    assert child is not None and alive(child.pid)
    assert ixr.commits >= 15  # a commit per 100 units, in the child
    want = sorted(set(ids) - set(gone)) + more
    assert await ids_of(store, "quartz") == (len(want), want)
    assert ix.docs() == len(want)
    assert ix.has_writer() and ix.release_pages() == 0
    assert not ix.backlog()  # the last pass found nothing more

    ixr._wake.set()  # the writer rests: the child goes, the writer comes back
    monkeypatch.setattr(indexer_mod, "WRITER_IDLE_S", 0.05)
    ix.notify_write()
    await until(lambda: ixr.child is None and not ix.has_writer())
    assert child.proc.poll() == 0 and not alive(child.pid)
    commits = ixr.commits
    [uid] = await store.write(put(["one live line: zephyrword"], sid="live"))
    await store.indexed()
    assert await ids_of(store, "zephyrword") == (1, [uid])
    assert ixr.child is None and ixr.commits == commits  # in process, from the tail
    assert await ids_of(store, "quartz") == (len(want), want)


async def test_a_writer_process_killed_mid_backfill_loses_nothing(store, caplog):
    """SIGKILL to the child at some point of its passes: the daemon logs it, reads back
    what the index holds and indexes the rest in process; every unit once."""
    caplog.set_level(logging.WARNING, logger="memoryd.index.indexer")
    ix, ixr = store.index, store.index._indexer
    ids = await store.write(put([f"history line {i} amberword" for i in range(4000)]))
    await until(lambda: ixr.child is not None and ix.docs() >= 300)
    pid = ixr.child.pid
    os.kill(pid, signal.SIGKILL)
    more = await store.write(put([f"later line {i} amberword" for i in range(400)], sid="t"))
    await store.indexed()
    want = ids + more
    assert await ids_of(store, "amberword") == (len(want), want)
    assert ix.docs() == len(want)  # nothing twice
    assert "writer process ended" in caplog.text
    # what it was writing when killed is collected by the daemon's next commit
    await until(lambda: not stray_files(ix.root / "tantivy"))
    assert ixr.child is None or ixr.child.pid != pid
    assert not alive(pid)


async def test_a_writer_process_ends_with_the_store(tmp_path, monkeypatch):
    """Closing the store (the daemon's stop) ends a child in the
    middle of a backlog once its pass is committed and its merges are done: no process
    left, no file left that the index does not hold; the rest is indexed on the next
    start."""
    from memoryd.daemon.store_index import open_store

    monkeypatch.setattr(indexer_mod, "BATCH", 100)
    monkeypatch.setattr(indexer_mod, "LIVE_UNITS", 20)
    monkeypatch.setattr(indexer_mod, "COMMIT_EVERY_S", 0.0)
    s = await open_store(tmp_path / "m.db")
    ixr = s.index._indexer
    ids = await s.write(put([f"history line {i} cobaltword" for i in range(4000)]))
    await until(lambda: ixr.child is not None)
    child = ixr.child
    await s.close()
    assert child.proc.poll() == 0 and not alive(child.pid)
    assert stray_files(tmp_path / "index" / "tantivy") == set()
    s = await open_store(tmp_path / "m.db")
    try:
        await s.indexed()
        assert await ids_of(s, "cobaltword") == (len(ids), ids)
    finally:
        await s.close()


async def test_reloads_beside_a_merging_writer_process_are_safe(store):
    """The daemon reloads its searchers (as after every commit) in a loop while the
    child commits every 100 units and merges segments away: tantivy's meta lock keeps a
    reload from opening files the child's garbage collection deletes. No reload fails,
    the answers are exact, and merges did happen."""
    import threading

    ix = store.index
    stop, errors, reloads = threading.Event(), [], [0]

    def reload_loop():
        while not stop.is_set():
            try:
                ix.committed()
                reloads[0] += 1
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                errors.append(e)

    t = threading.Thread(target=reload_loop)
    t.start()
    try:
        ids = await store.write(put([f"history line {i} jasperword" for i in range(3000)]))
        await store.indexed()
    finally:
        stop.set()
        t.join()
    assert not errors and ix._indexer.error is None and reloads[0] > 10
    assert await ids_of(store, "jasperword") == (len(ids), ids)
    meta = json.loads((ix.root / "tantivy" / "meta.json").read_text())
    assert len(meta["segments"]) < ix._indexer.commits  # segments were merged away
