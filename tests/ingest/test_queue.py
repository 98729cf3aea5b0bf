"""The ingest queue against real files and a real store: a backfill reads the next file
while the one before it is stored, and stores every file's units in queue order."""

from __future__ import annotations

import asyncio

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


def lines(name, n, start=0):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{name} message {i}",
             "id": f"{name}-{i}"} for i in range(start, start + n)]


async def stored(store):
    return await store.read(lambda c: [r[0] for r in c.execute(
        "SELECT record_id FROM units ORDER BY id")])


async def run_until_drained(queue):
    task = asyncio.create_task(queue.run())
    try:
        await asyncio.wait_for(queue.drained(), 30)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_backfill_reads_ahead_and_stores_in_queue_order(store, tmp_path):
    root = tmp_path / "src"
    files = [root / f"s{i:02d}.jsonl" for i in range(8)]
    for i, f in enumerate(files):
        write_jsonl(f, lines(f"f{i}", 40))
    ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
    queue = IngestQueue(ing, lambda: [Source("generic", root)])
    in_hand_at_store: list[list[str]] = []
    ing.subscribers.append(lambda e: in_hand_at_store.append(
        [p.name for p in queue.in_hand()]))
    for f in files:
        queue.submit(f)
    await run_until_drained(queue)
    assert await stored(store) == [f"f{i}-{j}" for i in range(8) for j in range(40)]
    # when a file's units were stored, the next one was already in hand (read ahead)
    assert in_hand_at_store[:7] == [[f"s{i:02d}.jsonl", f"s{i + 1:02d}.jsonl"]
                                    for i in range(7)]
    assert queue.in_hand() == [] and queue.depth() == 0


async def test_a_file_queued_again_while_read_ahead_is_read_after_it(store, tmp_path):
    root = tmp_path / "src"
    a, b = root / "a.jsonl", root / "b.jsonl"
    write_jsonl(a, lines("a", 30))
    write_jsonl(b, lines("b", 30))
    ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
    queue = IngestQueue(ing, lambda: [Source("generic", root)])

    def on_stored(event):
        if event.path == str(a):  # b is in hand, read ahead: it grows and is queued again
            assert queue.in_hand() == [a, b]
            write_jsonl(b, lines("b", 5, start=30))
            queue.submit(b)

    ing.subscribers.append(on_stored)
    queue.submit(a)
    queue.submit(b)
    await run_until_drained(queue)
    assert await stored(store) == [f"a-{j}" for j in range(30)] + [f"b-{j}" for j in range(35)]


async def test_a_live_change_is_read_alone_after_the_file_in_hand(store, tmp_path):
    root = tmp_path / "src"
    old = [root / f"old{i}.jsonl" for i in range(4)]
    for i, f in enumerate(old):
        write_jsonl(f, lines(f"o{i}", 20))
    live = root / "live.jsonl"
    ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
    queue = IngestQueue(ing, lambda: [Source("generic", root)])
    order: list[tuple[str, list[str]]] = []

    def on_stored(event):
        name = event.path.rsplit("/", 1)[-1]
        order.append((name, [p.name for p in queue.in_hand()]))
        if name == "old0.jsonl":
            write_jsonl(live, lines("live", 1))
            queue.submit(live, urgent=True)

    ing.subscribers.append(on_stored)
    for f in old:
        queue.submit(f)
    await run_until_drained(queue)
    names = [n for n, _ in order]
    # after the file read ahead when it came, before the rest of the backfill
    assert names == ["old0.jsonl", "old1.jsonl", "live.jsonl", "old2.jsonl", "old3.jsonl"]
    assert dict(order)["live.jsonl"] == ["live.jsonl"]  # nothing read beside it
    assert len(await stored(store)) == 81
