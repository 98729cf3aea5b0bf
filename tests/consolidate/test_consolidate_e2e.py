"""kill -9 during consolidation and during archival, then restart: no half-written
file, nothing lost, nothing doubled. memoryd runs as a real subprocess."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memoryd.client import MemorydClient
from tests.helpers import short_dir
from tests.helpers import wait_until as wait

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(400)]


def start(home: Path, src: Path, sock: Path, extra: dict | None = None) -> subprocess.Popen:
    env = {**os.environ, "MEMORYD_HOME": str(home), "MEMORYD_SUMMARY__ENABLED": "false",
           "MEMORYD_RETENTION__ENABLED": "false", **(extra or {})}
    with open(f"{home}.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
             f"generic={src}", "--socket", str(sock), "--port", "0", "--log-level", "WARNING"],
            env=env, stdout=subprocess.DEVNULL, stderr=log)



def sessions(src: Path, n: int, day: str, lines: int = 12) -> int:
    for i in range(n):
        d = src / f"p{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        rows = []
        for j in range(lines):
            role = "user" if j % 2 == 0 else "assistant"
            text = (f"Remember that service {i} runs on port {8000 + i} in /srv/s{i}."
                    if j == 0 else f"session {i} step {j}: checked the build, all fine.")
            rows.append({"role": role, "content": text, "id": f"{i}:{j}",
                         "timestamp": f"{day}T0{3 + j % 6}:{i % 60:02d}:{j:02d}Z"})
        (d / f"s{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return n * lines


def run_in_thread(c: MemorydClient, job: str, params: dict) -> threading.Thread:
    def go() -> None:
        try:
            c.run_job(job, params)
        except Exception:
            pass  # the daemon is killed under it

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def no_temp_files(d: Path) -> list[Path]:
    return list(d.rglob(".*.tmp")) if d.exists() else []


def test_kill_9_during_archival_then_restart_loses_and_doubles_nothing(tmp_path):
    src = tmp_path / "src"
    total = sessions(src, 80, "2026-02-03")  # long past units_keep_days (180)
    home = tmp_path / "home"
    archive = home / "data" / "archive"
    with short_dir() as d:
        sock = d / "m.sock"
        p = start(home, src, sock)
        c = MemorydClient(sock, timeout=300)
        try:
            wait(lambda: (s := c.status())["caught_up"] and s["units"] == total, timeout=120)
            run_in_thread(c, "retention", {})
            wait(lambda: any(archive.glob("units-*.jsonl.gz")), timeout=120)
            time.sleep(0.05)
        finally:
            p.kill()
            p.wait(timeout=10)
        for f in archive.glob("units-*.jsonl.gz"):  # never a torn archive
            gzip.decompress(f.read_bytes())
        p = start(home, src, sock)
        try:
            wait(lambda: c.status()["caught_up"], timeout=120)
            r = c.run_job("retention", {})["result"]
            assert r["archived"]["units"] + sum(
                len(gzip.decompress(f.read_bytes()).splitlines())
                for f in archive.glob("units-*.jsonl.gz")) >= total
            left = c.status()["units"]
            listing = c.request("GET", "/v1/archive")
        finally:
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=30) == 0
    recs = [json.loads(x) for f in archive.glob("units-*.jsonl.gz")
            for x in gzip.decompress(f.read_bytes()).splitlines()]
    keys = [(r["agent"], r["session_id"], r["record_id"]) for r in recs]
    assert len(keys) == len(set(keys)) == total  # nothing doubled, nothing lost
    assert left == 0
    assert sum(s["units"] for s in listing["sessions"]) == total
    assert no_temp_files(home / "data") == []


def test_kill_9_during_consolidation_then_restart_no_torn_or_doubled_files(tmp_path):
    src = tmp_path / "src"
    total = sessions(src, 100, "2026-10-05")
    home = tmp_path / "home"
    mem = home / "data" / "memory"
    with short_dir() as d:
        sock = d / "m.sock"
        p = start(home, src, sock)
        c = MemorydClient(sock, timeout=300)
        try:
            wait(lambda: (s := c.status())["caught_up"] and s["units"] == total, timeout=120)
            run_in_thread(c, "consolidate", {"date": "2026-10-05"})
            wait(lambda: (mem / "2026-10-05.md").exists(), timeout=120)
        finally:
            p.kill()
            p.wait(timeout=10)
        p = start(home, src, sock)
        try:
            wait(lambda: c.status()["caught_up"], timeout=120)
            c.run_job("consolidate", {"date": "2026-10-05"})
            c.run_job("consolidate", {"date": "2026-10-05"})
        finally:
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=30) == 0
    note = (mem / "2026-10-05.md").read_text()
    items = [ln for ln in note.splitlines() if ln.startswith("- ")]
    assert len(items) == len(set(items)) and items
    for sec in ("## Topics", "## Decisions", "## Tool Activity", "## Open Questions"):
        assert note.count(sec) <= 1
    entries = [ln for ln in (mem / "MEMORY.md").read_text().splitlines() if ln[:4].isdigit()]
    assert len(entries) == len(set(entries))
    assert len(entries) == 100  # one per session's fact: none lost, none doubled
    assert no_temp_files(home / "data") == []


def history(src: Path, days: int, per_day: int) -> tuple[list[str], int]:
    """`days` days of sessions from 2026-07-01 (real time: long past), each session with
    a rule of its own and small talk."""
    import datetime as dt

    out, units = [], 0
    for k in range(days):
        day = (dt.date(2026, 7, 1) + dt.timedelta(days=k)).isoformat()
        out.append(day)
        for i in range(per_day):
            rows = []
            for j, text in enumerate([f"Remember that job {k}-{i} writes to /data/out{k}x{i}.",
                                      "ok, noted", f"step {i} of day {k}: tests pass",
                                      "We decided to keep the nightly build at 02:00."]):
                rows.append({"role": "user" if j % 2 == 0 else "assistant", "content": text,
                             "id": f"{k}:{i}:{j}", "timestamp": f"{day}T0{2 + i % 6}:1{j}:00Z"})
            (src / f"p{i % 2}").mkdir(parents=True, exist_ok=True)
            (src / f"p{i % 2}" / f"d{k}s{i}.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in rows))
            units += len(rows)
    return out, units


def history_runs(home: Path) -> list[tuple[str, int]]:
    import sqlite3

    with sqlite3.connect(home / "data" / "memoryd.db", timeout=30) as conn:
        return conn.execute("SELECT day, ok FROM consolidation_runs WHERE trigger = 'history' "
                            "ORDER BY id").fetchall()


def test_kill_9_during_first_start_history_consolidation_resumes(tmp_path):
    """A first start consolidates the history by itself; kill -9 in the middle, start
    again: it resumes where it was, every day done once (an ok run each), each note and
    MEMORY.md without a doubled line."""
    src = tmp_path / "src"
    days, total = history(src, 30, 3)
    home = tmp_path / "home"
    mem = home / "data" / "memory"
    env = {"MEMORYD_SUMMARY__ENABLED": "true", "MEMORYD_CONSOLIDATE__TIMEZONE": "UTC"}
    with short_dir() as d:
        sock = d / "m.sock"
        p = start(home, src, sock, env)
        c = MemorydClient(sock, timeout=300)
        try:
            wait(lambda: c.status()["units"] == total, timeout=120)
            wait(lambda: len(history_runs(home)) >= 4, timeout=120)
        finally:
            p.kill()
            p.wait(timeout=10)
        before = history_runs(home)
        assert 4 <= len(before) < len(days)  # killed in the middle
        p = start(home, src, sock, env)
        try:
            h = wait(lambda: (x := c.status()["consolidation"]["history"]).get("looked")
                     and x["days_left"] == 0 and x, timeout=240)
        finally:
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=30) == 0
    assert h["days_with_sessions"] == len(days)
    done = history_runs(home)
    assert done[:len(before)] == before  # nothing done before was done again
    assert sorted(day for day, ok in done if ok) == days  # every day once
    for day in days:
        lines = [x for x in (mem / f"{day}.md").read_text().splitlines() if x.startswith("- ")]
        assert lines and len(lines) == len(set(lines)), day
    entries = [x for x in (mem / "MEMORY.md").read_text().splitlines() if x.count("|") >= 2]
    items = [x.split("|", 2)[2] for x in entries]
    assert len(items) == len(set(items))
    assert sum("/data/out" in i for i in items) >= len(days)  # every day's rules are held
    assert no_temp_files(home / "data") == []
