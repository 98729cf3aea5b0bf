"""The persistent job queue: merging, single flight, retries with backoff, restarts
(including kill -9 of a process mid-job), and the LLM's transient and fatal errors
as the summary jobs see them."""

from __future__ import annotations

import asyncio
import collections
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from memoryd.jobs.queue import JobQueue, PermanentJobError
from memoryd.daemon.store_index import open_store
from memoryd.store.jobs import claim_job, enqueue_job, job_counts
from memoryd.store.summaries import get_session, summary_history, usage_by_target
from tests.fakes import Transcript, fake_llm, settings_with, summaries_service  # noqa: F401
from tests.fakes import Ingest
from tests.helpers import wait_for


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "m.db")
    yield s
    await s.close()


class Recorder:
    """Job handlers that record what ran, when, and how many at once per target."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str, dict]] = []
        self.active: collections.Counter[str] = collections.Counter()
        self.max_active: collections.Counter[str] = collections.Counter()
        self.max_total = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.failures: collections.Counter[str] = collections.Counter()

    async def __call__(self, job) -> dict:
        self.active[job.target] += 1
        self.max_active[job.target] = max(self.max_active[job.target], self.active[job.target])
        self.max_total = max(self.max_total, sum(self.active.values()))
        try:
            await self.gate.wait()
            await asyncio.sleep(0.01)
            if self.failures[job.target] > 0:
                self.failures[job.target] -= 1
                raise RuntimeError(f"flaky {job.target}")
            if job.params.get("permanent"):
                raise PermanentJobError("cannot work")
            self.ran.append((job.kind, job.target, job.params))
            return {"ok": True}
        finally:
            self.active[job.target] -= 1


def queue(store, rec, **kw) -> JobQueue:
    kw = {"workers": 3, "max_attempts": 3, "backoff_s": 0.02, "backoff_max_s": 0.1, **kw}
    return JobQueue(store, {"work": rec}, **kw)


async def done(store, n: int) -> bool:
    c = await store.read(job_counts)
    return c["pending"] == 0 and c["running"] == 0 and c["done"] + c["failed"] >= n


async def test_jobs_pending_merge_and_single_flight_per_target(store):
    rec = Recorder()
    rec.gate.clear()
    q = queue(store, rec)
    await q.start()
    try:
        a = await q.enqueue("work", "x", {"n": 1})
        await wait_for(lambda: rec.active["x"] == 1)
        b = await q.enqueue("work", "x", {"n": 2})  # x is running: a new pending job
        c = await q.enqueue("work", "x", {"n": 3})  # merged into b
        d = await q.enqueue("work", "y", {"n": 4})
        assert b != a and c == b and d not in (a, b)
        rec.gate.set()
        await wait_for(lambda: done(store, 3))
        assert rec.max_active["x"] == 1
        assert [p["n"] for _, t, p in rec.ran if t == "x"] == [1, 3]
        assert (await q.wait(c)).state == "done"
    finally:
        await q.stop()


async def test_jobs_worker_pool_is_bounded(store):
    rec = Recorder()
    q = queue(store, rec, workers=2)
    await q.start()
    try:
        for i in range(8):
            await q.enqueue("work", f"t{i}")
        await wait_for(lambda: done(store, 8))
        assert rec.max_total <= 2 and len(rec.ran) == 8
    finally:
        await q.stop()


async def test_jobs_only_urgent_ones_run_while_busy(store):
    rec = Recorder()
    busy = [True]
    q = queue(store, rec, busy=lambda: busy[0])
    await q.start()
    try:
        later = await q.enqueue("work", "a")
        now = await q.run_now("work", "b", timeout=5)  # someone waits for it: it runs
        assert now.state == "done" and [t for _, t, _ in rec.ran] == ["b"]
        busy[0] = False
        assert (await q.wait(later, timeout=5)).state == "done"
    finally:
        await q.stop()


async def test_jobs_retry_with_backoff_then_fail(store):
    rec = Recorder()
    rec.failures["flaky"] = 2
    rec.failures["broken"] = 99
    q = queue(store, rec)
    await q.start()
    try:
        flaky = await q.enqueue("work", "flaky")
        broken = await q.enqueue("work", "broken")
        perm = await q.enqueue("work", "perm", {"permanent": True})
        jf, jb, jp = [await q.wait(i, timeout=5) for i in (flaky, broken, perm)]
        assert (jf.state, jf.attempts) == ("done", 3)
        assert (jb.state, jb.attempts) == ("failed", 3) and "flaky broken" in jb.last_error
        assert (jp.state, jp.attempts) == ("failed", 1)
        # exponential: the retries were spaced by at least 0.02 s and 0.04 s
        assert jf.finished_at - jf.created_at >= 0.06
    finally:
        await q.stop()


async def test_jobs_restart_resumes_pending_and_interrupted_jobs(tmp_path):
    db = tmp_path / "m.db"
    store = await open_store(db)
    now = time.time()
    for target in ("a", "b", "c"):
        await store.write(lambda c, t=target: enqueue_job(c, "work", t, params={}, reason="x",
                                                            run_at=now, now=now))
    running = await store.write(lambda c: claim_job(c, now))  # then the process "died"
    assert running.state == "running"
    await store.close()
    store = await open_store(db)
    rec = Recorder()
    q = queue(store, rec)
    await q.start()
    try:
        await wait_for(lambda: done(store, 3))
        assert sorted(t for _, t, _ in rec.ran) == ["a", "b", "c"]
    finally:
        await q.stop()
        await store.close()


# -- through the summary service and the fake LLM server -----------------------------------


async def test_jobs_transient_llm_errors_are_retried(tmp_path, fake_llm):
    settings = settings_with(fake_llm, llm={"timeout_s": 1.0})
    async with summaries_service(tmp_path / "m.db", settings) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.turns(3)
        await ingest(t)
        await svc.llm.warm_up()
        fake_llm.fail_next(429)
        fake_llm.fail_next(500)
        fake_llm.delay_next(0, 2)
        fake_llm.delay_next(1.5)  # the third attempt times out
        r = await svc.summarize("proj/s1", wait=True, timeout=30)
        assert r["made_by"] == "openai/fake" and r["result"]["llm_calls"] == 1
        assert len([x for x in fake_llm.requests if "<conversation>" in str(x)]) == 4
        job = await svc.store.read(lambda c: c.execute(
            "SELECT attempts, last_error FROM jobs WHERE id = ?", (r["job_id"],)).fetchone())
        assert job["attempts"] == 4 and job["last_error"] is None
        st = await svc.status()
        assert st["llm"]["today"]["errors"] == 3 and st["llm"]["paused"] is None


async def test_jobs_give_up_on_the_llm_after_max_retries(tmp_path, fake_llm):
    settings = settings_with(fake_llm, llm={"max_retries": 1})
    async with summaries_service(tmp_path / "m.db", settings) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.turns(3)
        await ingest(t)
        fake_llm.fail_next(503, times=5)
        r = await svc.summarize("proj/s1", wait=True, timeout=30)
        assert r["state"] == "done" and r["made_by"] == "extractive"  # the last attempt
        assert len(summary_reqs(fake_llm)) == 2


def summary_reqs(fake) -> list[dict]:
    return [x for x in fake.requests if "<conversation>" in x["messages"][1]["content"]]


async def test_jobs_fatal_llm_error_pauses(tmp_path, fake_llm):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        t = Transcript(tmp_path / "src", name="a")
        t.turns(3)
        u = Transcript(tmp_path / "src", name="b")
        u.turns(3)
        await ingest(t)
        await ingest(u)
        fake_llm.fail_next(401)
        r = await svc.summarize("a", wait=True)
        assert r["made_by"] == "extractive"
        r = await svc.summarize("b", wait=True)
        assert r["made_by"] == "extractive"
        assert len(summary_reqs(fake_llm)) == 1  # nothing sent once paused
        st = (await svc.status())["llm"]
        assert "401" in st["paused"] and st["in_use"] == "extractive"
        assert (await svc.run_resume_llm({}))["was_paused"]
        assert (await svc.status())["llm"]["paused"] is None


async def test_jobs_budget_spent_sends_nothing(tmp_path, fake_llm):
    settings = settings_with(fake_llm, llm={"daily_token_budget": 1500})
    async with summaries_service(tmp_path / "m.db", settings) as (svc, ingest):
        ts = {name: Transcript(tmp_path / "src", name=name) for name in "abcd"}
        for t in ts.values():
            t.turns(3)
            await ingest(t)
        made = [(await svc.summarize(n, wait=True))["made_by"] for n in ("a", "b", "c", "d")]
        assert made[0] == "openai/fake" and made[-1] == "extractive"
        sent = len(fake_llm.requests)
        st = (await svc.status())["llm"]
        assert st["budget"]["used_today"] <= 1500 and st["today"]["calls"] == sent
        ts["a"].turns(3)
        await ingest(ts["a"])
        assert (await svc.summarize("a", wait=True))["made_by"] == "extractive"
        assert len(fake_llm.requests) == sent  # the fake server's log proves it


# -- kill -9 ---------------------------------------------------------------------------------

RUNNER = textwrap.dedent("""
    import asyncio, os, sys
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from memoryd.llm import _import_litellm
    _import_litellm()  # seconds: before the store is touched
    print("imported", flush=True)
    sys.stdin.readline()  # the test says go once every process has imported
    from pathlib import Path
    from memoryd.config import load_settings
    from memoryd.daemon.store_index import open_store
    from tests.fakes import build_summaries, start_summaries

    async def main():
        settings = load_settings(None, environ={}, overrides={
            "llm": {"model": "openai/fake", "api_base": sys.argv[2], "timeout_s": 60,
                    "concurrency": 1},
            "summary": {"workers": 1}})
        store = await open_store(Path(sys.argv[1]))
        svc = build_summaries(settings, store)
        await start_summaries(svc)
        print("started", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


@pytest.mark.slow
@pytest.mark.timeout(900)  # three processes import litellm: minutes on a loaded machine
async def test_jobs_kill_9_mid_job_then_restart_finishes_each_once(tmp_path, fake_llm):
    db = tmp_path / "m.db"
    store = await open_store(db)
    ingest = Ingest(store)
    names = [f"s{i}" for i in range(5)]
    for name in names:
        t = Transcript(tmp_path / "src", name=name)
        t.turns(3, user=lambda i, n=name: f"Topic {n} part {i}: the quokka parser.")
        await ingest(t)
    q = JobQueue(store, {})
    for pk in range(1, 6):
        await q.enqueue("summarize", f"session:{pk}", {"mode": "all"}, reason="test")
    await store.close()

    fake_llm.delay_next(0, 2)
    fake_llm.delay_next(600)  # the third request hangs until the process dies
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    cmd = [sys.executable, "-c", RUNNER, str(db), fake_llm.url]
    # Both processes import litellm first and then wait to be told to go: under load
    # that import alone takes minutes of wall time, and no deadline below may include it
    # (the flake: a 40 s bound on "three requests" that also paid for two concurrent
    # imports). Each step's bound then covers only that step's own work.
    first, second = (subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env) for _ in range(2))
    try:
        for p in (first, second):
            assert await asyncio.to_thread(p.stdout.readline) == b"imported\n"
        go(first)
        await wait_for(lambda: len(fake_llm.requests) == 3, timeout=40)
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait, 5)
        go(second)
        store = await open_store(db)
        try:
            await wait_for(lambda: done(store, 5), timeout=30)
            per_session = await store.read(lambda c: [
                (get_session(c, pk)["summary_by"], len(summary_history(c, pk)))
                for pk in range(1, 6)])
            usage = await store.read(usage_by_target)
        finally:
            await store.close()
    finally:
        for p in (first, second):
            if p.poll() is None:
                p.kill()
            await asyncio.to_thread(p.wait, 5)
            for pipe in (p.stdin, p.stdout):
                if pipe is not None:
                    pipe.close()
    assert per_session == [("openai/fake", 1)] * 5  # every job done, none twice
    assert usage == {f"session:{pk}": 1 for pk in range(1, 6)}
    sent = collections.Counter(re.search(r"Topic (s\d)", str(r)).group(1)
                               for r in fake_llm.requests)
    assert sorted(sent.values()) == [1, 1, 1, 1, 2]  # only the interrupted one was re-sent


def go(p: subprocess.Popen) -> None:
    p.stdin.write(b"go\n")
    p.stdin.flush()


async def test_jobs_finished_ones_are_pruned_while_running(store):
    from memoryd.jobs.queue import KEEP_FINISHED_S, PRUNE_EVERY_S

    now = [1_000_000.0]
    rec = Recorder()
    q = queue(store, rec, clock=lambda: now[0])
    await q.start()
    try:
        await q.enqueue("work", "a")
        await wait_for(lambda: done(store, 1))
        now[0] += KEEP_FINISHED_S + PRUNE_EVERY_S + 1  # a week and an hour later
        await q.enqueue("work", "b")
        await wait_for(lambda: done(store, 1))
        counts = await wait_for(lambda: _pruned(store))
        assert counts["done"] == 1  # only b's row is left
    finally:
        await q.stop()


async def _pruned(store):
    c = await store.read(job_counts)
    return c if c["done"] == 1 and c["pending"] == 0 else None
