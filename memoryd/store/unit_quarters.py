"""Units per session per quarter of an hour, UTC (`unit_quarters`: how many, the first
and last time), so a page that counts a session's messages by local day reads a row per
session-quarter instead of every unit (issue 30: the timeline counted the 1M units of a
week, 1.2-2.8 s a page).

Triggers on `units` keep the table in the transaction of each change (m016), as m009's
counters are kept: every path that stores or removes units (the writer, archive
restore, forget, retention's archival, an exclusion's purge, the cascade of a deleted
session) keeps it without knowing it exists. A unit without a time is not counted (no
day holds it). Removing a unit that was its quarter's first or last reads that
quarter's units again for the new bound; `drop_session` removes a session's rows before
all its units go, so deleting a whole session never does.

Why quarters, not hours: every zone in use today is a whole number of quarter hours
from UTC, so its local days, across DST changes too, are whole runs of quarters, summed
at read time. Hours cover whole-hour zones only: a local midnight in India (+5:30),
Newfoundland (-3:30), South Australia (+9:30) or Nepal (+5:45) falls inside an hour,
whose units would be counted one by one; on the 1M-unit bench store, in St John's, that
was 160k units and 1.2 s a page. Quarters cost 3.7 times the rows of hours there (52k
against 14k) and the page's query 1.7 times the time. A bound off the quarter (a
historical zone's odd offset) still splits its quarter: `day_counts` counts that
quarter's units from `units`, so the figures are exact in any zone.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

QUARTER = 900  # seconds


def _quarter(ts: str) -> str:
    """SQL for floor(ts / 900) that is exact for any REAL `ts` (CAST truncates toward
    zero; the comparison corrects a negative time or a quotient rounded up)."""
    q = f"CAST({ts} / {QUARTER} AS INTEGER)"
    return f"({q} - ({ts} < {q} * {QUARTER}))"


def _bound(agg: str, row: str, quarter: str) -> str:
    """The new first (min) or last (max) time of `row`'s session in `quarter` (its units
    are read by time through units_ts, not by session: a quarter holds few units)."""
    return (f"(SELECT {agg}(u.ts) FROM units u WHERE u.ts >= {quarter} * {QUARTER} "
            f"AND u.ts < ({quarter} + 1) * {QUARTER} AND +u.session_pk = {row}.session_pk)")


def sqlite_ddl() -> list[str]:
    """m016 for SQLite: the table, its rows from the units there are, and the triggers."""
    new, old = _quarter("NEW.ts"), _quarter("OLD.ts")
    at_old = f"session_pk = OLD.session_pk AND quarter = {old}"
    leave = (f"DELETE FROM unit_quarters WHERE {at_old} AND n <= 1; "
             "UPDATE unit_quarters SET n = n - 1, "
             f"first_ts = CASE WHEN first_ts = OLD.ts THEN {_bound('min', 'OLD', old)} "
             "ELSE first_ts END, "
             f"last_ts = CASE WHEN last_ts = OLD.ts THEN {_bound('max', 'OLD', old)} "
             f"ELSE last_ts END WHERE {at_old};")
    enter = ("INSERT INTO unit_quarters (session_pk, quarter, n, first_ts, last_ts) "
             f"SELECT NEW.session_pk, {new}, 1, NEW.ts, NEW.ts WHERE NEW.ts IS NOT NULL "
             "ON CONFLICT (quarter, session_pk) DO UPDATE SET n = n + 1, "
             "first_ts = min(first_ts, excluded.first_ts), "
             "last_ts = max(last_ts, excluded.last_ts);")
    return [
        "CREATE TABLE unit_quarters (session_pk INTEGER NOT NULL REFERENCES sessions (id) "
        "ON DELETE CASCADE, quarter INTEGER NOT NULL, n INTEGER NOT NULL, "
        "first_ts REAL NOT NULL, last_ts REAL NOT NULL, PRIMARY KEY (quarter, session_pk)) "
        "WITHOUT ROWID",
        "CREATE INDEX unit_quarters_session ON unit_quarters (session_pk)",
        "INSERT INTO unit_quarters (session_pk, quarter, n, first_ts, last_ts) "
        f"SELECT session_pk, {_quarter('ts')} AS q, count(*), min(ts), max(ts) FROM units "
        "WHERE ts IS NOT NULL GROUP BY session_pk, q",
        "CREATE TRIGGER unit_quarters_in AFTER INSERT ON units WHEN NEW.ts IS NOT NULL "
        f"BEGIN {enter} END",
        "CREATE TRIGGER unit_quarters_out AFTER DELETE ON units WHEN OLD.ts IS NOT NULL "
        f"BEGIN {leave} END",
        # a unit's time or session never changes today; if one does, it moves quarters
        "CREATE TRIGGER unit_quarters_set AFTER UPDATE OF ts, session_pk ON units "
        "WHEN OLD.ts IS NOT NEW.ts OR OLD.session_pk IS NOT NEW.session_pk "
        f"BEGIN {leave} {enter} END",
    ]


def _pg_quarter(ts: str) -> str:
    q = f"floor({ts} / {QUARTER})"
    return f"({q}::bigint - ({ts} < {q} * {QUARTER})::int)"


def _pg_moved(bound: str) -> str:
    """A unit whose time or session changed (none does today): out of its old quarter,
    into its new one."""
    old, new = _pg_quarter("OLD.ts"), _pg_quarter("NEW.ts")
    at = f"h.session_pk = OLD.session_pk AND h.quarter = {old}"
    return (f"IF OLD.ts IS NOT NULL THEN DELETE FROM unit_quarters h WHERE {at} AND h.n <= 1; "
            "UPDATE unit_quarters h SET n = h.n - 1, "
            f"first_ts = CASE WHEN OLD.ts <= h.first_ts THEN {bound.format(agg='min')} "
            "ELSE h.first_ts END, "
            f"last_ts = CASE WHEN OLD.ts >= h.last_ts THEN {bound.format(agg='max')} "
            "ELSE h.last_ts END "
            f"WHERE {at}; END IF; "
            "IF NEW.ts IS NOT NULL THEN "
            "INSERT INTO unit_quarters (session_pk, quarter, n, first_ts, last_ts) "
            f"VALUES (NEW.session_pk, {new}, 1, NEW.ts, NEW.ts) "
            "ON CONFLICT (quarter, session_pk) DO UPDATE SET n = unit_quarters.n + 1, "
            "first_ts = least(unit_quarters.first_ts, excluded.first_ts), "
            "last_ts = greatest(unit_quarters.last_ts, excluded.last_ts); END IF")


def pg_ddl() -> list[str]:
    """m016's PostgreSQL twin. Inserts and deletes are counted per statement over its
    transition table (a batch of units is one upsert per session-quarter, in key order as
    m009's counters, so two writers never wait on each other in opposite orders); a
    delete reads a quarter's units again only where it took the first or last one."""
    fn = ("CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
          "SET search_path FROM CURRENT AS $memoryd$ BEGIN {body}; RETURN NULL; END $memoryd$")
    per_quarter = (f"SELECT {_pg_quarter('ts')} AS quarter, session_pk, count(*) AS n, "
                   f"min(ts) AS lo, max(ts) AS hi FROM {{src}} WHERE ts IS NOT NULL GROUP BY 1, 2")
    upsert = (f"INSERT INTO unit_quarters (quarter, session_pk, n, first_ts, last_ts) "
              f"SELECT * FROM ({per_quarter.format(src='quarters_new')}) x ORDER BY 1, 2 "
              "ON CONFLICT (quarter, session_pk) DO UPDATE SET "
              "n = unit_quarters.n + excluded.n, "
              "first_ts = least(unit_quarters.first_ts, excluded.first_ts), "
              "last_ts = greatest(unit_quarters.last_ts, excluded.last_ts)")
    bound = ("(SELECT {agg}(u.ts) FROM units u WHERE u.session_pk = h.session_pk "
             f"AND u.ts >= h.quarter * {QUARTER} AND u.ts < (h.quarter + 1) * {QUARTER})")
    gone = f"({per_quarter.format(src='quarters_old')}) g"
    at = "h.quarter = g.quarter AND h.session_pk = g.session_pk"
    out = (f"PERFORM 1 FROM unit_quarters h JOIN {gone} ON {at} "
           "ORDER BY h.quarter, h.session_pk FOR UPDATE OF h; "
           f"DELETE FROM unit_quarters h USING {gone} WHERE {at} AND h.n <= g.n; "
           "UPDATE unit_quarters h SET n = h.n - g.n, "
           f"first_ts = CASE WHEN g.lo <= h.first_ts THEN {bound.format(agg='min')} "
           "ELSE h.first_ts END, "
           f"last_ts = CASE WHEN g.hi >= h.last_ts THEN {bound.format(agg='max')} "
           f"ELSE h.last_ts END FROM {gone} WHERE {at}")
    return [
        "CREATE TABLE unit_quarters (session_pk bigint NOT NULL REFERENCES sessions (id) "
        "ON DELETE CASCADE, quarter bigint NOT NULL, n bigint NOT NULL, "
        "first_ts double precision NOT NULL, last_ts double precision NOT NULL, "
        "PRIMARY KEY (quarter, session_pk))",
        "CREATE INDEX unit_quarters_session ON unit_quarters (session_pk)",
        f"INSERT INTO unit_quarters (quarter, session_pk, n, first_ts, last_ts) "
        f"{per_quarter.format(src='units')}",
        fn.format(name="unit_quarters_in", body=upsert),
        fn.format(name="unit_quarters_out", body=out),
        fn.format(name="unit_quarters_set", body=_pg_moved(bound)),
        "CREATE TRIGGER unit_quarters_in AFTER INSERT ON units REFERENCING NEW TABLE AS "
        "quarters_new FOR EACH STATEMENT EXECUTE FUNCTION unit_quarters_in()",
        "CREATE TRIGGER unit_quarters_out AFTER DELETE ON units REFERENCING OLD TABLE AS "
        "quarters_old FOR EACH STATEMENT EXECUTE FUNCTION unit_quarters_out()",
        "CREATE TRIGGER unit_quarters_set AFTER UPDATE OF ts, session_pk ON units "
        "FOR EACH ROW "
        "WHEN (OLD.ts IS DISTINCT FROM NEW.ts OR OLD.session_pk IS DISTINCT FROM "
        "NEW.session_pk) EXECUTE FUNCTION unit_quarters_set()",
    ]


def drop_session(conn: sqlite3.Connection, pk: int) -> None:
    """Before every unit of session `pk` is deleted: its rows go at once, so the delete
    trigger finds none to recount."""
    conn.execute("DELETE FROM unit_quarters WHERE session_pk = ?", (pk,))


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
    Whole quarters inside the range come from `unit_quarters`; a quarter a bound splits
    (a zone off the quarter hour) from its units, through units_ts."""
    lo, hi = bounds[0], bounds[-1]
    out: dict[tuple[int, int], Span] = {}
    only, only_args = _in(pks, "h.session_pk")
    # a query a day: each groups one run of quarters by session (one CASE over the
    # week's rows and a sort of them all took 1.2 times as long on the 1M bench store)
    for d in range(len(bounds) - 1):
        first, end = math.ceil(bounds[d] / QUARTER), math.floor(bounds[d + 1] / QUARTER)
        if first >= end:
            continue
        for r in conn.execute(
                "SELECT h.session_pk, min(h.first_ts), max(h.last_ts), sum(h.n) "
                f"FROM unit_quarters h WHERE h.quarter >= ? AND h.quarter < ?{only} "
                "GROUP BY h.session_pk", [first, end, *only_args]):
            _add(out, int(r[0]), d, r[1], r[2], int(r[3]))
    split = sorted({math.floor(b / QUARTER) for b in bounds if b % QUARTER})
    by_ts = "" if getattr(conn, "engine", "sqlite") == "postgresql" else " INDEXED BY units_ts"
    case = ("CASE " + " ".join(f"WHEN u.ts < ? THEN {i}" for i in range(len(bounds) - 2))
            + f" ELSE {len(bounds) - 2} END")
    only, only_args = _in(pks, "u.session_pk")
    for h in split:
        start, end = max(lo, h * QUARTER), min(hi, (h + 1) * QUARTER)
        if start >= end:
            continue
        for r in conn.execute(
                f"SELECT u.session_pk, {case} AS d, min(u.ts), max(u.ts), count(*) "
                f"FROM units u{by_ts} WHERE u.ts >= ? AND u.ts < ?{only} "
                "GROUP BY u.session_pk, d", [*bounds[1:-1], start, end, *only_args]):
            _add(out, int(r[0]), int(r[1]), r[2], r[3], int(r[4]))
    return out
