from pathlib import Path

import pytest

from memoryd.cli.memoryd import main as memoryd_main
from memoryd.config import ConfigError, load_settings, parse_source


def test_config_defaults_without_file(tmp_path):
    s = load_settings(tmp_path / "missing.toml", environ={})
    assert s.server.tcp_host == "127.0.0.1"
    assert s.watch.default_sources is True


def test_config_precedence_file_env_flags(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[server]\ntcp_port = 1111\n[watch]\ndebounce_ms = 70\n")
    s = load_settings(cfg, environ={"MEMORYD_SERVER__TCP_PORT": "2222"})
    assert (s.server.tcp_port, s.watch.debounce_ms) == (2222, 70)
    s = load_settings(cfg, environ={"MEMORYD_SERVER__TCP_PORT": "2222"},
                      overrides={"server": {"tcp_port": 3333}})
    assert s.server.tcp_port == 3333


def test_config_bad_key_names_file_and_key(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[watch]\ndebounce_msx = 5\n")
    with pytest.raises(ConfigError) as e:
        load_settings(cfg, environ={})
    assert str(cfg) in str(e.value) and "watch.debounce_msx" in str(e.value)


def test_config_bad_value_from_env_names_variable():
    with pytest.raises(ConfigError) as e:
        load_settings(None, environ={"MEMORYD_WATCH__DEBOUNCE_MS": "soon"})
    assert "MEMORYD_WATCH__DEBOUNCE_MS" in str(e.value)


def test_config_invalid_toml(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[watch\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings(cfg, environ={})


def test_parse_source():
    assert parse_source("codex=/x").agent == "codex"
    assert parse_source("/x").agent == "auto"
    with pytest.raises(ConfigError, match="--source"):
        parse_source("nosuchagent=/x")


def test_memoryd_bad_config_exits_2_and_keeps_file(tmp_path, capsys):
    cfg = tmp_path / "config.toml"
    text = "[server]\ntcp_port = 'many'\n"
    cfg.write_text(text)
    assert memoryd_main(["--config", str(cfg), "--home", str(tmp_path / "h")]) == 2
    err = capsys.readouterr().err
    assert str(cfg) in err and "server.tcp_port" in err
    assert cfg.read_text() == text


def test_memoryd_missing_explicit_config_exits_2(tmp_path, capsys):
    assert memoryd_main(["--config", str(tmp_path / "nope.toml")]) == 2
    assert "no such config file" in capsys.readouterr().err


def test_paths_home_relocates_everything(tmp_path):
    from memoryd.paths import resolve_paths

    p = resolve_paths(environ={"MEMORYD_HOME": str(tmp_path)})
    for d in p.owned_dirs():
        assert Path(d).is_relative_to(tmp_path)
    assert p.socket.is_relative_to(tmp_path)


def test_socket_path_length_checked(tmp_path):
    from memoryd.paths import SocketPathTooLong, check_socket_path

    with pytest.raises(SocketPathTooLong, match="100-byte"):
        check_socket_path(tmp_path / ("x" * 120) / "memoryd.sock")


def test_the_index_tail_commit_policy_is_config(tmp_path):
    """`[index]` sets when the live tail is committed, from the file or the
    environment, validated; a store opened without a daemon reads the same variables."""
    from memoryd.index.tail import TAIL_COMMIT_DOCS, TAIL_COMMIT_S, TailPolicy

    d = load_settings(None, environ={})
    assert (d.index.tail_commit_docs, d.index.tail_commit_s) == (TAIL_COMMIT_DOCS,
                                                                 TAIL_COMMIT_S)
    cfg = tmp_path / "config.toml"
    cfg.write_text("[index]\ntail_commit_docs = 50\ntail_commit_s = 2.5\n")
    s = load_settings(cfg, environ={"MEMORYD_INDEX__TAIL_COMMIT_S": "0.5"})
    assert (s.index.tail_commit_docs, s.index.tail_commit_s) == (50, 0.5)
    with pytest.raises(ConfigError) as e:
        load_settings(None, environ={"MEMORYD_INDEX__TAIL_COMMIT_S": "0"})
    assert "MEMORYD_INDEX__TAIL_COMMIT_S" in str(e.value)
    assert "index.tail_commit_s" in str(e.value)
    cfg.write_text("[index]\ntail_commit_docs = -1\n")
    with pytest.raises(ConfigError, match="index.tail_commit_docs"):
        load_settings(cfg, environ={})
    env = {"MEMORYD_INDEX__TAIL_COMMIT_DOCS": "7", "MEMORYD_INDEX__TAIL_COMMIT_S": "9"}
    assert TailPolicy.from_env(env) == TailPolicy(docs=7, seconds=9.0)
    bad = {"MEMORYD_INDEX__TAIL_COMMIT_DOCS": "x", "MEMORYD_INDEX__TAIL_COMMIT_S": "-1"}
    assert TailPolicy.from_env(bad) == TailPolicy()


def test_a_removed_setting_still_loads_with_a_note(tmp_path):
    """`server.reexec_after_units` went with the re-exec at rest (issue 29): a config file
    or environment that still sets it loads, and the note names where it was set."""
    cfg = tmp_path / "config.toml"
    cfg.write_text("[server]\nreexec_after_units = 50000\ntcp_port = 1111\n")
    notes: list[str] = []
    s = load_settings(cfg, environ={}, notes=notes)
    assert s.server.tcp_port == 1111
    assert len(notes) == 1 and str(cfg) in notes[0]
    assert "server.reexec_after_units" in notes[0]
    notes.clear()
    load_settings(None, environ={"MEMORYD_SERVER__REEXEC_AFTER_UNITS": "0"}, notes=notes)
    assert len(notes) == 1 and "MEMORYD_SERVER__REEXEC_AFTER_UNITS" in notes[0]
    assert load_settings(cfg, environ={}).server.tcp_port == 1111  # no list: no note


@pytest.mark.e2e
def test_memoryd_starts_on_a_config_with_a_removed_setting_and_logs_it(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from memoryd.client import MemorydClient
    from tests.helpers import short_dir, wait_until

    cfg = tmp_path / "config.toml"
    cfg.write_text("[server]\nreexec_after_units = 50000\n")
    log = tmp_path / "memoryd.log"
    with short_dir() as d, open(log, "wb") as err:
        sock = d / "m.sock"
        p = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--config", str(cfg), "--no-default-sources",
             "--socket", str(sock), "--port", "0"],
            env={**os.environ, "MEMORYD_HOME": str(tmp_path / "home")},
            stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_until(lambda: MemorydClient(sock).health()["status"] == "ok")
        finally:
            p.send_signal(signal.SIGTERM)
            code = p.wait(timeout=30)
    text = log.read_text(errors="replace")
    assert code == 0, text
    assert "WARNING" in text and "server.reexec_after_units is no longer used" in text
