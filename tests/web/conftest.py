"""A live daemon on the shared fixtures plus a Chinese session, for the web page's tests."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import AsyncClient, running_daemon, short_dir, wait_for, write_jsonl

CJK_SESSION = "cjk-0001"
CJK_CWD = "/home/u/数据项目"
LIGHT_FIXTURES = ("tiny-conversation.jsonl", "short-conversation.jsonl")


def cjk_session(path: Path) -> None:
    """A small Claude Code transcript in Chinese, with one tool call and its result."""
    base = {"sessionId": CJK_SESSION, "cwd": CJK_CWD, "version": "1.0.119",
            "userType": "external", "isSidechain": False}
    write_jsonl(path, [
        {**base, "type": "user", "uuid": "c1", "parentUuid": None,
         "timestamp": "2026-01-05T10:00:00.000Z",
         "message": {"role": "user", "content": "请帮我修复数据库迁移的错误，启动时报错。"}},
        {**base, "type": "assistant", "uuid": "c2", "parentUuid": "c1",
         "timestamp": "2026-01-05T10:00:05.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "text", "text": "好的，我先看看迁移脚本。"},
             {"type": "tool_use", "id": "toolu_1", "name": "Bash",
              "input": {"command": "ls migrations"}}]}},
        {**base, "type": "user", "uuid": "c3", "parentUuid": "c2",
         "timestamp": "2026-01-05T10:00:06.000Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_1",
              "content": "m001_initial.py\nm002_add_index.py"}]}},
        {**base, "type": "assistant", "uuid": "c4", "parentUuid": "c3",
         "timestamp": "2026-01-05T10:00:09.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "text", "text": "数据库迁移已经修复：m002 缺少索引，我补上了。"}]}},
    ])


@contextlib.asynccontextmanager
async def live_site(home: Path, fixtures: Path) -> AsyncIterator[tuple[Any, str, AsyncClient]]:
    """(daemon, base URL, async client) once every transcript has been read."""
    src = home / "claude"
    src.mkdir()
    for name in LIGHT_FIXTURES:  # small ones: the daemon is up and caught up in a second
        shutil.copy(fixtures / "claude-code" / name, src / name)
    cjk_session(src / "cjk" / f"{CJK_SESSION}.jsonl")
    with short_dir() as d:
        sock = d / "m.sock"
        async with running_daemon(home / "home", [("claude-code", src)], sock) as daemon:
            c = AsyncClient(sock)

            async def caught_up():
                return (await c.status())["caught_up"]

            await wait_for(caught_up, timeout=60)
            yield daemon, f"http://127.0.0.1:{daemon.tcp_port}", c


@pytest.fixture
async def site(tmp_path, fixtures_dir):
    async with live_site(tmp_path, fixtures_dir) as s:
        yield s


async def login_url(client) -> str:
    return (await client.request("POST", "/v1/web/login"))["url"]
