"""Side channels between a fleet's namespaces (issue 28 item 6), against the real
PostgreSQL server: LISTEN, NOTIFY and advisory locks take no privilege, so what a
namespace's followers listen on and what its migrations lock must be things only roles
that may use its schema can reach; and a flood of notifications costs a follower at most
one poll per `NOTIFY_GAP_S`, not one per notification."""

from __future__ import annotations

import secrets
import threading
import time

import psycopg
import pytest

from memoryd.fleet import changefeed as cf
from memoryd.fleet.follower import Follower
from memoryd.store.pg import migrations as pg_migrations
from tests.fleet.feed import Feed


@pytest.fixture
def teams(pg_server, pg_url):
    """Two namespaces' roles as docs/fleet.md sets them up: (url of team a's role,
    url of team b's role); b's schema migrated by b."""
    db = pg_url.rsplit("/", 1)[1]
    tag = secrets.token_hex(3)
    roles = {ns: (f"memoryd_{ns}_{tag}", secrets.token_urlsafe(9)) for ns in ("ta", "tb")}
    pg_server.psql(f'REVOKE ALL ON DATABASE "{db}" FROM PUBLIC', db)
    pg_server.psql("REVOKE CREATE ON SCHEMA public FROM PUBLIC", db)
    for ns, (role, pw) in roles.items():
        pg_server.psql(f"CREATE ROLE {role} LOGIN PASSWORD '{pw}'", db)
        pg_server.psql(f'GRANT CONNECT ON DATABASE "{db}" TO {role}', db)
        pg_server.psql(f"CREATE SCHEMA memoryd_{ns} AUTHORIZATION {role}", db)
    try:
        yield {ns: pg_server.url(db, user=role, password=pw)
               for ns, (role, pw) in roles.items()}
    finally:
        pg_server.drop_database(db)
        for role, _ in roles.values():
            pg_server.psql(f"DROP ROLE IF EXISTS {role}")


def test_issue_28_another_namespace_cannot_hold_the_migration_lock(teams):
    with psycopg.connect(teams["ta"], autocommit=True) as a:
        # what the lock used to be: a number any role may lock (and pg_locks shows)
        a.execute("SELECT pg_advisory_lock(hashtext('memoryd:memoryd_tb'))")
        with psycopg.connect(teams["tb"], autocommit=True) as b:
            b.execute("SET lock_timeout = '20s'")  # a failure ends, it does not hang
            assert "m001_initial" in pg_migrations.migrate(b, "memoryd_tb")
        # the lock now is b's own table, which a's role may not touch
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            a.execute("BEGIN")
            a.execute("LOCK TABLE memoryd_tb._migrations IN SHARE ROW EXCLUSIVE MODE")
        a.execute("ROLLBACK")


def test_issue_28_another_namespace_can_neither_learn_nor_wake_a_followers_channel(teams):
    with psycopg.connect(teams["tb"], autocommit=True) as b:
        pg_migrations.migrate(b, "memoryd_tb")
        pos = cf.join(b, "memoryd_tb", "m1")
    f = Follower(teams["tb"], "memoryd_tb", "m1", pos, poll_interval_s=600)
    try:
        f.commit(f.next_batch())  # listening from here on
        assert f.status()["listening"]
        with psycopg.connect(teams["ta"], autocommit=True) as a:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                a.execute("SELECT name FROM memoryd_tb.change_channel")
            for _ in range(200):  # the channel anyone could guess: the schema's name
                a.execute("NOTIFY memoryd_tb")
        assert f.wait(timeout=1.0) is False and f.wakeups == 0
    finally:
        f.close()


def test_issue_28_a_notify_flood_costs_a_follower_one_poll_per_gap(feed: Feed):
    """Even a role that knows the channel (a namespace's own) cannot make a follower
    poll once per notification: 5,000 NOTIFYs, each its own transaction."""
    with feed.connect(autocommit=True) as c:
        pos = cf.join(c, feed.schema, "m1")
        name = cf.listen_channel(c, feed.schema)
    f = Follower(feed.url, feed.schema, "m1", pos, poll_interval_s=600, notify_gap_s=0.5)
    sent = threading.Event()

    def flood() -> None:
        with feed.connect(autocommit=True) as c:
            for _ in range(5_000):
                c.execute(f'NOTIFY "{name}"')
        sent.set()

    try:
        f.commit(f.next_batch())
        polls = f.polls
        t0 = time.monotonic()
        t = threading.Thread(target=flood)
        t.start()
        while not sent.is_set():
            if f.wait(timeout=0.5):
                f.commit(f.next_batch())
        elapsed = time.monotonic() - t0
        t.join()
        # one poll per gap at most (and one for the wake-up that started it)
        assert f.wakeups > 0
        assert f.polls - polls <= elapsed / 0.5 + 2, (f.polls - polls, elapsed)
    finally:
        f.close()
