"""The one index writer: a thread that makes the tantivy index follow SQLite.

SQLite is the truth; the index is derived and disposable. New units are found by id
(the index's largest `unit_id` is where it stopped, so a crash loses nothing: the gap is
indexed on the next start). Changes to stored units (a merged piece, a one-liner, a
forgotten session) are rows in `index_pending`, written in the same transaction as the
change and cleared once the index has committed them. Each pass reads what is new (by
`BATCH`) and adds it to the writer; passes follow one another while there is work, then
the thread sleeps until the store says it wrote something.

Live appends are searchable without a commit: a small pass also goes into the index's
live tail (`memoryd.index.tail`), which searches consult beside the index, and the
commit (a segment written and synced: the slow part) waits until the tail is big or old
enough (`TailPolicy`), or the daemon stops. It runs in the bulk thread, not on the
writer thread: live passes go on meanwhile into the tail (the writer gets their documents
once the commit is done), so an append never waits for a commit (at load 10-19 one took
0.1-1.1 s, and the appends that landed in it were the p99 of append -> searchable). A
crash loses nothing: the index reports the largest unit id it committed, and
`index_pending` rows are cleared only after the commit that holds them, so the gap is
indexed again on start.

A rebuild (a missing or older index, `memoryctl reindex`) runs at a lower CPU priority
(the writer's own worker threads inherit it): background work never delays ingest or a
query. A backfill's own units are indexed at the daemon's priority: their indexing is
the second half of ingesting them (a unit is not found until it is indexed), and a niced
indexer got the least CPU on a busy machine, so the index trailed ingest and the backfill
ended tens of seconds after its last line was stored (bench/README, backfill pass 2).

A backlog's bulk passes (a backfill's, a rebuild's) run in a writer process of its own
(`memoryd.index.bulk`, started from this thread with `subprocess`, niced for a rebuild):
their Python (reading the rows back, each unit's document) took ~40% of the daemon's GIL
while the file readers and the store's writer waited for it (bench/README, `bcpu2`,
`bproc`). This thread hands the writer over (`SearchIndex.lend_writer`), sends each
pass's positions, reloads searchers on the child's commits and clears `index_pending`
as after an in-process pass. While the child lives it does every bulk pass; it ends when
the writer rests (`WRITER_IDLE_S` without work), before a live pass (those stay here,
with the tail), at a rebuild's request and at stop, and the writer comes back
(`writer_returned`). A child that dies loses nothing: what it
committed is in the index, the rest of the backlog is indexed in process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from memoryd.runtime import lag_trace
from memoryd.runtime.idle_release import RELEASE
from memoryd.index.bulk_child import BulkChild, BulkChildGone
from memoryd.index.passes import UNIT_ROWS as UNIT_ROWS
from memoryd.index.passes import Read, add_batches, live_docs, read_batch
from memoryd.index.passes import unit_docs as unit_docs

if TYPE_CHECKING:
    from memoryd.index import SearchIndex

log = logging.getLogger(__name__)

BATCH = 2000
COMMIT_EVERY_S = 1.0  # under a backlog, one commit per this much adding
LIVE_UNITS = 200  # a pass this small runs at normal priority (live appends)
WRITER_IDLE_S = 2.0  # the writer and its memory arena go after this long without work
IDLE_POLL_S = 30.0  # a safety net; writes wake the thread at once
NICE = 5

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
        self.wakes = 0  # `wake` calls: the store's writes that may have left it work

    def _main(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self.wakes += 1
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)


class Indexer(IndexWriterThread):
    """Follows SQLite by unit id. A small pass (live appends, at most `LIVE_UNITS`)
    adds what it finds to the writer and to the live tail, searchable at once, and the
    commit waits for the tail's policy; a large one (a backfill, a rebuild) keeps adding
    batches and commits every `COMMIT_EVERY_S` (a commit takes the tail along). A
    rebuild's passes (and the tail's commits) run in a helper thread at `NICE`, whose
    commits make tantivy's worker threads niced as well; a backfill's run here, at the
    daemon's priority (its commits start tantivy's workers again at that priority).
    The writer stays open while work keeps coming and is let go after `WRITER_IDLE_S`
    without any; then what the burst left is released once the daemon rests."""

    ix: SearchIndex

    def __init__(self, ix: Any, clear_pending: Callable[[int], None]) -> None:
        super().__init__(ix, clear_pending)
        self._bulk = ThreadPoolExecutor(1, thread_name_prefix="memoryd-indexer-bulk",
                                        initializer=_lower_priority)
        self._uncommitted = 0  # the last index_pending row added but not committed
        # the tail's commit runs in the bulk thread while live passes go on into the tail;
        # what they add waits here for the writer (busy committing) until it is done
        self._inflight: Future[None] | None = None
        self._held: list[tuple[list[int], list[object]]] = []
        self._committing = 0  # the index_pending row that commit holds
        # a backfill's bulk passes, from the first until a pass finds nothing more:
        # background jobs wait meanwhile (`SearchIndex.backlog`)
        self.backlogged = False
        # a backlog's passes in a process of their own (`memoryd.index.bulk`): from the
        # first bulk pass until the writer rests; in process again once one has died,
        # until then (and always when this is False)
        self.bulk_process = True
        self.child: BulkChild | None = None
        self._child_failed = False

    def stop(self, timeout: float = 10.0) -> None:
        # a backlog's writer process ends with the thread (`_end_child`): its pass
        # committed, its merges finished, as an in-process writer's would be; killed
        # only if that takes longer than `BulkChild.end` allows
        super().stop(timeout)
        self._bulk.shutdown(wait=False)

    def _main(self) -> None:
        conn = self.ix.connect()
        try:
            while not self._stop:
                self._wake.clear()
                try:
                    self._reap()
                    while not self._stop and self._pass(conn):
                        pass
                    due = self.ix.commit_due()
                    if due == 0 and self._inflight is None:
                        self._start_commit()
                except Exception as e:  # logged, shown in status, retried on the next wake
                    log.exception("indexing failed")
                    self.error = f"{type(e).__name__}: {e}"
                    self._wake.wait(5.0)
                    continue
                self.error = None
                if self._inflight is not None:
                    self._wake.wait(IDLE_POLL_S)  # new work, or the commit's end
                    continue
                self.ix.caught_up(keep_writer=True)
                if due is not None:
                    self._wake.wait(due)  # new work, or the tail's time to be committed
                    continue
                if self.ix.has_writer():
                    if self._wake.wait(WRITER_IDLE_S):
                        continue  # more work while the writer is still open
                    self._rest(conn)
                self._wake.wait(IDLE_POLL_S)
        finally:
            with contextlib.suppress(Exception):  # at shutdown: the tail goes to disk
                self._end_child()
                self._reap(wait=True)
                if self.ix.commit_due() is not None and not self.ix.rebuild_requested():
                    self._commit()
            self.ix.close_writer()
            conn.close()

    def _rest(self, conn: sqlite3.Connection) -> None:
        """The writer has been idle `WRITER_IDLE_S`: let go of it (its arena, its merge
        threads) and of the pages this thread's read connection cached, and have the
        freed heap given back once the daemon rests (`RELEASE.settle`). The next write
        opens a writer again (a few ms, on the first pass only). A backlog's writer
        process ends here too."""
        self._end_child()
        self._child_failed = False
        self.ix.close_writer()
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA shrink_memory")
        RELEASE.settle()

    def _commit(self) -> None:
        """Commit what the writer holds (the tail), reload, then let the store forget
        the pending changes it held."""
        lag_trace.stage("index_added")
        self.ix.writer().commit()
        lag_trace.stage("index_commit")
        self.commits += 1
        self.ix.committed()
        lag_trace.stage("index_reload")
        if self._uncommitted:
            self._clear_pending(self._uncommitted)
            self._uncommitted = 0

    def _start_commit(self) -> None:
        """Commit what the writer holds (the tail) in the bulk thread; live passes go on
        meanwhile (`_live`), into the tail only. `_reap` finishes it."""
        self.ix.tail.mark()
        self._committing, self._uncommitted = self._uncommitted, 0
        w = self.ix.writer()
        lag_trace.stage("index_added")
        fut = self._bulk.submit(w.commit)
        fut.add_done_callback(lambda _: self._wake.set())
        self._inflight = fut

    def _reap(self, *, wait: bool = False) -> None:
        """Once the commit `_start_commit` began is done (or, with `wait`, after waiting
        for it): searchers reload, the tail keeps what came after the commit began, the
        store forgets the pending changes it held, and the writer gets what was held
        back from it meanwhile. A failed commit leaves everything in the tail."""
        fut = self._inflight
        if fut is None or not (wait or fut.done()):
            return
        self._inflight = None
        try:
            fut.result()
        except BaseException:
            with self.ix.tail.lock:
                self.ix.tail.abort()
            self._uncommitted = max(self._uncommitted, self._committing)
            self._committing = 0
            self._write_held()
            raise
        lag_trace.stage("index_commit")
        self.ix.committed()
        self.commits += 1  # counted once searchers see it
        lag_trace.stage("index_reload")
        if self._committing:
            self._clear_pending(self._committing)
            self._committing = 0
        self._write_held()

    def _write_held(self) -> None:
        held, self._held = self._held, []
        if held:
            w = self.ix.writer()
            for changed, docs in held:
                if changed:
                    w.delete_documents_by_query(self.ix.ids_query(changed))
                for d in docs:
                    w.add_document(d)

    def _pass(self, conn: sqlite3.Connection) -> bool:
        """Index new units and pending changes, then commit; False when there was none."""
        if self.ix.rebuild_requested():
            self._end_child()
            self._reap(wait=True)
            self.ix.reset()
        pos = (self.ix.upto, self.ix.pending_done)
        rebuild = self.ix.state == "rebuilding"
        if self.child is not None and self.child.nice == (NICE if rebuild else 0):
            # the backlog's writer process has the writer: two seeks say whether it has
            # more to do, without reading rows it reads again
            n = _probe(conn, *pos)
            if not n:
                self.backlogged = False
                return False
            if rebuild or n > LIVE_UNITS:
                return self._child_pass(pos, rebuild)
        if self.child is not None:  # a live pass (or a rebuild's child, now a backfill's)
            self._end_child()
            pos = (self.ix.upto, self.ix.pending_done)
        first = self._read(conn, *pos)
        if not first[0] and not first[1]:
            self.backlogged = False
            return False
        lag_trace.stage("index_read", len(first[1]))
        if rebuild or len(first[1]) + len(first[2]) > LIVE_UNITS:
            self.backlogged = not rebuild
            self._reap(wait=True)  # the writer is needed
            if self.bulk_process and not self._child_failed:
                return self._child_pass(pos, rebuild)
            if rebuild:  # background work, niced
                upto, done = self._bulk.submit(self._add, conn, pos, first).result()
            else:  # a backfill: the rest of its ingest
                upto, done = self._add(conn, pos, first)
            self._bulk_committed(pos, upto, done)
            return True
        self.backlogged = False
        upto, done = self._live(pos, first)
        if done > pos[1]:
            self._uncommitted = done  # cleared after the commit that holds it
        self.ix.upto = upto
        if done > pos[1]:
            self.ix.pending_done = done
        return True

    def _bulk_committed(self, pos: tuple[int, int], upto: int, done: int) -> None:
        """A bulk pass committed up to these positions: searchers reload, then the store
        forgets the pending changes it held."""
        self.commits += 1
        self.ix.committed()  # searchers see the commit before anyone is told it is done
        lag_trace.stage("index_reload")
        if done > pos[1] or self._uncommitted:
            self._clear_pending(max(done, self._uncommitted))
            self._uncommitted = 0
        self.ix.upto = upto
        if done > pos[1]:
            self.ix.pending_done = done

    def _child_pass(self, pos: tuple[int, int], rebuild: bool) -> bool:
        """A bulk pass in the backlog's writer process (started at its first pass, with
        the writer handed over: what the tail holds is committed first). A child that
        died is logged and the backlog goes on in process, from what the index holds."""
        if self.child is None:
            if self.ix.commit_due() is not None or self._uncommitted:
                self._commit()  # the tail's documents are in this writer, uncommitted
            self.ix.lend_writer()
            self.child = BulkChild(self.ix.root / "tantivy", self.ix.db_path,
                                   nice=NICE if rebuild else 0, batch=BATCH,
                                   commit_every_s=COMMIT_EVERY_S)
            log.info("search index: a %s in writer process %d", "rebuild" if rebuild
                     else "backlog", self.child.pid)
        try:
            upto, done, rows = self.child.run(*pos)
        except BulkChildGone as e:
            self.child = None
            self.ix.writer_returned()  # a commit it made before dying counts
            if self._stop:
                return False
            log.warning("search index: the backlog's writer process ended (%s); "
                        "indexing in process until the backlog is done", e)
            self._child_failed = True
            return True
        if not rows:
            self.backlogged = False
            return False
        self._bulk_committed(pos, upto, done)
        return True

    def _end_child(self) -> None:
        """End the backlog's writer process (at its end of input it lets its merges
        finish) and take the writer back."""
        child, self.child = self.child, None
        if child is not None:
            t0 = time.monotonic()
            code = child.end()
            if code and not self._stop:
                log.warning("search index: the backlog's writer process exited with %s",
                            code)
            else:
                log.info("search index: writer process %d done (%.2f s to end it)",
                         child.pid, time.monotonic() - t0)
            self.ix.writer_returned()

    def _live(self, pos: tuple[int, int], got: Read) -> tuple[int, int]:
        """Add a small read to the writer and to the tail, without a commit: searchable
        as soon as the tail holds it. The new positions."""
        upto, done = pos
        pending, rows, again, changed = got
        docs, live = live_docs(again + rows, self.ix.tail)
        if self._inflight is not None:  # the writer is committing: after it (`_reap`)
            self._held.append((changed, docs))
        else:
            w = self.ix.writer()
            if changed:  # deleted first: re-added below if the unit is still there
                w.delete_documents_by_query(self.ix.ids_query(changed))
            for d in docs:
                w.add_document(d)
        with self.ix.tail.lock:  # a changed unit is never in neither
            self.ix.tail.drop(changed)
            self.ix.tail.add(live)
        lag_trace.stage("index_tail")
        if rows:
            upto = rows[-1]["unit_id"]
        if pending:
            done = pending[-1][0]
        return upto, done

    def _read(self, conn: sqlite3.Connection, upto: int, done: int) -> Read:
        return read_batch(conn, upto, done, BATCH)

    def _add(self, conn: sqlite3.Connection, pos: tuple[int, int], got: Read
             ) -> tuple[int, int]:
        return add_batches(self.ix.writer(), conn, pos, got, self.ix.ids_query,
                           batch=BATCH, every_s=COMMIT_EVERY_S, stop=lambda: self._stop)


def _probe(conn: sqlite3.Connection, upto: int, done: int) -> int:
    """New units past `upto` and pending changes past `done`, each counted up to
    `LIVE_UNITS` + 1."""
    cap = LIVE_UNITS + 1
    return int(conn.execute(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM units WHERE id > ? LIMIT ?)) + "
        "(SELECT count(*) FROM (SELECT 1 FROM index_pending WHERE id > ? LIMIT ?))",
        (upto, cap, done, cap)).fetchone()[0])


def _lower_priority() -> None:
    with contextlib.suppress(OSError, AttributeError):
        # below the daemon's own priority, whatever it started at (`nice -n 19 memoryd`:
        # an absolute NICE would raise a root daemon's background work above it)
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid,
                       min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE))
