"""Sessions: one row per (agent, session id)."""

from __future__ import annotations

import sqlite3
import time
from typing import Any


def session_pk(conn: sqlite3.Connection, agent: str, session_id: str,
               project: str | None = None, title: str | None = None) -> int:
    """The row id of a session, created on first sight; project and title follow the
    latest line that tells them."""
    now = time.time()
    row = conn.execute(
        "SELECT id, project, title FROM sessions WHERE agent = ? AND session_id = ?",
        (agent, session_id),
    ).fetchone()
    if row is None:
        return conn.execute(
            "INSERT INTO sessions (agent, session_id, project, title, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (agent, session_id, project, title, now, now),
        ).fetchone()[0]
    if (project and project != row["project"]) or (title and title != row["title"]):
        conn.execute(
            "UPDATE sessions SET project = coalesce(?, project), title = coalesce(?, title), "
            "updated_at = ? WHERE id = ?",
            (project, title, now, row["id"]),
        )
    return int(row["id"])


SESSION_COLUMNS = (
    "s.agent, s.session_id, s.project, s.title, s.first_ts, s.last_ts, s.units, "
    "s.user_units, s.turns, s.state"
)


def list_sessions(conn: sqlite3.Connection, *, agent: str | None = None,
                  project: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    where, args = _filters(agent=agent, project=project)
    rows = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions s {where} "
        "ORDER BY coalesce(s.last_ts, 0) DESC, s.id DESC LIMIT ?",
        (*args, limit),
    ).fetchall()
    return [dict(r) for r in rows]


def count_sessions(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM sessions").fetchone()[0]


def _filters(**kw: Any) -> tuple[str, list[Any]]:
    clauses, args = [], []
    for col, val in kw.items():
        if val is not None:
            clauses.append(f"s.{col} = ?")
            args.append(val)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", args
