"""Unit embeddings in SQLite (`unit_vectors`, m017): what the embed worker reads and
writes, and what the model's process searches by meaning (memoryd.embed,
memoryd.recall.union).

A vector is 384 int8 (384 bytes), the unit's L2-normalised embedding scaled so its largest
component is 127: cosine is computed from the int8 values and their own norm, so no scale
is stored. Which units are embedded (`EMBEDDABLE`): user and assistant messages (their
text cut to a bound) and tool units that have a one-liner (the one-liner only, never the
raw output); compaction notes, meta and system lines are not. A unit's vector leaves with
the unit (foreign key) and with its text (trigger).

In a shared store (fleet mode) each machine embeds the units of its own sessions
(`machine`: the store's; None in SQLite mode, one machine owns every unit), so a unit is
embedded once in the fleet; the vectors reach every machine's row cache through the
change feed (`memoryd.store.pg.feed_ddl`, `memoryd.fleet.row_cache`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from memoryd.store.units import CHUNK

EMBEDDABLE = ("((u.kind = 'message' AND u.role IN ('user', 'assistant')) OR "
              "(u.kind IN ('tool_call', 'tool_result') AND u.one_liner IS NOT NULL))")
_MISSING = "NOT EXISTS (SELECT 1 FROM unit_vectors v WHERE v.unit_id = u.id)"
_MINE = "u.session_pk IN (SELECT id FROM sessions WHERE machine = ?)"


def _own(where: list[str], args: list, machine: str | None) -> None:
    """Only this machine's units (fleet mode); every unit when `machine` is None."""
    if machine is not None:
        where.append(_MINE)
        args.append(machine)


def unit_text(kind: str, content: str, one_liner: str | None, max_chars: int) -> str:
    """What is embedded for a unit: a message's text cut to `max_chars`, a tool unit's
    one-liner."""
    if kind != "message":
        return (one_liner or "")[:max_chars]
    return content[:max_chars]


def pending(conn: sqlite3.Connection, *, below: int | None = None, above: int | None = None,
            limit: int, max_chars: int, machine: str | None = None) -> list[tuple[int, str]]:
    """Up to `limit` embeddable units without a vector, newest first, with id < `below`
    or id > `above`: (id, text to embed)."""
    where: list[str] = [EMBEDDABLE, _MISSING]
    args: list = []
    _own(where, args, machine)
    if below is not None:
        where.append("u.id < ?")
        args.append(below)
    if above is not None:
        where.append("u.id > ?")
        args.append(above)
    rows = conn.execute(
        "SELECT u.id, u.kind, substr(u.content, 1, ?), u.one_liner FROM units u WHERE "
        + " AND ".join(where) + " ORDER BY u.id DESC LIMIT ?",
        [max_chars, *args, limit]).fetchall()
    return [(r[0], unit_text(r[1], r[2], r[3], max_chars)) for r in rows]


def count_pending(conn: sqlite3.Connection, lo: int, hi: int,
                  machine: str | None = None) -> int:
    """Embeddable units without a vector with lo <= id < hi (the worker counts its backlog
    in slices, so no statement holds a reader for long)."""
    where, args = ["u.id >= ?", "u.id < ?", EMBEDDABLE, _MISSING], [lo, hi]
    _own(where, args, machine)
    return conn.execute("SELECT count(*) FROM units u WHERE " + " AND ".join(where),
                        args).fetchone()[0]


def count(conn: sqlite3.Connection, machine: str | None = None) -> int:
    """Vectors stored (of this machine's units, when given)."""
    if machine is None:
        return conn.execute("SELECT count(*) FROM unit_vectors").fetchone()[0]
    return conn.execute("SELECT count(*) FROM unit_vectors v JOIN units u ON u.id = v.unit_id "
                        "WHERE " + _MINE, (machine,)).fetchone()[0]


def save(conn: sqlite3.Connection, rows: Iterable[tuple[int, bytes]]) -> int:
    """Store vectors of units that still exist (one deleted meanwhile is skipped). In
    PostgreSQL the unit's row is read `FOR KEY SHARE`: a forget not yet committed makes
    the save wait, then skip the unit; read plainly, the unit was there, and the foreign
    key's own check, waiting the same, failed the whole batch."""
    lock = " FOR KEY SHARE" if getattr(conn, "engine", "sqlite") == "postgresql" else ""
    n = 0
    for uid, vec in rows:  # an upsert both engines speak (the WHERE keeps SQLite's parse)
        n += conn.execute("INSERT INTO unit_vectors (unit_id, vec) SELECT id, ? FROM units "
                          f"WHERE id = ?{lock} ON CONFLICT (unit_id) DO UPDATE "
                          "SET vec = excluded.vec", (vec, uid)).rowcount
    return n


def clear(conn: sqlite3.Connection, machine: str | None = None) -> int:
    """Every vector gone (`memoryctl reindex`: the worker embeds again, newest first); in
    a shared store, this machine's."""
    if machine is None:
        return conn.execute("DELETE FROM unit_vectors").rowcount
    return conn.execute("DELETE FROM unit_vectors WHERE unit_id IN (SELECT u.id FROM units u "
                        "WHERE " + _MINE + ")", (machine,)).rowcount


def vectors_of(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, bytes]:
    """The stored vectors of these units (those embedded)."""
    ids = list(ids)
    out: dict[int, bytes] = {}
    for i in range(0, len(ids), CHUNK):
        part = ids[i:i + CHUNK]
        out.update((r[0], bytes(r[1])) for r in conn.execute(
            "SELECT unit_id, vec FROM unit_vectors WHERE unit_id IN ("
            + ",".join("?" * len(part)) + ")", part))
    return out
