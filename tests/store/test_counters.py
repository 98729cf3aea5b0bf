"""Status counts come from counters the triggers keep (m009), never from a scan, on both
engines: after every kind of change they equal what a `count(*)` over the tables says."""

from __future__ import annotations

import sqlite3
import time

import psycopg

from memoryd.models import Record
from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.redact import Redactor
from memoryd.store import archive, files, jobs, sessions, summaries, units
from memoryd.store.pg import migrations as pg_migrations
from memoryd.store.counters import fold_pg, read_counters
from memoryd.store.migrations import MIGRATIONS, migrate
from tests.helpers import write_jsonl


def truth(c) -> dict:
    one = lambda sql: c.execute(sql).fetchone()[0]  # noqa: E731
    return {
        "units": one("SELECT count(*) FROM units"),
        "sessions": one("SELECT count(*) FROM sessions"),
        "extractive_one_liners": one(
            "SELECT count(*) FROM units WHERE one_liner_by = 'extractive'"),
        "summaries_by": {r[0]: r[1] for r in c.execute(
            "SELECT summary_by, count(*) FROM sessions WHERE summary_by IS NOT NULL "
            "GROUP BY 1")},
        "files": one("SELECT count(*) FROM files WHERE agent IS NOT NULL AND gone = 0"),
        "ignored_files": one("SELECT count(*) FROM files WHERE agent IS NULL AND gone = 0"),
        "bad_lines": one("SELECT coalesce(sum(bad_lines), 0) FROM files"),
        "jobs": {s: one(f"SELECT count(*) FROM jobs WHERE state = '{s}'")
                 for s in jobs.STATES},
    }


def counted(c) -> dict:
    art = summaries.artifact_counts(c)
    jc = jobs.job_counts(c)
    return {"units": units.count_units(c), "sessions": sessions.count_sessions(c),
            "extractive_one_liners": art["extractive_one_liners"],
            "summaries_by": art["summaries_by"], **files.file_stats(c),
            "jobs": {s: jc[s] for s in jobs.STATES}}


def fill(c, sid: str, n: int) -> int:
    pk = sessions.session_pk(c, "generic", sid, project="/p")
    for i in range(n):
        units.store_record(c, pk, Record(role="user" if i % 2 == 0 else "assistant",
                                         content=f"{sid} line {i} 中文", ),
                           f"{sid}-{i}", None, None)
    return pk


async def same(store) -> dict:
    t = await store.read(truth)
    assert await store.read(counted) == t
    return t


async def test_counters_equal_real_counts_after_ingest_forget_archive_jobs(store, tmp_path):
    # ingest through the real ingestor: transcripts, an ignored file, a bad line
    root = tmp_path / "src"
    write_jsonl(root / "a.jsonl", [{"role": "user", "content": f"a {i}", "id": f"a{i}"}
                                   for i in range(7)])
    (root / "b.jsonl").write_text('{"role": "user", "content": "b", "id": "b0"}\n{oops\n'
                                  '{"role": "assistant", "content": "b1", "id": "b1"}\n')
    (root / "notes.txt").write_text("not a transcript\n")
    ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
    for p in sorted(root.iterdir()):
        await ing.ingest_file(p, root, "auto")
        await ing.ingest_file(p, root, "auto")  # a second read stores nothing
    t = await same(store)
    assert (t["units"], t["sessions"], t["bad_lines"]) == (9, 2, 1)
    assert t["ignored_files"] == 1 and t["files"] == 2

    a = await store.write(lambda c: fill(c, "x", 6))
    b = await store.write(lambda c: fill(c, "y", 4))
    ids = await store.read(lambda c: [r[0] for r in c.execute(
        "SELECT id FROM units WHERE session_pk = ? ORDER BY id", (a,))])
    # one-liners: four extractive, then an upgrade replaces two
    await store.write(lambda c: summaries.save_one_liners(
        c, [(u, "short", summaries.EXTRACTIVE, "v1") for u in ids[:4]]))
    await store.write(lambda c: summaries.save_one_liners(
        c, [(u, "better", "model", "v1") for u in ids[:2]], only_if_by=summaries.EXTRACTIVE))
    await store.write(lambda c: summaries.save_summary(
        c, a, summary="s", from_seq=1, upto=3, made_by="extractive", prompt_version="v1",
        reason=None, now=time.time()))
    await store.write(lambda c: summaries.save_summary(
        c, b, summary="s", from_seq=1, upto=3, made_by="model", prompt_version="v1",
        reason=None, now=time.time()))
    t = await same(store)
    assert t["extractive_one_liners"] == 2
    assert t["summaries_by"] == {"extractive": 1, "model": 1}

    # forget some units, then a whole session
    await store.write(lambda c: sessions.forget_units(c, ids[3:5]))
    await same(store)
    await store.write(lambda c: sessions.forget_session(c, b))
    t = await same(store)
    assert t["sessions"] == 3

    # retention archives a session's units, a restore brings them back
    rows = await store.read(lambda c: archive.session_units(c, a))
    await store.write(lambda c: archive.mark_archived(c, a, "2026-11"))
    assert (await same(store))["units"] == 9
    await store.write(lambda c: archive.restore_units(c, a, rows))
    assert (await same(store))["units"] == 13

    # a file goes away; jobs go through their states and are pruned
    await ing.file_gone(root / "a.jsonl")
    now = time.time()
    for i in range(3):
        await store.write(lambda c, i=i: jobs.enqueue_job(
            c, "summarize", f"t{i}", params={}, reason=None, run_at=now, now=now))
    await store.write(lambda c: jobs.enqueue_job(  # merged into the pending one
        c, "summarize", "t0", params={"x": 1}, reason=None, run_at=now, now=now))
    j1 = await store.write(lambda c: jobs.claim_job(c, now + 1))
    j2 = await store.write(lambda c: jobs.claim_job(c, now + 1))
    await store.write(lambda c: jobs.finish_job(c, j1.id, {}, now + 2))
    await store.write(lambda c: jobs.fail_job(c, j2.id, "boom", now + 2))
    t = await same(store)
    assert t["files"] == 1 and t["jobs"] == {"pending": 1, "running": 0, "done": 1,
                                             "failed": 1}
    await store.write(lambda c: jobs.prune_jobs(c, now + 10))
    assert (await same(store))["jobs"]["done"] == 0


def test_counters_start_from_an_existing_sqlite_database(tmp_path):
    """m009 on a database that already holds units counts them once."""
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    before = [m.__name__ for m in MIGRATIONS].index("m009_counters")
    for m in MIGRATIONS[:before]:  # a database from before the counters
        conn.execute("BEGIN")
        m(conn)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (m.__name__,))
        conn.execute("COMMIT")
    conn.execute("BEGIN")
    fill(conn, "old", 9)
    conn.execute("UPDATE units SET one_liner_by = 'extractive' WHERE seq <= 3")
    conn.execute("COMMIT")
    assert migrate(conn) == [m.__name__ for m in MIGRATIONS[before:]]
    t = truth(conn)
    assert counted(conn) == t and (t["units"], t["sessions"], t["extractive_one_liners"]) == (
        9, 1, 3)
    conn.close()


def test_counters_start_from_an_existing_postgresql_schema_and_fold(pg_url):
    """The PostgreSQL twin: m009 on a schema holding units counts them once; each
    connection then adds to rows of its own, folded into one when it is gone."""
    from memoryd.store.pg.conn import PgConn, _configure

    with psycopg.connect(pg_url, autocommit=True) as raw:
        before = pg_migrations.NAMES.index("m009_counters")
        assert pg_migrations.migrate(raw, "memoryd_old", known=pg_migrations.NAMES[:before])
        _configure(raw, "memoryd_old")
        raw.autocommit = False
        conn = PgConn(raw)
        fill(conn, "old", 9)
        conn.execute("UPDATE units SET one_liner_by = 'extractive' WHERE seq <= 3")
        conn.commit()
        raw.autocommit = True
        assert pg_migrations.migrate(raw, "memoryd_old") == pg_migrations.NAMES[before:]
        t = truth(conn)
        assert counted(conn) == t and t["units"] == 9 and t["extractive_one_liners"] == 3
    for n in range(3):  # three connections come and go, each writing its own rows
        with psycopg.connect(pg_url) as raw:
            _configure(raw, "memoryd_old")
            fill(PgConn(raw), f"s{n}", 2)
    with psycopg.connect(pg_url, autocommit=True) as raw:
        _configure(raw, "memoryd_old")
        conn = PgConn(raw)
        assert conn.execute("SELECT count(DISTINCT slot) FROM counters").fetchone()[0] == 4
        fold_pg(conn)
        assert conn.execute("SELECT count(DISTINCT slot) FROM counters").fetchone()[0] == 1
        assert read_counters(conn)["units"] == 15 == truth(conn)["units"]
        assert counted(conn) == truth(conn)
