"""Per-file cursor rows: how far a transcript has been read, and what it looked like.

A row is keyed by (machine, path): in fleet mode each machine reads its own files, so
two machines' `/home/me/chat.jsonl` are two cursors. In SQLite mode `machine` is ''."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from memoryd.store.counters import read_counters


@dataclass
class Cursor:
    path: str
    root: str
    agent: str | None
    id: int | None = None
    offset: int = 0
    size: int = 0
    inode: int | None = None
    mtime_ns: int | None = None
    head_hash: str | None = None
    tail_hash: str | None = None
    line_no: int = 0
    bad_lines: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    last_error: str | None = None
    machine: str = ""


_COLS = ('path, root, agent, "offset", size, inode, mtime_ns, head_hash, tail_hash, line_no, '
         "bad_lines, state, last_error, machine")


def get_cursor(conn: sqlite3.Connection, path: str, machine: str = "") -> Cursor | None:
    row = conn.execute(f"SELECT id, {_COLS} FROM files WHERE machine = ? AND path = ?",
                       (machine, path)).fetchone()
    if row is None:
        return None
    d = dict(row)
    d["state"] = json.loads(d["state"] or "{}")
    return Cursor(**d)


def save_cursor(conn: sqlite3.Connection, c: Cursor) -> int:
    values = (c.path, c.root, c.agent, c.offset, c.size, c.inode, c.mtime_ns, c.head_hash,
              c.tail_hash, c.line_no, c.bad_lines, json.dumps(c.state, ensure_ascii=False),
              c.last_error, c.machine)
    if c.id is None:
        cur = conn.execute(
            f"INSERT INTO files ({_COLS}, updated_at) VALUES ({', '.join('?' * 14)}, ?) "
            f"ON CONFLICT (machine, path) DO UPDATE SET root = excluded.root RETURNING id",
            (*values, time.time()),
        )
        c.id = cur.fetchone()[0]
    conn.execute(
        'UPDATE files SET path=?, root=?, agent=?, "offset"=?, size=?, inode=?, mtime_ns=?, '
        "head_hash=?, tail_hash=?, line_no=?, bad_lines=?, state=?, last_error=?, machine=?, "
        "gone=0, "
        "updated_at=? "
        "WHERE id=?",
        (*values, time.time(), c.id),
    )
    return c.id


def mark_gone(conn: sqlite3.Connection, path: str, machine: str = "") -> None:
    """The file vanished: keep the row (units point at it for provenance)."""
    conn.execute("UPDATE files SET gone = 1, updated_at = ? WHERE machine = ? AND path = ?",
                 (time.time(), machine, path))


def live_cursors(conn: sqlite3.Connection, machine: str = "") -> list[Cursor]:
    """This machine's files that still exist."""
    rows = conn.execute(f"SELECT id, {_COLS} FROM files WHERE gone = 0 AND machine = ?",
                        (machine,)).fetchall()
    out = []
    for row in rows:
        d = dict(row)
        d["state"] = json.loads(d["state"] or "{}")
        out.append(Cursor(**d))
    return out


def files_with_bad_lines(conn: sqlite3.Connection, limit: int = 20,
                         machine: str = "") -> list[dict[str, Any]]:
    """This machine's files with the most skipped lines: (path, bad_lines), for status."""
    rows = conn.execute("SELECT path, bad_lines FROM files WHERE bad_lines > 0 AND gone = 0 "
                        "AND machine = ? ORDER BY bad_lines DESC, path LIMIT ?",
                        (machine, limit)).fetchall()
    return [{"path": r[0], "bad_lines": r[1]} for r in rows]


def file_stats(conn: sqlite3.Connection, machine: str = "") -> dict[str, int]:
    """Transcripts, ignored files and bad lines. On one machine (machine '') from the
    counters the triggers keep (m009); in fleet mode this machine's rows only (the others'
    are theirs to report; files are few next to units, so the filtered count stays cheap)."""
    if not machine:
        c = read_counters(conn)
        return {k: c.get(k, 0) for k in ("files", "ignored_files", "bad_lines")}
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE agent IS NOT NULL AND gone = 0),"
        " count(*) FILTER (WHERE agent IS NULL AND gone = 0),"
        " coalesce(sum(bad_lines), 0) FROM files WHERE machine = ?", (machine,)
    ).fetchone()
    return {"files": row[0], "ignored_files": row[1], "bad_lines": row[2]}
