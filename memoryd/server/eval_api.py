"""POST /v1/eval: retrieval scored on this store's own history (`memoryd.recall.evaluate`)."""

from __future__ import annotations

from aiohttp import web

from memoryd.api import EvalRequest
from memoryd.http.json_io import model_reply, parse_body
from memoryd.http.services import SERVICES, need


async def evaluate(request: web.Request) -> web.Response:
    req = await parse_body(request, EvalRequest)
    services = request.app[SERVICES]
    return model_reply(await need(services.evaluator).run(req, services.embed))
