"""The namespace's memory folder in the store (fleet mode): one row per file (MEMORY.md,
HISTORY.md, `YYYY-MM-DD.md`), its text and a version raised by every write, compared and
swapped (a write names the version it read). A NULL body is a removed file (a daily note
folded into HISTORY.md). And the leases on fleet-wide firings (`fleet_once`): claimed,
renewed while running, finished; an expired unfinished one is taken over. Leases are
in the database's time in a fleet (`store.jobs.lease_now`), so a machine whose clock
runs ahead does not see a live claimer's lease as run out. Plain sync functions
`(conn, ...)` run on the store's thread."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from memoryd.store.jobs import lease_now


def versions(conn: sqlite3.Connection) -> dict[str, int]:
    """Every file's version: the cheap check a machine runs every few seconds."""
    return {r[0]: int(r[1]) for r in conn.execute("SELECT name, version FROM memory_docs")}


def get(conn: sqlite3.Connection, name: str) -> tuple[str | None, int] | None:
    """(body, version), or None when no machine has written it yet."""
    row = conn.execute("SELECT body, version FROM memory_docs WHERE name = ?",
                       (name,)).fetchone()
    return None if row is None else (row[0], int(row[1]))


def put(conn: sqlite3.Connection, name: str, body: str | None, expect: int,
        machine: str) -> int | None:
    """Write `body` if the file is still at version `expect` (0: not there yet): the new
    version, or None when another machine wrote first (read again and merge)."""
    now = time.time()
    if expect == 0:
        row = conn.execute(
            "INSERT INTO memory_docs (name, body, version, machine, updated_at) VALUES "
            "(?, ?, 1, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING version",
            (name, body, machine, now)).fetchone()
    else:
        row = conn.execute(
            "UPDATE memory_docs SET body = ?, version = version + 1, machine = ?, "
            "updated_at = ? WHERE name = ? AND version = ? RETURNING version",
            (body, machine, now, name, expect)).fetchone()
    return None if row is None else int(row[0])


# -- leases on fleet-wide firings -----------------------------------------------------


def claim(conn: sqlite3.Connection, kind: str, key: str, machine: str, now: float,
          wall: float, lease_s: float, window_s: float | None = None) -> bool:
    """Claim a firing for `machine`, leased for `lease_s` from `wall` (the real time; `now`
    is the daemon's clock, which a test may set): True for one claimer. Taken again when
    its claim is older than `window_s` (the same work's next firing) or its lease ran out
    unfinished (the claimer died)."""
    stale = -1.0 if window_s is None else now - window_s
    wall = lease_now(conn, wall)
    row = conn.execute(
        "INSERT INTO fleet_once (kind, key, machine, claimed_at, lease_until) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, key) DO UPDATE SET "
        "machine = excluded.machine, claimed_at = excluded.claimed_at, "
        "lease_until = excluded.lease_until, done_at = NULL "
        "WHERE fleet_once.claimed_at < ? OR (fleet_once.done_at IS NULL AND "
        "fleet_once.lease_until IS NOT NULL AND fleet_once.lease_until < ?) "
        "RETURNING machine", (kind, key, machine, now, wall + lease_s, stale, wall)).fetchone()
    return row is not None


def renew(conn: sqlite3.Connection, kind: str, key: str, machine: str, wall: float,
          lease_s: float) -> bool:
    """Keep holding a firing for `lease_s` more (from `wall`, or the database's now in a
    fleet); False when it was lost (another machine took it over)."""
    return conn.execute(
        "UPDATE fleet_once SET lease_until = ? WHERE kind = ? AND key = ? AND machine = ? "
        "AND done_at IS NULL", (lease_now(conn, wall) + lease_s, kind, key, machine)
    ).rowcount == 1


def finish(conn: sqlite3.Connection, kind: str, key: str, machine: str, now: float) -> bool:
    return conn.execute(
        "UPDATE fleet_once SET done_at = ? WHERE kind = ? AND key = ? AND machine = ? "
        "AND done_at IS NULL", (now, kind, key, machine)).rowcount == 1


def expired(conn: sqlite3.Connection, kind: str, now: float) -> list[dict[str, Any]]:
    """Firings claimed, not finished, whose lease ran out: a dead claimer's work."""
    now = lease_now(conn, now)
    return [dict(r) for r in conn.execute(
        "SELECT key, machine, claimed_at, lease_until FROM fleet_once WHERE kind = ? "
        "AND done_at IS NULL AND lease_until IS NOT NULL AND lease_until < ? ORDER BY key",
        (kind, now))]
