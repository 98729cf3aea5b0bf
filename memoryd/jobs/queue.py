"""The persistent job queue and its bounded worker pool.

Jobs live in SQLite (`store/jobs.py`), so a restart resumes what was pending, and a
job a crash left `running` goes back to pending at start. A job is claimed with one
UPDATE in the writer's transaction: never handed out twice, never while another job
on the same target runs. A failing job is retried with exponential backoff up to
`max_attempts`, then marked failed; a handler raising `PermanentJobError` fails at
once. Handlers are idempotent: each re-reads what is left to do, so a job that ran
but was not marked done (a crash in between) does nothing the second time. While
`busy()` (the daemon's backfill), only urgent jobs (someone waits for them) run.

In fleet mode several machines share the queue: a claim is leased to this machine
(`store.machine`) and renewed while the job runs; a machine that dies leaves its jobs to
be taken over when their leases run out, and a machine whose job was taken over (it was
too slow to renew) does not mark it done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from memoryd.config import Settings
from memoryd.errors import StoreUnavailableError
from memoryd.store import Store
from memoryd.store.jobs import (
    JobRow,
    Merge,
    Params,
    LEASE_S,
    claim_job,
    enqueue_job,
    fail_job,
    finish_job,
    get_job,
    job_counts,
    next_due,
    prune_jobs,
    recover_jobs,
    renew_lease,
    retry_job,
)

log = logging.getLogger(__name__)

Handler = Callable[[JobRow], Awaitable[dict[str, Any]]]
POLL_S = 5.0  # fleet mode: other machines add jobs to the shared queue
# one machine: every job is added by this process, whose enqueue wakes a worker, and a
# job due later is waited for until it is due; the look at this interval is a safety net
# that costs an idle daemon a write transaction per worker, so it is rare
LOCAL_POLL_S = 120.0
BUSY_POLL_S = 0.5
URGENT = 10  # the priority of jobs a person waits for: they run even while `busy()`
KEEP_FINISHED_S = 7 * 86400
PRUNE_EVERY_S = 3600
STOP_TIMEOUT_S = 1.5


class PermanentJobError(Exception):
    """The job cannot succeed by trying again."""


class JobQueue:
    def __init__(self, store: Store, handlers: Mapping[str, Handler], *, workers: int = 2,
                 max_attempts: int = 5, backoff_s: float = 30.0, backoff_max_s: float = 1800.0,
                 merge: Mapping[str, Merge] | None = None,
                 clock: Callable[[], float] = time.time,
                 busy: Callable[[], bool] | None = None, lease_s: float = LEASE_S) -> None:
        self.store = store
        self.machine = store.machine
        self.lease_s = lease_s
        self.handlers = dict(handlers)
        self.workers = workers
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.merge = dict(merge or {})
        self.clock = clock
        self.busy = busy
        self.running: dict[int, JobRow] = {}
        self.finished = 0
        self.failed = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._waiters: dict[int, list[asyncio.Future[JobRow]]] = {}
        self.on_finish: list[Callable[[JobRow], None]] = []
        self._last_prune = clock()  # start() prunes once; then at most every PRUNE_EVERY_S

    @classmethod
    def from_settings(cls, store: Store, settings: Settings, *,
                      clock: Callable[[], float] = time.time,
                      busy: Callable[[], bool] | None = None) -> JobQueue:
        """The daemon's queue, with no job kinds yet (their owners add them): workers
        `summary.workers`, a job tried `llm.max_retries + 1` times with the `llm` backoff,
        a fleet member's claim leased for `store.job_lease_s`."""
        return cls(store, {}, workers=settings.summary.workers,
                   max_attempts=settings.llm.max_retries + 1,
                   backoff_s=settings.llm.retry_backoff_s,
                   backoff_max_s=settings.llm.retry_backoff_max_s, clock=clock, busy=busy,
                   lease_s=settings.store.job_lease_s)

    def add_handler(self, kind: str, handler: Handler, *, merge: Merge | None = None) -> None:
        """A job kind, added by the service that owns it (the queue is built first);
        `merge` combines a new request with one of the same kind already waiting."""
        self.handlers[kind] = handler
        if merge is not None:
            self.merge[kind] = merge

    async def start(self) -> None:
        now = self.clock()

        def recover(c: Any) -> tuple[int, int, int]:
            resumed, failed = recover_jobs(c, now, self.max_attempts, self.merge.get,
                                           self.machine)
            return resumed, failed, prune_jobs(c, now - KEEP_FINISHED_S)

        resumed, failed, pruned = await self.store.write(recover)
        if resumed or failed:
            log.info("job queue: %d interrupted jobs resumed, %d failed for good", resumed, failed)
        if pruned:
            log.debug("job queue: %d old finished jobs forgotten", pruned)
        self._tasks = [asyncio.create_task(self._worker(i), name=f"memoryd-job-worker-{i}")
                       for i in range(self.workers)]

    async def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Cancel the workers; a job cut short goes back to pending (or is left
        `running` for the next start to resume, if the store is too slow)."""
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for futs in self._waiters.values():
            for f in futs:
                if not f.done():
                    f.cancel()
        self._waiters.clear()

    # -- enqueueing and waiting ----------------------------------------------------------

    async def enqueue(self, kind: str, target: str = "", params: Params | None = None, *,
                      reason: str | None = None, delay: float = 0.0,
                      priority: int = 0) -> int:
        """Add a job (or merge into the pending one of the same kind and target);
        returns the job id that will do it."""
        now = self.clock()
        job_id, created = await self.store.write(lambda c: enqueue_job(
            c, kind, target, params=params or {}, reason=reason, run_at=now + delay, now=now,
            priority=priority, merge=self.merge.get(kind)))
        log.debug("job %s %s %s (#%d, %s)", kind, target, "queued" if created else "merged",
                  job_id, reason)
        self._wake.set()
        return job_id

    async def wait(self, job_id: int, timeout: float | None = None) -> JobRow:
        """The job once it is done or failed (following merges into a newer job)."""
        async with asyncio.timeout(timeout):
            while True:
                fut: asyncio.Future[JobRow] = asyncio.get_running_loop().create_future()
                self._waiters.setdefault(job_id, []).append(fut)
                job = await self.store.read(lambda c: get_job(c, job_id))
                if job is None:
                    raise KeyError(job_id)
                if job.state in ("pending", "running"):
                    job = await fut
                else:
                    self._drop_waiter(job_id, fut)
                merged = (job.result or {}).get("merged_into")
                if job.state == "done" and merged:
                    job_id = int(merged)
                    continue
                return job

    def _drop_waiter(self, job_id: int, fut: asyncio.Future[JobRow]) -> None:
        futs = self._waiters.get(job_id, [])
        if fut in futs:
            futs.remove(fut)
        if not futs:
            self._waiters.pop(job_id, None)

    async def run_now(self, kind: str, target: str = "", params: Params | None = None, *,
                      reason: str = "manual", timeout: float | None = None) -> JobRow:
        job_id = await self.enqueue(kind, target, params, reason=reason, priority=URGENT)
        return await self.wait(job_id, timeout)

    async def counts(self) -> dict[str, Any]:
        c = await self.store.read(job_counts)
        c["workers"] = self.workers
        c["running_now"] = [{"id": j.id, "kind": j.kind, "target": j.target}
                            for j in self.running.values()]
        return c

    # -- workers -------------------------------------------------------------------------

    async def _worker(self, n: int) -> None:
        while True:
            self._wake.clear()
            deferring = self.busy is not None and self.busy()
            floor = URGENT if deferring else 0
            try:
                job = await self.store.write(lambda c: claim_job(
                    c, self.clock(), floor, machine=self.machine, lease_s=self.lease_s))
            except StoreUnavailableError:  # logged once by the store's health
                await asyncio.sleep(max(1.0, self.store.health.delay()))
                continue
            except Exception:
                log.exception("job queue: cannot claim a job")
                job = None
            if job is None:
                await self._prune_if_due()
                await self._idle(deferring)
                continue
            try:
                await self._run(job)
            except StoreUnavailableError:  # the database went away under the job: its
                # lease runs out and it is claimed again once the store is back
                log.info("job queue: job %s %s left for later: the store is unreachable",
                         job.kind, job.target)
                await asyncio.sleep(max(1.0, self.store.health.delay()))
            except Exception:  # the store failed under us: the job is resumed at next start
                log.exception("job queue: job %s %s could not be settled", job.kind, job.target)
                await asyncio.sleep(1.0)
            self._wake.set()  # a job on the same target may be waiting for this one

    async def _prune_if_due(self) -> None:
        """Forget finished jobs older than a week, at most hourly: a daemon that runs for
        months is not restarted to do it."""
        now = self.clock()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        try:
            n = await self.store.write(lambda c: prune_jobs(c, now - KEEP_FINISHED_S))
        except StoreUnavailableError:
            self._last_prune = 0.0  # the next idle look tries again
            return
        except Exception:
            log.exception("job queue: pruning finished jobs failed")
            return
        if n:
            log.debug("job queue: %d old finished jobs forgotten", n)

    async def _idle(self, deferring: bool) -> None:
        """Wait for an enqueue, the next due job, or (while deferring) the backfill's end.

        While deferring, the end of the backfill is a local fact, looked at every
        BUSY_POLL_S without a claim; the queue itself (a write transaction on the store's
        one writer, which the backfill's batches queue behind, and in fleet mode a round
        trip to the shared database) is looked at again after POLL_S, or at once when an
        enqueue wakes the worker (a job someone waits for is enqueued here)."""
        if deferring:
            loop = asyncio.get_running_loop()
            until = loop.time() + POLL_S
            while self.busy is not None and self.busy() and loop.time() < until:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(BUSY_POLL_S):
                        await self._wake.wait()
                if self._wake.is_set():
                    return
            return
        try:
            due = await self.store.read(next_due)
        except Exception:
            due = None
        poll = POLL_S if self.store.kind == "postgresql" else LOCAL_POLL_S
        delay = poll if due is None else min(poll, max(0.01, due - self.clock()))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._wake.wait()

    async def _run(self, job: JobRow) -> None:
        handler = self.handlers.get(job.kind)
        self.running[job.id] = job
        t0 = time.monotonic()
        renew = asyncio.create_task(self._renew(job), name=f"memoryd-job-lease-{job.id}")
        try:
            if handler is None:
                raise PermanentJobError(f"no handler for job kind {job.kind!r}")
            result = await handler(job)
        except asyncio.CancelledError:
            await self._release(job)
            raise
        except Exception as e:
            await self._failed(job, e)
        else:
            now = self.clock()
            mine = await self.store.write(lambda c: finish_job(c, job.id, result, now,
                                                               self.machine))
            self.finished += 1
            if mine:
                log.info("job %s %s done in %.1fs (attempt %d)", job.kind, job.target,
                         time.monotonic() - t0, job.attempts)
            else:
                log.warning("job %s %s finished here after its lease was taken over by "
                            "another machine: left to that machine", job.kind, job.target)
        finally:
            renew.cancel()
            self.running.pop(job.id, None)
        await self._settle(job.id)

    async def _renew(self, job: JobRow) -> None:
        """Keep the job's lease while it runs (every third of the lease)."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            now = self.clock()
            try:
                if not await self.store.write(
                        lambda c: renew_lease(c, job.id, self.machine, now, self.lease_s)):
                    log.warning("job %s %s: lease lost (taken over or settled)", job.kind,
                                job.target)
                    return
            except StoreUnavailableError:  # logged once by the store's health
                continue
            except Exception as e:  # the store is away: the next renewal tries again
                log.warning("job %s %s: cannot renew its lease: %s", job.kind, job.target,
                            type(e).__name__)

    async def _release(self, job: JobRow) -> None:
        """Put a job cut short by shutdown back, without using up an attempt."""
        now = self.clock()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                await self.store.write(lambda c: c.execute(
                    "UPDATE jobs SET state = 'pending', attempts = greatest(0, attempts - 1), "
                    "next_run_at = ?, updated_at = ? WHERE id = ? AND state = 'running'",
                    (now, now, job.id)))

    async def _failed(self, job: JobRow, e: Exception) -> None:
        now = self.clock()
        error = f"{type(e).__name__}: {e}"[:1000]
        if isinstance(e, PermanentJobError) or job.attempts >= self.max_attempts:
            await self.store.write(lambda c: fail_job(c, job.id, error, now))
            self.failed += 1
            log.error("job %s %s failed after %d attempts: %s", job.kind, job.target,
                      job.attempts, error, exc_info=not isinstance(e, PermanentJobError))
            return
        delay = min(self.backoff_max_s, self.backoff_s * 2 ** (job.attempts - 1))
        retry_after = getattr(e, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after > delay:
            delay = min(self.backoff_max_s, float(retry_after))
        merge = self.merge.get(job.kind)
        await self.store.write(lambda c: retry_job(c, job.id, error, now + delay, now, merge))
        log.warning("job %s %s attempt %d failed (%s); retrying in %.0fs", job.kind, job.target,
                    job.attempts, error, delay)

    async def _settle(self, job_id: int) -> None:
        futs = self._waiters.pop(job_id, [])
        job = await self.store.read(lambda c: get_job(c, job_id))
        if job is None:
            return
        if job.state in ("pending", "running"):  # retried later: keep waiting
            if futs:
                self._waiters.setdefault(job_id, []).extend(futs)
            return
        for fn in self.on_finish:
            try:
                fn(job)
            except Exception:
                log.exception("job listener failed")
        for f in futs:
            if not f.done():
                f.set_result(job)
