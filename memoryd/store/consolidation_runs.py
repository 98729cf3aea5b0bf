"""Consolidation runs: one row per run of a day (what it admitted, confirmed, superseded,
demoted and dropped, or its error), and the days of history no ok run has covered yet.
Plain sync functions `(conn, ...)` run on the store's thread; the SQL is the same on
SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any

COUNTS = ("sessions", "added", "confirmed", "superseded", "demoted", "dropped", "daily_added")
BUCKET_S = 900  # every time zone's offset is a multiple of 15 minutes: a bucket is in one day
GIVE_UP = 3  # a day whose history runs failed this often is left out of the history job


def record_run(conn: sqlite3.Connection, *, day: str, at: float, trigger: str, ok: bool,
               error: str | None = None, seconds: float | None = None,
               counts: dict[str, int] | None = None) -> None:
    c = counts or {}
    conn.execute(
        "INSERT INTO consolidation_runs (day, at, trigger, ok, error, seconds, "
        + ", ".join(COUNTS) + ") VALUES (?, ?, ?, ?, ?, ?, " + ", ".join("?" * len(COUNTS))
        + ")", (day, at, trigger, 1 if ok else 0, error, seconds,
                *(int(c.get(k, 0)) for k in COUNTS)))


def recent_runs(conn: sqlite3.Connection, days: int) -> list[dict[str, Any]]:
    """The runs of the `days` most recent days that have runs, newest day and run first."""
    return [dict(r) for r in conn.execute(
        "SELECT day, at, trigger, ok, error, seconds, " + ", ".join(COUNTS)
        + " FROM consolidation_runs WHERE trigger <> 'before' AND day IN (SELECT DISTINCT "
        "day FROM consolidation_runs WHERE trigger <> 'before' ORDER BY day DESC LIMIT ?) "
        "ORDER BY day DESC, at DESC, id DESC", (days,))]


def last_failure(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The latest run, when it failed (a later ok run of any day clears it)."""
    r = conn.execute("SELECT day, at, trigger, ok, error FROM consolidation_runs "
                     "WHERE trigger <> 'before' ORDER BY at DESC, id DESC LIMIT 1").fetchone()
    return dict(r) if r is not None and not r["ok"] else None


def day_sessions_seen(conn: sqlite3.Connection, tz: dt.tzinfo) -> dict[str, int]:
    """Local day -> how many sessions have units that day (a scan of the units' times in
    15-minute buckets: the history job's work, never a query's)."""
    days: dict[str, set[int]] = {}
    for pk, b in conn.execute(
            f"SELECT session_pk, CAST(ts AS BIGINT) / {BUCKET_S} AS b FROM units "
            "WHERE ts IS NOT NULL GROUP BY session_pk, b"):
        day = dt.datetime.fromtimestamp(int(b) * BUCKET_S, tz).date().isoformat()
        days.setdefault(day, set()).add(int(pk))
    return {d: len(s) for d, s in days.items()}


def covered(conn: sqlite3.Connection) -> dict[str, int]:
    """Day -> the most sessions an ok run of it saw."""
    return {r[0]: int(r[1]) for r in conn.execute(
        "SELECT day, max(sessions) FROM consolidation_runs WHERE ok = 1 GROUP BY day")}


def history_todo(conn: sqlite3.Connection, tz: dt.tzinfo, before: str,
                 since: str | None = None) -> tuple[list[str], int]:
    """(days before `before` whose sessions no ok run has covered yet, oldest first;
    how many days before `before` have sessions at all)."""
    seen = {d: n for d, n in day_sessions_seen(conn, tz).items()
            if d < before and (since is None or d >= since)}
    done = covered(conn)
    failing = {r[0] for r in conn.execute(
        "SELECT day FROM consolidation_runs WHERE trigger = 'history' AND ok = 0 "
        "GROUP BY day HAVING count(*) >= ?", (GIVE_UP,))}
    # a failing day is left (status warns of its failure; `run consolidate --date` redoes
    # it), or one day that always fails would hold the rest, and retention, for good
    todo = sorted(d for d, n in seen.items() if done.get(d, -1) < n and d not in failing)
    return todo, len(seen)
