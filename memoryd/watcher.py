"""Watching the source roots.

`Watcher.run` is an `awatch` loop that hands changed transcript paths to the ingest
queue. watchfiles drops events for bursts and for directories created after the watch
started, and cannot watch a root that does not exist yet, so `reconcile` (a stat-only
walk, run at startup and periodically) catches whatever events missed and restarts the
watch when the set of existing roots changes (a root appears, or is deleted and
re-created).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from watchfiles import Change, awatch

from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.queue import IngestQueue
from memoryd.sources import Candidates, Source, walk

log = logging.getLogger(__name__)


class Watcher:
    def __init__(self, sources: Callable[[], list[Source]], queue: IngestQueue,
                 ingestor: Ingestor, candidate: Candidates, *, debounce_ms: int,
                 force_polling: bool) -> None:
        self._sources = sources
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

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._restart.clear()
            self._roots = await asyncio.to_thread(self.existing_roots)
            cycle = asyncio.Event()
            relay = asyncio.create_task(_set_when_any(cycle, stop, self._restart))
            try:
                if not self._roots:
                    await cycle.wait()
                    continue
                log.info("watching %s", ", ".join(map(str, self._roots)))
                async for changes in awatch(
                    *self._roots, watch_filter=self._filter, debounce=self._debounce_ms,
                    step=min(50, self._debounce_ms), stop_event=cycle,
                    force_polling=self._force_polling, ignore_permission_denied=True,
                ):
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
        return change == Change.deleted or self._candidate(path) or os.path.isdir(path)

    def _handle(self, changes: set[tuple[Change, str]]) -> None:
        self.batches += 1
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
        if await asyncio.to_thread(self.existing_roots) != self._roots:
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


async def _set_when_any(target: asyncio.Event, *events: asyncio.Event) -> None:
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        target.set()
    finally:
        for w in waiters:
            w.cancel()
