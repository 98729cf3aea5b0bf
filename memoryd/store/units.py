"""Units: storing them, and reading the rows that search ranks and shows.

`store_record` is where the adapters' merge semantics become rows: a replayed record
id is a no-op, an `append` piece is added once per part id, a `replace` upsert
rewrites the unit. The search index (`memoryd.index`) follows: new units by id, a
rewritten one through `index_pending`, in the same transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Any

from memoryd.models import Record
from memoryd.store.counters import counter
from memoryd.tokens import estimate_tokens


@dataclass(frozen=True, slots=True)
class Stored:
    unit_id: int
    new: bool


UNIT_COLUMNS = ("session_pk", "record_id", "seq", "turn", "role", "kind", "content",
                "tool_name", "tool_args", "related_id", "ts", "file_id", "offset", "parts",
                "chars", "tokens")
_COLS = ", ".join('"offset"' if c == "offset" else c for c in UNIT_COLUMNS)
_ROW_MARKS = f"({', '.join('?' * len(UNIT_COLUMNS))})"
_INSERT = f"INSERT INTO units ({_COLS}) VALUES {_ROW_MARKS}"
# SQLite: rows per multi-row INSERT (16 columns: 1,600 parameters, well under the
# 32,766 SQLite allows since 3.32). The triggers on `units` (counters, reused ids) make
# SQLite keep a statement journal, which copies every page a statement changes; one
# statement per row (`executemany`) copied the units, index and counter pages for every
# unit: 140 us of CPU per unit, a third of it with 100 rows per statement (bench/README).
INSERT_ROWS = 100
_COPY = f"COPY units ({_COLS}) FROM STDIN"


class SessionWriter:
    """Stores units into one session inside the current transaction. The session's
    counters (next seq, turns, unit counts, time span) are kept here and written once by
    `flush()`.

    A backfill writes thousands of units per batch, so `add()` only queues a record and
    `flush()` writes the queue in order: the record ids the session already holds are
    read in one query per 500, and the new units go in as multi-row INSERTs (SQLite) or
    one `COPY` (PostgreSQL: one statement, so the change feed's statement trigger runs
    once per batch instead of once per unit). A record whose id is stored, or queued
    earlier in the same batch, is merged as `store()` merges it, after the units queued
    before it are written. `store()` writes one record at once and returns its id."""

    def __init__(self, conn: sqlite3.Connection, pk: int) -> None:
        self.conn, self.pk = conn, pk
        row = conn.execute("SELECT next_seq, turns, units, user_units, first_ts, last_ts, "
                           "title FROM sessions WHERE id = ?", (pk,)).fetchone()
        self.next_seq, self.turns, self.units, self.user_units = row[0], row[1], row[2], row[3]
        self.first_ts, self.last_ts = row[4], row[5]
        self.title: str | None = None  # a fallback title, when the session has none
        self.has_title = row[6] is not None
        self.dirty = False
        self._queued: list[tuple[Record, str, int | None, int | None]] = []

    def _row(self, rec: Record, record_id: str, file_id: int | None,
             offset: int | None) -> tuple[Any, ...]:
        """The new unit's row, and the session's counters moved past it."""
        user_turn = int(rec.role == "user" and rec.kind == "message")
        row = (self.pk, record_id, self.next_seq, self.turns + user_turn, rec.role, rec.kind,
               rec.content, rec.tool_name, rec.tool_args, rec.related_id, rec.ts, file_id,
               offset, rec.part_id, len(rec.content), estimate_tokens(rec.content))
        self.next_seq += 1
        self.turns += user_turn
        self.units += 1
        self.user_units += user_turn
        if user_turn and not self.has_title:
            self.title, self.has_title = fallback_title(rec.content), True
        if rec.ts is not None:
            self.first_ts = rec.ts if self.first_ts is None else min(self.first_ts, rec.ts)
            self.last_ts = rec.ts if self.last_ts is None else max(self.last_ts, rec.ts)
        self.dirty = True
        return row

    def store(self, rec: Record, record_id: str, file_id: int | None,
              offset: int | None) -> Stored | None:
        """Insert or merge one record now. Returns None when nothing changed."""
        self._write_queued()
        if self._held({record_id}):
            return _merge(self.conn, self.pk, rec, record_id)
        row = self._row(rec, record_id, file_id, offset)
        return Stored(int(self.conn.execute(_INSERT + " RETURNING id", row).fetchone()[0]),
                      True)

    def add(self, rec: Record, record_id: str, file_id: int | None,
            offset: int | None) -> None:
        """Queue one record for `flush()`."""
        self._queued.append((rec, record_id, file_id, offset))

    def flush(self) -> int:
        """Write the queued records (new units and merges, in order) and the session's
        counters. Returns the number of new units."""
        queued, self._queued = self._queued, []
        new = 0
        if queued:
            held = self._held({rid for _, rid, _, _ in queued})
            rows: list[tuple[Any, ...]] = []
            for rec, rid, file_id, offset in queued:
                if rid in held:
                    if rows:  # a merge reads the unit: the ones queued before it go first
                        self._insert(rows)
                        rows = []
                    _merge(self.conn, self.pk, rec, rid)
                    continue
                held.add(rid)
                rows.append(self._row(rec, rid, file_id, offset))
                new += 1
            if rows:
                self._insert(rows)
        if self.dirty:
            self.conn.execute(
                "UPDATE sessions SET next_seq = ?, turns = ?, units = ?, user_units = ?, "
                "first_ts = ?, last_ts = ?, title = coalesce(title, ?) WHERE id = ?",
                (self.next_seq, self.turns, self.units, self.user_units, self.first_ts,
                 self.last_ts, self.title, self.pk))
            self.dirty = False
        return new

    def _write_queued(self) -> None:
        if self._queued:
            self.flush()

    def _held(self, rids: set[str]) -> set[str]:
        """Which of `rids` the session already holds."""
        held: set[str] = set()
        for chunk in _chunks(sorted(rids)):
            held.update(r[0] for r in self.conn.execute(
                f"SELECT record_id FROM units WHERE session_pk = ? AND record_id IN "
                f"({_marks(len(chunk))})", (self.pk, *chunk)))
        return held

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        if getattr(self.conn, "engine", "sqlite") == "postgresql":
            raw = self.conn.raw  # type: ignore[attr-defined]
            with raw.cursor() as cur, cur.copy(_COPY) as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            for i in range(0, len(rows), INSERT_ROWS):
                part = rows[i:i + INSERT_ROWS]
                self.conn.execute(_insert_rows(len(part)), list(chain.from_iterable(part)))


def _insert_rows(n: int) -> str:
    """One INSERT of `n` unit rows (the same SQL text per `n`, so sqlite3's statement
    cache keeps it prepared)."""
    if n == INSERT_ROWS:
        return _INSERT_FULL
    return f"INSERT INTO units ({_COLS}) VALUES " + ", ".join([_ROW_MARKS] * n)


_INSERT_FULL = f"INSERT INTO units ({_COLS}) VALUES " + ", ".join([_ROW_MARKS] * INSERT_ROWS)


def fallback_title(text: str, limit: int = 80) -> str:
    """A session's first user message, first non-empty line, as its title."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def store_record(conn: sqlite3.Connection, pk: int, rec: Record, record_id: str,
                 file_id: int | None, offset: int | None) -> Stored | None:
    """Insert or merge one record into session `pk` (see SessionWriter for many)."""
    w = SessionWriter(conn, pk)
    stored = w.store(rec, record_id, file_id, offset)
    w.flush()
    return stored


def _merge(conn: sqlite3.Connection, pk: int, rec: Record, record_id: str) -> Stored | None:
    """The record id is already stored: a replay is a no-op, an `append` piece is added
    once per part id, a `replace` upsert rewrites the unit."""
    row = conn.execute(
        "SELECT id, content, parts FROM units WHERE session_pk = ? AND record_id = ?",
        (pk, record_id),
    ).fetchone()
    uid, content, parts = row["id"], row["content"], row["parts"]
    if rec.merge == "append":
        have = set((parts or "").split("\n"))
        if not rec.part_id or rec.part_id in have:
            return None
        content = content + "\n\n" + rec.content if content else rec.content
        parts = (parts + "\n" if parts else "") + rec.part_id
    elif rec.merge == "replace":
        if rec.content == content:
            return None
        content = rec.content
    else:
        return None
    conn.execute(
        "UPDATE units SET content = ?, parts = ?, chars = ?, tokens = ?, "
        "tool_name = coalesce(?, tool_name), tool_args = coalesce(?, tool_args) WHERE id = ?",
        (content, parts, len(content), estimate_tokens(content), rec.tool_name, rec.tool_args,
         uid),
    )
    conn.execute("INSERT INTO index_pending (unit_id) VALUES (?)", (uid,))
    return Stored(uid, False)


def count_units(conn: sqlite3.Connection) -> int:
    """The number of units in the store (archived ones have left it), from the counter
    the triggers keep (m009): `count(*)` over units reads a whole index, 100+ ms at 1M."""
    return counter(conn, "units")


def id_bounds(conn: sqlite3.Connection) -> tuple[int, int]:
    """(smallest, largest) unit id; (0, 0) for an empty store. Two subqueries: SQLite
    finds a lone min() or max() at the end of the key, but `min(id), max(id)` in one
    select reads the whole table (134 ms at 1M units, every 5 s for the idle embed
    worker: 3.5% of a core at rest)."""
    lo, hi = conn.execute(
        "SELECT (SELECT min(id) FROM units), (SELECT max(id) FROM units)").fetchone()
    return (lo or 0, hi or 0)


SEARCH_COLUMNS = (
    "u.id AS unit_id, u.record_id, s.agent, s.session_id, s.project, u.role, u.kind, u.ts, "
    "u.seq, u.turn, u.content, u.one_liner, u.tool_name, f.path, u.offset"
)
# what ranking needs of a candidate: no content beyond a head for spotting duplicates
CANDIDATE_COLUMNS = (
    "u.id AS unit_id, u.session_pk, u.seq, u.role, u.kind, u.ts, u.chars, s.project"
)

Exclusion = tuple[int, int]
"""(session_pk, from_seq): leave out that session's units with seq >= from_seq."""


CHUNK = 500  # ids per `IN (...)`: well under both engines' limit on parameters


def _chunks(ids: Iterable[int]) -> list[list[int]]:
    ids = list(ids)
    return [ids[i:i + CHUNK] for i in range(0, len(ids), CHUNK)]


def _marks(n: int) -> str:
    return ",".join("?" * n)


def units_by_id(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Full search rows (content, session, file) of the given units."""
    out: dict[int, dict[str, Any]] = {}
    for chunk in _chunks(ids):
        for r in conn.execute(
                f"SELECT {SEARCH_COLUMNS} FROM units u JOIN sessions s ON s.id = u.session_pk "
                f"LEFT JOIN files f ON f.id = u.file_id WHERE u.id IN ({_marks(len(chunk))})",
                chunk).fetchall():
            out[r["unit_id"]] = dict(r)
    return out


def candidate_rows(conn: sqlite3.Connection, ids: Iterable[int], head_chars: int = 400,
                   where: tuple[list[str], list[object]] = ([], [])
                   ) -> dict[int, dict[str, Any]]:
    """What reranking needs of the given units: position in the session, role, kind,
    time, project, and the first `head_chars` characters (`head`, to spot duplicates);
    of those that pass `where` (SQL clauses on `units u` and `sessions s`, and their
    arguments), when given."""
    out: dict[int, dict[str, Any]] = {}
    extra = "".join(f" AND {c}" for c in where[0])
    for chunk in _chunks(ids):
        for r in conn.execute(
                f"SELECT {CANDIDATE_COLUMNS}, substr(u.content, 1, ?) AS head FROM units u "
                f"JOIN sessions s ON s.id = u.session_pk WHERE u.id IN ({_marks(len(chunk))})"
                + extra, (head_chars, *chunk, *where[1])).fetchall():
            out[r["unit_id"]] = dict(r)
    return out


def session_units_around(conn: sqlite3.Connection, spots: Iterable[tuple[int, int]],
                         radius: int) -> list[dict[str, Any]]:
    """Units within `radius` seq of each (session_pk, seq) spot, spots themselves included."""
    spans = [(pk, seq - radius, seq + radius) for pk, seq in spots]
    if not spans:
        return []
    rows = []
    for i in range(0, len(spans), CHUNK // 3):
        part = spans[i:i + CHUNK // 3]
        rows += conn.execute(
            "WITH spans (pk, lo, hi) AS (VALUES " + ", ".join(["(?, ?, ?)"] * len(part)) + ") "
            "SELECT u.id AS unit_id, u.session_pk, u.record_id, u.seq, u.turn, u.role, "
            "u.kind, u.ts, u.content, u.one_liner, u.tool_name FROM spans j "
            "JOIN units u ON u.session_pk = j.pk AND u.seq BETWEEN j.lo AND j.hi "
            "ORDER BY u.session_pk, u.seq", [v for span in part for v in span]).fetchall()
    rows.sort(key=lambda r: (r["session_pk"], r["seq"]))
    seen: set[int] = set()
    out = []
    for r in rows:
        if r["unit_id"] not in seen:
            seen.add(r["unit_id"])
            out.append(dict(r))
    return out


def session_tails(conn: sqlite3.Connection, session_id: str, recent: int
                  ) -> list[Exclusion]:
    """For each session with this id (any agent): exclude its last `recent` units."""
    return [(r[0], r[1] - recent) for r in conn.execute(
        "SELECT id, next_seq FROM sessions WHERE session_id = ?", (session_id,))]
