"""`Follower`: one machine following the shared store's change feed.

It holds two connections of its own: one for polls (autocommit, short statements, never
idle in a transaction) and one that LISTENs on the namespace's channel, so a commit
anywhere in the fleet wakes it at once. The LISTEN is an accelerator, not the guarantee:
`wait` also returns after the poll interval, so a lost notification, a broken listening
connection or a server that refuses it only slows a change to the interval. The listener
is set up before the first poll, and every (re)connection of it counts as a wake-up,
since notifications sent while it was away are gone.

The caller drives it (the index writer will, in fleet mode):

    batch = follower.next_batch()      # (unit_id, op) changes + the position after them
    ...apply them, commit the index with batch.position.to_json() in its meta...
    follower.commit(batch)             # now the position is ours (and reported)
    if not batch.more:
        follower.wait(interval)        # a NOTIFY or the poll interval, whichever first

or hands `follow(apply, stop)` the apply step and lets it run that loop. Failures to
reach the database go to `Health` (one log line down, one back, backoff with jitter in
between); the follower never dies of them and resumes from its position.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from memoryd.fleet import changefeed as cf
from memoryd.store.health import Health

log = logging.getLogger(__name__)

# failures of the connection or the server, as opposed to a bad query
UNREACHABLE: tuple[type[BaseException], ...] = (psycopg.OperationalError,
                                                psycopg.InterfaceError)
CONNECT_TIMEOUT_S = 10
WAIT_SLICE_S = 0.5  # how often a wait looks at the stop flag
# Notifications are coalesced: one that comes sooner than this after the last poll waits
# out the rest of it, and everything delivered meanwhile is swallowed with it. A flood of
# NOTIFYs (from any role that knows the channel) costs a follower at most one poll per
# NOTIFY_GAP_S, not one per notification (issue 28 item 6: 144k NOTIFYs in 10 s cost a
# daemon 2.8 s of CPU); a change after a quiet spell still wakes it at once.
NOTIFY_GAP_S = 0.5


class Follower:
    def __init__(self, url: str, schema: str, machine: str, position: cf.Position, *,
                 health: Health | None = None, batch: int = 2000,
                 poll_interval_s: float = 2.0, report_every_s: float = 30.0,
                 listen: bool = True, listen_url: str | None = None,
                 notify_gap_s: float = NOTIFY_GAP_S,
                 connect: Callable[..., Any] = psycopg.connect,
                 durable: Callable[[], cf.Position | None] | None = None) -> None:
        cf.quote_schema(schema)
        self.url = url
        self.schema = schema
        self.machine = machine
        self.position = position
        self.health = health or Health("store")
        self.batch = batch
        self.poll_interval_s = poll_interval_s
        self.notify_gap_s = notify_gap_s
        self._polled_at = float("-inf")  # monotonic time of the last poll
        self.report_every_s = report_every_s
        # the position `apply` has made durable, when that is not every committed batch
        # (an index that commits later): only that is reported, for pruning
        self.durable = durable
        self.listen = listen
        self.listen_url = listen_url or url  # e.g. the server itself behind a PgBouncer
        self._connect = connect
        self._conn: Any = None
        self._conn_born = 0          # health.outages when the poll connection was begun
        self._listener: Any = None
        self._listen_down = False    # logged once per loss
        self._listen_retry_at = 0.0
        self._listen_failures = 0
        self._reported_at = float("-inf")
        self._reported: cf.Position | None = None
        self.polls = 0
        self.wakeups = 0             # waits ended by a NOTIFY or a reconnect

    # -- connections ---------------------------------------------------------------------

    def _open(self, url: str | None = None) -> Any:
        return self._connect(url or self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                             application_name=f"memoryd-follower {self.machine}"[:63])

    def _drop_outlived(self) -> None:
        """While the database is down, only a new connection may say it is back: one
        from before the outage is dropped (as the store's threads do)."""
        if (self._conn is not None and not self.health.reachable
                and self._conn_born < self.health.outages):
            self._drop("_conn")

    def _poll_conn(self) -> Any:
        self._drop_outlived()
        if self._conn is None or self._conn.closed:
            born = self.health.outages
            self._conn = self._open()
            self._conn_born = born
        return self._conn

    def _drop(self, which: str) -> None:
        conn = getattr(self, which)
        setattr(self, which, None)
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a broken connection: nothing left to do
                pass

    def close(self) -> None:
        self._drop("_conn")
        self._drop("_listener")

    # -- the feed ------------------------------------------------------------------------

    def next_batch(self) -> cf.Batch:
        """The next changes after the position (at most `batch`), and the position to
        store with them. Raises what psycopg raises when the server cannot be reached
        (reported to `health` first) and FeedGapError when the feed was pruned past us."""
        if self.listen and self._listener is None:
            self._try_listen()  # before the poll: a commit after it must wake us
        while True:
            self._drop_outlived()
            stale = self._conn is not None and not self._conn.closed
            try:
                b = cf.read_batch(self._poll_conn(), self.schema, self.position, self.batch)
                break
            except UNREACHABLE as e:
                self._drop("_conn")
                if not stale:
                    self.health.failed(e)
                    raise
                # a connection from before a blip: a fresh one decides (as a pool's check)
        self.polls += 1
        self._polled_at = time.monotonic()
        self.health.ok(self._conn_born)
        return b

    def commit(self, batch: cf.Batch) -> None:
        """The batch is applied and its position stored durably: move on, and tell the
        fleet (at most every `report_every_s`) so pruning can keep what we still need."""
        self.position = batch.position
        if time.monotonic() - self._reported_at >= self.report_every_s:
            self.report()

    def report(self) -> None:
        """Tell the fleet the position this machine needs the feed from, for pruning:
        the durable one (`durable`), never one only applied in memory, or a crash before
        that is made durable would find the changes it must apply again pruned."""
        pos = self.durable() if self.durable is not None else self.position
        if pos is None:
            return
        settled = pos.settled
        if settled == self._reported:
            self._reported_at = time.monotonic()
            return
        try:
            cf.report_position(self._poll_conn(), self.schema, self.machine, settled)
        except UNREACHABLE as e:  # reported again on a later commit
            self._drop("_conn")
            self.health.failed(e)
            return
        self._reported, self._reported_at = settled, time.monotonic()

    def status(self) -> dict[str, Any]:
        """What status shows of the follower (the store's reachability is `health`)."""
        return {"machine": self.machine, "position": self.position.done,
                "listening": self._listener is not None, "polls": self.polls,
                "wakeups": self.wakeups}

    # -- waiting -------------------------------------------------------------------------

    def _try_listen(self) -> bool:
        """(Re)open the listening connection; True when it is now listening."""
        if time.monotonic() < self._listen_retry_at:
            return False
        conn = None
        try:
            conn = self._open(self.listen_url)
            name = cf.listen_channel(conn, self.schema)
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
        except psycopg.Error as e:  # any reason: the poll carries on alone
            if conn is not None:
                conn.close()
            self._listen_failures += 1
            backoff = min(30.0, self.poll_interval_s * 2 ** min(self._listen_failures, 5))
            self._listen_retry_at = time.monotonic() + backoff
            if not self._listen_down:
                self._listen_down = True
                log.warning("change feed: cannot LISTEN (%s); polling every %.1f s",
                            self.health.mask(f"{type(e).__name__}: {e}".strip()),
                            self.poll_interval_s)
            return False
        self._listener = conn
        self._listen_failures = 0
        if self._listen_down:
            self._listen_down = False
            log.info("change feed: listening again")
        return True

    def wait(self, timeout: float | None = None, stop: threading.Event | None = None) -> bool:
        """Block until a change may be waiting: True on a NOTIFY (or a listener that
        just reconnected, having missed what was sent meanwhile), False after `timeout`
        (the poll interval by default) or on `stop`."""
        deadline = time.monotonic() + (self.poll_interval_s if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                return False
            step = min(left, WAIT_SLICE_S)
            if self.listen and self._listener is None:
                if self._try_listen():
                    self.wakeups += 1
                    return True
            if self._listener is None:
                if stop is not None:
                    stop.wait(step)
                else:
                    time.sleep(step)
                continue
            try:
                woken = self._notified(step)
            except UNREACHABLE as e:
                self._drop("_listener")
                if not self._listen_down:
                    self._listen_down = True
                    log.warning("change feed: the listening connection was lost (%s); "
                                "polling every %.1f s until it is back",
                                self.health.mask(f"{type(e).__name__}: {e}".strip()),
                                self.poll_interval_s)
                continue
            if woken:
                self.wakeups += 1
                self._coalesce(stop)
                return True

    def _coalesce(self, stop: threading.Event | None) -> None:
        """Woken by a notification sooner than `notify_gap_s` after the last poll: wait
        out the rest of the gap without reading the socket (a stop, or in the index
        writer a local write, cuts it short), then swallow what came meanwhile: one
        poll answers them all."""
        rest = self._polled_at + self.notify_gap_s - time.monotonic()
        if rest <= 0:
            return
        if stop is not None:
            if stop.wait(rest):
                return
        else:
            time.sleep(rest)
        try:
            self._drained()
        except UNREACHABLE:  # the next wait finds the listener lost and says so
            pass

    def _notified(self, timeout: float) -> bool:
        """Whether a notification arrives within `timeout`; the ones already delivered
        with it are swallowed too (one poll covers them all).

        The socket is waited on here, not in psycopg: its `notifies(timeout=…)` waits
        in steps of 0.1 s (so Ctrl-C is seen), a wake-up and a turn of the GIL ten
        times a second for every idle fleet member (issue 14: the indexer thread woke
        11.4 times a second at rest, a SQLite daemon's not at all). `notifies(timeout=0)`
        then reads what came, and takes what arrived with an earlier command first (the
        connection keeps those aside), so nothing is missed before the wait either."""
        if self._drained():
            return True
        poller = select.poll()
        poller.register(self._listener.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        if not poller.poll(max(0.0, timeout) * 1000):
            return False
        return self._drained()

    def _drained(self) -> bool:
        """Whether notifications were waiting (all read), without waiting. The generator
        holds the connection's lock while open, so it is closed before anything else
        runs."""
        with contextlib.closing(self._listener.notifies(timeout=0)) as g:
            got = False
            for _ in g:
                got = True
        return got

    # -- the loop ------------------------------------------------------------------------

    def follow(self, apply: Callable[[cf.Batch], None], stop: threading.Event) -> None:
        """Poll, apply, commit, wait, until `stop`. `apply(batch)` must make the batch
        and its position durable before it returns (it is called only for batches with
        changes; an empty poll moves the position on without one, which is safe: there
        was nothing between the two positions). Unreachable: back off and retry, for as
        long as it takes (`apply` raising psycopg's connection errors counts as that too).
        Any other error in `apply` is logged (once per distinct message) and
        the same batch is retried after a backoff. FeedGapError is raised: rebuild."""
        apply_error: str | None = None
        apply_failures = 0
        while not stop.is_set():
            try:
                batch = self.next_batch()
            except UNREACHABLE:
                stop.wait(self.health.delay())
                continue
            if batch.changes:
                try:
                    apply(batch)
                except UNREACHABLE as e:  # it reads the units from the same database
                    stop.wait(self.health.failed(e))
                    continue
                except Exception as e:
                    apply_failures += 1
                    message = f"{type(e).__name__}: {e}"
                    if message != apply_error:
                        log.exception("change feed: applying %d changes failed",
                                      len(batch.changes))
                        apply_error = message
                    stop.wait(min(30.0, 0.5 * 2 ** min(apply_failures, 6)))
                    continue
                apply_error, apply_failures = None, 0
            self.commit(batch)
            if not batch.more:
                self.wait(stop=stop)
