"""POST/GET /v1/context: the context block for an agent's next turn."""

from __future__ import annotations

from aiohttp import web

from memoryd.api import ContextRequest
from memoryd.http.json_io import json_reply, parse_body
from memoryd.http.services import SERVICES, need
from memoryd.server.middleware import via_tcp


async def respond(req: ContextRequest, request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    served = services.served
    pack = await need(services.context).build(req)
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
