"""`caught_up` is what scripts wait on (issue 28 item 8): once it says true, every unit
stored is searchable, and it stays true while nothing new arrives. A real daemon on
copies of every agent's fixture transcripts, one root per agent, its status polled as
fast as it answers."""

from __future__ import annotations

import asyncio
import shutil

from tests.helpers import AsyncClient, running_daemon, short_dir
from tests.test_fixtures_e2e import PHRASES

WORDS = PHRASES
REST_POLLS = 40


async def test_issue_28_caught_up_means_searchable_and_holds_at_rest(memoryd_home, tmp_path,
                                                                     fixtures_dir):
    roots = []
    for agent in WORDS:
        dst = tmp_path / "src" / agent
        shutil.copytree(fixtures_dir / agent, dst)
        roots.append((agent, dst))
    with short_dir() as d:
        sock = d / "m.sock"
        async with running_daemon(memoryd_home, roots, sock):
            c = AsyncClient(sock)
            for _ in range(20_000):  # bounded by the polls, not by a clock
                st = await c.status()
                if st["caught_up"]:
                    break
                await asyncio.sleep(0.01)
            assert st["caught_up"]
            # the instant it said so: each agent's word is found, and the index holds
            # every unit the store does
            for agent, word in WORDS.items():
                r = await c.search(query=word, agent=agent, mode="and")
                assert r["total"] >= 1, (agent, word, st["units"], st["index"])
            for _ in range(REST_POLLS):  # and it stays so with nothing new
                again = await c.status()
                assert again["caught_up"], {k: again[k] for k in (
                    "units", "unread_bytes", "queue_depth", "index", "ingest", "files",
                    "ignored_files", "backfill_done")}
                assert again["units"] == st["units"]
                await asyncio.sleep(0.05)
