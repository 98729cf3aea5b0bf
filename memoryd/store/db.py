"""The store's threads, each running the functions submitted to it one at a time.

The event loop never touches the database. A `DBThread` runs each function in its own
transaction through a runner: `SqliteRunner` owns one SQLite connection (`BEGIN
IMMEDIATE` for the writer, a deferred read transaction for a reader, so a read sees one
consistent snapshot; WAL lets readers run while the writer commits); for PostgreSQL,
`memoryd.store.pg.conn.PgRunner` takes a pooled connection per call. An answer reaches the
event loop through `loop.call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

_STOP = object()
PAGE_SIZE = 32768
# The WAL's bound while writing: SQLite checkpoints once the WAL holds this much (its
# default, 1,000 pages, is 32 MB at 32 KiB pages) and then cuts the file back to
# `WAL_KEEP` (without `journal_size_limit` a WAL keeps its peak size for as long as the
# daemon runs: 12.8 MB beside a 1.5 MB database on the shared fixtures, issue 28). At
# rest and after a backfill the WAL is truncated to nothing (`truncate_wal`).
WAL_CHECKPOINT_BYTES = 4 << 20
WAL_KEEP = 4 << 20
# SQLite's own checkpoints cannot start the WAL over while readers keep reading (the
# index's, status' and searches' during a backfill: it reached 31 MB on a 28 MB corpus):
# past this a backfill's batch ends with a checkpoint that waits for them (`bound_wal`)
WAL_BOUND = 8 << 20


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                               check_same_thread=False)
    else:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # a new database gets 32 KiB pages (the setting takes only before the first table;
        # an existing file is rewritten once at open, `memoryd.store.compact`): units
        # average ~0.9 KB and reach 16 KB with tool output, and a unit that does not fit
        # in the rest of a page starts the next one: in 4 KiB pages 13% of the units
        # table was left empty, in 16 KiB pages 6%; 32 KiB pages make the file 3% smaller
        # than 16 KiB ones, 64 KiB another 0.6% for 20% more CPU per cold row read
        # (bench/README.md)
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        page = conn.execute("PRAGMA page_size").fetchone()[0] or PAGE_SIZE
        conn.execute(f"PRAGMA wal_autocheckpoint={max(1, WAL_CHECKPOINT_BYTES // page)}")
        conn.execute(f"PRAGMA journal_size_limit={WAL_KEEP}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=10000")
    # a bounded page cache per connection (writer 16 MiB, each reader 8 MiB): 64 MiB each
    # let a daemon's memory grow with the database (three connections, 190 MiB); reads
    # are a few rows by key now that search runs on the tantivy index, and the OS page
    # cache keeps the rest
    conn.execute(f"PRAGMA cache_size={-8192 if readonly else -16384}")
    conn.row_factory = sqlite3.Row
    # the scalar forms PostgreSQL has (SQLite's two-argument min/max are not standard);
    # NULLs are ignored, as PostgreSQL does
    conn.create_function("greatest", -1, _greatest, deterministic=True)
    conn.create_function("least", -1, _least, deterministic=True)
    return conn


def truncate_wal(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """Checkpoint the whole WAL into the database and truncate it to zero bytes (on the
    writer's connection, as a store call: the call's transaction is ended first, a
    checkpoint cannot run inside one). (busy, WAL frames, frames checkpointed): busy is
    1 when a reader's snapshot held some frames back (the next rest tries again)."""
    conn.commit()
    row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return int(row[0]), int(row[1]), int(row[2])


def bound_wal(conn: sqlite3.Connection, path: Path) -> None:
    """After a write (on the writer, ending its transaction): truncate the WAL when it has
    grown past `WAL_BOUND`. A stat; a checkpoint only then."""
    try:
        big = os.stat(f"{path}-wal").st_size > WAL_BOUND
    except OSError:
        return
    if big:
        truncate_wal(conn)


def _greatest(*args: Any) -> Any:
    vals = [a for a in args if a is not None]
    return max(vals) if vals else None


def _least(*args: Any) -> Any:
    vals = [a for a in args if a is not None]
    return min(vals) if vals else None


class Runner(Protocol):
    def run(self, fn: Callable[[Any], T]) -> T: ...

    def close(self) -> None: ...


class SqliteRunner:
    """One SQLite connection; each call one transaction."""

    def __init__(self, path: Path, write: bool) -> None:
        self.write = write
        self.conn = connect(path, readonly=not write)

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE" if self.write else "BEGIN")
        try:
            result = fn(conn)
        except BaseException:
            conn.rollback()
            raise
        conn.commit()
        return result

    def close(self) -> None:
        self.conn.close()


class DBThread:
    def __init__(self, opener: Callable[[], Runner], *, name: str) -> None:
        self._opener = opener
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.busy_since: float | None = None

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def submit(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._queue.put((fn, fut))
        return fut

    def post(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        """Queue `fn` and return at once: nothing is delivered back (an error only rolls
        its transaction back; `fn` logs it)."""
        self._queue.put((fn, None))

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` from a thread that is not the event loop (tests, tools); blocks until
        its transaction has committed (or rolled back)."""
        done = _Done()
        self._queue.put((fn, done))
        done.wait()
        if done.error is not None:
            raise done.error
        return done.result  # type: ignore[return-value]

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)

    def qsize(self) -> int:
        return self._queue.qsize()

    def load(self) -> int:
        """Work queued plus the one running: where the next read waits least."""
        return self._queue.qsize() + (self.busy_since is not None)

    def _main(self) -> None:
        try:
            runner = self._opener()
        except BaseException as e:
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                item = self._queue.get()
                if item is _STOP:
                    break
                self._answer(runner, *item)
                del item  # nothing of the request kept while waiting for the next
        finally:
            runner.close()

    def _answer(self, runner: Runner, fn: Callable[[Any], Any],
                fut: asyncio.Future[Any] | _Done | None) -> None:
        self.busy_since = time.monotonic()
        error: BaseException | None = None
        result = None
        try:
            result = runner.run(fn)
        except BaseException as e:  # delivered to the awaiting coroutine
            error = e
        self.busy_since = None
        if isinstance(fut, _Done):
            fut.settle(result, error)
        elif fut is not None:
            _deliver(fut, result, error)


class _Done(threading.Event):
    """A blocking `call`'s answer, set once the transaction is over."""

    result: Any = None
    error: BaseException | None = None

    def settle(self, result: Any, error: BaseException | None) -> None:
        self.result, self.error = result, error
        self.set()


def _deliver(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """From a store thread: settle `fut` on its event loop. An answer for a loop closed
    meanwhile (a tool's, another thread's) is dropped: `call_soon_threadsafe`'s
    RuntimeError would end the store's thread."""
    with contextlib.suppress(RuntimeError):
        fut.get_loop().call_soon_threadsafe(_settle, fut, result, error)


def _settle(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)
