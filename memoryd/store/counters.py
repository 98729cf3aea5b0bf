"""Counts `status` shows, kept up to date by triggers in the transaction of each change,
so status reads a few rows instead of counting (issue 11 item 4): `count(*)` over units
reads a whole index, 100+ ms at 1M units.

`COUNTED` says what is counted, per table, as (name, amount, condition) over a row `{r}`;
the migration m009_counters turns it into SQLite triggers (`sqlite_ddl`) and into their
PostgreSQL twins (`pg_ddl`), and counts once from the tables as they are. It is m009's,
frozen: a change to what is counted is a new migration.

SQLite has one writer, so one row per counter. In PostgreSQL every machine writes, and
one row per counter would make every writer of the fleet wait on the others' commits
(and deadlock when two transactions touch two counters in opposite orders). There each
backend adds to rows of its own (`slot` = its process id), so writers never wait on one
another; a counter is the sum of its rows, and `fold_pg` folds the rows of backends that
are gone into slot 0 (at store open), so the rows stay few.
"""

from __future__ import annotations

import sqlite3
from typing import Any

# table -> (columns whose update can change a count, [(name, amount, condition)])
COUNTED: dict[str, tuple[tuple[str, ...], list[tuple[str, str, str]]]] = {
    "units": (("one_liner_by",), [
        ("'units'", "1", "1 = 1"),
        ("'extractive_one_liners'", "1", "{r}.one_liner_by = 'extractive'"),
    ]),
    "sessions": (("summary_by",), [
        ("'sessions'", "1", "1 = 1"),
        ("'summaries_by:' || {r}.summary_by", "1", "{r}.summary_by IS NOT NULL"),
    ]),
    "files": (("agent", "gone", "bad_lines"), [
        ("'files'", "1", "{r}.agent IS NOT NULL AND {r}.gone = 0"),
        ("'ignored_files'", "1", "{r}.agent IS NULL AND {r}.gone = 0"),
        ("'bad_lines'", "{r}.bad_lines", "{r}.bad_lines <> 0"),
    ]),
    "jobs": (("state",), [
        ("'jobs:' || {r}.state", "1", "1 = 1"),
    ]),
}


def _selects(table: str, row: str, sign: str, source: str = "") -> list[str]:
    """SELECTs of (name k, signed amount v) of `table`'s counters for one row reference
    (NEW / OLD in a row trigger, or an alias over `source`)."""
    out = []
    for name, amount, cond in COUNTED[table][1]:
        n, a, c = (x.replace("{r}", row) for x in (name, amount, cond))
        out.append(f"SELECT {n} AS k, {sign}({a}) AS v{source} WHERE {c}")
    return out


def _backfill(table: str) -> str:
    return " UNION ALL ".join(_selects(table, "x", "", f" FROM {table} x"))


def sqlite_ddl() -> list[str]:
    """m009 for SQLite: the table, a count of what is there, one trigger per change."""
    upsert = ("INSERT INTO counters (name, value) SELECT k, sum(v) FROM ({q}) "
              "GROUP BY k HAVING sum(v) <> 0 "
              "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value;")
    out = ["CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"]
    for table, (cols, _) in COUNTED.items():
        out.append(upsert.format(q=_backfill(table)).rstrip(";"))
        ins = " UNION ALL ".join(_selects(table, "NEW", ""))
        dele = " UNION ALL ".join(_selects(table, "OLD", "-"))
        changed = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in cols)
        out += [
            f"CREATE TRIGGER counters_{table}_in AFTER INSERT ON {table} BEGIN "
            f"{upsert.format(q=ins)} END",
            f"CREATE TRIGGER counters_{table}_out AFTER DELETE ON {table} BEGIN "
            f"{upsert.format(q=dele)} END",
            f"CREATE TRIGGER counters_{table}_set AFTER UPDATE OF {', '.join(cols)} "
            f"ON {table} WHEN {changed} BEGIN "
            f"{upsert.format(q=dele + ' UNION ALL ' + ins)} END",
        ]
    # status's last job error, newest first, without a scan of every job
    out.append("CREATE INDEX jobs_last_error ON jobs (updated_at) WHERE last_error IS NOT NULL")
    return out


def pg_ddl() -> list[str]:
    """m009's PostgreSQL twin. Inserts and deletes are counted per statement over its
    transition table (a batch of rows is one update of the counter); updates per row,
    only when a counted column changed."""
    upsert = ("INSERT INTO counters (name, slot, value) SELECT k, pg_backend_pid(), sum(v) "
              "FROM ({q}) d GROUP BY k HAVING sum(v) <> 0 ORDER BY k "
              "ON CONFLICT (name, slot) DO UPDATE SET value = counters.value + excluded.value")
    fn = ("CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
          "SET search_path FROM CURRENT AS $memoryd$ BEGIN {body}; RETURN NULL; END $memoryd$")
    out = ["CREATE TABLE counters (name text NOT NULL, slot bigint NOT NULL DEFAULT 0, "
           "value bigint NOT NULL, PRIMARY KEY (name, slot))"]
    for table, (cols, _) in COUNTED.items():
        out.append(upsert.replace("pg_backend_pid()", "0").format(q=_backfill(table)))
        ins = " UNION ALL ".join(_selects(table, "x", "", " FROM counted_new x"))
        dele = " UNION ALL ".join(_selects(table, "x", "-", " FROM counted_old x"))
        row = " UNION ALL ".join(_selects(table, "OLD", "-") + _selects(table, "NEW", ""))
        changed = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in cols)
        out += [
            fn.format(name=f"counters_{table}_in", body=upsert.format(q=ins)),
            fn.format(name=f"counters_{table}_out", body=upsert.format(q=dele)),
            fn.format(name=f"counters_{table}_set", body=upsert.format(q=row)),
            f"CREATE TRIGGER counters_{table}_in AFTER INSERT ON {table} "
            f"REFERENCING NEW TABLE AS counted_new FOR EACH STATEMENT "
            f"EXECUTE FUNCTION counters_{table}_in()",
            f"CREATE TRIGGER counters_{table}_out AFTER DELETE ON {table} "
            f"REFERENCING OLD TABLE AS counted_old FOR EACH STATEMENT "
            f"EXECUTE FUNCTION counters_{table}_out()",
            f"CREATE TRIGGER counters_{table}_set AFTER UPDATE OF {', '.join(cols)} "
            f"ON {table} FOR EACH ROW WHEN ({changed}) "
            f"EXECUTE FUNCTION counters_{table}_set()",
        ]
    out.append("CREATE INDEX jobs_last_error ON jobs (updated_at) WHERE last_error IS NOT NULL")
    return out


def fold_pg(conn: Any) -> None:
    """Fold the counter rows of PostgreSQL backends that are gone into slot 0 (a psycopg
    connection of the namespace, autocommit or inside a transaction). Each live backend
    keeps writing its own rows; no trigger ever writes slot 0, so this waits on no one."""
    conn.execute(
        "WITH gone AS (DELETE FROM counters WHERE slot <> 0 AND slot NOT IN "
        "(SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL) RETURNING name, value) "
        "INSERT INTO counters (name, slot, value) SELECT name, 0, sum(value) FROM gone "
        "GROUP BY name ORDER BY name "
        "ON CONFLICT (name, slot) DO UPDATE SET value = counters.value + excluded.value")


def read_counters(conn: sqlite3.Connection) -> dict[str, int]:
    """Every counter by name (a few dozen rows whatever the store's size)."""
    return {r[0]: int(r[1]) for r in conn.execute(
        "SELECT name, sum(value) FROM counters GROUP BY name")}


def counter(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT sum(value) FROM counters WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def with_prefix(counts: dict[str, int], prefix: str) -> dict[str, int]:
    """`{'jobs:done': 3}` with prefix 'jobs:' -> `{'done': 3}`; zero counts dropped."""
    return {k[len(prefix):]: v for k, v in counts.items() if k.startswith(prefix) and v}
