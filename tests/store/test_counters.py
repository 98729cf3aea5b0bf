"""Status counts come from counters the triggers keep (m007), never from a scan: they
must equal what a count(*) says after every kind of change."""

import sqlite3

import pytest

from memoryd.ingest.adapters.base import Record
from memoryd.store import Store
from memoryd.store.archive import mark_archived, restore_units, session_units
from memoryd.store.migrations import migrate
from memoryd.store.sessions import count_sessions, forget_session, session_pk
from memoryd.store.summaries import EXTRACTIVE, artifact_counts, save_one_liners
from memoryd.store.units import count_units, store_record


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "memoryd.db")
    yield s
    await s.close()


def truth(c: sqlite3.Connection) -> tuple[int, int, int]:
    return (c.execute("SELECT count(*) FROM units").fetchone()[0],
            c.execute("SELECT count(*) FROM sessions").fetchone()[0],
            c.execute("SELECT count(*) FROM units WHERE one_liner_by = ?",
                      (EXTRACTIVE,)).fetchone()[0])


def counted(c: sqlite3.Connection) -> tuple[int, int, int]:
    return (count_units(c), count_sessions(c), artifact_counts(c)["extractive_one_liners"])


def fill(c: sqlite3.Connection, sid: str, n: int) -> int:
    pk = session_pk(c, "generic", sid, project="/p")
    for i in range(n):
        store_record(c, pk, Record(role="user" if i % 2 == 0 else "assistant",
                                   content=f"{sid} line {i}", record_id=f"{sid}-{i}"),
                     f"{sid}-{i}", None, None)
    return pk


async def test_counters_follow_inserts_one_liners_forget_archive_and_restore(store):
    a = await store.write(lambda c: fill(c, "a", 7))
    b = await store.write(lambda c: fill(c, "b", 5))
    await store.write(lambda c: fill(c, "a", 7))  # a replay stores nothing
    assert await store.read(counted) == await store.read(truth) == (12, 2, 0)

    ids = await store.read(lambda c: [r[0] for r in c.execute(
        "SELECT id FROM units WHERE session_pk = ? ORDER BY id", (a,))])
    await store.write(lambda c: save_one_liners(
        c, [(u, "short", EXTRACTIVE, "v1") for u in ids[:4]]))
    await store.write(lambda c: save_one_liners(  # an upgrade replaces two of them
        c, [(u, "better", "model", "v1") for u in ids[:2]], only_if_by=EXTRACTIVE))
    assert await store.read(counted) == await store.read(truth) == (12, 2, 2)

    rows = await store.read(lambda c: session_units(c, a))
    await store.write(lambda c: mark_archived(c, a, "2026-11"))
    assert await store.read(counted) == await store.read(truth) == (5, 2, 0)
    await store.write(lambda c: restore_units(c, a, rows))
    assert await store.read(counted) == await store.read(truth)

    await store.write(lambda c: forget_session(c, b))
    assert await store.read(counted) == await store.read(truth)
    assert (await store.read(counted))[1] == 1


def test_the_counters_start_from_an_existing_database(tmp_path):
    """m007 on a database that already holds units counts them once."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    from memoryd.store import migrations

    for m in migrations.MIGRATIONS[:-1]:  # a database from before the counters
        conn.execute("BEGIN")
        m(conn)
        conn.execute("COMMIT")
    conn.execute("BEGIN")
    fill(conn, "old", 9)
    conn.execute("UPDATE units SET one_liner_by = ? WHERE seq <= 3", (EXTRACTIVE,))
    conn.execute("COMMIT")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    conn.executemany("INSERT INTO _migrations VALUES (?, 0)",
                     [(m.__name__,) for m in migrations.MIGRATIONS[:-1]])
    assert migrate(conn) == ["m007_counters"]
    assert counted(conn) == truth(conn) == (9, 1, 3)
    conn.close()
