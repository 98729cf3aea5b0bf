"""The store's totals as `GET /v1/status` shows them: this machine's transcripts, ignored
files and bad lines, the sessions and units stored, and the files with the most bad lines.
Read in one call on the store's thread, so the numbers are of one moment; most are the
counters the triggers keep (memoryd.store.counters), not counts over whole tables."""

from __future__ import annotations

import sqlite3
from typing import Any

from memoryd.store.files import file_stats, files_with_bad_lines
from memoryd.store.sessions import count_sessions
from memoryd.store.units import count_units

# what status shows before the store was ever read (a shared database away from the start)
NO_TOTALS: dict[str, Any] = {"files": 0, "ignored_files": 0, "bad_lines": 0, "sessions": 0,
                             "units": 0, "bad_files": []}


def status_totals(conn: sqlite3.Connection, machine: str) -> dict[str, Any]:
    """files, ignored_files, bad_lines, sessions, units, bad_files (in status's order)."""
    return {**file_stats(conn, machine), "sessions": count_sessions(conn),
            "units": count_units(conn),
            "bad_files": files_with_bad_lines(conn, machine=machine)}
