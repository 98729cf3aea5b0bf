"""Which file is read next.

Watch events, the startup backfill and the periodic reconciliation all `submit`
paths here; one worker reads them one at a time (the store has one writer anyway).
A path already pending is not queued twice, and live changes jump ahead of the
backfill so a new line is searchable at once even while old history streams in.

While a backlog file is being stored, the next backlog file is read (parsed, redacted)
ahead in a worker thread: SQLite's writes run without the GIL, so the two overlap. It is
still stored after the one before it, in queue order, in its own transaction with its
cursor. The read ahead waits until the file before it has been read, and it never runs
beside a live file's read: a live submit stops it at the next line (the rest of that
file is read in its turn) and a read ahead only starts when no live file waits. A new
submit of the file being read ahead (it changed since) drops that read.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.ingest.ingestor import First, Ingestor
from memoryd.sources import Source, owner

log = logging.getLogger(__name__)


@dataclass
class ReadAhead:
    path: Path
    turn: asyncio.Event = field(default_factory=asyncio.Event)  # the file before is read
    stop: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[First] | None = None
    stale: bool = False

    async def read(self, ingestor: Ingestor, root: Path, agent: str) -> First:
        cursor = await ingestor.cursor_for(self.path, root)
        await self.turn.wait()
        return await asyncio.to_thread(ingestor.prepare_and_read, self.path, root, agent,
                                       cursor, self.stop)

    def drop(self) -> None:
        """Not used: cancel it, and let whatever it raised go unreported (the file is read
        again in its turn, where a failure is recorded)."""
        self.stop.set()
        if self.task is not None:
            discard(self.task)


def discard(task: asyncio.Task[First]) -> None:
    task.cancel()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # no "never retrieved"


class IngestQueue:
    def __init__(self, ingestor: Ingestor, sources: Callable[[], list[Source]]) -> None:
        self.ingestor = ingestor
        self._sources = sources
        self._urgent: OrderedDict[Path, None] = OrderedDict()
        self._backlog: OrderedDict[Path, None] = OrderedDict()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._progress = asyncio.Condition()
        self.current: Path | None = None
        self._ahead: ReadAhead | None = None

    def submit(self, path: Path, *, urgent: bool = False) -> None:
        if (a := self._ahead) is not None:
            if a.path == path:  # changed since (or gone): read it again in its turn
                a.stale = True
            if urgent or a.stale:
                a.stop.set()
        if urgent:
            self._backlog.pop(path, None)
            self._urgent[path] = None
        elif path not in self._urgent:
            self._backlog[path] = None
        self._idle.clear()
        self._wake.set()

    def depth(self) -> int:
        return len(self._urgent) + len(self._backlog) + (self.current is not None)

    async def drained(self) -> None:
        await self._idle.wait()

    def queued(self) -> list[Path]:
        """Files waiting, and the one being read now: until it is read it is unread
        (status sampled while a new file was in hand, before its failure was recorded,
        said `unread_bytes: 0` beside that file failing)."""
        current = [self.current] if self.current is not None else []
        return [*current, *self._urgent, *self._backlog]

    def pending(self, path: Path) -> bool:
        return path in self._urgent or path in self._backlog or path == self.current

    async def process(self, paths: list[Path]) -> None:
        """Read these files next and return once they have been read."""
        for p in paths:
            self.submit(p, urgent=True)
        async with self._progress:
            await self._progress.wait_for(lambda: not any(self.pending(p) for p in paths))

    async def run(self) -> None:
        try:
            await self._run()
        finally:  # cancelled when the daemon stops: drop a read ahead still in flight
            if self._ahead is not None:
                self._ahead.drop()
                self._ahead = None

    async def _run(self) -> None:
        while True:
            if not self._urgent and not self._backlog:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            urgent = bool(self._urgent)
            path, _ = (self._urgent if urgent else self._backlog).popitem(last=False)
            first = self._take_ahead(path)
            src = owner(self._sources(), path)
            if src is None:
                if first is not None:
                    discard(first)
                continue
            self.current = path
            if not urgent:
                self._read_next_ahead()
            ahead = self._ahead

            def read(ahead: ReadAhead | None = ahead, urgent: bool = urgent) -> None:
                if ahead is not None and not urgent:
                    ahead.turn.set()

            try:
                await self.ingestor.ingest_file(path, src.root, src.agent, live=urgent,
                                                first=first, on_read=read)
            except Exception:  # never let one file stop the worker
                log.exception("ingest of %s failed", path)
            finally:
                if ahead is not None:
                    ahead.turn.set()
                self.current = None
                async with self._progress:
                    self._progress.notify_all()

    def _take_ahead(self, path: Path) -> asyncio.Task[First] | None:
        a = self._ahead
        if a is None or a.path != path:
            return None
        self._ahead = None
        if a.stale:
            a.drop()
            return None
        return a.task

    def _read_next_ahead(self) -> None:
        if self._ahead is not None or self._urgent or not self._backlog:
            return
        path = next(iter(self._backlog))
        src = owner(self._sources(), path)
        if src is None or not self.ingestor.failures.due(str(path)):
            return
        a = ReadAhead(path)
        a.task = asyncio.create_task(a.read(self.ingestor, src.root, src.agent))
        self._ahead = a
