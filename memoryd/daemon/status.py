"""`GET /v1/status`: one answer assembled from each component's own status, in one
order scripts and `memoryctl status` rely on.

The daemon builds it once its components exist and hands `status` to the route table.
What is the daemon's own (version, pid, state, uptime, socket, sources) it passes as
`process`; the store's totals are the store's SQL (memoryd.store.totals); the rest are the
components' `status()`. When a shared database is away (fleet mode), the answer carries
the totals last read, says since when the store is unreachable, and is not caught up."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from memoryd.consolidate.crons import Crons
from memoryd.errors import StoreUnavailableError
from memoryd.fleet.machines import machines_seen
from memoryd.http.limiter import QueryLimiter
from memoryd.ingest.backfill import Backfill
from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.queue import IngestQueue
from memoryd.ingest.watcher import Watcher
from memoryd.runtime.idle_release import RELEASE
from memoryd.store import Store
from memoryd.store.totals import NO_TOTALS, status_totals
from memoryd.summarize.service import Summaries


class Status:
    def __init__(self, process: Callable[[], dict[str, Any]], store: Store, ingestor: Ingestor,
                 queue: IngestQueue, backfill: Backfill, watcher: Watcher,
                 limiter: QueryLimiter, summaries: Summaries, crons: Crons,
                 embed: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self.process = process
        self.embed = embed  # local embeddings' status (memoryd.embed), on or why off
        self.store, self.ingestor, self.queue = store, ingestor, queue
        self.backfill, self.watcher, self.limiter = backfill, watcher, limiter
        self.summaries, self.crons = summaries, crons
        self._last: tuple[Any, ...] | None = None  # read last: for a store gone away

    async def __call__(self) -> dict[str, Any]:
        store, ingestor = self.store, self.ingestor
        machine = store.machine
        # progress first, counts second: once this says caught_up, the counts below
        # include everything read so far (read the other way round, the last file could
        # commit in between and a caught_up status would carry the count from before it)
        backfill_done = self.backfill.done
        depth = self.queue.depth()
        # the failing files listed are those of the instant the unread bytes are counted
        # from (`unread_bytes` takes its view before it first waits): copied at the end, a
        # file that appeared, was read and failed while this status was put together was
        # listed as failing beside `unread_bytes: 0` (a busy CI run, issue 28 item 25)
        failures = dict(ingestor.failures.failing)
        unread = await self.backfill.unread_bytes(update=not backfill_done)
        depth = max(depth, self.queue.depth())
        try:
            index = await store.read(store.index.status)
            c = await store.read(lambda conn: status_totals(conn, machine))
            machines = await self._machines()
            extra = await self.summaries.status()
            self._last = (index, dict(c), extra, machines)
        except StoreUnavailableError:
            index, c, extra, machines = self._last or ({"caught_up": False}, NO_TOTALS, {}, None)
            index, c = {**index, "caught_up": False}, dict(c)
        health = store.health.status()
        lag_ms = ingestor.stats.last_lag_ms
        ingest = ingestor.status(c.pop("bad_files", []), failures)
        failing = bool(ingestor.failures.blocking())  # now: caught_up never says too much
        return {
            **self.process(),  # version, pid, state, uptime_s, socket, tcp_port, sources
            "store": {"kind": store.kind, "url": store.target.masked(),
                      "namespace": store.target.namespace,
                      "machine": store.target.machine,
                      "path": str(store.path) if store.kind == "sqlite" else None,
                      "machines": machines,
                      # reachable, unreachable_since, last_error (password-free), failures
                      **health, "stale": not health["reachable"]},
            **c,
            "unread_bytes": unread,
            "queue_depth": depth,
            "backfill_done": backfill_done,
            # never true while a file is failing or the index is behind: scripts wait on it
            "caught_up": (backfill_done and depth == 0 and unread == 0 and not failing
                          and index["caught_up"] and health["reachable"]
                          and not ingestor.parked),
            "index": index,
            "backfill": self.backfill.progress.snapshot(),
            "ingest_lag_ms": None if lag_ms is None else round(lag_ms, 1),
            "ingest": ingest,
            "queries": self.limiter.as_dict(),  # search/context: running, waiting, 503s
            # RSS now, idle releases run (memoryd.runtime.idle_release)
            "memory": RELEASE.status(),
            "watcher": self.watcher.status(),
            **extra,
            "embed": await self.embed(),
            "consolidation": await self.crons.status(),
        }

    async def _machines(self) -> list[dict[str, Any]] | None:
        """Fleet mode: the machines seen in the namespace (memoryd.fleet.machines)."""
        if self.store.kind != "postgresql":
            return None
        return await self.store.read(machines_seen)
