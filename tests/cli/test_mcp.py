"""The MCP bridge, driven by the MCP SDK's own client over stdio."""

from __future__ import annotations

import os
import sys


from tests.helpers import running_daemon



async def test_mcp_lists_tools_and_answers(memoryd_home, sock, tmp_path):
    from mcp import Client, StdioServerParameters

    src = tmp_path / "src"
    src.mkdir()
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memoryd.cli.commands", "mcp"],
            env={**os.environ, "MEMORYD_SOCKET": str(sock)})
        async with Client(params, read_timeout_seconds=30) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"memory_search", "memory_read", "memory_write",
                    "transcript_search"} <= tools
            r = await client.call_tool("memory_write", {"content": "user prefers pnpm；用中文",
                                                        "source": "mcp"})
            assert "remembered at line 1" in r.content[0].text
            r = await client.call_tool("memory_search", {"keywords": ["pnpm"]})
            assert "1 matches" in r.content[0].text and "pnpm" in r.content[0].text
            # issue 10: a plain string query is accepted (words split on spaces)
            r = await client.call_tool("memory_search", {"keywords": "PNPM yarn"})
            assert not r.is_error and "1 matches" in r.content[0].text
            r = await client.call_tool("memory_read", {"recent": 5})
            assert "用中文" in r.content[0].text
            r = await client.call_tool("memory_read", {"lines": [1, 7]})
            assert "pnpm" in r.content[0].text and "no entry at line 7" in r.content[0].text
            r = await client.call_tool("transcript_search", {"query": "nothing here"})
            assert "0 matches" in r.content[0].text
            r = await client.call_tool("memory_write", {"content": "", "source": "mcp"})
            assert r.is_error
            assert "context" in tools
            r = await client.call_tool("context", {"query": "which package manager: pnpm?",
                                                   "budget_tokens": 300})
            text = r.content[0].text
            assert text.startswith("<memoryd-context>") and "user prefers pnpm" in text
