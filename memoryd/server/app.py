"""The aiohttp application: routes, typed app keys, error and Host-check middlewares.
One application is served on both the Unix socket and loopback TCP."""

from __future__ import annotations

import asyncio
import errno
import hmac
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from memoryd.api import IngestRequest, IngestResponse
from memoryd.errors import BadRequestError, MemorydError, StorageFullError
from memoryd.events import EventBus
from memoryd.server.metrics import Metrics
from memoryd.server.limiter import QUERY_PATHS, QueryLimiter
from memoryd.store import Store

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20
BODY_TIMEOUT = 30.0  # a request body must arrive within this (slowloris)
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


M = TypeVar("M", bound=BaseModel)
JobFn = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
RouteAdder = Callable[[web.Application], None]


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


SERVICES = web.AppKey("services", Services)


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if field:
        err["field"] = field
    return {"error": err}


def validation_error(e: ValidationError) -> BadRequestError:
    err = e.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or None
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    return BadRequestError(f"{field}: {msg}" if field else msg, field=field)


def disk_full(e: BaseException) -> bool:
    """ENOSPC/EDQUOT from the OS, or SQLite's own "database or disk is full"."""
    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(e, sqlite3.Error):
        return getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    return False


def error_response(request: web.Request, e: BaseException) -> web.Response:
    """The JSON error envelope for what a handler (or the body's read, or the router)
    raised; HTTP redirects (status < 400) are raised again."""
    if isinstance(e, ValidationError):
        err = validation_error(e)
        return json_reply(error_body(err.code, err.message, err.field), status=400)
    if isinstance(e, MemorydError):
        if e.status >= 500 and not getattr(e, "quiet", False):
            log.error("request %s %s failed", request.method, request.path, exc_info=e)
        return json_reply(error_body(e.code, e.message, e.field), status=e.status)
    if isinstance(e, web.HTTPException):
        if e.status < 400:
            raise e
        code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(
            e.status, "http_error")
        return json_reply(error_body(code, e.reason), status=e.status)
    if disk_full(e):
        log.error("request %s %s failed: the disk is full (%s)", request.method,
                  request.path, e)
        err = StorageFullError(f"the disk is full ({e}); nothing was changed, retry once "
                               "space is freed")
        return json_reply(error_body(err.code, err.message), status=err.status)
    log.error("request %s %s failed", request.method, request.path, exc_info=e)
    return json_reply(error_body("internal", "internal error (see the daemon log)"),
                      status=500)


def json_reply(data: Any, status: int = 200) -> web.Response:
    """A JSON response encoded by pydantic's serializer (pydantic_core, in Rust): a
    fraction of `json.dumps`' time for a context pack or a page of results."""
    return web.Response(body=to_json(data), status=status, content_type="application/json",
                        charset="utf-8")


def model_reply(model: BaseModel) -> web.Response:
    """A response model's JSON, the bytes `model_dump_json()` gives, without its decode to
    `str` and aiohttp's encode back (a search's 9 KB: ~10 µs of the loop's time)."""
    return web.Response(body=model.__pydantic_serializer__.to_json(model), status=200,
                        content_type="application/json", charset="utf-8")


def via_tcp(request: web.Request) -> bool:
    """From the peer's address aiohttp already read for the connection (a Unix socket's is
    a `str`, or `bytes` for an abstract name): asking the transport for the socket's own
    name makes uvloop build a socket object (3-4 system calls) on every request. An
    address that could not be read counts as TCP, so the token is asked for."""
    return not isinstance(request.protocol.peername, (str, bytes))


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def refusal(request: web.Request, expected: bytes | None) -> web.Response | None:
    """403 for a Host that is not a loopback name (a web page cannot reach the API
    through DNS rebinding), and for a request that changes something sent by a page of
    another origin (a browser names it in Origin; memoryctl and curl send none); 401 for a
    TCP request without the bearer token (the Unix socket's 0600 mode is its access
    control). None: the request may go on."""
    host = (request.headers.get("Host") or "localhost").lower()
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if name not in LOOPBACK_HOSTS:
        return json_reply(error_body("forbidden_host", f"Host {host!r} is not allowed"),
                          status=403)
    # the web page's handlers check their own session cookie and Origin, and answer a page
    # (memoryd.web.auth); `own_auth` marks them
    own_auth = getattr(request.match_info.handler, "own_auth", False)
    origin = request.headers.get("Origin")
    if origin is not None and request.method not in SAFE_METHODS and not own_auth \
            and origin.lower() not in (f"http://{host}", f"https://{host}"):
        return json_reply(error_body("forbidden_origin", f"a {request.method} from Origin "
                                     f"{origin!r} is not allowed", "Origin"), status=403)
    if expected is not None and via_tcp(request) and not own_auth:
        got = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(got, expected):
            return json_reply(
                error_body("unauthorized", "TCP requests need 'Authorization: Bearer <token>'"
                           " (the token file is in the state dir; memoryctl reads it)"),
                status=401)
    return None


async def read_body(request: web.Request, timeout: float) -> web.Response | None:
    """Read a request's body, with a deadline, before its handler runs: a client that
    sends headers and then the body a byte a minute (or never) gets a 408 and the
    connection is closed. Handlers' reads then return the buffered body. A body that
    came whole with the headers (every small request) is taken without a timer."""
    if (request.content_length or 0) > MAX_BODY:
        raise BadRequestError(f"body over {MAX_BODY} bytes", field="body")
    try:
        if request.content.is_eof():
            await request.read()
            return None
        async with asyncio.timeout(timeout):
            await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BadRequestError(f"body over {MAX_BODY} bytes", field="body") from None
    except TimeoutError:
        resp = json_reply(error_body(
            "request_timeout", f"the request body did not arrive within {timeout:g}s",
            "body"), status=408)
        resp.force_close()
        return resp
    return None


def request_middleware(services: Services, body_timeout: float) -> Callable[..., Any]:
    """Every request's way through, as one middleware: its time and status into the
    metrics; a Host that is not loopback refused (403), a TCP request without the token
    (401); the body read within its deadline (408); search and context through the
    query limiter (503 when saturated); anything raised as the JSON error envelope.
    One function instead of a chain of six: each link of aiohttp's chain is another
    coroutine and partial per request, on the loop (bench/loop_cpu.py)."""
    metrics, limiter = services.metrics, services.limiter
    expected = f"Bearer {services.token}".encode() if services.token else None

    @web.middleware
    async def handle(request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
        t0 = time.perf_counter()
        status = 500
        try:
            resp = refusal(request, expected)
            if resp is None:
                try:
                    if request.body_exists:
                        resp = await read_body(request, body_timeout)
                    if resp is None:
                        if request.path.startswith(QUERY_PATHS):
                            resp = await limiter.run(handler, request)
                        else:
                            resp = await handler(request)
                except Exception as e:
                    resp = error_response(request, e)
            status = resp.status
            return resp
        except web.HTTPException as e:  # a redirect
            status = e.status
            raise
        finally:
            metrics.observe_request(request, status, time.perf_counter() - t0)

    return handle


async def parse_body(request: web.Request, model: type[M]) -> M:
    """The body as `model`, parsed and validated in one pass by pydantic's JSON parser (the
    answer is the same as `model.model_validate(json.loads(body))`: JSON gives no value its
    Python mode would take otherwise). Anything it refuses, an empty body included, goes
    the long way, whose errors are the API's."""
    if request.content_length is None or request.content_length <= MAX_BODY:
        raw = await request.read()
        try:
            return model.model_validate_json(raw)
        except ValidationError:
            pass
    return model.model_validate(await json_body(request))


async def json_body(request: web.Request) -> dict[str, Any]:
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise BadRequestError(f"body over {MAX_BODY} bytes", field="body")
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequestError(f"malformed JSON: {e}", field="body") from None
    if not isinstance(data, dict):
        raise BadRequestError("the body must be a JSON object", field="body")
    return data


def make_app(services: Services, extra_routes: Sequence[RouteAdder] = (), *,
             body_timeout: float = BODY_TIMEOUT) -> web.Application:
    """The application; `extra_routes` lets each service module (memory, summaries, ...)
    add its own routes, keeping this table and handlers.py small."""
    from memoryd.server import handlers, sessions_api

    app = web.Application(
        # the body is read before a query takes a slot: a half-sent request must not
        # hold one of the few query slots for the whole body timeout
        middlewares=[request_middleware(services, body_timeout)],
        client_max_size=MAX_BODY)
    app[SERVICES] = services
    app.router.add_get("/v1/health", handlers.health)
    app.router.add_get("/v1/status", handlers.status)
    app.router.add_post("/v1/search", handlers.search)
    app.router.add_post("/v1/ingest", handlers.ingest)
    app.router.add_post("/v1/backup", handlers.backup)
    app.router.add_get("/v1/jobs", handlers.list_jobs)
    app.router.add_post("/v1/jobs/{name}/run", handlers.run_job)
    app.router.add_get("/v1/events", handlers.events)
    app.router.add_get("/v1/openapi.json", handlers.openapi)
    app.router.add_get("/metrics", handlers.metrics)
    for add in extra_routes:
        add(app)
    sessions_api.add_routes(app)  # last: its {id:.+} patterns are greedy
    return app
