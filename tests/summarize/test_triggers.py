"""Triggers only enqueue: threshold (messages, characters), interval (user messages),
idle sweep (with an injected clock), and the scheduler's lifecycle."""

from __future__ import annotations

import time

from memoryd.store.summaries import get_session, summary_history
from tests.fakes import (  # noqa: F401
    Transcript,
    fake_llm,
    settings_with,
    stop_summaries,
    summaries_idle,
    summaries_service,
)
from tests.helpers import wait_for

T0 = 1_700_000_000.0


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def settled(svc, timeout: float = 10.0) -> None:
    await wait_for(lambda: summaries_idle(svc), timeout=timeout)


async def reasons(svc, pk: int = 1) -> list[str]:
    return [h["reason"] for h in await svc.store.read(lambda c: summary_history(c, pk))]


async def test_triggers_interval_every_n_user_messages(tmp_path):
    async with summaries_service(tmp_path / "m.db", settings_with(None)) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.turns(9)
        await ingest(t)
        await settled(svc)
        assert await reasons(svc) == []
        t.turns(1)  # the 10th user message
        await ingest(t)
        await settled(svc)
        assert await reasons(svc) == ["interval"]
        s = await svc.store.read(lambda c: get_session(c, 1))
        assert s["summary_upto"] == 10  # units 11..20 kept, starting at a user message
        assert svc.triggers.fired == {"threshold": 0, "interval": 1, "idle": 0}


async def test_triggers_interval_zero_disables_it(tmp_path):
    settings = settings_with(None, interval_user_messages=0)
    async with summaries_service(tmp_path / "m.db", settings) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.turns(20)
        await ingest(t)
        await settled(svc)
        assert await reasons(svc) == []


async def test_triggers_char_threshold(tmp_path):
    settings = settings_with(None, interval_user_messages=0, message_buffer_min=2)
    async with summaries_service(tmp_path / "m.db", settings) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.turns(2, user=lambda i: f"Long request {i}. " + "detail " * 700)
        await ingest(t)
        await settled(svc)
        assert await reasons(svc) == []  # 9,800 characters: under the threshold
        t.turns(1, user=lambda i: "And one more long one. " + "detail " * 100)
        await ingest(t)
        await settled(svc)
        assert await reasons(svc) == ["threshold"]
        s = await svc.store.read(lambda c: get_session(c, 1))
        assert s["summary_upto"] == 4


async def test_triggers_one_long_turn_waits_for_a_user_message(tmp_path):
    async with summaries_service(tmp_path / "m.db", settings_with(None)) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.user("Refactor everything.")
        for i in range(40):
            t.tool("bash", {"command": f"step {i}"}, "ok")
        await ingest(t)
        await settled(svc)
        assert await reasons(svc) == []  # 81 units, but no user message to cut at
        t.turns(6)
        await ingest(t)
        await settled(svc)
        assert await reasons(svc) == ["threshold"]
        s = await svc.store.read(lambda c: get_session(c, 1))
        assert s["summary_upto"] == 83  # the kept tail (84..93) starts at a user message


async def test_triggers_idle_sweep_with_an_injected_clock(tmp_path):
    clock = Clock()
    async with summaries_service(tmp_path / "m.db", settings_with(None), clock=clock) as (
            svc, ingest):
        t = Transcript(tmp_path / "src", name="a", start_ts=T0 - 100)
        t.turns(2)
        short = Transcript(tmp_path / "src", name="b", start_ts=T0 - 100)
        short.user("Just one message here.")
        short.assistant("And one reply.")
        await ingest(t)
        await ingest(short)
        await settled(svc)
        clock.now = T0 + 10 * 60
        assert await svc.triggers.sweep_idle() == []
        clock.now = T0 + 16 * 60
        assert await svc.triggers.sweep_idle() == [1]  # "b" has only 2 unsummarized
        await settled(svc)
        assert await reasons(svc) == ["idle"]
        s = await svc.store.read(lambda c: get_session(c, 1))
        assert s["summary_upto"] == 4 and s["summary_by"] == "extractive"
        assert await svc.triggers.sweep_idle() == []  # nothing new since
        r = await svc.run_idle_sweep({})
        assert r == {"sessions": 0}


async def test_triggers_scheduler_lifecycle_and_quick_stop(tmp_path, fake_llm):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        runs = svc.schedule.next_runs()
        assert set(runs) == {"idle_sweep", "upgrade"}
        t = Transcript(tmp_path / "src")
        t.turns(3)
        await ingest(t)
        fake_llm.delay_next(30)
        await svc.summarize("proj/s1")
        await wait_for(lambda: fake_llm.requests, timeout=20)  # a request hangs
        t0 = time.monotonic()
        await stop_summaries(svc)  # schedule, queue, triggers, LLM: as the daemon stops them
        assert time.monotonic() - t0 < 2.0
        st = await svc.store.read(lambda c: c.execute(
            "SELECT state, attempts FROM jobs WHERE kind = 'summarize'").fetchall())
        assert [tuple(r) for r in st] == [("pending", 0)]  # resumed at the next start


async def test_triggers_one_liners_wait_for_a_full_batch(tmp_path):
    settings = settings_with(None, one_liner_batch=3, interval_user_messages=0)
    output = "\n".join(f"row {i}: value" for i in range(100))

    async def lines():
        return await svc.store.read(lambda c: [tuple(r) for r in c.execute(
            "SELECT seq, one_liner FROM units WHERE one_liner IS NOT NULL ORDER BY seq")])

    async with summaries_service(tmp_path / "m.db", settings) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.user("Look at the tables.")
        t.tool("query", {"query": "select * from a"}, output)  # 2, 3
        t.assistant("Medium reply. " + "words " * 200)  # 4: 1,214 chars, its own summary
        await ingest(t)
        await settled(svc)
        assert await lines() == []  # one long unit so far: waits for a batch
        t.assistant("The long reply. " + "words " * 300)  # 5: 1,816 chars
        t.tool("query", {"query": "select * from b"}, output)  # 6, 7
        await ingest(t)
        await settled(svc)
        assert await lines() == [(3, "query select * from a → 100 lines"),
                                 (5, "The long reply."),
                                 (7, "query select * from b → 100 lines")]


async def test_triggers_wait_while_the_daemon_is_busy(tmp_path):
    from memoryd.daemon.store_index import open_store
    from tests.fakes import Ingest, build_summaries, start_summaries

    busy = [True]
    store = await open_store(tmp_path / "m.db")
    svc = build_summaries(settings_with(None), store, busy=lambda: busy[0])
    ingest = Ingest(store)
    ingest.ingestor.subscribers.append(svc.on_ingest)
    await start_summaries(svc)
    try:
        t = Transcript(tmp_path / "src")
        t.turns(30)
        await ingest(t)
        assert svc.triggers.pending()  # checked once the backfill is over
        busy[0] = False
        await settled(svc)
        assert await reasons(svc) == ["threshold"]
    finally:
        await stop_summaries(svc)
        await store.close()


async def test_idle_sweep_is_paced_on_a_big_history(tmp_path):
    """A first start on a history of many idle sessions queues a few summaries per
    sweep (newest first), never one job per session at once; later sweeps take the
    rest, and every session is summarized in the end."""
    from memoryd.store.jobs import waiting_targets
    from memoryd.summarize.triggers import SWEEP_BATCH

    n = 3 * SWEEP_BATCH + 2
    clock = Clock()
    async with summaries_service(tmp_path / "m.db", settings_with(None), clock=clock) as (
            svc, ingest):
        for i in range(n):
            t = Transcript(tmp_path / "src", name=f"p/s{i:02d}", start_ts=T0 - 100)
            t.turns(2)
            await ingest(t)
        await settled(svc)
        clock.now = T0 + 16 * 60
        swept: list[list[int]] = []
        while sum(map(len, swept)) < n:  # each sweep queues at least one session
            got = await svc.triggers.sweep_idle()
            waiting = await svc.store.read(lambda c: waiting_targets(c, "summarize"))
            assert 0 < len(got) <= SWEEP_BATCH and len(waiting) <= SWEEP_BATCH
            swept.append(got)
            await settled(svc)
        first = swept[0]
        assert first == sorted(first, reverse=True) and first[0] == n  # newest first
        done = sorted(pk for got in swept for pk in got)
        assert done == list(range(1, n + 1))  # each session once
        assert len(swept) == -(-n // SWEEP_BATCH)
        assert await svc.triggers.sweep_idle() == []
        for pk in (1, n):
            s = await svc.store.read(lambda c, pk=pk: get_session(c, pk))
            assert s["summary_by"] == "extractive"
