"""Units per session per quarter hour (m016, `memoryd.store.unit_quarters`) kept by
triggers on both engines: after every path that stores or removes units the table equals
a recount of the units, and `day_counts` sums it into exactly the per-day figures a
count of the units by local day gives, in whole-hour, half-hour and 45-minute zones,
across DST changes, and in a zone off the quarter hour."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from datetime import date, datetime, timedelta

import psycopg
import pytest

from memoryd.daemon import store_index
from memoryd.models import Record
from memoryd.store import activity, archive, sessions, units
from memoryd.store.pg import migrations as pg_migrations
from memoryd.store.migrations import MIGRATIONS, migrate
from memoryd.store.unit_quarters import QUARTER, day_counts
from memoryd.store_target import StoreTarget

T0 = 1_772_900_000.0  # 2026-03-07 16:13 UTC: a week over the US change to DST (03-08)


def recount(c) -> dict:
    """What unit_quarters should hold, from the units themselves."""
    out: dict = {}
    for pk, ts in c.execute("SELECT session_pk, ts FROM units WHERE ts IS NOT NULL"):
        k = (int(pk), int(ts // QUARTER))
        n, lo, hi = out.get(k, (0, ts, ts))
        out[k] = (n + 1, min(lo, ts), max(hi, ts))
    return out


def table(c) -> dict:
    return {(int(r[0]), int(r[1])): (int(r[2]), r[3], r[4]) for r in c.execute(
        "SELECT session_pk, quarter, n, first_ts, last_ts FROM unit_quarters")}


def fill(c, sid: str, times: list[float | None], batch: bool = True) -> int:
    """A session whose units have these times (None: a unit without one)."""
    pk = sessions.session_pk(c, "generic", sid, project="/p")
    w = units.SessionWriter(c, pk)
    for i, ts in enumerate(times):
        rec = Record(role="user" if i % 2 == 0 else "assistant", content=f"{sid} {i}", ts=ts)
        if batch:
            w.add(rec, f"{sid}-{i}", None, None)
        else:
            w.store(rec, f"{sid}-{i}", None, None)
    w.flush()
    return pk


def spread(n: int, start: float, step: float) -> list[float | None]:
    return [start + i * step for i in range(n)]


async def same(store) -> dict:
    want = await store.read(recount)
    assert await store.read(table) == want
    return want


async def test_unit_quarters_equal_a_recount_after_every_change(store):
    # batched and one by one; units on a quarter's edge, twins at one time, none at all
    a = await store.write(lambda c: fill(c, "a", [*spread(40, T0, 397.0), None,
                                                  T0 + 12 * QUARTER, T0 + 12 * QUARTER]))
    b = await store.write(lambda c: fill(c, "b", spread(30, 1_772_928_000.0, 600.0),
                                         batch=False))
    await store.write(lambda c: fill(c, "c", spread(25, T0 + 86400, 1800.0)))
    assert len(await same(store)) > 20

    # forget by query deletes units one by one: the first and last of quarters among them
    def edges(c) -> list[int]:
        ids = []
        for pk in (a, b):
            for r in c.execute(
                    "SELECT min(id), max(id) FROM units WHERE session_pk = ? AND ts IS NOT NULL "
                    "GROUP BY CAST(ts / 900 AS INTEGER)", (pk,)).fetchall()[::3]:
                ids += [r[0], r[1]]
        return sorted(set(ids))
    gone = await store.read(edges)
    await store.write(lambda c: sessions.forget_units(c, gone))
    await same(store)

    # retention's archival and its restore
    rows = await store.read(lambda c: archive.session_units(c, b))
    await store.write(lambda c: archive.mark_archived(c, b, "2026-03"))
    assert all(pk != b for pk, _ in await same(store))
    await store.write(lambda c: archive.restore_units(c, b, rows))
    assert any(pk == b for pk, _ in await same(store))

    # forget (and an exclusion's purge, which forgets the same way), then a session row
    # deleted with its units still there (the cascade)
    await store.write(lambda c: sessions.forget_session(c, a))
    assert all(pk != a for pk, _ in await same(store))
    await store.write(lambda c: c.execute("DELETE FROM sessions WHERE id = ?", (b,)))
    assert all(pk != b for pk, _ in await same(store))


def by_local_day(c, bounds: list[float]) -> dict:
    """The old way: every unit of the range, to the day whose bounds hold it."""
    out: dict = {}
    for pk, ts in c.execute("SELECT session_pk, ts FROM units WHERE ts >= ? AND ts < ?",
                            (bounds[0], bounds[-1])):
        d = max(i for i in range(len(bounds) - 1) if bounds[i] <= ts)
        lo, hi, n = out.get((pk, d), (ts, ts, 0))
        out[(pk, d)] = [min(lo, ts), max(hi, ts), n + 1]
    return out


@pytest.fixture
def zone():
    """Sets the process's local time zone (restored afterwards)."""
    was = os.environ.get("TZ")

    def set_zone(name: str) -> None:
        os.environ["TZ"] = name
        time.tzset()
    yield set_zone
    if was is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = was
    time.tzset()


def midnights(first: date, days: int) -> list[float]:
    return [datetime.combine(first + timedelta(days=i), datetime.min.time()).timestamp()
            for i in range(days + 1)]


@pytest.mark.parametrize("name", ["UTC", "America/New_York", "Asia/Kolkata",
                                  "Asia/Kathmandu", "America/St_Johns",
                                  "Australia/Lord_Howe", "ODD-5:20"])
async def test_day_counts_equal_a_count_by_local_day(store, zone, name):
    zone(name)
    # every 7 minutes for 9 days around 2026-04-05 (Lord Howe leaves its half-hour DST)
    # and 2026-03-08 (the US enters DST), and a sparse session across both
    start = datetime(2026, 4, 1, 0, 0).timestamp()
    await store.write(lambda c: fill(c, "dense", spread(1850, start, 421.0)))
    await store.write(lambda c: fill(c, "us", spread(600, datetime(2026, 3, 5).timestamp(),
                                                     1301.0)))
    await store.write(lambda c: fill(c, "sparse", spread(40, T0, 86400.0 / 3)))
    for first, days in ((date(2026, 4, 1), 7), (date(2026, 3, 4), 7), (date(2026, 3, 30), 3)):
        bounds = midnights(first, days)
        # only the odd zone's midnights split a quarter (counted from its units)
        assert any(b % QUARTER for b in bounds) == (name == "ODD-5:20")
        got = await store.read(lambda c, b=bounds: day_counts(c, b))
        want = await store.read(lambda c, b=bounds: by_local_day(c, b))
        assert got == want and sum(v[2] for v in want.values()) > 100, (name, first)
        only = sorted({pk for pk, _ in want})[:1]
        got = await store.read(lambda c, b=bounds: day_counts(c, b, only))
        assert got == {k: v for k, v in want.items() if k[0] in only}


async def test_the_overviews_messages_per_day_are_a_count_by_local_day_and_agent(store,
                                                                                zone):
    """The overview's chart (store.activity.messages_per_day) reads unit_quarters: its
    figures per day and agent equal a count of the units, across the US change to DST."""
    zone("America/New_York")
    start = datetime(2026, 3, 5).timestamp()
    await store.write(lambda c: fill(c, "a1", spread(700, start, 613.0)))
    await store.write(lambda c: fill(c, "a2", spread(90, start + 3000, 4001.0)))

    def other_agent(c) -> None:
        pk = sessions.session_pk(c, "codex", "b1", project="/q")
        w = units.SessionWriter(c, pk)
        for i, ts in enumerate(spread(300, start + 777, 1999.0)):
            w.add(Record(role="user", content=f"b {i}", ts=ts), f"b-{i}", None, None)
        w.flush()
    await store.write(other_agent)
    bounds = midnights(date(2026, 3, 4), 8)

    def by_agent(c) -> list:
        out: dict = {}
        for agent, ts in c.execute("SELECT s.agent, u.ts FROM units u JOIN sessions s "
                                   "ON s.id = u.session_pk WHERE u.ts >= ? AND u.ts < ?",
                                   (bounds[0], bounds[-1])):
            d = max(i for i in range(len(bounds) - 1) if bounds[i] <= ts)
            out[(d, agent)] = out.get((d, agent), 0) + 1
        return sorted((d, a, n) for (d, a), n in out.items())

    got = await store.read(lambda c: activity.messages_per_day(c, bounds))
    want = await store.read(by_agent)
    assert got == want and {a for _, a, _ in want} == {"generic", "codex"}
    assert sum(n for *_, n in want) == 1090


async def test_a_forget_while_another_machine_ingests_the_same_quarters_completes(
        tmp_path, pg_url, caplog):
    """Two daemons of a fleet on one namespace: one stores units of two sessions in
    batches (a transaction upserts session x's quarters, then y's) while the other
    forgets units of the same sessions and quarters (its trigger locks them in key
    order). They can wait on each other's rows in a circle; PostgreSQL then ends one
    write, which the store runs again (issue 30): both complete, and the table equals a
    recount."""
    caplog.set_level(logging.INFO, logger="memoryd.store.pg.conn")
    one = await store_index.open_store(tmp_path / "h1" / "memoryd.db",
                                       target=StoreTarget(url=pg_url, machine="m1"))
    two = await store_index.open_store(tmp_path / "h2" / "memoryd.db",
                                       target=StoreTarget(url=pg_url, machine="m2"))
    pks = [await one.write(lambda c, s=s: fill(c, s, spread(40, T0, 300.0))) for s in "xy"]

    async def ingest() -> None:
        for r in range(25):
            def batch(c, r=r) -> None:
                for n, pk in enumerate(pks):
                    w = units.SessionWriter(c, pk)
                    for i in range(12):
                        w.add(Record(role="user", content=f"r{r} {i}",
                                     ts=T0 + (i * 7 + r + n) * 150.0), f"r{r}-{n}-{i}",
                              None, None)
                    w.flush()
            await one.write(batch)

    async def forget() -> None:
        for _ in range(25):
            ids = await two.read(lambda c: [r[0] for r in c.execute(
                "SELECT id FROM units WHERE session_pk IN (?, ?) ORDER BY random() LIMIT 9",
                pks)])
            await two.write(lambda c, ids=ids: sessions.forget_units(c, ids))

    try:
        await asyncio.gather(ingest(), forget())
        await same(one)
    finally:
        await one.close()
        await two.close()


def test_unit_quarters_start_from_an_existing_sqlite_database(tmp_path):
    """m016 on a database that already holds units counts them once."""
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    before = [m.__name__ for m in MIGRATIONS].index("m016_unit_quarters")
    for m in MIGRATIONS[:before]:  # a database from before the table
        conn.execute("BEGIN")
        m(conn)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (m.__name__,))
        conn.execute("COMMIT")
    conn.execute("BEGIN")
    fill(conn, "old", [*spread(50, T0, 500.0), None])
    conn.execute("COMMIT")
    assert migrate(conn) == [m.__name__ for m in MIGRATIONS[before:]]  # m016 and later
    want = recount(conn)
    assert table(conn) == want and sum(n for n, _, _ in want.values()) == 50
    conn.close()


def test_unit_quarters_start_from_an_existing_postgresql_schema(pg_url):
    from memoryd.store.pg.conn import PgConn, _configure

    with psycopg.connect(pg_url, autocommit=True) as raw:
        before = pg_migrations.NAMES.index("m016_unit_quarters")
        assert pg_migrations.migrate(raw, "memoryd_quarters", known=pg_migrations.NAMES[:before])
        _configure(raw, "memoryd_quarters")
        raw.autocommit = False
        conn = PgConn(raw)
        fill(conn, "old", [*spread(50, T0, 500.0), None])
        conn.commit()
        raw.autocommit = True
        assert pg_migrations.migrate(raw, "memoryd_quarters") == pg_migrations.NAMES[before:]
        want = recount(conn)
        assert table(conn) == want and sum(n for n, _, _ in want.values()) == 50
