"""PostgreSQL under the store's one interface.

The query modules (`store/units.py`, `sessions.py`, ...) are shared by both engines:
they call `conn.execute(sql, params)` with SQLite's `?` / `:name` placeholders and read
rows as `row["col"]`, `row[0]` or `dict(row)`. `PgConn` gives them exactly that over a
psycopg connection: `translate()` is the one place the placeholder style changes, `Row`
behaves like `sqlite3.Row`, and `numeric` results (a `sum()` of integers) come back as
int or float, as SQLite returns them, never as Decimal.

`PgPools` holds a writer pool of one connection and a reader pool (REPEATABLE READ,
read only, so one `store.read(fn)` sees one snapshot, as an SQLite read transaction
does); the store's writer and reader threads take a connection per call, one
transaction per call. The driver is the optional extra `memoryd[postgres]`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from memoryd.errors import StoreError
from memoryd.store_target import StoreTarget

T = TypeVar("T")
INSTALL_HINT = ("the PostgreSQL store needs the psycopg driver: install memoryd[postgres] "
                "(uv tool install 'memoryd[postgres]' or pip install 'memoryd[postgres]')")


def driver() -> tuple[Any, Any]:
    """(psycopg, psycopg_pool), or a StoreError that says what to install."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise StoreError(INSTALL_HINT) from None
    return psycopg, psycopg_pool


# -- placeholders --------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """SQLite's `?` and `:name` placeholders as psycopg's `%s` and `%(name)s`, and a
    literal `%` doubled; string literals, quoted names and comments are left alone."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:  # a doubled quote inside
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i:j + 1].replace("%", "%%"))
            i = j + 1
        elif ch == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j].replace("%", "%%"))
            i = j
        elif ch == "?":
            if i + 1 < n and sql[i + 1].isdigit():
                raise ValueError("numbered placeholders (?1) are SQLite's only: use :name")
            out.append("%s")
            i += 1
        elif ch == ":" and (m := _NAME.match(sql, i + 1)) and not sql.startswith("::", i) \
                and (i == 0 or sql[i - 1] != ":"):
            out.append(f"%({m.group()})s")
            i = m.end()
        elif ch == "%":
            out.append("%%")
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# -- rows ----------------------------------------------------------------------------------


class Row(tuple):  # noqa: SLOT001 - a tuple subclass cannot have non-empty __slots__
    """A result row read like `sqlite3.Row`: by position, by column name, and `dict(row)`."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], Row]:
    desc = cursor.description or []
    index: dict[str, int] = {}
    for i, col in enumerate(desc):
        index.setdefault(col.name, i)  # the first of two same-named columns, as sqlite3
    return lambda values: Row(values, index)


class PgConn:
    """A psycopg connection with the `execute(sql, params)` the query modules use."""

    engine = "postgresql"

    def __init__(self, conn: Any) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        if not isinstance(params, Mapping):
            params = tuple(params)
        return self.raw.execute(translate(sql), params)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> Any:
        cur = self.raw.cursor()
        cur.executemany(translate(sql), seq)
        return cur

    def rollback(self) -> None:
        self.raw.rollback()

    def commit(self) -> None:
        self.raw.commit()

    def close(self) -> None:
        self.raw.close()


def _configure(conn: Any, schema: str) -> None:
    """Every connection: rows like sqlite3.Row, SQLite's number types, jsonb as text (the
    code decodes it), and the namespace's schema first on the search path."""
    psycopg, _ = driver()
    from psycopg.types.numeric import NumericLoader
    from psycopg.types.string import TextLoader

    class _Number(NumericLoader):
        def load(self, data: Any) -> Any:
            v = super().load(data)
            return int(v) if v == v.to_integral_value() else float(v)

    conn.row_factory = _row_factory
    conn.adapters.register_loader("numeric", _Number)
    conn.adapters.register_loader("jsonb", TextLoader)
    conn.adapters.register_loader("json", TextLoader)
    ident = psycopg.sql.Identifier(schema)
    conn.execute(psycopg.sql.SQL("SET search_path TO {}").format(ident))


def conninfo(target: StoreTarget) -> tuple[str, dict[str, Any]]:
    """The URL as libpq takes it (sslmode and the rest pass through) and extra keyword
    parameters (the password from `password_file`, an application name)."""
    kwargs: dict[str, Any] = {"application_name": f"memoryd@{target.machine}"[:63]}
    if pw := target.password():
        kwargs["password"] = pw
    return target.url.strip(), kwargs


def connect(target: StoreTarget, *, autocommit: bool = False,
            configure: bool = True) -> PgConn:
    """One connection of its own (migrations, the index's reader, tools)."""
    psycopg, _ = driver()
    url, kwargs = conninfo(target)
    try:
        raw = psycopg.connect(url, autocommit=True, **kwargs)
    except psycopg.Error as e:
        raise StoreError(f"cannot connect to {target.masked()}: "
                         f"{target.scrub(str(e)).strip()}") from None
    if configure:
        _configure(raw, target.schema)
    raw.autocommit = autocommit
    return PgConn(raw)


class PgPools:
    """The writer's pool (one connection) and the readers' pool."""

    def __init__(self, target: StoreTarget, readers: int) -> None:
        psycopg, psycopg_pool = driver()
        self.target = target
        url, kwargs = conninfo(target)
        schema = target.schema

        def writer_conf(conn: Any) -> None:
            _configure(conn, schema)
            conn.commit()

        def reader_conf(conn: Any) -> None:
            _configure(conn, schema)
            conn.commit()
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True

        try:
            self.writer = psycopg_pool.ConnectionPool(
                url, kwargs=kwargs, min_size=1, max_size=1, configure=writer_conf,
                name="memoryd-pg-writer", open=False)
            self.readers = psycopg_pool.ConnectionPool(
                url, kwargs=kwargs, min_size=readers, max_size=readers,
                configure=reader_conf, name="memoryd-pg-readers", open=False)
            self.writer.open(wait=True, timeout=30)
            self.readers.open(wait=True, timeout=30)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as e:
            self.close()
            raise StoreError(f"cannot connect to {target.masked()}: "
                             f"{target.scrub(str(e)).strip()}") from None

    def runner(self, write: bool) -> PgRunner:
        return PgRunner(self.writer if write else self.readers, self.target)

    def close(self) -> None:
        for pool in (getattr(self, "writer", None), getattr(self, "readers", None)):
            if pool is not None:
                pool.close()


class PgRunner:
    """Runs `fn(conn)` in one transaction on a pooled connection (committed when `fn`
    returns, rolled back when it raises); a connection the server dropped is replaced
    by the pool."""

    def __init__(self, pool: Any, target: StoreTarget) -> None:
        self.pool = pool
        self.target = target

    def run(self, fn: Callable[[Any], T]) -> T:
        _, psycopg_pool = driver()
        try:
            with self.pool.connection() as raw:
                return fn(PgConn(raw))
        except psycopg_pool.PoolTimeout as e:
            raise StoreError(f"the store at {self.target.masked()} did not answer: "
                             f"{self.target.scrub(str(e))}") from None

    def close(self) -> None:
        pass
