"""`[store]`: where it is read from, how it is checked, and that the URL is only ever
shown masked."""

from __future__ import annotations

import json
import socket

import pytest

from memoryd.cli.memoryd import overrides, parser
from memoryd.config import load_settings
from memoryd.config_doc import as_toml
from memoryd.errors import ConfigError

URL = "postgresql://ann:t0p-s3cret@db.example:5432/mem?sslmode=verify-full"


def test_store_defaults_to_the_embedded_sqlite_store():
    s = load_settings(None, {})
    assert s.store.url == "" and s.store.target().kind == "sqlite"
    assert s.store.namespace == "default" and s.store.machine == socket.gethostname()


def test_store_from_file_env_and_flag(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[store]\nurl = "sqlite"\nnamespace = "team_a"\nmachine = "laptop"\n'
                   'password_file = "~/pw"\n')
    s = load_settings(cfg, {})
    assert s.store.target().kind == "sqlite" and s.store.namespace == "team_a"
    assert s.store.password_file is not None and "~" not in str(s.store.password_file)
    s = load_settings(cfg, {"MEMORYD_STORE__URL": URL, "MEMORYD_STORE__MACHINE": "ci-7"})
    t = s.store.target()
    assert t.kind == "postgresql" and t.machine == "ci-7" and t.schema == "memoryd_team_a"
    assert t.url == URL  # the real URL reaches the driver, sslmode and all
    args = parser().parse_args(["--store", "postgresql://bob@other/db"])
    s = load_settings(cfg, {"MEMORYD_STORE__URL": URL}, overrides(args))
    assert s.store.url == "postgresql://bob@other/db"


@pytest.mark.parametrize("ns", ["Team", "a-b", "1abc", "", "x" * 41, "a;drop"])
def test_a_bad_namespace_is_a_config_error(ns):
    with pytest.raises(ConfigError, match="store.namespace: .*not a namespace name"):
        load_settings(None, {"MEMORYD_STORE__NAMESPACE": ns})


def test_a_bad_url_is_a_config_error_that_does_not_quote_it():
    with pytest.raises(ConfigError, match="store.url") as e:
        load_settings(None, {"MEMORYD_STORE__URL": "mysql://ann:t0p-s3cret@db/x"})
    assert "t0p-s3cret" not in str(e.value)


def test_config_show_and_the_log_line_mask_the_password():
    from memoryd.config import settings_summary

    s = load_settings(None, {"MEMORYD_STORE__URL": URL})
    shown = as_toml(s.model_dump(mode="json")) + json.dumps(s.model_dump(mode="json"))
    shown += settings_summary(s)
    assert "t0p-s3cret" not in shown
    assert "postgresql://ann:***@db.example:5432/mem?sslmode=verify-full" in shown


def test_changes_keep_days_from_file_and_env(tmp_path):
    assert load_settings(None, {}).store.changes_keep_days == 7
    cfg = tmp_path / "config.toml"
    cfg.write_text("[store]\nchanges_keep_days = 3\n")
    assert load_settings(cfg, {}).store.changes_keep_days == 3
    s = load_settings(cfg, {"MEMORYD_STORE__CHANGES_KEEP_DAYS": "0.5"})
    assert s.store.changes_keep_days == 0.5
    with pytest.raises(ConfigError, match="store.changes_keep_days"):
        load_settings(None, {"MEMORYD_STORE__CHANGES_KEEP_DAYS": "0"})


@pytest.mark.parametrize("url", [URL, "postgres://ann@db.example/mem?password=t0p-s3cret"])
def test_issue_28_a_password_in_the_store_flag_is_refused(tmp_path, url):
    """`memoryd --store postgresql://user:pw@…` would leave the password in
    /proc/PID/cmdline for every local user: the daemon refuses to start (exit 2) before
    connecting, names where a password belongs, and never echoes it."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "memoryd", "--home", str(tmp_path / "home"), "--no-tcp",
         "--no-default-sources", "--store", url],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 2, proc.stderr
    for where in ("password_file", "PGPASSWORD", "~/.pgpass", "/proc/PID/cmdline"):
        assert where in proc.stderr
    assert "t0p-s3cret" not in proc.stderr + proc.stdout
    # without the password the flag is taken as before
    args = parser().parse_args(["--store", "postgresql://ann@db.example/mem"])
    assert load_settings(None, {}, overrides(args)).store.url.startswith("postgresql://ann@")
