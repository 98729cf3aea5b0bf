"""A fleet member's search index: the local tantivy index following the shared store's
change feed (issue 14 item 4).

`FleetIndex` is the `SearchIndex` of a PostgreSQL store: its meta (the feed position
beside the schema version), its row cache, and the store's view of it (caught up, lag,
status, pruning). Its writer thread (`memoryd.fleet.feed_indexer.FeedIndexer`, which
also says why a machine's own writes are indexed once, by the feed) never follows by
unit id alone, which can skip a row that another machine commits late with a lower id;
it applies the change feed (`memoryd.fleet.changefeed`) instead, and keeps its
position (a snapshot) in the index's own meta file, written after each tantivy commit,
so a restart resumes where the index stopped (a crash between the commit and the meta
applies the last batch again, harmlessly: applying is by unit id, from the unit's
current row).

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
with the index: a reset empties both, and a missing or older cache makes the index rebuild.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from memoryd.fleet import changefeed as cf
from memoryd.fleet.feed_indexer import BUSY_GAP_S, POLL_S, REPORT_S, FeedIndexer
from memoryd.store.health import Health
from memoryd.fleet.row_cache import RowCache
from memoryd.index import META, SearchIndex
from memoryd.index.recent import RECENT_LIMIT, RecentHits
from memoryd.store_target import StoreTarget

log = logging.getLogger(__name__)

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
        self.busy = lambda: False
        self.busy_gap_s = BUSY_GAP_S
        self.waiters = 0  # callers waiting for everything to be searchable: no pacing
        self.report_every_s = REPORT_S  # how often the fleet hears the stored position
        # the rows search and context read, kept by the same applies (row_cache)
        self.rows: RowCache = RowCache(root)
        # the hits served last, to answer from while the truth is unreachable
        # (`memoryd.recall.offline`)
        self.recent = RecentHits(RECENT_LIMIT)

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

    def backlog(self) -> bool:
        """The index is being built, or works through a backlog of the feed: the daemon's
        background jobs wait for it (`Daemon._jobs_wait`), as a SQLite daemon's index is
        caught up when its backfill ends. False without a writer thread (nothing to wait
        for: the store is closing, or never opened)."""
        ind = self._indexer
        if ind is None:
            return False
        return self.state == "rebuilding" or ind.backlog()

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
