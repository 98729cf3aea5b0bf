"""Issue 28, items 21-24: memoryctl as a new user meets it, through a real daemon (real
JSONL in a watched dir, real SQLite, the real socket) or the real command line."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import os
import subprocess
import sys

from memoryd.consolidate.clock import SettableClock
from tests.helpers import ctl, wait_for, write_jsonl
from tests.consolidate.test_consolidate import DAY1, daemon, ingested, msgs


async def test_issue_28_every_verb_that_takes_a_session_id_takes_a_unique_prefix(
        tmp_path, src, sock, capsys):
    write_jsonl(src / "shelfie" / "s1.jsonl", msgs("s1", "2026-03-02", DAY1))
    write_jsonl(src / "work" / "a1.jsonl", msgs("a1", "2026-09-30", [("user", "alpha one")]))
    write_jsonl(src / "work" / "a2.jsonl", msgs("a2", "2026-09-30", [("user", "alpha two")]))
    clock = SettableClock(dt.datetime(2026, 10, 2, tzinfo=dt.UTC).timestamp())
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(DAY1) + 2)
        code, out, err = await ctl(capsys, sock, "sessions", "summarize", "shelf")
        assert code == 0, err
        assert out.startswith("generic shelfie/s1: summary by extractive")
        code, out, _ = await ctl(capsys, sock, "export", "--session", "shelf", "--format",
                                 "jsonl")
        assert code == 0 and len(out.splitlines()) == len(DAY1)
        code, out, _ = await ctl(capsys, sock, "run", "retention")
        assert code == 0 and "shelfie/s1 -> 2026-03" in out
        code, out, err = await ctl(capsys, sock, "archive", "restore", "shelf", "--dry-run")
        assert code == 0, err
        assert out.strip() == f"generic shelfie/s1: {len(DAY1)} archived units, 0 restored " \
                              "(dry run)"
        code, out, _ = await ctl(capsys, sock, "archive", "restore", "shelf")
        assert code == 0 and f"{len(DAY1)} restored" in out
        # an ambiguous prefix names the candidates, in every verb
        for verb in (["sessions", "summarize", "work/a"], ["archive", "restore", "work/a"],
                     ["export", "--session", "work/a"], ["sessions", "forget", "work/a",
                                                         "--yes"],
                     ["sessions", "show", "work/a"]):
            code, _, err = await ctl(capsys, sock, *verb)
            assert code == 1 and "ambiguous" in err, verb
            assert "work/a1" in err and "work/a2" in err, verb
        code, _, err = await ctl(capsys, sock, "sessions", "summarize", "nothing-like-it")
        assert code == 1 and "no session 'nothing-like-it'" in err
        code, out, _ = await ctl(capsys, sock, "sessions", "forget", "work/a2", "--yes")
        assert code == 0 and "forgot generic session work/a2" in out
        code, out, _ = await ctl(capsys, sock, "sessions", "forget", "work/a", "--yes")
        assert code == 0 and "forgot generic session work/a1" in out  # unique now


class Terminal(io.StringIO):
    """What a person types at a terminal (stdin is a tty)."""

    def isatty(self) -> bool:
        return True


async def test_issue_28_forget_shows_what_would_go_and_asks_or_wants_yes(
        tmp_path, src, sock, capsys, monkeypatch):
    write_jsonl(src / "work" / "s1.jsonl", msgs("s1", "2026-09-30", [
        ("user", "my old password is hunter2, rotate it"), ("user", "now the billing")]))
    write_jsonl(src / "work" / "s2.jsonl", msgs("s2", "2026-09-30", [("user", "hello")]))
    clock = SettableClock(dt.datetime(2026, 10, 2, tzinfo=dt.UTC).timestamp())
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, 3)
        # no terminal and no --yes (a script, a pipe): shown, refused, nothing deleted
        code, out, err = await ctl(capsys, sock, "forget", "--query", "hunter2")
        assert code == 2 and out.startswith("would forget 1 turns in 1 sessions")
        assert "work/s1" in out and "--yes" in err and "nothing forgotten" in err
        code, out, err = await ctl(capsys, sock, "sessions", "forget", "work/s2")
        assert code == 2 and "--yes" in err
        assert (await c.search(query="hunter2"))["total"] == 1
        assert (await c.session("work/s2"))["units"] == 1
        # at a terminal: shown, asked; anything but yes keeps it
        monkeypatch.setattr("sys.stdin", Terminal("n\n"))
        code, out, _ = await ctl(capsys, sock, "forget", "--query", "hunter2")
        assert code == 1 and "would forget 1 turns" in out and "cannot be undone" in out
        assert out.rstrip().endswith("nothing forgotten")
        monkeypatch.setattr("sys.stdin", Terminal("y\n"))
        code, out, _ = await ctl(capsys, sock, "forget", "--query", "hunter2")
        assert code == 0 and "forgot 1 turns in 1 sessions" in out
        assert (await c.search(query="hunter2"))["total"] == 0
        # sessions forget asks about the session a prefix stands for, by its whole id
        monkeypatch.setattr("sys.stdin", Terminal("yes\n"))
        code, out, _ = await ctl(capsys, sock, "sessions", "forget", "work/s2")
        assert code == 0 and "Forget generic session work/s2 (1 units) everywhere?" in out
        assert "forgot generic session work/s2" in out
        monkeypatch.setattr("sys.stdin", io.StringIO(""))
        code, out, _ = await ctl(capsys, sock, "forget", "--query", "billing", "--yes")
        assert code == 0 and out.startswith("forgot 1 turns")


async def test_issue_28_exclude_project_excludes_that_project_not_the_folder_it_shares(
        tmp_path, src, sock, capsys):
    """A generic source's root holding only one project's sessions so far is not that
    project's folder: another project's session written there later is still read."""
    write_jsonl(src / "x1.jsonl", [{"cwd": "/home/u/p1"}, *msgs("x1", "2026-09-30", [
        ("user", "Initech plans for p1")])])
    write_jsonl(src / "x2.jsonl", [{"cwd": "/home/u/p1"}, *msgs("x2", "2026-09-30", [
        ("user", "more Initech for p1")])])
    clock = SettableClock(dt.datetime(2026, 10, 2, tzinfo=dt.UTC).timestamp())
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, 2)
        code, out, _ = await ctl(capsys, sock, "--json", "exclude", "/home/u/p1", "--project",
                                 "--purge")
        data = json.loads(out)
        assert code == 0 and data["purged"] == {"sessions": 2, "units": 2}
        assert sorted(data["patterns"]) == [str(src / "x1.jsonl"), str(src / "x2.jsonl")]
        write_jsonl(src / "x1.jsonl", msgs("x1b", "2026-10-01", [("user", "Initech p1 again")]))
        write_jsonl(src / "y.jsonl", [{"cwd": "/home/u/p2"}, *msgs("y", "2026-10-01", [
            ("user", "Initech in p2")])])
        await wait_for(lambda: _found(c, "p2"))
        code, out, _ = await ctl(capsys, sock, "ingest", str(src), "--wait")
        assert code == 0
        r = await c.search(query="Initech")
        assert [x["session_id"] for x in r["results"]] == ["y"]  # not x1's new line


async def _found(c, q):
    return (await c.search(query=q))["total"]


def _cut_off(sock, *args: str) -> subprocess.CompletedProcess[str]:
    """memoryctl (its console script's entry) writing into a pipe whose reader has gone,
    as under `| head` once head has its lines."""
    r, w = os.pipe()
    os.close(r)  # the reader left before memoryctl wrote a byte
    try:
        return subprocess.run([sys.executable, "-m", "memoryd.cli.memoryctl", "--socket",
                               str(sock), *args], stdout=w, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(w)


async def test_issue_28_a_reader_that_leaves_is_not_the_daemons_fault(
        tmp_path, src, sock, capsys):
    write_jsonl(src / "work" / "s1.jsonl", msgs("s1", "2026-09-30", [("user", "hello")]))
    clock = SettableClock(dt.datetime(2026, 10, 2, tzinfo=dt.UTC).timestamp())
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, 1)
        for args in (["sessions", "list"], ["--json", "search", "hello"], ["status"],
                     ["context", "hello"], ["config", "default"], ["export"]):
            p = await asyncio.to_thread(_cut_off, sock, *args)
            # 141 = 128 + SIGPIPE, as a shell reports coreutils cut off the same way
            assert (p.returncode, p.stderr) == (141, ""), args


async def test_issue_28_status_says_summaries_are_off_and_run_list_says_what_jobs_do(
        tmp_path, src, sock, capsys):
    clock = SettableClock(dt.datetime(2026, 10, 2, tzinfo=dt.UTC).timestamp())
    async with daemon(tmp_path, src, sock, clock) as (d, c):  # summary.enabled = false
        assert (await c.status())["summaries"]["enabled"] is False
        code, out, _ = await ctl(capsys, sock, "status")
        assert code == 0 and "summary  off (summary.enabled = false)" in out
        code, out, _ = await ctl(capsys, sock, "run", "--list")
        rows = dict(line.split(None, 1) for line in out.splitlines())
        assert set(rows) == set((await c.request("GET", "/v1/jobs"))["jobs"])
        assert rows["reindex"].startswith("rebuild the search index")
        assert all(rows.values())  # every job the daemon offers is described
    async with daemon(tmp_path, src, sock, clock, summary={"enabled": True}) as (d, c):
        code, out, _ = await ctl(capsys, sock, "status")
        assert code == 0 and "summary  off" not in out


def test_issue_28_doctor_lists_each_directory_once(memoryd_home, capsys, monkeypatch):
    """Without $XDG_RUNTIME_DIR the runtime dir is the state dir: one line for it."""
    monkeypatch.delenv("MEMORYD_HOME")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    from memoryd.cli.commands import main
    from memoryd.paths import resolve_paths

    paths = resolve_paths()
    assert paths.runtime_dir == paths.state_dir
    paths.state_dir.mkdir(parents=True, mode=0o700)
    main(["doctor"])
    dirs = [line.split(None, 2)[2] for line in capsys.readouterr().out.splitlines()
            if line.split()[1:2] == ["dirs"]]
    assert len(dirs) == 3 and len({d.split()[0] for d in dirs}) == 3
    assert sum(str(paths.state_dir) in d for d in dirs) == 1


def test_issue_28_logs_reads_the_daemons_stderr_file(memoryd_home, tmp_path, capfd):
    """memoryd started with its stderr in a file (`memoryd 2>FILE`, a supervisor's log):
    `memoryctl logs` shows that file's lines."""
    from memoryd.cli.commands import main
    from memoryd.client import MemorydClient
    from memoryd.paths import resolve_paths
    from tests.helpers import wait_until

    src = tmp_path / "src"
    src.mkdir()
    err = tmp_path / "daemon-stderr.log"
    with open(err, "wb") as f:
        p = subprocess.Popen([sys.executable, "-m", "memoryd", "--home", str(memoryd_home),
                              "--source", f"generic={src}", "--no-default-sources",
                              "--no-tcp"], stdout=subprocess.DEVNULL, stderr=f)
    try:
        sock = resolve_paths(str(memoryd_home)).socket
        wait_until(lambda: MemorydClient(sock, timeout=5).status()["pid"] == p.pid)
        wait_until(lambda: "ready on" in err.read_text())
        capfd.readouterr()
        assert main(["--home", str(memoryd_home), "logs", "-n", "200"]) == 0
        out, stderr = capfd.readouterr()
        assert "ready on" in out and str(err) in stderr
    finally:
        p.terminate()
        p.wait(timeout=60)


async def test_issue_28_mcp_searches_take_query_or_keywords(memoryd_home, sock, tmp_path):
    from mcp import Client, StdioServerParameters

    from tests.helpers import running_daemon

    src = tmp_path / "src"
    write_jsonl(src / "s1.jsonl", [{"role": "user", "content": "we use pnpm here", "id": "a"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        await ingested_units(sock, 1)
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memoryd.cli.commands", "mcp"],
            env={**os.environ, "MEMORYD_SOCKET": str(sock)})
        async with Client(params, read_timeout_seconds=30) as client:
            await client.call_tool("memory_write", {"content": "user prefers pnpm"})
            for tool, args in (("memory_search", {"query": "pnpm yarn"}),
                               ("memory_search", {"keywords": ["pnpm"]}),
                               ("transcript_search", {"query": "pnpm"}),
                               ("transcript_search", {"keywords": "pnpm"}),
                               ("transcript_search", {"keywords": ["pnpm", "npm"]})):
                r = await client.call_tool(tool, args)
                assert not r.is_error and "1 matches" in r.content[0].text, (tool, args)
            r = await client.call_tool("memory_search", {})
            assert r.is_error and "query" in r.content[0].text
            r = await client.call_tool("memory_write", {"content": " "})
            assert r.is_error and "content" in r.content[0].text  # the daemon's own words


async def ingested_units(sock, n):
    from tests.helpers import AsyncClient, caught_up

    c = AsyncClient(sock)

    async def enough():
        st = await caught_up(c)
        return st and st["units"] >= n

    await wait_for(enough)
