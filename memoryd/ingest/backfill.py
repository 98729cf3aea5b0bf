"""Progress of the first (or any startup) backfill: files and bytes done out of what the
catch-up scan found, the rate and the time left. The daemon feeds it the queue depth
and the unread bytes it measures for `status` anyway; `log_progress` writes a line every
`interval` seconds while the backfill runs, so a long first start is not silent."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

LOG_INTERVAL_S = 10.0


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
