"""Fixtures the ingest tests share: a real store in a tmp dir and an ingestor over it, as
the daemon builds them (no watcher: tests hand files to `ingest_file` themselves)."""

from __future__ import annotations

import pytest

from memoryd.daemon.store_index import open_store
from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.redact import Redactor


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "db" / "memoryd.db")
    yield s
    await s.close()


@pytest.fixture
def ingestor(store):
    return Ingestor(store, Redactor(), max_line_bytes=1 << 20)
