"""Every request's way through the application, as one middleware: the Host, Origin and
token checks, the body read within its deadline, the query limiter, the JSON error
envelope for what a handler raised, and the request's time in the metrics."""

from __future__ import annotations

import asyncio
import errno
import hmac
import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from memoryd.errors import BadRequestError, MemorydError, StorageFullError
from memoryd.http.json_io import MAX_BODY, error_body, json_reply, validation_error
from memoryd.http.limiter import QUERY_PATHS
from memoryd.http.services import Services

log = logging.getLogger(__name__)

BODY_TIMEOUT = 30.0  # a request body must arrive within this (slowloris)
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


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


