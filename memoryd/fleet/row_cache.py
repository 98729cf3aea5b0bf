"""A fleet member's local copy of the rows search and context read (issue 14, DESIGN §11:
"search and context stay local-speed"; "a machine keeps answering from its index").

The local tantivy index ranks; the hits' text, their neighbours, and the session
attributes the filters use (agent, project, session id, the summary's mark) are rows.
Read from PostgreSQL they cost a transaction per request (BEGIN, SELECT, COMMIT: three
wake-ups of a server process, ~1.5 ms each at p50 here and 5-12 ms at p90 under load),
and while the database is away they are out of reach. So the feed keeps them here too:
`FeedIndexer` already reads every changed unit's row from PostgreSQL to index it; it
reads the columns below with it (`FEED_ROWS`, joined with the unit's session and file)
and writes them into this SQLite file (`rows.sqlite` in the index's directory) in the
same apply, before the index makes them searchable. A unit gone from the store leaves
this file first, then the index. The build from `units` writes it the same way.

A unit's vector (`memoryd.embed`, written by the machine that embedded it) comes with
its row (`vec`, NULL while it has none) and is kept in `unit_vectors` beside it, where
search finds it by meaning (`memoryd.recall.union`): a vector written later puts its unit into the
feed again (`memoryd.store.pg.feed_ddl`), and its re-read brings it.

Session attributes change without a unit too (a summary's mark, a project): a trigger
on `sessions` puts an upsert of the session's last unit into the feed
(`changefeed.SESSION_STATEMENTS`), and that unit's re-read brings its session row, as
every unit batch does (its `next_seq`, `last_ts` come the same way). Why not a feed of
sessions of its own: a change row every follower version already applies (re-indexing
one unit, harmlessly) keeps a mixed-version fleet following. A session leaves the cache
with its last unit (a forget deletes the units; the feed carries the deletes).

Search and context run the same query functions over this file once the index is
ready (`memoryd.recall.rows`); while the index rebuilds they read PostgreSQL as before. A missing,
unreadable or older file is made anew and the index rebuilds with it (`FleetIndex.open`),
so the index never holds a unit whose row is not here. The file is on disk: the page
cache of each connection is small (issue 11: idle RSS stays flat whatever the corpus).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

FILE = "rows.sqlite"
VERSION = 2  # 2: unit_vectors
CACHE_KIB = 1024  # each connection's page cache
READERS = 2  # threads reading it, as the store has (memoryd.store.READERS)

# what the index needs (indexer.UNIT_ROWS) and what search and context read of a unit,
# its session and its file: one statement per batch of changed units
FEED_ROWS = (
    "SELECT u.id AS unit_id, u.session_pk, u.seq, u.ts, u.role, u.kind, u.content, "
    "u.one_liner, u.file_id, u.record_id, u.turn, u.tool_name, u.chars, u.offset, "
    "s.agent, s.session_id, s.project, s.summary, s.summary_upto, s.summary_by, "
    "s.next_seq, s.last_ts, s.state, f.path, v.vec "
    "FROM units u JOIN sessions s ON s.id = u.session_pk "
    "LEFT JOIN files f ON f.id = u.file_id "
    "LEFT JOIN unit_vectors v ON v.unit_id = u.id "
)

_UNIT_COLS = ("id", "session_pk", "file_id", "record_id", "seq", "turn", "role", "kind",
              "ts", "content", "one_liner", "tool_name", "chars", "offset")
_SESSION_COLS = ("id", "agent", "session_id", "project", "summary", "summary_upto",
                 "summary_by", "next_seq", "last_ts", "state")

_DDL = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('version', '{VERSION}');
CREATE TABLE sessions (id INTEGER PRIMARY KEY, agent TEXT NOT NULL,
    session_id TEXT NOT NULL, project TEXT, summary TEXT,
    summary_upto INTEGER NOT NULL DEFAULT 0, summary_by TEXT,
    next_seq INTEGER NOT NULL DEFAULT 1, last_ts REAL, state TEXT);
CREATE INDEX sessions_session_id ON sessions (session_id);
CREATE INDEX sessions_project ON sessions (project);
CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT NOT NULL);
CREATE TABLE units (id INTEGER PRIMARY KEY, session_pk INTEGER NOT NULL, file_id INTEGER,
    record_id TEXT NOT NULL, seq INTEGER NOT NULL, turn INTEGER NOT NULL,
    role TEXT NOT NULL, kind TEXT NOT NULL, ts REAL, content TEXT NOT NULL,
    one_liner TEXT, tool_name TEXT, chars INTEGER NOT NULL DEFAULT 0, "offset" INTEGER);
CREATE INDEX units_session_seq ON units (session_pk, seq);
CREATE TABLE unit_vectors (unit_id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
"""


def _connect(path: Path, *, write: bool) -> sqlite3.Connection:
    # a reader's connection is used by its own thread only; `close` at stop may run on
    # another, hence check_same_thread=False
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    if write:
        conn.execute("PRAGMA journal_mode=WAL")
        # a crash may lose the last commits: the index's position is older still, so
        # the feed applies them again (the index is rebuilt if the file is torn)
        conn.execute("PRAGMA synchronous=NORMAL")
    else:
        conn.execute("PRAGMA query_only=1")
    return conn


class RowCache:
    """The file, its writer (the feed's thread only) and its readers (one connection
    per reading thread)."""

    def __init__(self, root: Path) -> None:
        self.path = root / FILE
        self._writer: sqlite3.Connection | None = None
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.generation = 0  # bumped when the file is made anew: readers reconnect
        self.count = 0  # units held (kept by `apply`; shown by status and /metrics)
        self.on_vectors: Callable[[], None] = lambda: None  # `apply` wrote vectors
        # the readers' own threads, as the store's readers are: a context read waits in
        # its thread for MEMORY.md and the notes, which the loop reads on the default
        # executor; reading here on that executor too could take all of its threads
        # with waiters, and the files they wait for would never be read
        self.readers = ThreadPoolExecutor(READERS, thread_name_prefix="memoryd-rows")

    # -- life cycle ----------------------------------------------------------------------

    def open(self) -> bool:
        """Open the file, or make it anew when it is missing, unreadable or of another
        version. True when it was made anew (empty: the index must rebuild with it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            try:
                conn = _connect(self.path, write=True)
                row = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
                conn.execute("PRAGMA quick_check(1)")
                if row is not None and row[0] == str(VERSION):
                    self._writer = conn
                    self.count = conn.execute("SELECT count(*) FROM units").fetchone()[0]
                    return False
                conn.close()
            except sqlite3.DatabaseError:
                pass
        self._make()
        return True

    def _make(self) -> None:
        if self._writer is not None:  # readers keep the unlinked file until they reconnect
            with contextlib.suppress(sqlite3.Error):
                self._writer.close()
            self._writer = None
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(str(self.path) + suffix).unlink()
        conn = _connect(self.path, write=True)
        conn.executescript(_DDL)
        self._writer = conn
        self.count = 0
        self.generation += 1

    def clear(self) -> None:
        """Empty (the index is rebuilt from the store): made anew."""
        self._make()

    def close(self) -> None:
        self.readers.shutdown(wait=False)
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            with contextlib.suppress(sqlite3.Error):
                c.close()
        if self._writer is not None:
            with contextlib.suppress(sqlite3.Error):
                self._writer.close()
            self._writer = None

    # -- writing (the feed's thread) -----------------------------------------------------

    def apply(self, rows: Iterable[Any], gone_units: Iterable[int] = ()) -> None:
        """In one transaction: units (rows of `FEED_ROWS`) and their sessions, files and
        vectors written, `gone_units` deleted with their vectors, and the sessions they
        leave empty."""
        conn = self._writer
        if conn is None:
            raise RuntimeError("the row cache is not open")
        rows = list(rows)
        sess = {r["session_pk"]: tuple(r[c] for c in _SESSION_COLS[1:]) for r in rows}
        files = {r["file_id"]: r["path"] for r in rows if r["file_id"] is not None}
        gone = list(gone_units)
        ids = [r["unit_id"] for r in rows]
        conn.execute("BEGIN IMMEDIATE")
        try:
            emptied: set[int] = set()
            count = self.count + len(ids)
            for i in range(0, len(ids), 500):  # the ones replaced, not added
                part = ids[i:i + 500]
                count -= conn.execute(f"SELECT count(*) FROM units WHERE id IN "
                                      f"({','.join('?' * len(part))})", part).fetchone()[0]
            for i in range(0, len(gone), 500):
                part = gone[i:i + 500]
                marks = ",".join("?" * len(part))
                emptied.update(r[0] for r in conn.execute(
                    f"SELECT DISTINCT session_pk FROM units WHERE id IN ({marks})", part))
                count -= conn.execute(f"DELETE FROM units WHERE id IN ({marks})",
                                      part).rowcount
                conn.execute(f"DELETE FROM unit_vectors WHERE unit_id IN ({marks})", part)
            for pk in emptied - sess.keys():
                conn.execute("DELETE FROM sessions WHERE id = ? AND NOT EXISTS "
                             "(SELECT 1 FROM units WHERE session_pk = ?)", (pk, pk))
            conn.executemany(
                f"INSERT OR REPLACE INTO sessions ({', '.join(_SESSION_COLS)}) "
                f"VALUES ({', '.join('?' * len(_SESSION_COLS))})",
                [(pk, *vals) for pk, vals in sess.items()])
            conn.executemany("INSERT OR REPLACE INTO files (id, path) VALUES (?, ?)",
                             list(files.items()))
            conn.executemany(
                f"INSERT OR REPLACE INTO units ({', '.join(_q(c) for c in _UNIT_COLS)}) "
                f"VALUES ({', '.join('?' * len(_UNIT_COLS))})",
                [tuple(r["unit_id" if c == "id" else c] for c in _UNIT_COLS) for r in rows])
            conn.executemany("INSERT OR REPLACE INTO unit_vectors (unit_id, vec) VALUES (?, ?)",
                             [(r["unit_id"], bytes(r["vec"])) for r in rows
                              if r["vec"] is not None])
            conn.executemany("DELETE FROM unit_vectors WHERE unit_id = ?",
                             [(r["unit_id"],) for r in rows if r["vec"] is None])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self.count = count
        if any(r["vec"] is not None for r in rows):
            self.on_vectors()  # the embedder's copy of them is old (`memoryd.embed`)

    def shrink(self) -> None:
        """The writer's page cache given back (the feed's thread, at rest)."""
        if self._writer is not None:
            with contextlib.suppress(sqlite3.Error):
                self._writer.execute("PRAGMA shrink_memory")

    def status(self) -> dict[str, int]:
        """Units held and bytes on disk (the file with its write-ahead log)."""
        size = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                size += Path(str(self.path) + suffix).stat().st_size
        return {"units": self.count, "bytes": size}

    # -- reading (any thread) ------------------------------------------------------------

    def read_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(conn)` in one read transaction (one snapshot) on this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "generation", -1) != self.generation:
            if conn is not None:  # the file was made anew: the old one is unlinked
                with self._lock:
                    if conn in self._conns:
                        self._conns.remove(conn)
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            conn = _connect(self.path, write=False)
            self._local.conn, self._local.generation = conn, self.generation
            with self._lock:
                self._conns.append(conn)
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            conn.execute("COMMIT")

    def units(self) -> int:
        return int(self.read_sync(lambda c: c.execute("SELECT count(*) FROM units")
                                  .fetchone()[0]))


def _q(col: str) -> str:
    return f'"{col}"' if col == "offset" else col


def read_changed(conn: Any, units: list[int], chunk: int = 500) -> list[Any]:
    """The current rows (`FEED_ROWS`) of these units, from the store (the feed's
    thread, a PostgreSQL connection): one statement per `chunk` ids."""
    return [r for i in range(0, len(units), chunk) for r in conn.execute(
        FEED_ROWS + "WHERE u.id IN (" + ",".join("?" * len(units[i:i + chunk])) + ")",
        units[i:i + chunk]).fetchall()]
