"""On-demand ingest (`POST /v1/ingest`, `memoryctl ingest`): a file or folder read now.

The path is checked (absolute, there, not memoryd's own files); a folder no source holds
becomes a source of its own, so the watcher follows it from then on; its transcripts are
listed as the watcher lists them and queued ahead of the others, or, with `wait`, read at
once: the answer then counts the new units once they are searchable and says which files
were not taken as transcripts, and why. The daemon builds it and hands `ingest` to the
route table; it lists `added` among the sources it watches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from memoryd.api import IngestRequest, IngestResponse
from memoryd.errors import BadRequestError
from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.queue import IngestQueue
from memoryd.ingest.sources import Candidates, Source, owner, walk
from memoryd.store import Store


class OnDemandIngest:
    def __init__(self, store: Store, ingestor: Ingestor, queue: IngestQueue,
                 candidate: Candidates, sources: Callable[[], list[Source]],
                 owned_dirs: Sequence[Path]) -> None:
        """`sources`: every source watched (the configured ones and `added`);
        `owned_dirs`: memoryd's own folders, never read as transcripts."""
        self.store = store
        self.ingestor = ingestor
        self.queue = queue
        self.candidate = candidate
        self.sources = sources
        self.owned_dirs = tuple(owned_dirs)
        self.added: list[Source] = []  # folders given to POST /v1/ingest

    async def ingest(self, req: IngestRequest) -> IngestResponse:
        """Backfill a file or folder now (POST /v1/ingest)."""
        raw = Path(req.path)
        if not raw.is_absolute() or "\x00" in req.path:
            raise BadRequestError("path must be an absolute path", field="path")
        path = await asyncio.to_thread(raw.resolve)
        if not await asyncio.to_thread(path.exists):
            raise BadRequestError(f"no such file or folder: {path}", field="path")
        if any(path.is_relative_to(d) or d.is_relative_to(path) for d in self.owned_dirs):
            raise BadRequestError("that path holds memoryd's own files", field="path")
        is_dir = await asyncio.to_thread(path.is_dir)
        if owner(self.sources(), path) is None:
            self.added.append(Source(req.agent, path if is_dir else path.parent))
        if is_dir:
            files = [p for p, _ in await asyncio.to_thread(
                lambda: list(walk(path, self.candidate)))]
        else:
            files = [path]
        before = self.ingestor.stats.units
        if req.wait:
            await self.queue.process(files)
            await self.store.indexed()  # waited for: searchable, not only stored
            return IngestResponse(path=str(path), files=len(files),
                                  new_units=self.ingestor.stats.units - before,
                                  ignored=await asyncio.to_thread(self._ignored, files, req.agent))
        for f in files:
            self.queue.submit(f, urgent=True)
        return IngestResponse(path=str(path), files=len(files), new_units=None)

    def _ignored(self, files: list[Path], agent: str) -> list[dict[str, str]]:
        """Files just read that were not taken as transcripts, and why (POST /v1/ingest
        with wait: "1 files read, 0 new units" alone leaves a user guessing)."""
        out = []
        for f in files:
            seen = self.ingestor.seen.get(str(f))
            if seen is not None and seen.transcript:
                continue
            if seen is None and f.stat().st_size == 0:
                why = "empty file (read again once it has a complete line)"
            elif seen is None:
                continue
            elif agent == "auto":
                why = ("not a transcript of a known agent: its first line matches none of "
                       "the formats (pass --agent to force one)")
            else:
                why = f"not a {agent} transcript: its first line does not match that format"
            out.append({"path": str(f), "reason": why})
        return out
