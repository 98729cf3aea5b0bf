"""History consolidated by itself (issue 27, item 4), and ranges of days on request.

The crons consolidate today and yesterday. History memoryd has not consolidated yet (a
first start on months of transcripts, a new source, a restore) is found by
`store.consolidation_runs.history_todo`: days before today whose sessions no ok run has
covered. It is consolidated as a job of the daemon's job queue (`consolidate_history`),
oldest day first, one day per job, each job queuing the next: the queue runs it only
after the backfill (while `busy()` it waits, as summaries do), in turn with summaries'
jobs, and each day waits for running queries to end first. A kill -9 leaves the
job to be resumed at the next start; the day it cut short has no ok run and is done
again, which writes nothing twice (notes merge, admission confirms what it holds).

`POST /v1/jobs/consolidate/run` with `since` (and `until`) consolidates every day with
sessions in the range, oldest first, before answering.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

from memoryd.consolidate.clock import parse_day
from memoryd.consolidate.service import Consolidator, flag
from memoryd.errors import BadRequestError
from memoryd.jobs.queue import JobQueue
from memoryd.store import consolidation_runs as runs_sql

log = logging.getLogger(__name__)

KIND = "consolidate_history"
TARGET = "history"
PRIORITY = 0  # background work's (the queue runs nothing lower): in order with summaries
MAX_RANGE_DAYS = 3660


class CatchUp:
    def __init__(self, consolidator: Consolidator, queue: JobQueue) -> None:
        """Adds its job kind (`KIND`) to the daemon's job queue."""
        self.cons = consolidator
        self.store = consolidator.store
        self.queue = queue
        queue.add_handler(KIND, lambda job: self.job(job.params))
        self.done_days = 0  # this process's
        self.last_day: str | None = None
        # what the last look found (a scan of the units' times: status does not redo it)
        self.looked: tuple[list[str], int] | None = None
        self._one = asyncio.Lock()

    async def todo(self) -> tuple[list[str], int]:
        tz, before = self.cons.tz, self.cons.today().isoformat()
        self.looked = await self.store.read(lambda c: runs_sql.history_todo(c, tz, before))
        return self.looked

    async def request(self, reason: str) -> int | None:
        """Queue the history job when there are days to do (after the backfill, at the
        nightly firing, after a restore); None when there are none."""
        days, _ = await self.todo()
        if not days:
            return None
        log.info("consolidation: %d days of history not consolidated yet (%s to %s): "
                 "queued, oldest first", len(days), days[0], days[-1])
        return await self.queue.enqueue(KIND, TARGET, {}, reason=reason, priority=PRIORITY)

    async def job(self, params: dict[str, Any]) -> dict[str, Any]:
        """One day of history (the oldest not done); queues the next job while more wait.
        One at a time: the days left are looked at once the day before is recorded."""
        async with self._one:
            return await self._job()

    async def _job(self) -> dict[str, Any]:
        days, total = await self.todo()
        if not days:
            self.last_day = None
            return {"day": None, "left": 0, "days_with_sessions": total}
        day = days[0]
        report = await self.cons.consolidate(parse_day(day), trigger="history")
        self.done_days += 1
        self.last_day = day
        if len(days) > 1:
            await self.queue.enqueue(KIND, TARGET, {}, reason="more", priority=PRIORITY)
        m = report["memory"]
        return {"day": day, "left": len(days) - 1, "days_with_sessions": total,
                "sessions": report["sessions"], "added": len(m["added"])}

    def pending(self) -> str | None:
        """Why retention should wait: days of history still to consolidate (as last
        looked), else None."""
        left = self.status().get("days_left")
        return f"{left} days of history are not consolidated yet" if left else None

    def status(self) -> dict[str, Any]:
        """Progress as of the last look (after the backfill, each day done, nightly)."""
        if self.looked is None:
            return {"looked": False, "done_this_run": self.done_days}
        days, total = self.looked
        rest = [d for d in days if d != self.last_day]  # looked before that day was done
        return {"looked": True, "days_with_sessions": total, "days_left": len(rest),
                "days_done": total - len(rest), "next": rest[0] if rest else None,
                "done_this_run": self.done_days, "last_day": self.last_day}

    # -- POST /v1/jobs/consolidate/run ---------------------------------------------------

    async def run_job(self, params: dict[str, Any]) -> dict[str, Any]:
        """`{date}` one day (Consolidator.run_job); `{since, until?}` a range."""
        if params.get("since") in (None, ""):
            if params.get("until") not in (None, ""):
                raise BadRequestError("until: needs since", field="until")
            return await self.cons.run_job({k: v for k, v in params.items()
                                            if k not in ("since", "until")})
        unknown = set(params) - {"since", "until", "dry_run"}
        if unknown:
            f = sorted(unknown)[0]
            why = "give date or since, not both" if f == "date" else "unknown field"
            raise BadRequestError(f"{f}: {why}", field=f)
        since = _day(params["since"], "since")
        until = (self.cons.today() if params.get("until") in (None, "")
                 else _day(params["until"], "until"))
        if until < since:
            raise BadRequestError(f"until: {until} is before since {since}", field="until")
        if (until - since).days > MAX_RANGE_DAYS:
            raise BadRequestError(f"since: a range of at most {MAX_RANGE_DAYS} days",
                                  field="since")
        dry = flag(params.get("dry_run"), "dry_run")
        tz = self.cons.tz
        seen = await self.store.read(lambda c: runs_sql.day_sessions_seen(c, tz))
        days = sorted(d for d in seen if since.isoformat() <= d <= until.isoformat())
        out = []
        for d in days:
            r = await self.cons.consolidate(parse_day(d), dry_run=dry, trigger="range")
            m = r["memory"]
            out.append({"date": d, "sessions": r["sessions"], "daily_added": r["daily"]["added"],
                        **{k: len(m[k]) for k in ("added", "confirmed", "superseded",
                                                   "demoted", "dropped")}})
        return {"since": since.isoformat(), "until": until.isoformat(), "dry_run": dry,
                "days": out}


def _day(v: Any, field: str) -> dt.date:
    return parse_day(str(v), field)
