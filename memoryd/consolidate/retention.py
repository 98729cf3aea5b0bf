"""Retention: what is kept hot, for how long (DESIGN §6).

- Daily notes older than `daily_keep_days` are folded into HISTORY.md (one dated
  paragraph each, every item kept) and removed.
- Sessions idle for more than `units_keep_days` move their units to the monthly archive
  files and leave the hot store; the session row keeps its summary and title, so it
  stays listed and its summary searchable. `restore` brings the units back.

Each step writes its destination before it removes its source, and both writes are
idempotent, so a kill -9 anywhere loses and duplicates nothing: the next run finishes
the move. `dry_run` reports what would move and changes nothing.

A forward jump of the wall clock (200 days: a wrong RTC, a bad NTP answer) would make
one run archive everything. The time elapsed since the last run (or the daemon's start)
is known apart from the wall clock (CLOCK_BOOTTIME, which counts suspend): when the
wall clock is more than a day ahead of it, a run takes "now" to be at most a day beyond
what elapsed, moves only what is due then, and says why in the log and in status
(`retention_last_run.clock`). Each later run may advance a day more than elapsed, so a
clock that was truly wrong before is caught up with gradually, never at once. (A jump
while memoryd was stopped is not seen: the daemon starts from the wall clock.)
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.config import RetentionSettings
from memoryd.memory import archive
from memoryd.memory import daily, history
from memoryd.memory.atomic import clean_temps
from memoryd.consolidate.clock import Clock, local_day
from memoryd.store import Store
from memoryd.store import archive as sql
from memoryd.store.sessions import resolve_session

log = logging.getLogger(__name__)
DAY_S = 86400.0


def since_boot() -> float:
    """Seconds elapsed, suspend included, apart from the wall clock."""
    clock_id = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)  # macOS: counts sleep
    return time.clock_gettime(clock_id)


def compact(day: str, text: str) -> str:
    """One dated paragraph (a single grep-able line) holding every item of a note."""
    parts = []
    for section, items in daily.sections_of(text).items():
        if items:
            parts.append(f"{section}: " + "; ".join(items))
    body = " | ".join(parts) if parts else "(empty)"
    return f"**{day}** — {body}"


class Retention:
    def __init__(self, settings: RetentionSettings, store: Store, memory_dir: Path,
                 archive_dir: Path, tz: dt.tzinfo, *, clock: Clock = time.time) -> None:
        self.settings = settings
        self.store = store
        self.memory_dir = memory_dir
        self.archive_dir = archive_dir
        self.tz = tz
        self.clock = clock
        # what the wall clock is checked against: an injected clock (tests move one by
        # days on purpose) is its own elapsed time
        self.elapsed: Clock = since_boot if clock is time.time else clock
        self._ref = (clock(), self.elapsed())  # (retention's now, elapsed) at the last run
        self._lock = asyncio.Lock()
        self.last_run: dict[str, Any] | None = None
        # why the scheduled run waits (the history is not consolidated yet: archived
        # first, its days would be consolidated without their sessions); set by the daemon
        self.hold: Callable[[], str | None] | None = None

    @property
    def busy(self) -> asyncio.Lock:
        """Held while this writes the memory files (fleet_sync waits for it)."""
        return self._lock

    async def run_job(self, params: dict[str, Any]) -> dict[str, Any]:
        from memoryd.consolidate.service import flag
        from memoryd.errors import BadRequestError

        unknown = set(params) - {"dry_run"}
        if unknown:
            f = sorted(unknown)[0]
            raise BadRequestError(f"{f}: unknown field", field=f)
        return await self.run(dry_run=flag(params.get("dry_run"), "dry_run"))

    async def scheduled(self) -> None:
        why = self.hold() if self.hold is not None else None
        if why is not None:
            log.info("retention postponed to its next firing: %s", why)
            self.last_run = {"at": self.clock(), "postponed": why}
            return
        try:
            await self.run()
        except Exception:
            log.exception("retention run failed")

    async def run(self, dry_run: bool = False) -> dict[str, Any]:
        async with self._lock:
            t0 = time.monotonic()
            now, elapsed, why = self._now()
            notes = await self._fold_notes(dry_run, now)
            units = await self._archive_units(dry_run, now)
            if not dry_run:
                self._ref = (now, elapsed)
        report = {"dry_run": dry_run, "daily_notes": notes, "archived": units,
                  "seconds": round(time.monotonic() - t0, 3)}
        self.last_run = {"at": self.clock(), "dry_run": dry_run,
                         "notes": len(notes["folded"]), "sessions": len(units["sessions"])}
        if why:
            report["clock"] = self.last_run["clock"] = why
        log.info("retention: %d daily notes folded into HISTORY.md, %d sessions (%d units) "
                 "archived%s", len(notes["folded"]), len(units["sessions"]), units["units"],
                 " (dry run)" if dry_run else "")
        return report

    def _now(self) -> tuple[float, float, str | None]:
        """(retention's now, elapsed, why it is not the wall clock's now)."""
        wall, elapsed = self.clock(), self.elapsed()
        ref_now, ref_elapsed = self._ref
        expected = ref_now + (elapsed - ref_elapsed)
        if wall - expected <= DAY_S:
            return wall, elapsed, None
        now = expected + DAY_S
        stamp = dt.datetime.fromtimestamp(now, self.tz).isoformat(timespec="seconds")
        why = (f"the wall clock is {(wall - expected) / DAY_S:.1f} days ahead of the time "
               f"elapsed since the last retention run (or the start): this run moves only "
               f"what is due by {stamp}, a day beyond the elapsed time; later runs catch "
               f"up a day at a time")
        log.warning("retention: %s", why)
        return now, elapsed, why

    # -- daily notes -> HISTORY.md -------------------------------------------------------

    async def _fold_notes(self, dry_run: bool, now: float) -> dict[str, Any]:
        today = local_day(now, self.tz)
        cutoff = (today - dt.timedelta(days=self.settings.daily_keep_days)).isoformat()

        def fold() -> list[str]:
            # a killed write's temp files, each kind under its own lock: never a live
            # write's (MEMORY.md's are MemoryFile's, at its start)
            daily.clean_temps(self.memory_dir)
            history.clean_temps(self.memory_dir)
            done = []
            for day in daily.list_notes(self.memory_dir):
                if day >= cutoff:
                    continue
                def move(text: str | None, day: str = day) -> tuple[str | None, bool]:
                    if text is None:  # another daemon sharing the folder folded it
                        return None, False
                    if dry_run:
                        return text, True
                    # HISTORY.md first (its lock after the notes'): a crash before the
                    # note goes repeats an append that is idempotent
                    history.append(self.memory_dir, [compact(day, text)])
                    return None, True

                if daily.edit_note(self.memory_dir, day, move, errors="replace"):
                    done.append(day)
            return done

        # their lines' provenance stays: forgetting a session later takes its items out
        # of the day's paragraph in HISTORY.md (memoryd.consolidate.prune)
        folded = await asyncio.to_thread(fold)
        return {"before": cutoff, "folded": folded}

    # -- units -> archive files ----------------------------------------------------------

    async def _archive_units(self, dry_run: bool, now: float) -> dict[str, Any]:
        keep = self.settings.units_keep_days
        if keep == 0:
            return {"before": None, "sessions": [], "units": 0}
        before = now - keep * DAY_S
        await asyncio.to_thread(clean_temps, self.archive_dir)
        sessions = await self.store.read(lambda c: sql.sessions_to_archive(c, before))
        moved: list[dict[str, Any]] = []
        total = 0
        for s in sessions:
            month = dt.datetime.fromtimestamp(s["last_ts"], self.tz).strftime("%Y-%m")
            rows = await self.store.read(lambda c, pk=s["pk"]: sql.session_units(c, pk))
            if not dry_run:
                recs = [{"agent": s["agent"], "session_id": s["session_id"],
                         "machine": s["machine"], "project": s["project"], **r}
                        for r in rows]
                await asyncio.to_thread(archive.add, self.archive_dir, month, recs)
                # the file holds them (fsync'd): only now may the store let them go
                await self.store.write(lambda c, pk=s["pk"]: sql.mark_archived(c, pk, month))
            moved.append({"agent": s["agent"], "session_id": s["session_id"], "month": month,
                          "units": len(rows)})
            total += len(rows)
        stamp = dt.datetime.fromtimestamp(before, self.tz).isoformat(timespec="seconds")
        return {"before": stamp, "sessions": moved, "units": total}

    # -- archive access ------------------------------------------------------------------

    async def archive_list(self) -> dict[str, Any]:
        files = await asyncio.to_thread(lambda: [
            {"month": m, "path": str(p), "bytes": p.stat().st_size}
            for m, p in archive.months(self.archive_dir)])
        sessions = await self.store.read(sql.archived)
        return {"files": files, "sessions": sessions}

    async def archive_search(self, query: str, limit: int,
                             agent: str | None = None) -> dict[str, Any]:
        total, hits = await asyncio.to_thread(archive.search, self.archive_dir, query, limit,
                                              agent)
        return {"query": query, "total": total, "results": hits,
                "message": f"{total} matches, showing {len(hits)}"}

    async def restore(self, session_id: str, agent: str | None = None,
                      dry_run: bool = False) -> dict[str, Any]:
        s = await self.store.read(  # the id or a unique prefix of it
            lambda c: resolve_session(c, session_id, agent, "session_id"))
        session_id = s["session_id"]
        recs = await asyncio.to_thread(archive.take, self.archive_dir, s["agent"],
                                       s["session_id"], remove=False, machine=s["machine"])
        if dry_run or not recs:
            return {"agent": s["agent"], "session_id": session_id, "dry_run": dry_run,
                    "archived_units": len(recs), "restored": 0}
        n = await self.store.write(lambda c: sql.restore_units(c, s["pk"], recs))
        try:  # searchable again before we answer, as `ingest --wait` is
            await self.store.indexed()
        except TimeoutError:
            log.warning("restored %s; the search index is still catching up", session_id)
        # in the store now (committed): only now leave the archive file
        await asyncio.to_thread(archive.take, self.archive_dir, s["agent"], s["session_id"],
                                remove=True, machine=s["machine"])
        return {"agent": s["agent"], "session_id": session_id, "dry_run": False,
                "archived_units": len(recs), "restored": n}

    async def forget(self, agent: str, session_id: str, machine: str | None = None) -> int:
        """`sessions forget`: the session's archived units go too (in a fleet, only
        `machine`'s session of that id)."""
        return len(await asyncio.to_thread(archive.take, self.archive_dir, agent, session_id,
                                           remove=True, machine=machine))
