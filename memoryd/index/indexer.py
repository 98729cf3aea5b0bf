"""The one index writer: a thread that makes the tantivy index follow SQLite.

SQLite is the truth; the index is derived and disposable. New units are found by id
(the index's largest `unit_id` is where it stopped, so a crash loses nothing: the gap is
indexed on the next start). Changes to stored units (a merged piece, a one-liner, a
forgotten session) are rows in `index_pending`, written in the same transaction as the
change and cleared once the index has committed them. Each pass reads up to `BATCH`
units, writes them, commits once and reloads the searchers; passes follow one another
while there is work, then the thread sleeps until the store says it wrote something.

The thread runs at a lower CPU priority (the writer's own worker threads inherit it):
indexing, and above all a rebuild, never delays ingest or a query.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memoryd.index.schema import document, speaker_code
from memoryd.index.text import dup_hash, index_text

if TYPE_CHECKING:
    from memoryd.index import SearchIndex

log = logging.getLogger(__name__)

BATCH = 2000
IDLE_POLL_S = 30.0  # a safety net; writes wake the thread at once
NICE = 5

UNIT_ROWS = ("SELECT u.id AS unit_id, u.session_pk, u.seq, u.ts, u.role, u.kind, u.content, "
         "u.one_liner FROM units u ")


def unit_docs(rows: list[sqlite3.Row]) -> list[object]:
    """The index documents of unit rows read with `UNIT_ROWS`."""
    return [document(r, index_text(r["content"]),
                     index_text(r["one_liner"]) if r["one_liner"] else "",
                     speaker=speaker_code(r["role"], r["kind"]), dup=dup_hash(r["content"]),
                     chars=len(r["content"])) for r in rows]


class IndexWriterThread:
    """The one writer thread of an index: woken by `wake`, stopped by `stop`; the
    subclass's `_main` does the work (following by id here, the change feed in fleet
    mode: memoryd.fleet.follow_index)."""

    def __init__(self, ix: Any, clear_pending: Callable[[int], None]) -> None:
        self.ix = ix
        self._clear_pending = clear_pending
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._main, name="memoryd-indexer",
                                        daemon=True)
        self.error: str | None = None
        self.commits = 0

    def _main(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)


class Indexer(IndexWriterThread):
    ix: SearchIndex

    def _main(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        conn = self.ix.connect()
        try:
            while not self._stop:
                self._wake.clear()
                try:
                    while not self._stop and self._pass(conn):
                        pass
                except Exception as e:  # logged, shown in status, retried on the next wake
                    log.exception("indexing failed")
                    self.error = f"{type(e).__name__}: {e}"
                    self._wake.wait(5.0)
                    continue
                self.error = None
                self.ix.caught_up()
                self._wake.wait(IDLE_POLL_S)
        finally:
            self.ix.close_writer()
            conn.close()

    def _pass(self, conn: sqlite3.Connection) -> bool:
        """Index one batch of new units and pending changes; False when there was none."""
        if self.ix.rebuild_requested():
            self.ix.reset()
        upto = self.ix.upto
        conn.execute("BEGIN")
        try:
            pending = conn.execute("SELECT id, unit_id FROM index_pending ORDER BY id LIMIT ?",
                                   (BATCH,)).fetchall()
            changed = sorted({r[1] for r in pending if r[1] <= upto})
            rows = conn.execute(UNIT_ROWS + "WHERE u.id > ? ORDER BY u.id LIMIT ?",
                                (upto, BATCH)).fetchall()
            again = [row for i in range(0, len(changed), 500) for row in conn.execute(
                UNIT_ROWS + "WHERE u.id IN (" + ",".join("?" * len(changed[i:i + 500])) + ")",
                changed[i:i + 500]).fetchall()]
        finally:
            conn.rollback()
        if not pending and not rows:
            return False
        w = self.ix.writer()
        if changed:  # deleted first: re-added below if the unit is still there
            w.delete_documents_by_query(self.ix.ids_query(changed))
        for d in unit_docs(again) + unit_docs(rows):
            w.add_document(d)
        w.commit()
        self.commits += 1
        self.ix.committed()  # searchers see the commit before anyone is told it is done
        if rows:
            self.ix.upto = rows[-1]["unit_id"]
        if pending:
            self.ix.pending_done = pending[-1][0]
            self._clear_pending(pending[-1][0])
        return True
