"""Watching the source roots.

`Watcher.run` is an `awatch` loop that hands changed transcript paths to the ingest
queue. watchfiles drops events for bursts and for directories created after the watch
started, and cannot watch a root that does not exist yet, so `reconcile` (a stat-only
walk, run at startup and periodically) catches whatever events missed and restarts the
watch when the set of existing roots changes (a root appears, or is deleted and
re-created).

The watch itself (`watch_changes`) is watchfiles' Rust notifier driven directly rather
than through `awatch`, so its wake-up step can change without a new notifier (which
would miss events in between): `FAST_STEP_MS` while files change (the step bounds how
soon an appended line is read). Once nothing changed for `QUIET_S` (20 wake-ups a second
at rest were a third of an idle daemon's CPU) it stops stepping and waits on an inotify
wake-up (`memoryd.inotify_wake`), so the first change after a quiet spell is read at the
fast step too; without inotify the step turns to `SLOW_STEP_MS` instead (that first
change is then seen within two slow steps).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from watchfiles import Change
from watchfiles._rust_notify import RustNotify
from watchfiles.main import _default_force_polling

from memoryd import inotify_wake, lag_trace
from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.queue import IngestQueue
from memoryd.sources import Candidates, Source, walk

log = logging.getLogger(__name__)

FAST_STEP_MS = 50
SLOW_STEP_MS = 250
QUIET_S = 60.0
POLL_DELAY_MS = 300  # watchfiles' default, when polling is forced


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
        self._pending: set[asyncio.Task[None]] = set()

    def existing_roots(self) -> tuple[Path, ...]:
        return tuple(sorted({s.root for s in self._sources() if s.root.is_dir()}))

    def watch_roots(self) -> tuple[Path, ...]:
        """What the watch covers: the existing roots and the `also` folders."""
        return tuple(sorted({*self.existing_roots(), *(d for d in self._also if d.is_dir())}))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._restart.clear()
            self._roots = await asyncio.to_thread(self.watch_roots)
            cycle = asyncio.Event()
            relay = asyncio.create_task(_set_when_any(cycle, stop, self._restart))
            try:
                if not self._roots:
                    await cycle.wait()
                    continue
                log.info("watching %s", ", ".join(map(str, self._roots)))
                async for changes in watch_changes(
                    self._roots, self._filter, debounce_ms=self._debounce_ms, stop=cycle,
                    force_polling=self._force_polling):
                    try:
                        self._handle(changes)
                    except Exception:  # a bad batch never stops the watch
                        self.errors += 1
                        log.exception("watch batch failed")
            except Exception:
                # a root vanished under the watch, or the OS refused: the next cycle
                # (after the reconciliation notices) starts over
                self.errors += 1
                log.warning("watch stopped, restarting", exc_info=True)
                await asyncio.sleep(0.5)
            finally:
                relay.cancel()

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
                        quiet_s: float = QUIET_S, wake: bool = True
                        ) -> AsyncIterator[set[tuple[Change, str]]]:
    """Batches of changes under `roots` that `keep` accepts, until `stop` is set: the
    Rust notifier's watch in a thread, its step fast while changes come. After `quiet_s`
    without any it waits on an inotify wake-up (`memoryd.inotify_wake`, Linux) and takes
    the first change at the fast step; where there is none (or `wake` is off) the step
    turns slow instead."""
    halt = threading.Event()  # what the notifier's thread polls, each step
    relay = asyncio.create_task(_set_threading_event(stop, halt))
    # a thread of its own: the watch blocks it for as long as the watch lasts
    pool = ThreadPoolExecutor(1, thread_name_prefix="memoryd-watch")
    loop = asyncio.get_running_loop()
    fast = min(fast_ms, debounce_ms)
    last = time.monotonic()
    polling = _default_force_polling(force_polling)
    armable = wake and not polling
    try:
        with RustNotify([str(r) for r in roots], False, polling, POLL_DELAY_MS, True,
                        True) as notifier:
            while not halt.is_set():
                quiet = time.monotonic() - last >= quiet_s
                if quiet and armable:
                    w = await loop.run_in_executor(pool, inotify_wake.arm, roots)
                    if w is None:
                        armable = False  # the slow step from now on
                        continue
                    try:
                        # a change from before the wake-up was armed is with the notifier
                        raw = await loop.run_in_executor(pool, notifier.watch, debounce_ms, 1,
                                                         1, halt)
                        if raw == "timeout":
                            await _readable(w.fd, stop)
                            lag_trace.stage("wake")
                            raw = "woken"
                    finally:
                        w.close()
                    last = time.monotonic()  # awake: fast steps until the next quiet spell
                else:
                    step = slow_ms if quiet else fast
                    # fast: return when the quiet spell starts, to slow down or wait
                    timeout = 0 if quiet else max(1, int((quiet_s - (time.monotonic() - last))
                                                         * 1000))
                    try:
                        raw = await loop.run_in_executor(pool, notifier.watch, debounce_ms,
                                                         step, timeout, halt)
                    except asyncio.CancelledError:
                        halt.set()
                        raise
                if raw == "stop":
                    return
                if raw in ("timeout", "signal", "woken"):
                    continue
                changes = {(Change(c), p) for c, p in raw}
                changes = {c for c in changes if keep(*c)}
                if changes:  # what is not kept (memoryd's own files) leaves the step slow
                    last = time.monotonic()
                    yield changes
    finally:
        halt.set()
        relay.cancel()
        pool.shutdown(wait=False)


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
