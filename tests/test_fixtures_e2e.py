"""Done-when of the foundation: memoryd on a copy of every real agent fixture, queried
with memoryctl. `auto` must find each agent by location and first line."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from memoryd.cli.commands import main as memoryctl
from tests.helpers import AsyncClient, running_daemon, short_dir, wait_for

REPO_FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures" / "transcripts"

# a phrase a user would remember from each agent's session
PHRASES = {
    "claude-code": "expore current repo and provide highlevel information",
    "codex": "Sample Project Demo Prep",
    "gemini-cli": "lead_gemini.txt",
    "nanobot": "preferred moniker",
    "openclaw": "Digital ID feature in Apple Wallet",
    "pi": "oauth-selector",
}


@pytest.fixture
def corpus(tmp_path, fixtures_dir):
    dst = tmp_path / "sessions"
    shutil.copytree(fixtures_dir, dst)
    for p in dst.rglob("*"):
        p.chmod(0o700 if p.is_dir() else 0o600)
    shutil.copy(REPO_FIXTURES / "generic" / "chinese.jsonl", dst / "chinese.jsonl")
    return dst


async def ctl(capsys, *args):
    code = await asyncio.to_thread(memoryctl, list(args))
    out = capsys.readouterr().out
    return code, out


async def test_every_agent_fixture_is_ingested_and_findable(memoryd_home, corpus, capsys):
    with short_dir() as d:
        sock = d / "m.sock"
        async with running_daemon(memoryd_home, [("auto", corpus)], sock):
            c = AsyncClient(sock)
            await wait_for(lambda: _caught_up(c), timeout=60)
            code, out = await ctl(capsys, "--socket", str(sock), "--json", "status")
            status = json.loads(out)
            assert code == 0 and status["bad_lines"] == 0
            transcripts = [p for p in corpus.rglob("*.json*") if p.name != "logs.json"]
            assert status["files"] == len(transcripts)
            assert status["ignored_files"] == 1  # gemini's logs.json is not a transcript
            sessions = (await c.sessions(limit=1000))["sessions"]
            assert {s["agent"] for s in sessions} == {*PHRASES, "generic"}

            for agent, phrase in PHRASES.items():
                code, out = await ctl(capsys, "--socket", str(sock), "--json", "search",
                                      phrase, "--mode", "and", "--agent", agent)
                r = json.loads(out)
                assert code == 0 and r["total"] >= 1, agent
                assert all(x["agent"] == agent for x in r["results"])

            code, out = await ctl(capsys, "--socket", str(sock), "search", "迁移")
            assert code == 0 and "3 matches" in out and "数据库迁移" in out
            code, out = await ctl(capsys, "--socket", str(sock), "sessions")
            assert code == 0 and "chinese" in out


async def _caught_up(c):
    st = await c.status()
    return st if st["caught_up"] else None


def test_memoryctl_against_stopped_daemon_exits_3(tmp_path, capsys):
    code = memoryctl(["--socket", str(tmp_path / "none.sock"), "status"])
    assert code == 3
    assert "not running" in capsys.readouterr().err


def test_memoryctl_stale_socket_is_told_apart(capsys):
    import socket

    with short_dir() as d:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(d / "m.sock"))
        s.close()
        assert memoryctl(["--socket", str(d / "m.sock"), "status"]) == 3
        assert "stale" in capsys.readouterr().err


def test_memoryctl_imports_nothing_heavy():
    import subprocess
    import sys

    code = ("import sys, memoryd.cli.commands as m; "
            "bad = [n for n in sys.modules if n.split('.')[0] in "
            "('litellm', 'aiohttp', 'watchfiles', 'pydantic', 'apscheduler', 'sqlite3') "
            "or n.startswith(('memoryd.store', 'memoryd.ingest.watcher', 'memoryd.ingest', "
            "'memoryd.llm', 'memoryd.daemon'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
