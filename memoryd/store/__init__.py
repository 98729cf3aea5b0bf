"""The store: the truth (one SQLite file, or a namespace in a shared PostgreSQL database,
`memoryd.store.pg`), a writer thread and a few reader threads. The search index that
follows it is built by the daemon and handed to it (`Store.follow`): the store only wakes
it after a write (`memoryd.store.follower`).

`await store.write(fn)` / `await store.read(fn)` run `fn(conn)` in one transaction on
the owning thread. Reads go to the least busy reader, so queries never queue in front
of the writer and one slow query does not hold up the others. The SQL itself lives in
plain sync functions (`store/units.py`, `store/sessions.py`, `store/files.py`) that take
`conn` first; both engines run them (standard SQL; `PgConn` translates the placeholders).
Every committed write that added units or queued index changes wakes the index, which
indexes what changed (`memoryd.index.indexer`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from memoryd.errors import StoreError
from memoryd.store.compact import compact_if_due
from memoryd.store.counters import fold_pg
from memoryd.store.db import PAGE_SIZE, DBThread, SqliteRunner, bound_wal, connect, truncate_wal
from memoryd.store.follower import NoFollower, WriteFollower
from memoryd.store.health import Health, scrub
from memoryd.store.migrations import migrate
from memoryd.store_target import StoreTarget

T = TypeVar("T")

__all__ = ["Store"]

READERS = 2


def store_health(target: StoreTarget) -> Health:
    """The store's reachability, its errors masked twice over: the configured URL and
    secrets (`StoreTarget.scrub`), then any other password in a URL or key=value form."""
    return Health("store", mask=lambda text: scrub(target.scrub(text)))


class Store:
    def __init__(self, path: Path, writer: DBThread, readers: list[DBThread],
                 target: StoreTarget | None = None, pools: Any = None,
                 health: Health | None = None) -> None:
        self.path = path
        self.target = target or StoreTarget()
        # whether the truth is reachable (fleet mode: the shared database may go away;
        # an SQLite file is always reachable, so this stays up)
        self.health = health or store_health(self.target)
        self._writer = writer
        self._readers = tuple(readers)
        self._reader = readers[0]
        self._pools = pools
        # what follows the writes (the search index the daemon hands over: `follow`)
        self.index: WriteFollower = NoFollower()

    def follow(self, index: WriteFollower) -> None:
        """From now on `index` follows the writes: it is woken after each write that may
        concern it, waited for by `indexed`, and closed first by `close`."""
        self.index = index

    @property
    def kind(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self.target.kind

    @property
    def machine(self) -> str:
        """Whose files, cursors and sessions this daemon writes: the configured machine
        in fleet mode; '' in SQLite mode, where one machine owns the whole store (today's
        identities unchanged)."""
        return self.target.machine if self.kind == "postgresql" else ""

    @classmethod
    async def open(cls, path: Path, target: StoreTarget | None = None) -> Store:
        return await asyncio.to_thread(cls.open_sync, path, target)

    @classmethod
    def open_sync(cls, path: Path, target: StoreTarget | None = None) -> Store:
        """Open (and migrate) the database at `path`. With a PostgreSQL `target`, the
        truth is that database's namespace instead (`path` then only places what is kept
        beside it, such as the local index)."""
        if target is not None and target.kind == "postgresql":
            return cls._open_pg(path, target)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(path)
            try:
                migrate(conn)
                compact_if_due(conn, path, PAGE_SIZE)
            finally:
                conn.close()
            writer = DBThread(lambda: SqliteRunner(path, True), name="memoryd-db-writer")
            writer.start()
            readers = []
            for i in range(READERS):
                reader = DBThread(lambda: SqliteRunner(path, False),
                                  name=f"memoryd-db-reader-{i}")
                reader.start()
                readers.append(reader)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open the database {path}: {e}") from e
        return cls(path, writer, readers, target)

    @classmethod
    def _open_pg(cls, path: Path, target: StoreTarget) -> Store:
        from memoryd.store.pg import conn as pg
        from memoryd.store.pg import migrations as pg_migrations

        conn = pg.connect(target, autocommit=True, configure=False)
        try:
            pg_migrations.migrate(conn.raw, target.schema)
            fold_pg(conn)  # counter rows of connections that are gone (store.counters)
        except Exception as e:
            if isinstance(e, StoreError):
                raise
            raise StoreError(f"cannot migrate the store at {target.masked()}: "
                             f"{target.scrub(str(e))}") from None
        finally:
            conn.close()
        health = store_health(target)
        pools = pg.PgPools(target, READERS, health)
        threads: list[DBThread] = []
        try:
            writer = DBThread(lambda: pools.runner(True), name="memoryd-db-writer")
            writer.start()
            threads.append(writer)
            readers = []
            for i in range(READERS):
                reader = DBThread(lambda: pools.runner(False), name=f"memoryd-db-reader-{i}")
                reader.start()
                threads.append(reader)
                readers.append(reader)
        except BaseException:
            for t in threads:
                t.stop()
            pools.close()
            raise
        return cls(path, writer, readers, target, pools, health)

    def drop_index_pending_sync(self, upto: int) -> None:
        """What the index has committed leaves the index's queue (`index_pending` rows up
        to `upto`): on the writer, waking nothing (the index itself asks)."""
        self._writer.call(lambda c: c.execute(
            "DELETE FROM index_pending WHERE id <= ?", (upto,)))

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(conn)` in one write transaction. The index writer is woken after it only
        when it added units or queued index changes (SQLite; in fleet mode always):
        a job's, a cursor's or a served block's write leaves it asleep."""
        if self.kind != "sqlite":
            try:
                return await self._writer.submit(fn)
            finally:
                self.index.notify_write()
        try:
            out, changed = await self._writer.submit(_noting_index_changes(fn))
        except BaseException:
            self.index.notify_write()  # whatever it did is rolled back; cheap to look
            raise
        if changed:
            self.index.notify_write()
        return out

    def post(self, fn: Callable[[sqlite3.Connection], None]) -> None:
        """Queue `fn(conn)` on the writer and return at once; nothing comes back to the
        event loop (no future, no wake-up) and the index writer is not woken: for writes
        of no unit whose errors `fn` logs itself (it raises to roll back). A later
        `write` runs after it (one writer, in order)."""
        self._writer.post(fn)

    async def indexed(self, timeout: float = 30.0) -> None:
        """Until everything written so far is searchable (tests, tools)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # a fleet index paces itself during a backfill; not while someone waits for it
        with self.index.waited():
            self.index.notify_write()
            while not await self.read(self.index.is_caught_up):
                if loop.time() > deadline:
                    raise TimeoutError("the search index did not catch up")
                await asyncio.sleep(0.005)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await min(self._readers, key=DBThread.load).submit(fn)

    def write_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """For code running in a worker thread (never on the event loop)."""
        if self.kind != "sqlite":
            try:
                return self._writer.call(fn)
            finally:
                self.index.notify_write()
        try:
            out, changed = self._writer.call(_noting_index_changes(fn))
        except BaseException:
            self.index.notify_write()
            raise
        if changed:
            self.index.notify_write()
        return out

    def read_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._reader.call(fn)

    async def backup(self, dest: Path) -> int:
        """A consistent copy of the database (`VACUUM INTO`, on its own connection: it
        cannot run inside a transaction). Returns the copy's size in bytes."""
        if self.kind != "sqlite":
            raise StoreError("a PostgreSQL store is backed up with the database's own "
                             "tools (pg_dump --schema " + self.target.schema + ")")

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

    def release_caches(self) -> None:
        """Have each SQLite connection give back its page cache (`PRAGMA shrink_memory`)
        on the connection's own thread (waits for it), and the writer truncate the WAL:
        the idle release calls it from its timer thread once the daemon rests
        (memoryd.runtime.idle_release). A backfill leaves the writer's cache full (16 MB),
        searches the readers' (8 MB each); the next reads fill them again from the OS
        page cache. SQLite mode only."""
        if self.kind != "sqlite":
            return
        for t in (self._writer, *self._readers):
            done = threading.Event()

            def release(conn: sqlite3.Connection, done: threading.Event = done,
                        writer: bool = t is self._writer) -> None:
                try:
                    if writer:  # the WAL a burst of writing left goes too (it kept
                        truncate_wal(conn)  # its peak size on disk)
                    conn.execute("PRAGMA shrink_memory")
                finally:
                    done.set()

            t.post(release)
            done.wait(5.0)  # a stopped thread (the daemon closing) never runs it

    def bound_wal(self, conn: sqlite3.Connection) -> None:
        """At the end of a write function (on the writer): the WAL is truncated once it
        has grown past its bound (`memoryd.store.db.bound_wal`). SQLite mode only."""
        if self.kind == "sqlite":
            bound_wal(conn, self.path)

    async def truncate_wal(self) -> None:
        """Checkpoint and truncate the WAL now (after a backfill: what it wrote is in the
        database file, and the WAL is not left at its peak). SQLite mode only."""
        if self.kind == "sqlite":
            await self.write(truncate_wal)

    async def close(self) -> None:
        await asyncio.to_thread(self.close_sync)

    def close_sync(self) -> None:
        self.index.close()
        for reader in self._readers:
            reader.stop()
        self._writer.stop()
        if self._pools is not None:
            self._pools.close()


# what the index follows (memoryd.index.indexer): units by id, and `index_pending`'s
# changes (AUTOINCREMENT: its sequence only grows, even when the queue is emptied)
_INDEX_MARKS = ("SELECT (SELECT max(id) FROM units), "
                "(SELECT seq FROM sqlite_sequence WHERE name = 'index_pending')")


def _noting_index_changes(fn: Callable[[sqlite3.Connection], T]
                          ) -> Callable[[sqlite3.Connection], tuple[T, bool]]:
    """`fn`, and whether its transaction added units or queued index changes: two
    index seeks before and after, on the writer's thread."""
    def run(conn: sqlite3.Connection) -> tuple[T, bool]:
        before = conn.execute(_INDEX_MARKS).fetchone()
        out = fn(conn)
        return out, conn.execute(_INDEX_MARKS).fetchone() != before

    return run
