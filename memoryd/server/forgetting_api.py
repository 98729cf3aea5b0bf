"""POST /v1/forget (by query, dry_run by default) and GET/POST /v1/exclusions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from memoryd.consolidate.forgetting import Forgetting
from memoryd.server.app import SERVICES, json_body
from memoryd.server.openapi import EXTRA_ROUTES


class ForgetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=4000)
    agent: str | None = Field(None, max_length=100)
    project: str | None = Field(None, max_length=4096)
    dry_run: bool = True


class ExcludeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["path", "project"] = "path"
    value: str = Field(min_length=1, max_length=4096)
    purge: bool = False


_DOCS = [
    ("post", "/v1/forget", "Delete every stored turn matching all the query's words "
     "(dry_run, the default, only says what would go)", ForgetRequest, None, None),
    ("get", "/v1/exclusions", "Paths and projects excluded from memory", None, None, None),
    ("post", "/v1/exclusions", "Stop reading a path or project; purge deletes what was "
     "stored from it", ExcludeRequest, None, None),
]
EXTRA_ROUTES.extend(r for r in _DOCS if r not in EXTRA_ROUTES)


def routes(service: Forgetting) -> Callable[[web.Application], None]:
    async def forget(request: web.Request) -> web.Response:
        req = ForgetRequest.model_validate(await json_body(request))
        out = await service.forget(req.query, agent=req.agent, project=req.project,
                                   dry_run=req.dry_run)
        if not req.dry_run and out["units"]:
            request.app[SERVICES].events.publish("forgotten", units=out["units"])
        return web.json_response(out)

    async def list_exclusions(request: web.Request) -> web.Response:
        return web.json_response({"exclusions": await service.exclusions()})

    async def exclude(request: web.Request) -> web.Response:
        req = ExcludeRequest.model_validate(await json_body(request))
        return web.json_response(await service.exclude(req.kind, req.value, purge=req.purge))

    def add(app: web.Application) -> None:
        app.router.add_post("/v1/forget", forget)
        app.router.add_get("/v1/exclusions", list_exclusions)
        app.router.add_post("/v1/exclusions", exclude)

    return add
