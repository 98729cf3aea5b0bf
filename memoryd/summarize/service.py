"""Summaries as one service for the daemon: the summarizer and its triggers, and the
summary jobs' bodies.

The daemon builds the LLM, the job queue and the schedule and hands them in: this adds
its job kinds to the queue and its sweeps to the schedule (`Triggers`). The daemon
subscribes `on_ingest` to the ingestor, adds `jobs` to the `POST /v1/jobs/{name}/run`
table, hands it to the app as `Services.summaries` (served by server/summaries_api.py)
and puts `await status()` into `GET /v1/status`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from memoryd.config import Settings
from memoryd.errors import BadRequestError, MemorydError
from memoryd.events import EventBus
from memoryd.ingest.ingestor import IngestEvent
from memoryd.jobs.queue import URGENT, JobQueue, PermanentJobError
from memoryd.jobs.schedule import Schedule
from memoryd.llm import LLM
from memoryd.store import Store
from memoryd.store.jobs import JobRow, Params
from memoryd.store.sessions import resolve_session
from memoryd.store.summaries import (
    artifact_counts,
    extractive_sessions,
    get_session,
    recent_units,
    sessions_with_backlog,
)
from memoryd.summarize.summarizer import Summarizer
from memoryd.summarize.triggers import Triggers, session_target

log = logging.getLogger(__name__)

JobFn = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
UPGRADE_SESSIONS = 200  # sessions per upgrade pass
WAIT_TIMEOUT_S = 300.0


class JobFailedError(MemorydError):
    status = 502
    code = "job_failed"


class JobTimeoutError(MemorydError):
    status = 504
    code = "job_timeout"


def merge_summarize(old: Params, new: Params) -> Params:
    """Two summary requests for one session: "all" (idle, manual) covers "buffer"."""
    mode = "all" if "all" in (old.get("mode"), new.get("mode")) else "buffer"
    return {**old, **new, "mode": mode}


def _session_pk(target: str) -> int:
    kind, _, pk = target.partition(":")
    if kind != "session" or not pk.isdigit():
        raise PermanentJobError(f"bad job target {target!r}")
    return int(pk)


def _flag(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.lower() in ("1", "true", "yes", "on"))


class Summaries:
    def __init__(self, settings: Settings, store: Store, llm: LLM, queue: JobQueue,
                 schedule: Schedule, events: EventBus | None = None, *,
                 clock: Callable[[], float] = time.time,
                 busy: Callable[[], bool] | None = None) -> None:
        """`busy`: while it returns True (the daemon's backfill), triggers wait (the queue
        was given the same), so the backfill keeps the CPU."""
        self.settings = settings
        self.store = store
        self.events = events
        self.clock = clock
        self.llm = llm
        self.summarizer = Summarizer(store, self.llm, settings.summary, clock=clock)
        self.queue = queue
        self.max_attempts = queue.max_attempts
        queue.add_handler("summarize", self._summarize_job, merge=merge_summarize)
        queue.add_handler("one_liners", self._one_liners_job)
        queue.add_handler("upgrade", self._upgrade_job)
        self.queue.on_finish.append(self._finished)
        self.schedule = schedule
        self.triggers = Triggers(store, self._enqueue, settings.summary, schedule, clock=clock,
                                 upgrade=self.request_upgrade, busy=busy)
        self.started = False

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Before the queue starts: its workers may resume a summary job at once."""
        await self.summarizer.load_prompts()
        self.started = True
        if self.llm.model is not None:  # a task of the schedule's, run and stopped by it
            self.schedule.loop(self._warm_up_and_upgrade, "llm-warm-up")
        why = self.llm.unavailable_reason()
        log.info("summaries: %s", f"model {self.llm.model}" if why is None
                 else f"extractive ({why})")

    async def _warm_up_and_upgrade(self) -> None:
        await self.llm.warm_up()
        await self.request_upgrade()

    async def stop(self) -> None:
        """Marks the service stopped: the triggers' checks and the model's warm-up are
        the schedule's tasks, stopped with it (the schedule and the queue are stopped by
        whoever started them)."""
        self.started = False

    def on_ingest(self, event: IngestEvent) -> None:
        self.triggers.on_ingest(event)

    async def _enqueue(self, kind: str, target: str, params: dict[str, Any], reason: str) -> int:
        return await self.queue.enqueue(kind, target, params, reason=reason)

    # -- job bodies ----------------------------------------------------------------------

    async def _summarize_job(self, job: JobRow) -> dict[str, Any]:
        pk = _session_pk(job.target)
        final = job.attempts >= self.max_attempts
        result = await self.summarizer.summarize_session(
            pk, mode=str(job.params.get("mode", "buffer")), reason=job.reason, final_attempt=final)
        if "upto" in result and "skipped" not in result and self.events is not None:
            self.events.publish("summary_updated", session_pk=pk, made_by=result.get("made_by"),
                                upto=result["upto"])
        return result

    async def _one_liners_job(self, job: JobRow) -> dict[str, Any]:
        pk = _session_pk(job.target)
        result = await self.summarizer.one_liners(
            pk, final_attempt=job.attempts >= self.max_attempts)
        if result.get("more"):
            await self.queue.enqueue("one_liners", job.target, {}, reason="more")
        return result

    async def _upgrade_job(self, job: JobRow) -> dict[str, Any]:
        if job.target == "*":
            return await self._upgrade_scan()
        return await self.summarizer.upgrade_session(_session_pk(job.target))

    async def _upgrade_scan(self) -> dict[str, Any]:
        """Enqueue an upgrade per session with extractive artifacts, while the model is
        usable and has budget left (each session job checks the budget again)."""
        why = await self.llm.available()
        if why is not None:
            return {"skipped": why}
        pks = await self.store.read(lambda c: extractive_sessions(c, UPGRADE_SESSIONS))
        for pk in pks:
            await self.queue.enqueue("upgrade", session_target(pk), {}, reason="upgrade")
        if pks:
            log.info("upgrade: %d sessions with extractive summaries or one-liners queued",
                     len(pks))
        return {"sessions": len(pks)}

    async def request_upgrade(self) -> int | None:
        """Queue the upgrade pass when a model is usable (periodic, and at start)."""
        if await self.llm.available() is not None:
            return None
        return await self.queue.enqueue("upgrade", "*", {}, reason="upgrade")

    def _finished(self, job: JobRow) -> None:
        if self.events is not None:
            self.events.publish("job_done", job=job.kind, target=job.target, state=job.state)

    # -- for the HTTP API and `memoryctl run` --------------------------------------------

    @property
    def jobs(self) -> dict[str, JobFn]:
        return {"summarize": self.run_summarize, "one_liners": self.run_one_liners,
                "upgrade": self.run_upgrade, "idle_sweep": self.run_idle_sweep,
                "resume_llm": self.run_resume_llm}

    async def resolve(self, session_id: str, agent: str | None = None,
                      machine: str | None = None) -> dict[str, Any]:
        """The session with this id or unique prefix (`resolve_session`), every field."""
        def load(c: Any) -> dict[str, Any]:
            row = get_session(c, resolve_session(c, session_id, agent, "session_id",
                                                 machine)["pk"])
            assert row is not None  # the same read found it
            return row

        return await self.store.read(load)

    async def get_summary(self, session_id: str, agent: str | None = None,
                          recent_limit: int = 100, *,
                          machine: str | None = None) -> dict[str, Any]:
        s = await self.resolve(session_id, agent, machine)
        upto = s["summary_upto"]
        total, recent = await self.store.read(lambda c: recent_units(c, s["pk"], upto,
                                                                     recent_limit))
        return {"agent": s["agent"], "session_id": s["session_id"],
                "machine": s["machine"] or None, "summary": s["summary"],
                "covers_upto_seq": upto, "made_by": s["summary_by"],
                "prompt_version": s["summary_prompt"], "updated_at": s["summary_updated"],
                "recent_total": total, "recent": recent}

    async def summarize(self, session_id: str, agent: str | None = None, *, wait: bool = False,
                        timeout: float = WAIT_TIMEOUT_S,
                        machine: str | None = None) -> dict[str, Any]:
        """Force a summary of everything so far (a manual job, ahead of the queue)."""
        s = await self.resolve(session_id, agent, machine)
        target = session_target(s["pk"])
        job_id = await self.queue.enqueue("summarize", target, {"mode": "all"}, reason="manual",
                                          priority=URGENT)
        await self.queue.enqueue("one_liners", target, {}, reason="manual", priority=URGENT - 1)
        if not wait:
            return {"job_id": job_id, "state": "pending"}
        job = await self._wait(job_id, timeout)
        if job.state == "failed":
            raise JobFailedError(f"summary job #{job.id} failed: {job.last_error}")
        return {"job_id": job.id, "state": job.state, "result": job.result,
                **await self.get_summary(s["session_id"], s["agent"],
                                         machine=s["machine"])}

    async def _wait(self, job_id: int, timeout: float) -> JobRow:
        try:
            return await self.queue.wait(job_id, timeout)
        except TimeoutError:
            raise JobTimeoutError(f"job #{job_id} still running after {timeout:g}s; its "
                                  "result will be stored when it is done") from None

    async def run_summarize(self, params: dict[str, Any]) -> dict[str, Any]:
        """`{session_id, agent?, wait?}`: one session; without a session, every session
        with at least `idle_min_messages` unsummarized messages."""
        sid = params.get("session_id")
        if sid is not None:
            if not isinstance(sid, str) or not sid:
                raise BadRequestError("session_id: expected a string", field="session_id")
            return await self.summarize(sid, params.get("agent"), wait=_flag(params.get("wait")))
        n = self.settings.summary.idle_min_messages
        pks = await self.store.read(lambda c: sessions_with_backlog(c, n))
        for pk in pks:
            await self.queue.enqueue("summarize", session_target(pk), {"mode": "all"},
                                     reason="manual")
            await self.queue.enqueue("one_liners", session_target(pk), {}, reason="manual")
        return {"sessions": len(pks)}

    async def run_one_liners(self, params: dict[str, Any]) -> dict[str, Any]:
        s = await self.resolve(str(params.get("session_id") or ""), params.get("agent"))
        job_id = await self.queue.enqueue("one_liners", session_target(s["pk"]), {},
                                          reason="manual", priority=URGENT)
        job = await self._wait(job_id, WAIT_TIMEOUT_S)
        return {"job_id": job.id, "state": job.state, "result": job.result}

    async def run_upgrade(self, params: dict[str, Any]) -> dict[str, Any]:
        why = await self.llm.available()
        if why is not None:
            return {"skipped": why}
        job_id = await self.queue.enqueue("upgrade", "*", {}, reason="manual", priority=URGENT)
        if not _flag(params.get("wait")):
            return {"job_id": job_id, "state": "pending"}
        job = await self._wait(job_id, WAIT_TIMEOUT_S)
        return {"job_id": job.id, "state": job.state, "result": job.result}

    async def run_idle_sweep(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"sessions": len(await self.triggers.sweep_idle())}

    async def run_resume_llm(self, params: dict[str, Any]) -> dict[str, Any]:
        was = self.llm.resume()
        if was:
            await self.request_upgrade()
        return {"was_paused": was}

    async def status(self) -> dict[str, Any]:
        """`llm` (model or extractive, pause, budget, today's tokens and cost) and
        `summaries` (on or off, queue counts, trigger counts, artifacts by maker)."""
        llm = await self.llm.status()
        jobs = await self.queue.counts()
        artifacts = await self.store.read(artifact_counts)
        return {"llm": llm, "summaries": {"enabled": self.settings.summary.enabled,
                                          "jobs": jobs, "triggers": dict(self.triggers.fired),
                                          "last_idle_sweep": self.triggers.last_sweep,
                                          "next_runs": self.schedule.next_runs(), **artifacts}}
