"""Files that could not be ingested, and when to try them again.

A file that fails (unreadable, the disk full under the store, an adapter bug the
per-line guard did not catch) is recorded here with its reason and retried with an
exponential backoff, never in a hot loop; the next success clears it. `status` lists
what is here, so a failing file is never reported as caught up. Bad *lines* are not
failures: they are skipped and counted in the file's cursor, and the last one is kept
here per file so status can say path:line and why.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FIRST_DELAY = 1.0
MAX_DELAY = 300.0
# errors that retrying cannot fix without the user acting: listed, but they do not
# keep `caught_up` false (a script waiting on it would wait forever)
_UNREADABLE = (PermissionError, IsADirectoryError, NotADirectoryError)
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


@dataclass
class Failure:
    path: str
    reason: str
    kind: str  # "unreadable" | "disk_full" | "store" | "error"
    since: float
    attempts: int
    next_try: float  # monotonic

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "reason": self.reason, "kind": self.kind,
                "since": round(self.since, 3), "attempts": self.attempts,
                "retry_in_s": round(max(0.0, self.next_try - time.monotonic()), 1)}


@dataclass(frozen=True, slots=True)
class BadLine:
    line_no: int
    reason: str
    count: int  # bad lines seen in this file by this process


def classify(e: BaseException) -> str:
    if isinstance(e, _UNREADABLE):
        return "unreadable"
    if isinstance(e, OSError) and e.errno in _DISK_FULL:
        return "disk_full"
    text = str(e).lower()
    if "disk is full" in text or "disk i/o error" in text:
        return "disk_full"
    if type(e).__module__ == "sqlite3":
        return "store"
    return "error"


class Failures:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.failing: dict[str, Failure] = {}
        self.bad_lines: dict[str, BadLine] = {}

    def record(self, path: str, e: BaseException) -> Failure:
        now = self._clock()
        old = self.failing.get(path)
        attempts = old.attempts + 1 if old else 1
        delay = min(MAX_DELAY, FIRST_DELAY * 2 ** (attempts - 1))
        f = Failure(path, f"{type(e).__name__}: {e}", classify(e),
                    old.since if old else time.time(), attempts, now + delay)
        self.failing[path] = f
        return f

    def clear(self, path: str) -> bool:
        return self.failing.pop(path, None) is not None

    def due(self, path: str) -> bool:
        """May `path` be tried now? False while it is backing off."""
        f = self.failing.get(path)
        return f is None or self._clock() >= f.next_try

    def bad_line(self, path: str, line_no: int, reason: str) -> None:
        old = self.bad_lines.get(path)
        self.bad_lines[path] = BadLine(line_no, reason, (old.count if old else 0) + 1)

    def blocking(self) -> list[Failure]:
        """Failures that keep ingest from being caught up (all but unreadable files)."""
        return [f for f in self.failing.values() if f.kind != "unreadable"]

    def latest(self) -> Failure | None:
        return max(self.failing.values(), key=lambda f: f.since, default=None)

    def report(self, bad_files: list[dict[str, Any]], limit: int = 50,
               failing: dict[str, Failure] | None = None) -> dict[str, Any]:
        """Status fields: the failing files (`failing`: a copy of `self.failing` taken
        earlier, by default the live map), and `bad_files` (path, stored bad-line count)
        with the last bad line and its reason where this process saw it."""
        failing = sorted((self.failing if failing is None else failing).values(),
                         key=lambda f: f.path)
        bad = []
        for row in bad_files:
            seen = self.bad_lines.get(row["path"])
            bad.append({**row, "last_line": seen.line_no if seen else None,
                        "last_reason": seen.reason if seen else None})
        return {"failing_files": [f.as_dict() for f in failing[:limit]],
                "failing_count": len(failing), "files_with_bad_lines": bad}
