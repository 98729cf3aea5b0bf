"""MEMORY.md provenance and the day's material for consolidation: plain sync functions
`(conn, ...)` run on the store's thread."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

PROVENANCE_COLUMNS = (
    "id, item_key, item, source, scope, importance, reasons, first_seen, last_confirmed, "
    "confirmations, made_by, prompt_version, state, superseded_by")


def day_sessions(conn: sqlite3.Connection, start: float, end: float) -> list[dict[str, Any]]:
    """Sessions with units in [start, end), with their rolling summary."""
    rows = conn.execute(
        "SELECT s.id AS pk, s.agent, s.session_id, s.project, s.title, s.summary, "
        "s.summary_by, s.summary_prompt, s.first_ts, s.last_ts FROM sessions s "
        "WHERE s.id IN (SELECT DISTINCT session_pk FROM units WHERE ts >= ? AND ts < ?) "
        "ORDER BY s.first_ts, s.id", (start, end)).fetchall()
    return [dict(r) for r in rows]


def day_units(conn: sqlite3.Connection, pk: int, start: float | None,
              end: float | None) -> list[dict[str, Any]]:
    sql = ("SELECT id, seq, role, kind, content, tool_name, tool_args, related_id, ts, "
           "one_liner FROM units WHERE session_pk = ?")
    args: list[Any] = [pk]
    if start is not None and end is not None:
        sql += " AND ts >= ? AND ts < ?"
        args += [start, end]
    return [dict(r) for r in conn.execute(sql + " ORDER BY seq", args)]


def provenance_by_keys(conn: sqlite3.Connection, keys: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(f"SELECT {PROVENANCE_COLUMNS} FROM memory_items "
                              f"WHERE item_key IN ({marks})", chunk):
            out[r["item_key"]] = dict(r)
    return out


def all_active(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    return {r["item_key"]: dict(r) for r in conn.execute(
        f"SELECT {PROVENANCE_COLUMNS} FROM memory_items WHERE state = 'active'")}


def record_item(conn: sqlite3.Connection, *, key: str, item: str, source: str,
                scope: str | None, importance: int, reasons: list[str], day: str,
                made_by: str, prompt_version: str) -> int:
    now = time.time()
    conn.execute(
        "INSERT INTO memory_items (item_key, item, source, scope, importance, reasons, "
        "first_seen, last_confirmed, made_by, prompt_version, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (item_key) DO UPDATE SET "
        "state = 'active', superseded_by = NULL, "
        "importance = greatest(memory_items.importance, excluded.importance), "
        "last_confirmed = greatest(memory_items.last_confirmed, excluded.last_confirmed), "
        "updated_at = ?",
        (key, item, source, scope, importance, json.dumps(reasons, ensure_ascii=False), day, day,
         made_by, prompt_version, now, now, now))
    return int(conn.execute("SELECT id FROM memory_items WHERE item_key = ?",
                            (key,)).fetchone()[0])


def link_session(conn: sqlite3.Connection, item_id: int, session_pk: int, unit_ids: list[int],
                 day: str) -> bool:
    """True when this session is new evidence for the item (a real confirmation)."""
    cur = conn.execute(
        "INSERT INTO memory_item_sessions (item_id, session_pk, unit_ids, day) VALUES "
        "(?, ?, ?, ?) ON CONFLICT DO NOTHING", (item_id, session_pk, json.dumps(unit_ids), day))
    return cur.rowcount == 1


def confirm_item(conn: sqlite3.Connection, key: str, day: str) -> None:
    conn.execute("UPDATE memory_items SET confirmations = confirmations + 1, "
                 "last_confirmed = greatest(last_confirmed, ?), updated_at = ? WHERE item_key = ?",
                 (day, time.time(), key))


def set_state(conn: sqlite3.Connection, key: str, state: str,
              superseded_by: str | None = None) -> None:
    conn.execute("UPDATE memory_items SET state = ?, superseded_by = ?, updated_at = ? "
                 "WHERE item_key = ?", (state, superseded_by, time.time(), key))


def item_sessions(conn: sqlite3.Connection, item_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT s.agent, s.session_id, s.project, l.unit_ids, l.day FROM memory_item_sessions l "
        "JOIN sessions s ON s.id = l.session_pk WHERE l.item_id = ? ORDER BY l.day, s.id",
        (item_id,)).fetchall()
    return [{**dict(r), "unit_ids": json.loads(r["unit_ids"])} for r in rows]


def drop_orphans(conn: sqlite3.Connection) -> int:
    """Provenance rows whose every session was forgotten (links cascade away)."""
    return conn.execute(
        "DELETE FROM memory_items WHERE id NOT IN "
        "(SELECT DISTINCT item_id FROM memory_item_sessions)").rowcount


def session_pks(conn: sqlite3.Connection, agent: str, session_id: str) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT id FROM sessions WHERE agent = ? AND session_id = ?", (agent, session_id))]
