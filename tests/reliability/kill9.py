"""kill -9 during backfill, live appends and summaries; then restart. Shared by the CI
test (a few runs) and bench/kill9.py (50+ runs).

Each run starts memoryd (a subprocess) on the same home, lets it work for a random
moment while a thread appends lines to live transcripts and summary jobs are queued,
then SIGKILLs it. After the last run memoryd is started once more and left to catch up.
Then the store must hold every line exactly once (0 lost, 0 duplicated units) and every
job ever queued must still be there, none left `running` by a dead process.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.client import ApiError, DaemonNotRunning, MemorydClient


@dataclass
class Outcome:
    runs: int = 0
    expected_units: int = 0
    units: int = 0
    duplicated: int = 0
    jobs_seen: int = 0
    jobs_lost: int = 0
    jobs_stuck_running: int = 0
    kill_points: list[int] = field(default_factory=list)  # units stored at each kill

    @property
    def lost(self) -> int:
        return max(0, self.expected_units - self.units + self.duplicated)

    def ok(self) -> bool:
        return (self.units == self.expected_units and not self.duplicated
                and not self.jobs_lost and not self.jobs_stuck_running)


def write_corpus(src: Path, files: int, lines: int) -> int:
    for i in range(files):
        d = src / f"p{i % 5}"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / f"s{i}.jsonl", "w") as f:
            for j in range(lines):
                f.write(json.dumps({"role": "user" if j % 2 == 0 else "assistant",
                                    "content": f"file {i} line {j} 数据 " + "lorem " * 30,
                                    "id": f"{i}:{j}"}) + "\n")
    return files * lines


class Appender(threading.Thread):
    """Appends whole lines to a few live transcripts while `live` is set (while a memoryd
    is up: appends during the minutes a busy machine takes to start one would only pile
    up work for the last run), until stopped; `written` counts lines fully written."""

    def __init__(self, src: Path, files: int = 3, interval: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.paths = [src / "live" / f"l{i}.jsonl" for i in range(files)]
        self.paths[0].parent.mkdir(parents=True, exist_ok=True)
        self.interval = interval
        self.written = 0
        self.halt = threading.Event()
        self.live = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.halt.is_set():
            if not self.live.wait(0.05):
                continue
            path = self.paths[n % len(self.paths)]
            line = json.dumps({"role": "user", "content": f"live line {n}", "id": f"live:{n}"})
            with open(path, "a") as f:
                f.write(line + "\n")
            n += 1
            self.written = n
            time.sleep(self.interval)


def start(home: Path, src: Path, sock: Path) -> subprocess.Popen[bytes]:
    # bytecode cached across the runs (outside the tree): with PYTHONDONTWRITEBYTECODE
    # every start compiled aiohttp, pydantic and memoryd again, twice the CPU of a start
    env = {**os.environ, "MEMORYD_HOME": str(home),
           "PYTHONPYCACHEPREFIX": str(home.parent / "pycache")}
    env.pop("MEMORYD_SOCKET", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with open(f"{home}.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
             f"generic={src}", "--socket", str(sock), "--port", "0", "--log-level", "WARNING"],
            env=env, stdout=subprocess.DEVNULL, stderr=log)


def _wait(pred, timeout: float) -> object:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = pred()
        except (DaemonNotRunning, ConnectionError, OSError, ApiError):
            v = None
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s")


def _db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{home / 'data' / 'memoryd.db'}?mode=ro", uri=True, timeout=30)


def _jobs(home: Path) -> set[int]:
    try:
        with _db(home) as db:
            return {r[0] for r in db.execute("SELECT id FROM jobs")}
    except sqlite3.Error:
        return set()


def kill_runs(tmp: Path, sock: Path, runs: int, *, files: int = 12, lines: int = 300,
              seed: int = 0, log=lambda *_: None) -> Outcome:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    src, home = tmp / "src", tmp / "home"
    out = Outcome(expected_units=write_corpus(src, files, lines))
    appender = Appender(src)
    appender.start()
    client = MemorydClient(sock, timeout=10)
    seen_jobs: set[int] = set()
    try:
        for i in range(runs):
            p = start(home, src, sock)
            t_spawn = time.monotonic()
            try:
                # a start pays the interpreter and its imports: tens of seconds when the
                # machine is busy, so the bound is generous (a passing run returns at once)
                _wait(client.health, 300)
                up = time.monotonic() - t_spawn
                appender.live.set()
                time.sleep(rng.uniform(0.05, 3.0))  # into the backfill, even on a slow machine
                if rng.random() < 0.5:  # summaries in flight when the kill lands
                    try:
                        client.request("POST", "/v1/jobs/summarize/run", {})
                    except (ApiError, OSError):
                        pass
                    time.sleep(rng.uniform(0.0, 0.3))
                seen_jobs |= _jobs(home)
                st = client.status()
                out.kill_points.append(st["units"])
            finally:
                p.send_signal(signal.SIGKILL)
                p.wait(30)
                appender.live.clear()
            out.runs += 1
            log(f"  run {i + 1}/{runs}: up in {up:.1f}s, killed at {out.kill_points[-1]} units")
        appender.halt.set()
        appender.join()
        out.expected_units += appender.written
        p = start(home, src, sock)
        try:
            started = time.time()
            _wait(lambda: client.status()["caught_up"], 600)
            # every file read to its end (a late live line could arrive after caught_up)
            _wait(lambda: client.status()["units"] >= out.expected_units, 120)
            with _db(home) as db:
                out.units = db.execute("SELECT count(*) FROM units").fetchone()[0]
                out.duplicated = db.execute(
                    "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM units "
                    "GROUP BY session_pk, record_id HAVING n > 1)").fetchone()[0]
                ids = {r[0] for r in db.execute("SELECT id FROM jobs")}
                out.jobs_stuck_running = db.execute(
                    "SELECT count(*) FROM jobs WHERE state = 'running' AND started_at < ?",
                    (started,)).fetchone()[0]
            out.jobs_seen = len(seen_jobs)
            out.jobs_lost = len(seen_jobs - ids)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(30)
    finally:
        appender.halt.set()
    return out
