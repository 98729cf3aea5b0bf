"""Index pages resident in this process, let go when the daemon rests.

tantivy maps its segment files read-only and shared; every page a search touched counts
in the process's RSS until the kernel is short of memory, so RSS grows with the corpus.
`release` finds the mappings of files under the index directory (`/proc/self/maps`) and
`madvise(MADV_DONTNEED)`s them: for a shared file mapping that only unmaps the pages
from this process (the data stays in the file and in the OS page cache; the next access
maps it back with a minor fault). The caller guarantees no index file is unmapped while
this runs (`SearchIndex.release_pages`: no writer, no reload), so an address range read
from the maps is still that file's when it is advised. Linux only; elsewhere a no-op.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from pathlib import Path

from memoryd.runtime.idle_release import libc as _libc

log = logging.getLogger(__name__)

MADV_DONTNEED = 4


def mappings(root: Path) -> list[tuple[int, int, str]]:
    """(start, end, path) of this process's read-only shared mappings of files under
    `root`."""
    prefix = str(root.resolve()) + "/"
    out = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) < 6 or not parts[5].startswith(prefix):
                    continue
                if parts[1][1] != "-" or parts[1][3] != "s":  # writable or private: skip
                    continue
                lo, hi = parts[0].split("-")
                out.append((int(lo, 16), int(hi, 16), parts[5].rstrip("\n")))
    except OSError:
        return []
    return out


def release(root: Path) -> int:
    """Advise away this process's mapped pages of the index files under `root`; the
    bytes of the ranges advised."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = _libc()
    if libc is None:
        return 0
    done = 0
    for lo, hi, path in mappings(root):
        if libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo),
                        ctypes.c_int(MADV_DONTNEED)) == 0:
            done += hi - lo
        else:
            log.debug("madvise %s: errno %d", path, ctypes.get_errno())
    return done
