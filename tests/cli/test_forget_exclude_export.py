"""Issue 10, items 8 and 9: forget by topic, exclude a path or project, export, end to
end through a real daemon watching real files."""

from __future__ import annotations

import json

import pytest

from tests.helpers import (AsyncClient, caught_up, ctl, running_daemon, wait_for,
                           write_jsonl)




@pytest.fixture
async def live(memoryd_home, sock, tmp_path):
    src = tmp_path / "src"
    write_jsonl(src / "work" / "s1.jsonl", [
        {"cwd": "/home/u/work"},
        {"role": "user", "content": "my old password is hunter2, rotate it", "id": "a1",
         "timestamp": "2026-01-02T10:00:00Z"},
        {"role": "assistant", "content": "rotated; hunter2 no longer works", "id": "a2",
         "timestamp": "2026-01-02T10:00:05Z"},
        {"role": "user", "content": "now tidy the billing module", "id": "a3",
         "timestamp": "2026-01-02T10:01:00Z"}])
    write_jsonl(src / "secret" / "s2.jsonl", [
        {"cwd": "/home/u/secret"},
        {"role": "user", "content": "the acquisition of Initech closes in May", "id": "b1",
         "timestamp": "2026-01-03T09:00:00Z"},
        {"role": "assistant", "content": "noted: 数据库迁移 plan for Initech", "id": "b2",
         "timestamp": "2026-01-03T09:00:05Z"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        c = AsyncClient(sock)
        await wait_for(lambda: caught_up(c))
        yield d, src, c


async def test_issue_10_forget_by_query_dry_run_then_everywhere(live, sock, capsys):
    d, src, c = live
    code, out, _ = await ctl(capsys, sock, "memory", "add", "the wifi password was hunter2")
    code, out, _ = await ctl(capsys, sock, "forget", "--query", "hunter2", "--dry-run")
    assert code == 0 and out.startswith("would forget 2 turns in 1 sessions matching 'hunter2'")
    assert "work/s1" in out and "hunter2" in out
    assert (await c.search(query="hunter2"))["total"] == 2  # a dry run changes nothing
    await c.run_job("summarize", {"session_id": "work/s1", "wait": True})
    assert "hunter2" in (await c.request("GET", "/v1/sessions/work/s1/summary"))["summary"]

    await c.request("POST", "/v1/context", {"query": "rotate HUNTER2 again"})
    await c.request("POST", "/v1/context", {"query": "billing"})
    code, out, _ = await ctl(capsys, sock, "forget", "--query", "hunter2", "--yes")
    assert code == 0 and out.startswith("forgot 2 turns in 1 sessions")
    served = (await c.request("GET", "/v1/context/log"))["entries"]
    assert [e["query"] for e in served] == ["billing"]  # the log forgot who asked for it
    assert "summaries rebuilt: 1 sessions" in out and "MEMORY.md entries mentioning it: 1" in out
    r = await c.search(query="hunter2")
    assert r["total"] == 0
    s = await c.session("work/s1")
    assert s["units"] == 1 and s["roles"] == {"user": 1}
    msgs = (await c.messages("work/s1"))["messages"]
    assert [m["record_id"] for m in msgs] == ["a3"]
    # the summary that quoted it is rebuilt from what is left
    summary = await wait_for(lambda: _rebuilt(c), timeout=30)
    assert "hunter2" not in summary and "billing" in summary
    ctx = await c.request("POST", "/v1/context", {"query": "hunter2 password"})
    assert "hunter2" not in json.dumps(ctx["recalled"])
    code, out, _ = await ctl(capsys, sock, "forget", "--query", "hunter2", "--yes")
    assert code == 0 and out.startswith("nothing stored matches 'hunter2'")


async def _rebuilt(c):
    s = await c.request("GET", "/v1/sessions/work/s1/summary")
    return s["summary"]


async def test_issue_10_exclude_path_with_purge_and_its_future_files(live, sock, capsys):
    d, src, c = live
    code, out, _ = await ctl(capsys, sock, "exclude", str(src / "secret"), "--purge")
    assert code == 0 and f"excluded path {src / 'secret'}" in out
    assert "purged 2 turns in 1 sessions" in out
    assert (await c.search(query="Initech"))["total"] == 0
    # a new line in an excluded folder, and a new file there, are not read
    write_jsonl(src / "secret" / "s2.jsonl", [{"role": "user", "content": "Initech again",
                                               "id": "b3"}])
    write_jsonl(src / "secret" / "s3.jsonl", [{"role": "user", "content": "Initech memo",
                                               "id": "c1"}])
    write_jsonl(src / "work" / "s4.jsonl", [{"role": "user", "content": "Initech in work",
                                             "id": "d1"}])
    await wait_for(lambda: _found(c, "Initech"))
    await wait_for(lambda: caught_up(c))
    r = await c.search(query="Initech")
    assert [x["session_id"] for x in r["results"]] == ["work/s4"]
    code, out, _ = await ctl(capsys, sock, "exclude", "--list")
    assert "path" in out and str(src / "secret") in out


async def _found(c, q):
    return (await c.search(query=q))["total"]


async def test_issue_10_exclude_project_survives_a_restart(memoryd_home, sock, tmp_path,
                                                           capsys):
    src = tmp_path / "src"
    write_jsonl(src / "secret" / "s2.jsonl", [
        {"cwd": "/home/u/secret"}, {"role": "user", "content": "Initech plans", "id": "b1"}])
    write_jsonl(src / "work" / "s1.jsonl", [
        {"cwd": "/home/u/work"}, {"role": "user", "content": "Initech in work", "id": "a1"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: caught_up(c))
        code, out, _ = await ctl(capsys, sock, "--json", "exclude", "/home/u/secret",
                                 "--project")
        data = json.loads(out)
        assert code == 0 and data["kind"] == "project" and data["sessions_stored"] == 1
        assert str(src / "secret") in data["patterns"] and data["purged"] is None
        assert (await c.search(query="Initech"))["total"] == 2  # no --purge: kept
    write_jsonl(src / "secret" / "s9.jsonl", [
        {"cwd": "/home/u/secret"}, {"role": "user", "content": "Initech later", "id": "z"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: caught_up(c))
        r = await c.search(query="Initech later", mode="and")
        assert r["total"] == 0  # the excluded project's new file was not read
        code, _, err = await ctl(capsys, sock, "exclude", "relative/x", "--project")
        assert code == 2 and "absolute" in err


async def test_issue_10_export_md_and_jsonl(live, sock, capsys, tmp_path):
    d, src, c = live
    code, out, _ = await ctl(capsys, sock, "export", "--format", "md")
    assert code == 0
    assert out.index("# my old password") < out.index("# the acquisition")  # oldest first
    assert "- agent: generic" in out and "**user** ·" in out and "数据库迁移" in out
    code, out, _ = await ctl(capsys, sock, "export", "--session", "secret", "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["record_id"] for r in rows] == ["b1", "b2"]
    assert rows[1]["content"] == "noted: 数据库迁移 plan for Initech"
    assert rows[0]["session_id"] == "secret/s2" and rows[0]["agent"] == "generic"
    code, out, _ = await ctl(capsys, sock, "export", "--project", "/home/u/work",
                             "--format", "jsonl")
    assert {json.loads(line)["session_id"] for line in out.splitlines()} == {"work/s1"}
    code, out, _ = await ctl(capsys, sock, "export", "--since", "2026-01-03", "--format", "jsonl")
    assert {json.loads(line)["session_id"] for line in out.splitlines()} == {"secret/s2"}
    dest = tmp_path / "all.md"
    code, _, err = await ctl(capsys, sock, "export", "-o", str(dest))
    assert code == 0 and "wrote" in err and "hunter2" in dest.read_text()
    code, _, err = await ctl(capsys, sock, "export", "--session", "nope")
    assert code == 1 and "no session" in err
    code, _, err = await ctl(capsys, sock, "export", "--since", "yesterday-ish")
    assert code == 2 and "since" in err
