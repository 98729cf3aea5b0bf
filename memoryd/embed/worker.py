"""The embed worker: embeds units in the background, newest first, and never in the way.

Each step reads a batch of units that have no vector (`memoryd.store.vectors.pending`),
embeds them one by one on the background thread (`memoryd.runtime.background.run`; a unit
is 50-700 ms of a core), each only once the daemon has been quiet for `QUIET_S` (no line
stored, no search or context: `touch`), writes their vectors in one short transaction, and
pauses. Without that wait, append -> searchable took 1.4-3.0x as long while the worker
embedded (p50 245-385 ms against 119-178 with embeddings off, on 2 cores under load):
embedding takes a core the daemon's own work needs. With it, 1.09-1.27x (bench/README.md).
New units (ids above `hi`, what was the newest when last looked) go first; then the
backlog, walking down from `lo` a slice of ids at a time (`WALK_SLICE`: each look is one
short statement, and once the walk reaches the oldest unit an idle poll looks only above
`hi`). The cursor is only in memory: after a crash or a restart the worker starts again
from the newest unit and skips what has a vector (one lookup by key each), so nothing is
lost and nothing is embedded twice. Caught up, it walks the store again every `REWALK_S`:
a unit whose text changed lost its vector below the cursor (a merged part, a one-liner
upgraded), and in a shared store a unit of this machine's can commit below `hi` after
another machine's higher id was seen (ids are handed out at insert, not at commit). The
backlog is counted once at start, in slices of ids, so no statement holds a reader for
long. While `busy()` says
so (the daemon's: a backfill runs, as for the summaries' jobs) the worker waits: embedding
never takes the CPU a first read of the history needs. In a shared store the worker walks
this machine's units only (`machine`): each unit is embedded once in the fleet, by the
machine that read it (`memoryd.store.vectors`). MEMORY.md's entries go before any unit
(`memoryd.embed.entries`): the worker looks at the file every `IDLE_POLL_S` (a stat when
it has not changed) and embeds the entries without a vector.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from memoryd.runtime import background
from memoryd.embed.entries import EntryVectors
from memoryd.embed.model import Model
from memoryd.store import Store, vectors
from memoryd.store.units import id_bounds

log = logging.getLogger(__name__)

BATCH = 8          # units a step (each ~50-150 ms to embed on one core)
PAUSE_S = 0.2      # between steps: ingest and queries get the CPU
IDLE_POLL_S = 5.0  # caught up: look for new units this often (or when woken by ingest)
COUNT_SLICE = 20_000
RETRY_S = 30.0
BUSY_POLL_S = 1.0  # while busy() says so, look again this often
QUIET_S = 2.0      # a unit is embedded only this long after the last ingest or query
WALK_SLICE = 20_000  # ids the backlog walk looks through in one step
REWALK_S = 600.0   # caught up: walk the whole store again this often


class EmbedWorker:
    def __init__(self, store: Store, model: Model, *, max_chars: int,
                 busy: Callable[[], bool] | None = None,
                 on_saved: Callable[[], None] | None = None) -> None:
        self.store = store
        self.on_saved = on_saved or (lambda: None)  # vectors were written
        self.busy = busy or (lambda: False)
        self.waiting = False       # for busy() to say no
        self.model = model
        self.max_chars = max_chars
        self.machine = store.machine or None  # fleet mode: this machine's units only
        self.hi = 0                # every unit with lo <= id <= hi was looked at
        self.lo = 0
        self.below = 0             # backlog under lo (counted at start)
        self.done = 0              # vectors stored
        self.embedded = 0          # this run
        self.seconds = 0.0         # spent embedding this run (thread time of the calls)
        self.started = False       # the backlog is counted
        self.walked_at = time.monotonic()  # when the backlog walk last reached the oldest
        self.caught_up = False
        self.errors = 0
        self.last_error: str | None = None
        self._wake = asyncio.Event()
        self._reset = False
        self._active = 0.0         # monotonic time of the last ingest or query (`touch`)
        self.deferred = 0          # units put off for a quiet moment, this run
        self.entries = EntryVectors()  # MEMORY.md's, in memory
        # MEMORY.md read: its entries' texts, newest first (`memoryd.embed.entries`)
        self.memory: Callable[[], Awaitable[list[str]]] | None = None
        self._memory_looked = -IDLE_POLL_S  # monotonic time of the last look at it
        self._memory_error: str | None = None

    def touch(self) -> None:
        """A line was stored or a query asked: embedding waits for a quiet moment."""
        self._active = time.monotonic()

    async def _quiet(self) -> None:
        while (left := self._active + QUIET_S - time.monotonic()) > 0:
            self.deferred += 1
            await asyncio.sleep(left)

    def wake(self) -> None:
        """New units were stored: look now rather than at the next poll."""
        self._wake.set()

    def restart(self) -> None:
        """The vectors were cleared (`memoryctl reindex`): count and walk again. Until the
        count is made, status says not caught up (it said the old count, caught up)."""
        self._reset = True
        self.started = self.caught_up = False
        self._wake.set()

    async def run(self) -> None:
        while True:
            self.waiting = self.busy()
            if self.waiting:
                await asyncio.sleep(BUSY_POLL_S)
                continue
            try:
                if not self.started or self._reset:
                    self._reset = False
                    await self._derive()
                did = await self._entries_step() or await self._step()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # degrade quietly: logged, counted, retried
                self.errors += 1
                self.last_error = f"{type(e).__name__}: {e}"
                log.exception("embedding failed; retrying in %.0f s", RETRY_S)
                await asyncio.sleep(RETRY_S)
                continue
            if did:
                await asyncio.sleep(PAUSE_S)
                continue
            self.caught_up = True
            self._wake.clear()
            try:
                async with asyncio.timeout(IDLE_POLL_S):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _derive(self) -> None:
        lo, hi = await self.store.read(id_bounds)
        below = 0
        for start in range(lo, hi + 1, COUNT_SLICE):
            below += await self.store.read(
                lambda c, s=start: vectors.count_pending(c, s, min(s + COUNT_SLICE, hi + 1),
                                                         self.machine))
        self.done = await self.store.read(lambda c: vectors.count(c, self.machine))
        self.hi, self.lo, self.below = hi, hi + 1, below
        self.started, self.caught_up = True, below == 0

    async def _step(self) -> bool:
        """One look, and the units it found embedded; False when there was nothing to
        do (caught up)."""
        hi, lo, n, cut, mine = self.hi, self.lo, BATCH, self.max_chars, self.machine
        floor = max(0, lo - WALK_SLICE)

        def pick(c: Any) -> tuple[int, int, list[tuple[int, str]], bool]:
            bottom, top = id_bounds(c)
            new = [x for x in vectors.pending(c, above=hi, limit=n, max_chars=cut,
                                              machine=mine) if x[0] <= top]
            if new or lo <= bottom:
                return bottom, top, new, True
            return bottom, top, vectors.pending(c, below=lo, above=floor - 1, limit=n,
                                                max_chars=cut, machine=mine), False

        bottom, top, items, fresh = await self.store.read(pick)
        if not fresh:
            self.hi = max(self.hi, top)  # nothing new up to `top`
        if not items:
            if lo > bottom:  # this slice holds none: the walk goes on below it
                self.lo = floor
                if floor <= bottom:
                    self.walked_at = time.monotonic()
                return True
            self.hi = max(self.hi, top)
            self.below = 0
            if time.monotonic() - self.walked_at < REWALK_S:
                return False
            self.lo = self.hi + 1  # walk the store again, from the newest
            return True
        self.caught_up = False
        if not fresh:
            self.lo = min(i for i, _ in items)
            self.below = max(0, self.below - len(items))
        ids = [i for i, _ in items]
        vecs = await self._embed([t for _, t in items])
        saved = await self.store.write(lambda c: vectors.save(c, zip(ids, vecs)))
        self.on_saved()
        self.done += saved
        self.embedded += len(items)
        return True

    async def _entries_step(self) -> bool:
        """MEMORY.md looked at when due, and a batch of its entries without a vector
        embedded; False when none is pending. A file that cannot be read keeps the
        vectors it had (its error in status) and is looked at again when next due."""
        if self.memory is None:
            return False
        if time.monotonic() - self._memory_looked >= IDLE_POLL_S:
            self._memory_looked = time.monotonic()
            try:
                self.entries.follow(await self.memory())
                self._memory_error = None
            except Exception as e:  # a broken MEMORY.md is the API's to report
                self._memory_error = f"{type(e).__name__}: {e}"
        texts = self.entries.pending[:BATCH]
        if not texts:
            return False
        self.caught_up = False
        vecs = await self._embed([t[:self.max_chars] for t in texts], units=False)
        self.entries.add(texts, vecs)
        return True

    async def _embed(self, texts: list[str], units: bool = True) -> list[bytes]:
        """Each text's vector, one a piece, each in a quiet moment, on the background
        thread (the time of units' counted for status' rate)."""
        loop = asyncio.get_running_loop()
        vecs: list[bytes] = []
        for t in texts:
            await self._quiet()
            t0 = loop.time()
            vecs += await background.run(lambda t=t: self.model.passages([t]))
            if units:
                self.seconds += loop.time() - t0
        return vecs

    async def pending(self) -> int:
        """Units waiting for a vector: the backlog under the cursor and the new ones."""
        hi = self.hi
        top = await self.store.read(lambda c: id_bounds(c)[1])
        above = await self.store.read(
            lambda c: vectors.count_pending(c, hi + 1, top + 1, self.machine)) \
            if top > hi else 0
        return self.below + above

    async def status(self) -> dict[str, Any]:
        pending = await self.pending() if self.started else None
        entries = {"embedded": len(self.entries), "pending": len(self.entries.pending),
                   "error": self._memory_error}
        return {"caught_up": bool(self.started and self.caught_up and pending == 0
                                  and not self.entries.pending),
                "entries": entries,
                "pending": pending, "done": self.done, "embedded_this_run": self.embedded,
                "waiting_for_backfill": self.waiting, "deferred_for_quiet": self.deferred,
                "units_per_s": round(self.embedded / self.seconds, 2) if self.seconds else None,
                "errors": self.errors, "last_error": self.last_error}
