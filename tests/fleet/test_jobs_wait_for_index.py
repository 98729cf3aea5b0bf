"""A fleet member's background jobs wait while its index works through a backlog of the
change feed, then run (issue 14, `ingest.backfill.JobsWait`, bench/README "pgcatch"), against a
real PostgreSQL and a real daemon: summaries and one-liners run beside the niced feed
writer took the CPU it needed to catch up after a backfill."""

from __future__ import annotations

import asyncio
import contextlib
import time

from memoryd.models import Record
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record
from tests.fleet.daemons import fleet_daemons, msg
from tests.helpers import caught_up, short_dir, wait_for, write_jsonl

PAGE = 10  # the feed's page here: 60 changes are a backlog of six pages


@contextlib.asynccontextmanager
async def laptop(tmp_path, pg_url):
    """One fleet member, "laptop", with two lines of its own: (daemon, client)."""
    root = tmp_path / "laptop" / "src"
    write_jsonl(root / "a.jsonl", [msg(0, "the heron ledger"), msg(1, "a reply")])
    with short_dir() as d:
        async with fleet_daemons(tmp_path, {"laptop": root}, d, pg_url) as started:
            yield started["laptop"]


async def hold_a_backlog(dm) -> int:
    """Another machine's backfill written into the shared store; `dm`'s feed writer reads
    one page of it, then is held (as during an own backfill): its index has read part of
    a backlog and knows there is more. Returns `dm`'s own session (a job's target)."""
    ix = dm.store.index
    feed = ix._indexer
    feed.follower.batch = PAGE
    applies = feed.applies
    ix.busy_gap_s = 3600.0
    ix.busy = lambda: feed.applies > applies

    def put(c):
        pk = session_pk(c, "generic", "t", project="/p", machine="server")
        return [store_record(c, pk, Record("user", f"server line {i} crane"),
                             f"t-{i}", None, 0).unit_id for i in range(6 * PAGE)]

    await dm.store.write(put)
    await wait_for(lambda: feed.holding and ix.backlog(), timeout=30)
    return await dm.store.read(lambda c: c.execute(
        "SELECT id FROM sessions WHERE machine = 'laptop'").fetchone()[0])


async def test_jobs_wait_while_the_index_pages_a_backlog_then_run(tmp_path, pg_url):
    async with laptop(tmp_path, pg_url) as (dm, client):
        ix, queue = dm.store.index, dm.summaries.queue
        assert dm.backfill_done and not ix.backlog()
        pk = await hold_a_backlog(dm)
        job_id = await queue.enqueue("summarize", f"session:{pk}", {}, reason="test")
        # not claimed while the backlog waits (the queue looks again every 0.5 s)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.0:
            assert not queue.running, "a job ran beside the index's backlog"
            assert await dm.store.read(lambda c: c.execute(
                "SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
                ) == "pending"
            await asyncio.sleep(0.1)

        ix.busy = lambda: False  # the hold ends: the rest is paged at once
        ix._indexer.wake()
        job = await asyncio.wait_for(queue.wait(job_id), timeout=60)
        assert job.state == "done"
        assert not ix.backlog()
        st = await wait_for(lambda: caught_up(client), timeout=30)
        assert st["units"] == 2 + 6 * PAGE


async def test_jobs_wait_for_the_index_at_most_jobs_wait_max_s(tmp_path, pg_url):
    """A member fed a full page at every poll would keep its jobs waiting for good: past
    `JobsWait.max_s` of one backlog they run beside it."""
    async with laptop(tmp_path, pg_url) as (dm, _):
        ix, queue = dm.store.index, dm.summaries.queue
        pk = await hold_a_backlog(dm)  # and held for good
        dm.jobs_wait.max_s = 2.0
        t0 = time.monotonic()
        job_id = await queue.enqueue("summarize", f"session:{pk}", {}, reason="test")
        job = await asyncio.wait_for(queue.wait(job_id), timeout=60)
        assert job.state == "done"
        assert time.monotonic() - t0 >= 1.0  # it waited first
        assert ix.backlog()  # and ran while the backlog still held
