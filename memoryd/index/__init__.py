"""The search index: tantivy for retrieval, derived from SQLite and rebuildable.

`SearchIndex` owns one tantivy index directory and the thread that writes it
(`memoryd.index.indexer`), and the live tail (`memoryd.index.tail`): what the writer added
since its last commit, searched beside the index so a unit is found before any commit.
Readers ask it (`memoryd.index.reader`, its base) for ranked candidates, which query
terms a unit matches and per-field scores; filters run inside the index. A missing,
corrupt or older-schema index is rebuilt in the background; meanwhile `state` is
"rebuilding" and searches fall back to a scan of recent units (`memoryd.index.fallback`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import tantivy

from memoryd.runtime.idle_release import RELEASE
from memoryd.index import pages
from memoryd.index.bm25 import MainStats
from memoryd.index.indexer import Indexer
from memoryd.index.protocol import Rows
from memoryd.index.query import Filters, ids_query
from memoryd.index.reader import IndexReader
from memoryd.index.recent import RecentHits
from memoryd.index.schema import ANALYZER, SCHEMA_VERSION, build_analyzer, build_schema
from memoryd.index.tail import Tail, TailPolicy

__all__ = ["Filters", "SearchIndex"]

log = logging.getLogger(__name__)

WRITER_HEAP = 32_000_000
"""The writer's memory budget (one indexing thread). tantivy sizes each new segment's
term table from it (a third of the budget): at 16 MB (its floor is 15) the table is half
the size it gets from 32 MB on, and indexing a backfill's text took ~40% more CPU on
tantivy's thread (1.83 -> 1.26 s for 30k units, a commit per 5,000; no gain above 32 MB;
bench/README, branch `bidx`). The arena fills only as documents come: a live append's
writer holds little."""
META = "memoryd-index.json"


class SearchIndex(IndexReader):
    def __init__(self, root: Path, db_path: Path, connect: Any = None) -> None:
        self.root = root
        self.db_path = db_path
        # a read connection of the index's own (the store's engine gives one)
        self.connect = connect or (lambda: connect_ro(db_path))
        self.schema = build_schema()
        self.analyzer = build_analyzer()
        self.state = "rebuilding"
        self.upto = 0              # the largest unit id in the index
        self.pending_done = 0      # the last index_pending row the index has committed
        self._index: tantivy.Index | None = None
        self._writer: Any = None
        self._writer_elsewhere = False  # a backlog's writer process has it (`lend_writer`)
        self._rebuild = threading.Event()
        self._lock = threading.Lock()  # swaps of the index object
        self._indexer: Any = None  # Indexer, or the fleet's FeedIndexer
        self.tail = Tail(self.analyzer)  # added since the last commit: searched beside it
        self.tail_policy = TailPolicy.from_env()
        self._stats: MainStats | None = None  # the committed index's BM25 statistics
        self._session_clauses: dict[tuple[int, ...], tantivy.Query] = {}
        self._gen = 0  # the searchers' generation: one more at every reload or reset
        self._quiet_reset = self._quiet_ready = False  # a new, empty store's first build
        # what only a fleet index uses (`memoryd.index.protocol.Index`): the hits served
        # last (none kept: an SQLite file is never unreachable), a local copy of the rows
        # (none: search reads the store), and whether the daemon backfills (unused here)
        self.recent = RecentHits(0)
        self.rows: Rows | None = None
        self.busy: Callable[[], bool] = lambda: False

    # -- life cycle ---------------------------------------------------------------------

    def open(self, clear_pending: Any) -> None:
        """Open the index on disk, or start over when it is missing, corrupt or of
        another schema; then start the writer thread (it catches up from SQLite)."""
        self.root.mkdir(parents=True, exist_ok=True)
        meta = self._read_meta()
        tdir = self.root / "tantivy"
        if meta.get("schema") == SCHEMA_VERSION and tantivy.Index.exists(str(tdir)):
            try:
                idx = tantivy.Index.open(str(tdir))
                idx.register_tokenizer(ANALYZER, self.analyzer)
                idx.config_reader(reload_policy="Manual")
                self._index = idx
                self.upto = self._max_unit_id()
                self.state = "ready" if meta.get("complete") else "rebuilding"
                if self.upto > self._db_max_unit_id():
                    # ahead of the database (restored from a backup, or a new one): its
                    # ids mean other units now
                    log.warning("search index at %s is ahead of the database: rebuilding",
                                tdir)
                    self._index = None
            except (ValueError, OSError) as e:
                log.warning("search index at %s unreadable (%s): rebuilding", tdir, e)
                self._index = None
        if self._index is None:
            # a brand-new store has nothing to rebuild from: no line about it
            self._quiet_reset = not meta and self._db_max_unit_id() == 0
            self.reset()
            self._quiet_reset = False
        self._indexer = self._new_indexer(clear_pending)
        self._indexer.start()
        RELEASE.register(self.release_pages)

    def _new_indexer(self, clear_pending: Any) -> Any:
        """The writer thread (fleet mode follows the change feed instead:
        `memoryd.fleet.follow_index`)."""
        return Indexer(self, clear_pending)

    def close(self) -> None:
        RELEASE.unregister(self.release_pages)
        if self._indexer is not None:
            self._indexer.stop()
            self._indexer = None

    def reset(self) -> None:
        """Start an empty index (writer thread or open only): a full rebuild follows."""
        self._rebuild.clear()
        self.close_writer()
        tdir = self.root / "tantivy"
        with self.tail.lock, self._lock:
            self.tail.clear()
            self._stats = None
            self.state = "rebuilding"
            self._write_meta(complete=False)
            self._index = None
            shutil.rmtree(tdir, ignore_errors=True)
            tdir.mkdir(parents=True)
            idx = tantivy.Index(self.schema, path=str(tdir))
            idx.register_tokenizer(ANALYZER, self.analyzer)
            idx.config_reader(reload_policy="Manual")  # reloaded on our commits only
            self._index = idx
            self._gen += 1
            self.upto = 0
        if self._quiet_reset:
            self._quiet_ready = True
        else:
            log.info("search index: rebuilding from the database")

    def request_rebuild(self) -> None:
        """Rebuild from SQLite in the background (`memoryctl reindex`)."""
        self.state = "rebuilding"
        self._rebuild.set()
        self.notify_write()

    # -- the writer thread's side -------------------------------------------------------

    def rebuild_requested(self) -> bool:
        return self._rebuild.is_set()

    def writer(self) -> Any:
        assert not self._writer_elsewhere, "the index writer is in another process"
        if self._writer is None:
            with self._lock:  # not while release_pages reads the mappings
                assert self._index is not None
                self._writer = self._index.writer(heap_size=WRITER_HEAP, num_threads=1)
        return self._writer

    def close_writer(self) -> None:
        """Let go of the writer and its memory arena (when idle and on close)."""
        w, self._writer = self._writer, None
        if w is not None:
            w.wait_merging_threads()

    def lend_writer(self) -> None:
        """A backlog's writer process (`memoryd.index.bulk`) is about to open the
        index's writer: ours goes first (tantivy's writer lock is a file lock), and until
        `writer_returned` this process counts as having one (`has_writer`)."""
        self.close_writer()
        self._writer_elsewhere = True

    def writer_returned(self) -> None:
        """That process has exited: open the index afresh, so this process's list of
        the files it manages (`.managed.json`, which the other writer rewrote) is the one
        on disk and merged-away files are collected by our next writer, and reload. The
        largest unit id is read back from the index: a process that died may have
        committed past what it reported."""
        idx = tantivy.Index.open(str(self.root / "tantivy"))
        idx.register_tokenizer(ANALYZER, self.analyzer)
        idx.config_reader(reload_policy="Manual")
        with self.tail.lock, self._lock:
            self._index = idx
            self._gen += 1
            self._stats = None
            self._writer_elsewhere = False
        self.upto = max(self.upto, self._max_unit_id())

    def committed(self) -> None:
        """A commit is done: searchers reload and the tail (now in the index) empties,
        together for readers (`Tail.lock`)."""
        with self.tail.lock, self._lock:  # a reload unmaps merged-away segments
            assert self._index is not None
            self._index.reload()
            self._gen += 1
            self.tail.committed()  # what came while the commit ran stays
            self._stats = None

    def commit_due(self) -> float | None:
        """Whether the tail should be committed now (0), in how many seconds, or None
        when it is empty (`TailPolicy`)."""
        t, pol = self.tail, self.tail_policy
        if not t.docs and not t.replaced:
            return None
        if len(t.docs) >= pol.docs:
            return 0.0
        return max(0.0, pol.seconds - t.age())

    def release_pages(self) -> int:
        """Drop the index pages searches mapped in from this process's RSS (they stay in
        the OS page cache: the next search maps them back cheaply). Only while no writer
        is open and under the lock, so no index file is unmapped meanwhile. Bytes let go."""
        with self._lock:
            if self._writer is not None or self._writer_elsewhere or self._index is None:
                return 0
            return pages.release(self.root)

    def has_writer(self) -> bool:
        return self._writer is not None or self._writer_elsewhere

    def caught_up(self, *, keep_writer: bool = False) -> None:
        """The writer found nothing more to do: a rebuild is complete, the writer's
        memory can go (now, or when the writer thread has been idle a while)."""
        if not keep_writer:
            self.close_writer()
        if self.state == "rebuilding" and not self._rebuild.is_set():
            self._write_meta(complete=True)
            self.state = "ready"
            log.log(logging.DEBUG if self._quiet_ready else logging.INFO,
                    "search index: ready (%d units)", self.docs())
            self._quiet_ready = False

    def ids_query(self, ids: list[int]) -> tantivy.Query:
        return ids_query(self.schema, ids)

    # -- the store's side ---------------------------------------------------------------

    @contextlib.contextmanager
    def waited(self) -> Iterator[None]:
        """Held while a caller waits for everything to be searchable (`Store.indexed`):
        nothing to change here (a fleet index stops pacing its writer)."""
        yield

    def notify_write(self) -> None:
        """The store committed a write: the index may have something to follow."""
        if self._indexer is not None:
            self._indexer.wake()

    def is_caught_up(self, conn: sqlite3.Connection, *, derived: bool = True) -> bool:
        """Everything committed to the database (as `conn` sees it) is searchable: the
        newest unit is indexed and no change waits in `index_pending`. With `derived`
        off, a derived change may wait (a one-liner: the unit is searchable meanwhile):
        status' `caught_up`, which a one-liner job flipped back to false at rest with
        nothing new stored. Two index seeks."""
        if self.state != "ready":
            return False
        top = conn.execute("SELECT coalesce(max(id), 0) FROM units").fetchone()[0]
        if top > self.upto:
            return False
        return conn.execute("SELECT NOT EXISTS (SELECT 1 FROM index_pending WHERE id > ?"
                            + ("" if derived else " AND derived = 0") + ")",
                            (self.pending_done,)).fetchone()[0] == 1

    def settled(self, conn: sqlite3.Connection) -> bool:
        """Status' `caught_up`: `is_caught_up` letting derived changes wait. An index that
        follows something else (the fleet's, its own `is_caught_up`) answers with that."""
        if type(self).is_caught_up is not SearchIndex.is_caught_up:
            return bool(self.is_caught_up(conn))
        return self.is_caught_up(conn, derived=False)

    def status(self, conn: sqlite3.Connection) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "units": self.docs(), "upto": self.upto,
                               "caught_up": self.settled(conn),
                               "tail": len(self.tail),
                               "commits": getattr(self._indexer, "commits", 0),
                               "wakes": getattr(self._indexer, "wakes", 0)}
        if self._indexer is not None and self._indexer.error:
            out["error"] = self._indexer.error
        return out

    # -- jobs ---------------------------------------------------------------------------

    def backlog(self) -> bool:
        """Whether background jobs should wait for this index (`Daemon._jobs_wait`):
        while its writer works through a backfill's units in bulk passes (not a niced
        rebuild), until a pass finds nothing more. On a loaded machine the index
        trailed the backfill's last stored line by 50k units and 4-5 s, and the
        summaries that began then held the GIL the indexer's Python needed (9% of the
        GIL's samples; bench/README, branch `bcpu2`). A fleet member's follows the shared
        store after its backfill: `FleetIndex.backlog`."""
        return self._indexer is not None and self._indexer.backlogged

    # -- meta ---------------------------------------------------------------------------

    def _max_unit_id(self) -> int:
        assert self._index is not None
        s = self._index.searcher()
        if not s.num_docs:
            return 0
        res = s.search(tantivy.Query.all_query(), 1, count=False, order_by_field="unit_id",
                       order=tantivy.Order.Desc)
        return int(s.fast_field_values("unit_id", [res.hits[0][1]])[0])

    def _db_max_unit_id(self) -> int:
        conn = self.connect()
        try:
            return int(conn.execute("SELECT coalesce(max(id), 0) FROM units").fetchone()[0])
        finally:
            conn.close()

    def _read_meta(self) -> dict[str, Any]:
        try:
            meta = json.loads((self.root / META).read_text())
        except (OSError, ValueError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def _write_meta(self, *, complete: bool) -> None:
        tmp = self.root / (META + ".tmp")
        tmp.write_text(json.dumps({"schema": SCHEMA_VERSION, "complete": complete}))
        os.replace(tmp, self.root / META)


def connect_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection to the database at `path` (the index's own reads, and a
    backlog's writer process's: memoryd.index.bulk)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                           check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=10000")
    conn.row_factory = sqlite3.Row
    return conn
