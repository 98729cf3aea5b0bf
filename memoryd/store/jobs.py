"""The persistent job queue's rows.

A job is (kind, target) plus JSON params. At most one job per (kind, target) is
pending (a partial unique index): enqueueing again merges into it. A worker claims a
job with one UPDATE in the writer's transaction, so a job is never handed out twice,
and never while another job on the same target runs (single-flight per target).

In fleet mode (PostgreSQL) every machine claims from the namespace's one table: the
candidate row is locked `FOR UPDATE SKIP LOCKED`, so two machines never take the same
job and neither waits on the other, and a claim carries a lease (`claimed_by`,
`lease_until`) its runner renews. A job still `running` whose lease ran out belongs to
a machine that died: it is claimable again (taken over). SQLite is one machine: its
claim stays the single writer's UPDATE, and a crash's jobs are resumed at start.

A lease is in the database's time (`clock_timestamp()`), written and compared there:
machines whose clocks disagree (a VM ten minutes ahead) agree on whose lease ran out.
Due times (`next_run_at`) stay in the daemon's clock, which the tests set.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoryd.store.counters import read_counters, with_prefix

Params = dict[str, Any]
Merge = Callable[[Params, Params], Params]

STATES = ("pending", "running", "done", "failed")


@dataclass(frozen=True, slots=True)
class JobRow:
    id: int
    kind: str
    target: str
    state: str
    reason: str | None
    priority: int
    params: Params
    attempts: int
    next_run_at: float
    last_error: str | None
    result: Params | None
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    claimed_by: str | None = None
    lease_until: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}


def _row(r: sqlite3.Row | None) -> JobRow | None:
    if r is None:
        return None
    d = dict(r)
    d["params"] = json.loads(d["params"] or "{}")
    d["result"] = json.loads(d["result"]) if d["result"] else None
    return JobRow(**d)


def enqueue_job(conn: sqlite3.Connection, kind: str, target: str, *, params: Params,
                reason: str | None, run_at: float, now: float, priority: int = 0,
                merge: Merge | None = None) -> tuple[int, bool]:
    """Add a pending job, or merge into the pending one of the same (kind, target):
    its params become `merge(old, new)` (default: new keys win), it runs no later than
    `run_at`, and keeps the higher priority. Returns (job id, created)."""
    old = _row(conn.execute("SELECT * FROM jobs WHERE kind = ? AND target = ? "
                            "AND state = 'pending'", (kind, target)).fetchone())
    if old is not None:
        merged = merge(old.params, params) if merge else {**old.params, **params}
        conn.execute(
            "UPDATE jobs SET params = ?, next_run_at = least(next_run_at, ?), "
            "priority = greatest(priority, ?), reason = coalesce(?, reason), updated_at = ? "
            "WHERE id = ?",
            (json.dumps(merged), run_at, priority, reason, now, old.id))
        return old.id, False
    job_id = conn.execute(
        "INSERT INTO jobs (kind, target, state, reason, priority, params, next_run_at, "
        "created_at, updated_at) VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?) RETURNING id",
        (kind, target, reason, priority, json.dumps(params), run_at, now, now)).fetchone()[0]
    return int(job_id), True


LEASE_S = 60.0  # a claim's lease; the runner renews it every third of that
DB_CLOCK = "extract(epoch FROM clock_timestamp())::double precision"


def _fleet(conn: sqlite3.Connection) -> bool:
    return getattr(conn, "engine", "sqlite") == "postgresql"


def lease_now(conn: sqlite3.Connection, local: float) -> float:
    """The time leases are measured in: the database's in a fleet (one clock for every
    machine), `local` (the daemon's) in SQLite, where one machine is the only one."""
    if not _fleet(conn):
        return local
    return float(conn.execute(f"SELECT {DB_CLOCK}").fetchone()[0])


def claim_job(conn: sqlite3.Connection, now: float, min_priority: int = 0, *,
              machine: str = "", lease_s: float = LEASE_S) -> JobRow | None:
    """Take the most urgent due job (of at least `min_priority`) whose target has no
    running job, for `machine`, leased until now + `lease_s`. In fleet mode a running
    job whose lease has expired is due too (its machine died), and the row is locked
    with SKIP LOCKED (another machine claiming at the same moment takes another)."""
    if _fleet(conn):  # leases in the database's time
        due = ("((j.state = 'pending' AND j.next_run_at <= :now) "
               f"OR (j.state = 'running' AND j.lease_until < {DB_CLOCK}))")
        live = f"AND r.id != j.id AND r.lease_until >= {DB_CLOCK}"
        lock = " FOR UPDATE OF j SKIP LOCKED"
        lease = f"{DB_CLOCK} + :lease_s"
    else:
        due, live, lock = "j.state = 'pending' AND j.next_run_at <= :now", "", ""
        lease = ":now + :lease_s"
    return _row(conn.execute(
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at = :now, "
        f"updated_at = :now, claimed_by = :machine, lease_until = {lease} WHERE id = ("
        f"  SELECT j.id FROM jobs j WHERE {due} "
        "  AND j.priority >= :min AND NOT EXISTS (SELECT 1 FROM jobs r "
        f"  WHERE r.state = 'running' AND r.target = j.target {live}) "
        f"  ORDER BY j.priority DESC, j.next_run_at, j.id LIMIT 1{lock}) "
        "AND state IN ('pending', 'running') RETURNING *",
        {"now": now, "min": min_priority, "machine": machine,
         "lease_s": lease_s}).fetchone())


def renew_lease(conn: sqlite3.Connection, job_id: int, machine: str, now: float,
                lease_s: float = LEASE_S) -> bool:
    """Extend a running job's lease to `lease_s` from now (the database's now, in a
    fleet); False when it is no longer this machine's (its lease ran out and another
    machine took it over, or it was settled)."""
    return conn.execute(
        "UPDATE jobs SET lease_until = ? WHERE id = ? AND state = 'running' "
        "AND claimed_by = ?", (lease_now(conn, now) + lease_s, job_id, machine)
    ).rowcount == 1


def finish_job(conn: sqlite3.Connection, job_id: int, result: Params, now: float,
               machine: str | None = None) -> bool:
    """Mark a running job done; with `machine`, only while that machine still holds it.
    Returns whether it did."""
    mine = "" if machine is None else " AND claimed_by = ?"
    return conn.execute(
        "UPDATE jobs SET state = 'done', result = ?, last_error = NULL, finished_at = ?, "
        f"updated_at = ? WHERE id = ? AND state = 'running'{mine}",
        (json.dumps(result), now, now, job_id, *(() if machine is None else (machine,)))
    ).rowcount == 1


def retry_job(conn: sqlite3.Connection, job_id: int, error: str, run_at: float,
              now: float, merge: Merge | None = None) -> int:
    """Back to pending for a later attempt. When another pending job of the same
    (kind, target) was enqueued meanwhile, this one is folded into it (params merged:
    the newer job does the same work) and marked done. Returns the id of the job that
    will do the work."""
    row = _row(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())
    assert row is not None
    twin = _fold(conn, row, now, merge)
    if twin is not None:
        conn.execute("UPDATE jobs SET next_run_at = greatest(next_run_at, ?), last_error = ? "
                     "WHERE id = ?", (run_at, error, twin))
        return twin
    conn.execute(
        "UPDATE jobs SET state = 'pending', last_error = ?, next_run_at = ?, updated_at = ? "
        "WHERE id = ? AND state = 'running'", (error, run_at, now, job_id))
    return job_id


def _fold(conn: sqlite3.Connection, job: JobRow, now: float, merge: Merge | None) -> int | None:
    """Fold a running job into the pending twin of the same (kind, target), if any."""
    twin = _row(conn.execute("SELECT * FROM jobs WHERE kind = ? AND target = ? "
                             "AND state = 'pending'", (job.kind, job.target)).fetchone())
    if twin is None:
        return None
    merged = merge(job.params, twin.params) if merge else {**job.params, **twin.params}
    conn.execute("UPDATE jobs SET params = ?, priority = greatest(priority, ?), updated_at = ? "
                 "WHERE id = ?", (json.dumps(merged), job.priority, now, twin.id))
    conn.execute("UPDATE jobs SET state = 'done', finished_at = ?, updated_at = ?, result = ? "
                 "WHERE id = ?", (now, now, json.dumps({"merged_into": twin.id}), job.id))
    return twin.id


def fail_job(conn: sqlite3.Connection, job_id: int, error: str, now: float) -> None:
    conn.execute(
        "UPDATE jobs SET state = 'failed', last_error = ?, finished_at = ?, updated_at = ? "
        "WHERE id = ?", (error, now, now, job_id))


def recover_jobs(conn: sqlite3.Connection, now: float, max_attempts: int,
                 merge_for: Callable[[str], Merge | None] | None = None,
                 machine: str = "") -> tuple[int, int]:
    """Jobs this machine left `running` when it crashed: back to pending (or folded
    into a newer pending twin), or failed when they have used all their attempts (a job
    that kills the process must not loop forever). Another machine's running jobs are
    its own (taken over only when their lease expires). Returns (resumed, failed)."""
    mine = "(claimed_by IS NULL OR claimed_by = :machine)"
    failed = conn.execute(
        "UPDATE jobs SET state = 'failed', updated_at = :now, finished_at = :now, "
        "last_error = coalesce(last_error, 'interrupted too many times') "
        f"WHERE state = 'running' AND attempts >= :max AND {mine}",
        {"now": now, "max": max_attempts, "machine": machine}).rowcount
    resumed = 0
    for r in conn.execute(f"SELECT * FROM jobs WHERE state = 'running' AND {mine}",
                          {"machine": machine}).fetchall():
        job = _row(r)
        assert job is not None
        merge = merge_for(job.kind) if merge_for else None
        if _fold(conn, job, now, merge) is None:
            conn.execute("UPDATE jobs SET state = 'pending', next_run_at = ?, updated_at = ? "
                         "WHERE id = ?", (now, now, job.id))
        resumed += 1
    return resumed, failed


def get_job(conn: sqlite3.Connection, job_id: int) -> JobRow | None:
    return _row(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())


def list_jobs(conn: sqlite3.Connection, *, state: str | None = None, kind: str | None = None,
              limit: int = 100) -> list[JobRow]:
    clauses, args = [], []
    for col, val in (("state", state), ("kind", kind)):
        if val is not None:
            clauses.append(f"{col} = ?")
            args.append(val)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    rows = conn.execute(f"SELECT * FROM jobs {where} ORDER BY id DESC LIMIT ?",
                        (*args, limit)).fetchall()
    return [j for j in map(_row, rows) if j is not None]


def job_counts(conn: sqlite3.Connection) -> dict[str, Any]:
    counts: dict[str, Any] = dict.fromkeys(STATES, 0)
    counts.update(with_prefix(read_counters(conn), "jobs:"))  # kept by triggers (m009)
    row = conn.execute("SELECT min(next_run_at) FROM jobs WHERE state = 'pending'").fetchone()
    counts["next_run_at"] = row[0]
    err = conn.execute("SELECT kind, target, last_error, updated_at FROM jobs "
                       "WHERE last_error IS NOT NULL ORDER BY updated_at DESC LIMIT 1").fetchone()
    counts["last_error"] = dict(err) if err else None
    return counts


def waiting_targets(conn: sqlite3.Connection, kind: str) -> set[str]:
    """Targets of the pending or running jobs of a kind."""
    return {r[0] for r in conn.execute(
        "SELECT target FROM jobs WHERE kind = ? AND state IN ('pending', 'running')",
        (kind,))}


def next_due(conn: sqlite3.Connection) -> float | None:
    row = conn.execute("SELECT min(next_run_at) FROM jobs WHERE state = 'pending'").fetchone()
    return row[0]


def prune_jobs(conn: sqlite3.Connection, before: float) -> int:
    """Forget finished jobs older than `before`."""
    return conn.execute("DELETE FROM jobs WHERE state IN ('done', 'failed') AND updated_at < ?",
                        (before,)).rowcount


def claim_once(conn: sqlite3.Connection, kind: str, key: str, machine: str, now: float,
               window_s: float | None = None) -> bool:
    """Claim a piece of fleet-wide work (`kind`, `key`), such as a day's scheduled
    consolidation, for `machine`: True for the first claimer only. With `window_s`, a
    claim older than that may be taken again (the same work at its next firing). The
    primary key decides between machines claiming at the same moment."""
    stale = -1.0 if window_s is None else now - window_s
    row = conn.execute(
        "INSERT INTO fleet_once (kind, key, machine, claimed_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (kind, key) DO UPDATE SET machine = excluded.machine, "
        "claimed_at = excluded.claimed_at WHERE fleet_once.claimed_at < ? RETURNING machine",
        (kind, key, machine, now, stale)).fetchone()
    return row is not None
