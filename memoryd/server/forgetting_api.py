"""POST /v1/forget (by query, dry_run by default) and GET/POST /v1/exclusions."""

from __future__ import annotations

from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from memoryd.http.json_io import json_body
from memoryd.http.services import SERVICES, need


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


async def forget(request: web.Request) -> web.Response:
    req = ForgetRequest.model_validate(await json_body(request))
    service = need(request.app[SERVICES].forgetting)
    out = await service.forget(req.query, agent=req.agent, project=req.project,
                               dry_run=req.dry_run)
    if not req.dry_run and out["units"]:
        request.app[SERVICES].events.publish("forgotten", units=out["units"])
    return web.json_response(out)


async def list_exclusions(request: web.Request) -> web.Response:
    service = need(request.app[SERVICES].forgetting)
    return web.json_response({"exclusions": await service.exclusions()})


async def exclude(request: web.Request) -> web.Response:
    req = ExcludeRequest.model_validate(await json_body(request))
    service = need(request.app[SERVICES].forgetting)
    return web.json_response(await service.exclude(req.kind, req.value, purge=req.purge))
