"""Issue 28 item 7: the daemon under real wall-clock steps. libfaketime (preloaded, its
offset read from a file at every call) moves a running memoryd's wall clock while its
monotonic clock runs on, as NTP or a restored VM snapshot would."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys

import pytest

from memoryd.client import MemorydClient
from tests.helpers import short_dir
from tests.helpers import wait_until as wait

LIB = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))), None)
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300),
              pytest.mark.skipif(LIB is None and not os.environ.get("CI"),
                                 reason="libfaketime is not installed (CI installs it)")]


class Shifted:
    """memoryd as a subprocess whose wall clock the test moves (`shift`)."""

    def __init__(self, tmp, sock, **env: str) -> None:
        self.offset = tmp / "faketime"
        self.offset.write_text("+0\n")
        self.home, self.src = tmp / "home", tmp / "src"
        self.src.mkdir(exist_ok=True)
        self.log = self.home / "log" / "memoryd.log"
        self.client = MemorydClient(sock)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
             f"generic={self.src}", "--socket", str(sock), "--port", "0"],
            env={**os.environ, "MEMORYD_HOME": str(self.home), "MEMORYD_LOG__FILE": "true",
                 "LD_PRELOAD": str(LIB), "FAKETIME_TIMESTAMP_FILE": str(self.offset),
                 "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1", **env},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def shift(self, seconds: int) -> None:
        self.offset.write_text(f"{seconds:+d}s\n")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        return err


def test_issue_28_a_backward_clock_step_does_not_stop_the_scheduled_jobs(tmp_path):
    with short_dir() as d:
        m = Shifted(tmp_path, d / "m.sock", MEMORYD_SUMMARY__SWEEP_SECONDS="0.5")
        try:
            sweep = lambda: m.client.status()["summaries"]["last_idle_sweep"]  # noqa: E731
            first = wait(sweep, timeout=60)
            m.shift(-3600)  # the wall clock steps back an hour
            # a sweep runs again: its time (by the wall clock) is before the first one's
            wait(lambda: sweep() < first - 1800, timeout=30)
            assert "the wall clock stepped back" in m.log.read_text()
        finally:
            err = m.stop()
    assert m.proc.returncode == 0, err


def test_issue_28_a_forward_clock_jump_does_not_archive_everything(tmp_path):
    import time

    now = time.time()
    with open(tmp_path / "src.jsonl", "w") as f:
        for i in range(6):
            f.write(json.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                "content": f"line {i} about the quokka", "id": f"m{i}",
                                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                           time.gmtime(now - 60 + i))}) + "\n")
    with short_dir() as d:
        m = Shifted(tmp_path, d / "m.sock")
        (tmp_path / "src.jsonl").rename(m.src / "s1.jsonl")
        try:
            wait(lambda: (s := m.client.status())["caught_up"] and s["units"] == 6, timeout=60)
            m.shift(200 * 86400)  # the wall clock jumps 200 days ahead
            report = m.client.request("POST", "/v1/jobs/retention/run", {})["result"]
            assert report["archived"]["sessions"] == [], report
            assert "days ahead of the time elapsed" in report["clock"]
            assert m.client.status()["units"] == 6
            assert "retention: the wall clock is" in m.log.read_text()
        finally:
            err = m.stop()
    assert m.proc.returncode == 0, err
