"""One end of a store migration (`memoryd.move.migrate`): a DB-API connection to the
embedded SQLite file or a PostgreSQL namespace, opened (and migrated to this memoryd's
schema) by `open_end`, and how a batch of rows goes into it on each engine: one COPY on
PostgreSQL (through a temporary twin and one INSERT … SELECT when it meets a row the
destination holds), plain inserts on SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd.store_target import StoreTarget, is_postgres


class End:
    """One end of the copy: a DB-API connection and what the SQL needs to know of it."""

    def __init__(self, conn: Any, engine: str, label: str, raw: Any = None) -> None:
        self.conn, self.engine, self.label, self.raw = conn, engine, label, raw

    def columns(self, table: str) -> list[str]:
        if self.engine == "sqlite":
            return [r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")]
        rows = self.conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name = ? ORDER BY ordinal_position", (table,))
        return [r[0] for r in rows]

    def begin(self) -> None:
        if self.engine == "sqlite":
            self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.commit() if self.engine == "postgresql" else self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self.engine == "postgresql":
            self.conn.rollback()
        elif self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()

    def record_map(self, src: str, tbl: str, pairs: list[tuple[int, int]]) -> None:
        """Each copied row's source id and new id, in the batch's transaction."""
        rows = [(src, tbl, s, d) for s, d in pairs]
        if self.engine == "postgresql":
            with self.raw.cursor() as cur, cur.copy(
                    "COPY _migrate_map (src, tbl, src_id, dst_id) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            self.conn.executemany("INSERT INTO _migrate_map (src, tbl, src_id, dst_id) "
                                  "VALUES (?, ?, ?, ?)", rows)

    def insert_staged(self, tbl: str, cols: list[str], values: list[list[Any]],
                      key: str = "id") -> list[int | None]:
        """One batch into a PostgreSQL table in a few statements, whatever its size: ids
        handed out by the table's own identity (or, for a table keyed by another's id, a
        unit's vector, the rows' own `key`), then the rows COPied straight into the
        table under a savepoint. Only when that meets a row the destination already holds
        (a unique key: another copy got there first) is the savepoint rolled back and the
        batch COPied into a temporary twin of the table instead, then moved by one
        INSERT … SELECT that skips those rows (ON CONFLICT DO NOTHING) and returns the
        ids it took. One statement either way, so the change feed's trigger runs once
        per batch, not once per row. Returns the new id of each row, or None where it
        conflicted."""
        if not values:
            return []
        psycopg, _ = _driver()
        from psycopg.rows import tuple_row  # plain tuples: thousands of ids per batch

        with self.raw.cursor(row_factory=tuple_row) as cur:
            if key == "id":
                ids = [r[0] for r in cur.execute(
                    "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM "
                    "generate_series(1, %s)", (tbl, len(values))).fetchall()]
                names = ", ".join(["id", *(quote_col(c) for c in cols)])
                rows = [(i, *v) for i, v in zip(ids, values, strict=True)]
            else:
                ids = [v[cols.index(key)] for v in values]
                names = ", ".join(quote_col(c) for c in cols)
                rows = [tuple(v) for v in values]
            try:
                with self.raw.transaction(), cur.copy(
                        f"COPY {tbl} ({names}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                return list(ids)
            except psycopg.errors.UniqueViolation:
                pass  # rolled back to the savepoint: the batch goes the careful way
            stage = f"_migrate_stage_{tbl}"
            # in this transaction: a rolled-back batch takes a table it created with it
            cur.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {stage} (LIKE {tbl} "
                        "INCLUDING DEFAULTS) ON COMMIT DELETE ROWS")
            with cur.copy(f"COPY {stage} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            took = {r[0] for r in cur.execute(
                f"INSERT INTO {tbl} ({names}) SELECT {names} FROM {stage} ORDER BY {key} "
                f"ON CONFLICT DO NOTHING RETURNING {key}").fetchall()}
        return [i if i in took else None for i in ids]

    def insert_many(self, sql: str, values: list[list[Any]]) -> list[int | None]:
        """One id (or None on a conflict) per row; on PostgreSQL in one pipeline, so a
        batch costs one round trip rather than one per row."""
        if self.engine == "postgresql":
            with self.raw.pipeline():
                curs = [self.conn.execute(sql, v) for v in values]
            return [(row[0] if (row := c.fetchone()) else None) for c in curs]
        out = []
        for v in values:
            row = self.conn.execute(sql, v).fetchone()
            out.append(row[0] if row else None)
        return out


def open_end(where: str, target: StoreTarget, sqlite_path: Path) -> End:
    """`where` is a postgresql:// URL or 'sqlite'; the store is created and migrated to
    this memoryd's schema if it is new."""
    if is_postgres(where):
        from memoryd.store.pg import conn as pg
        from memoryd.store.pg import migrations as pg_migrations

        admin = pg.connect(target, autocommit=True, configure=False)
        try:
            pg_migrations.migrate(admin.raw, target.schema)
        finally:
            admin.close()
        conn = pg.connect(target)
        return End(conn, "postgresql", f"{target.masked()} namespace {target.namespace}",
                   conn.raw)
    from memoryd.store.db import connect
    from memoryd.store.migrations import migrate

    sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(sqlite_path)
    migrate(conn)
    return End(conn, "sqlite", f"sqlite {sqlite_path}")


def _driver() -> tuple[Any, Any]:
    from memoryd.store.pg.conn import driver

    return driver()


def quote_col(col: str) -> str:
    return f'"{col}"' if col == "offset" else col
