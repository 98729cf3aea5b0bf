"""When summaries are made. Every trigger only enqueues jobs (DESIGN §4):

- threshold: a session's unsummarized messages exceed `message_buffer_limit`, or their
  user+assistant text exceeds `char_threshold` -> summarize up to the buffer cut;
- interval: every `interval_user_messages` user messages -> the same, a refresh;
- idle: a periodic sweep finds sessions idle for `idle_minutes` with at least
  `idle_min_messages` unsummarized -> summarize everything (the segment's final summary).
  The sweep is paced: it tops the queue up to `SWEEP_BATCH` idle sessions, newest first,
  so a first start on a big history works through it a few sessions a sweep instead of
  queueing thousands of jobs at once;
- upgrade: a periodic pass that redoes extractive artifacts once a model is usable;
- forget: a session that lost units to `forget` is summarized again from what is left.

Threshold and interval are driven by the ingestor's events: `on_ingest` only marks
sessions dirty; one task checks them in batches (not while `busy()`, the daemon's
backfill: the dirty sessions wait, coalesced). A threshold or interval summary covers
at least `message_buffer_min` messages (so a run of long messages is not summarized
two at a time), and one-liners are asked for a full `one_liner_batch` at a time (the
idle sweep and manual runs take whatever is left). The sweeps are registered on the
daemon's one schedule (`memoryd.jobs.schedule`), which runs them, the check's task too:
one set of background tasks, started and stopped in one place. Time comes from `clock`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from memoryd.config import SummarySettings
from memoryd.errors import StoreUnavailableError
from memoryd.ingest.ingestor import IngestEvent
from memoryd.jobs.schedule import Schedule
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
SWEEP_BATCH = 8  # idle sessions waiting for their summary at once, at most
# (kind, target, params, reason) -> job id
Enqueue = Callable[[str, str, dict[str, Any], str], Awaitable[int]]


def session_target(pk: int) -> str:
    return f"session:{pk}"


class Triggers:
    def __init__(self, store: Store, enqueue: Enqueue, settings: SummarySettings,
                 schedule: Schedule, *, clock: Callable[[], float] = time.time,
                 upgrade: Callable[[], Coroutine[Any, Any, Any]] | None = None,
                 busy: Callable[[], bool] | None = None) -> None:
        """Registers the check of dirty sessions, the idle sweep (`summary.enabled`)
        and the upgrade pass on `schedule`, which runs them; a step of the wall clock is
        noticed within one sweep period."""
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
        # the check runs as the schedule's task, started and stopped with it
        schedule.loop(self._check_loop, "summary-triggers")
        if settings.enabled:
            schedule.every("idle_sweep", settings.sweep_seconds, self.sweep_idle,
                           task="idle-sweep")
        if upgrade is not None:
            schedule.every("upgrade", settings.upgrade_minutes * 60, upgrade)
        schedule.watch_clock_within(settings.sweep_seconds)

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

    # -- forget --------------------------------------------------------------------------

    async def resummarize(self, pk: int) -> None:
        """A session lost units to `forget`: its summary is rebuilt from what is left."""
        await self.enqueue("summarize", session_target(pk), {"mode": "all"}, "forget")

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
