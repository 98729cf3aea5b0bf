"""What the daemon lets go of when it rests, so its memory stays flat.

Queries load things that are costly to keep and cheap to get back: the tokenizer (~45 MB,
`memoryd.tokens`), the index pages a search touched (mapped from the index files, they
count in the process's RSS and grow with the corpus) and the allocator's free lists.
Writing leaves the most: a backfill of 200k lines leaves ~70-90% of what glibc's
arenas hold free but not returned (the index writer's and tantivy's threads each
allocate in an arena of their own), and a restarted daemon on the same store rests
40-60 MB lower (bench/README, "idle RSS after a self-backfill").
`IdleRelease.touch()` is called by every query, `settle()` when a burst of writing ends
(the index writer lets go of its writer); `AFTER_S` after the last of either, a one-shot
timer thread runs the registered releases once and gives the freed heap back to the OS
(`malloc_trim`). Nothing wakes while the daemon rests: the timer is armed by a query or
a write and not re-armed until the next one.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
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
        self.settles = 0  # bursts of writing that armed it
        self.last_run: float | None = None  # wall clock of the last release
        self.last_freed_mb: float | None = None  # RSS the last release gave back

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

    def settle(self) -> None:
        """A burst of writing ended (a backfill, an index catch-up, live appends): what it
        left (freed heap in the writing threads' arenas) goes once `after_s` pass with no
        query and no other write."""
        self.settles += 1
        self.touch()

    def status(self) -> dict[str, object]:
        """For /v1/status: releases run, when the last ran and what it gave back, the
        process's resident memory now."""
        return {"rss_mb": rss_mb(), "idle_releases": self.runs,
                "last_release": self.last_run, "last_freed_mb": self.last_freed_mb,
                "armed": self._timer is not None}

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
        before = rss_mb()
        for fn in releases if releases is not None else list(self._releases):
            try:
                fn()
            except Exception:  # a release is an optimisation: never fatal
                log.exception("idle release failed")
        trim_heap()
        after = rss_mb()
        if before is not None and after is not None:
            self.last_freed_mb = round(before - after, 1)
        self.last_run = time.time()
        self.runs += 1
        log.debug("idle release: RSS %s -> %s MB", before, after)

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None


M_ARENA_MAX = -8
ARENA_MAX = 2
_MALLOC_ENV = ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")


def tune_malloc(environ: dict[str, str] | None = None) -> dict[str, int]:
    """glibc's malloc arenas, set once at the daemon's start before any thread
    (`Daemon.run`); what was set. With glibc's defaults each thread that allocates (the
    store's, the index's, tantivy's, the helper) ends up with an arena of its own (16 on
    2 cores), each keeping freed blocks that `malloc_trim` cannot give back.
    `M_ARENA_MAX` 2: the threads share two arenas, so what one freed another reuses. At
    1M units after 500 searches and 500 contexts: 83 MB at rest against 95 without,
    peak 237 against 254 (bench/mechanisms.md). An operator's own setting
    (`_MALLOC_ENV`) is left as it is. glibc only; elsewhere nothing is set."""
    env = os.environ if environ is None else environ
    c = libc()
    if c is None or not hasattr(c, "mallopt") or any(k in env for k in _MALLOC_ENV):
        return {}
    if c.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(ARENA_MAX)) == 1:
        return {"arena_max": ARENA_MAX}
    return {}


def trim_heap() -> None:
    """Give the C heap's free memory back to the OS (glibc only; elsewhere a no-op)."""
    c = libc()
    if c is not None and hasattr(c, "malloc_trim"):
        c.malloc_trim(0)


def rss_mb() -> float | None:
    """This process's resident memory in MB (Linux; elsewhere None)."""
    try:
        with open("/proc/self/statm") as f:
            return round(int(f.read().split()[1]) * _PAGE / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return None


_PAGE = 4096
with contextlib.suppress(AttributeError, ValueError, OSError):
    _PAGE = os.sysconf("SC_PAGE_SIZE")

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
