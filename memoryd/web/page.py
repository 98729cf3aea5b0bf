"""The guard every page goes through and the page's HTML: `page(fn)` checks the session
cookie, and Origin and the CSRF token on a state-changing request, and turns errors into an
HTML page; `render` fills a template with the security headers. The page modules import
these; web/routes.py mounts them."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from memoryd.errors import MemorydError
from memoryd.http.json_io import validation_error
from memoryd.web import auth
from memoryd.web.deps import WebDeps, web_deps

Page = Callable[[web.Request, WebDeps, auth.WebSession], Awaitable[web.StreamResponse]]


def render(request: web.Request, name: str, status: int = 200, **ctx: Any) -> web.Response:
    deps = web_deps(request)
    session = deps.access.session(request)
    assert deps.env is not None  # every handler awaits deps.ready() first
    html = deps.env.get_template(name).render(
        csrf=session.csrf if session else "", logged_in=session is not None,
        page_path=request.path, page_url=request.path_qs, **ctx)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8",
                        headers=auth.SECURITY_HEADERS)


def own_auth(fn: Callable[[web.Request], Awaitable[web.StreamResponse]]
             ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    fn.own_auth = True  # type: ignore[attr-defined]  # read by the API's token middleware
    return fn


def page(fn: Page) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    @functools.wraps(fn)
    async def guarded(request: web.Request) -> web.StreamResponse:
        deps = web_deps(request)
        await deps.ready()
        session = deps.access.session(request)
        if session is None:
            return render(request, "login.html", status=403)
        if request.method not in ("GET", "HEAD"):
            if not auth.same_origin(request):
                return render(request, "error.html", status=403, title="Forbidden",
                              message="this request did not come from this page (Origin)")
            if not await auth.csrf_ok(request, session):
                return render(request, "error.html", status=403, title="Forbidden",
                              message="missing or stale form token; reload the page")
        try:
            return await fn(request, deps, session)
        except ValidationError as e:
            err = validation_error(e)
            return render(request, "error.html", status=400, title="Bad request",
                          message=err.message)
        except MemorydError as e:
            return render(request, "error.html", status=e.status, title="Error",
                          message=e.message)

    return own_auth(guarded)
