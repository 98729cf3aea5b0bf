"""Routing and the guard every page goes through: session cookie, Origin and CSRF on
state-changing requests, HTML errors, security headers. Also the login link, the
static files and the API route that mints login links (`POST /v1/web/login`)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import ValidationError

from memoryd.errors import MemorydError, NotFoundError
from memoryd.server import openapi
from memoryd.server.app import SERVICES, validation_error
from memoryd.web import auth

if TYPE_CHECKING:
    import jinja2

    from memoryd.recall.context import ContextBuilder
    from memoryd.memory import MemoryFile
    from memoryd.summarize.service import Summaries


@dataclass
class WebDeps:
    summaries: Summaries
    memory: MemoryFile
    context: ContextBuilder
    memory_dir: Path
    tcp_port: Callable[[], int | None]
    access: auth.Access = field(default_factory=auth.Access)
    # templates and static files load on the first request (in a thread), so the page
    # costs the daemon's start nothing
    env: jinja2.Environment | None = None
    static: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    _loading: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def ready(self) -> None:
        if self.env is not None:
            return
        async with self._loading:
            if self.env is None:
                await asyncio.to_thread(_load, self)


WEB = web.AppKey("web", WebDeps)
Page = Callable[[web.Request, WebDeps, auth.WebSession], Awaitable[web.StreamResponse]]
STATIC = {"htmx.min.js": "application/javascript", "style.css": "text/css",
          "htmx.LICENSE": "text/plain", "live.js": "application/javascript"}
TEMPLATES = ("base.html", "macros.html", "login.html", "error.html", "overview.html", "search.html",
             "sessions.html", "session.html", "forget.html", "memory.html", "context.html",
             "served.html", "timeline.html")

openapi.EXTRA_ROUTES.append(("post", "/v1/web/login", "A one-time login link for the web page "
                             "(valid two minutes; `memoryctl open` prints it)", None, None, None))


def render(request: web.Request, name: str, status: int = 200, **ctx: Any) -> web.Response:
    deps = request.app[WEB]
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
        deps = request.app[WEB]
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


@own_auth
async def login(request: web.Request) -> web.StreamResponse:
    deps = request.app[WEB]
    await deps.ready()
    sid = deps.access.redeem(request.query.get("token", ""))
    if sid is None:
        return render(request, "login.html", status=403, expired=True)
    # a page, not a redirect: a SameSite=Strict cookie set on a navigation from elsewhere
    # is only sent once the browser moves on from a page of our own
    resp = render(request, "login.html", status=200, welcome=True)
    auth.set_cookie(resp, sid)
    return resp


@own_auth
async def logout(request: web.Request) -> web.StreamResponse:
    deps = request.app[WEB]
    await deps.ready()
    session = deps.access.session(request)
    # a logout is a change like any other: from another site's page (a cross-site logout)
    # or without the page's form token, it is refused and the cookie kept
    if not auth.same_origin(request):
        return render(request, "error.html", status=403, title="Forbidden",
                      message="this request did not come from this page (Origin)")
    if session is not None:
        if not await auth.csrf_ok(request, session):
            return render(request, "error.html", status=403, title="Forbidden",
                          message="missing or stale form token; reload the page")
        deps.access.logout(request)
    resp = render(request, "login.html", status=200, logged_out=True)
    resp.del_cookie(auth.COOKIE, path="/")
    return resp


# what the page follows: which kinds of activity, and which of their fields
LIVE_EVENTS = {"ingested": ("agent", "units", "path"), "summary_updated": (),
               "job_done": ("job",), "job_finished": ("job",), "memory_changed": (),
               "session_forgotten": (), "forgotten": ()}
LIVE_HEARTBEAT_S = 15.0


@own_auth
async def live(request: web.Request) -> web.StreamResponse:
    """The page's server-sent events (static/live.js): the daemon's activity as
    `/v1/events` publishes it, for the page's cookie (a browser cannot send the API's
    token), each event cut to the fields the page uses. Ends when the session does."""
    deps = request.app[WEB]
    await deps.ready()
    if deps.access.session(request) is None:
        return render(request, "login.html", status=403)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-store",
                                       "X-Content-Type-Options": "nosniff"})
    await resp.prepare(request)
    try:
        async with request.app[SERVICES].events.subscribe() as queue:
            await resp.write(b": connected\n\n")
            while deps.access.session(request) is not None:
                try:
                    ev = await asyncio.wait_for(queue.get(), LIVE_HEARTBEAT_S)
                except TimeoutError:
                    await resp.write(b": heartbeat\n\n")
                    continue
                fields = LIVE_EVENTS.get(ev["event"])
                if fields is None:
                    continue
                data = {"event": ev["event"], **{k: ev.get(k) for k in fields}}
                body = json.dumps(data, ensure_ascii=False)
                await resp.write(f"event: activity\ndata: {body}\n\n".encode())
    except ConnectionResetError:
        pass  # the page went away: nothing to say
    return resp


@own_auth
async def static(request: web.Request) -> web.StreamResponse:
    await request.app[WEB].ready()
    got = request.app[WEB].static.get(request.match_info["name"])
    if got is None:
        raise NotFoundError("no such file")
    body, ctype = got
    return web.Response(body=body, content_type=ctype,
                        headers={"Cache-Control": "max-age=3600",
                                 "X-Content-Type-Options": "nosniff"})


async def mint_login(request: web.Request) -> web.Response:
    """The API side (bearer token on TCP, socket mode on Unix): a one-time link."""
    deps = request.app[WEB]
    port = deps.tcp_port()
    if port is None:
        raise MemorydError("the web page needs the TCP site (server.tcp_enabled = true)")
    token = deps.access.mint_link()
    return web.json_response({"url": f"http://127.0.0.1:{port}/login?token={token}",
                              "expires_in_s": int(auth.LINK_TTL_S)})


def _load(deps: WebDeps) -> None:
    from memoryd.web.render import make_env  # jinja2: imported by the first visit only

    base = resources.files("memoryd.web") / "static"
    for name, ctype in STATIC.items():
        deps.static[name] = ((base / name).read_bytes(), ctype)
    env = make_env()
    for name in TEMPLATES:
        env.get_template(name)  # parse now, not on the loop at the first visit
    deps.env = env


def routes(deps: WebDeps) -> Callable[[web.Application], None]:
    from memoryd.web import memory_pages, pages, served_page, session_page, timeline

    def add(app: web.Application) -> None:
        app[WEB] = deps
        r = app.router
        r.add_post("/v1/web/login", mint_login)
        r.add_get("/login", login)
        r.add_post("/logout", logout)
        r.add_get("/static/{name}", static)
        r.add_get("/live", live)
        r.add_get("/", page(pages.overview))
        r.add_get("/search", page(pages.search))
        r.add_get("/sessions", page(pages.sessions))
        r.add_get(r"/sessions/{id:.+}/export", page(pages.export))
        r.add_get(r"/sessions/{id:.+}/forget", page(pages.forget_confirm))
        r.add_post(r"/sessions/{id:.+}/forget", page(pages.forget))
        r.add_post(r"/sessions/{id:.+}/summarize", page(pages.summarize))
        r.add_get(r"/sessions/{id:.+}/units/{unit:\d+}", page(session_page.unit_text))
        r.add_get(r"/sessions/{id:.+}", page(session_page.session))
        r.add_get("/timeline", page(timeline.timeline))
        r.add_get("/memory", page(memory_pages.memory))
        r.add_post("/memory/add", page(memory_pages.add))
        r.add_post("/memory/edit", page(memory_pages.edit))
        r.add_post("/memory/delete", page(memory_pages.delete))
        r.add_get("/context", page(memory_pages.context))
        r.add_get("/served", page(served_page.served))

    return add


def services(request: web.Request) -> Any:
    return request.app[SERVICES]
