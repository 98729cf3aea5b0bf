"""The PostgreSQL engine's own parts: placeholders, the masked URL and scrubbed errors,
where the password may come from, the missing driver, namespaces as schemas, concurrent
and newer-version migrations."""

from __future__ import annotations

import asyncio
import sys
import threading

import psycopg
import pytest

from memoryd.errors import StoreError
from memoryd.daemon.store_index import open_store, open_store_sync
from memoryd.store import Store
from memoryd.store.migrations import MIGRATIONS
from memoryd.store.pg.conn import Row, translate
from memoryd.store.sessions import count_sessions, session_pk
from memoryd.store_target import StoreTarget, masked_url


def test_translate_placeholders_and_leaves_literals_alone():
    assert translate("SELECT ? , ? WHERE a = :now") == "SELECT %s , %s WHERE a = %(now)s"
    assert translate("SELECT '?:x%' || \"q?\" FROM t WHERE x LIKE ? ESCAPE '\\'") == \
        "SELECT '?:x%%' || \"q?\" FROM t WHERE x LIKE %s ESCAPE '\\'"
    assert translate("SELECT 'it''s ?', 5 % 2 -- a ? comment\n, ?") == \
        "SELECT 'it''s ?', 5 %% 2 -- a ? comment\n, %s"
    assert translate("SELECT x::text") == "SELECT x::text"
    with pytest.raises(ValueError, match=":name"):
        translate("SELECT ?1")


def test_row_reads_like_sqlite_row():
    r = Row((1, "a"), {"id": 0, "name": 1})
    assert r[0] == 1 and r["name"] == "a" and dict(r) == {"id": 1, "name": "a"}
    pk, name = r
    assert (pk, name) == (1, "a")


def test_masked_url_hides_every_password():
    url = "postgresql://ann:s%40cret@db.example:5432/mem?sslmode=require&password=other"
    m = masked_url(url)
    assert "cret" not in m and "other" not in m
    assert m.startswith("postgresql://ann:***@db.example:5432/mem?sslmode=require")
    assert masked_url("postgresql://ann@db/mem") == "postgresql://ann@db/mem"
    assert masked_url("") == "sqlite"
    t = StoreTarget(url=url)
    scrubbed = t.scrub(f"failed for {url}: password s@cret and s%40cret rejected")
    assert "cret" not in scrubbed and "other" not in scrubbed


async def test_missing_driver_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    with pytest.raises(StoreError, match=r"memoryd\[postgres\]"):
        await open_store(tmp_path / "memoryd.db",
                         target=StoreTarget(url="postgresql://u:pw@127.0.0.1:1/x"))


async def test_wrong_password_error_shows_no_password(tmp_path, pg_server, pg_url):
    secret = "Wr0ng-pa55word-xyz"
    url = pg_url.replace(pg_server.password, secret)
    with pytest.raises(StoreError) as e:
        await open_store(tmp_path / "memoryd.db", target=StoreTarget(url=url))
    msg = str(e.value)
    assert "password authentication failed" in msg and "***" in msg
    assert secret not in msg and pg_server.password not in msg


def _without_password(url: str, password: str) -> str:
    from urllib.parse import quote

    return url.replace(":" + quote(password, safe="") + "@", "@")


async def test_password_from_file_pgpassword_or_pgpass(tmp_path, pg_server, pg_url,
                                                       monkeypatch, memoryd_home):
    bare = _without_password(pg_url, pg_server.password)
    assert pg_server.password not in bare
    pw = tmp_path / "pw"
    pw.write_text(pg_server.password + "\n")
    s = await open_store(tmp_path / "a" / "memoryd.db",
                         target=StoreTarget(url=bare, password_file=pw))
    assert await s.read(count_sessions) == 0
    await s.close()
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    s = await open_store(tmp_path / "b" / "memoryd.db", target=StoreTarget(url=bare))
    await s.close()
    monkeypatch.delenv("PGPASSWORD")
    pgpass = memoryd_home / "userhome" / ".pgpass"
    pgpass.write_text(f"127.0.0.1:{pg_server.port}:*:*:{pg_server.password}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))  # libpq's own default is ~/.pgpass
    s = await open_store(tmp_path / "c" / "memoryd.db", target=StoreTarget(url=bare))
    await s.close()


async def test_namespaces_are_separate_schemas(tmp_path, pg_url):
    a = await open_store(tmp_path / "a" / "memoryd.db",
                         target=StoreTarget(url=pg_url, namespace="team_a"))
    b = await open_store(tmp_path / "b" / "memoryd.db",
                         target=StoreTarget(url=pg_url, namespace="team_b"))
    try:
        await a.write(lambda c: session_pk(c, "codex", "only-in-a"))
        assert await a.read(count_sessions) == 1
        assert await b.read(count_sessions) == 0
    finally:
        await a.close()
        await b.close()
    with psycopg.connect(pg_url) as conn:
        schemas = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace")}
    assert {"memoryd_team_a", "memoryd_team_b"} <= schemas


async def test_newer_schema_is_refused(open_store, engine):
    s = await open_store()
    await s.write(lambda c: c.execute(
        "INSERT INTO _migrations (name, applied_at) VALUES ('m999_from_a_newer_memoryd', 0)"))
    await s.close()
    with pytest.raises(StoreError, match="newer memoryd.*m999_from_a_newer_memoryd"):
        await open_store()


def test_two_daemons_migrate_a_fresh_namespace_at_once(tmp_path, pg_url):
    target = StoreTarget(url=pg_url, namespace="race")
    errors: list[BaseException] = []
    stores: list[Store] = []

    def open_one(i: int) -> None:
        try:
            stores.append(open_store_sync(tmp_path / f"d{i}" / "memoryd.db", target=target))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        names = stores[0].read_sync(lambda c: [r[0] for r in c.execute(
            "SELECT name FROM _migrations ORDER BY name")])
        assert names == sorted(m.__name__ for m in MIGRATIONS)
    finally:
        for s in stores:
            s.close_sync()


async def test_pg_reads_see_one_snapshot_and_writes_are_one_transaction(tmp_path, pg_url):
    s = await open_store(tmp_path / "memoryd.db", target=StoreTarget(url=pg_url))
    try:
        started, go = asyncio.Event(), threading.Event()
        loop = asyncio.get_running_loop()

        def read_twice(c):
            first = count_sessions(c)
            loop.call_soon_threadsafe(started.set)
            go.wait(30)
            return first, count_sessions(c)

        reading = asyncio.ensure_future(s.read(read_twice))
        await started.wait()
        await s.write(lambda c: session_pk(c, "codex", "new"))
        go.set()
        assert await reading == (0, 0)  # one snapshot per read, as in SQLite
        assert await s.read(count_sessions) == 1
    finally:
        await s.close()


def test_a_second_daemon_starts_while_the_first_holds_a_write_on_units(tmp_path, pg_url):
    """The change feed's triggers are installed once per version, not at every start:
    reinstalling them while another daemon's ingest held `units` deadlocked with it."""
    target = StoreTarget(url=pg_url, namespace="busy")
    first = open_store_sync(tmp_path / "a" / "memoryd.db", target=target)
    second: list[Store] = []
    with psycopg.connect(pg_url) as ingest:
        ingest.execute('LOCK TABLE "memoryd_busy".units IN ROW EXCLUSIVE MODE')  # mid-batch
        opener = threading.Thread(target=lambda: second.append(
            open_store_sync(tmp_path / "b" / "memoryd.db", target=target)), daemon=True)
        opener.start()
        opener.join(30)
        started = bool(second)
        ingest.rollback()
    opener.join(30)
    try:
        assert started, "the second daemon waited on the first one's open write"
        assert first.read_sync(lambda c: c.execute(
            "SELECT count(*) FROM _extra_ddl").fetchone()[0]) == 1
        assert first.read_sync(lambda c: c.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'units_changes_%'"
        ).fetchone()[0]) == 3
    finally:
        for s in [first, *second]:
            s.close_sync()


async def test_issue_14_a_daemon_starts_while_another_holds_the_schema_lock(
        tmp_path, pg_url, memoryd_home):
    """With the schema current, a starting daemon reads that without the migration lock:
    a fleet's daemons do not queue behind each other (or behind one that holds the lock)
    to learn there is nothing to migrate. A schema that needs work still waits for it."""
    from memoryd.daemon import Daemon
    from memoryd.paths import resolve_paths
    from memoryd.store.pg import migrations as pg_migrations
    from tests.fleet.daemons import fleet_settings
    from tests.helpers import short_dir

    open_store_sync(tmp_path / "first" / "memoryd.db",
                    target=StoreTarget(url=pg_url, namespace="team")).close_sync()
    with short_dir() as d, psycopg.connect(pg_url) as holder:
        # the migration lock: the namespace's own `_migrations` table (issue 28 item 6)
        holder.execute("LOCK TABLE memoryd_team._migrations IN SHARE ROW EXCLUSIVE MODE")
        root = tmp_path / "src"
        root.mkdir()
        dm = Daemon(fleet_settings(root, d / "b.sock", pg_url, "b"),
                    resolve_paths(tmp_path / "b"), environ={})
        start = asyncio.ensure_future(dm.start())
        await asyncio.wait({start}, timeout=20)
        started = start.done()
        # a schema one migration behind waits for the lock, and migrates once it has it
        def migrate_next() -> None:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                pg_migrations.migrate(conn, "memoryd_team",
                                      known=[*pg_migrations.NAMES, "m999_next"])

        behind = threading.Thread(target=migrate_next, daemon=True)
        pg_migrations.DDL["m999_next"] = "CREATE TABLE next_one (x int)"
        try:
            behind.start()
            behind.join(1.0)
            waited = behind.is_alive()
        finally:
            holder.rollback()  # lets go of the lock
            behind.join(30)
            del pg_migrations.DDL["m999_next"]
        await start
        await dm.stop()
    assert started, "the daemon waited for the schema lock with nothing to migrate"
    assert waited, "a migration ran without the lock"
    with psycopg.connect(pg_url) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM memoryd_team._migrations ORDER BY name")]
    assert names[-1] == "m999_next"


def test_a_vector_saved_while_its_unit_is_forgotten_is_skipped(tmp_path, pg_url):
    """A forget commits while the embedding worker saves a vector of one of its units:
    the save waited on the unit's row and finds it gone, so that vector is skipped and
    the batch's others are saved. Before, the foreign key failed the whole batch (logged
    as an error, retried 30 s later)."""
    from memoryd.models import Record
    from memoryd.store import vectors
    from memoryd.store.units import store_record

    s = open_store_sync(tmp_path / "memoryd.db", target=StoreTarget(url=pg_url))
    try:
        def put(c):
            pk = session_pk(c, "generic", "s1", project="/p")
            for i in range(2):
                store_record(c, pk, Record("user", f"words {i}", ts=1.0 + i), f"r{i}",
                             None, 0)
            return [r[0] for r in c.execute("SELECT id FROM units ORDER BY id")]

        gone, kept = s.write_sync(put)
        saved: list[int] = []
        with psycopg.connect(pg_url) as forget, psycopg.connect(pg_url) as look:
            forget.execute("SET search_path TO memoryd_default")
            forget.execute("DELETE FROM units WHERE id = %s", (gone,))  # not committed yet
            t = threading.Thread(target=lambda: saved.append(s.write_sync(
                lambda c: vectors.save(c, [(gone, bytes(384)), (kept, bytes(384))]))))
            t.start()
            for _ in range(3000):  # until the save waits on the forget's lock (30 s at most)
                if look.execute("SELECT count(*) FROM pg_stat_activity "
                                "WHERE wait_event_type = 'Lock'").fetchone()[0]:
                    break
                look.rollback()
                threading.Event().wait(0.01)
            else:
                raise AssertionError("the save never waited on the forget")
            forget.commit()
            t.join(30)
        assert saved == [1]
        assert s.read_sync(lambda c: sorted(vectors.vectors_of(c, [gone, kept]))) == [kept]
    finally:
        s.close_sync()
