"""A `store migrate` killed with SIGKILL in the middle of its memory-files step (issue 14
item 8), both ways, then resumed: the memory entries and their provenance are complete,
every file arrives once, nothing is doubled, and a third run changes nothing.

The kill lands at a known file without sleeping on a guess: the test holds what the
second file's write must wait for (on the way in, an uncommitted insert of the same
`memory_docs` row, so migrate's INSERT waits on its row lock; on the way back, the
file's own fcntl lock), sees the first file reported, and kills the process while it
waits there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memoryd.memory.file import hold_lock
from memoryd.memory.fleet_sync import STATE_FILE, lock_for
from memoryd.move.ends import open_end
from memoryd.store.pg import conn as pg
from memoryd.store_target import StoreTarget
from tests.fleet.history import make_history
from tests.fleet.test_migrate import (
    HISTORY,
    MEMORY,
    NOTE,
    docs,
    memory_folder,
    pg_rows,
    sqlite_rows,
)

FILES = {"2026-10-05.md": NOTE, "HISTORY.md": HISTORY, "MEMORY.md": MEMORY}
FIRST, BLOCKED = "2026-10-05.md", "HISTORY.md"  # the order migrate takes them in


def command(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "memoryd.move", "--home", str(home),
            "--machine", "laptop", *args]


def kill_after_first_file(cmd: list[str], blocked: Callable[[], bool]) -> None:
    """Run migrate until it has reported the first memory file and `blocked()` says it
    waits on the second, then SIGKILL it."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            e = json.loads(line)
            assert e["event"] != "error", e
            if e.get("table") == "memory_docs" and e["done"] == 1:
                deadline = time.monotonic() + 60
                while not blocked():
                    assert time.monotonic() < deadline, "migrate never waited on the file"
                    time.sleep(0.02)
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


def resume(cmd: list[str]) -> dict:
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["event"] == "done", done.stdout
    return last


def memory_history(url: str) -> list:
    """Each memory entry with the (session, record) of every unit its provenance names."""
    out = []
    for item, session, ids in pg_rows(
            url, "SELECT i.item, s.session_id, p.unit_ids FROM memory_item_sessions p "
                 "JOIN memory_items i ON i.id = p.item_id JOIN sessions s ON "
                 "s.id = p.session_pk"):
        units = [pg_rows(url, "SELECT s.session_id, u.record_id FROM units u JOIN sessions "
                              "s ON s.id = u.session_pk WHERE u.id = ?", (u,))[0]
                 for u in json.loads(ids)]
        out.append((item, session, units))
    return out


# subprocesses killed and run again: the proof suite, with the kill -9 tests' bound
pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

WANT_MEMORY = [("用 uv 管理依赖", "sess-0", [("sess-0", "r0"), ("sess-0", "r1")])]


def test_a_migrate_killed_between_memory_files_on_the_way_in_resumes_with_each_once(
        tmp_path, pg_url, flag_url):
    home = tmp_path / "home"
    make_history(home / "data" / "memoryd.db", sessions=3, units_per_session=20)
    memory_folder(home)
    open_end(pg_url, StoreTarget(url=pg_url), tmp_path / "unused.db").close()  # the schema
    blocker = pg.connect(StoreTarget(url=pg_url))
    blocker.execute("INSERT INTO memory_docs (name, body, version, machine, updated_at) "
                    "VALUES (?, 'held', 1, 'test', 0)", (BLOCKED,))

    def waiting() -> bool:
        return bool(pg_rows(pg_url, "SELECT 1 FROM pg_stat_activity WHERE wait_event_type "
                                    "= 'Lock' AND query LIKE 'INSERT INTO memory_docs%'"))

    cmd = command(home, "--to", flag_url)
    try:
        kill_after_first_file(cmd, waiting)
    finally:
        blocker.rollback()
        blocker.close()
    assert docs(pg_url) == {FIRST: (NOTE, 1)}
    bases = json.loads((home / "state" / STATE_FILE).read_text(encoding="utf-8"))
    assert bases == {FIRST: {"text": NOTE, "version": 1}}
    assert memory_history(pg_url) == WANT_MEMORY  # copied before the files

    last = resume(cmd)
    assert last["copied"].get("memory_docs") == 2
    assert last["already_there"].get("memory_docs") == 1
    assert "memory_items" not in last["copied"] and "units" not in last["copied"]
    assert docs(pg_url) == {n: (t, 1) for n, t in FILES.items()}
    bases = json.loads((home / "state" / STATE_FILE).read_text(encoding="utf-8"))
    assert bases == {n: {"text": t, "version": 1} for n, t in FILES.items()}
    assert memory_history(pg_url) == WANT_MEMORY
    assert pg_rows(pg_url, "SELECT count(*) FROM memory_items") == [(1,)]
    assert pg_rows(pg_url, "SELECT count(*) FROM memory_item_sessions") == [(1,)]
    assert pg_rows(pg_url, "SELECT count(*), count(DISTINCT (session_pk, record_id)) "
                           "FROM units") == [(60, 60)]

    again = resume(cmd)
    assert sum(again["copied"].values()) == 0 and docs(pg_url) == {
        n: (t, 1) for n, t in FILES.items()}


def test_a_migrate_killed_between_memory_files_on_the_way_back_resumes_with_each_once(
        tmp_path, pg_url, flag_url):
    home = tmp_path / "home"
    make_history(home / "data" / "memoryd.db", sessions=3, units_per_session=20)
    memory_folder(home)
    resume(command(home, "--to", flag_url))

    back = tmp_path / "back"
    mdir = back / "data" / "memory"
    mdir.mkdir(parents=True)
    cmd = command(back, "--to", "sqlite", "--from", flag_url)
    with hold_lock(lock_for(mdir, BLOCKED), timeout=5):
        # it waits on the lock as soon as it reaches the file: reported means there
        kill_after_first_file(cmd, lambda: True)
    assert {p.name: p.read_text(encoding="utf-8") for p in mdir.glob("*.md")} == {
        FIRST: NOTE}

    last = resume(cmd)
    assert last["copied"].get("memory_docs") == 2
    assert last["already_there"].get("memory_docs") == 1
    assert "memory_items" not in last["copied"] and "units" not in last["copied"]
    assert {p.name: p.read_text(encoding="utf-8") for p in mdir.glob("*.md")} == FILES
    db = back / "data" / "memoryd.db"
    assert sqlite_rows(db, "SELECT count(*) FROM memory_items") == [(1,)]
    assert sqlite_rows(db, "SELECT i.item, s.session_id, p.unit_ids FROM "
                           "memory_item_sessions p JOIN memory_items i ON i.id = p.item_id "
                           "JOIN sessions s ON s.id = p.session_pk") == [
        ("用 uv 管理依赖", "sess-0", json.dumps([
            r[0] for r in sqlite_rows(db, "SELECT u.id FROM units u JOIN sessions s ON "
                                          "s.id = u.session_pk WHERE s.session_id = 'sess-0' "
                                          "AND u.record_id IN ('r0', 'r1') ORDER BY u.id")]))]
    again = resume(cmd)
    assert sum(again["copied"].values()) == 0
    assert {p.name: p.read_text(encoding="utf-8") for p in mdir.glob("*.md")} == FILES
