"""Proof suite: planted secrets never come out of memoryd (issue 8 item 3).

Every kind of tests/secrets_corpus.py is planted in three placements (user text, tool
output, JSON tool-call arguments, where the arguments are JSON text inside JSON) in
transcripts of three agents' formats (Claude Code, Codex, generic). A real daemon (a
subprocess, `python -m memoryd`, DEBUG logging to memoryd.log) reads them, summarizes
every session with the fake OpenAI-compatible server (tests/fakes) through litellm,
writes memory entries, and answers search, context, sessions, messages and summaries.
Then none of the secret values (nor a long fragment of one, as the full-text index
would keep it) appears in the DB file or its WAL, MEMORY.md, memoryd.log, the daemon's
stderr, any API response, or the fake LLM's request log. Ordinary text that looks a
little like a secret (tests/secrets_corpus.ORDINARY) comes back unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memoryd.client import ApiError, DaemonNotRunning, MemorydClient
from tests.fakes import FakeLLM, fake_llm  # noqa: F401 - the fixture
from tests.helpers import short_dir
from tests.secrets_corpus import KINDS, ORDINARY

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.reliability,
              pytest.mark.timeout(600)]

PLACEMENTS = ("user text", "tool output", "tool args")
TS0 = 1_767_000_000.0


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".000Z"


def fragments(secret: str) -> set[str]:
    """The secret, and what a tokenizer could keep of it: long alphanumeric runs."""
    out = {secret}
    out |= {run.lower() for run in re.findall(r"[A-Za-z0-9]{12,}", secret)}
    return out


def plan() -> list[tuple[str, str, str]]:
    """(kind, placement, text) for every kind and placement, plus the ordinary texts."""
    rows = [(kind, where, text) for kind, text, _ in KINDS for where in PLACEMENTS]
    rows += [("ordinary", "user text", text) for text in ORDINARY]
    return rows


def args_for(text: str) -> dict[str, Any]:
    # a command carrying JSON: the secret sits behind escaped quotes once stored
    return {"command": f"curl -s https://api.example.com -d '{json.dumps({'note': text})}'",
            "description": "call the API"}


# -- three agents' formats ---------------------------------------------------------------

def write_generic(path: Path, rows: list[tuple[str, str, str]]) -> None:
    lines: list[dict[str, Any]] = []
    for i, (kind, where, text) in enumerate(rows):
        ts = TS0 + 10 * i
        if where == "user text":
            lines.append({"role": "user", "content": f"{kind}: {text}", "id": f"u{i}",
                          "timestamp": ts})
            lines.append({"role": "assistant", "content": f"Noted the {kind} setting.",
                          "id": f"a{i}", "timestamp": ts + 1})
            continue
        cid = f"call{i}"
        args = args_for(text) if where == "tool args" else {"command": "cat .env"}
        out = f"$ cat .env\n{text}\n" if where == "tool output" else "ok"
        lines.append({"role": "assistant", "content": "", "id": f"t{i}", "timestamp": ts,
                      "tool_calls": [{"id": cid, "type": "function", "function": {
                          "name": "bash", "arguments": json.dumps(args)}}]})
        lines.append({"role": "tool", "tool_call_id": cid, "name": "bash", "content": out,
                      "timestamp": ts + 1})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def write_claude_code(path: Path, rows: list[tuple[str, str, str]], sid: str) -> None:
    base = {"sessionId": sid, "cwd": "/home/u/proj", "version": "1.0.119",
            "userType": "external", "isSidechain": False}
    lines: list[dict[str, Any]] = []
    for i, (kind, where, text) in enumerate(rows):
        ts = iso(TS0 + 10 * i)
        if where == "user text":
            lines.append({**base, "type": "user", "uuid": f"u-{i}", "timestamp": ts,
                          "message": {"role": "user", "content": f"{kind}: {text}"}})
            lines.append({**base, "type": "assistant", "uuid": f"a-{i}", "timestamp": ts,
                          "message": {"id": f"msg_a{i}", "role": "assistant", "content": [
                              {"type": "text", "text": f"Noted the {kind} setting."}]}})
            continue
        tid = f"toolu_{i:04d}"
        args = args_for(text) if where == "tool args" else {"command": "cat .env"}
        out = f"$ cat .env\n{text}\n" if where == "tool output" else "ok"
        lines.append({**base, "type": "assistant", "uuid": f"t-{i}", "timestamp": ts,
                      "message": {"id": f"msg_t{i}", "role": "assistant", "content": [
                          {"type": "tool_use", "id": tid, "name": "Bash", "input": args}]}})
        lines.append({**base, "type": "user", "uuid": f"r-{i}", "timestamp": ts,
                      "message": {"role": "user", "content": [
                          {"tool_use_id": tid, "type": "tool_result", "content": out}]}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def write_codex(path: Path, rows: list[tuple[str, str, str]], sid: str) -> None:
    def line(i: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": iso(TS0 + 10 * i), "type": kind, "payload": payload}

    lines = [line(0, "session_meta", {"id": sid, "timestamp": iso(TS0), "cwd": "/home/u/proj",
                                      "originator": "codex_cli_rs", "cli_version": "0.128.0"})]
    for i, (kind, where, text) in enumerate(rows):
        if where == "user text":
            lines.append(line(i, "event_msg", {"type": "user_message",
                                               "message": f"{kind}: {text}"}))
            lines.append(line(i, "event_msg", {"type": "agent_message",
                                               "message": f"Noted the {kind} setting."}))
            continue
        cid = f"call_{i:04d}"
        args = args_for(text) if where == "tool args" else {"cmd": "cat .env"}
        out = f"$ cat .env\n{text}\n" if where == "tool output" else "ok"
        lines.append(line(i, "response_item", {"type": "function_call", "name": "exec_command",
                                               "arguments": json.dumps(args), "call_id": cid}))
        lines.append(line(i, "response_item", {"type": "function_call_output", "call_id": cid,
                                               "output": out}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


# -- the daemon ----------------------------------------------------------------------------

def config(path: Path, fake: FakeLLM) -> Path:
    path.write_text(f"""
[llm]
model = "openai/fake"
api_base = "{fake.url}"
timeout_s = 30.0
retry_backoff_s = 0.05
retry_backoff_max_s = 0.2

[summary]
message_buffer_min = 0

[log]
level = "DEBUG"
file = true
""", encoding="utf-8")
    return path


async def call(c: MemorydClient, method: str, path: str, body: Any = None,
               query: dict[str, Any] | None = None) -> Any:
    return await asyncio.to_thread(c.request, method, path, body, query)


async def until(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = await pred()
        except (DaemonNotRunning, ConnectionError, OSError) as e:
            last = e
        else:
            if last and not isinstance(last, Exception):
                return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout}s; last seen {last!r}")


async def test_planted_secrets_never_come_out(tmp_path, fake_llm: FakeLLM):  # noqa: F811
    rows = plan()
    roots = {a: tmp_path / "src" / a for a in ("claude-code", "codex", "generic")}
    write_claude_code(roots["claude-code"] / "proj" / "s-claude.jsonl", rows,
                      "5f0c1d2e-0000-4000-8000-00000000c1a0")
    write_codex(roots["codex"] / "2026" / "01" / "01"
                / "rollout-2026-01-01T00-00-00-019e0000-0000-7000-8000-00000000c0de.jsonl",
                rows, "019e0000-0000-7000-8000-00000000c0de")
    write_generic(roots["generic"] / "proj" / "s-generic.jsonl", rows)
    home = tmp_path / "home"
    cfg = config(tmp_path / "config.toml", fake_llm)
    stderr_path = tmp_path / "stderr.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_LOG")}
    env.update(MEMORYD_HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True")
    responses: list[str] = []

    with short_dir() as d, open(stderr_path, "wb") as err:
        sock = d / "m.sock"
        sources = [a for agent, root in roots.items() for a in ("--source", f"{agent}={root}")]
        proc = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--config", str(cfg), "--no-default-sources",
             *sources, "--socket", str(sock), "--port", "0", "--log-level", "DEBUG"],
            env=env, stdout=subprocess.DEVNULL, stderr=err)
        c = MemorydClient(sock, timeout=300)
        try:
            async def got(method: str, path: str, body: Any = None,
                          query: dict[str, Any] | None = None) -> Any:
                data = await call(c, method, path, body, query)
                responses.append(json.dumps(data, ensure_ascii=False)
                                 if not isinstance(data, str) else data)
                return data

            async def caught_up() -> bool:
                s = await call(c, "GET", "/v1/status")
                return bool(s.get("caught_up")) and s.get("units", 0) > 0

            t0 = time.monotonic()
            await until(caught_up, 240, "daemon caught up")
            phases = {"ingest": time.monotonic() - t0}
            sessions = (await got("GET", "/v1/sessions", query={"limit": 100}))["sessions"]
            assert {s["agent"] for s in sessions} >= set(roots), sessions

            # summaries (and one-liners) through the fake LLM, for every session
            for s in sessions:
                q = {"agent": s["agent"], "wait": "true", "timeout": 240}
                await got("POST", f"/v1/sessions/{s['session_id']}/summarize", query=q)
            assert fake_llm.requests, "no LLM request was made"
            phases["summaries"] = time.monotonic() - t0 - sum(phases.values())

            async def queue_idle() -> bool:
                s = await got("GET", "/v1/status")
                jobs = json.dumps(s.get("jobs") or s.get("job_queue") or {})
                return '"running": 0' in jobs and '"pending": 0' in jobs or "pending" not in jobs

            await until(queue_idle, 240, "job queue idle")
            phases["queue"] = time.monotonic() - t0 - sum(phases.values())

            # memory written through the API, with a secret in it
            for _, text, _ in KINDS[:10]:
                try:
                    await got("POST", "/v1/memory/entries",
                              {"content": f"deploy note: {text}", "source": "manual"})
                except ApiError as e:  # a rejected write must not echo the secret either
                    responses.append(str(e))

            # everything a client can read back
            for s in sessions:
                sid, agent = s["session_id"], s["agent"]
                await got("GET", f"/v1/sessions/{sid}", query={"agent": agent})
                await got("GET", f"/v1/sessions/{sid}/messages",
                          query={"agent": agent, "limit": 1000})
                await got("GET", f"/v1/sessions/{sid}/summary",
                          query={"agent": agent, "recent": 1000})
                await got("POST", "/v1/context", {"session_id": sid, "agent": agent,
                                                  "query": "deploy config key", "budget_tokens":
                                                  8000})
            for q in ("config", "REDACTED", "password", "token", "key", "secret",
                      "postgres", "Authorization", "cat .env", "curl", "deploy note"):
                await got("POST", "/v1/search", {"query": q, "max_results": 200})
            await got("POST", "/v1/context", {"query": "api key password", "budget_tokens": 8000})
            await got("GET", "/v1/memory")
            await got("GET", "/v1/memory/recent", query={"count": 50})
            await got("POST", "/v1/memory/search", {"keywords": ["deploy", "note"]})
            await got("GET", "/v1/status")
            await got("GET", "/metrics")

            phases["reads"] = time.monotonic() - t0 - sum(phases.values())
            live = {p.name: p.read_bytes() for p in home.rglob("*")
                    if p.is_file() and ("memoryd.db" in p.name)}
            assert any(n.endswith("-wal") for n in live) or live, sorted(live)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # what is on disk after a clean stop, and what went out
    files = {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}
    db_files = {n: b for n, b in files.items() if "memoryd.db" in n}
    memory_files = {n: b for n, b in files.items() if n.endswith(".md")}
    log_files = {n: b for n, b in files.items() if ".log" in n}
    assert db_files and log_files, sorted(files)
    assert any(n.endswith("MEMORY.md") for n in memory_files), sorted(files)
    log_text = b"".join(log_files.values()).decode("utf-8", "replace")
    assert " DEBUG " in log_text, "the daemon did not log at DEBUG"
    assert "\x1b[" not in log_text, "ANSI colour codes in memoryd.log"
    sinks: dict[str, bytes] = {
        **{f"live {n}": b for n, b in live.items()},
        **{f"file {n}": b for n, b in files.items()},
        "stderr": stderr_path.read_bytes(),
        "API responses": "\n".join(responses).encode("utf-8"),
        "LLM requests": json.dumps(fake_llm.requests, ensure_ascii=False).encode("utf-8"),
    }
    llm_text = json.dumps(fake_llm.requests, ensure_ascii=False)
    assert "REDACTED" in llm_text, "the LLM never saw the planted (redacted) lines"
    leaks: list[str] = []
    for kind, _text, secrets in KINDS:
        for secret in secrets:
            for frag in fragments(secret):
                needle = frag.encode("utf-8")
                for sink, blob in sinks.items():
                    if needle in blob or needle in blob.lower():
                        leaks.append(f"{kind}: {frag[:24]}… in {sink}")
    assert not leaks, f"{len(leaks)} leaks:\n" + "\n".join(sorted(set(leaks))[:60])

    # planted for real: each kind's line reached storage, as REDACTED text
    api_text = "\n".join(responses)
    for kind, _, _ in KINDS:
        assert f"{kind}: " in api_text or kind in llm_text, f"{kind} never ingested"
    # ordinary look-alikes are stored as they were
    for text in ORDINARY:
        assert json.dumps(text, ensure_ascii=False)[1:-1] in api_text, text
    print(f"\n{len(KINDS)} kinds x {len(PLACEMENTS)} placements x {len(roots)} agents = "
          f"{len(KINDS) * len(PLACEMENTS) * len(roots)} plantings, {len(fake_llm.requests)} "
          f"LLM requests, {len(responses)} API responses, {len(sinks)} sinks checked: 0 leaks; "
          + ", ".join(f"{k} {v:.1f}s" for k, v in phases.items()))
