"""MEMORY.md provenance and the day's material for consolidation: plain sync functions
`(conn, ...)` run on the store's thread."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

PROVENANCE_COLUMNS = (
    "id, item_key, item, source, scope, importance, reasons, first_seen, last_confirmed, "
    "confirmations, made_by, prompt_version, state, superseded_by, subject")
NOTE_MAKER = "daily-note"  # made_by of a daily-note line's row (below)


def day_sessions(conn: sqlite3.Connection, start: float, end: float) -> list[dict[str, Any]]:
    """Sessions with units in [start, end), with their rolling summary."""
    rows = conn.execute(
        "SELECT s.id AS pk, s.agent, s.session_id, s.project, s.title, s.summary, "
        "s.summary_by, s.summary_prompt, s.first_ts, s.last_ts, s.machine FROM sessions s "
        "WHERE s.id IN (SELECT DISTINCT session_pk FROM units WHERE ts >= ? AND ts < ?) "
        "ORDER BY s.first_ts, s.id", (start, end)).fetchall()
    return [dict(r) for r in rows]


def session_spans(conn: sqlite3.Connection, before: float) -> list[tuple[float, float]]:
    """(first, last) timestamps of the sessions that began before `before`: the days the
    history was active (consolidate.admission measures age in them)."""
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT first_ts, coalesce(last_ts, first_ts) FROM sessions "
        "WHERE first_ts IS NOT NULL AND first_ts < ?", (before,))]


def day_units(conn: sqlite3.Connection, pk: int, start: float | None,
              end: float | None) -> list[dict[str, Any]]:
    sql = ("SELECT id, seq, role, kind, content, tool_name, tool_args, related_id, ts, "
           "one_liner FROM units WHERE session_pk = ?")
    args: list[Any] = [pk]
    if start is not None and end is not None:
        sql += " AND ts >= ? AND ts < ?"
        args += [start, end]
    return [dict(r) for r in conn.execute(sql + " ORDER BY seq", args)]


def user_messages(conn: sqlite3.Connection, start: float, end: float) -> list[tuple[int, int]]:
    """What the user said in [start, end) (the look-back of consolidate.recurrence):
    (unit id, session pk) rows."""
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT id, session_pk FROM units WHERE ts >= ? AND ts < ? AND role = 'user' "
        "AND kind = 'message' ORDER BY ts, id", (start, end))]


def unit_texts(conn: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ",".join("?" * len(chunk))
        out.update((r[0], r[1] or "") for r in conn.execute(
            f"SELECT id, content FROM units WHERE id IN ({marks})", chunk))
    return out


def provenance_by_keys(conn: sqlite3.Connection, keys: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(f"SELECT {PROVENANCE_COLUMNS} FROM memory_items "
                              f"WHERE item_key IN ({marks})", chunk):
            out[r["item_key"]] = dict(r)
    return out


def replaced_chain(conn: sqlite3.Connection, key: str, limit: int = 20) -> list[dict[str, Any]]:
    """The items `key` replaced, newest first, and what they replaced in turn (A <- B <- C)."""
    out: list[dict[str, Any]] = []
    todo, seen = [key], {key}
    while todo and len(out) < limit:
        k = todo.pop(0)
        for r in conn.execute("SELECT item_key, item, first_seen, last_confirmed, updated_at "
                              "FROM memory_items WHERE superseded_by = ? AND state = "
                              "'superseded' ORDER BY updated_at DESC", (k,)):
            if r["item_key"] in seen:
                continue
            seen.add(r["item_key"])
            out.append({"item": r["item"], "first_seen": r["first_seen"],
                        "last_confirmed": r["last_confirmed"], "replaced_by": k})
            todo.append(r["item_key"])
    return out


def all_active(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """MEMORY.md items' provenance (daily-note rows left out)."""
    return {r["item_key"]: dict(r) for r in conn.execute(
        f"SELECT {PROVENANCE_COLUMNS} FROM memory_items WHERE state = 'active' "
        "AND made_by <> ?", (NOTE_MAKER,))}


def record_item(conn: sqlite3.Connection, *, key: str, item: str, source: str,
                scope: str | None, importance: int, reasons: list[str], day: str,
                made_by: str, prompt_version: str, first_seen: str | None = None,
                subject: str | None = None) -> int:
    """`first_seen`: when it was first said, if before `day` (a recurrence); `subject`:
    what it is about, when known."""
    now = time.time()
    conn.execute(
        "INSERT INTO memory_items (item_key, item, source, scope, importance, reasons, "
        "first_seen, last_confirmed, made_by, prompt_version, created_at, updated_at, "
        "subject) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (item_key) DO UPDATE SET "
        "state = 'active', superseded_by = NULL, subject = excluded.subject, "
        "importance = greatest(memory_items.importance, excluded.importance), "
        "last_confirmed = greatest(memory_items.last_confirmed, excluded.last_confirmed), "
        "updated_at = ?",
        (key, item, source, scope, importance, json.dumps(reasons, ensure_ascii=False),
         min(first_seen or day, day), day, made_by, prompt_version, now, now, subject, now))
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


def session_pks(conn: sqlite3.Connection, agent: str, session_id: str) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT id FROM sessions WHERE agent = ? AND session_id = ?", (agent, session_id))]


# -- daily-note provenance ----------------------------------------------------------------
# A daily-note line memoryd wrote is a memory_items row too (made_by NOTE_MAKER, scope its
# day, the key namespaced by day so it never meets a MEMORY.md item), linked to the
# sessions that offered it, so forgetting a session finds the lines it alone stood behind.


def note_key(day: str, key: str) -> str:
    return f"note\x1f{day}\x1f{key}"


def note_item_of(nk: str) -> str:
    """The note line's item key inside a `note_key`."""
    return nk.split("\x1f", 2)[2]


def link_note_item(conn: sqlite3.Connection, *, day: str, key: str, item: str, tag: str,
                   session_pk: int, unit_ids: list[int], create: bool) -> bool:
    """Record that this session offered the day's note item. `create`: memoryd just wrote
    the line; otherwise only a line memoryd wrote before (a row exists) gains the session:
    a line the user wrote stays without provenance. True when linked."""
    nk = note_key(day, key)
    now = time.time()
    if create:
        conn.execute(
            "INSERT INTO memory_items (item_key, item, source, scope, importance, first_seen, "
            "last_confirmed, made_by, prompt_version, created_at, updated_at) VALUES "
            "(?, ?, ?, ?, 0, ?, ?, ?, '', ?, ?) ON CONFLICT (item_key) DO NOTHING",
            (nk, item, tag, day, day, day, NOTE_MAKER, now, now))
    row = conn.execute("SELECT id FROM memory_items WHERE item_key = ?", (nk,)).fetchone()
    if row is None:
        return False
    link_session(conn, int(row[0]), session_pk, unit_ids, day)
    return True


def orphans(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Provenance rows left without any session (every session behind them forgotten):
    what a forget must still take out of the memory files."""
    return [dict(r) for r in conn.execute(
        "SELECT id, item_key, item, source, scope, made_by, state FROM memory_items "
        "WHERE id NOT IN (SELECT item_id FROM memory_item_sessions) ORDER BY id")]


def delete_items(conn: sqlite3.Connection, ids: list[int]) -> int:
    n = 0
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ",".join("?" * len(chunk))
        n += conn.execute(f"DELETE FROM memory_items WHERE id IN ({marks})", chunk).rowcount
    return n


def unlink_units(conn: sqlite3.Connection, unit_ids: list[int],
                 session_pks: list[int]) -> int:
    """Units deleted by `forget --query`: a session whose every unit behind an item is
    gone no longer stands behind it (its link goes, so the item may become an orphan);
    a link keeping some of its units keeps only those. Links without unit ids (daily-note
    lines) are left alone. Returns the links removed."""
    gone = set(unit_ids)
    removed = 0
    for i in range(0, len(session_pks), 500):
        chunk = session_pks[i:i + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(f"SELECT item_id, session_pk, unit_ids FROM memory_item_sessions "
                            f"WHERE session_pk IN ({marks})", chunk).fetchall()
        for r in rows:
            item_id, pk, ids = r[0], r[1], json.loads(r[2] or "[]")
            left = [u for u in ids if u not in gone]
            if not ids or len(left) == len(ids):
                continue
            if left:
                conn.execute("UPDATE memory_item_sessions SET unit_ids = ? WHERE item_id = ? "
                             "AND session_pk = ?", (json.dumps(left), item_id, pk))
            else:
                conn.execute("DELETE FROM memory_item_sessions WHERE item_id = ? AND "
                             "session_pk = ?", (item_id, pk))
                removed += 1
    return removed


def units_first_ts(conn: sqlite3.Connection, unit_ids: list[int]) -> float | None:
    """When the first of these units was said (None: none of them is stored)."""
    if not unit_ids:
        return None
    marks = ",".join("?" * len(unit_ids[:500]))
    row = conn.execute(f"SELECT min(ts) FROM units WHERE id IN ({marks})",
                       unit_ids[:500]).fetchone()
    return None if row is None or row[0] is None else float(row[0])


# -- the memory page's audit (memoryd.web.memory_pages) ------------------------------------


def audit(conn: sqlite3.Connection, keys: list[str]) -> dict[str, dict[str, Any]]:
    """Per MEMORY.md item key: its provenance row, the sessions and turns behind it and
    the chain of items it replaced (what `memory why` shows, for every entry at once)."""
    out = provenance_by_keys(conn, keys)
    for key, row in out.items():
        row["sessions"] = item_sessions(conn, row["id"])
        row["replaced"] = replaced_chain(conn, key)
    return out


def changes(conn: sqlite3.Connection, days: int = 30) -> list[dict[str, Any]]:
    """What memory learned, replaced and demoted, by day (the history's day an item was
    first seen; a demotion's day is when it happened), newest first, at most `days` days."""
    rows = conn.execute(
        "SELECT item_key, item, first_seen, state, superseded_by, updated_at, subject "
        "FROM memory_items WHERE made_by <> ? ORDER BY first_seen, id", (NOTE_MAKER,)).fetchall()
    replaced: dict[str, list[str]] = {}
    for r in rows:
        if r["state"] == "superseded" and r["superseded_by"]:
            replaced.setdefault(r["superseded_by"], []).append(r["item"])
    by_day: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        gone = replaced.get(r["item_key"], [])
        by_day.setdefault(r["first_seen"], []).append({
            "kind": "replaced" if gone else "added", "item": r["item"], "replaced": gone,
            "subject": r["subject"], "state": r["state"]})
        if r["state"] == "demoted":
            day = time.strftime("%Y-%m-%d", time.localtime(r["updated_at"]))
            by_day.setdefault(day, []).append({"kind": "demoted", "item": r["item"],
                                               "replaced": [], "subject": r["subject"],
                                               "state": r["state"]})
    return [{"day": d, "changes": by_day[d]} for d in sorted(by_day, reverse=True)[:days]]
