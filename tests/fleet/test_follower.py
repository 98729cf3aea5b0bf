"""`Follower` against a real PostgreSQL server: NOTIFY wakes it, the poll carries on
without LISTEN, a lost listener comes back, and a database stopped during writes costs
nothing once it is started again (and logs two lines, not one per attempt)."""

from __future__ import annotations

import logging
import threading
import time

import psycopg
import pytest

from memoryd.fleet import changefeed as cf
from memoryd.fleet.follower import Follower
from memoryd.store.health import Health
from tests.fleet.feed import Feed, create_feed
from tests.fleet.mirror import Mirror
from tests.helpers import SLOWDOWN
from tests.pg_server import free_port


def _insert(feed: Feed, *contents: str) -> None:
    with feed.connect(autocommit=True) as c:
        for content in contents:
            c.execute(f"INSERT INTO {feed.schema}.units (content) VALUES (%s)", (content,))


def _until(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout * SLOWDOWN
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout * SLOWDOWN:.0f} s: {what}")
        time.sleep(0.05)


class Running:
    """A follower's `follow` loop on a thread, applying into a Mirror."""

    def __init__(self, follower: Follower, mirror: Mirror) -> None:
        self.follower, self.mirror = follower, mirror
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="test-follower")

    def _run(self) -> None:
        try:
            self.follower.follow(self.mirror.apply, self.stop)
        except BaseException as e:  # the test reports it
            self.error = e

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        self.follower.close()
        self.mirror.close()
        assert not self.thread.is_alive()
        assert self.error is None, self.error


def _follower(feed: Feed, machine: str = "m1", **kw) -> Follower:
    with feed.connect(autocommit=True) as c:
        pos = cf.join(c, feed.schema, machine)
    return Follower(feed.url, feed.schema, machine, pos, **kw)


def test_follower_notify_wakes_it_long_before_the_poll_interval(feed):
    f = _follower(feed, poll_interval_s=600)
    try:
        f.commit(f.next_batch())  # listening from here on
        t = threading.Timer(0.3, _insert, (feed, "wake up"))
        t.start()
        started = time.monotonic()
        assert f.wait() is True
        waited = time.monotonic() - started
        t.join()
        b = f.next_batch()
        assert [op for _, op in b.changes] == ["upsert"]
        assert waited < 60  # a tenth of the interval at most: it was the NOTIFY
        f.commit(b)
        assert f.wait(timeout=0.3) is False  # nothing new: the interval runs out
    finally:
        f.close()


def _switches(tid: int) -> int:
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


@pytest.mark.skipif(not hasattr(threading, "get_native_id") or
                    not __import__("os").path.exists("/proc/self/task"),
                    reason="counts the thread's wake-ups in /proc (Linux)")
def test_a_listening_wait_sleeps_until_a_notify_instead_of_waking_ten_times_a_second(feed):
    """psycopg's own `notifies(timeout=…)` waits in 0.1 s steps: an idle fleet member's
    indexer thread woke ~10 times a second for nothing. The follower waits on the
    socket itself: woken by the NOTIFY, otherwise only by its stop-flag slices
    (WAIT_SLICE_S); and a notification that arrived with an earlier command is not
    missed."""
    f = _follower(feed, poll_interval_s=600)
    try:
        f.commit(f.next_batch())  # listening from here on
        got: dict[str, object] = {}

        def wait() -> None:
            tid = threading.get_native_id()
            before = _switches(tid)
            got["woken"] = f.wait(timeout=2.0)
            got["switches"] = _switches(tid) - before

        t = threading.Thread(target=wait)
        t.start()
        t.join(30)
        assert got["woken"] is False
        # 4 slices of 0.5 s: about 4 wake-ups (was ~20); room for a scheduler's extra few
        assert got["switches"] <= 10, got
        # a NOTIFY that came while the listener was not waiting is found at once
        _insert(feed, "while nobody waited")
        time.sleep(0.3)
        started = time.monotonic()
        assert f.wait(timeout=5.0) is True
        assert time.monotonic() - started < 2.5
        b = f.next_batch()
        assert [op for _, op in b.changes] == ["upsert"]
        f.commit(b)
        assert f.wait(timeout=0.2) is False  # swallowed with it: nothing left
    finally:
        f.close()


def test_follower_polls_on_when_it_cannot_listen(feed, caplog):
    caplog.set_level(logging.INFO, logger="memoryd.fleet")
    nowhere = feed.url.rsplit("@", 1)[0] + f"@127.0.0.1:{free_port()}/postgres"
    f = _follower(feed, poll_interval_s=0.2, listen_url=nowhere)
    mirror = Mirror(feed)
    with Running(f, mirror):
        for i in range(5):
            _insert(feed, f"polled {i}")
            time.sleep(0.1)
        _until(lambda: mirror.docs == feed.units() and len(mirror.docs) == 5, 30,
               "the poll catching up without LISTEN")
    assert f.wakeups == 0
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("memoryd.fleet")]
    assert len([m for m in lines if "cannot LISTEN" in m]) == 1, lines


def test_follower_gets_its_listener_back_after_losing_it(feed, caplog):
    caplog.set_level(logging.INFO, logger="memoryd.fleet")
    f = _follower(feed, poll_interval_s=600)
    mirror = Mirror(feed)
    with Running(f, mirror), feed.connect(autocommit=True) as admin:
        def listeners() -> list[int]:
            return [r[0] for r in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'"
                " AND application_name LIKE 'memoryd-follower%%'")]
        _until(lambda: len(listeners()) == 1, 30, "the follower listening")
        (old,) = listeners()
        admin.execute("SELECT pg_terminate_backend(%s)", (old,))
        _until(lambda: listeners() not in ([], [old]), 30, "a new listening connection")
        _insert(feed, "after the loss")
        _until(lambda: len(mirror.docs) == 1, 30, "a NOTIFY on the new listener")
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("memoryd.fleet")]
    assert len([m for m in lines if "listening connection was lost" in m]) == 1, lines
    assert len([m for m in lines if "listening again" in m]) == 1, lines


def _writer(feed: Feed, n: int, written: list[str], stop: threading.Event) -> None:
    """Writes n units one by one, each retried until it is committed (the unique content
    makes a retry after an unknown outcome harmless), as an ingesting daemon does."""
    conn = None
    for i in range(n):
        content = f"unit {i}"
        while not stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = feed.connect(autocommit=True, connect_timeout=5)
                conn.execute(f"INSERT INTO {feed.schema}.units (content) VALUES (%s)"
                             " ON CONFLICT (content) DO NOTHING", (content,))
                written.append(content)
                break
            except psycopg.OperationalError:
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.1)
        time.sleep(0.01)
    if conn is not None:
        conn.close()


@pytest.mark.slow
def test_follower_rides_out_a_stopped_database_and_catches_up(own_pg_server, caplog):
    caplog.set_level(logging.DEBUG, logger="memoryd.fleet")
    caplog.set_level(logging.DEBUG, logger="memoryd.store.health")
    feed = create_feed(own_pg_server.url())
    health = Health("store", base_s=0.05, cap_s=0.5)
    f = _follower(feed, poll_interval_s=0.5, health=health)
    mirror = Mirror(feed)
    written: list[str] = []
    stop = threading.Event()
    writer = threading.Thread(target=_writer, args=(feed, 300, written, stop))
    with Running(f, mirror) as running:
        writer.start()
        _until(lambda: len(written) >= 100, 60, "the first writes")
        own_pg_server.stop("fast")
        _until(lambda: not health.reachable, 30, "the follower noticing")
        time.sleep(2.0)
        assert running.thread.is_alive() and running.error is None  # it stays up
        assert health.status()["unreachable_since"] is not None
        own_pg_server.start()
        writer.join(120 * SLOWDOWN)
        stop.set()
        _until(lambda: health.reachable and mirror.docs == feed.units(), 60,
               "the follower catching up after the restart")
    units = feed.units()
    assert sorted(units.values()) == sorted(f"unit {i}" for i in range(300))  # none lost
    assert mirror.docs == units
    assert max(mirror.seqs.values()) == 1                                  # none doubled
    with feed.connect() as c:
        assert set(mirror.seqs) == {r[0] for r in c.execute(
            f"SELECT seq FROM {feed.schema}.changes")}
    records = [r for r in caplog.records
               if r.name.startswith(("memoryd.fleet", "memoryd.store.health"))]
    loud = [r for r in records if r.levelno >= logging.INFO]
    quiet = [r for r in records if r.levelno < logging.INFO]
    down = [r for r in loud if "unreachable:" in r.getMessage()]
    back = [r for r in loud if "reachable again" in r.getMessage()]
    assert len(down) == 1 and len(back) == 1, [r.getMessage() for r in loud]
    assert len(loud) <= 4, [r.getMessage() for r in loud]  # + the listener's lost/again
    assert len(quiet) >= 3  # many attempts, each a DEBUG line at most
    assert not any(r.exc_info for r in records)
    assert own_pg_server.password not in caplog.text
