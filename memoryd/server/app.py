"""The aiohttp application: the one table of the HTTP surface (every route, its handler and
what its OpenAPI entry says), the OpenAPI document built from it, and `make_app`, which
mounts the table over the services the daemon hands it. One application is served on both
the Unix socket and loopback TCP.

The web page's rows (memoryd.web.routes) sit in the table too, but the web page stands on
the server, not the other way round: `route_table(pages)` puts the rows it is given in
their one place, before the greedy session paths, and the daemon hands it the page's.
`ROUTES` is the API's table alone (tests of the routes without the page)."""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from memoryd import api
from memoryd.http.json_io import MAX_BODY
from memoryd.http.route import Route
from memoryd.http.services import SERVICES, Services
from memoryd.server import (
    consolidate_api,
    context_api,
    eval_api,
    export_api,
    forgetting_api,
    handlers,
    jobs_api,
    memory_api,
    served_api,
    sessions_api,
    summaries_api,
)
from memoryd.server.middleware import BODY_TIMEOUT, request_middleware
from memoryd.server.openapi import document

# the table the application was made from: its OpenAPI document is built from it
TABLE = web.AppKey("route_table", tuple[Route, ...])


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(document(request.app[TABLE], request.app[SERVICES].version))


ma, sa, ca = memory_api, summaries_api, consolidate_api

# In the router's order: a more specific pattern before a greedy one (`{id:.+}`).
_API: tuple[Route, ...] = (
    Route("get", "/v1/health", handlers.health, "Liveness and version",
          response=api.Health),
    Route("get", "/v1/status", handlers.status, "What is watched, read, queued "
          "(format=text: as memoryctl prints it)", query=api.StatusQuery),
    Route("post", "/v1/search", handlers.search, "Full-text search over units",
          body=api.SearchRequest, response=api.SearchResponse),
    Route("post", "/v1/ingest", handlers.ingest, "Backfill a file or folder now",
          body=api.IngestRequest, response=api.IngestResponse),
    Route("post", "/v1/backup", handlers.backup, "A consistent copy of the database "
          "(VACUUM INTO)", body=api.BackupRequest, response=api.BackupResponse),
    Route("get", "/v1/jobs", handlers.list_jobs, "Jobs that can be run"),
    Route("post", "/v1/jobs/{name}/run", handlers.run_job, "Run a job now",
          response=api.JobResponse),
    Route("get", "/v1/events", handlers.events, "Server-sent events of activity"),
    Route("get", "/v1/openapi.json", openapi),
    Route("get", "/metrics", handlers.metrics, "Prometheus metrics"),
    # summaries: before the greedy /v1/sessions/{id:.+}
    Route("get", "/v1/sessions/{id:.+}/summary", sa.get_summary, "A session's rolling "
          "summary and the messages after it", query=sa.SummaryQuery,
          response=sa.SessionSummary, needs="summaries"),
    Route("post", "/v1/sessions/{id:.+}/summarize", sa.summarize, "Summarize a session now "
          "(202 and a job id; with wait=true, 200 and the summary)", query=sa.SummarizeQuery,
          response=sa.SessionSummary, needs="summaries"),
    # consolidation and retention
    Route("get", "/v1/memory/why/{line}", ca.why, "Where a MEMORY.md entry came from "
          "(provenance)", needs="consolidator"),
    Route("get", "/v1/daily", ca.list_daily, "The daily notes (dates)", needs="consolidator"),
    Route("get", "/v1/daily/{date}", ca.read_daily, "One daily note", needs="consolidator"),
    Route("get", "/v1/archive", ca.archive_list, "Archive files and the sessions in them",
          needs="retention"),
    Route("post", "/v1/archive/search", ca.archive_search, "Search archived units",
          body=ca.ArchiveSearch, needs="retention"),
    Route("post", "/v1/archive/restore", ca.archive_restore, "Move a session's archived "
          "units back into the store", body=ca.ArchiveRestore, needs="retention"),
    # MEMORY.md
    Route("get", "/v1/memory", ma.read, "MEMORY.md: its content, version and parsed entries",
          response=ma.MemoryOut, needs="memory"),
    Route("put", "/v1/memory", ma.replace, "Replace MEMORY.md (validated; `version` to "
          "compare-and-swap)", body=ma.MemoryReplace, response=ma.WriteOut, needs="memory"),
    Route("post", "/v1/memory/entries", ma.add_entry, "Add an entry dated today (201; 200 "
          "if a duplicate)", body=ma.MemoryAdd, response=ma.AddOut, needs="memory"),
    Route("post", "/v1/memory/entries/delete", ma.delete_entries, "Delete entry lines",
          body=ma.MemoryDelete, response=ma.WriteOut, needs="memory"),
    Route("get", "/v1/memory/recent", ma.recent, "The newest entries",
          query=ma.MemoryRecentQuery, response=ma.RecentOut, needs="memory"),
    Route("get", "/v1/memory/stats", ma.stats, "Entries per source, first and last date",
          response=ma.StatsOut, needs="memory"),
    Route("post", "/v1/memory/search", ma.search, "Keyword search over entries",
          body=ma.MemorySearch, response=ma.SearchOut, needs="memory"),
    # context, and what was served
    Route("post", "/v1/context", context_api.post, "What to remember now, within a token "
          "budget", body=api.ContextRequest, needs="context"),
    Route("get", "/v1/context", context_api.get, "The same, with query parameters "
          "(format=md: the rendered block as text/markdown)", query=api.ContextRequest,
          needs="context"),
    Route("get", "/v1/context/log", served_api.get_log, "Context served to agents (time, "
          "agent, session, query, items with ids, tokens) and tokens served per day",
          query=served_api.ServedQuery, needs="served"),
    # the job queue
    Route("get", "/v1/jobs/queue", jobs_api.list_queue, "Pending, running, failed (and "
          "latest done) jobs with reasons", query=jobs_api.QueueQuery, needs="queue"),
    Route("get", r"/v1/jobs/{id:\d+}", jobs_api.one_job_safe, "One job; wait=true returns "
          "once it is done or failed", query=jobs_api.JobQuery, needs="queue"),
    # forgetting
    Route("post", "/v1/forget", forgetting_api.forget, "Delete every stored turn matching "
          "all the query's words (dry_run, the default, only says what would go)",
          body=forgetting_api.ForgetRequest, needs="forgetting"),
    Route("get", "/v1/exclusions", forgetting_api.list_exclusions, "Paths and projects "
          "excluded from memory", needs="forgetting"),
    Route("post", "/v1/exclusions", forgetting_api.exclude, "Stop reading a path or "
          "project; purge deletes what was stored from it",
          body=forgetting_api.ExcludeRequest, needs="forgetting"),
    Route("post", "/v1/eval", eval_api.evaluate, "Score retrieval on this store's own "
          "history: probes from sampled turns, R@1/5/10 and NDCG@10, lexical and with "
          "vectors, the misses and suggestions (dry_run: an estimate of its time)",
          body=api.EvalRequest, response=api.EvalResponse, needs="evaluator"),
    Route("get", "/v1/export", export_api.export, "Sessions as Markdown or JSONL (by "
          "session, project, agent, since)", query=export_api.ExportQuery),
)
# last: session ids may contain '/' (sub-agents, nanobot paths), so these match greedily
_SESSIONS: tuple[Route, ...] = (
    Route("get", "/v1/sessions", sessions_api.list_sessions, "Sessions, newest first "
          "(keyset paging)", query=api.SessionsQuery, response=api.SessionsPage),
    Route("get", "/v1/sessions/{id:.+}/messages", sessions_api.session_messages,
          "A session's messages after a sequence number", query=api.MessagesQuery,
          response=api.MessagesPage),
    Route("get", "/v1/sessions/{id:.+}", sessions_api.show_session, "One session",
          query=api.SessionRef, response=api.SessionDetail),
    Route("delete", "/v1/sessions/{id:.+}", sessions_api.forget_session,
          "Forget a session everywhere", query=api.SessionRef, response=api.Forgotten),
)


def route_table(pages: Sequence[Route] = ()) -> tuple[Route, ...]:
    """The one table: the API's rows, then `pages` (the web page's, with its API route
    POST /v1/web/login), then the greedy session paths."""
    return (*_API, *pages, *_SESSIONS)


ROUTES = route_table()


def make_app(services: Services, routes: Sequence[Route] = ROUTES, *,
             body_timeout: float = BODY_TIMEOUT) -> web.Application:
    """The application over `services`: every route of `routes` whose service is there."""
    app = web.Application(
        # the body is read before a query takes a slot: a half-sent request must not
        # hold one of the few query slots for the whole body timeout
        middlewares=[request_middleware(services, body_timeout)],
        client_max_size=MAX_BODY)
    app[SERVICES] = services
    app[TABLE] = tuple(routes)
    for route in routes:
        if route.needs is None or getattr(services, route.needs) is not None:
            route.mount(app)
    return app
