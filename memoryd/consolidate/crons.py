"""When consolidation and retention run (their crons on the daemon's one schedule), and
what `/v1/status` says about them.

In the user's zone (`consolidate.timezone`): the day so far (`consolidate.cron`), the
nightly pass that finishes yesterday (`consolidate.nightly_cron`) and then asks for
history not consolidated yet (`CatchUp`), and retention (`retention.cron`). While the
crons run, the lease watch takes over firings a dead machine claimed
(`memoryd.consolidate.firings`).
"""

from __future__ import annotations

import logging

from typing import Any

from memoryd.config import Settings
from memoryd.consolidate import runs
from memoryd.consolidate.catch_up import CatchUp
from memoryd.consolidate.retention import Retention
from memoryd.consolidate.service import Consolidator
from memoryd.errors import StoreUnavailableError
from memoryd.jobs.schedule import Schedule
from memoryd.store import consolidation_runs as runs_sql

log = logging.getLogger(__name__)


class Crons:
    def __init__(self, settings: Settings, consolidator: Consolidator, retention: Retention,
                 catch_up: CatchUp) -> None:
        self.settings = settings
        self.cons = consolidator
        self.retention = retention
        self.catch_up = catch_up

    def register(self, schedule: Schedule) -> None:
        s, cons, tz = self.settings, self.cons, self.cons.tz
        grace = s.consolidate.misfire_grace_s
        if s.summary.enabled and s.consolidate.enabled:
            schedule.cron("consolidate", s.consolidate.cron, tz,
                          lambda: cons.scheduled("day"), grace)
            schedule.cron("consolidate_nightly", s.consolidate.nightly_cron, tz, self.nightly,
                          grace)
            schedule.loop(cons.firings.watch, "consolidate-leases")  # a dead claimer's
        if s.retention.enabled:
            schedule.cron("retention", s.retention.cron, tz, self.retention.scheduled, grace)

    async def nightly(self) -> None:
        """Yesterday's last pass, then any history not consolidated yet (a new source)."""
        await self.cons.scheduled("nightly")
        await self.request_history("nightly")

    async def request_history(self, reason: str) -> None:
        """Queue the history job when history waits (after the backfill, nightly)."""
        s = self.settings
        if not (s.summary.enabled and s.consolidate.enabled and s.consolidate.history):
            return
        try:
            await self.catch_up.request(reason)
        except StoreUnavailableError:
            pass  # logged once by the store's health; the next firing asks again
        except Exception:
            log.exception("looking for history to consolidate failed")

    async def status(self) -> dict[str, Any]:
        """`consolidation` in `/v1/status`: on or off, the last runs, and per recent day
        what consolidation did, its warnings and the history's progress (runs, catch_up)."""
        s = self.settings
        out = {"enabled": s.summary.enabled and s.consolidate.enabled,
               "last_run": self.cons.last_run, "retention_last_run": self.retention.last_run}
        store = self.cons.store
        try:
            rows, failure = await store.read(lambda c: (
                runs_sql.recent_runs(c, runs.RECENT_DAYS), runs_sql.last_failure(c)))
        except StoreUnavailableError:
            return out
        days = runs.per_day(rows)
        return {**out, "days": days, "warnings": runs.warnings(days, failure),
                "history": self.catch_up.status()}
