"""The startup backfill (`Backfill`): the catch-up scan's files read through the ingest
queue, whether that is done, and its progress: files and bytes done out of what the scan
found, the rate and the time left, measured from the unread bytes `status` counts anyway;
`log_progress` writes a line every `interval` seconds while it runs, so a long first
start is not silent. And `JobsWait`, the policy that keeps background jobs off the CPU
while the backfill runs and while an index catches up with a backlog."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from memoryd.ingest.ingestor import Ingestor
    from memoryd.ingest.queue import IngestQueue
    from memoryd.ingest.watcher import Watcher

log = logging.getLogger(__name__)

LOG_INTERVAL_S = 10.0
# background jobs wait for a fleet member's index backlog at most this long at a stretch: a
# member fed a full page at every poll without pause would otherwise keep them waiting
JOBS_WAIT_MAX_S = 600.0


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


class _Seen(Protocol):
    offset: int


def offsets(seen: Mapping[str, _Seen]) -> dict[str, int]:
    return {p: s.offset for p, s in seen.items()}


def read_paths_since(baseline: Mapping[str, int],
                     seen: Mapping[str, _Seen]) -> tuple[set[str], int]:
    """Files and bytes read since `baseline` (the offsets when the backfill began)."""
    files: set[str] = set()
    nbytes = 0
    for path, s in list(seen.items()):
        before = baseline.get(path)
        if before is None or s.offset != before:
            files.add(path)
            nbytes += max(0, s.offset - (before or 0))
    return files, nbytes


@dataclass
class BackfillProgress:
    files_total: int = 0
    bytes_total: int = 0
    started: float = field(default_factory=time.time)
    finished: float | None = None
    files_done: int = 0
    bytes_done: int = 0

    def update(self, *, files_read: int, bytes_read: int, pending_files: int,
               unread_bytes: int) -> None:
        """What has been read since the backfill began, and what is left (live appends
        count too, so the totals can grow; done never goes backwards)."""
        self.files_done = max(self.files_done, files_read)
        self.bytes_done = max(self.bytes_done, bytes_read)
        self.files_total = max(self.files_total, self.files_done + pending_files)
        self.bytes_total = max(self.bytes_total, self.bytes_done + unread_bytes)

    def finish(self, now: float | None = None) -> None:
        self.finished = time.time() if now is None else now
        self.files_done, self.bytes_done = self.files_total, self.bytes_total

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        elapsed = max(0.0, (self.finished or now) - self.started)
        rate = self.bytes_done / elapsed if elapsed > 0 else 0.0
        left = self.bytes_total - self.bytes_done
        eta = 0.0 if self.finished or left <= 0 else (left / rate if rate > 0 else None)
        pct = 100.0 * self.bytes_done / self.bytes_total if self.bytes_total else 100.0
        return {"done": self.finished is not None, "files_total": self.files_total,
                "files_done": self.files_done, "bytes_total": self.bytes_total,
                "bytes_done": self.bytes_done, "percent": round(pct, 1),
                "elapsed_s": round(elapsed, 1), "rate_bytes_s": round(rate, 1),
                "eta_s": None if eta is None else round(eta, 1)}

    def line(self, now: float | None = None) -> str:
        s = self.snapshot(now)
        eta = "-" if s["eta_s"] is None else f"{s['eta_s']:.0f}s"
        return (f"{s['files_done']}/{s['files_total']} files, "
                f"{human_bytes(s['bytes_done'])}/{human_bytes(s['bytes_total'])} "
                f"({s['percent']:.0f}%), {human_bytes(s['rate_bytes_s'])}/s, ETA {eta}")


async def log_progress(progress: BackfillProgress, refresh: Callable[[], Awaitable[None]],
                       interval: float = LOG_INTERVAL_S) -> None:
    """Until the backfill finishes (cancel it then): refresh and log one line per
    interval."""
    while progress.finished is None:
        await asyncio.sleep(interval)
        if progress.finished is not None:
            break
        try:
            await refresh()
        except Exception:
            log.debug("backfill progress refresh failed", exc_info=True)
            continue
        log.info("backfill: %s", progress.line())


class Backfill:
    def __init__(self, ingestor: Ingestor, queue: IngestQueue, watcher: Watcher) -> None:
        self.ingestor = ingestor
        self.queue = queue
        self.watcher = watcher
        self.done = False
        self.progress = BackfillProgress()
        self._baseline: dict[str, int] = {}

    async def run(self, settle: Callable[[], Awaitable[None]]) -> None:
        """Scan the sources, read what is new, and once the queue has drained and
        `settle` (the daemon's WAL truncation) has run, count as done."""
        t0 = time.monotonic()
        self._baseline = offsets(self.ingestor.seen)
        self.progress = BackfillProgress()
        queued = await self.watcher.reconcile()
        await self.refresh()
        log.info("backfill: %d files, %s to read", self.progress.files_total,
                 human_bytes(self.progress.bytes_total))
        logger = asyncio.create_task(log_progress(self.progress, self.refresh))
        try:
            await self.queue.drained()
        finally:
            logger.cancel()
        await self.refresh()
        self.progress.finish()
        await settle()
        self.done = True
        log.info("backfill done: %d files read in %.1fs (%s)", queued, time.monotonic() - t0,
                 self.progress.line())

    async def refresh(self) -> None:
        await self.unread_bytes(update=True)

    async def unread_bytes(self, *, update: bool) -> int:
        """Unread bytes, counted in a worker thread over a copy of what the ingestor knows
        now; the backfill's progress (`update`) is counted from the same copy. (Counted
        from the live map after the thread returned, a file read meanwhile was both read
        and unread: one file's size too many in `bytes_total`, for good.)"""
        waiting = self.queue.queued()
        seen, todo = self.ingestor.unread_view(waiting)
        unread = await asyncio.to_thread(self.ingestor.unread_bytes, todo, seen)
        if update:
            read, nbytes = read_paths_since(self._baseline, seen)
            # a file read in part and queued again for the rest counts once: the pending
            # files are those waiting that have not been read from yet
            pending = {str(p) for p in waiting} - read
            self.progress.update(files_read=len(read), bytes_read=nbytes,
                                 pending_files=len(pending), unread_bytes=unread)
        return unread


class JobsWait:
    """Background jobs (summaries, one-liners) wait while the backfill runs and, on a
    fleet member, while its index still builds or pages a backlog of the feed: run beside
    it they took the CPU the niced feed writer needed, so it was caught up late (issue 14,
    bench/README "pgcatch"). A SQLite daemon's index keeps up with its own backfill; a
    fleet member's follows it through the feed, after. They wait for the index `max_s`
    at most at a stretch, then run beside it. Called as the job queue's `busy()`."""

    def __init__(self, backfill_done: Callable[[], bool], index_backlog: Callable[[], bool],
                 max_s: float = JOBS_WAIT_MAX_S) -> None:
        self.backfill_done = backfill_done
        self.index_backlog = index_backlog
        self.max_s = max_s
        self._backlog_since: float | None = None  # jobs have waited for the index since
        self._backlog_told = False  # that they no longer wait was logged

    def __call__(self) -> bool:
        if not self.backfill_done():
            return True
        if not self.index_backlog():
            self._backlog_since, self._backlog_told = None, False
            return False
        now = time.monotonic()
        if self._backlog_since is None:
            self._backlog_since = now
        waited = now - self._backlog_since
        if waited < self.max_s:
            return True
        if not self._backlog_told:
            self._backlog_told = True
            log.info("background jobs run beside the index's backlog: it has lasted %.0f s",
                     waited)
        return False
