"""memoryd as a real subprocess: signals, exit codes, kill -9 during backfill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memoryd.client import MemorydClient
from tests.helpers import SLOWDOWN, short_dir
from tests.helpers import wait_until as wait

pytestmark = pytest.mark.e2e


def start(home: Path, src: Path, sock: Path) -> subprocess.Popen:
    """memoryd in a subprocess; its stderr goes to <home>.log."""
    env = {**os.environ, "MEMORYD_HOME": str(home)}
    with open(f"{home}.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
             f"generic={src}", "--socket", str(sock), "--port", "0", "--log-level", "WARNING"],
            env=env, stdout=subprocess.DEVNULL, stderr=log)



def corpus(src: Path, files: int, lines: int) -> int:
    for i in range(files):
        d = src / f"p{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / f"s{i}.jsonl", "w") as f:
            for j in range(lines):
                f.write(json.dumps({"role": "user" if j % 2 == 0 else "assistant",
                                    "content": f"file {i} line {j} " + "lorem ipsum " * 20,
                                    "id": f"{i}:{j}"}) + "\n")
    return files * lines


def test_sigterm_exits_0_and_removes_socket(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with short_dir() as d:
        sock = d / "m.sock"
        p = start(tmp_path / "home", src, sock)
        c = MemorydClient(sock)
        wait(lambda: c.health()["status"] == "ok")
        p.send_signal(signal.SIGTERM)
        # a bound against a hang only: how long the exit takes is bench/'s to say. It was
        # also asserted under 5 s, which failed once beside two busy loops (6.6 s): the
        # interpreter's teardown after the daemon had stopped, 0.5-2 s of CPU on its own,
        # which `memoryd` now skips (cli/memoryd.run)
        assert p.wait(timeout=30) == 0
        assert not sock.exists()


def test_the_last_log_lines_are_written_before_the_process_ends(tmp_path):
    """`memoryd` ends with `os._exit` once the daemon has stopped: the log, on stderr and
    in its file, still ends with the stop."""
    src = tmp_path / "src"
    src.mkdir()
    home = tmp_path / "home"
    with short_dir() as d:
        sock = d / "m.sock"
        env = {**os.environ, "MEMORYD_HOME": str(home), "MEMORYD_LOG__FILE": "true"}
        with open(f"{home}.log", "ab") as err:
            p = subprocess.Popen(
                [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
                 f"generic={src}", "--socket", str(sock), "--port", "0", "--log-level",
                 "INFO"], env=env, stdout=subprocess.DEVNULL, stderr=err)
        c = MemorydClient(sock)
        wait(lambda: c.health()["status"] == "ok")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
    assert Path(f"{home}.log").read_text().rstrip().endswith("memoryd.daemon: stopped")
    files = list(home.rglob("memoryd.log"))
    assert files and files[0].read_text().rstrip().endswith("memoryd.daemon: stopped")


def _log(home: Path) -> str:
    try:
        return "\n".join(Path(f"{home}.log").read_text(errors="replace").splitlines()[-30:])
    except OSError:
        return "(no log)"


def _post_mortem(home: Path) -> str:
    """What the database says about files and sessions that do not add up."""
    import sqlite3

    db = sqlite3.connect(home / "data" / "memoryd.db")
    short = db.execute("SELECT s.session_id, s.units, (SELECT count(*) FROM units u WHERE "
                       "u.session_pk = s.id) FROM sessions s WHERE s.units != 500").fetchall()
    files = db.execute("SELECT path, agent, offset, size, line_no, bad_lines, gone, last_error "
                       "FROM files WHERE agent IS NULL OR offset != size OR gone OR bad_lines "
                       "OR last_error IS NOT NULL").fetchall()
    n_files = db.execute("SELECT count(*) FROM files").fetchone()[0]
    return f"sessions != 500 units: {short}; odd files: {files}; files: {n_files}"


def test_kill_9_during_backfill_then_restart_counts_the_same(tmp_path):
    src = tmp_path / "src"
    expected = corpus(src, files=60, lines=500)
    home = tmp_path / "home"
    with short_dir() as d:
        sock = d / "m.sock"
        p = start(home, src, sock)
        c = MemorydClient(sock)
        wait(lambda: c.status()["units"] > 2000)
        st = c.status()
        assert not st["caught_up"], f"backfill finished before the kill: {st}"
        p.kill()
        p.wait(timeout=10)
        assert sock.exists()  # kill -9 leaves the socket behind: the restart must cope
        p = start(home, src, sock)
        try:
            st = wait(lambda: (s := c.status())["caught_up"] and s, timeout=120)
        finally:
            p.send_signal(signal.SIGTERM)
            code = p.wait(timeout=30)
        assert code == 0, f"restarted memoryd exited {code}:\n{_log(home)}"
    with short_dir() as d2:
        sock2 = d2 / "m.sock"
        q = start(tmp_path / "home2", src, sock2)
        c2 = MemorydClient(sock2)
        try:
            clean = wait(lambda: (s := c2.status())["caught_up"] and s, timeout=120)
        finally:
            q.send_signal(signal.SIGTERM)
            q.wait(timeout=30)
    assert st["units"] == clean["units"] == expected, (st, clean, _log(home), _post_mortem(home))
    assert st["sessions"] == clean["sessions"] == 60


def test_already_running_exits_3(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with short_dir() as d:
        sock = d / "m.sock"
        p = start(tmp_path / "home", src, sock)
        try:
            wait(lambda: MemorydClient(sock).health())
            q = start(tmp_path / "home", src, sock)
            assert q.wait(timeout=20 * SLOWDOWN) == 3
            assert "another memoryd" in (tmp_path / "home.log").read_text()
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=10)


def test_sigterm_during_startup_still_stops_cleanly(tmp_path):
    """The socket answers before startup has finished; a SIGTERM then (a service
    manager stopping us early) must not kill the process with the socket left behind."""
    src = tmp_path / "src"
    src.mkdir()
    with short_dir() as d:
        sock = d / "m.sock"
        p = start(tmp_path / "home", src, sock)
        deadline = time.monotonic() + 30
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=15) == 0
        assert not sock.exists()
