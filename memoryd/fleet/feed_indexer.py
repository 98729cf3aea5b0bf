"""`FeedIndexer`: the writer thread of a fleet member's index (`FleetIndex`,
`memoryd.fleet.follow_index`). It builds the index from `units` when joining, then
applies the change feed (`memoryd.fleet.changefeed`, read through a `Follower`): each
batch's units are re-read from the store, written into the row cache
(`memoryd.fleet.row_cache`) and then into the index, small batches into the live tail
(searchable at once, committed later by the tail's policy), large ones committed at
once. The position is stored in the index's meta only after the commit that holds what
it covers.

**Each unit is indexed once per change, by this thread alone** (issue 14 follow-up).
In fleet mode the daemon's own writes are not indexed where they are written: the
store's writer commits units, one-liners and summaries to PostgreSQL (and wakes this
thread, `notify_write`), and the feed brings them back like any other machine's. So
there is one path into the index, and no bookkeeping of "rows I already indexed" that
a crash could leave out of step with the index: a kill -9 between the store's commit
and the feed's read loses nothing, since the rows are committed in PostgreSQL and the
index's stored position is before them (applied on restart). What the round trip costs
for a machine's own rows was measured (bench/README, "A fleet member's own writes"):
their re-read from PostgreSQL and the row cache's write, not a second indexing. What a
SQLite daemon re-indexes (one-liners, merged pieces: `index_pending`) comes here as an
upsert of the unit; a session attribute change comes as an upsert of its last unit
(for the row cache).

`changes`, `indexed` and `cpu_s` in `follow_status` (`/v1/status` `index.feed`) count
the change rows read, the documents added to the index (build and feed), and this
thread's CPU by stage of the applies (re-read, row cache, index).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

import psycopg

from memoryd.errors import StoreUnavailableError
from memoryd.fleet import changefeed as cf
from memoryd.fleet.follower import UNREACHABLE, Follower
from memoryd.fleet.row_cache import FEED_ROWS, read_changed
from memoryd.runtime.idle_release import RELEASE
from memoryd.index.indexer import (
    BATCH,
    LIVE_UNITS,
    NICE,
    IndexWriterThread,
    live_docs,
    unit_docs,
)

if TYPE_CHECKING:
    from memoryd.fleet.follow_index import FleetIndex

log = logging.getLogger(__name__)

POLL_S = 2.0          # the poll fallback when no NOTIFY comes
CLEAR_PENDING_S = 30.0  # index_pending is SQLite's mechanism: emptied now and then
IN_CHUNK = 500
# the writer stays open while changes keep coming (opening one and waiting for its merges
# on close cost more than the commit of a one-unit batch); closed after this long idle
WRITER_IDLE_S = 30.0
# Commit policy. The first change after a quiet spell is applied at once (follow
# latency). While changes keep coming, the next apply waits until as long after the
# last one as that one took (at most MAX_GAP_S), so the writer is busy at most about
# half the time and trickling changes gather into one commit instead of one each.
# While this daemon backfills its own transcripts (`FleetIndex.busy`), the feed is
# applied in large batches at least BUSY_GAP_S apart and at most a fifth of the time
# (BUSY_DUTY): ingest into the store comes first, every machine's index after.
MAX_GAP_S = 1.0
REPORT_S = 30.0  # the position stored with the last commit, reported for pruning
BUSY_GAP_S = 5.0
BUSY_DUTY = 0.2



class FeedIndexer(IndexWriterThread):
    """The writer thread of a `FleetIndex`: build (when joining), then follow."""

    ix: FleetIndex

    def __init__(self, ix: FleetIndex, clear_pending: Any) -> None:
        super().__init__(ix, clear_pending)
        self.rebuilds = 0
        self.follower: Follower | None = None
        self.pos: cf.Position | None = None  # where it reads from (ix.position: trusted)
        self._cleared_at = 0.0
        self._applied_at = 0.0
        self._apply_s = 0.0  # how long the last apply took
        self._paging = False  # the last poll left another page waiting
        self.held_s = 0.0    # time spent gathering changes before applies (status)
        self.holding = False  # waiting out the gap: no read of the feed until it ends
        self._unsaved: cf.Position | None = None  # applied to the tail, not committed
        self._wrote = False  # the index written since the last rest (`_rest`)
        self.applies = 0  # batches of changes applied (to the tail, or committed)
        self.changes = 0  # change rows read from the feed
        self.indexed = 0  # documents added to the index (build and feed)
        # this thread's CPU seconds by stage of the feed's applies (status, bench)
        self.cpu = {"read": 0.0, "rows": 0.0, "index": 0.0}

    def backlog(self) -> bool:
        """A backlog is being worked through: the last poll of the feed left another page
        waiting (a backfill, a return after an outage). Changes that trickle in (live
        appends, a job's one-liners) never fill a page, so they are no backlog."""
        return self._paging

    def follow_status(self) -> dict[str, Any]:
        f = self.follower
        return {"listening": f.status()["listening"] if f else False,
                "polls": f.polls if f else 0, "commits": self.commits,
                "applies": self.applies, "changes": self.changes,
                "indexed": self.indexed,
                "cpu_s": {k: round(v, 2) for k, v in self.cpu.items()},
                "rebuilds": self.rebuilds, "held_s": round(self.held_s, 1)}

    # -- the loop ------------------------------------------------------------------------

    def _main(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            # below the daemon's own priority, whatever it started at (`nice -n 19 memoryd`:
            # an absolute NICE would raise a root daemon's background work above it)
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid,
                           min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE))
        ix = self.ix
        conn: Any = None
        born = 0  # the outage count when `conn` was made
        try:
            while not self._stop:
                self._wake.clear()
                try:
                    if conn is None or conn.raw.closed:
                        born = ix.health.outages
                        conn = ix.connect()
                    delay = self._step(conn, born)
                except (*UNREACHABLE, StoreUnavailableError) as e:  # the store's threads too
                    with contextlib.suppress(Exception):
                        conn.close()
                    conn = None
                    if ix.health.stale(born):
                        continue  # a connection from before the last outage: not news
                    # the follower reports its own failures; ours count once per outage
                    self._wait(ix.health.failed(e) if ix.health.reachable
                               else ix.health.delay())
                    continue
                except cf.FeedGapError as e:
                    log.warning("search index: %s", e)
                    self._reset()
                    continue
                except Exception as e:  # logged, shown in status, retried
                    log.exception("indexing failed")
                    self.error = f"{type(e).__name__}: {ix.target.scrub(str(e))}"
                    self._wait(5.0)
                    continue
                self.error = None
                if delay:
                    self._wait(delay)
        finally:
            with contextlib.suppress(Exception):  # at shutdown: the tail goes to disk
                if ix.commit_due() is not None and ix.state == "ready":
                    self._commit()
            ix.close_writer()
            if self.follower is not None:
                self.follower.close()
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    def _wait(self, seconds: float) -> None:
        if not self._stop:
            self._wake.wait(seconds)

    def _step(self, conn: Any, born: int | None = None) -> float:
        """One step of work; returns how long to wait before the next (0: go on)."""
        ix = self.ix
        if ix.rebuild_requested():
            self._reset()
        if self.pos is None:
            # a stored position resumes (a build cut short goes on from ix.upto)
            self.pos = ix.saved_position() or self._join(conn)
            self.follower = None
        if ix.state == "rebuilding":
            if self._build(conn):
                return 0.0
            ix.caught_up()  # the build is complete: search uses the index from now on
            ix.health.ok(born)
        return self._follow(conn)

    def _reset(self) -> None:
        self._unsaved = None
        self.ix.reset()
        self.ix.position = self.pos = None
        self.rebuilds += 1
        if self.follower is not None:
            self.follower.close()
            self.follower = None

    def _join(self, conn: Any) -> cf.Position:
        """A position taken before the build reads anything, stored with an empty index."""
        ix = self.ix
        if ix.docs() or ix.state != "rebuilding":
            ix.reset()  # an index of unknown position (built before the feed): start over
            self.rebuilds += 1
        pos = cf.join(conn.raw, ix.target.schema, ix.target.machine)
        ix.save_position(pos)
        log.info("search index: joined the change feed at %s; building from the store",
                 pos.done)
        return pos

    def _build(self, conn: Any) -> bool:
        """Index the next units by id; False when there are none left."""
        ix = self.ix
        rows = conn.execute(FEED_ROWS + "WHERE u.id > ? ORDER BY u.id LIMIT ?",
                            (ix.upto, BATCH)).fetchall()
        if not rows:
            return False
        ix.rows.apply(rows)  # the rows first: the index never holds a unit they lack
        w = ix.writer()
        for d in unit_docs(rows):
            w.add_document(d)
        self.indexed += len(rows)
        w.commit()
        self.commits += 1
        self._wrote = True
        self._applied_at = time.monotonic()  # the gap counts from the build's last commit too
        ix.committed()
        ix.upto = rows[-1]["unit_id"]
        return True

    def _make_follower(self) -> Follower:
        ix, t = self.ix, self.ix.target
        from memoryd.store.pg.conn import conninfo

        url, kwargs = conninfo(t)
        extra = {k: v for k, v in kwargs.items() if k == "password"}
        connect = functools.partial(psycopg.connect, **extra) if extra else psycopg.connect
        assert self.pos is not None
        return Follower(url, t.schema, t.machine, self.pos, health=ix.health,
                        poll_interval_s=ix.poll_interval_s, connect=connect,
                        report_every_s=ix.report_every_s,
                        durable=ix.saved_position)  # not what the tail holds uncommitted

    def _follow(self, conn: Any) -> float:
        ix = self.ix
        if self.follower is None:
            self.follower = self._make_follower()
            self.follower.report()  # the fleet sees this machine's position at once
        f = self.follower
        self._hold()
        batch = f.next_batch()
        if batch.changes:
            t0 = time.monotonic()
            if self._apply(conn, batch):
                ix.save_position(batch.position)  # after the commit: a crash re-applies
                self._unsaved = None
            else:
                self._unsaved = batch.position  # stored with the tail's commit
            self._apply_s = time.monotonic() - t0
            log.debug("change feed: %d changes applied in %.0f ms", len(batch.changes),
                      self._apply_s * 1000)
        elif self._unsaved is not None:
            self._unsaved = batch.position  # an empty poll moves on with it
        # (an empty poll moves on without writing: nothing lay between the positions)
        f.commit(batch)
        self._paging = batch.more
        ix.position = self.pos = batch.position
        due = ix.commit_due()
        if due == 0:
            self._commit()
            due = None
        if not batch.changes and not batch.more:
            ix.caught_at = time.time()
            self._clear_index_pending(conn)
            if due is None and time.monotonic() - self._applied_at > WRITER_IDLE_S:
                self._rest()
            # a NOTIFY, a local write, the poll interval or the tail's time to commit
            f.wait(timeout=None if due is None else min(due, ix.poll_interval_s),
                   stop=self._wake)
        return 0.0

    def _rest(self) -> None:
        """Idle `WRITER_IDLE_S` after writing (a build, a followed backlog, live
        changes): let go of the writer (its arena, its merge threads) and of the row
        cache writer's page cache, and have the freed heap given back once the daemon
        rests (`RELEASE.settle`, as the SQLite writer does), with no query needed. Once
        per burst: the next rest after more writing arms it again."""
        self.ix.close_writer()
        if not self._wrote:
            return
        self._wrote = False
        self.ix.rows.shrink()
        RELEASE.settle()

    def _commit(self) -> None:
        """Commit what the tail holds, reload, then store the position it reached."""
        ix = self.ix
        ix.writer().commit()
        self.commits += 1
        ix.committed()
        if self._unsaved is not None:
            ix.save_position(self._unsaved)
            self._unsaved = None

    def _gap(self) -> float:
        """How long after the last apply the next one may start (the commit policy)."""
        if self.ix.waiters:
            return 0.0
        try:
            busy = bool(self.ix.busy())
        except Exception:  # a hook that fails never stops the index
            busy = False
        if busy:
            return max(self.ix.busy_gap_s, self._apply_s * (1 / BUSY_DUTY - 1))
        # a backlog read page by page (a return after an outage, another machine's
        # backfill) goes on at once: the gap is for changes that trickle in
        return 0.0 if self._paging else min(MAX_GAP_S, self._apply_s)

    def _hold(self) -> None:
        """Wait out the gap since the last apply: changes arriving meanwhile are read by
        the next poll, all in one batch. Local writes do not cut it short (they are what
        is being gathered); stopping does, and the gap is looked at again as it goes (a
        backfill that ends turns the long gap into the short one)."""
        t0 = time.monotonic()
        try:
            while not self._stop:
                left = self._applied_at + self._gap() - time.monotonic()
                if left <= 0:
                    break
                self.holding = True  # (seen by status and tests: no read until it ends)
                self._wake.wait(min(left, 0.5))
                self._wake.clear()
        finally:
            self.holding = False
        self.held_s += time.monotonic() - t0

    def _apply(self, conn: Any, batch: cf.Batch) -> bool:
        """Drop every changed unit from the index and add back the ones still stored,
        as they are now. A small batch goes into the live tail, searchable at once, and
        waits for the tail's commit (False); a large one is committed at once, with the
        tail, and searchers reload (True)."""
        ix = self.ix
        latest = batch.latest()
        ids = sorted(latest)
        upserts = [u for u in ids if latest[u] == "upsert"]
        c0 = time.thread_time()
        rows = read_changed(conn, upserts, IN_CHUNK)
        c1 = time.thread_time()
        # the row cache first: searchable units have their rows, gone ones lose them
        found = {r["unit_id"] for r in rows}
        ix.rows.apply(rows, [u for u in ids if u not in found])
        c2 = time.thread_time()
        self.cpu["read"] += c1 - c0
        self.cpu["rows"] += c2 - c1
        # a unit above the index's largest id cannot be in it: only the others are
        # deleted first (a delete is applied to every segment at the commit)
        drop = [u for u in ids if u <= ix.upto]
        self.applies += 1
        live = len(ids) <= LIVE_UNITS and ix.state == "ready"
        docs, tail_docs = live_docs(rows, ix.tail) if live else (unit_docs(rows), [])
        w = ix.writer()
        for i in range(0, len(drop), IN_CHUNK):
            w.delete_documents_by_query(ix.ids_query(drop[i:i + IN_CHUNK]))
        for d in docs:
            w.add_document(d)
        self.indexed += len(docs)
        self.changes += len(batch.changes)
        self._wrote = True
        self._applied_at = time.monotonic()
        if live:
            with ix.tail.lock:  # a changed unit is never in neither
                ix.tail.drop(drop)
                ix.tail.add(tail_docs)
        else:
            w.commit()
            self.commits += 1
            ix.committed()  # searchers see it before the position says it is applied
        self.cpu["index"] += time.thread_time() - c2
        if rows:
            ix.upto = max(ix.upto, max(r["unit_id"] for r in rows))
        return not live

    def _clear_index_pending(self, conn: Any) -> None:
        """The store still writes `index_pending` beside each change (SQLite's way); in
        fleet mode the feed carries those changes, so the rows are only emptied."""
        now = time.monotonic()
        if now - self._cleared_at < CLEAR_PENDING_S:
            return
        self._cleared_at = now
        top = conn.execute("SELECT coalesce(max(id), 0) FROM index_pending").fetchone()[0]
        if top:
            self._clear_pending(top)
