"""Archived sessions: which sessions' units left the hot store for archive files, and
putting units back. Plain sync functions run on the store's thread."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from memoryd.store.sessions import delete_session_units

ARCHIVE_FIELDS = ("record_id", "seq", "turn", "role", "kind", "content", "tool_name",
                  "tool_args", "related_id", "ts", "offset", "parts", "one_liner",
                  "one_liner_by", "one_liner_prompt", "chars", "tokens")


def sessions_to_archive(conn: sqlite3.Connection, before: float,
                        limit: int = 1000) -> list[dict[str, Any]]:
    """Sessions whose last activity is before `before` and that still hold units."""
    rows = conn.execute(
        "SELECT s.id AS pk, s.agent, s.session_id, s.machine, s.project, s.last_ts "
        "FROM sessions s WHERE coalesce(s.last_ts, s.first_ts, 0) < ? AND s.last_ts IS NOT NULL "
        "AND EXISTS (SELECT 1 FROM units u WHERE u.session_pk = s.id) "
        "ORDER BY s.last_ts LIMIT ?", (before, limit)).fetchall()
    return [dict(r) for r in rows]


def session_units(conn: sqlite3.Connection, pk: int) -> list[dict[str, Any]]:
    cols = ", ".join(f'"{f}"' for f in ARCHIVE_FIELDS)  # "offset" is a keyword
    return [dict(r) for r in conn.execute(
        f"SELECT {cols} FROM units WHERE session_pk = ? ORDER BY seq", (pk,))]


def mark_archived(conn: sqlite3.Connection, pk: int, month: str) -> int:
    """Units are in the archive file: drop them from the store (through the same delete
    path as forget, so the search index follows) and remember where they went."""
    n = delete_session_units(conn, pk)
    conn.execute("INSERT INTO archived_sessions (session_pk, month, units, archived_at) "
                 "VALUES (?, ?, ?, ?) ON CONFLICT (session_pk) DO UPDATE SET "
                 "units = archived_sessions.units + excluded.units, archived_at = excluded.archived_at",
                 (pk, month, n, time.time()))
    conn.execute("UPDATE sessions SET state = 'archived' WHERE id = ?", (pk,))
    return n


def archived(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(
        "SELECT a.month, s.agent, s.session_id, s.project, a.units, a.archived_at "
        "FROM archived_sessions a JOIN sessions s ON s.id = a.session_pk "
        "ORDER BY a.month, s.id")]


def find_session(conn: sqlite3.Connection, session_id: str,
                 agent: str | None) -> list[dict[str, Any]]:
    sql = ("SELECT s.id AS pk, s.agent, s.session_id, a.month FROM sessions s "
           "LEFT JOIN archived_sessions a ON a.session_pk = s.id WHERE s.session_id = ?")
    args: list[Any] = [session_id]
    if agent is not None:
        sql += " AND s.agent = ?"
        args.append(agent)
    return [dict(r) for r in conn.execute(sql, args)]


def restore_units(conn: sqlite3.Connection, pk: int, rows: Sequence[dict[str, Any]]) -> int:
    """Insert archived units back with their original seq (a unit already there is left
    alone: restoring twice does nothing)."""
    n = 0
    cols = ", ".join(f'"{f}"' for f in ARCHIVE_FIELDS)
    marks = ", ".join("?" * (len(ARCHIVE_FIELDS) + 1))
    for r in rows:
        cur = conn.execute(
            f"INSERT INTO units (session_pk, {cols}) VALUES ({marks}) "
            "ON CONFLICT (session_pk, record_id) DO NOTHING",
            (pk, *(r.get(k) for k in ARCHIVE_FIELDS)))
        n += cur.rowcount  # the search index picks them up (m005's triggers)
    conn.execute("DELETE FROM archived_sessions WHERE session_pk = ?", (pk,))
    conn.execute("UPDATE sessions SET state = 'active' WHERE id = ? AND state = 'archived'",
                 (pk,))
    return n
