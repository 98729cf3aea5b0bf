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
from memoryd.api import IngestRequest, IngestResponse
from memoryd.ingest.backfill import (
    BackfillProgress,
    human_bytes,
    log_progress,
    offsets,
    read_paths_since,
)
from memoryd.config import Settings, settings_summary
from memoryd.consolidate import runs as cons_runs
from memoryd.consolidate.catch_up import CatchUp
from memoryd.consolidate.clock import Clock
from memoryd.consolidate.retention import Retention
from memoryd.consolidate.service import Consolidator
from memoryd.recall.context import ContextBuilder
from memoryd.daemon.db_guard import watch_identity
from memoryd.errors import AlreadyRunningError, BadRequestError, StoreUnavailableError
from memoryd.events import EventBus
from memoryd.consolidate.forgetting import Forgetting
from memoryd.runtime.idle_release import RELEASE, tune_malloc
from memoryd.index.tail import TailPolicy
from memoryd.ingest.ingestor import IngestEvent, Ingestor
from memoryd.ingest.queue import IngestQueue
from memoryd.ingest.redact import Redactor
from memoryd.memory import MemoryFile
from memoryd.memory.fleet_sync import FleetMemory
from memoryd.paths import Paths, mkdir_private
from memoryd.runtime.reexec import (
    Reexec,
    due,
    exec_self,
    hold_signals,
    inherited_signals,
    release_signals,
    serve_handed_over,
    stop_accepting,
)
from memoryd.daemon.reload import reload_settings
from memoryd.recall.served_log import ServedLog
from memoryd.server.app import make_app
from memoryd.server.limiter import QueryLimiter
from memoryd.server.services import JobFn, Services
from memoryd.server.sites import GuardedRunner, start_tcp, start_unix
from memoryd.ingest.sources import Candidates, Source, configured_sources, owner, walk
from memoryd.store import Store
from memoryd.store import consolidation_runs as runs_sql
from memoryd.store.files import file_stats, files_with_bad_lines
from memoryd.store.jobs import next_due
from memoryd.store.sessions import count_sessions
from memoryd.store.units import count_units
from memoryd.summarize.service import Summaries
from memoryd.summarize.triggers import session_target
from memoryd.ingest.watcher import Watcher
from memoryd.web.deps import WebDeps

log = logging.getLogger(__name__)

STOP_TIMEOUT = 4.0
# background jobs wait for a fleet member's index backlog at most this long at a stretch: a
# member fed a full page at every poll without pause would otherwise keep them waiting
JOBS_WAIT_MAX_S = 600.0
REEXEC_RECHECK_S = 30.0  # a re-exec due while jobs run: asked again this much later
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
        self.backfill_done = False
        self.backfill = BackfillProgress()
        self._baseline: dict[str, int] = {}
        self._last_store_status: tuple[Any, ...] | None = None  # for a store gone away
        self._stack = contextlib.AsyncExitStack()
        # a re-exec's handover (sockets, lock) when the previous image left one
        self.reexec = Reexec(environ)
        self._sites: list[Any] = []
        self._lock_file: Any = None
        self._stop_requested = asyncio.Event()
        self.jobs_wait_max_s = JOBS_WAIT_MAX_S
        self._backlog_since: float | None = None  # jobs have waited for the index since
        self._backlog_told = False  # that they no longer wait was logged
        self._tasks: list[asyncio.Task[Any]] = []
        self._sources: list[Source] = []
        self._adhoc: list[Source] = []  # folders given to POST /v1/ingest
        self.events = EventBus()
        self.candidate: Candidates | None = None
        self.store: Store | None = None
        self.ingestor: Ingestor | None = None
        self.queue: IngestQueue | None = None
        self.watcher: Watcher | None = None
        self.memory: MemoryFile | None = None
        self.summaries: Summaries | None = None
        self.consolidator: Consolidator | None = None
        self.retention: Retention | None = None
        self.catch_up: CatchUp | None = None
        self.forgetting: Forgetting | None = None
        self.fleet_memory: FleetMemory | None = None

    def sources(self) -> list[Source]:
        return self._sources + self._adhoc

    async def start(self) -> None:
        self.state = "starting"
        self.started_at = time.time()
        self._loop = asyncio.get_running_loop()
        s = self.settings
        try:
            self.paths.ensure()
            self._lock()
            target = s.store.target()
            self.store = await Store.open(self.paths.db, target=target)
            self._stack.push_async_callback(self.store.close)
            RELEASE.register(self.store.release_caches)  # SQLite's page caches, at rest
            self._stack.callback(RELEASE.unregister, self.store.release_caches)
            self.store.index.tail_policy = TailPolicy(docs=s.index.tail_commit_docs,
                                                      seconds=s.index.tail_commit_s)
            log.info("store open at %s", self.paths.db if target.kind == "sqlite" else
                     f"{target.masked()} (namespace {target.namespace}, machine "
                     f"{target.machine})")

            redactor = Redactor(s.privacy.redact_patterns, s.privacy.private_tags)
            self.ingestor = Ingestor(self.store, redactor, max_line_bytes=s.watch.max_line_bytes)
            await self.ingestor.load_seen()
            self._sources = configured_sources(s, self.environ)
            self.ingestor.subscribers.append(self._on_ingest)
            self.summaries = Summaries(s, self.store, self.events, environ=self.environ,
                                       clock=self.clock, busy=self._jobs_wait)
            self.ingestor.subscribers.append(self.summaries.on_ingest)
            self.queue = IngestQueue(self.ingestor, self.sources)
            if target.kind == "postgresql":  # own transcripts first, the fleet's after
                self.store.index.busy = lambda: not self.backfill_done  # type: ignore[attr-defined]
            candidate = self.candidate = Candidates(s.watch.exclude, self.paths.owned_dirs())
            # MEMORY.md's folder exists before the watch starts, or the watch covers it only
            # from the next reconciliation and a user's first edit waits for the poll
            await asyncio.to_thread(mkdir_private, self.paths.memory_dir)
            self.watcher = Watcher(self.sources, self.queue, self.ingestor, candidate,
                                   debounce_ms=s.watch.debounce_ms,
                                   force_polling=s.watch.force_polling,
                                   also={self.paths.memory_dir: self._memory_folder_changed})

            # a user's edit to MEMORY.md is seen by the watcher (above); the poll is a
            # safety net for a watch that is down
            self.memory = MemoryFile.from_paths(self.paths, events=self.events,
                                                redact=redactor.clean,
                                                poll_interval=MEMORY_POLL_S)
            await self.memory.start()
            self._stack.push_async_callback(self.memory.stop)
            self.consolidator = Consolidator(s, self.store, self.memory, self.paths.memory_dir,
                                             clock=self.clock, llm=self.summaries.llm)
            queue = self.summaries.queue
            self.catch_up = CatchUp(self.consolidator, lambda kind, target, params, reason,
                                    prio: queue.enqueue(kind, target, params, reason=reason,
                                                        priority=prio))
            catch_up = self.catch_up
            queue.add_handler("consolidate_history", lambda job: catch_up.job(job.params))
            self.retention = Retention(s.retention, self.store, self.paths.memory_dir,
                                       self.paths.data_dir / "archive", self.consolidator.tz,
                                       clock=self.clock)
            self.retention.hold = catch_up.pending
            self.forgetting = Forgetting(self.store, candidate, self.memory, self._resummarize,
                                         self.consolidator.on_forget)
            if target.kind == "postgresql":  # one memory folder for the namespace
                self.fleet_memory = FleetMemory(
                    self.store, self.memory, self.paths.memory_dir, self.paths.state_dir,
                    guards=(self.consolidator.busy, self.retention.busy))
                self._spawn(self.fleet_memory.run(), "fleet-memory")
            if n := await self.forgetting.load_exclusions():
                log.info("%d exclusions (memoryctl exclude --list)", n)

            await self._serve()
            self._spawn(self.queue.run(), "ingest")
            self._spawn(self._backfill(), "backfill")
            self._spawn(self.watcher.run(self._stop_requested), "watcher")
            self._spawn(self._reconcile_loop(), "reconcile")
            if target.kind == "postgresql":  # only a shared database goes away
                self._spawn(self._retry_parked(), "retry-parked")
            else:
                self._spawn(watch_identity(self.paths.db, self._db_gone), "db-guard")
            await self.summaries.start()  # triggers last: the exit stack stops them first
            self._stack.push_async_callback(self.summaries.stop)
            self._schedule()
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

    def _schedule(self) -> None:
        """Consolidation and retention on their crons, in the user's zone."""
        assert self.summaries is not None and self.consolidator is not None
        assert self.retention is not None
        s, cons, ret = self.settings, self.consolidator, self.retention
        add, tz = self.summaries.triggers.add_cron, cons.tz
        grace = s.consolidate.misfire_grace_s
        if s.summary.enabled and s.consolidate.enabled:
            add("consolidate", s.consolidate.cron, tz, lambda: cons.scheduled("day"), grace)
            add("consolidate_nightly", s.consolidate.nightly_cron, tz, self._nightly, grace)
            self._spawn(cons.firings.watch(), "consolidate-leases")  # a dead claimer's
        if s.retention.enabled:
            add("retention", s.retention.cron, tz, ret.scheduled, grace)
        if self.store is not None and self.store.kind == "postgresql":
            # hourly: change rows every active machine has applied (memoryd.fleet.changefeed)
            index, keep_s = self.store.index, s.store.changes_keep_days * 86400
            add("changes_prune", "17 * * * *", tz,
                lambda: asyncio.to_thread(index.prune_changes, keep_s), grace)  # type: ignore[attr-defined]

    async def _nightly(self) -> None:
        """Yesterday's last pass, then any history not consolidated yet (a new source)."""
        assert self.consolidator is not None
        await self.consolidator.scheduled("nightly")
        await self._request_history("nightly")

    async def _request_history(self, reason: str) -> None:
        s = self.settings
        if self.catch_up is None or not (s.summary.enabled and s.consolidate.enabled
                                         and s.consolidate.history):
            return
        try:
            await self.catch_up.request(reason)
        except StoreUnavailableError:
            pass  # logged once by the store's health; the next firing asks again
        except Exception:
            log.exception("looking for history to consolidate failed")

    def _lock(self) -> None:
        # held for the daemon's lifetime; 0600 like every file memoryd makes. After a
        # re-exec, the previous image's descriptor: its lock was never let go
        fd = self.reexec.inherited_lock(self.paths.lock)
        if fd is None:
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
        self._lock_file = f
        self._stack.callback(f.close)

    async def _serve(self) -> None:
        assert self.store is not None and self.memory is not None
        assert self.summaries is not None and self.forgetting is not None
        builder = ContextBuilder(self.store, self.memory, self.paths.memory_dir,
                                 archive_dir=self.paths.data_dir / "archive")
        page = WebDeps(summaries=self.summaries, memory=self.memory, context=builder,
                       memory_dir=self.paths.memory_dir, tcp_port=lambda: self.tcp_port)
        served = ServedLog(self.store, self.settings.privacy.served_log_days)
        self._stack.push_async_callback(served.flush)  # after the server stops, before the store
        app = make_app(Services(store=self.store, status=self.status, version=__version__,
                                events=self.events, jobs=self.jobs(), ingest=self.ingest,
                                token=ensure_token(self.paths.token_file),
                                on_forget=(self._forgotten,), limiter=self.limiter,
                                backup_roots=(Path.home(), self.paths.home or self.paths.data_dir),
                                archive_dir=self.paths.data_dir / "archive",
                                summaries=self.summaries, to_memory=self._to_memory,
                                consolidator=self.consolidator, retention=self.retention,
                                memory=self.memory, context=builder, served=served,
                                queue=self.summaries.queue, forgetting=self.forgetting,
                                web=page))
        runner = GuardedRunner(app, shutdown_timeout=1.0, access_log=None)
        await runner.setup()
        self._stack.push_async_callback(runner.cleanup)
        srv = self.settings.server
        unix_ok, self.tcp_port = False, None
        if self.reexec.inherited:  # the previous image's sockets, with their backlogs
            assert self.reexec.handover is not None
            # the pause ends here: from the first site's start the loop answers what
            # waited in the backlogs, maybe before the next line runs
            self.reexec.served()
            unix_ok, self.tcp_port = await serve_handed_over(
                runner, self.reexec.handover, self.socket_path,
                srv.tcp_port if srv.tcp_enabled else None)
        if not unix_ok:
            await start_unix(runner, self.socket_path)
        self._stack.callback(self._unlink_socket)
        if srv.tcp_enabled and self.tcp_port is None:
            _, self.tcp_port = await start_tcp(runner, srv.tcp_host, srv.tcp_port,
                                               allow_non_loopback=srv.allow_non_loopback)
        self._sites = list(runner.sites)
        self.reexec.served()  # a handover without sockets: serving on new ones
        RELEASE.on_rest(self._rested)
        self._stack.callback(RELEASE.on_rest, self._rested, on=False)

    def _unlink_socket(self) -> None:
        if not self.reexec.requested:  # a re-exec keeps it: the next image serves on it
            self.socket_path.unlink(missing_ok=True)

    def _rested(self) -> None:
        """The idle release ran at rest (its timer's thread): is a re-exec due?"""
        with contextlib.suppress(RuntimeError):  # the loop is gone: stopping anyway
            self._loop.call_soon_threadsafe(self._check_reexec)

    def _check_reexec(self) -> None:
        if self.state == "running" and not self.reexec.requested:
            self._spawn(self._maybe_reexec(), "reexec")

    async def _maybe_reexec(self) -> None:
        """Once at rest after storing `server.reexec_after_units` units or more: stop
        as on SIGTERM, keeping the sockets and the lock, and `run` re-executes the
        process (memoryd.runtime.reexec). At rest: caught up, the index writer closed, no job
        running or due; a daemon busy with jobs is asked again `REEXEC_RECHECK_S` later."""
        assert self.ingestor is not None and self.queue is not None
        assert self.store is not None
        units = self.ingestor.stats.units
        if (self.reexec.requested or self.state != "running"
                or not due(units, self.settings.server.reexec_after_units)):
            return
        if not await self._at_rest():
            self._loop.call_later(REEXEC_RECHECK_S, self._rested)
            return
        if self.reexec.request(units, self.settings.server.reexec_after_units):
            self._stop_requested.set()

    async def _at_rest(self) -> bool:
        """Caught up (a fleet member: its index too), the index writer closed, no job
        running or due, and the store reachable."""
        assert self.store is not None and self.queue is not None
        index = self.store.index
        if not self.backfill_done or self.queue.depth() or self.ingestor is None \
                or self.ingestor.parked or index.has_writer() or index.backlog():
            return False
        try:
            if not (await self.store.read(index.status))["caught_up"]:
                return False
            due_at = await self.store.read(next_due)
        except StoreUnavailableError:
            return False
        running = self.summaries is not None and self.summaries.queue.running
        return not running and (due_at is None or due_at > self.clock())

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
            return {"index": "rebuilding"}

        assert self.summaries is not None and self.consolidator is not None
        assert self.retention is not None and self.catch_up is not None
        return {"reconcile": reconcile, "reindex": reindex, **self.summaries.jobs,
                "consolidate": self.catch_up.run_job, "retention": self.retention.run_job}

    async def _forgotten(self, agent: str, session_id: str,
                         machine: str | None = None) -> dict[str, Any]:
        """After `sessions forget`: its archived units and memory provenance go too."""
        assert self.consolidator is not None and self.retention is not None
        assert self.store is not None
        self.store.recent.forget()  # nothing forgotten is answered while the store is away
        archived = await self.retention.forget(agent, session_id, machine)
        return {"archived_units_deleted": archived, **await self.consolidator.on_forget()}

    async def _to_memory(self, session_id: str, agent: str | None,
                         machine: str | None = None) -> dict[str, Any]:
        assert self.consolidator is not None
        return await self.consolidator.admit_session(session_id, agent, machine=machine)

    async def ingest(self, req: IngestRequest) -> IngestResponse:
        """Backfill a file or folder now (POST /v1/ingest)."""
        assert self.queue is not None and self.ingestor is not None
        assert self.candidate is not None
        raw = Path(req.path)
        if not raw.is_absolute() or "\x00" in req.path:
            raise BadRequestError("path must be an absolute path", field="path")
        path = await asyncio.to_thread(raw.resolve)
        if not await asyncio.to_thread(path.exists):
            raise BadRequestError(f"no such file or folder: {path}", field="path")
        if any(path.is_relative_to(d) or d.is_relative_to(path) for d in self.paths.owned_dirs()):
            raise BadRequestError("that path holds memoryd's own files", field="path")
        is_dir = await asyncio.to_thread(path.is_dir)
        if owner(self.sources(), path) is None:
            self._adhoc.append(Source(req.agent, path if is_dir else path.parent))
        if is_dir:
            files = [p for p, _ in await asyncio.to_thread(
                lambda: list(walk(path, self.candidate)))]  # type: ignore[arg-type]
        else:
            files = [path]
        before = self.ingestor.stats.units
        if req.wait:
            await self.queue.process(files)
            await self.store.indexed()  # waited for: searchable, not only stored
            return IngestResponse(path=str(path), files=len(files),
                                  new_units=self.ingestor.stats.units - before,
                                  ignored=await asyncio.to_thread(self._ignored, files, req.agent))
        for f in files:
            self.queue.submit(f, urgent=True)
        return IngestResponse(path=str(path), files=len(files), new_units=None)

    async def _resummarize(self, pk: int) -> None:
        """A session lost units to `forget`: its summary is rebuilt from what is left."""
        assert self.summaries is not None
        await self.summaries.queue.enqueue("summarize", session_target(pk), {"mode": "all"},
                                           reason="forget")

    def _ignored(self, files: list[Path], agent: str) -> list[dict[str, str]]:
        """Files just read that were not taken as transcripts, and why (POST /v1/ingest
        with wait: "1 files read, 0 new units" alone leaves a user guessing)."""
        assert self.ingestor is not None
        out = []
        for f in files:
            seen = self.ingestor.seen.get(str(f))
            if seen is not None and seen.transcript:
                continue
            if seen is None and f.stat().st_size == 0:
                why = "empty file (read again once it has a complete line)"
            elif seen is None:
                continue
            elif agent == "auto":
                why = ("not a transcript of a known agent: its first line matches none of "
                       "the formats (pass --agent to force one)")
            else:
                why = f"not a {agent} transcript: its first line does not match that format"
            out.append({"path": str(f), "reason": why})
        return out

    async def _backfill(self) -> None:
        assert self.watcher is not None and self.queue is not None
        assert self.store is not None
        assert self.ingestor is not None
        t0 = time.monotonic()
        self._baseline = offsets(self.ingestor.seen)
        self.backfill = BackfillProgress()
        queued = await self.watcher.reconcile()
        await self._refresh_backfill()
        log.info("backfill: %d files, %s to read", self.backfill.files_total,
                 human_bytes(self.backfill.bytes_total))
        logger = asyncio.create_task(log_progress(self.backfill, self._refresh_backfill))
        try:
            await self.queue.drained()
        finally:
            logger.cancel()
        await self._refresh_backfill()
        self.backfill.finish()
        await self._truncate_wal()
        self.backfill_done = True
        self._spawn(self._truncate_wal(indexed=True), "wal-after-index")
        log.info("backfill done: %d files read in %.1fs (%s)", queued, time.monotonic() - t0,
                 self.backfill.line())
        await self._request_history("first start")  # history the crons do not cover

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

    def _jobs_wait(self) -> bool:
        """Background jobs (summaries, one-liners) wait while the backfill runs and, on
        a fleet member, while its index still builds or pages a backlog of the feed: run
        beside it they took the CPU the niced feed writer needed, so it was caught up
        late (issue 14, bench/README "pgcatch"). A SQLite daemon's index keeps up with
        its own backfill; a fleet member's follows it through the feed, after. They wait
        for the index `jobs_wait_max_s` at most at a stretch, then run beside it."""
        if not self.backfill_done:
            return True
        if self.store is None or not self.store.index.backlog():
            self._backlog_since, self._backlog_told = None, False
            return False
        now = time.monotonic()
        if self._backlog_since is None:
            self._backlog_since = now
        waited = now - self._backlog_since
        if waited < self.jobs_wait_max_s:
            return True
        if not self._backlog_told:
            self._backlog_told = True
            log.info("background jobs run beside the index's backlog: it has lasted %.0f s",
                     waited)
        return False

    async def _refresh_backfill(self) -> None:
        await self._unread_bytes(update_backfill=True)

    async def _unread_bytes(self, *, update_backfill: bool) -> int:
        """Unread bytes, counted in a worker thread over a copy of what the ingestor knows
        now; the backfill's progress is counted from the same copy. (Counted from the live
        map after the thread returned, a file read meanwhile was both read and unread:
        one file's size too many in `bytes_total`, for good.)"""
        assert self.queue is not None and self.ingestor is not None
        waiting = self.queue.queued()
        seen, todo = self.ingestor.unread_view(waiting)
        unread = await asyncio.to_thread(self.ingestor.unread_bytes, todo, seen)
        if update_backfill:
            read, nbytes = read_paths_since(self._baseline, seen)
            # a file read in part and queued again for the rest counts once: the pending
            # files are those waiting that have not been read from yet
            pending = {str(p) for p in waiting} - read
            self.backfill.update(files_read=len(read), bytes_read=nbytes,
                                 pending_files=len(pending), unread_bytes=unread)
        return unread

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

    async def status(self) -> dict[str, Any]:
        assert self.store is not None and self.ingestor is not None and self.queue is not None
        machine = self.store.machine

        def counts(conn: Any) -> dict[str, int]:
            return {**file_stats(conn, machine), "sessions": count_sessions(conn),
                    "units": count_units(conn),
                    "bad_files": files_with_bad_lines(conn, machine=machine)}

        # progress first, counts second: once this says caught_up, the counts below
        # include everything read so far (read the other way round, the last file could
        # commit in between and a caught_up status would carry the count from before it)
        backfill_done = self.backfill_done
        depth = self.queue.depth()
        unread = await self._unread_bytes(update_backfill=not backfill_done)
        depth = max(depth, self.queue.depth())
        # the shared database may be away (fleet mode): then status answers with the
        # counts last read, says since when the store is unreachable, and is not caught up
        try:
            index = await self.store.read(self.store.index.status)
            c = await self.store.read(counts)
            machines = await self._machines()
            extra = await self.summaries.status() if self.summaries else {}
            self._last_store_status = (index, dict(c), extra, machines)
        except StoreUnavailableError:
            index, c, extra, machines = self._last_store_status or (
                {"caught_up": False}, {"files": 0, "ignored_files": 0, "bad_lines": 0,
                                       "sessions": 0, "units": 0, "bad_files": []}, {}, None)
            index, c = {**index, "caught_up": False}, dict(c)
        health = self.store.health.status()
        st = self.ingestor.stats
        failures = self.ingestor.failures.report(c.pop("bad_files", []))
        failing = bool(self.ingestor.failures.blocking())
        s = self.settings
        return {
            "version": __version__,
            "pid": os.getpid(),
            "state": self.state,
            "uptime_s": round(time.time() - self.started_at, 1),
            "socket": str(self.socket_path),
            "tcp_port": self.tcp_port,
            "sources": [x.as_dict() for x in self._sources],
            "store": {"kind": self.store.kind, "url": self.store.target.masked(),
                      "namespace": self.store.target.namespace,
                      "machine": self.store.target.machine,
                      "path": str(self.store.path) if self.store.kind == "sqlite" else None,
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
                          and not self.ingestor.parked),
            "index": index,
            "backfill": self.backfill.snapshot(),
            "ingest_lag_ms": None if st.last_lag_ms is None else round(st.last_lag_ms, 1),
            "ingest": {"units_this_run": st.units, "batches": st.batches,
                       "bad_lines_this_run": st.bad_lines, "errors": st.errors,
                       "last_error": st.last_error, **failures},
            "queries": self.limiter.as_dict(),  # search/context: running, waiting, 503s
            # RSS now, idle releases run (memoryd.runtime.idle_release), re-execs (memoryd.runtime.reexec)
            "memory": {**RELEASE.status(), **self.reexec.status()},
            "watcher": {"batches": self.watcher.batches if self.watcher else 0,
                        "errors": self.watcher.errors if self.watcher else 0,
                        # why it polls where it could wait (no inotify instances/watches)
                        "warning": self.watcher.warning if self.watcher else None},
            **extra,
            "consolidation": {
                "enabled": s.summary.enabled and s.consolidate.enabled,
                "last_run": self.consolidator.last_run if self.consolidator else None,
                "retention_last_run": self.retention.last_run if self.retention else None,
                **await self._consolidation_status()},
        }

    async def _consolidation_status(self) -> dict[str, Any]:
        """Per recent day what consolidation did, its warnings, and the history's progress
        (memoryd.consolidate.runs, .catch_up)."""
        assert self.store is not None
        if self.catch_up is None:
            return {}
        try:
            rows, failure = await self.store.read(lambda c: (
                runs_sql.recent_runs(c, cons_runs.RECENT_DAYS), runs_sql.last_failure(c)))
        except StoreUnavailableError:
            return {}
        days = cons_runs.per_day(rows)
        return {"days": days, "warnings": cons_runs.warnings(days, failure),
                "history": self.catch_up.status()}

    async def _machines(self) -> list[dict[str, Any]] | None:
        """Fleet mode: the machines seen in the namespace (memoryd.fleet.machines)."""
        assert self.store is not None
        if self.store.kind != "postgresql":
            return None
        from memoryd.fleet.machines import machines_seen

        return await self.store.read(machines_seen)

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
        self.reexec.requested = False  # a SIGTERM while a re-exec was decided: a stop
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
        handover = None
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_stop)
        loop.add_signal_handler(signal.SIGHUP, self.request_reload)
        if self.reexec.handover is not None:  # what the previous image held for this one
            release_signals()
            for sig in inherited_signals(self.reexec.handover):
                log.info("acting on %s received during the re-exec", signal.Signals(sig).name)
                (self.request_reload if sig == signal.SIGHUP else self.request_stop)()
        try:
            await self.start()
            await self._stop_requested.wait()
            log.info("stopping")
        finally:
            if self.reexec.requested:  # before the sites stop: their sockets stay open
                # a SIGTERM meanwhile still stops (request_stop: no re-exec); the next
                # image reads the configuration afresh, so a SIGHUP needs nothing more
                loop.add_signal_handler(signal.SIGHUP, lambda: None)
                handover = self.reexec.next_handover(
                    self._sites, self._lock_file,
                    self.ingestor.stats.units if self.ingestor else 0)
                await stop_accepting(self._sites)
            else:
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    loop.remove_signal_handler(sig)
            await self.stop()
        if handover is not None:
            held = hold_signals()  # to the next image's handlers: for it, not fatal
            await asyncio.sleep(0.005)  # one that came just before is acted on here
            if not self.reexec.requested:
                log.info("a stop was asked during the re-exec: not re-executing")
                release_signals(held)
                handover = None
        if handover is not None:
            log.info("stopped; re-executing")
            try:
                exec_self(handover, held)
            except OSError as e:
                release_signals(held)
                log.error("re-exec failed, exiting for the service manager to restart "
                          "memoryd: %s", e)
                return 1
        log.info("stopped")
        return self.exit_code


