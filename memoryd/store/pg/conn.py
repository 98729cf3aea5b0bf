"""PostgreSQL under the store's one interface.

The query modules (`store/units.py`, `sessions.py`, ...) are shared by both engines:
they call `conn.execute(sql, params)` with SQLite's `?` / `:name` placeholders and read
rows as `row["col"]`, `row[0]` or `dict(row)`. `PgConn` gives them exactly that over a
psycopg connection: `translate()` is the one place the placeholder style changes, `Row`
behaves like `sqlite3.Row`, and `numeric` results (a `sum()` of integers) come back as
int or float, as SQLite returns them, never as Decimal.

`PgPools` gives the store's writer thread and each reader thread a connection of its
own (the readers' REPEATABLE READ, read only, so one `store.read(fn)` sees one snapshot,
as an SQLite read transaction does), one transaction per call. While the server is
away, calls fail fast with StoreUnavailableError and `Health` paces the reconnects.
The driver is the optional extra `memoryd[postgres]`.
"""

from __future__ import annotations

import functools
import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from memoryd.errors import StoreError, StoreUnavailableError
from memoryd.store.health import Health
from memoryd.store_target import StoreTarget

T = TypeVar("T")
log = logging.getLogger(__name__)
DEADLOCK_TRIES = 8  # a write PostgreSQL ended as a deadlock's victim is run this often
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
        kind = StoreUnavailableError if unreachable(e) else StoreError
        raise kind(f"cannot connect to {target.masked()}: "
                   f"{target.scrub(str(e)).strip()}") from None
    if configure:
        _configure(raw, target.schema)
    raw.autocommit = autocommit
    return PgConn(raw)


CONNECT_TIMEOUT_S = 5
# an established connection to a server that vanished without a word (a network gone,
# a host powered off) is noticed in about half a minute, not after the kernel's hours
_LIBPQ_DEFAULTS = {"connect_timeout": CONNECT_TIMEOUT_S, "keepalives": 1,
                   "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}


def unreachable(e: BaseException) -> bool:
    """Whether `e` says the server could not be reached or the connection was lost (as
    opposed to an SQL error the server answered with): no SQLSTATE (libpq's own
    failures), class 08 (connection exception) or 57 (the server shutting down)."""
    psycopg, _ = driver()
    if not isinstance(e, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    state = getattr(e, "sqlstate", None)
    return state is None or state[:2] in ("08", "57")


class PgPools:
    """The store's connections: one per thread (the writer's and each reader's), made
    when first needed and made again after the server went away. A thread already owns
    its connection, so no pool stands between them; and no pool's own reconnect loop
    logs a warning per attempt during an outage. Every round trip reports to `health`
    (`memoryd.store.health`): while the database is away, calls fail at once with
    StoreUnavailableError until the backoff allows the next attempt."""

    def __init__(self, target: StoreTarget, readers: int, health: Health) -> None:
        self.target = target
        self.health = health
        # the first connection now: a store that cannot be reached at start is an error
        # at start (the migrations just ran; this checks the pool's settings too)
        probe = PgRunner(target, True, health)
        try:
            probe.connect()
        finally:
            probe.close()

    def runner(self, write: bool) -> PgRunner:
        return PgRunner(self.target, write, self.health)

    def close(self) -> None:
        pass


class _Stale(Exception):
    """A connection from before the last outage was found dropped (retried at once)."""


class PgRunner:
    """Runs `fn(conn)` in one transaction on this thread's connection (committed when
    `fn` returns, rolled back when it raises). A connection lost to the server going
    away is dropped, reported to `health`, and made again on a later call. `fn` may run
    more than once (after a stale connection, or as a deadlock's victim), each time in a
    fresh transaction: it touches nothing but the database."""

    def __init__(self, target: StoreTarget, write: bool, health: Health) -> None:
        self.target = target
        self.write = write
        self.health = health
        self.raw: Any = None
        self.born = 0  # health.outages when the connection was made

    def connect(self) -> Any:
        if self.raw is not None and not self.raw.closed:
            return self.raw
        psycopg, _ = driver()
        born = self.health.outages  # before connecting: a reply may be read after an outage
        url, kwargs = conninfo(self.target)
        for key, value in _LIBPQ_DEFAULTS.items():
            if key not in url:  # the URL's own settings win
                kwargs.setdefault(key, value)
        try:
            raw = psycopg.connect(url, **kwargs)
            _configure(raw, self.target.schema)
            raw.commit()
            if not self.write:
                raw.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                raw.read_only = True
        except psycopg.Error as e:
            if unreachable(e):
                raise
            raise StoreError(f"cannot connect to {self.target.masked()}: "
                             f"{self.target.scrub(str(e)).strip()}") from None
        self.raw, self.born = raw, born
        return raw

    def run(self, fn: Callable[[Any], T]) -> T:
        if not self.health.due():
            raise StoreUnavailableError(self._down())
        if not self.health.reachable and self.born < self.health.outages:
            # while down, only a new connection says the server is back: one made
            # before the outage may have outlived a shutdown's first moments
            self._drop()
        psycopg, _ = driver()
        for attempt in range(1, DEADLOCK_TRIES):
            try:
                return self._once(fn)
            except psycopg.errors.DeadlockDetected:
                # two machines' writes waited on each other's rows (a forget while
                # another daemon stores units of the same session-quarters, issue 30):
                # the server rolled this one back; as PostgreSQL's manual says, run it
                # again (the other has gone on by now)
                log.info("store: a write met another machine's in a deadlock; "
                         "running it again (%d of %d)", attempt + 1, DEADLOCK_TRIES)
                time.sleep(random.uniform(0.02, 0.1) * attempt)  # out of step
        return self._once(fn)

    def _once(self, fn: Callable[[Any], T]) -> T:
        try:
            return self._run(fn)
        except _Stale:
            # this thread's connection was made before the last outage and the server
            # dropped it then: connect again and run once more (it did not commit)
            return self._run(fn)

    def _run(self, fn: Callable[[Any], T]) -> T:
        raw = None
        committing = False
        try:
            raw = self.connect()
            result = fn(PgConn(raw))
            committing = True
            raw.commit()
        except BaseException as e:
            lost = unreachable(e) or (raw is not None and raw.broken)
            if not lost and raw is not None and not raw.closed:
                try:
                    raw.rollback()
                except Exception as e2:
                    lost = unreachable(e2) or raw.broken
            if not lost:
                if _answered(e):
                    self.health.ok(self.born)  # the server answered, with an SQL error
                raise
            stale = raw is not None and self.health.stale(self.born)
            self._drop()
            if stale and not committing:
                raise _Stale from None
            self.health.failed(e)
            raise StoreUnavailableError(self._down()) from None
        self.health.ok(self.born)
        return result

    def _down(self) -> str:
        return down_message(self.target, self.health)

    def _drop(self) -> None:
        raw, self.raw = self.raw, None
        if raw is not None:
            try:
                raw.close()
            except Exception:  # noqa: S110 - a connection already lost
                pass

    def close(self) -> None:
        self._drop()


def down_message(target: StoreTarget, health: Health) -> str:
    st = health.status()
    return (f"the store at {target.masked()} is unreachable since "
            f"{st['unreachable_since']} ({st['last_error']}); retrying with backoff, "
            "nothing read from the transcripts is lost")


def _answered(e: Exception) -> bool:
    psycopg, _ = driver()
    return isinstance(e, psycopg.Error) and getattr(e, "sqlstate", None) is not None
