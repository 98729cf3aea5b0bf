"""Issue 10, item 6: the papercuts a newcomer hit, each through the real daemon or the
real command line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from memoryd.cli.commands import main
from memoryd.config import load_settings
from memoryd.daemon import Daemon
from memoryd.paths import resolve_paths
from tests.helpers import (AsyncClient, caught_up, ctl, running_daemon, wait_for,
                           write_jsonl)




@pytest.fixture
async def live(memoryd_home, sock, tmp_path):
    src = tmp_path / "src"
    write_jsonl(src / "4c2ddfdc-b619.jsonl", [
        {"role": "user", "content": "rotate the staging certificates", "id": "a1"},
        {"role": "assistant", "content": "rotated them with certbot", "id": "a2"}])
    write_jsonl(src / "4c9e0000-aaaa.jsonl", [
        {"role": "user", "content": "another session", "id": "b1"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        await wait_for(lambda: caught_up(AsyncClient(sock)))
        yield d, src


async def test_issue_10_sessions_show_takes_a_unique_prefix(live, sock, capsys):
    d, src = live
    code, out, _ = await ctl(capsys, sock, "sessions", "show", "4c2d")
    assert code == 0 and "session 4c2ddfdc-b619" in out and "rotate the staging" in out
    code, _, err = await ctl(capsys, sock, "sessions", "show", "4c")
    assert code == 1 and "ambiguous" in err and "4c2ddfdc-b619" in err and "4c9e0000" in err
    # a session and its sub-agents share its id as a prefix: the prefix means the session
    write_jsonl(src / "4c2ddfdc-b619" / "agent-1.jsonl", [
        {"role": "user", "content": "sub-agent work", "id": "s1"}])
    await ctl(capsys, sock, "ingest", str(src / "4c2ddfdc-b619" / "agent-1.jsonl"), "--wait")
    code, out, _ = await ctl(capsys, sock, "sessions", "show", "4c2d", "--messages", "0")
    assert code == 0 and "session 4c2ddfdc-b619 —" in out
    code, out, _ = await ctl(capsys, sock, "sessions", "show", "4c2ddfdc-b619/")
    assert code == 0 and "sub-agent work" in out
    code, _, err = await ctl(capsys, sock, "sessions", "show", "zz")
    assert code == 1 and "no session 'zz'" in err


async def test_issue_10_sessions_show_messages_0_prints_only_the_header(live, sock, capsys):
    code, out, _ = await ctl(capsys, sock, "sessions", "show", "4c2ddfdc-b619", "--messages", "0")
    assert code == 0 and "units    2" in out and "certbot" not in out
    code, _, err = await ctl(capsys, sock, "sessions", "show", "4c2d", "--messages", "-1")
    assert code == 2 and "--messages" in err


async def test_issue_10_ingest_of_an_ignored_file_says_why(live, sock, capsys, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.jsonl").write_text('{"task": "buy milk"}\n')
    code, out, _ = await ctl(capsys, sock, "ingest", str(notes / "todo.jsonl"), "--wait")
    assert code == 0
    assert "1 files read, 0 new units; 1 ignored:" in out
    assert "todo.jsonl: not a transcript of a known agent" in out
    code, out, _ = await ctl(capsys, sock, "ingest", str(notes / "todo.jsonl"), "--wait",
                             "--agent", "codex")
    assert "not a codex transcript" in out
    (notes / "empty.jsonl").write_text("")
    code, out, _ = await ctl(capsys, sock, "--json", "ingest", str(notes / "empty.jsonl"),
                             "--wait")
    assert json.loads(out)["ignored"][0]["reason"].startswith("empty file")


async def test_issue_10_search_count_says_why_fewer_are_shown(memoryd_home, sock, tmp_path,
                                                              capsys):
    src = tmp_path / "src"
    for i in range(3):
        write_jsonl(src / f"s{i}.jsonl", [
            {"role": "user", "content": "how do I flush the varnish cache", "id": f"q{i}"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        await wait_for(lambda: caught_up(AsyncClient(sock)))
        code, out, _ = await ctl(capsys, sock, "search", "varnish", "-n", "2")
        first = out.splitlines()[0]
        assert code == 0 and first.startswith("3 matches, showing ")
        shown = int(first.split("showing ")[1].split()[0])
        if shown < 3:  # never a bare "3 matches, showing 1"
            assert "folded in" in first or "-n 2" in first, first
        code, out, _ = await ctl(capsys, sock, "search", "varnish", "-n", "50")
        assert "showing" in out.splitlines()[0]


def test_issue_10_config_check_reports_every_error(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[watch]\ndebounce_ms = 'x'\n[server]\ntcp_port = 'y'\nnope = 1\n")
    assert main(["config", "check", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "(3 problems)" in err
    for key in ("watch.debounce_ms", "server.tcp_port", "server.nope"):
        assert key in err


def test_issue_10_busy_port_suggests_port_0_or_no_tcp(memoryd_home, tmp_path):
    from tests.helpers import short_dir

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        with short_dir() as d:
            r = subprocess.run(
                [sys.executable, "-m", "memoryd", "--home", str(memoryd_home), "--port",
                 str(port), "--socket", str(d / "m.sock"), "--no-default-sources"],
                capture_output=True, text=True, timeout=60,
                env={**os.environ, "MEMORYD_LOG_LEVEL": "WARNING"})
    finally:
        busy.close()
    assert r.returncode == 3, r.stderr
    assert "--port 0" in r.stderr and "--no-tcp" in r.stderr


def test_issue_10_doctor_flags_a_model_without_its_key(memoryd_home, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (memoryd_home / "config").mkdir(exist_ok=True)
    (memoryd_home / "config" / "config.toml").write_text(
        '[llm]\nmodel = "anthropic/claude-3-5-haiku-latest"\n')
    code = main(["--socket", str(memoryd_home / "none.sock"), "doctor"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL  llm" in out and "ANTHROPIC_API_KEY is not set" in out


async def test_issue_10_doctor_flags_the_daemons_missing_key(memoryd_home, sock, capsys):
    settings = load_settings(None, environ={}, overrides={
        "embed": {"enabled": False},  # lexical: no model paid for here
        "watch": {"default_sources": False}, "server": {"socket": sock, "tcp_enabled": False},
        "llm": {"model": "anthropic/claude-3-5-haiku-latest"}})
    d = Daemon(settings, resolve_paths(memoryd_home), environ={})
    await d.start()
    try:
        code, out, _ = await ctl(capsys, sock, "doctor")
    finally:
        await d.stop()
    assert code == 1 and "FAIL  llm" in out and "ANTHROPIC_API_KEY" in out, out
