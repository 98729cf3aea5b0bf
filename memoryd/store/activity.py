"""What the store did per day, for the overview's charts: messages stored per agent,
context served per agent, LLM tokens and cost, what consolidation did to memory. Sync
functions taking `conn`, as every store module; days are counted in a fixed UTC offset
(`offset_s`, the user's zone at the time of the request), by integer division so the
SQL is the same on SQLite and PostgreSQL, and the day index is turned into a date by
the caller."""

from __future__ import annotations

import sqlite3
from typing import Any

DAY = 86400


def messages_per_day(conn: sqlite3.Connection, since: float, offset_s: int
                     ) -> list[tuple[int, str, int]]:
    """(day index, agent, messages) for user and assistant messages stored since `since`
    (by their time). The day index is (ts + offset) // 86400."""
    rows = conn.execute(
        "SELECT (CAST(u.ts AS BIGINT) + ?) / 86400 AS d, s.agent, count(*) FROM units u "
        "JOIN sessions s ON s.id = u.session_pk WHERE u.ts >= ? AND u.kind = 'message' "
        "GROUP BY d, s.agent ORDER BY d", (offset_s, since)).fetchall()
    return [(int(r[0]), str(r[1]), int(r[2])) for r in rows]


def served_per_day(conn: sqlite3.Connection, since_day: str) -> list[tuple[str, str, int, int]]:
    """(day, agent, requests, tokens) of the context served since `since_day` (the day
    the served log recorded, the user's)."""
    rows = conn.execute(
        "SELECT day, coalesce(agent, '-'), count(*), coalesce(sum(tokens), 0) "
        "FROM served_context WHERE day >= ? GROUP BY day, coalesce(agent, '-') ORDER BY day",
        (since_day,)).fetchall()
    return [(str(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows]


def llm_per_day(conn: sqlite3.Connection, since_day: str) -> list[dict[str, Any]]:
    """Per UTC day (the budget's day): input and output tokens, cost and calls."""
    rows = conn.execute(
        "SELECT day, coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cost), 0), count(*) FROM llm_usage WHERE day >= ? GROUP BY day "
        "ORDER BY day", (since_day,)).fetchall()
    return [{"day": str(r[0]), "input_tokens": int(r[1]), "output_tokens": int(r[2]),
             "cost": float(r[3]), "calls": int(r[4])} for r in rows]


MEMORY_COUNTS = ("added", "confirmed", "superseded", "demoted", "dropped")


def memory_per_day(conn: sqlite3.Connection, since_day: str) -> list[dict[str, Any]]:
    """Per day consolidated: what its successful runs did to memory, and how many runs
    (ok or not) there were."""
    rows = conn.execute(
        "SELECT day, " + ", ".join(f"coalesce(sum(CASE WHEN ok = 1 THEN {c} END), 0)"
                                   for c in MEMORY_COUNTS)
        + ", count(*), sum(CASE WHEN ok = 1 THEN 0 ELSE 1 END) FROM consolidation_runs "
        "WHERE day >= ? AND trigger <> 'before' GROUP BY day ORDER BY day",
        (since_day,)).fetchall()
    return [{"day": str(r[0]), **{c: int(r[i + 1]) for i, c in enumerate(MEMORY_COUNTS)},
             "runs": int(r[6]), "failed": int(r[7] or 0)} for r in rows]
