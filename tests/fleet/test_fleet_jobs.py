"""Fleet-wide work happens once (issue 14 item 6), against a real PostgreSQL: jobs are
claimed FOR UPDATE SKIP LOCKED with a lease, a dead machine's job is taken over when
its lease runs out, no job is handed to two machines at once, and a piece of fleet work
(a day's scheduled consolidation) is claimed by one machine only."""

from __future__ import annotations

import asyncio
import time

import psycopg

from memoryd.jobs.queue import JobQueue
from memoryd.daemon.store_index import open_store
from memoryd.store import Store
from memoryd.store.jobs import (
    claim_job,
    lease_now,
    claim_once,
    enqueue_job,
    finish_job,
    get_job,
    recover_jobs,
    renew_lease,
)
from memoryd.store_target import StoreTarget
from tests.helpers import wait_for


async def two_machines(tmp_path, url: str) -> dict[str, Store]:
    return {m: await open_store(tmp_path / m / "memoryd.db",
                                target=StoreTarget(url=url, machine=m, namespace="team"))
            for m in ("a", "b")}


async def close(stores: dict[str, Store]) -> None:
    for s in stores.values():
        await s.close()


def add(c, kind: str, target: str, now: float = 0.0) -> int:
    return enqueue_job(c, kind, target, params={}, reason="test", run_at=now, now=now)[0]


async def test_two_machines_claiming_at_once_never_share_a_job(tmp_path, pg_url):
    stores = await two_machines(tmp_path, pg_url)
    try:
        ids = await stores["a"].write(lambda c: [add(c, "summarize", f"s{i}")
                                                 for i in range(40)])
        claimed: dict[str, list[int]] = {"a": [], "b": []}
        # each claimer takes its first job before any takes a second: on a busy machine
        # one machine's claimers could otherwise take all 40 before the other's first
        first = asyncio.Barrier(4)

        async def claimer(m: str) -> None:
            waited = False
            while job := await stores[m].write(
                    lambda c: claim_job(c, time.time(), machine=m)):
                assert job.claimed_by == m
                claimed[m].append(job.id)
                if not waited:
                    waited = True
                    await first.wait()

        await asyncio.gather(claimer("a"), claimer("b"), claimer("a"), claimer("b"))
        got = claimed["a"] + claimed["b"]
        assert sorted(got) == sorted(ids)  # every job once, none twice
        assert claimed["a"] and claimed["b"]
    finally:
        await close(stores)


async def test_a_claim_skips_a_row_another_machine_holds_locked(tmp_path, pg_url):
    """SKIP LOCKED: while another machine's transaction holds the first job's row, a
    claim takes the next job at once instead of waiting."""
    stores = await two_machines(tmp_path, pg_url)
    try:
        first, second = await stores["a"].write(lambda c: [add(c, "k", "t1"),
                                                           add(c, "k", "t2")])
        with psycopg.connect(pg_url) as other:
            other.execute("SET search_path TO memoryd_team")
            other.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", (first,))
            t0 = time.monotonic()
            job = await stores["b"].write(lambda c: claim_job(c, time.time(), machine="b"))
            assert job is not None and job.id == second
            assert time.monotonic() - t0 < 20  # not blocked behind the lock
            other.rollback()
    finally:
        await close(stores)


async def test_a_dead_machines_job_is_taken_over_when_its_lease_expires(tmp_path, pg_url):
    stores = await two_machines(tmp_path, pg_url)
    a, b = stores["a"], stores["b"]
    try:
        jid = await a.write(lambda c: add(c, "consolidate", "2026-11-23"))
        job = await a.write(lambda c: claim_job(c, 100.0, machine="a", lease_s=60))
        db_now = await a.read(lambda c: lease_now(c, 0.0))
        # the lease is in the database's time (issue 28 item 7c), not the caller's 100.0
        assert job.id == jid and 0 < job.lease_until - db_now <= 60
        # b's restart recovery leaves a's running job alone, and b cannot claim it yet
        await b.write(lambda c: recover_jobs(c, 110.0, 5, machine="b"))
        assert await b.write(lambda c: claim_job(c, 120.0, machine="b")) is None
        assert await a.write(lambda c: renew_lease(c, jid, "a", 200.0, 60))
        assert await b.write(lambda c: claim_job(c, 170.0, machine="b")) is None
        # a dies: no renewal; its lease runs out (on the database's clock)
        await a.write(lambda c: c.execute(
            "UPDATE jobs SET lease_until = lease_until - 3600 WHERE id = ?", (jid,)))
        took = await b.write(lambda c: claim_job(c, 201.0, machine="b"))
        assert took.id == jid and took.claimed_by == "b" and took.attempts == 2
        # a, come back late, may neither renew nor finish it
        assert not await a.write(lambda c: renew_lease(c, jid, "a", 300.0, 60))
        assert not await a.write(lambda c: finish_job(c, jid, {}, 202.0, "a"))
        assert await b.write(lambda c: finish_job(c, jid, {"ok": 1}, 203.0, "b"))
        done = await a.read(lambda c: get_job(c, jid))
        assert done.state == "done" and done.result == {"ok": 1}
    finally:
        await close(stores)


async def test_the_job_queue_takes_over_a_dead_machines_job(tmp_path, pg_url):
    """A real JobQueue on machine b runs the job machine a claimed and then died with."""
    stores = await two_machines(tmp_path, pg_url)
    a, b = stores["a"], stores["b"]
    ran: list[str] = []

    async def handler(job):
        ran.append(job.claimed_by)
        return {"by": job.claimed_by}

    q = JobQueue(b, {"retention": handler}, workers=1, lease_s=1.0)
    try:
        jid = await a.write(lambda c: add(c, "retention", "", time.time()))
        await a.write(lambda c: claim_job(c, time.time(), machine="a", lease_s=1.0))
        await q.start()
        job = await wait_for(lambda: _done(b, jid), timeout=30)
        assert job.result == {"by": "b"} and ran == ["b"]
    finally:
        await q.stop()
        await close(stores)


async def _done(s: Store, jid: int):
    job = await s.read(lambda c: get_job(c, jid))
    return job if job.state == "done" else None


async def test_a_running_job_keeps_its_lease(tmp_path, pg_url):
    """The queue renews the lease of a job while it runs: the other machine cannot take
    over a slow job that is alive."""
    stores = await two_machines(tmp_path, pg_url)
    a, b = stores["a"], stores["b"]
    release = asyncio.Event()

    async def slow(job):
        await release.wait()
        return {}

    q = JobQueue(a, {"retention": slow}, workers=1, lease_s=3.0)  # renewed each second
    try:
        jid = await a.write(lambda c: add(c, "retention", "", time.time()))
        await q.start()
        await wait_for(lambda: q.running or None, timeout=30)
        for _ in range(3):  # three leases' worth of time
            await asyncio.sleep(3.0)
            assert await b.write(lambda c: claim_job(c, time.time(), machine="b")) is None
        release.set()
        job = await wait_for(lambda: _done(a, jid), timeout=30)
        assert job.claimed_by == "a" and job.attempts == 1
    finally:
        release.set()
        await q.stop()
        await close(stores)


async def test_a_days_consolidation_is_claimed_by_one_machine(tmp_path, pg_url):
    stores = await two_machines(tmp_path, pg_url)
    try:
        now = time.time()
        wins = await asyncio.gather(*[
            s.write(lambda c, m=m: claim_once(c, "consolidate", "nightly:2026-11-22", m, now))
            for _ in range(5) for m, s in stores.items()])
        assert sorted(wins) == [False] * 9 + [True]
        # a repeating firing: claimed again only once the window has passed
        a = stores["a"]
        assert await a.write(lambda c: claim_once(c, "consolidate", "day:x", "a", 0.0, 900))
        assert not await a.write(lambda c: claim_once(c, "consolidate", "day:x", "b", 600.0,
                                                      900))
        assert await a.write(lambda c: claim_once(c, "consolidate", "day:x", "b", 7200.0, 900))
    finally:
        await close(stores)


async def test_the_daily_llm_budget_is_one_for_the_namespace(tmp_path, pg_url):
    """What one machine spent counts against every machine's budget for the day."""
    from memoryd.store.summaries import record_usage, usage_on

    stores = await two_machines(tmp_path, pg_url)
    try:
        for m, n in (("a", 300), ("b", 200)):
            await stores[m].write(lambda c, m=m, n=n: record_usage(
                c, ts=time.time(), day="2026-11-23", model="fake", purpose="summary",
                target=m, input_tokens=n, output_tokens=0, cost=0.0, outcome="ok",
                error=None))
        for s in stores.values():
            assert (await s.read(lambda c: usage_on(c, "2026-11-23")))["tokens"] == 500
    finally:
        await close(stores)
