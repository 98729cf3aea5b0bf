"""memoryctl verbs in-process (main([...])) against a real daemon on a real socket."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path

import pytest

from memoryd import __version__
from memoryd.cli.commands import main
from tests.helpers import AsyncClient, running_daemon, wait_for, write_jsonl


@pytest.fixture
async def live(memoryd_home, sock, tmp_path):
    src = tmp_path / "src"
    write_jsonl(src / "proj" / "s1.jsonl", [
        {"role": "user", "content": "please refactor the billing module", "id": "a1"},
        {"role": "assistant", "content": "refactored billing into three files", "id": "a2"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        yield d, src


async def _caught_up(c):
    st = await c.status()
    return st if st["caught_up"] else None


async def ctl(capsys, sock, *args):
    code = await asyncio.to_thread(main, ["--socket", str(sock), *args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


async def test_status_and_search_human_and_json(live, sock, capsys):
    code, out, _ = await ctl(capsys, sock, "status")
    assert code == 0 and "1 sessions, 2 units" in out and "caught up" in out
    code, out, _ = await ctl(capsys, sock, "--json", "status")
    assert json.loads(out)["units"] == 2
    code, out, _ = await ctl(capsys, sock, "search", "billing", "--mode", "and")
    assert code == 0 and "2 matches, showing 2" in out and "proj/s1" in out
    code, out, _ = await ctl(capsys, sock, "--json", "search", "billing", "-n", "1")
    assert json.loads(out)["shown"] == 1


async def test_sessions_list_show_forget(live, sock, capsys):
    code, out, _ = await ctl(capsys, sock, "sessions")
    assert code == 0 and "proj/s1" in out
    code, out, _ = await ctl(capsys, sock, "sessions", "list", "--agent", "generic", "--json")
    assert [s["session_id"] for s in json.loads(out)["sessions"]] == ["proj/s1"]
    code, out, _ = await ctl(capsys, sock, "sessions", "show", "proj/s1")
    assert code == 0 and "1 assistant, 1 user" in out and "refactor the billing" in out
    code, _, err = await ctl(capsys, sock, "sessions", "show", "nope")
    assert code == 1 and "no session" in err
    code, out, _ = await ctl(capsys, sock, "sessions", "forget", "proj/s1", "--yes")
    assert code == 0 and "2 units" in out
    code, out, _ = await ctl(capsys, sock, "--json", "search", "billing")
    assert json.loads(out)["total"] == 0


async def test_run_ingest_backup(live, sock, capsys, tmp_path):
    code, out, _ = await ctl(capsys, sock, "run", "--list")
    assert code == 0 and "reconcile" in out
    code, out, _ = await ctl(capsys, sock, "run", "reconcile")
    assert code == 0 and out.startswith("reconcile: queued=")
    code, _, err = await ctl(capsys, sock, "run", "nosuchjob")
    assert code == 1 and "no job" in err
    code, _, err = await ctl(capsys, sock, "run", "reconcile", "--param", "oops")
    assert code == 2
    extra = tmp_path / "extra"
    write_jsonl(extra / "e.jsonl", [{"role": "user", "content": "walrus facts", "id": "w"}])
    code, out, _ = await ctl(capsys, sock, "ingest", str(extra), "--wait")
    assert code == 0 and out.strip() == "1 files read, 1 new units"
    code, _, err = await ctl(capsys, sock, "ingest", str(tmp_path / "missing"))
    assert code == 2 and "no such file" in err
    dest = Path.home() / "backup.db"  # backups go under the user's home (or data dir)
    code, out, _ = await ctl(capsys, sock, "backup", str(dest))
    assert code == 0 and "wrote" in out
    n = sqlite3.connect(dest).execute("SELECT count(*) FROM units").fetchone()[0]
    assert n == 3
    code, _, err = await ctl(capsys, sock, "backup", str(dest))
    assert code == 1 and "refusing to overwrite" in err


async def test_reindex_rebuilds_and_search_keeps_answering(live, sock, capsys):
    code, out, _ = await ctl(capsys, sock, "reindex")
    assert code == 0 and out.strip() == "reindex: index=rebuilding"
    code, out, _ = await ctl(capsys, sock, "--json", "search", "billing")
    assert code == 0 and json.loads(out)["total"] >= 1  # from the index or the fallback scan

    async def ready():
        code, out, _ = await ctl(capsys, sock, "--json", "status")
        st = json.loads(out)
        return st if st["index"]["state"] == "ready" and st["caught_up"] else None

    st = await wait_for(ready)
    assert st["index"]["units"] == st["units"]
    code, out, _ = await ctl(capsys, sock, "status")
    assert f"index    ready; {st['units']} units" in out


async def test_version_and_doctor(live, sock, capsys):
    code, out, _ = await ctl(capsys, sock, "version")
    assert code == 0 and f"memoryd   {__version__}" in out
    code, out, _ = await ctl(capsys, sock, "doctor")
    assert "ok    daemon" in out and "ok    config" in out
    assert code == 0, out


async def test_version_against_stopped_daemon(tmp_path, capsys):
    code, out, _ = await ctl(capsys, tmp_path / "none.sock", "version")
    assert code == 3 and f"memoryctl {__version__}" in out and "not running" in out


async def test_config_commands(memoryd_home, capsys, tmp_path):
    code = main(["config", "path"])
    assert code == 0 and str(memoryd_home / "config" / "config.toml") in capsys.readouterr().out
    code = main(["config", "default"])
    text = capsys.readouterr().out
    assert code == 0 and "# debounce_ms = 50" in text
    import tomllib

    uncommented = "\n".join(line[2:] if re.match(r"# [a-z_]+ = ", line) else line
                             for line in text.splitlines())
    tomllib.loads(uncommented)  # the default file is valid TOML once uncommented
    assert main(["config", "check"]) == 0
    assert "defaults" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text("[watch]\ndebounce_ms = 'x'\n")
    assert main(["config", "check", "--config", str(bad)]) == 2
    assert "watch.debounce_ms" in capsys.readouterr().err
    assert main(["--json", "config", "show"]) == 0
    assert json.loads(capsys.readouterr().out)["server"]["tcp_host"] == "127.0.0.1"


def test_logs_without_log_file_says_where_they_are(capsys):
    assert main(["logs"]) == 3  # no daemon, no unit installed: nothing to read
    assert "journalctl --user -u memoryd" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2


def test_every_setting_has_a_description():
    from memoryd.config import Settings
    from memoryd.config_doc import DESCRIPTIONS

    names = {f"{s}.{k}" for s, f in Settings.model_fields.items()
             for k in f.annotation.model_fields}
    assert names - set(DESCRIPTIONS) == set()


async def test_memory_verbs(live, sock, capsys, monkeypatch):
    code, out, _ = await ctl(capsys, sock, "memory", "show")
    assert code == 0 and "empty" in out
    code, out, _ = await ctl(capsys, sock, "memory", "add", "prefers uv over pip；用中文回答",
                             "--source", "manual")
    assert code == 0 and "added as line 1" in out
    code, out, _ = await ctl(capsys, sock, "memory", "add", "deploys with fly.io")
    assert code == 0 and "line 2" in out
    code, out, _ = await ctl(capsys, sock, "memory", "add", "deploys with fly.io")
    assert code == 0 and "already there, line 2" in out
    code, out, _ = await ctl(capsys, sock, "memory", "show")
    assert "   1  " in out and "用中文回答" in out
    code, out, _ = await ctl(capsys, sock, "--json", "memory", "recent", "-n", "1")
    assert json.loads(out)["entries"][0]["items"] == ["deploys with fly.io"]
    code, out, _ = await ctl(capsys, sock, "memory", "stats")
    assert code == 0 and out.startswith("2 entries (manual 2)")
    code, out, _ = await ctl(capsys, sock, "memory", "search", "中文")
    assert code == 0 and "1 matches, showing 1" in out
    code, out, _ = await ctl(capsys, sock, "memory", "search", "kubernetes")
    assert code == 0 and out.startswith("0 matches") and "fly.io" not in out
    code, _, err = await ctl(capsys, sock, "memory", "rm", "99")
    assert code == 2 and "lines" in err
    code, out, _ = await ctl(capsys, sock, "memory", "rm", "1")
    assert code == 0 and "1 entries left" in out
    monkeypatch.setenv("EDITOR", "sed -i '$a 2026-01-02|manual|added in the editor'")
    code, out, _ = await ctl(capsys, sock, "memory", "edit")
    assert code == 0 and "updated" in out
    code, out, _ = await ctl(capsys, sock, "--json", "memory", "stats")
    assert json.loads(out)["total"] == 2
    monkeypatch.setenv("EDITOR", "sed -i '$a 2026-13-45|manual|bad date'")
    code, _, err = await ctl(capsys, sock, "memory", "edit")
    assert code == 2 and "Your edit is kept in" in err


async def test_status_quick_path_matches_argparse(live, sock, capsys, tmp_path):
    """The installed memoryctl (memoryd.cli.memoryctl) answers `status` without argparse or
    json (the daemon renders it: GET /v1/status?format=text): the same text, errors and
    exit codes as the argparse path, which still takes --json, --watch and --help."""
    import socket
    import subprocess
    import sys

    from aiohttp import web

    from memoryd.cli import memoryctl as quick
    from memoryd.client import ApiError

    def same(text):  # the uptime and the resident memory move between two calls
        return re.sub(r"RSS [\d.]+ MB", "RSS N MB", re.sub(r", up \d+s", ", up Ns", text))

    code, full, _ = await ctl(capsys, sock, "status")
    assert code == 0 and "1 sessions, 2 units" in full
    assert await asyncio.to_thread(quick.main, ["--socket", str(sock), "status"]) == 0
    assert same(capsys.readouterr().out) == same(full)
    code = (f"import sys; from memoryd.cli import memoryctl; "
            f"rc = memoryctl.main(['--socket', {str(sock)!r}, 'status']); "
            "print(rc, [m for m in ('argparse', 'json', 're', 'socket', 'pathlib', 'typing') "
            "if m in sys.modules], file=sys.stderr)")
    r = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", code],
                                capture_output=True, text=True)
    assert (same(r.stdout), r.stderr.strip()) == (same(full), "0 []")

    # errors: no daemon, a stale socket; the same words and exit codes both ways
    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()  # the file stays, nothing listens
    for where in (tmp_path / "none.sock", stale):
        code, _, err = await ctl(capsys, where, "status")
        assert quick.main(["--socket", str(where), "status"]) == code == 3
        assert capsys.readouterr().err == err and "memoryctl: " in err
    # a bad format is a 400 naming the field; JSON stays the default
    c = AsyncClient(sock)
    with pytest.raises(ApiError) as e:
        await c.request("GET", "/v1/status", query={"format": "yaml"})
    assert e.value.status == 400 and e.value.field == "format"
    assert (await c.request("GET", "/v1/status", query={"other": "x"}))["units"] == 2

    # left to argparse: --json, --watch, --help
    assert await asyncio.to_thread(quick.main, ["--socket", str(sock), "status",
                                                "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["units"] == 2
    with pytest.raises(SystemExit) as ex:
        quick.main(["status", "--help"])
    assert ex.value.code == 0 and "--watch" in capsys.readouterr().out

    # a daemon from before format=text answers JSON: rendered here by the argparse path
    st = await c.status()

    async def old_status(_: web.Request) -> web.Response:
        return web.json_response(st)

    app = web.Application()
    app.router.add_get("/v1/status", old_status)
    runner = web.AppRunner(app)
    await runner.setup()
    old = tmp_path / "old.sock"
    await web.UnixSite(runner, str(old)).start()
    try:
        assert await asyncio.to_thread(quick.main, ["--socket", str(old), "status"]) == 0
        assert same(capsys.readouterr().out) == same(full)
    finally:
        await runner.cleanup()
