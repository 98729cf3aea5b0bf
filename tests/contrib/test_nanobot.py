"""Issue 10, item 11: contrib/nanobot/memoryd_buffer.py against a live daemon reading a
real nanobot session (run as nanobot would: a separate process, the socket only)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import AsyncClient, running_daemon, wait_for

SCRIPT = Path(__file__).resolve().parents[2] / "contrib" / "nanobot" / "memoryd_buffer.py"


async def _caught_up(c):
    st = await c.status()
    return st if st["caught_up"] else None


async def buffer(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(subprocess.run, [sys.executable, str(SCRIPT), *args],
                                   capture_output=True, text=True, timeout=60)


async def test_nanobot_static_buffer_and_tools_config(memoryd_home, sock, tmp_path,
                                                      fixtures_dir):
    nb = tmp_path / "nb"
    workspace = nb / "workspace"
    (workspace / "sessions").mkdir(parents=True)
    shutil.copy(fixtures_dir / "nanobot/KamilDV/cli_direct.jsonl",
                workspace / "sessions" / "cli_direct.jsonl")
    agents_md = workspace / "AGENTS.md"
    agents_md.write_text("# My agent rules\n\nBe brief.\n")
    async with running_daemon(memoryd_home, [("nanobot", nb)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        r = await c.run_job("summarize", {"session_id": "workspace/sessions/cli_direct",
                                          "wait": True})
        assert r["result"]["state"] == "done"
        summary = await c.request("GET", "/v1/sessions/workspace/sessions/cli_direct/summary")

        p = await buffer("--socket", str(sock), "--workspace", str(workspace),
                         "--key", "cli:direct", "--recent", "3", "--into", str(agents_md))
        assert p.returncode == 0, p.stderr
        text = agents_md.read_text()
        assert text.startswith("# My agent rules\n\nBe brief.\n<!-- memoryd:start -->")
        assert "### This conversation so far (summary)" in text
        assert summary["summary"].strip()[:60] in text
        if summary["recent_total"]:
            assert "### Since then" in text
        assert text.rstrip().endswith("<!-- memoryd:end -->")

        # again, with recall: the block is replaced, not appended
        p = await buffer("--socket", str(sock), "--workspace", str(workspace),
                         "--key", "cli:direct", "--query", "agentic loop", "--into",
                         str(agents_md))
        assert p.returncode == 0, p.stderr
        text = agents_md.read_text()
        assert text.count("<!-- memoryd:start -->") == 1 and "Be brief." in text
        assert "### Recalled from other sessions and agents" in text and "agentic" in text
        served = await c.request("GET", "/v1/context/log")
        assert served["entries"][-1]["via"] == "nanobot"

        p = await buffer("--socket", str(sock), "--workspace", str(workspace),
                         "--key", "telegram:42")
        assert p.returncode == 0 and "(nothing yet)" in p.stdout
        p = await buffer("--socket", str(sock), "--session-id", "nope")
        assert p.returncode == 1 and "no session" in p.stderr
    p = await buffer("--socket", str(sock), "--key", "cli:direct")
    assert p.returncode == 1 and "memoryd_buffer:" in p.stderr  # no daemon: a clear error

    config = json.loads((SCRIPT.parent / "config.json").read_text())
    assert config["tools"]["mcpServers"]["memoryd"]["args"] == ["mcp"]
