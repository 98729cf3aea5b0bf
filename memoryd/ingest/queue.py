"""Which file is read next.

Watch events, the startup backfill and the periodic reconciliation all `submit`
paths here; one worker takes them in order (the store has one writer anyway).
A path already pending is not queued twice, and live changes jump ahead of the
backfill so a new line is searchable at once even while old history streams in.

A backfill reads one file ahead: the next file is read (parsed, redacted) while the one
before it is stored, whose SQLite work runs without the GIL, so the two overlap on a
second core; its units are stored after that file's (`Ingestor.ingest_file(after=)`),
in queue order as before. A live change is read alone, after the file in hand.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from memoryd.ingest.ingestor import Ingestor
from memoryd.sources import Source, owner

log = logging.getLogger(__name__)


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
        self._in_hand: dict[Path, asyncio.Task[int]] = {}  # being read or stored, in order

    @property
    def current(self) -> Path | None:
        """The file being stored (or read) now: the first of those in hand."""
        return next(iter(self._in_hand), None)

    def submit(self, path: Path, *, urgent: bool = False) -> None:
        if urgent:
            self._backlog.pop(path, None)
            self._urgent[path] = None
        elif path not in self._urgent:
            self._backlog[path] = None
        self._idle.clear()
        self._wake.set()

    def in_hand(self) -> list[Path]:
        """The files being read or stored now (two while a backfill reads ahead)."""
        return list(self._in_hand)

    def depth(self) -> int:
        return len(self._urgent) + len(self._backlog) + len(self._in_hand)

    async def drained(self) -> None:
        await self._idle.wait()

    def queued(self) -> list[Path]:
        """Files waiting, and the one being read now: until it is read it is unread
        (status sampled while a new file was in hand, before its failure was recorded,
        said `unread_bytes: 0` beside that file failing)."""
        return [*self._in_hand, *self._urgent, *self._backlog]

    def pending(self, path: Path) -> bool:
        return path in self._urgent or path in self._backlog or path in self._in_hand

    async def process(self, paths: list[Path]) -> None:
        """Read these files next and return once they have been read."""
        for p in paths:
            self.submit(p, urgent=True)
        async with self._progress:
            await self._progress.wait_for(lambda: not any(self.pending(p) for p in paths))

    async def run(self) -> None:
        ahead: asyncio.Task[int] | None = None  # the file read last, maybe still in hand
        try:
            while True:
                if not self._urgent and not self._backlog:
                    if ahead is not None:
                        await asyncio.wait([ahead])
                        ahead = None
                        continue
                    self._idle.set()
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                urgent = bool(self._urgent)
                path, _ = (self._urgent if urgent else self._backlog).popitem(last=False)
                src = owner(self._sources(), path)
                if src is None:
                    continue
                # a live change, or the file in hand queued again: after the file in hand
                if ahead is not None and (urgent or path in self._in_hand):
                    await asyncio.wait([ahead])
                    ahead = None
                task = asyncio.create_task(self._ingest(path, src, urgent, ahead))
                self._in_hand[path] = task
                if urgent:
                    await asyncio.wait([task])
                    continue
                if ahead is not None:  # two files in hand at most: one stored, one read
                    await asyncio.wait([ahead])
                ahead = task
        finally:
            tasks = list(self._in_hand.values())
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _ingest(self, path: Path, src: Source, urgent: bool,
                      after: asyncio.Task[int] | None) -> int:
        try:
            return await self.ingestor.ingest_file(path, src.root, src.agent, live=urgent,
                                                   after=after)
        except Exception:  # never let one file stop the worker
            log.exception("ingest of %s failed", path)
            return 0
        finally:
            self._in_hand.pop(path, None)
            async with self._progress:
                self._progress.notify_all()
