"""What the daemon lets go of when it rests, so its memory stays flat.

Queries load things that are costly to keep and cheap to get back: the tokenizer (~45 MB,
`memoryd.tokens`), the index pages a search touched (mapped from the index files, they
count in the process's RSS and grow with the corpus) and the allocator's free lists.
`IdleRelease.touch()` is called by every query; `AFTER_S` after the last one, a one-shot
timer thread runs the registered releases once and gives the freed heap back to the OS
(`malloc_trim`). Nothing wakes while the daemon rests: the timer is armed by a query and
not re-armed until the next one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

AFTER_S = 60.0


class IdleRelease:
    def __init__(self, after_s: float = AFTER_S) -> None:
        self.after_s = after_s
        self._releases: list[Callable[[], object]] = []
        self._lock = threading.Lock()
        self._last = 0.0
        self._timer: threading.Timer | None = None
        self.runs = 0

    def register(self, fn: Callable[[], object]) -> None:
        with self._lock:
            if fn not in self._releases:
                self._releases.append(fn)

    def unregister(self, fn: Callable[[], object]) -> None:
        with self._lock:
            if fn in self._releases:
                self._releases.remove(fn)

    def touch(self) -> None:
        """A query ran: release what it loaded once `after_s` pass without another."""
        self._last = time.monotonic()
        if self._timer is None:
            with self._lock:
                if self._timer is None:
                    self._arm(self.after_s)

    def _arm(self, delay: float) -> None:
        t = threading.Timer(delay, self._fire)
        t.name = "memoryd-idle-release"
        t.daemon = True
        self._timer = t
        t.start()

    def _fire(self) -> None:
        with self._lock:
            left = self._last + self.after_s - time.monotonic()
            if left > 0.05:  # a query came since: wait for the rest
                self._arm(left)
                return
            self._timer = None
            releases = list(self._releases)
        self.release_now(releases)

    def release_now(self, releases: list[Callable[[], object]] | None = None) -> None:
        for fn in releases if releases is not None else list(self._releases):
            try:
                fn()
            except Exception:  # a release is an optimisation: never fatal
                log.exception("idle release failed")
        trim_heap()
        self.runs += 1

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None


def trim_heap() -> None:
    """Give the C heap's free memory back to the OS (glibc only; elsewhere a no-op)."""
    c = libc()
    if c is not None and hasattr(c, "malloc_trim"):
        c.malloc_trim(0)


_LIBC: list[ctypes.CDLL | None] = []


def libc() -> ctypes.CDLL | None:
    """The C library (errno kept), or None where there is none to load."""
    if not _LIBC:
        name = ctypes.util.find_library("c")
        try:
            _LIBC.append(ctypes.CDLL(name, use_errno=True) if name else None)
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]


RELEASE = IdleRelease()
"""The daemon's one instance: queries touch it, loaders register their release."""
