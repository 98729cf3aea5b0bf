"""Units per session per UTC hour (`unit_hours`: how many, the first and last time), so a
page that counts a session's messages by day reads a row per session-hour instead of
every unit (issue 30: the timeline counted 1M units of a week in 1.2 s).

Triggers on `units` keep the table in the transaction of each change (m016_unit_hours),
as m009's counters are kept: every path that stores or removes units (the writer,
archive restore, forget, retention's archival, an exclusion's purge, the cascade of a
deleted session) keeps it without knowing it exists. A unit without a time is not
counted (no day holds it). Removing a unit that was its hour's first or last reads
that hour's units again for the new bound; `drop_session` removes a session's rows
before all its units go, so a whole session's delete never does.

Why hours: local days, in any zone whose midnight falls on a UTC hour (and across a
DST change of whole hours), are whole runs of UTC hours, summed at read time. A day
boundary inside an hour (half-hour zones: India +5:30, Newfoundland -3:30, South
Australia +9:30; Nepal +5:45; Lord Howe's half-hour DST) splits that hour: `day_counts`
counts the units of each split hour from `units` (one hour's units per such boundary),
so the figures stay exact in every zone.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

HOUR = 3600


def _hour(ts: str) -> str:
    """SQL for floor(ts / 3600) that is exact for any REAL `ts` (CAST truncates toward
    zero; the comparison corrects a negative time or a quotient rounded up)."""
    q = f"CAST({ts} / {HOUR} AS INTEGER)"
    return f"({q} - ({ts} < {q} * {HOUR}))"


def _bound(agg: str, row: str, hour: str) -> str:
    """The new first (min) or last (max) time of `row`'s session in `hour` (its units
    are read by time through units_ts, not by session: an hour holds few units)."""
    return (f"(SELECT {agg}(u.ts) FROM units u WHERE u.ts >= {hour} * {HOUR} "
            f"AND u.ts < ({hour} + 1) * {HOUR} AND +u.session_pk = {row}.session_pk)")


def sqlite_ddl() -> list[str]:
    """m016 for SQLite: the table, its rows from the units there are, and the triggers."""
    new, old = _hour("NEW.ts"), _hour("OLD.ts")
    at_old = f"session_pk = OLD.session_pk AND hour = {old}"
    return [
        "CREATE TABLE unit_hours (session_pk INTEGER NOT NULL REFERENCES sessions (id) "
        "ON DELETE CASCADE, hour INTEGER NOT NULL, n INTEGER NOT NULL, "
        "first_ts REAL NOT NULL, last_ts REAL NOT NULL, PRIMARY KEY (hour, session_pk)) "
        "WITHOUT ROWID",
        "CREATE INDEX unit_hours_session ON unit_hours (session_pk)",
        f"INSERT INTO unit_hours (session_pk, hour, n, first_ts, last_ts) "
        f"SELECT session_pk, {_hour('ts')} AS h, count(*), min(ts), max(ts) FROM units "
        f"WHERE ts IS NOT NULL GROUP BY session_pk, h",
        f"CREATE TRIGGER unit_hours_in AFTER INSERT ON units WHEN NEW.ts IS NOT NULL BEGIN "
        f"INSERT INTO unit_hours (session_pk, hour, n, first_ts, last_ts) "
        f"VALUES (NEW.session_pk, {new}, 1, NEW.ts, NEW.ts) "
        f"ON CONFLICT (hour, session_pk) DO UPDATE SET n = n + 1, "
        f"first_ts = min(first_ts, excluded.first_ts), "
        f"last_ts = max(last_ts, excluded.last_ts); END",
        f"CREATE TRIGGER unit_hours_out AFTER DELETE ON units WHEN OLD.ts IS NOT NULL BEGIN "
        f"DELETE FROM unit_hours WHERE {at_old} AND n <= 1; "
        f"UPDATE unit_hours SET n = n - 1, "
        f"first_ts = CASE WHEN first_ts = OLD.ts THEN {_bound('min', 'OLD', old)} "
        f"ELSE first_ts END, "
        f"last_ts = CASE WHEN last_ts = OLD.ts THEN {_bound('max', 'OLD', old)} "
        f"ELSE last_ts END WHERE {at_old}; END",
        # a unit's time or session never changes today; if one does, it moves hours
        f"CREATE TRIGGER unit_hours_set AFTER UPDATE OF ts, session_pk ON units "
        f"WHEN OLD.ts IS NOT NEW.ts OR OLD.session_pk IS NOT NEW.session_pk BEGIN "
        f"DELETE FROM unit_hours WHERE {at_old} AND n <= 1; "
        f"UPDATE unit_hours SET n = n - 1, "
        f"first_ts = CASE WHEN first_ts = OLD.ts THEN {_bound('min', 'OLD', old)} "
        f"ELSE first_ts END, "
        f"last_ts = CASE WHEN last_ts = OLD.ts THEN {_bound('max', 'OLD', old)} "
        f"ELSE last_ts END WHERE {at_old}; "
        f"INSERT INTO unit_hours (session_pk, hour, n, first_ts, last_ts) "
        f"SELECT NEW.session_pk, {new}, 1, NEW.ts, NEW.ts WHERE NEW.ts IS NOT NULL "
        f"ON CONFLICT (hour, session_pk) DO UPDATE SET n = n + 1, "
        f"first_ts = min(first_ts, excluded.first_ts), "
        f"last_ts = max(last_ts, excluded.last_ts); END",
    ]


def _pg_hour(ts: str) -> str:
    q = f"floor({ts} / {HOUR})"
    return f"({q}::bigint - ({ts} < {q} * {HOUR})::int)"


def _pg_moved(bound: str) -> str:
    """A unit whose time or session changed (none does today): out of its old hour,
    into its new one."""
    old, new = _pg_hour("OLD.ts"), _pg_hour("NEW.ts")
    return (f"IF OLD.ts IS NOT NULL THEN UPDATE unit_hours h SET n = h.n - 1, "
            f"first_ts = CASE WHEN OLD.ts <= h.first_ts THEN {bound.format(agg='min')} "
            "ELSE h.first_ts END, "
            f"last_ts = CASE WHEN OLD.ts >= h.last_ts THEN {bound.format(agg='max')} "
            "ELSE h.last_ts END "
            f"WHERE h.session_pk = OLD.session_pk AND h.hour = {old}; "
            "DELETE FROM unit_hours WHERE n <= 0; END IF; "
            "IF NEW.ts IS NOT NULL THEN "
            "INSERT INTO unit_hours (session_pk, hour, n, first_ts, last_ts) "
            f"VALUES (NEW.session_pk, {new}, 1, NEW.ts, NEW.ts) "
            "ON CONFLICT (hour, session_pk) DO UPDATE SET n = unit_hours.n + 1, "
            "first_ts = least(unit_hours.first_ts, excluded.first_ts), "
            "last_ts = greatest(unit_hours.last_ts, excluded.last_ts); END IF")


def pg_ddl() -> list[str]:
    """m016's PostgreSQL twin. Inserts and deletes are counted per statement over its
    transition table (a batch of units is one upsert per session-hour, in key order as
    m009's counters, so two writers never wait on each other in opposite orders); a
    delete reads an hour's units again only where it took the first or last one."""
    fn = ("CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
          "SET search_path FROM CURRENT AS $memoryd$ BEGIN {body}; RETURN NULL; END $memoryd$")
    per_hour = (f"SELECT {_pg_hour('ts')} AS hour, session_pk, count(*) AS n, "
                f"min(ts) AS lo, max(ts) AS hi FROM {{src}} WHERE ts IS NOT NULL GROUP BY 1, 2")
    upsert = (f"INSERT INTO unit_hours (hour, session_pk, n, first_ts, last_ts) "
              f"SELECT * FROM ({per_hour.format(src='hours_new')}) x ORDER BY 1, 2 "
              "ON CONFLICT (hour, session_pk) DO UPDATE SET n = unit_hours.n + excluded.n, "
              "first_ts = least(unit_hours.first_ts, excluded.first_ts), "
              "last_ts = greatest(unit_hours.last_ts, excluded.last_ts)")
    bound = ("(SELECT {agg}(u.ts) FROM units u WHERE u.session_pk = h.session_pk "
             f"AND u.ts >= h.hour * {HOUR} AND u.ts < (h.hour + 1) * {HOUR})")
    out = (f"PERFORM 1 FROM unit_hours h JOIN ({per_hour.format(src='hours_old')}) g "
           "USING (hour, session_pk) ORDER BY h.hour, h.session_pk FOR UPDATE OF h; "
           f"UPDATE unit_hours h SET n = h.n - g.n, "
           f"first_ts = CASE WHEN g.lo <= h.first_ts THEN {bound.format(agg='min')} "
           "ELSE h.first_ts END, "
           f"last_ts = CASE WHEN g.hi >= h.last_ts THEN {bound.format(agg='max')} "
           "ELSE h.last_ts END "
           f"FROM ({per_hour.format(src='hours_old')}) g "
           "WHERE h.session_pk = g.session_pk AND h.hour = g.hour; "
           "DELETE FROM unit_hours WHERE n <= 0")
    return [
        "CREATE TABLE unit_hours (session_pk bigint NOT NULL REFERENCES sessions (id) "
        "ON DELETE CASCADE, hour bigint NOT NULL, n bigint NOT NULL, "
        "first_ts double precision NOT NULL, last_ts double precision NOT NULL, "
        "PRIMARY KEY (hour, session_pk))",
        "CREATE INDEX unit_hours_session ON unit_hours (session_pk)",
        "CREATE INDEX unit_hours_empty ON unit_hours (session_pk) WHERE n <= 0",
        f"INSERT INTO unit_hours (hour, session_pk, n, first_ts, last_ts) "
        f"{per_hour.format(src='units')}",
        fn.format(name="unit_hours_in", body=upsert),
        fn.format(name="unit_hours_out", body=out),
        fn.format(name="unit_hours_set", body=_pg_moved(bound)),
        "CREATE TRIGGER unit_hours_in AFTER INSERT ON units REFERENCING NEW TABLE AS "
        "hours_new FOR EACH STATEMENT EXECUTE FUNCTION unit_hours_in()",
        "CREATE TRIGGER unit_hours_out AFTER DELETE ON units REFERENCING OLD TABLE AS "
        "hours_old FOR EACH STATEMENT EXECUTE FUNCTION unit_hours_out()",
        "CREATE TRIGGER unit_hours_set AFTER UPDATE OF ts, session_pk ON units FOR EACH ROW "
        "WHEN (OLD.ts IS DISTINCT FROM NEW.ts OR OLD.session_pk IS DISTINCT FROM "
        "NEW.session_pk) EXECUTE FUNCTION unit_hours_set()",
    ]


def drop_session(conn: sqlite3.Connection, pk: int) -> None:
    """Before every unit of session `pk` is deleted: its rows go at once, so the delete
    trigger finds none to recount."""
    conn.execute("DELETE FROM unit_hours WHERE session_pk = ?", (pk,))


Span = list[Any]  # [first ts, last ts, units]


def _add(out: dict[tuple[int, int], Span], pk: int, d: int, first: float, last: float,
         n: int) -> None:
    have = out.get((pk, d))
    if have is None:
        out[(pk, d)] = [first, last, n]
    else:
        have[0], have[1], have[2] = min(have[0], first), max(have[1], last), have[2] + n


def _in(pks: list[int] | None, col: str) -> tuple[str, list[int]]:
    if pks is None:
        return "", []
    return f" AND {col} IN ({','.join('?' * len(pks))})", list(pks)


def day_counts(conn: sqlite3.Connection, bounds: list[float], pks: list[int] | None = None
               ) -> dict[tuple[int, int], Span]:
    """{(session pk, day index): [first ts, last ts, units]} for the days [bounds[i],
    bounds[i+1]) (times in seconds, increasing), of the sessions `pks` (None: all).
    Whole UTC hours inside the range come from `unit_hours`; an hour a bound splits
    (a zone off the UTC hour) from its units, through units_ts."""
    lo, hi = bounds[0], bounds[-1]
    out: dict[tuple[int, int], Span] = {}
    split = sorted({math.floor(b / HOUR) for b in bounds if b % HOUR})
    h_lo, h_hi = math.ceil(lo / HOUR), math.floor(hi / HOUR)
    inner = [math.ceil(b / HOUR) for b in bounds[1:-1]]
    case = ("CASE " + " ".join(f"WHEN h.hour < ? THEN {i}" for i in range(len(inner)))
            + f" ELSE {len(inner)} END")
    only, only_args = _in(pks, "h.session_pk")
    skip = f" AND h.hour NOT IN ({','.join('?' * len(split))})" if split else ""
    for r in conn.execute(
            f"SELECT h.session_pk, {case} AS d, min(h.first_ts), max(h.last_ts), sum(h.n) "
            f"FROM unit_hours h WHERE h.hour >= ? AND h.hour < ?{skip}{only} "
            "GROUP BY h.session_pk, d", [*inner, h_lo, h_hi, *split, *only_args]):
        _add(out, int(r[0]), int(r[1]), r[2], r[3], int(r[4]))
    by_ts = "" if getattr(conn, "engine", "sqlite") == "postgresql" else " INDEXED BY units_ts"
    case = ("CASE " + " ".join(f"WHEN u.ts < ? THEN {i}" for i in range(len(bounds) - 2))
            + f" ELSE {len(bounds) - 2} END")
    only, only_args = _in(pks, "u.session_pk")
    for h in split:
        start, end = max(lo, h * HOUR), min(hi, (h + 1) * HOUR)
        if start >= end:
            continue
        for r in conn.execute(
                f"SELECT u.session_pk, {case} AS d, min(u.ts), max(u.ts), count(*) "
                f"FROM units u{by_ts} WHERE u.ts >= ? AND u.ts < ?{only} "
                "GROUP BY u.session_pk, d", [*bounds[1:-1], start, end, *only_args]):
            _add(out, int(r[0]), int(r[1]), r[2], r[3], int(r[4]))
    return out
