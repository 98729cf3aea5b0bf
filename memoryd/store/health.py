"""Whether the shared database is reachable, as the store and the follower last found it.

One `Health` per daemon is reported to by everything that talks to PostgreSQL: `ok()`
after a round trip that worked, `failed(exc)` after one that could not reach the server.
It keeps what `status` and `doctor` show (`reachable`, `unreachable_since`, the last
error with any password scrubbed out) and hands out the delay before the next attempt:
exponential backoff with jitter, capped, so a fleet does not hammer a database that is
coming back up, and restarts in step.

Only a connection begun after the outage was seen says the database is back. While a
server stops (`pg_ctl -m fast` ends its backends one by one), a round trip on a
connection from before can still succeed, or its success be reported by its thread
after another thread saw the outage: callers pass `ok(born)`, the outage count when the
connection was begun, and such a late success is not news. Without that the status
flapped: down, "reachable again", down again, two lines each way for one outage.

The log gets one WARNING when the database goes away and one INFO when it comes back,
however many attempts fail in between (those are DEBUG): an outage of an hour is two
lines, not a traceback storm. No traceback is logged for an unreachable server; the
error's own message says what happened.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

# `scheme://user:password@host` (the password may hold anything but a slash or a space;
# greedy, so a raw '@' inside it is covered up to the last one) and libpq's key=value
# form, `password=secret` or `password='a b'`
_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^\s/]*@")
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'][^\s]*)", re.I)


def scrub(text: str) -> str:
    """`text` with every password in a connection URL or key=value string masked."""
    return _KV_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))


class Health:
    """Reachability of one database, shared by the threads that use it (thread-safe)."""

    def __init__(self, what: str = "store", *, mask: Callable[[str], str] = scrub,
                 base_s: float = 0.5, cap_s: float = 30.0,
                 rng: Callable[[], float] = random.random,
                 clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC),
                 logger: logging.Logger = log) -> None:
        self.what = what
        self.mask = mask
        self.base_s = base_s
        self.cap_s = cap_s
        self._rng = rng
        self._clock = clock
        self._now = now
        self._log = logger
        self._lock = threading.Lock()
        self.reachable = True
        self.unreachable_since: datetime | None = None
        self.last_error: str | None = None
        self.failures = 0          # consecutive failed attempts
        self._down_at = 0.0        # monotonic, for the outage's length
        self._next_try = 0.0       # monotonic: no attempt before this while down
        # outages so far: a connection made before the latest one is stale, and its
        # error on first use after the recovery is not news (see `stale`)
        self.outages = 0

    def ok(self, born: int | None = None) -> None:
        """A round trip worked: reachable again (logged once if it had gone away).
        `born` is `outages` as it was when the round trip's connection was begun; a
        connection begun before the latest outage proves nothing about it (see above).
        None: a caller that does not know (counted)."""
        with self._lock:
            if self.reachable:
                self.failures = 0
                return
            if born is not None and born < self.outages:
                return
            lasted = self._clock() - self._down_at
            attempts = self.failures
            self.reachable = True
            self.unreachable_since = None
            self.last_error = None
            self.failures = 0
        self._log.info("%s reachable again after %.1f s (%d failed attempts)",
                       self.what, lasted, attempts)

    def failed(self, exc: BaseException | str) -> float:
        """A round trip could not reach the database. Returns how long to wait before
        the next attempt. Logs only the first failure of an outage."""
        message = self.mask(_describe(exc))
        with self._lock:
            first = self.reachable
            if first:
                self.reachable = False
                self.unreachable_since = self._now()
                self._down_at = self._clock()
                self.outages += 1
            self.failures += 1
            self.last_error = message
            delay = self._delay_locked()
            self._next_try = self._clock() + delay
        if first:
            self._log.warning("%s unreachable: %s (retrying with backoff up to %.0f s; "
                              "logged again when it is back)", self.what, message, self.cap_s)
        else:
            self._log.debug("%s still unreachable (attempt %d, next in %.2f s): %s",
                            self.what, self.failures, delay, message)
        return delay

    def stale(self, born: int) -> bool:
        """Was a connection made at outage count `born` made before the latest outage?
        Such a connection's error once the database is back is the old outage's echo:
        the caller drops it and connects again without reporting a new outage."""
        with self._lock:
            return born < self.outages and self.reachable

    def due(self) -> bool:
        """May a round trip be tried now? Always while reachable; while down, once the
        backoff since the last failed attempt has passed (callers fail fast before)."""
        with self._lock:
            return self.reachable or self._clock() >= self._next_try

    def down_for(self) -> float:
        """Seconds since the database went away (0 while reachable)."""
        with self._lock:
            return 0.0 if self.reachable else self._clock() - self._down_at

    def delay(self) -> float:
        """The wait before the next attempt at the current failure count (0 when up)."""
        with self._lock:
            return self._delay_locked() if self.failures else 0.0

    def _delay_locked(self) -> float:
        # "equal jitter": half the exponential step fixed, half random, so attempts
        # spread out but never collapse to zero
        step = min(self.cap_s, self.base_s * 2 ** min(self.failures - 1, 30))
        return step / 2 + self._rng() * step / 2

    def status(self) -> dict[str, Any]:
        """What `status` and `doctor` show."""
        with self._lock:
            return {
                "reachable": self.reachable,
                "unreachable_since": (self.unreachable_since.isoformat()
                                      if self.unreachable_since else None),
                "last_error": self.last_error,
                "failures": self.failures,
                "down_s": 0.0 if self.reachable else round(self._clock() - self._down_at, 1),
            }


def _describe(exc: BaseException | str) -> str:
    if isinstance(exc, str):
        return exc
    text = " ".join(str(exc).split())  # libpq's messages span lines
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
