"""Issue 10, items 7 and 10: the served-context log (`memoryctl served`,
GET /v1/context/log) and the job queue (`memoryctl jobs`, `run --wait`), end to end
through a real daemon."""

from __future__ import annotations

import json
import time

import pytest

from memoryd.recall.served_log import ServedLog
from memoryd.daemon.store_index import open_store
from tests.helpers import (AsyncClient, caught_up, ctl, running_daemon, wait_for,
                           write_jsonl)




@pytest.fixture
async def live(memoryd_home, sock, tmp_path):
    src = tmp_path / "src"
    write_jsonl(src / "proj" / "s1.jsonl", [
        {"role": "user", "content": "please refactor the billing module", "id": "a1"},
        {"role": "assistant", "content": "refactored billing into three files", "id": "a2"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        await wait_for(lambda: caught_up(AsyncClient(sock)))
        yield d, src


async def test_issue_10_served_log_records_hooks_cli_and_http(live, sock, capsys, monkeypatch):
    code, out, _ = await ctl(capsys, sock, "context", "billing refactor", "--agent", "generic")
    assert code == 0 and "billing" in out
    hook = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "billing again?",
                       "session_id": "cc-123", "cwd": "/tmp"})
    code, out, _ = await ctl(capsys, sock, "hook", "claude-code", stdin=hook,
                             monkeypatch=monkeypatch)
    assert code == 0 and "billing" in out
    c = AsyncClient(sock)
    r = await c.request("GET", "/v1/context", query={"query": "billing", "format": "json"})
    assert r["total_tokens"] > 0

    log = await c.request("GET", "/v1/context/log")
    vias = [e["via"] for e in log["entries"]]
    assert vias == ["memoryctl", "hook", "socket"]
    first = log["entries"][0]
    assert first["agent"] == "generic" and first["session_id"] is None
    assert first["query"] == "billing refactor"
    assert any(i["id"].startswith("unit:") and i["record_id"] in ("a1", "a2")
               for i in first["items"])
    assert first["tokens"] == sum(e["tokens"] for e in log["entries"][:1])
    today = log["daily"][0]
    assert today["requests"] == 3
    assert today["tokens"] == sum(e["tokens"] for e in log["entries"])

    code, out, _ = await ctl(capsys, sock, "served", "--session", "cc-123")
    assert code == 0 and "hook" in out and "'billing again?'" in out and "unit:" in out
    assert "memoryctl" not in out.split("tokens served per day")[0]
    assert "tokens in 1 requests" in out
    code, out, _ = await ctl(capsys, sock, "served", "--last", "1")
    assert code == 0 and out.count("items:") == 1 and "tokens in 3 requests" in out
    code, out, _ = await ctl(capsys, sock, "--json", "served")
    assert len(json.loads(out)["entries"]) == 3
    code, _, err = await ctl(capsys, sock, "served", "--last", "0")
    assert code == 2
    with pytest.raises(Exception) as e:
        await c.request("GET", "/v1/context/log", query={"last": "x"})
    assert getattr(e.value, "status", None) == 400 and e.value.field == "last"


async def test_issue_10_served_log_keeps_its_retention(tmp_path):
    store = await open_store(tmp_path / "m.db")
    now = [time.time() - 40 * 86400]
    served = ServedLog(store, keep_days=30, clock=lambda: now[0])
    pack = {"total_tokens": 12, "recalled": [{"unit_id": 7, "record_id": "r", "tokens": 12}]}
    try:
        await served.record(via="hook", agent="codex", session_id="s", query="q",
                            budget_tokens=100, pack=pack)
        now[0] = time.time()
        await served.record(via="mcp", agent="codex", session_id="s", query="q2",
                            budget_tokens=100, pack=pack)
        got = await served.entries(session_id=None, agent=None, last=10, days=7)
        assert [e["via"] for e in got["entries"]] == ["mcp"]  # the 40-day-old one is gone
        assert got["entries"][0]["items"] == [{"section": "recalled", "id": "unit:7",
                                               "record_id": "r", "session_id": None,
                                               "tokens": 12}]
        off = ServedLog(store, keep_days=0)
        await off.record(via="hook", agent=None, session_id=None, query=None,
                         budget_tokens=100, pack=pack)
        got = await served.entries(session_id=None, agent=None, last=10, days=7)
        assert len(got["entries"]) == 1
    finally:
        await store.close()


async def test_issue_10_run_prints_the_job_id_and_wait_waits(live, sock, capsys):
    code, out, _ = await ctl(capsys, sock, "run", "summarize", "--session", "proj/s1")
    assert code == 0 and out.startswith("summarize: job #") and "--wait" in out
    code, out, _ = await ctl(capsys, sock, "run", "summarize", "--session", "proj/s1", "--wait")
    assert code == 0 and out.startswith("summarize: job #") and " done" in out, out
    code, out, _ = await ctl(capsys, sock, "jobs")
    assert code == 0 and "pending" in out.splitlines()[0]
    assert "summarize" in out and "generic proj/s1" in out and "(manual)" in out
    code, out, _ = await ctl(capsys, sock, "--json", "jobs", "--state", "done")
    data = json.loads(out)
    assert data["jobs"] and all(j["state"] == "done" for j in data["jobs"])
    job_id = data["jobs"][0]["id"]
    r = await AsyncClient(sock).request("GET", f"/v1/jobs/{job_id}", query={"wait": "true"})
    assert r["id"] == job_id and r["state"] == "done"
    code, out, _ = await ctl(capsys, sock, "jobs", "--follow", "--for", "0.5")
    assert code == 0 and "pending" in out.splitlines()[0]
