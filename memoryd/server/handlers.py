"""Thin handlers: parse, call one service function, serialize."""

from __future__ import annotations

from aiohttp import web

from memoryd import search as search_service
from memoryd.api import SearchRequest, SessionsQuery
from memoryd.server.app import SERVICES, json_body
from memoryd.store.sessions import list_sessions as list_sessions_sql


async def health(request: web.Request) -> web.Response:
    s = request.app[SERVICES]
    return web.json_response({"status": "ok", "version": s.version, "api": 1})


async def status(request: web.Request) -> web.Response:
    return web.json_response(await request.app[SERVICES].status())


async def list_sessions(request: web.Request) -> web.Response:
    q = SessionsQuery.model_validate(dict(request.query))
    rows = await request.app[SERVICES].store.read(
        lambda c: list_sessions_sql(c, agent=q.agent, project=q.project, limit=q.limit))
    return web.json_response({"sessions": rows})


async def search(request: web.Request) -> web.Response:
    req = SearchRequest.model_validate(await json_body(request))
    resp = await search_service.search(request.app[SERVICES].store, req)
    return web.json_response(resp.model_dump())
