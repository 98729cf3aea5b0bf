"""The watch covers what was written before it began: a file made after the last scan and
before the notifier watched has no event of its own."""

from __future__ import annotations

import asyncio

from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.queue import IngestQueue
from memoryd.ingest.redact import Redactor
from memoryd.ingest.sources import Candidates, Source
from memoryd.daemon.store_index import open_store
from memoryd.ingest.watcher import Watcher
from tests.helpers import wait_for, write_jsonl


async def test_a_file_written_before_the_watch_began_is_queued_when_it_begins(tmp_path):
    root = tmp_path / "src"
    new = root / "made-while-starting" / "s.jsonl"
    write_jsonl(new, [{"role": "user", "content": "written in the gap", "id": "m0"}])
    store = await open_store(tmp_path / "db" / "memoryd.db")
    try:
        ingestor = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
        sources = lambda: [Source("generic", root)]  # noqa: E731
        queue = IngestQueue(ingestor, sources)
        # no backfill scan and no reconciliation loop: only the watch itself
        watcher = Watcher(sources, queue, ingestor, Candidates((), ()), debounce_ms=50,
                          force_polling=False)
        stop = asyncio.Event()
        task = asyncio.create_task(watcher.run(stop))
        try:
            assert await wait_for(lambda: new in queue.queued(), timeout=5)
            later = root / "made-while-starting" / "t.jsonl"
            write_jsonl(later, [{"role": "user", "content": "after", "id": "m1"}])
            assert await wait_for(lambda: later in queue.queued(), timeout=5)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
    finally:
        await store.close()
