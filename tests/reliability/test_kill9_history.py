"""kill -9 during a first start's consolidation of the history (issue 27): memoryd (a
subprocess) meets 40 days of transcripts, reads them and starts consolidating them, one
day a job; it is killed three times while it does, then left to finish. Its memory
folder must then be what an uninterrupted run writes from the same history: nothing
lost, nothing written twice, every day consolidated once by an ok run."""

from __future__ import annotations

import datetime as dt
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from memoryd.client import MemorydClient
from tests.consolidate.test_history import history_files
from tests.helpers import short_dir
from tests.reliability.kill9 import _wait, start

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

DAYS = 40


def history(client: MemorydClient) -> dict:
    return (client.status().get("consolidation") or {}).get("history") or {}


def done(client: MemorydClient) -> bool:
    h = history(client)
    return bool(h.get("looked") and h.get("days_left") == 0 and h.get("days_done"))


def configure(home: Path) -> None:
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "config.toml").write_text(
        '[consolidate]\ntimezone = "UTC"\n\n[retention]\nenabled = false\n')


def memory_files(home: Path) -> dict[str, str]:
    root = home / "data" / "memory"
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8")
            for p in sorted(root.rglob("*.md"))}


def run_to_the_end(home: Path, src: Path, sock: Path, client: MemorydClient) -> None:
    p = start(home, src, sock)
    try:
        _wait(lambda: done(client), 600)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)


def test_kill_9_during_the_historys_consolidation_loses_and_doubles_nothing(tmp_path):
    src = tmp_path / "src"
    first = dt.date.today() - dt.timedelta(days=DAYS + 2)
    days, _ = history_files(src, first, DAYS)
    ref, home = tmp_path / "ref", tmp_path / "home"
    configure(ref)
    configure(home)
    with short_dir() as d:
        sock = d / "m.sock"
        client = MemorydClient(sock, timeout=10)
        run_to_the_end(ref, src, sock, client)
        kills = []
        for _ in range(3):
            p = start(home, src, sock)
            try:
                # killed once a day more is done, so each kill lands inside the history
                before = kills[-1] if kills else 0
                _wait(lambda b=before: (history(client).get("days_done") or 0) > b, 300)
                kills.append(history(client).get("days_done"))
            finally:
                p.send_signal(signal.SIGKILL)
                p.wait(30)
            time.sleep(0.1)
        run_to_the_end(home, src, sock, client)

    want, got = memory_files(ref), memory_files(home)
    assert want and "MEMORY.md" in want
    assert kills[-1] < DAYS, kills  # the kills landed inside the history
    assert got == want, kills
    lines = [ln for ln in got["MEMORY.md"].splitlines() if ln.startswith("- ")]
    assert len(lines) == len(set(lines))
    with sqlite3.connect(home / "data" / "memoryd.db") as db:
        ok_days = {r[0] for r in db.execute(
            "SELECT DISTINCT day FROM consolidation_runs WHERE ok = 1")}
    assert set(days) <= ok_days
