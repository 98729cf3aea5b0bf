"""A PostgreSQL server under a bench: its CPU (`server_cpu_s`), and what its clients wait
on, sampled while a bench runs (bench/fleet.py backfill): every `interval` seconds one look
at `pg_stat_activity` (each client backend of the database: running, waiting and on
what, or idle inside a transaction while the daemon works in Python) and at `pg_locks`
(the locks asked for and not granted, by type and relation). A backend is a daemon's
connection, so the shares say where the daemons' database time goes: `Lock:*` waits are
contention between writers (a row, the notify queue, a relation), `IO:WALSync` /
`LWLock:WALWrite` the commit's fsync, `CPU` the server working."""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

ACTIVITY = """SELECT state, wait_event_type, wait_event, left(query, 30) FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend'
  AND pid <> pg_backend_pid() AND state <> 'idle'"""
BLOCKED = """SELECT l.locktype, coalesce(c.relname, l.mode) FROM pg_locks l
LEFT JOIN pg_class c ON c.oid = l.relation WHERE NOT l.granted"""


def server_cpu_s(server: Any) -> float:
    """utime + stime of the PostgreSQL server and every backend it forked (the live ones'
    and those that have exited), in seconds."""
    pid_file = server.datadir / "postmaster.pid"
    root = int(pid_file.read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(d.name), int(fields[1])
        if pid == root:  # its own time and its reaped backends' (cutime + cstime)
            total += sum(int(f) for f in fields[11:15]) / tick
        elif ppid == root:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def proc_cpu_s(pid: int) -> float:
    """utime + stime of one process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_sched_s(pid: int) -> tuple[float, float]:
    """(ran on a CPU, waited on a run queue for one) in seconds, over one process's live
    threads (the scheduler's `schedstat`; the OS does not know Python's thread names).
    What a thread's wall time has beyond these two it slept: on a socket (a database
    round trip), a queue, a timer or the GIL."""
    ran = waited = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            run_ns, wait_ns, _ = (task / "schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        ran += int(run_ns) / 1e9
        waited += int(wait_ns) / 1e9
    return ran, waited


def server_sched_s(server: Any) -> tuple[float, float]:
    """(ran, waited for a CPU) in seconds over the server's live processes (`schedstat`:
    a backend that has exited is not counted)."""
    root = int((server.datadir / "postmaster.pid").read_text().split()[0])
    ran = waited = 0.0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if int(d.name) != root and ppid != root:
                continue
            run_ns, wait_ns, _ = (d / "schedstat").read_text().split()
        except (OSError, ValueError, IndexError):
            continue
        ran += int(run_ns) / 1e9
        waited += int(wait_ns) / 1e9
    return ran, waited


class PgSampler:
    def __init__(self, url: str, interval: float = 0.2) -> None:
        self.url, self.interval = url, interval
        self.samples = 0
        self.states: Counter[str] = Counter()  # backend-samples by what the backend did
        self.blocked: Counter[str] = Counter()  # not-granted locks, by type and relation
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-sampler", daemon=True)

    def __enter__(self) -> PgSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(self.interval):
                try:
                    rows = conn.execute(ACTIVITY).fetchall()
                    locks = conn.execute(BLOCKED).fetchall()
                except psycopg.Error:
                    continue
                self.samples += 1
                for state, wtype, wevent, query in rows:
                    if state == "active":
                        self.states[f"{wtype}:{wevent}" if wtype else "CPU"] += 1
                    else:  # idle in transaction: the daemon works between statements
                        self.states[f"{state} after {query.split('(')[0].strip()!r}"] += 1
                for kind, rel in locks:
                    self.blocked[f"{kind} {rel}"] += 1

    def summary(self, top: int = 4) -> dict[str, Any]:
        busy = sum(self.states.values())
        lock = sum(n for k, n in self.states.items() if k.startswith("Lock:"))
        return {
            "samples": self.samples,
            # backends in a transaction at a look, on average (of the phase's daemons)
            "in_tx": busy / self.samples if self.samples else 0.0,
            "lock_share": lock / busy if busy else 0.0,
            "top": ", ".join(f"{k} {100 * n / busy:.0f}%"
                             for k, n in self.states.most_common(top)) if busy else "-",
            "blocked": ", ".join(f"{k} x{n}" for k, n in self.blocked.most_common(3)) or "none",
        }
