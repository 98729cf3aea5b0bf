"""The store: one SQLite file (the truth), a writer thread and a few reader threads, and
the tantivy search index that follows it (`store.index`, `memoryd.index`).

`await store.write(fn)` / `await store.read(fn)` run `fn(conn)` in one transaction on
the owning thread. Reads go to the least busy reader, so queries never queue in front
of the writer and one slow query does not hold up the others. The SQL itself lives in
plain sync functions (`store/units.py`, `store/sessions.py`, `store/files.py`) that take
`conn` first. Every committed write wakes the index writer, which indexes what changed
(`memoryd.index.indexer`).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from memoryd.errors import StoreError
from memoryd.index import SearchIndex
from memoryd.store.db import DBThread, connect
from memoryd.store.migrations import migrate

T = TypeVar("T")

__all__ = ["Store"]

READERS = 2


class Store:
    def __init__(self, path: Path, writer: DBThread, readers: list[DBThread],
                 index: SearchIndex) -> None:
        self.path = path
        self._writer = writer
        self._readers = tuple(readers)
        self._reader = readers[0]
        self.index = index

    @classmethod
    async def open(cls, path: Path, index_dir: Path | None = None) -> Store:
        return await asyncio.to_thread(cls.open_sync, path, index_dir)

    @classmethod
    def open_sync(cls, path: Path, index_dir: Path | None = None) -> Store:
        """Open (and migrate) the database at `path` and its search index (by default
        the `index` directory beside it)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(path)
            try:
                migrate(conn)
            finally:
                conn.close()
            writer = DBThread(path, write=True, name="memoryd-db-writer")
            writer.start()
            readers = []
            for i in range(READERS):
                reader = DBThread(path, write=False, name=f"memoryd-db-reader-{i}")
                reader.start()
                readers.append(reader)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open the database {path}: {e}") from e
        index = SearchIndex(index_dir or path.parent / "index", path)
        try:
            index.open(lambda upto: writer.call(lambda c: c.execute(
                "DELETE FROM index_pending WHERE id <= ?", (upto,))))
        except (OSError, ValueError) as e:
            for reader in readers:
                reader.stop()
            writer.stop()
            raise StoreError(f"cannot open the search index {index.root}: {e}") from e
        return cls(path, writer, readers, index)

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return await self._writer.submit(fn)
        finally:
            self.index.notify_write()

    async def indexed(self, timeout: float = 30.0) -> None:
        """Until everything written so far is searchable (tests, tools)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.index.notify_write()
        while not await self.read(self.index.is_caught_up):
            if loop.time() > deadline:
                raise TimeoutError("the search index did not catch up")
            await asyncio.sleep(0.005)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await min(self._readers, key=DBThread.load).submit(fn)

    def write_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """For code running in a worker thread (never on the event loop)."""
        try:
            return self._writer.call(fn)
        finally:
            self.index.notify_write()

    def read_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._reader.call(fn)

    async def backup(self, dest: Path) -> int:
        """A consistent copy of the database (`VACUUM INTO`, on its own connection: it
        cannot run inside a transaction). Returns the copy's size in bytes."""

        def run() -> int:
            conn = connect(self.path)
            try:
                conn.execute("VACUUM INTO ?", (str(dest),))
            finally:
                conn.close()
            return dest.stat().st_size

        return await asyncio.to_thread(run)

    def queue_depth(self) -> int:
        return self._writer.qsize()

    async def close(self) -> None:
        await asyncio.to_thread(self.close_sync)

    def close_sync(self) -> None:
        self.index.close()
        for reader in self._readers:
            reader.stop()
        self._writer.stop()
