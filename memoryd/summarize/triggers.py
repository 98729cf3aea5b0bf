"""When summaries are made. Every trigger only enqueues jobs (DESIGN §4):

- threshold: a session's unsummarized messages exceed `message_buffer_limit`, or their
  user+assistant text exceeds `char_threshold` -> summarize up to the buffer cut;
- interval: every `interval_user_messages` user messages -> the same, a refresh;
- idle: a periodic sweep finds sessions idle for `idle_minutes` with at least
  `idle_min_messages` unsummarized -> summarize everything (the segment's final summary).
  The sweep is paced: it tops the queue up to `SWEEP_BATCH` idle sessions, newest first,
  so a first start on a big history works through it a few sessions a sweep instead of
  queueing thousands of jobs at once;
- upgrade: a periodic pass that redoes extractive artifacts once a model is usable.

Threshold and interval are driven by the ingestor's events: `on_ingest` only marks
sessions dirty; one task checks them in batches (not while `busy()`, the daemon's
backfill: the dirty sessions wait, coalesced). A threshold or interval summary covers
at least `message_buffer_min` messages (so a run of long messages is not summarized
two at a time), and one-liners are asked for a full `one_liner_batch` at a time (the
idle sweep and manual runs take whatever is left). The sweeps run on APScheduler 3.x's
`AsyncIOScheduler`; a scheduled job only starts a task owned by `Triggers` and
returns, so `stop()` can cancel everything at once. Time comes from `clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from memoryd.config import SummarySettings
from memoryd.errors import StoreUnavailableError
from memoryd.ingest.ingestor import IngestEvent
from memoryd.store import Store
from memoryd.store.summaries import (
    Backlog,
    backlogs,
    buffer_cut,
    count_for_one_liners,
    idle_sessions,
    mark_user_units,
)
from memoryd.store.jobs import waiting_targets

log = logging.getLogger(__name__)

BUSY_POLL_S = 0.5
# APScheduler 3 times its jobs by the wall clock: a step back of it held every job (idle
# sweep, consolidation, retention, upgrade) for the size of the step. The loop's clock is
# monotonic: every CLOCK_CHECK_S (or sweep period, if shorter) the two are compared, and
# a step back of more than CLOCK_STEP_S reschedules every job from the new wall time.
CLOCK_CHECK_S = 30.0
CLOCK_STEP_S = 2.0
SWEEP_BATCH = 8  # idle sessions waiting for their summary at once, at most
# (kind, target, params, reason) -> job id
Enqueue = Callable[[str, str, dict[str, Any], str], Awaitable[int]]


def session_target(pk: int) -> str:
    return f"session:{pk}"


class Triggers:
    def __init__(self, store: Store, enqueue: Enqueue, settings: SummarySettings, *,
                 clock: Callable[[], float] = time.time,
                 upgrade: Callable[[], Awaitable[Any]] | None = None,
                 busy: Callable[[], bool] | None = None) -> None:
        self.store = store
        self.enqueue = enqueue
        self.settings = settings
        self.clock = clock
        self.upgrade = upgrade
        self.busy_source = busy
        self.fired: dict[str, int] = {"threshold": 0, "interval": 0, "idle": 0}
        self.last_sweep: float | None = None
        self._dirty: set[int] = set()
        self._checking = False
        self._active: dict[int, float] = {}  # session -> when this process last saw units
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._scheduler: Any = None
        self._crons: list[tuple[str, str, Any, Callable[[], Awaitable[Any]], int]] = []

    # -- ingest-driven: threshold and interval -------------------------------------------

    def on_ingest(self, event: IngestEvent) -> None:
        """Subscriber of the ingestor (called on the loop after each committed batch)."""
        if not self.settings.enabled:  # summary.enabled = false: manual runs only
            return
        now = self.clock()
        for pk in event.new_units:
            self._dirty.add(pk)
            self._active[pk] = now
        self._wake.set()

    async def _check_loop(self) -> None:
        while True:
            await self._wake.wait()
            while self.busy_source is not None and self.busy_source():
                await asyncio.sleep(BUSY_POLL_S)  # backfilling: check once it is done
            self._wake.clear()
            pks, self._dirty = sorted(self._dirty), set()
            self._checking = True
            try:
                await self.check(pks)
            except StoreUnavailableError:  # the store's health logs the outage once
                self._dirty.update(pks)  # checked again on the next wake
            except Exception:
                log.exception("summary trigger check failed")
            finally:
                self._checking = False

    def pending(self) -> bool:
        """Sessions wait to be checked (tests and status poll this)."""
        return bool(self._dirty) or self._checking

    async def check(self, pks: list[int]) -> list[tuple[int, str]]:
        """Enqueue what the threshold and interval triggers ask for these sessions."""
        s = self.settings
        keep = s.message_buffer_min

        def decide(c: Any) -> tuple[list[tuple[Backlog, str]], list[int]]:
            fire, lines = [], []
            for b in backlogs(c, pks):
                if count_for_one_liners(c, b.pk, b.one_liner_upto, s.one_liner_min_chars,
                                        s.one_liner_message_chars) >= s.one_liner_batch:
                    lines.append(b.pk)  # a full batch waits: one call's worth
                if b.messages > s.message_buffer_limit or b.chars > s.char_threshold:
                    reason = "threshold"
                elif s.interval_user_messages and \
                        b.user_units - b.user_mark >= s.interval_user_messages:
                    reason = "interval"
                else:
                    continue
                cut = buffer_cut(c, b.pk, b.upto, keep)
                # none: one long turn, wait for the next user message (or idle); and a
                # step covers at least `keep` messages, so a run of long messages is not
                # summarized two at a time
                if cut is None or (cut - 1 - b.upto < keep and b.messages
                                   <= s.message_buffer_limit):
                    continue
                fire.append((b, reason))
            return fire, lines

        fire, lines = await self.store.read(decide)
        for b, reason in fire:
            await self.enqueue("summarize", session_target(b.pk), {"mode": "buffer"}, reason)
            await self.store.write(lambda c, pk=b.pk: mark_user_units(c, pk))
            self.fired[reason] += 1
        for pk in lines:
            await self.enqueue("one_liners", session_target(pk), {}, "batch")
        return [(b.pk, reason) for b, reason in fire]

    # -- sweeps --------------------------------------------------------------------------

    async def sweep_idle(self, now: float | None = None) -> list[int]:
        """Enqueue a final summary for idle sessions with enough unsummarized: the
        newest first, as many as keep `SWEEP_BATCH` of them waiting (the next sweeps
        take the rest)."""
        now = self.clock() if now is None else now
        before = now - self.settings.idle_minutes * 60
        active = dict(self._active)

        def due(c: Any) -> list[int]:
            idle = idle_sessions(c, before, self.settings.idle_min_messages, active)
            waiting = waiting_targets(c, "summarize")
            room = SWEEP_BATCH - len(waiting)
            fresh = [pk for pk in sorted(idle, reverse=True)
                     if session_target(pk) not in waiting]
            return fresh[: max(0, room)]

        pks = await self.store.read(due)
        for pk in pks:
            await self.enqueue("summarize", session_target(pk), {"mode": "all"}, "idle")
            await self.enqueue("one_liners", session_target(pk), {}, "idle")
            self._active.pop(pk, None)
        self.fired["idle"] += len(pks)
        self.last_sweep = now
        if pks:
            log.info("idle sweep: %d sessions to summarize", len(pks))
        return pks

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        s = self.settings
        sched = AsyncIOScheduler(timezone=dt.UTC,
                                 job_defaults={"coalesce": True, "max_instances": 1,
                                               "misfire_grace_time": 300})
        if s.enabled:
            sched.add_job(self._fire_idle, "interval", seconds=s.sweep_seconds, id="idle_sweep")
        if self.upgrade is not None:
            sched.add_job(self._fire_upgrade, "interval", seconds=s.upgrade_minutes * 60,
                          id="upgrade")
        sched.start()
        self._scheduler = sched
        for cron in self._crons:
            self._add_cron(*cron)
        self.spawn(self._check_loop(), "summary-triggers")
        self.spawn(self._watch_clock(min(CLOCK_CHECK_S, s.sweep_seconds)), "clock-watch")

    async def stop(self) -> None:
        if self._scheduler is not None:
            with contextlib.suppress(Exception):
                self._scheduler.shutdown(wait=False)
            self._scheduler = None
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)

    async def _watch_clock(self, period: float) -> None:
        wall, mono = time.time(), time.monotonic()
        while True:
            await asyncio.sleep(period)
            w, m = time.time(), time.monotonic()
            step, wall, mono = (w - wall) - (m - mono), w, m
            if step < -CLOCK_STEP_S and self._scheduler is not None:
                n = self._reschedule()
                log.warning("the wall clock stepped back %.0f s: %d scheduled jobs "
                            "rescheduled from the new time", -step, n)

    def _reschedule(self) -> int:
        """Every job's next run computed again from now (APScheduler's wall clock)."""
        from apscheduler.triggers.interval import IntervalTrigger

        now = dt.datetime.now(dt.UTC)
        jobs = self._scheduler.get_jobs()
        for job in jobs:
            if isinstance(job.trigger, IntervalTrigger):  # its start lies ahead now
                nxt = now + job.trigger.interval
            else:
                nxt = job.trigger.get_next_fire_time(None, now)
            job.modify(next_run_time=nxt)
        return len(jobs)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.create_task(coro, name=f"memoryd-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", task.get_name(), exc_info=task.exception())

    async def _fire_idle(self) -> None:
        self.spawn(self.sweep_idle(), "idle-sweep")

    async def _fire_upgrade(self) -> None:
        if self.upgrade is not None:
            self.spawn(self.upgrade(), "upgrade")

    def add_cron(self, job_id: str, crontab: str, tz: Any,
                 fn: Callable[[], Awaitable[Any]], misfire_grace_s: int) -> None:
        """A cron job (consolidation, retention) in the user's zone. A laptop that slept
        through runs catches up once on wake (coalesce), if within the grace time."""
        self._crons.append((job_id, crontab, tz, fn, misfire_grace_s))
        if self._scheduler is not None:
            self._add_cron(job_id, crontab, tz, fn, misfire_grace_s)

    def _add_cron(self, job_id: str, crontab: str, tz: Any,
                  fn: Callable[[], Awaitable[Any]], misfire_grace_s: int) -> None:
        from apscheduler.triggers.cron import CronTrigger

        async def fire() -> None:
            self.spawn(fn(), job_id)

        self._scheduler.add_job(fire, CronTrigger.from_crontab(crontab, timezone=tz),
                                id=job_id, replace_existing=True, coalesce=True,
                                misfire_grace_time=misfire_grace_s)

    def next_runs(self) -> dict[str, str | None]:
        if self._scheduler is None:
            return {}
        return {j.id: j.next_run_time.isoformat() if j.next_run_time else None
                for j in self._scheduler.get_jobs()}
