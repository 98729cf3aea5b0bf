"""The daemon's one scheduler: which job runs when.

The daemon builds one `Schedule` and hands it to the services; each registers its own
jobs on it (summaries' idle sweep and upgrade pass, consolidation's and retention's
crons, the fleet's change pruning) and the daemon starts it last and stops it first.
It runs APScheduler 3.x's `AsyncIOScheduler`; a firing only starts a task owned here
and returns, so `stop()` cancels everything at once.

APScheduler 3 times its jobs by the wall clock: a step back of it held every job for the
size of the step. The loop's clock is monotonic: every `check_s` the two are compared,
and a step back of more than `CLOCK_STEP_S` reschedules every job from the new wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

CLOCK_CHECK_S = 30.0
CLOCK_STEP_S = 2.0
# an interval job: a run missed (a laptop asleep) catches up once, within this
INTERVAL_GRACE_S = 300

JobFn = Callable[[], Coroutine[Any, Any, Any]]


@dataclass(frozen=True)
class _Job:
    job_id: str
    fn: JobFn
    task: str  # the name its runs' tasks get (in "... failed" log lines)
    seconds: float | None = None  # an interval job
    crontab: str | None = None  # a cron job, in `tz`
    tz: Any = None
    misfire_grace_s: int = INTERVAL_GRACE_S


class Schedule:
    def __init__(self, check_s: float = CLOCK_CHECK_S) -> None:
        self.check_s = check_s
        self._jobs: dict[str, _Job] = {}
        self._loops: list[tuple[Callable[[], Coroutine[Any, Any, Any]], str]] = []
        self._scheduler: Any = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- what the services register ------------------------------------------------------

    def every(self, job_id: str, seconds: float, fn: JobFn, *, task: str | None = None) -> None:
        """`fn` every `seconds` (the first run one period after the start)."""
        self._add(_Job(job_id, fn, task or job_id, seconds=seconds))

    def cron(self, job_id: str, crontab: str, tz: Any, fn: JobFn, misfire_grace_s: int) -> None:
        """`fn` on a cron in the zone `tz`. A laptop that slept through runs catches up
        once on wake (coalesce), if within the grace time."""
        self._add(_Job(job_id, fn, job_id, crontab=crontab, tz=tz,
                       misfire_grace_s=misfire_grace_s))

    def loop(self, fn: Callable[[], Coroutine[Any, Any, Any]], name: str) -> None:
        """`fn()` runs as a task from `start()` to `stop()` (a poll that is no cron, such
        as consolidation's lease watch)."""
        self._loops.append((fn, name))
        if self._scheduler is not None:
            self.spawn(fn(), name)

    def watch_clock_within(self, seconds: float) -> None:
        """A step of the wall clock is noticed within `seconds` (at most `check_s`)."""
        self.check_s = min(self.check_s, seconds)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        sched = AsyncIOScheduler(timezone=dt.UTC,
                                 job_defaults={"coalesce": True, "max_instances": 1,
                                               "misfire_grace_time": INTERVAL_GRACE_S})
        self._scheduler = sched
        for job in self._jobs.values():
            self._schedule(job)
        sched.start()
        for fn, name in self._loops:
            self.spawn(fn(), name)
        self.spawn(self._watch_clock(self.check_s), "clock-watch")

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

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.create_task(coro, name=f"memoryd-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)

    async def run_now(self, job_id: str) -> Any:
        """Run a registered job now and wait for it (outside its timing)."""
        return await self._jobs[job_id].fn()

    def next_runs(self) -> dict[str, str | None]:
        if self._scheduler is None:
            return {}
        return {j.id: j.next_run_time.isoformat() if j.next_run_time else None
                for j in self._scheduler.get_jobs()}

    # -- inside --------------------------------------------------------------------------

    def _add(self, job: _Job) -> None:
        self._jobs[job.job_id] = job
        if self._scheduler is not None:
            self._schedule(job)

    def _schedule(self, job: _Job) -> None:
        async def fire() -> None:
            self.spawn(job.fn(), job.task)

        if job.seconds is not None:
            self._scheduler.add_job(fire, "interval", seconds=job.seconds, id=job.job_id,
                                    replace_existing=True)
            return
        from apscheduler.triggers.cron import CronTrigger

        assert job.crontab is not None
        self._scheduler.add_job(fire, CronTrigger.from_crontab(job.crontab, timezone=job.tz),
                                id=job.job_id, replace_existing=True, coalesce=True,
                                misfire_grace_time=job.misfire_grace_s)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", task.get_name(), exc_info=task.exception())

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
