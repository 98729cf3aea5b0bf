"""A fleet member's search index: the local tantivy index following the shared store's
change feed (issue 14 item 4).

`FleetIndex` is the `SearchIndex` of a PostgreSQL store. Its writer thread
(`FeedIndexer`) never follows by unit id alone, which can skip a row that another
machine commits late with a lower id; it applies the change feed
(`memoryd.fleet.changefeed`) instead, and keeps its position (a snapshot) in the
index's own meta file, written after each tantivy commit, so a restart resumes where
the index stopped (a crash between the commit and the meta applies the last batch again,
harmlessly: applying is by unit id, from the unit's current row).

Joining: an index without a position (new machine, missing, corrupt or older index,
`memoryctl reindex`, a position the prune left behind) is emptied, a position is taken
with `changefeed.join` *before* anything is read, and the units are indexed by id in
the background while search says `index: rebuilding` and falls back to its scan. Then
it follows from that position (what the build already saw is applied again). A crash
mid-build keeps the position and goes on from the largest id indexed: a unit below it
that the build missed committed after the join, so it is in the feed.

Following, a small batch goes to the writer and to the live tail (`memoryd.index.tail`)
without a commit: searchable at once. The commit (and the position written after it)
waits for the tail's policy (`TailPolicy`) or the daemon's stop; a crash meanwhile
applies the changes since the last stored position again.

Each apply (and each build batch) first writes the changed units' rows, their sessions
and files into the row cache (`memoryd.fleet.row_cache`, `rows.sqlite` beside the
index), which search and context read once the index is ready (a session's attribute
change comes as a change of its last unit, re-read with its session). The cache goes
with the index: a
reset empties both, and a missing or older cache makes the index rebuild.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from memoryd.errors import StoreUnavailableError
from memoryd.fleet import changefeed as cf
from memoryd.fleet.follower import UNREACHABLE, Follower
from memoryd.fleet.health import Health
from memoryd.fleet.row_cache import FEED_ROWS, RowCache, read_changed
from memoryd.index import META, SearchIndex
from memoryd.index.indexer import (
    BATCH,
    LIVE_UNITS,
    NICE,
    IndexWriterThread,
    live_docs,
    unit_docs,
)
from memoryd.store_target import StoreTarget

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


class FleetIndex(SearchIndex):
    def __init__(self, root: Path, db_path: Path, connect: Any, target: StoreTarget,
                 *, health: Health | None = None, poll_interval_s: float = POLL_S) -> None:
        super().__init__(root, db_path, connect=connect)
        self.target = target
        self.health = health or Health("store (change feed)", mask=target.scrub)
        self.poll_interval_s = poll_interval_s
        # what search trusts: applied, committed, and confirmed by a poll of the feed
        # (a stored position may have been pruned past); None while joining or starting
        self.position: cf.Position | None = None
        self.caught_at: float | None = None   # wall time of the last poll with nothing new
        # whether this daemon is backfilling its own transcripts (daemon.py sets it):
        # the feed is then applied in large, spaced batches (BUSY_GAP_S)
        self.busy: Any = lambda: False
        self.busy_gap_s = BUSY_GAP_S
        self.waiters = 0  # callers waiting for everything to be searchable: no pacing
        self.report_every_s = REPORT_S  # how often the fleet hears the stored position
        # the rows search and context read, kept by the same applies (row_cache)
        self.rows = RowCache(root)

    def open(self, clear_pending: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.rows.open() and self._read_meta():
            # a missing or older row cache: the index is rebuilt with it, so the index
            # never holds a unit whose row the cache lacks
            log.info("search index: the row cache at %s is new; rebuilding with it",
                     self.rows.path)
            self._store_meta({"complete": False, "feed": None})
        super().open(clear_pending)

    def close(self) -> None:
        super().close()
        self.rows.close()

    def reset(self) -> None:
        super().reset()
        self.rows.clear()

    @contextlib.contextmanager
    def waited(self) -> Any:
        """While held, the writer does not gather changes (`Store.indexed`: an ingest a
        caller waits on is applied at once, even during a backfill)."""
        self.waiters += 1
        try:
            yield
        finally:
            self.waiters -= 1

    def _new_indexer(self, clear_pending: Any) -> FeedIndexer:
        return FeedIndexer(self, clear_pending)

    # -- meta: the position lives beside the schema version ------------------------------

    def _write_meta(self, *, complete: bool) -> None:
        """`complete=False` comes from `reset` only: the position goes with the index.
        `complete=True` (a build finished) keeps it."""
        feed = self._read_meta().get("feed") if complete else None
        self._store_meta({"complete": complete, "feed": feed})

    def saved_position(self) -> cf.Position | None:
        feed = self._read_meta().get("feed")
        if not isinstance(feed, str):
            return None
        try:
            return cf.Position.from_json(feed)
        except ValueError:
            return None

    def save_position(self, pos: cf.Position) -> None:
        meta = self._read_meta()
        self._store_meta({"complete": bool(meta.get("complete")), "feed": pos.to_json()})

    def _store_meta(self, fields: dict[str, Any]) -> None:
        from memoryd.index.schema import SCHEMA_VERSION

        tmp = self.root / (META + ".tmp")
        tmp.write_text(json.dumps({"schema": SCHEMA_VERSION, **fields}))
        os.replace(tmp, self.root / META)

    # -- the store's side ----------------------------------------------------------------

    def is_caught_up(self, conn: Any) -> bool:
        """Every change committed as `conn` sees it is in the index (one index probe)."""
        pos = self.position
        if self.state != "ready" or pos is None:
            return False
        return not cf.pending(conn.raw, self.target.schema, pos)

    def lag(self, conn: Any) -> dict[str, Any]:
        """How far the index is behind the store: changes committed and not applied, and
        for how long the index has had something to apply (0 when it has none)."""
        pos = self.position
        if pos is None:  # joining: everything is ahead of it
            n = conn.execute("SELECT count(*) FROM units").fetchone()[0]
        else:
            n = cf.lag(conn.raw, self.target.schema, pos)
        since = self.caught_at
        seconds = 0.0 if n == 0 else (round(time.time() - since, 1) if since else None)
        return {"changes": int(n), "seconds": seconds}

    def status(self, conn: Any) -> dict[str, Any]:
        out = super().status(conn)
        out["lag"] = self.lag(conn)
        out["feed"] = {"position": self.position.done if self.position else None,
                       **(self._indexer.follow_status() if self._indexer else {}),
                       "store": self.health.status()}
        out["row_cache"] = self.rows.status()
        return out

    def prune_changes(self, active_within_s: float = cf.DEFAULT_ACTIVE_WITHIN_S) -> int:
        """Delete the change rows every machine active within `active_within_s` has
        applied (the hourly job; any machine may run it, they serialize on a lock)."""
        conn = self.connect()
        try:
            n = cf.prune(conn.raw, self.target.schema, active_within_s)
        finally:
            conn.close()
        if n:
            log.info("change feed: pruned %d changes every active machine has applied", n)
        return n


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
        self.applies = 0  # batches of changes applied (to the tail, or committed)
        self.changes = 0  # change rows read from the feed
        self.indexed = 0  # documents added to the index (build and feed)
        # this thread's CPU seconds by stage of the feed's applies (status, bench)
        self.cpu = {"read": 0.0, "rows": 0.0, "index": 0.0}

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
        self._applied_at = time.monotonic()  # the gap counts from the build's last commit too
        ix.committed()
        ix.upto = rows[-1]["unit_id"]
        return True

    def _make_follower(self) -> Follower:
        ix, t = self.ix, self.ix.target
        from memoryd.store.pg import conninfo

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
                ix.close_writer()  # idle a while: let the writer's memory arena go
            # a NOTIFY, a local write, the poll interval or the tail's time to commit
            f.wait(timeout=None if due is None else min(due, ix.poll_interval_s),
                   stop=self._wake)
        return 0.0

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
