"""Scheduled consolidations claimed once for the fleet, as leases.

Whichever machine's scheduler fires first claims the firing (`day:YYYY-MM-DD` or
`nightly:YYYY-MM-DD`) for `lease_s` seconds and renews the lease while it runs; the
firing is finished when the run returns or fails. A claimer that dies (kill -9, power)
leaves its firing unfinished with a lease that runs out: `watch` on any machine, or the
same machine after a restart, claims it again and runs it. Consolidation is idempotent
(notes merge, admission confirms), so a run redone after a late death doubles nothing.
Leases are in real time (the database's, in a fleet: `memoryd.store.memory_docs`); the
claim's own time is the daemon's clock (settable in tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from memoryd.consolidate.clock import Clock
from memoryd.store import Store
from memoryd.store import memory_docs as leases

log = logging.getLogger(__name__)

KIND = "consolidate"
LEASE_S = 120.0


class Firings:
    def __init__(self, store: Store, clock: Clock,
                 consolidate: Callable[[dt.date], Coroutine[Any, Any, Any]]) -> None:
        self.store = store
        self.clock = clock
        self.consolidate = consolidate
        self.lease_s = LEASE_S

    async def claim(self, key: str, window_s: float | None = None) -> bool:
        return await self.store.write(lambda c: leases.claim(
            c, KIND, key, self.store.machine, self.clock(), time.time(), self.lease_s,
            window_s))

    async def run(self, key: str, work: Coroutine[Any, Any, Any]) -> None:
        """Run a claimed firing's work, renewing its lease; finished when the work
        returns or fails (not when the daemon stops or dies: then it is taken over)."""
        renewing = asyncio.create_task(self._renew(key), name="memoryd-consolidate-lease")
        try:
            await work
        except Exception:
            await self._finish(key)
            raise
        else:
            await self._finish(key)
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def _finish(self, key: str) -> None:
        await self.store.write(lambda c: leases.finish(c, KIND, key, self.store.machine,
                                                       time.time()))

    async def _renew(self, key: str) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            if not await self.store.write(lambda c: leases.renew(
                    c, KIND, key, self.store.machine, time.time(), self.lease_s)):
                log.warning("consolidation firing %s was taken over by another machine "
                            "(this one did not renew its lease in time)", key)
                return

    async def take_over(self) -> list[str]:
        """Firings whose claimer died (lease run out, unfinished): claimed again and run
        here. Returns their keys."""
        rows = await self.store.read(lambda c: leases.expired(c, KIND, time.time()))
        done = []
        for r in rows:
            key = str(r["key"])
            try:
                day = dt.date.fromisoformat(key.partition(":")[2])
            except ValueError:
                continue
            if not await self.claim(key):
                continue  # another machine was first
            log.info("consolidation firing %s: %s's lease ran out unfinished; running it "
                     "here", key, r["machine"] or "this machine")
            try:
                await self.run(key, self.consolidate(day))
            except Exception:
                log.exception("consolidation of %s failed", day)
            done.append(key)
        return done

    async def watch(self, interval: float = 30.0) -> None:
        """Take over dead machines' firings (and this machine's own after a restart)."""
        while True:
            try:
                await self.take_over()
            except Exception as e:  # the store is away: the next round tries again
                log.warning("checking consolidation leases: %s", e)
            await asyncio.sleep(interval)
