"""The watch's doorbell on Linux: one inotify descriptor whose events nobody parses.

The watch (`memoryd.watcher.watch_changes`) does not step while nothing changes: it waits
for this descriptor to become readable, which the kernel does on the first change under
the watched directories, drains it, and has watchfiles' notifier collect the changes at a
short step. A lone appended line is then read ~10 ms after its write instead of the
50-100 ms a 50 ms step takes, and a daemon at rest wakes for nothing. watchfiles' notifier
keeps its own watches and collects the changes themselves; this only says "something
changed" (directories made later are added with `add_tree`). Elsewhere (or when inotify
refuses: too many directories, no watches left) `arm` returns None and the watch steps.
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
# modify, attrib, moved_from, moved_to, create, delete, delete_self, move_self. Not
# close_write: a writer's close comes after its modify, rang again for nothing the
# notifier reports, and held the next collect at the slower step
_MASK = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
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
        self.dirs = 0

    def drain(self) -> None:
        """Read the events waiting (their content does not matter), so the descriptor
        turns readable again only on the next change."""
        with contextlib.suppress(OSError):  # BlockingIOError: nothing (more) to read
            while os.read(self.fd, 65536):
                pass

    def add_tree(self, top: Path) -> bool:
        """Watch a directory made after `arm` and every directory under it (a walk: call
        from a worker thread). False when inotify refuses (no watches left, too many
        directories): the caller falls back to stepping."""
        libc = _lib()
        if libc is None:
            return False
        try:
            for d, _, _ in os.walk(top):
                self.dirs += 1
                if self.dirs > MAX_DIRS or libc.inotify_add_watch(
                        self.fd, os.fsencode(d), _MASK) < 0 and ctypes.get_errno() == 28:
                    return False
                # any other refusal: a directory gone during the walk
        except OSError:
            return False
        return True

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
    wake = Wake(fd)
    # ENOSPC (no watches left) or too many directories: None. A directory that went away
    # during the walk is no refusal: its parent's watch sees it go.
    if not all(wake.add_tree(root) for root in roots):
        wake.close()
        return None
    return wake
