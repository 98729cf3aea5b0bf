"""GET /v1/context/log: the context served to agents, newest last, and daily totals."""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from memoryd.http.services import SERVICES, need


class ServedQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str | None = Field(None, max_length=1024)
    agent: str | None = Field(None, max_length=100)
    last: int = Field(20, ge=1, le=1000)
    days: int = Field(7, ge=1, le=366)


async def get_log(request: web.Request) -> web.Response:
    served = need(request.app[SERVICES].served)
    q = ServedQuery.model_validate(dict(request.query))
    return web.json_response(await served.entries(session_id=q.session_id, agent=q.agent,
                                                  last=q.last, days=q.days))
