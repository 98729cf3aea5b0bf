"""The web page's routes: the login link, logout, the live events, the static files, the API
route that mints login links (`POST /v1/web/login`), and ROUTES, the page's rows of the
app's one table (the daemon hands them to server/app.py's `route_table`, which puts them
in their one place: the server never imports the page)."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from memoryd.errors import MemorydError, NotFoundError
from memoryd.http.route import Route
from memoryd.http.services import SERVICES
from memoryd.web import auth, memory_pages, pages, served_page, session_page, timeline
from memoryd.web.deps import web_deps
from memoryd.web.page import own_auth, page, render


@own_auth
async def login(request: web.Request) -> web.StreamResponse:
    deps = web_deps(request)
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
    deps = web_deps(request)
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
    deps = web_deps(request)
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
    await web_deps(request).ready()
    got = web_deps(request).static.get(request.match_info["name"])
    if got is None:
        raise NotFoundError("no such file")
    body, ctype = got
    return web.Response(body=body, content_type=ctype,
                        headers={"Cache-Control": "max-age=3600",
                                 "X-Content-Type-Options": "nosniff"})


async def mint_login(request: web.Request) -> web.Response:
    """The API side (bearer token on TCP, socket mode on Unix): a one-time link."""
    deps = web_deps(request)
    port = deps.tcp_port()
    if port is None:
        raise MemorydError("the web page needs the TCP site (server.tcp_enabled = true)")
    token = deps.access.mint_link()
    return web.json_response({"url": f"http://127.0.0.1:{port}/login?token={token}",
                              "expires_in_s": int(auth.LINK_TTL_S)})



ROUTES: tuple[Route, ...] = (
    Route("post", "/v1/web/login", mint_login, "A one-time login link for the web page "
          "(valid two minutes; `memoryctl open` prints it)", needs="web"),
    Route("get", "/login", login, needs="web"),
    Route("post", "/logout", logout, needs="web"),
    Route("get", "/static/{name}", static, needs="web"),
    Route("get", "/live", live, needs="web"),
    Route("get", "/", page(pages.overview), needs="web"),
    Route("get", "/search", page(pages.search), needs="web"),
    Route("get", "/sessions", page(pages.sessions), needs="web"),
    Route("get", r"/sessions/{id:.+}/export", page(pages.export), needs="web"),
    Route("get", r"/sessions/{id:.+}/forget", page(pages.forget_confirm), needs="web"),
    Route("post", r"/sessions/{id:.+}/forget", page(pages.forget), needs="web"),
    Route("post", r"/sessions/{id:.+}/summarize", page(pages.summarize), needs="web"),
    Route("get", r"/sessions/{id:.+}/units/{unit:\d+}", page(session_page.unit_text),
          needs="web"),
    Route("get", r"/sessions/{id:.+}", page(session_page.session), needs="web"),
    Route("get", "/timeline", page(timeline.timeline), needs="web"),
    Route("get", "/memory", page(memory_pages.memory), needs="web"),
    Route("post", "/memory/add", page(memory_pages.add), needs="web"),
    Route("post", "/memory/edit", page(memory_pages.edit), needs="web"),
    Route("post", "/memory/delete", page(memory_pages.delete), needs="web"),
    Route("get", "/context", page(memory_pages.context), needs="web"),
    Route("get", "/served", page(served_page.served), needs="web"),
)
