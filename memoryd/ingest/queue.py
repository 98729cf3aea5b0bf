"""Which file is read next.

Watch events, the startup backfill and the periodic reconciliation all `submit`
paths here; one worker reads them one at a time (the store has one writer anyway).
A path already pending is not queued twice, and live changes jump ahead of the
backfill so a new line is searchable at once even while old history streams in.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.sources import Source, owner

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
        self.current: Path | None = None

    def submit(self, path: Path, *, urgent: bool = False) -> None:
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
        while True:
            if not self._urgent and not self._backlog:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            urgent = bool(self._urgent)
            path, _ = (self._urgent if urgent else self._backlog).popitem(last=False)
            src = owner(self._sources(), path)
            if src is None:
                continue
            self.current = path
            try:
                await self.ingestor.ingest_file(path, src.root, src.agent, live=urgent)
            except Exception:  # never let one file stop the worker
                log.exception("ingest of %s failed", path)
            finally:
                self.current = None
                async with self._progress:
                    self._progress.notify_all()
