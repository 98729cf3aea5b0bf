"""Server-sent events through the real daemon's Unix socket."""

from __future__ import annotations

import asyncio
import json
import logging
from urllib.parse import quote

import aiohttp

from tests.fakes import Transcript
from tests.helpers import AsyncClient, running_daemon, wait_for


async def read_events(resp: aiohttp.ClientResponse, want: str, timeout: float = 15.0,
                      **fields: object) -> dict:
    """Events from an SSE stream until one named `want` whose data has `fields`."""
    async with asyncio.timeout(timeout):
        name = None
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: ") and name == want:
                data = json.loads(line[len("data: "):])
                if all(data.get(k) == v for k, v in fields.items()):
                    return data
    raise AssertionError(f"stream ended before {want}")


async def test_issue_8_job_done_reaches_event_subscribers(memoryd_home, sock, src, caplog):
    caplog.set_level(logging.ERROR)
    t = Transcript(src)
    t.turns(3)
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        await wait_for(lambda: _history_done(c))  # its job_done is not the one asked for
        conn = aiohttp.UnixConnector(path=str(sock))
        async with aiohttp.ClientSession(connector=conn) as http:
            async with http.get("http://localhost/v1/events") as events:
                assert events.status == 200
                assert (await events.content.readline()).startswith(b": connected")
                sid = quote(t.session_id, safe="")
                async with http.post(f"http://localhost/v1/sessions/{sid}/summarize") as r:
                    assert r.status == 202, await r.text()
                # the daemon's own jobs (a first start's history) may finish first
                ev = await read_events(events, "job_done", job="summarize")
    assert ev["job"] == "summarize" and ev["state"] == "done"  # as job_started names it
    assert ev["target"]
    assert not [r for r in caplog.records if "multiple values" in r.getMessage()
                or (r.exc_info and "multiple values" in str(r.exc_info[1]))]


async def _caught_up(c):
    st = await c.status()
    return st["caught_up"] and st["units"] > 0


async def _history_done(c):
    """The first start's history consolidation (queued after the backfill, so it can end
    after `caught_up`) has looked, and its job, if any, is done."""
    st = await c.status()
    h = st["consolidation"].get("history") or {}
    return h.get("looked") and not h.get("days_left") and not st["summaries"]["jobs"]["running"]
