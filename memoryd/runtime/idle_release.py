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

    def burst(self, on: bool) -> None:
        """The index writer works through a backlog (`on`: a backfill's or a rebuild's
        batches) or no longer (a live pass, or it rests: `settle`): during a burst glibc
        serves large blocks from mappings of their own (`malloc_burst`), so its
        transient buffers leave no holes between the long-lived blocks."""
        malloc_burst(on)

    def settle(self) -> None:
        """A burst of writing ended (a backfill, an index catch-up, live appends): glibc
        back to serving large blocks from its heaps (`malloc_burst`); what the burst left
        (freed heap in the writing threads' arenas) goes once `after_s` pass with no
        query and no other write."""
        malloc_burst(False)
        self.settles += 1
        self.touch()

    def status(self) -> dict[str, object]:
        """For /v1/status: releases run, when the last ran and what it gave back, the
        process's resident memory now, what `tune_malloc` and `malloc_burst` set."""
        return {"rss_mb": rss_mb(), "idle_releases": self.runs,
                "last_release": self.last_run, "last_freed_mb": self.last_freed_mb,
                "armed": self._timer is not None, "malloc": dict(_tuned)}

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


M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENA_MAX = 2
BURST_MMAP_THRESHOLD = 128 << 10  # glibc's starting threshold, held for a burst
REST_MMAP_THRESHOLD = 32 << 20  # the ceiling glibc's own threshold rises to
_MALLOC_ENV = ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_",
               "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
_tuned: dict[str, int] = {}


def tune_malloc(environ: dict[str, str] | None = None) -> dict[str, int]:
    """How glibc's malloc serves the daemon, set once at its start before any thread
    (`Daemon.run`); what was set. Measured on a daemon that backfilled 30k-200k lines
    itself (bench/README, "idle RSS after a self-backfill"): with glibc's defaults each
    writing thread (index writer, tantivy's, the store's, ingest) ends up with an arena
    of its own (16 on 2 cores), each keeping 2-4 MB of a backfill's leftovers that
    `malloc_trim` cannot give back. `M_ARENA_MAX` 2: the threads share two arenas, so
    what one freed another reuses. (A fixed 1 MiB `M_MMAP_THRESHOLD` did as well for
    memory but made every search map and unmap tantivy's large buffers: +1.3 ms a
    search, +12 ms an append that reopens the writer; it is held only during a burst of
    writing: `malloc_burst`.) An operator's own malloc settings (`_MALLOC_ENV`) leave
    all of it as glibc has it. glibc only; elsewhere nothing is set."""
    env = os.environ if environ is None else environ
    c = libc()
    if c is None or not hasattr(c, "mallopt") or any(k in env for k in _MALLOC_ENV):
        return {}
    if c.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(ARENA_MAX)) == 1:
        _tuned.update(arena_max=ARENA_MAX)
        return {"arena_max": ARENA_MAX}
    return {}


def malloc_burst(on: bool) -> int | None:
    """glibc's mmap threshold for a burst of writing (`on`) or after it; the threshold
    set, or None when nothing was (an operator's own malloc settings, not glibc, or
    already so). glibc raises its threshold each time a mapped block is freed, up to
    32 MiB, so during a backfill the writing threads' 0.1-32 MiB buffers (file reads,
    tantivy's indexing pages, SQLite's batches) come from the heaps, and between the
    long-lived blocks allocated meanwhile they leave holes that `malloc_trim` cannot
    return (bench/README, "idle RSS after a self-backfill"). During a burst the threshold
    is held at glibc's starting 128 KiB, so these buffers are mappings unmapped when
    freed (the peak during a 200k-line backfill fell 205-212 -> 156-191 MB, the rest
    2-3 MB). After it, 32 MiB (glibc's ceiling for its own threshold): a search's large
    buffers are reused rather than mapped each time, as once glibc's own threshold has
    risen (a fixed 1 MiB cost a search 1.3 ms). The trim threshold is left as it is: at
    64 MiB (glibc's own rule, twice the mmap threshold) a thread arena's top is not
    shrunk, and what the tokenizer's load left there may stay resident. Only where
    `tune_malloc` tuned malloc: an operator's own settings are left as they are."""
    want = BURST_MMAP_THRESHOLD if on else REST_MMAP_THRESHOLD
    c = libc()
    with _burst_lock:
        now = _tuned.get("mmap_threshold")  # None: glibc's own, never burst
        if not _tuned or now == want or (now is None and not on):
            return None
        if c is None or c.mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(want)) != 1:
            return None
        _tuned["mmap_threshold"] = want
        return want


_burst_lock = threading.Lock()


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
