"""SQLite connections, each owned by one thread.

The event loop never touches SQLite. A `DBThread` owns one connection and runs the
functions submitted to it, one at a time, each in its own transaction (`BEGIN
IMMEDIATE` for the writer, a deferred read transaction for the reader, so a read sees
one consistent snapshot). WAL lets the reader run while the writer commits.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

_STOP = object()


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                               check_same_thread=False)
    else:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA cache_size=-65536")  # 64 MiB
    conn.row_factory = sqlite3.Row
    return conn


class DBThread:
    def __init__(self, path: Path, *, write: bool, name: str) -> None:
        self._path = path
        self._write = write
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
        self._queue.put((fn, fut, loop))
        return fut

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` from a thread that is not the event loop (tests, tools); blocks."""
        done = threading.Event()
        box: dict[str, Any] = {}

        def wrapped(conn: sqlite3.Connection) -> None:
            try:
                box["result"] = fn(conn)
            except BaseException as e:
                box["error"] = e
                raise
            finally:
                done.set()

        self._queue.put((wrapped, None, None))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["result"]

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
            conn = connect(self._path, readonly=not self._write)
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
                fn, fut, loop = item
                self.busy_since = time.monotonic()
                try:
                    conn.execute("BEGIN IMMEDIATE" if self._write else "BEGIN")
                    try:
                        result = fn(conn)
                    except BaseException:
                        conn.rollback()
                        raise
                    conn.commit()
                except BaseException as e:  # delivered to the awaiting coroutine
                    if fut is not None:
                        loop.call_soon_threadsafe(_settle, fut, None, e)
                else:
                    if fut is not None:
                        loop.call_soon_threadsafe(_settle, fut, result, None)
                finally:
                    self.busy_since = None
        finally:
            conn.close()


def _settle(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)
