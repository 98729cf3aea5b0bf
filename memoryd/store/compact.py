"""Compaction of an SQLite database at open: rewritten once (`VACUUM`) in the page size a
new database gets, and whenever a large share of it is free pages.

SQLite keeps a file's page size until the file is rewritten, and a dropped table's pages
stay in the file as free pages (m005 dropped the FTS5 copy of every unit's text: about
1 GB per million units). Units are appended in id order, and a unit that does not fit
in the rest of a page starts the next one: the larger the page, the less of it is left
empty (bench/README.md). The rewrite runs before the daemon's other connections open, in
rollback-journal mode (SQLite cannot change the page size of a WAL database), and needs
about two more copies of the file on disk while it runs; without that much free space,
or while another process holds the database, it is left for a later start.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FREE_SHARE = 0.25  # free pages above this share of the file are worth a rewrite...
FREE_MIN_BYTES = 64 << 20  # ...when they are this many bytes at least


@dataclass(frozen=True, slots=True)
class Layout:
    page_size: int
    pages: int
    free: int

    @property
    def bytes(self) -> int:
        return self.page_size * self.pages

    @property
    def free_bytes(self) -> int:
        return self.page_size * self.free


def layout(conn: sqlite3.Connection) -> Layout:
    return Layout(*(conn.execute(f"PRAGMA {p}").fetchone()[0]
                    for p in ("page_size", "page_count", "freelist_count")))


def why_compact(have: Layout, page_size: int) -> str | None:
    """Why a database of this layout is rewritten, or None."""
    if have.page_size < page_size:
        return f"page size {have.page_size} -> {page_size}"
    if have.free_bytes >= max(FREE_MIN_BYTES, have.bytes * FREE_SHARE):
        return f"{have.free_bytes / 1e6:.0f} MB of free pages"
    return None


def room_for(path: Path, size: int) -> str | None:
    """What is missing for a rewrite of a `size`-byte database at `path`: SQLite copies it
    to a temporary file, then back into the file with the original pages in a journal
    beside it."""
    need: dict[int, int] = {}
    for where, n in ((path.parent, size), (Path(tempfile.gettempdir()), size)):
        dev = os.stat(where).st_dev
        need[dev] = need.get(dev, 0) + n
        if shutil.disk_usage(where).free < need[dev]:
            return f"{where} has {shutil.disk_usage(where).free / 1e6:.0f} MB free"
    return None


def compact_if_due(conn: sqlite3.Connection, path: Path, page_size: int) -> bool:
    """Rewrite the database behind `conn` (the only connection the process has open to
    it, in WAL mode) when `why_compact` says so. Returns whether it was rewritten; any
    failure leaves the database as it was, in WAL mode, and is logged."""
    have = layout(conn)
    why = why_compact(have, page_size)
    if why is None:
        return False
    missing = room_for(path, have.bytes)
    if missing is not None:
        log.warning("database %s not compacted (%s): %s, the rewrite needs %.0f MB twice",
                    path, why, missing, have.bytes / 1e6)
        return False
    t0 = time.monotonic()
    busy = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute("PRAGMA busy_timeout=0")  # another process holds it: not this time
    try:
        mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
        if mode != "delete":
            raise sqlite3.OperationalError(f"journal mode stays {mode}")
        conn.execute(f"PRAGMA page_size={page_size}")
        conn.execute("VACUUM")
    except sqlite3.Error as e:
        log.warning("database %s not compacted (%s): %s", path, why, e)
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout={busy}")
        conn.execute("PRAGMA journal_mode=WAL")
    now = layout(conn)
    log.info("database %s compacted (%s): %.1f -> %.1f MB in %.1f s", path, why,
             have.bytes / 1e6, now.bytes / 1e6, time.monotonic() - t0)
    return True
