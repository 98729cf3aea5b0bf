"""The re-exec at rest after a big backlog (issue 11 item 3, memoryd.runtime.reexec): a real
memoryd process backfills real transcripts in a watched directory; over
`server.reexec_after_units` it re-executes itself once at rest (same PID, the same
sockets, a client polling search meanwhile is never refused nor failed), the data and
the index are intact, a later append is found, and it does not re-exec again. Below the
threshold, or with 0, it never does."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memoryd.cli.output import render_status
from memoryd.client import MemorydClient
from tests.helpers import short_dir, write_jsonl
from tests.helpers import wait_until as wait

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).with_name("quick_rest_memoryd.py")


def lines(prefix: str, n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "id": f"{prefix}:{i}",
             "content": f"{prefix} line {i} about the rollout of {prefix}tok{i} 部署 {i}"}
            for i in range(n)]


class Proc:
    """memoryd as a process (through `SCRIPT`), on a short socket path and TCP port 0."""

    def __init__(self, home: Path, src: Path, sock: Path, threshold: int,
                 extra_env: dict[str, str]) -> None:
        self.home, self.src, self.sock = home, src, sock
        # systemd's notify socket, as a Type=notify unit gives one
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(sock.with_name("notify")))
        self.notify.setblocking(False)
        self.log = home / "log" / "memoryd.log"
        env = {**os.environ, "MEMORYD_HOME": str(home), "MEMORYD_LOG__FILE": "true",
               "MEMORYD_AUTO_SUMMARY": "0",
               "MEMORYD_SERVER__REEXEC_AFTER_UNITS": str(threshold),
               "NOTIFY_SOCKET": str(sock.with_name("notify")), **extra_env}
        env.pop("MEMORYD_SOCKET", None)
        self.cmd = [sys.executable, str(SCRIPT), "--no-default-sources", "--source",
                    f"generic={src}", "--socket", str(sock), "--port", "0"]
        self.proc = subprocess.Popen(self.cmd, env=env, cwd=Path(__file__).parents[2],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.env = env
        self.client = MemorydClient(sock)

    def status(self) -> dict:
        assert self.proc.poll() is None, f"memoryd exited {self.proc.returncode}"
        return self.client.status()

    def rested(self, runs: int = 0) -> dict | None:
        st = self.status()
        m = st["memory"]
        return st if st["caught_up"] and m["idle_releases"] > runs and not m["armed"] else None

    def notified(self) -> list[str]:
        out = []
        while True:
            try:
                out.append(self.notify.recv(4096).decode().split("\n")[0])
            except BlockingIOError:
                return out

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


class Poller(threading.Thread):
    """Calls `ask` over the socket back to back, each on a new connection, once `go`
    is set, and keeps every error it meets."""

    def __init__(self, ask: Callable[[], bool], go: threading.Event | None = None) -> None:
        super().__init__(daemon=True)
        self.ask, self.go = ask, go
        self.stop = threading.Event()
        self.ok, self.errors = 0, []
        self.calls: list[tuple[float, float]] = []  # wall clock at each call's start, end

    def run(self) -> None:
        while self.go is not None and not self.go.wait(0.01):
            if self.stop.is_set():
                return
        while not self.stop.is_set():
            t0 = time.time()
            try:
                if self.ask():
                    self.ok += 1
                else:
                    self.errors.append("a wrong answer")
            except Exception as e:  # refused, reset, an error answer: all count
                self.errors.append(repr(e))
            self.calls.append((t0, time.time()))


@pytest.fixture
def memoryd(tmp_path):
    started: list[Proc] = []

    def start(threshold: int, files: int = 3, per_file: int = 400,
              env: dict[str, str] | None = None) -> Proc:
        src = tmp_path / "src"
        for f in range(files):
            write_jsonl(src / "p" / f"s{f}.jsonl", lines(f"old{f}", per_file))
        d = short_dir()
        sock = d.__enter__() / "m.sock"
        p = Proc(tmp_path / "home", src, sock, threshold, env or {})
        started.append(p)
        p._dir = d  # type: ignore[attr-defined]
        return p

    yield start
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()
        p.notify.close()
        p._dir.__exit__(None, None, None)  # type: ignore[attr-defined]


def test_issue_11_a_backfill_over_the_threshold_reexecs_once_and_serves_throughout(memoryd):
    m = memoryd(threshold=1000)
    first = wait(lambda: (s := m.status())["caught_up"] and s, 60)
    pid, port = first["pid"], first["tcp_port"]
    assert pid == m.proc.pid and first["units"] == 1200
    # searches hold off the rest a re-exec waits for: they start once the old image
    # says it re-executes (from then on it stops serving, its successor starts); the
    # health checks poll from now on, through the whole re-exec
    going = threading.Event()
    health = Poller(lambda: m.client.health()["status"] == "ok")
    search = Poller(lambda: m.client.search(query="old1tok7")["total"] == 1, going)
    health.start()
    search.start()
    try:
        wait(lambda: "re-executing in place" in m.log.read_text(), 60)
        going.set()
        st = wait(lambda: (s := m.status())["memory"]["reexecs"] == 1
                  and s["memory"]["last_reexec"]["pause_ms"] is not None and s, 60)
        n = search.ok
        wait(lambda: search.ok > n + 5, 30)  # and served by the new image
    finally:
        for p in (health, search):
            p.stop.set()
            p.join(30)
    assert health.errors == [] and search.errors == []
    assert health.ok > 0 and search.ok > 5
    assert m.proc.poll() is None and st["pid"] == pid  # the same process, re-executed
    assert st["tcp_port"] == port and m.sock.exists()
    assert st["uptime_s"] < first["uptime_s"] + 60
    last = st["memory"]["last_reexec"]
    assert last["units_before"] == 1200 and last["rss_mb_before"] > 0
    assert last["pause_ms"] > 0 and last["at"] > 0
    assert "re-executed in place 1x to give back memory" in render_status(st)
    assert "memoryd_reexecs 1.0" in m.client.request("GET", "/metrics")
    # the health poller, which asks from before the re-exec to after it, did ask while no
    # image served: a call begun after the old image began to stop and answered after the
    # new one served, waiting in the backlog. (The search poller starts only once this
    # thread has read the log line: on a busy machine the pause can be over by then, so
    # whether one of its calls spans the pause is the scheduler's luck, not memoryd's.)
    served_at = last["at"] + last["pause_ms"] / 1000
    assert any(last["at"] <= t0 < served_at <= t1 for t0, t1 in health.calls)
    st = wait(lambda: (s := m.status())["caught_up"] and s, 60)
    assert st["units"] == 1200 and st["index"]["units"] == 1200
    assert st["ingest"]["units_this_run"] == 0  # nothing read twice
    log = m.log.read_text()
    assert "re-executing in place to give back memory: RSS" in log
    assert "re-exec #1 done: serving again" in log
    # systemd sees a reload of the same main PID, not a stop
    assert m.notified() == ["READY=1", "RELOADING=1", "READY=1"]

    # the TCP port answers too (the bearer token from the state dir)
    token = (m.home / "state" / "token").read_text().strip()
    tcp = MemorydClient(m.sock, tcp=("127.0.0.1", port), token=token)
    assert tcp.search(query="old2tok5")["total"] == 1

    # the lock is held by the new image: a second memoryd on the same home is refused
    other = subprocess.run([*m.cmd[:-4], "--socket", str(m.sock) + "2", "--no-tcp"],
                           env=m.env, capture_output=True, text=True, timeout=120)
    assert other.returncode == 3 and "another memoryd holds" in other.stderr

    # a live append after it is found; the new image rests again and does not re-exec
    runs = st["memory"]["idle_releases"]
    write_jsonl(m.src / "p" / "s9.jsonl", lines("fresh", 3))
    wait(lambda: m.client.search(query="freshtok1")["total"] == 1, 60)
    st = wait(lambda: m.rested(runs), 60)
    assert st["memory"]["reexecs"] == 1 and st["units"] == 1203 and st["pid"] == pid
    assert m.stop() == 0
    assert not m.sock.exists()
    assert m.notified() == ["STOPPING=1"]


@pytest.mark.parametrize("threshold", [5000, 0])
def test_issue_11_below_the_threshold_or_disabled_no_reexec(memoryd, threshold):
    m = memoryd(threshold=threshold)
    st = wait(lambda: m.rested(), 60)
    started = st["uptime_s"]
    write_jsonl(m.src / "p" / "s9.jsonl", lines("fresh", 3))  # and rests once more
    st = wait(lambda: m.rested(st["memory"]["idle_releases"]), 60)
    assert st["memory"]["reexecs"] == 0 and st["memory"]["last_reexec"] is None
    assert st["units"] == 1203 and st["pid"] == m.proc.pid
    assert st["uptime_s"] >= started  # the same image throughout
    assert "re-executing" not in m.log.read_text()
    assert m.stop() == 0


@pytest.mark.timeout(600)
def test_issue_11_a_fleet_member_reexecs_once_after_its_backfill(memoryd, pg_url):
    """A fleet member (a real PostgreSQL): the same, its shared store reconnected by the
    new image, its units searchable after it."""
    m = memoryd(threshold=1000, env={"MEMORYD_STORE__URL": pg_url,
                                     "MEMORYD_STORE__MACHINE": "laptop",
                                     "MEMORYD_STORE__NAMESPACE": "team"})
    pid = wait(lambda: (s := m.status())["caught_up"] and s, 120)["pid"]
    st = wait(lambda: (s := m.status())["memory"]["reexecs"] == 1 and s["caught_up"] and s,
              120)
    assert st["pid"] == pid == m.proc.pid and st["units"] == 1200
    assert st["store"]["kind"] == "postgresql" and st["ingest"]["units_this_run"] == 0
    assert m.client.search(query="old2tok5")["total"] == 1
    write_jsonl(m.src / "p" / "s9.jsonl", lines("fresh", 3))
    wait(lambda: m.client.search(query="freshtok1")["total"] == 1, 60)
    assert m.status()["memory"]["reexecs"] == 1
    assert m.stop() == 0


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_issue_11_a_signal_during_the_reexec_is_acted_on_by_the_new_image(memoryd, sig):
    """A reload or a stop asked for between the old image's stop and the new image's
    handlers (its interpreter's start, ~0.5 s) is held across the exec and acted on by
    the new image, not left to the signal's default action, which kills the process."""
    m = memoryd(threshold=1000)
    deadline = time.monotonic() + 60
    while not m.log.exists() or "stopped; re-executing" not in m.log.read_text():
        assert time.monotonic() < deadline and m.proc.poll() is None
        time.sleep(0.002)
    m.proc.send_signal(sig)
    if sig == signal.SIGTERM:
        assert m.proc.wait(60) == 0  # a clean stop, not killed by SIGTERM
        after = m.log.read_text().split("stopped; re-executing", 1)[1]
        assert "re-exec #1 done" in after and "stopping" in after
        assert after.rstrip().endswith("stopped")
        assert not m.sock.exists()
        assert m.notified() == ["READY=1", "RELOADING=1", "STOPPING=1"]
    else:
        st = wait(lambda: (s := m.status())["memory"]["reexecs"] == 1 and s, 60)
        assert st["pid"] == m.proc.pid and m.client.search(query="old1tok7")["total"] == 1
        wait(lambda: "SIGHUP:" in m.log.read_text().split("stopped; re-executing", 1)[1])
        assert m.stop() == 0


def test_issue_11_a_signal_the_old_image_caught_is_acted_on_by_the_new_one(memoryd):
    """A signal another thread of the old image caught after its stop travels in the
    handover: the new image stops (SIGTERM) once its handlers are in."""
    m = memoryd(threshold=0, env={"MEMORYD_REEXEC_HANDOVER": '{"reexecs": 1, "signals": [15]}'})
    assert m.proc.wait(60) == 0
    log = m.log.read_text()
    assert "acting on SIGTERM received during the re-exec" in log
    assert log.rstrip().endswith("stopped") and not m.sock.exists()
