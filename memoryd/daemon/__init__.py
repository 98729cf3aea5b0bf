"""The composition root: builds every component from one Settings and Paths, starts
them in order and stops them in reverse."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import platform
import secrets
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memoryd import __version__
from memoryd.runtime import sdnotify
from memoryd.ingest.backfill import Backfill, JobsWait
from memoryd.config import Settings, settings_summary
from memoryd.consolidate.catch_up import CatchUp
from memoryd.consolidate.clock import Clock
from memoryd.consolidate.crons import Crons
from memoryd.consolidate.retention import Retention
from memoryd.consolidate.service import Consolidator
from memoryd.recall import long_term
from memoryd.recall.context import ContextBuilder
from memoryd.recall.evaluate import Evaluator
from memoryd.daemon.db_guard import watch_identity
from memoryd.errors import AlreadyRunningError, StoreUnavailableError
from memoryd.embed import Embedder, embed_status, off_reason
from memoryd.events import EventBus
from memoryd.consolidate.forgetting import Forgetting
from memoryd.runtime.idle_release import RELEASE, tune_malloc
from memoryd.index.protocol import Index
from memoryd.index.tail import TailPolicy
from memoryd.ingest.ingestor import IngestEvent, Ingestor
from memoryd.ingest.queue import IngestQueue
from memoryd.ingest.redact import Redactor
from memoryd.jobs.queue import JobQueue
from memoryd.jobs.schedule import Schedule
from memoryd.llm import LLM
from memoryd.memory import MemoryFile, daily, history
from memoryd.memory.fleet_sync import FleetMemory
from memoryd.paths import Paths, mkdir_private
from memoryd.daemon.reload import reload_settings
from memoryd.recall.served_log import ServedLog
from memoryd.server.app import make_app, route_table
from memoryd.http.limiter import QueryLimiter
from memoryd.http.services import JobFn, Services
from memoryd.server.sites import GuardedRunner, start_tcp, start_unix
from memoryd.ingest.on_demand import OnDemandIngest
from memoryd.ingest.sources import Candidates, Source, configured_sources
from memoryd.daemon.status import Status
from memoryd.daemon.store_index import open_index
from memoryd.store import Store
from memoryd.store.usage import Usage
from memoryd.summarize.service import Summaries
from memoryd.ingest.watcher import Watcher
from memoryd.web import routes as web_routes
from memoryd.web.deps import WebDeps

log = logging.getLogger(__name__)

STOP_TIMEOUT = 4.0
MEMORY_POLL_S = 60.0  # MEMORY.md edits arrive through the watcher; this look is the safety net


def ensure_token(path: Path) -> str:
    """The bearer token TCP clients must send; made on first start, kept in a 0600 file."""
    try:
        token = path.read_text().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


class Daemon:
    def __init__(self, settings: Settings, paths: Paths,
                 environ: Mapping[str, str] = os.environ, *, clock: Clock = time.time,
                 load_settings: Callable[[], Settings] | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.load_settings = load_settings  # SIGHUP re-reads the config with it
        self.exit_code = 0
        self.paths = paths
        self.environ = environ
        self.socket_path = Path(settings.server.socket or environ.get("MEMORYD_SOCKET")
                                or paths.socket)
        self.tcp_port: int | None = None
        srv = settings.server
        self.limiter = QueryLimiter(srv.query_concurrency, srv.query_backlog,
                                    max_wait_s=srv.query_max_wait_s)
        self.state = "stopped"
        self.started_at = 0.0
        self.backfill: Backfill | None = None
        # background jobs wait for the backfill and an index's backlog (memoryd.ingest.backfill)
        self.jobs_wait = JobsWait(lambda: self.backfill_done, lambda: (
            self.store is not None and self.store.index.backlog()))
        self._stack = contextlib.AsyncExitStack()
        self._stop_requested = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._sources: list[Source] = []
        self.events = EventBus()
        self.store: Store | None = None
        self.ingestor: Ingestor | None = None
        self.queue: IngestQueue | None = None
        self.on_demand: OnDemandIngest | None = None  # POST /v1/ingest
        self.watcher: Watcher | None = None
        self.memory: MemoryFile | None = None
        self.llm: LLM | None = None
        self.job_queue: JobQueue | None = None
        self.schedule: Schedule | None = None
        self.summaries: Summaries | None = None
        self.consolidator: Consolidator | None = None
        self.retention: Retention | None = None
        self.catch_up: CatchUp | None = None
        self.crons: Crons | None = None
        self.forgetting: Forgetting | None = None
        self.fleet_memory: FleetMemory | None = None
        self.index: Index | None = None
        self.status: Status | None = None  # GET /v1/status
        self.embedder: Embedder | None = None  # local embeddings (memoryd.embed)

    def sources(self) -> list[Source]:
        return self._sources + (self.on_demand.added if self.on_demand else [])

    async def start(self) -> None:
        self.state = "starting"
        self.started_at = time.time()
        s = self.settings
        try:
            self.paths.ensure()
            self._lock()
            target = s.store.target()
            self.store = await Store.open(self.paths.db, target=target)
            self._stack.push_async_callback(self.store.close)
            # the search index, handed to the store (which wakes and closes it) and to
            # recall and forgetting
            self.index = index = await asyncio.to_thread(open_index, self.store)
            RELEASE.register(self.store.release_caches)  # SQLite's page caches, at rest
            self._stack.callback(RELEASE.unregister, self.store.release_caches)
            index.tail_policy = TailPolicy(docs=s.index.tail_commit_docs,
                                           seconds=s.index.tail_commit_s)
            log.info("store open at %s", self.paths.db if target.kind == "sqlite" else
                     f"{target.masked()} (namespace {target.namespace}, machine "
                     f"{target.machine})")

            redactor = Redactor(s.privacy.redact_patterns, s.privacy.private_tags)
            self.ingestor = Ingestor(self.store, redactor, max_line_bytes=s.watch.max_line_bytes)
            await self.ingestor.load_seen()
            self._sources = configured_sources(s, self.environ)
            self.ingestor.subscribers.append(self._on_ingest)
            if off_reason(s.embed.enabled) is None:  # memoryd[embed] installed
                self.embedder = Embedder(
                    self.store, max_chars=s.embed.max_chars, reload_s=s.embed.reload_s,
                    busy=self.jobs_wait)
                self.ingestor.subscribers.append(self.embedder.on_ingest)
                if (rows := getattr(index, "rows", None)) is not None:  # fleet mode
                    rows.on_vectors = self.embedder.changed
            # one LLM, one job queue, one schedule: each service adds its jobs to them
            self.llm = LLM(s.llm, Usage(self.store), environ=self.environ, clock=self.clock)
            queue = self.job_queue = JobQueue.from_settings(self.store, s, clock=self.clock,
                                                            busy=self.jobs_wait)
            self.schedule = Schedule()
            self.summaries = Summaries(s, self.store, self.llm, queue, self.schedule,
                                       self.events, clock=self.clock, busy=self.jobs_wait)
            self.ingestor.subscribers.append(self.summaries.on_ingest)
            self.queue = IngestQueue(self.ingestor, self.sources)
            # a fleet index applies the others' writes in spaced batches meanwhile: own
            # transcripts first, the fleet's after (a local index follows only its own)
            index.busy = lambda: not self.backfill_done
            candidate = Candidates(s.watch.exclude, self.paths.owned_dirs())
            self.on_demand = OnDemandIngest(self.store, self.ingestor, self.queue, candidate,
                                            self.sources, self.paths.owned_dirs())
            # MEMORY.md's folder exists before the watch starts, or the watch covers it only
            # from the next reconciliation and a user's first edit waits for the poll
            await asyncio.to_thread(mkdir_private, self.paths.memory_dir)
            self.watcher = Watcher(self.sources, self.queue, self.ingestor, candidate,
                                   debounce_ms=s.watch.debounce_ms,
                                   force_polling=s.watch.force_polling,
                                   also={self.paths.memory_dir: self._memory_folder_changed})
            self.backfill = Backfill(self.ingestor, self.queue, self.watcher)

            # a user's edit to MEMORY.md is seen by the watcher (above); the poll is a
            # safety net for a watch that is down
            self.memory = MemoryFile.from_paths(self.paths, events=self.events,
                                                redact=redactor.clean,
                                                poll_interval=MEMORY_POLL_S)
            await self.memory.start()  # MEMORY.md's temp files from a killed write go
            if self.embedder is not None:  # its entries' vectors, kept by the worker
                self.embedder.follow_memory(self._memory_texts)
            self._stack.push_async_callback(self.memory.stop)
            for clean in (daily.clean_temps, history.clean_temps):  # notes, HISTORY.md
                await asyncio.to_thread(clean, self.paths.memory_dir)
            self.consolidator = Consolidator(s, self.store, self.memory, self.paths.memory_dir,
                                             clock=self.clock, llm=self.llm)
            catch_up = self.catch_up = CatchUp(self.consolidator, queue)
            self.retention = Retention(s.retention, self.store, self.paths.memory_dir,
                                       self.paths.data_dir / "archive", self.consolidator.tz,
                                       clock=self.clock)
            self.retention.hold = catch_up.pending
            self.crons = Crons(s, self.consolidator, self.retention, catch_up)
            self.crons.register(self.schedule)
            self.forgetting = Forgetting(self.store, candidate, self.memory,
                                         self.summaries.triggers.resummarize,
                                         self.consolidator.on_forget, index=index)
            if target.kind == "postgresql":  # one memory folder for the namespace
                self.fleet_memory = FleetMemory(
                    self.store, self.memory, self.paths.memory_dir, self.paths.state_dir,
                    guards=(self.consolidator.busy, self.retention.busy))
                self._spawn(self.fleet_memory.run(), "fleet-memory")
            if n := await self.forgetting.load_exclusions():
                log.info("%d exclusions (memoryctl exclude --list)", n)

            self.status = Status(self._process, self.store, self.ingestor, self.queue,
                                 self.backfill, self.watcher, self.limiter, self.summaries,
                                 self.crons, self._embed_status)
            await self._serve()
            self._spawn(self.queue.run(), "ingest")
            self._spawn(self._backfill(), "backfill")
            self._spawn(self.watcher.run(self._stop_requested), "watcher")
            self._spawn(self._reconcile_loop(), "reconcile")
            if self.embedder is not None:
                self._spawn(self.embedder.worker.run(), "embed")
                self._stack.callback(self.embedder.model.release)  # its memory, at stop
            if target.kind == "postgresql":  # only a shared database goes away
                self._spawn(self._retry_parked(), "retry-parked")
            else:
                self._spawn(watch_identity(self.paths.db, self._db_gone), "db-guard")
            self._schedule_fleet()
            # the jobs last, the exit stack stops them first: the schedule (and its tasks,
            # the summaries' triggers among them), the workers, then the LLM they all use
            self._stack.push_async_callback(self.llm.close)
            await self.summaries.start()
            self._stack.push_async_callback(self.summaries.stop)
            await queue.start()
            self._stack.push_async_callback(queue.stop)
            await self.schedule.start()
            self._stack.push_async_callback(self.schedule.stop)
            if (period := sdnotify.watchdog_interval()) is not None:
                self._spawn(self._watchdog(period), "watchdog")
        except BaseException:
            await self.stop()
            raise
        self.state = "running"
        tcp = f" and 127.0.0.1:{self.tcp_port}" if self.tcp_port is not None else ""
        log.info("memoryd %s ready on %s%s (python %s, %s); %s", __version__, self.socket_path,
                 tcp, platform.python_version(), platform.platform(terse=True),
                 settings_summary(s))
        if not self._stop_requested.is_set():  # a stop asked meanwhile told systemd so
            sdnotify.notify("READY=1")

    def _schedule_fleet(self) -> None:
        """A fleet member's own cron, in the user's zone."""
        assert self.schedule is not None and self.consolidator is not None
        s, tz, add = self.settings, self.consolidator.tz, self.schedule.cron
        grace = s.consolidate.misfire_grace_s
        if self.store is not None and self.store.kind == "postgresql":
            # hourly: change rows every active machine has applied (memoryd.fleet.changefeed)
            index, keep_s = self.store.index, s.store.changes_keep_days * 86400
            add("changes_prune", "17 * * * *", tz,
                lambda: asyncio.to_thread(index.prune_changes, keep_s), grace)  # type: ignore[attr-defined]

    def _lock(self) -> None:
        # held for the daemon's lifetime; 0600 like every file memoryd makes
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
        f = os.fdopen(fd, "r+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise AlreadyRunningError(
                f"another memoryd holds {self.paths.lock} (same MEMORYD_HOME); "
                "stop it first") from None
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._stack.callback(f.close)

    async def _serve(self) -> None:
        assert self.store is not None and self.memory is not None
        assert self.summaries is not None and self.forgetting is not None
        assert self.index is not None and (on_demand := self.on_demand) is not None
        assert self.status is not None
        builder = ContextBuilder(self.store, self.index, self.memory, self.paths.memory_dir,
                                 archive_dir=self.paths.data_dir / "archive",
                                 embed=self.embedder)
        page = WebDeps(summaries=self.summaries, memory=self.memory, context=builder,
                       memory_dir=self.paths.memory_dir, tcp_port=lambda: self.tcp_port)
        served = ServedLog(self.store, self.settings.privacy.served_log_days)
        self._stack.push_async_callback(served.flush)  # after the server stops, before the store
        app = make_app(Services(store=self.store, status=self.status, version=__version__,
                                events=self.events, jobs=self.jobs(), ingest=on_demand.ingest,
                                token=ensure_token(self.paths.token_file),
                                on_forget=(self._forgotten,), limiter=self.limiter,
                                backup_roots=(Path.home(), self.paths.home or self.paths.data_dir),
                                archive_dir=self.paths.data_dir / "archive",
                                embed=self.embedder, summaries=self.summaries, to_memory=self._to_memory,
                                consolidator=self.consolidator, retention=self.retention,
                                memory=self.memory, context=builder, served=served,
                                queue=self.summaries.queue, forgetting=self.forgetting,
                                web=page, evaluator=Evaluator(
                                    self.store, self.index, self.llm, off_reason(
                                        self.settings.embed.enabled))),
                       # the one table: the API's rows and the web page's
                       route_table(pages=web_routes.ROUTES))
        runner = GuardedRunner(app, shutdown_timeout=1.0, access_log=None)
        await runner.setup()
        self._stack.push_async_callback(runner.cleanup)
        srv = self.settings.server
        self.tcp_port = None
        await start_unix(runner, self.socket_path)
        self._stack.callback(self.socket_path.unlink, missing_ok=True)
        if srv.tcp_enabled:
            _, self.tcp_port = await start_tcp(runner, srv.tcp_host, srv.tcp_port,
                                               allow_non_loopback=srv.allow_non_loopback)

    def _memory_folder_changed(self) -> None:
        if self.memory is not None:
            self.memory.notice()

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=f"memoryd-{name}")
        task.add_done_callback(self._task_done)
        self._tasks.append(task)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s died", task.get_name(), exc_info=task.exception())

    def _on_ingest(self, event: IngestEvent) -> None:
        self.events.publish("ingested", path=event.path, agent=event.agent,
                            units=sum(event.new_units.values()))

    def jobs(self) -> dict[str, JobFn]:
        async def reconcile(params: dict[str, Any]) -> dict[str, Any]:
            assert self.watcher is not None
            return {"queued": await self.watcher.reconcile(urgent=True)}

        async def reindex(params: dict[str, Any]) -> dict[str, Any]:
            assert self.store is not None
            self.store.index.request_rebuild()
            if self.embedder is None:
                return {"index": "rebuilding"}
            return {"index": "rebuilding", "vectors_dropped": await self.embedder.rebuild()}

        assert self.summaries is not None and self.consolidator is not None
        assert self.retention is not None and self.catch_up is not None
        return {"reconcile": reconcile, "reindex": reindex, **self.summaries.jobs,
                "consolidate": self.catch_up.run_job, "retention": self.retention.run_job}

    async def _forgotten(self, agent: str, session_id: str,
                         machine: str | None = None) -> dict[str, Any]:
        """After `sessions forget`: its archived units and memory provenance go too."""
        assert self.consolidator is not None and self.retention is not None
        assert self.index is not None
        self.index.recent.forget()  # nothing forgotten is answered while the store is away
        archived = await self.retention.forget(agent, session_id, machine)
        return {"archived_units_deleted": archived, **await self.consolidator.on_forget()}

    async def _to_memory(self, session_id: str, agent: str | None,
                         machine: str | None = None) -> dict[str, Any]:
        assert self.consolidator is not None
        return await self.consolidator.admit_session(session_id, agent, machine=machine)

    @property
    def backfill_done(self) -> bool:
        return self.backfill is not None and self.backfill.done

    async def _backfill(self) -> None:
        assert self.backfill is not None
        await self.backfill.run(self._truncate_wal)
        self._spawn(self._truncate_wal(indexed=True), "wal-after-index")
        if self.crons is not None:  # history the crons do not cover
            await self.crons.request_history("first start")

    async def _truncate_wal(self, *, indexed: bool = False) -> None:
        """What the backfill wrote is in the database: the WAL need not stay at its peak.
        Once more when the index has caught up (its reads during the backfill may have
        held frames back from the first)."""
        assert self.store is not None
        try:
            if indexed:
                await self.store.indexed()
            await self.store.truncate_wal()
        except StoreUnavailableError:
            pass
        except Exception:
            log.warning("checkpoint after the backfill failed", exc_info=True)

    async def _reconcile_loop(self) -> None:
        assert self.watcher is not None
        while True:
            await asyncio.sleep(self.settings.watch.reconcile_seconds)
            if not self.backfill_done:
                continue
            try:
                self._sources = configured_sources(self.settings, self.environ)
                await self.watcher.reconcile()
            except StoreUnavailableError:
                pass  # logged once by the store's health; parked files are retried below
            except Exception:
                log.exception("reconciliation failed")

    async def _retry_parked(self) -> None:
        """Files not read while the shared database was away are queued again whenever
        the store's backoff allows an attempt: the first that works catches them all up
        (their cursors never moved, so nothing is read twice or skipped)."""
        assert self.store is not None and self.ingestor is not None
        assert self.queue is not None
        while True:
            await asyncio.sleep(min(2.0, max(0.25, self.store.health.delay())))
            if self.ingestor.parked and self.store.health.due():
                for path in list(self.ingestor.parked.values()):
                    self.queue.submit(path)

    async def _watchdog(self, period: float) -> None:
        """Tell systemd we are alive while the loop and the store both answer."""
        assert self.store is not None
        while True:
            with contextlib.suppress(StoreUnavailableError):  # a shared database that is
                # away is not a hung daemon: it answers from its index and catches up
                await self.store.read(lambda c: c.execute("SELECT 1").fetchone())
            sdnotify.notify("WATCHDOG=1")
            await asyncio.sleep(period)

    async def _memory_texts(self) -> list[str]:
        """MEMORY.md's entries as the embed worker embeds them (`memoryd.embed.entries`)."""
        return long_term.texts(await self.memory.document())

    async def _embed_status(self) -> dict[str, Any]:
        assert self.store is not None
        return await embed_status(self.embedder, off_reason(self.settings.embed.enabled))

    def _process(self) -> dict[str, Any]:
        """The daemon's own part of status: the process, its sockets, its sources."""
        return {"version": __version__, "pid": os.getpid(), "state": self.state,
                "uptime_s": round(time.time() - self.started_at, 1),
                "socket": str(self.socket_path), "tcp_port": self.tcp_port,
                "sources": [x.as_dict() for x in self._sources]}

    def _db_gone(self, reason: str) -> None:
        self.exit_code = 1
        self.request_stop()

    def request_reload(self) -> None:
        async def reload() -> None:
            old = self.settings
            self.settings = await asyncio.to_thread(reload_settings, self.settings,
                                                    self.load_settings)
            if self.settings.watch != old.watch:
                await self._apply_sources()

        self._spawn(reload(), "reload")

    async def _apply_sources(self) -> None:
        """Sources changed by SIGHUP take effect at once (the README's "apply at once";
        they waited for the next reconciliation, 30 s later): status lists them, and a
        scan queues their files and restarts the watch over the new set of roots."""
        self._sources = configured_sources(self.settings, self.environ)
        if self.watcher is None:
            return
        try:
            await self.watcher.reconcile(urgent=True)
        except StoreUnavailableError:
            pass  # the reconciliation loop tries again
        except Exception:
            log.exception("reading the reloaded sources failed")

    def request_stop(self) -> None:
        sdnotify.notify("STOPPING=1")
        self._stop_requested.set()

    async def stop(self) -> None:
        if self.state in ("stopping", "stopped") and not self._tasks and self.store is None:
            return
        self.state = "stopping"
        self._stop_requested.set()
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=STOP_TIMEOUT / 2)
        self._tasks.clear()
        try:
            await asyncio.wait_for(self._stack.aclose(), STOP_TIMEOUT)
        except TimeoutError:
            log.warning("shutdown timed out")
        self.store = None
        self.state = "stopped"

    async def run(self) -> int:
        tune_malloc()  # before any thread: flat memory after writing (memoryd.runtime.idle_release)
        # handlers first: the socket answers before start() returns, and a SIGTERM in
        # between must still stop cleanly (it is acted on once start() is done)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_stop)
        loop.add_signal_handler(signal.SIGHUP, self.request_reload)
        try:
            await self.start()
            await self._stop_requested.wait()
            log.info("stopping")
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            await self.stop()
        log.info("stopped")
        return self.exit_code


