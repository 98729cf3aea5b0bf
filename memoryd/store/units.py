"""Units and their full-text index.

`store_record` is where the adapters' merge semantics become rows: a replayed record
id is a no-op, an `append` piece is added once per part id, a `replace` upsert
rewrites the unit. The FTS row (rowid = unit id) follows every change.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from memoryd.ingest.adapters.base import Record
from memoryd.store.fts import index_text
from memoryd.tokens import estimate_tokens


@dataclass(frozen=True, slots=True)
class Stored:
    unit_id: int
    new: bool


def store_record(conn: sqlite3.Connection, pk: int, rec: Record, record_id: str,
                 file_id: int | None, offset: int | None) -> Stored | None:
    """Insert or merge one record into session `pk`. Returns None when nothing changed."""
    row = conn.execute(
        "SELECT id, content, parts FROM units WHERE session_pk = ? AND record_id = ?",
        (pk, record_id),
    ).fetchone()
    if row is None:
        return Stored(_insert(conn, pk, rec, record_id, file_id, offset), True)
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
    conn.execute("UPDATE units_fts SET body = ? WHERE rowid = ?", (index_text(content), uid))
    return Stored(uid, False)


def _insert(conn: sqlite3.Connection, pk: int, rec: Record, record_id: str,
            file_id: int | None, offset: int | None) -> int:
    is_user_turn = rec.role == "user" and rec.kind == "message"
    cur = conn.execute(
        "UPDATE sessions SET next_seq = next_seq + 1, units = units + 1, "
        "user_units = user_units + :u, turns = turns + :u, "
        "first_ts = CASE WHEN :ts IS NULL THEN first_ts ELSE min(coalesce(first_ts, :ts), :ts) END, "
        "last_ts = CASE WHEN :ts IS NULL THEN last_ts ELSE max(coalesce(last_ts, :ts), :ts) END "
        "WHERE id = :pk RETURNING next_seq - 1, turns",
        {"u": int(is_user_turn), "ts": rec.ts, "pk": pk},
    ).fetchone()
    seq, turn = cur[0], cur[1]
    uid = conn.execute(
        "INSERT INTO units (session_pk, record_id, seq, turn, role, kind, content, tool_name, "
        "tool_args, related_id, ts, file_id, offset, parts, chars, tokens) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (pk, record_id, seq, turn, rec.role, rec.kind, rec.content, rec.tool_name, rec.tool_args,
         rec.related_id, rec.ts, file_id, offset, rec.part_id, len(rec.content),
         estimate_tokens(rec.content)),
    ).fetchone()[0]
    conn.execute("INSERT INTO units_fts (rowid, body, one_liner) VALUES (?, ?, '')",
                 (uid, index_text(rec.content)))
    return uid


def count_units(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM units").fetchone()[0]


SEARCH_COLUMNS = (
    "u.id AS unit_id, u.record_id, s.agent, s.session_id, s.project, u.role, u.kind, u.ts, "
    "u.seq, u.turn, u.content, u.one_liner, u.tool_name, f.path, u.offset"
)


def search_units(conn: sqlite3.Connection, match: str, *, limit: int,
                 agent: str | None = None, project: str | None = None,
                 session_id: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """BM25 over content and one-liners (one-liners weigh more). Returns (total, rows)."""
    clauses, args = ["units_fts MATCH ?"], [match]
    for col, val in (("s.agent", agent), ("s.project", project), ("s.session_id", session_id)):
        if val is not None:
            clauses.append(f"{col} = ?")
            args.append(val)
    where = " AND ".join(clauses)
    joins = ("FROM units_fts JOIN units u ON u.id = units_fts.rowid "
             "JOIN sessions s ON s.id = u.session_pk ")
    total = conn.execute(f"SELECT count(*) {joins} WHERE {where}", args).fetchone()[0]
    if not total:
        return 0, []
    rows = conn.execute(
        f"SELECT {SEARCH_COLUMNS}, -bm25(units_fts, 1.0, 3.0) AS score {joins}"
        f"LEFT JOIN files f ON f.id = u.file_id WHERE {where} ORDER BY score DESC LIMIT ?",
        (*args, limit),
    ).fetchall()
    return total, [dict(r) for r in rows]
