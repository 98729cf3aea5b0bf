"""The served-context log: one row per context block handed to an agent."""

from __future__ import annotations

import json
import sqlite3
from typing import Any


def record_served(conn: sqlite3.Connection, *, ts: float, day: str, via: str,
                  agent: str | None, session_id: str | None, query: str | None,
                  items: list[dict[str, Any]], tokens: int, budget_tokens: int) -> int:
    cur = conn.execute(
        "INSERT INTO served_context (ts, day, via, agent, session_id, query, items, tokens, "
        "budget_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (ts, day, via, agent, session_id, query, json.dumps(items, ensure_ascii=False),
         tokens, budget_tokens))
    return int(cur.fetchone()[0])


def list_served(conn: sqlite3.Connection, *, session_id: str | None = None,
                agent: str | None = None, last: int = 20) -> list[dict[str, Any]]:
    """The newest `last` entries (optionally of one session or agent), oldest first."""
    clauses, args = [], []
    for col, val in (("session_id", session_id), ("agent", agent)):
        if val is not None:
            clauses.append(f"{col} = ?")
            args.append(val)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    rows = conn.execute(
        "SELECT id, ts, day, via, agent, session_id, query, items, tokens, budget_tokens "
        f"FROM served_context {where} ORDER BY ts DESC, id DESC LIMIT ?",
        (*args, last)).fetchall()
    out = []
    for r in reversed(rows):
        d = dict(r)
        d["items"] = json.loads(d["items"])
        out.append(d)
    return out


def daily_totals(conn: sqlite3.Connection, *, days: int = 7, session_id: str | None = None,
                 agent: str | None = None) -> list[dict[str, Any]]:
    """Requests and tokens served per day, newest day first."""
    clauses, args = [], []
    for col, val in (("session_id", session_id), ("agent", agent)):
        if val is not None:
            clauses.append(f"{col} = ?")
            args.append(val)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    rows = conn.execute(
        f"SELECT day, count(*) AS requests, sum(tokens) AS tokens FROM served_context {where} "
        "GROUP BY day ORDER BY day DESC LIMIT ?", (*args, days)).fetchall()
    return [dict(r) for r in rows]


def prune_served(conn: sqlite3.Connection, before: float) -> int:
    return conn.execute("DELETE FROM served_context WHERE ts < ?", (before,)).rowcount
