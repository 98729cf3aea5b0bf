"""A quiet watch's wake-up on Linux: one inotify descriptor nobody reads events from.

After a quiet spell the watch (`memoryd.watcher.watch_changes`) stops stepping altogether
and waits for this descriptor to become readable, which the kernel does on the first
change under the watched directories: that first change is then read within one fast
step instead of two slow ones, and a daemon at rest wakes for nothing. watchfiles'
notifier keeps its own watches and collects the changes themselves; this only says
"something changed". Elsewhere (or when inotify refuses: too many directories, no
watches left) `arm` returns None and the watch keeps its slow step.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

MAX_DIRS = 20_000  # beyond this many directories, leave the watches to watchfiles alone
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
# modify, attrib, close_write, moved_from, moved_to, create, delete, delete_self, move_self
_MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    return _libc


class Wake:
    """An inotify descriptor watching every directory under some roots."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def arm(roots: tuple[Path, ...]) -> Wake | None:
    """Watch every directory under `roots` (a walk: call from a worker thread), or None
    where inotify is not there or refuses."""
    libc = _lib()
    if libc is None:
        return None
    fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        return None
    wake, n = Wake(fd), 0
    try:
        for root in roots:
            for d, _, _ in os.walk(root):
                n += 1
                if n > MAX_DIRS or libc.inotify_add_watch(fd, os.fsencode(d), _MASK) < 0:
                    if n > MAX_DIRS or ctypes.get_errno() == 28:  # ENOSPC: no watches left
                        wake.close()
                        return None
                    # a directory that went away during the walk: its parent's watch sees it
    except OSError:
        wake.close()
        return None
    return wake
