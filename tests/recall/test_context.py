"""POST/GET /v1/context through the daemon's socket: budget, sections, scoping."""

from __future__ import annotations

import aiohttp
import pytest

from memoryd.client import ApiError
from memoryd.tokens import count_tokens, tokenizer_name
from tests.helpers import AsyncClient, running_daemon, wait_for, write_jsonl

LONG = ("The deploy pipeline builds the container, runs the database migration with "
        "alembic, then flips traffic. ") * 60


@pytest.fixture
async def ctx(memoryd_home, sock, tmp_path):
    proj_a = tmp_path / "work" / "alpha"
    proj_b = tmp_path / "work" / "beta"
    for p in (proj_a, proj_b):
        (p / ".git").mkdir(parents=True)
    src = tmp_path / "src"
    rows_a = [{"role": "user", "content": "how do we run the database migration?", "id": "a0",
               "cwd": str(proj_a)},
              {"role": "assistant", "content": LONG, "id": "a1", "cwd": str(proj_a)},
              {"role": "user", "content": "我们决定把数据库迁移到新的服务器", "id": "a2",
               "cwd": str(proj_a)}]
    rows_b = [{"role": "user", "content": "database migration for beta uses flyway", "id": "b0",
               "cwd": str(proj_b / "sub")}]
    live = [{"role": "user", "content": f"current session database migration note {i}",
             "id": f"l{i}", "cwd": str(proj_a)} for i in range(3)]
    write_jsonl(src / "a.jsonl", rows_a)
    write_jsonl(src / "b.jsonl", rows_b)
    write_jsonl(src / "live.jsonl", live)
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        await c.memory_add("deploys use alembic for database migration", "manual")
        await c.memory_add("prefers short answers；用中文回答", "manual")
        yield c, proj_a, proj_b


async def _caught_up(c):
    st = await c.status()
    return st if st["caught_up"] else None


async def context(c, **body):
    return await c.request("POST", "/v1/context", body)


async def test_budget_is_never_exceeded(ctx):
    c, proj_a, _ = ctx
    assert tokenizer_name() == "cl100k_base"
    for budget in (100, 2000, 20000):
        r = await context(c, query="database migration", cwd=str(proj_a / "src"),
                          budget_tokens=budget, include=["long_term", "recalled", "daily"])
        assert r["total_tokens"] <= budget, budget
        assert r["total_tokens"] == count_tokens(r["rendered"])
        items = [*r["long_term"], *r["recalled"], *r["daily"]]
        assert all(i["tokens"] > 0 for i in items)
        if budget == 100:
            assert r["cut"], "a 100-token budget must cut something"
    big = await context(c, query="database migration", budget_tokens=20000)
    a1 = next(i for i in big["recalled"] if i["record_id"] == "a1")
    assert not a1["trimmed"] and a1["content"] == LONG.strip()  # full original content
    small = await context(c, query="alembic deploy pipeline", budget_tokens=300)
    trimmed = [i for i in small["recalled"] if i["trimmed"]]
    assert not trimmed or trimmed[0]["content"].endswith("…[trimmed]")


async def test_sections_and_reasons(ctx):
    c, _, _ = ctx
    r = await context(c, query="database migration")
    assert r["session_summary"] is None
    assert r["sections"]["session_summary"]["reason"] == "no session_id given"
    assert r["sections"]["daily"]["reason"].startswith("not asked for")
    assert r["long_term"][0]["why"] == "matches the query"
    assert "alembic" in r["long_term"][0]["items"][0]
    assert r["rendered"].startswith("<memoryd-context>") and "not instructions" in r["rendered"]
    r = await context(c, include=["daily"])
    assert r["sections"]["daily"]["reason"] == "no daily notes yet"
    assert r["sections"]["recalled"]["reason"] == "not included"
    r = await context(c)
    assert r["sections"]["recalled"]["reason"] == "no query given"
    r = await context(c, query="zyxwv quux")
    assert r["sections"]["recalled"]["reason"].startswith("nothing in past sessions")
    r = await context(c, query="anything", session_id="nope")
    assert "not known" in r["sections"]["session_summary"]["reason"]


async def test_recalled_items_are_labelled_with_provenance(ctx):
    c, proj_a, _ = ctx
    r = await context(c, query="how do we run the database migration", cwd=str(proj_a))
    item = next(i for i in r["recalled"] if i["record_id"] == "a0")
    assert item["label"] == "User said" and item["agent"] == "generic"
    assert item["session_id"] == "a" and item["turn"] == 1
    assert "migration" in item["why"]["terms"] and "bm25_content" in item["why"]["signals"]
    assert item["provenance"]["path"].endswith("a.jsonl") and item["provenance"]["offset"] == 0


async def test_chinese_query_recalls_chinese_unit(ctx):
    c, _, _ = ctx
    r = await context(c, query="数据库迁移")
    assert [i["record_id"] for i in r["recalled"]][:1] == ["a2"]
    r = await context(c, query="用中文")
    assert r["long_term"][0]["why"] == "matches the query"
    assert "用中文回答" in r["long_term"][0]["items"]


async def test_project_first_and_cross_project_marked(ctx):
    c, proj_a, proj_b = ctx
    r = await context(c, query="database migration", cwd=str(proj_b / "sub" / "deep"))
    assert r["project"] == str(proj_b)
    first, *rest = r["recalled"]
    assert first["record_id"] == "b0" and first["cross_project"] is False
    assert rest and all(i["cross_project"] for i in rest)
    assert "other project" in r["rendered"]


async def test_asking_session_recent_window_is_not_recalled(ctx):
    c, _, _ = ctx
    r = await context(c, query="current session database migration note", session_id="live")
    assert not any(i["session_id"] == "live" for i in r["recalled"])
    r = await context(c, query="current session database migration note")
    assert any(i["session_id"] == "live" for i in r["recalled"])


async def test_get_and_markdown_format(ctx, sock):
    c, _, _ = ctx
    r = await c.request("GET", "/v1/context", query={"query": "alembic", "budget_tokens": 500,
                                                     "include": "long_term,recalled"})
    assert r["total_tokens"] <= 500
    conn = aiohttp.UnixConnector(path=str(sock))
    async with aiohttp.ClientSession(connector=conn) as http:
        async with http.get("http://localhost/v1/context",
                            params={"query": "alembic", "format": "md"}) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/markdown")
            text = await resp.text()
            assert text.startswith("<memoryd-context>") and "## Long-term memory" in text


async def test_bad_context_requests_are_400(ctx, sock):
    c, _, _ = ctx
    for body, field in [({"budget_tokens": 10}, "budget_tokens"),
                        ({"budget_tokens": "lots"}, "budget_tokens"),
                        ({"include": ["everything"]}, "include.0"),
                        ({"cwd": "relative/dir"}, "cwd"),
                        ({"format": "html"}, "format"),
                        ({"query": 7}, "query"),
                        ({"tokens": 5}, "tokens")]:
        with pytest.raises(ApiError) as e:
            await context(c, **body)
        assert (e.value.status, e.value.field) == (400, field), body
    with pytest.raises(ApiError) as e:
        await c.request("GET", "/v1/context", query={"include": "long_term,bogus"})
    assert e.value.status == 400
    conn = aiohttp.UnixConnector(path=str(sock))
    async with aiohttp.ClientSession(connector=conn) as http:
        async with http.post("http://localhost/v1/context", data=b"[") as resp:
            assert resp.status == 400 and (await resp.json())["error"]["field"] == "body"


async def test_memoryctl_entry_point_answers_context_and_hook_without_argparse(
        ctx, sock, capsys, monkeypatch):
    """The installed memoryctl (memoryd.cli.memoryctl) answers `context` and the hook without
    argparse, json or socket.py: the same block, the same errors and exit codes as the
    argparse path, which still takes everything else."""
    import asyncio
    import io
    import json
    import subprocess
    import sys

    from memoryd.cli import commands as memoryctl, memoryctl as quick

    _, proj_a, _ = ctx
    argv = ["--socket", str(sock), "context", "--cwd", str(proj_a), "--budget", "800",
            "database", "migration"]
    assert await asyncio.to_thread(memoryctl.main, argv) == 0
    full = capsys.readouterr().out
    assert full.startswith("<memoryd-context>") and "## Recalled" in full
    assert await asyncio.to_thread(quick.main, argv) == 0
    assert capsys.readouterr().out == full
    code = (f"import sys; from memoryd.cli import memoryctl; rc = memoryctl.main({argv!r}); "
            "print(rc, [m for m in ('argparse', 'json', 're', 'socket', 'pathlib', 'typing') "
            "if m in sys.modules], file=sys.stderr)")
    r = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", code],
                                capture_output=True, text=True)
    assert (r.stdout, r.stderr.strip()) == (full, "0 []")

    event = {"hook_event_name": "UserPromptSubmit", "prompt": "database migration",
             "cwd": str(proj_a), "session_id": "live"}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(event)))
    assert await asyncio.to_thread(quick.main, ["--socket", str(sock), "hook",
                                                "claude-code"]) == 0
    out = capsys.readouterr().out
    assert "## Long-term memory" in out and "## Recalled" in out
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(event)))
    assert quick.main(["--socket", str(sock) + ".gone", "hook", "claude-code"]) == 0
    assert capsys.readouterr() == ("", "")  # fails open, silently

    assert quick.main(["--socket", str(sock) + ".gone", "context", "x"]) == 3
    assert "memoryd is not running" in capsys.readouterr().err
    assert await asyncio.to_thread(quick.main, ["--socket", str(sock), "context", "--budget",
                                                "10", "x"]) == 2
    assert "(budget_tokens)" in capsys.readouterr().err
    # left to argparse: --format json, --help, a bad number
    assert await asyncio.to_thread(quick.main, ["--socket", str(sock), "context", "--format",
                                                "json", "alembic"]) == 0
    assert json.loads(capsys.readouterr().out)["total_tokens"] <= 2000
    with pytest.raises(SystemExit) as e:
        quick.main(["context", "--budget", "many", "x"])
    assert e.value.code == 2 and "invalid int value" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        quick.main(["context", "--help"])
    assert e.value.code == 0 and "--budget" in capsys.readouterr().out


async def test_memoryctl_context_and_claude_hook(ctx, sock, capsys, monkeypatch):
    import asyncio
    import io
    import json

    from memoryd.cli.commands import main

    c, proj_a, _ = ctx
    code = await asyncio.to_thread(main, ["--socket", str(sock), "context", "--cwd",
                                          str(proj_a), "--budget", "800", "database migration"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("<memoryd-context>") and "## Recalled" in out
    code = await asyncio.to_thread(main, ["--socket", str(sock), "context", "--format", "json",
                                          "alembic"])
    assert code == 0 and json.loads(capsys.readouterr().out)["total_tokens"] <= 2000

    event = {"hook_event_name": "UserPromptSubmit", "prompt": "database migration",
             "cwd": str(proj_a), "session_id": "live", "transcript_path": "/x.jsonl"}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(event)))
    code = await asyncio.to_thread(main, ["--socket", str(sock), "hook", "claude-code"])
    out = capsys.readouterr().out
    assert code == 0 and "## Long-term memory" in out and "## Recalled" in out

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(event)))
    code = main(["--socket", str(sock) + ".gone", "hook", "claude-code"])
    assert code == 0 and capsys.readouterr() == ("", "")  # fails open, silently
    monkeypatch.setattr("sys.stdin", io.StringIO("not json"))
    assert main(["--socket", str(sock), "hook", "claude-code"]) == 0


def test_git_root_walks_up_to_the_nearest_git_dir_as_pathlib_does(tmp_path, monkeypatch):
    """The project of a cwd: the nearest directory above it holding `.git` (a directory
    or a worktree's file), else the cwd itself, normalized as `Path` normalizes it."""
    from pathlib import Path

    from memoryd.recall.context import git_root

    def by_pathlib(cwd: str) -> str:
        p = Path(cwd)
        return next((str(d) for d in (p, *p.parents) if (d / ".git").exists()), str(p))

    (tmp_path / "repo" / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    (tmp_path / "wt" / "a").mkdir(parents=True)
    (tmp_path / "wt" / ".git").write_text("gitdir: elsewhere\n")
    (tmp_path / "plain" / "x").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    cwds = [f"{tmp_path}/repo/src/pkg", f"{tmp_path}/repo/src/pkg/", f"{tmp_path}//repo/./src",
            f"{tmp_path}/wt/a", f"{tmp_path}/plain/x", f"{tmp_path}/missing/dir",
            "repo/src", "wt", "plain/x", "plain", ".", "./repo", "/", "//x"]
    for cwd in cwds:
        assert git_root(cwd) == by_pathlib(cwd), cwd
    assert git_root(f"{tmp_path}/repo/src/pkg") == f"{tmp_path}/repo"
    assert git_root("wt/a") == "wt"
    assert git_root(f"{tmp_path}/plain/x") == f"{tmp_path}/plain/x"
