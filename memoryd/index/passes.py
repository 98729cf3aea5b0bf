"""What an index pass reads and adds: unit rows past the index's positions, read back
from SQLite in one snapshot, and their tantivy documents added to a writer and committed.
Shared by the daemon's indexer thread (`memoryd.index.indexer`) and a backlog's writer
process (`memoryd.index.bulk`), so both index exactly the same documents.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from memoryd.runtime import lag_trace
from memoryd.index.schema import document, speaker_code
from memoryd.index.tail import Tail, TailDoc
from memoryd.index.text import dup_hash, index_text

Read = tuple[list[Any], list[Any], list[Any], list[int]]

UNIT_ROWS = ("SELECT u.id AS unit_id, u.session_pk, u.seq, u.ts, u.role, u.kind, u.content, "
         "u.one_liner FROM units u ")


def live_docs(rows: list[Any], tail: Tail) -> tuple[list[object], list[TailDoc]]:
    """The index documents of unit rows and the same units as tail documents (one
    index text each)."""
    docs, live = [], []
    for r in rows:
        body = index_text(r["content"])
        ol = index_text(r["one_liner"]) if r["one_liner"] else ""
        sp, dup = speaker_code(r["role"], r["kind"]), dup_hash(r["content"])
        docs.append(document(r, body, ol, speaker=sp, dup=dup, chars=len(r["content"])))
        live.append(tail.doc(r, body, ol, speaker=sp, dup=dup))
    return docs, live


def unit_doc(r: sqlite3.Row) -> object:
    """The index document of a unit row read with `UNIT_ROWS`."""
    return document(r, index_text(r["content"]),
                    index_text(r["one_liner"]) if r["one_liner"] else "",
                    speaker=speaker_code(r["role"], r["kind"]), dup=dup_hash(r["content"]),
                    chars=len(r["content"]))


def unit_docs(rows: list[sqlite3.Row]) -> list[object]:
    """The index documents of unit rows read with `UNIT_ROWS`."""
    return [unit_doc(r) for r in rows]


def read_batch(conn: sqlite3.Connection, upto: int, done: int, batch: int) -> Read:
    """(pending changes, new units, changed units to index again) past these positions,
    read in one snapshot."""
    conn.execute("BEGIN")
    try:
        pending = conn.execute("SELECT id, unit_id FROM index_pending WHERE id > ? "
                               "ORDER BY id LIMIT ?", (done, batch)).fetchall()
        changed = sorted({r[1] for r in pending if r[1] <= upto})
        rows = conn.execute(UNIT_ROWS + "WHERE u.id > ? ORDER BY u.id LIMIT ?",
                            (upto, batch)).fetchall()
        again = [row for i in range(0, len(changed), 500) for row in conn.execute(
            UNIT_ROWS + "WHERE u.id IN (" + ",".join("?" * len(changed[i:i + 500])) + ")",
            changed[i:i + 500]).fetchall()]
    finally:
        conn.rollback()
    return pending, rows, again, changed


def add_batches(w: Any, conn: sqlite3.Connection, pos: tuple[int, int], got: Read,
                ids_query: Callable[[list[int]], object], *, batch: int, every_s: float,
                stop: Callable[[], bool] = lambda: False) -> tuple[int, int]:
    """Add `got` and what follows it to the writer `w`, then commit: at once when a read
    came back short, else after `every_s` of batches. The new positions. In the daemon's
    indexer thread, or in a backlog's process of its own (`memoryd.index.bulk`)."""
    upto, done = pos
    t0 = time.monotonic()
    while True:
        pending, rows, again, changed = got
        if changed:  # deleted first: re-added below if the unit is still there
            w.delete_documents_by_query(ids_query(changed))
        for r in (*again, *rows):  # one by one: tantivy's thread starts at the first
            w.add_document(unit_doc(r))
        if rows:
            upto = rows[-1]["unit_id"]
        if pending:
            done = pending[-1][0]
        if (len(rows) < batch and len(pending) < batch or stop()
                or time.monotonic() - t0 >= every_s):
            break
        got = read_batch(conn, upto, done, batch)
    lag_trace.stage("index_added")
    w.commit()
    lag_trace.stage("index_commit")
    return upto, done
