"""What the daemon hands the HTTP application: `Services`, the record of every component a
handler may call, and `SERVICES`, the app key handlers read it from. Its own module so
handlers, the web page and `make_app` import it without importing one another."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from memoryd.api import IngestRequest, IngestResponse
from memoryd.events import EventBus
from memoryd.http.limiter import QueryLimiter
from memoryd.http.metrics import Metrics
from memoryd.store import Store

if TYPE_CHECKING:
    from memoryd.consolidate.forgetting import Forgetting
    from memoryd.embed import Embedder
    from memoryd.consolidate.retention import Retention
    from memoryd.consolidate.service import Consolidator
    from memoryd.jobs.queue import JobQueue
    from memoryd.memory import MemoryFile
    from memoryd.recall.context import ContextBuilder
    from memoryd.recall.evaluate import Evaluator
    from memoryd.recall.served_log import ServedLog
    from memoryd.summarize.service import Summaries
    from memoryd.web.deps import WebDeps

T = TypeVar("T")
JobFn = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
# (session id, agent, machine) -> what MEMORY.md admission did with the session's summary
ToMemory = Callable[[str, "str | None", "str | None"], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Services:
    store: Store
    status: Callable[[], Awaitable[dict[str, Any]]]
    version: str
    events: EventBus = field(default_factory=EventBus)
    # POST /v1/jobs/{name}/run: name -> coroutine taking the request's JSON parameters
    jobs: Mapping[str, JobFn] = field(default_factory=dict)
    # POST /v1/ingest: backfill a file or folder on demand
    ingest: Callable[[IngestRequest], Awaitable[IngestResponse]] | None = None
    # required as `Authorization: Bearer <token>` on TCP (the Unix socket's 0600 mode is
    # its access control); None disables the check (tests of the routes alone)
    token: str | None = None
    metrics: Metrics = field(default_factory=Metrics)
    # search/context: bounded concurrency, 503 + Retry-After when saturated
    limiter: QueryLimiter = field(default_factory=QueryLimiter)
    # called after DELETE /v1/sessions/{id} with (agent, session_id): archives, provenance
    # (agent, session id, machine or None) of a forgotten session
    on_forget: Sequence[Callable[[str, str, str | None], Awaitable[dict[str, Any]]]] = ()
    # POST /v1/backup writes only under these folders (server/backup_dest.py)
    backup_roots: tuple[Path, ...] = field(default_factory=lambda: (Path.home(),))
    # retention's archive files: search and context reach them (memoryd.recall.archived)
    archive_dir: Path | None = None
    # local embeddings when on (memoryd.embed): search fuses the query's vector
    embed: Embedder | None = None
    # the services behind the other routes; a route whose service is None is not mounted
    # (server/app.py `route_table`, `needs`), so tests build an app with only what they test
    summaries: Summaries | None = None
    # POST /v1/sessions/{id}/summarize?to_memory=true: the summary through admission
    to_memory: ToMemory | None = None
    consolidator: Consolidator | None = None
    retention: Retention | None = None
    memory: MemoryFile | None = None
    context: ContextBuilder | None = None
    served: ServedLog | None = None
    queue: JobQueue | None = None
    forgetting: Forgetting | None = None
    web: WebDeps | None = None
    # POST /v1/eval: retrieval scored on the store's own history
    evaluator: Evaluator | None = None


SERVICES = web.AppKey("services", Services)


def need(service: T | None) -> T:
    """A service a mounted route relies on: `make_app` mounts a route only when the service
    it `needs` is there, so a handler never sees None."""
    assert service is not None
    return service
