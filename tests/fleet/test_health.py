"""`Health`: scrubbed errors, backoff with jitter and a cap, one log line down and one
back. (The same against a real server stopped and started: test_follower.py.)"""

from __future__ import annotations

import logging
import threading
import time

import psycopg
import pytest

from memoryd.errors import StoreUnavailableError
from memoryd.store.health import Health, scrub
from memoryd.store.pg.conn import PgRunner
from memoryd.store_target import StoreTarget


@pytest.mark.parametrize(("text", "secret"), [
    ("postgresql://memoryd:s3cr%40t@db.example:5432/m", "s3cr%40t"),
    ("postgres://u:raw@pass@10.0.0.1/x failed", "raw@pass"),
    ("connection to 'host=db user=m password=hunter2 dbname=m' failed", "hunter2"),
    ("host=db PASSWORD = 'two words' sslmode=require", "two words"),
    ("dsn: postgresql://m:p%2Fq@h/db?sslmode=require and password=x9 too", "p%2Fq"),
])
def test_health_scrub_masks_passwords(text, secret):
    out = scrub(text)
    assert secret not in out and "***" in out


def test_health_scrub_keeps_what_is_not_a_password():
    s = "postgresql://memoryd@db:5432/m (no password) https://example.com/a:b@c"
    assert scrub("postgresql://memoryd@db:5432/m") == "postgresql://memoryd@db:5432/m"
    assert "memoryd@db" in scrub(s)


def test_health_backoff_grows_with_jitter_up_to_the_cap():
    lo = Health(base_s=0.5, cap_s=8.0, rng=lambda: 0.0)
    hi = Health(base_s=0.5, cap_s=8.0, rng=lambda: 1.0)
    lows = [lo.failed("down") for _ in range(8)]
    highs = [hi.failed("down") for _ in range(8)]
    assert highs == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]
    assert lows == [h / 2 for h in highs]          # never below half the step
    assert lo.delay() == 4.0
    lo.ok()
    assert lo.delay() == 0.0 and lo.failures == 0


def test_health_logs_once_down_and_once_back(caplog):
    caplog.set_level(logging.DEBUG, logger="memoryd.store.health")
    h = Health("store")
    url = "postgresql://m:hunter2@127.0.0.1:1/m"
    for _ in range(50):
        h.failed(psycopg.OperationalError(f"connection to {url} failed:\n  refused"))
    st = h.status()
    assert st["reachable"] is False and st["unreachable_since"] and st["failures"] == 50
    assert "hunter2" not in st["last_error"] and "refused" in st["last_error"]
    h.ok()
    h.ok()
    loud = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.levelname for r in loud] == ["WARNING", "INFO"]
    assert "store unreachable: OperationalError" in loud[0].getMessage()
    assert "reachable again" in loud[1].getMessage()
    assert "hunter2" not in caplog.text
    assert h.status() == {"reachable": True, "unreachable_since": None, "last_error": None,
                          "failures": 0, "down_s": 0.0}


def test_health_takes_the_store_masking_function():
    h = Health(mask=lambda s: s.replace("secret-host", "<host>"))
    h.failed("cannot reach secret-host")
    assert h.status()["last_error"] == "cannot reach <host>"


def test_health_attempts_are_due_only_after_the_backoff():
    now = [100.0]
    h = Health(base_s=1.0, cap_s=8.0, rng=lambda: 1.0, clock=lambda: now[0])
    assert h.due() and h.down_for() == 0.0
    assert h.failed("down") == 1.0
    assert not h.due()
    now[0] += 0.99
    assert not h.due()
    now[0] += 0.02
    assert h.due() and h.down_for() == pytest.approx(1.01)
    assert h.failed("down") == 2.0 and not h.due()
    h.ok()
    assert h.due() and h.status()["down_s"] == 0.0


def test_health_a_connection_from_before_the_outage_does_not_bring_it_back():
    h = Health("store", rng=lambda: 0.0)
    born = h.outages
    h.failed("the database system is shutting down")
    h.ok(born)  # a round trip on a connection begun before the outage was seen
    assert h.reachable is False and h.failures == 1
    h.ok(h.outages)  # one begun since
    assert h.reachable is True
    h.ok(born)  # while up, any success is just a success
    assert h.reachable is True and h.failures == 0


def test_issue_14_a_reply_read_after_the_outage_was_seen_does_not_flap_the_status(
        pg_url, caplog):
    """`pg_ctl -m fast` ends the server's backends one by one: one thread's connection
    is gone (the outage is seen) while another thread's round trip, begun before, still
    commits and reports success after. That success said "reachable again", and the
    next failure "unreachable" again: the status flapped. Here the first backend is
    ended as the shutdown ends it (SIGTERM, pg_terminate_backend); the other thread's
    round trip completes after: the store stays down until a connection made since
    works, and the log has one line down and one back."""
    caplog.set_level(logging.DEBUG, logger="memoryd.store.health")
    health = Health("store", base_s=0.05, cap_s=0.1)
    target = StoreTarget(url=pg_url, namespace="flap")
    writer, reader = PgRunner(target, True, health), PgRunner(target, False, health)
    try:
        pid = writer.run(lambda c: c.execute("SELECT pg_backend_pid()").fetchone()[0])
        inside, go = threading.Event(), threading.Event()
        got: list[int] = []

        def long_read(c):
            n = c.execute("SELECT 41 + 1").fetchone()[0]
            inside.set()
            go.wait(30)
            return n

        t = threading.Thread(target=lambda: got.append(reader.run(long_read)))
        t.start()
        assert inside.wait(30)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s, 10000)",
                                 (pid,)).fetchone()[0]
        with pytest.raises(StoreUnavailableError):
            writer.run(lambda c: c.execute("SELECT 1"))
        assert health.reachable is False
        go.set()
        t.join(30)
        assert got == [42]  # it worked, on a connection from before the outage...
        assert health.reachable is False  # ...which says nothing about the outage
        deadline = time.monotonic() + 30
        while not health.due() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert writer.run(lambda c: c.execute("SELECT 1").fetchone()[0]) == 1
        assert health.reachable is True  # a connection made since: back
    finally:
        go.set()
        writer.close()
        reader.close()
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(loud) == 2 and "store unreachable" in loud[0], loud
    assert "reachable again" in loud[1]


def test_the_feed_indexer_takes_its_old_connections_error_after_a_recovery_as_no_outage(
        tmp_path, pg_url):
    """An outage seen and over (another thread's connection failed, a new one worked)
    while the feed indexer held its connection: that connection, dropped by the server
    then, fails on its next use after the recovery. It is the old outage's echo: the
    indexer connects again and goes on; the store does not turn unreachable again."""
    from tests.fleet.test_follow_index import (
        caught,
        indexed_ids,
        insert_units,
        open_store,
        session,
        until,
    )

    b = open_store(tmp_path, pg_url, "b")
    try:
        until(lambda: caught(b), 30, "b's index is ready")
        health = b.index.health
        health.failed("seen on another thread's connection")
        health.ok()  # ...and a connection made since worked
        assert (health.reachable, health.outages) == (True, 1)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
                "WHERE application_name = 'memoryd@b'").fetchone()[0]
        assert ended >= 1
        with psycopg.connect(pg_url) as conn:  # a change wakes the indexer: its next use
            pk = session(conn, "echo", machine="a")
            (unit,) = insert_units(conn, pk, ["the echo of an old outage"])
        until(lambda: unit in indexed_ids(b), 30, "the indexer connected again")
        assert (health.reachable, health.outages) == (True, 1)
    finally:
        b.close_sync()
