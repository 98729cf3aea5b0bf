"""GET /v1/context/log: the context served to agents, newest last, and daily totals."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from memoryd.recall.served_log import ServedLog
from memoryd.server.openapi import EXTRA_ROUTES


class ServedQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str | None = Field(None, max_length=1024)
    agent: str | None = Field(None, max_length=100)
    last: int = Field(20, ge=1, le=1000)
    days: int = Field(7, ge=1, le=366)


_DOC = ("get", "/v1/context/log", "Context served to agents (time, agent, session, query, "
        "items with ids, tokens) and tokens served per day", None, ServedQuery, None)
if _DOC not in EXTRA_ROUTES:
    EXTRA_ROUTES.append(_DOC)


def routes(served: ServedLog) -> Callable[[web.Application], None]:
    async def get_log(request: web.Request) -> web.Response:
        q = ServedQuery.model_validate(dict(request.query))
        return web.json_response(await served.entries(session_id=q.session_id, agent=q.agent,
                                                      last=q.last, days=q.days))

    def add(app: web.Application) -> None:
        app.router.add_get("/v1/context/log", get_log)

    return add
