"""POST/GET /v1/context: the context block for an agent's next turn."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from memoryd.api import ContextRequest
from memoryd.recall.context import ContextBuilder
from memoryd.recall.served_log import ServedLog
from memoryd.server.app import json_reply, parse_body, via_tcp
from memoryd.server.openapi import EXTRA_ROUTES

EXTRA_ROUTES.append(("post", "/v1/context", "What to remember now, within a token budget",
                     ContextRequest, None, None))
EXTRA_ROUTES.append(("get", "/v1/context", "The same, with query parameters (format=md: the "
                     "rendered block as text/markdown)", None, ContextRequest, None))


def routes(builder: ContextBuilder,
           served: ServedLog | None = None) -> Callable[[web.Application], None]:
    async def respond(req: ContextRequest, request: web.Request) -> web.Response:
        pack = await builder.build(req)
        if served is not None:
            await served.record(via=req.client or ("http" if via_tcp(request) else "socket"),
                                agent=req.agent, session_id=req.session_id, query=req.query,
                                budget_tokens=req.budget_tokens, pack=pack)
        if req.format == "md":
            return web.Response(text=pack["rendered"], content_type="text/markdown",
                                charset="utf-8")
        return json_reply(pack)

    async def post(request: web.Request) -> web.Response:
        return await respond(await parse_body(request, ContextRequest), request)

    async def get(request: web.Request) -> web.Response:
        return await respond(ContextRequest.model_validate(dict(request.query)), request)

    def add(app: web.Application) -> None:
        app.router.add_post("/v1/context", post)
        app.router.add_get("/v1/context", get)

    return add
