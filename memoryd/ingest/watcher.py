"""Watching the source roots.

`Watcher.run` is an `awatch` loop that hands changed transcript paths to the ingest
queue. watchfiles drops events for bursts and for directories created after the watch
started, and cannot watch a root that does not exist yet, so `reconcile` (a stat-only
walk, run at startup and periodically) catches whatever events missed and restarts the
watch when the set of existing roots changes (a root appears, or is deleted and
re-created).

The watch itself (`watch_changes`) is watchfiles' Rust notifier driven directly rather
than through `awatch`, so how it wakes can change without a new notifier (which would
miss events in between). On Linux it does not step at all: it waits on an inotify
doorbell (`memoryd.ingest.inotify_wake`) and, when that rings, collects the notifier's batch at
a `QUICK_STEP_MS` step, so a lone appended line reaches the ingest queue ~10 ms after
its write (a 50 ms step took 50-100 ms, the largest share of append -> searchable), and a
daemon at rest wakes for nothing. While changes stream in, rings are collected at
`FAST_STEP_MS` and gathered into fewer batches. Without inotify (another OS, forced
polling, no watches left) it steps: `FAST_STEP_MS` while files change, `SLOW_STEP_MS`
once nothing changed for `QUIET_S` (20 wake-ups a second at rest were a third of an idle
daemon's CPU).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from watchfiles import Change
from watchfiles._rust_notify import RustNotify, WatchfilesRustInternalError
from watchfiles.main import _default_force_polling

from memoryd.ingest import inotify_wake
from memoryd.runtime import lag_trace
from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.queue import IngestQueue
from memoryd.ingest.sources import Candidates, Source, walk

log = logging.getLogger(__name__)

QUICK_STEP_MS = 5  # a ring after a calm: the notifier's batch in ~2 such steps
FAST_STEP_MS = 50
SLOW_STEP_MS = 250
CALM_S = 0.05  # a ring this long after the last batch is collected at the quick step
RING_WAIT_MS = 200  # a ring the notifier has nothing for (yet) is dropped after this
QUIET_S = 60.0
POLL_DELAY_MS = 300  # watchfiles' default, when polling is forced
RESTART_MAX_S = 60.0  # the longest wait before a failing watch starts again


class Watcher:
    def __init__(self, sources: Callable[[], list[Source]], queue: IngestQueue,
                 ingestor: Ingestor, candidate: Candidates, *, debounce_ms: int,
                 force_polling: bool,
                 also: Mapping[Path, Callable[[], None]] | None = None) -> None:
        self._sources = sources
        # folders of memoryd's own watched in the same watch (MEMORY.md's, so a user's
        # edit is noticed without a poll): a change under one calls its function
        self._also = dict(also or {})
        self._queue = queue
        self._ingestor = ingestor
        self._candidate = candidate
        self._debounce_ms = debounce_ms
        self._force_polling = force_polling or None
        self._restart = asyncio.Event()
        self._roots: tuple[Path, ...] = ()
        self.batches = 0
        self.errors = 0
        self.warning: str | None = None  # why the watch polls where it could wait (status)
        self._failures = 0  # the watch's failed starts in a row (its restart backs off)
        self._pending: set[asyncio.Task[None]] = set()

    def status(self) -> dict[str, Any]:
        """`watcher` in `/v1/status`: change batches, errors, and why it polls where it
        could wait (no inotify instances or watches left), if it does."""
        return {"batches": self.batches, "errors": self.errors, "warning": self.warning}

    def existing_roots(self) -> tuple[Path, ...]:
        return tuple(sorted({s.root for s in self._sources() if s.root.is_dir()}))

    def watch_roots(self) -> tuple[Path, ...]:
        """What the watch covers: the existing roots and the `also` folders."""
        return tuple(sorted({*self.existing_roots(), *(d for d in self._also if d.is_dir())}))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._restart.clear()
            self.warning = None  # said again by this cycle if it still holds
            self._roots = await asyncio.to_thread(self.watch_roots)
            cycle = asyncio.Event()
            relay = asyncio.create_task(_set_when_any(cycle, stop, self._restart))
            try:
                if not self._roots:
                    await cycle.wait()
                    continue
                log.info("watching %s", ", ".join(map(str, self._roots)))
                # what was written after the last scan and before the watch began (a
                # directory made while the daemon started, a root that appeared) has no
                # event: a scan once the watch holds, or it waited for the next
                # reconciliation (`watch.reconcile_seconds`)
                async for changes in watch_changes(
                    self._roots, self._filter, debounce_ms=self._debounce_ms, stop=cycle,
                    force_polling=self._force_polling, warn=self._warn,
                    ready=lambda: self._spawn(self._scan_after_start())):
                    self._failures = 0  # the watch works: a later failure starts over
                    try:
                        self._handle(changes)
                    except Exception:  # a bad batch never stops the watch
                        self.errors += 1
                        log.exception("watch batch failed")
            except Exception:
                # a root vanished under the watch, or the OS refused: the next cycle
                # (after the reconciliation notices) starts over, later each time it fails
                # again (a traceback twice a second helps nobody), and the traceback once
                self.errors += 1
                self._failures += 1
                delay = min(RESTART_MAX_S, 0.5 * 2 ** (self._failures - 1))
                log.warning("watch stopped, restarting in %.1f s", delay,
                            exc_info=self._failures == 1)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(cycle.wait(), delay)  # a stop or restart: now
            finally:
                relay.cancel()

    def _warn(self, text: str) -> None:
        if text != self.warning:
            log.warning("%s", text)
        self.warning = text

    def _filter(self, change: Change, path: str) -> bool:
        for folder, changed in self._also.items():
            if path.startswith(f"{folder}{os.sep}"):
                changed()
                return False
        return change == Change.deleted or self._candidate(path) or os.path.isdir(path)

    def _handle(self, changes: set[tuple[Change, str]]) -> None:
        self.batches += 1
        lag_trace.stage("watch", len(changes))
        for change, raw in sorted(changes, key=lambda c: c[1]):
            path = Path(raw)
            if change == Change.deleted:
                if raw in self._ingestor.seen:
                    self._spawn(self._ingestor.file_gone(path))
                elif any(root == path or root.is_relative_to(path) for root in self._roots):
                    self._restart.set()  # a watched root itself went away
            elif self._candidate(raw):
                self._queue.submit(path, urgent=True)
            elif os.path.isdir(raw):
                # a new directory: files created in it before the watch saw it (walked in
                # a thread: it may be a whole restored tree)
                self._spawn(self._submit_tree(path))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """A background task held until it finishes (the loop keeps only weak refs)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _scan_after_start(self) -> None:
        try:
            await self.reconcile()
        except Exception:  # the reconciliation loop tries again
            self.errors += 1
            log.warning("scan after the watch began failed", exc_info=True)

    async def _submit_tree(self, path: Path) -> None:
        files = await asyncio.to_thread(lambda: [p for p, _ in walk(path, self._candidate)])
        for p in files:
            self._queue.submit(p, urgent=True)

    async def reconcile(self, *, urgent: bool = False) -> int:
        """Stat every candidate file under the existing roots; queue the ones that
        differ from what was read, forget the ones that are gone. Returns how many
        were queued."""
        changed, gone = await asyncio.to_thread(self._scan)
        for p in changed:
            self._queue.submit(p, urgent=urgent)
        for p in gone:
            await self._ingestor.file_gone(p)
        if await asyncio.to_thread(self.watch_roots) != self._roots:
            self._restart.set()
        return len(changed)

    def _scan(self) -> tuple[list[Path], list[Path]]:
        seen = self._ingestor.seen
        changed: list[Path] = []
        found: set[str] = set()
        roots = self.existing_roots()
        for root in roots:
            for path, st in walk(root, self._candidate):
                key = str(path)
                found.add(key)
                s = seen.get(key)
                if s is None or s.changed(st):
                    changed.append(path)
        gone = [Path(p) for p in list(seen)
                if p not in found and any(Path(p).is_relative_to(r) for r in
                                          {s.root for s in self._sources()})]
        return changed, gone


async def watch_changes(roots: tuple[Path, ...], keep: Callable[[Change, str], bool], *,
                        debounce_ms: int, stop: asyncio.Event, force_polling: bool | None,
                        fast_ms: int = FAST_STEP_MS, slow_ms: int = SLOW_STEP_MS,
                        quiet_s: float = QUIET_S, wake: bool = True,
                        quick_ms: int = QUICK_STEP_MS,
                        ready: Callable[[], None] | None = None,
                        warn: Callable[[str], None] | None = None,
                        ) -> AsyncIterator[set[tuple[Change, str]]]:
    """Batches of changes under `roots` that `keep` accepts, until `stop` is set: the
    Rust notifier's watch in a thread. Where inotify answers (Linux, `wake` on) it rings
    a doorbell (`memoryd.ingest.inotify_wake`) and the watch waits on it without stepping; a
    ring is collected at `quick_ms` (a change after a calm of `CALM_S`: one appended
    line) or at the fast step (changes streaming in, gathered into fewer batches).
    Elsewhere the watch steps: fast while changes come, slow after `quiet_s` without.
    `ready` is called once the notifier watches (every change from then on is seen).
    Where the kernel is out of inotify instances or watches the notifier polls, and
    `warn` is told why (status shows it)."""
    halt = threading.Event()  # what the notifier's thread polls, each step
    relay = asyncio.create_task(_set_threading_event(stop, halt))
    # a thread of its own: the watch blocks it for as long as the watch lasts
    pool = ThreadPoolExecutor(1, thread_name_prefix="memoryd-watch")
    loop = asyncio.get_running_loop()
    fast = min(fast_ms, debounce_ms)
    polling = _default_force_polling(force_polling)
    bell = None
    why: list[str] = []
    if wake and not polling:
        bell = await loop.run_in_executor(pool, inotify_wake.arm, roots, why)
    if why:  # out of inotify instances or watches: the notifier's inotify would fail too
        polling = True
        if warn is not None:
            warn(f"{why[0]}: the watch polls instead")
    try:
        try:
            notify = RustNotify([str(r) for r in roots], False, polling, POLL_DELAY_MS,
                                True, True)
        except (OSError, WatchfilesRustInternalError) as e:
            if polling or isinstance(e, FileNotFoundError | PermissionError):
                raise
            # the kernel refused the notifier's inotify ("Too many open files", "OS file
            # watch limit reached"): a limit reached after the doorbell was armed
            notify = RustNotify([str(r) for r in roots], False, True, POLL_DELAY_MS, True,
                                True)
            if warn is not None:
                warn(f"inotify refused ({e}): the watch polls instead")
        with notify as notifier:
            step = _Step(notifier, pool, halt, keep, debounce_ms)
            if ready is not None:
                ready()
            batches = (_rung(step, bell, stop, fast, quick_ms) if bell is not None
                       else _stepped(step, fast, slow_ms, quiet_s))
            async for changes in batches:
                yield changes
    finally:
        halt.set()
        relay.cancel()
        if bell is not None:
            bell.close()
        pool.shutdown(wait=False)


class _Step:
    """One collect of the notifier in the watch's thread: the changes `keep` accepts,
    an empty set for none of those, or "stop" / "timeout"."""

    def __init__(self, notifier: RustNotify, pool: ThreadPoolExecutor,
                 halt: threading.Event, keep: Callable[[Change, str], bool],
                 debounce_ms: int) -> None:
        self.notifier, self.pool, self.halt = notifier, pool, halt
        self.keep, self.debounce_ms = keep, debounce_ms

    async def __call__(self, step_ms: int, timeout_ms: int
                       ) -> set[tuple[Change, str]] | str:
        try:
            raw = await asyncio.get_running_loop().run_in_executor(
                self.pool, self.notifier.watch, self.debounce_ms, step_ms, timeout_ms,
                self.halt)
        except asyncio.CancelledError:
            self.halt.set()
            raise
        if raw == "signal":
            return "timeout"
        if isinstance(raw, str):
            return raw
        return {(c, p) for c, p in ((Change(c), p) for c, p in raw) if self.keep(c, p)}


async def _rung(step: _Step, bell: inotify_wake.Wake, stop: asyncio.Event, fast: int,
                quick: int) -> AsyncIterator[set[tuple[Change, str]]]:
    """The notifier's batches, each collected after the doorbell rang. A new directory
    is added to the doorbell (its parent's watch rang for it); if inotify refuses it,
    the rest of the watch steps."""
    loop = asyncio.get_running_loop()
    last = 0.0  # when the last batch was yielded
    rung = True  # the notifier may hold changes from before the doorbell was armed
    while not step.halt.is_set():
        if not rung:
            await _readable(bell.fd, stop)
            if stop.is_set():
                return
            lag_trace.stage("wake")
        bell.drain()  # before the collect: a change after this rings again
        rung = False
        got = await step(quick if time.monotonic() - last >= CALM_S else fast, RING_WAIT_MS)
        if got == "stop":
            return
        if isinstance(got, str) or not got:
            continue  # nothing memoryd reads (its own files; a ring for an attribute)
        last = time.monotonic()
        for c, p in got:
            if c == Change.added and os.path.isdir(p) and not await loop.run_in_executor(
                    step.pool, bell.add_tree, Path(p)):
                log.warning("inotify refused to watch %s: the watch steps from now on", p)
                yield got
                async for more in _stepped(step, fast, SLOW_STEP_MS, QUIET_S):
                    yield more
                return
        yield got


async def _stepped(step: _Step, fast: int, slow_ms: int, quiet_s: float
                   ) -> AsyncIterator[set[tuple[Change, str]]]:
    """The notifier's batches without a doorbell: a fast step while changes come, the
    slow one after `quiet_s` without any (memoryd's own files, not kept, leave it slow)."""
    last = time.monotonic()
    while not step.halt.is_set():
        quiet = time.monotonic() - last >= quiet_s
        # fast: return when the quiet spell starts, to slow down
        got = await step(slow_ms if quiet else fast, 0 if quiet else max(
            1, int((quiet_s - (time.monotonic() - last)) * 1000)))
        if got == "stop":
            return
        if isinstance(got, str) or not got:
            continue
        last = time.monotonic()
        yield got


async def _readable(fd: int, stop: asyncio.Event) -> None:
    """Until `fd` is readable or `stop` is set (the event loop's own poll: no thread, no
    periodic wake-up)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([ready, stopped], return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_reader(fd)
        stopped.cancel()


async def _set_threading_event(ev: asyncio.Event, target: threading.Event) -> None:
    await ev.wait()
    target.set()


async def _set_when_any(target: asyncio.Event, *events: asyncio.Event) -> None:
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        target.set()
    finally:
        for w in waiters:
            w.cancel()
