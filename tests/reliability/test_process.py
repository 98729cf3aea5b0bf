"""memoryd as a real process under signals and file accidents (issue 8, item 8): SIGHUP
reloads and never kills, a deleted memoryd.db ends the daemon non-zero so the service
manager restarts it onto a fresh store, and what memoryd creates is private."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.client import MemorydClient
from tests.helpers import short_dir
from tests.helpers import wait_until as wait

pytestmark = [pytest.mark.reliability, pytest.mark.e2e, pytest.mark.timeout(300)]



class Memoryd:
    def __init__(self, tmp: Path, sock: Path) -> None:
        self.home, self.src, self.sock = tmp / "new" / "home", tmp / "src", sock
        self.config = self.home / "config" / "config.toml"
        self.log = self.home / "log" / "memoryd.log"
        self.proc: subprocess.Popen | None = None
        self.client = MemorydClient(sock)
        self.src.mkdir(parents=True, exist_ok=True)
        with open(self.src / "s1.jsonl", "w") as f:
            for i in range(10):
                f.write(json.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                    "content": f"line {i} about the quokka", "id": f"m{i}"})
                        + "\n")

    def start(self) -> dict:
        env = {**os.environ, "MEMORYD_HOME": str(self.home), "MEMORYD_LOG__FILE": "true"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
             f"generic={self.src}", "--socket", str(self.sock), "--port", "0"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return wait(lambda: (s := self.client.status())["caught_up"] and s)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def logged(self, text: str) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"memoryd exited {self.proc.returncode}")
        return self.log.exists() and text in self.log.read_text()


@pytest.fixture
def memoryd(tmp_path):
    with short_dir() as d:
        m = Memoryd(tmp_path, d / "m.sock")
        try:
            yield m
        finally:
            if m.proc is not None and m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait()


def mode(p: Path) -> str:
    return oct(p.stat().st_mode & 0o777)


def test_issue_8_sighup_reloads_config_and_never_dies(memoryd):
    m = memoryd
    m.start()
    m.config.write_text('[log]\nlevel = "INFO"\n')
    m.proc.send_signal(signal.SIGHUP)  # was the default action: the daemon died
    wait(lambda: m.logged("SIGHUP: config re-read, nothing changed"))
    assert m.client.health()["status"] == "ok"

    m.config.write_text('[log]\nfile = true\nlevel = "LOUD"\n')  # invalid: kept the old one
    m.proc.send_signal(signal.SIGHUP)
    wait(lambda: m.logged("config not reloaded, the running one is kept"))
    assert m.logged("log.level")
    assert m.client.health()["status"] == "ok"

    m.config.write_text('[log]\nfile = true\nlevel = "WARNING"\n[server]\ntcp_port = 0\n'
                        '[watch]\nreconcile_seconds = 5\n')
    m.proc.send_signal(signal.SIGHUP)
    wait(lambda: m.logged("applied now: log.level, watch.reconcile_seconds"))

    # logging reopened: logrotate moved the file away, SIGHUP makes a new private one
    m.log.rename(m.log.with_name("memoryd.log.old"))
    m.config.write_text('[log]\nfile = true\nlevel = "INFO"\n')
    m.proc.send_signal(signal.SIGHUP)
    wait(lambda: m.logged("SIGHUP: config reloaded"))
    assert mode(m.log) == "0o600"
    assert m.proc.poll() is None
    assert m.stop() == 0


def test_issue_8_deleted_db_exits_non_zero_and_restart_rereads(memoryd):
    m = memoryd
    units = m.start()["units"]
    assert units == 10
    db = m.home / "data" / "memoryd.db"
    db.unlink()  # went unnoticed: later writes vanished into the unlinked inode
    assert m.proc.wait(60) == 1
    assert f"{db} was deleted while memoryd was running" in m.log.read_text()
    st = m.start()  # what systemd's Restart=on-failure does
    assert st["units"] == units
    assert m.stop() == 0


def test_issue_8_home_memoryd_creates_is_private(memoryd):
    m = memoryd
    m.start()
    assert m.client.request("POST", "/v1/memory/entries", {"content": "a fact"})["total"] == 1
    dest = Path(os.environ.get("HOME", "/root"))  # conftest points HOME into a tmp dir
    backup = dest / "b.db"
    m.client.backup(str(backup))
    for d in (m.home, m.home.parent, *[m.home / x for x in ("config", "data", "state", "log",
                                                            "data/memory")]):
        assert mode(d) == "0o700", d
    data = m.home / "data"
    for f in (data / "memoryd.db", data / "memoryd.db-wal", data / "memoryd.db-shm",
              m.home / "state" / "token", m.log, data / "memory" / "MEMORY.md", backup):
        assert mode(f) == "0o600", f
    assert m.stop() == 0
