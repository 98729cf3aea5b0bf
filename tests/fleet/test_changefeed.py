"""The change feed's SQL against a real PostgreSQL server: triggers, positions that never
skip a row committed out of order, paging, deletes, joining and pruning."""

from __future__ import annotations

import random
import threading
import time

import psycopg
import pytest

from memoryd.fleet import changefeed as cf
from memoryd.store.pg import feed_ddl
from tests.fleet.mirror import Mirror
from tests.helpers import SLOWDOWN


def _insert(conn, schema: str, *contents: str) -> list[int]:
    return [conn.execute(f"INSERT INTO {schema}.units (content) VALUES (%s) RETURNING id",
                         (c,)).fetchone()[0] for c in contents]


def _drain(conn, schema: str, position: cf.Position, limit: int = 2000):
    """Every change after `position`, paging as the follower does."""
    out: list[tuple[int, str]] = []
    seqs: list[int] = []
    while True:
        b = cf.read_batch(conn, schema, position, limit)
        out += b.changes
        seqs += b.seqs
        position = b.position
        if not b.more:
            return out, seqs, position


def test_changefeed_triggers_record_every_write_and_notify_once_per_transaction(feed):
    s = feed.schema
    with feed.connect(autocommit=True) as listener, feed.connect(autocommit=True) as c:
        name = cf.listen_channel(listener, s)  # a random name, not the schema's
        listener.execute(f'LISTEN "{name}"')
        start = cf.join(c, s, "m1")
        with c.transaction():
            a, b = _insert(c, s, "a", "b")
            c.execute(f"INSERT INTO {s}.units (content) VALUES ('c'), ('d')")
            c.execute(f"UPDATE {s}.units SET content = 'A' WHERE id = %s", (a,))
        c.execute(f"UPDATE {s}.units SET content = 'never' WHERE false")  # no rows: no notify
        c.execute(f"DELETE FROM {s}.units WHERE id = %s", (b,))
        c.execute(f"UPDATE {s}.units SET id = 1000 WHERE content = 'c'")  # an id that moves
        changes, _, _ = _drain(c, s, start)
        notes = list(listener.notifies(timeout=5.0 * SLOWDOWN, stop_after=3))
        notes += list(listener.notifies(timeout=0.3))
    ids = dict(zip(["a", "b", "c", "d"], range(a, a + 4), strict=True))
    assert changes == [(ids["a"], "upsert"), (ids["b"], "upsert"), (ids["c"], "upsert"),
                       (ids["d"], "upsert"), (ids["a"], "upsert"), (ids["b"], "delete"),
                       (1000, "upsert"), (ids["c"], "delete")]
    # one transaction with three statements, then two more statements that changed rows
    assert [n.channel for n in notes] == [name, name, name] and name != s


def test_changefeed_ddl_runs_twice(feed):
    with feed.connect(autocommit=True) as c:
        c.execute(feed_ddl.ddl(feed.schema))
        _insert(c, feed.schema, "x")
        assert c.execute(f"SELECT count(*) FROM {feed.schema}.changes").fetchone()[0] == 1


def test_changefeed_schema_names_are_checked():
    with pytest.raises(ValueError, match="schema name"):
        feed_ddl.ddl('memoryd_x"; DROP TABLE units; --')


def test_changefeed_reads_a_row_committed_with_a_lower_seq_after_a_higher_one(feed):
    """The defect the design exists for: seq 1 is handed out first but commits last."""
    s = feed.schema
    with feed.connect() as slow, feed.connect(autocommit=True) as fast, \
            feed.connect(autocommit=True) as reader:
        pos = cf.join(reader, s, "m1")
        (late,) = _insert(slow, s, "slow")       # seq 1, transaction still open
        (early,) = _insert(fast, s, "fast")      # seq 2, committed
        first = cf.read_batch(reader, s, pos)
        assert first.changes == [(early, "upsert")]
        max_seq_read = max(first.seqs)
        slow.commit()
        second = cf.read_batch(reader, s, first.position)
        assert second.changes == [(late, "upsert")]
        assert second.seqs[0] < max_seq_read    # a "seq > last read" reader skips it
        assert cf.read_batch(reader, s, second.position).changes == []


def test_changefeed_pages_a_large_transaction_without_losing_a_row(feed):
    s = feed.schema
    with feed.connect() as w, feed.connect(autocommit=True) as reader:
        pos = cf.join(reader, s, "m1")
        w.execute(f"INSERT INTO {s}.units (content) SELECT 'u' || g FROM generate_series(1, 250) g")
        w.commit()
        pages = 0
        seen: list[int] = []
        while True:
            b = cf.read_batch(reader, s, pos, limit=40)
            pages += 1
            # a commit while paging belongs to the next poll, not this one
            if pages == 2:
                _insert(w, s, "between pages")
                w.commit()
            seen += [u for u, _ in b.changes]
            pos = b.position
            if not b.more:
                break
        assert pages == 7 and len(seen) == 250 == len(set(seen))
        rest, _, _ = _drain(reader, s, pos)
        assert len(rest) == 1


def test_changefeed_deletes_travel(feed):
    s = feed.schema
    with feed.connect(autocommit=True) as c:
        mirror = Mirror(feed)
        pos = cf.join(c, s, "m1")
        ids = _insert(c, s, "keep", "forget me", "and me")
        b = cf.read_batch(c, s, pos)
        mirror.apply(b)
        assert set(mirror.docs) == set(ids)
        c.execute(f"DELETE FROM {s}.units WHERE content LIKE '%%me'")
        b2 = cf.read_batch(c, s, b.position)
        assert sorted(b2.changes) == [(ids[1], "delete"), (ids[2], "delete")]
        mirror.apply(b2)
        assert mirror.docs == {ids[0]: "keep"}
        mirror.close()


def _writer(feed, k: int, txns: int, errors: list[BaseException]) -> None:
    """Transactions of 1-3 inserts, sometimes an update or a delete of an earlier unit,
    held open for a random while so that commits come out of seq order."""
    rng = random.Random(k)
    s = feed.schema
    mine: list[int] = []
    try:
        with feed.connect() as c:
            for t in range(txns):
                mine += _insert(c, s, *(f"w{k}-t{t}-{i}" for i in range(rng.randint(1, 3))))
                if len(mine) > 3 and rng.random() < 0.3:
                    c.execute(f"UPDATE {s}.units SET content = content || '+' WHERE id = %s",
                              (rng.choice(mine),))
                if len(mine) > 3 and rng.random() < 0.2:
                    victim = mine.pop(rng.randrange(len(mine)))
                    c.execute(f"DELETE FROM {s}.units WHERE id = %s", (victim,))
                time.sleep(rng.choice((0, 0.001, 0.01, 0.05, 0.15)))
                c.commit()
    except BaseException as e:  # reported by the test
        errors.append(e)


def test_changefeed_concurrent_writers_and_a_follower_lose_nothing(feed):
    s = feed.schema
    errors: list[BaseException] = []
    writers = [threading.Thread(target=_writer, args=(feed, k, 30, errors)) for k in range(6)]
    mirror = Mirror(feed)
    done = threading.Event()
    polls = late = highest = 0
    with feed.connect(autocommit=True) as reader:
        pos = cf.join(reader, s, "m1")
        for w in writers:
            w.start()
        deadline = time.monotonic() + 120 * SLOWDOWN
        while time.monotonic() < deadline:
            b = cf.read_batch(reader, s, pos, limit=7)  # small pages: paging is tested too
            late += sum(1 for q in b.seqs if q < highest)  # what a max-seq reader skips
            highest = max([highest, *b.seqs])
            mirror.apply(b)
            pos = b.position
            polls += 1
            if not any(w.is_alive() for w in writers) and not b.more:
                if done.is_set():
                    break
                done.set()  # one more full poll after the last commit
            if not b.more:
                time.sleep(0.002)
        all_seqs = {r[0] for r in reader.execute(f"SELECT seq FROM {s}.changes")}
    mirror.close()
    assert not errors
    assert done.is_set()
    assert mirror.docs == feed.units()
    assert set(mirror.seqs) == all_seqs                 # no change row skipped
    assert max(mirror.seqs.values()) == 1               # none read twice
    assert len(all_seqs) > 300 and polls > 20
    assert late > 0  # commits did come out of seq order, and were read


def test_changefeed_join_before_reading_units_misses_nothing(feed):
    """A machine joining while others write: position first, then the build from units,
    then the feed from the position. Everything ends up in its index."""
    s = feed.schema
    with feed.connect(autocommit=True) as c:
        _insert(c, s, *(f"old{i}" for i in range(50)))
    errors: list[BaseException] = []
    writers = [threading.Thread(target=_writer, args=(feed, k, 15, errors)) for k in range(3)]
    for w in writers:
        w.start()
    time.sleep(0.2)
    mirror = Mirror(feed)
    with feed.connect(autocommit=True) as c:
        pos = cf.join(c, s, "newcomer")
        mirror.build(c)
        for w in writers:
            w.join()
        while True:
            b = cf.read_batch(c, s, pos, limit=50)
            mirror.apply(b)
            pos = b.position
            if not b.more:
                break
    mirror.close()
    assert not errors
    assert mirror.docs == feed.units()


def test_changefeed_prune_keeps_what_active_machines_need_and_a_stale_one_rebuilds(feed):
    s = feed.schema
    with feed.connect(autocommit=True) as c:
        a = cf.join(c, s, "a")
        b = cf.join(c, s, "b")
        _insert(c, s, "1", "2", "3")
        a_next = cf.read_batch(c, s, a).position
        cf.report_position(c, s, "a", a_next)
        # b has applied nothing yet: nothing it needs may go
        assert cf.prune(c, s) == 0
        b_batch = cf.read_batch(c, s, b)
        assert len(b_batch.changes) == 3
        cf.report_position(c, s, "b", b_batch.position)
        assert cf.prune(c, s) == 3
        _insert(c, s, "4")
        assert [op for _, op in cf.read_batch(c, s, b_batch.position).changes] == ["upsert"]
        # "a" reported; now "b" goes quiet past the window while "a" moves on
        a2 = cf.read_batch(c, s, a_next).position
        c.execute(f"UPDATE {s}.change_positions SET updated_at = now() - interval '8 days'"
                  " WHERE machine = 'b'")
        cf.report_position(c, s, "a", a2)
        assert cf.prune(c, s) == 1
        with pytest.raises(cf.FeedGapError, match="rebuild"):
            cf.read_batch(c, s, b_batch.position)
        # a rebuild: join again, read units, follow
        fresh = cf.join(c, s, "b")
        assert cf.read_batch(c, s, fresh).changes == []
        assert {p["machine"] for p in cf.positions(c, s)} == {"a", "b"}


def test_changefeed_prune_keeps_what_a_joined_machine_waits_for(feed):
    """A transaction open when a machine joins commits later: prune keeps its rows."""
    s = feed.schema
    with feed.connect() as holder, feed.connect(autocommit=True) as c:
        _insert(c, s, "before")
        open_txn = _insert(holder, s, "in flight")
        joined = cf.join(c, s, "late")
        assert cf.prune(c, s) == 1    # "before": visible to the joined position
        holder.commit()
        got = cf.read_batch(c, s, joined).changes
        assert got == [(open_txn[0], "upsert")]


def test_changefeed_lag_counts_what_a_position_has_not_applied(feed):
    s = feed.schema
    with feed.connect(autocommit=True) as c, feed.connect() as open_txn:
        pos = cf.join(c, s, "m1")
        _insert(c, s, *(f"u{i}" for i in range(5)))
        _insert(open_txn, s, "not committed yet")
        assert cf.lag(c, s, pos) == 5
        page = cf.read_batch(c, s, pos, limit=2)
        assert page.more and cf.lag(c, s, page.position) == 3
        rest, _, end = _drain(c, s, page.position)
        assert len(rest) == 3 and cf.lag(c, s, end) == 0
        open_txn.commit()
        assert cf.lag(c, s, end) == 1


def test_changefeed_position_round_trips_through_json():
    p = cf.Position("10:20:12,15", "10:25:12", 42)
    assert cf.Position.from_json(p.to_json()) == p
    assert p.settled == cf.Position("10:20:12,15")
    with pytest.raises(ValueError, match="position"):
        cf.Position.from_json('{"nope": 1}')


def test_changefeed_read_batch_errors_are_psycopg_errors(feed):
    with feed.connect(autocommit=True) as c, pytest.raises(psycopg.errors.UndefinedTable):
        cf.read_batch(c, "memoryd_nowhere", cf.Position("1:1:"))


def test_changefeed_is_installed_by_the_stores_postgresql_migration(pg_url):
    """The store's migration runs `changefeed.DDL` in every namespace (extra_ddl): the
    triggers write to that namespace's own `changes`, whatever the inserter's path."""
    from memoryd.store.pg.migrations import migrate

    with psycopg.connect(pg_url, autocommit=True) as c:
        migrate(c, "memoryd_team")
        migrate(c, "memoryd_team")  # idempotent
        triggers = {r[0] for r in c.execute(
            "SELECT tgname FROM pg_trigger t JOIN pg_class k ON k.oid = t.tgrelid"
            " JOIN pg_namespace n ON n.oid = k.relnamespace"
            " WHERE n.nspname = 'memoryd_team' AND k.relname = 'units'"
            " AND NOT t.tgisinternal")}
        assert triggers == {"units_changes_insert", "units_changes_update",
                            "units_changes_delete",
                            # m008's status counters (memoryd.store.counters)
                            "counters_units_in", "counters_units_out", "counters_units_set",
                            # m016's units per session-quarter (memoryd.store.unit_quarters)
                            "unit_quarters_in", "unit_quarters_out", "unit_quarters_set",
                            # a changed text drops its stale vector (feed_ddl, m017's twin)
                            "unit_vectors_stale"}
        c.execute("SET search_path TO public")
        assert cf.read_batch(c, "memoryd_team", cf.join(c, "memoryd_team", "m")).changes == []
