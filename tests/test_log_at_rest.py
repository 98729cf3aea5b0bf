"""Issue 28 item 20: the daemon's log, captured in a real run, says what a person wants
to read and is silent at rest: no APScheduler line per job run, one "extractive summary"
line (not one per session and step), no "rebuilding from the database" on a brand-new
store, and no ERROR when a client leaves `GET /v1/events`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from memoryd.client import MemorydClient
from tests.helpers import short_dir
from tests.helpers import wait_until as wait

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def _write(path, s: int, n: int, start: int = 0) -> None:
    with open(path, "a") as f:
        for i in range(start, start + n):
            text = f"session {s} line {i} about the quokka migration plan " * 5
            f.write(json.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                "content": text, "id": f"m{i}"}) + "\n")


def test_issue_28_the_log_says_what_matters_and_is_silent_at_rest(tmp_path):
    src, home = tmp_path / "src", tmp_path / "home"
    src.mkdir()
    for s in range(3):
        _write(src / f"s{s}.jsonl", s, 12)
    log = home / "log" / "memoryd.log"
    env = {**os.environ, "MEMORYD_HOME": str(home), "MEMORYD_LOG__FILE": "true",
           "MEMORYD_LOG_LEVEL": "INFO", "MEMORYD_SUMMARY__SWEEP_SECONDS": "0.2",
           "MEMORYD_SUMMARY__IDLE_MINUTES": "0.001",
           "MEMORYD_SUMMARY__MAX_INPUT_CHARS": "1000"}  # several steps a session
    with short_dir() as d:
        sock = d / "m.sock"
        p = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
             f"generic={src}", "--socket", str(sock), "--port", "0"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            client = MemorydClient(sock)
            wait(lambda: client.status()["caught_up"], timeout=60)

            def summarized() -> bool:
                st = client.status()["summaries"]
                jobs = st["jobs"]
                return st["last_idle_sweep"] and not jobs.get("pending") \
                    and not jobs.get("running") and jobs.get("done", 0) >= 6
            wait(summarized, timeout=60)

            # a client of the event stream leaves; an event then finds it gone
            sse = socket.socket(socket.AF_UNIX)
            sse.connect(str(sock))
            sse.sendall(b"GET /v1/events HTTP/1.1\r\nHost: localhost\r\n\r\n")
            got = b""
            while b": connected" not in got:
                got += sse.recv(4096)
            sse.close()
            _write(src / "s0.jsonl", 0, 2, start=12)
            wait(lambda: (s := client.status())["caught_up"] and s["units"] == 38)
            wait(summarized, timeout=60)

            # at rest: several sweeps go by and the log does not grow
            size = log.stat().st_size
            sweeps: set[float] = set()

            def three_more_sweeps() -> bool:
                sweeps.add(client.status()["summaries"]["last_idle_sweep"])
                return len(sweeps) >= 4
            wait(three_more_sweeps, timeout=60)
            assert log.stat().st_size == size, log.read_text()[size:]
        finally:
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    text = log.read_text()
    assert "apscheduler" not in text, text
    assert "rebuilding from the database" not in text, text
    assert " ERROR " not in text and "Traceback" not in text, text
    assert text.count("extractive summary") <= 1, text
