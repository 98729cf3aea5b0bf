"""What the store did per day, for the overview's charts: messages stored per agent,
context served per agent, LLM tokens and cost, what consolidation did to memory. Sync
functions taking `conn`, as every store module, the same SQL on SQLite and PostgreSQL.

Messages are counted from `unit_quarters` between the local midnights the caller gives,
as the timeline counts them (every stored record of a transcript, tool calls and results
too), so the two pages agree and the overview reads a row per session-quarter instead of
every unit of 30 days (6.5 s on the 1M-unit bench store)."""

from __future__ import annotations

import sqlite3
from typing import Any

from memoryd.store import unit_quarters


def messages_per_day(conn: sqlite3.Connection, bounds: list[float]
                     ) -> list[tuple[int, str, int]]:
    """(day index, agent, messages) for the days [bounds[i], bounds[i+1]) (local
    midnights, increasing); the day index is i."""
    counts = unit_quarters.day_counts(conn, bounds)
    pks = sorted({pk for pk, _ in counts})
    agents: dict[int, str] = {}
    for i in range(0, len(pks), 500):
        chunk = pks[i:i + 500]
        agents.update((int(r[0]), str(r[1])) for r in conn.execute(
            f"SELECT id, agent FROM sessions WHERE id IN ({','.join('?' * len(chunk))})",
            chunk))
    per: dict[tuple[int, str], int] = {}
    for (pk, d), (_first, _last, n) in counts.items():
        key = (d, agents.get(pk, "-"))
        per[key] = per.get(key, 0) + int(n)
    return [(d, agent, n) for (d, agent), n in sorted(per.items())]


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
