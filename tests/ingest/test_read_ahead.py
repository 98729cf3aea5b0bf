"""The queue reads the next backlog file while the one before it is stored: same rows, ids
and order as one file after another, and a file that changes after its read ahead (or a
live file that comes in meanwhile) loses no line."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.queue import IngestQueue
from memoryd.ingest.redact import Redactor
from memoryd.sources import Source
from memoryd.store import Store
from tests.helpers import write_jsonl


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "db" / "memoryd.db")
    yield s
    await s.close()


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    return d


def lines(name, n, start=0):
    return [{"role": "user" if i % 2 == 0 else "assistant", "id": f"{name}-{i}",
             "content": f"{name} message {i} token=sk-{'a' * 40}" if i == 3 else
             f"{name} message {i} 東京で会議"} for i in range(start, start + n)]


async def stored(store):
    return await store.read(lambda c: [tuple(r) for r in c.execute(
        "SELECT u.record_id, u.content, s.session_id, f.path, u.offset FROM units u "
        "JOIN sessions s ON s.id = u.session_pk JOIN files f ON f.id = u.file_id "
        "ORDER BY u.id")])


async def run_queue(ingestor, root, paths, during=None):
    q = IngestQueue(ingestor, lambda: [Source("generic", root)])
    if during is not None:
        ingestor.subscribers.append(lambda ev: during(q, ev))
    for p in paths:
        q.submit(p)
    worker = asyncio.create_task(q.run())
    try:
        await asyncio.wait_for(q.drained(), 60)
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
    return q


async def test_backlog_read_ahead_stores_what_one_by_one_stores(tmp_path, store, root):
    paths = [root / f"s{i}.jsonl" for i in range(6)]
    for i, p in enumerate(paths):
        write_jsonl(p, lines(p.stem, 40 + 7 * i))
    ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
    await run_queue(ing, root, paths)
    assert ing.stats.read_ahead == len(paths) - 1

    one = await Store.open(tmp_path / "one" / "memoryd.db")
    try:
        seq = Ingestor(one, Redactor(), max_line_bytes=1 << 20)
        for p in paths:
            await seq.ingest_file(p, root, "generic")
        assert await stored(store) == await stored(one)
    finally:
        await one.close()
    assert all("sk-aaaa" not in r[1] for r in await stored(store))


async def test_a_file_changed_after_its_read_ahead_loses_no_line(store, root):
    big, small = root / "big.jsonl", root / "small.jsonl"
    write_jsonl(big, lines("big", 1500))  # its store write outlasts small's read ahead
    write_jsonl(small, lines("small", 3))

    def during(q, ev):
        if ev.path == str(big):  # big is stored; small was read ahead meanwhile
            write_jsonl(small, lines("small", 2, start=3))
            q.submit(small, urgent=True)  # as the watcher does

    ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
    await run_queue(ing, root, [big, small], during)
    ids = [r[0] for r in await stored(store) if r[3] == str(small)]
    assert ids == [f"small-{i}" for i in range(5)]
    assert await ing.ingest_file(small, root, "generic") == 0


async def test_a_stopped_read_ahead_is_finished_in_its_turn(store, root):
    f = root / "s.jsonl"
    write_jsonl(f, lines("s", 5))
    ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
    stop = threading.Event()
    stop.set()  # a live file came in: the read ahead ends at its next line
    cursor = await ing.cursor_for(f, root)
    adapter, cursor, batch = await asyncio.to_thread(ing.prepare_and_read, f, root,
                                                     "generic", cursor, stop)
    assert batch is not None and len(batch.items) == 1 and not batch.done

    async def first():
        return adapter, cursor, batch

    assert await ing.ingest_file(f, root, "generic", first=first()) == 5
    assert [r[0] for r in await stored(store)] == [f"s-{i}" for i in range(5)]
    assert ing.seen[str(f)].more is False
