"""The WAL does not keep its peak size while the daemon runs (issue 28 item 18): bounded
while a backfill writes (checkpointed every few MB, cut back after), truncated to nothing
at rest. A real store, a real transcript of ~12 MB read by the real ingestor."""

from __future__ import annotations

import os

from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.redact import Redactor
from memoryd.daemon.store_index import open_store
from memoryd.store.db import WAL_CHECKPOINT_BYTES, WAL_KEEP

BOUND = WAL_CHECKPOINT_BYTES + WAL_KEEP + (2 << 20)  # a checkpoint's overshoot: one batch


def _wal(db):
    p = db.with_name(db.name + "-wal")
    return p.stat().st_size if p.exists() else 0


async def test_issue_28_the_wal_is_bounded_while_writing_and_truncated_at_rest(tmp_path):
    db = tmp_path / "db" / "memoryd.db"
    store = await open_store(db)
    try:
        root = tmp_path / "src"
        root.mkdir()
        f = root / "big.jsonl"
        with f.open("w") as out:
            for i in range(12_000):
                out.write(f'{{"role": "user", "id": "r{i}", "content": "line {i} '
                          + "lorem ipsum dolor sit amet " * 36 + '"}\n')
        assert f.stat().st_size > 12e6
        ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
        peak = 0
        while await ing.ingest_file(f, root, "generic") or not peak:
            peak = max(peak, _wal(db))  # after each file pass (batches commit inside it)
        peak = max(peak, _wal(db))
        assert peak <= BOUND, peak  # 32 MB pages before SQLite's default checkpoint
        await store.indexed()
        store.release_caches()  # what the daemon does once it rests
        assert _wal(db) == 0
        assert os.path.getsize(db) > 12e6 * 0.5  # the units are in the database file
    finally:
        await store.close()
