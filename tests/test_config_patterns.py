"""Issue 28 item 9: an invalid regex in `privacy.redact_patterns` is a config error, found
by `memoryctl config check`, by SIGHUP (which keeps the running config) and at start (exit
2, one line), never a `re.error` traceback from the redactor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from memoryd.cli.commands import main
from memoryd.client import MemorydClient
from tests.helpers import short_dir
from tests.helpers import wait_until as wait

BAD = '[privacy]\nredact_patterns = ["ACME-\\\\d{6}", "tok(en"]\n'


def _daemon(home, sock) -> subprocess.Popen:
    env = {**os.environ, "MEMORYD_HOME": str(home), "MEMORYD_LOG__FILE": "true"}
    return subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--no-default-sources", "--socket", str(sock),
         "--port", "0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_issue_28_a_bad_redact_pattern_fails_config_check_naming_the_key(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD)
    assert main(["config", "check", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "privacy.redact_patterns" in err and "tok(en" in err, err


def test_issue_28_a_bad_redact_pattern_exits_2_at_start_in_one_line(tmp_path):
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(BAD)
    with short_dir() as d:
        p = _daemon(home, d / "m.sock")
        _, err = p.communicate(timeout=60)
    assert p.returncode == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "privacy.redact_patterns" in err, err


@pytest.mark.timeout(120)
def test_issue_28_sighup_with_a_bad_redact_pattern_keeps_the_running_config(tmp_path):
    home = tmp_path / "home"
    config = home / "config" / "config.toml"
    log = home / "log" / "memoryd.log"
    with short_dir() as d:
        p = _daemon(home, d / "m.sock")
        try:
            client = MemorydClient(d / "m.sock")
            wait(lambda: client.status()["caught_up"], timeout=60)
            config.write_text(BAD)
            p.send_signal(signal.SIGHUP)
            wait(lambda: log.exists() and "the running one is kept" in log.read_text(),
                 timeout=30)
            text = log.read_text()
            assert "privacy.redact_patterns" in text, text
            assert "Traceback" not in text
            assert client.health()["status"] == "ok"
            assert p.poll() is None
        finally:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=30)
    assert p.returncode == 0
