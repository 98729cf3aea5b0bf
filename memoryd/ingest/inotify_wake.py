"""The watch's doorbell on Linux: one inotify descriptor whose events nobody parses.

The watch (`memoryd.ingest.watcher.watch_changes`) does not step while nothing changes: it waits
for this descriptor to become readable, which the kernel does on the first change under
the watched directories, drains it, and has watchfiles' notifier collect the changes at a
short step. A lone appended line is then read ~10 ms after its write instead of the
50-100 ms a 50 ms step takes, and a daemon at rest wakes for nothing. watchfiles' notifier
keeps its own watches and collects the changes themselves; this only says "something
changed" (directories made later are added with `add_tree`). Elsewhere (or when inotify
refuses: too many directories, no watches left) `arm` returns None and the watch steps.

The walk keeps its own stack (a tree ~1,000 deep made `os.walk` raise RecursionError),
and the descriptor is closed on every way out of `arm` that does not return it: a leaked
one counts against the uid's 128 inotify instances, which every other program of the
user shares. Why inotify refused is kept (`refusal`): out of instances (EMFILE) or of
watches (ENOSPC), the notifier's own inotify would fail too, so the watch polls and
status says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

MAX_DIRS = 20_000  # beyond this many directories, leave the watches to watchfiles alone
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
# modify, attrib, moved_from, moved_to, create, delete, delete_self, move_self. Not
# close_write: a writer's close comes after its modify, rang again for nothing the
# notifier reports, and held the next collect at the slower step
_MASK = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
_ENOSPC, _EMFILE = 28, 24
LIMITS = {_ENOSPC: "no inotify watches left (fs.inotify.max_user_watches)",
          _EMFILE: "no inotify instances left (fs.inotify.max_user_instances or open files)"}
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
        self.refusal: str | None = None  # a kernel limit that refused a watch (LIMITS)

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
        for d in _dirs(top):
            self.dirs += 1
            if self.dirs > MAX_DIRS:
                return False
            if libc.inotify_add_watch(self.fd, d, _MASK) < 0 and ctypes.get_errno() == _ENOSPC:
                self.refusal = LIMITS[_ENOSPC]
                return False
            # any other refusal: a directory gone during the walk
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _dirs(top: Path) -> Iterator[bytes]:
    """`top` and every directory under it, symlinks not followed, with a stack of its own
    (no recursion: any depth). Unreadable or vanished directories are skipped."""
    stack = [os.fsencode(top)]
    while stack:
        d = stack.pop()
        yield d
        try:
            with os.scandir(d) as it:
                stack.extend(e.path for e in it if _is_dir(e))
        except OSError:
            continue


def _is_dir(e: os.DirEntry[bytes]) -> bool:
    try:
        return e.is_dir(follow_symlinks=False)
    except OSError:
        return False


def arm(roots: tuple[Path, ...], why: list[str] | None = None) -> Wake | None:
    """Watch every directory under `roots` (a walk: call from a worker thread), or None
    where inotify is not there or refuses; a kernel limit that refused it is appended to
    `why` (LIMITS' text). The descriptor never outlives a None."""
    libc = _lib()
    if libc is None:
        return None
    fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        if why is not None and ctypes.get_errno() in LIMITS:
            why.append(LIMITS[ctypes.get_errno()])
        return None
    wake = Wake(fd)
    ok = False
    try:
        # ENOSPC (no watches left) or too many directories: None. A directory that went
        # away during the walk is no refusal: its parent's watch sees it go.
        ok = all(wake.add_tree(root) for root in roots)
    finally:
        if not ok:
            wake.close()
            if why is not None and wake.refusal:
                why.append(wake.refusal)
    return wake if ok else None
